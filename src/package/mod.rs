//! `rcclfix package`: drop-in .deb and .whl overlays with export checks and provenance.

use std::process::ExitCode;

/// Arguments of `rcclfix package`.
#[derive(Debug, clap::Args)]
pub struct PackageArgs {}

impl PackageArgs {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        anyhow::bail!("package: not implemented yet")
    }
}

/// Called by `build --package deb,whl` (and `package --from`): run the export gate, then write the
/// requested overlays for the build folder `build_dir` (holding the library, `manifest.json`,
/// `scan.json`) into `out_dir`. Returns the paths written. Nothing is written when a gate fails.
pub fn package_build_dir(
    build_dir: &std::path::Path,
    formats: &[String],
    out_dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let _ = (build_dir, formats, out_dir);
    anyhow::bail!("package: not implemented yet")
}
