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
//!
//! **Fetch only what is built.** A recipe with `source.subdir` (`projects/rccl` of the
//! ROCm/rocm-systems monorepo) makes its cache a *partial* one: the tag is fetched shallow and
//! blob-filtered (`--depth=1 --filter=blob:none`: the commit and its trees, no file contents), then
//! only the blobs of the subfolder's sparse cone ([`cone_paths`]) are fetched by id. The cache's
//! promisor remote `rcclfix` ([`PROMISOR`]) has no URL in its config: it is given on each fetch
//! with `-c`, so no later git command in the cache (or a checkout of it) can reach the network
//! lazily. From a local path (`--git-mirror`) git runs the mirror's `upload-pack` itself and
//! `-c uploadpack.allowFilter` on our side does not reach it (local transports clear
//! `GIT_CONFIG_PARAMETERS`), so the remote's `uploadpack` command carries the setting. Such a
//! cache is checked out by [`checkout`] as a sparse, cone-mode work tree that holds every blob of the
//! cone before `git checkout` runs (checked after it), and nothing outside.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sha2::Digest;

use crate::process::Cmd;
use crate::recipe::{Lockfile, Recipe};

mod partial;
mod pin;
mod tree;

pub use partial::{cone_paths, is_partial, PROMISOR};
use partial::{ensure_cone_blobs, fetch_remote, filter_args, from_origin};
pub use pin::{pin, PinOptions, PinOutcome, PinRow};
pub use tree::{
    apply_patches_and_files, checkout, patch_digests, patch_text, read_inside, verify_checkout,
    write_inside, SOURCE_TREE,
};

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
    /// The recipe's `source.subdir` (empty: the whole tree): [`checkout`] makes a sparse checkout
    /// of it when the cache is partial.
    pub subdir: String,
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

/// The transports any git command of rcclfix may use (`GIT_ALLOW_PROTOCOL`, git's
/// `Documentation/config/protocol.txt`): it overrides every `protocol.*.allow` setting of the
/// user's configuration, so `protocol.ext.allow=always` there cannot make a fetch run a command.
pub const ALLOWED_PROTOCOLS: &str = "file:git:http:https:ssh";

/// `git`, restricted to [`ALLOWED_PROTOCOLS`] and with no terminal prompt.
pub(super) fn git() -> Cmd {
    git_named("git")
}

/// [`git`] with `name` for messages and the debug log.
fn git_named(name: impl Into<String>) -> Cmd {
    Cmd::new(name, "git")
        .env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
}

/// What `tag` points to at `origin` (a URL or a local path), peeled to a commit: `Ok(None)` when the
/// origin answers but has no such tag.
///
/// Errors: the origin cannot be reached (offline, no such path).
pub fn remote_tag_commit(origin: &str, tag: &str) -> anyhow::Result<Option<String>> {
    check_origin(origin)?;
    let out = git_named(format!("git ls-remote {origin}"))
        .args(["ls-remote", "--tags", origin])
        .arg(format!("refs/tags/{tag}"))
        .arg(format!("refs/tags/{tag}^{{}}"))
        .read()?;
    Ok(tag_commit_in_ls_remote(&out, tag))
}

/// The commit of `refs/tags/<tag>` in `git ls-remote` output: the peeled `refs/tags/<tag>^{}`
/// line for an annotated tag, else the tag's own line. Ref names are compared exactly: git's
/// patterns match by suffix, so `refs/tags/zz/refs/tags/<tag>` is also listed and must not win.
pub fn tag_commit_in_ls_remote(out: &str, tag: &str) -> Option<String> {
    let name = format!("refs/tags/{tag}");
    let peeled_name = format!("{name}^{{}}");
    let mut plain = None;
    let mut peeled = None;
    for line in out.lines() {
        let Some((sha, r)) = line.split_once('\t') else {
            continue;
        };
        if !crate::recipe::is_full_sha(sha) {
            continue;
        }
        if r == peeled_name {
            peeled = Some(sha.to_owned());
        } else if r == name {
            plain = Some(sha.to_owned());
        }
    }
    peeled.or(plain)
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
    let subdir = recipe.source.subdir.as_str();
    let commit = match remote_tag_commit(&origin, tag) {
        Ok(Some(remote)) => {
            if cached_tag_commit(&cache, tag).as_deref() == Some(remote.as_str()) {
                // Cached; a partial cache may still lack blobs this recipe's cone needs.
                ensure_cone_blobs(&cache, Some(&origin), &remote, subdir, recipe)?;
                remote
            } else {
                if subdir.is_empty() {
                    crate::ui::status("Fetching", format_args!("tag {tag} from {origin}"));
                } else {
                    crate::ui::status(
                        "Fetching",
                        format_args!(
                            "tag {tag} from {origin} (only {subdir}: shallow, blob-filtered)"
                        ),
                    );
                }
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
                ensure_cone_blobs(&cache, None, &c, subdir, recipe)?;
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
        subdir: recipe.source.subdir.clone(),
    })
}

/// Refuse an origin git would read as an option (`--upload-pack=…` runs a command), that carries
/// a control character, or that names a transport other than [`crate::recipe::is_git_origin`]'s
/// (`ext::…` runs a command): the recipe's `source.git` is checked when it is parsed, every origin
/// again here, before any git command sees it; git itself is held to [`ALLOWED_PROTOCOLS`].
///
/// Errors: one line naming the origin.
pub fn check_origin(origin: &str) -> anyhow::Result<()> {
    if origin.is_empty() || !crate::recipe::is_safe_arg(origin) {
        bail!("git origin {origin:?} is not a URL or path (it must not start with '-')");
    }
    if !crate::recipe::is_git_origin(origin) {
        bail!("git origin {origin:?} {}", crate::recipe::GIT_ORIGIN_RULE);
    }
    Ok(())
}

/// A `--git-mirror` (`RCCLFIX_GIT_MIRROR`) as the origin git is given: the folder's absolute,
/// canonical path (a relative `host:path` would otherwise read as an ssh URL), checked by
/// [`check_origin`].
///
/// Errors: the mirror does not exist or is not a folder (a FIFO or file named as such), or its
/// path is not UTF-8 or not a safe origin.
pub fn mirror_origin(m: &Path) -> anyhow::Result<String> {
    let shown = crate::ui::escape_path(m);
    if m.as_os_str().as_encoded_bytes().starts_with(b"-") {
        bail!("git mirror {shown} is not a path (it must not start with '-')");
    }
    match std::fs::metadata(m) {
        Ok(md) if md.is_dir() => {}
        Ok(md) => bail!(
            "git mirror {shown} is {}, not a git repository folder",
            crate::fsutil::file_kind(&md)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("git mirror {shown} does not exist")
        }
        Err(e) => bail!("cannot read the git mirror {shown}: {e}"),
    }
    let abs = fs_err::canonicalize(m)?;
    let Some(s) = abs.to_str() else {
        bail!("git mirror {shown} is not a UTF-8 path");
    };
    check_origin(s)?;
    Ok(s.to_owned())
}

/// The origin of one fetch: the mirror (`--git-mirror`, [`mirror_origin`]) or the recipe URL.
fn origin_for(url: &str, opts: &SourceOptions) -> anyhow::Result<String> {
    check_origin(url)?;
    match &opts.mirror {
        Some(m) => mirror_origin(m),
        None => Ok(url.to_owned()),
    }
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
    check_origin(origin)?;
    let out = git_named(format!("git ls-remote {origin}"))
        .args(["ls-remote", "--heads", origin])
        .arg(format!("refs/heads/{branch}"))
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
    let subdir = recipe.source.subdir.as_str();
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
        from_origin(&cache, &origin, subdir)
            .args(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head"])
            .args(filter_args(subdir, "blob:none"))
            .arg(fetch_remote(&origin, subdir))
            .arg(format!("+{commit}:{COMMIT_PREFIX}{commit}"))
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
    // Offline with the commit cached: its cone's blobs must be cached too.
    let reachable = head.is_ok() || !have;
    match head {
        Ok(Some(h)) if h == commit => {}
        Ok(Some(h)) => {
            // The branch moved on: the pin must still be part of its history.
            let incoming = IncomingRef {
                cache: &cache,
                name: format!("refs/rcclfix-incoming/heads/{branch}"),
            };
            // The ancestry check needs commits only: a partial cache takes no trees for it.
            from_origin(&cache, &origin, subdir)
                .args(["fetch", "--quiet", "--force", "--no-tags", "--no-write-fetch-head"])
                .args(filter_args(subdir, "tree:0"))
                .arg(fetch_remote(&origin, subdir))
                .arg(format!("+refs/heads/{branch}:{}", incoming.name))
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
    ensure_cone_blobs(
        &cache,
        reachable.then_some(origin.as_str()),
        &commit,
        subdir,
        recipe,
    )?;
    Ok(Fetched {
        cache,
        origin,
        commit,
        newly_pinned: false,
        subdir: recipe.source.subdir.clone(),
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
    let subdir = recipe.source.subdir.as_str();
    from_origin(cache, origin, subdir)
        // Shallow: the build needs the tagged tree, not its history (the pin check compares
        // commit ids). From a local mirror of ROCm/rccl this cuts the cold fetch of tag
        // rocm-5.4.3 from 7,736 objects (4.9 MiB) to 399 (1.0 MiB). With a subdir, also
        // blob-filtered: the subfolder's blobs follow once the commit passed the pin check.
        .args([
            "fetch",
            "--quiet",
            "--force",
            "--no-tags",
            "--no-write-fetch-head",
            "--depth=1",
        ])
        .args(filter_args(subdir, "blob:none"))
        .arg(fetch_remote(origin, subdir))
        .arg(format!("+refs/tags/{tag}:{}", incoming.name))
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
    // The cone's blobs before the tag: a cached tag always comes with what its checkout needs.
    ensure_cone_blobs(cache, Some(origin), &commit, subdir, recipe)?;
    git()
        .arg(&git_dir)
        .arg("update-ref")
        .arg(format!("refs/tags/{tag}"))
        .arg(&object)
        .read()
        .with_context(|| format!("cannot update tag {tag} in {}", cache.display()))?;
    Ok(commit)
}

pub(super) fn first_line(e: &anyhow::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    /// A user configuration with `protocol.ext.allow=always` lets plain git run an `ext::`
    /// command; the `git` rcclfix runs refuses it ([`super::ALLOWED_PROTOCOLS`]).
    #[test]
    fn git_refuses_ext_even_when_the_user_config_allows_it() {
        let t = tempfile::tempdir().unwrap();
        let config = t.path().join("gitconfig");
        std::fs::write(&config, "[protocol \"ext\"]\n\tallow = always\n").unwrap();
        let marker = t.path().join("ran");
        let url = format!("ext::sh -c touch% {}", marker.display());
        let plain = std::process::Command::new("git")
            .args(["ls-remote", &url])
            .env("GIT_CONFIG_GLOBAL", &config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            marker.exists(),
            "plain git did not run the ext:: command, so this test proves nothing: {}",
            String::from_utf8_lossy(&plain.stderr)
        );
        std::fs::remove_file(&marker).unwrap();
        let err = super::git()
            .args(["ls-remote", &url])
            .env("GIT_CONFIG_GLOBAL", &config)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .read()
            .unwrap_err();
        assert!(!marker.exists(), "rcclfix's git ran the ext:: command");
        assert!(
            format!("{err:#}").contains("transport 'ext' not allowed"),
            "{err:#}"
        );
    }

    /// `git ls-remote` matches ref patterns by suffix: only the exact name (or its peeled `^{}`
    /// line) counts.
    #[test]
    fn ls_remote_lines_are_matched_by_exact_name() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c = "c".repeat(40);
        let out = format!(
            "{a}\trefs/tags/v1\n{b}\trefs/tags/v1^{{}}\n{c}\trefs/tags/zz/refs/tags/v1\n{c}\trefs/tags/zz/refs/tags/v1^{{}}\n"
        );
        assert_eq!(super::tag_commit_in_ls_remote(&out, "v1"), Some(b.clone()));
        let out = format!("{a}\trefs/tags/v1\n{c}\trefs/tags/zz/refs/tags/v1^{{}}\n");
        assert_eq!(super::tag_commit_in_ls_remote(&out, "v1"), Some(a.clone()));
        let out = format!("{c}\trefs/tags/zz/refs/tags/v1\n{c}\trefs/tags/xv1^{{}}\n");
        assert_eq!(super::tag_commit_in_ls_remote(&out, "v1"), None);
    }
}
