//! `rcclfix doctor --lspci FILE`: read pasted `lspci -vvv` / `-vvvnn` / `-vvvxxx` text (and the
//! tree of `lspci -tv`, when it is there) into the same PCI devices and upstream paths the sysfs
//! reader gives, so the kernel's path rule judges a bug report without a snapshot.
//!
//! Format: pciutils `lspci.c` (`show_device`: `BB:DD.F Class [cccc]: Vendor Device [vvvv:dddd]`,
//! the `Bus: primary=…, secondary=…` line of bridges, `-x` hex dumps) and `ls-caps.c`
//! (`cap_express`: `Capabilities: [70] Express (v2) Root Port (Slot-), MSI 00`;
//! `cap_express_dev2`: `AtomicOpsCap: Routing± 32bit± 64bit± 128bitCAS±` and
//! `AtomicOpsCtl: ReqEn± EgressBlck±`, printed per device type), `ls-tree.c` (`-t`).
//!
//! What cannot be read from the text is never "OK": a device whose AtomicOps lines the path rule
//! needs and the text lacks is [`ConfigView::Incomplete`], a GPU whose parent bridge is not in the
//! text has an incomplete path, and `Capabilities: <access denied>` asks for root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::pci::{
    decode_config, Bdf, ConfigView, ExpCap, PciDevice, PortType, DEVCAP2_ATOMIC_COMP128,
    DEVCAP2_ATOMIC_COMP32, DEVCAP2_ATOMIC_COMP64, DEVCAP2_ATOMIC_ROUTE,
    DEVCTL2_ATOMIC_EGRESS_BLOCK, DEVCTL2_ATOMIC_REQ,
};
use super::vm::Hypervisor;

/// One device block of the pasted text.
#[derive(Debug, Clone, Default)]
struct Block {
    bdf: Option<Bdf>,
    line_no: usize,
    class: Option<u32>,
    class_name: String,
    desc: String,
    vendor: Option<u16>,
    device: Option<u16>,
    secondary: Option<u8>,
    status_cap: Option<bool>,
    access_denied: bool,
    caps: usize,
    exp: Option<(u16, Option<u8>, PortType)>,
    atomic_cap: BTreeMap<String, bool>,
    atomic_ctl: BTreeMap<String, bool>,
    hex: Vec<(usize, Vec<u8>)>,
}

/// What the pasted text says about the PCI devices, in the shape the path rule needs.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Every device found, sorted by address (`dir` is empty: nothing is in sysfs).
    pub devices: Vec<PciDevice>,
    /// Device → the bridge directly above it.
    pub parent: BTreeMap<Bdf, Bdf>,
    /// (domain, bus) pairs known to be root buses (a host bridge on them, bus 00, or the tree).
    pub root_buses: BTreeSet<(u32, u8)>,
    /// Device → its description (`Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 […]`).
    pub names: BTreeMap<Bdf, String>,
    /// Device → its description in the `lspci -tv` tree (`Advanced Micro Devices, Inc. [AMD/ATI]
    /// Ellesmere […]`), for devices the tree shows whether or not a `-vvv` block was pasted.
    pub tree_names: BTreeMap<Bdf, String>,
    /// Devices whose device ID the text does not give (no `-nn`, and a name pci.ids knows).
    pub unknown_ids: BTreeSet<Bdf>,
    /// The files read.
    pub files: Vec<String>,
    /// Signs that the text is cut or malformed (a device header cut before its class or vendor,
    /// a line that starts like an address but is none, a last block without the blank line lspci
    /// ends every device with), each naming the line: a device may be missing, so the text
    /// cannot say "not affected".
    pub cut: Vec<String>,
}

/// A column-0 line whose first word is a start of an address (`BB:DD.F` or `DDDD:BB:DD.F`, with
/// its first `:`): a device header (`03:00.0 VGA …`) that is not a whole one.
fn looks_like_cut_header(line: &str) -> bool {
    let tok = line.split_whitespace().next().unwrap_or("");
    let fits = |shape: &str| {
        tok.len() <= shape.len()
            && tok.bytes().zip(shape.bytes()).all(|(c, s)| match s {
                b'x' => c.is_ascii_hexdigit(),
                _ => c == s,
            })
    };
    tok.contains(':') && (fits("xx:xx.x") || fits("xxxx:xx:xx.x"))
}

fn hex_u8(s: &str) -> Option<u8> {
    (s.len() == 2)
        .then(|| u8::from_str_radix(s, 16).ok())
        .flatten()
}

/// `DDDD:BB:DD.F` or `BB:DD.F` at the start of `s`, and the rest after one space.
fn header_bdf(s: &str) -> Option<(Bdf, &str)> {
    let (tok, rest) = s.split_once(' ')?;
    let b = Bdf::parse(tok)?;
    Some((b, rest))
}

/// The `[vvvv:dddd]` of `-nn` output (the last such bracket).
fn id_pair(desc: &str) -> Option<(u16, u16)> {
    desc.match_indices('[').rev().find_map(|(i, _)| {
        let inner = desc[i + 1..].split(']').next()?;
        let (v, d) = inner.split_once(':')?;
        if v.len() != 4 || d.len() != 4 {
            return None;
        }
        Some((
            u16::from_str_radix(v, 16).ok()?,
            u16::from_str_radix(d, 16).ok()?,
        ))
    })
}

/// Vendor names as pci.ids spells them, for text without `-nn`.
const VENDORS: &[(&str, u16)] = &[
    ("Advanced Micro Devices, Inc. [AMD/ATI]", 0x1002),
    ("ATI Technologies", 0x1002),
    ("Advanced Micro Devices, Inc. [AMD]", 0x1022),
    ("Red Hat, Inc.", 0x1b36),
    ("Intel Corporation", 0x8086),
    ("NVIDIA Corporation", 0x10de),
    ("VMware", 0x15ad),
];

/// Device names of emulated bridges as pci.ids spells them (QEMU's root ports), for text without
/// `-nn`: (name, vendor, device).
const KNOWN_DEVICE_NAMES: &[(&str, u16, u16)] = &[
    ("QEMU PCIe Root port", 0x1b36, 0x000c),
    (
        "7500/5520/5500/X58 I/O Hub PCI Express Root Port 0",
        0x8086,
        0x3420,
    ),
];

/// Class names of `lspci` without `-n` → class code (pci.ids `C` section).
const CLASSES: &[(&str, u32)] = &[
    ("VGA compatible controller", 0x030000),
    ("3D controller", 0x030200),
    ("Display controller", 0x038000),
    ("Host bridge", 0x060000),
    ("PCI bridge", 0x060400),
    ("Audio device", 0x040300),
];

fn parse_header(b: &mut Block, rest: &str) {
    // `-n`: `0300: 1002:744c (rev c8)`.
    if let Some((cls, desc)) = rest.split_once(": ") {
        let cls = cls.trim();
        if cls.len() == 4 && cls.bytes().all(|c| c.is_ascii_hexdigit()) {
            b.class = u32::from_str_radix(cls, 16).ok().map(|c| c << 8);
            let id = desc.split_whitespace().next().unwrap_or("");
            if let Some((v, d)) = id.split_once(':') {
                b.vendor = u16::from_str_radix(v, 16).ok();
                b.device = u16::from_str_radix(d, 16).ok();
            }
            b.desc = desc.trim().to_owned();
            return;
        }
        // `VGA compatible controller [0300]: …` (`-nn`) or `VGA compatible controller: …`.
        let (name, code) = match cls.rsplit_once(" [") {
            Some((n, c)) => (n, c.strip_suffix(']')),
            None => (cls, None),
        };
        b.class_name = name.to_owned();
        b.class = code
            .and_then(|c| u32::from_str_radix(c, 16).ok())
            .map(|c| c << 8)
            .or_else(|| CLASSES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c));
        b.desc = desc.trim().to_owned();
        if let Some((v, d)) = id_pair(desc) {
            b.vendor = Some(v);
            b.device = Some(d);
        } else {
            b.vendor = VENDORS
                .iter()
                .find(|(n, _)| desc.starts_with(n))
                .map(|(_, v)| *v);
            // pci.ids has no name for it: `Device 744c`.
            b.device = desc
                .split_once("Device ")
                .and_then(|(_, r)| r.get(..4))
                .and_then(|d| u16::from_str_radix(d, 16).ok())
                .or_else(|| {
                    KNOWN_DEVICE_NAMES
                        .iter()
                        .find(|(n, v, _)| desc.contains(n) && b.vendor == Some(*v))
                        .map(|(_, _, d)| *d)
                });
        }
    }
}

/// `Name±` flags after `key:` on a line, e.g. `AtomicOpsCap: Routing- 32bit+`.
fn flags_after(line: &str, key: &str) -> BTreeMap<String, bool> {
    let Some((_, rest)) = line.split_once(key) else {
        return BTreeMap::new();
    };
    rest.split([' ', ','])
        .filter_map(|t| {
            let t = t.trim();
            let sign = t.chars().last()?;
            // By characters, not bytes: the text is pasted and may hold `±` or any other
            // non-ASCII character there.
            let name = &t[..t.len() - sign.len_utf8()];
            match sign {
                '+' if !name.is_empty() => Some((name.to_owned(), true)),
                '-' if !name.is_empty() => Some((name.to_owned(), false)),
                _ => None,
            }
        })
        .collect()
}

fn port_type_from_text(s: &str) -> Option<PortType> {
    // Longest names first: "Root Complex Integrated Endpoint" before "Endpoint".
    const T: &[(&str, PortType)] = &[
        ("Root Complex Integrated Endpoint", PortType::RcEndpoint),
        ("Root Complex Event Collector", PortType::RcEventCollector),
        ("PCI-Express to PCI/PCI-X Bridge", PortType::PcieToPciBridge),
        ("PCI/PCI-X to PCI-Express Bridge", PortType::PciToPcieBridge),
        ("Legacy Endpoint", PortType::LegacyEndpoint),
        ("Root Port", PortType::RootPort),
        ("Upstream Port", PortType::SwitchUpstream),
        ("Downstream Port", PortType::SwitchDownstream),
        ("Endpoint", PortType::Endpoint),
    ];
    T.iter().find(|(n, _)| s.starts_with(n)).map(|(_, t)| *t)
}

fn parse_body_line(b: &mut Block, line: &str) {
    let t = line.trim();
    if let Some(r) = t.strip_prefix("Bus: ") {
        b.secondary = r
            .split(", ")
            .find_map(|kv| kv.strip_prefix("secondary="))
            .and_then(hex_u8);
    } else if let Some(r) = t.strip_prefix("Status: ") {
        if r.starts_with("Cap+") {
            b.status_cap = Some(true);
        } else if r.starts_with("Cap-") {
            b.status_cap = Some(false);
        }
    } else if t.starts_with("Capabilities: <access denied>") {
        b.access_denied = true;
    } else if let Some(r) = t.strip_prefix("Capabilities: [") {
        b.caps += 1;
        let (off, what) = r.split_once("] ").unwrap_or((r, ""));
        // Extended capabilities print `[100 v1]`: not the standard list.
        if off.contains(' ') {
            return;
        }
        if let Some(e) = what.strip_prefix("Express ") {
            let (ver, ty) = match e.strip_prefix("(v") {
                Some(x) => {
                    let (v, r) = x.split_once(") ").unwrap_or((x, ""));
                    (v.parse::<u8>().ok(), r)
                }
                None => (None, e),
            };
            if let (Some(t), Ok(o)) = (port_type_from_text(ty), u16::from_str_radix(off, 16)) {
                b.exp = Some((o, ver, t));
            }
        }
    } else if t.contains("AtomicOpsCap:") {
        b.atomic_cap = flags_after(t, "AtomicOpsCap:");
    } else if t.contains("AtomicOpsCtl:") {
        b.atomic_ctl = flags_after(t, "AtomicOpsCtl:");
    } else if let Some((off, bytes)) = hex_dump_line(t) {
        b.hex.push((off, bytes));
    }
}

/// `40: 01 50 03 c8 …` (`lspci -x`/`-xxx`): offset and bytes.
fn hex_dump_line(t: &str) -> Option<(usize, Vec<u8>)> {
    let (off, rest) = t.split_once(": ")?;
    if off.len() < 2 || off.len() > 3 || !off.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let bytes: Option<Vec<u8>> = rest.split_whitespace().map(hex_u8).collect();
    let bytes = bytes.filter(|b| !b.is_empty() && b.len() <= 16)?;
    Some((usize::from_str_radix(off, 16).ok()?, bytes))
}

impl Block {
    /// The contiguous config-space bytes of a hex dump, from offset 0.
    fn hex_bytes(&self) -> Option<Vec<u8>> {
        let mut out = vec![];
        for (off, b) in &self.hex {
            if *off != out.len() {
                break;
            }
            out.extend_from_slice(b);
        }
        (!out.is_empty()).then_some(out)
    }

    fn config(&self) -> ConfigView {
        if let Some(bytes) = self.hex_bytes() {
            match decode_config(&bytes) {
                ConfigView::Truncated { .. } if self.exp.is_some() => {}
                ConfigView::Truncated { len } => {
                    return ConfigView::Incomplete {
                        reason: format!("the hex dump has only {len} bytes of config space: paste `sudo lspci -xxx`"),
                    }
                }
                v => return v,
            }
        }
        if self.access_denied {
            return ConfigView::Incomplete {
                reason: "lspci printed `Capabilities: <access denied>`: run it as root (sudo lspci -vvv)".into(),
            };
        }
        let Some((offset, version, port_type)) = self.exp else {
            return match (self.status_cap, self.caps) {
                (Some(false), _) => ConfigView::NotExpress,
                (_, n) if n > 0 => ConfigView::NotExpress,
                _ => ConfigView::Incomplete {
                    reason: "the pasted text shows no capability list for this device (paste the whole `sudo lspci -vvv` output)".into(),
                },
            };
        };
        let Some(version) = version else {
            return ConfigView::Incomplete {
                reason: "the PCI Express capability is printed without its details (paste `lspci -vvv`, not `-v`)".into(),
            };
        };
        if version < 2 {
            return ConfigView::Express {
                cap: ExpCap {
                    offset,
                    version,
                    port_type,
                    devcap2: 0,
                    devctl2: 0,
                    completer_shown: true,
                },
            };
        }
        let need_cap: &[&str] = match port_type {
            PortType::RootPort => &["32bit", "64bit"],
            PortType::SwitchUpstream | PortType::SwitchDownstream => &["Routing"],
            _ => &[],
        };
        let need_ctl: &[&str] = match port_type {
            PortType::SwitchUpstream => &["EgressBlck"],
            _ => &[],
        };
        for (need, got, line) in [
            (need_cap, &self.atomic_cap, "AtomicOpsCap"),
            (need_ctl, &self.atomic_ctl, "AtomicOpsCtl"),
        ] {
            if let Some(m) = need.iter().find(|n| !got.contains_key(**n)) {
                return ConfigView::Incomplete {
                    reason: format!(
                        "the pasted {} has no `{line}: … {m}±` line (a cut paste, or an lspci older than pciutils 3.6 that does not decode AtomicOps: paste `sudo lspci -xxx` instead)",
                        port_type.name()
                    ),
                };
            }
        }
        let f = |m: &BTreeMap<String, bool>, k: &str, bit: u32| {
            if m.get(k).copied().unwrap_or(false) {
                bit
            } else {
                0
            }
        };
        let devcap2 = f(&self.atomic_cap, "Routing", DEVCAP2_ATOMIC_ROUTE)
            | f(&self.atomic_cap, "32bit", DEVCAP2_ATOMIC_COMP32)
            | f(&self.atomic_cap, "64bit", DEVCAP2_ATOMIC_COMP64)
            | f(&self.atomic_cap, "128bitCAS", DEVCAP2_ATOMIC_COMP128);
        let devctl2 = f(&self.atomic_ctl, "ReqEn", u32::from(DEVCTL2_ATOMIC_REQ))
            | f(
                &self.atomic_ctl,
                "EgressBlck",
                u32::from(DEVCTL2_ATOMIC_EGRESS_BLOCK),
            );
        ConfigView::Express {
            cap: ExpCap {
                offset,
                version,
                port_type,
                devcap2,
                devctl2: devctl2 as u16,
                completer_shown: port_type == PortType::RootPort
                    || self.atomic_cap.contains_key("32bit"),
            },
        }
    }
}

/// The `lspci -tv` tree: child → parent bridge, and the root buses. Children of a bridge are
/// printed in one column below its first child, so a map from column to (bus, bridge) follows
/// the nesting line by line.
fn parse_tree(
    text: &str,
    parent: &mut BTreeMap<Bdf, Bdf>,
    roots: &mut BTreeSet<(u32, u8)>,
    names: &mut BTreeMap<Bdf, String>,
) {
    let mut cols: BTreeMap<usize, (u32, u8, Option<Bdf>)> = BTreeMap::new();
    for line in text.lines() {
        let t = line.trim_start();
        if !(t.starts_with("-[")
            || t.starts_with("+-")
            || t.starts_with("\\-")
            || t.starts_with('|'))
        {
            continue;
        }
        let b = line.as_bytes();
        // (column of the entry, the bus its children sit on, the entry itself)
        let mut pending: Option<(u32, u8, Option<Bdf>)> = None;
        let mut i = 0;
        while i < b.len() {
            // A root: `-[0000:00]-` (the domain may be absent: `-[00]-`).
            if b[i] == b'[' && (i == 0 || b[i - 1] == b'-') {
                let inner = line[i + 1..].split(']').next().unwrap_or("");
                let after = i + 1 + inner.len() + 1;
                let is_root = !inner.contains('-') || inner.contains(':');
                if is_root && pending.is_none() {
                    let (dom, bus) = match inner.split_once(':') {
                        Some((d, bb)) => (u32::from_str_radix(d, 16).ok(), hex_u8(bb)),
                        None => (Some(0), hex_u8(inner)),
                    };
                    if let (Some(d), Some(bb)) = (dom, bus) {
                        roots.insert((d, bb));
                        pending = Some((d, bb, None));
                    }
                }
                i = after.max(i + 1);
                continue;
            }
            let entry = line.get(i..i + 4).filter(|s| {
                let s = s.as_bytes();
                s[0].is_ascii_hexdigit()
                    && s[1].is_ascii_hexdigit()
                    && s[2] == b'.'
                    && (b'0'..=b'7').contains(&s[3])
            });
            if let (Some(e), true) = (entry, i > 0 && b[i - 1] == b'-') {
                let ctx = pending.take().or_else(|| cols.get(&i).copied());
                if let Some((dom, bus, up)) = ctx {
                    cols.retain(|c, _| *c <= i);
                    cols.insert(i, (dom, bus, up));
                    let me = Bdf::parse(&format!("{dom:04x}:{bus:02x}:{e}"));
                    if let (Some(me), Some(up)) = (me, up) {
                        parent.insert(me, up);
                    }
                    // `00.0  Advanced Micro Devices, Inc. [AMD/ATI] Ellesmere […]`: a leaf's name.
                    if let (Some(me), Some(rest)) = (me, line.get(i + 4..)) {
                        if let Some(n) = rest.strip_prefix("  ") {
                            names.insert(me, n.trim().to_owned());
                        }
                    }
                    // A bridge: `01.1-[01-03]--`: its children are on the secondary bus.
                    if line.get(i + 4..i + 6) == Some("-[") {
                        let inner = line[i + 6..].split(']').next().unwrap_or("");
                        let sec = hex_u8(inner.split('-').next().unwrap_or(""));
                        if let (Some(sec), Some(me)) = (sec, me) {
                            pending = Some((dom, sec, Some(me)));
                        }
                    }
                }
                i += 4;
                continue;
            }
            i += 1;
        }
    }
}

/// Parse pasted lspci text (one or more files' worth).
///
/// Errors: the text holds no device block and no tree (one line naming `what`).
pub fn parse(text: &str, what: &str) -> anyhow::Result<Topology> {
    let mut blocks: Vec<Block> = vec![];
    let mut cut = vec![];
    // Whether a blank line followed each block.
    let mut ended: Vec<bool> = vec![];
    let mut last_line_ends_a_block = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        // A blank line, or the first line of an `lspci -tv` tree (`-[0000:00]-+-…`) pasted
        // right after the blocks, ends the block before it.
        if line.is_empty() || line.starts_with("-[") {
            if let Some(e) = ended.last_mut() {
                *e = true;
            }
            if line.is_empty() {
                continue;
            }
        }
        if !line.starts_with([' ', '\t']) {
            if let Some((bdf, rest)) = header_bdf(line.trim_start()) {
                let mut b = Block {
                    bdf: Some(bdf),
                    line_no: i + 1,
                    ..Default::default()
                };
                parse_header(&mut b, rest);
                blocks.push(b);
                ended.push(false);
                last_line_ends_a_block = false;
                continue;
            }
            if looks_like_cut_header(line) {
                cut.push(format!(
                    "line {}: `{}` starts like a device header but is not one (cut or malformed)",
                    i + 1,
                    short(line)
                ));
                continue;
            }
        } else if let Some((bdf, rest)) = header_bdf(line.trim_start()) {
            // Indented paste (a forum quote): a header still starts with an address and a class.
            if rest.contains(": ") {
                let mut b = Block {
                    bdf: Some(bdf),
                    line_no: i + 1,
                    ..Default::default()
                };
                parse_header(&mut b, rest);
                blocks.push(b);
                ended.push(false);
                last_line_ends_a_block = false;
                continue;
            }
        }
        if let Some(b) = blocks.last_mut() {
            parse_body_line(b, line);
            let t = line.trim_start();
            last_line_ends_a_block =
                t.starts_with("Kernel driver in use:") || t.starts_with("Kernel modules:");
        }
    }
    let mut topo = Topology::default();
    parse_tree(
        text,
        &mut topo.parent,
        &mut topo.root_buses,
        &mut topo.tree_names,
    );
    if blocks.is_empty() && topo.parent.is_empty() && topo.root_buses.is_empty() {
        anyhow::bail!(
            "{what}: no lspci device block (`BB:DD.F Class: …` lines from `sudo lspci -vvv`) and no `lspci -tv` tree"
        );
    }
    for b in &blocks {
        let (Some(bdf), hex) = (b.bdf, b.hex_bytes()) else {
            continue;
        };
        let hex_len = hex.map_or(0, |h| h.len());
        if b.class.is_none() && hex_len < 12 {
            cut.push(format!(
                "line {}: the header of {bdf} names no device class (cut or malformed)",
                b.line_no
            ));
        } else if b.vendor.is_none()
            && hex_len < 2
            && b.class.is_some_and(|c| c >> 16 == 0x03)
            && (b.desc.is_empty() || VENDORS.iter().any(|(n, _)| n.starts_with(b.desc.as_str())))
        {
            cut.push(format!(
                "line {}: the header of the display device {bdf} is cut before its vendor's name (`{}`)",
                b.line_no,
                short(&b.desc)
            ));
        }
    }
    // lspci ends every device block with a blank line; a last block without it is complete only
    // when it ends with what `-v` prints last (the `-k` lines), else the paste was cut in it.
    if ended.last() == Some(&false) && !last_line_ends_a_block {
        if let Some(b) = blocks.last() {
            cut.push(format!(
                "the last device block ({}, line {}) ends without the blank line lspci prints after every device: the paste looks cut there",
                b.bdf.map(|b| b.to_string()).unwrap_or_default(),
                b.line_no
            ));
        }
    }
    topo.cut = cut;
    // Later blocks for the same address (the same device pasted twice) replace earlier ones.
    let mut by_bdf: BTreeMap<Bdf, Block> = BTreeMap::new();
    for b in blocks {
        if let Some(bdf) = b.bdf {
            by_bdf.insert(bdf, b);
        }
    }
    // Parents from the bridges' `Bus: secondary=` lines.
    let secondaries: BTreeMap<(u32, u8), Bdf> = by_bdf
        .values()
        .filter_map(|b| Some(((b.bdf?.domain, b.secondary?), b.bdf?)))
        .collect();
    for bdf in by_bdf.keys() {
        if let Some(p) = secondaries.get(&(bdf.domain, bdf.bus)) {
            topo.parent.entry(*bdf).or_insert(*p);
        }
    }
    for (bdf, b) in &by_bdf {
        let claimed = secondaries.contains_key(&(bdf.domain, bdf.bus));
        if !claimed && (bdf.bus == 0 || b.class.is_some_and(|c| c >> 8 == 0x0600)) {
            topo.root_buses.insert((bdf.domain, bdf.bus));
        }
    }
    for (bdf, b) in &by_bdf {
        let bytes = b.hex_bytes();
        let hdr16 = |o: usize| {
            bytes
                .as_ref()
                .and_then(|x| Some(u16::from_le_bytes([*x.get(o)?, *x.get(o + 1)?])))
        };
        let vendor = b.vendor.or_else(|| hdr16(0));
        let device = b.device.or_else(|| hdr16(2));
        if device.is_none() {
            topo.unknown_ids.insert(*bdf);
        }
        let class = b.class.or_else(|| {
            let x = bytes.as_ref()?;
            Some(u32::from_le_bytes([*x.get(8)?, *x.get(9)?, *x.get(10)?, *x.get(11)?]) >> 8)
        });
        let multifunction_header = bytes
            .as_ref()
            .and_then(|x| x.get(0x0e))
            .is_some_and(|h| h & 0x80 != 0);
        topo.names.insert(*bdf, b.desc.clone());
        topo.devices.push(PciDevice {
            bdf: *bdf,
            vendor: vendor.unwrap_or(0xffff),
            device: device.unwrap_or(0),
            class: class.unwrap_or(0),
            multifunction_header,
            is_virtfn: false,
            config_len: bytes.as_ref().map_or(0, Vec::len),
            config: b.config(),
            dir: PathBuf::new(),
        });
        tracing::debug!("{what}:{}: {bdf} {}", b.line_no, b.class_name);
    }
    topo.files.push(what.to_owned());
    Ok(topo)
}

/// Read and parse `--lspci` files (each at most [`super::input::MAX_INPUT_BYTES`], regular files
/// only); several files (e.g. `lspci -vvv` and `lspci -tv` saved apart) make one topology.
///
/// Errors: a file cannot be read, is not a regular file, is too large, or holds no lspci output.
pub fn read_files(paths: &[PathBuf]) -> anyhow::Result<Topology> {
    let mut text = String::new();
    let mut cut = vec![];
    for p in paths {
        let t = super::input::read_capped(p, super::input::MAX_INPUT_BYTES)
            .map_err(|e| anyhow::anyhow!("--lspci {}: {e:#}", p.display()))?;
        if !t.is_empty() && !t.ends_with('\n') {
            cut.push(format!(
                "{} ends in the middle of line {} (no newline after it): the paste looks cut",
                p.display(),
                t.lines().count()
            ));
        }
        text.push_str(&t);
        if !t.ends_with('\n') {
            text.push('\n');
        }
    }
    let what = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut topo = parse(&text, &format!("--lspci {what}"))?;
    topo.cut.extend(cut);
    Ok(topo)
}

/// `s` cut to 80 characters (by characters: the text is pasted), for messages.
fn short(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

impl Topology {
    /// The bridges above `dev`, nearest first, or why the text does not show them.
    pub fn upstream(&self, dev: &PciDevice) -> Result<Vec<PciDevice>, String> {
        let mut out = vec![];
        let mut cur = dev.bdf;
        for _ in 0..32 {
            if self.root_buses.contains(&(cur.domain, cur.bus)) && !self.parent.contains_key(&cur) {
                return Ok(out);
            }
            let Some(p) = self.parent.get(&cur) else {
                return Err(format!(
                    "the bridge above {cur} (bus {:02x}) is not in the pasted text: paste the whole `sudo lspci -vvv`, or add `lspci -tv`",
                    cur.bus
                ));
            };
            let Some(d) = self.devices.iter().find(|d| d.bdf == *p) else {
                return Err(format!(
                    "{p}, the bridge above {cur}, is in the tree but its `lspci -vvv` block is not in the pasted text"
                ));
            };
            out.push(d.clone());
            cur = *p;
        }
        Err(format!("the bridges above {} loop", dev.bdf))
    }

    /// The hypervisor the devices give away (QEMU's root ports and host bridges, VMware's ports).
    pub fn hypervisor(&self) -> Hypervisor {
        let mut h = Hypervisor::default();
        let qemu = self
            .devices
            .iter()
            .any(|d| matches!(d.vendor, 0x1b36 | 0x1af4))
            || self.names.values().any(|n| n.contains("QEMU"));
        let vmware = self.devices.iter().any(|d| d.vendor == 0x15ad);
        let host_bridge = |needle: &str| self.names.values().any(|n| n.contains(needle));
        if qemu {
            h.is_vm = true;
            h.is_qemu = true;
            h.name = Some("QEMU/KVM".into());
            h.product_name = Some(
                if host_bridge("82G33/G31/P35/P31") {
                    "q35 (from the host bridge in the pasted lspci)"
                } else if host_bridge("440FX") {
                    "i440fx (from the host bridge in the pasted lspci)"
                } else {
                    "QEMU devices in the pasted lspci"
                }
                .into(),
            );
        } else if vmware {
            h.is_vm = true;
            h.name = Some("VMware".into());
            h.product_name = Some("VMware devices in the pasted lspci".into());
        }
        h
    }
}

/// Read a `Path` for tests and tools: the whole topology from one file.
pub fn read_file(path: &Path) -> anyhow::Result<Topology> {
    read_files(&[path.to_owned()])
}
