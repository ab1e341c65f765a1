//! The human-readable doctor report (stdout). `--json` prints [`crate::doctor::Report`] instead.
//!
//! Every string that comes from an input (log lines, kernel names, paths, lspci names) goes
//! through [`esc`] before it reaches the terminal; JSON keeps the exact values.

use std::fmt::Write;

use crate::doctor::hip::HipProbe;
use crate::doctor::{GpuReport, Report, VerdictKind};
use crate::scan::TargetState;
use crate::ui::escape as e;

/// `s` with control characters escaped for a terminal (C0, DEL, C1 and the bidirectional
/// overrides as `\x1b`, `\u{202e}`; a newline never splits a report line). Printable text,
/// including non-ASCII, is kept.
pub fn esc(s: &str) -> String {
    // Every string from the machine, a snapshot, a log or a config file goes through the one
    // escaping path (`--json` carries the exact values).
    crate::ui::escape(s).into_owned()
}

fn gpu_block(out: &mut String, g: &GpuReport) {
    let _ = writeln!(
        out,
        "GPU {}  {}  {}{}{}{}",
        g.bdf,
        g.id,
        g.gfx.as_deref().unwrap_or("gfx unknown"),
        match (&g.gfx, &g.gfx_source) {
            (Some(_), Some(src)) if src != "KFD topology" => format!(" (from the {src})"),
            _ => String::new(),
        },
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
        let _ = writeln!(out, "        → {}", esc(&h.status));
    }
    let kmsg = match (&g.kernel_message, g.kernel_log_usable) {
        (Some(m), _) => format!("\"{}\"", esc(m)),
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
    if let Some(v) = &g.guest {
        for b in &v.blockers {
            let _ = writeln!(
                out,
                "  VM blocker: {}",
                match b {
                    crate::doctor::VmBlocker::Multifunction =>
                        "passed as a multifunction device".to_owned(),
                    crate::doctor::VmBlocker::NotAtDevfn0 => "not at devfn 0".to_owned(),
                    crate::doctor::VmBlocker::BehindSwitch =>
                        "behind an emulated switch".to_owned(),
                    crate::doctor::VmBlocker::QemuBefore81 { machine } =>
                        format!("machine type {} predates QEMU 8.1", esc(machine)),
                    crate::doctor::VmBlocker::NoPcieCapability =>
                        "no PCI Express capability (conventional PCI layout)".to_owned(),
                }
            );
        }
    }
    for (p, s) in &g.library_states {
        let t = match s {
            TargetState::Declares { kernels } => format!(
                "declares hidden_hostcall_buffer ({} kernels)",
                kernels.len()
            ),
            TargetState::Clean { kernels } => format!("clean ({kernels} kernels)"),
            TargetState::Unknown { reason } => format!("unknown: {}", e(reason)),
            TargetState::NoCode { reason } => format!("no code: {}", e(reason)),
        };
        let _ = writeln!(out, "  library {}: {}", esc(p), esc(&t));
    }
    for p in &g.kernel_problems {
        let _ = writeln!(
            out,
            "  other problem ({}): \"{}\"",
            p.kind.describe(),
            esc(&p.line)
        );
    }
    let _ = writeln!(out, "  verdict: {}", g.verdict.text());
    for r in &g.reasons {
        let _ = writeln!(out, "    - {}", esc(r));
    }
    out.push('\n');
}

/// Render the report as text. Each field from an input is escaped where it is placed ([`esc`]);
/// then every line of the whole report goes through [`crate::ui::escape`] once more, so a field
/// that was missed (a KFD `name`, a DMI string, a library path) still cannot reach the terminal
/// with a control character. Escaping is idempotent on escaped text (`\e` holds no control byte).
pub fn text(r: &Report) -> String {
    let raw = text_fields(r);
    let mut out = String::with_capacity(raw.len());
    for line in raw.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        out.push_str(&crate::ui::escape(body));
        out.push_str(nl);
    }
    out
}

fn text_fields(r: &Report) -> String {
    let mut out = String::new();
    if r.gpus.is_empty() {
        let _ = writeln!(
            out,
            "No AMD GPU (vendor 0x1002, display class) examined: none in the PCI devices read.{}\n",
            match r.gpus_seen.len() {
                0 => String::new(),
                1 => " The evidence names one without its config space:".to_owned(),
                n => format!(" The evidence names {n} without their config space:"),
            }
        );
    }
    for g in &r.gpus {
        gpu_block(&mut out, g);
    }
    // Every GPU the evidence names is named here, examined or not.
    for s in &r.gpus_seen {
        let _ = writeln!(
            out,
            "GPU {}  {}  {}  (seen in the {}; config space not examined)",
            s.bdf
                .map(|b| b.to_string())
                .unwrap_or_else(|| "(no address)".into()),
            esc(s.id.as_deref().unwrap_or("(ID not shown)")),
            esc(s
                .gfx
                .as_deref()
                .or(s.name.as_deref())
                .unwrap_or("gfx unknown")),
            esc(&s.seen_in)
        );
        if let Some(l) = &s.no_atomics {
            let _ = writeln!(out, "  kernel log: \"{}\" (no PCIe AtomicOps path)", esc(l));
        }
        if let Some(l) = &s.kfd_rejected {
            let _ = writeln!(out, "  kernel log: \"{}\" (KFD skipped it)", esc(l));
        }
        for p in &s.problems {
            let _ = writeln!(
                out,
                "  other problem ({}): \"{}\"",
                p.kind.describe(),
                esc(&p.line)
            );
        }
        out.push('\n');
    }
    // The hypervisor of a machine without an AMD GPU says nothing about the GPUs in a log.
    if r.hypervisor.is_vm && !r.gpus.is_empty() {
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
                esc(&format!("DMI: {}", dmi.join(" / ")))
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
            esc(&c.path),
            esc(c.machine.as_deref().unwrap_or("i440fx (default)"))
        );
        for h in &c.hostpci {
            let _ = writeln!(
                out,
                "  {}: {}  → {}",
                h.key,
                esc(&h.value),
                if h.problems.is_empty() {
                    "ok"
                } else {
                    "blocks AtomicOps"
                }
            );
            for p in &h.problems {
                let _ = writeln!(out, "    - {}", esc(p));
            }
        }
        out.push('\n');
    }
    for l in &r.logs {
        let _ = writeln!(out, "Log {}: {}", esc(&l.path), l.class.describe());
        for f in &l.findings {
            let _ = writeln!(
                out,
                "  {:>5}: [{}] {}",
                f.line_no,
                f.signature,
                esc(&f.line)
            );
            let _ = writeln!(out, "         {}", f.explanation);
            if let Some(n) = f.next_step {
                let _ = writeln!(out, "         next: {n}");
            }
        }
        for rf in &l.refusals {
            let who = match &rf.owner {
                crate::doctor::triage::KernelOwner::Rccl { why } => format!("RCCL ({})", esc(why)),
                crate::doctor::triage::KernelOwner::Other { library: Some(lib) } => {
                    format!("not RCCL: {lib}")
                }
                crate::doctor::triage::KernelOwner::Other { library: None } => "not RCCL".into(),
                crate::doctor::triage::KernelOwner::Unknown => "owner not in the log".into(),
            };
            let _ = writeln!(
                out,
                "  {:>5}: {} {} — {who}",
                rf.line_no,
                if rf.confirmed {
                    "refused:"
                } else {
                    "launch failed (hipErrorIllegalState):"
                },
                esc(rf
                    .kernel
                    .as_deref()
                    .unwrap_or("(no ShaderName: AMD_LOG_LEVEL=3 names the kernel)"))
            );
        }
        for h in &l.hints {
            let _ = writeln!(
                out,
                "  {:>5}: {} {} ({}{})",
                h.line_no,
                if h.kind == crate::doctor::triage::HintKind::Rccl {
                    "RCCL"
                } else {
                    "ROCm"
                },
                esc(&h.value),
                esc(&h.source),
                if h.exact || h.kind == crate::doctor::triage::HintKind::Rccl {
                    ""
                } else {
                    "; family only"
                }
            );
        }
        if !l.versions.gfx.is_empty() {
            let _ = writeln!(out, "  GPU targets named: {}", l.versions.gfx.join(", "));
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
                let _ = writeln!(out, "  {k}: {}", esc(x));
            }
        }
        if let Some(rel) = &l.rocm {
            let _ = writeln!(
                out,
                "  → ROCm {} (from {}{}); RCCL {}; its shipped library declares hostcall: {}",
                esc(&rel.release),
                esc(&rel.source),
                if rel.exact {
                    ""
                } else {
                    ", point release unknown"
                },
                esc(l.rccl.as_deref().unwrap_or("?")),
                l.shipped_declares.unwrap_or("unknown")
            );
        } else {
            let _ = writeln!(out, "  → ROCm release: not named in this log");
        }
        out.push('\n');
    }
    if !r.libraries.is_empty() && r.gpus.is_empty() {
        for l in &r.libraries {
            let _ = writeln!(
                out,
                "Library {} ({})",
                esc(&l.candidate.path.display().to_string()),
                l.candidate.found_via
            );
        }
    }
    match &r.hip {
        HipProbe::Absent { reason } | HipProbe::Failed { reason } if !r.gpus.is_empty() => {
            let _ = writeln!(out, "HIP runtime: {}\n", esc(reason));
        }
        _ => {}
    }
    if !r.examined.is_empty() {
        let _ = writeln!(out, "Examined: {}", esc(&r.examined.join("; ")));
    }
    if !r.not_examined.is_empty() {
        let _ = writeln!(out, "Not examined: {}", esc(&r.not_examined.join("; ")));
    }
    let _ = writeln!(out, "Verdict: {}", esc(&r.headline));
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
                .filter(|g| {
                    matches!(
                        g.verdict,
                        VerdictKind::FixVmConfig
                            | VerdictKind::Rebuild
                            | VerdictKind::HostcallOutsideRccl
                    )
                })
                .map(|g| format!("{}: {} (details above)", g.bdf, g.verdict.text())),
        );
        if !lines.is_empty() {
            let _ = writeln!(out, "Evidence:");
            for l in lines {
                let _ = writeln!(out, "  - {}", esc(&l));
            }
        }
    }
    if !r.actions.is_empty() {
        let _ = writeln!(out, "What to do:");
        for a in &r.actions {
            let _ = writeln!(out, "  - {}", esc(a));
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out, "Notes:");
        for n in &r.notes {
            let _ = writeln!(out, "  - {}", esc(n));
        }
    }
    out
}
