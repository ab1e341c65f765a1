//! The record each applied fix keeps, `$RCCLFIX_HOME/fixes/<id>/record.json` ([`FixRecord`], with
//! the pip and dpkg overlays' parts, [`PipFix`] and [`DpkgFix`]), and the folder that holds them:
//! its path, its IDs and its limits. Every apply writes one; `--list` and `--undo` read it back.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The folder under `$RCCLFIX_HOME` that keeps the originals.
pub const FIXES_DIR: &str = "fixes";
/// The largest `record.json` read.
pub const MAX_RECORD_BYTES: u64 = 64 << 10;
/// The most entries `--list` and `--undo --all` look at.
pub const MAX_FIXES: usize = 4096;
/// Version of [`FixRecord`].
pub const FIX_SCHEMA_VERSION: u32 = 1;

/// What one applied fix changed: `$RCCLFIX_HOME/fixes/<id>/record.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixRecord {
    /// [`FIX_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The fix's ID: 16 lowercase hex digits of sha256(path, NUL, original sha256).
    pub id: String,
    /// The file replaced (absolute, canonical when it was fixed).
    pub path: PathBuf,
    /// sha256 of the original, lowercase hex (the bytes kept in `original`).
    pub original_sha256: String,
    /// sha256 of the patched file written at `path`.
    pub patched_sha256: String,
    /// Size in bytes of both (the patch keeps the length).
    pub size: u64,
    /// The original's permission bits (`& 0o7777`), given back on undo.
    pub mode: u32,
    /// Whether `patch --asserts` made it (else plain `patch`).
    pub asserts: bool,
    /// The patch's `--target`s (empty: all).
    pub targets: Vec<String>,
    /// When it was applied, seconds since the Unix epoch.
    pub created_unix: u64,
    /// The rcclfix that applied it.
    pub rcclfix_version: String,
    /// How it was applied (absent in a record of the first slice: `replace`).
    #[serde(default)]
    pub mechanism: Mechanism,
    /// For [`Mechanism::Pip`]: what was installed where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pip: Option<PipFix>,
    /// For [`Mechanism::Dpkg`]: the overlay package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpkg: Option<DpkgFix>,
}

/// How a fix was applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// The file was replaced in place (a copy nobody owns); `original` holds its bytes.
    #[default]
    Replace,
    /// An overlay wheel was installed with the environment's pip; the copy is untouched.
    Pip,
    /// An overlay `.deb` diverting the copy was installed with apt.
    Dpkg,
}

/// What a pip fix installed: the `pip` part of a [`FixRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipFix {
    /// The interpreter whose pip installed the overlay (absolute).
    pub python: PathBuf,
    /// Its site-packages folder holding the owner's `RECORD` (absolute).
    pub site: PathBuf,
    /// The owner's `RECORD` (torch's), whose line for the copy must verify before and after.
    pub owner_record: PathBuf,
    /// The overlay's version, `1+<fix id>`.
    pub version: String,
    /// The wheel's file name, kept in `fixes/<id>/`.
    pub wheel: String,
    /// The SONAME the shipped copy was given, when it differs from the copy's.
    pub soname: Option<String>,
}

/// What a dpkg fix installed: the `dpkg` part of a [`FixRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpkgFix {
    /// The overlay package, `rcclfix-fix-<id>`.
    pub package: String,
    /// The package that owns the copy (`rccl`, `librccl1:amd64`).
    pub owner_package: String,
    /// Its version when the fix was applied.
    pub owner_version: String,
    /// The `.deb`'s file name, kept in `fixes/<id>/`.
    pub deb: String,
}

/// The fixes folder: `$RCCLFIX_HOME/fixes`.
pub fn fixes_dir() -> PathBuf {
    crate::paths::home().join(FIXES_DIR)
}

/// [`fixes_dir`], refused when it exists and is anything but a real folder (a link to a folder
/// elsewhere included): the kept originals never go through a link.
///
/// Errors: one line naming it and what it is.
pub fn checked_fixes_dir() -> anyhow::Result<PathBuf> {
    let dir = fixes_dir();
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(m) if m.file_type().is_symlink() => {
            anyhow::bail!("{}: a link, not a folder; refusing", dir.display())
        }
        Ok(m) => anyhow::bail!(
            "{}: not a folder ({}); refusing",
            dir.display(),
            crate::fsutil::file_kind(&m)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir),
        Err(e) => anyhow::bail!("cannot read {}: {e}", dir.display()),
    }
}

pub(super) fn fix_id(path: &Path, original_sha256: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(path.as_os_str().as_encoded_bytes());
    h.update([0u8]);
    h.update(original_sha256.as_bytes());
    hex::encode(h.finalize())[..16].to_string()
}

/// Whether `id` has the shape of a fix ID (16 lowercase hex digits).
pub fn valid_id(id: &str) -> bool {
    id.len() == 16
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
