//! The `rcclfix` binary: parse the command line, set up logging, run, map the result to an exit code.
//!
//! Exit codes are a contract (see `rcclfix --help`): 0 ok, 1 a check failed, 2 usage or internal error,
//! 3 something could not be read (scan: unknown device code). A closed stdout or stderr does not
//! change them: results go through `ui::Stdout` (a closed pipe drops the rest) and messages
//! through `ui::write_stderr` (errors ignored), so neither panics nor turns a verdict into 0.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = rcclfix::cmd::cli::parse();
    rcclfix::ui::init(cli.quiet, cli.verbose, cli.color);
    // An interrupt removes every in-flight temporary file and folder, then exits 128 + signal.
    if let Err(err) = rcclfix::fsutil::install_interrupt_handler() {
        rcclfix::ui::print_error(&err);
        return ExitCode::from(rcclfix::EXIT_ERROR);
    }
    let ui = rcclfix::ui::get();
    match rcclfix::cmd::run(cli, &ui) {
        Ok(code) => code,
        Err(err) => {
            rcclfix::ui::print_error(&err);
            if rcclfix::CheckFailed::in_chain(&err) {
                ExitCode::from(rcclfix::EXIT_CHECK_FAILED)
            } else {
                ExitCode::from(rcclfix::EXIT_ERROR)
            }
        }
    }
}
