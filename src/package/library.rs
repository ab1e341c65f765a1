//! `rcclfix package --library FILE`: an overlay wheel made from any library, for example a
//! patched copy of a user's own RCCL (what `rcclfix fix` installs for a pip-owned copy).
//!
//! The library is copied privately into the output folder (hashed while copying), scanned with
//! rcclfix's own scanner, and refused unless every target it carries scans `clean`; the wheel is
//! then written from that copy ([`super::wheel::write_wheel`], the same hook that preloads the
//! library with `RTLD_GLOBAL`) with a provenance document in place of a build's `manifest.json`:
//! the original file's path, sha256 and owner (package and version), and the patch record
//! (kernels rewritten, functions made to trap), and that the result is unverified on AMD
//! hardware. Written as a temporary file and renamed; nothing is left when anything fails.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Version of [`LibraryManifest`].
pub const LIBRARY_MANIFEST_VERSION: u32 = 1;

/// Where the library came from: what `package --library` writes as the wheel's `manifest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct LibraryManifest {
    /// [`LIBRARY_MANIFEST_VERSION`].
    pub schema_version: u32,
    /// Always `library-overlay` (a build folder's manifest has no such field).
    pub kind: String,
    /// The rcclfix that wrote it.
    pub rcclfix_version: String,
    /// The library shipped: its sha256 (lowercase hex) and size in bytes.
    pub library_sha256: String,
    /// Size in bytes.
    pub library_size: u64,
    /// The file it was made from (the user's library), when known.
    pub original: Option<Original>,
    /// The `DT_SONAME` the shipped copy was given, when it differs from the original's (see
    /// `src/fix/soname.rs`).
    pub soname_changed_to: Option<String>,
    /// The patch record (`rcclfix patch --record`'s JSON), when the library is a patched copy.
    pub patch: Option<serde_json::Value>,
    /// What remains unverified.
    pub unverified: String,
}

/// The original a library was made from.
#[derive(Debug, Clone, Serialize)]
pub struct Original {
    /// Its path.
    pub path: PathBuf,
    /// Its sha256, lowercase hex.
    pub sha256: String,
    /// Its owner: `pip torch 2.9.1+rocm7.2`, `dpkg rccl 2.27.7.70201-81`, `none`.
    pub owner: String,
}

/// What [`library_wheel`] needs besides the library.
#[derive(Debug, Clone)]
pub struct LibraryWheel {
    /// Distribution name, escaped (`rcclfix_rccl_fix`).
    pub distribution: String,
    /// PEP 440 version (`1+<id>`).
    pub version: String,
    /// One-line summary.
    pub summary: String,
    /// The provenance (its `library_sha256` and `library_size` are filled in here).
    pub manifest: LibraryManifest,
}

/// Write the overlay wheel for `library` into `out_dir` and return its path and the shipped
/// library's sha256.
///
/// Errors (nothing written): the library cannot be read or is not a regular file; its scan is
/// not `clean` for every target it carries ([`super::shipped::ScanRefused`], exit 1); a name or
/// field fails the wheel's checks; the output cannot be written.
pub fn library_wheel(
    library: &Path,
    w: &LibraryWheel,
    out_dir: &Path,
) -> anyhow::Result<(PathBuf, String)> {
    use sha2::Digest;
    fs_err::create_dir_all(out_dir)?;
    crate::fsutil::remove_stale_in(out_dir);
    let scratch = crate::fsutil::TempDir::partial_in(out_dir)?;
    let copy = scratch.path().join("library");
    let (mut src, _) = crate::fsutil::open_regular(library)?;
    let mut dst = std::fs::File::create(&copy)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", copy.display()))?;
    let mut h = sha2::Sha256::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => anyhow::bail!("cannot read {}: {e}", library.display()),
        };
        h.update(&buf[..k]);
        dst.write_all(&buf[..k])
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", copy.display()))?;
        n += k as u64;
    }
    drop(dst);
    let sha = hex::encode(h.finalize());
    let report = crate::scan::scan_path(&copy, &crate::scan::ScanOptions::default())?;
    let targets = report.processors();
    let mut bad: Vec<String> = Vec::new();
    if targets.is_empty() {
        bad.push("no device code found".into());
    }
    for (t, s) in report.target_states(&targets) {
        if !matches!(s, crate::scan::TargetState::Clean { .. }) {
            bad.push(format!("{t}: {s:?}"));
        }
    }
    if !bad.is_empty() {
        return Err(super::shipped::ScanRefused::error(
            library.display().to_string(),
            bad,
        ));
    }
    let info = super::elf::ElfInfo::read(&copy)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", library.display()))?;
    let mut manifest = w.manifest.clone();
    manifest.library_sha256 = sha.clone();
    manifest.library_size = n;
    let mut manifest_json = serde_json::to_vec_pretty(&manifest)?;
    manifest_json.push(b'\n');
    let mut scan_json = serde_json::to_vec_pretty(&report)?;
    scan_json.push(b'\n');
    let description = format!(
        "An rcclfix overlay made from a library{}.\n\nsha256 {sha}. {}\n",
        manifest
            .original
            .as_ref()
            .map(|o| format!(" patched from {} (owner {})", o.path.display(), o.owner))
            .unwrap_or_default(),
        manifest.unverified
    )
    .replace("\"\"\"", "'''")
    .chars()
    .filter(|c| !c.is_control() || *c == '\n')
    .collect();
    let spec = super::wheel::WheelSpec {
        distribution: w.distribution.clone(),
        version: w.version.clone(),
        platform: super::wheel::platform_tag(info.glibc, info.machine.uname()),
        summary: w.summary.clone(),
        description,
        library: copy.clone(),
        manifest_json,
        scan_json,
        mtime: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    };
    super::wheel::validate(&spec)?;
    let dest = out_dir.join(spec.file_name());
    crate::fsutil::check_output_file(&dest)?;
    let mut tmp = crate::fsutil::TempFile::new_in(out_dir)?;
    {
        let w = std::io::BufWriter::new(tmp.as_file_mut());
        let mut w = super::wheel::write_wheel(&spec, w)?;
        w.flush()?;
    }
    tmp.persist(&dest, 0o644)?;
    Ok((dest, sha))
}
