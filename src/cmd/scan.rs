//! `rcclfix scan`: per gfx target and kernel, is `hidden_hostcall_buffer` declared, and why.

use std::process::ExitCode;

use crate::ui::Ui;

/// The subcommand's arguments (clap).
pub type Args = crate::scan::cli::ScanArgs;

/// Run the subcommand and return its exit code.
///
/// Errors: whatever the domain returns; a failed check is a [`crate::CheckFailed`] (exit 1).
pub fn run(a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    a.run_with_verbosity(ui.verbose)
}
