//! `rcclfix verify`: two-GPU all_reduce/all_gather correctness run against constructed truth.

use std::process::ExitCode;

/// Arguments of `rcclfix verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {}

impl VerifyArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("verify: not implemented yet")
    }
}

/// Arguments of the hidden child process that loads the library.
#[derive(Debug, clap::Args)]
pub struct ChildArgs {}

impl ChildArgs {
    /// Run the child.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("verify-child: not implemented yet")
    }
}

/// Called by `build --verify` after the scan gate passed: run the full verify suite on `lib`.
/// Returns `Ok(None)` when fewer than two GPUs are present (nothing was run), otherwise the JSON
/// report (recorded in `manifest.json`) and whether every case passed.
pub fn verify_for_build(lib: &std::path::Path) -> anyhow::Result<Option<(serde_json::Value, bool)>> {
    let _ = lib;
    anyhow::bail!("verify: not implemented yet")
}
