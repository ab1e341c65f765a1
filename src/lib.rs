//! rcclfix: rebuild RCCL so that its device kernels declare no `hidden_hostcall_buffer`, prove it,
//! verify it on two GPUs, and package it as drop-in overlays.
//!
//! The module tree below reads as a map of the tool; `ARCHITECTURE.md` describes each part.

/// Exit code: success (no requested kernel declares hostcall, every check passed).
pub const EXIT_OK: u8 = 0;
/// Exit code: a check failed (a kernel declares hostcall, verify found a wrong value, doctor says affected).
pub const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code: usage error, bad input, internal error, or an inconclusive result.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: some device code could not be read (scan reports `unknown`).
pub const EXIT_UNKNOWN: u8 = 3;

/// A check the user asked for failed (a gate, a lint, a comparison): `main` prints the error
/// chain like any other and exits [`EXIT_CHECK_FAILED`] (1) instead of [`EXIT_ERROR`] (2).
///
/// Use it as the leaf (`Err(CheckFailed::new("…").into())`) or as context over a detailed error
/// (`Err(anyhow::Error::new(lines).context(CheckFailed::new("scan gate failed")))`); `main`
/// looks for it anywhere in the chain ([`CheckFailed::in_chain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFailed {
    /// The one-line summary, e.g. `scan gate failed for librccl.so.1.0`.
    pub message: String,
}

impl CheckFailed {
    /// A failed check with this summary line.
    pub fn new(message: impl Into<String>) -> CheckFailed {
        CheckFailed {
            message: message.into(),
        }
    }

    /// Whether `err` or any error in its chain is a [`CheckFailed`], as the leaf, as a source, or
    /// as anyhow context (`.context(CheckFailed::new(…))`, which the chain holds in a private
    /// wrapper type that only anyhow's `downcast_ref` sees through).
    pub fn in_chain(err: &anyhow::Error) -> bool {
        err.downcast_ref::<CheckFailed>().is_some() || err.chain().any(|e| e.is::<CheckFailed>())
    }
}

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CheckFailed {}

/// The command layer: one file per subcommand, the only place that renders results.
pub mod cmd;
/// Escaping untrusted text for a terminal (re-exported by `ui`).
pub mod escape;
/// Atomic file and directory output (temp + rename).
pub mod fsutil;
/// Where rcclfix keeps its per-user data (`RCCLFIX_HOME`) and the folders under it.
pub mod paths;
/// Running host processes with logged argv and a kept stderr tail.
pub mod process;
/// Terminal output: logging set-up, status lines, progress bars, error printing.
pub mod ui;

/// `rcclfix build`: recipe → source → NDEBUG injection → configure/build → gates → output folder.
pub mod build;
/// Container engines (podman, docker, bubblewrap, host) and toolchain images.
pub mod container;
/// Build provenance (`manifest.json`).
pub mod manifest;
/// Recipes (`recipes/*.toml`) and the lockfile of pinned commits.
pub mod recipe;
/// Pinned RCCL sources: clone, mirror, cache, commit check, patches.
pub mod source;

/// `rcclfix doctor`: platform, VM, library and log diagnosis.
pub mod doctor;
/// `rcclfix fix`: find every librccl programs load, decide per copy, apply through the copy's owner (in place, pip, dpkg) and undo.
pub mod fix;
/// `rcclfix matrix`: the CI matrix of recipes.
pub mod matrix;
/// `rcclfix package`: .deb and .whl overlays with export checks.
pub mod package;
/// `rcclfix patch`: remove a provably unused hostcall declaration after the link.
pub mod patch;
/// `rcclfix scan`: host ELF → offload bundles → AMDGPU code objects → kernel metadata.
pub mod scan;
/// `rcclfix verify`: two-GPU collective correctness run.
pub mod verify;
