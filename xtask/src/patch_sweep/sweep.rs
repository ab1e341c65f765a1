//! The driver of `patch-sweep`, shared by the xtask and the slow test `tests/it/patch_sweep.rs`
//! (which compiles this file, [`super::gen`] and [`super::oracle`] by path): generate each batch,
//! compile it for every target and optimisation level through a [`Runner`], run `rcclfix patch`
//! and `patch --asserts` on the code object, and compare each rewritten kernel with the truth and
//! the oracle. It uses only `std`, `anyhow` and `serde_json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use anyhow::{bail, Context};

use super::{decode_check, gen, oracle};

/// Runs one toolchain tool for a target: `(target, folder, argv) → output`, inside the rootfs
/// that compiles that target ([`llvm_version`]), with `folder` as the working directory and
/// relative paths in `argv` naming files in it; an error only when it could not be started.
pub type Runner<'a> = dyn Fn(&str, &Path, &[&str]) -> anyhow::Result<Output> + 'a;

/// What to sweep.
pub struct Settings {
    /// Programs in all (each batch holds `per_batch` of them, the last one the rest).
    pub programs: usize,
    /// Programs per batch (one `.hip` file, one compile per target and level).
    pub per_batch: usize,
    /// The generator's seed.
    pub seed: u64,
    /// gfx targets, e.g. `gfx1100`.
    pub targets: Vec<String>,
    /// Optimisation levels without the dash, e.g. `O3`.
    pub opts: Vec<String>,
    /// The rcclfix binary under test.
    pub bin: PathBuf,
    /// The work folder (the caller empties it).
    pub work: PathBuf,
}

/// The LLVM major version of the toolchain that compiles `target`: 22 (`debian-rocm7.2`) for
/// gfx125x, else 21 (`debian-sid`).
pub fn llvm_version(target: &str) -> &'static str {
    if target.starts_with("gfx125") {
        "22"
    } else {
        "21"
    }
}

/// How many oracle/truth disagreements the report lists (all are counted).
const MAX_LISTED: usize = 20;

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
    /// Instructions `rcclfix decode` and `llvm-objdump -d` were compared on.
    decoded: usize,
    /// Instructions where they disagree (each one is a finding).
    decode_disagree: usize,
}

/// One false proof (or a rewrite of a user function), for the list after the table.
pub struct Finding {
    /// `false proof (…)` or a rewritten user function.
    pub what: String,
    /// The batch source.
    pub file: PathBuf,
    /// The kernel, its program, target, level and mode.
    pub kernel: String,
    /// The oracle's path, if it has one.
    pub oracle: Option<String>,
    /// The truth's path, if it has one.
    pub truth: Option<String>,
}

/// Generate, compile, patch and compare every batch of `o`: the table (with the first
/// disagreements) and the findings. `run` runs one toolchain tool for a target.
pub fn sweep(o: &Settings, run: &Runner) -> anyhow::Result<(String, Vec<Finding>)> {
    let (bin, work) = (o.bin.as_path(), o.work.as_path());
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
            let v = llvm_version(t);
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
                let out = run(t, &dir, &argv)?;
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
                let x = llvm_view(run, t, &dir, &co)?;
                // The decoder the kernarg-pointer flow rests on, instruction by instruction
                // against llvm-objdump (gfx125x is not decoded whole: its proofs refuse).
                if !t.starts_with("gfx125") {
                    let listing = rcclfix_decode(bin, &dir.join(&co))?;
                    let what = format!("{} {t} -{opt}", src.display());
                    let c = decode_check::compare(&x.1, &listing, &what);
                    row.decoded += c.compared;
                    row.decode_disagree += c.disagreements.len();
                    for d in c.disagreements.into_iter().take(MAX_LISTED) {
                        findings.push(Finding {
                            what: "decoder disagrees with llvm-objdump".into(),
                            file: src.clone(),
                            kernel: d,
                            oracle: None,
                            truth: None,
                        });
                    }
                }
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
                        let z = llvm_view(run, t, &dir, &out_name)?;
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
                        // A computed address can reach only what the image holds (after
                        // `--asserts`, the patched one): the truth (source semantics) does not
                        // know what the compiler dropped as dead code, nor that the hostcall code
                        // no kernel reaches was filled with traps.
                        let truth = truth.filter(|t| {
                            !t.ends_with("calls a computed code address") || img.holds_anything()
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
fn llvm_view(run: &Runner, target: &str, dir: &Path, co: &str) -> anyhow::Result<(String, String)> {
    let v = llvm_version(target);
    let readelf = format!("llvm-readelf-{v}");
    let objdump = format!("llvm-objdump-{v}");
    let read = |argv: &[&str]| -> anyhow::Result<String> {
        let o = run(target, dir, argv)?;
        if !o.status.success() {
            bail!(
                "{} on {}: {}",
                argv[0],
                dir.join(co).display(),
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        String::from_utf8(o.stdout)
            .with_context(|| format!("{} output for {}", argv[0], dir.join(co).display()))
    };
    let re = read(&[&readelf, "-h", "-s", "-r", "--notes", co])?;
    if !re
        .lines()
        .any(|l| l.trim_start().starts_with("Type:") && l.contains("DYN"))
    {
        bail!(
            "{} is not a linked code object (ET_DYN)",
            dir.join(co).display()
        );
    }
    let od = read(&[&objdump, "-d", co])?;
    Ok((re, od))
}

/// What one `rcclfix patch` run rewrote.
struct Patched {
    /// Kernels whose `hidden_hostcall_buffer` became `hidden_none`.
    rewritten: Vec<String>,
    /// Symbols whose entry `--asserts` rewrote to trap.
    rewrote_symbols: Vec<String>,
}

/// `bin decode input`: the listing of every instruction as rcclfix's decoder reads it.
fn rcclfix_decode(bin: &Path, input: &Path) -> anyhow::Result<String> {
    let o = std::process::Command::new(bin)
        .arg("decode")
        .arg(input)
        .output()
        .with_context(|| format!("run {}", bin.display()))?;
    if !o.status.success() {
        bail!(
            "{} decode {}: {}",
            bin.display(),
            input.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    String::from_utf8(o.stdout).with_context(|| format!("decode output for {}", input.display()))
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
        "{:<8} {:<3} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9} {:>9} {:>8}",
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
        "user-rewr",
        "decoded",
        "dec-diff"
    );
    let mut tot = Row::default();
    for ((t, o), r) in rows {
        let _ =
            writeln!(
            s,
            "{t:<8} {o:<3} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9} {:>9} {:>8}",
            r.batches, r.programs, r.kernels, r.declaring, r.patched, r.refused, r.patched_a,
            r.refused_a, r.false_proofs, r.confirmed, r.disagree, r.user_rewrites, r.decoded,
            r.decode_disagree,
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
        tot.decoded += r.decoded;
        tot.decode_disagree += r.decode_disagree;
    }
    let r = tot;
    let _ = writeln!(
        s,
        "{:<12} {:>7} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>8} {:>9} {:>9} {:>8}",
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
        r.user_rewrites,
        r.decoded,
        r.decode_disagree
    );
    s
}
