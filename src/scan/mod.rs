//! The hostcall scanner: host ELF → `.hip_fatbin` → offload bundles (plain or CCOB) → AMDGPU code
//! objects → metadata notes → per-kernel hidden arguments.
//!
//! Reference: shared/reference/formats.md; clang `ClangOffloadBundler.rst`, llvm `AMDGPUUsage.rst`.
//! The entry point is [`scan_path`]; [`model`] holds the result types every other module consumes,
//! [`ScanReport::target_states`] is the gate `build` uses.
//!
//! Layout: [`input`] (files, folders, archives) → [`elf`] (host ELF sections) → [`walk`] over [`bundle`] /
//! [`ccob`] (containers) → [`codeobj`] + [`meta`] (code objects, notes) → [`callgraph`] (per-kernel
//! paths to hostcall users) → [`verdict`] (why, states).
//! Files are mmapped and parsed in place; only compressed data is copied (decompressed once).

pub mod bundle;
pub mod callgraph;
pub mod ccob;
pub mod cli;
pub mod codeobj;
pub mod elf;
pub mod input;
pub mod meta;
pub mod model;
pub mod verdict;
pub mod walk;

pub use model::*;

use std::path::Path;

/// Options for a scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Only report these gfx targets (empty: all). Generic entries that can run on a listed target
    /// (e.g. `gfx11-generic` for `gfx1100`) are kept too.
    pub targets: Vec<String>,
}

/// How device code is read (the parts of a scan that do not change its result on good input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Check the CCOB MD5-low-64 hash (default). MD5 runs at roughly a quarter of zstd's decode
    /// speed, so turning it off trades the integrity check for speed on large compressed images;
    /// sizes and the stream itself are still checked.
    pub verify_hash: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { verify_hash: true }
    }
}

/// A problem found while parsing device code: a byte offset (relative to the buffer the parser was
/// given; callers add their base), a short class (see [`Unreadable::class`]) and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Byte offset relative to the parsed buffer.
    pub offset: u64,
    /// Machine-readable class, e.g. `truncated`, `bad-magic`, `hash-mismatch`.
    pub class: &'static str,
    /// Human-readable reason, lowercase.
    pub reason: String,
}

impl Problem {
    /// A problem at `offset` of class `class`.
    pub fn new(offset: u64, class: &'static str, reason: impl Into<String>) -> Problem {
        Problem {
            offset,
            class,
            reason: reason.into(),
        }
    }

    /// Turn into an [`Unreadable`] record, adding `base` to the offset.
    pub fn unreadable(
        self,
        base: u64,
        processor: Option<String>,
        entry_id: Option<String>,
    ) -> Unreadable {
        Unreadable {
            offset: base.saturating_add(self.offset),
            processor,
            entry_id,
            class: self.class.to_owned(),
            reason: self.reason,
        }
    }
}

/// Scan a file or folder: a host ELF (.so, executable, .o), a bare code object, a raw bundle, a
/// CCOB file, a .deb, a .whl/zip, a tar archive (plain, gzip, xz or zstd), or a directory (walked;
/// each file carrying device code is reported).
///
/// Errors: the path cannot be opened, or a file given directly is empty or of no known format.
/// Unreadable device code inside a readable file is *not* an error: it is reported as an
/// [`Unreadable`] record with the offset and reason, and makes the target `Unknown`.
pub fn scan_path(path: &Path, opts: &ScanOptions) -> anyhow::Result<ScanReport> {
    scan_path_with(path, opts, &Settings::default())
}

/// [`scan_path`] with explicit [`Settings`] (e.g. `verify_hash: false` for `--no-hash-check`).
pub fn scan_path_with(
    path: &Path,
    opts: &ScanOptions,
    settings: &Settings,
) -> anyhow::Result<ScanReport> {
    let mut files = Vec::new();
    input::scan_top(path, &mut files, settings)?;
    Ok(report_of(files, opts))
}

/// The report for scanned `files`, kept to the requested targets.
fn report_of(files: Vec<FileReport>, opts: &ScanOptions) -> ScanReport {
    let mut report = ScanReport {
        schema_version: SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").to_owned(),
        files,
    };
    if !opts.targets.is_empty() {
        report.retain_targets(&opts.targets);
    }
    report
}

/// Scan a byte buffer already in memory (e.g. a file read by the caller, or a fuzzing input),
/// displayed as `name`. Same formats and errors as [`scan_path`] for a single file.
pub fn scan_bytes(name: &str, data: &[u8], opts: &ScanOptions) -> anyhow::Result<ScanReport> {
    let mut files = Vec::new();
    input::scan_buffer(name, data, true, 0, &mut files, &Settings::default())?;
    Ok(report_of(files, opts))
}

impl ScanReport {
    /// Keep only images (and attributed unreadable records) that can run on one of `targets`;
    /// unattributed unreadable records are kept, since they may belong to any target.
    pub fn retain_targets(&mut self, targets: &[String]) {
        let keep = |p: &str| targets.iter().any(|t| verdict::runs_on(p, t));
        for f in &mut self.files {
            f.images.retain(|i| keep(&i.processor));
            f.unreadable.retain(|u| match u.processor.as_deref() {
                None => true,
                Some(p) => keep(p),
            });
        }
    }
}
