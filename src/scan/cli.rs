//! `rcclfix scan` arguments, table and JSON output.

use std::path::PathBuf;
use std::process::ExitCode;

/// `rcclfix scan PATH…`
#[derive(Debug, clap::Args)]
pub struct ScanArgs {
    /// Files or folders: .so, executable, .o, code object, bundle, .deb, .whl, tar, directory.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only these gfx targets (comma-separated), e.g. gfx1100.
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Print JSON (schema version in the output) instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl ScanArgs {
    /// Run the scan and print the result.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("scan: not implemented yet")
    }
}
