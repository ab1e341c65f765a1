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

fn git() -> Cmd {
    Cmd::new("git", "git")
}

/// What `tag` points to at `origin` (a URL or a local path), peeled to a commit: `Ok(None)` when the
/// origin answers but has no such tag.
///
/// Errors: the origin cannot be reached (offline, no such path).
pub fn remote_tag_commit(origin: &str, tag: &str) -> anyhow::Result<Option<String>> {
    check_origin(origin)?;
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

/// Refuse an origin git would read as an option (`--upload-pack=…` runs a command) or that
/// carries a control character: the recipe's `source.git` is checked when it is parsed, and a
/// `--git-mirror` / `RCCLFIX_GIT_MIRROR` path here, before any git command sees it.
///
/// Errors: one line naming the origin.
pub fn check_origin(origin: &str) -> anyhow::Result<()> {
    if origin.is_empty() || !crate::recipe::is_safe_arg(origin) {
        bail!("git origin {origin:?} is not a URL or path (it must not start with '-')");
    }
    Ok(())
}

/// The origin of one fetch: the mirror (`--git-mirror`, must exist) or the recipe URL.
fn origin_for(url: &str, opts: &SourceOptions) -> anyhow::Result<String> {
    check_origin(url)?;
    if let Some(m) = &opts.mirror {
        check_origin(&m.display().to_string())?;
    }
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
    check_origin(origin)?;
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

/// The promisor remote of a partial source cache (see the module docs): `remote.rcclfix.promisor`
/// is in the cache's config, its URL only ever on the command line of one fetch.
pub const PROMISOR: &str = "rcclfix";

/// Whether `origin` is a local repository (an absolute path or a `file://` URL): git then runs its
/// `upload-pack` on this machine.
fn is_local(origin: &str) -> bool {
    origin.starts_with('/') || origin.starts_with("file://")
}

/// `-c` settings that make [`PROMISOR`] point at `origin` for one git command. A local origin's
/// `upload-pack` gets `uploadpack.allowFilter` (else it ignores `--filter` with a warning and sends
/// every blob) and `uploadpack.allowAnySHA1InWant` (blobs are asked for by id) in its own command
/// line: `-c` on the fetching side does not reach it.
fn promisor_config(origin: &str) -> Vec<String> {
    let mut v = vec!["-c".to_owned(), format!("remote.{PROMISOR}.url={origin}")];
    if is_local(origin) {
        v.push("-c".to_owned());
        v.push(format!(
            "remote.{PROMISOR}.uploadpack=git -c uploadpack.allowFilter=true -c uploadpack.allowAnySHA1InWant=true upload-pack"
        ));
    }
    v
}

/// `git --git-dir=<cache>` for a fetch from `origin`: with a `subdir`, through [`PROMISOR`]
/// ([`promisor_config`]), so that a `--filter` makes the cache a partial clone of it.
fn from_origin(cache: &Path, origin: &str, subdir: &str) -> Cmd {
    let mut c = git()
        .arg(format!("--git-dir={}", cache.display()))
        .env("GIT_TERMINAL_PROMPT", "0");
    if !subdir.is_empty() {
        c = c.args(promisor_config(origin));
    }
    c
}

/// The remote argument of a fetch [`from_origin`] builds: [`PROMISOR`] with a `subdir`, else the
/// origin itself.
fn fetch_remote(origin: &str, subdir: &str) -> String {
    if subdir.is_empty() {
        origin.to_owned()
    } else {
        PROMISOR.to_owned()
    }
}

/// `--filter=<spec>` with a `subdir`, else nothing.
fn filter_args(subdir: &str, spec: &str) -> Vec<String> {
    if subdir.is_empty() {
        vec![]
    } else {
        vec![format!("--filter={spec}")]
    }
}

/// Whether the repository `git_dir` is a partial clone (a filtered fetch left its promisor remote
/// in the config): some blobs may be missing and are fetched by [`ensure_cone_blobs`].
pub fn is_partial(git_dir: &Path) -> bool {
    git()
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(["config", "--bool", "--get"])
        .arg(format!("remote.{PROMISOR}.promisor"))
        .read()
        .is_ok_and(|s| s.trim() == "true")
}

/// Check that `subdir` is a plain relative folder name (`projects/rccl`): no `..`, `.`, empty or
/// absolute parts, no leading `-`, no control characters.
fn check_subdir(subdir: &str) -> anyhow::Result<()> {
    if !crate::recipe::is_relative_path(subdir) {
        bail!("source.subdir {subdir:?} is not a relative folder path like \"projects/rccl\"");
    }
    Ok(())
}

/// The paths a cone-mode sparse checkout of `subdir` holds at `commit` in the repository
/// `git_dir`, as pathspecs: `subdir` itself, and the files directly in the root and in each folder
/// above it (cone mode always checks those out; git's `Documentation/git-sparse-checkout.txt`,
/// "Internals — cone mode"). Empty `subdir`: the whole tree (no pathspec).
///
/// Errors: `subdir` is not a folder of `commit`; git fails.
pub fn cone_paths(git_dir: &Path, commit: &str, subdir: &str) -> anyhow::Result<Vec<String>> {
    if subdir.is_empty() {
        return Ok(vec![]);
    }
    check_subdir(subdir)?;
    let subdir = subdir.trim_end_matches('/');
    let gd = format!("--git-dir={}", git_dir.display());
    let lit = || git().arg("--literal-pathspecs");
    let kind = lit()
        .arg(&gd)
        .args(["cat-file", "-t"])
        .arg(format!("{commit}:{subdir}"))
        .read()
        .unwrap_or_default();
    if kind.trim() != "tree" {
        bail!("source.subdir {subdir:?} is not a folder in commit {commit}");
    }
    let mut out = vec![subdir.to_owned()];
    let parts: Vec<&str> = subdir.split('/').collect();
    for depth in 0..parts.len() {
        let mut ls = lit().arg(&gd).args(["ls-tree", "-z", commit]);
        if depth > 0 {
            ls = ls.arg(format!("{}/", parts[..depth].join("/")));
        }
        let text = ls
            .read()
            .with_context(|| format!("cannot list commit {commit}"))?;
        // `<mode> SP <type> SP <oid> TAB <path>` NUL
        for entry in text.split('\0').filter(|e| !e.is_empty()) {
            if let Some((meta, path)) = entry.split_once('\t') {
                if meta.split(' ').nth(1) == Some("blob") {
                    out.push(path.to_owned());
                }
            }
        }
    }
    Ok(out)
}

/// The objects under `paths` ([`cone_paths`]) of `commit` that the repository `git_dir` lacks
/// (`git rev-list --objects --missing=print`, which never fetches lazily).
fn missing_objects(git_dir: &Path, commit: &str, paths: &[String]) -> anyhow::Result<Vec<String>> {
    let out = git()
        .arg("--literal-pathspecs")
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(["rev-list", "--objects", "--missing=print", commit, "--"])
        .args(paths)
        .read()
        .with_context(|| format!("cannot list the objects of commit {commit}"))?;
    Ok(out
        .lines()
        .filter_map(|l| l.strip_prefix('?'))
        .map(str::to_owned)
        .collect())
}

/// Fetch the objects `oids` by id into the partial repository `git_dir` from `origin` through
/// [`PROMISOR`] (as git's own lazy fetch does: no negotiation, `--filter=blob:none` so that only
/// the objects asked for come), then check that none is still missing.
fn fetch_objects(
    git_dir: &Path,
    origin: &str,
    commit: &str,
    paths: &[String],
    oids: &[String],
) -> anyhow::Result<()> {
    // Chunks keep the command line short (40 hex + a space each).
    for chunk in oids.chunks(2000) {
        git()
            .arg(format!("--git-dir={}", git_dir.display()))
            .args(promisor_config(origin))
            .args([
                "-c",
                "fetch.negotiationAlgorithm=noop",
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--recurse-submodules=no",
                "--filter=blob:none",
                PROMISOR,
            ])
            .args(chunk)
            .env("GIT_TERMINAL_PROMPT", "0")
            .read()
            .with_context(|| format!("cannot fetch {} files by id from {origin}", chunk.len()))?;
    }
    let left = missing_objects(git_dir, commit, paths)?;
    if !left.is_empty() {
        bail!(
            "{origin} did not deliver {} of the objects commit {commit} needs (first {})",
            left.len(),
            left[0]
        );
    }
    Ok(())
}

/// Make sure the partial cache holds every blob the checkout of `commit` needs: the cone of
/// `subdir` ([`cone_paths`]; the whole tree when empty). A cache that is not partial holds
/// everything already (nothing is run). `origin: None` (offline): missing blobs are an error.
///
/// Errors: `subdir` is not a folder of `commit`; offline with blobs missing; the origin does not
/// deliver them.
fn ensure_cone_blobs(
    cache: &Path,
    origin: Option<&str>,
    commit: &str,
    subdir: &str,
    recipe: &Recipe,
) -> anyhow::Result<()> {
    if !is_partial(cache) {
        return Ok(());
    }
    let paths = cone_paths(cache, commit, subdir)
        .map_err(|e| anyhow::anyhow!("recipe {}: {e}", recipe.id()))?;
    let missing = missing_objects(cache, commit, &paths)?;
    if missing.is_empty() {
        return Ok(());
    }
    let Some(origin) = origin else {
        bail!(
            "the source cache {} lacks {} files of commit {commit} (recipe {}) and the origin cannot be reached\nhelp: for offline use pass a local mirror with --git-mirror PATH",
            cache.display(),
            missing.len(),
            recipe.id()
        );
    };
    let what = if subdir.is_empty() {
        "the tree"
    } else {
        subdir
    };
    crate::ui::status(
        "Fetching",
        format_args!(
            "{} files of {what} ({}) from {origin}",
            missing.len(),
            &commit[..12.min(commit.len())]
        ),
    );
    fetch_objects(cache, origin, commit, &paths, &missing)
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

fn first_line(e: &anyhow::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_owned()
}

/// Check out `fetched.commit` into `dest` (which must not exist), then [`verify_checkout`]. No
/// alternates and no remote URL are left in it, so git still works inside a container, which has
/// no network and no view of the cache.
///
/// A full cache is cloned locally. A partial cache ([`is_partial`]) is fetched from instead: the
/// commit shallow and blob-filtered, then the blobs of `fetched.subdir`'s cone by id, all from the
/// cache (a `file://` URL, so the filter applies); then a cone-mode sparse checkout of the subdir
/// (the whole tree when `subdir` is empty). Every blob of the cone is in `dest` before `git
/// checkout` (which therefore never fetches lazily) and is checked again after it.
///
/// Errors: git fails; the subdir is not a folder of the commit; a blob of the cone is missing.
pub fn checkout(fetched: &Fetched, dest: &Path) -> anyhow::Result<()> {
    if is_partial(&fetched.cache) {
        checkout_partial(fetched, dest)?;
        return verify_checkout(dest, &fetched.commit);
    }
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

/// [`checkout`] from a partial cache (see there).
fn checkout_partial(fetched: &Fetched, dest: &Path) -> anyhow::Result<()> {
    let commit = &fetched.commit;
    let cache_url = format!("file://{}", fs_err::canonicalize(&fetched.cache)?.display());
    git()
        .args(["init", "--quiet"])
        .arg(dest)
        .read()
        .with_context(|| format!("cannot create {}", dest.display()))?;
    let git_dir = dest.join(".git");
    let in_dest = || git().arg("-C").arg(dest);
    in_dest()
        .args(promisor_config(&cache_url))
        .args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--depth=1",
            "--filter=blob:none",
            PROMISOR,
        ])
        .arg(format!("+{commit}:{COMMIT_PREFIX}{commit}"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .read()
        .with_context(|| {
            format!(
                "cannot fetch commit {commit} from the source cache {}",
                fetched.cache.display()
            )
        })?;
    let paths = cone_paths(&git_dir, commit, &fetched.subdir)?;
    let missing = missing_objects(&git_dir, commit, &paths)?;
    if !missing.is_empty() {
        fetch_objects(&git_dir, &cache_url, commit, &paths, &missing)?;
    }
    if !fetched.subdir.is_empty() {
        // `init --cone` then `set` (rather than `set --cone`) works with git 2.25 and later.
        in_dest()
            .args(["sparse-checkout", "init", "--cone"])
            .read()
            .with_context(|| format!("cannot make {} a sparse checkout", dest.display()))?;
        in_dest()
            .args(["sparse-checkout", "set"])
            .arg(fetched.subdir.trim_end_matches('/'))
            .read()
            .with_context(|| format!("cannot limit {} to {}", dest.display(), fetched.subdir))?;
    }
    in_dest()
        .args([
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "--quiet",
            "--detach",
        ])
        .arg(commit)
        .read()
        .with_context(|| format!("cannot check out {commit}"))?;
    let left = missing_objects(&git_dir, commit, &paths)?;
    if !left.is_empty() {
        bail!(
            "the checkout {} of {commit} lacks {} objects of {} (first {})",
            dest.display(),
            left.len(),
            if fetched.subdir.is_empty() {
                "the tree"
            } else {
                &fetched.subdir
            },
            left[0]
        );
    }
    if !fetched.subdir.is_empty() && !dest.join(&fetched.subdir).is_dir() {
        bail!(
            "the checkout {} has no folder {}",
            dest.display(),
            fetched.subdir
        );
    }
    Ok(())
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
