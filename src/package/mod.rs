//! `rcclfix package`: drop-in .deb and .whl overlays with export checks and provenance.

use std::process::ExitCode;

/// Arguments of `rcclfix package`.
#[derive(Debug, clap::Args)]
pub struct PackageArgs {}

impl PackageArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("package: not implemented yet")
    }
}
