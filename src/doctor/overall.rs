//! The overall decision, pure: the GPUs' verdicts ([`super::verdict`]), the GPUs the evidence
//! names without config space, the triaged logs and the VM configs → the [`Report`] with its
//! headline, evidence, actions and rebuild advice ([`decide_overall`]). Nothing here reads a file
//! or runs a process.
//!
//! Sources: public reports ROCm/ROCm#6074, ROCm/ROCm#6520, vllm-project/vllm#38587.

use super::coverage;
use super::kfd;
use super::kmsg;
use super::library::LibraryScan;
use super::pci::PathResult;
use super::report::{
    GpuReport, KernelLogSummary, ReleaseFacts, Report, SeenGpu, VerdictKind, VmBlocker,
    SCHEMA_VERSION,
};
use super::sources::Sources;
use super::triage::{self, LogClass, LogTriage};
use super::verdict::{aggregate, installed_release};
use super::vm::{Hypervisor, ProxmoxConfig};
use super::vm_fix;
use crate::scan::TargetState;

/// A short word for a scan state: `clean (126 kernels)`, `declares (3 kernels)`, ….
fn target_state_word(s: &TargetState) -> String {
    match s {
        TargetState::Clean { kernels } => format!("clean ({kernels} kernels)"),
        TargetState::Declares { kernels } => format!("declares ({} kernels)", kernels.len()),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v.get("state").and_then(|x| x.as_str()).map(str::to_owned))
            .unwrap_or_else(|| "unknown".into()),
    }
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
            // The log may name no kernel, but what launched it (a PyTorch operator).
            let k = match (&r.kernel, &r.owner) {
                (Some(k), triage::KernelOwner::Other { .. }) => k.clone(),
                (None, triage::KernelOwner::Other { library: Some(_) }) => {
                    "a kernel the log does not name".to_owned()
                }
                _ => continue,
            };
            let triage::KernelOwner::Other { library } = &r.owner else {
                continue;
            };
            if !out.iter().any(|(x, _)| *x == k) {
                out.push((k, library.clone()));
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
pub fn decide_overall(
    src: &Sources,
    hv: Hypervisor,
    gpus: Vec<GpuReport>,
    kfd_present: bool,
    libraries: Vec<LibraryScan>,
    logs: Vec<LogTriage>,
    vm_configs: Vec<ProxmoxConfig>,
    pci_functions: usize,
    gpus_seen: Vec<SeenGpu>,
) -> Report {
    let mut evidence = vec![];
    let mut actions = vec![];
    let mut notes = vec![];
    let platform = aggregate(&gpus);
    let log_class = logs.iter().map(|l| l.class).min_by_key(|c| c.weight());
    // What AMD's packages of a release do holds for AMD's packages only (issue 21): when the
    // librccl scanned here is another packager's (Debian's librccl1 7.2.4 = RCCL 2.27.7, clean),
    // the scan judges it, and the release claim is not made.
    let foreign_libs: Vec<(String, triage::Packager)> = libraries
        .iter()
        .map(|l| {
            let p = l.candidate.path.display().to_string();
            let k = triage::packager_of(&p);
            (p, k)
        })
        .filter(|(_, k)| *k != triage::Packager::Amd)
        .collect();
    let log_declaring_release = logs
        .iter()
        .find_map(|l| {
            let r = l.rocm.as_ref()?;
            l.shipped_declares
                .filter(|d| d.starts_with("yes"))
                .map(|_| r.release.clone())
        })
        .filter(|_| foreign_libs.is_empty());
    for (p, k) in &foreign_libs {
        if let Some(r) = logs.iter().find_map(|l| {
            l.shipped_declares
                .filter(|d| d.starts_with("yes"))
                .and(l.rocm.as_ref())
        }) {
            let states: Vec<String> = libraries
                .iter()
                .filter(|l| l.candidate.path.display().to_string() == *p)
                .flat_map(|l| l.targets.iter())
                .map(|(g, s)| format!("{g}: {}", target_state_word(s)))
                .collect();
            notes.push(format!(
                "AMD's ROCm {} packages ship an RCCL that declares hidden_hostcall_buffer, but the librccl here, {p}, is {}: it is judged by its own scan ({}), not by the release",
                r.release,
                k.describe(),
                if states.is_empty() { "no target scanned".to_owned() } else { states.join(", ") }
            ));
        }
    }
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
                    "ROCm {r}'s shipped RCCL declares hidden_hostcall_buffer (AMD's packages), so it is refused on a GPU without PCIe AtomicOps, at once and with an error; this log shows no such refusal, and no GPU was examined: the release alone proves nothing"
                ));
            }
            VerdictKind::Inconclusive
        }
        (None, None) => VerdictKind::NotAffected,
    };

    // GPUs named only by the kernel log or an lspci tree count (issue 22, class 4): never "no AMD
    // GPU found". KFD skipping one for atomics is not this bug on bare metal; in a VM the VM is
    // the likely cause, and its layout is the fix. One only in a tree is not examinable.
    let seen_desc = |s: &SeenGpu| {
        let mut d = s.id.clone().unwrap_or_else(|| "(ID not shown)".into());
        let extra: Vec<&str> = [s.name.as_deref(), s.gfx.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        if !extra.is_empty() {
            d.push_str(&format!(" ({})", extra.join(", ")));
        }
        if let Some(b) = s.bdf {
            d.push_str(&format!(" at {b}"));
        }
        d
    };
    for s in &gpus_seen {
        let mut what = match (&s.kfd_rejected, &s.no_atomics) {
            (Some(l), _) => format!(": KFD skipped it: {}", short(l, 200)),
            (None, Some(l)) => format!(
                ": amdgpu says it has no PCIe AtomicOps path: {}",
                short(l, 200)
            ),
            (None, None) => ": its config space is not in the evidence".into(),
        };
        for p in &s.problems {
            what.push_str(&format!("; {}: {}", p.kind.describe(), short(&p.line, 200)));
        }
        evidence.push(format!(
            "AMD GPU {} seen in the {}{what}",
            seen_desc(s),
            s.seen_in
        ));
    }
    // Problem lines that name no GPU, in a log that names several: said, not given to one.
    for p in &src.kernel_log.unattributed {
        notes.push(format!(
            "kernel log: {} for a GPU the line does not name (the log names several): {}",
            p.kind.describe(),
            short(&p.line, 200)
        ));
    }
    if src.kernel_log.gpus.len() >= kmsg::MAX_LOG_GPUS {
        notes.push(format!(
            "the kernel log names {} GPUs or more: only the first {} it names are listed",
            kmsg::MAX_LOG_GPUS,
            kmsg::MAX_LOG_GPUS
        ));
    }
    let seen_rejected = gpus_seen.iter().any(|s| s.kfd_rejected.is_some());
    let open = matches!(
        verdict,
        VerdictKind::NotAffected | VerdictKind::Inconclusive
    );
    // amdgpu's own word that a GPU has no AtomicOps path decides for a GPU without config space,
    // as it does for an examined one (`verdict::decide_gpu`): affected, whatever else was examined.
    let seen_no_atomics: Vec<&SeenGpu> = gpus_seen
        .iter()
        .filter(|s| s.no_atomics.is_some() && s.kfd_rejected.is_none())
        .collect();
    let atomics_rule = open && !seen_no_atomics.is_empty();
    let seen_rule = !atomics_rule && gpus.is_empty() && !gpus_seen.is_empty() && open;
    let seen_problems = !seen_rejected && gpus_seen.iter().any(|s| !s.problems.is_empty());
    let verdict = if atomics_rule {
        VerdictKind::Rebuild
    } else if !seen_rule {
        verdict
    } else if seen_rejected && hv.is_vm {
        VerdictKind::FixVmConfig
    } else if seen_rejected || seen_problems {
        VerdictKind::NotAffected
    } else {
        VerdictKind::Inconclusive
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
    let mut targets = rebuild_targets(&gpus, &logs, &mut notes);
    if atomics_rule && !gpus.iter().any(|g| g.verdict == VerdictKind::Rebuild) {
        // The kernel log's GPUs without a path: their targets (from the PCI ID) first.
        let mut t: Vec<String> = seen_no_atomics
            .iter()
            .filter_map(|s| s.gfx.clone())
            .collect();
        t.append(&mut targets);
        let mut seen_t = vec![];
        t.retain(|g| {
            let new = !seen_t.contains(g);
            seen_t.push(g.clone());
            new
        });
        targets = t;
    }
    let advice = triage::rebuild_advice(rocm.as_deref(), rccl.as_deref(), &targets);
    // The contract (docs/doctor-json.md): `rebuild` exactly when the verdict prescribes one.
    let rebuild = (verdict == VerdictKind::Rebuild).then(|| advice.clone());
    let release = (rocm.is_some() || rccl.is_some()).then(|| ReleaseFacts {
        rocm: advice.rocm.clone(),
        rccl: advice.rccl.clone(),
        recipe: advice.tag.clone(),
        recipe_status: advice.status.clone(),
        shipped_declares: logs
            .iter()
            .find_map(|l| l.shipped_declares)
            .map(|d| format!("{d} (AMD's ROCm packages, /opt/rocm)")),
        judged_by_scan: foreign_libs.iter().map(|(p, _)| p.clone()).collect(),
    });
    let outside = outside_kernels(&logs);

    let no_gpu = gpus.is_empty();
    let seen_list = gpus_seen
        .iter()
        .map(seen_desc)
        .collect::<Vec<_>>()
        .join(", ");
    // A headline names at most four GPUs (a forged log may name 64).
    let few = |v: Vec<String>, sep: &str| {
        let n = v.len();
        let mut s = v.into_iter().take(4).collect::<Vec<_>>().join(sep);
        if n > 4 {
            s.push_str(&format!("{sep}and {} more", n - 4));
        }
        s
    };
    let seen_few = few(gpus_seen.iter().map(seen_desc).collect(), ", ");
    let headline = match verdict {
        VerdictKind::Rebuild if atomics_rule => format!(
            "affected — amdgpu reports no PCIe AtomicOps path for the AMD GPU {} (kernel log): RCCL kernels that declare hostcall are refused on it; {}",
            few(seen_no_atomics.iter().map(|s| seen_desc(s)).collect(), ", "),
            match &advice.command {
                Some(c) => format!("rebuild RCCL: {c}"),
                None => format!(
                    "rebuild RCCL; {}",
                    advice.notes.first().cloned().unwrap_or_else(|| triage::RELEASE_UNKNOWN.into())
                ),
            }
        ),
        VerdictKind::NotAffected if seen_rule && seen_problems => {
            let kinds: Vec<String> = gpus_seen
                .iter()
                .filter(|s| !s.problems.is_empty())
                .map(|s| {
                    let mut k: Vec<&str> = s.problems.iter().map(|p| p.kind.describe()).collect();
                    k.dedup();
                    format!("{} on the AMD GPU {}", k.join(", "), seen_desc(s))
                })
                .collect();
            format!(
                "not affected by the hostcall refusal — the kernel log shows a different problem: {} (the refusal prints nothing in the kernel log; its config space was not examined)",
                few(kinds, "; ")
            )
        }
        VerdictKind::NotAffected if seen_rule => format!(
            "not affected by the hostcall refusal — KFD rejected the AMD GPU {seen_few} (PCI rejects atomics): that GPU needs PCIe atomics for compute at all, a hardware/firmware requirement, not this bug"
        ),
        VerdictKind::FixVmConfig if seen_rule => format!(
            "affected — KFD rejects the AMD GPU {seen_few} for want of PCIe AtomicOps, in a VM: give it an AtomicOps path in the VM configuration, or check the host (no rebuild needed)"
        ),
        VerdictKind::Inconclusive if seen_rule => format!(
            "inconclusive — the evidence shows the AMD GPU {seen_few}, but not its config space: paste the whole `sudo lspci -vvv`"
        ),
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
            actions.extend(vm_fix::fix_actions(
                &vm_configs,
                &gpus,
                seen_rule,
                vm_cfg_problems,
                &mut evidence,
            ));
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
            if atomics_rule {
                actions.push("the PCIe path of that GPU was not examined: `sudo rcclfix doctor` on that machine (or its `sudo lspci -vvv` with --lspci) tells whether a CPU-attached slot or a VM setting fixes it without a rebuild".into());
            }
            if gpus.iter().any(|g| g.guest.is_some())
                || (atomics_rule && (hv.is_vm || src.kernel_log.hypervisor.is_some()))
            {
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
        VerdictKind::Inconclusive if seen_rule => {
            actions.push("paste the whole `sudo lspci -vvv` (and `lspci -tv`) of that machine: rcclfix doctor --lspci lspci.txt (or run `sudo rcclfix doctor` there)".into());
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
        VerdictKind::NotAffected if seen_rule && seen_problems => {
            let mut kinds: Vec<kmsg::ProblemKind> = gpus_seen
                .iter()
                .flat_map(|s| s.problems.iter().map(|p| p.kind))
                .collect();
            kinds.sort_by_key(|k| *k as u8);
            kinds.dedup();
            actions.extend(kinds.iter().map(|k| k.next_step().to_owned()));
        }
        VerdictKind::NotAffected if !different.is_empty() => {
            // The look-alikes' usual next steps, once each.
            for f in logs
                .iter()
                .flat_map(|l| l.findings.iter())
                .filter(|f| f.meaning == triage::Meaning::DifferentCause)
            {
                if let Some(n) = f.next_step {
                    if !actions.iter().any(|a| a == n) && actions.len() < 6 {
                        actions.push(n.to_owned());
                    }
                }
            }
        }
        VerdictKind::NotAffected => {}
    }

    // Caveats and what was and was not examined: listed, not decided (coverage.rs).
    coverage::caveats(src, &hv, &gpus, kfd_present, &logs, &mut notes);
    let (examined, not_examined) = coverage::examined(&coverage::Seen {
        src,
        gpus: &gpus,
        gpus_seen: &gpus_seen,
        seen_list: &seen_list,
        kfd_present,
        libraries: &libraries,
        logs: &logs,
        vm_configs: &vm_configs,
        pci_functions,
    });
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
        release,
        fix: None,
        gpus,
        gpus_seen,
        hypervisor: hv,
        kernel_log: KernelLogSummary {
            origin: src.kernel_log.origin.clone(),
            lines: src.kernel_log.lines,
            has_amdgpu_lines: src.kernel_log.has_amdgpu_lines,
            relevant: src
                .kernel_log
                .relevant
                .iter()
                .filter(|l| {
                    kmsg::is_atomics_message(l)
                        || l.contains(kmsg::KFD_REJECTS)
                        || kmsg::problem_of(l).is_some()
                })
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
