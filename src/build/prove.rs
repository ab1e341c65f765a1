//! `rcclfix prove RECIPE`: the negative control and the fix, built one after the other from the same
//! pinned source, patches and toolchain, so the only difference between the two libraries is the
//! recipe's NDEBUG strategy.
//!
//! 1. **Control**: the recipe with `ndebug = "none"`, built in its own work folder
//!    (`<recipe>-control-<targets>`) and gated; no output folder is written.
//! 2. **Fix**: the recipe as it is, built and gated as `rcclfix build` does, writing the output
//!    folder on success.
//!
//! The record `prove.json` (schema [`ProveRecord`]) goes into `<out>/prove-<recipe>-<targets>/`:
//! per target and kernel whether it declares `hidden_hostcall_buffer` before and after, the hostcall
//! users found in each image, wall time and peak RSS of each run, both library sha256s.
//!
//! The proof holds, and `prove` exits 0, only when the control's gate fails (some kernel declares
//! the argument), the fix's gate passes, and every kernel that declares in the control is present
//! in the fix (and clean there): then removing NDEBUG is what makes the declaration appear, on real
//! source. A control that is already clean proves the pipeline, not the fix, and is reported as
//! such (exit 1), as is a fix that fails its gate, and two builds whose declaring kernels are not
//! in both (`not-comparable`: a fix that lost the kernels proves nothing about them). Kernels found
//! in only one build are named in the record (`missing`) and the table. The decision is
//! [`compare`], a pure function of the two scan reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{BuildOptions, Outcome};

mod toolchain;
use crate::recipe::{NdebugStrategy, Recipe};
use crate::scan::{ScanReport, TargetState};
use crate::ui::Ui;
pub use toolchain::{ToolchainRecord, COMPILER_PACKAGES};

/// The `build` options `prove` passes on to both builds (the rest of [`BuildOptions`] is fixed:
/// no verify, no packages, never from the artifact cache).
#[derive(Debug, Clone, Default)]
pub struct ProveOptions {
    /// gfx targets to build and gate (empty: the recipe's).
    pub targets: Vec<String>,
    /// Clone from this local git mirror instead of the recipe URL.
    pub git_mirror: Option<PathBuf>,
    /// Container engine (`None`: chosen as `build` does).
    pub engine: Option<crate::container::EngineKind>,
    /// Where the fix's output folder and the prove record go.
    pub out_dir: PathBuf,
    /// ninja -j (`None`: [`super::choose_jobs`]).
    pub jobs: Option<u32>,
    /// Refuse to pin an unpinned tag on first fetch.
    pub locked: bool,
    /// Allow recipes whose status is experimental or unfixable-by-rebuild.
    pub experimental: bool,
}

/// `prove.json`: the record of one proof.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProveRecord {
    /// Schema of this file; bumped on incompatible changes.
    pub schema_version: u32,
    /// rcclfix version that wrote it.
    pub rcclfix_version: String,
    /// Recipe id.
    pub recipe: String,
    /// RCCL version.
    pub rccl_version: String,
    /// The upstream name (`tag …` or `branch …`) and the commit both builds used.
    pub source: String,
    /// Commit (40 hex) of both builds.
    pub commit: String,
    /// gfx targets built and gated.
    pub targets: Vec<String>,
    /// The recipe's NDEBUG strategy (the fix's); the control's is `none`.
    pub ndebug_strategy: String,
    /// `proven`, `control-clean`, `control-unknown`, `fix-failed`, `not-comparable`.
    pub verdict: String,
    /// One sentence saying what the verdict means.
    pub summary: String,
    /// The control build (NDEBUG strategy `none`).
    pub control: RunRecord,
    /// The fix build (the recipe's strategy).
    pub fix: RunRecord,
    /// Per target, per kernel: declared before (control) and after (fix). Kernels present in only
    /// one build have `null` on the other side.
    pub kernels: BTreeMap<String, BTreeMap<String, KernelDiff>>,
    /// Per target, the kernels found in only one of the two builds (absent: none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub missing: BTreeMap<String, Missing>,
    /// The toolchain both builds ran in (absent in records from before rcclfix wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<ToolchainRecord>,
}

/// Kernels of one target found in only one of the two builds, by [`stable_kernel_name`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Missing {
    /// In the control, not in the fix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_in_control: Vec<String>,
    /// In the fix, not in the control.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_in_fix: Vec<String>,
}

/// What [`compare`] decides about a control and a fix.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// `proven`, `control-clean`, `control-unknown`, `fix-failed` or `not-comparable`.
    pub verdict: &'static str,
    /// One sentence saying what the verdict means.
    pub summary: String,
    /// Per target, per kernel: declared before and after ([`ProveRecord::kernels`]).
    pub kernels: BTreeMap<String, BTreeMap<String, KernelDiff>>,
    /// Per target, kernels in only one build ([`ProveRecord::missing`]).
    pub missing: BTreeMap<String, Missing>,
}

/// One of the two builds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// NDEBUG strategy used.
    pub ndebug_strategy: String,
    /// Gate verdict per target: `clean`, `declares`, `unknown`.
    pub gate: BTreeMap<String, String>,
    /// Kernels per target, and how many declare `hidden_hostcall_buffer`.
    pub counts: BTreeMap<String, KernelCount>,
    /// Hostcall users (`__assert_fail`, `__ockl_*`, printf) found in each image, per target.
    pub hostcall_users: BTreeMap<String, Vec<String>>,
    /// sha256 of the built library (hex).
    pub library_sha256: String,
    /// Wall time of the whole run (fetch, configure, build, gate), in seconds.
    pub wall_seconds: f64,
    /// Wall time of configure + build alone, in seconds.
    pub build_seconds: f64,
    /// Peak resident memory of rcclfix's process tree during the run (sum over processes, sampled
    /// every second from `/proc`), in bytes; 0 when `/proc` could not be read.
    pub peak_rss_bytes: u64,
}

/// Kernel counts of one target.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct KernelCount {
    /// Kernels in the target's images.
    pub kernels: usize,
    /// Of those, declaring `hidden_hostcall_buffer`.
    pub declaring: usize,
}

/// One kernel before and after.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelDiff {
    /// Declared in the control build (`None`: the kernel is not in it).
    pub before: Option<bool>,
    /// Declared in the fix build (`None`: the kernel is not in it).
    pub after: Option<bool>,
}

/// Schema version of [`ProveRecord`].
pub const PROVE_SCHEMA_VERSION: u32 = 1;

/// Write `record` as `<out_dir>/prove-<recipe>-<targets>/prove.json` (atomically) and return
/// its path.
///
/// Errors: the folder or the file cannot be written.
pub fn write_record(out_dir: &Path, record: &ProveRecord) -> anyhow::Result<PathBuf> {
    let dir = out_dir.join(format!(
        "prove-{}-{}",
        record.recipe,
        record.targets.join("+")
    ));
    fs_err::create_dir_all(&dir)?;
    let path = dir.join("prove.json");
    crate::fsutil::atomic_write(
        &path,
        (serde_json::to_string_pretty(record)? + "\n").as_bytes(),
    )?;
    Ok(path)
}

/// Build the control and the fix of `recipe` and compare them ([`ProveRecord`]).
///
/// Errors: either build errors (fetch, configure, build step); a failed gate is not an error but a
/// verdict.
pub fn prove(
    opts: &ProveOptions,
    recipe: &Recipe,
    recipe_root: Option<&Path>,
    ui: &Ui,
) -> anyhow::Result<ProveRecord> {
    let args = |control: bool| BuildOptions {
        targets: opts.targets.clone(),
        git_mirror: opts.git_mirror.clone(),
        engine: opts.engine,
        out_dir: opts.out_dir.clone(),
        jobs: opts.jobs,
        locked: opts.locked,
        experimental: opts.experimental,
        verify: false,
        package: vec![],
        package_dir: None,
        control,
        // prove measures a real build: never answered from the artifact cache.
        rebuild: true,
    };
    let strategy_name = |s: NdebugStrategy| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    // What the engine choice and the plan refuse (a bogus RCCLFIX_ENGINE, the targets, an
    // output folder inside the work folder) is refused before the control build starts.
    crate::container::requested_engine(opts.engine)?;
    super::plan::plan(recipe, &args(false), &super::plan::HostFacts::detect())?;
    let mut control_recipe = recipe.clone();
    control_recipe.build.ndebug = NdebugStrategy::None;

    ui.status(
        "Proving",
        format_args!(
            "recipe {}: control (NDEBUG strategy none), then fix ({})",
            recipe.id(),
            strategy_name(recipe.build.ndebug)
        ),
    );
    let sampler = super::rss::RssSampler::start();
    let t = Instant::now();
    let control = match super::build(&args(true), &control_recipe, recipe_root, ui)
        .context("the control build (NDEBUG strategy none) failed")?
    {
        Outcome::Control(c) => c,
        _ => unreachable!("a control build returns Outcome::Control"),
    };
    let control_wall = t.elapsed().as_secs_f64();
    let control_peak = sampler.take_peak();

    let t = Instant::now();
    let fix_outcome =
        super::build(&args(false), recipe, recipe_root, ui).context("the fix build failed")?;
    let fix_wall = t.elapsed().as_secs_f64();
    let fix_peak = sampler.take_peak();
    drop(sampler);

    let work = control.work.clone();
    let targets: Vec<String> = control.gate.states.keys().cloned().collect();
    let (fix_report, fix_manifest) = match &fix_outcome {
        Outcome::Built(dir) => (
            load_report(&dir.join("scan.json"))?,
            Some(crate::manifest::Manifest::load(&dir.join("manifest.json"))?),
        ),
        Outcome::CheckFailed(_) => {
            let fix_work = work
                .parent()
                .context("work folder has no parent")?
                .join(format!("{}-{}", recipe.id(), targets.join("+")));
            (load_report(&fix_work.join("scan.json"))?, None)
        }
        Outcome::Control(_) => unreachable!(),
    };
    let fix_states = fix_report.target_states(&targets);
    let fix_gate = super::scan_gate::GateResult {
        report: fix_report,
        states: fix_states,
    };
    let commit = fix_manifest
        .as_ref()
        .map(|m| m.commit.clone())
        .or_else(|| recipe.source.commit.clone())
        .unwrap_or_default();

    let control_rec = run_record(
        "none",
        &control.gate,
        &targets,
        control.library_sha256.clone(),
        control_wall,
        control.build_seconds,
        control_peak,
    );
    let fix_rec = run_record(
        &strategy_name(recipe.build.ndebug),
        &fix_gate,
        &targets,
        fix_manifest
            .as_ref()
            .map(|m| m.library.sha256.clone())
            .unwrap_or_default(),
        fix_wall,
        fix_manifest
            .as_ref()
            .map(|m| m.build_seconds)
            .unwrap_or(0.0),
        fix_peak,
    );
    let cmp = compare(
        &control.gate.report,
        &fix_gate.report,
        &targets,
        &strategy_name(recipe.build.ndebug),
    );
    Ok(ProveRecord {
        schema_version: PROVE_SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        recipe: recipe.id().into(),
        rccl_version: recipe.rccl_version.clone(),
        source: recipe.source.rev_label(),
        commit,
        ndebug_strategy: strategy_name(recipe.build.ndebug),
        verdict: cmp.verdict.into(),
        summary: cmp.summary,
        kernels: cmp.kernels,
        missing: cmp.missing,
        targets,
        control: control_rec,
        fix: fix_rec,
        toolchain: Some(control.toolchain.clone()),
    })
}

/// Decide a proof from the control's and the fix's scan reports for `targets` (the fix built with
/// NDEBUG strategy `strategy`), in this order:
///
/// - `control-unknown`: some target of the control is neither clean nor declaring (unreadable,
///   no code): nothing can be compared.
/// - `fix-failed`: some target of the fix is not clean (its gate fails).
/// - `control-clean`: no kernel of the control declares: the recipe proves the pipeline only.
/// - `not-comparable`: a kernel that declares in the control is absent from the fix (matched by
///   [`stable_kernel_name`]): the fix is clean, but not for the kernels the control convicts.
/// - `proven`: every kernel that declares in the control is in the fix and clean there, and no
///   kernel of the fix declares.
///
/// Kernels in only one build are listed in [`Comparison::missing`] and named in the summary.
pub fn compare(
    control: &ScanReport,
    fix: &ScanReport,
    targets: &[String],
    strategy: &str,
) -> Comparison {
    let cstates = control.target_states(targets);
    let fstates = fix.target_states(targets);
    let kernels = kernel_diff(control, fix, targets);
    let mut missing = BTreeMap::new();
    let mut absent_declaring = Vec::new();
    let (mut declaring, mut total) = (0usize, 0usize);
    for (t, ks) in &kernels {
        let mut m = Missing::default();
        for (k, d) in ks {
            match (d.before, d.after) {
                (Some(true), None) => {
                    absent_declaring.push(format!("{t}: {k}"));
                    m.only_in_control.push(k.clone());
                }
                (Some(_), None) => m.only_in_control.push(k.clone()),
                (None, Some(_)) => m.only_in_fix.push(k.clone()),
                _ => {}
            }
            if let Some(b) = d.before {
                total += 1;
                declaring += usize::from(b);
            }
        }
        if m != Missing::default() {
            missing.insert(t.clone(), m);
        }
    }
    let only_one: usize = missing
        .values()
        .map(|m| m.only_in_control.len() + m.only_in_fix.len())
        .sum();
    let missing_note = if only_one == 0 {
        String::new()
    } else {
        format!("; {only_one} kernel(s) are in only one of the two builds (listed in the record)")
    };
    let not_clean = |states: &BTreeMap<String, TargetState>, declares_ok: bool| -> Vec<String> {
        states
            .iter()
            .filter(|(_, s)| match s {
                TargetState::Clean { .. } => false,
                TargetState::Declares { .. } => !declares_ok,
                _ => true,
            })
            .map(|(t, s)| format!("{t}: {}", crate::package::shipped::describe(s)))
            .collect()
    };
    let control_bad = not_clean(&cstates, true);
    let fix_bad = not_clean(&fstates, false);
    let control_declares = cstates
        .values()
        .any(|s| matches!(s, TargetState::Declares { .. }));
    let (verdict, summary) = if !control_bad.is_empty() {
        (
            "control-unknown",
            format!(
                "the control build could not be read completely by the scanner ({}): nothing is proven",
                control_bad.join("; ")
            ),
        )
    } else if !fix_bad.is_empty() {
        (
            "fix-failed",
            format!(
                "the fix's gate failed ({}): the recipe's NDEBUG strategy does not remove the declaration",
                fix_bad.join("; ")
            ),
        )
    } else if !control_declares {
        (
            "control-clean",
            "the control is already clean: this recipe proves the pipeline, not the fix".to_owned(),
        )
    } else if !absent_declaring.is_empty() {
        let shown: Vec<&str> = absent_declaring
            .iter()
            .take(8)
            .map(String::as_str)
            .collect();
        let more = if absent_declaring.len() > shown.len() {
            format!(" and {} more", absent_declaring.len() - shown.len())
        } else {
            String::new()
        };
        (
            "not-comparable",
            format!(
                "{} kernel(s) that declare hidden_hostcall_buffer in the control are absent from the fix ({}{more}): the two builds are not comparable, so nothing is proven",
                absent_declaring.len(),
                shown.join(", ")
            ),
        )
    } else {
        (
            "proven",
            format!(
                "without NDEBUG {declaring} of {total} kernels declare hidden_hostcall_buffer; with NDEBUG strategy {strategy} each of them is present and clean and none declares, from the same commit, patches and toolchain{missing_note}"
            ),
        )
    };
    Comparison {
        verdict,
        summary,
        kernels,
        missing,
    }
}

fn load_report(path: &Path) -> anyhow::Result<ScanReport> {
    let text = crate::fsutil::read_text_capped(path, 1 << 30, "a scan report")?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a scan report", path.display()))
}

/// A kernel's name without the `.intern.<hex>` suffix LTO gives internal-linkage symbols: the hex
/// part hashes the module and differs between two builds whose flags differ, so the control and
/// the fix would otherwise name the same kernel differently.
pub fn stable_kernel_name(name: &str) -> &str {
    match name.rfind(".intern.") {
        Some(i) if name.len() > i + 8 && name[i + 8..].bytes().all(|b| b.is_ascii_hexdigit()) => {
            &name[..i]
        }
        _ => name,
    }
}

/// The kernels of `target`'s images in `report`: [`stable_kernel_name`] → declares.
fn kernels_of(report: &ScanReport, target: &str) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for f in &report.files {
        for img in f.images.iter().filter(|i| i.processor == target) {
            for k in &img.kernels {
                let e = out
                    .entry(stable_kernel_name(&k.name).to_owned())
                    .or_insert(false);
                *e |= k.declares_hostcall;
            }
        }
    }
    out
}

fn run_record(
    strategy: &str,
    gate: &super::scan_gate::GateResult,
    targets: &[String],
    library_sha256: String,
    wall_seconds: f64,
    build_seconds: f64,
    peak_rss_bytes: u64,
) -> RunRecord {
    let mut counts = BTreeMap::new();
    let mut users = BTreeMap::new();
    for t in targets {
        let ks = kernels_of(&gate.report, t);
        counts.insert(
            t.clone(),
            KernelCount {
                kernels: ks.len(),
                declaring: ks.values().filter(|d| **d).count(),
            },
        );
        let mut u: Vec<String> = gate
            .report
            .files
            .iter()
            .flat_map(|f| f.images.iter())
            .filter(|i| &i.processor == t)
            .flat_map(|i| i.hostcall_users.iter().cloned())
            .collect();
        u.sort();
        u.dedup();
        users.insert(t.clone(), u);
    }
    RunRecord {
        ndebug_strategy: strategy.into(),
        gate: gate.summary(),
        counts,
        hostcall_users: users,
        library_sha256,
        wall_seconds,
        build_seconds,
        peak_rss_bytes,
    }
}

fn kernel_diff(
    before: &ScanReport,
    after: &ScanReport,
    targets: &[String],
) -> BTreeMap<String, BTreeMap<String, KernelDiff>> {
    let mut out = BTreeMap::new();
    for t in targets {
        let b = kernels_of(before, t);
        let a = kernels_of(after, t);
        let mut m = BTreeMap::new();
        for name in b.keys().chain(a.keys()) {
            m.insert(
                name.clone(),
                KernelDiff {
                    before: b.get(name).copied(),
                    after: a.get(name).copied(),
                },
            );
        }
        out.insert(t.clone(), m);
    }
    out
}

/// The human table of a record: one row per target, then the kernels whose verdict changed and
/// those found in only one build. Every value from the record (kernel names above all, which come
/// from the scanned code objects) goes through [`crate::ui::escape`], so a name cannot move the
/// cursor, retitle the terminal or forge a row.
pub fn render(r: &ProveRecord) -> String {
    use crate::ui::escape;
    let mut s = format!(
        "recipe {} ({} {}), NDEBUG strategy {}\n{:<10} {:>8} {:>18} {:>18}\n",
        escape(&r.recipe),
        escape(&r.source),
        escape(&r.commit),
        escape(&r.ndebug_strategy),
        "TARGET",
        "KERNELS",
        "DECLARING BEFORE",
        "DECLARING AFTER"
    );
    if let Some(tc) = &r.toolchain {
        s.insert_str(
            s.find('\n').map_or(0, |i| i + 1),
            &format!(
                "toolchain {} ({}) via {}{}\n",
                escape(&tc.name),
                escape(&tc.id),
                escape(&tc.engine),
                if tc.compiler.is_empty() {
                    String::new()
                } else {
                    format!(": {}", escape(&tc.compiler.join(" ")))
                }
            ),
        );
    }
    for t in &r.targets {
        let b = r.control.counts.get(t).copied().unwrap_or_default();
        let a = r.fix.counts.get(t).copied().unwrap_or_default();
        s.push_str(&format!(
            "{:<10} {:>8} {:>18} {:>18}\n",
            escape(t),
            b.kernels,
            b.declaring,
            a.declaring
        ));
        for (k, d) in r.kernels.get(t).into_iter().flatten() {
            if d.before != d.after {
                let f = |x: Option<bool>| match x {
                    Some(true) => "declares",
                    Some(false) => "clean",
                    None => "absent",
                };
                s.push_str(&format!(
                    "  {}: {} -> {}\n",
                    escape(k),
                    f(d.before),
                    f(d.after)
                ));
            }
        }
        if let Some(m) = r.missing.get(t) {
            if !m.only_in_control.is_empty() || !m.only_in_fix.is_empty() {
                s.push_str(&format!(
                    "  {} kernel(s) only in the control, {} only in the fix (named above)\n",
                    m.only_in_control.len(),
                    m.only_in_fix.len()
                ));
            }
        }
    }
    for (name, run) in [("control", &r.control), ("fix", &r.fix)] {
        s.push_str(&format!(
            "{name:<8} wall {:>7.1} s, build {:>7.1} s, peak RSS {:.2} GB, library sha256 {}\n",
            run.wall_seconds,
            run.build_seconds,
            run.peak_rss_bytes as f64 / 1e9,
            if run.library_sha256.is_empty() {
                "-".into()
            } else {
                escape(&run.library_sha256)
            }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::stable_kernel_name;

    #[test]
    fn intern_suffixes_are_dropped_only_when_hex() {
        assert_eq!(
            stable_kernel_name("_ZN12_GLOBAL__N_113oneRankReduceIfEEvPv.intern.453bed4f94af34c8"),
            "_ZN12_GLOBAL__N_113oneRankReduceIfEEvPv"
        );
        assert_eq!(stable_kernel_name("mh_assert"), "mh_assert");
        assert_eq!(stable_kernel_name("k.intern."), "k.intern.");
        assert_eq!(stable_kernel_name("k.intern.xyz"), "k.intern.xyz");
    }
}
