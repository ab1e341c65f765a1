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

use xshell::Shell;

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    crate::wheel::run_release_subcommand(sh, rest, "docs", "self-docs", "self-docs")
}
