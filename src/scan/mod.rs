//! The hostcall scanner: host ELF → `.hip_fatbin` → offload bundles (plain or CCOB) → AMDGPU code
//! objects → metadata notes → per-kernel hidden arguments.
//!
//! Reference: shared/reference/formats.md; clang `ClangOffloadBundler.rst`, llvm `AMDGPUUsage.rst`.
//! The entry point is [`scan_path`]; [`model`] holds the result types every other module consumes.

pub mod cli;
pub mod model;

pub use model::*;

use std::path::Path;

/// Options for a scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Only report these gfx targets (empty: all). Generic entries that can run on a listed target
    /// (e.g. `gfx11-generic` for `gfx1100`) are kept too.
    pub targets: Vec<String>,
}

/// Scan a file or folder: a host ELF (.so, executable, .o), a bare code object, a raw bundle, a
/// .deb, a .whl/zip, a tar archive, or a directory (walked).
///
/// Errors: the path cannot be opened. Unreadable device code inside a readable file is *not* an
/// error: it is reported as `unknown` with the offset and reason in the returned report.
pub fn scan_path(path: &Path, opts: &ScanOptions) -> anyhow::Result<ScanReport> {
    let _ = (path, opts);
    anyhow::bail!("scan: not implemented yet")
}
