//! The hostcall scanner: host ELF → `__hip_fatbin_wrapper` → offload bundles (plain or CCOB) →
//! AMDGPU code objects → metadata notes → per-kernel hidden arguments. It reads what the loader
//! and comgr read; where they could disagree, the result is unknown.
//!
//! Reference: clang `ClangOffloadBundler.rst`, llvm `AMDGPUUsage.rst`.
//! The entry point is [`scan_path`]; [`model`] holds the result types every other module consumes,
//! [`ScanReport::target_states`] is the gate `build` uses.
//!
//! Layout: [`input`] (files, folders, archives) → [`host`] (a host ELF's device code: [`wrapper`]
//! records and their relocations, [`elf`] sections, [`offload`] binaries) → [`walk`] over [`bundle`] /
//! [`ccob`] (containers) → [`codeobj`] + [`meta`] (code objects, notes) → [`callgraph`] (per-kernel
//! paths to hostcall users) → [`verdict`] (why, states).
//! Files are mmapped and parsed in place; only compressed data is copied (decompressed once).

pub mod amdgpu;
pub mod bundle;
pub mod callgraph;
pub mod ccob;
pub mod codeobj;
pub mod compact;
pub mod elf;
pub mod host;
pub mod input;
pub mod meta;
pub mod model;
pub mod offload;
pub mod output;
pub mod stream;
pub mod verdict;
pub mod walk;
pub mod wrapper;

pub use model::*;

use std::path::Path;

/// Options for a scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Only report these gfx targets (empty: all). Generic entries that can run on a listed target
    /// (e.g. `gfx11-generic` for `gfx1100`) are kept too.
    pub targets: Vec<String>,
}

/// How device code is read: the parts of a scan that change its cost, never its result on
/// good input (a limit turns what exceeds it into an `unknown` record naming the limit).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Check the CCOB MD5-low-64 hash (`--verify-hash`; off by default). Nothing that loads a CCOB
    /// at run time checks it (clang `OffloadBundler.cpp` computes it only for
    /// `OFFLOAD_BUNDLER_VERBOSE=1` and only prints whether it matches; see docs/scan-json.md), so
    /// the verdict on what the runtime loads does not depend on it. Sizes and the stream are
    /// always checked.
    pub verify_hash: bool,
    /// Largest single code object held in memory (a CCOB entry, a member, a streamed entry), in
    /// bytes ([`DEFAULT_MAX_CODE_OBJECT`], `--max-code-object`, `RCCLFIX_SCAN_MAX_CODE_OBJECT`).
    /// A bigger one is an `unknown` record (class `too-large`) that names the limit.
    pub max_code_object: u64,
    /// Archive members up to this size are read into memory whole; larger ones are decompressed
    /// once into an unnamed file in [`Settings::spill_dir`] and mapped, or, without one, streamed
    /// (read more than once, never held), in bytes ([`DEFAULT_MEMORY_BUDGET`], `--memory-budget`,
    /// `RCCLFIX_SCAN_MEMORY_BUDGET`).
    pub memory_budget: u64,
    /// Where a compressed archive member larger than [`Settings::memory_budget`] is decompressed
    /// once before it is scanned (an unnamed temporary file, gone when the member is done; used
    /// only when the folder's file system has at least twice the member's size free).
    /// `None`: such members are streamed, and a host ELF among them is decompressed up to three
    /// times. Default: the system temporary folder (`TMPDIR`), or `RCCLFIX_SCAN_SPILL_DIR`
    /// (empty: none).
    pub spill_dir: Option<std::path::PathBuf>,
    /// Which kernels the report lists ([`meta::Detail`]; default every kernel). The verdicts,
    /// the counts and every declaring kernel do not depend on it.
    pub kernels: meta::Detail,
    /// Worker threads (`--jobs`); 0: one per core. Each holds at most one decoded code object.
    pub jobs: usize,
    /// Progress of a long walk (a hidden bar when none is drawn).
    pub progress: indicatif::ProgressBar,
}

/// Default [`Settings::max_code_object`]: 4 GiB.
pub const DEFAULT_MAX_CODE_OBJECT: u64 = 4 << 30;
/// Default [`Settings::memory_budget`]: 256 MiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 256 << 20;

impl Default for Settings {
    /// Hash check off, the default limits (or `RCCLFIX_SCAN_MAX_CODE_OBJECT` /
    /// `RCCLFIX_SCAN_MEMORY_BUDGET` when set to a valid size), the spill folder from
    /// `RCCLFIX_SCAN_SPILL_DIR` or the system temporary folder, one thread per core, no progress.
    fn default() -> Self {
        let env = |k: &str, d: u64| {
            std::env::var(k)
                .ok()
                .and_then(|v| parse_size(&v).ok())
                .unwrap_or(d)
        };
        Settings {
            verify_hash: false,
            max_code_object: env("RCCLFIX_SCAN_MAX_CODE_OBJECT", DEFAULT_MAX_CODE_OBJECT),
            memory_budget: env("RCCLFIX_SCAN_MEMORY_BUDGET", DEFAULT_MEMORY_BUDGET),
            spill_dir: match std::env::var_os("RCCLFIX_SCAN_SPILL_DIR") {
                Some(d) if d.is_empty() => None,
                Some(d) => Some(d.into()),
                None => Some(std::env::temp_dir()),
            },
            kernels: meta::Detail::All,
            jobs: 0,
            progress: indicatif::ProgressBar::hidden(),
        }
    }
}

/// Parse a size: bytes, or a number with `K`, `M`, `G`, `T` (binary multiples; `KiB`, `MB` and
/// `k` are read the same), e.g. `4G`, `512MiB`, `65536`.
///
/// Errors: no number, a fraction, an unknown unit, or more than 2^64 - 1 bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4G, 512M, 65536)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("{s:?}: unknown unit (use K, M, G or T)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
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

/// [`scan_path`] with explicit [`Settings`] (e.g. `verify_hash: true` for `--verify-hash`).
pub fn scan_path_with(
    path: &Path,
    opts: &ScanOptions,
    settings: &Settings,
) -> anyhow::Result<ScanReport> {
    scan_paths_with(&[path.to_owned()], opts, settings)
}

/// Scan several files and folders in one run (their jobs share the pool); the files come back
/// in the order given, each folder in name order. Errors: as [`scan_path`] for any of them.
pub fn scan_paths_with(
    paths: &[std::path::PathBuf],
    opts: &ScanOptions,
    settings: &Settings,
) -> anyhow::Result<ScanReport> {
    Ok(report_of(input::scan_paths(paths, settings)?, opts))
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
    let settings = Settings::default();
    let known = input::with_pool(&settings, || {
        input::scan_buffer(name, data, true, 0, &mut files, &settings)
    })?;
    if !known {
        anyhow::bail!("{name}: not a recognised input at offset 0");
    }
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
