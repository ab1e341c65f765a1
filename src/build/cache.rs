//! The build's artifact cache: an output folder is reused when everything that decides the
//! library's bytes is unchanged and the library on disk is still the one its manifest names.
//!
//! The key ([`BuildKey`]) holds the recipe after defaults (its serde form), the pinned commit, each
//! patch's and extra file's sha256, the toolchain's content identity (the rootfs stamp's sha256, or
//! the image id of an image toolchain), the targets, the NDEBUG strategy, the CMake arguments, the
//! post-link patch switch and rcclfix's own version. `manifest.json` stores the key's inputs and its
//! sha256 ([`crate::manifest::CacheRecord`]); [`lookup`] compares them with the key of the build
//! about to run and, when they agree, checks the library's sha256 against the manifest.
//!
//! Engines are not in the key: a rootfs toolchain runs the same files under podman and bubblewrap.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::manifest::{FileDigest, Manifest};
use crate::recipe::Recipe;

/// Everything that decides the library's bytes (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuildKey {
    /// `CARGO_PKG_VERSION` of the rcclfix that builds (injection, checks and patch code change
    /// with it).
    pub rcclfix_version: String,
    /// The recipe as parsed, with defaults filled in (its serde JSON form).
    pub recipe: serde_json::Value,
    /// The pinned commit checked out (40 hex).
    pub commit: String,
    /// Each recipe patch with the sha256 of the text applied.
    pub patches: Vec<FileDigest>,
    /// Each `build.extra_files` path with the sha256 of its contents.
    pub extra_files: BTreeMap<String, String>,
    /// The toolchain's content identity: `sha256:` of a rootfs stamp, the image id of an image
    /// toolchain, or `host`.
    pub toolchain_id: String,
    /// The gfx targets built and gated, in the order given.
    pub targets: Vec<String>,
    /// NDEBUG strategy (kebab-case).
    pub ndebug_strategy: String,
    /// CMake arguments of the configure step (without a ccache launcher, which does not change
    /// the output).
    pub cmake_args: Vec<String>,
    /// Whether the post-link patch runs.
    pub post_link_patch: bool,
}

impl BuildKey {
    /// sha256 (lowercase hex) of the key's compact JSON form.
    pub fn sha256(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("a BuildKey serialises");
        hex::encode(sha2::Sha256::digest(&bytes))
    }

    /// The sha256 of each extra file of `recipe`, by path.
    pub fn extra_file_digests(recipe: &Recipe) -> BTreeMap<String, String> {
        recipe
            .build
            .extra_files
            .iter()
            .map(|(p, c)| (p.clone(), hex::encode(sha2::Sha256::digest(c.as_bytes()))))
            .collect()
    }

    /// The names of the top-level inputs that differ between `self` and the stored inputs `old`
    /// (e.g. `["commit", "toolchain_id"]`); every field when `old` does not parse as a key.
    pub fn changed_fields(&self, old: &serde_json::Value) -> Vec<String> {
        let new = serde_json::to_value(self).expect("a BuildKey serialises");
        let (Some(new), Some(old)) = (new.as_object(), old.as_object()) else {
            return vec!["(unreadable stored key)".into()];
        };
        new.iter()
            .filter(|(k, v)| old.get(*k) != Some(v))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// What [`lookup`] found in an existing output folder.
#[derive(Debug)]
pub enum Lookup {
    /// No output folder, or one without `manifest.json`: build.
    Missing,
    /// The folder's key and library match: reuse it.
    Hit(Box<Manifest>),
    /// The folder exists but cannot be reused; the reason is one line for the user.
    Stale(String),
}

/// Compare the output folder `dest` with `key`: its `manifest.json` must carry the same key and its
/// library must still hash to the manifest's sha256.
///
/// Never errors: an unreadable manifest or library is a [`Lookup::Stale`] with the reason (and then
/// rebuilt), never a hit.
pub fn lookup(dest: &Path, key: &BuildKey) -> Lookup {
    let mpath = dest.join("manifest.json");
    if !mpath.exists() {
        return Lookup::Missing;
    }
    let m = match Manifest::load(&mpath) {
        Ok(m) => m,
        Err(e) => return Lookup::Stale(format!("{e:#}")),
    };
    let Some(rec) = &m.cache else {
        return Lookup::Stale(format!(
            "{} was written without a build key (an older rcclfix)",
            mpath.display()
        ));
    };
    let want = key.sha256();
    if rec.key != want {
        let changed = key.changed_fields(&rec.inputs);
        return Lookup::Stale(format!(
            "the build inputs changed since {} was built ({} differ)",
            dest.display(),
            if changed.is_empty() {
                "key".into()
            } else {
                changed.join(", ")
            }
        ));
    }
    let lib = dest.join(&m.library.file);
    match crate::fsutil::sha256_file(&lib) {
        Ok(s) if s == m.library.sha256 => Lookup::Hit(Box::new(m)),
        Ok(s) => Lookup::Stale(format!(
            "{} has sha256 {s}, but its manifest.json says {} (modified after the build)",
            lib.display(),
            m.library.sha256
        )),
        Err(e) => Lookup::Stale(format!("cannot read the cached library: {e:#}")),
    }
}

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `2026-12-01 11:50:02 UTC` for a Unix time in seconds (proleptic Gregorian calendar; the
/// days-to-civil conversion of Howard Hinnant's public `chrono`-compatible date algorithms).
pub fn fmt_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BuildKey {
        BuildKey {
            rcclfix_version: "0.1.0".into(),
            recipe: serde_json::json!({"rccl_version": "0.1.0"}),
            commit: "a".repeat(40),
            patches: vec![],
            extra_files: BTreeMap::new(),
            toolchain_id: "sha256:00".into(),
            targets: vec!["gfx1100".into()],
            ndebug_strategy: "cxx-flags".into(),
            cmake_args: vec!["-DX=1".into()],
            post_link_patch: false,
        }
    }

    #[test]
    fn every_input_changes_the_key_and_is_named() {
        let base = key();
        let stored = serde_json::to_value(&base).unwrap();
        let mut variants: Vec<(&str, BuildKey)> = vec![];
        let mut k = base.clone();
        k.commit = "b".repeat(40);
        variants.push(("commit", k));
        let mut k = base.clone();
        k.toolchain_id = "sha256:01".into();
        variants.push(("toolchain_id", k));
        let mut k = base.clone();
        k.targets.push("gfx1101".into());
        variants.push(("targets", k));
        let mut k = base.clone();
        k.cmake_args.push("-DY=2".into());
        variants.push(("cmake_args", k));
        let mut k = base.clone();
        k.post_link_patch = true;
        variants.push(("post_link_patch", k));
        let mut k = base.clone();
        k.extra_files.insert("a.h".into(), "00".into());
        variants.push(("extra_files", k));
        let mut k = base.clone();
        k.rcclfix_version = "0.2.0".into();
        variants.push(("rcclfix_version", k));
        for (field, k) in variants {
            assert_ne!(k.sha256(), base.sha256(), "{field}");
            assert_eq!(k.changed_fields(&stored), vec![field.to_owned()]);
        }
        assert_eq!(base.sha256(), key().sha256(), "deterministic");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(fmt_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(fmt_utc(1_796_122_718), "2026-12-01 10:58:38 UTC");
    }
}
