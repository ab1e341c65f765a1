//! What a report lists without deciding anything: its caveats (an integrated GPU ROCm sees, a VM,
//! a Proxmox host kernel, a missing KFD topology or kernel log, a cut input) and what it did and
//! did not examine. [`super::verdict`] decides; this only says what the decision stood on.

use super::hip::HipProbe;
use super::kmsg;
use super::library::LibraryScan;
use super::report::{GpuReport, SeenGpu};
use super::sources::Sources;
use super::triage::LogTriage;
use super::vm::{Hypervisor, ProxmoxConfig};

/// The caveats of a report, appended to `notes`.
pub fn caveats(
    src: &Sources,
    hv: &Hypervisor,
    gpus: &[GpuReport],
    kfd_present: bool,
    logs: &[LogTriage],
    notes: &mut Vec<String>,
) {
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
}

/// What [`examined`] lists.
pub struct Seen<'a> {
    /// The sources.
    pub src: &'a Sources,
    /// The GPUs examined.
    pub gpus: &'a [GpuReport],
    /// The GPUs named without config space.
    pub gpus_seen: &'a [SeenGpu],
    /// `gpus_seen` as one line.
    pub seen_list: &'a str,
    /// Whether a KFD topology was read.
    pub kfd_present: bool,
    /// The libraries scanned.
    pub libraries: &'a [LibraryScan],
    /// The logs triaged.
    pub logs: &'a [LogTriage],
    /// The VM configs read.
    pub vm_configs: &'a [ProxmoxConfig],
    /// PCI functions read.
    pub pci_functions: usize,
}

/// (examined, not examined), one line each.
pub fn examined(s: &Seen) -> (Vec<String>, Vec<String>) {
    let Seen {
        src,
        gpus,
        gpus_seen,
        seen_list,
        kfd_present,
        libraries,
        logs,
        vm_configs,
        pci_functions,
    } = *s;
    let no_gpu = gpus.is_empty();
    let mut examined = vec![];
    let mut not_examined = vec![];
    if !gpus_seen.is_empty() {
        examined.push(format!(
            "{} AMD GPU{} named by the evidence without config space: {seen_list}",
            gpus_seen.len(),
            if gpus_seen.len() == 1 { "" } else { "s" }
        ));
    }
    if no_gpu {
        not_examined.push(format!(
            "GPUs: no AMD GPU in {} ({pci_functions} PCI function{}){}",
            src.pci_origin,
            if pci_functions == 1 { "" } else { "s" },
            if gpus_seen.is_empty() {
                ""
            } else {
                ": the GPUs above are named, but their config space is not there"
            }
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
    for l in libraries {
        examined.push(format!("librccl {}", l.candidate.path.display()));
    }
    if libraries.is_empty() {
        not_examined.push("librccl: none scanned (--library FILE)".into());
    }
    for l in logs {
        examined.push(format!("log {} ({} lines)", l.path, l.lines));
    }
    for c in vm_configs {
        examined.push(format!("VM config {}", c.path));
    }
    (examined, not_examined)
}
