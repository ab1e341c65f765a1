//! `cargo xtask <task>`: developer tasks. One file per task; this file only dispatches.
//!
//! Tasks:
//! - `test`: install the test prerequisites (Debian packages from `.ci/apt.d/`, the toolchain
//!   rootfs, the Debian RCCL test inputs) and run every test. README's test command; `.ci/run`
//!   calls it.
//! - `fixtures`: compile the scanner's HIP test fixtures with the Debian toolchains.
//! - `bench-scan`: rcclfix scan vs the LLVM pipeline (objcopy → bundler → readelf), and raw zstd.

mod bench_scan;
mod fixtures;
mod inputs;
mod test;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let task = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let sh = xshell::Shell::new()?;
    sh.change_dir(project_root());
    match task.as_str() {
        "test" => test::run(&sh, &rest),
        "fixtures" => fixtures::run(&sh, &rest),
        "bench-scan" => bench_scan::run(&sh, &rest),
        _ => anyhow::bail!("unknown task {task:?}; tasks: test, fixtures, bench-scan"),
    }
}

/// The repository root (the parent of `xtask/`).
pub fn project_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}
