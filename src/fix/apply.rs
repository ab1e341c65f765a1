//! Apply a proven patch to a copy nobody owns, list the fixes, and undo them.
//!
//! Apply: the patched file is written by [`crate::patch::patch_file`] into a scratch folder
//! beside the copy (same file system), rescanned, and renamed over the copy, which must be a
//! regular file; before that the original is kept byte for byte in `$RCCLFIX_HOME/fixes/<id>/`
//! (`original`, and `record.json`: a [`FixRecord`]), written as one folder (temp + rename).
//!
//! Undo treats everything under `$RCCLFIX_HOME/fixes/` as hostile: an ID is 16 lowercase hex
//! digits, no link is followed there, the record is read up to [`MAX_RECORD_BYTES`] with unknown
//! fields refused, the path must be absolute and name a `librccl*` file, and the file there must
//! still be the patched one (its sha256). Then the kept original is copied (its sha256 checked
//! while copying) into a scratch folder beside the copy and patched again with the recorded
//! options: only when that gives the file now at the path, byte for byte (sha256), is it renamed
//! back. So a record cannot make undo write arbitrary bytes anywhere: what is restored is a file
//! whose patch is the file being replaced. The price: undo needs a patch that writes the same
//! bytes as the one that made the fix.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path};

use anyhow::Context;
use serde::Serialize;

use super::record::{checked_fixes_dir, fix_id};
use super::steps::{patch_planned, rescan_clean};
use super::{Copy, Decision, Owner};

pub use super::record::{
    fixes_dir, valid_id, FixRecord, Mechanism, FIXES_DIR, FIX_SCHEMA_VERSION, MAX_FIXES,
    MAX_RECORD_BYTES,
};
pub use super::steps::check_bindings;

/// Apply the proven patch to `copy`, which nobody owns, with the plan's `targets` (empty: all).
/// Returns the record kept.
///
/// Errors (nothing changed on disk): the copy is owned (pip: see [`super::pip::apply`]; dpkg:
/// [`super::dpkg::apply`]) or its owner unknown, it is not proven, it is not a regular file, it changed since the
/// plan, a fix of it is already kept, the patch or the rescan fails. After the rename the file is
/// hashed again; a mismatch is an error naming the fix to undo.
pub fn apply(copy: &Copy, targets: &[String]) -> anyhow::Result<FixRecord> {
    let path = &copy.path;
    match &copy.owner {
        Owner::None => {}
        Owner::Pip { distribution, .. } => anyhow::bail!(
            "{}: owned by pip ({distribution}); a pip-owned copy is never replaced in place (fix installs an overlay wheel with its pip); nothing was changed",
            path.display()
        ),
        Owner::Dpkg { package, .. } => anyhow::bail!(
            "{}: owned by dpkg ({package}); a dpkg-owned copy is never replaced in place (fix installs a .deb overlay with apt); nothing was changed",
            path.display()
        ),
        Owner::Unknown { reason } => anyhow::bail!(
            "{}: its owner could not be told ({reason}); nothing was changed",
            path.display()
        ),
    }
    let targets = match &copy.decision {
        Decision::Patch { .. } | Decision::PatchAsserts { .. } if !copy.sha256.is_empty() => {
            targets.to_vec()
        }
        d => anyhow::bail!("{}: {}; nothing to apply", path.display(), d.short()),
    };
    let opts = copy
        .decision
        .patch_options(&targets)
        .expect("a proven decision has patch options");
    let meta = regular_nolink(path)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| anyhow::anyhow!("{}: no parent folder", path.display()))?;
    // The patched file, beside the copy so the rename stays on one file system.
    let scratch = crate::fsutil::TempDir::partial_in(dir)?;
    let patched = scratch.path().join("patched");
    let (id, keep, rec) = patch_planned(copy, &opts, &patched)?;
    rescan_clean(&patched, &copy.decision)?;
    if meta.uid() != fs_err::metadata(&patched)?.uid() {
        std::os::unix::fs::chown(&patched, Some(meta.uid()), Some(meta.gid())).with_context(
            || {
                format!(
                    "{}: cannot give the patched file the original's owner",
                    path.display()
                )
            },
        )?;
    }
    let record = FixRecord {
        schema_version: FIX_SCHEMA_VERSION,
        id: id.clone(),
        path: path.clone(),
        original_sha256: copy.sha256.clone(),
        patched_sha256: rec.output_sha256.clone(),
        size: meta.len(),
        mode: meta.permissions().mode() & 0o7777,
        asserts: opts.asserts,
        targets,
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        rcclfix_version: env!("CARGO_PKG_VERSION").to_string(),
        mechanism: Mechanism::Replace,
        pip: None,
        dpkg: None,
    };
    // Keep the original first: a fix is never applied without it.
    let kept = crate::fsutil::AtomicDir::new(&keep)?;
    let got = copy_hashed(path, &kept.path().join("original"), 0o644)?;
    if got != copy.sha256 {
        anyhow::bail!(
            "{}: changed while its original was kept (sha256 {got}, planned {}); nothing was changed",
            path.display(),
            copy.sha256
        );
    }
    let mut doc = serde_json::to_vec_pretty(&record)?;
    doc.push(b'\n');
    fs_err::write(kept.path().join("record.json"), doc)?;
    kept.commit()?;
    let replace = || -> anyhow::Result<()> {
        regular_nolink(path)?;
        fs_err::rename(&patched, path)?;
        Ok(())
    };
    if let Err(e) = replace() {
        let _ = std::fs::remove_dir_all(&keep);
        return Err(e.context(format!(
            "{}: not replaced; nothing was changed",
            path.display()
        )));
    }
    let now = crate::fsutil::sha256_file(path)?;
    if now != record.patched_sha256 {
        anyhow::bail!(
            "{}: sha256 {now} after the rename, not the patched {}; run rcclfix fix --undo {id}",
            path.display(),
            record.patched_sha256
        );
    }
    Ok(record)
}

/// `path`'s metadata when it is a regular file and not a link.
///
/// Errors: missing, a link, a folder, a FIFO, a device (one line naming it).
fn regular_nolink(path: &Path) -> anyhow::Result<std::fs::Metadata> {
    let m = std::fs::symlink_metadata(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if m.file_type().is_symlink() {
        anyhow::bail!("{}: a link, not a regular file; refusing", path.display());
    }
    if !m.is_file() {
        anyhow::bail!(
            "{}: not a regular file ({}); refusing",
            path.display(),
            crate::fsutil::file_kind(&m)
        );
    }
    Ok(m)
}

/// Copy the regular file `from` (not a link) to the new file `to` with `mode`, hashing while
/// copying; returns the sha256 of what was copied.
fn copy_hashed(from: &Path, to: &Path, mode: u32) -> anyhow::Result<String> {
    use sha2::Digest;
    regular_nolink(from)?;
    let (mut src, _) = crate::fsutil::open_regular(from)?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .with_context(|| format!("cannot create {}", to.display()))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", from.display())),
        };
        h.update(&buf[..n]);
        dst.write_all(&buf[..n])
            .with_context(|| format!("cannot write {}", to.display()))?;
    }
    dst.set_permissions(std::fs::Permissions::from_mode(mode))?;
    dst.sync_all().ok();
    Ok(hex::encode(h.finalize()))
}

/// One kept fix as `--list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// The folder name under `fixes/`.
    pub id: String,
    /// The record, when it could be read.
    pub record: Option<FixRecord>,
    /// `patched` (the file is the patched one: undo restores it), `original` (already the
    /// original), `changed` (neither: undo refuses), `missing`, or why the entry is unreadable.
    pub state: String,
}

/// Every entry under `fixes/`, sorted by ID (at most [`MAX_FIXES`]).
///
/// Errors: `fixes/` exists and cannot be read, or is not a folder.
pub fn list() -> anyhow::Result<Vec<Listed>> {
    let dir = checked_fixes_dir()?;
    if !dir.exists() {
        return Ok(vec![]);
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .take(MAX_FIXES)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".rcclfix-"))
        .collect();
    names.sort();
    Ok(names
        .into_iter()
        .map(|id| match read_record(&id) {
            Ok(r) => {
                // A pip fix leaves the copy as it was: its state is the installed overlay's.
                let at = match &r.pip {
                    Some(p) if r.mechanism == Mechanism::Pip => p.installed(),
                    _ => r.path.clone(),
                };
                let state = match regular_nolink(&at).and_then(|_| crate::fsutil::sha256_file(&at))
                {
                    Ok(s) if s == r.patched_sha256 && r.mechanism == Mechanism::Pip => {
                        "installed (pip overlay)".to_string()
                    }
                    Ok(s) if s == r.patched_sha256 && r.mechanism == Mechanism::Dpkg => {
                        "installed (dpkg overlay)".to_string()
                    }
                    Ok(s) if s == r.patched_sha256 => "patched".to_string(),
                    Ok(s) if s == r.original_sha256 => "original".to_string(),
                    Ok(_) => "changed since the fix (undo refuses)".to_string(),
                    Err(e) => format!("missing or unreadable: {e:#}"),
                };
                Listed {
                    id,
                    record: Some(r),
                    state,
                }
            }
            Err(e) => Listed {
                id,
                record: None,
                state: format!("unreadable: {e:#}"),
            },
        })
        .collect())
}

/// Read and check `fixes/<id>/record.json` (see the module docs for what is refused).
///
/// Errors: one line naming the file and what is wrong with it.
pub fn read_record(id: &str) -> anyhow::Result<FixRecord> {
    if !valid_id(id) {
        anyhow::bail!(
            "{id:?}: not a fix ID (16 lowercase hex digits; rcclfix fix --list shows them)"
        );
    }
    let dir = checked_fixes_dir()?.join(id);
    let m = std::fs::symlink_metadata(&dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!("no fix {id} (rcclfix fix --list)"),
        _ => anyhow::anyhow!("cannot read {}: {e}", dir.display()),
    })?;
    if !m.is_dir() {
        anyhow::bail!(
            "{}: not a folder ({})",
            dir.display(),
            crate::fsutil::file_kind(&m)
        );
    }
    let path = dir.join("record.json");
    regular_nolink(&path)?;
    let bytes = crate::fsutil::read_capped(&path, MAX_RECORD_BYTES, "a fix record")?;
    let r: FixRecord = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: not a fix record: {e}", path.display()))?;
    let hex64 = |s: &str| {
        s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    let bad = |what: &str| anyhow::anyhow!("{}: {what}", path.display());
    if r.schema_version != FIX_SCHEMA_VERSION {
        return Err(bad("unknown schema_version"));
    }
    if r.id != id {
        return Err(bad("its id is not its folder's name"));
    }
    if !hex64(&r.original_sha256) || !hex64(&r.patched_sha256) {
        return Err(bad("a sha256 that is not 64 lowercase hex digits"));
    }
    if r.mode > 0o7777 {
        return Err(bad("a mode with more than permission bits"));
    }
    let name_ok = r
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("librccl"));
    if !r.path.is_absolute()
        || !name_ok
        || r.path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(bad("its path is not an absolute path to a librccl* file"));
    }
    if fix_id(&r.path, &r.original_sha256) != r.id {
        return Err(bad("its id does not belong to its path and original"));
    }
    match r.mechanism {
        _ if r.pip.is_some() && r.dpkg.is_some() => return Err(bad("both a pip and a dpkg part")),
        Mechanism::Replace if r.pip.is_some() || r.dpkg.is_some() => {
            return Err(bad("a pip or dpkg part in a replace fix"))
        }
        Mechanism::Replace => {}
        Mechanism::Pip => {
            super::pip::check_record(&r).map_err(|e| bad(&format!("{e:#}")))?;
        }
        Mechanism::Dpkg => {
            super::dpkg::check_record(&r).map_err(|e| bad(&format!("{e:#}")))?;
        }
    }
    Ok(r)
}

/// Undo fix `id`: give the file back its original bytes and mode, check its sha256, and remove
/// the kept folder. Returns the record.
///
/// Errors (nothing changed): see the module docs: a bad ID or record, the file at the path is no
/// longer the patched one, the kept original is not the recorded one or does not patch to the
/// file now at the path.
pub fn undo(id: &str) -> anyhow::Result<FixRecord> {
    let r = read_record(id)?;
    if r.mechanism != Mechanism::Replace {
        match r.mechanism {
            Mechanism::Pip => super::pip::undo(&r)?,
            _ => super::dpkg::undo(&r)?,
        }
        fs_err::remove_dir_all(checked_fixes_dir()?.join(id))?;
        return Ok(r);
    }
    let path = &r.path;
    regular_nolink(path)?;
    let now = crate::fsutil::sha256_file(path)?;
    if now == r.original_sha256 {
        // An apply stopped between keeping the original and the rename: nothing to restore.
        fs_err::remove_dir_all(checked_fixes_dir()?.join(id))?;
        return Ok(r);
    }
    if now != r.patched_sha256 {
        anyhow::bail!(
            "{}: changed since fix {id} (sha256 {now}, the fix wrote {}); not restored",
            path.display(),
            r.patched_sha256
        );
    }
    let original = fixes_dir().join(id).join("original");
    let om = regular_nolink(&original)?;
    if om.len() != r.size {
        anyhow::bail!(
            "{}: {} bytes, the record says {}; not restored",
            original.display(),
            om.len(),
            r.size
        );
    }
    let dir = path
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{}: no parent folder", path.display()))?;
    let scratch = crate::fsutil::TempDir::partial_in(dir)?;
    let back = scratch.path().join("original");
    let got = copy_hashed(&original, &back, r.mode)?;
    if got != r.original_sha256 {
        anyhow::bail!(
            "{}: sha256 {got}, the record says {}; not restored",
            original.display(),
            r.original_sha256
        );
    }
    let again = crate::patch::patch_file(
        &back,
        &scratch.path().join("patched-again"),
        &crate::patch::PatchOptions {
            targets: r.targets.clone(),
            asserts: r.asserts,
        },
    )
    .with_context(|| {
        format!(
            "{}: the kept original does not patch again; not restored",
            original.display()
        )
    })?;
    if again.output_sha256 != r.patched_sha256 {
        anyhow::bail!(
            "{}: the kept original patches to sha256 {}, not to the file at {} ({}); not restored (undo needs a patch that writes the bytes the fix wrote)",
            original.display(),
            again.output_sha256,
            path.display(),
            r.patched_sha256
        );
    }
    let pm = fs_err::metadata(path)?;
    if fs_err::metadata(&back)?.uid() != pm.uid() {
        std::os::unix::fs::chown(&back, Some(pm.uid()), Some(pm.gid())).with_context(|| {
            format!(
                "{}: cannot give the original the file's owner; not restored",
                path.display()
            )
        })?;
    }
    regular_nolink(path)?;
    fs_err::rename(&back, path)?;
    let after = crate::fsutil::sha256_file(path)?;
    if after != r.original_sha256 {
        anyhow::bail!(
            "{}: sha256 {after} after the rename, not the original {}; the kept original is still in {}",
            path.display(),
            r.original_sha256,
            fixes_dir().join(id).display()
        );
    }
    fs_err::remove_dir_all(fixes_dir().join(id))?;
    Ok(r)
}
