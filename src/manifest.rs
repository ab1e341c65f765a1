//! Build provenance: `manifest.json` in every output folder and in every package built from it.
//!
//! Written by `build` (and amended by `patch` and `verify`), read by `package`. JSON, one object;
//! `schema_version` is bumped on incompatible changes.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Version of the manifest schema.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// [`MANIFEST_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// rcclfix version that built it.
    pub rcclfix_version: String,
    /// Recipe id (`recipes/<id>.toml`).
    pub recipe: String,
    /// RCCL version, e.g. `2.13.4`.
    pub rccl_version: String,
    /// ROCm release the recipe follows, e.g. `5.4.3`.
    pub rocm_release: String,
    /// Git URL, tag and the commit actually checked out (40 hex).
    pub git: String,
    /// Tag checked out (empty when the recipe names a branch).
    #[serde(default)]
    pub tag: String,
    /// Branch the recipe names instead of a tag (the commit is what was built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Commit checked out.
    pub commit: String,
    /// Patches applied (paths under `patches/`) with their sha256.
    #[serde(default)]
    pub patches: Vec<FileDigest>,
    /// The toolchain: `debian-trixie` or an image reference.
    pub toolchain: String,
    /// Toolchain identity: for a rootfs toolchain `sha256:` of its stamp, whatever the engine (an
    /// engine re-import does not change it); for an image toolchain the image id.
    pub toolchain_id: String,
    /// Digest of an image toolchain's base image, as pinned in `rcclfix.lock`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain_digest: Option<String>,
    /// A rootfs toolchain's installed packages as `name=version` (its stamp's list, sorted): the
    /// versions this library was built with. `build` compares a verified recipe's record with the
    /// toolchain it runs in (`container::drift::check_record_versions`). Empty for image and
    /// host toolchains, and in manifests from before rcclfix recorded it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolchain_packages: Vec<String>,
    /// Engine used: `podman`, `docker`, `bubblewrap`, `host`.
    pub engine: String,
    /// gfx targets built and gated.
    pub targets: Vec<String>,
    /// NDEBUG strategy from the recipe (kebab-case).
    pub ndebug_strategy: String,
    /// Whether `-DNDEBUG` was found on the device compile lines after configure.
    pub ndebug_on_device_compile: bool,
    /// CMake arguments passed, verbatim.
    pub cmake_args: Vec<String>,
    /// The built library.
    pub library: LibraryRecord,
    /// Wall time of configure + build, in seconds.
    pub build_seconds: f64,
    /// Scan gate verdict per target (`clean`, `declares`, `unknown`).
    pub gate: std::collections::BTreeMap<String, String>,
    /// `verify` result (the JSON report of `rcclfix verify`), when `build --verify` ran; written
    /// as the string [`VERIFY_NOT_RUN`] when it did not, so every manifest says whether the
    /// library was run on GPUs ([`Manifest::verify_summary`]).
    #[serde(default, serialize_with = "verify_or_not_run")]
    pub verify: Option<serde_json::Value>,
    /// `patch` record (what was rewritten and the proof), when the library was patched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patched: Option<serde_json::Value>,
    /// The build key this folder was built for and when (`build`'s artifact cache,
    /// `src/build/cache.rs`); absent in folders from an older rcclfix, which are then rebuilt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheRecord>,
}

/// What `manifest.json` says in `verify` when no verify ran.
pub const VERIFY_NOT_RUN: &str = "not run";

fn verify_or_not_run<S: serde::Serializer>(
    v: &Option<serde_json::Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => v.serialize(s),
        None => s.serialize_str(VERIFY_NOT_RUN),
    }
}

/// The artifact-cache record of an output folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CacheRecord {
    /// sha256 (hex) of the key's JSON form (`BuildKey::sha256`).
    pub key: String,
    /// The key's inputs, so a later build can say which one changed.
    pub inputs: serde_json::Value,
    /// When the folder was built, seconds since the Unix epoch.
    pub built_at_unix: u64,
}

/// A file and its digest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileDigest {
    /// Path (relative to the repo root or the output folder).
    pub path: String,
    /// sha256, lowercase hex.
    pub sha256: String,
}

/// The library in the output folder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LibraryRecord {
    /// File name in the output folder, e.g. `librccl.so.1.0`.
    pub file: String,
    /// DT_SONAME, e.g. `librccl.so.1`.
    pub soname: String,
    /// sha256 of the file, lowercase hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
}

impl Manifest {
    /// What was named upstream: `tag rocm-5.4.3` or `branch release-staging/rocm-rel-6.3`.
    pub fn rev_label(&self) -> String {
        match &self.branch {
            Some(b) => format!("branch {b}"),
            None => format!("tag {}", self.tag),
        }
    }

    /// How many device-assert handler entries the `patch` record says were rewritten to trap
    /// (`rcclfix patch --asserts`: the `instructions` of its images); 0 when the library was not
    /// patched that way.
    pub fn asserts_rewritten(&self) -> usize {
        let Some(images) = self
            .patched
            .as_ref()
            .and_then(|p| p.get("images"))
            .and_then(|i| i.as_array())
        else {
            return 0;
        };
        images
            .iter()
            .filter_map(|i| i.get("instructions").and_then(|x| x.as_array()))
            .map(Vec::len)
            .sum()
    }

    /// `verify` in one line: `not run`, or the report's verdict, how many cases ran, in which
    /// mode, on which GPU indices (`pass: 24 cases, single process, GPUs 0, 1`). The report is
    /// `rcclfix verify --json` (`src/verify/report.rs`).
    pub fn verify_summary(&self) -> String {
        let Some(v) = self.verify.as_ref().filter(|v| v.is_object()) else {
            return VERIFY_NOT_RUN.to_owned();
        };
        // Words only: the summary goes into package descriptions.
        let word = |k: &str| -> String {
            let w: String = v
                .get(k)
                .and_then(|x| x.as_str())
                .unwrap_or("unknown")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .take(32)
                .collect();
            if w.is_empty() {
                "unknown".to_owned()
            } else {
                w
            }
        };
        let (verdict, mode) = (word("verdict"), word("mode"));
        let cases = v
            .get("cases")
            .and_then(|x| x.as_array())
            .map_or(0, Vec::len);
        let gpus: Vec<String> = v
            .get("gpus")
            .and_then(|x| x.as_array())
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_i64())
            .map(|g| g.to_string())
            .collect();
        format!(
            "{verdict}: {cases} cases, mode {mode}, GPUs {} (on the build machine)",
            if gpus.is_empty() {
                "unknown".to_owned()
            } else {
                gpus.join(", ")
            }
        )
    }

    /// Read `manifest.json`. Errors name the file.
    pub fn load(path: &Path) -> anyhow::Result<Manifest> {
        let text = crate::fsutil::read_text_capped(path, MAX_MANIFEST_BYTES, "a manifest")?;
        serde_json::from_str(&text)
            .with_context(|| format!("{}: not a valid rcclfix manifest", path.display()))
    }

    /// Write `manifest.json` atomically, pretty-printed.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        crate::fsutil::atomic_write(path, text.as_bytes())
    }
}

/// The largest `manifest.json` read (16 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;
