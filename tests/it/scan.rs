//! Scanner tests: golden outputs for every fixture (`tests/fixtures/<suite>/*` →
//! `tests/data/scan/<suite>/*.scan`, regenerated with `RCCLFIX_UPDATE=1`), verdicts per fixture,
//! malformed inputs, and (with `RCCLFIX_SLOW_TESTS=1`) the differential test against the LLVM
//! tools and the real Debian librccl1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rcclfix::scan::{self, ScanOptions, ScanReport, TargetState};

#[path = "scan_callgraph.rs"]
mod callgraph;
#[path = "scan_differential.rs"]
mod differential;
#[path = "scan_malformed.rs"]
mod malformed;
#[path = "scan_scale.rs"]
mod scale;

pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Fixture path relative to the crate root (so reports and goldens carry stable paths).
pub(crate) fn fixture(rel: &str) -> PathBuf {
    let p = Path::new("tests/fixtures").join(rel);
    assert!(
        root().join(&p).exists(),
        "missing fixture {}; run `cargo xtask fixtures`",
        p.display()
    );
    p
}

pub(crate) fn scan(p: &Path) -> ScanReport {
    scan::scan_path(p, &ScanOptions::default())
        .unwrap_or_else(|e| panic!("scan {}: {e:#}", p.display()))
}

/// Render a verdict compactly: `gfx1100: declares k_assert k_printf` / `clean 3` / `unknown`.
pub(crate) fn verdicts(r: &ScanReport) -> String {
    let states = r.target_states(&r.processors());
    let mut out = Vec::new();
    for (t, s) in states {
        let v = match s {
            TargetState::Declares { kernels } => {
                let mut names: Vec<_> = kernels
                    .iter()
                    .map(|k| k.rsplit(": ").next().unwrap().to_owned())
                    .collect();
                names.sort();
                format!("declares {}", names.join(" "))
            }
            TargetState::Clean { kernels } => format!("clean {kernels}"),
            TargetState::Unknown { .. } => "unknown".to_owned(),
            TargetState::NoCode { .. } => "no code".to_owned(),
        };
        out.push(format!("{t}: {v}"));
    }
    out.join("; ")
}

/// `check(input, expect)`: scan a fixture and compare its per-target verdicts.
fn check(rel: &str, expect: &str) {
    let r = scan(&fixture(rel));
    assert_eq!(verdicts(&r), expect, "{rel}");
}

// trixie: clang-17, code object v4, plain bundles.
#[test]
fn trixie_kernels() {
    check("trixie/kernels.so", "gfx1100: declares k_assert k_printf");
}
#[test]
fn trixie_kernels_ndebug() {
    check("trixie/kernels-ndebug.so", "gfx1100: declares k_printf");
}
#[test]
fn trixie_kernels_o0() {
    check(
        "trixie/kernels-O0.so",
        "gfx1100: declares k_assert k_plain k_printf",
    );
}
#[test]
fn trixie_indirect() {
    check("trixie/indirect.so", "gfx1100: declares k_table");
}
#[test]
fn trixie_two_translation_units() {
    check("trixie/two-tu.so", "gfx1100: declares k_printf k_table");
}
#[test]
fn trixie_rdc_linked() {
    check("trixie/rdc.so", "gfx1100: declares k_rdc_assert");
}
#[test]
fn trixie_rdc_object_is_bitcode() {
    check("trixie/rdc_a.o", "gfx1100: unknown");
    let r = scan(&fixture("trixie/rdc_b.o"));
    assert_eq!(r.files[0].kind, "rdc-object");
    assert!(
        r.files[0].unreadable[0]
            .reason
            .contains("not yet linked (bitcode"),
        "{:?}",
        r.files[0].unreadable
    );
}
#[test]
fn trixie_bare_code_object() {
    check("trixie/kernels.co", "gfx1100: declares k_assert k_printf");
}
#[test]
fn trixie_multi_target() {
    check("trixie/multi.so", "gfx1030: declares k_assert k_printf; gfx1100: declares k_assert k_printf; gfx90a: declares k_assert k_printf");
    let r = scan(&fixture("trixie/multi.so"));
    let ids: Vec<_> = r.files[0]
        .images
        .iter()
        .map(|i| i.target_id.as_str())
        .collect();
    assert!(ids.contains(&"gfx90a:xnack-"), "{ids:?}");
}

/// Code object v4 puts `hidden_none` in the hostcall slot (hidden block + 24) when the kernel uses
/// implicit arguments but not hostcall: that is not a declaration.
#[test]
fn trixie_implicit_hidden_none_is_not_a_declaration() {
    check("trixie/implicit.so", "gfx1100: clean 1");
    let r = scan(&fixture("trixie/implicit.so"));
    let k = &r.files[0].images[0].kernels[0];
    let base = k.hidden_args.iter().map(|a| a.offset).min().unwrap();
    let slot = k
        .hidden_args
        .iter()
        .find(|a| a.offset == base + 24)
        .unwrap();
    assert_eq!(slot.value_kind, "hidden_none");
    assert!(!k.declares_hostcall);
}
#[test]
fn sid_implicit() {
    check("sid/implicit.so", "gfx1100: clean 1");
}

// sid: clang-21, code object v5, plain and CCOB.
#[test]
fn sid_kernels() {
    check("sid/kernels.so", "gfx1100: declares k_assert k_printf");
}
#[test]
fn sid_kernels_ndebug() {
    check("sid/kernels-ndebug.so", "gfx1100: declares k_printf");
}
#[test]
fn sid_kernels_o0() {
    check(
        "sid/kernels-O0.so",
        "gfx1100: declares k_assert k_plain k_printf",
    );
}
#[test]
fn sid_ccob_v2() {
    check("sid/kernels-ccob.so", "gfx1100: declares k_assert k_printf");
    let r = scan(&fixture("sid/kernels-ccob.so"));
    assert_eq!(r.files[0].images[0].container, "ccob-v2-zstd");
    // hipcc 7.0.2 (clang-21) writes EI_ABIVERSION 4, i.e. code object v6, with amdhsa.version [1, 2].
    assert_eq!(r.files[0].images[0].code_object_version, 6);
    assert_eq!(r.files[0].images[0].metadata_version, [1, 2]);
}
#[test]
fn sid_ccob_v3() {
    check(
        "sid/kernels-ccob3.so",
        "gfx1100: declares k_assert k_printf",
    );
    let r = scan(&fixture("sid/kernels-ccob3.so"));
    assert_eq!(r.files[0].images[0].container, "ccob-v3-zstd");
}
#[test]
fn sid_two_translation_units_compressed() {
    check(
        "sid/two-tu-ccob.so",
        "gfx1100: declares k_assert k_printf k_table",
    );
}
#[test]
fn sid_multi_target_generic() {
    let r = scan(&fixture("sid/multi-ccob.so"));
    let states = r.target_states(&[
        "gfx1100".to_string(),
        "gfx1101".to_string(),
        "gfx1200".to_string(),
    ]);
    // gfx1101 has no native image but the gfx11-generic one covers it.
    assert!(
        matches!(states["gfx1101"], TargetState::Declares { .. }),
        "{states:?}"
    );
    assert!(
        matches!(&states["gfx1200"], TargetState::NoCode { reason } if reason == "no device code for gfx1200"),
        "{states:?}"
    );
    let filtered = scan::scan_path(
        &fixture("sid/multi-ccob.so"),
        &ScanOptions {
            targets: vec!["gfx1100".into()],
        },
    )
    .unwrap();
    let mut procs = filtered.processors();
    procs.sort();
    assert_eq!(procs, ["gfx11-generic", "gfx1100"]);
}

// rocm7.2: the debian-rocm7.2 toolchain (hipcc 7.2.4, clang 22, HIP 7.2.4): code object v6 by
// default, and `--offload-compress` writes CCOB v3 without being asked.
#[test]
fn rocm72_verdicts_match_sid() {
    for (f, want) in [
        ("implicit.so", "gfx1100: clean 1"),
        ("kernels.so", "gfx1100: declares k_assert k_printf"),
        ("kernels-ndebug.so", "gfx1100: declares k_printf"),
        (
            "kernels-O0.so",
            "gfx1100: declares k_assert k_plain k_printf",
        ),
        ("kernels-ccob.so", "gfx1100: declares k_assert k_printf"),
        ("kernels-ccob3.so", "gfx1100: declares k_assert k_printf"),
        ("kernels.co", "gfx1100: declares k_assert k_printf"),
        (
            "two-tu-ccob.so",
            "gfx1100: declares k_assert k_printf k_table",
        ),
    ] {
        check(&format!("rocm7.2/{f}"), want);
        // The ROCm 7 compiler gives the verdicts hipcc 7.0.2 (clang 21) gives.
        check(&format!("sid/{f}"), want);
    }
}
#[test]
fn rocm72_code_object_v6_and_ccob_v3_by_default() {
    let r = scan(&fixture("rocm7.2/kernels-ccob.so"));
    let i = &r.files[0].images[0];
    assert_eq!(i.container, "ccob-v3-zstd");
    assert_eq!(i.code_object_version, 6);
    assert_eq!(i.metadata_version, [1, 2]);
    let r = scan(&fixture("rocm7.2/kernels.so"));
    assert_eq!(r.files[0].images[0].container, "plain");
    assert_eq!(r.files[0].images[0].code_object_version, 6);
}
#[test]
fn rocm72_multi_target_generic() {
    let r = scan(&fixture("rocm7.2/multi-ccob.so"));
    let states = r.target_states(&["gfx1101".to_string(), "gfx1200".to_string()]);
    assert!(
        matches!(states["gfx1101"], TargetState::Declares { .. }),
        "{states:?}"
    );
    assert!(
        matches!(&states["gfx1200"], TargetState::NoCode { reason } if reason.contains("no device code for gfx1200")),
        "{states:?}"
    );
}

/// The gate API: a clean NDEBUG build of a plain kernel only is `Clean`; unknown never passes.
/// The gate API: a clean NDEBUG build of a plain kernel only is `Clean`; a target with no image
/// is `NoCode` (not `Unknown`: everything was read), and neither passes.
#[test]
fn gate_states() {
    let r = scan(&fixture("trixie/kernels-ndebug.so"));
    let s = r.target_states(&["gfx1100".into(), "gfx1030".into()]);
    assert!(matches!(s["gfx1100"], TargetState::Declares { .. }));
    assert!(matches!(s["gfx1030"], TargetState::NoCode { .. }), "{s:?}");
    assert_eq!(
        rcclfix::scan::output::exit_code(&[("gfx1030".to_owned(), s["gfx1030"].clone())].into(), 0),
        3,
        "a requested target with no code is not clean"
    );
    let mut clean = r.clone();
    for f in &mut clean.files {
        for i in &mut f.images {
            i.kernels.retain(|k| !k.declares_hostcall);
        }
    }
    assert_eq!(
        clean.target_states(&["gfx1100".into()])["gfx1100"],
        TargetState::Clean { kernels: 2 }
    );
}

/// Golden outputs: the `-v` table for every fixture.
#[test]
fn golden() {
    let update = std::env::var_os("RCCLFIX_UPDATE").is_some();
    let mut failures = Vec::new();
    let mut n = 0;
    for suite in ["trixie", "sid", "rocm7.2"] {
        let dir = root().join("tests/fixtures").join(suite);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let rel = p.strip_prefix(root()).unwrap().to_owned();
            let r = scan(&rel);
            let states: BTreeMap<_, _> = r.target_states(&r.processors());
            let got = rcclfix::scan::output::render_table(&r, &states, true);
            let golden = root()
                .join("tests/data/scan")
                .join(suite)
                .join(format!("{}.scan", p.file_name().unwrap().to_string_lossy()));
            n += 1;
            if update {
                std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
                std::fs::write(&golden, &got).unwrap();
            } else {
                let want = std::fs::read_to_string(&golden).unwrap_or_default();
                if want != got {
                    failures.push(format!(
                        "{}:\n--- want\n{want}\n--- got\n{got}",
                        golden.display()
                    ));
                }
            }
        }
    }
    assert!(n >= 40, "expected every fixture, found {n}");
    assert!(
        failures.is_empty(),
        "golden mismatch (RCCLFIX_UPDATE=1 regenerates):\n{}",
        failures.join("\n")
    );
}

/// JSON round-trips through the model types and carries the schema version.
#[test]
fn json_schema() {
    let r = scan(&fixture("trixie/kernels.so"));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["schema_version"], 3);
    let back: ScanReport = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
    let k = &r.files[0].images[0].kernels;
    let assert_k = k.iter().find(|k| k.name == "k_assert").unwrap();
    assert!(assert_k
        .hidden_args
        .iter()
        .any(|a| a.value_kind == "hidden_hostcall_buffer" && a.offset == 40));
    assert!(assert_k.why.as_deref().unwrap().contains("__assert_fail"));
}
