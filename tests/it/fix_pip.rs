//! `rcclfix fix` on a pip-owned copy, with real parts: a stand-in RCCL compiled here with gcc
//! (SONAME `librccl.so.1` as AMD's, exporting `ncclGetVersion` and `ncclAllReduce`, carrying our
//! own committed dispatcher bundle `tests/fixtures/patch/dispatch-v4.bundle` behind a real
//! `__hip_fatbin_wrapper`), a torch wheel in each layout with a stand-in `libtorch_hip.so` that
//! calls it, real pip in a real venv, and the real loader as the oracle: `LD_DEBUG=bindings` with
//! `LD_BIND_NOW=1` for the file each symbol binds to, `/proc/self/maps` for what is mapped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fix::{
    fix, ok, record_hash, run, sha256, torch_wheel, venv_with, CALLS, LEGACY, THEROCK,
};

/// A stand-in `librccl.so.1` built with gcc in `dir`: SONAME `librccl.so.1`, [`CALLS`] exported,
/// and the dispatcher bundle in `.hip_fatbin` behind a HIPF wrapper (the layout clang emits).
pub(crate) fn stand_in_rccl(dir: &Path) -> PathBuf {
    let bundle = std::fs::read(crate::fix::fixture("patch/dispatch-v4.bundle")).unwrap();
    let bytes: Vec<String> = bundle.iter().map(|b| b.to_string()).collect();
    let c = dir.join("rccl.c");
    std::fs::write(
        &c,
        format!(
            "__attribute__((section(\".hip_fatbin\"), aligned(4096))) const unsigned char __hip_fatbin_stand_in[] = {{{}}};\n\
             struct wrapper {{ unsigned magic, version; const void *binary; void *unused; }};\n\
             __attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) const struct wrapper __hip_fatbin_wrapper = {{ 0x48495046, 1, __hip_fatbin_stand_in, 0 }};\n\
             int ncclGetVersion(int *v) {{ *v = 22105; return 0; }}\n\
             int ncclAllReduce(void) {{ return 0; }}\n",
            bytes.join(",")
        ),
    )
    .unwrap();
    let lib = dir.join("librccl.so.1");
    ok(Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-Wl,-soname,librccl.so.1", "-o"])
        .arg(&lib)
        .arg(&c));
    lib
}

/// What the real loader did when `python` (its start-up hooks included) loaded `consumer`,
/// after `preload` with `RTLD_GLOBAL` when given: the `librccl*` files mapped, and the file each
/// of [`CALLS`] bound to from the consumer; all canonical.
fn loader(
    python: &Path,
    consumer: &Path,
    preload: Option<&Path>,
) -> (Vec<PathBuf>, Vec<(String, PathBuf)>) {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("ld");
    let pre = preload
        .map(|p| {
            format!(
                "ctypes.CDLL({:?}, mode=ctypes.RTLD_GLOBAL)\n",
                p.display().to_string()
            )
        })
        .unwrap_or_default();
    let out = ok(Command::new(python)
        .arg("-c")
        .arg(format!(
            "import ctypes, json\n{pre}ctypes.CDLL({:?})\nprint(json.dumps(sorted({{l.split()[-1] for l in open('/proc/self/maps') if 'librccl' in l}})))",
            consumer.display().to_string()
        ))
        .env("LD_DEBUG", "bindings")
        .env("LD_BIND_NOW", "1")
        .env("LD_DEBUG_OUTPUT", &log));
    let canon = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
    let mapped: Vec<String> = serde_json::from_str(out.trim()).unwrap();
    let mapped = mapped.iter().map(|p| canon(p)).collect();
    let consumer = std::fs::canonicalize(consumer).unwrap();
    let mut bound = Vec::new();
    for e in std::fs::read_dir(t.path()).unwrap() {
        for line in std::fs::read_to_string(e.unwrap().path()).unwrap().lines() {
            let Some(rest) = line.split_once("binding file ").map(|x| x.1) else {
                continue;
            };
            let (file, rest) = rest.split_once(" [").unwrap();
            let (to, rest) = rest
                .split_once("] to ")
                .unwrap()
                .1
                .split_once(" [")
                .unwrap();
            let sym = rest.split_once('`').unwrap().1.trim_end_matches('\'');
            if canon(file) == consumer && CALLS.contains(&sym) {
                bound.push((sym.to_string(), canon(to)));
            }
        }
    }
    bound.sort();
    bound.dedup();
    (mapped, bound)
}

fn all_to(bound: &[(String, PathBuf)], file: &Path) -> bool {
    bound.len() == CALLS.len() && bound.iter().all(|(_, f)| f == file)
}

/// The owner's `RECORD` line for `rel` gives the file's sha256 (the wheel's own check).
fn record_verifies(site: &Path, rel: &str) -> bool {
    let rec =
        std::fs::read_to_string(site.join("torch-2.9.1+rcclfix.test.dist-info/RECORD")).unwrap();
    let want = record_hash(&std::fs::read(site.join(rel)).unwrap());
    rec.lines()
        .any(|l| l.starts_with(&format!("{rel},{want},")))
}

fn pip_fix_round_trip(layout: (&str, &str, &str)) {
    let t = tempfile::tempdir().unwrap();
    let work = t.path();
    let home = work.join("home");
    let lib = stand_in_rccl(work);
    let whl = torch_wheel(work, &lib, layout, true);
    let (py, site) = venv_with(work, &whl);
    let copy = std::fs::canonicalize(site.join(layout.0)).unwrap();
    let hip = site.join("torch/lib/libtorch_hip.so");
    let before = sha256(&copy);

    // Before: the consumer binds the copy, the only librccl mapped.
    let (mapped, bound) = loader(&py, &hip, None);
    assert_eq!(mapped, vec![copy.clone()]);
    assert!(all_to(&bound, &copy), "{bound:?}");

    // The question of issue 37: a patched copy with the original's SONAME, preloaded with
    // RTLD_GLOBAL, wins every binding in both layouts; in the legacy layout (`librccl.so`
    // needed, SONAME `librccl.so.1`) the unpatched copy is still mapped beside it.
    let patched = work.join("preload/librccl.so.1");
    std::fs::create_dir_all(patched.parent().unwrap()).unwrap();
    ok(crate::support::rcclfix()
        .arg("patch")
        .arg(&copy)
        .arg("--out")
        .arg(&patched));
    let (mapped, bound) = loader(&py, &hip, Some(&patched));
    let patched = std::fs::canonicalize(&patched).unwrap();
    assert!(all_to(&bound, &patched), "{bound:?}");
    if layout == LEGACY {
        let mut both = vec![copy.clone(), patched.clone()];
        both.sort();
        assert_eq!(mapped, both);
    } else {
        assert_eq!(mapped, vec![patched.clone()]);
    }

    // fix: an overlay wheel installed with the venv's pip.
    let started = std::time::Instant::now();
    let o = run(fix(&home).arg("--yes").arg("--python").arg(&py));
    let fix_s = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("install an overlay wheel"), "{err}");
    assert!(err.contains("(the patched file)"), "{err}");
    assert!(err.contains("rcclfix verify --lib"), "{err}");
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert_eq!(id.len(), 16, "{id}");
    let installed = std::fs::canonicalize(site.join("rcclfix_rccl/lib/librccl.so.1")).unwrap();
    let (mapped, bound) = loader(&py, &hip, None);
    assert_eq!(
        mapped,
        vec![installed.clone()],
        "only the overlay is mapped"
    );
    assert!(all_to(&bound, &installed), "{bound:?}");
    ok(crate::support::rcclfix().arg("scan").arg(&installed));
    let soname = ok(Command::new("readelf").arg("-d").arg(&installed));
    assert!(
        soname.contains(&format!("Library soname: [{}]", layout.1)),
        "{soname}"
    );
    // Nothing torch installed changed: its RECORD line verifies, pip check passes.
    assert_eq!(sha256(&copy), before);
    assert!(record_verifies(&site, layout.0));
    ok(Command::new(&py).args(["-m", "pip", "check", "--disable-pip-version-check"]));
    let list = ok(fix(&home).arg("--list"));
    assert!(
        list.contains(&id) && list.contains("installed (pip overlay)"),
        "{list}"
    );
    let kept = home.join("fixes").join(&id);
    assert!(std::fs::read_dir(&kept).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".whl")));

    let overlay = sha256(&installed);
    // undo: pip uninstall; the consumer binds the original again.
    let started = std::time::Instant::now();
    ok(fix(&home).arg("--undo").arg(&id));
    let undo_s = started.elapsed().as_secs_f64();
    assert!(!site.join("rcclfix_rccl").exists());
    assert!(!kept.exists());
    assert_eq!(sha256(&copy), before);
    assert!(record_verifies(&site, layout.0));
    let (mapped, bound) = loader(&py, &hip, None);
    assert_eq!(mapped, vec![copy.clone()]);
    assert!(all_to(&bound, &copy), "{bound:?}");
    ok(Command::new(&py).args(["-m", "pip", "check", "--disable-pip-version-check"]));
    eprintln!(
        "{}: fix {fix_s:.2} s, undo {undo_s:.2} s; sha256 {before} before, after fix and after undo; overlay {overlay}",
        layout.0
    );
}

#[test]
fn legacy_layout_pip_fix_binds_only_the_overlay_and_undo_restores() {
    pip_fix_round_trip(LEGACY);
}

#[test]
fn therock_layout_pip_fix_binds_only_the_overlay_and_undo_restores() {
    pip_fix_round_trip(THEROCK);
}

/// A hostile pip record cannot make undo run a program: a `python` outside the prefix of the
/// recorded site-packages is refused before anything runs.
#[test]
fn undo_refuses_a_pip_record_naming_another_python() {
    let t = tempfile::tempdir().unwrap();
    let work = t.path();
    let home = work.join("home");
    let lib = stand_in_rccl(work);
    let whl = torch_wheel(work, &lib, THEROCK, true);
    let (py, _site) = venv_with(work, &whl);
    let id = ok(fix(&home).arg("--yes").arg("--python").arg(&py));
    let id = id.trim();
    let rec_path = home.join("fixes").join(id).join("record.json");
    let rec = std::fs::read_to_string(&rec_path).unwrap();
    let evil = work.join("evil/bin/python");
    std::fs::create_dir_all(evil.parent().unwrap()).unwrap();
    std::fs::write(&evil, "#!/bin/sh\ntouch \"$0.ran\"\n").unwrap();
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        &rec_path,
        rec.replace(py.to_str().unwrap(), evil.to_str().unwrap()),
    )
    .unwrap();
    let o = run(fix(&home).arg("--undo").arg(id));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not under its prefix"));
    assert!(!work.join("evil/bin/python.ran").exists());
    std::fs::write(&rec_path, rec).unwrap();
    ok(fix(&home).arg("--undo").arg(id));
}

/// `rcclfix package --library FILE` packages any library that scans clean: the wheel's
/// provenance names the original (path, sha256, owner) and carries the patch record; a library
/// that still declares is refused (exit 1) and nothing is written.
#[test]
fn package_library_wheel_names_the_original_and_the_patch() {
    use std::io::Read;
    let t = tempfile::tempdir().unwrap();
    let work = t.path();
    let original = stand_in_rccl(work);
    let patched = work.join("patched/librccl.so.1");
    let record = work.join("patch.json");
    std::fs::create_dir_all(patched.parent().unwrap()).unwrap();
    ok(crate::support::rcclfix()
        .arg("patch")
        .arg(&original)
        .arg("--out")
        .arg(&patched)
        .arg("--record")
        .arg(&record));
    let out = work.join("out");
    let whl = ok(crate::support::rcclfix()
        .args(["package", "--format", "whl", "--library"])
        .arg(&patched)
        .arg("--original")
        .arg(&original)
        .arg("--patch-record")
        .arg(&record)
        .arg("--out-dir")
        .arg(&out));
    let whl = PathBuf::from(whl.trim());
    assert!(whl.starts_with(&out) && whl.is_file(), "{}", whl.display());
    let mut z = zip::ZipArchive::new(std::fs::File::open(&whl).unwrap()).unwrap();
    let mut m = String::new();
    z.by_name("rcclfix_rccl/manifest.json")
        .unwrap()
        .read_to_string(&mut m)
        .unwrap();
    let m: serde_json::Value = serde_json::from_str(&m).unwrap();
    assert_eq!(m["library_sha256"], sha256(&patched));
    assert_eq!(
        m["original"]["path"],
        std::fs::canonicalize(&original).unwrap().to_str().unwrap()
    );
    assert_eq!(m["original"]["sha256"], sha256(&original));
    assert_eq!(m["original"]["owner"], "none");
    assert_eq!(
        m["patch"]["images"][0]["kernels"].as_array().unwrap().len(),
        2
    );
    assert!(m["unverified"]
        .as_str()
        .unwrap()
        .contains("rcclfix verify --lib"));

    // The unpatched library declares: refused, nothing written.
    let refused_out = work.join("refused");
    let o = run(crate::support::rcclfix()
        .args(["package", "--format", "whl", "--library"])
        .arg(&original)
        .arg("--out-dir")
        .arg(&refused_out));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("scan gate failed"));
    assert_eq!(
        std::fs::read_dir(&refused_out)
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
}
