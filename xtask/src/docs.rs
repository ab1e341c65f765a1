//! `cargo xtask docs [--out-dir DIR]`: the shell completions and man pages of the release
//! `rcclfix`, generated from its clap definitions by its hidden `self-docs` subcommand
//! (`src/cmd/self_docs.rs`): `DIR/completions/{rcclfix.bash,_rcclfix,rcclfix.fish}` and
//! `DIR/man/man1/rcclfix.1` with one page per subcommand. The pip wheel (`cargo xtask wheel`)
//! carries the same files.
//!
//! Builds `cargo build --release --locked --bin rcclfix` (the build `cargo xtask wheel` and
//! README's install line use, so one build serves all three), then runs that binary. Default
//! folder: `target/self-docs/` under the cargo target folder (`CARGO_TARGET_DIR` if set). Prints
//! the written files' paths on stdout.

use std::path::PathBuf;

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let usage = "usage: cargo xtask docs [--out-dir DIR]";
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::project_root().join("target"));
    let mut out_dir = target.join("self-docs");
    let mut args = rest.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out-dir" => {
                // Relative to where the command was run, not the repository root.
                out_dir = std::path::absolute(args.next().context(usage)?)?;
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
    let paths = cmd!(sh, "{bin} self-docs --out-dir {out_dir}").read()?;
    println!("{paths}");
    Ok(())
}
