//! `rcclfix build`: recipe → pinned source → NDEBUG injection → configure and build in a toolchain → scan gate → output folder with provenance.

use std::process::ExitCode;

/// Arguments of `rcclfix build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {}

impl BuildArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("build: not implemented yet")
    }
}
