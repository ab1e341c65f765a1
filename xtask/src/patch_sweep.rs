//! `cargo xtask patch-sweep [--programs N] [--per-batch N] [--seed S] [--targets gfx1100,gfx90a,…]
//! [--opt O0,O3] [--bin PATH] [--keep DIR]`: the independent check of issue 39. Generates HIP
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
//! Work goes to `target/patch-sweep/`; `--keep DIR` copies the failing batches' sources and code
//! objects there. `docs/patch-sweep.md` says how to run the full sweep.

#[path = "patch_sweep/gen.rs"]
pub mod gen;
#[path = "patch_sweep/oracle.rs"]
pub mod oracle;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use xshell::Shell;

use crate::fixtures_patch::in_rootfs;

/// How many oracle/truth disagreements the report lists (all are counted).
const MAX_LISTED: usize = 20;

/// The sweep's settings (see the module doc for the flags).
struct Opts {
    programs: usize,
    per_batch: usize,
    seed: u64,
    targets: Vec<String>,
    opts: Vec<String>,
    bin: Option<PathBuf>,
    keep: Option<PathBuf>,
}

/// Counts for one target and optimisation level.
#[derive(Default)]
struct Row {
    batches: usize,
    programs: usize,
    kernels: usize,
    declaring: usize,
    patched: usize,
    refused: usize,
    patched_a: usize,
    refused_a: usize,
    false_proofs: usize,
    /// False proofs the generator's truth confirms.
    confirmed: usize,
    disagree: usize,
    user_rewrites: usize,
}

/// One false proof (or a rewrite of a user function), for the list after the table.
struct Finding {
    what: String,
    file: PathBuf,
    kernel: String,
    oracle: Option<String>,
    truth: Option<String>,
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
    };
    let mut it = rest.iter();
    let usage = "usage: cargo xtask patch-sweep [--programs N] [--per-batch N] [--seed S] [--targets gfx1100,…] [--opt O0,O3] [--bin PATH] [--keep DIR]";
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
    let work = root.join("target/patch-sweep");
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("remove {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
    let (report, findings) = sweep(sh, &o, &bin, &work)?;
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

/// The rootfs and LLVM version suffix that compile `target`.
fn toolchain(target: &str) -> (PathBuf, &'static str) {
    if target.starts_with("gfx125") {
        (crate::paths::toolchain_rootfs("debian-rocm7.2"), "22")
    } else {
        (crate::paths::toolchain_rootfs("debian-sid"), "21")
    }
}

/// Generate, compile, patch and compare every batch; the table and the findings.
fn sweep(sh: &Shell, o: &Opts, bin: &Path, work: &Path) -> anyhow::Result<(String, Vec<Finding>)> {
    let mut rows: BTreeMap<(String, String), Row> = BTreeMap::new();
    let mut findings = Vec::new();
    let mut disagreements: Vec<String> = Vec::new();
    let nbatches = o.programs.div_ceil(o.per_batch);
    for b in 0..nbatches {
        let progs = o.per_batch.min(o.programs - b * o.per_batch);
        let batch = gen::batch(o.seed, b, progs);
        let dir = work.join(format!("b{b:04}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let src = dir.join("batch.hip");
        std::fs::write(&src, &batch.source).with_context(|| format!("write {}", src.display()))?;
        for t in &o.targets {
            let (rootfs, v) = toolchain(t);
            if !rootfs.join("usr/bin").is_dir() {
                bail!(
                    "toolchain rootfs {} not found (needed for {t})\nhelp: rcclfix toolchain build",
                    rootfs.display()
                );
            }
            for opt in &o.opts {
                let row = rows.entry((t.clone(), opt.clone())).or_default();
                row.batches += 1;
                row.programs += batch.programs;
                row.kernels += batch.kernels.len();
                let co = format!("{t}-{opt}.co");
                let clang = format!("clang++-{v}");
                let arch = format!("--offload-arch={t}");
                let optf = format!("-{opt}");
                let argv = [
                    clang.as_str(),
                    "-x",
                    "hip",
                    "--offload-device-only",
                    "--no-gpu-bundle-output",
                    &arch,
                    &optf,
                    "-w",
                    "batch.hip",
                    "-o",
                    &co,
                ];
                let out = in_rootfs(sh, &rootfs, &dir, &argv)
                    .quiet()
                    .ignore_status()
                    .output()
                    .with_context(|| format!("run clang in {}", rootfs.display()))?;
                if !out.status.success() {
                    // A batch that does not compile is a generator bug: never a silent pass.
                    bail!(
                        "compile failed: {} {t} -{opt}: {}",
                        src.display(),
                        String::from_utf8_lossy(&out.stderr)
                            .lines()
                            .take(5)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    );
                }
                let x = llvm_view(sh, &rootfs, v, &dir, &co)?;
                let meta = oracle::meta_kernels(&x.0);
                let declaring: Vec<&oracle::MetaKernel> = meta
                    .iter()
                    .filter(|k| k.hostcall_offset.is_some())
                    .collect();
                row.declaring += declaring.len();
                let img = oracle::build(&x.0, &x.1, &meta, u64::from(gen::SLOT_V5));
                for k in &batch.kernels {
                    let op = img.path(&k.name);
                    if op.is_some() != k.plain.is_some() && meta.iter().any(|m| m.name == k.name) {
                        row.disagree += 1;
                        disagreements.push(format!(
                            "{} {t} -{opt} {}: oracle {} / truth {}",
                            src.display(),
                            k.name,
                            op.as_deref().unwrap_or("no path"),
                            k.plain.as_deref().unwrap_or("no path")
                        ));
                    }
                }
                for asserts in [false, true] {
                    let out_name = format!(
                        "{t}-{opt}{}.patched.co",
                        if asserts { "-asserts" } else { "" }
                    );
                    let r = rcclfix_patch(bin, &dir.join(&co), &dir.join(&out_name), asserts)?;
                    let Some(rec) = r else {
                        if asserts {
                            row.refused_a += 1
                        } else {
                            row.refused += 1
                        }
                        continue;
                    };
                    if rec.rewritten.is_empty() {
                        continue;
                    }
                    if asserts {
                        row.patched_a += 1
                    } else {
                        row.patched += 1
                    }
                    for s in &rec.rewrote_symbols {
                        if batch.user_handlers.contains(s) {
                            row.user_rewrites += 1;
                            findings.push(Finding {
                                what: format!("rewrote the user function {s} (returns) to trap"),
                                file: src.clone(),
                                kernel: format!("({t} -{opt})"),
                                oracle: None,
                                truth: None,
                            });
                        }
                    }
                    let patched_img;
                    let img = if asserts {
                        let z = llvm_view(sh, &rootfs, v, &dir, &out_name)?;
                        patched_img = oracle::build(&z.0, &z.1, &meta, u64::from(gen::SLOT_V5));
                        &patched_img
                    } else {
                        &img
                    };
                    for name in &rec.rewritten {
                        let truth = batch
                            .kernels
                            .iter()
                            .find(|k| &k.name == name)
                            .and_then(|k| {
                                if asserts {
                                    k.asserts.clone()
                                } else {
                                    k.plain.clone()
                                }
                            });
                        let op = img.path(name);
                        if op.is_some() || truth.is_some() {
                            row.false_proofs += 1;
                            if truth.is_some() {
                                row.confirmed += 1;
                            }
                            findings.push(Finding {
                                what: match (&op, &truth) {
                                    (Some(_), Some(_)) => "false proof (truth and oracle)",
                                    (None, Some(_)) => "false proof (truth)",
                                    _ => "false proof (oracle only)",
                                }
                                .into(),
                                file: src.clone(),
                                kernel: format!(
                                    "{name} (program {}, {t} -{opt}, patch{})",
                                    batch
                                        .kernels
                                        .iter()
                                        .find(|k| &k.name == name)
                                        .map_or(0, |k| k.program),
                                    if asserts { " --asserts" } else { "" }
                                ),
                                oracle: op,
                                truth,
                            });
                        }
                    }
                }
            }
        }
        eprintln!("batch {}/{nbatches} ({:?}) done", b + 1, batch.theme);
    }
    let mut report = table(&rows);
    if !disagreements.is_empty() {
        report.push_str(&format!(
            "\noracle/truth disagreements (allowed, the first {} of {}):\n",
            disagreements.len().min(MAX_LISTED),
            disagreements.len()
        ));
        for d in disagreements.iter().take(MAX_LISTED) {
            report.push_str(&format!("  {d}\n"));
        }
    }
    Ok((report, findings))
}

/// `llvm-readelf -h -s -r --notes` and `llvm-objdump -d` of `co` (in `dir`), run in the rootfs;
/// refuses anything but a linked code object (`ET_DYN`).
fn llvm_view(
    sh: &Shell,
    rootfs: &Path,
    v: &str,
    dir: &Path,
    co: &str,
) -> anyhow::Result<(String, String)> {
    let readelf = format!("llvm-readelf-{v}");
    let objdump = format!("llvm-objdump-{v}");
    let re = in_rootfs(
        sh,
        rootfs,
        dir,
        &[&readelf, "-h", "-s", "-r", "--notes", co],
    )
    .quiet()
    .read()
    .with_context(|| format!("{readelf} {}", dir.join(co).display()))?;
    if !re
        .lines()
        .any(|l| l.trim_start().starts_with("Type:") && l.contains("DYN"))
    {
        bail!(
            "{} is not a linked code object (ET_DYN)",
            dir.join(co).display()
        );
    }
    let od = in_rootfs(sh, rootfs, dir, &[&objdump, "-d", co])
        .quiet()
        .read()
        .with_context(|| format!("{objdump} -d {}", dir.join(co).display()))?;
    Ok((re, od))
}

/// What one `rcclfix patch` run rewrote.
struct Patched {
    /// Kernels whose `hidden_hostcall_buffer` became `hidden_none`.
    rewritten: Vec<String>,
    /// Symbols whose entry `--asserts` rewrote to trap.
    rewrote_symbols: Vec<String>,
}

/// Run `bin patch [--asserts] input --out out --json`. `None`: refused (exit 1, 2 or 3); an error
/// when it ran but said neither.
fn rcclfix_patch(
    bin: &Path,
    input: &Path,
    out: &Path,
    asserts: bool,
) -> anyhow::Result<Option<Patched>> {
    let mut c = std::process::Command::new(bin);
    c.arg("patch");
    if asserts {
        c.arg("--asserts");
    }
    c.arg(input).arg("--out").arg(out).arg("--json").arg("-q");
    let o = c
        .output()
        .with_context(|| format!("run {}", bin.display()))?;
    match o.status.code() {
        Some(0) => {}
        Some(1..=3) => return Ok(None),
        _ => bail!(
            "{} patch {}: {}",
            bin.display(),
            input.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .with_context(|| format!("patch --json output for {}", input.display()))?;
    let mut p = Patched {
        rewritten: Vec::new(),
        rewrote_symbols: Vec::new(),
    };
    if v["written"].as_bool() != Some(true) {
        return Ok(Some(p));
    }
    for img in v["images"].as_array().into_iter().flatten() {
        for k in img["kernels"].as_array().into_iter().flatten() {
            p.rewritten.extend(k["name"].as_str().map(String::from));
        }
        for i in img["instructions"].as_array().into_iter().flatten() {
            p.rewrote_symbols
                .extend(i["symbol"].as_str().map(String::from));
        }
    }
    Ok(Some(p))
}

/// The table: one row per target and optimisation level, then the totals.
fn table(rows: &BTreeMap<(String, String), Row>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:<3} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9}",
        "target",
        "opt",
        "batches",
        "programs",
        "kernels",
        "declaring",
        "patched",
        "refused",
        "patched-a",
        "refused-a",
        "false",
        "truth",
        "disagree",
        "user-rewr"
    );
    let mut tot = Row::default();
    for ((t, o), r) in rows {
        let _ =
            writeln!(
            s,
            "{t:<8} {o:<3} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9}",
            r.batches, r.programs, r.kernels, r.declaring, r.patched, r.refused, r.patched_a,
            r.refused_a, r.false_proofs, r.confirmed, r.disagree, r.user_rewrites,
        );
        tot.batches += r.batches;
        tot.programs += r.programs;
        tot.kernels += r.kernels;
        tot.declaring += r.declaring;
        tot.patched += r.patched;
        tot.refused += r.refused;
        tot.patched_a += r.patched_a;
        tot.refused_a += r.refused_a;
        tot.false_proofs += r.false_proofs;
        tot.confirmed += r.confirmed;
        tot.disagree += r.disagree;
        tot.user_rewrites += r.user_rewrites;
    }
    let r = tot;
    let _ = writeln!(
        s,
        "{:<12} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9}",
        "total",
        r.batches,
        r.programs,
        r.kernels,
        r.declaring,
        r.patched,
        r.refused,
        r.patched_a,
        r.refused_a,
        r.false_proofs,
        r.confirmed,
        r.disagree,
        r.user_rewrites
    );
    s
}
