//! The command layer: one file per subcommand (cargo's `commands/*` → `ops::*` shape). Each holds
//! the clap `Args`, turns them into the domain's options, calls the domain and renders the result
//! through the one [`Ui`]. Domain modules take options and return values; they do not print.

use std::process::ExitCode;

use clap::CommandFactory as _;

use crate::ui::Ui;
use cli::{Cli, Command};

pub mod build;
pub mod cli;
pub mod decode;
pub mod doctor;
pub mod fix;
pub mod matrix;
pub mod package;
pub mod patch;
pub mod prove;
pub mod recipe;
pub mod scan;
pub mod self_docs;
pub mod self_wheel;
pub mod toolchain;
pub mod verify;

/// Run the parsed command line and return the process exit code.
///
/// Errors: whatever the subcommand returns; `main` prints the chain and exits 2, or 1 for a
/// [`crate::CheckFailed`] anywhere in the chain.
pub fn run(cli: Cli, ui: &Ui) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Build(a) => build::run(a, ui),
        Command::Prove(a) => prove::run(a, ui),
        Command::Scan(a) => scan::run(a, ui),
        Command::Verify(a) => verify::run(a, ui),
        Command::Package(a) => package::run(a, ui),
        Command::Doctor(a) => doctor::run(a, ui),
        Command::Matrix(a) => matrix::run(a, ui),
        Command::Recipe(a) => recipe::run(a, ui),
        Command::Toolchain(a) => toolchain::run(a, ui),
        Command::Patch(a) => patch::run(a, ui),
        Command::Fix(a) => fix::run(a, ui),
        Command::VerifyChild(a) => verify::run_child(a, ui),
        Command::Decode(a) => decode::run(a, ui),
        Command::SelfWheel(a) => self_wheel::run(a, ui),
        // The clap definitions come in as a value: cli lists self_docs's Args, so self_docs
        // cannot import cli without a circle.
        Command::SelfDocs(a) => self_docs::run(a, Cli::command(), ui),
    }
}
