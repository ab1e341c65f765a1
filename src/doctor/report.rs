//! The doctor report model: [`Report`], one [`GpuReport`] per GPU, the [`VerdictKind`]s and the
//! facts they carry. `--json` serialises [`Report`] ([`SCHEMA_VERSION`]); `rcclfix doctor`'s text
//! rendering lives in `src/cmd/doctor/render.rs`.

use std::path::PathBuf;

use serde::Serialize;

use super::hip::HipProbe;
use super::kmsg;
use super::library::LibraryScan;
use super::pci::{Bdf, PathResult};
use super::triage::{LogTriage, RebuildAdvice};
use super::vm::{Hypervisor, ProxmoxConfig};
use crate::scan::TargetState;

/// Version of the `--json` schema below (docs/doctor-json.md); bumped on any incompatible change
/// (2: `rebuild.tag` may be null, `rebuild.targets`/`command`, the `hostcall-outside-rccl` verdict,
/// `examined`, `not_examined`, log `refusals`/`hints`, GPU `gfx_source` and guest `blockers`;
/// 3: `rebuild` is present exactly when the verdict is `rebuild`, the release facts moved to
/// `release`, `rebuild.status`, `gpus_seen`).
pub const SCHEMA_VERSION: u32 = 3;

/// What the evidence says about the ROCm release and its RCCL, whatever the verdict: never a
/// command (a rebuild is prescribed only by [`Report::rebuild`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReleaseFacts {
    /// The ROCm release or family (`7.2.1`, `7.2`), when the evidence names one.
    pub rocm: Option<String>,
    /// The RCCL version that ran, or that the release ships.
    pub rccl: Option<String>,
    /// The recipe of that release line (a `rcclfix build --tag` value), when this rcclfix has one.
    pub recipe: Option<String>,
    /// That recipe's status (`verified`, `expected`, `experimental`).
    pub recipe_status: Option<String>,
    /// What the release's shipped RCCL is known to do (community measurements), e.g.
    /// `yes (NDEBUG lost in packaging, ROCm/rccl#2124) (AMD's ROCm packages, /opt/rocm)`: the
    /// measurements are of AMD's packages, never of a distribution's build.
    pub shipped_declares: Option<String>,
    /// The librccl files here that are not AMD's packages (Debian's `librccl1`, a wheel's copy):
    /// each is judged by its scan (`libraries`), not by `shipped_declares`.
    pub judged_by_scan: Vec<String>,
}

/// The four verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// Not affected by the hostcall refusal (AtomicOps present, or a different problem, or no AMD GPU).
    NotAffected,
    /// Affected, and a VM setting fixes it: pass the GPU as a single function.
    FixVmConfig,
    /// Affected: rebuild RCCL (`rcclfix build --tag …`).
    Rebuild,
    /// Affected, but the refused kernel is not RCCL's: rebuilding RCCL does not help; the platform
    /// fix (an AtomicOps path) does, or the library that owns the kernel.
    HostcallOutsideRccl,
    /// Cannot tell: run as root, supply the kernel log, or run the runtime probe.
    Inconclusive,
}

impl VerdictKind {
    /// The process exit code: 0 not affected, 1 affected, 2 inconclusive.
    pub fn exit_code(self) -> u8 {
        match self {
            VerdictKind::NotAffected => crate::EXIT_OK,
            VerdictKind::FixVmConfig | VerdictKind::Rebuild | VerdictKind::HostcallOutsideRccl => {
                crate::EXIT_CHECK_FAILED
            }
            VerdictKind::Inconclusive => crate::EXIT_ERROR,
        }
    }

    /// Short text.
    pub fn text(self) -> &'static str {
        match self {
            VerdictKind::NotAffected => "not affected",
            VerdictKind::FixVmConfig => "affected — fix the VM configuration",
            VerdictKind::Rebuild => "affected — rebuild RCCL",
            VerdictKind::HostcallOutsideRccl => {
                "affected — a kernel outside RCCL needs hostcall (rebuilding RCCL does not help)"
            }
            VerdictKind::Inconclusive => "inconclusive",
        }
    }
}

/// One device on a GPU's PCIe path, for display.
#[derive(Debug, Clone, Serialize)]
pub struct Hop {
    /// Address.
    pub bdf: Bdf,
    /// `vendor:device`, e.g. `1b36:000c`.
    pub id: String,
    /// Role: `root port`, `switch upstream port`, `GPU (endpoint)`, …
    pub role: String,
    /// lspci-style AtomicOps text, when readable.
    pub atomics: Option<String>,
    /// `ok`, `BREAKS: …`, `not checked by the kernel`, `unreadable (… bytes)`.
    pub status: String,
    /// QEMU's name for an emulated root port, in a QEMU guest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated: Option<String>,
}

/// Guest-side VM facts for one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct GuestView {
    /// Whether the GPU function is multi-function (header bit, or sibling functions in the slot).
    pub multifunction: bool,
    /// Other functions present in the GPU's slot (e.g. the HDMI audio function `.1`).
    pub siblings: Vec<String>,
    /// Whether the GPU is at devfn 0 (device 0, function 0), as QEMU requires.
    pub devfn0: bool,
    /// Whether a root port is above the GPU (false: it sits on the root bus as an RCiEP).
    pub behind_root_port: bool,
    /// Whether the GPU's parent bridge is the root port itself (QEMU sets completer bits only then;
    /// behind an emulated switch it never does).
    pub directly_under_root_port: bool,
    /// The emulated root port's name, when recognised.
    pub emulated_root_port: Option<String>,
    /// Whether QEMU's completer rule (≥ 8.1) is what withholds atomics here.
    pub qemu_rule_blocks: bool,
    /// What in the VM's layout withholds AtomicOps from this GPU (empty: nothing the guest shows).
    pub blockers: Vec<VmBlocker>,
}

/// A VM setting that withholds AtomicOps from a guest GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VmBlocker {
    /// The GPU is passed as a multifunction device (QEMU sets no completer bits then).
    Multifunction,
    /// The GPU is not at devfn 0 below its root port.
    NotAtDevfn0,
    /// The GPU sits behind an emulated switch, not directly below the root port.
    BehindSwitch,
    /// The machine type predates QEMU 8.1, which never sets completer bits.
    QemuBefore81 {
        /// The machine type, e.g. `pc-q35-5.1`.
        machine: String,
    },
    /// The VM gives the GPU no PCI Express capability (conventional PCI layout).
    NoPcieCapability,
}

/// An AMD GPU the evidence names that doctor could not examine as a PCI device (no config space
/// read): one KFD skipped in the kernel log (`kfd … skipped device 1002:67df, PCI rejects
/// atomics`), or one that appears only in a pasted `lspci -tv` tree.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SeenGpu {
    /// `1002:67df`, when the evidence gives the device ID.
    pub id: Option<String>,
    /// Its PCI address, when the evidence gives it.
    pub bdf: Option<Bdf>,
    /// The chip name (`Ellesmere`), from the PCI ID table or the lspci text.
    pub name: Option<String>,
    /// Its gfx target, from the PCI ID or the chip name.
    pub gfx: Option<String>,
    /// Where it was seen: `kernel log`, `lspci -tv tree`.
    pub seen_in: String,
    /// KFD's line when KFD skipped it because the PCIe path gives it no AtomicOps.
    pub kfd_rejected: Option<String>,
    /// amdgpu's line saying this GPU has no PCIe AtomicOps path (`PCIE atomic ops is not
    /// supported`): hostcall kernels are refused on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_atomics: Option<String>,
    /// Other problems the kernel log reports for it (page faults, resets, a VF mailbox failing).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<kmsg::ProblemLine>,
}

/// Everything known about one GPU, and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// PCI address.
    pub bdf: Bdf,
    /// `1002:744c`.
    pub id: String,
    /// gfx target, when known (KFD, else the PCI device ID or the lspci chip name).
    pub gfx: Option<String>,
    /// Where `gfx` came from (`KFD topology`, `PCI ID 1002:744c`, `lspci chip name`).
    pub gfx_source: Option<String>,
    /// KFD node number.
    pub kfd_node: Option<u32>,
    /// An integrated GPU (APU) that ROCm exposes next to discrete cards.
    pub integrated: bool,
    /// The path, root-most first, ending with the GPU.
    pub path: Vec<Hop>,
    /// The kernel rule's result.
    pub path_result: PathResult,
    /// `AtomicOpsCtl: ReqEn±` of the GPU, when readable.
    pub req_en: Option<bool>,
    /// The amdgpu atomics message for this address (verbatim), if logged.
    pub kernel_message: Option<String>,
    /// Whether the kernel log is usable for this GPU (has amdgpu lines).
    pub kernel_log_usable: bool,
    /// What KFD's io_link flags say (`Some(false)`: no atomics).
    pub kfd_atomics: Option<bool>,
    /// The io_link flags, as read.
    pub kfd_link_flags: Vec<u32>,
    /// KFD skipped this GPU ("PCI rejects atomics"): a different problem.
    pub kfd_rejected: Option<String>,
    /// Other problems the kernel log reports for this GPU (page faults, resets, a VF mailbox).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kernel_problems: Vec<kmsg::ProblemLine>,
    /// `hostNativeAtomicSupported` from the HIP runtime.
    pub hip_host_native_atomic: Option<i32>,
    /// The HIP ordinal, when the runtime saw it.
    pub hip_ordinal: Option<i32>,
    /// Guest-side VM facts (only inside a VM).
    pub guest: Option<GuestView>,
    /// The libraries' state for this GPU's target.
    pub library_states: Vec<(String, TargetState)>,
    /// The verdict for this GPU.
    pub verdict: VerdictKind,
    /// Why, one line each.
    pub reasons: Vec<String>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// rcclfix version.
    pub rcclfix_version: String,
    /// The overall verdict.
    pub verdict: VerdictKind,
    /// One line saying it.
    pub headline: String,
    /// What to do, one line each (exact config lines and commands).
    pub actions: Vec<String>,
    /// What this report examined, one line each.
    pub examined: Vec<String>,
    /// What it did not examine (and why), one line each.
    pub not_examined: Vec<String>,
    /// The evidence behind the verdict, one line each.
    pub evidence: Vec<String>,
    /// The rebuild advice: present exactly when [`Report::verdict`] is [`VerdictKind::Rebuild`]
    /// (docs/doctor-json.md, "the rebuild contract").
    pub rebuild: Option<RebuildAdvice>,
    /// The release facts, when the evidence names a ROCm release or an RCCL version.
    pub release: Option<ReleaseFacts>,
    /// `rcclfix fix` prescribed for a library the report scanned, when `patch` or `patch
    /// --asserts` proves it for the affected GPUs' targets (docs/doctor-json.md, `fix`). Doctor
    /// itself leaves it `None`: the command layer decides it with `fix` and puts its action line
    /// first, before any rebuild.
    pub fix: Option<FixAdvice>,
    /// Per GPU.
    pub gpus: Vec<GpuReport>,
    /// AMD GPUs the evidence names that are not in `gpus` (no config space to examine).
    pub gpus_seen: Vec<SeenGpu>,
    /// Hypervisor facts.
    pub hypervisor: Hypervisor,
    /// Kernel log summary.
    pub kernel_log: KernelLogSummary,
    /// Whether a KFD topology was found.
    pub kfd_present: bool,
    /// The HIP probe.
    pub hip: HipProbe,
    /// Library scans.
    pub libraries: Vec<LibraryScan>,
    /// Log triage.
    pub logs: Vec<LogTriage>,
    /// Proxmox configs.
    pub vm_configs: Vec<ProxmoxConfig>,
    /// Further notes (iGPU, caveats).
    pub notes: Vec<String>,
    /// The exit code this report maps to.
    pub exit_code: u8,
}

/// What the kernel log was and how much it holds.
#[derive(Debug, Clone, Serialize)]
pub struct KernelLogSummary {
    /// Its origin.
    pub origin: kmsg::LogOrigin,
    /// Lines read.
    pub lines: usize,
    /// Whether it has amdgpu lines.
    pub has_amdgpu_lines: bool,
    /// The relevant lines (at most 50).
    pub relevant: Vec<String>,
    /// Set when only the end of a `--dmesg` file was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

/// `rcclfix fix` for the library that runs: the file, the patch kind that proves it, and the
/// command (docs/doctor-json.md, `fix`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FixAdvice {
    /// The library, as doctor found it.
    pub library: PathBuf,
    /// Where it was found (`VLLM_NCCL_SO_PATH`, `torch/lib (legacy wheel)`, `--library`, …).
    pub found_via: String,
    /// `patch` or `patch --asserts`.
    pub patch: String,
    /// The gfx targets judged (the affected GPUs').
    pub targets: Vec<String>,
    /// Kernel arguments the patch rewrites.
    pub kernels: usize,
    /// Its owner: `dpkg rccl 2.27.7…`, `pip torch 2.9.1…`, `none`.
    pub owner: String,
    /// The command that applies it; `None` when `fix` cannot apply to this owner yet (`notes`
    /// say why).
    pub command: Option<String>,
    /// Caveats: unverified on AMD hardware, the proof's limits, why there is no command.
    pub notes: Vec<String>,
}
