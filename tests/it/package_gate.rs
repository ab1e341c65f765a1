//! `rcclfix package`'s gates, before anything is written: the export gate against the stock
//! library and consumers (names, SONAME, NEEDED), build folders that are not one, the manifest
//! schema, an interrupted run, and a library whose own scan is not clean whatever its manifest
//! says. Fixtures and helpers: `package.rs`.

use std::path::Path;
use std::process::Command;

use rcclfix::manifest::Manifest;

use crate::package::*;

/// Run the gate with `args` on a build folder around `lib`; expect exit 1, nothing written, and
/// every string of `expect` on stderr. Returns stderr.
pub(crate) fn check_gate_fails(lib: &Path, args: &[&str], expect: &[&str]) -> String {
    let (_t, dir) = build_folder(lib);
    let out_dir = dir.parent().unwrap().join("pkgs");
    let before = files_in(&dir);
    let o = run(rcclfix(&["package", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(if args.contains(&"--stock") {
            &[][..]
        } else {
            &["--no-stock"][..]
        })
        .args(args));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected exit 1 (check failed); stderr:\n{stderr}"
    );
    assert!(o.stdout.is_empty(), "stdout must stay empty on failure");
    for e in expect {
        assert!(stderr.contains(e), "stderr lacks {e:?}:\n{stderr}");
    }
    assert_eq!(
        files_in(&out_dir),
        Vec::<String>::new(),
        "a failed gate wrote something"
    );
    assert_eq!(files_in(&dir), before);
    stderr
}

#[test]
fn gate_fails_naming_symbols_a_consumer_imports() {
    let f = fixtures();
    let consumer = f.consumer.to_str().unwrap();
    let stderr = check_gate_fails(
        &f.old,
        &["--consumer", consumer],
        &[
            "missing export ncclCommShrink, needed by consumer",
            // The C++-mangled import, named raw and demangled, and the near miss explained.
            "missing export _Z12ncclCommDumpP8ncclCommRSt13unordered_map",
            "(ncclCommDump(ncclComm*, std::unordered_map<",
            "ours exports ncclCommDump with another signature: ncclCommDump(ncclComm*)",
        ],
    );
    // Exactly those two are missing.
    assert_eq!(stderr.matches("missing export").count(), 2, "{stderr}");
}

#[test]
fn gate_fails_naming_symbols_the_stock_library_exports() {
    let f = fixtures();
    let stderr = check_gate_fails(
        &f.old,
        &["--stock", f.stock.to_str().unwrap()],
        &[
            "missing export ncclCommShrink, needed by stock",
            "missing export pncclCommShrink, needed by stock",
        ],
    );
    assert!(
        !stderr.contains("rcclfix_fixture_internal_helper"),
        "non-API symbols are not gated:\n{stderr}"
    );
}

#[test]
fn gate_builtin_torch_list_matches_by_base_name() {
    let f = fixtures();
    let stderr = check_gate_fails(
        &f.old,
        &["--consumer-symbols", "torch-2.11"],
        &["missing export ncclCommShrink, needed by torch-2.11"],
    );
    // The list holds base names: the old fixture's ncclCommDump (other signature) satisfies it.
    assert_eq!(stderr.matches("missing export").count(), 1, "{stderr}");
}

#[test]
fn gate_fails_on_wrong_soname() {
    let f = fixtures();
    check_gate_fails(
        &f.bad_soname,
        &[],
        &["SONAME is librccl.so.2, expected librccl.so.1"],
    );
}

#[test]
fn gate_reports_needed_differences_and_the_rocm_smi_trap() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.with_smi);
    let out = dir.parent().unwrap().join("pkgs");
    let o = run(rcclfix(&["package", "--format", "whl", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out)
        .arg("--stock")
        .arg(&f.stock));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "DT_NEEDED differs from the stock library: added [librocm_smi64.so.1], removed []"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("NEEDED librocm_smi64.so.1, which the stock library does not need"),
        "{stderr}"
    );
    assert!(stderr.contains("ROCm/TheRock#4476"), "{stderr}");
}

#[test]
fn bad_build_folders_are_one_clear_error() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.ours);
    let out = dir.parent().unwrap().join("pkgs");
    // The library changed after the build (same size, one byte flipped).
    let mut bytes = std::fs::read(dir.join("librccl.so.1.0")).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(dir.join("librccl.so.1.0"), &bytes).unwrap();
    let o = run(rcclfix(&["package", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out)
        .arg("--no-stock"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("librccl.so.1.0: sha256") && stderr.contains("differs from"),
        "{stderr}"
    );
    // A broken manifest.
    std::fs::write(dir.join("manifest.json"), b"{").unwrap();
    let o = run(rcclfix(&["package", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out)
        .arg("--no-stock"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("manifest.json: not a valid rcclfix manifest"),
        "{stderr}"
    );
    // Not a build folder at all.
    let o = run(rcclfix(&["package", "--from"])
        .arg(dir.join("nope"))
        .arg("--out-dir")
        .arg(&out)
        .arg("--no-stock"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope: does not exist"));
    assert_eq!(files_in(&out), Vec::<String>::new());
}

#[test]
fn manifest_schema_version_dirs_and_unknown_fields() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.ours);
    let out = dir.parent().unwrap().join("pkgs");
    let mpath = dir.join("manifest.json");
    let good = std::fs::read_to_string(&mpath).unwrap();
    let attempt = || {
        let o = run(rcclfix(&["package", "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .arg("--no-stock")
            .args(["--format", "deb"]));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A newer schema version: one line naming the file, the version found and the one supported.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["schema_version"] = 99.into();
    std::fs::write(&mpath, v.to_string()).unwrap();
    let (code, stderr) = attempt();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains(
                "manifest.json: manifest schema version 99 is not supported (this rcclfix reads 1)"
            ),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing written: {stderr}");
    // A directory named manifest.json.
    std::fs::remove_file(&mpath).unwrap();
    std::fs::create_dir(&mpath).unwrap();
    let (code, stderr) = attempt();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("manifest.json: is a folder, not a file"),
        "{stderr}"
    );
    std::fs::remove_dir(&mpath).unwrap();
    // Unknown fields: accepted with a warning naming them.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["from_the_future"] = true.into();
    v["library"]["extra"] = 1.into();
    std::fs::write(&mpath, v.to_string()).unwrap();
    let (code, stderr) = attempt();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("does not know: from_the_future, library.extra"),
        "{stderr}"
    );
}

#[test]
fn interrupted_package_leaves_no_temp_file_and_no_new_folder() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.ours);
    let top = dir.parent().unwrap().join("pkgs");
    let out = top.join("new");
    let st = crate::fsutil::interrupt_when_temp_appears(
        rcclfix(&["package", "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .arg("--no-stock")
            .args(["--format", "deb"]),
        &out,
        "INT",
    );
    assert_eq!(st.code(), Some(130));
    assert!(
        !top.exists(),
        "the output folders this run created are removed"
    );
}

/// A build folder whose manifest and scan.json call a declaring library clean (the issue 20
/// case: `"gate": {"gfx1100": "clean"}`, an empty `scan.json`): `package` scans the library
/// itself, refuses it with exit 1 naming the kernel and the manifest that lied, and writes nothing.
#[test]
fn declaring_library_is_refused_whatever_its_manifest_says() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.declaring);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    assert_eq!(
        m.gate["gfx1100"], "declares",
        "the honest gate of the declaring fixture"
    );
    m.gate.insert("gfx1100".into(), "clean".into());
    m.save(&dir.join("manifest.json")).unwrap();
    let empty = rcclfix::scan::model::ScanReport {
        schema_version: rcclfix::scan::model::SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        files: vec![],
    };
    std::fs::write(dir.join("scan.json"), serde_json::to_vec(&empty).unwrap()).unwrap();
    let out = dir.parent().unwrap().join("pkgs");
    let before = files_in(&dir);
    for format in ["deb", "whl", "deb,whl"] {
        let o = run(rcclfix(&["package", "--format", format, "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .arg("--no-stock"));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{format}: {stderr}");
        assert!(o.stdout.is_empty());
        assert!(
            stderr.contains("error: scan gate failed for")
                && stderr.contains("gfx1100: 1 kernel(s) declare hidden_hostcall_buffer")
                && stderr.contains("k_printf")
                && stderr.contains(
                    "manifest.json's gate says \"clean\": it does not describe this library"
                ),
            "{format}: {stderr}"
        );
        assert_eq!(files_in(&out), Vec::<String>::new(), "{format}");
        assert_eq!(files_in(&dir), before);
    }
}

/// Only `clean` passes, and a manifest or scan.json that disagrees with `package`'s own scan of
/// a clean library is refused with one line naming that file (exit 2).
#[test]
fn a_build_folder_that_disagrees_with_the_scan_is_refused() {
    let f = fixtures();
    let attempt = |dir: &Path| {
        let o = run(rcclfix(&["package", "--format", "deb", "--from"])
            .arg(dir)
            .arg("--out-dir")
            .arg(dir.parent().unwrap().join("pkgs"))
            .arg("--no-stock"));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // The manifest calls a clean library declaring.
    let (_t, dir) = build_folder(&f.ours);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    m.gate.insert("gfx1100".into(), "declares".into());
    m.save(&dir.join("manifest.json")).unwrap();
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| !l.contains("Scanning")).count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "manifest.json: the gate says \"declares\" for gfx1100, but rcclfix's scan of"
        ) && stderr.contains("finds 1 kernels, none declaring"),
        "{stderr}"
    );
    // scan.json is empty (or counts other kernels) for a clean library.
    let (_t, dir) = build_folder(&f.ours);
    let mut scan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("scan.json")).unwrap()).unwrap();
    scan["files"] = serde_json::json!([]);
    std::fs::write(dir.join("scan.json"), scan.to_string()).unwrap();
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("scan.json: for gfx1100 it says no-code: no device code for gfx1100, but")
            && stderr.contains("scan.json does not describe this library"),
        "{stderr}"
    );
    // The manifest names a target the library has no code for: not clean, refused (exit 1).
    let (_t, dir) = build_folder(&f.ours);
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    v["targets"] = serde_json::json!(["gfx1100", "gfx1101"]);
    v["gate"]["gfx1101"] = "clean".into();
    std::fs::write(dir.join("manifest.json"), v.to_string()).unwrap();
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("gfx1101: no-code: no device code for gfx1101"),
        "{stderr}"
    );
    // A library with no device code at all is never clean.
    let plain = f
        .stock
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("no-device.so");
    if !plain.exists() {
        ok(Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,librccl.so.1"])
            .arg(data("rccl.c"))
            .arg("-o")
            .arg(&plain));
    }
    let (_t, dir) = build_folder(&plain);
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no device code for gfx1100"), "{stderr}");
}
