//! `cargo xtask <task>`: developer tasks. One file per task; this file only dispatches.
//!
//! Tasks:
//! - `test`: install the test prerequisites (Debian packages from `.ci/apt.d/`, the toolchain
//!   rootfs, the Debian RCCL test inputs) and run every test. README's test command; `.ci/run`
//!   calls it.
//! - `toolchain [NAME]`: build the toolchain rootfs the slow tests use (`rcclfix toolchain build`).
//! - `fixtures`: compile the scanner's HIP test fixtures with the Debian toolchains.
//! - `inputs [--bench]`: download the Debian packages the slow tests (and the scan benchmark) read.
//! - `bench-scan`: rcclfix scan vs the LLVM pipeline (objcopy → bundler → readelf), and raw zstd.
//! - `bench-recompress`: patch's zstd refit of a CCOB against one compression (the floor) and the
//!   old level-by-level search.
//! - `fixtures-patch`: regenerate `tests/fixtures/patch/` from our HIP sources in a toolchain rootfs.
//! - `doctor-fixtures`: compile doctor's clean-library fixture (`tests/data/doctor/src/plain.hip`).
//! - `comgr-reader`: build the scanner tests' comgr-based metadata reader
//!   (`tests/fixtures/comgr/comgr_kernels.cpp` → `target/comgr-reader/comgr-kernels`).
//! - `fixtures-package`: compile the stripper's unstripped library fixture (`tests/fixtures/package/`).
//! - `bench-build`: `rcclfix build` against bare cmake + ninja in the same toolchain, and the
//!   no-op rebuild, on the miniature HIP project; `--slow`: on real RCCL, with the ETA measured.
//! - `bench-verify`: `rcclfix verify`'s speed and busbw against nccl-tests, on two GPUs.
//! - `patch-sweep`: generated HIP programs compiled with the real clang, `rcclfix patch` and
//!   `patch --asserts` on each, checked against an LLVM-based reachability (issue 39).
//! - `wheel [--out-dir DIR]`: the `pip install`-able wheel carrying the release `rcclfix`, its man
//!   pages and shell completions (`target/wheels/rcclfix-<ver>-py3-none-manylinux_2_N_x86_64.whl`).
//! - `docs [--out-dir DIR]`: the release `rcclfix`'s shell completions and man pages, generated
//!   from its clap definitions (`target/self-docs/{completions,man/man1}/`).

mod bench_build;
mod bench_build_rccl;
mod bench_build_timing;
mod bench_recompress;
mod bench_scan;
mod bench_scan_deb;
mod bench_verify;
mod comgr_reader;
mod docs;
mod doctor_fixtures;
mod fixtures;
mod fixtures_package;
mod fixtures_patch;
mod inputs;
mod lint_ci;
mod patch_sweep;
/// rcclfix's own `src/paths.rs` (std only), so the xtask and rcclfix agree on `RCCLFIX_HOME`.
#[allow(dead_code)]
#[path = "../../src/paths.rs"]
mod paths;
mod test;
mod toolchain;
mod wheel;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let task = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let sh = xshell::Shell::new()?;
    sh.change_dir(project_root());
    match task.as_str() {
        "test" => test::run(&sh, &rest),
        "toolchain" => toolchain::run(&sh, &rest),
        "fixtures" => fixtures::run(&sh, &rest),
        "inputs" => inputs::run(&sh, &rest),
        "bench-scan" => bench_scan::run(&sh, &rest),
        "bench-recompress" => bench_recompress::run(&sh, &rest),
        "fixtures-patch" => fixtures_patch::run(&sh, &rest),
        "doctor-fixtures" => doctor_fixtures::run(&sh, &rest),
        "comgr-reader" => comgr_reader::run(&sh, &rest),
        "fixtures-package" => fixtures_package::run(&sh, &rest),
        "ci-tools" => lint_ci::ci_tools(&sh),
        "bench-verify" => bench_verify::run(&sh, &rest),
        "bench-build" => bench_build::run(&sh, &rest),
        "patch-sweep" => patch_sweep::run(&sh, &rest),
        "wheel" => wheel::run(&sh, &rest),
        "docs" => docs::run(&sh, &rest),
        _ => anyhow::bail!("unknown task {task:?}; tasks: test, toolchain, fixtures, inputs, bench-scan, bench-recompress, fixtures-patch, doctor-fixtures, comgr-reader, fixtures-package, ci-tools, bench-verify, bench-build, patch-sweep, wheel, docs"),
    }
}

/// The repository root (the parent of `xtask/`).
pub fn project_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}
