//! The AMD GPUs the evidence names without config space ([`seen_gpus`] → [`SeenGpu`]s): KFD's
//! lines by device ID, the kernel log's GPUs by address (amdgpu's and the PCI core's lines, also
//! pasted into a `--log`), an `lspci -tv` tree; one GPU named by several of them is one entry.
//! The rule: a GPU named in any evidence is named in the report. Nothing here decides.
//!
//! Sources: amdkfd `kfd_device.c` (`skipped device 1002:XXXX, PCI rejects atomics`, printed while
//! amdgpu initialises that GPU), amdgpu `amdgpu_device.c`, pciutils `lspci -tv`.

use super::kmsg::{self, KernelLog};
use super::report::{GpuReport, SeenGpu};
use super::triage::LogTriage;
use super::{ids, lspci};

/// The AMD GPUs the kernel log (its KFD lines, amdgpu's and the PCI core's lines by address, and
/// the kernel lines pasted into a `--log`) or the `lspci -tv` tree name that are not among the
/// examined `gpus` (issue 22 and issue 38: before, such a machine read as "no AMD GPU found"). The
/// rule: a GPU named in any evidence is named in the report.
pub fn seen_gpus(
    gpus: &[GpuReport],
    klog: &KernelLog,
    logs: &[LogTriage],
    topo: Option<&lspci::Topology>,
) -> Vec<SeenGpu> {
    let mut out: Vec<SeenGpu> = vec![];
    let chip = |dev: u16| {
        ids::GPU_IDS
            .iter()
            .find(|(d, _, _)| *d == dev)
            .map(|(_, c, _)| (*c).to_owned())
    };
    // A GPU known only from KFD's rejection line: its `vendor:device` ID and the line.
    let kfd_seen = |id: &String, line: &String| {
        let dev = id
            .split_once(':')
            .and_then(|(_, d)| u16::from_str_radix(d, 16).ok());
        SeenGpu {
            id: (id != "unknown").then(|| id.clone()),
            bdf: None,
            name: dev.and_then(chip),
            gfx: dev.and_then(ids::gfx_for_device).map(str::to_owned),
            seen_in: "kernel log".into(),
            kfd_rejected: Some(line.clone()),
            no_atomics: None,
            problems: vec![],
        }
    };
    for (id, line) in &klog.kfd_rejects {
        if gpus.iter().any(|g| &g.id == id) {
            continue;
        }
        out.push(kfd_seen(id, line));
    }
    // GPUs named by address: the kernel log's, then the kernel lines of each `--log`.
    let named = klog
        .gpus
        .values()
        .map(|g| (g, "kernel log".to_owned()))
        .chain(
            logs.iter()
                .flat_map(|l| l.kernel_gpus.iter().map(|g| (g, format!("log {}", l.path)))),
        );
    for (lg, seen_in) in named {
        if gpus.iter().any(|g| g.bdf == lg.bdf) {
            continue;
        }
        if let Some(s) = out.iter_mut().find(|s| s.bdf == Some(lg.bdf)) {
            s.no_atomics = s.no_atomics.take().or_else(|| lg.no_atomics.clone());
            for p in &lg.problems {
                if !s.problems.contains(p) && s.problems.len() < kmsg::MAX_PROBLEM_LINES {
                    s.problems.push(p.clone());
                }
            }
            s.id = s.id.take().or_else(|| lg.id.clone());
            s.kfd_rejected = s.kfd_rejected.take().or_else(|| lg.kfd_rejected.clone());
            continue;
        }
        let dev = lg
            .id
            .as_deref()
            .and_then(|i| i.split_once(':'))
            .and_then(|(_, d)| u16::from_str_radix(d, 16).ok());
        // KFD's line right after this GPU's, or for the same device ID, is about this GPU.
        let kfd_rejected = lg.kfd_rejected.clone().or_else(|| {
            lg.id
                .as_ref()
                .and_then(|i| klog.kfd_rejects.get(i).cloned())
        });
        out.retain(|s| !(s.bdf.is_none() && s.id.is_some() && s.id == lg.id));
        out.push(SeenGpu {
            id: lg.id.clone(),
            bdf: Some(lg.bdf),
            name: dev.and_then(chip),
            gfx: dev.and_then(ids::gfx_for_device).map(str::to_owned),
            seen_in,
            kfd_rejected,
            no_atomics: lg.no_atomics.clone(),
            problems: lg.problems.clone(),
        });
    }
    // An AtomicOps line that names no device (older amdgpu's `[drm] PCIE atomic ops is not
    // supported`): a KFD-skipped GPU's when there is one, else a GPU of its own.
    if let (Some(l), true) = (&klog.unnamed_no_atomics, gpus.is_empty()) {
        match out.iter_mut().find(|s| s.bdf.is_none()) {
            Some(s) => s.no_atomics = Some(l.clone()),
            None => out.push(SeenGpu {
                id: None,
                bdf: None,
                name: None,
                gfx: None,
                seen_in: "kernel log".into(),
                kfd_rejected: None,
                no_atomics: Some(l.clone()),
                problems: vec![],
            }),
        }
    }
    // GPUs by address without their ID, and KFD lines by one ID alone: when KFD skipped as many
    // GPUs as there are such GPUs without an AtomicOps path (or there is exactly one), they are
    // those GPUs (the same model twice prints the same line twice).
    let by_id: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].bdf.is_none() && out[i].kfd_rejected.is_some())
        .collect();
    let no_id: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].bdf.is_some() && out[i].id.is_none() && out[i].kfd_rejected.is_none())
        .collect();
    let without_path: Vec<usize> = no_id
        .iter()
        .copied()
        .filter(|&i| out[i].no_atomics.is_some())
        .collect();
    let unmatched = klog.kfd_reject_lines.saturating_sub(
        out.iter()
            .filter(|s| s.bdf.is_some() && s.kfd_rejected.is_some())
            .count(),
    );
    let targets = match (no_id.len(), without_path.len()) {
        (1, _) => no_id.clone(),
        (_, n) if n > 0 && unmatched >= n => without_path,
        _ => vec![],
    };
    // The one model KFD skipped: its entry by ID alone, or (already given to a GPU by address)
    // the log's only KFD ID.
    let kfd_only = match by_id.as_slice() {
        [k] => Some(out[*k].clone()),
        [] if klog.kfd_rejects.len() == 1 => klog
            .kfd_rejects
            .iter()
            .next()
            .map(|(id, line)| kfd_seen(id, line)),
        _ => None,
    };
    if let (Some(kfd_only), false) = (kfd_only, targets.is_empty()) {
        for a in &targets {
            let s = &mut out[*a];
            s.id = kfd_only.id.clone();
            s.name = s.name.take().or(kfd_only.name.clone());
            s.gfx = s.gfx.take().or(kfd_only.gfx.clone());
            s.kfd_rejected = kfd_only.kfd_rejected.clone();
            s.no_atomics = s.no_atomics.take().or(kfd_only.no_atomics.clone());
        }
        if let [k] = by_id.as_slice() {
            out.remove(*k);
        }
    }
    for (bdf, name) in topo.map(|t| &t.tree_names).into_iter().flatten() {
        let amd = name.contains("[AMD/ATI]") || name.starts_with("Advanced Micro Devices");
        let display = !(name.contains("Audio") || name.contains("HDMI"));
        if !amd || !display || gpus.iter().any(|g| g.bdf == *bdf) {
            continue;
        }
        if let Some(s) = out.iter_mut().find(|s| s.bdf == Some(*bdf)) {
            // Named by the kernel log too: one GPU, with the tree's name.
            s.name = Some(name.clone());
            s.gfx = s
                .gfx
                .take()
                .or_else(|| ids::gfx_for_chip_name(name).map(str::to_owned));
            s.seen_in = format!("{} and the lspci -tv tree", s.seen_in);
            continue;
        }
        if topo.is_some_and(|t| t.devices.iter().any(|d| d.bdf == *bdf)) {
            continue; // a -vvv block exists: not a GPU, or already examined
        }
        // `[AMD/ATI] Device 67df` (pci.ids without the name) or `Ellesmere [Radeon RX 580]`.
        let dev = name
            .split_once("Device ")
            .and_then(|(_, r)| r.get(..4))
            .and_then(|h| u16::from_str_radix(h, 16).ok());
        let gfx = dev
            .and_then(ids::gfx_for_device)
            .or_else(|| ids::gfx_for_chip_name(name))
            .map(str::to_owned);
        if gfx.is_none() && dev.is_none() && !name.contains("Radeon") && !name.contains("Instinct")
        {
            continue; // an AMD bridge or host part, not a GPU
        }
        if gfx.is_none() && bdf.func != 0 {
            continue; // `Device aaf0` at .1: the card's audio function, not a second GPU
        }
        let mut id = dev.map(|d| format!("1002:{d:04x}"));
        // A tree without `-nn` names the chip, not the ID: the kernel log's entry for the same
        // chip is the same GPU (ROCm/legacy-rocm-build#910: `Baffin` and `1002:67ef`).
        if id.is_none() {
            let same_chip: Vec<&SeenGpu> = out
                .iter()
                .filter(|s| s.bdf.is_none())
                .filter(|s| s.name.as_deref().is_some_and(|c| name.contains(c)))
                .collect();
            if same_chip.len() == 1 {
                id = same_chip[0].id.clone();
            }
        }
        let kfd_rejected = id.as_ref().and_then(|i| klog.kfd_rejects.get(i).cloned());
        out.retain(|s| !(s.bdf.is_none() && s.id.is_some() && s.id == id));
        out.push(SeenGpu {
            id,
            bdf: Some(*bdf),
            name: Some(name.clone()),
            gfx,
            seen_in: "lspci -tv tree".into(),
            kfd_rejected,
            no_atomics: None,
            problems: vec![],
        });
    }
    out
}
