//! The image verbs of an OCI [`Engine`] (podman, docker): inspect, import a rootfs tar, build a
//! Containerfile, pull, read a registry digest, and remove a repository's other tags. The run
//! verbs (turning a `RunSpec` into the engine's command line) stay in `engine.rs`.

use std::path::Path;

use anyhow::Context;

use super::{Engine, EngineKind};
use crate::process::Cmd;

impl Engine {
    /// Whether this engine runs OCI images (podman, docker).
    pub fn uses_images(&self) -> bool {
        matches!(self.kind, EngineKind::Podman | EngineKind::Docker)
    }

    /// Whether the engine has image `reference` locally (`image inspect`).
    pub fn image_exists(&self, reference: &str) -> bool {
        Cmd::new("probe image", &self.path)
            .args(["image", "inspect", "--format", "{{.Id}}", reference])
            .read()
            .is_ok()
    }

    /// The image id of `reference`, `sha256:`-prefixed (`image inspect --format {{.Id}}`).
    ///
    /// Errors: the engine cannot inspect it.
    pub fn image_id(&self, reference: &str) -> anyhow::Result<String> {
        let id = Cmd::new("inspect the toolchain image", &self.path)
            .args(["image", "inspect", "--format", "{{.Id}}"])
            .arg(reference)
            .read()?
            .trim()
            .to_owned();
        Ok(if id.starts_with("sha256:") {
            id
        } else {
            format!("sha256:{id}")
        })
    }

    /// `import --change "LABEL rcclfix.home=HOME" TAR REFERENCE`: a rootfs tar as a local image,
    /// labelled with the `RCCLFIX_HOME` it was imported for ([`HOME_LABEL`]), so that pruning in
    /// one home never removes another home's image (the Dockerfile `LABEL` instruction, which
    /// `podman import --change` and `docker import --change` both accept).
    ///
    /// Errors: the import fails (the engine's error tail is included).
    pub fn import_image(&self, tar: &Path, reference: &str, home: &str) -> anyhow::Result<()> {
        Cmd::new(format!("{} import", self.name()), &self.path)
            .arg("import")
            .arg("--change")
            .arg(format!("LABEL {HOME_LABEL}={}", label_value(home)))
            .arg(tar)
            .arg(reference)
            .read()?;
        Ok(())
    }

    /// The [`HOME_LABEL`] of local image `reference` as it was written (quoted), `None` when the
    /// image has none (imported by an older rcclfix, or by hand) or cannot be inspected.
    pub fn image_home(&self, reference: &str) -> Option<String> {
        let out = Cmd::new("inspect a toolchain image's home", &self.path)
            .args([
                "image",
                "inspect",
                "--format",
                &format!("{{{{index .Config.Labels \"{HOME_LABEL}\"}}}}"),
                reference,
            ])
            .read()
            .ok()?;
        let v = out.trim();
        (!v.is_empty() && v != "<no value>").then(|| v.to_owned())
    }

    /// `build -f CONTAINERFILE -t REFERENCE CONTEXT`, output inherited (a long, visible step).
    ///
    /// Errors: the build fails.
    pub fn build_image(
        &self,
        containerfile: &Path,
        reference: &str,
        context: &Path,
    ) -> anyhow::Result<()> {
        Cmd::new(format!("{} build {reference}", self.name()), &self.path)
            .arg("build")
            .arg("-f")
            .arg(containerfile)
            .arg("-t")
            .arg(reference)
            .arg(context)
            .run()
    }

    /// `pull IMAGE`, output inherited (tens of GB for the ROCm images).
    ///
    /// Errors: the pull fails.
    pub fn pull_image(&self, image: &str) -> anyhow::Result<()> {
        Cmd::new(format!("{} pull {image}", self.name()), &self.path)
            .arg("pull")
            .arg(image)
            .run()
    }

    /// The registry digest (`sha256:…`) of local image `image`: podman's `{{.Digest}}`, docker's
    /// first `RepoDigests` entry.
    ///
    /// Errors: the inspect fails, or the image has no digest.
    pub fn image_digest(&self, image: &str) -> anyhow::Result<String> {
        let format = match self.kind {
            EngineKind::Podman => "{{.Digest}}",
            _ => "{{range .RepoDigests}}{{println .}}{{end}}",
        };
        let out = Cmd::new("inspect the toolchain base image", &self.path)
            .args(["image", "inspect", "--format", format])
            .arg(image)
            .read()?;
        out.lines()
            .map(|l| l.trim().rsplit('@').next().unwrap_or_default().to_owned())
            .find(|d| d.starts_with("sha256:"))
            .with_context(|| format!("{} reports no digest for image {image}", self.name()))
    }

    /// Remove every local tag of `repository` except `keep` whose image carries `home` in its
    /// [`HOME_LABEL`], best effort (an image still in use stays, and an image of another home, or
    /// with no label, is never touched); returns the references removed.
    pub fn remove_other_tags(&self, repository: &str, keep: &str, home: &str) -> Vec<String> {
        let ours = label_value(home);
        let Ok(list) = Cmd::new("list toolchain images", &self.path)
            .args(["images", "--format", "{{.Repository}}:{{.Tag}}"])
            .read()
        else {
            return vec![];
        };
        let mut removed = vec![];
        for r in list.lines().map(str::trim) {
            if r.starts_with(&format!("{repository}:"))
                && r != keep
                && self.image_home(r).as_deref() == Some(ours.as_str())
                && Cmd::new("remove an old toolchain image", &self.path)
                    .args(["rmi", r])
                    .read()
                    .is_ok()
            {
                removed.push(r.to_owned());
            }
        }
        removed
    }
}

/// The image label naming the `RCCLFIX_HOME` a toolchain image was imported for: tests and users
/// share one image store, and each prunes only its own home's images.
pub const HOME_LABEL: &str = "rcclfix.home";

/// `home` as a label value: the engines split a `LABEL` instruction at whitespace and read
/// quotes, so every byte other than `[A-Za-z0-9/._-]` is written as `%XX` (stable, and the same
/// string the inspect reads back).
pub fn label_value(home: &str) -> String {
    let mut s = String::with_capacity(home.len());
    for b in home.bytes() {
        if b.is_ascii_alphanumeric() || b"/._-".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}
