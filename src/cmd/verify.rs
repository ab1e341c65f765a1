//! `rcclfix verify` (and its hidden child): two-GPU collective correctness against constructed truth.

use std::process::ExitCode;

use crate::ui::Ui;

/// The subcommand's arguments (clap).
pub type Args = crate::verify::VerifyArgs;

/// Run the subcommand and return its exit code.
///
/// Errors: whatever the domain returns; a failed check is a [`crate::CheckFailed`] (exit 1).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    a.run()
}

/// The hidden `verify-child` subcommand's arguments.
pub type ChildArgs = crate::verify::ChildArgs;

/// Run the hidden `verify-child` subcommand (the process that loads the NCCL-API library).
pub fn run_child(a: ChildArgs, _ui: &Ui) -> anyhow::Result<ExitCode> {
    a.run()
}
