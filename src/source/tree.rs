//! The work tree of one build: a fresh checkout of the pinned commit ([`checkout`], verified by
//! [`verify_checkout`]), the recipe's patches (`git apply`) and its `extra_files`, written only
//! inside the tree ([`write_inside`]: no symbolic link of the checkout or of a patch is followed).

use std::path::{Component, Path};

use anyhow::{bail, Context};
use sha2::Digest;

use super::partial::{
    cone_paths, fetch_objects, is_partial, missing_objects, promisor_config, PROMISOR,
};
use super::{git, Fetched, COMMIT_PREFIX};
use crate::manifest::FileDigest;
use crate::recipe::Recipe;

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

/// What [`write_inside`] and [`read_inside`] call a checkout in messages.
pub const SOURCE_TREE: &str = "source tree";

/// The largest patch file read from a recipe's checkout (16 MiB; ours are a few KiB).
pub const MAX_PATCH_BYTES: u64 = 16 << 20;

/// The text of a recipe's patch `p` (`<name>.patch`, optionally written `patches/<name>.patch`):
/// `patches/<name>` under `root` (the checkout a `--recipe FILE` lives in) when it exists there,
/// else the copy embedded in the binary at build time (`EMBEDDED_PATCHES`).
///
/// Errors: `p` is not a plain file name (no `/`, `..` or control characters); the checkout's
/// `patches/<name>` is not a regular file (`patch "x": PATH: not a regular file (a FIFO)`) or
/// too large; neither exists.
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
        // Something there that is not a regular file (a FIFO, a folder) is refused by what it
        // is, never read (a FIFO would block) and never taken for "not found".
        if fs_err::symlink_metadata(&cand).is_ok() {
            return crate::fsutil::read_text_capped(&cand, MAX_PATCH_BYTES, "a patch")
                .map_err(|e| anyhow::anyhow!("patch {p:?}: {e}"));
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

/// Apply the recipe's patches in order with `git apply` in `tree` (the repository root), check
/// that the CMake project folder (`source.subdir`) is reached through no symbolic link, and create
/// the recipe's `extra_files` in it with [`write_inside`]. Returns each patch with its sha256.
///
/// `git apply` itself refuses a patch that touches a path beyond a symbolic link (git's
/// `apply.c`, "affected file ... is beyond a symbolic link"), the links of the checkout and those
/// an earlier hunk created alike; `git checkout` never writes through one either. What rcclfix
/// writes itself goes through [`write_inside`], so a repository or a patch with `evil ->
/// /some/host/folder` cannot make an extra file `evil/x.txt` (or the NDEBUG injection of
/// `evil/CMakeLists.txt`) land on the host.
///
/// Errors: a patch is missing or does not apply (git's message included); the subdir or an
/// extra file's folder is a symbolic link or not a folder (the link and its target named).
pub fn apply_patches_and_files(
    recipe: &Recipe,
    tree: &Path,
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
                    recipe.source.rev_label(),
                    recipe.id()
                )
            })?;
        out.push(FileDigest {
            path: p.clone(),
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
        });
    }
    let subdir = recipe.source.subdir.trim_end_matches('/');
    if !subdir.is_empty() {
        check_no_link(tree, Path::new(subdir), false, SOURCE_TREE).map_err(|e| {
            anyhow::anyhow!("recipe {}: source.subdir {subdir:?}: {e}", recipe.id())
        })?;
    }
    for (rel, contents) in &recipe.build.extra_files {
        let full = if subdir.is_empty() {
            rel.clone()
        } else {
            format!("{subdir}/{rel}")
        };
        write_inside(tree, &full, contents.as_bytes()).map_err(|e| {
            anyhow::anyhow!("recipe {}: build.extra_files {rel:?}: {e:#}", recipe.id())
        })?;
    }
    Ok(out)
}

/// Write `bytes` to the file `rel` (a `/`-separated relative path, [`crate::recipe::is_relative_path`])
/// under the folder `root`, creating the folders on the way, so that nothing lands outside
/// `root`: every folder on the way is checked with `lstat` and must be a real folder, never a
/// symbolic link (missing ones are created one at a time); the file itself is written by
/// [`crate::fsutil::atomic_write`], whose rename replaces a link at `rel` rather than following it.
/// The walk is not proof against another process swapping a folder for a link meanwhile: it runs
/// on a work folder rcclfix just created, before any container or build step starts.
///
/// Errors (one line naming the part of `rel`): `rel` is not a relative path inside the tree; a
/// part is a symbolic link (and where it points) or not a folder; a write fails.
pub fn write_inside(root: &Path, rel: &str, bytes: &[u8]) -> anyhow::Result<std::path::PathBuf> {
    if !crate::recipe::is_relative_path(rel) {
        bail!("{rel:?} is not a relative path inside the tree");
    }
    let relp = Path::new(rel.trim_end_matches('/'));
    let parent = relp.parent().unwrap_or(Path::new(""));
    check_no_link(root, parent, true, SOURCE_TREE)?;
    let dst = root.join(relp);
    crate::fsutil::atomic_write(&dst, bytes)?;
    Ok(dst)
}

/// Check that each part of `rel` under `root` is a folder and not a symbolic link (`lstat`); with
/// `create`, missing parts are created (one `mkdir` each, never through a link), else a missing
/// part is an error.
///
/// Errors: a part is a symbolic link (its target named), not a folder, or missing (without
/// `create`); `rel` has a part that is not a plain name.
fn check_no_link(root: &Path, rel: &Path, create: bool, place: &str) -> anyhow::Result<()> {
    let mut at = root.to_path_buf();
    let mut shown = std::path::PathBuf::new();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            bail!("{} is not a relative path inside the tree", rel.display());
        };
        at.push(name);
        shown.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                bail!(
                    "{} is a symbolic link in the {place} (to {to}); refusing to go through it",
                    shown.display()
                );
            }
            Ok(m) if m.is_dir() => {}
            Ok(m) => bail!(
                "{} is {} in the {place}, not a folder",
                shown.display(),
                crate::fsutil::file_kind(&m)
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                fs_err::create_dir(&at)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{} does not exist in the {place}", shown.display())
            }
            Err(e) => bail!("cannot read {}: {e}", at.display()),
        }
    }
    Ok(())
}

/// Read the file `rel` under `root` (`place` names it in messages: [`SOURCE_TREE`], `build
/// folder`) as text when no part of its path is a symbolic link and it is a regular file
/// (`O_NOFOLLOW` on the file itself): the CMakeLists.txt the NDEBUG injection rewrites, the
/// build folder's `build.ninja` and `.ninja_log`, so a link there cannot make rcclfix read (and
/// then write or publish) a host file.
///
/// Errors: as [`check_no_link`]; the file is a link, not a regular file, or not UTF-8.
pub fn read_inside(root: &Path, rel: &Path, place: &str) -> anyhow::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    check_no_link(root, rel.parent().unwrap_or(Path::new("")), false, place)?;
    let p = root.join(rel);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&p)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                anyhow::anyhow!(
                    "{} is a symbolic link in the {place}; refusing to read through it",
                    rel.display()
                )
            } else {
                anyhow::anyhow!("cannot read {}: {e}", p.display())
            }
        })?;
    let m = f.metadata()?;
    if !m.is_file() {
        bail!(
            "{} is {} in the {place}, not a regular file",
            rel.display(),
            crate::fsutil::file_kind(&m)
        );
    }
    let mut s = String::new();
    (&mut f)
        .take(MAX_INSIDE_BYTES + 1)
        .read_to_string(&mut s)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    if s.len() as u64 > MAX_INSIDE_BYTES {
        bail!(
            "{}: more than the {MAX_INSIDE_BYTES}-byte limit for a file of the {place}",
            p.display()
        );
    }
    Ok(s)
}

/// The largest file [`read_inside`] reads (256 MiB; RCCL's configured `build.ninja` is tens of MB).
pub const MAX_INSIDE_BYTES: u64 = 256 << 20;
