//! `rcclfix doctor`: am I affected, and is the fix a VM setting, a rebuild, or neither?
//!
//! Evidence is gathered per GPU from a sysfs root (PCIe path judged by the kernel's
//! `pci_enable_atomic_ops_to_root` rule, AtomicOp requester enable, KFD io_link flags), the kernel
//! log (amdgpu's AtomicOps message by PCI address), the hypervisor (QEMU's completer rule for
//! single-function devices at devfn 0), the HIP runtime (`hostNativeAtomicSupported`), the `librccl`
//! PyTorch/vLLM would load (the scanner), user logs (`--log`), pasted `lspci -vvv` text (`--lspci`,
//! in place of sysfs) and Proxmox VM configs (`--vm-config`). [`diagnose`] turns that into a
//! [`Report`] with one [`VerdictKind`]; nothing here guesses: a config space that could not be read
//! makes the path *inconclusive*, never "OK", and a report that examined no GPU says so.
//!
//! Layout: [`gather`] reads the evidence ([`gather::run`] takes [`Options`], returns an
//! [`Outcome`]) and [`seen`] lists the GPUs it names without config space, [`report`] is the model
//! `--json` serialises, [`verdict`] (per GPU) and [`overall`] (the report) hold the decision rules
//! (pure: facts in, verdicts out); the log tables are [`lookalike`] (with [`api`], the failing
//! call's kind) and [`rules`]. This module never prints: `src/cmd/doctor.rs` renders.
//!
//! Sources: Linux `drivers/pci/pci.c`, amdgpu/amdkfd, CLR, QEMU `hw/vfio/pci.c`; public reports
//! ROCm/ROCm#6074, ROCm/ROCm#6148, ROCm/ROCm#6520, vllm-project/vllm#38587.

pub mod api;
pub mod capture;
pub mod coverage;
pub mod gather;
pub mod hip;
pub mod ids;
pub mod input;
pub mod kfd;
pub mod kmsg;
pub mod library;
pub mod lookalike;
pub mod lspci;
pub mod overall;
pub mod pci;
pub mod release;
pub mod report;
pub mod rules;
pub mod seen;
pub mod sources;
pub mod triage;
pub mod verdict;
pub mod vm;
pub mod vm_fix;

pub use gather::{diagnose, run, Options, Outcome};
pub use report::{
    FixAdvice, GpuReport, GuestView, Hop, KernelLogSummary, ReleaseFacts, Report, SeenGpu,
    VerdictKind, VmBlocker, SCHEMA_VERSION,
};
pub use sources::Sources;

#[cfg(test)]
mod tests {
    /// Issue 20: `--lspci` panicked ("byte index … is not a char boundary") on `32bit±`. Every
    /// parser of pasted text must survive a multi-byte character at every position of real
    /// inputs (byte slicing of untrusted text is the class).
    #[test]
    fn every_text_parser_survives_a_non_ascii_character_at_every_position() {
        let samples = [
            include_str!("../../tests/data/doctor/lspci/guest-vvvnn.txt"),
            include_str!("../../tests/data/doctor/lspci/guest-tv.txt"),
            include_str!("../../tests/data/doctor/lspci/board-tv.txt"),
            include_str!("../../tests/data/doctor/logs/rocm6520_machine1_rank0.log"),
            include_str!("../../tests/data/doctor/logs/vllm38587_collect_env.txt"),
            include_str!("../../tests/data/doctor/rocm6520/dmesg-guest.txt"),
        ];
        // Line by line (each parser reads a line at a time; the lspci line sits under a device
        // header so the block parser reaches it): the whole text at every position is too slow.
        for line in samples.iter().flat_map(|t| t.lines()) {
            for (i, _) in line.char_indices().chain([(line.len(), ' ')]) {
                for ins in ["±", "𝄞"] {
                    let mut l = line.to_owned();
                    l.insert_str(i, ins);
                    let block =
                        format!("03:00.0 VGA compatible controller [0300]: AMD [1002:744c]\n{l}\n");
                    let _ = super::lspci::parse(&block, "sample");
                    let _ = super::triage::triage(&l, "sample");
                    let _ = super::kmsg::parse(
                        &l,
                        super::kmsg::LogOrigin::Unavailable {
                            reason: String::new(),
                        },
                    );
                    let _ = super::capture::scrub_line(&l, Some("host"));
                }
            }
        }
    }
}
