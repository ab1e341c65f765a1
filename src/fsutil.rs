//! Atomic output: every file rcclfix writes is written to a temporary sibling and renamed into place,
//! and every output folder is assembled in a temporary sibling folder and renamed at the end, so an
//! interrupted or failed run leaves nothing half-written.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Write `bytes` to `path` atomically (temp file in the same directory, fsync, rename).
///
/// Errors: the directory does not exist or is not writable; the rename fails.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = parent_dir(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(".rcclfix-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    // tempfile creates 0600; outputs are ordinary files (0644), unless the file already exists,
    // whose mode is kept.
    let mode = fs_err::metadata(path)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    fs_err::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all().ok();
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot rename into {}", path.display()))?;
    Ok(())
}

/// A folder being assembled next to its final path; [`AtomicDir::commit`] renames it into place,
/// and dropping it uncommitted deletes it.
#[derive(Debug)]
pub struct AtomicDir {
    tmp: Option<tempfile::TempDir>,
    dest: PathBuf,
}

impl AtomicDir {
    /// Start assembling `dest`. The parent folder is created if needed; `dest` itself must not be
    /// written to until commit.
    pub fn new(dest: &Path) -> anyhow::Result<Self> {
        let parent = parent_dir(dest);
        fs_err::create_dir_all(parent)?;
        let tmp = tempfile::Builder::new()
            .prefix(".rcclfix-partial-")
            .tempdir_in(parent)
            .with_context(|| format!("cannot create a temporary folder in {}", parent.display()))?;
        Ok(AtomicDir {
            tmp: Some(tmp),
            dest: dest.to_owned(),
        })
    }

    /// The temporary folder to write into.
    pub fn path(&self) -> &Path {
        self.tmp.as_ref().expect("not committed").path()
    }

    /// The final destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Rename the folder into place, replacing an older folder at `dest` (moved aside first, then
    /// deleted). Returns the final path.
    pub fn commit(mut self) -> anyhow::Result<PathBuf> {
        let tmp = self.tmp.take().expect("not committed").keep();
        // tempfile creates 0700; an output folder is an ordinary folder (0755).
        fs_err::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        if self.dest.exists() {
            let old = self
                .dest
                .with_extension(format!("old-{}", std::process::id()));
            fs_err::rename(&self.dest, &old)?;
            fs_err::rename(&tmp, &self.dest)?;
            fs_err::remove_dir_all(&old)?;
        } else {
            fs_err::rename(&tmp, &self.dest)?;
        }
        Ok(self.dest.clone())
    }
}

fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// sha256 of a file as lowercase hex, streamed.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    use sha2::Digest;
    let mut f = fs_err::File::open(path)?;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(hex::encode(h.finalize()))
}
