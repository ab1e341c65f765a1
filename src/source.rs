//! Pinned RCCL sources: clone at a tag from the recipe URL or a local mirror, check the commit
//! against the pin, keep a source cache, apply patches and extra files.
//!
//! The cache is one bare repository per recipe URL under `$RCCLFIX_HOME/src/<name>-<hash>.git`,
//! shared by every recipe and mirror of that URL, so a second build does not clone again. Each fetch
//! asks the origin (`git ls-remote`) what the tag points to now, so a tag that moved upstream is
//! noticed even when the cache still holds the old one; offline, the cached tag is used with a
//! warning. A tag is fetched into a temporary ref (`refs/rcclfix-incoming/tags/<tag>`), its commit
//! checked against the pin (`source.commit`, else the lockfile), and only then written to the
//! cache's `refs/tags/<tag>`; an unpinned tag is pinned in the user's lockfile on first fetch, like
//! `Cargo.lock`.
//!
//! **Invariant:** the cache's `refs/tags/<tag>` only ever holds a commit that passed the pin check
//! (or was pinned by that fetch): a refused fetch leaves the cache's tags as they were.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sha2::Digest;

use crate::manifest::FileDigest;
use crate::process::Cmd;
use crate::recipe::{Lockfile, Recipe};

/// Where sources come from for one fetch.
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    /// A local git mirror (bare or not) used instead of the recipe URL (`--git-mirror`,
    /// `RCCLFIX_GIT_MIRROR`).
    pub mirror: Option<PathBuf>,
    /// Refuse to pin an unpinned tag (`--locked`): the recipe or lockfile must already pin it.
    pub locked: bool,
}

/// The result of [`fetch`]: the tag resolved and checked, present in the cache.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The bare cache repository.
    pub cache: PathBuf,
    /// What was asked (`--git-mirror` path or the recipe URL), for messages.
    pub origin: String,
    /// The commit the tag resolves to (40 hex), equal to the pin.
    pub commit: String,
    /// Whether the pin was recorded just now (first fetch of an unpinned tag).
    pub newly_pinned: bool,
}

/// The user's lockfile: `$RCCLFIX_HOME/rcclfix.lock`.
pub fn user_lockfile() -> PathBuf {
    crate::paths::home().join("rcclfix.lock")
}

/// The cache repository for a git URL: `$RCCLFIX_HOME/src/<last path part>-<sha256(url)[..12]>.git`.
pub fn cache_dir(url: &str) -> PathBuf {
    let base: String = url
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let h = hex::encode(sha2::Sha256::digest(url.as_bytes()));
    crate::paths::home()
        .join("src")
        .join(format!("{base}-{}.git", &h[..12]))
}

fn git() -> Cmd {
    Cmd::new("git", "git")
}

/// What `tag` points to at `origin` (a URL or a local path), peeled to a commit: `Ok(None)` when the
/// origin answers but has no such tag.
///
/// Errors: the origin cannot be reached (offline, no such path).
pub fn remote_tag_commit(origin: &str, tag: &str) -> anyhow::Result<Option<String>> {
    let out = Cmd::new(format!("git ls-remote {origin}"), "git")
        .args(["ls-remote", "--tags", origin])
        .arg(format!("refs/tags/{tag}"))
        .arg(format!("refs/tags/{tag}^{{}}"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .read()?;
    let mut plain = None;
    let mut peeled = None;
    for line in out.lines() {
        let Some((sha, r)) = line.split_once('\t') else {
            continue;
        };
        if r.ends_with("^{}") {
            peeled = Some(sha.to_owned());
        } else {
            plain = Some(sha.to_owned());
        }
    }
    Ok(peeled.or(plain))
}

fn cached_tag_commit(cache: &Path, tag: &str) -> Option<String> {
    git()
        .arg(format!("--git-dir={}", cache.display()))
        .args(["rev-parse", "--verify", "-q"])
        .arg(format!("refs/tags/{tag}^{{commit}}"))
        .read()
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Resolve the recipe's tag to a commit, make sure the cache holds it, and check it against the pin.
/// An unpinned tag is pinned in [`user_lockfile`] (unless `opts.locked`).
///
/// Errors (one line each, plus a `help:` line): the mirror does not exist; the tag is not in the
/// origin; the tag resolves to a commit other than the pin (both SHAs named); the tag is unpinned and
/// `locked`; git fails (its output tail included).
pub fn fetch(recipe: &Recipe, opts: &SourceOptions) -> anyhow::Result<Fetched> {
    if let Some(branch) = &recipe.source.branch {
        return fetch_pinned_commit(recipe, branch, opts);
    }
    let url = &recipe.source.git;
    let tag = &recipe.source.tag;
    if opts.locked
        && recipe
            .pinned_commit(&Lockfile::load(&user_lockfile())?)
            .is_none()
    {
        bail!(
            "recipe {} does not pin tag {tag} (no source.commit, no lockfile entry) and --locked was given\nhelp: run `rcclfix recipe pin {}` or add source.commit",
            recipe.id(),
            recipe.id()
        );
    }
    let origin = origin_for(url, opts)?;
    let cache = ensure_cache(url)?;
    let lock = Lockfile::load(&user_lockfile())?;
    let pin = recipe.pinned_commit(&lock).map(str::to_owned);
    let commit = match remote_tag_commit(&origin, tag) {
        Ok(Some(remote)) => {
            if cached_tag_commit(&cache, tag).as_deref() == Some(remote.as_str()) {
                remote
            } else {
                crate::ui::status("Fetching", format_args!("tag {tag} from {origin}"));
                fetch_tag_checked(&cache, &origin, tag, pin.as_deref(), recipe)?
            }
        }
        Ok(None) => bail!(
            "tag {tag:?} not found in {origin} (recipe {})\nhelp: check source.tag, or use a mirror that has it (--git-mirror)",
            recipe.id()
        ),
        Err(e) => match cached_tag_commit(&cache, tag) {
            Some(c) => {
                crate::ui::warn(format_args!("cannot reach {origin} ({}); using the cached tag {tag}", first_line(&e)));
                c
            }
            None => {
                return Err(e.context(format!(
                    "cannot reach {origin} and the source cache has no tag {tag}\nhelp: for offline use pass a local mirror with --git-mirror PATH"
                )))
            }
        },
    };
    let mut lock = lock;
    let mut newly_pinned = false;
    match pin {
        Some(pin) if pin == commit => {}
        Some(pin) => bail!(
            "tag {tag} of {origin} resolves to commit {commit}, but recipe {} pins {pin}\nhelp: the tag moved or the mirror differs; check which commit is right, then fix source.commit (or the lockfile entry in {})",
            recipe.id(),
            user_lockfile().display()
        ),
        None if opts.locked => bail!(
            "recipe {} does not pin tag {tag} (no source.commit, no lockfile entry) and --locked was given\nhelp: run `rcclfix recipe pin {}` or add source.commit",
            recipe.id(),
            recipe.id()
        ),
        None => {
            lock.set(recipe.id(), tag, &commit);
            lock.save(&user_lockfile())?;
            crate::ui::status("Pinned", format_args!("{} tag {tag} = {commit} in {}", recipe.id(), user_lockfile().display()));
            newly_pinned = true;
        }
    }
    Ok(Fetched {
        cache,
        origin,
        commit,
        newly_pinned,
    })
}

/// The origin of one fetch: the mirror (`--git-mirror`, must exist) or the recipe URL.
fn origin_for(url: &str, opts: &SourceOptions) -> anyhow::Result<String> {
    Ok(match &opts.mirror {
        Some(m) => {
            if !m.exists() {
                bail!("git mirror {} does not exist", m.display());
            }
            fs_err::canonicalize(m)?.display().to_string()
        }
        None => url.to_owned(),
    })
}

/// The source cache for `url` ([`cache_dir`]), created empty when missing.
fn ensure_cache(url: &str) -> anyhow::Result<PathBuf> {
    let cache = cache_dir(url);
    if !cache.exists() {
        // An empty bare repository: tags only ever enter it through the checked fetch below, so a
        // mirror whose tag moved cannot leave the moved tag in the shared cache.
        crate::ui::status(
            "Creating",
            format_args!("the source cache {}", cache.display()),
        );
        let parent = cache.parent().expect("cache has a parent");
        fs_err::create_dir_all(parent)?;
        let tmp = crate::fsutil::TempDir::new_in(parent, ".rcclfix-clone-")?;
        let dst = tmp.path().join("repo.git");
        git()
            .args(["init", "--bare", "--quiet"])
            .arg(&dst)
            .read()
            .with_context(|| format!("cannot create the source cache {}", cache.display()))?;
        if let Err(e) = fs_err::rename(&dst, &cache) {
            if !cache.exists() {
                return Err(e.into());
            }
        }
    }
    Ok(cache)
}

/// Where the cache keeps a commit fetched by its id: `refs/rcclfix/commits/<sha>` (a ref keeps it
/// from being pruned).
pub const COMMIT_PREFIX: &str = "refs/rcclfix/commits/";

fn cache_has_commit(cache: &Path, commit: &str) -> bool {
    git()
        .arg(format!("--git-dir={}", cache.display()))
        .args(["rev-parse", "--verify", "-q"])
        .arg(format!("{COMMIT_PREFIX}{commit}^{{commit}}"))
        .read()
        .map(|s| s.trim() == commit)
        .unwrap_or(false)
}

/// What `branch` points to at `origin`: `Ok(None)` when the origin answers but has no such branch.
///
/// Errors: the origin cannot be reached.
pub fn remote_branch_commit(origin: &str, branch: &str) -> anyhow::Result<Option<String>> {
    let out = Cmd::new(format!("git ls-remote {origin}"), "git")
        .args(["ls-remote", "--heads", origin])
        .arg(format!("refs/heads/{branch}"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .read()?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(_, r)| *r == format!("refs/heads/{branch}"))
        .map(|(sha, _)| sha.to_owned()))
}

/// Fetch a recipe that names a `branch` and pins `commit`: the commit itself is fetched by its id
/// (from the mirror or the URL) into [`COMMIT_PREFIX`]`<sha>` of the cache, unless the cache already
/// holds it. The branch is a hint: when the origin still has it, the pinned commit must be its head or
/// an ancestor of its head (else the fetch is refused naming both commits); when the branch is gone
/// (staging branches get deleted) or the origin is unreachable but the cache holds the commit, a
/// warning says so and the pinned commit is built.
///
/// Errors: no commit pinned; the origin does not have the commit; the branch no longer contains it;
/// the origin is unreachable and the cache lacks the commit.
fn fetch_pinned_commit(
    recipe: &Recipe,
    branch: &str,
    opts: &SourceOptions,
) -> anyhow::Result<Fetched> {
    let url = &recipe.source.git;
    let commit = recipe.source.commit.clone().with_context(|| {
        format!(
            "recipe {} names branch {branch} but pins no commit",
            recipe.id()
        )
    })?;
    let origin = origin_for(url, opts)?;
    let cache = ensure_cache(url)?;
    let git_dir = format!("--git-dir={}", cache.display());
    let have = cache_has_commit(&cache, &commit);
    let head = remote_branch_commit(&origin, branch);
    if !have {
        crate::ui::status(
            "Fetching",
            format_args!(
                "commit {commit} ({}) from {origin}",
                recipe.source.rev_label()
            ),
        );
        git()
            .arg(&git_dir)
            .args(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head"])
            .arg(&origin)
            .arg(format!("+{commit}:{COMMIT_PREFIX}{commit}"))
            .env("GIT_TERMINAL_PROMPT", "0")
            .read()
            .with_context(|| {
                format!(
                    "cannot fetch the pinned commit {commit} of recipe {} from {origin}",
                    recipe.id()
                )
            })?;
        if !cache_has_commit(&cache, &commit) {
            bail!(
                "{origin} did not deliver commit {commit} (recipe {})",
                recipe.id()
            );
        }
    }
    match head {
        Ok(Some(h)) if h == commit => {}
        Ok(Some(h)) => {
            // The branch moved on: the pin must still be part of its history.
            let incoming = IncomingRef {
                cache: &cache,
                name: format!("refs/rcclfix-incoming/heads/{branch}"),
            };
            git()
                .arg(&git_dir)
                .args(["fetch", "--quiet", "--force", "--no-tags", "--no-write-fetch-head"])
                .arg(&origin)
                .arg(format!("+refs/heads/{branch}:{}", incoming.name))
                .env("GIT_TERMINAL_PROMPT", "0")
                .read()
                .with_context(|| format!("cannot fetch branch {branch} from {origin}"))?;
            let contained = git()
                .arg(&git_dir)
                .args(["merge-base", "--is-ancestor", &commit, &incoming.name])
                .read()
                .is_ok();
            if !contained {
                bail!(
                    "branch {branch} of {origin} is at commit {h}, which does not contain the commit {commit} recipe {} pins\nhelp: the branch was rewritten or the mirror differs; check which commit is right, then fix source.commit",
                    recipe.id()
                );
            }
        }
        Ok(None) => crate::ui::warn(format_args!(
            "{origin} no longer has branch {branch}; building the pinned commit {commit} (recipe {})",
            recipe.id()
        )),
        Err(e) => crate::ui::warn(format_args!(
            "cannot reach {origin} ({}); using the cached commit {commit}",
            first_line(&e)
        )),
    }
    Ok(Fetched {
        cache,
        origin,
        commit,
        newly_pinned: false,
    })
}

/// Where [`fetch`] puts a fetched tag before it is checked: `refs/rcclfix-incoming/tags/<tag>`.
pub const INCOMING_PREFIX: &str = "refs/rcclfix-incoming/tags/";

/// Deletes a temporary ref when dropped (also on an error path).
struct IncomingRef<'a> {
    cache: &'a Path,
    name: String,
}

impl Drop for IncomingRef<'_> {
    fn drop(&mut self) {
        let _ = git()
            .arg(format!("--git-dir={}", self.cache.display()))
            .args(["update-ref", "-d"])
            .arg(&self.name)
            .read();
    }
}

/// Fetch `tag` from `origin` into [`INCOMING_PREFIX`]`<tag>` of the cache, check its commit against
/// `pin` (when there is one), and only then point the cache's `refs/tags/<tag>` at it. On a refusal
/// or any error the cache's tags are untouched and the temporary ref is deleted. Returns the commit.
///
/// Errors: git fails; the fetched tag resolves to a commit other than `pin` (both SHAs and `origin`
/// named).
fn fetch_tag_checked(
    cache: &Path,
    origin: &str,
    tag: &str,
    pin: Option<&str>,
    recipe: &Recipe,
) -> anyhow::Result<String> {
    let incoming = IncomingRef {
        cache,
        name: format!("{INCOMING_PREFIX}{tag}"),
    };
    let git_dir = format!("--git-dir={}", cache.display());
    git()
        .arg(&git_dir)
        // Shallow: the build needs the tagged tree, not its history (the pin check compares
        // commit ids). From a local mirror of ROCm/rccl this cuts the cold fetch of tag
        // rocm-5.4.3 from 7,736 objects (4.9 MiB) to 399 (1.0 MiB).
        .args([
            "fetch",
            "--quiet",
            "--force",
            "--no-tags",
            "--no-write-fetch-head",
            "--depth=1",
        ])
        .arg(origin)
        .arg(format!("+refs/tags/{tag}:{}", incoming.name))
        .env("GIT_TERMINAL_PROMPT", "0")
        .read()
        .with_context(|| format!("cannot fetch tag {tag} from {origin}"))?;
    let rev = |spec: String| -> anyhow::Result<String> {
        Ok(git()
            .arg(&git_dir)
            .args(["rev-parse", "--verify", "-q"])
            .arg(&spec)
            .read()
            .with_context(|| format!("tag {tag} missing in {} after fetch", cache.display()))?
            .trim()
            .to_owned())
    };
    let object = rev(incoming.name.clone())?;
    let commit = rev(format!("{}^{{commit}}", incoming.name))?;
    if let Some(pin) = pin {
        if pin != commit {
            bail!(
                "tag {tag} of {origin} resolves to commit {commit}, but recipe {} pins {pin}\nhelp: the tag moved or the mirror differs; check which commit is right, then fix source.commit (or the lockfile entry in {}); the source cache was left unchanged",
                recipe.id(),
                user_lockfile().display()
            );
        }
    }
    git()
        .arg(&git_dir)
        .arg("update-ref")
        .arg(format!("refs/tags/{tag}"))
        .arg(&object)
        .read()
        .with_context(|| format!("cannot update tag {tag} in {}", cache.display()))?;
    Ok(commit)
}

fn first_line(e: &anyhow::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

/// Check out `fetched.commit` into `dest` (which must not exist): a local clone of the cache
/// (objects hard-linked where possible, no alternates, so git still works inside a container),
/// then [`verify_checkout`].
pub fn checkout(fetched: &Fetched, dest: &Path) -> anyhow::Result<()> {
    git()
        .args(["clone", "--quiet", "--no-checkout"])
        .arg(&fetched.cache)
        .arg(dest)
        .read()
        .with_context(|| format!("cannot clone the source cache into {}", dest.display()))?;
    git()
        .arg("-C")
        .arg(dest)
        .args([
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "--quiet",
            "--detach",
        ])
        .arg(&fetched.commit)
        .read()
        .with_context(|| format!("cannot check out {}", fetched.commit))?;
    verify_checkout(dest, &fetched.commit)
}

/// Check that the git work tree `tree` is at `commit` (`HEAD`, 40 hex) and clean: no modified,
/// untracked or ignored files.
///
/// Errors: `HEAD` is another commit, or `git status` lists anything (first entries named).
pub fn verify_checkout(tree: &Path, commit: &str) -> anyhow::Result<()> {
    let head = git()
        .arg("-C")
        .arg(tree)
        .args(["rev-parse", "--verify", "HEAD^{commit}"])
        .read()
        .with_context(|| format!("{} has no HEAD commit", tree.display()))?;
    if head.trim() != commit {
        bail!(
            "{} is at commit {}, not the pinned {commit}",
            tree.display(),
            head.trim()
        );
    }
    let status = git()
        .arg("-C")
        .arg(tree)
        .args([
            "status",
            "--porcelain",
            "--ignored",
            "--untracked-files=all",
        ])
        .read()
        .with_context(|| format!("cannot read the status of {}", tree.display()))?;
    if !status.trim().is_empty() {
        let first: Vec<&str> = status.lines().take(3).collect();
        bail!(
            "{} is not a clean checkout of {commit} ({})",
            tree.display(),
            first.join(", ")
        );
    }
    Ok(())
}

/// The text of a recipe's patch `p` (`<name>.patch`, optionally written `patches/<name>.patch`):
/// `patches/<name>` under `root` (the checkout a `--recipe FILE` lives in) when it exists there,
/// else the copy embedded in the binary at build time (`EMBEDDED_PATCHES`).
///
/// Errors: `p` is not a plain file name (no `/`, `..` or control characters), or neither exists.
pub fn patch_text(p: &str, root: Option<&Path>) -> anyhow::Result<String> {
    let name = p.strip_prefix("patches/").unwrap_or(p);
    if name.is_empty()
        || name.contains('/')
        || name.starts_with('.')
        || name.chars().any(|c| c.is_control())
    {
        bail!("patch {p:?} is not a file name under patches/");
    }
    let mut tried = vec![];
    if let Some(root) = root {
        let cand = root.join("patches").join(name);
        if cand.is_file() {
            return Ok(fs_err::read_to_string(&cand)?);
        }
        tried.push(cand.display().to_string());
    }
    if let Some((_, text)) = crate::recipe::EMBEDDED_PATCHES
        .iter()
        .find(|(n, _)| *n == name)
    {
        return Ok((*text).to_owned());
    }
    tried.push("the patches embedded in this rcclfix".into());
    bail!("patch {p:?} not found (looked at {})", tried.join(", "))
}

/// Each recipe patch with the sha256 of its text ([`patch_text`]), in recipe order, without
/// applying anything (the artifact cache's key; `apply_patches_and_files` records the same digests).
///
/// Errors: a patch is missing.
pub fn patch_digests(
    recipe: &Recipe,
    recipe_root: Option<&Path>,
) -> anyhow::Result<Vec<FileDigest>> {
    recipe
        .build
        .patches
        .iter()
        .map(|p| {
            Ok(FileDigest {
                path: p.clone(),
                sha256: hex::encode(sha2::Sha256::digest(patch_text(p, recipe_root)?.as_bytes())),
            })
        })
        .collect()
}

/// Apply the recipe's patches in order with `git apply` in `tree` (the repository root), and
/// create its `extra_files` under `src_dir`. Returns each patch with its sha256.
///
/// Errors: a patch is missing or does not apply (git's message included); an extra file path is
/// absolute or leaves the tree.
pub fn apply_patches_and_files(
    recipe: &Recipe,
    tree: &Path,
    src_dir: &Path,
    recipe_root: Option<&Path>,
) -> anyhow::Result<Vec<FileDigest>> {
    let mut out = vec![];
    for p in &recipe.build.patches {
        let text = patch_text(p, recipe_root)?;
        let mut file = tempfile::Builder::new()
            .prefix(".rcclfix-patch-")
            .tempfile()
            .context("cannot write a patch to a temporary file")?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        git()
            .arg("-C")
            .arg(tree)
            .args(["apply", "--whitespace=nowarn"])
            .arg(file.path())
            .read()
            .with_context(|| {
                format!(
                    "patch {p} does not apply to {} {}",
                    recipe.source.tag,
                    recipe.id()
                )
            })?;
        out.push(FileDigest {
            path: p.clone(),
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
        });
    }
    for (rel, contents) in &recipe.build.extra_files {
        let relp = Path::new(rel);
        if relp.is_absolute()
            || relp
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!("build.extra_files: {rel:?} must be a relative path inside the source tree");
        }
        let dst = src_dir.join(relp);
        if let Some(d) = dst.parent() {
            fs_err::create_dir_all(d)?;
        }
        crate::fsutil::atomic_write(&dst, contents.as_bytes())?;
    }
    Ok(out)
}

/// What `rcclfix recipe pin` needs besides the recipes ([`pin`]).
#[derive(Debug, Clone, Default)]
pub struct PinOptions {
    /// Resolve tags in this local git mirror instead of the recipe URLs (`--git-mirror`).
    pub git_mirror: Option<PathBuf>,
    /// The lockfile to check and write (`$RCCLFIX_HOME/rcclfix.lock` by default, [`user_lockfile`]).
    pub lockfile: PathBuf,
}

/// One recipe's line in [`pin`]'s result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRow {
    /// The recipe id.
    pub recipe: String,
    /// The tag, or for a branch recipe the branch name ([`crate::recipe::Source::rev_name`]).
    pub rev: String,
    /// Whether the recipe names a branch (its commit is pinned in the recipe itself).
    pub branch: bool,
    /// The commit the origin has (40 hex), the recipe's pin for a failed branch recipe, or empty.
    pub commit: String,
    /// `ok`, `pinned`, `MISMATCH: pinned <sha>`, `unreachable: …`, `tag not found in …`,
    /// `error: …` (untrusted text: escape it for a terminal).
    pub state: String,
    /// Whether the state is a success (`ok` or `pinned`).
    pub ok: bool,
}

/// What [`pin`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinOutcome {
    /// Every recipe resolved and agreed with its pin.
    pub all_ok: bool,
    /// The lockfile, when new pins were written to it.
    pub wrote: Option<PathBuf>,
}

/// `rcclfix recipe pin`: resolve each recipe's tag with `git ls-remote` (against the recipe URL or
/// `opts.git_mirror`); pinned recipes are checked, unpinned ones are pinned in `opts.lockfile`
/// (written atomically, once, at the end). A branch recipe is fetched as `build` does (its commit
/// is pinned in the recipe). `on_row` gets each recipe's row as soon as it is resolved (a remote
/// can be slow), in `recipes` order.
///
/// Errors: the lockfile cannot be read or written. A missing, unreachable or mismatching tag is a
/// row with `ok: false` and makes [`PinOutcome::all_ok`] false.
pub fn pin(
    recipes: &[Recipe],
    opts: &PinOptions,
    mut on_row: impl FnMut(&PinRow),
) -> anyhow::Result<PinOutcome> {
    let mut lock = Lockfile::load(&opts.lockfile)?;
    let before = lock.clone();
    let mut all_ok = true;
    for r in recipes {
        let origin = match &opts.git_mirror {
            Some(m) => m.display().to_string(),
            None => r.source.git.clone(),
        };
        let row = |commit: String, state: String, ok: bool| PinRow {
            recipe: r.id().to_owned(),
            rev: r.source.rev_name().to_owned(),
            branch: r.source.branch.is_some(),
            commit,
            state,
            ok,
        };
        let row = if r.source.branch.is_some() {
            // A branch recipe pins its commit in the recipe: check that the origin has it and
            // that the branch (when still there) contains it, as `build` does.
            let so = SourceOptions {
                mirror: opts.git_mirror.clone(),
                locked: true,
            };
            match fetch(r, &so) {
                Ok(f) => row(f.commit, "ok".to_owned(), true),
                Err(e) => row(
                    r.source.commit.clone().unwrap_or_default(),
                    format!("error: {}", first_line(&e)),
                    false,
                ),
            }
        } else {
            match remote_tag_commit(&origin, &r.source.tag) {
                Err(e) => row(
                    String::new(),
                    format!("unreachable: {}", first_line(&e)),
                    false,
                ),
                Ok(None) => row(String::new(), format!("tag not found in {origin}"), false),
                Ok(Some(c)) => match r.pinned_commit(&lock) {
                    Some(p) if p == c => row(c, "ok".to_owned(), true),
                    Some(p) => row(c, format!("MISMATCH: pinned {p}"), false),
                    None => {
                        lock.set(r.id(), &r.source.tag, &c);
                        row(c, "pinned".to_owned(), true)
                    }
                },
            }
        };
        all_ok &= row.ok;
        on_row(&row);
    }
    let wrote = if lock != before {
        lock.save(&opts.lockfile)?;
        Some(opts.lockfile.clone())
    } else {
        None
    };
    Ok(PinOutcome { all_ok, wrote })
}
