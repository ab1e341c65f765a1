//! `rcclfix patch` on the committed fixtures (`tests/fixtures/patch/`, made by
//! `cargo xtask fixtures-patch` from our own HIP sources): the device-linker pattern is patched,
//! only the metadata (or, for CCOB, the compressed payload and hash) changes, the result reads as
//! clean; every refusal names its kernels and reason and writes nothing.
//!
//! Slow tests (`RCCLFIX_SLOW_TESTS=1`) use the LLVM tools of the debian-sid toolchain
//! (`rcclfix toolchain run --engine bubblewrap debian-sid`) as an outside oracle.

use std::path::{Path, PathBuf};
use std::process::Command;

use rcclfix::scan::{scan_bytes, KernelReport, ScanOptions};

use rcclfix::patch::{
    patch_bytes, patch_file, PatchOptions, PatchRecord, PatchRefused, RefusalKind,
};

/// The binary with no log filter from the environment, so stderr holds only its own lines.
fn rcclfix_cmd() -> Command {
    let mut c = crate::support::rcclfix();
    c.env_remove("RUST_LOG");
    c
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/patch")
        .join(name)
}

fn opts(targets: &[&str]) -> PatchOptions {
    PatchOptions {
        targets: targets.iter().map(|s| s.to_string()).collect(),
        asserts: false,
    }
}

/// The byte spans a patch may touch: each rewritten note descriptor (plain, bare), or the CCOB
/// hash and payload.
fn allowed_spans(rec: &PatchRecord) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for img in &rec.images {
        match &img.ccob {
            Some(c) => v.push((c.offset + 16, c.offset + c.total_size)),
            None => v.extend(img.notes.iter().map(|n| {
                (
                    img.file_offset + n.offset,
                    img.file_offset + n.offset + n.size,
                )
            })),
        }
    }
    v
}

/// Every kernel of every image of a scan report, in file order, and no unreadable device code.
fn kernels_of(r: &rcclfix::scan::ScanReport) -> Vec<KernelReport> {
    assert!(
        r.files.iter().all(|f| f.unreadable.is_empty()),
        "{:?}",
        r.files
    );
    r.files
        .iter()
        .flat_map(|f| f.images.iter().flat_map(|i| i.kernels.clone()))
        .collect()
}

/// Patch `name` (under `tests/fixtures/patch/`), expect the given kernels rewritten, check the
/// output and return the record.
pub(crate) fn check(name: &str, targets: &[&str], kernels: &[&str]) -> PatchRecord {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let input = std::fs::read(fixture(name)).unwrap();
    let rec = patch_file(&fixture(name), &out, &opts(targets))
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    let output = std::fs::read(&out).unwrap();
    assert_eq!(output.len(), input.len(), "{name}: size changed");
    let mut got: Vec<String> = rec
        .images
        .iter()
        .flat_map(|i| {
            i.kernels
                .iter()
                .map(|k| format!("{}:{}", i.processor, k.name))
        })
        .collect();
    got.sort();
    assert_eq!(got, kernels, "{name}: rewritten kernels");
    for img in &rec.images {
        for k in &img.kernels {
            assert_eq!(
                (k.from.as_str(), k.to.as_str()),
                ("hidden_hostcall_buffer", "hidden_none")
            );
            assert_eq!(k.arg_size, 8);
        }
        assert!(
            img.proof.hostcall_user_symbols.is_empty() && img.proof.undefined_symbols.is_empty()
        );
        assert_eq!(img.proof.host_interrupt_sites, 0);
        assert!(
            img.proof.statements.len() >= 4,
            "{:?}",
            img.proof.statements
        );
    }
    // Only the metadata note bytes (or the CCOB hash + payload) differ.
    let spans = allowed_spans(&rec);
    assert!(!rec.changed_ranges.is_empty());
    for (a, b) in &rec.changed_ranges {
        assert!(
            spans.iter().any(|(s, e)| a >= s && b <= e),
            "{name}: bytes {a}..{b} changed outside {spans:?}"
        );
    }
    let diff: Vec<usize> = (0..input.len())
        .filter(|&i| input[i] != output[i])
        .collect();
    assert_eq!(
        diff.len() as u64,
        rec.changed_ranges.iter().map(|(a, b)| b - a).sum::<u64>()
    );
    // The scanner sees the declaration and traces it to the indirect call through the function
    // table, none of whose targets reaches a hostcall user; after the patch it reads every image
    // as clean, with the same kernarg layout.
    let sopts = ScanOptions {
        targets: targets.iter().map(|s| s.to_string()).collect(),
    };
    let before = kernels_of(&scan_bytes(name, &input, &sopts).unwrap());
    let after = kernels_of(&scan_bytes(name, &output, &sopts).unwrap());
    let declaring: Vec<&KernelReport> = before.iter().filter(|k| k.declares_hostcall).collect();
    assert_eq!(
        declaring.len(),
        kernels.len(),
        "{name}: scanner's declaring kernels"
    );
    for k in &declaring {
        let why = k.why.as_deref().unwrap_or("");
        assert!(
            why.contains(&format!(
                "reaches an indirect call in {} whose table devFuncTable includes",
                k.name
            )) && why
                .contains("none of its possible targets in this image reaches a hostcall user"),
            "{name}: {}: why = {why:?}",
            k.name
        );
    }
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert!(!a.declares_hostcall, "{name}: {} still declares", a.name);
        assert_eq!(
            (&b.name, b.kernarg_segment_size),
            (&a.name, a.kernarg_segment_size)
        );
        let layout = |k: &KernelReport| {
            k.hidden_args
                .iter()
                .map(|h| (h.offset, h.size))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            layout(b),
            layout(a),
            "{name}: {} hidden argument layout",
            a.name
        );
    }
    // Our own re-read agrees: nothing declares any more, and every image is still read.
    let (again_bytes, again) = patch_bytes("out", &output, &opts(targets)).unwrap();
    assert!(
        again.images.is_empty(),
        "{name}: still declares after the patch"
    );
    assert_eq!(again_bytes, output);
    assert_eq!(again.clean.len(), rec.images.len() + rec.clean.len());
    assert_eq!(rec.unverified, rcclfix::patch::UNVERIFIED);
    rec
}

/// Patch `name`, expect a refusal of `kind` whose message names `kernels` and contains `reason`,
/// and no output file (nor a temporary one).
fn refuses(name: &str, kind: RefusalKind, kernels: &[&str], reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let err = patch_file(&fixture(name), &out, &opts(&[])).unwrap_err();
    let r = err
        .downcast_ref::<PatchRefused>()
        .unwrap_or_else(|| panic!("{name}: not a refusal: {err:#}"));
    assert_eq!(r.refusal.kind, kind, "{name}: {err}");
    assert_eq!(r.refusal.kernels, kernels, "{name}: {err}");
    let msg = err.to_string();
    assert!(msg.contains(reason), "{name}: {msg}");
    assert!(
        msg.contains(name),
        "{name}: the message names the file: {msg}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{name}: something was written"
    );
}

const GENERIC: [&str; 2] = ["devKernel_Generic_1", "devKernel_Generic_2"];

#[test]
fn bare_code_object_v6() {
    let rec = check(
        "dispatch-v6-gfx1100.co",
        &[],
        &["gfx1100:devKernel_Generic_1", "gfx1100:devKernel_Generic_2"],
    );
    // The two trap sequences (gfx11 __builtin_trap in __cxa_pure_virtual/__cxa_deleted_virtual)
    // send MSG_INTERRUPT too; they are told apart from hostcall by the ttmp2 save/restore.
    assert_eq!(rec.images[0].proof.trap_interrupt_sites, 2);
}

#[test]
fn bare_code_object_v5() {
    let rec = check(
        "dispatch-v5-gfx1100.co",
        &[],
        &["gfx1100:devKernel_Generic_1", "gfx1100:devKernel_Generic_2"],
    );
    assert_eq!(rec.images[0].code_object_version, 5);
    // v5 layout: the hostcall slot is hidden offset 80, after 16 (Generic_1) or 24 bytes of args.
    let k: Vec<(u64, u64)> = rec.images[0]
        .kernels
        .iter()
        .map(|k| (k.arg_offset, k.kernarg_segment_size))
        .collect();
    assert_eq!(k, [(96, 272), (104, 280)]);
    assert!(rec.images[0].kernels[0].cause.starts_with("indirect call"));
    assert_eq!(
        rec.images[0].proof.relocation_targets,
        ["_Z11devFunc_AddPfi", "_Z13devFunc_ScalePfi"]
    );
}

#[test]
fn bare_code_object_v4() {
    let rec = check(
        "dispatch-v4-gfx1100.co",
        &[],
        &["gfx1100:devKernel_Generic_1", "gfx1100:devKernel_Generic_2"],
    );
    assert_eq!(rec.images[0].code_object_version, 4);
    // v4 layout: slot 24 of the hidden arguments.
    let k: Vec<(u64, u64)> = rec.images[0]
        .kernels
        .iter()
        .map(|k| (k.arg_offset, k.kernarg_segment_size))
        .collect();
    assert_eq!(k, [(40, 72), (48, 80)]);
}

#[test]
fn raw_plain_bundle_v4() {
    let rec = check(
        "dispatch-v4.bundle",
        &[],
        &["gfx1100:devKernel_Generic_1", "gfx1100:devKernel_Generic_2"],
    );
    assert_eq!(rec.kind, "bundle");
    assert_eq!(rec.images[0].entry_id, "hipv4-amdgcn-amd-amdhsa--gfx1100");
}

#[test]
fn host_library_plain_bundle() {
    let rec = check(
        "libdispatch-plain.so",
        &[],
        &[
            "gfx1030:devKernel_Generic_1",
            "gfx1030:devKernel_Generic_2",
            "gfx1100:devKernel_Generic_1",
            "gfx1100:devKernel_Generic_2",
        ],
    );
    assert_eq!(rec.kind, "host-elf");
    assert!(rec
        .images
        .iter()
        .all(|i| i.container == "plain" && i.entry_id.starts_with("hip-amdgcn-amd-amdhsa--")));
}

#[test]
fn host_library_plain_bundle_one_target_leaves_the_other_entry() {
    let rec = check(
        "libdispatch-plain.so",
        &["gfx1100"],
        &["gfx1100:devKernel_Generic_1", "gfx1100:devKernel_Generic_2"],
    );
    assert_eq!(rec.skipped, ["hip-amdgcn-amd-amdhsa--gfx1030"]);
}

#[test]
fn host_library_ccob() {
    let rec = check(
        "libdispatch-ccob.so",
        &[],
        &[
            "gfx1030:devKernel_Generic_1",
            "gfx1030:devKernel_Generic_2",
            "gfx1100:devKernel_Generic_1",
            "gfx1100:devKernel_Generic_2",
        ],
    );
    let c = rec.images[0].ccob.as_ref().unwrap();
    assert_eq!(rec.images[0].container, "ccob-v2-zstd");
    assert_eq!(c.frame_bytes + c.padding_bytes + 24, c.total_size);
    assert_ne!(c.hash_before, c.hash_after);
}

#[test]
fn already_clean_input_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let once = dir.path().join("once.co");
    patch_file(&fixture("dispatch-v6-gfx1100.co"), &once, &opts(&[])).unwrap();
    let twice = dir.path().join("twice.co");
    let rec = patch_file(&once, &twice, &opts(&[])).unwrap();
    assert!(rec.images.is_empty() && rec.changed_ranges.is_empty());
    assert!(!rec.written && rec.output_sha256.is_empty());
    assert!(!twice.exists(), "no byte-identical copy is written");
    // The CLI says so and exits 0.
    let o = rcclfix_cmd()
        .args([
            "patch",
            once.to_str().unwrap(),
            "--out",
            twice.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("nothing to patch: no kernel of gfx1100 declares hidden_hostcall_buffer"),
        "{stderr}"
    );
    assert!(!twice.exists());
}

#[test]
fn target_with_no_code_object_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The stripped object would be refused for gfx1100; for gfx1030 it is not looked at.
    let err = patch_file(&fixture("stripped-v6.co"), &out, &opts(&["gfx1030"])).unwrap_err();
    let e = err.downcast_ref::<rcclfix::patch::NoCodeObject>().unwrap();
    assert_eq!(e.present, ["gfx1100"]);
    assert!(!out.exists());
    // A typo on the CLI: one line naming the file and the targets present, exit 2.
    let lib = fixture("libdispatch-plain.so");
    let o = rcclfix_cmd()
        .args([
            "patch",
            lib.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--target", "gfx110"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    let first = stderr.lines().next().unwrap();
    assert!(
        first.starts_with("error: no code object for gfx110 in ")
            && first.contains("libdispatch-plain.so")
            && first.contains("gfx1030, gfx1100"),
        "{stderr}"
    );
    assert!(!out.exists() && std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn missing_input_says_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = rcclfix_cmd()
        .args(["patch", "/nonexist", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: cannot read /nonexist: No such file or directory"),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn in_place_for_build_and_permissions_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("librccl.so.1.0");
    std::fs::copy(fixture("libdispatch-ccob.so"), &lib).unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rec = rcclfix::patch::patch_in_place(&lib, &opts(&["gfx1100"])).unwrap();
    assert_eq!(rec.images.len(), 1);
    assert_eq!(
        std::fs::metadata(&lib).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );
    // The record goes into manifest.json as `patched`.
    let v = serde_json::to_value(&rec).unwrap();
    assert_eq!(v["images"][0]["kernels"][1]["name"], "devKernel_Generic_2");
    // A refused in-place patch leaves the file as it was.
    let bad = dir.path().join("printf.co");
    std::fs::copy(fixture("printf-v6.co"), &bad).unwrap();
    assert!(rcclfix::patch::patch_in_place(&bad, &opts(&[])).is_err());
    assert_eq!(
        std::fs::read(&bad).unwrap(),
        std::fs::read(fixture("printf-v6.co")).unwrap()
    );
}

#[test]
fn refuses_printf_kernel() {
    refuses(
        "printf-v6.co",
        RefusalKind::UsesHostcall,
        &["printfKernel"],
        "machine code signals the host",
    );
}

#[test]
fn refuses_printf_behind_the_function_table() {
    // printf is inlined into devFunc_Add: no hostcall symbol survives, the machine code shows it.
    refuses(
        "table-printf-v6.co",
        RefusalKind::UsesHostcall,
        &GENERIC,
        "s_sendmsg MSG_INTERRUPT at 0x2e04 in _Z11devFunc_AddPfi",
    );
}

#[test]
fn refuses_assert_kernel() {
    refuses(
        "assert-v6.co",
        RefusalKind::UsesHostcall,
        &["assertKernel"],
        "hostcall user in the image: __ockl_fprintf_append_string_n, __assert_fail",
    );
}

#[test]
fn refuses_stripped_symbol_table() {
    refuses(
        "stripped-v6.co",
        RefusalKind::Unproven,
        &GENERIC,
        "symbol table stripped",
    );
}

#[test]
fn refuses_undefined_indirect_target() {
    refuses(
        "undef-target-v6.co",
        RefusalKind::Unproven,
        &GENERIC,
        "undefined symbol _Z14devFunc_RemotePfi",
    );
}

#[test]
fn refuses_ccob_that_cannot_fit() {
    refuses(
        "libdispatch-tight.so",
        RefusalKind::Unproven,
        &GENERIC,
        "the recompressed bundle does not fit",
    );
}

#[test]
fn refuses_bad_inputs_without_panicking() {
    let good = std::fs::read(fixture("libdispatch-ccob.so")).unwrap();
    // Truncations and corruptions of a host library with a CCOB: every one is refused or, if the
    // damage misses the device code, patched; none panics.
    for cut in [0, 4, 64, 4096, 4100, 4120, 6000, good.len() - 1] {
        let _ = patch_bytes("cut", &good[..cut], &opts(&[]));
    }
    for at in [4096 + 8, 4096 + 12, 4096 + 16, 4096 + 24, 4096 + 100] {
        let mut bad = good.clone();
        bad[at] ^= 0xff;
        let r = patch_bytes("flip", &bad, &opts(&[]));
        assert!(
            r.is_err(),
            "a flipped byte at {at} inside the CCOB must be refused"
        );
    }
    let err = patch_bytes("text", b"hello", &opts(&[])).unwrap_err();
    assert!(
        err.to_string()
            .contains("not a host ELF, code object, offload bundle or CCOB"),
        "{err}"
    );
}

#[test]
fn corrupted_code_objects_never_panic() {
    // Every 5th byte of a code object flipped, one at a time: patch refuses or patches, and a
    // patch it accepts still has the input's length.
    let good = std::fs::read(fixture("dispatch-v4-gfx1100.co")).unwrap();
    for at in (0..good.len()).step_by(5) {
        let mut bad = good.clone();
        bad[at] ^= 0xa5;
        if let Ok((out, _)) = patch_bytes("flip", &bad, &opts(&[])) {
            assert_eq!(out.len(), bad.len());
        }
    }
    for cut in (0..good.len()).step_by(97) {
        let _ = patch_bytes("cut", &good[..cut], &opts(&[]));
    }
}

#[test]
fn refuses_output_equal_to_input() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.co");
    std::fs::copy(fixture("dispatch-v6-gfx1100.co"), &p).unwrap();
    let err = patch_file(&p, &p, &opts(&[])).unwrap_err();
    assert!(
        err.to_string().contains("--out must differ from the input"),
        "{err}"
    );
}

#[test]
fn cli_json_explain_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lib.so");
    let o = rcclfix_cmd()
        .args([
            "patch",
            fixture("libdispatch-plain.so").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--target",
            "gfx1100",
            "--json",
            "--explain",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["images"][0]["kernels"][0]["to"], "hidden_none");
    assert!(
        stderr.contains("proof:") && stderr.contains("no machine code signals the host"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rcclfix verify"),
        "the unverified part is said: {stderr}"
    );

    let o = rcclfix_cmd()
        .args([
            "patch",
            fixture("dispatch-v4-gfx1100.co").to_str().unwrap(),
            "--out",
        ])
        .arg(dir.path().join("v4.co"))
        .arg("--explain")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout.contains("kernel devKernel_Generic_1: hidden_hostcall_buffer -> hidden_none at kernarg offset 40 size 8"), "{stdout}");

    for (name, code) in [("printf-v6.co", 1), ("stripped-v6.co", 2)] {
        let o = rcclfix_cmd()
            .args(["patch", fixture(name).to_str().unwrap(), "--out"])
            .arg(dir.path().join(name))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{name}: {stderr}");
        assert!(
            stderr.starts_with("error: ")
                && stderr.contains("refusing to patch")
                && stderr.contains("nothing was written"),
            "{stderr}"
        );
        assert!(!dir.path().join(name).exists());
    }
}

// ---------------------------------------------------------------------------------------------
// Slow: the LLVM tools of the debian-sid toolchain as an outside oracle.

/// The debian-sid toolchain's rootfs when it is built (these tests then run, slow or not); a
/// panic when `RCCLFIX_SLOW_TESTS=1` and it is not.
fn sid_rootfs() -> Option<PathBuf> {
    let r = crate::support::toolchain_rootfs("sid");
    if r.join("usr/bin/llvm-readelf-21").exists() {
        return Some(r);
    }
    if crate::support::slow() {
        panic!(
            "RCCLFIX_SLOW_TESTS=1 but the debian-sid toolchain rootfs is missing ({} has no llvm-readelf-21)\nhelp: rcclfix toolchain build debian-sid, or run `cargo xtask test`",
            r.display()
        );
    }
    None
}

/// Run an LLVM tool of the debian-sid toolchain in `dir`; return stdout.
fn tool(dir: &Path, argv: &[&str]) -> String {
    crate::support::in_toolchain_ok("sid", dir, argv)
}

/// `llvm-readelf --notes` of the input and the patched output: identical except that each
/// `hidden_hostcall_buffer` line reads `hidden_none` — so every offset, size and kernarg segment
/// size is the same.
fn readelf_notes_agree(dir: &Path, before: &str, after: &str) {
    let a = tool(dir, &["llvm-readelf-21", "--notes", before]);
    let b = tool(dir, &["llvm-readelf-21", "--notes", after]);
    assert!(a.contains("hidden_hostcall_buffer"));
    assert!(!b.contains("hidden_hostcall_buffer"), "{b}");
    // llvm-readelf runs LLVM's strict AMDHSA metadata verifier on every note.
    assert!(!b.contains("Invalid AMDGPU Metadata"), "{b}");
    assert_eq!(a.lines().count(), b.lines().count());
    let mut rewritten = 0;
    for (x, y) in a.lines().zip(b.lines()) {
        if x != y {
            assert_eq!(x.replace("hidden_hostcall_buffer", "hidden_none"), y);
            rewritten += 1;
        }
    }
    assert_eq!(rewritten, 2);
    assert!(b.contains(".kernarg_segment_size: 272") || b.contains(".kernarg_segment_size: 72"));
}

#[test]
fn slow_readelf_parses_patched_code_objects() {
    let Some(_) = sid_rootfs() else { return };
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "dispatch-v6-gfx1100.co",
        "dispatch-v5-gfx1100.co",
        "dispatch-v4-gfx1100.co",
    ] {
        std::fs::copy(fixture(name), dir.path().join(name)).unwrap();
        let out = format!("patched-{name}");
        patch_file(&fixture(name), &dir.path().join(&out), &opts(&[])).unwrap();
        readelf_notes_agree(dir.path(), name, &out);
    }
}

#[test]
fn slow_bundler_reads_patched_ccob_library() {
    let Some(_) = sid_rootfs() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(fixture("libdispatch-ccob.so"), d.join("in.so")).unwrap();
    patch_file(
        &fixture("libdispatch-ccob.so"),
        &d.join("out.so"),
        &opts(&[]),
    )
    .unwrap();
    for (lib, co) in [("in.so", "in.co"), ("out.so", "out.co")] {
        let fb = format!("{lib}.fatbin");
        tool(
            d,
            &[
                "llvm-objcopy-21",
                &format!("--dump-section=.hip_fatbin={fb}"),
                lib,
                "/tmp/copy.so",
            ],
        );
        let list = tool(
            d,
            &[
                "clang-offload-bundler-21",
                "--list",
                "--type=o",
                &format!("--input={fb}"),
            ],
        );
        assert!(
            list.contains("hip-amdgcn-amd-amdhsa--gfx1100")
                && list.contains("hip-amdgcn-amd-amdhsa--gfx1030"),
            "{list}"
        );
        tool(
            d,
            &[
                "clang-offload-bundler-21",
                "--unbundle",
                "--type=o",
                &format!("--input={fb}"),
                "--targets=hip-amdgcn-amd-amdhsa--gfx1100",
                &format!("--output={co}"),
            ],
        );
    }
    readelf_notes_agree(d, "in.co", "out.co");
    // Apart from the metadata note, the unbundled code objects are byte-identical.
    let (a, b) = (
        std::fs::read(d.join("in.co")).unwrap(),
        std::fs::read(d.join("out.co")).unwrap(),
    );
    assert_eq!(a.len(), b.len());
    let rec = patch_bytes("in.co", &a, &opts(&[])).unwrap().1;
    let n = &rec.images[0].notes[0];
    for i in (0..a.len()).filter(|&i| a[i] != b[i]) {
        assert!(
            (n.offset..n.offset + n.size).contains(&(i as u64)),
            "byte {i} differs outside the note"
        );
    }
}

/// The Debian `librccl1` 5.4.3 package (`RCCLFIX_TEST_INPUTS`, default `target/test-inputs`): a
/// real RCCL whose ten code objects declare nothing; `patch` proves nothing is needed and writes
/// nothing.
#[test]
fn slow_debian_librccl_needs_no_patch() {
    if !crate::support::slow() {
        return;
    }
    let deb = crate::support::librccl1_deb();
    let dir = tempfile::tempdir().unwrap();
    let tar = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .output()
        .unwrap();
    assert!(tar.status.success());
    let lib_in_deb = "./usr/lib/x86_64-linux-gnu/librccl.so.1.0";
    let mut child = Command::new("tar")
        .args(["-x", "-C"])
        .arg(dir.path())
        .arg(lib_in_deb)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), &tar.stdout).unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let lib = dir.path().join(lib_in_deb);
    let out = dir.path().join("librccl.so.1.0.patched");
    let rec = patch_file(&lib, &out, &opts(&[])).unwrap();
    assert_eq!(rec.kind, "host-elf");
    assert!(rec.images.is_empty() && rec.changed_ranges.is_empty());
    assert_eq!(rec.clean.len(), 10, "{:?}", rec.clean);
    assert!(rec
        .clean
        .iter()
        .any(|c| c.processor == "gfx1100" && c.kernels == 4));
    assert!(
        !rec.written && !out.exists(),
        "nothing to patch: no copy written"
    );
}

/// Codegen freshness: `cargo xtask fixtures-patch` with the toolchain rootfs regenerates every
/// committed fixture byte for byte (debian-sid and debian-trixie are both needed).
#[test]
fn slow_fixtures_are_fresh() {
    let Some(sid) = sid_rootfs() else { return };
    let trixie = sid
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("debian-trixie/rootfs");
    assert!(
        trixie.join("usr/bin/clang-17").exists(),
        "RCCLFIX_SLOW_TESTS=1 but the debian-trixie toolchain rootfs is missing ({})\nhelp: rcclfix toolchain build debian-trixie",
        trixie.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fixtures");
    // A separate target folder: the outer `cargo test` holds the lock on the usual one.
    let o = Command::new(env!("CARGO"))
        .args([
            "run",
            "--quiet",
            "--package",
            "xtask",
            "--",
            "fixtures-patch",
            "--sid",
        ])
        .arg(&sid)
        .arg("--trixie")
        .arg(&trixie)
        .arg("--out")
        .arg(&out)
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut n = 0;
    for e in std::fs::read_dir(&out).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        assert_eq!(
            std::fs::read(e.path()).unwrap(),
            std::fs::read(fixture(&name)).unwrap(),
            "{name} is stale: run cargo xtask fixtures-patch"
        );
        n += 1;
    }
    assert_eq!(n, 12);
}
