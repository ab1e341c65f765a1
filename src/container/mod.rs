//! Container engines (podman, docker, bubblewrap, host) and toolchain images. Only this module spawns an engine.

use std::process::ExitCode;

/// Arguments of `rcclfix toolchain`.
#[derive(Debug, clap::Args)]
pub struct ToolchainArgs {}

impl ToolchainArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("toolchain: not implemented yet")
    }
}
