//! `rcclfix patch --asserts` on code objects compiled from our own HIP sources (the committed
//! fixtures, `cargo xtask fixtures` and `cargo xtask fixtures-patch`): the device-assert handler
//! and the hostcall users no kernel reaches are filled with `s_trap 2; s_endpgm`, only those
//! functions and the metadata notes differ, the scanner then reads every kernel as clean; a
//! kernel that really prints is still refused, and a mutated input is refused or patched without
//! one byte changing outside the listed ones.
//!
//! Ignored unless asked for (`RCCLFIX_CONTROL_LIBS`, a folder holding the RCCL 2.21.5 control
//! builds `librccl-2.21.5-*-control-gfx1100.so`, which no download provides; `cargo xtask test`
//! runs it when the variable is set): the real library is patched and the toolchain's `llvm-readelf` / `llvm-objdump` are the oracles.

use std::path::{Path, PathBuf};

use rcclfix::patch::{
    patch_bytes, patch_file, PatchOptions, PatchRecord, PatchRefused, RefusalKind,
};
use rcclfix::scan::{scan_bytes, ScanOptions};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn asserts() -> PatchOptions {
    PatchOptions {
        targets: vec![],
        asserts: true,
    }
}

/// `s_trap 2; s_endpgm` per processor family, as llvm-mc 22 assembles them.
fn trap_hex(processor: &str) -> &'static str {
    if processor.starts_with("gfx11") || processor.starts_with("gfx12") {
        "020090bf0000b0bf"
    } else {
        "020092bf000081bf"
    }
}

/// The file byte ranges a record allows to differ: each rewritten instruction pair (plain and
/// bare images), each rewritten note descriptor, or a CCOB's hash and payload.
fn allowed(rec: &PatchRecord) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for img in &rec.images {
        match &img.ccob {
            Some(c) => v.push((c.offset + 16, c.offset + c.total_size)),
            None => {
                for n in &img.notes {
                    v.push((
                        img.file_offset + n.offset,
                        img.file_offset + n.offset + n.size,
                    ));
                }
                for i in &img.instructions {
                    let f = i
                        .file_offset
                        .expect("an uncompressed image has file offsets");
                    assert_eq!(f, img.file_offset + i.code_object_offset);
                    v.push((f, f + i.size));
                }
            }
        }
    }
    v
}

/// Every byte where `a` and `b` differ lies in one of `spans`.
fn only_listed_bytes_differ(what: &str, a: &[u8], b: &[u8], spans: &[(u64, u64)]) {
    assert_eq!(a.len(), b.len(), "{what}: size changed");
    for i in (0..a.len()).filter(|&i| a[i] != b[i]) {
        let i = i as u64;
        assert!(
            spans.iter().any(|(s, e)| i >= *s && i < *e),
            "{what}: byte 0x{i:x} changed outside the listed spans {spans:?}"
        );
    }
}

/// Patch `rel` with `--asserts` into a temporary file, check what may differ, that each image
/// has `handlers` rewritten handlers (and any number of filled hostcall users no kernel reaches)
/// with the family's trap bytes, and that the scanner reads the output as clean with the same
/// kernels; return the record.
fn check(rel: &str, images: usize, handlers: usize) -> PatchRecord {
    check_with(rel, images, handlers, &asserts())
}

/// [`check`] with options of its own (e.g. `--target`).
fn check_with(rel: &str, images: usize, handlers: usize, opts: &PatchOptions) -> PatchRecord {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let input = std::fs::read(fixture(rel)).unwrap();
    let rec = patch_file(&fixture(rel), &out, opts).unwrap_or_else(|e| panic!("{rel}: {e:#}"));
    let output = std::fs::read(&out).unwrap();
    assert!(rec.asserts && rec.written);
    assert_eq!(rec.images.len(), images, "{rel}: images");
    for img in &rec.images {
        let h: Vec<_> = img
            .instructions
            .iter()
            .filter(|i| i.why == "device-assert handler")
            .collect();
        assert_eq!(h.len(), handlers, "{rel}: {}", img.processor);
        for i in &img.instructions {
            if i.why == "device-assert handler" {
                assert_eq!(i.symbol, "__assert_fail");
            } else {
                assert_eq!(i.why, "hostcall user no kernel reaches", "{i:?}");
                assert!(
                    rcclfix::scan::amdgpu::is_hostcall_user(&i.symbol)
                        || i.symbol.starts_with("__ockl_"),
                    "{i:?}"
                );
            }
            assert_eq!(i.new, trap_hex(&img.processor), "{rel}: {}", img.processor);
            assert_ne!(i.old, i.new);
            assert!(i.size >= 8 && i.size % 4 == 0, "{i:?}");
            assert_eq!(i.new_text, "s_trap 2; s_endpgm");
        }
        assert!(!img.cut_paths.is_empty(), "{rel}: the cut paths are listed");
        for c in &img.cut_paths {
            assert_eq!(
                c.path.last().map(String::as_str),
                Some("__assert_fail"),
                "{c:?}"
            );
            assert!(c.now.contains("s_trap 2; s_endpgm"));
        }
        assert!(
            img.proof
                .statements
                .iter()
                .any(|s| s.contains("after the rewrite no kernel reaches a hostcall user")),
            "{:?}",
            img.proof.statements
        );
    }
    assert!(rec.unverified.contains("not verified on AMD hardware"));
    assert!(rec
        .unverified
        .contains("a failing device assert still aborts"));
    assert!(rec.unverified.contains("rcclfix verify"));
    only_listed_bytes_differ(rel, &input, &output, &allowed(&rec));
    let before = scan_bytes(rel, &input, &ScanOptions::default()).unwrap();
    let after = scan_bytes(rel, &output, &ScanOptions::default()).unwrap();
    let ours = |p: &str| opts.targets.is_empty() || opts.targets.iter().any(|t| t == p);
    let kernels = |r: &rcclfix::scan::ScanReport| -> Vec<(String, bool)> {
        assert!(r.files.iter().all(|f| f.unreadable.is_empty()));
        r.files
            .iter()
            .flat_map(|f| {
                f.images
                    .iter()
                    .filter(|i| ours(&i.processor))
                    .flat_map(|i| i.kernels.iter())
            })
            .map(|k| (k.name.clone(), k.declares_hostcall))
            .collect()
    };
    // The scanner says which hostcall users now trap (what `package` repeats).
    for f in &after.files {
        for i in f.images.iter().filter(|i| ours(&i.processor)) {
            assert!(
                i.trapped_users.iter().any(|u| u == "__assert_fail"),
                "{rel}: {:?}",
                i.trapped_users
            );
        }
    }
    let (b, a) = (kernels(&before), kernels(&after));
    assert!(b.iter().any(|k| k.1), "{rel}: the input declares");
    assert_eq!(b.len(), a.len());
    assert!(
        a.iter().all(|k| !k.1),
        "{rel}: still declares after the patch: {a:?}"
    );
    // Patching the output again finds nothing to do and changes nothing.
    let (again, rec2) = patch_bytes("out", &output, opts).unwrap();
    assert!(rec2.images.is_empty() && again == output);
    rec
}

#[test]
fn asserts_bare_code_object() {
    let rec = check("patch/assert-v6.co", 1, 1);
    let img = &rec.images[0];
    assert_eq!(img.kernels[0].name, "assertKernel");
    assert_eq!(img.cut_paths[0].before, "assertKernel → __assert_fail");
    // Without --asserts the same file is refused, as before.
    let err = patch_bytes(
        "assert-v6.co",
        &std::fs::read(fixture("patch/assert-v6.co")).unwrap(),
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert_eq!(err.refusal.kind, RefusalKind::UsesHostcall);
}

#[test]
fn asserts_behind_a_function_table_on_five_generations() {
    // gfx803: the kernarg-pointer flow refuses it (a return whose address it cannot tell from
    // a computed code address: a refusal on a right input, known). gfx90a too, since a table's
    // entry is a code address of the flow: its AGPRs share the VGPRs' numbers there, so no VGPR
    // write replaces the entry the waterfall loaded (a refusal on a right input, known, of
    // `flow_exec`'s gfx9 rule). The other three prove.
    let four = PatchOptions {
        targets: ["gfx1030", "gfx1100", "gfx1200"].map(String::from).to_vec(),
        asserts: true,
    };
    let gfx90a = PatchOptions {
        targets: vec!["gfx90a".to_string()],
        asserts: true,
    };
    for suite in ["sid", "rocm7.2"] {
        let rel = format!("{suite}/indirect-multi.so");
        let dir = tempfile::tempdir().unwrap();
        let err = patch_file(&fixture(&rel), &dir.path().join("out"), &asserts())
            .expect_err("gfx803 is refused");
        assert!(
            format!("{err:#}").contains("gfx803")
                && format!("{err:#}").contains("kernarg segment pointer cannot be followed"),
            "{err:#}"
        );
        let err = patch_file(&fixture(&rel), &dir.path().join("out90a"), &gfx90a)
            .expect_err("gfx90a is refused");
        assert!(
            format!("{err:#}").contains("kernarg segment pointer cannot be followed"),
            "{err:#}"
        );
        let rec = check_with(&rel, 3, 1, &four);
        let mut procs: Vec<&str> = rec.images.iter().map(|i| i.processor.as_str()).collect();
        procs.sort();
        assert_eq!(procs, ["gfx1030", "gfx1100", "gfx1200"]);
        for img in &rec.images {
            assert_eq!(img.kernels.len(), 1);
            assert_eq!(img.kernels[0].name, "k_table");
            // The path went through the table; the proof followed the indirect call.
            assert!(
                img.cut_paths[0].before.contains("[op_table]"),
                "{:?}",
                img.cut_paths
            );
        }
    }
    // clang 17 (trixie) saves the VGPR whose lanes hold op_checked's return address to scratch:
    // once a table call is taken, a code address that leaves the registers refuses (read back,
    // it would be a value nothing follows: the eleventh review's `retspill`, `fnspill`). A
    // refusal of a right input, known; clang 21 and 22 above keep it in v40 and prove.
    let dir = tempfile::tempdir().unwrap();
    let err = patch_file(
        &fixture("trixie/indirect.so"),
        &dir.path().join("out"),
        &asserts(),
    )
    .expect_err("clang 17's spill refuses");
    let text = format!("{err:#}");
    assert!(
        text.contains("a code or data address leaves the registers")
            && text.contains("_Z10op_checkedii")
            && !dir.path().join("out").exists(),
        "{text}"
    );
}

#[test]
fn asserts_in_a_compressed_bundle() {
    let rec = check("sid/indirect-ccob.so", 1, 1);
    let img = &rec.images[0];
    assert!(img.container.starts_with("ccob-"));
    assert_eq!(img.instructions[0].file_offset, None);
}

#[test]
fn asserts_leave_the_code_of_a_provable_image_alone() {
    // The whole-image proof holds: --asserts changes nothing but what patch always changed.
    let data = std::fs::read(fixture("patch/dispatch-v6-gfx1100.co")).unwrap();
    let (with, rec) = patch_bytes("d", &data, &asserts()).unwrap();
    let (without, _) = patch_bytes("d", &data, &PatchOptions::default()).unwrap();
    assert_eq!(with, without);
    assert!(rec.images[0].instructions.is_empty() && rec.images[0].cut_paths.is_empty());
    assert_eq!(rec.unverified, rcclfix::patch::UNVERIFIED);
}

#[test]
fn asserts_keep_the_printf_refusal() {
    for rel in [
        "sid/kernels.so",
        "rocm7.2/kernels.so",
        "trixie/kernels.so",
        "sid/kernels-ccob.so",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let err = patch_file(&fixture(rel), &dir.path().join("out"), &asserts()).unwrap_err();
        let r = err
            .downcast_ref::<PatchRefused>()
            .unwrap_or_else(|| panic!("{rel}: {err:#}"));
        assert_eq!(r.refusal.kind, RefusalKind::UsesHostcall, "{rel}: {err}");
        assert_eq!(r.refusal.kernels, ["k_printf"], "{rel}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains("still reaches a hostcall user") && msg.contains("MSG_INTERRUPT"),
            "{msg}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{rel}: something was written"
        );
    }
    // No handler at all: the whole-image refusal, and it says so.
    let err = patch_bytes(
        "p",
        &std::fs::read(fixture("patch/printf-v6.co")).unwrap(),
        &asserts(),
    )
    .unwrap_err();
    assert_eq!(err.refusal.kind, RefusalKind::UsesHostcall);
    assert!(
        err.to_string().contains("defines no device-assert handler"),
        "{err}"
    );
}

/// A small deterministic generator (xorshift64*), so the mutation set is the same every run.
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Mutation test: 1–3 random bytes of a fixture flipped (anywhere, with a bias towards the
/// handler's code and the metadata), then `patch --asserts`: each mutant is refused or patched,
/// never panics, and a patched one differs from its own input only at the instructions and notes
/// its record lists.
#[test]
fn asserts_mutants_never_change_unlisted_bytes() {
    for (rel, seed) in [
        ("patch/assert-v6.co", 0x9E37_79B9_7F4A_7C15u64),
        ("sid/indirect.so", 0xD1B5_4A32_D192_ED03),
    ] {
        let good = std::fs::read(fixture(rel)).unwrap();
        let rec = patch_bytes(rel, &good, &asserts()).unwrap().1;
        // Hot spots: the rewritten entries and the notes, file offsets.
        let hot: Vec<(u64, u64)> = allowed(&rec);
        let mut s = seed;
        let (mut patched, mut refused) = (0, 0);
        for _ in 0..400 {
            let mut bad = good.clone();
            for _ in 0..=(next(&mut s) % 3) {
                let at = if next(&mut s).is_multiple_of(2) {
                    let (a, b) = hot[(next(&mut s) % hot.len() as u64) as usize];
                    (a + next(&mut s) % (b - a + 64)).min(good.len() as u64 - 1) as usize
                } else {
                    (next(&mut s) % good.len() as u64) as usize
                };
                bad[at] ^= (next(&mut s) % 255 + 1) as u8;
            }
            match patch_bytes("mutant", &bad, &asserts()) {
                Ok((out, r)) => {
                    patched += 1;
                    only_listed_bytes_differ(rel, &bad, &out, &allowed(&r));
                    for img in &r.images {
                        for i in &img.instructions {
                            assert_eq!(i.new, trap_hex(&img.processor));
                        }
                    }
                }
                Err(_) => refused += 1,
            }
        }
        assert!(
            patched > 50 && refused > 0,
            "{rel}: {patched} patched, {refused} refused"
        );
    }
}

#[test]
fn asserts_cli_explains_and_says_what_is_unverified() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.so");
    let o = crate::support::rcclfix()
        .env_remove("RUST_LOG")
        .args([
            "patch",
            fixture("sid/indirect.so").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--asserts", "--explain"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("rewrote __assert_fail at 0x")
            && stdout.contains("device-assert handler)")
            && stdout.contains("-> 020090bf0000b0bf… (s_trap 2; s_endpgm over the whole extent)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no longer reaches a hostcall user: reaches an indirect call in k_table")
            && stdout.contains("through it: k_table → [op_table] _Z10op_checkedii → __assert_fail"),
        "{stdout}"
    );
    assert!(
        stderr.contains("a failing device assert still aborts")
            && stderr.contains("rcclfix verify"),
        "{stderr}"
    );
    let o = crate::support::rcclfix()
        .args(["patch", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("--asserts") && help.contains("NOT verified on AMD hardware"),
        "{help}"
    );
    // The JSON record lists the instruction with its offsets.
    let o = crate::support::rcclfix()
        .args([
            "patch",
            fixture("patch/assert-v6.co").to_str().unwrap(),
            "--out",
        ])
        .arg(dir.path().join("a.co"))
        .args(["--asserts", "--json", "--record"])
        .arg(dir.path().join("a.json"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // --record writes the same document.
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("a.json")).unwrap()).unwrap();
    assert_eq!(r, v);
    assert_eq!(v["schema_version"], 3);
    assert_eq!(v["asserts"], true);
    let i = &v["images"][0]["instructions"][0];
    assert_eq!(i["symbol"], "__assert_fail");
    assert_eq!(i["file_offset"], i["code_object_offset"]);
    assert_eq!(v["images"][0]["cut_paths"][0]["kernel"], "assertKernel");
}

/// The real RCCL 2.21.5 control builds (no NDEBUG) in `$RCCLFIX_CONTROL_LIBS`, as `rcclfix prove`
/// builds them now: 4 of 124 gfx1100 kernels declare, through `__assert_fail`, of which the image
/// holds two local copies (one per device-link partition; both are handlers). `patch --asserts`
/// refuses them, and writes nothing: no VGPR write is taken as certain (one under `exec` keeps the
/// other lanes), so the code addresses a caller leaves in VGPRs (the table call's entry, the
/// function pointers of the waterfall) stay in a callee's VGPR values, and a callee's branch on
/// a value loaded from LDS at an address computed from one such VGPR is a branch the flow cannot
/// show launders no code address (`ncclDevFunc_ReduceScatter_RING_SIMPLE_SumPostDiv_u64` at
/// 0x10205a0 on gfx1100). That is a refusal of a right input (an over-approximation, not a false
/// proof): when the flow knows which VGPR writes cover every lane a later read sees, this test
/// must show the patch
/// (every declaring kernel rewritten, `llvm-readelf --notes` with none declaring, the code
/// objects differing only at the listed instructions, `s_trap 2; s_endpgm` at each entry).
#[test]
#[ignore = "needs RCCLFIX_CONTROL_LIBS: run with RCCLFIX_CONTROL_LIBS=<folder of librccl-2.21.5-*-control-gfx1100.so> (cargo xtask test runs ignored tests whose input is there)"]
fn slow_rccl_control_builds_patch_with_asserts() {
    let libs = crate::support::control_libs();
    for lib in libs {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let err = patch_file(&lib, &d.join("out.so"), &asserts()).unwrap_err();
        let msg = format!("{err:#}");
        for kernel in [
            "ncclDevKernel_Generic",
            "ncclDevKernel_Generic_4",
            "ncclDevKernelDebug_Generic",
            "ncclDevKernelDebug_Generic_4",
        ] {
            assert!(msg.contains(kernel), "{lib:?}: {msg}");
        }
        // Refused by the flow of the kernarg segment pointer, not before it (where in the code
        // moves as the flow gets more precise: `docs/patch.md` says where it is now).
        assert!(
            msg.contains("the kernarg segment pointer cannot be followed to a proof"),
            "{lib:?}: {msg}"
        );
        assert!(!d.join("out.so").exists(), "{lib:?}: something was written");
        let rep = scan_bytes(
            "control.so",
            &std::fs::read(&lib).unwrap(),
            &ScanOptions::default(),
        )
        .unwrap();
        let declaring: usize = rep
            .files
            .iter()
            .flat_map(|f| f.images.iter())
            .filter(|i| i.processor == "gfx1100")
            .map(|i| i.kernels.iter().filter(|k| k.declares_hostcall).count())
            .sum();
        assert_eq!(declaring, 4, "{lib:?}");
    }
}

/// A build folder whose manifest's `patched` record lists rewritten assert entries (the record
/// `build` stores): the `.deb` description and the wheel's metadata say that the device asserts
/// trap without their message and that this is not verified on AMD hardware.
#[test]
fn packages_of_an_asserts_patch_say_so() {
    use crate::package::{build_folder, fixtures, ok, package, tool};
    use rcclfix::manifest::Manifest;
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let rec = patch_bytes(
        "assert-v6.co",
        &std::fs::read(fixture("patch/assert-v6.co")).unwrap(),
        &asserts(),
    )
    .unwrap()
    .1;
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    m.patched = Some(serde_json::to_value(&rec).unwrap());
    m.save(&dir.join("manifest.json")).unwrap();
    assert!(m.asserts_rewritten() >= 1);
    let paths = package(&dir, &t.path().join("pkgs"), &["--format", "deb,whl"]);
    let d = ok(std::process::Command::new("dpkg-deb")
        .arg("--field")
        .arg(&paths[0])
        .arg("Description"));
    let d = d.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(d.contains(rcclfix::package::ASSERTS_PROVENANCE), "{d}");
    let mut z = zip::ZipArchive::new(std::fs::File::open(&paths[1]).unwrap()).unwrap();
    let name = (0..z.len())
        .map(|i| z.by_index(i).unwrap().name().to_owned())
        .find(|n| n.ends_with(".dist-info/METADATA"))
        .unwrap();
    let mut meta = String::new();
    std::io::Read::read_to_string(&mut z.by_name(&name).unwrap(), &mut meta).unwrap();
    assert!(
        meta.contains(rcclfix::package::ASSERTS_PROVENANCE),
        "{meta}"
    );
}
