//! Virtual machines: hypervisor detection (DMI, the CPU's `hypervisor` flag), QEMU's rule for
//! AtomicOp completer bits on emulated root ports, and Proxmox VM configs (`hostpciN:` lines).
//!
//! Source: QEMU `hw/vfio/pci.c` `vfio_pci_enable_rp_atomics()` (8.1.0+), QEMU `hw/smbios` defaults
//! (SMBIOS type 1 product version = machine type), Proxmox `qm.conf(5)` (`hostpci[n]`).
//! Public report: the ROCm/ROCm#6520 body (multifunction vs single function on Proxmox).

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use super::report::{GpuReport, VmBlocker};

/// The hypervisor as far as the guest can tell.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Hypervisor {
    /// DMI `sys_vendor`, e.g. `QEMU`.
    pub sys_vendor: Option<String>,
    /// DMI `product_name`, e.g. `Standard PC (Q35 + ICH9, 2009)`.
    pub product_name: Option<String>,
    /// DMI `product_version`; under QEMU this is the machine type, e.g. `pc-q35-8.1`.
    pub product_version: Option<String>,
    /// The `hypervisor` CPU flag in `<proc>/cpuinfo`.
    pub cpu_flag: bool,
    /// Whether this looks like a virtual machine at all.
    pub is_vm: bool,
    /// A name for it (`QEMU/KVM`, `VMware`, …), when known.
    pub name: Option<String>,
    /// Whether it is QEMU (incl. Proxmox, libvirt).
    pub is_qemu: bool,
    /// QEMU machine-type version from `product_version` (`pc-q35-8.1` → (8, 1)); the QEMU binary is
    /// at least this new.
    pub qemu_machine_version: Option<(u32, u32)>,
}

fn read_trim(p: &Path) -> Option<String> {
    super::input::read_small_string(p, 4096)
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Parse the version out of a QEMU machine type (`pc-q35-8.1`, `pc-q35-9.0+pve0`, `pc-i440fx-7.2`).
pub fn machine_version(machine: &str) -> Option<(u32, u32)> {
    let v = machine.rsplit('-').next()?;
    let v = v.split('+').next()?;
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Detect the hypervisor from `<sysfs>/class/dmi/id/{sys_vendor,product_name,product_version}` and the
/// `hypervisor` flag in `<proc>/cpuinfo`. Missing files just mean "unknown".
pub fn detect(sysfs: &Path, proc: &Path) -> Hypervisor {
    let dmi = sysfs.join("class/dmi/id");
    let mut h = Hypervisor {
        sys_vendor: read_trim(&dmi.join("sys_vendor")),
        product_name: read_trim(&dmi.join("product_name")),
        product_version: read_trim(&dmi.join("product_version")),
        ..Default::default()
    };
    h.cpu_flag =
        super::input::read_small_string(&proc.join("cpuinfo"), super::input::MAX_SYSFS_FILE_BYTES)
            .map(|t| {
                t.lines()
                    .filter(|l| l.starts_with("flags"))
                    .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
            })
            .unwrap_or(false);
    let vendor = h.sys_vendor.clone().unwrap_or_default();
    let product = h.product_name.clone().unwrap_or_default();
    let name =
        if vendor.contains("QEMU") || product.contains("KVM") || product.starts_with("Standard PC")
        {
            h.is_qemu = true;
            Some("QEMU/KVM")
        } else if vendor.contains("VMware") {
            Some("VMware")
        } else if vendor.contains("innotek") || product.contains("VirtualBox") {
            Some("VirtualBox")
        } else if vendor.contains("Microsoft") && product.contains("Virtual") {
            Some("Hyper-V")
        } else if vendor.contains("Xen") {
            Some("Xen")
        } else if h.cpu_flag {
            Some("unknown hypervisor")
        } else {
            None
        };
    h.is_vm = name.is_some();
    h.name = name.map(str::to_owned);
    if h.is_qemu {
        h.qemu_machine_version = h.product_version.as_deref().and_then(machine_version);
    }
    h
}

/// One `hostpciN:` line of a Proxmox VM config, judged against QEMU's rule.
#[derive(Debug, Clone, Serialize)]
pub struct HostPci {
    /// `hostpci0`, …
    pub key: String,
    /// The line's value, verbatim.
    pub value: String,
    /// Host addresses named (`0000:0b:00` or `0000:0b:00.0`, `;`-separated), verbatim.
    pub hosts: Vec<String>,
    /// `pcie=1` present.
    pub pcie: bool,
    /// A resource mapping (`mapping=…`) is used: the functions are defined on the cluster level.
    pub mapping: Option<String>,
    /// Problems that keep QEMU from setting completer bits on the guest root port.
    pub problems: Vec<String>,
    /// The corrected line, when one can be given.
    pub fixed: Option<String>,
    /// The functions the host's sysfs shows in the slots this line names whole (empty: not
    /// checked).
    pub host_functions: Vec<String>,
}

/// A parsed Proxmox VM config.
#[derive(Debug, Clone, Serialize)]
pub struct ProxmoxConfig {
    /// The file name as given.
    pub path: String,
    /// `machine:` value (absent means i440fx).
    pub machine: Option<String>,
    /// Whether the machine type is q35.
    pub q35: bool,
    /// Every `hostpciN` line.
    pub hostpci: Vec<HostPci>,
    /// `args:` passes `multifunction=on` to a device.
    pub args_multifunction: bool,
}

impl ProxmoxConfig {
    /// Whether any line keeps QEMU from advertising AtomicOp completion.
    pub fn has_problems(&self) -> bool {
        !self.q35 || self.args_multifunction || self.hostpci.iter().any(|h| !h.problems.is_empty())
    }
}

/// Whether a Proxmox host id names all functions of a slot (`0000:0b:00`, `0b:00`) rather than one.
fn is_whole_slot(id: &str) -> bool {
    !id.contains('.')
}

/// The problem of a `hostpciN` naming the whole slot `slot`. Proxmox passes every function the
/// host's slot has and marks the device `multifunction=on` when there is more than one
/// (`PVE::QemuServer::PCI`); QEMU then sets no completer bits (`vfio_pci_enable_rp_atomics`).
/// `functions`: the functions the host's sysfs shows in that slot (`None`: not known here).
fn whole_slot_problem(slot: &str, functions: Option<&[String]>) -> Option<String> {
    match functions {
        Some(f) if f.len() <= 1 => None,
        Some(f) => Some(format!(
            "{slot} names every function of the slot, and this host's slot has {}: {}; Proxmox passes them as one multifunction=on device, and QEMU sets no AtomicOp completer on the guest root port",
            f.len(),
            f.join(", ")
        )),
        None => Some(format!(
            "{slot} names every function of the slot (could not check which functions it has: not in this sysfs; on a GPU usually the GPU and its HDMI/DP audio function): with more than one, Proxmox passes them as one multifunction=on device and QEMU sets no AtomicOp completer on the guest root port"
        )),
    }
}

impl ProxmoxConfig {
    /// Judge the whole-slot `hostpciN` lines against the functions the host really has.
    /// `functions(slot)` returns the functions of `0000:0b:00` found in the host's sysfs (e.g.
    /// `0000:0b:00.1 (1002:ab30, audio)`), or `None` when the slot is not there.
    pub fn check_host(&mut self, functions: &dyn Fn(&str) -> Option<Vec<String>>) {
        for h in &mut self.hostpci {
            for slot in h.hosts.iter().filter(|x| is_whole_slot(x)) {
                let Some(assumed) = whole_slot_problem(slot, None) else {
                    continue;
                };
                let found = functions(slot);
                h.problems.retain(|p| *p != assumed);
                h.problems
                    .extend(whole_slot_problem(slot, found.as_deref()));
                if let Some(f) = found {
                    h.host_functions.extend(f);
                }
            }
            if h.problems.is_empty() {
                h.fixed = None;
            }
        }
    }
}

/// Parse `/etc/pve/qemu-server/<vmid>.conf`. Only the current config is read (the part before the
/// first `[snapshot]` section).
///
/// Errors: the file cannot be read, is not a regular file or is larger than
/// [`super::input::MAX_INPUT_BYTES`], or has no `hostpciN:` line (the caller names the file).
pub fn parse_proxmox(path: &Path) -> anyhow::Result<ProxmoxConfig> {
    let text = super::input::read_capped(path, super::input::MAX_INPUT_BYTES)
        .context("cannot read the VM config")?;
    let mut cfg = ProxmoxConfig {
        path: path.display().to_string(),
        machine: None,
        q35: false,
        hostpci: vec![],
        args_multifunction: false,
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            break;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "machine" {
            cfg.machine = Some(v.to_owned());
        } else if k == "args" && v.contains("multifunction=on") {
            cfg.args_multifunction = true;
        } else if k
            .strip_prefix("hostpci")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            cfg.hostpci.push(parse_hostpci(k, v));
        }
    }
    // `machine: q35`, `machine: pc-q35-8.1`, `machine: type=q35,viommu=…`.
    cfg.q35 = cfg.machine.as_deref().is_some_and(|m| m.contains("q35"));
    if cfg.hostpci.is_empty() {
        anyhow::bail!("no hostpciN line: no PCI device is passed through");
    }
    for h in &mut cfg.hostpci {
        if !cfg.q35 {
            h.problems
                .push("machine is not q35: pcie=1 needs `machine: q35`".into());
        }
    }
    Ok(cfg)
}

fn parse_hostpci(key: &str, value: &str) -> HostPci {
    let mut hosts = vec![];
    let mut pcie = false;
    let mut mapping = None;
    let mut opts = vec![];
    for (i, item) in value.split(',').enumerate() {
        let item = item.trim();
        let (k, v) =
            item.split_once('=')
                .unwrap_or(if i == 0 { ("host", item) } else { (item, "") });
        match k {
            "host" => {
                hosts = v
                    .split(';')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            "pcie" => {
                pcie = v == "1";
                opts.push(item.to_owned());
            }
            "mapping" => mapping = Some(v.to_owned()),
            _ => opts.push(item.to_owned()),
        }
    }
    let mut problems = vec![];
    if let Some(m) = &mapping {
        problems.push(format!(
            "resource mapping {m:?}: check that the mapping names function .0 only (Datacenter → Resource Mappings)"
        ));
    }
    for h in hosts.iter().filter(|h| is_whole_slot(h)) {
        problems.extend(whole_slot_problem(h, None));
    }
    let slots_with_func0: Vec<&str> = hosts.iter().filter_map(|h| h.strip_suffix(".0")).collect();
    if hosts.len() > 1 && !slots_with_func0.is_empty() {
        problems.push(format!(
            "{} lists several functions ({}): they are passed as one multifunction device",
            key,
            hosts.join(";")
        ));
    }
    if !pcie {
        problems.push("pcie=1 missing: the device sits behind a conventional PCI bridge, not a PCIe root port".into());
    }
    let fixed = if problems.is_empty() || mapping.is_some() {
        None
    } else {
        let first = hosts
            .first()
            .map(|h| h.split('.').next().unwrap_or(h).to_owned())
            .unwrap_or_default();
        let mut rest: Vec<String> = opts
            .into_iter()
            .filter(|o| !o.starts_with("pcie="))
            .collect();
        rest.insert(0, "pcie=1".into());
        Some(format!("{key}: {first}.0,{}", rest.join(",")))
    };
    HostPci {
        key: key.to_owned(),
        value: value.to_owned(),
        hosts,
        pcie,
        mapping,
        problems,
        fixed,
        host_functions: vec![],
    }
}

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
