//! The steps the three applies share (in place, pip overlay, dpkg overlay): patch the planned
//! copy into a scratch file (`patch_planned`), check that it scans clean (`rescan_clean`),
//! and, once applied, where each consumer's loader search now leads ([`check_bindings`]).

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::record::{checked_fixes_dir, fix_id, FixRecord};
use super::{Copy, Decision};

/// Patch the planned `copy` with `opts` into `patched` (a file in a scratch folder), the first
/// step of every apply (in place, pip, dpkg). Returns the fix id, the folder the fix will be kept
/// in (`$RCCLFIX_HOME/fixes/<id>`) and the patch record.
///
/// Errors (nothing changed): a fix of this file is already kept; the patch fails; the file is no
/// longer the one planned (its sha256).
pub(super) fn patch_planned(
    copy: &Copy,
    opts: &crate::patch::PatchOptions,
    patched: &Path,
) -> anyhow::Result<(String, PathBuf, crate::patch::PatchRecord)> {
    let path = &copy.path;
    let id = fix_id(path, &copy.sha256);
    let keep = checked_fixes_dir()?.join(&id);
    if std::fs::symlink_metadata(&keep).is_ok() {
        anyhow::bail!(
            "{}: a fix of this file is already kept as {id} ({}); undo it first (rcclfix fix --undo {id})",
            path.display(),
            keep.display()
        );
    }
    let rec = crate::patch::patch_file(path, patched, opts)
        .with_context(|| format!("patching {}", path.display()))?;
    if !rec.written || rec.input_sha256 != copy.sha256 {
        anyhow::bail!(
            "{}: changed since it was planned (sha256 {} now, {} in the plan); nothing was changed",
            path.display(),
            rec.input_sha256,
            copy.sha256
        );
    }
    Ok((id, keep, rec))
}

/// The patched file must scan clean for every target the decision judged.
pub(super) fn rescan_clean(patched: &Path, d: &Decision) -> anyhow::Result<()> {
    let targets = match d {
        Decision::Patch { targets, .. } | Decision::PatchAsserts { targets, .. } => targets,
        _ => return Ok(()),
    };
    let report = crate::scan::scan_path(patched, &crate::scan::ScanOptions::default())?;
    for (t, s) in report.target_states(targets) {
        if !matches!(s, crate::scan::TargetState::Clean { .. }) {
            anyhow::bail!("internal: the patched file does not scan clean for {t}: {s:?}; nothing was changed");
        }
    }
    Ok(())
}

/// After applying: for each consumer found to bind to the copy, where the loader's search (read
/// again from the files) now leads, and whether that file is the patched one. One line each,
/// `Ok` when it is.
pub fn check_bindings(copy: &Copy, record: &FixRecord) -> Vec<Result<String, String>> {
    copy.consumers
        .iter()
        .map(|b| {
            let c = b.consumer.display();
            match super::find::rebind(b) {
                Ok(Some(p)) if p == record.path => match crate::fsutil::sha256_file(&p) {
                    Ok(s) if s == record.patched_sha256 => {
                        Ok(format!("{c} binds {} (the patched file)", p.display()))
                    }
                    Ok(s) => Err(format!(
                        "{c} binds {}, whose sha256 {s} is not the patched one",
                        p.display()
                    )),
                    Err(e) => Err(format!(
                        "{c} binds {}, which cannot be read: {e:#}",
                        p.display()
                    )),
                },
                Ok(Some(p)) => Err(format!("{c} now binds {}, not the fixed file", p.display())),
                Ok(None) => Err(format!("{c}: the loader finds no {} now", b.needed)),
                Err(e) => Err(format!("{c}: {e:#}")),
            }
        })
        .collect()
}
