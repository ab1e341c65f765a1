//! `rcclfix matrix`: the recipes per ROCm release as a table or a GitHub Actions matrix.

use std::process::ExitCode;

/// Arguments of `rcclfix matrix`.
#[derive(Debug, clap::Args)]
pub struct MatrixArgs {}

impl MatrixArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("matrix: not implemented yet")
    }
}
