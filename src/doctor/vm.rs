//! Virtual machines: hypervisor detection (DMI, the CPU's `hypervisor` flag), QEMU's rule for
//! AtomicOp completer bits on emulated root ports, and Proxmox VM configs (`hostpciN:` lines).
//!
//! Source: QEMU `hw/vfio/pci.c` `vfio_pci_enable_rp_atomics()` (8.1.0+), QEMU `hw/smbios` defaults
//! (SMBIOS type 1 product version = machine type), Proxmox `qm.conf(5)` (`hostpci[n]`).
//! Public report: the ROCm/ROCm#6520 body (multifunction vs single function on Proxmox).

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

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
