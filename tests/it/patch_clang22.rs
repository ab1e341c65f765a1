//! `rcclfix patch` on code objects that the ROCm 7.2 compiler (clang 22, HIP 7.2.4) produced:
//! code object v6 and CCOB v3 are rewritten like clang 21's, and clang 22's own `llvm-readelf`
//! reads the result (slow: the `debian-rocm7.2` toolchain).

use std::path::PathBuf;

use crate::support::slow_or_note;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `rcclfix patch` on the device-linker pattern compiled by the ROCm 7.2 compiler
/// (`tests/fixtures/patch/rocm7.2/`, `cargo xtask fixtures-patch rocm7.2`): the bare code object
/// v6 and the CCOB v3 library are rewritten like the clang 21 ones, and the output scans clean.
#[test]
fn patch_rocm72_code_object_and_ccob_v3_library() {
    let rec = crate::patch::check(
        "rocm7.2/dispatch-v6-gfx1100.co",
        &[],
        &["gfx1100:devKernel_Generic_1", "gfx1100:devKernel_Generic_2"],
    );
    assert_eq!(rec.images[0].code_object_version, 6);
    let rec = crate::patch::check(
        "rocm7.2/libdispatch-ccob.so",
        &[],
        &[
            "gfx1030:devKernel_Generic_1",
            "gfx1030:devKernel_Generic_2",
            "gfx1100:devKernel_Generic_1",
            "gfx1100:devKernel_Generic_2",
        ],
    );
    assert_eq!(rec.images[0].container, "ccob-v3-zstd");
    let c = rec.images[0].ccob.as_ref().unwrap();
    assert_ne!(c.hash_before, c.hash_after);
}

/// clang 22's own `llvm-readelf --notes` (in the debian-rocm7.2 toolchain) reads the patched ROCm
/// 7.2 code object: identical to the input's notes except that each `hidden_hostcall_buffer`
/// reads `hidden_none`, and LLVM's metadata verifier accepts it.
#[test]
fn slow_rocm72_readelf_parses_the_patched_code_object() {
    if !slow_or_note() {
        return;
    }
    crate::support::require_tool("rocm7.2", "llvm-readelf-22");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = repo().join("tests/fixtures/patch/rocm7.2/dispatch-v6-gfx1100.co");
    std::fs::copy(&input, d.join("in.co")).unwrap();
    rcclfix::patch::patch_file(
        &input,
        &d.join("out.co"),
        &rcclfix::patch::PatchOptions::default(),
    )
    .unwrap();
    let notes =
        |f: &str| crate::support::in_toolchain_ok("rocm7.2", d, &["llvm-readelf-22", "--notes", f]);
    let (a, b) = (notes("in.co"), notes("out.co"));
    assert!(a.contains("hidden_hostcall_buffer"), "{a}");
    assert!(!b.contains("hidden_hostcall_buffer"), "{b}");
    assert!(!b.contains("Invalid AMDGPU Metadata"), "{b}");
    assert_eq!(a.lines().count(), b.lines().count());
    let changed: Vec<(&str, &str)> = a.lines().zip(b.lines()).filter(|(x, y)| x != y).collect();
    assert_eq!(changed.len(), 2, "{changed:?}");
    for (x, y) in changed {
        assert_eq!(x.replace("hidden_hostcall_buffer", "hidden_none"), y);
    }
}
