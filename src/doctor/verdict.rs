//! The per-GPU decision rules, pure: a [`GpuReport`]'s facts → its verdict and reasons
//! ([`decide_gpu`], [`vm_blockers`]) and the GPUs' verdicts → one ([`aggregate`]);
//! [`super::overall`] adds the logs and the GPUs seen without config space. Nothing here reads a
//! file or runs a process; [`super::gather`] collects the facts first.
//!
//! Sources: Linux `drivers/pci/pci.c` (`pci_enable_atomic_ops_to_root`), QEMU `hw/vfio/pci.c`
//! (the completer rule), public reports ROCm/ROCm#6074, ROCm/ROCm#6520.

use super::pci::{HopProblem, PathResult};
use super::report::{GpuReport, GuestView, VerdictKind, VmBlocker};
use super::vm::Hypervisor;
use crate::scan::TargetState;

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

/// What in a VM's layout withholds AtomicOps from a guest GPU, from the guest's facts `v`, the
/// path rule's `result` and whether the GPU has no PCI Express capability at all: the kernel
/// refuses a conventional device at `pci_is_pcie()` (linux `drivers/pci/pci.c`); QEMU sets an
/// emulated root port's completer bits only from 8.1 on and only for a single function at devfn 0
/// directly below it (QEMU `hw/vfio/pci.c`, `vfio_pci_enable_rp_atomics`).
pub fn vm_blockers(
    v: &GuestView,
    hv: &Hypervisor,
    result: &PathResult,
    not_express: bool,
) -> Vec<VmBlocker> {
    let mut blockers = vec![];
    if matches!(result, PathResult::DeviceRefused { .. }) && not_express {
        blockers.push(VmBlocker::NoPcieCapability);
    }
    let root_lacks = matches!(
        result,
        PathResult::Breaks {
            problem: HopProblem::RootPortNoCompleter,
            ..
        }
    );
    if hv.is_qemu && v.behind_root_port && root_lacks {
        if let (Some((a, b)), Some(m)) = (hv.qemu_machine_version, &hv.product_version) {
            if (a, b) < (8, 1) {
                blockers.push(VmBlocker::QemuBefore81 { machine: m.clone() });
            }
        }
        if v.multifunction {
            blockers.push(VmBlocker::Multifunction);
        } else if !v.devfn0 {
            blockers.push(VmBlocker::NotAtDevfn0);
        } else if !v.directly_under_root_port {
            blockers.push(VmBlocker::BehindSwitch);
        }
    }
    blockers
}

/// The per-GPU decision (the decision table of this module's docs).
pub fn decide_gpu(g: &mut GpuReport, hv: &Hypervisor) {
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
        // In a VM whose layout withholds AtomicOps, the VM is why KFD rejects the GPU: the VM
        // setting is the fix, though no hostcall refusal ever happens (issue 22, class 3).
        if let Some(v) = g.guest.as_ref().filter(|v| !v.blockers.is_empty()) {
            g.verdict = VerdictKind::FixVmConfig;
            g.reasons.extend(missing);
            g.reasons.push(format!("KFD rejected this GPU ({r}): it needs PCIe AtomicOps for compute at all, and the VM's layout is what withholds them; once the VM gives it an AtomicOps path, KFD accepts it"));
            for b in &v.blockers {
                g.reasons.push(blocker_reason(b, v));
            }
            return;
        }
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

/// The platform verdict of the examined GPUs: affected if any is (a VM fix only when every
/// affected GPU has one), else inconclusive if any is, else not affected; `None` for no GPU.
pub fn aggregate(gpus: &[GpuReport]) -> Option<VerdictKind> {
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
pub fn installed_release(s: &str) -> Option<String> {
    let v: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (v.matches('.').count() >= 1).then(|| v.trim_end_matches('.').to_owned())
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
