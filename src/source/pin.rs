//! `rcclfix recipe pin`: resolve each recipe's tag at its origin (or a mirror) and check or record
//! the pin in a lockfile.

use std::path::PathBuf;

use super::{fetch, first_line, git, mirror_origin, remote_tag_commit, SourceOptions};
use crate::recipe::{Lockfile, Recipe};

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
            Some(m) => mirror_origin(m)?,
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
                Ok(Some(c)) => match tag_peels_to_commit(&origin, &r.source.tag, &c)
                    .map(|()| r.pinned_commit(&lock))
                {
                    Err(e) => row(c, format!("error: {}", first_line(&e)), false),
                    Ok(pinned) => match pinned {
                        Some(p) if p == c => row(c, "ok".to_owned(), true),
                        Some(p) => row(c, format!("MISMATCH: pinned {p}"), false),
                        None => {
                            lock.set(r.id(), &r.source.tag, &c);
                            row(c, "pinned".to_owned(), true)
                        }
                    },
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

/// Checks that `sha`, what `git ls-remote` lists for `refs/tags/<tag>` of `origin` (peeled), is a
/// commit: a tag may point to a blob or a tree, and `ls-remote` does not say which. The tag is
/// fetched into a temporary bare repository (shallow, `--filter=tree:0`: the tag and its
/// commit objects only) and `git cat-file -t` names the object's type.
///
/// Errors: the fetch fails, or the object is not a commit (one line naming the tag and the type).
fn tag_peels_to_commit(origin: &str, tag: &str, sha: &str) -> anyhow::Result<()> {
    let tmp = tempfile::Builder::new().prefix("rcclfix-pin-").tempdir()?;
    let dir = format!("--git-dir={}", tmp.path().display());
    git()
        .args(["init", "--bare", "-q"])
        .arg(tmp.path())
        .read()?;
    git()
        .arg(&dir)
        .args([
            "-c",
            "uploadpack.allowFilter=true",
            "fetch",
            "-q",
            "--depth=1",
        ])
        .args(["--filter=tree:0", "--no-tags", origin])
        .arg(format!("refs/tags/{tag}"))
        .read()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot fetch tag {tag} to see what it points to: {}",
                first_line(&e)
            )
        })?;
    let kind = git().arg(&dir).args(["cat-file", "-t", sha]).read()?;
    let kind = kind.trim();
    if kind != "commit" {
        anyhow::bail!("tag {tag} points to a {kind} ({sha}), not a commit: nothing to build");
    }
    Ok(())
}
