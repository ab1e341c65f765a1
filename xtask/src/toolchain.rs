//! Test prerequisite: the toolchain rootfs the slow tests build in.
//!
//! `cargo xtask toolchain [NAME]` (default `debian-trixie`) runs `rcclfix toolchain build NAME`,
//! which debootstraps `$RCCLFIX_HOME/toolchains/NAME` (default `~/.cache/rcclfix`) from the host's
//! Debian mirror, or returns at once when the stamp matches `containers/NAME/toolchain.toml`.
//! Needs root (debootstrap); about a minute and 1.3 GB on first run.

use xshell::{cmd, Shell};

/// The toolchain the tests use.
pub const TEST_TOOLCHAIN: &str = "debian-trixie";

/// Build (or confirm) toolchain `name` through rcclfix itself.
pub fn ensure(sh: &Shell, name: &str) -> anyhow::Result<()> {
    cmd!(
        sh,
        "cargo run --quiet --locked --bin rcclfix -- toolchain build {name}"
    )
    .run()?;
    Ok(())
}

/// `cargo xtask toolchain [NAME]`.
pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    ensure(
        sh,
        rest.first().map(String::as_str).unwrap_or(TEST_TOOLCHAIN),
    )
}
