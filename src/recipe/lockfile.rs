//! The lockfile (`rcclfix.lock`, like `Cargo.lock`): tag → commit pins recorded on first fetch of
//! an unpinned recipe and image → digest pins recorded on first use of an image toolchain; the
//! embedded `recipes/rcclfix.lock` under the user's `$RCCLFIX_HOME/rcclfix.lock`.

use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::{is_full_sha, is_plain_name, is_ref_name, toml_error, EMBEDDED_LOCK, MAX_RECIPE_BYTES};

/// The lockfile: tag → commit pins recorded on first fetch of an unpinned recipe, and toolchain
/// image → digest pins recorded on first use of an image toolchain.
///
/// Format (TOML): `[[pin]] recipe = "…" tag = "…" commit = "…"` and
/// `[[image]] reference = "…" digest = "sha256:…"`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    /// The pins, sorted by recipe then tag.
    #[serde(default)]
    pub pin: Vec<Pin>,
    /// Image digest pins, sorted by reference.
    #[serde(default, rename = "image", skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePin>,
}

/// One image pin: the digest an image reference had when first used.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields)]
pub struct ImagePin {
    /// The reference as the recipe names it, e.g. `rocm/dev-ubuntu-24.04:7.2.1-complete`.
    pub reference: String,
    /// `sha256:` digest of the image (the engine's `.Digest`).
    pub digest: String,
}

/// One lockfile entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// Recipe id.
    pub recipe: String,
    /// Tag.
    pub tag: String,
    /// Full commit id the tag resolved to when pinned.
    pub commit: String,
}

impl Lockfile {
    /// The embedded lockfile merged under the user's lockfile at `path` (the user's entries win).
    pub fn load(path: &Path) -> anyhow::Result<Lockfile> {
        let mut lock: Lockfile =
            toml::from_str(EMBEDDED_LOCK).context("embedded recipes/rcclfix.lock")?;
        if path.exists() {
            let text = crate::fsutil::read_text_capped(path, MAX_RECIPE_BYTES, "a lockfile")?;
            let user: Lockfile = toml::from_str(&text)
                .map_err(|e| toml_error(&path.display().to_string(), &text, &e))?;
            user.check(path)?;
            for p in user.pin {
                lock.set(&p.recipe, &p.tag, &p.commit);
            }
            for i in user.images {
                lock.set_image(&i.reference, &i.digest);
            }
        }
        Ok(lock)
    }

    /// The user's lockfile at `path` alone (empty when it does not exist), for adding pins.
    pub fn load_user(path: &Path) -> anyhow::Result<Lockfile> {
        if !path.exists() {
            return Ok(Lockfile::default());
        }
        let text = crate::fsutil::read_text_capped(path, MAX_RECIPE_BYTES, "a lockfile")?;
        let lock: Lockfile = toml::from_str(&text)
            .map_err(|e| toml_error(&path.display().to_string(), &text, &e))?;
        lock.check(path)?;
        Ok(lock)
    }

    /// Check every pin of a user's lockfile at `path`: recipe names, tags and commits as a recipe
    /// has them ([`is_plain_name`], [`is_ref_name`], [`is_full_sha`]), digests `sha256:` + 64
    /// hex.
    ///
    /// Errors: one line naming the file, the entry and the value.
    fn check(&self, path: &Path) -> anyhow::Result<()> {
        let f = path.display();
        for p in &self.pin {
            if !is_plain_name(&p.recipe) {
                bail!("{f}: pin recipe {:?} is not a recipe name", p.recipe);
            }
            if !is_ref_name(&p.tag) {
                bail!(
                    "{f}: pin of {} has tag {:?}, not a git tag name",
                    p.recipe,
                    p.tag
                );
            }
            if !is_full_sha(&p.commit) {
                bail!(
                    "{f}: pin of {} tag {} has commit {:?}, not a full 40-hex commit",
                    p.recipe,
                    p.tag,
                    p.commit
                );
            }
        }
        for i in &self.images {
            let hex = i.digest.strip_prefix("sha256:").unwrap_or_default();
            if !(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())) {
                bail!(
                    "{f}: image {:?} has digest {:?}, not sha256: and 64 hex digits",
                    i.reference,
                    i.digest
                );
            }
        }
        Ok(())
    }

    /// The pinned digest of image `reference`.
    pub fn image_digest(&self, reference: &str) -> Option<&str> {
        self.images
            .iter()
            .find(|p| p.reference == reference)
            .map(|p| p.digest.as_str())
    }

    /// Record or replace an image pin.
    pub fn set_image(&mut self, reference: &str, digest: &str) {
        self.images.retain(|p| p.reference != reference);
        self.images.push(ImagePin {
            reference: reference.into(),
            digest: digest.into(),
        });
        self.images.sort();
    }

    /// The pinned commit for (recipe, tag).
    pub fn get(&self, recipe: &str, tag: &str) -> Option<&str> {
        self.pin
            .iter()
            .find(|p| p.recipe == recipe && p.tag == tag)
            .map(|p| p.commit.as_str())
    }

    /// Record or replace a pin.
    pub fn set(&mut self, recipe: &str, tag: &str, commit: &str) {
        self.pin.retain(|p| !(p.recipe == recipe && p.tag == tag));
        self.pin.push(Pin {
            recipe: recipe.into(),
            tag: tag.into(),
            commit: commit.into(),
        });
        self.pin.sort();
    }

    /// Write atomically to `path`.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = format!(
            "# rcclfix.lock: tag → commit pins recorded on first fetch and image → digest pins recorded on\n# first use; checked on every later fetch and use.\n{}",
            toml::to_string_pretty(self)?
        );
        if let Some(d) = path.parent() {
            fs_err::create_dir_all(d)?;
        }
        crate::fsutil::atomic_write(path, text.as_bytes())
    }
}
