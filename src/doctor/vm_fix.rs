//! The actions of a "fix the VM" verdict, as text lines: the Proxmox or plain-QEMU line that
//! passes the GPU as a single function at devfn 0 on a PCIe root port, a QEMU >= 8.1 host, a PCIe
//! slot. They read what `vm.rs` gathered (the `--vm-config` files) and what the report says of
//! each guest GPU, so this stage comes after both and `vm.rs` never reads the report.

use super::report::{GpuReport, VmBlocker};
use super::vm::ProxmoxConfig;

/// The Proxmox fix, as text lines, for a GPU whose host address is `host_slot` (`0000:0b:00`) or
/// unknown (`None`: printed as `<bus>:<dev>`). `left_behind`: the other functions of the slot
/// as seen (guest siblings or the host's sysfs); `None` when nothing shows them.
pub fn proxmox_fix(host_slot: Option<&str>, left_behind: Option<&[String]>) -> Vec<String> {
    let slot = host_slot.unwrap_or("<host-bus>:<dev>");
    let trade_off = match left_behind {
        Some(f) if !f.is_empty() => format!(
            "trade-off: the slot's other functions ({}) stay on the host, so the VM loses them (for an HDMI/DP audio function: no display audio); they share the IOMMU group, so keep them bound to vfio-pci on the host. Compute-only VMs lose nothing",
            f.join(", ")
        ),
        _ => "trade-off: the slot's other functions (on a GPU usually its HDMI/DP audio, .1) stay on the host, so the VM loses them; they share the IOMMU group, so keep them bound to vfio-pci on the host. Compute-only VMs lose nothing".into(),
    };
    vec![
        format!("Proxmox: in /etc/pve/qemu-server/<vmid>.conf change `hostpciN: {slot}` to `hostpciN: {slot}.0,pcie=1` (function 0 only) with `machine: q35`, then stop and start the VM"),
        format!("plain QEMU: `-device vfio-pci,host={slot}.0,bus=<pcie-root-port id>,addr=0x0` without `multifunction=on`, and no second vfio-pci device for the slot's other functions"),
        trade_off,
        "needs QEMU >= 8.1 (check with `qemu-system-x86_64 --version` or `kvm --version` on the host) and a host PCIe path that itself passes (run `rcclfix doctor` on the host)".into(),
    ]
}

/// The fix for a guest whose QEMU machine type predates 8.1: QEMU before 8.1 never sets AtomicOp
/// completer bits on an emulated root port (`vfio_pci_enable_rp_atomics()` arrived in 8.1.0).
pub fn qemu_upgrade_fix(machine: &str) -> Vec<String> {
    vec![
        format!("the guest's machine type is {machine}: QEMU before 8.1 never advertises AtomicOp completion on an emulated root port. Run the VM on a QEMU >= 8.1 host (`qemu-system-x86_64 --version` or `kvm --version`) with a current machine type (Proxmox: `machine: q35`, not a pinned older version)"),
        "pass the GPU as a single function at devfn 0 on a PCIe root port: Proxmox `hostpciN: <host-bus>:<dev>.0,pcie=1`; plain QEMU `-device vfio-pci,host=<host-bus>:<dev>.0,bus=<pcie-root-port id>,addr=0x0` without `multifunction=on`".into(),
        "if the host already runs QEMU >= 8.1 with a pinned machine type, the host's own PCIe path may fail instead: run `rcclfix doctor` on the host".into(),
    ]
}

/// The fix for a guest GPU without a PCI Express capability (a conventional PCI layout).
pub fn pcie_layout_fix() -> Vec<String> {
    vec![
        "give the GPU a PCIe slot in the VM: Proxmox `machine: q35` and `pcie=1` on its `hostpciN` line (`hostpciN: <host-bus>:<dev>.0,pcie=1`); plain QEMU `-machine q35` and `-device vfio-pci,host=<host-bus>:<dev>.0,bus=<pcie-root-port id>,addr=0x0`".into(),
        "needs QEMU >= 8.1 on the host for the emulated root port to advertise AtomicOp completion, and a host PCIe path that itself passes (run `rcclfix doctor` on the host)".into(),
    ]
}

/// The actions of a "fix the VM" verdict: each `--vm-config` line to replace, the fix for each VM
/// blocker the guest GPUs show (a QEMU >= 8.1 host, a PCIe slot, the GPU as a single function at
/// devfn 0, naming the slot's functions that stay behind), or, for a GPU seen only in the kernel
/// log (`seen_only`), the layout that gives it AtomicOps. The config problems go to `evidence`.
pub fn fix_actions(
    vm_configs: &[ProxmoxConfig],
    gpus: &[GpuReport],
    seen_only: bool,
    vm_cfg_problems: bool,
    evidence: &mut Vec<String>,
) -> Vec<String> {
    let seen_rule = seen_only;
    let mut actions = vec![];
    let mut fixed_any = false;
    for c in vm_configs {
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
        actions.extend(qemu_upgrade_fix(machine));
    }
    if guest_blockers
        .iter()
        .any(|b| matches!(b, VmBlocker::NoPcieCapability))
        || (seen_rule && guest_blockers.is_empty())
    {
        actions.extend(pcie_layout_fix());
    }
    if seen_rule && guest_blockers.is_empty() {
        actions.push("pass the GPU as a single function (no `multifunction=on`, no `x-vga` companion function on the same slot): Proxmox `hostpciN: <host-bus>:<dev>.0,pcie=1`".into());
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
        let lines = proxmox_fix(slot.as_deref(), left.as_deref());
        actions.extend(lines.into_iter().skip(usize::from(fixed_any)));
    }
    actions.push("then rerun `rcclfix doctor` in the guest: the root port should show 32bit+ 64bit+ and the GPU ReqEn+; stock RCCL then works".into());
    actions
}
