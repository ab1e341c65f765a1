//! The human-readable doctor report (stdout). `--json` prints [`super::Report`] instead.

use std::fmt::Write;

use super::hip::HipProbe;
use super::{GpuReport, Report, VerdictKind};
use crate::scan::TargetState;
// Every string from the machine, a snapshot, a log or a config file is escaped for the terminal
// (`--json` carries the exact values).
use crate::ui::escape as e;

fn gpu_block(out: &mut String, g: &GpuReport) {
    let _ = writeln!(
        out,
        "GPU {}  {}  {}{}{}",
        g.bdf,
        e(&g.id.to_string()),
        e(g.gfx.as_deref().unwrap_or("gfx unknown")),
        g.kfd_node
            .map(|n| format!("  KFD node {n}"))
            .unwrap_or_default(),
        if g.integrated {
            "  (integrated GPU)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  PCIe path (kernel rule pci_enable_atomic_ops_to_root, COMP32|COMP64):"
    );
    for h in &g.path {
        let _ = writeln!(
            out,
            "    {}  {}  {}{}",
            h.bdf,
            e(&h.id.to_string()),
            h.role,
            h.emulated
                .as_deref()
                .map(|x| format!(" [{}]", e(x)))
                .unwrap_or_default()
        );
        if let Some(a) = &h.atomics {
            let _ = writeln!(out, "        {a}");
        }
        let _ = writeln!(out, "        → {}", h.status);
    }
    let kmsg = match (&g.kernel_message, g.kernel_log_usable) {
        (Some(m), _) => format!("\"{}\"", e(m)),
        (None, true) => "amdgpu silent about AtomicOps".into(),
        (None, false) => "no amdgpu line for this GPU (unknown)".into(),
    };
    let _ = writeln!(out, "  kernel log: {kmsg}");
    let kfd = match g.kfd_atomics {
        Some(true) => format!("atomics allowed (flags {:?})", g.kfd_link_flags),
        Some(false) => format!("NO atomics (flags {:?}: bits 2/3)", g.kfd_link_flags),
        None if g.kfd_node.is_some() => {
            format!("flags {:?} not decisive (bit 0 clear)", g.kfd_link_flags)
        }
        None => "no KFD node".into(),
    };
    let _ = writeln!(out, "  KFD io_link to CPU: {kfd}");
    if let Some(v) = g.hip_host_native_atomic {
        let _ = writeln!(
            out,
            "  HIP hostNativeAtomicSupported: {v} (device {})",
            g.hip_ordinal.unwrap_or(-1)
        );
    }
    if let Some(v) = &g.guest {
        let _ = writeln!(
            out,
            "  VM guest: {}, {}{}",
            if v.multifunction {
                "multifunction"
            } else {
                "single function"
            },
            if v.devfn0 {
                "devfn 0"
            } else {
                "not at devfn 0"
            },
            if v.behind_root_port {
                ""
            } else {
                ", on the root bus (no root port)"
            }
        );
    }
    for (p, s) in &g.library_states {
        let t = match s {
            TargetState::Declares { kernels } => format!(
                "declares hidden_hostcall_buffer ({} kernels)",
                kernels.len()
            ),
            TargetState::Clean { kernels } => format!("clean ({kernels} kernels)"),
            TargetState::Unknown { reason } => format!("unknown: {}", e(reason)),
        };
        let _ = writeln!(out, "  library {}: {t}", e(&p.to_string()));
    }
    let _ = writeln!(out, "  verdict: {}", g.verdict.text());
    for r in &g.reasons {
        let _ = writeln!(out, "    - {}", e(&r.to_string()));
    }
    out.push('\n');
}

/// Render the report as text.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    if r.gpus.is_empty() {
        let _ = writeln!(
            out,
            "No AMD GPU (vendor 0x1002, display class) in the PCI devices of this sysfs.\n"
        );
    }
    for g in &r.gpus {
        gpu_block(&mut out, g);
    }
    if r.hypervisor.is_vm {
        let h = &r.hypervisor;
        let dmi: Vec<&str> = [&h.sys_vendor, &h.product_name, &h.product_version]
            .into_iter()
            .filter_map(|v| v.as_deref())
            .collect();
        let _ = writeln!(
            out,
            "Hypervisor: {} ({}{})\n",
            e(h.name.as_deref().unwrap_or("?")),
            if dmi.is_empty() {
                "no DMI data".to_owned()
            } else {
                format!("DMI: {}", e(&dmi.join(" / ")))
            },
            if h.cpu_flag {
                ", CPU hypervisor flag set"
            } else {
                ""
            }
        );
    }
    for c in &r.vm_configs {
        let _ = writeln!(
            out,
            "VM config {} (machine: {}):",
            e(&c.path.to_string()),
            e(c.machine.as_deref().unwrap_or("i440fx (default)"))
        );
        for h in &c.hostpci {
            let _ = writeln!(
                out,
                "  {}: {}  → {}",
                e(&h.key),
                e(&h.value),
                if h.problems.is_empty() {
                    "ok"
                } else {
                    "blocks AtomicOps"
                }
            );
            for p in &h.problems {
                let _ = writeln!(out, "    - {}", e(&p.to_string()));
            }
        }
        out.push('\n');
    }
    for l in &r.logs {
        let _ = writeln!(
            out,
            "Log {}: {}",
            e(&l.path.to_string()),
            e(l.class.describe())
        );
        for f in &l.findings {
            let _ = writeln!(
                out,
                "  {:>5}: [{}] {}",
                f.line_no,
                e(f.signature),
                e(&f.line)
            );
            let _ = writeln!(out, "         {}", e(f.explanation));
        }
        let v = &l.versions;
        for (k, val) in [
            ("RCCL", &v.rccl),
            ("RCCL commit", &v.rccl_commit),
            ("HIP", &v.hip),
            ("ROCm", &v.rocm),
            ("Librccl path", &v.librccl_path),
            ("ROCm used to build PyTorch", &v.torch_rocm),
            ("clang", &v.clang_roc.as_ref().map(|c| format!("roc-{c}"))),
            ("kernel", &v.kernel),
        ] {
            if let Some(x) = val {
                let _ = writeln!(out, "  {k}: {}", e(x));
            }
        }
        if let Some(rel) = &l.rocm {
            let _ = writeln!(
                out,
                "  → ROCm {} (from {}{}); RCCL {}; its shipped library declares hostcall: {}",
                e(&rel.release.to_string()),
                e(&rel.source.to_string()),
                if rel.exact {
                    ""
                } else {
                    ", point release unknown"
                },
                e(l.rccl.as_deref().unwrap_or("?")),
                l.shipped_declares.unwrap_or("unknown")
            );
        }
        out.push('\n');
    }
    if !r.libraries.is_empty() && r.gpus.is_empty() {
        for l in &r.libraries {
            let _ = writeln!(
                out,
                "Library {} ({})",
                crate::ui::escape_path(&l.candidate.path),
                e(&l.candidate.found_via.to_string())
            );
        }
    }
    match &r.hip {
        HipProbe::Absent { reason } | HipProbe::Failed { reason } if !r.gpus.is_empty() => {
            let _ = writeln!(out, "HIP runtime: {}\n", e(reason));
        }
        _ => {}
    }
    let _ = writeln!(out, "Verdict: {}", e(&r.headline.to_string()));
    if r.verdict != VerdictKind::NotAffected {
        // Per-GPU lines are already in the GPU blocks above.
        let gpu_prefixes: Vec<String> = r.gpus.iter().map(|g| format!("{}: ", g.bdf)).collect();
        let mut lines: Vec<String> = r
            .evidence
            .iter()
            .filter(|e| !gpu_prefixes.iter().any(|p| e.starts_with(p.as_str())))
            .cloned()
            .collect();
        lines.extend(
            r.gpus
                .iter()
                .filter(|g| matches!(g.verdict, VerdictKind::FixVmConfig | VerdictKind::Rebuild))
                .map(|g| format!("{}: {} (details above)", g.bdf, g.verdict.text())),
        );
        if !lines.is_empty() {
            let _ = writeln!(out, "Evidence:");
            for l in lines {
                let _ = writeln!(out, "  - {}", e(&l));
            }
        }
    }
    if !r.actions.is_empty() {
        let _ = writeln!(out, "What to do:");
        for a in &r.actions {
            let _ = writeln!(out, "  - {}", e(&a.to_string()));
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out, "Notes:");
        for n in &r.notes {
            let _ = writeln!(out, "  - {}", e(&n.to_string()));
        }
    }
    out
}
