//! `rcclfix self-wheel --out-dir DIR` (hidden): write the wheel that carries this executable
//! ([`crate::package::tool_wheel`]), so `pip install` can put `rcclfix` on a virtual
//! environment's PATH, with its man pages and shell completions under the environment's
//! `share/`. `cargo xtask wheel` runs it from the release binary; the pip test
//! (`tests/it/pip_install.rs`) from the test build.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::package::tool_wheel::{write_into, DataFile, ToolWheel};
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
/// Errors: see [`ToolWheel::plan`], [`docs_of`] and [`write_into`] (`main` prints them and
/// exits 2).
pub fn run(a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    let binary = match a.binary {
        Some(b) => b,
        None => std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find this executable: {e}"))?,
    };
    let w = ToolWheel::plan(&binary)?;
    let w = w.with_data(docs_of(&binary)?)?;
    let path = write_into(&a.out_dir, &w)?;
    let size = fs_err::metadata(&path)?.len();
    ui.status(
        "Wrote",
        format!(
            "{} ({} for {}: {:.1} MB from a {:.1} MB executable and {} man pages and completions)",
            path.display(),
            w.tag(),
            crate::ui::escape_path(&binary),
            size as f64 / 1e6,
            w.binary_bytes as f64 / 1e6,
            w.data.len()
        ),
    );
    crate::outln!("{}", path.display())?;
    Ok(ExitCode::SUCCESS)
}

/// The man pages and completions of the carried executable, from its own `self-docs` (so they
/// describe the executable the wheel carries, also under `--binary`), at the paths under the
/// prefix where the wheel installs them ([`super::self_docs::prefix_path`]).
///
/// Errors (one line, naming the executable): it fails to run `self-docs` or takes longer than
/// [`crate::process::PROBE_DEADLINE`], writes a file with no place under the prefix, or writes
/// no `rcclfix.1`.
pub fn docs_of(binary: &Path) -> anyhow::Result<Vec<DataFile>> {
    let tmp = crate::fsutil::TempDir::new("rcclfix-self-docs-")?;
    crate::process::Cmd::new("write the man pages and completions", binary)
        .args(["-q", "--color", "never", "self-docs", "--out-dir"])
        .arg(tmp.path())
        .read_with_deadline(crate::process::PROBE_DEADLINE)?;
    let mut data = vec![];
    for e in walkdir::WalkDir::new(tmp.path()).sort_by_file_name() {
        let e = e?;
        if e.file_type().is_dir() {
            continue;
        }
        let rel = e.path().strip_prefix(tmp.path())?.to_string_lossy();
        let path = match super::self_docs::prefix_path(&rel) {
            Some(p) if e.file_type().is_file() => p,
            _ => anyhow::bail!(
                "{}: self-docs wrote {}, which has no place in the wheel",
                crate::ui::escape_path(binary),
                crate::ui::escape(&rel)
            ),
        };
        data.push(DataFile {
            path,
            bytes: fs_err::read(e.path())?,
        });
    }
    let top = format!("share/man/man1/{}.1", super::self_docs::BIN);
    if !data.iter().any(|d| d.path == top) {
        anyhow::bail!(
            "{}: self-docs wrote no {top}",
            crate::ui::escape_path(binary)
        );
    }
    Ok(data)
}
