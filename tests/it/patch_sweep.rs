//! Slow: a small `patch-sweep` (the xtask's driver, generator and oracle, compiled here by path):
//! 50 generated HIP programs compiled for gfx1100, gfx90a, gfx942, gfx1030 and gfx1201 at -O0 and
//! -O3 with the `debian-sid` clang, `rcclfix patch` and `patch --asserts` on each code object,
//! and not one false proof: no kernel whose `hidden_hostcall_buffer` was rewritten while the
//! generator's truth or the `llvm-objdump`-based oracle has a path to hostcall; and `rcclfix
//! decode` agrees with `llvm-objdump -d` on every instruction (length, control class, and every
//! register llvm names among those rcclfix says it may read or write). `cargo xtask patch-sweep` runs the full
//! sweep (`docs/patch-sweep.md`).

#[allow(dead_code)]
#[path = "../../xtask/src/patch_sweep/decode_check.rs"]
mod decode_check;
#[allow(dead_code)]
#[path = "../../xtask/src/patch_sweep/gen.rs"]
mod gen;
#[allow(dead_code)]
#[path = "../../xtask/src/patch_sweep/oracle.rs"]
mod oracle;
#[allow(dead_code)]
#[path = "../../xtask/src/patch_sweep/sweep.rs"]
mod sweep;

use crate::support::{in_toolchain, repo, require_tool, slow_or_note, BIN};

#[test]
fn generated_programs_get_no_false_proof() {
    if !slow_or_note() {
        return;
    }
    require_tool("sid", "clang++-21");
    require_tool("sid", "llvm-objdump-21");
    let work = repo().join("target/patch-sweep-test");
    if work.exists() {
        std::fs::remove_dir_all(&work).unwrap();
    }
    std::fs::create_dir_all(&work).unwrap();
    let settings = sweep::Settings {
        programs: 50,
        per_batch: 10,
        seed: 39,
        targets: ["gfx1100", "gfx90a", "gfx942", "gfx1030", "gfx1201"]
            .map(String::from)
            .to_vec(),
        opts: vec!["O0".into(), "O3".into()],
        bin: BIN.into(),
        work: work.clone(),
    };
    let run = |target: &str, dir: &std::path::Path, argv: &[&str]| {
        assert_eq!(
            sweep::llvm_version(target),
            "21",
            "{target}: sid compiles it"
        );
        Ok(in_toolchain("sid", dir, argv))
    };
    let (report, findings) = sweep::sweep(&settings, &run).unwrap();
    eprintln!("{report}");
    // The decoder was compared on every code object (a sweep that compared nothing passes
    // nothing).
    assert!(
        report.lines().any(|l| l.starts_with("total")
            && l.split_whitespace()
                .rev()
                .nth(1)
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 10_000)),
        "{report}"
    );
    let lines: Vec<String> = findings
        .iter()
        .map(|f| {
            format!(
                "{}: {} kernel {}\n    oracle: {}\n    truth:  {}",
                f.what,
                f.file.display(),
                f.kernel,
                f.oracle.as_deref().unwrap_or("no path"),
                f.truth.as_deref().unwrap_or("no path")
            )
        })
        .collect();
    assert!(
        lines.is_empty(),
        "{} finding(s) (sources kept in {}):\n{}",
        lines.len(),
        work.display(),
        lines.join("\n")
    );
}
