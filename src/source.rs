//! Pinned RCCL sources: clone at a tag from the recipe URL or a local mirror, check the commit
//! against the pin, keep a source cache, apply patches.

use std::process::ExitCode;

/// Arguments of `rcclfix recipe pin`.
#[derive(Debug, clap::Args)]
pub struct PinArgs {}

impl PinArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("recipe pin: not implemented yet")
    }
}
