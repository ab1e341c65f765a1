//! The KFD topology in sysfs (`<sysfs>/class/kfd/kfd/topology/nodes/<n>/`): which GPU node belongs to
//! which PCI address, its gfx target, and whether KFD marked its link to system memory as having no
//! AtomicOps.
//!
//! Source: amdkfd `kfd_topology.c` (property names), `kfd_crat.h` / libhsakmt `hsakmttypes.h`
//! (`CRAT_IOLINK_FLAGS_*`), ROCr `amd_topology.cpp` (how the flags are honoured).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::pci::Bdf;

/// io_link flag bit 0: the link entry is enabled / overrides (`CRAT_IOLINK_FLAGS_ENABLED`).
pub const IOLINK_FLAGS_ENABLED: u32 = 1;
/// io_link flag bit 2: no 32-bit AtomicOps over this link.
pub const IOLINK_FLAGS_NO_ATOMICS_32_BIT: u32 = 4;
/// io_link flag bit 3: no 64-bit AtomicOps over this link.
pub const IOLINK_FLAGS_NO_ATOMICS_64_BIT: u32 = 8;
/// io_link type of a PCIe link (`HSA_IOLINKTYPE_PCIEXPRESS`).
pub const IOLINK_TYPE_PCIEXPRESS: u32 = 2;
/// io_link type of an XGMI link (exempt from the no-atomics marking).
pub const IOLINK_TYPE_XGMI: u32 = 11;

/// One io_link of a node.
#[derive(Debug, Clone, Serialize)]
pub struct IoLink {
    /// The io_link index (directory name).
    pub index: u32,
    /// `type` (2 PCIe, 11 XGMI, …).
    pub link_type: u32,
    /// `node_to`.
    pub node_to: u32,
    /// `flags` (`CRAT_IOLINK_FLAGS_*`).
    pub flags: u32,
}

impl IoLink {
    /// What ROCr concludes from the flags: `Some(true)` atomics, `Some(false)` none (bit 0 set and
    /// bit 2 or 3 set), `None` when bit 0 is clear (ROCr ignores the other bits then).
    pub fn atomics(&self) -> Option<bool> {
        if self.flags & IOLINK_FLAGS_ENABLED == 0 {
            return None;
        }
        Some(self.flags & (IOLINK_FLAGS_NO_ATOMICS_32_BIT | IOLINK_FLAGS_NO_ATOMICS_64_BIT) == 0)
    }
}

/// One KFD topology node that is a GPU.
#[derive(Debug, Clone, Serialize)]
pub struct KfdGpu {
    /// Node number.
    pub node: u32,
    /// PCI address from `domain` + `location_id`.
    pub bdf: Bdf,
    /// gfx name derived from `gfx_target_version` (or the node's `name` file), e.g. `gfx1100`.
    pub gfx: String,
    /// `device_id`.
    pub device_id: u32,
    /// Whether the node reports CPU cores too (an APU / integrated GPU).
    pub integrated: bool,
    /// io_links to CPU nodes (the GPU ↔ system-memory links ROCr asks about).
    pub links_to_cpu: Vec<IoLink>,
}

impl KfdGpu {
    /// What the links to CPU nodes say: `Some(false)` if any enabled non-XGMI link has a no-atomics
    /// bit, `Some(true)` if some enabled link says atomics and none says otherwise, else `None`.
    pub fn atomics(&self) -> Option<bool> {
        let mut any = None;
        for l in self
            .links_to_cpu
            .iter()
            .filter(|l| l.link_type != IOLINK_TYPE_XGMI)
        {
            match l.atomics() {
                Some(false) => return Some(false),
                Some(true) => any = Some(true),
                None => {}
            }
        }
        any
    }
}

/// Parse a KFD `properties` file (`key value` per line) into a map; non-numeric values are skipped.
pub fn parse_properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(char::is_whitespace)?;
            Some((k.to_owned(), v.trim().parse::<u64>().ok()?))
        })
        .collect()
}

/// gfx name from KFD's `gfx_target_version` (decimal `major*10000 + minor*100 + stepping`; minor and
/// stepping are printed in hex: 90010 → `gfx90a`, 110000 → `gfx1100`). `None` for 0.
pub fn gfx_name(gfx_target_version: u64) -> Option<String> {
    if gfx_target_version == 0 {
        return None;
    }
    let major = gfx_target_version / 10000;
    let minor = (gfx_target_version / 100) % 100;
    let step = gfx_target_version % 100;
    Some(format!("gfx{major}{minor:x}{step:x}"))
}

/// Integrated GPUs (iGPUs of Ryzen desktop/mobile CPUs) that ROCm exposes next to discrete cards.
pub fn is_known_igpu(gfx: &str) -> bool {
    matches!(
        gfx,
        "gfx1035" | "gfx1036" | "gfx1037" | "gfx1103" | "gfx1150" | "gfx1152" | "gfx902" | "gfx90c"
    )
}

/// A KFD file, at most [`super::input::MAX_SYSFS_FILE_BYTES`].
fn read(p: &Path) -> Option<String> {
    super::input::read_small_string(p, super::input::MAX_SYSFS_FILE_BYTES)
}

/// Read every GPU node. Returns `None` when the topology directory does not exist (amdgpu/KFD not
/// loaded, or not captured); nodes that cannot be parsed are skipped with a debug log.
pub fn read_topology(sysfs: &Path) -> Option<Vec<KfdGpu>> {
    let nodes_dir = sysfs.join("class/kfd/kfd/topology/nodes");
    let rd = std::fs::read_dir(&nodes_dir).ok()?;
    let mut props: BTreeMap<u32, (BTreeMap<String, u64>, String)> = BTreeMap::new();
    for e in rd.filter_map(|e| e.ok()) {
        let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Some(text) = read(&e.path().join("properties")) else {
            tracing::debug!("kfd node {n}: no properties");
            continue;
        };
        let name = read(&e.path().join("name"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        props.insert(n, (parse_properties(&text), name));
    }
    let is_cpu_only = |p: &BTreeMap<String, u64>| p.get("simd_count").copied().unwrap_or(0) == 0;
    let mut out = vec![];
    for (n, (p, name)) in &props {
        if is_cpu_only(p) {
            continue;
        }
        let domain = p.get("domain").copied().unwrap_or(0) as u32;
        let loc = p.get("location_id").copied().unwrap_or(0) as u32;
        let gfx = p
            .get("gfx_target_version")
            .and_then(|v| gfx_name(*v))
            // The `name` file is free text: only a gfx processor name this rcclfix knows is taken
            // (it becomes a `--targets` value and a report line).
            .or_else(|| {
                crate::recipe::known_processors()
                    .contains(&name.as_str())
                    .then(|| name.clone())
            })
            .unwrap_or_else(|| "unknown".into());
        let mut links = vec![];
        let links_dir = nodes_dir.join(n.to_string()).join("io_links");
        if let Ok(rd) = std::fs::read_dir(&links_dir) {
            for e in rd.filter_map(|e| e.ok()) {
                let Some(i) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let Some(text) = read(&e.path().join("properties")) else {
                    continue;
                };
                let lp = parse_properties(&text);
                let node_to = lp.get("node_to").copied().unwrap_or(u64::MAX) as u32;
                if !props.get(&node_to).is_some_and(|(q, _)| is_cpu_only(q)) {
                    continue;
                }
                links.push(IoLink {
                    index: i,
                    link_type: lp.get("type").copied().unwrap_or(0) as u32,
                    node_to,
                    flags: lp.get("flags").copied().unwrap_or(0) as u32,
                });
            }
        }
        links.sort_by_key(|l| l.index);
        out.push(KfdGpu {
            node: *n,
            bdf: Bdf::from_location(domain, loc),
            gfx,
            device_id: p.get("device_id").copied().unwrap_or(0) as u32,
            integrated: p.get("cpu_cores_count").copied().unwrap_or(0) > 0,
            links_to_cpu: links,
        });
    }
    Some(out)
}
