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
use serde::Serialize;

use super::desc::sha256_hex;
pub use super::desc::{
    toolchains_dir, Stamp, SuitePin, ToolchainDesc, BUILDER_VERSION, EMBEDDED_TOOLCHAINS,
    MAX_STAMP_BYTES,
};
use super::engine::{Engine, Root};
use crate::process::Cmd;

pub use super::rootfs::{
    build_rootfs, ensure_built, host_debian_mirror, mirror_from_deb822, mirror_from_one_line,
};

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
    packages: Vec<String>,
}

impl Toolchain {
    /// Open a local toolchain by name (`debian-trixie`, or `host`).
    ///
    /// Errors: the toolchain is not built yet (with the command that builds it), or its stamp or
    /// its rootfs's dpkg database is unreadable. A rootfs built from an older description only
    /// warns.
    pub fn local(name: &str) -> anyhow::Result<Toolchain> {
        Toolchain::local_at(&toolchains_dir(), name)
    }

    /// [`Toolchain::local`] with the toolchains folder given (`$RCCLFIX_HOME/toolchains` there).
    ///
    /// Errors: as [`Toolchain::local`].
    pub fn local_at(toolchains: &Path, name: &str) -> anyhow::Result<Toolchain> {
        if name == "host" {
            return Ok(Toolchain {
                name: "host".into(),
                kind: ToolchainKind::Host,
                path_prepend: vec![],
                image_ref: None,
                id: "host".into(),
                base_digest: None,
                packages: vec![],
            });
        }
        let desc = ToolchainDesc::embedded(name)?;
        let dir = toolchains.join(name);
        let stamp_path = dir.join("stamp.json");
        if !stamp_path.exists() {
            bail!(
                "toolchain {name} is not built ({} has no stamp.json)\nhelp: run `rcclfix toolchain build {name}` (as root; a few minutes and about 1.8 GB)",
                dir.display()
            );
        }
        let bytes = crate::fsutil::read_capped(&stamp_path, MAX_STAMP_BYTES, "a toolchain stamp")?;
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
            // The dpkg database decides the library's bytes; the stamp's list is what was there
            // when the rootfs was built.
            packages: super::rootfs::dpkg_installed(&dir.join("rootfs"))?,
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
            packages: vec![],
        }
    }

    /// A rootfs toolchain's installed packages as `name=version`, sorted, read from its rootfs's
    /// dpkg database when it was opened ([`super::rootfs::dpkg_installed`]); empty for image and
    /// host toolchains.
    pub fn packages(&self) -> &[String] {
        &self.packages
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
    /// Identity for `manifest.toolchain_id` and `prove.json`: for a rootfs toolchain `sha256:` of
    /// its stamp (the description hash and the installed package versions), the same under every
    /// engine and across re-imports; for an image toolchain the image id once [`prepare`]d; `host`.
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
                engine
                    .import_image(&tar, &reference, &home_id())
                    .with_context(|| {
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
    // A rootfs toolchain keeps the id of its stamp, which names its content whatever the engine:
    // the image id would change with every re-import of the same rootfs (issue 41). An image
    // toolchain has no other identity than the image the engine built.
    if tc.id.is_empty() {
        tc.id = engine.image_id(&reference)?;
    }
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
/// `localhost/rcclfix-<name>`) that this `RCCLFIX_HOME` imported, best effort: an image still in
/// use stays, and another home's image (a test run's, or the user's) is never removed.
fn prune_old_images(engine: &Engine, name: &str, keep: &str) {
    for r in engine.remove_other_tags(&format!("localhost/rcclfix-{name}"), keep, &home_id()) {
        crate::ui::status("Removed", format_args!("old toolchain image {r}"));
    }
}

/// This `RCCLFIX_HOME` as the images label it: its canonical path (as given when it cannot be
/// resolved).
fn home_id() -> String {
    let h = crate::paths::home();
    fs_err::canonicalize(&h)
        .unwrap_or(h)
        .to_string_lossy()
        .into_owned()
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
        let stamp_path = toolchains_dir().join(name).join("stamp.json");
        let stamp: Option<Stamp> =
            match crate::fsutil::read_state(&stamp_path, MAX_STAMP_BYTES, "a toolchain stamp") {
                Ok(b) => b.and_then(|b| match serde_json::from_slice(&b) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        crate::ui::warn(format_args!(
                            "{}: not a toolchain stamp ({e}); ignored",
                            stamp_path.display()
                        ));
                        None
                    }
                }),
                Err(e) => {
                    crate::ui::warn(format_args!("{e:#}; ignored"));
                    None
                }
            };
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

impl Toolchain {
    /// A host toolchain named `name` with these package versions (`name=version`), for the
    /// record-drift tests ([`super::drift`]).
    #[cfg(test)]
    pub(crate) fn with_packages(name: &str, packages: &[&str]) -> Toolchain {
        Toolchain {
            name: name.into(),
            kind: ToolchainKind::Host,
            path_prepend: vec![],
            image_ref: None,
            id: "x".into(),
            base_digest: None,
            packages: packages.iter().map(|s| s.to_string()).collect(),
        }
    }
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

    /// The ROCm 7.2 toolchain takes its ROCm packages, and only those, from experimental; every
    /// pinned package is one the description installs or a library their -dev packages need.
    #[test]
    fn rocm72_pins_the_rocm_packages_to_experimental() {
        let d = ToolchainDesc::embedded("debian-rocm7.2").unwrap();
        assert_eq!(d.suite, "sid");
        assert_eq!(d.pin.len(), 1);
        assert_eq!(d.pin[0].suite, "experimental");
        for p in [
            "hipcc",
            "libamdhip64-dev",
            "rocm-device-libs-22",
            "hipify-perl",
        ] {
            assert!(d.pin[0].packages.iter().any(|x| x == p), "{p} not pinned");
        }
        for p in ["clang-22", "cmake", "rocm-cmake", "build-essential"] {
            assert!(!d.pin[0].packages.iter().any(|x| x == p), "{p} pinned");
        }
    }

    /// A description without `[[pin]]` hashes as before the field existed, so the toolchains
    /// already built from debian-sid and debian-trixie do not read as outdated.
    #[test]
    fn pins_do_not_change_the_hash_of_plain_descriptions() {
        let d = ToolchainDesc::embedded("debian-sid").unwrap();
        assert!(!serde_json::to_string(&d).unwrap().contains("pin"));
    }

    #[test]
    fn bad_pins_are_refused() {
        let base = "description = \"x\"\nsuite = \"sid\"\npackages = [\"hipcc\"]\n";
        for (extra, needle) in [
            (
                "[[pin]]\nsuite = \"sid\"\npackages = [\"hipcc\"]\n",
                "another suite",
            ),
            (
                "[[pin]]\nsuite = \"experimental\"\npackages = []\n",
                "at least one",
            ),
            (
                "[[pin]]\nsuite = \"exp erimental\"\npackages = [\"a\"]\n",
                "not a Debian",
            ),
            (
                "[[pin]]\nsuite = \"experimental\"\npackages = [\"a\\nPin: x\"]\n",
                "not a Debian",
            ),
        ] {
            let e = ToolchainDesc::parse(&format!("{base}{extra}"), "t.toml").unwrap_err();
            assert!(format!("{e:#}").contains(needle), "{extra}: {e:#}");
            assert!(format!("{e:#}").starts_with("t.toml: "), "{e:#}");
        }
    }
}
