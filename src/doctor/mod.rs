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
//! [`Outcome`]), [`report`] is the model `--json` serialises, [`verdict`] holds the decision rules
//! (pure: facts in, verdicts out). This module never prints: `src/cmd/doctor.rs` renders.
//!
//! Sources: Linux `drivers/pci/pci.c`, amdgpu/amdkfd, CLR, QEMU `hw/vfio/pci.c`; public reports
//! ROCm/ROCm#6074, ROCm/ROCm#6148, ROCm/ROCm#6520, vllm-project/vllm#38587.

pub mod capture;
pub mod gather;
pub mod hip;
pub mod ids;
pub mod input;
pub mod kfd;
pub mod kmsg;
pub mod library;
pub mod lspci;
pub mod pci;
pub mod report;
pub mod triage;
pub mod verdict;
pub mod vm;

pub use gather::{diagnose, run, Options, Outcome, Sources};
pub use report::{
    GpuReport, GuestView, Hop, KernelLogSummary, Report, VerdictKind, VmBlocker, SCHEMA_VERSION,
};
