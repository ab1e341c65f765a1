//! `rcclfix scan` arguments, table and JSON output, and the exit-code contract.
//!
//! The JSON document is a [`ScanReport`] plus a `targets` map of [`TargetState`] and the
//! `exit_code`; its schema is documented in `docs/scan-json.md` (version [`SCHEMA_VERSION`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use super::model::{ScanReport, TargetState, SCHEMA_VERSION};
use super::{scan_path_with, ScanOptions, Settings};

const AFTER_HELP: &str = "\
Exit codes:
  0  no kernel of a requested target declares hidden_hostcall_buffer, and all device code was read
  1  at least one kernel of a requested target declares hidden_hostcall_buffer
  2  error: a path could not be read or is not a recognised input
  3  some device code that may belong to a requested target could not be read (unknown), or there
     is no device image for a requested target

Without --target every target found is requested. A scan for gfx1100 also reads generic entries
(gfx11-generic). The --json schema is documented in docs/scan-json.md.";

/// `rcclfix scan PATH…`
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ScanArgs {
    /// Files or folders: .so, executable, .o, code object, bundle, CCOB, .deb, .whl, tar, directory.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only these gfx targets (comma-separated), e.g. gfx1100.
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Print JSON (schema version in the output) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Skip the CCOB MD5 check (sizes are still checked): faster on large compressed images.
    #[arg(long)]
    pub no_hash_check: bool,
    /// List every kernel per target (also enabled by the global -v).
    #[arg(short = 'k', long)]
    pub kernels: bool,
}

/// The `--json` document: the report, the verdict per target, and the exit code.
#[derive(Debug, Serialize)]
pub struct ScanJson<'a> {
    /// The full report (schema_version, rcclfix_version, files).
    #[serde(flatten)]
    pub report: &'a ScanReport,
    /// Verdict per requested target (all targets found when none was requested).
    pub targets: BTreeMap<String, TargetState>,
    /// Device code that could not be attributed to any target (may belong to any).
    pub unattributed_unknown: usize,
    /// The process exit code (0, 1 or 3).
    pub exit_code: u8,
}

/// The exit code for a set of verdicts: 1 if any target declares, else 3 if any is unknown (or
/// device code could not be attributed), else 0.
pub fn exit_code(states: &BTreeMap<String, TargetState>, unattributed: usize) -> u8 {
    if states
        .values()
        .any(|s| matches!(s, TargetState::Declares { .. }))
    {
        crate::EXIT_CHECK_FAILED
    } else if unattributed > 0
        || states
            .values()
            .any(|s| matches!(s, TargetState::Unknown { .. }))
    {
        crate::EXIT_UNKNOWN
    } else {
        crate::EXIT_OK
    }
}

impl ScanArgs {
    /// Run the scan and print the result (the global `-v` count lists kernels like `--kernels`).
    pub fn run(self) -> anyhow::Result<ExitCode> {
        self.run_with_verbosity(0)
    }

    /// Run the scan; `verbose` is the global `-v` count.
    ///
    /// Errors: an empty `--target` string; a path cannot be read or is not a recognised input (exit 2
    /// via `main`).
    pub fn run_with_verbosity(self, verbose: u8) -> anyhow::Result<ExitCode> {
        if self.target.iter().any(|t| t.trim().is_empty()) {
            anyhow::bail!("--target: empty gfx target (e.g. --target gfx1100)");
        }
        let opts = ScanOptions {
            targets: self.target.clone(),
        };
        let settings = Settings {
            verify_hash: !self.no_hash_check,
        };
        let mut report = ScanReport {
            schema_version: SCHEMA_VERSION,
            rcclfix_version: env!("CARGO_PKG_VERSION").into(),
            files: Vec::new(),
        };
        for p in &self.paths {
            let r = scan_path_with(p, &opts, &settings)?;
            report.files.extend(r.files);
        }
        let requested = if self.target.is_empty() {
            report.processors()
        } else {
            self.target.clone()
        };
        let states = report.target_states(&requested);
        let unattributed = if self.target.is_empty() {
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
        let mut out = std::io::stdout().lock();
        if self.json {
            let doc = ScanJson {
                report: &report,
                targets: states,
                unattributed_unknown: unattributed,
                exit_code: code,
            };
            serde_json::to_writer_pretty(&mut out, &doc)?;
            writeln!(out)?;
        } else {
            write!(
                out,
                "{}",
                render_table(&report, &states, self.kernels || verbose > 0)
            )?;
        }
        out.flush()?;
        Ok(ExitCode::from(code))
    }
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
        let nk: usize = imgs.iter().map(|(_, i)| i.kernels.len()).sum();
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
            let n: usize = f.images.iter().map(|i| i.kernels.len()).sum();
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
