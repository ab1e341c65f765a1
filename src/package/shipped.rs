//! What `package` ships, and its own scan of it.
//!
//! A build folder is input someone else may have made: its `manifest.json` and `scan.json` are
//! claims. So `package` takes a private copy of the library ([`Snapshot`]; every package is made
//! from that copy, so what was checked is what ships), checks the copy's sha256 and size against
//! the manifest, and scans it with rcclfix's own scanner ([`scan_shipped`]), CCOB hashes
//! included, as `build`'s scan gate does. The stripped library of the `.deb` is written beside the
//! copy and scanned again, so the exact bytes of each package's library are scanned.
//!
//! Only `clean` for every requested target passes ([`check`]); any other state (a declaring
//! kernel, something unreadable, no code for the target) refuses the package with exit 1 and one
//! line per target. A library that passes but that the build folder describes otherwise (its
//! manifest's `gate`, its `scan.json`, code for a target the manifest does not name) is refused
//! too, with one line naming the file that disagrees: a manifest that does not describe its
//! library is not provenance to put in a package. The package then says what this scan found
//! (description, changelog, the shipped `scan.json`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::folder::BuildFolder;
use crate::scan::{ScanOptions, ScanReport, TargetState};

/// A private copy of the build's library, in a hidden scratch folder of this process in the
/// output folder (`.rcclfix-partial-<pid>-*`, removed when dropped or interrupted, and by the
/// next run when a killed one left it): the bytes every package is made from.
pub struct Snapshot {
    dir: crate::fsutil::TempDir,
    /// The copy.
    pub path: PathBuf,
    /// The copy, memory-mapped read-only.
    pub map: Arc<memmap2::Mmap>,
    /// sha256 of the copy, lowercase hex (equal to the manifest's `library.sha256`).
    pub sha256: String,
}

impl Snapshot {
    /// Copy `b.library` into a new scratch folder in `out_dir`, hashing it on the way, and check the copy's
    /// size and sha256 against `manifest.json`'s `library.size` and `library.sha256`.
    ///
    /// Errors (one line, naming the library or the manifest): the library cannot be read or is
    /// not a regular file; its size or sha256 differs from the manifest; the scratch folder
    /// cannot be written.
    pub fn take(b: &BuildFolder, out_dir: &Path) -> anyhow::Result<Snapshot> {
        use sha2::Digest;
        crate::fsutil::remove_stale_in(out_dir);
        let dir = crate::fsutil::TempDir::new_in(
            out_dir,
            &format!(".rcclfix-partial-{}-", std::process::id()),
        )?;
        let path = dir.path().join("library");
        let (mut src, _) = crate::fsutil::open_regular(&b.library)?;
        let full = |e: std::io::Error| {
            anyhow::anyhow!(
                "cannot write {}: {e} (the library is copied there first)",
                out_dir.display()
            )
        };
        let mut dst = std::fs::File::create(&path).map_err(full)?;
        let mut h = sha2::Sha256::new();
        let mut n = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let k = src
                .read(&mut buf)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", b.library.display()))?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            dst.write_all(&buf[..k]).map_err(full)?;
            n += k as u64;
        }
        drop(dst);
        let mpath = b.dir.join("manifest.json");
        if n != b.manifest.library.size {
            anyhow::bail!(
                "{}: library.size {} differs from the size of {} ({n} bytes)",
                mpath.display(),
                b.manifest.library.size,
                b.library.display()
            );
        }
        let sha = hex::encode(h.finalize());
        if sha != b.manifest.library.sha256 {
            anyhow::bail!(
                "{}: sha256 {sha} differs from {} ({})\nhelp: the library changed after the build; rebuild, or re-run the step that rewrote it",
                b.library.display(),
                mpath.display(),
                b.manifest.library.sha256
            );
        }
        let map = super::strip::map_file(&path)?;
        Ok(Snapshot {
            dir,
            path,
            map,
            sha256: sha,
        })
    }

    /// Write `file` into the scratch folder as `name` and map it: the `.deb`'s stripped library,
    /// so the bytes that are scanned are the bytes that ship. Errors: the write fails.
    pub fn write_beside(
        &self,
        name: &str,
        file: &super::strip::Rewritten,
    ) -> anyhow::Result<(PathBuf, Arc<memmap2::Mmap>)> {
        let path = self.dir.path().join(name);
        let parent = self.dir.path().parent().unwrap_or(self.dir.path());
        let full = |e: std::io::Error| {
            anyhow::anyhow!(
                "cannot write {}: {e} (the stripped library is written there first)",
                parent.display()
            )
        };
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).map_err(full)?);
        std::io::copy(&mut file.reader(), &mut out)
            .and_then(|_| out.flush())
            .map_err(full)?;
        drop(out);
        let map = super::strip::map_file(&path)?;
        Ok((path, map))
    }
}

/// The marker of a package refused by its own scan: the context over a [`crate::ui::LinesError`]
/// holding one line per target that is not clean (see [`ScanRefused::error`]); `cmd/package.rs`
/// maps it to exit 1.
#[derive(Debug, thiserror::Error)]
#[error("scan gate failed for {library}")]
pub struct ScanRefused {
    /// The library refused (as the build folder names it).
    pub library: String,
}

impl ScanRefused {
    /// The error for `library` with one line per problem.
    pub fn error(library: String, lines: Vec<String>) -> anyhow::Error {
        anyhow::Error::new(crate::ui::LinesError {
            head: format!("scan gate failed for {library}:"),
            lines: lines.into_iter().map(|l| format!("  {l}")).collect(),
            help: Some(
                "package ships only a library whose every kernel for every requested target \
                 was read and none declares hidden_hostcall_buffer"
                    .into(),
            ),
        })
        .context(ScanRefused { library })
    }
}

/// `package`'s scan of one library it ships.
#[derive(Debug, Clone)]
pub struct ShippedScan {
    /// The report, kept to the requested targets and naming the file `display` (what the
    /// package ships as its `scan.json`).
    pub report: ScanReport,
    /// Kernels read per requested target (every one clean).
    pub kernels: BTreeMap<String, usize>,
}

impl ShippedScan {
    /// `scan.json` as the package ships it (pretty JSON and a newline).
    pub fn json(&self) -> anyhow::Result<Vec<u8>> {
        let mut v = serde_json::to_vec_pretty(&self.report)?;
        v.push(b'\n');
        Ok(v)
    }

    /// `1234 kernels for gfx1100, 1234 for gfx1101` (for descriptions).
    pub fn counts(&self) -> String {
        self.kernels
            .iter()
            .enumerate()
            .map(|(i, (t, n))| {
                if i == 0 {
                    format!("{n} kernels for {t}")
                } else {
                    format!("{n} for {t}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Scan the file at `path` (a private copy) with rcclfix's scanner and check it against the build
/// folder `b` ([`check`]); the report names the file `display`. `what` says which library it is
/// in messages (`the library`, `the .deb's stripped library`).
///
/// Errors: the file cannot be read or is no known format; see [`check`].
pub fn scan_shipped(
    b: &BuildFolder,
    path: &Path,
    display: &str,
    what: &str,
) -> anyhow::Result<ShippedScan> {
    // No target filter: code for a target the manifest does not name must be seen too.
    let mut report = crate::scan::scan_path_with(
        path,
        &ScanOptions::default(),
        &crate::scan::Settings {
            verify_hash: true,
            ..Default::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("{} ({what}): cannot scan: {e:#}", b.library.display()))?;
    let scanned = path.display().to_string();
    for f in &mut report.files {
        f.path = match f.path.strip_prefix(&scanned) {
            Some(rest) => format!("{display}{rest}"),
            None => display.to_owned(),
        };
    }
    let kernels = check(b, &report, what)?;
    report.retain_targets(&b.manifest.targets);
    Ok(ShippedScan { report, kernels })
}

/// One line for a target's state: `clean (124 kernels)`, `2 kernel(s) declare
/// hidden_hostcall_buffer: a, b`, `unknown: <reason>`, or any other state by its name and fields.
pub fn describe(s: &TargetState) -> String {
    match s {
        TargetState::Clean { kernels } => format!("clean ({kernels} kernels)"),
        TargetState::Declares { kernels } => {
            let shown: Vec<&str> = kernels.iter().take(8).map(String::as_str).collect();
            let more = if kernels.len() > shown.len() {
                format!(" (and {} more)", kernels.len() - shown.len())
            } else {
                String::new()
            };
            format!(
                "{} kernel(s) declare hidden_hostcall_buffer: {}{more}",
                kernels.len(),
                shown.join(", ")
            )
        }
        other => {
            // Any state but these two fails; name it by its JSON form (docs/scan-json.md).
            let v = serde_json::to_value(other).unwrap_or_default();
            let name = v
                .get("state")
                .and_then(|s| s.as_str())
                .unwrap_or("not clean")
                .to_owned();
            let rest: Vec<String> = v
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.as_str() != "state")
                .map(|(_, x)| match x.as_str() {
                    Some(s) => s.to_owned(),
                    None => x.to_string(),
                })
                .collect();
            if rest.is_empty() {
                name
            } else {
                format!("{name}: {}", rest.join("; "))
            }
        }
    }
}

/// Check `report` (the scan of the library `b` ships) against `b`: every target the manifest
/// names must be `clean`; then the manifest's `gate` must say `clean` for each, the build
/// folder's `scan.json` must find the same number of kernels clean, and the library must carry
/// no device code for a target outside the manifest's `targets`. Returns the kernels read per
/// target.
///
/// Errors: a target not clean is a [`ScanRefused`] (one line per target, plus a line naming a
/// manifest that called it clean); a disagreeing manifest or `scan.json` is one line naming that
/// file.
pub fn check(
    b: &BuildFolder,
    report: &ScanReport,
    what: &str,
) -> anyhow::Result<BTreeMap<String, usize>> {
    let targets = &b.manifest.targets;
    let mpath = b.dir.join("manifest.json");
    let spath = b.dir.join("scan.json");
    let states = report.target_states(targets);
    let mut failures = Vec::new();
    let mut kernels = BTreeMap::new();
    for (t, s) in &states {
        match s {
            TargetState::Clean { kernels: n } => {
                kernels.insert(t.clone(), *n);
            }
            other => {
                failures.push(format!("{t}: {}", describe(other)));
                if b.manifest.gate.get(t).map(String::as_str) == Some("clean") {
                    failures.push(format!(
                        "{t}: {}'s gate says \"clean\": it does not describe this library",
                        mpath.display()
                    ));
                }
            }
        }
    }
    if !failures.is_empty() {
        return Err(ScanRefused::error(
            format!("{} ({what})", b.library.display()),
            failures,
        ));
    }
    let mut foreign: Vec<&str> = report
        .files
        .iter()
        .flat_map(|f| {
            f.images
                .iter()
                .map(|i| i.processor.as_str())
                .chain(f.unreadable.iter().filter_map(|u| u.processor.as_deref()))
        })
        .filter(|p| !targets.iter().any(|t| crate::scan::verdict::runs_on(p, t)))
        .collect();
    foreign.sort_unstable();
    foreign.dedup();
    if !foreign.is_empty() {
        anyhow::bail!(
            "{}: targets [{}], but {} ({what}) also has device code for {}: the manifest does not describe this library",
            mpath.display(),
            targets.join(", "),
            b.library.display(),
            foreign.join(", ")
        );
    }
    let folder = b.scan.target_states(targets);
    for (t, n) in &kernels {
        match b.manifest.gate.get(t).map(String::as_str) {
            Some("clean") => {}
            v => anyhow::bail!(
                "{}: the gate says {} for {t}, but rcclfix's scan of {} finds {n} kernels, none declaring hidden_hostcall_buffer: the manifest does not describe this library",
                mpath.display(),
                v.map_or("nothing".to_owned(), |v| format!("{v:?}")),
                b.library.display()
            ),
        }
        match folder.get(t) {
            Some(TargetState::Clean { kernels: m }) if m == n => {}
            s => anyhow::bail!(
                "{}: for {t} it says {}, but rcclfix's scan of {} finds {n} kernels, none declaring hidden_hostcall_buffer: scan.json does not describe this library",
                spath.display(),
                s.map_or("nothing".to_owned(), describe),
                b.library.display()
            ),
        }
    }
    Ok(kernels)
}
