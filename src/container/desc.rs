//! What a local rootfs toolchain is before and after it is built: its description
//! (`containers/<name>/toolchain.toml`, [`ToolchainDesc`], embedded at build time) and its
//! `stamp.json` ([`Stamp`]), under [`toolchains_dir`]. `rootfs.rs` builds from a description and
//! writes the stamp; `toolchain.rs` opens a built one; both read this module, neither the other
//! for these types.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};
use sha2::Digest;

/// Bumped when the way a rootfs is built changes, so old stamps read as outdated.
pub const BUILDER_VERSION: u32 = 1;

/// The toolchain descriptions embedded at build time: (name, `toolchain.toml` text).
pub const EMBEDDED_TOOLCHAINS: &[(&str, &str)] = &[
    (
        "debian-sid",
        include_str!("../../containers/debian-sid/toolchain.toml"),
    ),
    (
        "debian-trixie",
        include_str!("../../containers/debian-trixie/toolchain.toml"),
    ),
    (
        "debian-rocm7.2",
        include_str!("../../containers/debian-rocm7.2/toolchain.toml"),
    ),
];

/// `containers/<name>/toolchain.toml`: a Debian-package rootfs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolchainDesc {
    /// One line for `toolchain list`.
    pub description: String,
    /// Debian suite (`trixie`, `sid`).
    pub suite: String,
    /// debootstrap variant (`minbase`).
    #[serde(default = "default_variant")]
    pub variant: String,
    /// Archive components (`main`).
    #[serde(default = "default_components")]
    pub components: Vec<String>,
    /// Packages installed with `apt-get install --no-install-recommends`.
    pub packages: Vec<String>,
    /// Lines written to `/etc/apt/apt.conf.d/99rcclfix` inside the rootfs before the first update.
    #[serde(default)]
    pub apt_conf: Vec<String>,
    /// Directories put first on PATH inside the toolchain (`/usr/lib/llvm-17/bin`).
    #[serde(default)]
    pub path_prepend: Vec<String>,
    /// Packages taken from another suite of the same mirror (`[[pin]]` tables): that suite is added
    /// to the rootfs's apt sources and only the named packages are pinned to it (priority 990 in
    /// `/etc/apt/preferences.d/rcclfix`, apt_preferences(5)); everything else comes from `suite`.
    /// Empty for the plain-suite toolchains (and then absent from [`ToolchainDesc::hash`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pin: Vec<SuitePin>,
}

/// One `[[pin]]` of a toolchain description: `packages` come from `suite`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SuitePin {
    /// Debian suite of the same mirror (`experimental`).
    pub suite: String,
    /// Binary package names pinned to it (the packages that must come from it and the libraries
    /// whose exact versions they depend on).
    pub packages: Vec<String>,
}

fn default_variant() -> String {
    "minbase".into()
}
fn default_components() -> Vec<String> {
    vec!["main".into()]
}

impl ToolchainDesc {
    /// The embedded description named `name`.
    ///
    /// Errors: no such toolchain (the message lists the known ones), or the description does not parse.
    pub fn embedded(name: &str) -> anyhow::Result<ToolchainDesc> {
        let Some((_, text)) = EMBEDDED_TOOLCHAINS.iter().find(|(n, _)| *n == name) else {
            let known: Vec<&str> = EMBEDDED_TOOLCHAINS.iter().map(|(n, _)| *n).collect();
            bail!(
                "unknown toolchain {name:?} (known: {}, host)",
                known.join(", ")
            );
        };
        ToolchainDesc::parse(text, &format!("containers/{name}/toolchain.toml"))
    }

    /// Parse a description; errors name `origin`.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<ToolchainDesc> {
        let d: ToolchainDesc =
            toml::from_str(text).map_err(|e| anyhow::anyhow!("{origin}: {}", e.message()))?;
        if d.packages.is_empty() {
            bail!("{origin}: packages is empty");
        }
        let word = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        };
        for name in std::iter::once(&d.suite)
            .chain(&d.components)
            .chain(&d.packages)
            .chain(
                d.pin
                    .iter()
                    .flat_map(|p| std::iter::once(&p.suite).chain(&p.packages)),
            )
        {
            if !word(name) {
                bail!("{origin}: {name:?} is not a Debian suite, component or package name");
            }
        }
        for p in &d.pin {
            if p.suite == d.suite || p.packages.is_empty() {
                bail!(
                    "{origin}: [[pin]] suite {:?} must name another suite than {:?} and at least one package",
                    p.suite,
                    d.suite
                );
            }
        }
        Ok(d)
    }

    /// sha256 (hex) of the description's content (comments excluded) and [`BUILDER_VERSION`].
    pub fn hash(&self) -> String {
        let json = serde_json::to_string(self).expect("serialisable");
        hex::encode(sha2::Sha256::digest(format!(
            "rcclfix-toolchain-v{BUILDER_VERSION}\n{json}"
        )))
    }
}

/// `toolchains/<name>/stamp.json`, written last when a rootfs build succeeds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stamp {
    /// Toolchain name.
    pub name: String,
    /// [`ToolchainDesc::hash`] of the description it was built from.
    pub description_sha256: String,
    /// Debian suite.
    pub suite: String,
    /// The Debian mirror it was bootstrapped from (derived from the host's apt sources).
    pub mirror: String,
    /// Build time, seconds since the Unix epoch.
    pub built_at: u64,
    /// Total size of the rootfs's regular files, bytes.
    pub rootfs_bytes: u64,
    /// Every installed package as `name=version`, sorted.
    pub packages: Vec<String>,
    /// For a description with `[[pin]]`s: per pinned suite, every installed package whose version
    /// that suite has and `suite` has not (`name=version`, sorted): what came from it, the pinned
    /// packages and the libraries they pulled in.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub from_suites: std::collections::BTreeMap<String, Vec<String>>,
}

/// Where local toolchains live: `$RCCLFIX_HOME/toolchains`.
pub fn toolchains_dir() -> PathBuf {
    crate::paths::toolchains_dir()
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The largest `stamp.json` read (1 MiB; a stamp lists a few hundred package versions).
pub const MAX_STAMP_BYTES: u64 = 1 << 20;
