//! `rcclfix patch`: remove a provably unused hidden_hostcall_buffer declaration after the link.

use std::process::ExitCode;

/// Arguments of `rcclfix patch`.
#[derive(Debug, clap::Args)]
pub struct PatchArgs {}

impl PatchArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("patch: not implemented yet")
    }
}
