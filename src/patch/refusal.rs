//! Why a code object cannot be patched ([`Refusal`], of a [`RefusalKind`]): what the whole-image
//! proof ([`super::codeobj`]) and the `--asserts` proof ([`super::asserts`]) both refuse with.

use serde::Serialize;

/// What a refusal is about; callers map it to an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalKind {
    /// Hostcall code is present in the image: the declaration is real.
    UsesHostcall,
    /// Something the proof needs is missing or outside what it can reason about.
    Unproven,
}

/// Why one code object cannot be patched.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    /// What kind of refusal.
    pub kind: RefusalKind,
    /// The declaring kernels concerned (empty when the image could not be read that far).
    pub kernels: Vec<String>,
    /// One line: what was found, e.g. `symbol table stripped (no .symtab)`.
    pub reason: String,
}

impl Refusal {
    pub(super) fn unproven(kernels: &[String], reason: impl Into<String>) -> Refusal {
        Refusal {
            kind: RefusalKind::Unproven,
            kernels: kernels.to_vec(),
            reason: reason.into(),
        }
    }
    pub(super) fn uses(kernels: &[String], reason: impl Into<String>) -> Refusal {
        Refusal {
            kind: RefusalKind::UsesHostcall,
            kernels: kernels.to_vec(),
            reason: reason.into(),
        }
    }
}
