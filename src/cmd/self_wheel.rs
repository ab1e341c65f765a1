//! `rcclfix self-wheel --out-dir DIR` (hidden): write the wheel that carries this executable
//! ([`crate::package::tool_wheel`]), so `pip install` can put `rcclfix` on a virtual
//! environment's PATH. `cargo xtask wheel` runs it from the release binary; the pip test
//! (`tests/it/pip_install.rs`) from the test build.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::package::tool_wheel::{write_into, ToolWheel};
use crate::ui::Ui;

/// The subcommand's arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder for the wheel (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// The executable to carry [default: this one, `/proc/self/exe`].
    #[arg(long, value_name = "FILE")]
    pub binary: Option<PathBuf>,
}

/// Write the wheel; print its path on stdout and its tag and sizes on stderr.
///
/// Errors: see [`ToolWheel::plan`] and [`write_into`] (`main` prints them and exits 2).
pub fn run(a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    let binary = match a.binary {
        Some(b) => b,
        None => std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find this executable: {e}"))?,
    };
    let w = ToolWheel::plan(&binary)?;
    let path = write_into(&a.out_dir, &w)?;
    let size = fs_err::metadata(&path)?.len();
    ui.status(
        "Wrote",
        format!(
            "{} ({} for {}: {:.1} MB from a {:.1} MB executable)",
            path.display(),
            w.tag(),
            crate::ui::escape_path(&binary),
            size as f64 / 1e6,
            w.binary_bytes as f64 / 1e6
        ),
    );
    crate::outln!("{}", path.display())?;
    Ok(ExitCode::SUCCESS)
}
