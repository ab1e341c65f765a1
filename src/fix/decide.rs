//! Decide per copy: scan it ([`crate::scan::scan_path`]), then, when a requested target
//! declares `hidden_hostcall_buffer`, run the existing patch ([`crate::patch::patch_file`]) into
//! a scratch folder: first plain `patch`, then `patch --asserts`. The copy itself is only read.
//!
//! The verdict is the patch code's, never this module's: a copy is "`patch` proves it" only when
//! `patch_file` wrote a patched file, and every refusal is passed on with the patch's own words.

use std::path::Path;

use serde::Serialize;

use crate::patch::{PatchOptions, PatchRefused, RefusalKind};
use crate::scan::{ScanOptions, TargetState};

/// The decision for one copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Every requested target's kernels were read and none declares `hidden_hostcall_buffer`.
    NotAffected {
        /// The targets judged.
        targets: Vec<String>,
    },
    /// Plain `rcclfix patch` proves that nothing can use hostcall and rewrites the declarations.
    Patch {
        /// The targets judged.
        targets: Vec<String>,
        /// Kernel arguments rewritten to `hidden_none`.
        kernels: usize,
        /// Code objects rewritten.
        images: usize,
    },
    /// Plain `patch` refuses; `patch --asserts` (the device-assert handler filled with
    /// `s_trap 2; s_endpgm`) proves it.
    PatchAsserts {
        /// The targets judged.
        targets: Vec<String>,
        /// Kernel arguments rewritten to `hidden_none`.
        kernels: usize,
        /// Code objects rewritten.
        images: usize,
        /// Functions filled with trap words.
        functions_filled: usize,
        /// Why plain `patch` refused.
        plain_refusal: String,
    },
    /// Neither patch proves it, or the copy cannot be read: it is left alone.
    Refused {
        /// The targets judged.
        targets: Vec<String>,
        /// Why, in the scanner's or the patch's words.
        why: String,
        /// Whether hostcall code is really present (the patch's `uses hostcall` refusal, a
        /// check failed: exit 1), rather than something unread or unproven (exit 2).
        uses_hostcall: bool,
    },
}

impl Decision {
    /// The short form for the plan's table: `not affected`, `patch proves it`, ….
    pub fn short(&self) -> &'static str {
        match self {
            Decision::NotAffected { .. } => "not affected",
            Decision::Patch { .. } => "`patch` proves it",
            Decision::PatchAsserts { .. } => "`patch --asserts` proves it",
            Decision::Refused { .. } => "refused",
        }
    }

    /// The patch options that prove it (`None` for not affected and refused).
    pub fn patch_options(&self, targets: &[String]) -> Option<PatchOptions> {
        let asserts = match self {
            Decision::Patch { .. } => false,
            Decision::PatchAsserts { .. } => true,
            _ => return None,
        };
        Some(PatchOptions {
            targets: targets.to_vec(),
            asserts,
        })
    }
}

/// Scan `path` for `targets` (empty: every target the copy carries) and decide.
///
/// Errors: none; every failure is a [`Decision::Refused`] that says why.
pub fn decide(path: &Path, targets: &[String]) -> Decision {
    let report = match crate::scan::scan_path(path, &ScanOptions::default()) {
        Ok(r) => r,
        Err(e) => {
            return Decision::Refused {
                targets: targets.to_vec(),
                why: format!("the scan failed: {e:#}"),
                uses_hostcall: false,
            }
        }
    };
    let judged: Vec<String> = if targets.is_empty() {
        report.processors()
    } else {
        targets.to_vec()
    };
    if judged.is_empty() {
        return Decision::Refused {
            targets: judged,
            why: "no device code found".into(),
            uses_hostcall: false,
        };
    }
    let states = report.target_states(&judged);
    let mut declares = false;
    for (t, s) in &states {
        match s {
            TargetState::Clean { .. } => {}
            TargetState::Declares { .. } => declares = true,
            TargetState::Unknown { reason } | TargetState::NoCode { reason } => {
                return Decision::Refused {
                    targets: judged.clone(),
                    why: format!("{t}: {reason}"),
                    uses_hostcall: false,
                }
            }
        }
    }
    if !declares {
        return Decision::NotAffected { targets: judged };
    }
    try_patches(path, targets, judged)
}

/// Run plain `patch`, then `patch --asserts`, into a scratch folder.
fn try_patches(path: &Path, targets: &[String], judged: Vec<String>) -> Decision {
    let scratch = match crate::fsutil::TempDir::new("rcclfix-fix-") {
        Ok(d) => d,
        Err(e) => {
            return Decision::Refused {
                targets: judged,
                why: format!("no scratch folder for the patch: {e:#}"),
                uses_hostcall: false,
            }
        }
    };
    let out = scratch.path().join("patched");
    let run = |asserts: bool| {
        let r = crate::patch::patch_file(
            path,
            &out,
            &PatchOptions {
                targets: targets.to_vec(),
                asserts,
            },
        );
        let _ = std::fs::remove_file(&out);
        r
    };
    let plain = match run(false) {
        Ok(rec) if rec.written => {
            return Decision::Patch {
                targets: judged,
                kernels: rec.images.iter().map(|i| i.kernels.len()).sum(),
                images: rec.images.len(),
            }
        }
        Ok(_) => {
            return Decision::Refused {
                targets: judged,
                why: "the scan says a kernel declares hidden_hostcall_buffer, but patch found nothing to rewrite".into(),
                uses_hostcall: false,
            }
        }
        Err(e) => e,
    };
    let plain_refusal = format!("{plain:#}");
    match run(true) {
        Ok(rec) if rec.written => Decision::PatchAsserts {
            targets: judged,
            kernels: rec.images.iter().map(|i| i.kernels.len()).sum(),
            images: rec.images.len(),
            functions_filled: rec.images.iter().map(|i| i.instructions.len()).sum(),
            plain_refusal,
        },
        Ok(_) => Decision::Refused {
            targets: judged,
            why: plain_refusal,
            uses_hostcall: false,
        },
        Err(e) => {
            let uses_hostcall = e
                .downcast_ref::<PatchRefused>()
                .is_some_and(|r| r.refusal.kind == RefusalKind::UsesHostcall);
            Decision::Refused {
                targets: judged,
                why: format!("patch: {plain_refusal}; patch --asserts: {e:#}"),
                uses_hostcall,
            }
        }
    }
}
