//! The build folder `package` reads (`manifest.json`, `scan.json`, the library), read and checked
//! for shape: every file a regular file of a bounded size, the manifest of a known schema and its
//! values fit for a package. Whether the library is clean is not taken from here: `package` scans
//! what it ships itself ([`super::shipped`]).

use std::path::{Path, PathBuf};

use crate::manifest::Manifest;

/// A build folder, read and checked.
#[derive(Debug, Clone)]
pub struct BuildFolder {
    /// The folder.
    pub dir: PathBuf,
    /// `manifest.json`, parsed.
    pub manifest: Manifest,
    /// `manifest.json` as stored (embedded verbatim).
    pub manifest_json: Vec<u8>,
    /// `scan.json` as the build wrote it, parsed (compared with `package`'s own scan).
    pub scan: crate::scan::model::ScanReport,
    /// The library file named by the manifest.
    pub library: PathBuf,
}

impl BuildFolder {
    /// Read `dir`: `manifest.json` (schema `crate::manifest`, every field that reaches a package
    /// checked by [`super::fields::check_manifest`]), `scan.json` (schema `crate::scan::model`),
    /// and the library `manifest.library.file`, whose size must match the manifest. Nothing here
    /// is believed about the library's device code: its sha256 and its scan are checked on the
    /// bytes `package` ships ([`super::shipped`]).
    ///
    /// Errors name the file and what is wrong.
    pub fn read(dir: &Path) -> anyhow::Result<BuildFolder> {
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
                "{}: does not exist (--from takes a build folder, e.g. out/rccl-2.13.4-gfx1100/)",
                dir.display()
            ),
            Err(e) => anyhow::bail!("{}: cannot read: {e}", dir.display()),
            Ok(m) if !m.is_dir() => anyhow::bail!(
                "{}: is {}, not a folder (--from takes a build folder, e.g. out/rccl-2.13.4-gfx1100/)",
                dir.display(),
                kind_of(&m)
            ),
            Ok(_) => {}
        }
        let mpath = dir.join("manifest.json");
        regular_file(&mpath, "the build manifest")?;
        let manifest_json = read_all(&mpath)?;
        let manifest = read_manifest(&mpath, &manifest_json)?;
        super::fields::check_manifest(&mpath, &manifest)?;
        let spath = dir.join("scan.json");
        regular_file(&spath, "the scanner's report")?;
        let scan_json = read_all(&spath)?;
        let scan: crate::scan::model::ScanReport =
            serde_json::from_slice(&scan_json).map_err(|e| {
                anyhow::anyhow!("{}: not a valid rcclfix scan report: {e}", spath.display())
            })?;
        // Version 2 changed only the CLI's default `--json` shape; the build's full report has
        // the same fields in versions 1 and 2 (docs/scan-json.md).
        if !(1..=crate::scan::model::SCHEMA_VERSION).contains(&scan.schema_version) {
            anyhow::bail!(
                "{}: scan schema version {} (this rcclfix reads {})",
                spath.display(),
                scan.schema_version,
                crate::scan::model::SCHEMA_VERSION
            );
        }
        let library = dir.join(&manifest.library.file);
        let meta = regular_file(
            &library,
            &format!("the library named by {}", mpath.display()),
        )?;
        if meta.len() != manifest.library.size {
            anyhow::bail!(
                "{}: library.size {} differs from the size of {} ({} bytes)",
                mpath.display(),
                manifest.library.size,
                library.display(),
                meta.len()
            );
        }
        Ok(BuildFolder {
            dir: dir.to_owned(),
            manifest,
            manifest_json,
            scan,
            library,
        })
    }
}

/// What a non-regular file is, for messages: `a folder`, `a FIFO (named pipe)`, ….
pub(crate) fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Check, without opening it (a FIFO would block), that `path` (following symbolic links) is a
/// regular file; `what` says what it should be. Returns its metadata.
///
/// Errors (one line): `<path>: missing (<what>)`, `<path>: is a folder, not a file (<what>)`, ….
pub fn regular_file(path: &Path, what: &str) -> anyhow::Result<std::fs::Metadata> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(m),
        Ok(m) => anyhow::bail!(
            "{}: is {}, not a file ({what})",
            path.display(),
            kind_of(&m)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                anyhow::bail!("{}: a symbolic link to nothing ({what})", path.display())
            }
            anyhow::bail!("{}: missing ({what})", path.display())
        }
        Err(e) => anyhow::bail!("{}: cannot read: {e} ({what})", path.display()),
    }
}

/// The most `manifest.json` or `scan.json` may hold. A build writes a few KiB (a scan report
/// of every RCCL kernel stays far below a MiB); the cap keeps a hostile build folder from making
/// `package` read gigabytes into memory. It is the `--log` cap of `doctor`.
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// Read a small file (at most [`MAX_JSON_BYTES`]); the error is one line naming it.
pub(crate) fn read_all(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    // A regular file only: a FIFO would block the read, a device never end.
    let (f, _) = crate::fsutil::open_regular(path)?;
    let mut v = Vec::new();
    f.take(MAX_JSON_BYTES + 1)
        .read_to_end(&mut v)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
    if v.len() as u64 > MAX_JSON_BYTES {
        anyhow::bail!(
            "{}: larger than {} MiB, which no rcclfix build writes (a build's manifest.json and scan.json are a few KiB)",
            path.display(),
            MAX_JSON_BYTES >> 20
        );
    }
    Ok(v)
}

/// Parse `manifest.json` (bytes `json`, read from `path`): its `schema_version` must be
/// [`crate::manifest::MANIFEST_SCHEMA_VERSION`] (checked before the typed parse, so a newer
/// manifest is named as such rather than as malformed). Fields this rcclfix does not know are
/// accepted with one warning naming them (a newer rcclfix of the same schema version may add
/// optional fields); they are still embedded verbatim in the packages.
///
/// Errors: not JSON, an unsupported `schema_version`, or a shape that does not parse as
/// [`Manifest`]; each names the file.
pub fn read_manifest(path: &Path, json: &[u8]) -> anyhow::Result<Manifest> {
    let invalid = |e: serde_json::Error| {
        anyhow::anyhow!("{}: not a valid rcclfix manifest: {e}", path.display())
    };
    let v: serde_json::Value = serde_json::from_slice(json).map_err(invalid)?;
    let want = crate::manifest::MANIFEST_SCHEMA_VERSION;
    match v.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(want) => {}
        Some(n) => anyhow::bail!(
            "{}: manifest schema version {n} is not supported (this rcclfix reads {want})",
            path.display()
        ),
        None => anyhow::bail!(
            "{}: no schema_version (this rcclfix reads manifest schema version {want})",
            path.display()
        ),
    }
    let m: Manifest = serde_json::from_value(v.clone()).map_err(invalid)?;
    let known = serde_json::to_value(&m)?;
    let mut unknown = Vec::new();
    unknown_fields(&v, &known, "", &mut unknown);
    if !unknown.is_empty() {
        crate::ui::warn(format!(
            "{}: ignoring field(s) this rcclfix does not know: {}",
            path.display(),
            super::printable(&unknown.join(", "))
        ));
    }
    Ok(m)
}

/// Keys of `got` (recursively through objects) that `known` lacks, as dotted paths.
fn unknown_fields(
    got: &serde_json::Value,
    known: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    if let (Some(g), Some(k)) = (got.as_object(), known.as_object()) {
        for (key, gv) in g {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            match k.get(key) {
                Some(kv) => unknown_fields(gv, kv, &path, out),
                None => out.push(path),
            }
        }
    }
}
