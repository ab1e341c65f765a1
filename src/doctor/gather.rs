//! Gathering doctor's evidence: the roots (`--sysfs`/`--proc`, a `--snapshot`, `--lspci` text),
//! the kernel log, the libraries and the HIP probe ([`gather`] → [`Sources`]), then each GPU's
//! facts from them ([`diagnose`] → [`GpuReport`]s, decided by [`super::verdict`]). Nothing here
//! prints.

use std::path::{Path, PathBuf};

use super::hip::{self, HipProbe};
use super::kmsg;
use super::library::{self, LibraryScan};
use super::overall::decide_overall;
use super::pci::{self, Bdf, ConfigView, HopProblem, PathResult, PciDevice, PortType};
use super::report::{GpuReport, GuestView, Hop, Report, VerdictKind};
use super::seen::seen_gpus;
use super::sources::Sources;
use super::triage::{self, LogTriage};
use super::verdict::{decide_gpu, vm_blockers};
use super::vm::{self, ProxmoxConfig};
use super::{capture, ids, kfd, lspci};

/// What `rcclfix doctor` was asked to read (the command line, without its output flags).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The sysfs root (`/sys`, or a snapshot's `sys/`).
    pub sysfs: PathBuf,
    /// The procfs root.
    pub proc: PathBuf,
    /// A kernel log file (default: `dmesg`, then `journalctl -k -b`, on the live machine).
    pub dmesg: Option<PathBuf>,
    /// A `--capture` snapshot (tar or extracted folder), in place of `sysfs`/`proc`/`dmesg`.
    pub snapshot: Option<PathBuf>,
    /// `--log` files to triage.
    pub log: Vec<PathBuf>,
    /// `--vm-config` Proxmox files.
    pub vm_config: Vec<PathBuf>,
    /// `--lspci` text files, in place of sysfs.
    pub lspci: Vec<PathBuf>,
    /// `--library` files to scan instead of the discovered ones.
    pub library: Vec<PathBuf>,
    /// Do not search for or scan librccl.
    pub no_library: bool,
    /// Do not run the HIP probe.
    pub no_hip: bool,
    /// Write a snapshot to this tar instead of diagnosing.
    pub capture: Option<PathBuf>,
}

/// What [`run`] did.
#[derive(Debug)]
pub enum Outcome {
    /// `--capture`: the snapshot written and how many files it holds.
    Captured {
        /// The tar written.
        path: PathBuf,
        /// Its number of files.
        files: usize,
    },
    /// The diagnosis.
    Report(Box<Report>),
}

/// Gather the evidence `opts` names and diagnose it (or write the `--capture` snapshot).
///
/// Errors: a missing or wrong `--sysfs`/`--proc` root, an unusable snapshot, an unreadable
/// `--dmesg`/`--library`/`--log`/`--vm-config`/`--lspci` input (one line naming it).
pub fn run(opts: &Options) -> anyhow::Result<Outcome> {
    let _tmp;
    let mut extracted = None;
    let (sysfs, proc, snapshot_dmesg) = match &opts.snapshot {
        Some(s) => {
            // Refused before any open: opening a FIFO blocks until a writer comes.
            let meta = std::fs::metadata(s)
                .map_err(|e| anyhow::anyhow!("--snapshot {}: cannot open: {e}", s.display()))?;
            if !meta.is_dir() && !meta.is_file() {
                anyhow::bail!(
                    "--snapshot {}: not a regular file ({}); give the .tar rcclfix doctor --capture wrote, or its extracted folder",
                    s.display(),
                    crate::fsutil::file_kind(&meta)
                );
            }
            let dir = if meta.is_dir() {
                // Untrusted like a tar: links and special files are refused.
                capture::check_folder(s)?;
                s.clone()
            } else {
                let t = crate::fsutil::TempDir::new("rcclfix-snapshot-")?;
                capture::extract(s, t.path())?;
                let p = t.path().to_owned();
                extracted = Some((p.clone(), format!("{}!", s.display())));
                _tmp = t;
                p
            };
            // An invalid manifest is an error even when sys/ is missing: never "no AMD GPU".
            capture::check_manifest(&dir, s)?;
            // Without sys/ nothing about the machine was read: that is never "not affected"
            // (a capture always writes sys/, even on a machine without an AMD GPU).
            if !dir.join("sys").is_dir() {
                anyhow::bail!(
                    "{}: not an rcclfix doctor snapshot (no sys/ folder: nothing about the machine to read; capture it again with `rcclfix doctor --capture FILE.tar`)",
                    s.display()
                );
            }
            let d = dir.join("dmesg.txt");
            // The report names the member as `snap.tar!dmesg.txt` (a folder: its own path).
            let shown = if meta.is_dir() {
                d.display().to_string()
            } else {
                format!("{}!dmesg.txt", s.display())
            };
            (
                dir.join("sys"),
                dir.join("proc"),
                d.is_file().then_some((d, shown)),
            )
        }
        None if !opts.lspci.is_empty() => (PathBuf::new(), PathBuf::new(), None),
        None => {
            // A mistyped root must not read as "no AMD GPU found".
            require_dir("--sysfs", &opts.sysfs)?;
            require_dir("--proc", &opts.proc)?;
            if !opts.sysfs.join("bus/pci").is_dir() {
                anyhow::bail!(
                    "--sysfs {}: no bus/pci folder: not a sysfs root (give /sys, a snapshot's sys/ folder, or --snapshot)",
                    opts.sysfs.display()
                );
            }
            (opts.sysfs.clone(), opts.proc.clone(), None)
        }
    };
    let live = opts.snapshot.is_none() && opts.lspci.is_empty() && sysfs == Path::new("/sys");
    let pci_origin = match (&opts.snapshot, opts.lspci.is_empty()) {
        (Some(s), _) => format!("snapshot {}", s.display()),
        (None, false) => format!(
            "--lspci {}",
            opts.lspci
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, true) => sysfs.display().to_string(),
    };
    let dmesg = match (&opts.dmesg, snapshot_dmesg) {
        (Some(f), _) => Some((f.clone(), f.display().to_string())),
        (None, s) => s,
    };
    let kernel_log = match &dmesg {
        // One line: `--dmesg FILE: not a regular file (a FIFO); …`.
        Some((f, shown)) => {
            kmsg::from_file(f, shown).map_err(|e| anyhow::anyhow!("--dmesg {shown}: {e:#}"))?
        }
        None if live => kmsg::from_system(),
        None => kmsg::parse(
            "",
            kmsg::LogOrigin::Unavailable {
                reason: if opts.lspci.is_empty() {
                    "no kernel log given for this sysfs root (--dmesg FILE)".into()
                } else {
                    "no kernel log given with --lspci (--dmesg FILE)".into()
                },
            },
        ),
    };
    if let Some(out) = &opts.capture {
        let files = capture::write(out, &sysfs, &proc, &kernel_log)?;
        return Ok(Outcome::Captured {
            path: out.clone(),
            files,
        });
    }
    let mut libraries: Vec<library::Candidate> = opts
        .library
        .iter()
        .map(|p| {
            // Looked at, never opened, here: opening a FIFO blocks until a writer comes.
            let meta = std::fs::metadata(p)
                .map_err(|e| anyhow::anyhow!("--library {}: cannot open: {e}", p.display()))?;
            if meta.is_dir() {
                anyhow::bail!(
                    "--library {}: a folder, not a library file (give the librccl.so inside it)",
                    p.display()
                );
            }
            if !meta.is_file() {
                anyhow::bail!(
                    "--library {}: not a regular file ({}); give a librccl.so file",
                    p.display(),
                    crate::fsutil::file_kind(&meta)
                );
            }
            Ok(library::Candidate {
                path: p.clone(),
                found_via: "--library".into(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    if libraries.is_empty() && live && !opts.no_library {
        libraries = library::discover();
    }
    let hip = if opts.no_hip {
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
        logs: opts.log.clone(),
        vm_configs: opts.vm_config.clone(),
        lspci: opts.lspci.clone(),
        pci_origin,
        libraries: if opts.no_library { vec![] } else { libraries },
        hip,
        installed_rocm,
        live,
        extracted,
    };
    let report = diagnose(&src)?;
    Ok(Outcome::Report(Box::new(report)))
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

/// A GPU's gfx target and where it came from: its KFD node, else its PCI device ID (when the ID
/// was readable), else the chip name in pasted lspci text.
fn gpu_gfx(
    gpu: &PciDevice,
    node: Option<&kfd::KfdGpu>,
    topo: Option<&lspci::Topology>,
) -> (Option<String>, Option<String>) {
    let id_known = topo.is_none_or(|t| !t.unknown_ids.contains(&gpu.bdf));
    match node {
        Some(n) if n.gfx != "unknown" => (Some(n.gfx.clone()), Some("KFD topology".to_owned())),
        _ => match ids::gfx_for_device(gpu.device).filter(|_| id_known) {
            Some(g) => (Some(g.to_owned()), Some(format!("PCI ID {}", id_of(gpu)))),
            None => match topo
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

/// PCI evidence that could not be read (`problems`: a cut or malformed lspci paste, a sysfs
/// device entry that cannot be read, such as a snapshot's dangling device link): listed as not
/// examined, and a "not affected" becomes inconclusive, since the device missing may be the GPU.
fn unread_pci_evidence(report: &mut Report, problems: &[String]) {
    let Some(first) = problems.first() else {
        return;
    };
    report
        .not_examined
        .extend(problems.iter().map(|p| format!("PCI device evidence: {p}")));
    if report.verdict == VerdictKind::NotAffected {
        report.verdict = VerdictKind::Inconclusive;
        report.exit_code = report.verdict.exit_code();
        report.headline = format!(
            "inconclusive — part of the PCI evidence cannot be read, and the device missing may be an AMD GPU: {first}"
        );
        report.actions.push("paste the whole `sudo lspci -vvv` (and `lspci -tv`) of that machine, or capture the snapshot again: sudo rcclfix doctor --capture snap.tar".into());
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
    let (all, pci_unread) = match &topo {
        Some(t) => (t.devices.clone(), t.cut.clone()),
        None => {
            let (all, unread) = pci::list_devices_checked(&src.sysfs);
            let unread = unread
                .into_iter()
                .map(|u| format!("{}: {u}", src.pci_origin))
                .collect();
            (all, unread)
        }
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
    // The targets a library is judged for: every gfx target the evidence names (KFD, each GPU's
    // PCI ID or lspci chip name, the logs), not only KFD's.
    let gfx_targets: Vec<String> = {
        let mut v: Vec<String> = kfd
            .iter()
            .flatten()
            .map(|g| g.gfx.clone())
            .filter(|g| g != "unknown")
            .collect();
        for gpu in all.iter().filter(|d| d.is_amd_gpu()) {
            let node = kfd.iter().flatten().find(|n| n.bdf == gpu.bdf);
            if let (Some(g), _) = gpu_gfx(gpu, node, topo.as_ref()) {
                v.push(g);
            }
        }
        v.extend(logs.iter().flat_map(|l| l.versions.gfx.iter().cloned()));
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
    let libraries_unjudged: Vec<String> = if gfx_targets.is_empty() {
        src.libraries
            .iter()
            .map(|c| format!("librccl {}: not scanned: no gfx target known (no KFD topology, no GPU whose PCI ID or lspci name gives its target, no gfx target named in a log); add a log with `rocminfo` output (--log FILE)", src.shown(&c.path.display().to_string())))
            .collect()
    } else {
        vec![]
    };
    let hip_devices = match &src.hip {
        HipProbe::Ran { devices, .. } => devices.clone(),
        _ => vec![],
    };

    let id_unknown = |d: &PciDevice| {
        topo.as_ref()
            .is_some_and(|t| t.unknown_ids.contains(&d.bdf))
    };
    // What the kernel lines pasted into each `--log` say about the GPU at an address.
    let log_gpu = |b: Bdf| {
        logs.iter().flat_map(move |l| {
            l.kernel_gpus
                .iter()
                .filter(move |g| g.bdf == b)
                .map(move |g| (l.path.as_str(), g))
        })
    };
    let mut gpus = vec![];
    for gpu in all.iter().filter(|d| d.is_amd_gpu()) {
        let upstream = match &topo {
            Some(t) => t.upstream(gpu),
            None => pci::upstream_bridges(gpu).map_err(|e| src.shown(&format!("{e:#}"))),
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
            let mut v = GuestView {
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
                blockers: vec![],
            };
            // The facts are gathered here; which of them withhold AtomicOps, verdict.rs decides.
            v.blockers = vm_blockers(
                &v,
                &hv,
                &result,
                matches!(gpu.config, ConfigView::NotExpress),
            );
            v
        });
        let id_known = topo
            .as_ref()
            .is_none_or(|t| !t.unknown_ids.contains(&gpu.bdf));
        let (gfx, gfx_source) = gpu_gfx(gpu, node, topo.as_ref());
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
            // Older amdgpu's `[drm] PCIE atomic ops is not supported` names no device: it is
            // the one AMD GPU's when there is one.
            kernel_message: klog
                .atomics_not_supported
                .get(&gpu.bdf)
                .cloned()
                .or_else(|| {
                    (all.iter().filter(|d| d.is_amd_gpu()).count() == 1)
                        .then(|| klog.unnamed_no_atomics.clone())
                        .flatten()
                })
                // A `--log` that pastes the kernel's line for this address says the same.
                .or_else(|| {
                    log_gpu(gpu.bdf).find_map(|(p, l)| {
                        l.no_atomics.as_ref().map(|m| format!("{m} (in --log {p})"))
                    })
                }),
            // The log speaks for this GPU only if amdgpu logged something for its address.
            kernel_log_usable: klog.usable() && klog.amdgpu_bdfs.contains(&gpu.bdf),
            kfd_atomics: node.and_then(|n| n.atomics()),
            kfd_link_flags: node
                .map(|n| n.links_to_cpu.iter().map(|l| l.flags).collect())
                .unwrap_or_default(),
            kfd_rejected,
            kernel_problems: {
                let mut p: Vec<kmsg::ProblemLine> = klog
                    .gpus
                    .get(&gpu.bdf)
                    .map(|l| l.problems.clone())
                    .unwrap_or_default();
                for (_, l) in log_gpu(gpu.bdf) {
                    for x in &l.problems {
                        if !p.contains(x) && p.len() < kmsg::MAX_PROBLEM_LINES {
                            p.push(x.clone());
                        }
                    }
                }
                p
            },
            hip_host_native_atomic: hipdev.map(|h| h.host_native_atomic_supported),
            hip_ordinal: hipdev.map(|h| h.ordinal),
            guest,
            library_states: gfx
                .as_ref()
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
        for p in &g.kernel_problems {
            g.reasons.push(format!(
                "kernel log: {} (another problem, not the AtomicOps path): {}",
                p.kind.describe(),
                p.line
            ));
        }
        gpus.push(g);
    }
    let gpus_seen = seen_gpus(&gpus, klog, &logs, topo.as_ref());
    let pci_functions = all.len();
    let mut report = decide_overall(
        src,
        hv,
        gpus,
        kfd.is_some(),
        libraries,
        logs,
        vm_configs,
        pci_functions,
        gpus_seen,
    );
    // With a GPU examined, an AMD GPU the evidence shows but not its config space (a paste that
    // holds the `-tv` tree but lost the second GPU's block) leaves the verdict open too; with
    // none examined, `decide_overall`'s rule for seen GPUs already does.
    let mut pci_unread = pci_unread;
    if !report.gpus.is_empty() {
        pci_unread.extend(
            report
                .gpus_seen
                .iter()
                .filter(|s| s.kfd_rejected.is_none())
                .map(|s| {
                    format!(
                        "the AMD GPU {} is in the {} but its config space is not in the evidence",
                        s.bdf
                            .map(|b| b.to_string())
                            .or_else(|| s.id.clone())
                            .unwrap_or_else(|| "(no address)".into()),
                        s.seen_in
                    )
                }),
        );
    }
    unread_pci_evidence(&mut report, &pci_unread);
    if !libraries_unjudged.is_empty() {
        report
            .not_examined
            .retain(|l| !l.starts_with("librccl: none scanned"));
        report.not_examined.extend(libraries_unjudged);
    }
    Ok(report)
}
