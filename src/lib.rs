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

/// Command-line types (clap derive) and dispatch to the subcommands.
pub mod cli;
/// Atomic file and directory output (temp + rename).
pub mod fsutil;
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
