//! `rcclfix toolchain`: build, list and run toolchain images.

use std::process::ExitCode;

use crate::ui::Ui;

/// The subcommand's arguments (clap).
pub type Args = crate::container::ToolchainArgs;

/// Run the subcommand and return its exit code.
///
/// Errors: whatever the domain returns; a failed check is a [`crate::CheckFailed`] (exit 1).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    a.run()
}
