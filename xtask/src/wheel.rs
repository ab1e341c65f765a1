//! `cargo xtask wheel [--out-dir DIR]`: the wheel that `pip install` takes, carrying the release
//! `rcclfix` executable (`rcclfix-<ver>-py3-none-manylinux_2_N_x86_64.whl`, N measured from the
//! executable's highest `GLIBC_2.N` symbol version) and, under the environment's `share/`, the
//! man pages and shell completions its `self-docs` writes (as `cargo xtask docs`).
//!
//! Builds `cargo build --release --locked --bin rcclfix`, then runs that binary's hidden
//! `self-wheel` subcommand, so the wheel is written by the same code the pip test
//! (`tests/it/pip_install.rs`) runs against the test build. Default folder: `target/wheels/`
//! under the cargo target folder (`CARGO_TARGET_DIR` if set). Prints the wheel's path on stdout.

use std::path::PathBuf;

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    run_release_subcommand(sh, rest, "wheel", "wheels", "self-wheel")
}

/// `cargo xtask TASK [--out-dir DIR]` for a task that is one hidden subcommand of the release
/// `rcclfix`: build it (`cargo build --release --locked --bin rcclfix`), run `rcclfix SUB
/// --out-dir DIR` (default `DIR`: `DEFAULT` under the cargo target folder, `CARGO_TARGET_DIR` if
/// set; a given one is taken relative to where the command was run) and print what it prints.
/// Shared by `wheel` and `docs`.
///
/// Errors: an unknown argument, `--out-dir` without a value, the build or the subcommand fails.
pub fn run_release_subcommand(
    sh: &Shell,
    rest: &[String],
    task: &str,
    default: &str,
    sub: &str,
) -> anyhow::Result<()> {
    let usage = format!("usage: cargo xtask {task} [--out-dir DIR]");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::project_root().join("target"));
    let mut out_dir = target.join(default);
    let mut args = rest.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out-dir" => {
                // Relative to where the command was run, not the repository root.
                out_dir = std::path::absolute(args.next().context(usage.clone())?)?;
            }
            "-h" | "--help" => {
                println!("{usage}");
                return Ok(());
            }
            _ => bail!("unknown argument {a:?}; {usage}"),
        }
    }
    cmd!(sh, "cargo build --release --locked --bin rcclfix").run()?;
    let bin = target.join("release/rcclfix");
    let printed = cmd!(sh, "{bin} {sub} --out-dir {out_dir}").read()?;
    println!("{printed}");
    Ok(())
}
