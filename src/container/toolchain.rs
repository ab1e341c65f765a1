//! Toolchains: what compiles RCCL.
//!
//! Three kinds ([`Toolchain`]):
//! - a **local rootfs** described by `containers/<name>/toolchain.toml` ([`ToolchainDesc`]) and built
//!   by rcclfix itself with debootstrap from the host's own Debian mirror into
//!   `$RCCLFIX_HOME/toolchains/<name>/rootfs`, with a `stamp.json` ([`Stamp`]) recording the
//!   description hash and the installed package versions (debootstrap(8));
//! - an **OCI image** (`rocm/dev-ubuntu-24.04:7.2.1-complete`) extended by a Containerfile and built
//!   by podman/docker as `localhost/rcclfix-<dir>:<hash>`;
//! - the **host** itself (`toolchain.name = "host"`), run without a container.
//!
//! For podman and docker a rootfs toolchain is imported once as the local image
//! `localhost/rcclfix-<name>:<stamp hash>` (the `localhost/` prefix stops podman from pulling).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::engine::{Engine, Root};
use crate::process::Cmd;

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
];

/// The Containerfiles embedded at build time: (repo-relative path, text). A test checks that every
/// `containers/*/Containerfile` is listed here.
pub const EMBEDDED_CONTAINERFILES: &[(&str, &str)] = &[
    (
        "containers/rocm-10.0.0/Containerfile",
        include_str!("../../containers/rocm-10.0.0/Containerfile"),
    ),
    (
        "containers/rocm-6.0.2/Containerfile",
        include_str!("../../containers/rocm-6.0.2/Containerfile"),
    ),
    (
        "containers/rocm-6.1.2/Containerfile",
        include_str!("../../containers/rocm-6.1.2/Containerfile"),
    ),
    (
        "containers/rocm-6.2.2/Containerfile",
        include_str!("../../containers/rocm-6.2.2/Containerfile"),
    ),
    (
        "containers/rocm-6.3.4/Containerfile",
        include_str!("../../containers/rocm-6.3.4/Containerfile"),
    ),
    (
        "containers/rocm-6.4.3/Containerfile",
        include_str!("../../containers/rocm-6.4.3/Containerfile"),
    ),
    (
        "containers/rocm-7.0.2/Containerfile",
        include_str!("../../containers/rocm-7.0.2/Containerfile"),
    ),
    (
        "containers/rocm-7.1.1/Containerfile",
        include_str!("../../containers/rocm-7.1.1/Containerfile"),
    ),
    (
        "containers/rocm-7.11.0/Containerfile",
        include_str!("../../containers/rocm-7.11.0/Containerfile"),
    ),
    (
        "containers/rocm-7.12.0/Containerfile",
        include_str!("../../containers/rocm-7.12.0/Containerfile"),
    ),
    (
        "containers/rocm-7.13.0/Containerfile",
        include_str!("../../containers/rocm-7.13.0/Containerfile"),
    ),
    (
        "containers/rocm-7.14.0/Containerfile",
        include_str!("../../containers/rocm-7.14.0/Containerfile"),
    ),
    (
        "containers/rocm-7.2.0/Containerfile",
        include_str!("../../containers/rocm-7.2.0/Containerfile"),
    ),
    (
        "containers/rocm-7.2.1/Containerfile",
        include_str!("../../containers/rocm-7.2.1/Containerfile"),
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
}

/// Where local toolchains live: `$RCCLFIX_HOME/toolchains`.
pub fn toolchains_dir() -> PathBuf {
    crate::paths::toolchains_dir()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// What kind of toolchain, with what it needs.
#[derive(Debug, Clone)]
pub enum ToolchainKind {
    /// A local rootfs.
    Rootfs {
        /// `toolchains/<name>/rootfs`.
        rootfs: PathBuf,
        /// sha256 of `stamp.json`.
        stamp_sha256: String,
    },
    /// An OCI image extended by a Containerfile.
    Image {
        /// The base image reference from the recipe.
        base: String,
        /// The Containerfile path (repo-relative, as in the recipe).
        containerfile: String,
    },
    /// The host, no container.
    Host,
}

/// A resolved toolchain, ready for an [`Engine`] once [`prepare`]d.
#[derive(Debug, Clone)]
pub struct Toolchain {
    name: String,
    kind: ToolchainKind,
    path_prepend: Vec<String>,
    image_ref: Option<String>,
    id: String,
    base_digest: Option<String>,
}

impl Toolchain {
    /// Open a local toolchain by name (`debian-trixie`, or `host`).
    ///
    /// Errors: the toolchain is not built yet (with the command that builds it), or its stamp is
    /// unreadable. A rootfs built from an older description only warns.
    pub fn local(name: &str) -> anyhow::Result<Toolchain> {
        if name == "host" {
            return Ok(Toolchain {
                name: "host".into(),
                kind: ToolchainKind::Host,
                path_prepend: vec![],
                image_ref: None,
                id: "host".into(),
                base_digest: None,
            });
        }
        let desc = ToolchainDesc::embedded(name)?;
        let dir = toolchains_dir().join(name);
        let stamp_path = dir.join("stamp.json");
        if !stamp_path.exists() {
            bail!(
                "toolchain {name} is not built ({} has no stamp.json)\nhelp: run `rcclfix toolchain build {name}` (as root; a few minutes and about 1.8 GB)",
                dir.display()
            );
        }
        let bytes = fs_err::read(&stamp_path)?;
        let stamp: Stamp = serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: not a toolchain stamp", stamp_path.display()))?;
        if stamp.description_sha256 != desc.hash() {
            crate::ui::warn(format_args!(
                "toolchain {name} was built from an older containers/{name}/toolchain.toml\nhelp: rebuild it with `rcclfix toolchain build {name}`"
            ));
        }
        let stamp_sha256 = sha256_hex(&bytes);
        Ok(Toolchain {
            name: name.into(),
            id: format!("sha256:{stamp_sha256}"),
            kind: ToolchainKind::Rootfs {
                rootfs: dir.join("rootfs"),
                stamp_sha256,
            },
            path_prepend: desc.path_prepend,
            image_ref: None,
            base_digest: None,
        })
    }

    /// The toolchain a recipe names (`toolchain.name` or `toolchain.image`).
    pub fn for_recipe(t: &crate::recipe::Toolchain) -> anyhow::Result<Toolchain> {
        match (&t.name, &t.image, &t.containerfile) {
            (Some(n), _, _) => Toolchain::local(n),
            (None, Some(img), Some(cf)) => Ok(Toolchain::image(img, cf)),
            _ => bail!("recipe toolchain needs `name`, or `image` with `containerfile`"),
        }
    }

    /// An image toolchain: `base` (an OCI reference) extended by the embedded Containerfile
    /// `containerfile` (repo-relative), prepared by [`prepare`].
    pub fn image(base: &str, containerfile: &str) -> Toolchain {
        Toolchain {
            name: base.into(),
            kind: ToolchainKind::Image {
                base: base.into(),
                containerfile: containerfile.into(),
            },
            path_prepend: vec!["/opt/rocm/bin".into(), "/opt/rocm/llvm/bin".into()],
            image_ref: None,
            id: String::new(),
            base_digest: None,
        }
    }

    /// The base image's digest pinned by [`pin_base_image`] (image toolchains only).
    pub fn base_digest(&self) -> Option<&str> {
        self.base_digest.as_deref()
    }

    /// Name for messages and `manifest.toolchain`.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The kind.
    pub fn kind(&self) -> &ToolchainKind {
        &self.kind
    }
    /// Whether this is the host (no container).
    pub fn is_host(&self) -> bool {
        matches!(self.kind, ToolchainKind::Host)
    }
    /// The rootfs directory of a local toolchain.
    pub fn rootfs(&self) -> Option<&Path> {
        match &self.kind {
            ToolchainKind::Rootfs { rootfs, .. } => Some(rootfs),
            _ => None,
        }
    }
    /// PATH entries put first inside the toolchain.
    pub fn path_prepend(&self) -> &[String] {
        &self.path_prepend
    }
    /// The local image reference once prepared for podman/docker.
    pub fn image_ref(&self) -> Option<&str> {
        self.image_ref.as_deref()
    }
    /// Identity for `manifest.toolchain_id`: the image id (podman/docker) or `sha256:` of the stamp.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What an [`Engine`] runs commands in for this toolchain.
    pub fn root(&self) -> Root {
        match &self.kind {
            ToolchainKind::Rootfs { rootfs, .. } => Root::Rootfs {
                rootfs: rootfs.clone(),
                reference: self.image_ref.clone(),
                path_prepend: self.path_prepend.clone(),
            },
            ToolchainKind::Image { .. } => Root::Image {
                reference: self.image_ref.clone(),
                path_prepend: self.path_prepend.clone(),
            },
            ToolchainKind::Host => Root::Host,
        }
    }
}

/// Make `tc` runnable by `engine`: for podman/docker import the rootfs as
/// `localhost/rcclfix-<name>:<stamp hash>` (or build the Containerfile image) unless it exists, and
/// record the image id. Nothing to do for bubblewrap and host.
///
/// Errors: the import or image build fails (the engine's error tail is included).
pub fn prepare(engine: &Engine, tc: &mut Toolchain) -> anyhow::Result<()> {
    if !engine.uses_images() {
        return Ok(());
    }
    let reference = match tc.kind.clone() {
        ToolchainKind::Rootfs {
            rootfs,
            stamp_sha256,
        } => {
            let reference = format!("localhost/rcclfix-{}:{}", tc.name, &stamp_sha256[..12]);
            if !engine.image_exists(&reference) {
                crate::ui::status(
                    "Importing",
                    format_args!(
                        "{} into {} as {reference} (once per toolchain build)",
                        rootfs.display(),
                        engine.name()
                    ),
                );
                let _phase = crate::ui::Phase::start(&format!(
                    "importing {} into {}",
                    tc.name,
                    engine.name()
                ));
                let tmp = crate::fsutil::TempDir::new_in(&toolchains_dir(), ".rcclfix-import-")?;
                let tar = tmp.path().join("rootfs.tar");
                Cmd::new("pack the toolchain rootfs", "tar")
                    .arg("-C")
                    .arg(&rootfs)
                    .args([
                        "--exclude=./proc/*",
                        "--exclude=./sys/*",
                        "--exclude=./dev/*",
                        "--exclude=./tmp/*",
                        "-cf",
                    ])
                    .arg(&tar)
                    .arg(".")
                    .read()?;
                engine.import_image(&tar, &reference).with_context(|| {
                    format!("cannot import toolchain {} into {}", tc.name, engine.name())
                })?;
                prune_old_images(engine, &tc.name, &reference);
            }
            reference
        }
        ToolchainKind::Image {
            base,
            containerfile,
        } => {
            let Some((_, text)) = EMBEDDED_CONTAINERFILES
                .iter()
                .find(|(p, _)| *p == containerfile)
            else {
                bail!(
                    "unknown containerfile {containerfile:?} (known: {})",
                    EMBEDDED_CONTAINERFILES
                        .iter()
                        .map(|(p, _)| *p)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            };
            let dir_name = Path::new(&containerfile)
                .parent()
                .and_then(|p| p.file_name())
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "image".into());
            // The pinned base digest is part of the local name: a re-pushed base never reuses an
            // image built from the old one.
            let hash = match &tc.base_digest {
                Some(d) => sha256_hex(format!("{base}@{d}\n{text}").as_bytes()),
                None => sha256_hex(format!("{base}\n{text}").as_bytes()),
            };
            let reference = format!("localhost/rcclfix-{dir_name}:{}", &hash[..12]);
            if !engine.image_exists(&reference) {
                crate::ui::status("Building", format_args!("toolchain image {reference} from {containerfile} (needs the engine's registry for {base})"));
                let ctx = crate::fsutil::TempDir::new("rcclfix-containerfile-")?;
                fs_err::write(ctx.path().join("Containerfile"), text)?;
                engine
                    .build_image(&ctx.path().join("Containerfile"), &reference, ctx.path())
                    .with_context(|| format!("cannot build toolchain image {reference}"))?;
            }
            reference
        }
        ToolchainKind::Host => return Ok(()),
    };
    tc.id = engine.image_id(&reference)?;
    tc.image_ref = Some(reference);
    Ok(())
}

/// Pin the base image of an image toolchain by digest, or check it against its pin, in the
/// lockfile `lock_path` (`$RCCLFIX_HOME/rcclfix.lock`, beside the commit pins): the engine pulls
/// the base when it is not present, reads its digest, and
/// - records it when the reference is not pinned yet (refused with `locked`),
/// - accepts it when it equals the pin,
/// - refuses it, naming both digests, when the tag now points at another image.
///
/// The digest is kept on `tc` ([`Toolchain::base_digest`], then `manifest.toolchain_digest`). Rootfs
/// and host toolchains, and bubblewrap, have nothing to pin: `Ok(None)`.
///
/// Errors: the pull or inspect fails; the image has no digest; a moved tag; `locked` and unpinned;
/// the lockfile cannot be read or written.
pub fn pin_base_image(
    engine: &Engine,
    tc: &mut Toolchain,
    locked: bool,
    lock_path: &Path,
) -> anyhow::Result<Option<String>> {
    let ToolchainKind::Image { base, .. } = tc.kind.clone() else {
        return Ok(None);
    };
    if !engine.uses_images() {
        return Ok(None);
    }
    if !engine.image_exists(&base) {
        crate::ui::status(
            "Pulling",
            format_args!("toolchain base image {base} (once; tens of GB for the ROCm images)"),
        );
        engine
            .pull_image(&base)
            .with_context(|| format!("cannot pull the toolchain base image {base}"))?;
    }
    let digest = engine.image_digest(&base)?;
    let mut lock = crate::recipe::Lockfile::load(lock_path)?;
    match lock.image_digest(&base) {
        Some(pinned) if pinned == digest => {}
        Some(pinned) => bail!(
            "toolchain image {base} now has digest {digest}, but {} pins {pinned}\nhelp: the tag was re-pushed or re-tagged; restore the pinned image, or remove its [[image]] entry from the lockfile to pin the new one",
            lock_path.display()
        ),
        None if locked => bail!(
            "toolchain image {base} (digest {digest}) is not pinned in {} and --locked refuses to pin it",
            lock_path.display()
        ),
        None => {
            let mut user = crate::recipe::Lockfile::load_user(lock_path)?;
            user.set_image(&base, &digest);
            user.save(lock_path)?;
            crate::ui::status(
                "Pinned",
                format_args!("toolchain image {base} to {digest} in {}", lock_path.display()),
            );
            lock.set_image(&base, &digest);
        }
    }
    tc.base_digest = Some(digest.clone());
    Ok(Some(digest))
}

/// Remove the images of earlier builds of toolchain `name` (other tags of
/// `localhost/rcclfix-<name>`), best effort: an image still in use stays.
fn prune_old_images(engine: &Engine, name: &str, keep: &str) {
    for r in engine.remove_other_tags(&format!("localhost/rcclfix-{name}"), keep) {
        crate::ui::status("Removed", format_args!("old toolchain image {r}"));
    }
}

/// The Debian mirror the host's apt uses: `RCCLFIX_DEBIAN_MIRROR`, else the first `URIs:` of a
/// non-security deb822 stanza in `/etc/apt/sources.list.d/*.sources`, else the first `deb` line of
/// `/etc/apt/sources.list` (sources.list(5)). No registry host is written in rcclfix.
///
/// Errors: none of those name a mirror.
pub fn host_debian_mirror() -> anyhow::Result<String> {
    if let Ok(m) = std::env::var("RCCLFIX_DEBIAN_MIRROR") {
        if !m.is_empty() {
            return Ok(m);
        }
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir("/etc/apt/sources.list.d")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "sources"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        if let Some(m) = mirror_from_deb822(&text) {
            return Ok(m);
        }
    }
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        if let Some(m) = mirror_from_one_line(&text) {
            return Ok(m);
        }
    }
    bail!("cannot find the host's Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list\nhelp: set RCCLFIX_DEBIAN_MIRROR to a Debian mirror URL")
}

/// The first `URIs:` of a deb822 stanza with `Types: deb` whose suites are not `*-security`.
pub fn mirror_from_deb822(text: &str) -> Option<String> {
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza
                .lines()
                .find(|l| {
                    l.to_ascii_lowercase()
                        .starts_with(&format!("{}:", name.to_ascii_lowercase()))
                })
                .map(|l| l[name.len() + 1..].trim().to_owned())
        };
        let (Some(types), Some(uris)) = (field("Types"), field("URIs")) else {
            continue;
        };
        let suites = field("Suites").unwrap_or_default();
        if types.split_whitespace().any(|t| t == "deb") && !suites.contains("-security") {
            if let Some(u) = uris.split_whitespace().next() {
                return Some(u.to_owned());
            }
        }
    }
    None
}

/// The URL of the first `deb` line (options in `[...]` skipped) whose suite is not `*-security`.
pub fn mirror_from_one_line(text: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("deb ") else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = if rest.starts_with('[') {
            rest.split_once(']').map(|x| x.1).unwrap_or("")
        } else {
            rest
        };
        let mut it = rest.split_whitespace();
        let (Some(url), suite) = (it.next(), it.next().unwrap_or("")) else {
            continue;
        };
        if !suite.contains("-security") {
            return Some(url.to_owned());
        }
    }
    None
}

/// Build the rootfs toolchain `name` into `toolchains/<name>/` (temp folder, renamed at the end).
/// Skipped when the stamp already matches the description, unless `force`.
///
/// Steps: debootstrap from the host mirror; write `apt_conf`; `apt-get update` and install the
/// packages inside the rootfs (a private mount + pid namespace via `unshare`, /proc mounted);
/// `apt-get clean`; record package versions; write `stamp.json`. Full output goes to
/// `toolchains/<name>.log`.
///
/// Errors: not root (debootstrap needs it), debootstrap or unshare missing, any step fails (the error
/// carries the step's last output lines). A failed build leaves no `toolchains/<name>` behind.
pub fn build_rootfs(name: &str, force: bool) -> anyhow::Result<PathBuf> {
    let desc = ToolchainDesc::embedded(name)?;
    let dest = toolchains_dir().join(name);
    let hash = desc.hash();
    if !force {
        if let Ok(bytes) = std::fs::read(dest.join("stamp.json")) {
            if let Ok(stamp) = serde_json::from_slice::<Stamp>(&bytes) {
                if stamp.description_sha256 == hash {
                    crate::ui::status(
                        "Fresh",
                        format_args!("toolchain {name} ({})", dest.display()),
                    );
                    return Ok(dest);
                }
                crate::ui::status(
                    "Outdated",
                    format_args!("toolchain {name}: description changed, rebuilding"),
                );
            }
        }
    }
    if !super::engine::running_as_root() {
        bail!("building toolchain {name} needs root (debootstrap creates device nodes and chroots)\nhelp: run `sudo rcclfix toolchain build {name}`, with RCCLFIX_HOME set to where your builds look");
    }
    for prog in ["debootstrap", "unshare"] {
        which::which(prog).map_err(|_| {
            anyhow::anyhow!(
                "`{prog}` is not installed\nhelp: apt-get install debootstrap util-linux"
            )
        })?;
    }
    let mirror = host_debian_mirror()?;
    fs_err::create_dir_all(toolchains_dir())?;
    let log_path = toolchains_dir().join(format!("{name}.log"));
    let mut log = std::io::LineWriter::new(fs_err::File::create(&log_path)?);
    let out = crate::fsutil::AtomicDir::new(&dest)?;
    let rootfs = out.path().join("rootfs");
    let started = std::time::Instant::now();

    crate::ui::status(
        "Creating",
        format_args!(
            "{name}: debian {} ({}) from {mirror}",
            desc.suite, desc.variant
        ),
    );
    let phase = crate::ui::Phase::start(&format!("debootstrapping {name}"));
    Cmd::new(format!("debootstrap {}", desc.suite), "debootstrap")
        .arg(format!("--variant={}", desc.variant))
        .arg(format!("--components={}", desc.components.join(",")))
        .arg(&desc.suite)
        .arg(&rootfs)
        .arg(&mirror)
        .stream(&mut log, |_| {})
        .with_context(|| {
            format!(
                "toolchain {name}: debootstrap failed (full log: {})",
                log_path.display()
            )
        })?;
    drop(phase);

    let mut conf = desc.apt_conf.join("\n");
    conf.push('\n');
    crate::fsutil::atomic_write(
        &rootfs.join("etc/apt/apt.conf.d/99rcclfix"),
        conf.as_bytes(),
    )?;

    let in_root = |summary: &str, argv: &[&str]| {
        Cmd::new(format!("{name}: {summary}"), "unshare")
            .args(["--mount", "--pid", "--fork", "--mount-proc"])
            .arg(format!("--root={}", rootfs.display()))
            .args([
                "/usr/bin/env",
                "-i",
                "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                "DEBIAN_FRONTEND=noninteractive",
                "LANG=C.UTF-8",
            ])
            .args(argv)
    };
    crate::ui::status(
        "Installing",
        format_args!("{} packages into {name}", desc.packages.len()),
    );
    let phase = crate::ui::Phase::start(&format!("installing packages into {name}"));
    in_root("apt-get update", &["apt-get", "update", "-q"]).stream(&mut log, |_| {})?;
    let mut install = vec!["apt-get", "install", "-y", "-q", "--no-install-recommends"];
    install.extend(desc.packages.iter().map(|s| s.as_str()));
    in_root("apt-get install", &install).stream(&mut log, |_| {})?;
    in_root("apt-get clean", &["apt-get", "clean"]).stream(&mut log, |_| {})?;
    drop(phase);
    let listing = in_root(
        "list packages",
        &["dpkg-query", "-W", "-f=${Package}=${Version}\\n"],
    )
    .read()?;
    let mut packages: Vec<String> = listing
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect();
    packages.sort();

    let rootfs_bytes: u64 = walkdir::WalkDir::new(&rootfs)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .sum();
    let stamp = Stamp {
        name: name.into(),
        description_sha256: hash,
        suite: desc.suite.clone(),
        mirror,
        built_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        rootfs_bytes,
        packages,
    };
    let mut text = serde_json::to_string_pretty(&stamp)?;
    text.push('\n');
    crate::fsutil::atomic_write(&out.path().join("stamp.json"), text.as_bytes())?;
    drop(log);
    let dest = out.commit()?;
    crate::ui::status(
        "Built",
        format_args!(
            "toolchain {name} in {:.0}s, {:.2} GB ({})",
            started.elapsed().as_secs_f64(),
            rootfs_bytes as f64 / 1e9,
            dest.display()
        ),
    );
    Ok(dest)
}

/// Build the local toolchain `name` now if it has never been built (first `rcclfix build` on a fresh
/// machine); an existing one, even outdated, is left alone. Nothing to do for `host`.
///
/// Errors: as [`build_rootfs`] (e.g. not root, debootstrap missing).
pub fn ensure_built(name: &str) -> anyhow::Result<()> {
    if name == "host" || toolchains_dir().join(name).join("stamp.json").exists() {
        return Ok(());
    }
    crate::ui::status(
        "Toolchain",
        format_args!(
            "{name} is not built yet: building it first (once; 1.3–1.4 GB, 1–4 min measured: 191 s on a busy 2-core machine)"
        ),
    );
    build_rootfs(name, false).map(|_| ())
}

/// One row of `toolchain list`.
#[derive(Debug, Clone, Serialize)]
pub struct ListRow {
    /// Toolchain name.
    pub name: String,
    /// `built`, `outdated`, `not built`.
    pub state: String,
    /// Description.
    pub description: String,
    /// The stamp, when built.
    pub stamp: Option<Stamp>,
}

/// The state of every embedded toolchain description.
pub fn list() -> anyhow::Result<Vec<ListRow>> {
    let mut rows = vec![];
    for (name, _) in EMBEDDED_TOOLCHAINS {
        let desc = ToolchainDesc::embedded(name)?;
        let stamp: Option<Stamp> = std::fs::read(toolchains_dir().join(name).join("stamp.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let state = match &stamp {
            None => "not built",
            Some(s) if s.description_sha256 == desc.hash() => "built",
            Some(_) => "outdated",
        };
        rows.push(ListRow {
            name: (*name).into(),
            state: state.into(),
            description: desc.description,
            stamp,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_containerfile_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        for e in std::fs::read_dir(root.join("containers")).unwrap() {
            let dir = e.unwrap().path();
            if dir.join("Containerfile").is_file() {
                let rel = format!(
                    "containers/{}/Containerfile",
                    dir.file_name().unwrap().to_string_lossy()
                );
                assert!(
                    EMBEDDED_CONTAINERFILES.iter().any(|(p, _)| *p == rel),
                    "{rel} is not in EMBEDDED_CONTAINERFILES (src/container/toolchain.rs)"
                );
            }
        }
    }

    #[test]
    fn embedded_descriptions_parse() {
        for (n, _) in EMBEDDED_TOOLCHAINS {
            ToolchainDesc::embedded(n).unwrap();
        }
    }

    #[test]
    fn mirror_deb822_skips_security() {
        let t = "Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://m.example/debian\nSuites: bookworm\n";
        assert_eq!(
            mirror_from_deb822(t).as_deref(),
            Some("http://m.example/debian")
        );
    }

    #[test]
    fn mirror_one_line_with_options() {
        let t = "# c\ndeb [signed-by=/k.gpg] http://m.example/debian bookworm main\n";
        assert_eq!(
            mirror_from_one_line(t).as_deref(),
            Some("http://m.example/debian")
        );
    }
}
