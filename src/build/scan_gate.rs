//! The scan gate: the built library is scanned with rcclfix's own scanner, and the build passes only
//! when every requested gfx target is `clean` (every image read, no kernel declares
//! `hidden_hostcall_buffer`). `declares` and `unknown` both fail the gate.

use std::collections::BTreeMap;
use std::path::Path;

use crate::scan::{ScanOptions, ScanReport, TargetState};

/// The gate's verdict.
#[derive(Debug, Clone)]
pub struct GateResult {
    /// The full scan report (written as `scan.json`).
    pub report: ScanReport,
    /// Verdict per requested target.
    pub states: BTreeMap<String, TargetState>,
}

impl GateResult {
    /// Whether every requested target is clean.
    pub fn passed(&self) -> bool {
        self.states
            .values()
            .all(|s| matches!(s, TargetState::Clean { .. }))
    }

    /// `target → clean|declares|unknown|no-code` for `manifest.gate`.
    pub fn summary(&self) -> BTreeMap<String, String> {
        self.states
            .iter()
            .map(|(t, s)| {
                let v = match s {
                    TargetState::Clean { .. } => "clean",
                    TargetState::Declares { .. } => "declares",
                    TargetState::Unknown { .. } => "unknown",
                    TargetState::NoCode { .. } => "no-code",
                };
                (t.clone(), v.to_owned())
            })
            .collect()
    }

    /// One line per failing target, naming the declaring kernels or the reason.
    pub fn failures(&self) -> Vec<String> {
        self.states
            .iter()
            .filter_map(|(t, s)| match s {
                TargetState::Clean { .. } => None,
                TargetState::Declares { kernels } => Some(format!(
                    "{t}: {} kernel(s) declare hidden_hostcall_buffer: {}",
                    kernels.len(),
                    kernels.join(", ")
                )),
                TargetState::Unknown { reason } => Some(format!("{t}: unknown: {reason}")),
                TargetState::NoCode { reason } => Some(format!("{t}: no code: {reason}")),
            })
            .collect()
    }
}

/// Scan `lib` for `targets`. The report names the library `display` (its file name in the output
/// folder) instead of the work-folder path it was scanned at.
///
/// Errors: the library cannot be opened (unreadable device code is an `unknown` verdict, not an error).
pub fn run(lib: &Path, display: &str, targets: &[String]) -> anyhow::Result<GateResult> {
    // The gate checks the CCOB hashes too: it is our own output, whose bytes should be exactly
    // what the compiler wrote (the runtime does not check them; docs/scan-json.md).
    let mut report = crate::scan::scan_path_with(
        lib,
        &ScanOptions {
            targets: targets.to_vec(),
        },
        &crate::scan::Settings {
            verify_hash: true,
            ..Default::default()
        },
    )?;
    let scanned = lib.display().to_string();
    for f in &mut report.files {
        if let Some(rest) = f.path.strip_prefix(&scanned) {
            f.path = format!("{display}{rest}");
        }
    }
    let states = report.target_states(targets);
    Ok(GateResult { report, states })
}
