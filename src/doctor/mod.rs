//! `rcclfix doctor`: am I affected, and is the fix a VM setting, a rebuild, or neither?
//!
//! Evidence is gathered per GPU from a sysfs root (PCIe path judged by the kernel's
//! `pci_enable_atomic_ops_to_root` rule, AtomicOp requester enable, KFD io_link flags), the kernel
//! log (amdgpu's AtomicOps message by PCI address), the hypervisor (QEMU's completer rule for
//! single-function devices at devfn 0), the HIP runtime (`hostNativeAtomicSupported`), the `librccl`
//! PyTorch/vLLM would load (the scanner), user logs (`--log`) and Proxmox VM configs (`--vm-config`).
//! user logs (`--log`), pasted `lspci -vvv` text (`--lspci`, in place of sysfs) and Proxmox VM
//! configs (`--vm-config`). [`diagnose`] turns that into a [`Report`] with one [`VerdictKind`];
//! nothing here guesses: a config space that could not be read makes the path *inconclusive*,
//! never "OK", and a report that examined no GPU says so.
//!
//! Sources: Linux `drivers/pci/pci.c`, amdgpu/amdkfd, CLR, QEMU `hw/vfio/pci.c`; public reports
//! ROCm/ROCm#6074, ROCm/ROCm#6148, ROCm/ROCm#6520, vllm-project/vllm#38587.

pub mod capture;
pub mod hip;
pub mod ids;
pub mod input;
pub mod kfd;
pub mod kmsg;
pub mod library;
pub mod lspci;
pub mod pci;
pub mod render;
pub mod triage;
pub mod vm;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use self::hip::HipProbe;
use self::kmsg::KernelLog;
use self::library::LibraryScan;
use self::pci::{Bdf, ConfigView, HopProblem, PathResult, PciDevice, PortType};
use self::triage::{LogClass, LogTriage, RebuildAdvice};
use self::vm::{Hypervisor, ProxmoxConfig};
use crate::scan::TargetState;

/// Version of the `--json` schema below; bumped on any incompatible change (2: `rebuild.tag` may be
/// null, `rebuild.targets`/`command`, the `hostcall-outside-rccl` verdict, `examined`,
/// `not_examined`, log `refusals`/`hints`, GPU `gfx_source` and guest `blockers`).
pub const SCHEMA_VERSION: u32 = 2;

/// Arguments of `rcclfix doctor`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Exit codes:
  0  not affected (including: a different problem than the hostcall refusal, or no AMD GPU)
  1  affected: fix the VM configuration, rebuild RCCL, or a kernel outside RCCL needs hostcall
  2  inconclusive (e.g. config space unreadable without root, a log without the refusal
     signature, incomplete lspci text) or an error")]
pub struct DoctorArgs {
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

/// Where the evidence comes from; [`diagnose`] reads only these.
#[derive(Debug, Clone)]
pub struct Sources {
    /// sysfs root (`/sys` or a snapshot's `sys/`).
    pub sysfs: PathBuf,
    /// procfs root.
    pub proc: PathBuf,
    /// The kernel log, already read.
    pub kernel_log: KernelLog,
    /// `--log` files.
    pub logs: Vec<PathBuf>,
    /// `--vm-config` files.
    pub vm_configs: Vec<PathBuf>,
    /// `--lspci` files: when given, the PCI devices come from them, and sysfs/procfs are not read.
    pub lspci: Vec<PathBuf>,
    /// What the PCI devices are read from, for the report (`/sys`, `snapshot snap.tar`, …).
    pub pci_origin: String,
    /// Libraries to scan (explicit or discovered).
    pub libraries: Vec<library::Candidate>,
    /// The HIP probe result (or why it was not run).
    pub hip: HipProbe,
    /// The installed ROCm release (`/opt/rocm/.info/version`), live mode only.
    pub installed_rocm: Option<String>,
    /// Whether this is the live system (not a snapshot).
    pub live: bool,
}

/// The four verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// Not affected by the hostcall refusal (AtomicOps present, or a different problem, or no AMD GPU).
    NotAffected,
    /// Affected, and a VM setting fixes it: pass the GPU as a single function.
    FixVmConfig,
    /// Affected: rebuild RCCL (`rcclfix build --tag …`).
    Rebuild,
    /// Affected, but the refused kernel is not RCCL's: rebuilding RCCL does not help; the platform
    /// fix (an AtomicOps path) does, or the library that owns the kernel.
    HostcallOutsideRccl,
    /// Cannot tell: run as root, supply the kernel log, or run the runtime probe.
    Inconclusive,
}

impl VerdictKind {
    /// The process exit code: 0 not affected, 1 affected, 2 inconclusive.
    pub fn exit_code(self) -> u8 {
        match self {
            VerdictKind::NotAffected => crate::EXIT_OK,
            VerdictKind::FixVmConfig | VerdictKind::Rebuild | VerdictKind::HostcallOutsideRccl => {
                crate::EXIT_CHECK_FAILED
            }
            VerdictKind::Inconclusive => crate::EXIT_ERROR,
        }
    }

    /// Short text.
    pub fn text(self) -> &'static str {
        match self {
            VerdictKind::NotAffected => "not affected",
            VerdictKind::FixVmConfig => "affected — fix the VM configuration",
            VerdictKind::Rebuild => "affected — rebuild RCCL",
            VerdictKind::HostcallOutsideRccl => {
                "affected — a kernel outside RCCL needs hostcall (rebuilding RCCL does not help)"
            }
            VerdictKind::Inconclusive => "inconclusive",
        }
    }
}

/// One device on a GPU's PCIe path, for display.
#[derive(Debug, Clone, Serialize)]
pub struct Hop {
    /// Address.
    pub bdf: Bdf,
    /// `vendor:device`, e.g. `1b36:000c`.
    pub id: String,
    /// Role: `root port`, `switch upstream port`, `GPU (endpoint)`, …
    pub role: String,
    /// lspci-style AtomicOps text, when readable.
    pub atomics: Option<String>,
    /// `ok`, `BREAKS: …`, `not checked by the kernel`, `unreadable (… bytes)`.
    pub status: String,
    /// QEMU's name for an emulated root port, in a QEMU guest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
}

/// Guest-side VM facts for one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct GuestView {
    /// Whether the GPU function is multi-function (header bit, or sibling functions in the slot).
    pub multifunction: bool,
    /// Other functions present in the GPU's slot (e.g. the HDMI audio function `.1`).
    pub siblings: Vec<String>,
    /// Whether the GPU is at devfn 0 (device 0, function 0), as QEMU requires.
    pub devfn0: bool,
    /// Whether a root port is above the GPU (false: it sits on the root bus as an RCiEP).
    pub behind_root_port: bool,
    /// Whether the GPU's parent bridge is the root port itself (QEMU sets completer bits only then;
    /// behind an emulated switch it never does).
    pub directly_under_root_port: bool,
    /// The emulated root port's name, when recognised.
    pub emulated_root_port: Option<String>,
    /// Whether QEMU's completer rule (≥ 8.1) is what withholds atomics here.
    pub qemu_rule_blocks: bool,
    /// What in the VM's layout withholds AtomicOps from this GPU (empty: nothing the guest shows).
    pub blockers: Vec<VmBlocker>,
}

/// A VM setting that withholds AtomicOps from a guest GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VmBlocker {
    /// The GPU is passed as a multifunction device (QEMU sets no completer bits then).
    Multifunction,
    /// The GPU is not at devfn 0 below its root port.
    NotAtDevfn0,
    /// The GPU sits behind an emulated switch, not directly below the root port.
    BehindSwitch,
    /// The machine type predates QEMU 8.1, which never sets completer bits.
    QemuBefore81 {
        /// The machine type, e.g. `pc-q35-5.1`.
        machine: String,
    },
    /// The VM gives the GPU no PCI Express capability (conventional PCI layout).
    NoPcieCapability,
}

/// Everything known about one GPU, and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// PCI address.
    pub bdf: Bdf,
    /// `1002:744c`.
    pub id: String,
    /// gfx target, when known (KFD, else the PCI device ID or the lspci chip name).
    pub gfx: Option<String>,
    /// Where `gfx` came from (`KFD topology`, `PCI ID 1002:744c`, `lspci chip name`).
    pub gfx_source: Option<String>,
    /// KFD node number.
    pub kfd_node: Option<u32>,
    /// An integrated GPU (APU) that ROCm exposes next to discrete cards.
    pub integrated: bool,
    /// The path, root-most first, ending with the GPU.
    pub path: Vec<Hop>,
    /// The kernel rule's result.
    pub path_result: PathResult,
    /// `AtomicOpsCtl: ReqEn±` of the GPU, when readable.
    pub req_en: Option<bool>,
    /// The amdgpu atomics message for this address (verbatim), if logged.
    pub kernel_message: Option<String>,
    /// Whether the kernel log is usable for this GPU (has amdgpu lines).
    pub kernel_log_usable: bool,
    /// What KFD's io_link flags say (`Some(false)`: no atomics).
    pub kfd_atomics: Option<bool>,
    /// The io_link flags, as read.
    pub kfd_link_flags: Vec<u32>,
    /// KFD skipped this GPU ("PCI rejects atomics"): a different problem.
    pub kfd_rejected: Option<String>,
    /// `hostNativeAtomicSupported` from the HIP runtime.
    pub hip_host_native_atomic: Option<i32>,
    /// The HIP ordinal, when the runtime saw it.
    pub hip_ordinal: Option<i32>,
    /// Guest-side VM facts (only inside a VM).
    pub guest: Option<GuestView>,
    /// The libraries' state for this GPU's target.
    pub library_states: Vec<(String, TargetState)>,
    /// The verdict for this GPU.
    pub verdict: VerdictKind,
    /// Why, one line each.
    pub reasons: Vec<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// rcclfix version.
    pub rcclfix_version: String,
    /// The overall verdict.
    pub verdict: VerdictKind,
    /// One line saying it.
    pub headline: String,
    /// What to do, one line each (exact config lines and commands).
    pub actions: Vec<String>,
    /// What this report examined, one line each.
    pub examined: Vec<String>,
    /// What it did not examine (and why), one line each.
    pub not_examined: Vec<String>,
    /// The evidence behind the verdict, one line each.
    pub evidence: Vec<String>,
    /// The rebuild advice (when the verdict is rebuild, or a log names a release).
    pub rebuild: Option<RebuildAdvice>,
    /// Per GPU.
    pub gpus: Vec<GpuReport>,
    /// Hypervisor facts.
    pub hypervisor: Hypervisor,
    /// Kernel log summary.
    pub kernel_log: KernelLogSummary,
    /// Whether a KFD topology was found.
    pub kfd_present: bool,
    /// The HIP probe.
    pub hip: HipProbe,
    /// Library scans.
    pub libraries: Vec<LibraryScan>,
    /// Log triage.
    pub logs: Vec<LogTriage>,
    /// Proxmox configs.
    pub vm_configs: Vec<ProxmoxConfig>,
    /// Further notes (iGPU, caveats).
    pub notes: Vec<String>,
    /// The exit code this report maps to.
    pub exit_code: u8,
}

/// What the kernel log was and how much it holds.
#[derive(Debug, Clone, Serialize)]
pub struct KernelLogSummary {
    /// Its origin.
    pub origin: kmsg::LogOrigin,
    /// Lines read.
    pub lines: usize,
    /// Whether it has amdgpu lines.
    pub has_amdgpu_lines: bool,
    /// The relevant lines (at most 50).
    pub relevant: Vec<String>,
    /// Set when only the end of a `--dmesg` file was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

impl DoctorArgs {
    /// Run the subcommand: gather, diagnose, print, map the verdict to the exit code.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        if self.internal_hip_probe {
            println!("{}", serde_json::to_string(&hip::probe_in_process())?);
            return Ok(ExitCode::SUCCESS);
        }
        let _tmp;
        let (sysfs, proc, snapshot_dmesg) = match &self.snapshot {
            Some(s) => {
                let dir = if s.is_dir() {
                    // Untrusted like a tar: links and special files are refused.
                    capture::check_folder(s)?;
                    s.clone()
                } else {
                    let t = crate::fsutil::TempDir::new("rcclfix-snapshot-")?;
                    capture::extract(s, t.path())?;
                    let p = t.path().to_owned();
                    _tmp = t;
                    p
                };
                // An invalid manifest is an error even when sys/ is missing: never "no AMD GPU".
                let manifest = capture::check_manifest(&dir, s)?;
                // Older captures of a machine without an AMD GPU have a manifest but no sys/.
                if !dir.join("sys").is_dir() && !manifest {
                    anyhow::bail!(
                        "{}: not an rcclfix doctor snapshot (no sys/ folder)",
                        s.display()
                    );
                }
                let d = dir.join("dmesg.txt");
                (dir.join("sys"), dir.join("proc"), d.is_file().then_some(d))
            }
            None if !self.lspci.is_empty() => (PathBuf::new(), PathBuf::new(), None),
            None => {
                // A mistyped root must not read as "no AMD GPU found".
                require_dir("--sysfs", &self.sysfs)?;
                require_dir("--proc", &self.proc)?;
                if !self.sysfs.join("bus/pci").is_dir() {
                    anyhow::bail!(
                        "--sysfs {}: no bus/pci folder: not a sysfs root (give /sys, a snapshot's sys/ folder, or --snapshot)",
                        self.sysfs.display()
                    );
                }
                (self.sysfs.clone(), self.proc.clone(), None)
            }
        };
        let live = self.snapshot.is_none() && self.lspci.is_empty() && sysfs == Path::new("/sys");
        let pci_origin = match (&self.snapshot, self.lspci.is_empty()) {
            (Some(s), _) => format!("snapshot {}", s.display()),
            (None, false) => format!(
                "--lspci {}",
                self.lspci
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (None, true) => sysfs.display().to_string(),
        };
        let kernel_log = match self.dmesg.as_ref().or(snapshot_dmesg.as_ref()) {
            // One line: `--dmesg FILE: not a regular file (a FIFO); …`.
            Some(f) => {
                kmsg::from_file(f).map_err(|e| anyhow::anyhow!("--dmesg {}: {e:#}", f.display()))?
            }
            None if live => kmsg::from_system(),
            None => kmsg::parse(
                "",
                kmsg::LogOrigin::Unavailable {
                    reason: if self.lspci.is_empty() {
                        "no kernel log given for this sysfs root (--dmesg FILE)".into()
                    } else {
                        "no kernel log given with --lspci (--dmesg FILE)".into()
                    },
                },
            ),
        };
        if let Some(out) = &self.capture {
            let n = capture::write(out, &sysfs, &proc, &kernel_log)?;
            crate::ui::status("Captured", format!("{} ({n} files)", out.display()));
            if self.json {
                // `--json` is JSON whatever the mode: the snapshot written and its file count.
                let doc = serde_json::json!({
                    "schema_version": SCHEMA_VERSION,
                    "snapshot": out.to_string_lossy(),
                    "files": n,
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                println!("{}", out.display());
            }
            return Ok(ExitCode::SUCCESS);
        }
        let mut libraries: Vec<library::Candidate> = self
            .library
            .iter()
            .map(|p| {
                if !p.is_file() {
                    anyhow::bail!("--library {}: no such file", p.display());
                }
                Ok(library::Candidate {
                    path: p.clone(),
                    found_via: "--library".into(),
                })
            })
            .collect::<anyhow::Result<_>>()?;
        if libraries.is_empty() && live && !self.no_library {
            libraries = library::discover();
        }
        let hip = if self.no_hip {
            HipProbe::NotRun {
                reason: "--no-hip".into(),
            }
        } else if !live {
            HipProbe::NotRun { reason: "not the live machine (--snapshot, --sysfs or --lspci): the HIP runtime would describe this machine instead".into() }
        } else if pci::list_devices(&sysfs).iter().any(|d| d.is_amd_gpu()) {
            hip::probe()
        } else {
            HipProbe::NotRun {
                reason: "no AMD GPU".into(),
            }
        };
        let installed_rocm = if live {
            std::fs::read_to_string("/opt/rocm/.info/version")
                .ok()
                .map(|s| s.trim().to_owned())
        } else {
            None
        };
        let src = Sources {
            sysfs,
            proc,
            kernel_log,
            logs: self.log.clone(),
            vm_configs: self.vm_config.clone(),
            lspci: self.lspci.clone(),
            pci_origin,
            libraries: if self.no_library { vec![] } else { libraries },
            hip,
            installed_rocm,
            live,
        };
        let report = diagnose(&src)?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", render::text(&report));
        }
        Ok(ExitCode::from(report.exit_code))
    }
}

/// Fail with one line naming `path` unless it is a folder (`--sysfs`, `--proc`).
fn require_dir(flag: &str, path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("{flag} {}: not a folder", path.display()),
        Err(e) => anyhow::bail!("{flag} {}: cannot open: {e}", path.display()),
    }
}

fn id_of(d: &PciDevice) -> String {
    format!("{:04x}:{:04x}", d.vendor, d.device)
}

fn hop_for(
    d: &PciDevice,
    is_gpu: bool,
    result: &PathResult,
    in_qemu: bool,
    id_unknown: bool,
) -> Hop {
    let role = match (&d.config, is_gpu) {
        (ConfigView::Express { cap }, true) => format!("GPU ({})", cap.port_type.name()),
        (_, true) => "GPU".into(),
        (ConfigView::Express { cap }, false) => cap.port_type.name().into(),
        (ConfigView::NotExpress, false) => "PCI bridge (conventional)".into(),
        _ => "bridge".into(),
    };
    let status = match (&d.config, result) {
        (ConfigView::Truncated { len }, _) => {
            format!("unreadable: only {len} bytes of config space (run as root)")
        }
        (ConfigView::Incomplete { reason }, _) => format!("not shown: {reason}"),
        (_, PathResult::Malformed { at, reason }) if *at == d.bdf => {
            format!("unreadable: malformed config space: {reason}")
        }
        (_, PathResult::Incomplete { at, reason }) if *at == d.bdf => {
            format!("path not shown: {reason}")
        }
        (_, PathResult::Breaks { hop, problem }) if *hop == d.bdf => {
            format!("BREAKS: {}", problem.describe())
        }
        (_, PathResult::DeviceRefused { reason }) if is_gpu => {
            format!("REFUSED by the kernel: {reason}")
        }
        (ConfigView::Express { cap }, _) if !is_gpu => match cap.port_type {
            PortType::RootPort | PortType::SwitchUpstream | PortType::SwitchDownstream => {
                "ok".into()
            }
            _ => "not checked by the kernel".into(),
        },
        (ConfigView::Express { cap }, _) => {
            if cap.req_enabled() {
                "AtomicOp requester enabled".into()
            } else {
                "AtomicOp requester not enabled".into()
            }
        }
        (ConfigView::NotExpress, _) => "not checked by the kernel".into(),
        (ConfigView::Malformed { reason }, _) => {
            format!("unreadable: malformed config space: {reason}")
        }
    };
    Hop {
        bdf: d.bdf,
        id: if id_unknown {
            format!("{:04x}:????", d.vendor)
        } else {
            id_of(d)
        },
        role,
        atomics: d.exp().map(|c| c.lspci_text()),
        status,
        emulated: if in_qemu {
            pci::qemu_root_port_name(d).map(str::to_owned)
        } else {
            None
        },
    }
}

/// A short word for a PCI class code (`audio`, `GPU`).
fn class_word(class: u32) -> String {
    match class >> 8 {
        0x0403 => "audio".into(),
        0x0300 | 0x0302 | 0x0380 => "GPU".into(),
        0x0604 => "PCI bridge".into(),
        c => format!("class {c:04x}"),
    }
}

/// Gather the evidence from `src` and decide.
///
/// Errors: a `--log`, `--vm-config` or `--lspci` file cannot be read or is malformed (one line
/// naming it).
pub fn diagnose(src: &Sources) -> anyhow::Result<Report> {
    let topo = if src.lspci.is_empty() {
        None
    } else {
        Some(lspci::read_files(&src.lspci)?)
    };
    let hv = match &topo {
        Some(t) => t.hypervisor(),
        None => vm::detect(&src.sysfs, &src.proc),
    };
    let all = match &topo {
        Some(t) => t.devices.clone(),
        None => pci::list_devices(&src.sysfs),
    };
    let kfd = match &topo {
        Some(_) => None,
        None => kfd::read_topology(&src.sysfs),
    };
    let klog = &src.kernel_log;
    let logs: Vec<LogTriage> = src
        .logs
        .iter()
        .map(|p| {
            triage::triage_file(p).map_err(|e| anyhow::anyhow!("--log {}: {e:#}", p.display()))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut vm_configs: Vec<ProxmoxConfig> = src
        .vm_configs
        .iter()
        .map(|p| {
            vm::parse_proxmox(p).map_err(|e| anyhow::anyhow!("--vm-config {}: {e:#}", p.display()))
        })
        .collect::<anyhow::Result<_>>()?;
    // On the host, the slot's functions come from its sysfs, not from assumption.
    if topo.is_none() && !hv.is_vm {
        let functions = |slot: &str| -> Option<Vec<String>> {
            let b = Bdf::parse(&format!("{slot}.0"))?;
            let f: Vec<String> = all
                .iter()
                .filter(|d| d.bdf.with_func(0) == b)
                .map(|d| format!("{} ({}, {})", d.bdf, id_of(d), class_word(d.class)))
                .collect();
            (!f.is_empty()).then_some(f)
        };
        for c in &mut vm_configs {
            c.check_host(&functions);
        }
    }
    let gfx_targets: Vec<String> = {
        let mut v: Vec<String> = kfd
            .iter()
            .flatten()
            .map(|g| g.gfx.clone())
            .filter(|g| g != "unknown")
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let libraries: Vec<LibraryScan> = if gfx_targets.is_empty() {
        vec![]
    } else {
        src.libraries
            .iter()
            .cloned()
            .map(|c| library::scan(c, &gfx_targets))
            .collect()
    };
    let hip_devices = match &src.hip {
        HipProbe::Ran { devices, .. } => devices.clone(),
        _ => vec![],
    };

    let id_unknown = |d: &PciDevice| {
        topo.as_ref()
            .is_some_and(|t| t.unknown_ids.contains(&d.bdf))
    };
    let mut gpus = vec![];
    for gpu in all.iter().filter(|d| d.is_amd_gpu()) {
        let upstream = match &topo {
            Some(t) => t.upstream(gpu),
            None => pci::upstream_bridges(gpu).map_err(|e| format!("{e:#}")),
        };
        let (bridges, mut result) = match upstream {
            Ok(b) => {
                let r = pci::atomic_ops_to_root(gpu, &b);
                (b, r)
            }
            Err(why) => match pci::atomic_ops_to_root(gpu, &[]) {
                PathResult::Passes { .. } => (
                    vec![],
                    PathResult::Incomplete {
                        at: gpu.bdf,
                        reason: why,
                    },
                ),
                other => (vec![], other),
            },
        };
        if hv.is_vm {
            if let Some(r) = pci::guest_layout_refusal(gpu, &bridges, &result) {
                result = r;
            }
        }
        let mut path: Vec<Hop> = bridges
            .iter()
            .rev()
            .map(|b| hop_for(b, false, &result, hv.is_qemu, id_unknown(b)))
            .collect();
        path.push(hop_for(gpu, true, &result, hv.is_qemu, id_unknown(gpu)));
        let node = kfd.iter().flatten().find(|n| n.bdf == gpu.bdf);
        let kfd_rejected = klog
            .kfd_rejects
            .get(&format!("{:04x}:{:04x}", gpu.vendor, gpu.device))
            .cloned();
        let hipdev = hip_devices
            .iter()
            .find(|h| Bdf::parse(&h.pci_bus_id) == Some(gpu.bdf));
        let siblings: Vec<String> = all
            .iter()
            .filter(|d| d.bdf != gpu.bdf && d.bdf.with_func(0) == gpu.bdf.with_func(0))
            .map(|d| format!("{} ({}, {})", d.bdf, id_of(d), class_word(d.class)))
            .collect();
        let guest = hv.is_vm.then(|| {
            let root = bridges
                .iter()
                .find(|b| b.exp().is_some_and(|c| c.port_type == PortType::RootPort));
            let multifunction = gpu.multifunction_header || !siblings.is_empty();
            let devfn0 = gpu.bdf.dev == 0 && gpu.bdf.func == 0;
            let root_lacks = matches!(
                result,
                PathResult::Breaks {
                    problem: HopProblem::RootPortNoCompleter,
                    ..
                }
            );
            let directly_under_root_port = bridges
                .first()
                .is_some_and(|b| b.exp().is_some_and(|c| c.port_type == PortType::RootPort));
            let mut blockers = vec![];
            if matches!(result, PathResult::DeviceRefused { .. })
                && matches!(gpu.config, ConfigView::NotExpress)
            {
                blockers.push(VmBlocker::NoPcieCapability);
            }
            if hv.is_qemu && root.is_some() && root_lacks {
                if let (Some((a, b)), Some(m)) = (hv.qemu_machine_version, &hv.product_version) {
                    if (a, b) < (8, 1) {
                        blockers.push(VmBlocker::QemuBefore81 { machine: m.clone() });
                    }
                }
                if multifunction {
                    blockers.push(VmBlocker::Multifunction);
                } else if !devfn0 {
                    blockers.push(VmBlocker::NotAtDevfn0);
                } else if !directly_under_root_port {
                    blockers.push(VmBlocker::BehindSwitch);
                }
            }
            GuestView {
                multifunction,
                siblings: siblings.clone(),
                devfn0,
                behind_root_port: root.is_some(),
                directly_under_root_port,
                emulated_root_port: root.and_then(pci::qemu_root_port_name).map(str::to_owned),
                qemu_rule_blocks: hv.is_qemu
                    && root.is_some()
                    && root_lacks
                    && (multifunction || !devfn0 || !directly_under_root_port),
                blockers,
            }
        });
        let id_known = topo
            .as_ref()
            .map_or(true, |t| !t.unknown_ids.contains(&gpu.bdf));
        let (gfx, gfx_source) = match node {
            Some(n) if n.gfx != "unknown" => (Some(n.gfx.clone()), Some("KFD topology".to_owned())),
            _ => match ids::gfx_for_device(gpu.device).filter(|_| id_known) {
                Some(g) => (Some(g.to_owned()), Some(format!("PCI ID {}", id_of(gpu)))),
                None => match topo
                    .as_ref()
                    .and_then(|t| t.names.get(&gpu.bdf))
                    .and_then(|n| ids::gfx_for_chip_name(n))
                {
                    Some(g) => (
                        Some(g.to_owned()),
                        Some("chip name in the lspci text".to_owned()),
                    ),
                    None => (
                        node.map(|n| n.gfx.clone()),
                        node.map(|_| "KFD topology".to_owned()),
                    ),
                },
            },
        };
        let mut g = GpuReport {
            bdf: gpu.bdf,
            id: if id_known {
                id_of(gpu)
            } else {
                format!("{:04x}:????", gpu.vendor)
            },
            integrated: node.is_some_and(|n| n.integrated)
                || gfx.as_deref().is_some_and(kfd::is_known_igpu),
            gfx: gfx.clone(),
            gfx_source,
            kfd_node: node.map(|n| n.node),
            path,
            req_en: gpu.exp().map(|c| c.req_enabled()),
            kernel_message: klog.atomics_not_supported.get(&gpu.bdf).cloned(),
            // The log speaks for this GPU only if amdgpu logged something for its address.
            kernel_log_usable: klog.usable() && klog.amdgpu_bdfs.contains(&gpu.bdf),
            kfd_atomics: node.and_then(|n| n.atomics()),
            kfd_link_flags: node
                .map(|n| n.links_to_cpu.iter().map(|l| l.flags).collect())
                .unwrap_or_default(),
            kfd_rejected,
            hip_host_native_atomic: hipdev.map(|h| h.host_native_atomic_supported),
            hip_ordinal: hipdev.map(|h| h.ordinal),
            guest,
            library_states: gfx
                .as_ref()
                .filter(|_| node.is_some())
                .map(|gfx| {
                    libraries
                        .iter()
                        .filter_map(|l| {
                            l.state(gfx)
                                .map(|s| (l.candidate.path.display().to_string(), s.clone()))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            path_result: result,
            verdict: VerdictKind::Inconclusive,
            reasons: vec![],
        };
        decide_gpu(&mut g, &hv);
        gpus.push(g);
    }
    let pci_functions = all.len();
    Ok(decide_overall(
        src,
        hv,
        gpus,
        kfd.is_some(),
        libraries,
        logs,
        vm_configs,
        pci_functions,
    ))
}

/// One line per VM blocker, for a GPU's reasons.
fn blocker_reason(b: &VmBlocker, v: &GuestView) -> String {
    match b {
        VmBlocker::Multifunction => format!(
            "QEMU sets AtomicOp completer bits on the emulated root port only for a single-function device at devfn 0 directly below it (QEMU >= 8.1); this GPU is passed as a multifunction device{}",
            if v.siblings.is_empty() { String::new() } else { format!(" (sibling functions: {})", v.siblings.join(", ")) }
        ),
        VmBlocker::NotAtDevfn0 => "QEMU sets AtomicOp completer bits only for a device at devfn 0 below its root port (QEMU >= 8.1); this GPU is not at devfn 0 (use addr=0x0 on its own pcie-root-port)".into(),
        VmBlocker::BehindSwitch => "QEMU sets AtomicOp completer bits only for a device directly below a root port (QEMU >= 8.1); this GPU is behind an emulated switch (attach it directly to a pcie-root-port)".into(),
        VmBlocker::QemuBefore81 { machine } => format!(
            "the VM's machine type is {machine}: QEMU before 8.1 never advertises AtomicOp completion on an emulated root port, whatever the host has; the fix is a QEMU >= 8.1 host with the GPU passed as a single function on a PCIe root port; nothing on the card or in the host needs changing for this"
        ),
        VmBlocker::NoPcieCapability => "the VM gives this GPU no PCI Express capability: that is normal for a conventional PCI layout (i440fx, or q35 without pcie=1), not a malformed config space; the kernel enables AtomicOps only for PCIe devices, so the fix is `pcie=1` on a q35 machine".into(),
    }
}

/// The per-GPU decision (the decision table of this module's docs).
fn decide_gpu(g: &mut GpuReport, hv: &Hypervisor) {
    let mut missing = vec![];
    let mut present = vec![];
    match &g.path_result {
        PathResult::Breaks { hop, problem } => missing.push(format!("PCIe path breaks at {hop}: {}", problem.describe())),
        PathResult::DeviceRefused { reason } => missing.push(format!("the kernel refuses AtomicOps for {}: {reason}", g.bdf)),
        PathResult::Passes { no_root_port } => {
            present.push(if *no_root_port {
                "no root port above the GPU (root bus / RCiEP): the kernel enables AtomicOps without checking anything".to_owned()
            } else {
                "PCIe path passes the kernel's rule (root port completes 32+64-bit, switch ports route, no egress blocking)".to_owned()
            });
            if g.req_en == Some(false) {
                g.reasons.push("note: the GPU shows ReqEn- although the path passes (amdgpu not bound yet?)".into());
            }
        }
        PathResult::Malformed { at, reason } => g
            .reasons
            .push(format!("PCIe path cannot be judged: {at} has a malformed config space ({reason})")),
        PathResult::Incomplete { at, reason } => g
            .reasons
            .push(format!("PCIe path cannot be judged from the text: {at}: {reason}")),
        PathResult::Unreadable { at, len } => g.reasons.push(format!(
            "PCIe path unreadable: {at} gives only {len} bytes of config space without root; run as root: sudo rcclfix doctor"
        )),
    }
    if let Some(m) = &g.kernel_message {
        missing.push(format!("kernel log: {m}"));
    } else if g.kernel_log_usable {
        present.push("kernel log: amdgpu is silent about AtomicOps for this GPU".into());
    }
    match g.kfd_atomics {
        Some(false) => missing.push(format!(
            "KFD io_link flags {:?}: NoAtomics32/64 set (bits 2/3)",
            g.kfd_link_flags
        )),
        Some(true) => present.push(format!(
            "KFD io_link flags {:?}: atomics allowed",
            g.kfd_link_flags
        )),
        None => {}
    }
    match g.hip_host_native_atomic {
        Some(0) => missing.push("HIP runtime: hostNativeAtomicSupported = 0".into()),
        Some(_) => present.push("HIP runtime: hostNativeAtomicSupported = 1".into()),
        None => {}
    }
    if let Some(r) = &g.kfd_rejected {
        g.verdict = VerdictKind::NotAffected;
        g.reasons.push(format!("not this bug: KFD rejected this GPU ({r}); it is not usable for compute at all (hardware/firmware requirement)"));
        return;
    }
    if !missing.is_empty() {
        let clean_libs = !g.library_states.is_empty()
            && g.library_states
                .iter()
                .all(|(_, s)| matches!(s, TargetState::Clean { .. }));
        g.reasons.extend(missing);
        if clean_libs {
            g.verdict = VerdictKind::NotAffected;
            g.reasons.push(format!(
                "not this bug: no AtomicOps, but every librccl found scans clean for {} (no kernel declares hidden_hostcall_buffer); confirm which `Librccl path` ran (NCCL_DEBUG=INFO)",
                g.gfx.as_deref().unwrap_or("this GPU")
            ));
            return;
        }
        for (p, s) in &g.library_states {
            if let TargetState::Declares { kernels } = s {
                g.reasons.push(format!(
                    "{p}: {} kernels declare hidden_hostcall_buffer for {}",
                    kernels.len(),
                    g.gfx.as_deref().unwrap_or("?")
                ));
            }
        }
        let vm_fix = g.guest.as_ref().is_some_and(|v| !v.blockers.is_empty());
        g.verdict = if vm_fix {
            VerdictKind::FixVmConfig
        } else {
            VerdictKind::Rebuild
        };
        if let Some(v) = &g.guest {
            if vm_fix {
                for b in &v.blockers {
                    g.reasons.push(blocker_reason(b, v));
                }
            } else if hv.is_qemu && v.behind_root_port {
                g.reasons.push("the GPU is passed as a single function at devfn 0, yet the emulated root port has no completer: QEMU is older than 8.1, or the host's own path fails (run `rcclfix doctor` on the host); a guest cannot change its root port".into());
            } else if hv.is_vm {
                g.reasons.push(format!(
                    "{}: the guest root port's bits decide and a guest cannot change them",
                    hv.name.as_deref().unwrap_or("hypervisor")
                ));
            }
        }
        return;
    }
    if g.path_result.passes() || !present.is_empty() {
        g.verdict = VerdictKind::NotAffected;
        g.reasons.extend(present);
        if !g.path_result.passes() {
            g.reasons.push(
                "the PCIe path itself was not readable; the kernel's own result above decides"
                    .into(),
            );
        }
        return;
    }
    g.verdict = VerdictKind::Inconclusive;
    if !g.kernel_log_usable {
        g.reasons.push("kernel log has no amdgpu lines (empty, restricted by kernel.dmesg_restrict, or wrapped)".into());
    }
}

fn aggregate(gpus: &[GpuReport]) -> Option<VerdictKind> {
    let affected: Vec<&GpuReport> = gpus
        .iter()
        .filter(|g| matches!(g.verdict, VerdictKind::FixVmConfig | VerdictKind::Rebuild))
        .collect();
    if !affected.is_empty() {
        return Some(
            if affected
                .iter()
                .all(|g| g.verdict == VerdictKind::FixVmConfig)
            {
                VerdictKind::FixVmConfig
            } else {
                VerdictKind::Rebuild
            },
        );
    }
    if gpus.iter().any(|g| g.verdict == VerdictKind::Inconclusive) {
        return Some(VerdictKind::Inconclusive);
    }
    (!gpus.is_empty()).then_some(VerdictKind::NotAffected)
}

/// Parse `X.Y.Z` out of `/opt/rocm/.info/version` (`7.2.1-81`).
fn installed_release(s: &str) -> Option<String> {
    let v: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (v.matches('.').count() >= 1).then(|| v.trim_end_matches('.').to_owned())
}

/// The gfx targets a rebuild must build: the affected GPUs' (KFD, PCI ID, lspci name), else the
/// ones the logs name; integrated GPUs only when nothing else is there.
fn rebuild_targets(gpus: &[GpuReport], logs: &[LogTriage], notes: &mut Vec<String>) -> Vec<String> {
    let affected: Vec<&GpuReport> = gpus
        .iter()
        .filter(|g| matches!(g.verdict, VerdictKind::Rebuild | VerdictKind::FixVmConfig))
        .collect();
    let mut t: Vec<String> = affected.iter().filter_map(|g| g.gfx.clone()).collect();
    let unknown: Vec<String> = affected
        .iter()
        .filter(|g| g.gfx.is_none())
        .map(|g| format!("{} ({})", g.bdf, g.id))
        .collect();
    if !unknown.is_empty() {
        notes.push(format!(
            "gfx target unknown for {}: add it to --targets (`rocminfo | grep gfx`)",
            unknown.join(", ")
        ));
    }
    if t.is_empty() {
        t = logs
            .iter()
            .flat_map(|l| l.versions.gfx.iter().cloned())
            .collect();
        if t.iter().any(|g| !kfd::is_known_igpu(g)) {
            t.retain(|g| !kfd::is_known_igpu(g));
        }
    }
    let mut seen = vec![];
    t.retain(|g| {
        let new = !seen.contains(g);
        seen.push(g.clone());
        new
    });
    t
}

/// The kernel and its library, for the outside-RCCL headline and actions.
fn outside_kernels(logs: &[LogTriage]) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = vec![];
    for l in logs {
        for r in &l.refusals {
            if let (Some(k), triage::KernelOwner::Other { library }) = (&r.kernel, &r.owner) {
                if !out.iter().any(|(x, _)| x == k) {
                    out.push((k.clone(), library.clone()));
                }
            }
        }
    }
    out
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_owned()
    }
}

#[allow(clippy::too_many_arguments)]
fn decide_overall(
    src: &Sources,
    hv: Hypervisor,
    gpus: Vec<GpuReport>,
    kfd_present: bool,
    libraries: Vec<LibraryScan>,
    logs: Vec<LogTriage>,
    vm_configs: Vec<ProxmoxConfig>,
    pci_functions: usize,
) -> Report {
    let mut evidence = vec![];
    let mut actions = vec![];
    let mut notes = vec![];
    let platform = aggregate(&gpus);
    let log_class = logs.iter().map(|l| l.class).min_by_key(|c| c.weight());
    let log_declaring_release = logs.iter().find_map(|l| {
        let r = l.rocm.as_ref()?;
        l.shipped_declares
            .filter(|d| d.starts_with("yes"))
            .map(|_| r.release.clone())
    });
    let different: Vec<&str> = logs
        .iter()
        .flat_map(|l| l.different_causes.iter().copied())
        .collect();

    for l in &logs {
        for f in l
            .findings
            .iter()
            .filter(|f| f.meaning != triage::Meaning::Info && f.meaning != triage::Meaning::Noise)
            .take(8)
        {
            evidence.push(format!(
                "{}:{}: {} — {}",
                l.path, f.line_no, f.line, f.explanation
            ));
        }
        for r in l.refusals.iter().take(4) {
            let who = match &r.owner {
                triage::KernelOwner::Rccl { why } => format!("RCCL's ({why})"),
                triage::KernelOwner::Other { library: Some(lib) } => format!("not RCCL's: {lib}"),
                triage::KernelOwner::Other { library: None } => {
                    "not RCCL's (a kernel of the program or of a library the log does not name)"
                        .into()
                }
                triage::KernelOwner::Unknown => "whose, the log does not say".into(),
            };
            evidence.push(format!(
                "{}:{}: {} {}: {who}",
                l.path,
                r.line_no,
                if r.confirmed {
                    "refused kernel"
                } else {
                    "hipErrorIllegalState without the runtime's refusal line, kernel"
                },
                r.kernel
                    .as_deref()
                    .map(|k| short(k, 160))
                    .unwrap_or_else(|| "not named (AMD_LOG_LEVEL=3 prints ShaderName)".into()),
            ));
        }
        for h in l.hints.iter().take(6) {
            evidence.push(format!(
                "{}:{}: {} {} ({})",
                l.path,
                h.line_no,
                if h.kind == triage::HintKind::Rccl {
                    "RCCL"
                } else {
                    "ROCm"
                },
                h.value,
                h.source
            ));
        }
        notes.extend(l.notes.iter().cloned());
        if l.class == LogClass::ConsistentWithRefusal {
            notes.push(format!("{}: the log does not show the runtime's refusal line itself (`Pcie atomics not enabled, hostcall not supported`); AMD_LOG_LEVEL=1 prints it, AMD_LOG_LEVEL=3 also the kernel", l.path));
        }
        if l.o0_build && l.class == LogClass::RefusalOutsideRccl {
            notes.push(format!("{}: the log shows a -O0 build: at -O0 every kernel declares hidden_hostcall_buffer (the pass that drops it does not run); build with -O1 or higher", l.path));
        }
    }
    for g in gpus
        .iter()
        .filter(|g| g.verdict != VerdictKind::NotAffected || gpus.len() == 1)
    {
        for r in &g.reasons {
            evidence.push(format!("{}: {r}", g.bdf));
        }
    }

    // The Proxmox host view: problems in the config, unless the host path of the passed GPU fails.
    let vm_cfg_problems = vm_configs.iter().any(|c| c.has_problems());
    let refusal_here = matches!(
        log_class,
        Some(
            LogClass::ConfirmedRefusal
                | LogClass::RefusalOutsideRccl
                | LogClass::RefusalUnattributed
        )
    );

    let verdict = match (platform, log_class) {
        (Some(VerdictKind::FixVmConfig), _) => VerdictKind::FixVmConfig,
        (Some(VerdictKind::Rebuild), Some(LogClass::RefusalOutsideRccl)) => {
            VerdictKind::HostcallOutsideRccl
        }
        (Some(VerdictKind::Rebuild), _) => VerdictKind::Rebuild,
        (Some(VerdictKind::NotAffected), _) if refusal_here => {
            notes.push("the log shows a hostcall refusal, but every GPU here has AtomicOps: was the log taken on another machine or inside a VM guest? Run doctor there".into());
            if vm_cfg_problems {
                VerdictKind::FixVmConfig
            } else {
                VerdictKind::Inconclusive
            }
        }
        (Some(VerdictKind::NotAffected), _) if vm_cfg_problems => VerdictKind::FixVmConfig,
        (Some(VerdictKind::NotAffected), Some(LogClass::ConsistentWithRefusal)) => {
            notes.push("not this bug: AtomicOps are present everywhere, so the HIP error in the log has another cause (transport/topology, iGPU selection, driver)".into());
            VerdictKind::NotAffected
        }
        (Some(VerdictKind::NotAffected), _) => VerdictKind::NotAffected,
        (Some(VerdictKind::Inconclusive), Some(LogClass::ConfirmedRefusal)) => {
            notes.push("the log confirms the refusal; the platform path could not be read, so whether a VM setting fixes it is unknown: run as root: sudo rcclfix doctor".into());
            VerdictKind::Rebuild
        }
        (Some(VerdictKind::Inconclusive), Some(LogClass::RefusalOutsideRccl)) => {
            VerdictKind::HostcallOutsideRccl
        }
        (Some(VerdictKind::Inconclusive), Some(LogClass::DifferentProblem)) => {
            VerdictKind::NotAffected
        }
        (Some(_), _) => VerdictKind::Inconclusive,
        (None, Some(LogClass::ConfirmedRefusal | LogClass::ConsistentWithRefusal)) => {
            notes.push("platform not checked (no AMD GPU examined): run `rcclfix doctor` on the affected machine, pass its snapshot with --snapshot, or its `sudo lspci -vvv` with --lspci, to learn whether a VM setting fixes it instead".into());
            if vm_cfg_problems {
                VerdictKind::FixVmConfig
            } else {
                VerdictKind::Rebuild
            }
        }
        (None, Some(LogClass::RefusalOutsideRccl)) => VerdictKind::HostcallOutsideRccl,
        (None, Some(LogClass::DifferentProblem)) => VerdictKind::NotAffected,
        (None, _) if vm_cfg_problems => VerdictKind::FixVmConfig,
        (
            None,
            Some(LogClass::RefusalUnattributed | LogClass::Inconclusive | LogClass::NoSignature),
        ) => {
            if let Some(r) = &log_declaring_release {
                notes.push(format!(
                    "ROCm {r}'s shipped RCCL declares hidden_hostcall_buffer, so it is refused on a GPU without PCIe AtomicOps, at once and with an error; this log shows no such refusal, and no GPU was examined: the release alone proves nothing"
                ));
            }
            VerdictKind::Inconclusive
        }
        (None, None) => VerdictKind::NotAffected,
    };

    // Rebuild advice: the release from the logs, else the installed ROCm.
    let (rocm, rccl) = logs
        .iter()
        .find_map(|l| {
            (l.rocm.is_some()
                || l.versions.rccl.is_some()
                || l.hints.iter().any(|h| h.kind == triage::HintKind::Rccl))
            .then(|| {
                (
                    l.rocm.as_ref().map(|r| r.release.clone()),
                    l.hints
                        .iter()
                        .filter(|h| h.kind == triage::HintKind::Rccl)
                        .min_by_key(|h| (h.rank, h.line_no))
                        .map(|h| h.value.clone())
                        .or_else(|| l.versions.rccl.clone()),
                )
            })
        })
        .unwrap_or_else(|| {
            (
                src.installed_rocm.as_deref().and_then(installed_release),
                None,
            )
        });
    let targets = rebuild_targets(&gpus, &logs, &mut notes);
    let advice = triage::rebuild_advice(rocm.as_deref(), rccl.as_deref(), &targets);
    let rebuild = (verdict == VerdictKind::Rebuild || rocm.is_some() || rccl.is_some())
        .then(|| advice.clone());
    let outside = outside_kernels(&logs);

    let no_gpu = gpus.is_empty();
    let headline = match verdict {
        VerdictKind::NotAffected if no_gpu && logs.is_empty() && vm_configs.is_empty() => format!(
            "not affected: no AMD GPU found ({pci_functions} PCI function{} in {})",
            if pci_functions == 1 { "" } else { "s" },
            src.pci_origin
        ),
        VerdictKind::NotAffected if !different.is_empty() => format!(
            "not affected by the hostcall refusal — a different problem: {}{}",
            different.join(", "),
            if no_gpu { " (from the log only; no GPU examined)" } else { "" }
        ),
        VerdictKind::NotAffected if gpus.iter().any(|g| g.reasons.iter().any(|r| r.starts_with("not this bug"))) => {
            "not affected by the hostcall refusal (not this bug; see the GPU notes)".to_owned()
        }
        VerdictKind::NotAffected if no_gpu => {
            "no AtomicOps problem in the VM configuration (no GPU examined here: run `rcclfix doctor` in the guest too)".to_owned()
        }
        VerdictKind::NotAffected => format!(
            "not affected: {} has a PCIe AtomicOps path (hostcall kernels run)",
            if gpus.len() == 1 { "the one AMD GPU examined".to_owned() } else { format!("each of the {} AMD GPUs examined", gpus.len()) }
        ),
        VerdictKind::FixVmConfig => {
            let blockers: Vec<&VmBlocker> = gpus.iter().filter_map(|g| g.guest.as_ref()).flat_map(|v| v.blockers.iter()).collect();
            if blockers.iter().any(|b| matches!(b, VmBlocker::QemuBefore81 { .. })) {
                "affected — fix the VM: its QEMU machine type predates 8.1, which never advertises AtomicOp completion (no rebuild needed)".to_owned()
            } else if blockers.iter().any(|b| matches!(b, VmBlocker::NoPcieCapability)) {
                "affected — fix the VM configuration: give the GPU a PCIe slot (q35 with pcie=1; no rebuild needed)".to_owned()
            } else {
                "affected — fix the VM configuration: pass each GPU as function .0 only (no rebuild needed)".to_owned()
            }
        }
        VerdictKind::Rebuild => match &advice.command {
            Some(c) => format!("affected — rebuild RCCL: {c}"),
            None if advice.rocm.is_none() && advice.rccl.is_none() => {
                format!("affected — rebuild RCCL; {}", triage::RELEASE_UNKNOWN)
            }
            None => format!(
                "affected — rebuild RCCL; {}",
                advice.notes.first().cloned().unwrap_or_else(|| triage::RELEASE_UNKNOWN.into())
            ),
        },
        VerdictKind::HostcallOutsideRccl => {
            let (k, lib) = outside
                .first()
                .map(|(k, l)| (short(k, 100), l.clone()))
                .unwrap_or_else(|| ("a kernel".into(), None));
            format!(
                "affected — {k} ({}) needs hostcall: rebuilding RCCL will not help; a PCIe AtomicOps path for the GPU will",
                lib.unwrap_or_else(|| "not an RCCL kernel".into())
            )
        }
        VerdictKind::Inconclusive => {
            if gpus.iter().any(|g| matches!(g.path_result, PathResult::Unreadable { .. })) {
                "inconclusive — run this as root: sudo rcclfix doctor".to_owned()
            } else if gpus.iter().any(|g| matches!(g.path_result, PathResult::Incomplete { .. })) {
                "inconclusive — the pasted lspci text does not show the whole PCIe path (see below)".to_owned()
            } else if no_gpu && log_class == Some(LogClass::RefusalUnattributed) {
                "inconclusive — the runtime refused a hostcall kernel, but the log does not say whose (rerun with AMD_LOG_LEVEL=3)".to_owned()
            } else if no_gpu && log_class == Some(LogClass::Inconclusive) {
                "inconclusive — the log has an error many causes produce (such as `unhandled cuda error`) but not the refusal signature, and no GPU was examined".to_owned()
            } else if no_gpu && !logs.is_empty() {
                "inconclusive — the log shows no hostcall refusal, and no GPU was examined".to_owned()
            } else {
                "inconclusive — not enough evidence (see below)".to_owned()
            }
        }
    };

    match verdict {
        VerdictKind::FixVmConfig => {
            let mut fixed_any = false;
            for c in &vm_configs {
                for h in c.hostpci.iter().filter(|h| !h.problems.is_empty()) {
                    for p in &h.problems {
                        evidence.push(format!("{}: {}: {p}", c.path, h.key));
                    }
                    if let Some(f) = &h.fixed {
                        actions.push(format!(
                            "{}: replace `{}: {}` with `{f}`",
                            c.path, h.key, h.value
                        ));
                        fixed_any = true;
                    }
                }
                if !c.q35 {
                    actions.push(format!("{}: set `machine: q35`", c.path));
                }
            }
            let guest_blockers: Vec<&VmBlocker> = gpus
                .iter()
                .filter_map(|g| g.guest.as_ref())
                .flat_map(|v| v.blockers.iter())
                .collect();
            if let Some(VmBlocker::QemuBefore81 { machine }) = guest_blockers
                .iter()
                .find(|b| matches!(b, VmBlocker::QemuBefore81 { .. }))
            {
                actions.extend(vm::qemu_upgrade_fix(machine));
            }
            if guest_blockers
                .iter()
                .any(|b| matches!(b, VmBlocker::NoPcieCapability))
            {
                actions.extend(vm::pcie_layout_fix());
            }
            let slot_fix = guest_blockers.iter().any(|b| {
                matches!(
                    b,
                    VmBlocker::Multifunction | VmBlocker::NotAtDevfn0 | VmBlocker::BehindSwitch
                )
            }) || (guest_blockers.is_empty() && vm_cfg_problems);
            if slot_fix {
                let slot = vm_configs
                    .iter()
                    .flat_map(|c| c.hostpci.iter())
                    .flat_map(|h| h.hosts.iter())
                    .next()
                    .map(|h| h.split('.').next().unwrap_or(h).to_owned());
                // Which functions stay behind: the host's sysfs (--vm-config on the host), else the
                // guest's view of the GPU's slot.
                let host_funcs: Vec<String> = vm_configs
                    .iter()
                    .flat_map(|c| c.hostpci.iter())
                    .flat_map(|h| h.host_functions.iter())
                    .filter(|f| !f.contains(".0 ("))
                    .cloned()
                    .collect();
                let guest_sibs: Vec<String> = gpus
                    .iter()
                    .filter_map(|g| g.guest.as_ref())
                    .flat_map(|v| v.siblings.iter().cloned())
                    .collect();
                let left = if !host_funcs.is_empty() {
                    Some(host_funcs)
                } else if !guest_sibs.is_empty() {
                    Some(guest_sibs)
                } else {
                    None
                };
                let lines = vm::proxmox_fix(slot.as_deref(), left.as_deref());
                actions.extend(lines.into_iter().skip(usize::from(fixed_any)));
            }
            actions.push("then rerun `rcclfix doctor` in the guest: the root port should show 32bit+ 64bit+ and the GPU ReqEn+; stock RCCL then works".into());
        }
        VerdictKind::Rebuild => {
            let adv = &advice;
            match &adv.command {
                Some(c) => actions.push(c.clone()),
                None => actions.push(format!(
                    "rcclfix build --list, then rcclfix build --tag <the recipe for your ROCm release>{}",
                    if adv.targets.is_empty() { String::new() } else { format!(" --targets {}", adv.targets.join(",")) }
                )),
            }
            actions.extend(adv.notes.iter().cloned());
            if adv.rocm.is_none() && adv.rccl.is_none() {
                actions.push("the release shows in `cat /opt/rocm/.info/version`, in NCCL_DEBUG=INFO's `RCCL version` line, or in torch's version (`python -c 'import torch; print(torch.__version__)'`, e.g. 2.9.1+rocm7.2); rerun doctor with that output as --log".into());
            }
            actions.push("then: rcclfix scan <built librccl> (expect 0 declaring kernels), rcclfix verify, rcclfix package".into());
            if gpus.iter().any(|g| g.verdict == VerdictKind::NotAffected)
                && gpus.iter().any(|g| g.verdict == VerdictKind::Rebuild)
            {
                actions.push("alternative: only some slots lack AtomicOps; moving the affected card to a CPU-attached slot avoids the rebuild".into());
            }
            if gpus.iter().any(|g| g.guest.is_some()) {
                actions.push("in a VM: check the VM configuration first (pass the GPU as function .0 on a q35 pcie=1 root port, QEMU >= 8.1) — stock RCCL then works if the host path passes".into());
            }
        }
        VerdictKind::HostcallOutsideRccl => {
            for (k, lib) in outside.iter().take(4) {
                actions.push(format!(
                    "the refused kernel {} belongs to {}: `rcclfix scan` that file (a .so, an executable, a .whl) to list its kernels that declare hidden_hostcall_buffer; rebuilding RCCL will not help",
                    short(k, 160),
                    lib.as_deref().unwrap_or("your program or a library the log does not name")
                ));
            }
            actions.push("the platform fix helps every library: give the GPU a PCIe AtomicOps path (a CPU-attached slot; in a VM, the GPU as a single function on a q35 pcie=1 root port with QEMU >= 8.1); check it with `sudo rcclfix doctor` on that machine".into());
            actions.push("or rebuild the library that owns the kernel without hostcall users (no device printf/assert, NDEBUG, -O1 or higher)".into());
        }
        VerdictKind::Inconclusive => {
            if gpus
                .iter()
                .any(|g| matches!(g.path_result, PathResult::Unreadable { .. }))
            {
                actions.push(
                    "sudo rcclfix doctor   (reading PCI config space beyond 64 bytes needs root)"
                        .into(),
                );
            }
            if gpus
                .iter()
                .any(|g| matches!(g.path_result, PathResult::Incomplete { .. }))
            {
                actions.push("paste the whole `sudo lspci -vvv` (and `lspci -tv`) of that machine: rcclfix doctor --lspci lspci.txt".into());
            }
            if !no_gpu && !src.kernel_log.usable() {
                actions.push("supply the kernel log: sudo dmesg > dmesg.txt; rcclfix doctor --dmesg dmesg.txt".into());
            }
            if no_gpu {
                actions.push("on the affected machine: sudo rcclfix doctor (or send its `sudo lspci -vvv` output: rcclfix doctor --lspci FILE)".into());
            }
            actions.push("or run the runtime probe: AMD_LOG_LEVEL=3 with your workload; `Pcie atomics not enabled, hostcall not supported` confirms the refusal and the `ShaderName` line before it names the kernel (rcclfix doctor --log FILE)".into());
        }
        VerdictKind::NotAffected => {}
    }

    // iGPU hint.
    let igpus: Vec<&GpuReport> = gpus.iter().filter(|g| g.integrated).collect();
    if !igpus.is_empty() && gpus.len() > igpus.len() {
        let discrete: Vec<String> = gpus
            .iter()
            .filter(|g| !g.integrated)
            .map(|g| {
                g.hip_ordinal
                    .map(|o| o.to_string())
                    .unwrap_or_else(|| g.bdf.to_string())
            })
            .collect();
        notes.push(format!(
            "an integrated GPU is visible to ROCm ({}): collectives can pick it up or stall; restrict to the discrete cards with HIP_VISIBLE_DEVICES={} (HIP ordinals; ROCR_VISIBLE_DEVICES works one level lower)",
            igpus.iter().map(|g| format!("{} {}", g.bdf, g.gfx.as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(", "),
            if discrete.iter().all(|d| d.parse::<u32>().is_ok()) { discrete.join(",") } else { "<ordinals of the discrete GPUs, see rocminfo>".into() }
        ));
    }
    if hv.is_vm && !gpus.is_empty() {
        notes.push(format!(
            "running in a VM ({}{}): the guest's root ports and kernel log decide, not the host's",
            hv.name.as_deref().unwrap_or("?"),
            hv.qemu_machine_version
                .map(|(a, b)| format!(", machine type {a}.{b}: QEMU >= {a}.{b}"))
                .unwrap_or_default()
        ));
    }
    if let Some(k) = logs
        .iter()
        .find_map(|l| l.versions.kernel.as_deref())
        .filter(|k| k.ends_with("-pve"))
    {
        notes.push(format!("kernel {k} is a Proxmox host kernel: this ran in a container (LXC) on the host, so the host's own PCIe path decides"));
    }
    if !kfd_present && !gpus.is_empty() && src.lspci.is_empty() {
        notes.push("no KFD topology (amdgpu not loaded, or not captured): gfx targets and io_link flags unknown".into());
    }
    if !src.kernel_log.usable() && !gpus.is_empty() {
        if let kmsg::LogOrigin::Unavailable { reason } = &src.kernel_log.origin {
            notes.push(format!("kernel log unavailable: {reason}"));
        } else {
            notes.push(
                "kernel log has no amdgpu lines: it may be wrapped or from another boot".into(),
            );
        }
    }
    notes.extend(src.kernel_log.cut.iter().cloned());
    notes.extend(logs.iter().filter_map(|l| l.cut.clone()));
    if let HipProbe::Failed { reason } = &src.hip {
        notes.push(format!("HIP runtime probe failed: {reason}"));
    }

    // What was and was not examined.
    let mut examined = vec![];
    let mut not_examined = vec![];
    if no_gpu {
        not_examined.push(format!(
            "GPUs: no AMD GPU in {} ({pci_functions} PCI function{})",
            src.pci_origin,
            if pci_functions == 1 { "" } else { "s" }
        ));
    } else {
        examined.push(format!(
            "{} AMD GPU{} and {} PCIe path{} ({})",
            gpus.len(),
            if gpus.len() == 1 { "" } else { "s" },
            if gpus.len() == 1 { "its" } else { "their" },
            if gpus.len() == 1 { "" } else { "s" },
            src.pci_origin
        ));
    }
    if src.kernel_log.usable() {
        let origin = match &src.kernel_log.origin {
            kmsg::LogOrigin::File { path } => path.clone(),
            kmsg::LogOrigin::Command { argv } => argv.clone(),
            kmsg::LogOrigin::Unavailable { reason } => reason.clone(),
        };
        examined.push(format!(
            "kernel log ({origin}, {} line{})",
            src.kernel_log.lines,
            if src.kernel_log.lines == 1 { "" } else { "s" }
        ));
    } else {
        not_examined.push(match &src.kernel_log.origin {
            kmsg::LogOrigin::Unavailable { reason } => format!("kernel log: {reason}"),
            _ => format!(
                "kernel log: {} lines, none from amdgpu",
                src.kernel_log.lines
            ),
        });
    }
    if src.lspci.is_empty() {
        if kfd_present {
            examined.push("KFD topology".into());
        } else {
            not_examined.push("KFD topology: not present".into());
        }
    }
    match &src.hip {
        HipProbe::Ran { .. } => examined.push("HIP runtime (hostNativeAtomicSupported)".into()),
        HipProbe::NotRun { reason } | HipProbe::Absent { reason } | HipProbe::Failed { reason } => {
            not_examined.push(format!("HIP runtime probe: {reason}"))
        }
    }
    for l in &libraries {
        examined.push(format!("librccl {}", l.candidate.path.display()));
    }
    if libraries.is_empty() {
        not_examined.push("librccl: none scanned (--library FILE)".into());
    }
    for l in &logs {
        examined.push(format!("log {} ({} lines)", l.path, l.lines));
    }
    for c in &vm_configs {
        examined.push(format!("VM config {}", c.path));
    }

    let exit_code = verdict.exit_code();
    Report {
        schema_version: SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").to_owned(),
        verdict,
        headline,
        actions,
        examined,
        not_examined,
        evidence,
        rebuild,
        gpus,
        hypervisor: hv,
        kernel_log: KernelLogSummary {
            origin: src.kernel_log.origin.clone(),
            lines: src.kernel_log.lines,
            has_amdgpu_lines: src.kernel_log.has_amdgpu_lines,
            relevant: src
                .kernel_log
                .relevant
                .iter()
                .filter(|l| kmsg::is_atomics_message(l) || l.contains(kmsg::KFD_REJECTS))
                .take(50)
                .cloned()
                .collect(),
            cut: src.kernel_log.cut.clone(),
        },
        kfd_present,
        hip: src.hip.clone(),
        libraries,
        logs,
        vm_configs,
        notes,
        exit_code,
    }
}
