//! `cargo xtask patch-sweep [--programs N] [--per-batch N] [--seed S] [--targets gfx1100,gfx90a,…]
//! [--opt O0,O3] [--bin PATH] [--keep DIR] [--work DIR]`: the independent check of issue 39. Generates HIP
//! programs from a seed ([`gen`]), compiles each batch with the real clang of a toolchain rootfs
//! (`debian-sid`: clang 21 for gfx90a, gfx942, gfx1100, gfx1201; `debian-rocm7.2`: clang 22 for
//! gfx1250) into a raw linked code object, runs `rcclfix patch --json` and `rcclfix patch
//! --asserts --json` on it, and checks every rewritten kernel against the generator's truth and
//! against a reachability computed from `llvm-objdump -d` / `llvm-readelf` of the same code
//! object ([`oracle`]; for `--asserts`, of rcclfix's output, so the trapped handler is seen).
//!
//! A false proof is a kernel whose `hidden_hostcall_buffer` rcclfix rewrote while the truth or
//! the oracle has a path to hostcall. A refusal where neither has one is only counted. The table
//! is per target and optimisation level; every false proof is listed with the batch source, the
//! kernel and both paths. Exit: 0 none, an error (exit 1) when any false proof was found.
//! Work goes to `target/patch-sweep/` (or `--work DIR`, emptied first); `--keep DIR` copies the failing batches' sources and code
//! objects there. `docs/patch-sweep.md` says how to run the full sweep. This file is the command
//! line and the toolchain runner; [`sweep`] is the driver the slow test shares.

#[path = "patch_sweep/decode_check.rs"]
pub mod decode_check;
#[path = "patch_sweep/gen.rs"]
pub mod gen;
#[path = "patch_sweep/oracle.rs"]
pub mod oracle;
#[path = "patch_sweep/sweep.rs"]
pub mod sweep;

use std::path::PathBuf;

use anyhow::{bail, Context};
use xshell::Shell;

use crate::fixtures_patch::in_rootfs;

/// The flags, before the defaults are filled in.
struct Opts {
    programs: usize,
    per_batch: usize,
    seed: u64,
    targets: Vec<String>,
    opts: Vec<String>,
    bin: Option<PathBuf>,
    keep: Option<PathBuf>,
    work: Option<PathBuf>,
}

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let mut o = Opts {
        programs: 300,
        per_batch: 10,
        seed: 39,
        targets: vec!["gfx1100".into(), "gfx90a".into(), "gfx1201".into()],
        opts: vec!["O0".into(), "O3".into()],
        bin: None,
        keep: None,
        work: None,
    };
    let mut it = rest.iter();
    let usage = "usage: cargo xtask patch-sweep [--programs N] [--per-batch N] [--seed S] [--targets gfx1100,…] [--opt O0,O3] [--bin PATH] [--keep DIR] [--work DIR]";
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .with_context(|| format!("{a} needs a value; {usage}"))
        };
        match a.as_str() {
            "--programs" => o.programs = val()?.parse().context("--programs")?,
            "--per-batch" => o.per_batch = val()?.parse().context("--per-batch")?,
            "--seed" => o.seed = val()?.parse().context("--seed")?,
            "--targets" => o.targets = val()?.split(',').map(String::from).collect(),
            "--opt" => o.opts = val()?.split(',').map(String::from).collect(),
            "--bin" => o.bin = Some(val()?.into()),
            "--keep" => o.keep = Some(val()?.into()),
            "--work" => o.work = Some(val()?.into()),
            _ => bail!("unknown argument {a:?}; {usage}"),
        }
    }
    if o.per_batch == 0 || o.programs == 0 {
        bail!("--programs and --per-batch must be positive");
    }
    let root = crate::project_root();
    let bin = match &o.bin {
        Some(b) => b.clone(),
        None => {
            xshell::cmd!(sh, "cargo build --quiet --bin rcclfix").run()?;
            root.join("target/debug/rcclfix")
        }
    };
    let work = o
        .work
        .clone()
        .unwrap_or_else(|| root.join("target/patch-sweep"));
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("remove {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let settings = sweep::Settings {
        programs: o.programs,
        per_batch: o.per_batch,
        seed: o.seed,
        targets: o.targets.clone(),
        opts: o.opts.clone(),
        bin,
        work: work.clone(),
    };
    for t in &o.targets {
        let rootfs = rootfs_for(t);
        if !rootfs.join("usr/bin").is_dir() {
            bail!(
                "toolchain rootfs {} not found (needed for {t})\nhelp: rcclfix toolchain build",
                rootfs.display()
            );
        }
    }
    let runner = |target: &str, dir: &std::path::Path, argv: &[&str]| {
        let rootfs = rootfs_for(target);
        in_rootfs(sh, &rootfs, dir, argv)
            .quiet()
            .ignore_status()
            .output()
            .with_context(|| format!("run {} in {}", argv[0], rootfs.display()))
    };
    let (report, findings) = sweep::sweep(&settings, &runner)?;
    println!("{report}");
    if findings.is_empty() {
        println!("false proofs: 0");
        return Ok(());
    }
    for f in &findings {
        println!("{}: {} kernel {}", f.what, f.file.display(), f.kernel);
        if let Some(p) = &f.oracle {
            println!("    oracle: {p}");
        }
        if let Some(p) = &f.truth {
            println!("    truth:  {p}");
        }
    }
    if let Some(keep) = &o.keep {
        std::fs::create_dir_all(keep).with_context(|| format!("create {}", keep.display()))?;
        for f in &findings {
            let dir = f.file.parent().unwrap_or(&work);
            for e in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
                let e = e?;
                let to = keep.join(e.file_name());
                std::fs::copy(e.path(), &to)
                    .with_context(|| format!("copy to {}", to.display()))?;
            }
        }
        println!("kept in {}", keep.display());
    }
    let n = findings
        .iter()
        .filter(|f| f.what.starts_with("false proof"))
        .count();
    if n > 0 {
        bail!("{n} false proof(s)");
    }
    Ok(())
}

/// The rootfs that compiles `target` (see [`sweep::llvm_version`]).
fn rootfs_for(target: &str) -> PathBuf {
    if sweep::llvm_version(target) == "22" {
        crate::paths::toolchain_rootfs("debian-rocm7.2")
    } else {
        crate::paths::toolchain_rootfs("debian-sid")
    }
}
