//! Test and benchmark inputs: real Debian packages the scanner tests ([`PACKAGES`]) and
//! `cargo xtask bench-scan` ([`BENCH_PACKAGES`]) read, downloaded into `$RCCLFIX_TEST_INPUTS`
//! (default `target/test-inputs`) with a scratch `APT_CONFIG`, so the host's apt state is never
//! touched. `cargo xtask inputs [--bench]` fetches them alone.
//!
//! The mirror is read from the host's own apt sources (`/etc/apt/sources.list.d/debian.sources`,
//! deb822 `URIs:`, or the first `deb` line of `/etc/apt/sources.list`); no host name is written
//! here (sources.list(5)). Idempotent: present files are kept.

use std::path::{Path, PathBuf};

use anyhow::Context;
use xshell::{cmd, Shell};

/// Packages the tests read: (package=version, the file apt writes). Debian's own RCCL builds:
/// 5.4.3 (RCCL 2.13.4, trixie and sid) and experimental's 7.2.4 (RCCL 2.27.7, built with ROCm
/// 7.2.4), the stock libraries the package export gate compares with.
pub const PACKAGES: &[(&str, &str)] = &[
    ("librccl1=5.4.3-3+b1", "librccl1_5.4.3-3+b1_amd64.deb"),
    ("librccl1=7.2.4-1~exp3", "librccl1_7.2.4-1~exp3_amd64.deb"),
];

/// Packages only `bench-scan` reads: Debian trixie's librocsparse0 5.7.1 (346 MB `.deb`, a 1.2 GB
/// library with plain offload bundles for ten targets).
pub const BENCH_PACKAGES: &[(&str, &str)] =
    &[("librocsparse0=5.7.1-6", "librocsparse0_5.7.1-6_amd64.deb")];

/// `cargo xtask inputs [--bench]`: download the test inputs (and with `--bench` the benchmark's).
pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    match rest {
        [] => fetch(sh, PACKAGES),
        [b] if b == "--bench" => {
            fetch(sh, PACKAGES)?;
            fetch(sh, BENCH_PACKAGES)
        }
        _ => anyhow::bail!("usage: cargo xtask inputs [--bench]"),
    }
}

/// `$RCCLFIX_TEST_INPUTS`, default `<root>/target/test-inputs`.
pub fn dir() -> PathBuf {
    std::env::var_os("RCCLFIX_TEST_INPUTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::project_root().join("target/test-inputs"))
}

fn mirror() -> anyhow::Result<String> {
    if let Ok(t) = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources") {
        if let Some(u) = t.lines().find_map(|l| l.strip_prefix("URIs:")) {
            if let Some(u) = u.split_whitespace().next() {
                return Ok(u.to_owned());
            }
        }
    }
    if let Ok(t) = std::fs::read_to_string("/etc/apt/sources.list") {
        for l in t.lines().map(str::trim) {
            if let Some(rest) = l.strip_prefix("deb ") {
                if let Some(u) = rest.split_whitespace().find(|w| w.contains("://")) {
                    return Ok(u.to_owned());
                }
            }
        }
    }
    anyhow::bail!("cannot find a Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list")
}

/// Download every entry of `packages` (e.g. [`PACKAGES`]) that is not in [`dir`] yet.
pub fn fetch(sh: &Shell, packages: &[(&str, &str)]) -> anyhow::Result<()> {
    let out = dir();
    std::fs::create_dir_all(&out).with_context(|| out.display().to_string())?;
    let missing: Vec<_> = packages
        .iter()
        .filter(|(_, f)| !out.join(f).exists())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let x = out.join(".apt");
    for d in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(x.join(d))?;
    }
    std::fs::write(x.join("status"), "")?;
    let m = mirror()?;
    let key = "/usr/share/keyrings/debian-archive-keyring.gpg";
    let mut sources = String::new();
    for suite in ["sid", "trixie", "experimental"] {
        sources.push_str(&format!("deb [signed-by={key}] {m} {suite} main\n"));
    }
    std::fs::write(x.join("sources.list"), sources)?;
    let xs = x.display();
    std::fs::write(
        x.join("apt.conf"),
        format!(
            "Dir::State::Lists \"{xs}/lists\"; Dir::State::status \"{xs}/status\";\nDir::Etc::SourceList \"{xs}/sources.list\"; Dir::Etc::SourceParts \"/nonexistent\";\nDir::Cache \"{xs}/cache\"; APT::Architecture \"amd64\";\nAcquire::Check-Valid-Until \"false\";\n"
        ),
    )?;
    let _cfg = sh.push_env("APT_CONFIG", x.join("apt.conf"));
    cmd!(sh, "apt-get update -q")
        .run()
        .context("apt-get update with the scratch APT_CONFIG")?;
    let _d = sh.push_dir(&out);
    for (pkg, file) in missing {
        cmd!(sh, "apt-get download -q {pkg}")
            .run()
            .with_context(|| format!("apt-get download {pkg}"))?;
        if !Path::new(&out).join(file).exists() {
            anyhow::bail!(
                "apt-get download {pkg} did not write {file} into {}",
                out.display()
            );
        }
    }
    Ok(())
}
