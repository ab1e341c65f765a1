//! `rcclfix doctor`: am I affected, and is the fix a VM setting, a rebuild, or neither?

use std::process::ExitCode;

/// Arguments of `rcclfix doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}

impl DoctorArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("doctor: not implemented yet")
    }
}
