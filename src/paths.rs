//! Where rcclfix keeps its per-user data: the one `RCCLFIX_HOME` rule and the folders under it.
//!
//! This file uses only `std`: the xtask compiles it too (`#[path = "../../src/paths.rs"]` in
//! `xtask/src/main.rs`), so the tests, the xtask and rcclfix itself agree on every path without the
//! xtask building the whole crate.

use std::path::PathBuf;

/// The per-user data folder: `$RCCLFIX_HOME`, else `$XDG_CACHE_HOME/rcclfix`, else
/// `~/.cache/rcclfix` (`/tmp/.cache/rcclfix` when `HOME` is unset).
/// Holds the source cache, the toolchains, work folders, timing records and the user's lockfile.
pub fn home() -> PathBuf {
    if let Some(h) = std::env::var_os("RCCLFIX_HOME") {
        return PathBuf::from(h);
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("rcclfix");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".cache/rcclfix")
}

/// Local toolchains: `$RCCLFIX_HOME/toolchains/<name>/{rootfs,stamp.json}`.
pub fn toolchains_dir() -> PathBuf {
    home().join("toolchains")
}

/// The rootfs of local toolchain `name`: `$RCCLFIX_HOME/toolchains/<name>/rootfs`.
pub fn toolchain_rootfs(name: &str) -> PathBuf {
    toolchains_dir().join(name).join("rootfs")
}

/// The source cache (one bare repository per recipe URL): `$RCCLFIX_HOME/src`.
pub fn src_cache_dir() -> PathBuf {
    home().join("src")
}

/// Build work folders (`<recipe>-<targets>/{src,build,tmp,build.log}`): `$RCCLFIX_HOME/work`.
pub fn work_dir() -> PathBuf {
    home().join("work")
}

/// Timing records of finished builds (`<recipe>-<targets>.ninja_log`): `$RCCLFIX_HOME/records`.
pub fn records_dir() -> PathBuf {
    home().join("records")
}

/// The user's lockfile (commit and image pins): `$RCCLFIX_HOME/rcclfix.lock`.
pub fn user_lockfile() -> PathBuf {
    home().join("rcclfix.lock")
}

/// The user's engine settings, read instead of the embedded ones when present:
/// `$RCCLFIX_HOME/engines.toml`.
pub fn engines_toml() -> PathBuf {
    home().join("engines.toml")
}
