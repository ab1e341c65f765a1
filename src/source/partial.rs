//! Partial source caches for recipes with `source.subdir` (see the parent module's docs): the
//! promisor remote whose URL lives only on one fetch's command line, the sparse cone of the
//! subfolder ([`cone_paths`]), and fetching the cone's blobs by id.

use std::path::Path;

use anyhow::{bail, Context};

use super::git;
use crate::process::Cmd;
use crate::recipe::Recipe;

/// The promisor remote of a partial source cache (see the module docs): `remote.rcclfix.promisor`
/// is in the cache's config, its URL only ever on the command line of one fetch.
pub const PROMISOR: &str = "rcclfix";

/// Whether `origin` is a local repository (an absolute path or a `file://` URL): git then runs its
/// `upload-pack` on this machine.
pub(super) fn is_local(origin: &str) -> bool {
    origin.starts_with('/') || origin.starts_with("file://")
}

/// `-c` settings that make [`PROMISOR`] point at `origin` for one git command. A local origin's
/// `upload-pack` gets `uploadpack.allowFilter` (else it ignores `--filter` with a warning and sends
/// every blob) and `uploadpack.allowAnySHA1InWant` (blobs are asked for by id) in its own command
/// line: `-c` on the fetching side does not reach it.
pub(super) fn promisor_config(origin: &str) -> Vec<String> {
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
pub(super) fn from_origin(cache: &Path, origin: &str, subdir: &str) -> Cmd {
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
pub(super) fn fetch_remote(origin: &str, subdir: &str) -> String {
    if subdir.is_empty() {
        origin.to_owned()
    } else {
        PROMISOR.to_owned()
    }
}

/// `--filter=<spec>` with a `subdir`, else nothing.
pub(super) fn filter_args(subdir: &str, spec: &str) -> Vec<String> {
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
pub(super) fn missing_objects(
    git_dir: &Path,
    commit: &str,
    paths: &[String],
) -> anyhow::Result<Vec<String>> {
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
pub(super) fn fetch_objects(
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
pub(super) fn ensure_cone_blobs(
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
