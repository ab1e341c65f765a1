//! `rcclfix doctor`: affected? the VM fix, a rebuild, or neither. The arguments, the call into
//! [`crate::doctor::run`] and the rendering (text through [`render`], or `--json`).

mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::doctor::{self, hip, Outcome, SCHEMA_VERSION};
use crate::ui::Ui;

/// The subcommand's arguments (clap): `rcclfix doctor`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exit codes:
  0  not affected (including: a different problem than the hostcall refusal, or no AMD GPU)
  1  affected: fix the VM configuration, rebuild RCCL, or a kernel outside RCCL needs hostcall
  2  inconclusive (e.g. config space unreadable without root, a log without the refusal
     signature, incomplete lspci text) or an error")]
pub struct Args {
    /// Read sysfs from this directory instead of /sys (e.g. an extracted --capture snapshot).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    pub sysfs: PathBuf,
    /// Read procfs (cpuinfo) from this directory.
    #[arg(long, value_name = "DIR", default_value = "/proc")]
    pub proc: PathBuf,
    /// Read the kernel log from this file (default: `dmesg`, then `journalctl -k -b`).
    #[arg(long, value_name = "FILE")]
    pub dmesg: Option<PathBuf>,
    /// A snapshot written by --capture (the .tar or an extracted folder): sets --sysfs, --proc and
    /// --dmesg from it.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["sysfs", "proc"])]
    pub snapshot: Option<PathBuf>,
    /// Triage a log (AMD_LOG_LEVEL output, torch/vLLM/RCCL output, collect_env); repeatable.
    #[arg(long, value_name = "FILE")]
    pub log: Vec<PathBuf>,
    /// A Proxmox VM config (/etc/pve/qemu-server/<vmid>.conf) to check, when run on the host; repeatable.
    #[arg(long, value_name = "FILE")]
    pub vm_config: Vec<PathBuf>,
    /// Read the PCI devices from pasted `lspci -vvv` / `-vvvnn` / `-vvvxxx` output (and `lspci -tv`)
    /// instead of sysfs, e.g. from a bug report; repeatable (the files make one machine).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sysfs", "snapshot", "capture"])]
    pub lspci: Vec<PathBuf>,
    /// Scan this librccl instead of searching for the one PyTorch/vLLM would load; repeatable.
    #[arg(long, value_name = "FILE")]
    pub library: Vec<PathBuf>,
    /// Do not search for or scan librccl.
    #[arg(long)]
    pub no_library: bool,
    /// Do not load the HIP runtime for hostNativeAtomicSupported.
    #[arg(long)]
    pub no_hip: bool,
    /// Print the report as JSON (schema_version inside).
    #[arg(long)]
    pub json: bool,
    /// Write a snapshot for a bug report (config space of each GPU's path, KFD topology, DMI
    /// vendor/product, matching kernel-log lines; no serials, UUIDs or host names) and exit.
    #[arg(long, value_name = "FILE.tar")]
    pub capture: Option<PathBuf>,
    /// Internal: load the HIP runtime in this process and print the probe as JSON.
    #[arg(long, hide = true)]
    pub internal_hip_probe: bool,
}

impl Args {
    fn options(&self) -> doctor::Options {
        doctor::Options {
            sysfs: self.sysfs.clone(),
            proc: self.proc.clone(),
            dmesg: self.dmesg.clone(),
            snapshot: self.snapshot.clone(),
            log: self.log.clone(),
            vm_config: self.vm_config.clone(),
            lspci: self.lspci.clone(),
            library: self.library.clone(),
            no_library: self.no_library,
            no_hip: self.no_hip,
            capture: self.capture.clone(),
        }
    }
}

/// Run the subcommand: gather, diagnose, print, map the verdict to the exit code (0 not affected,
/// 1 affected, 2 inconclusive).
///
/// Errors: whatever [`crate::doctor::run`] returns (unusable inputs, one line each).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    if a.internal_hip_probe {
        crate::outln!("{}", serde_json::to_string(&hip::probe_in_process())?)?;
        return Ok(ExitCode::SUCCESS);
    }
    match doctor::run(&a.options())? {
        Outcome::Captured { path, files } => {
            crate::ui::status("Captured", format!("{} ({files} files)", path.display()));
            if a.json {
                // `--json` is JSON whatever the mode: the snapshot written and its file count.
                let doc = serde_json::json!({
                    "schema_version": SCHEMA_VERSION,
                    "snapshot": path.to_string_lossy(),
                    "files": files,
                });
                crate::outln!("{}", serde_json::to_string_pretty(&doc)?)?;
            } else {
                crate::outln!("{}", path.display())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Report(report) => {
            let report = with_fix(*report);
            if a.json {
                crate::outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                crate::out!("{}", render::text(&report))?;
            }
            Ok(ExitCode::from(report.exit_code))
        }
    }
}

/// Prescribe `rcclfix fix` on a rebuild verdict: for the first library the report scanned (the
/// one that runs, in discovery order) whose kernels declare `hidden_hostcall_buffer` for an
/// affected GPU's target and that `patch` or `patch --asserts` proves ([`crate::fix::decide`]),
/// fill [`doctor::FixAdvice`] and put its action first, before the rebuild. The rebuild stays
/// the alternative. Other verdicts are left as they are (a VM setting comes first; a hostcall
/// user outside RCCL is not RCCL's to fix).
fn with_fix(mut r: doctor::Report) -> doctor::Report {
    use crate::fix::{decide, owner, Decision, Owner};
    if r.verdict != doctor::VerdictKind::Rebuild {
        return r;
    }
    for lib in &r.libraries {
        let targets: Vec<String> = lib
            .targets
            .iter()
            .filter(|(_, s)| matches!(s, crate::scan::TargetState::Declares { .. }))
            .map(|(g, _)| g.clone())
            .collect();
        if targets.is_empty() {
            continue;
        }
        let path = &lib.candidate.path;
        let (patch, kernels) = match decide::decide(path, &targets) {
            Decision::Patch { kernels, .. } => ("patch", kernels),
            Decision::PatchAsserts { kernels, .. } => ("patch --asserts", kernels),
            _ => continue,
        };
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        let sha = crate::fsutil::sha256_file(&canon).unwrap_or_default();
        let owner = owner::owner_of(std::slice::from_ref(path), &canon, &sha);
        let mut notes = vec![
            crate::fix::UNVERIFIED.to_string(),
            crate::fix::PROOF_CAVEAT.to_string(),
        ];
        let command = match &owner {
            Owner::None => Some(format!("rcclfix fix --yes --library {}", shell_word(path))),
            Owner::Dpkg { .. } => Some(format!(
                "sudo rcclfix fix --yes --library {}",
                shell_word(path)
            )),
            Owner::Pip { .. } => Some("rcclfix fix --yes --python python3".to_string()),
            Owner::Unknown { .. } => {
                notes.push(format!(
                    "fix cannot apply to this copy ({}): rcclfix fix --dry-run --library {} shows the plan; the rebuild below is the way",
                    owner.describe(),
                    shell_word(path)
                ));
                None
            }
        };
        if let Some(c) = &command {
            r.headline = r.headline.replacen(
                "rebuild RCCL",
                &format!("fix the library that runs with `rcclfix fix` (`{patch}` proves it), or rebuild RCCL"),
                1,
            );
            r.actions.insert(
                0,
                format!(
                    "fix the library that runs ({}: `{patch}` proves it for {}), reversibly, before any rebuild: {c}",
                    path.display(),
                    targets.join(",")
                ),
            );
        }
        r.fix = Some(doctor::FixAdvice {
            library: path.clone(),
            found_via: lib.candidate.found_via.clone(),
            patch: patch.to_string(),
            targets,
            kernels,
            owner: owner.describe(),
            command,
            notes,
        });
        break;
    }
    r
}

/// `p` as one shell word: as it is when it holds only safe characters, else single-quoted.
fn shell_word(p: &std::path::Path) -> String {
    let s = p.to_string_lossy();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
