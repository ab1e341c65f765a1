//! `rcclfix scan`'s results as the command prints them: the scan of paths and environments
//! (`--python`, `--rocm`) with the requested targets resolved ([`scan_for_cli`]), the table, the
//! environment summary, the JSON documents, and the exit-code contract. Everything here returns
//! values or writes to a writer it is given; `src/cmd/scan.rs` owns stdout.
//!
//! `--json` writes the compact document (per target the state and counts, per image one line of
//! facts, every declaring kernel); `--json=full` (or `--json --kernels`) the full one ([`ScanJson`]:
//! the [`ScanReport`] with every kernel). Both are documented in `docs/scan-json.md` (version
//! [`super::model::SCHEMA_VERSION`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::model::{FileReport, ScanReport, TargetState};
use super::{scan_paths_with, ScanOptions, Settings};

/// `--json` document shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonShape {
    /// Per target the state and counts, per image one line, every declaring kernel.
    Compact,
    /// Every kernel of every image, with every hidden argument.
    Full,
}

/// The full `--json` document: the report, the verdict per target, and the exit code.
#[derive(Debug, Serialize)]
pub struct ScanJson<'a> {
    /// The full report (schema_version, rcclfix_version, files).
    #[serde(flatten)]
    pub report: &'a ScanReport,
    /// `full`.
    pub shape: &'static str,
    /// Verdict per requested target (all targets found when none was requested).
    pub targets: BTreeMap<String, TargetState>,
    /// Device code that could not be attributed to any target (may belong to any).
    pub unattributed_unknown: usize,
    /// The process exit code (0, 1 or 3).
    pub exit_code: u8,
}

/// The exit code for a set of verdicts: 1 if any target declares, else 3 if any is unknown or has
/// no code (or device code could not be attributed), else 0.
pub fn exit_code(states: &BTreeMap<String, TargetState>, unattributed: usize) -> u8 {
    if states
        .values()
        .any(|s| matches!(s, TargetState::Declares { .. }))
    {
        crate::EXIT_CHECK_FAILED
    } else if unattributed > 0
        || states
            .values()
            .any(|s| matches!(s, TargetState::Unknown { .. } | TargetState::NoCode { .. }))
    {
        crate::EXIT_UNKNOWN
    } else {
        crate::EXIT_OK
    }
}

/// A scanned environment (`--python`, `--rocm`): what was walked.
#[derive(Debug, Clone)]
pub struct Env {
    /// `Python 3.12.3 at /venv`, `ROCm install /opt/rocm`, or both joined by `and`.
    pub what: String,
    /// The folders walked (site-packages, torch/lib, the ROCm `lib/`).
    pub roots: Vec<PathBuf>,
}

/// What `rcclfix scan` is asked to read and how.
#[derive(Debug, Clone)]
pub struct CliOptions {
    /// Files or folders to scan.
    pub paths: Vec<PathBuf>,
    /// Requested gfx targets (`--target`; empty: every target found, or this machine's GPUs for
    /// an environment scan).
    pub targets: Vec<String>,
    /// `--python`: the environment whose site-packages are scanned, as the command resolved it
    /// from the interpreter's answer to [`PYTHON_PROBE`] ([`python_env_from_probe`]).
    pub python: Option<Env>,
    /// `--rocm`: the ROCm install whose `lib/` is scanned.
    pub rocm: Option<PathBuf>,
    /// This machine's GPUs (gfx names), requested for an environment scan without `targets`
    /// (`src/cmd/scan.rs` reads them from KFD's topology).
    pub machine_gpus: Vec<String>,
    /// Costs and limits ([`Settings`]; its progress bar is driven during the scan).
    pub settings: Settings,
}

/// A finished scan with the requested targets resolved: everything the table, the summary and
/// both JSON shapes need.
#[derive(Debug)]
pub struct CliScan {
    /// The report (restricted to the explicit targets, when there are any).
    pub report: ScanReport,
    /// Verdict per requested target.
    pub states: BTreeMap<String, TargetState>,
    /// Unreadable device code that names no target (counted only without explicit targets).
    pub unattributed: usize,
    /// The exit code ([`exit_code`]).
    pub code: u8,
    /// The environment, for `--python`/`--rocm`.
    pub env: Option<Env>,
    /// This machine's GPUs (environment scans without `--target` only).
    pub gpus: Vec<String>,
    /// `--target`, else `gpus`.
    pub explicit: Vec<String>,
    /// The targets judged: `explicit`, else every target found.
    pub requested: Vec<String>,
    /// Every target found before restricting.
    pub found: Vec<String>,
    /// Per file with images before restricting (by report path): the processors it carries,
    /// so the environment summary lists a library that has no code for the requested targets.
    pub carried: BTreeMap<String, Vec<String>>,
}

/// Whether a scan of `opts` walks folders (so a progress bar is worth drawing).
pub fn walks(opts: &CliOptions) -> bool {
    opts.python.is_some() || opts.rocm.is_some() || opts.paths.iter().any(|p| p.is_dir())
}

/// Run `rcclfix scan`'s scan: the paths, plus the environments' folders, then the verdicts per
/// requested target.
///
/// Errors: an empty target string; a path cannot be read or is not a recognised input;
/// `--rocm` has no `lib/`.
pub fn scan_for_cli(opts: &CliOptions) -> anyhow::Result<CliScan> {
    if opts.targets.iter().any(|t| t.trim().is_empty()) {
        anyhow::bail!("--target: empty gfx target (e.g. --target gfx1100)");
    }
    let mut paths = opts.paths.clone();
    let mut env = None;
    if let Some(e) = &opts.python {
        paths.extend(e.roots.iter().cloned());
        env = Some(e.clone());
    }
    if let Some(root) = &opts.rocm {
        let lib = root.join("lib");
        if !lib.is_dir() {
            anyhow::bail!(
                "--rocm {}: no lib/ folder there\nhelp: give the ROCm install's root, e.g. --rocm /opt/rocm-6.4.3",
                root.display()
            );
        }
        paths.push(lib.clone());
        let e = env.get_or_insert(Env {
            what: String::new(),
            roots: Vec::new(),
        });
        e.what = if e.what.is_empty() {
            format!("ROCm install {}", root.display())
        } else {
            format!("{} and ROCm install {}", e.what, root.display())
        };
        e.roots.push(lib);
    }
    let scanned = scan_paths_with(&paths, &ScanOptions::default(), &opts.settings);
    opts.settings.progress.finish_and_clear();
    let mut report = scanned?;
    let found = report.processors();
    let carried: BTreeMap<String, Vec<String>> = report
        .files
        .iter()
        .filter(|f| !f.images.is_empty())
        .map(|f| {
            let mut p: Vec<String> = f.images.iter().map(|i| i.processor.clone()).collect();
            p.sort_by_key(|t| target_order(t));
            p.dedup();
            (f.path.clone(), p)
        })
        .collect();
    let gpus = if env.is_some() && opts.targets.is_empty() {
        opts.machine_gpus.clone()
    } else {
        Vec::new()
    };
    let explicit: Vec<String> = if opts.targets.is_empty() {
        gpus.clone()
    } else {
        opts.targets.clone()
    };
    if !explicit.is_empty() {
        report.retain_targets(&explicit);
    }
    let requested = if explicit.is_empty() {
        report.processors()
    } else {
        explicit.clone()
    };
    let mut states = report.target_states(&requested);
    for (t, st) in states.iter_mut() {
        if let TargetState::NoCode { reason } = st {
            if !found.is_empty() {
                *reason = format!("no device code for {t}; found: {}", found.join(", "));
            }
        }
    }
    let unattributed = if explicit.is_empty() {
        report
            .files
            .iter()
            .flat_map(|f| &f.unreadable)
            .filter(|u| u.processor.is_none())
            .count()
    } else {
        0
    };
    let code = exit_code(&states, unattributed);
    Ok(CliScan {
        report,
        states,
        unattributed,
        code,
        env,
        gpus,
        explicit,
        requested,
        found,
        carried,
    })
}

/// Write `scan` to `out` as `rcclfix scan` prints it: `shape` selects a JSON document (`None`: the
/// table, or for an environment the summary, followed by the table when `kernels`); `kernels`
/// lists every kernel per target (`--kernels`, `-v`).
///
/// Errors: writing to `out` fails.
pub fn write_output(
    out: &mut impl Write,
    scan: &CliScan,
    shape: Option<JsonShape>,
    kernels: bool,
) -> anyhow::Result<()> {
    match shape {
        Some(JsonShape::Full) => {
            let doc = ScanJson {
                report: &scan.report,
                shape: "full",
                targets: scan.states.clone(),
                unattributed_unknown: scan.unattributed,
                exit_code: scan.code,
            };
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)?;
        }
        Some(JsonShape::Compact) => {
            super::compact::write_compact(
                out,
                &scan.report,
                &scan.states,
                scan.unattributed,
                scan.code,
            )?;
        }
        None => {
            if let Some(e) = &scan.env {
                write!(out, "{}", render_summary(scan, e))?;
                if kernels {
                    writeln!(out)?;
                    write!(out, "{}", render_table(&scan.report, &scan.states, true))?;
                }
            } else {
                let mut table = render_table(&scan.report, &scan.states, kernels);
                if !scan.explicit.is_empty() && table.starts_with("no device code found\n") {
                    let what = if scan.found.is_empty() {
                        "no device code found".to_owned()
                    } else {
                        // `--target` values and the targets found in the input: escaped.
                        format!(
                            "no device code for {}; found: {}",
                            crate::ui::escape(&scan.explicit.join(", ")),
                            crate::ui::escape(&scan.found.join(", "))
                        )
                    };
                    table = format!("{what}\n{}", &table["no device code found\n".len()..]);
                }
                write!(out, "{table}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// What `--python` asks the interpreter (`PYTHON -I -c PYTHON_PROBE`): its site-packages (and
/// torch's package folder, found without importing it), version and prefix, as one JSON line on
/// stdout.
pub const PYTHON_PROBE: &str = r#"
import json, os, site, sys, sysconfig
p = []
try:
    p += site.getsitepackages()
except Exception:
    pass
if getattr(site, "ENABLE_USER_SITE", False):
    p.append(site.getusersitepackages())
for k in ("purelib", "platlib"):
    p.append(sysconfig.get_paths().get(k, ""))
try:
    import importlib.util
    s = importlib.util.find_spec("torch")
    if s and s.submodule_search_locations:
        p += [os.path.join(d, "lib") for d in s.submodule_search_locations]
except Exception:
    pass
print(json.dumps({"paths": p, "version": sys.version.split()[0], "prefix": sys.prefix}))
"#;

/// The environment from the interpreter's answer to [`PYTHON_PROBE`] (`stdout`; `shown`: the
/// interpreter as the user named it, for messages): the existing folders it names, canonical,
/// none inside another.
///
/// Errors: the answer is not the probe's JSON; none of the folders exists.
pub fn python_env_from_probe(shown: &str, stdout: &[u8]) -> anyhow::Result<Env> {
    #[derive(serde::Deserialize)]
    struct Probe {
        paths: Vec<String>,
        version: String,
        prefix: String,
    }
    let p: Probe = serde_json::from_slice(stdout).map_err(|e| {
        anyhow::anyhow!("--python {shown}: unexpected answer from the interpreter: {e}")
    })?;
    let mut roots: Vec<PathBuf> = Vec::new();
    for d in p.paths.iter().filter(|d| !d.is_empty()) {
        let Ok(c) = std::fs::canonicalize(d) else {
            continue;
        };
        if c.is_dir() && !roots.iter().any(|r| c.starts_with(r)) {
            roots.retain(|r| !r.starts_with(&c));
            roots.push(c);
        }
    }
    if roots.is_empty() {
        anyhow::bail!(
            "--python {shown}: Python {} at {} has no site-packages folder",
            p.version,
            p.prefix
        );
    }
    Ok(Env {
        what: format!("Python {} at {}", p.version, p.prefix),
        roots,
    })
}

/// The per-library summary of an environment scan: one row per file with device code, the
/// affected ones first (declares, then unknown, then no code, then clean), each with its verdict
/// for the requested targets (this machine's GPUs when known), the declaring kernels and the
/// targets it carries.
///
/// A library's verdict is `declares` when a kernel for a requested target declares, `unknown`
/// when something that may belong to one could not be read, `no code` when it has code for none
/// of them, else `clean`: a target the library carries no code for never makes it `unknown`.
/// With explicit targets (`--target`, or the machine's GPUs) every library with device code is
/// listed, also one with none for them, and the requested targets a library has no code for
/// are noted on its row (`[no code for gfx1030]`); without, every target found in the
/// environment is requested and a library is judged on the ones it carries. `TARGETS` lists
/// what a library carries ([`CliScan::carried`]).
///
/// Every field from the input or the interpreter is escaped for the terminal ([`crate::ui::escape`]).
pub fn render_summary(scan: &CliScan, env: &Env) -> String {
    let (report, gpus, requested) = (&scan.report, &scan.gpus, &scan.requested);
    let explicit = !scan.explicit.is_empty();
    use crate::ui::escape as e;
    use std::fmt::Write as _;
    let mut s = String::new();
    let rel = |p: &str| -> String {
        for r in &env.roots {
            let r = r.display().to_string();
            if let Some(rest) = p.strip_prefix(&r) {
                return rest.trim_start_matches('/').to_owned();
            }
        }
        p.to_owned()
    };
    let libs: Vec<&FileReport> = report
        .files
        .iter()
        .filter(|f| {
            !f.images.is_empty() || !f.unreadable.is_empty() || scan.carried.contains_key(&f.path)
        })
        .collect();
    let _ = writeln!(
        s,
        "{}: {} librar{} with device code under {}",
        e(&env.what),
        libs.len(),
        if libs.len() == 1 { "y" } else { "ies" },
        env.roots
            .iter()
            .map(|r| crate::ui::escape_path(r))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if gpus.is_empty() {
        let _ = writeln!(
            s,
            "verdicts for {}",
            if requested.is_empty() {
                "every target found".to_owned()
            } else {
                e(&requested.join(", ")).into_owned()
            }
        );
    } else {
        let _ = writeln!(
            s,
            "verdicts for this machine's GPUs: {}",
            e(&gpus.join(", "))
        );
    }
    struct Row {
        rank: u8,
        path: String,
        state: &'static str,
        declaring: usize,
        targets: String,
        note: String,
    }
    let mut rows: Vec<Row> = libs
        .iter()
        .map(|f| {
            let one = ScanReport {
                schema_version: report.schema_version,
                rcclfix_version: report.rcclfix_version.clone(),
                files: vec![(*f).clone()],
            };
            let want = if requested.is_empty() {
                one.processors()
            } else {
                requested.to_vec()
            };
            let states = one.target_states(&want);
            let declaring: usize = states
                .values()
                .map(|st| match st {
                    TargetState::Declares { kernels } => kernels.len(),
                    _ => 0,
                })
                .sum();
            let no_code: Vec<&str> = states
                .iter()
                .filter(|(_, s)| matches!(s, TargetState::NoCode { .. }))
                .map(|(t, _)| t.as_str())
                .collect();
            let (rank, state) = if states
                .values()
                .any(|s| matches!(s, TargetState::Declares { .. }))
            {
                (0, "declares")
            } else if states.is_empty()
                || states
                    .values()
                    .any(|s| matches!(s, TargetState::Unknown { .. }))
            {
                (1, "unknown")
            } else if no_code.len() == states.len() {
                (2, "no code")
            } else {
                (3, "clean")
            };
            let procs: &[String] = scan.carried.get(&f.path).map_or(&[], Vec::as_slice);
            let targets = if procs.is_empty() {
                "-".to_owned()
            } else {
                format!("{} ({})", procs.join(" "), procs.len())
            };
            let mut notes = Vec::new();
            if !f.unreadable.is_empty() {
                notes.push(format!("{} unreadable", f.unreadable.len()));
            }
            if explicit && !no_code.is_empty() {
                let mut t = no_code.clone();
                t.sort_by_key(|t| target_order(t));
                notes.push(format!("no code for {}", t.join(", ")));
            }
            let note = notes.join("; ");
            Row {
                rank,
                path: e(&rel(&f.path)).into_owned(),
                state,
                declaring,
                targets: e(&targets).into_owned(),
                note: e(&note).into_owned(),
            }
        })
        .collect();
    rows.sort_by(|a, b| (a.rank, &a.path).cmp(&(b.rank, &b.path)));
    if rows.is_empty() {
        return s;
    }
    let w = rows
        .iter()
        .map(|r| r.path.chars().count())
        .max()
        .unwrap_or(7)
        .clamp(7, 60);
    let _ = writeln!(
        s,
        "{:<w$}  {:<8}  {:>9}  TARGETS",
        "LIBRARY", "VERDICT", "DECLARING"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<w$}  {:<8}  {:>9}  {}{}",
            r.path,
            r.state,
            r.declaring,
            r.targets,
            if r.note.is_empty() {
                String::new()
            } else {
                format!("  [{}]", r.note)
            }
        );
    }
    s
}

/// Render the human table: one row per target (counts first), optional kernel lists, then every
/// unreadable record and the files scanned.
pub fn render_table(
    report: &ScanReport,
    states: &BTreeMap<String, TargetState>,
    kernels: bool,
) -> String {
    use std::fmt::Write as _;
    // Every field from the input (paths, member names, targets, kernel names, reasons) is
    // escaped for the terminal; `--json` carries the exact values.
    use crate::ui::escape as e;
    let mut s = String::new();
    let with_code: Vec<_> = report
        .files
        .iter()
        .filter(|f| !f.images.is_empty() || !f.unreadable.is_empty())
        .collect();
    if with_code.is_empty() {
        let _ = writeln!(s, "no device code found");
    }
    if !states.is_empty() {
        let _ = writeln!(
            s,
            "{:<16} {:<9} {:>7} {:>8}  IMAGES / REASON",
            "TARGET", "STATE", "KERNELS", "HOSTCALL"
        );
    }
    let mut ordered: Vec<_> = states.iter().collect();
    ordered.sort_by_key(|(t, _)| target_order(t));
    for (t, st) in ordered {
        let imgs: Vec<_> = report
            .files
            .iter()
            .flat_map(|f| f.images.iter().map(move |i| (f, i)))
            .filter(|(_, i)| super::verdict::runs_on(&i.processor, t))
            .collect();
        let nk: usize = imgs.iter().map(|(_, i)| i.kernel_count()).sum();
        let nh: usize = imgs
            .iter()
            .map(|(_, i)| i.kernels.iter().filter(|k| k.declares_hostcall).count())
            .sum();
        let mut kinds: Vec<String> = imgs
            .iter()
            .map(|(_, i)| format!("{} COv{}", e(&i.container), i.code_object_version))
            .collect();
        kinds.sort();
        kinds.dedup();
        let (state, detail) = match st {
            TargetState::Declares { .. } => (
                "declares",
                format!("{} image(s): {}", imgs.len(), kinds.join(", ")),
            ),
            TargetState::Clean { .. } => (
                "clean",
                format!("{} image(s): {}", imgs.len(), kinds.join(", ")),
            ),
            TargetState::Unknown { reason } => ("unknown", reason.clone()),
            TargetState::NoCode { reason } => ("no code", reason.clone()),
        };
        let (t_shown, detail) = (e(t), e(&detail));
        let _ = writeln!(s, "{t_shown:<16} {state:<9} {nk:>7} {nh:>8}  {detail}");
        if kernels || matches!(st, TargetState::Declares { .. }) {
            for (f, i) in &imgs {
                for k in &i.kernels {
                    if !kernels && !k.declares_hostcall {
                        continue;
                    }
                    let mark = if k.declares_hostcall { "HOSTCALL" } else { "-" };
                    let _ = writeln!(
                        s,
                        "    {mark:<8} {}  [{}{}]",
                        e(&k.name),
                        e(short(&f.path)),
                        if i.processor != *t {
                            format!(", {}", e(&i.processor))
                        } else {
                            String::new()
                        }
                    );
                    if let Some(w) = &k.why {
                        let _ = writeln!(s, "             why: {}", e(w));
                    }
                }
            }
        }
    }
    let unread: Vec<_> = report
        .files
        .iter()
        .flat_map(|f| f.unreadable.iter().map(move |u| (f, u)))
        .collect();
    if !unread.is_empty() {
        let _ = writeln!(
            s,
            "\nunreadable device code (reported as unknown, never as clean):"
        );
        for (f, u) in unread {
            let p = u
                .processor
                .as_deref()
                .map(|p| format!(" [{}]", e(p)))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "  {} at offset {} ({}){p}: {}",
                e(&f.path),
                u.offset,
                e(&u.class),
                e(&u.reason)
            );
        }
    }
    if !with_code.is_empty() {
        let _ = writeln!(s, "\nfiles with device code:");
        for f in with_code {
            let n: usize = f.images.iter().map(|i| i.kernel_count()).sum();
            let _ = writeln!(
                s,
                "  {} ({}): {} image(s), {} kernel(s), {} unreadable",
                e(&f.path),
                e(&f.kind),
                f.images.len(),
                n,
                f.unreadable.len()
            );
        }
    }
    s
}

/// Sort key that puts targets in hardware order: gfx803 < gfx90a < gfx1030 < gfx11-generic < gfx1100.
fn target_order(t: &str) -> (u32, String) {
    let tok = t
        .strip_prefix("gfx")
        .unwrap_or(t)
        .split([':', '-'])
        .next()
        .unwrap_or("");
    let split = if t.ends_with("-generic") || tok.len() > 3 {
        tok.len().min(2)
    } else {
        1
    };
    let major = tok
        .get(..split)
        .and_then(|m| m.parse().ok())
        .unwrap_or(u32::MAX);
    (major, format!("{}{t}", tok.get(split..).unwrap_or("")))
}

fn short(p: &str) -> &str {
    p.rsplit(['/', '!']).next().unwrap_or(p)
}
