//! PCI config space and the PCIe path from a GPU to its root port, judged by the Linux kernel's own
//! rule (`pci_enable_atomic_ops_to_root` in `drivers/pci/pci.c`).
//!
//! Register layout: `include/uapi/linux/pci_regs.h`. Everything is
//! read from a sysfs root (`<sysfs>/bus/pci/devices/<bdf>` symlinks into `<sysfs>/devices/pci…/…`), so
//! a captured snapshot reads exactly like the live `/sys`.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

/// Offset of the 16-bit Status register; bit 4 (`PCI_STATUS_CAP_LIST`) says a capability list exists.
pub const PCI_STATUS: usize = 0x06;
/// `PCI_STATUS_CAP_LIST`.
pub const PCI_STATUS_CAP_LIST: u16 = 0x10;
/// Offset of the Header Type byte; bit 7 marks a multi-function device.
pub const PCI_HEADER_TYPE: usize = 0x0e;
/// Offset of the capability pointer (type 0 and type 1 headers).
pub const PCI_CAPABILITY_LIST: usize = 0x34;
/// Capability ID of the PCI Express capability.
pub const PCI_CAP_ID_EXP: u8 = 0x10;
/// PCI Express Capabilities register (16-bit), offset within the capability.
pub const PCI_EXP_FLAGS: usize = 0x02;
/// Device Capabilities 2 (32-bit), offset within the capability.
pub const PCI_EXP_DEVCAP2: usize = 0x24;
/// Device Control 2 (16-bit), offset within the capability.
pub const PCI_EXP_DEVCTL2: usize = 0x28;
/// DevCap2 bit 6: the port routes AtomicOps.
pub const DEVCAP2_ATOMIC_ROUTE: u32 = 0x040;
/// DevCap2 bit 7: 32-bit AtomicOp completer.
pub const DEVCAP2_ATOMIC_COMP32: u32 = 0x080;
/// DevCap2 bit 8: 64-bit AtomicOp completer.
pub const DEVCAP2_ATOMIC_COMP64: u32 = 0x100;
/// DevCap2 bit 9: 128-bit CAS completer.
pub const DEVCAP2_ATOMIC_COMP128: u32 = 0x200;
/// DevCtl2 bit 6: AtomicOp requester enable (set by the kernel when the path passes).
pub const DEVCTL2_ATOMIC_REQ: u16 = 0x0040;
/// DevCtl2 bit 7: block AtomicOp egress.
pub const DEVCTL2_ATOMIC_EGRESS_BLOCK: u16 = 0x0080;
/// The completer mask amdgpu asks for: `COMP32 | COMP64`.
pub const AMDGPU_CAP_MASK: u32 = DEVCAP2_ATOMIC_COMP32 | DEVCAP2_ATOMIC_COMP64;

/// Size of config space an unprivileged reader gets from sysfs (the standard header only).
pub const UNPRIVILEGED_CONFIG_LEN: usize = 64;

/// Device/Port Type, PCI Express Capabilities register bits 7:4 (`PCI_EXP_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortType {
    /// 0x0 `PCI_EXP_TYPE_ENDPOINT`.
    Endpoint,
    /// 0x1 `PCI_EXP_TYPE_LEG_END`.
    LegacyEndpoint,
    /// 0x4 `PCI_EXP_TYPE_ROOT_PORT`.
    RootPort,
    /// 0x5 `PCI_EXP_TYPE_UPSTREAM`.
    SwitchUpstream,
    /// 0x6 `PCI_EXP_TYPE_DOWNSTREAM`.
    SwitchDownstream,
    /// 0x7 `PCI_EXP_TYPE_PCI_BRIDGE` (PCIe to PCI/PCI-X).
    PcieToPciBridge,
    /// 0x8 `PCI_EXP_TYPE_PCIE_BRIDGE` (PCI/PCI-X to PCIe).
    PciToPcieBridge,
    /// 0x9 `PCI_EXP_TYPE_RC_END` (root complex integrated endpoint).
    RcEndpoint,
    /// 0xa `PCI_EXP_TYPE_RC_EC`.
    RcEventCollector,
    /// Any other (reserved) value.
    Other(u8),
}

impl PortType {
    /// Decode bits 7:4 of the PCI Express Capabilities register.
    pub fn from_flags(flags: u16) -> PortType {
        match ((flags >> 4) & 0xf) as u8 {
            0x0 => PortType::Endpoint,
            0x1 => PortType::LegacyEndpoint,
            0x4 => PortType::RootPort,
            0x5 => PortType::SwitchUpstream,
            0x6 => PortType::SwitchDownstream,
            0x7 => PortType::PcieToPciBridge,
            0x8 => PortType::PciToPcieBridge,
            0x9 => PortType::RcEndpoint,
            0xa => PortType::RcEventCollector,
            v => PortType::Other(v),
        }
    }

    /// Whether `pci_enable_atomic_ops_to_root` accepts this type as the requesting device.
    pub fn is_endpoint(self) -> bool {
        matches!(
            self,
            PortType::Endpoint | PortType::LegacyEndpoint | PortType::RcEndpoint
        )
    }

    /// Human name, as in `lspci -vvv` "Express (v2) Root Port".
    pub fn name(self) -> &'static str {
        match self {
            PortType::Endpoint => "endpoint",
            PortType::LegacyEndpoint => "legacy endpoint",
            PortType::RootPort => "root port",
            PortType::SwitchUpstream => "switch upstream port",
            PortType::SwitchDownstream => "switch downstream port",
            PortType::PcieToPciBridge => "PCIe-to-PCI bridge",
            PortType::PciToPcieBridge => "PCI-to-PCIe bridge",
            PortType::RcEndpoint => "root complex integrated endpoint",
            PortType::RcEventCollector => "root complex event collector",
            PortType::Other(_) => "PCIe function (reserved type)",
        }
    }
}

/// The PCI Express capability fields that matter for AtomicOps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExpCap {
    /// Offset of the capability in config space.
    pub offset: u16,
    /// Capability version (PCIe Capabilities register bits 3:0); QEMU needs 2 to set completer bits.
    pub version: u8,
    /// Device/Port Type.
    pub port_type: PortType,
    /// Device Capabilities 2 (0 for capability version 1, which has no such register).
    pub devcap2: u32,
    /// Device Control 2.
    pub devctl2: u16,
    /// Whether DevCap2's AtomicOp completer bits were read (false only for a pasted `lspci` that
    /// does not print them: pciutils shows an endpoint's completer bits only when it has a memory
    /// BAR, `ls-caps.c` `cap_express_dev2`). The kernel's rule never reads an endpoint's.
    pub completer_shown: bool,
}

impl ExpCap {
    /// `lspci -vvv`-style AtomicOps text for this device type, e.g.
    /// `AtomicOpsCap: Routing- 32bit+ 64bit+ 128bitCAS-, AtomicOpsCtl: ReqEn- EgressBlck-`.
    pub fn lspci_text(&self) -> String {
        let pm = |b: bool| if b { '+' } else { '-' };
        let route = pm(self.devcap2 & DEVCAP2_ATOMIC_ROUTE != 0);
        let c32 = pm(self.devcap2 & DEVCAP2_ATOMIC_COMP32 != 0);
        let c64 = pm(self.devcap2 & DEVCAP2_ATOMIC_COMP64 != 0);
        let c128 = pm(self.devcap2 & DEVCAP2_ATOMIC_COMP128 != 0);
        let req = pm(self.devctl2 & DEVCTL2_ATOMIC_REQ != 0);
        let egress = pm(self.devctl2 & DEVCTL2_ATOMIC_EGRESS_BLOCK != 0);
        match self.port_type {
            PortType::SwitchUpstream | PortType::SwitchDownstream => {
                format!("AtomicOpsCap: Routing{route}, AtomicOpsCtl: EgressBlck{egress}")
            }
            PortType::RootPort => format!(
                "AtomicOpsCap: Routing{route} 32bit{c32} 64bit{c64} 128bitCAS{c128}, AtomicOpsCtl: ReqEn{req} EgressBlck{egress}"
            ),
            _ if !self.completer_shown => {
                format!("AtomicOpsCap: not shown, AtomicOpsCtl: ReqEn{req}")
            }
            _ => format!("AtomicOpsCap: 32bit{c32} 64bit{c64} 128bitCAS{c128}, AtomicOpsCtl: ReqEn{req}"),
        }
    }

    /// Whether the AtomicOp requester enable bit is set (`AtomicOpsCtl: ReqEn+`).
    pub fn req_enabled(&self) -> bool {
        self.devctl2 & DEVCTL2_ATOMIC_REQ != 0
    }
}

/// What could be read from one device's `config` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ConfigView {
    /// The PCI Express capability was found and read.
    Express {
        /// Its fields.
        cap: ExpCap,
    },
    /// The capability list was readable and has no PCI Express capability (a conventional PCI
    /// device; the kernel's walk does not check it).
    NotExpress,
    /// Only the first `len` bytes were readable (unprivileged sysfs read returns 64): the capability
    /// list cannot be walked. Run as root.
    Truncated {
        /// Bytes read.
        len: usize,
    },
    /// The file is malformed (bad capability chain).
    Malformed {
        /// Why.
        reason: String,
    },
    /// A text source (`--lspci`) does not show what the path rule needs for this device.
    Incomplete {
        /// What is missing and what to paste instead.
        reason: String,
    },
}

fn rd8(b: &[u8], o: usize) -> Option<u8> {
    b.get(o).copied()
}
fn rd16(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(o)?, *b.get(o + 1)?]))
}
fn rd32(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(o)?,
        *b.get(o + 1)?,
        *b.get(o + 2)?,
        *b.get(o + 3)?,
    ]))
}

/// The highest capability ID `pci_regs.h` defines (`PCI_CAP_ID_MAX`, Enhanced Allocation).
pub const PCI_CAP_ID_MAX: u8 = 0x15;
/// Size of the standard (non-extended) config space, where the capability list lives.
pub const STANDARD_CONFIG_LEN: usize = 256;
/// Bytes of a version 2 PCI Express capability that doctor reads (through DevCtl2).
const EXP_CAP_V2_READ: usize = PCI_EXP_DEVCTL2 + 2;

fn malformed(reason: String) -> ConfigView {
    ConfigView::Malformed { reason }
}

/// Decode a config-space dump (little-endian, as sysfs `config` returns it).
///
/// Walks the capability list from 0x34 (at most 48 entries, like the kernel's `PCI_FIND_CAP_TTL`)
/// to cap ID 0x10. A file shorter than what the walk needs is [`ConfigView::Truncated`] — never
/// treated as "no capability". Anything a real device cannot hold is [`ConfigView::Malformed`], so
/// garbage never turns into a verdict: a header type other than 0 (endpoint), 1 (bridge) or 2
/// (CardBus bridge, read as conventional PCI), a list
/// that loops or points into the header, a reserved capability ID (> `PCI_CAP_ID_MAX`), and a PCI
/// Express capability with a version other than 1/2, a reserved Device/Port Type, or registers past
/// the 256-byte standard space (pci_regs.h).
pub fn decode_config(bytes: &[u8]) -> ConfigView {
    if bytes.len() < UNPRIVILEGED_CONFIG_LEN {
        return ConfigView::Truncated { len: bytes.len() };
    }
    let header_type = rd8(bytes, PCI_HEADER_TYPE).unwrap_or(0) & 0x7f;
    if header_type > 2 {
        return malformed(format!(
            "header type {header_type} (expected 0, 1 or 2) at 0x{PCI_HEADER_TYPE:02x}"
        ));
    }
    if header_type == 2 {
        // A CardBus bridge: conventional PCI, its capability pointer is elsewhere (0x14).
        return ConfigView::NotExpress;
    }
    let status = rd16(bytes, PCI_STATUS).unwrap_or(0);
    if status & PCI_STATUS_CAP_LIST == 0 {
        return ConfigView::NotExpress;
    }
    let mut ptr = rd8(bytes, PCI_CAPABILITY_LIST).unwrap_or(0) as usize & !3;
    let mut ttl = 48;
    while ptr >= 0x40 && ttl > 0 {
        ttl -= 1;
        let (Some(id), Some(next)) = (rd8(bytes, ptr), rd8(bytes, ptr + 1)) else {
            return ConfigView::Truncated { len: bytes.len() };
        };
        if id == 0xff {
            break;
        }
        if id > PCI_CAP_ID_MAX {
            return malformed(format!("reserved capability ID 0x{id:02x} at 0x{ptr:02x}"));
        }
        if id == PCI_CAP_ID_EXP {
            let Some(flags) = rd16(bytes, ptr + PCI_EXP_FLAGS) else {
                return ConfigView::Truncated { len: bytes.len() };
            };
            let version = (flags & 0xf) as u8;
            let port_type = PortType::from_flags(flags);
            if !(1..=2).contains(&version) {
                return malformed(format!(
                    "PCI Express capability at 0x{ptr:02x} has version {version} (expected 1 or 2)"
                ));
            }
            if let PortType::Other(v) = port_type {
                return malformed(format!(
                    "PCI Express capability at 0x{ptr:02x} has reserved device/port type 0x{v:x}"
                ));
            }
            // Version 1 capabilities end before DevCap2; the kernel reads 0 there.
            let (devcap2, devctl2) = if version >= 2 {
                if ptr + EXP_CAP_V2_READ > STANDARD_CONFIG_LEN {
                    return malformed(format!(
                        "PCI Express capability at 0x{ptr:02x} runs past the 256-byte config space"
                    ));
                }
                match (
                    rd32(bytes, ptr + PCI_EXP_DEVCAP2),
                    rd16(bytes, ptr + PCI_EXP_DEVCTL2),
                ) {
                    (Some(a), Some(b)) => (a, b),
                    _ => return ConfigView::Truncated { len: bytes.len() },
                }
            } else {
                (0, 0)
            };
            return ConfigView::Express {
                cap: ExpCap {
                    offset: ptr as u16,
                    version,
                    port_type,
                    devcap2,
                    devctl2,
                    completer_shown: true,
                },
            };
        }
        ptr = next as usize & !3;
    }
    if ttl == 0 {
        return malformed("capability list loops".into());
    }
    if ptr != 0 && ptr < 0x40 {
        return malformed(format!(
            "capability pointer 0x{ptr:02x} points into the header"
        ));
    }
    ConfigView::NotExpress
}

/// A PCI bus/device/function address with domain, e.g. `0000:03:00.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    /// Domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number (0–31).
    pub dev: u8,
    /// Function number (0–7).
    pub func: u8,
}

impl Bdf {
    /// Parse `DDDD:BB:DD.F` (4 to 8 domain digits: Intel VMD domains are `10000` and up) or `BB:DD.F`
    /// (domain 0). Returns `None` on anything else.
    pub fn parse(s: &str) -> Option<Bdf> {
        let (rest, func) = s.rsplit_once('.')?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, dev) = match parts.as_slice() {
            [d, b, v] if (4..=8).contains(&d.len()) => (u32::from_str_radix(d, 16).ok()?, *b, *v),
            [b, v] => (0, *b, *v),
            _ => return None,
        };
        if bus.len() != 2 || dev.len() != 2 || func.len() != 1 {
            return None;
        }
        let bdf = Bdf {
            domain,
            bus: u8::from_str_radix(bus, 16).ok()?,
            dev: u8::from_str_radix(dev, 16).ok()?,
            func: u8::from_str_radix(func, 16).ok()?,
        };
        (bdf.dev < 32 && bdf.func < 8).then_some(bdf)
    }

    /// Build from KFD's `location_id` (`bus << 8 | devfn`) and `domain`.
    pub fn from_location(domain: u32, location_id: u32) -> Bdf {
        Bdf {
            domain,
            bus: ((location_id >> 8) & 0xff) as u8,
            dev: ((location_id >> 3) & 0x1f) as u8,
            func: (location_id & 7) as u8,
        }
    }

    /// The same slot, another function.
    pub fn with_func(self, func: u8) -> Bdf {
        Bdf { func, ..self }
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.dev, self.func
        )
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One PCI function as seen in sysfs.
#[derive(Debug, Clone, Serialize)]
pub struct PciDevice {
    /// Its address.
    pub bdf: Bdf,
    /// Vendor ID (`vendor` file).
    pub vendor: u16,
    /// Device ID (`device` file).
    pub device: u16,
    /// 24-bit class code (`class` file), e.g. 0x030000 for a VGA controller.
    pub class: u32,
    /// Header Type bit 7 (multi-function device), from config byte 0x0e.
    pub multifunction_header: bool,
    /// Whether this function is an SR-IOV virtual function (`physfn` link present).
    pub is_virtfn: bool,
    /// Bytes readable from `config`.
    pub config_len: usize,
    /// What the `config` file yields.
    pub config: ConfigView,
    /// The canonical sysfs directory (not serialised: it holds local paths).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl PciDevice {
    /// The PCI Express capability, when it was read.
    pub fn exp(&self) -> Option<&ExpCap> {
        match &self.config {
            ConfigView::Express { cap } => Some(cap),
            _ => None,
        }
    }

    /// Whether this is an AMD display-class function (vendor 0x1002, class 0x03xxxx).
    pub fn is_amd_gpu(&self) -> bool {
        self.vendor == 0x1002 && (self.class >> 16) == 0x03
    }
}

fn read_hex(path: &Path) -> anyhow::Result<u32> {
    let s = super::input::read_small_string(path, 64).with_context(|| {
        format!(
            "{}: missing, unreadable or not a regular file",
            path.display()
        )
    })?;
    let t = s.trim();
    let t = t.strip_prefix("0x").unwrap_or(t);
    u32::from_str_radix(t, 16)
        .with_context(|| format!("{}: not a hex number: {:?}", path.display(), s.trim()))
}

/// Read one PCI function from its sysfs directory (`…/0000:03:00.0`).
///
/// Errors: the directory name is not a BDF, or `vendor`/`device`/`class` is missing or malformed.
/// A missing or short `config` file is not an error (it becomes [`ConfigView::Truncated`]).
pub fn read_device(dir: &Path) -> anyhow::Result<PciDevice> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let bdf = Bdf::parse(name)
        .with_context(|| format!("{}: directory name is not a PCI address", dir.display()))?;
    // Config space is 4096 bytes at most (PCI Express extended space); a longer file is cut there.
    let config_bytes = super::input::read_small(&dir.join("config"), 4096).unwrap_or_default();
    let hdr16 = |o: usize| rd16(&config_bytes, o);
    let vendor = match read_hex(&dir.join("vendor")) {
        Ok(v) => v as u16,
        Err(e) => hdr16(0).ok_or(e)?,
    };
    let device = match read_hex(&dir.join("device")) {
        Ok(v) => v as u16,
        Err(e) => hdr16(2).ok_or(e)?,
    };
    let class = match read_hex(&dir.join("class")) {
        Ok(v) => v & 0xff_ffff,
        Err(e) => rd32(&config_bytes, 8).map(|v| v >> 8).ok_or(e)?,
    };
    let multifunction_header = rd8(&config_bytes, PCI_HEADER_TYPE).is_some_and(|h| h & 0x80 != 0);
    Ok(PciDevice {
        bdf,
        vendor,
        device,
        class,
        multifunction_header,
        is_virtfn: dir.join("physfn").exists(),
        config_len: config_bytes.len(),
        config: decode_config(&config_bytes),
        dir: dir.to_owned(),
    })
}

/// Every PCI function under `<sysfs>/bus/pci/devices`, sorted by address. Entries that cannot be read
/// are skipped with a debug log (sysfs can change under us); a missing directory gives an empty list.
/// [`list_devices_checked`] also says which were skipped.
pub fn list_devices(sysfs: &Path) -> Vec<PciDevice> {
    list_devices_checked(sysfs).0
}

/// [`list_devices`], and one line for each entry that could not be read (a dangling device link
/// in a snapshot, a device gone while it was read): `0000:03:00.0: …`. Any of them may be a GPU.
pub fn list_devices_checked(sysfs: &Path) -> (Vec<PciDevice>, Vec<String>) {
    let root = sysfs.join("bus/pci/devices");
    let Ok(rd) = std::fs::read_dir(&root) else {
        return (vec![], vec![]);
    };
    let mut unread = vec![];
    let mut out: Vec<PciDevice> = vec![];
    for e in rd {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                unread.push(format!("{}: cannot list: {err}", root.display()));
                continue;
            }
        };
        let p = e.path();
        let dir = match std::fs::canonicalize(&p) {
            Ok(d) => d,
            Err(err) => {
                let to = std::fs::read_link(&p)
                    .map(|t| format!(" (a link to {})", t.display()))
                    .unwrap_or_default();
                unread.push(format!(
                    "{}{to}: cannot be read: {err}",
                    e.file_name().to_string_lossy()
                ));
                continue;
            }
        };
        match read_device(&dir) {
            Ok(d) => out.push(d),
            Err(err) => {
                tracing::debug!(
                    "skipping {}",
                    crate::ui::Esc(format!("{}: {err:#}", dir.display()))
                );
                unread.push(format!("{}: {err:#}", e.file_name().to_string_lossy()));
            }
        }
    }
    out.sort_by_key(|d| d.bdf);
    unread.sort();
    (out, unread)
}

/// The upstream bridges of `dev`, nearest first, read from the canonical sysfs path: every parent
/// directory whose name is a BDF (the walk stops at `pciDDDD:BB`).
///
/// Errors: a parent bridge directory cannot be read.
pub fn upstream_bridges(dev: &PciDevice) -> anyhow::Result<Vec<PciDevice>> {
    let mut out = vec![];
    let mut cur = dev.dir.parent();
    while let Some(dir) = cur {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if Bdf::parse(name).is_none() {
            break;
        }
        out.push(read_device(dir)?);
        cur = dir.parent();
    }
    Ok(out)
}

/// Why a hop breaks the path, in the kernel's terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HopProblem {
    /// Root port lacks 32- and/or 64-bit completer (`(DevCap2 & cap_mask) != cap_mask`).
    RootPortNoCompleter,
    /// Switch port lacks `ATOMIC_ROUTE`.
    SwitchNoRouting,
    /// Switch upstream port has `ATOMIC_EGRESS_BLOCK` set.
    UpstreamEgressBlocked,
}

impl HopProblem {
    /// One-line explanation.
    pub fn describe(&self) -> &'static str {
        match self {
            HopProblem::RootPortNoCompleter => {
                "root port does not complete both 32- and 64-bit AtomicOps (amdgpu needs COMP32|COMP64)"
            }
            HopProblem::SwitchNoRouting => "switch port does not route AtomicOps (Routing-)",
            HopProblem::UpstreamEgressBlocked => "switch upstream port blocks AtomicOp egress (EgressBlck+)",
        }
    }
}

/// The result of applying `pci_enable_atomic_ops_to_root(gpu, COMP32|COMP64)` to a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum PathResult {
    /// Every check passes; the kernel sets ReqEn on the GPU.
    Passes {
        /// True when no root port was found (an RCiEP, or a GPU on a VM's root bus): the kernel's
        /// loop finds nothing to check and enables ReqEn anyway.
        no_root_port: bool,
    },
    /// The kernel returns -EINVAL at this hop.
    Breaks {
        /// The breaking bridge.
        hop: Bdf,
        /// Why.
        problem: HopProblem,
    },
    /// The GPU itself is refused before the walk (an SR-IOV VF, or a GPU behind a conventional PCI
    /// bridge that hides its PCI Express capability).
    DeviceRefused {
        /// Why.
        reason: String,
    },
    /// A config space on the path (the GPU's or a bridge's) is malformed (e.g. a looping capability
    /// list, or an AMD GPU without a PCI Express capability below a PCIe port): cannot judge.
    Malformed {
        /// The device.
        at: Bdf,
        /// Why.
        reason: String,
    },
    /// A text source (`--lspci`) does not show a device on the path, or what the rule needs of it.
    Incomplete {
        /// The device the text says too little about (or the GPU whose parent is missing).
        at: Bdf,
        /// What is missing.
        reason: String,
    },
    /// A config space on the path could not be read far enough: run as root.
    Unreadable {
        /// The first device whose capability list could not be read.
        at: Bdf,
        /// Bytes that were readable.
        len: usize,
    },
}

impl PathResult {
    /// Whether the kernel would enable AtomicOps for the GPU.
    pub fn passes(&self) -> bool {
        matches!(self, PathResult::Passes { .. })
    }
}

/// Apply the kernel's rule. `bridges` is nearest-first (as from [`upstream_bridges`]).
///
/// Mirrors `drivers/pci/pci.c`: VFs are refused; the device must be PCIe and an endpoint
/// (ENDPOINT, LEG_END, RC_END); every switch upstream/downstream port needs `ATOMIC_ROUTE`; every
/// root port needs `COMP32|COMP64` (its own Routing bit is **not** checked); every switch upstream
/// port needs `ATOMIC_EGRESS_BLOCK` clear. Bridges of other types (and conventional PCI bridges,
/// whose type reads as 0) are not checked. The endpoint's own completer bits are not checked.
///
/// `gpu` is an AMD GPU, which is always a PCI Express endpoint: a config space that says otherwise
/// (no PCI Express capability although its parent is a PCIe port or it sits on a root bus, or a
/// non-endpoint type) is [`PathResult::Malformed`], never a refusal. Only behind a conventional PCI
/// bridge (where a hypervisor hides the capability) does a missing capability mean the kernel
/// refuses it.
pub fn atomic_ops_to_root(gpu: &PciDevice, bridges: &[PciDevice]) -> PathResult {
    if gpu.is_virtfn {
        return PathResult::DeviceRefused {
            reason: "SR-IOV virtual function: AtomicOp requester enable belongs to the PF".into(),
        };
    }
    match &gpu.config {
        ConfigView::Truncated { len } => {
            return PathResult::Unreadable {
                at: gpu.bdf,
                len: *len,
            }
        }
        ConfigView::Malformed { reason } => {
            return PathResult::Malformed {
                at: gpu.bdf,
                reason: reason.clone(),
            }
        }
        ConfigView::Incomplete { reason } => {
            return PathResult::Incomplete {
                at: gpu.bdf,
                reason: reason.clone(),
            }
        }
        ConfigView::NotExpress => {
            let parent = bridges.first().map(|b| &b.config);
            return if matches!(parent, Some(ConfigView::NotExpress)) {
                PathResult::DeviceRefused {
                    reason: "not a PCI Express device (behind a conventional PCI bridge)".into(),
                }
            } else {
                PathResult::Malformed {
                    at: gpu.bdf,
                    reason: "no PCI Express capability on a GPU that must have one".into(),
                }
            };
        }
        ConfigView::Express { cap } if !cap.port_type.is_endpoint() => {
            return PathResult::Malformed {
                at: gpu.bdf,
                reason: format!(
                    "the GPU's PCI Express capability says {}, not an endpoint",
                    cap.port_type.name()
                ),
            }
        }
        ConfigView::Express { .. } => {}
    }
    let mut saw_root = false;
    for b in bridges {
        let cap = match &b.config {
            ConfigView::Express { cap } => cap,
            ConfigView::Truncated { len } => {
                return PathResult::Unreadable {
                    at: b.bdf,
                    len: *len,
                }
            }
            // Conventional bridges: pci_pcie_type() reads 0, no case matches, the walk goes on.
            ConfigView::NotExpress => continue,
            ConfigView::Malformed { reason } => {
                return PathResult::Malformed {
                    at: b.bdf,
                    reason: reason.clone(),
                }
            }
            ConfigView::Incomplete { reason } => {
                return PathResult::Incomplete {
                    at: b.bdf,
                    reason: reason.clone(),
                }
            }
        };
        match cap.port_type {
            PortType::SwitchUpstream | PortType::SwitchDownstream
                if cap.devcap2 & DEVCAP2_ATOMIC_ROUTE == 0 =>
            {
                return PathResult::Breaks {
                    hop: b.bdf,
                    problem: HopProblem::SwitchNoRouting,
                };
            }
            PortType::RootPort => {
                saw_root = true;
                if cap.devcap2 & AMDGPU_CAP_MASK != AMDGPU_CAP_MASK {
                    return PathResult::Breaks {
                        hop: b.bdf,
                        problem: HopProblem::RootPortNoCompleter,
                    };
                }
            }
            _ => {}
        }
        if cap.port_type == PortType::SwitchUpstream
            && cap.devctl2 & DEVCTL2_ATOMIC_EGRESS_BLOCK != 0
        {
            return PathResult::Breaks {
                hop: b.bdf,
                problem: HopProblem::UpstreamEgressBlocked,
            };
        }
    }
    PathResult::Passes {
        no_root_port: !saw_root,
    }
}

/// The QEMU-emulated root ports doctor recognises (vendor, device, name).
pub const QEMU_ROOT_PORTS: &[(u16, u16, &str)] = &[
    (0x1b36, 0x000c, "QEMU pcie-root-port"),
    (
        0x8086,
        0x3420,
        "QEMU ioh3420 (emulated Intel X58 root port)",
    ),
];

/// The name of a QEMU-emulated root port, if `dev` is one.
pub fn qemu_root_port_name(dev: &PciDevice) -> Option<&'static str> {
    QEMU_ROOT_PORTS
        .iter()
        .find(|(v, d, _)| *v == dev.vendor && *d == dev.device)
        .map(|(_, _, n)| *n)
}

/// In a VM guest, a GPU without a PCI Express capability is the VM's layout, not a malformed
/// config space: QEMU's vfio-pci hides the capability on a conventional PCI bus (an i440fx
/// machine, or a q35 machine without `pcie=1`, where the device sits behind a PCI bridge), and the
/// kernel's rule refuses AtomicOps for a device that is not PCIe (`pci_enable_atomic_ops_to_root`:
/// `if (!pci_is_pcie(dev)) return -EINVAL`). Returns the refusal [`atomic_ops_to_root`] gives
/// outside a VM as `Malformed`, or `None` when `result` is something else.
pub fn guest_layout_refusal(
    gpu: &PciDevice,
    bridges: &[PciDevice],
    result: &PathResult,
) -> Option<PathResult> {
    let no_cap = matches!(gpu.config, ConfigView::NotExpress);
    let conventional_above = bridges
        .first()
        .is_none_or(|b| matches!(b.config, ConfigView::NotExpress));
    let about_gpu = match result {
        PathResult::Malformed { at, .. } => *at == gpu.bdf,
        PathResult::DeviceRefused { .. } => true,
        _ => false,
    };
    (no_cap && conventional_above && about_gpu && !gpu.is_virtfn).then(|| PathResult::DeviceRefused {
        reason: if bridges.is_empty() {
            "the VM gives the GPU no PCI Express capability (it sits on the root bus of a conventional PCI machine, e.g. i440fx): the kernel enables AtomicOps only for PCIe devices".into()
        } else {
            "the VM gives the GPU no PCI Express capability (it sits behind a conventional PCI bridge, e.g. q35 without pcie=1): the kernel enables AtomicOps only for PCIe devices".into()
        },
    })
}
