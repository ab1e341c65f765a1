//! Log triage (`rcclfix doctor --log FILE`): find the hostcall refusal and say whose kernel was
//! refused, recognise the look-alikes, and read every hint a pasted report carries about the ROCm
//! release, the RCCL version and the GPU targets; then map the release to the recipe that rebuilds
//! its RCCL.
//!
//! Evidence rules: the runtime's refusal line (`Pcie atomics not enabled, hostcall not supported`,
//! CLR `rocvirtual.cpp`) or `hipErrorIllegalState` returned by a kernel launch is a refusal; its
//! kernel is the `ShaderName :` of that launch (`AMD_LOG_LEVEL=3`). A refusal of an RCCL kernel
//! (`ncclDevKernel*`, `ncclKernel*`, `mscclKernel*`), or one in a log that goes through RCCL
//! (`enqueue.cc`, `NCCL WARN`/`NCCL INFO` lines, `unhandled cuda error`, RCCL's own return string),
//! is RCCL's; a refusal of another kernel is not, and rebuilding RCCL does not help it. An error
//! without the refusal signature (`unhandled cuda error` alone, a hang) never becomes a rebuild.
//!
//! Sources: CLR `rocvirtual.cpp` (refusal lines), RCCL `enqueue.cc` / `init.cc` (banner,
//! `NCCL_VERSION_CODE`), rccl-tests (`rccl-library=`), torch `collect_env.py`, ROCm package
//! naming (`rccl_2.27.7.70201-81~24.04`: the fourth component is the ROCm release as
//! `MAJOR*10000 + MINOR*100 + PATCH`), ROCm/ROCm#6074, ROCm/ROCm#6520, vllm-project/vllm#38587.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

/// What a matched line means for the diagnosis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Meaning {
    /// The runtime says it refused a hostcall kernel: the bug, confirmed.
    Confirmed,
    /// A symptom the refusal produces (also produced by other HIP failures).
    Symptom,
    /// Kernel-log evidence about the platform.
    Platform,
    /// A different problem with a similar face.
    DifferentCause,
    /// A line known to be unrelated.
    Noise,
    /// Version or path information.
    Info,
}

/// One recognised signature in a log.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// 1-based line number.
    pub line_no: usize,
    /// The line, trimmed, at most 400 characters (raw: escape it before printing to a terminal).
    pub line: String,
    /// Short name of the signature.
    pub signature: &'static str,
    /// How it weighs.
    pub meaning: Meaning,
    /// What it means, one sentence.
    pub explanation: &'static str,
}

struct Sig {
    needle: &'static str,
    name: &'static str,
    meaning: Meaning,
    explanation: &'static str,
}

/// The runtime's refusal line (CLR `rocvirtual.cpp`, level 1).
pub const REFUSAL_LINE: &str = "Pcie atomics not enabled, hostcall not supported";
const SIGNATURES: &[Sig] = &[
    Sig { needle: REFUSAL_LINE, name: "clr-hostcall-refused", meaning: Meaning::Confirmed,
          explanation: "CLR refused a kernel that declares hidden_hostcall_buffer because the GPU has no PCIe AtomicOps to the host" },
    Sig { needle: "AQL dispatch failed!", name: "clr-aql-dispatch-failed", meaning: Meaning::Symptom,
          explanation: "the dispatch was not submitted; right after the hostcall line it is the refusal itself" },
    Sig { needle: "ShaderName :", name: "clr-shader-name", meaning: Meaning::Info,
          explanation: "AMD_LOG_LEVEL>=3 names the kernel being launched" },
    Sig { needle: "hipErrorIllegalState", name: "hip-illegal-state", meaning: Meaning::Symptom,
          explanation: "HIP error 401, what a refused hostcall dispatch returns" },
    Sig { needle: "NCCL WARN HIP failure", name: "rccl-enqueue-hip-failure", meaning: Meaning::Symptom,
          explanation: "RCCL's collective kernel launch (enqueue.cc) returned a HIP error; with 'the operation cannot be performed in the present state' it is hipErrorIllegalState, what a refused hostcall dispatch returns" },
    Sig { needle: "the operation cannot be performed in the present state", name: "hip-illegal-state-text", meaning: Meaning::Symptom,
          explanation: "the text of hipErrorIllegalState (401), what a refused hostcall dispatch returns" },
    Sig { needle: "unhandled cuda error", name: "torch-unhandled-cuda-error", meaning: Meaning::Symptom,
          explanation: "RCCL's return code for any HIP error inside it (ncclUnhandledCudaError): alone it says nothing about the cause; the HIP text or the refusal line next to it does" },
    Sig { needle: "Kernel expects a hostcall buffer, but none found", name: "clr-hostcall-buffer-missing", meaning: Meaning::DifferentCause,
          explanation: "atomics are present but CLR could not create the hostcall buffer: a different cause, not the AtomicOps refusal" },
    Sig { needle: "Hostcall: invalid service request", name: "clr-hostcall-invalid-request", meaning: Meaning::DifferentCause,
          explanation: "the runtime's hostcall listener (CLR devhostcall.cpp) received a request it does not know: the hostcall buffer existed and a kernel reached the host through it, so this GPU's AtomicOps path worked; evidence against the AtomicOps refusal (a malformed hostcall packet is a different bug)" },
    Sig { needle: "PCI rejects atomics", name: "kfd-rejects-atomics", meaning: Meaning::DifferentCause,
          explanation: "KFD refused the whole GPU (an older chip or firmware that needs atomics for compute): a hardware/firmware requirement, not this bug" },
    Sig { needle: "PCIE atomic ops is not supported", name: "amdgpu-no-atomics", meaning: Meaning::Platform,
          explanation: "amdgpu found no AtomicOp path to this GPU's root port; hostcall kernels will be refused on it" },
    Sig { needle: "PCIe atomic ops are not supported", name: "amdgpu-no-atomics", meaning: Meaning::Platform,
          explanation: "amdgpu found no AtomicOp path to this GPU's root port; hostcall kernels will be refused on it" },
    Sig { needle: "cuMem support requires VMM RDMA support", name: "rccl-cumem-warning", meaning: Meaning::Noise,
          explanation: "unrelated RCCL init warning" },
    Sig { needle: "undefined symbol: nccl", name: "abi-undefined-nccl-symbol", meaning: Meaning::DifferentCause,
          explanation: "the loaded RCCL is older than the API torch was built against (kyuz0/amd-strix-halo-vllm-toolboxes#60): an ABI mismatch, not this bug; audit with `rcclfix package`" },
    Sig { needle: "invalid device function", name: "hip-invalid-device-function", meaning: Meaning::DifferentCause,
          explanation: "no code for this GPU's gfx target in the library: rebuild for the right target, not this bug" },
    Sig { needle: "hipErrorNoBinaryForGpu", name: "hip-no-binary-for-gpu", meaning: Meaning::DifferentCause,
          explanation: "no code for this GPU's gfx target in the library: rebuild for the right target, not this bug" },
    Sig { needle: "hipErrorInvalidKernelFile", name: "hip-invalid-kernel-file", meaning: Meaning::DifferentCause,
          explanation: "the device code could not be loaded for this GPU: a target/packaging problem, not this bug" },
    Sig { needle: "librocm_smi64.so.1: cannot open shared object file", name: "wheel-missing-rocm-smi", meaning: Meaning::DifferentCause,
          explanation: "the torch wheel does not bundle librocm_smi64 (pytorch/pytorch#191366): a packaging problem, not this bug" },
    Sig { needle: "Failed to infer device type", name: "vllm-device-type", meaning: Meaning::DifferentCause,
          explanation: "vLLM could not enumerate the GPUs (amdsmi/rocm_smi clash after a library swap, pytorch/pytorch#191366): not this bug" },
    Sig { needle: "Watchdog caught collective operation timeout", name: "torch-collective-timeout", meaning: Meaning::DifferentCause,
          explanation: "a collective hung until the watchdog fired; the hostcall refusal fails at once, so a hang is a different bug (ROCm/rccl#2124)" },
    Sig { needle: "waitPeer", name: "rccl-waitpeer-hang", meaning: Meaning::DifferentCause,
          explanation: "a hang in RCCL's waitPeer() loop (the NDEBUG hang of ROCm/rccl#2124): not the refusal" },
    Sig { needle: "Test NCCL failure", name: "rccl-tests-failure", meaning: Meaning::Symptom,
          explanation: "rccl-tests stopped on an RCCL error; the quoted error string says which" },
    Sig { needle: "-- Compiling for", name: "rccl-configure-targets", meaning: Meaning::Info,
          explanation: "RCCL's configure step lists the gfx targets it really builds; compare with what was requested (ROCm/rccl#958)" },
];
/// Versions and paths found in banners and environment dumps (the raw values; [`ReleaseHint`]s say
/// what each one implies).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Versions {
    /// RCCL version from `RCCL version : 2.30.4-HEAD:2b22ab0` (just `2.30.4`).
    pub rccl: Option<String>,
    /// The commit after `HEAD:` in the RCCL banner.
    pub rccl_commit: Option<String>,
    /// `HIP version  : 7.14.60850-0000000`.
    pub hip: Option<String>,
    /// `ROCm version : 7.14.0.0-9999-2b22ab01`.
    pub rocm: Option<String>,
    /// `Librccl path : …`.
    pub librccl_path: Option<String>,
    /// `ROCM used to build PyTorch: 7.2.53211-…`.
    pub torch_rocm: Option<String>,
    /// `roc-7.2.1` from the clang version string.
    pub clang_roc: Option<String>,
    /// `Kernel version: 6.8.12-20-pve`.
    pub kernel: Option<String>,
    /// The RCCL configure step's `-- Compiling for` list.
    pub configure_targets: Option<String>,
    /// The targets requested on the cmake line (`-DAMDGPU_TARGETS=…` / `-DGPU_TARGETS=…`).
    pub requested_targets: Option<String>,
    /// gfx processors of the user's GPUs named in the log (rocminfo `Name: gfx1100`, collect_env's
    /// `GPU models and configuration`, a package name such as `…-gfx906`,
    /// `HSA_OVERRIDE_GFX_VERSION=11.0.0`), in order, deduplicated; never build-configuration lines.
    pub gfx: Vec<String>,
    /// ROCm version from a ROCm container image tag (`rocm/pytorch:rocm7.2_…`).
    pub image_rocm: Option<String>,
}

/// What a [`ReleaseHint`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HintKind {
    /// A ROCm release (`7.2.1`) or family (`7.2`).
    Rocm,
    /// An RCCL version (`2.27.7`).
    Rccl,
}

/// One piece of text in a log that names a ROCm release or an RCCL version.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReleaseHint {
    /// 1-based line number.
    pub line_no: usize,
    /// Release or RCCL version.
    pub kind: HintKind,
    /// `7.2.1`, `7.2` or `2.27.7`.
    pub value: String,
    /// Whether `value` names a point release (three components).
    pub exact: bool,
    /// What the text was, e.g. `torch +rocm6.4 version suffix`, `rccl-library=22707 (rccl-tests)`.
    pub source: String,
    /// Strength: lower wins ([`resolve`] picks the lowest, then the earliest line).
    pub rank: u8,
}

/// The ROCm release the log points at, and how sure that is.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RocmRelease {
    /// `7.2.1`, or a family `7.2` when the point release is unknown.
    pub release: String,
    /// Where it came from (`clang roc-7.2.1`, `ROCm version banner`, …).
    pub source: String,
    /// Whether it names a point release.
    pub exact: bool,
}

/// Who owns a refused kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "owner", rename_all = "kebab-case")]
pub enum KernelOwner {
    /// RCCL's own kernel, or a refusal in a log that goes through RCCL.
    Rccl {
        /// Why (the kernel name pattern, or the RCCL line).
        why: String,
    },
    /// A kernel that is not RCCL's.
    Other {
        /// The library its name points at, when it does (`PyTorch (libtorch_hip.so)`, …).
        library: Option<String>,
    },
    /// No kernel name and nothing in the log ties the refusal to RCCL.
    Unknown,
}

/// One refused dispatch.
#[derive(Debug, Clone, Serialize)]
pub struct Refusal {
    /// 1-based line of the refusal (or of the launch error).
    pub line_no: usize,
    /// The kernel (`ShaderName :` of the launch, demangled when the log has the mangled name).
    pub kernel: Option<String>,
    /// Whose kernel it is.
    pub owner: KernelOwner,
    /// `true`: the runtime's refusal line; `false`: only `hipErrorIllegalState` at a launch.
    pub confirmed: bool,
}

/// Overall class of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogClass {
    /// The runtime refused an RCCL kernel (its own refusal line).
    ConfirmedRefusal,
    /// `hipErrorIllegalState` at RCCL's kernel launch without the runtime line
    /// (`AMD_LOG_LEVEL=1` confirms it).
    ConsistentWithRefusal,
    /// The runtime refused a kernel that is not RCCL's: rebuilding RCCL does not help.
    RefusalOutsideRccl,
    /// The runtime refused a kernel, and the log does not say whose.
    RefusalUnattributed,
    /// An error many causes produce (`unhandled cuda error` alone, `hipErrorIllegalState` outside a
    /// launch), without the refusal signature.
    Inconclusive,
    /// Only look-alike signatures: a different problem.
    DifferentProblem,
    /// Nothing recognised.
    NoSignature,
}

impl LogClass {
    /// One line for the text report.
    pub fn describe(self) -> &'static str {
        match self {
            LogClass::ConfirmedRefusal => {
                "confirmed: the runtime refused an RCCL kernel that declares hostcall"
            }
            LogClass::ConsistentWithRefusal => {
                "consistent with the hostcall refusal of an RCCL kernel (hipErrorIllegalState at RCCL's launch; AMD_LOG_LEVEL=1 prints the runtime's own refusal line)"
            }
            LogClass::RefusalOutsideRccl => {
                "the runtime refused a kernel that is not RCCL's (rebuilding RCCL does not help it)"
            }
            LogClass::RefusalUnattributed => {
                "the runtime refused a hostcall kernel; the log does not say whose (AMD_LOG_LEVEL=3 prints ShaderName)"
            }
            LogClass::Inconclusive => {
                "inconclusive: an error many causes produce, without the refusal signature"
            }
            LogClass::DifferentProblem => "a different problem (look-alike signatures only)",
            LogClass::NoSignature => "no known signature (no error line doctor recognises)",
        }
    }

    /// Sort key: the most decisive class first.
    pub fn weight(self) -> u8 {
        match self {
            LogClass::ConfirmedRefusal => 0,
            LogClass::ConsistentWithRefusal => 1,
            LogClass::RefusalOutsideRccl => 2,
            LogClass::RefusalUnattributed => 3,
            LogClass::DifferentProblem => 4,
            LogClass::Inconclusive => 5,
            LogClass::NoSignature => 6,
        }
    }
}

/// The triage of one log file.
#[derive(Debug, Clone, Serialize)]
pub struct LogTriage {
    /// The file name as given.
    pub path: String,
    /// Lines read.
    pub lines: usize,
    /// Every recognised line (at most 200).
    pub findings: Vec<Finding>,
    /// Versions found.
    pub versions: Versions,
    /// Every release/RCCL hint found (at most 100).
    pub hints: Vec<ReleaseHint>,
    /// The refused dispatches (at most 50).
    pub refusals: Vec<Refusal>,
    /// Names of the refused kernels, deduplicated.
    pub refused_kernels: Vec<String>,
    /// The ROCm release, resolved from the hints.
    pub rocm: Option<RocmRelease>,
    /// The RCCL version that ran (banner, version code) or that the ROCm release ships.
    pub rccl: Option<String>,
    /// What the shipped RCCL of that release is known to do (community measurements).
    pub shipped_declares: Option<&'static str>,
    /// The class.
    pub class: LogClass,
    /// The look-alike problems found, by signature name.
    pub different_causes: Vec<&'static str>,
    /// `enqueue.cc:<line>` locations of RCCL's HIP-failure warnings (2061, 2118, 2119 observed).
    pub rccl_enqueue_lines: Vec<String>,
    /// The log shows a `-O0` build (every kernel then declares the hostcall buffer).
    pub o0_build: bool,
    /// Remarks about the hints (e.g. two releases named), one sentence each.
    pub notes: Vec<String>,
    /// Set when only the end of the file was read ([`super::input::MAX_INPUT_BYTES`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

/// The value after `key` and optional spaces/colon, up to the next whitespace.
fn value_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let i = line.find(key)?;
    let rest = line[i + key.len()..].trim_start_matches([' ', ':', '\t']);
    rest.split_whitespace().next().filter(|s| !s.is_empty())
}

fn leading_version(s: &str) -> Option<String> {
    let v: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v = v.trim_end_matches('.');
    (v.split('.').count() >= 2 && v.split('.').all(|p| !p.is_empty())).then(|| v.to_owned())
}

fn first_n_components(v: &str, n: usize) -> String {
    v.split('.').take(n).collect::<Vec<_>>().join(".")
}

/// `NCCL_VERSION_CODE` → version: `MAJOR*10000 + MINOR*100 + PATCH` from NCCL 2.9 on (23004 →
/// 2.30.4), `MAJOR*1000 + MINOR*100 + PATCH` before (2708 → 2.7.8). RCCL `nccl.h`.
pub fn version_from_code(code: u32) -> Option<String> {
    if code >= 20900 {
        Some(format!(
            "{}.{}.{}",
            code / 10000,
            (code % 10000) / 100,
            code % 100
        ))
    } else if (2000..2900).contains(&code) {
        Some(format!(
            "{}.{}.{}",
            code / 1000,
            (code % 1000) / 100,
            code % 100
        ))
    } else {
        None
    }
}

/// A ROCm package's release integer (`70201` in `rccl_2.27.7.70201-81~24.04`) → `7.2.1`.
pub fn release_from_int(n: u32) -> Option<String> {
    let (major, minor, patch) = (n / 10000, (n / 100) % 100, n % 100);
    (5..=20)
        .contains(&major)
        .then(|| format!("{major}.{minor}.{patch}"))
}

/// Every position where `needle` occurs in `hay` (ASCII case-insensitive when `fold`).
fn find_all(hay: &str, needle: &str, fold: bool) -> Vec<usize> {
    let (h, n) = if fold {
        (hay.to_ascii_lowercase(), needle.to_ascii_lowercase())
    } else {
        (hay.to_owned(), needle.to_owned())
    };
    h.match_indices(&n).map(|(i, _)| i).collect()
}

/// Whether `line` configures a build (its gfx names are build targets, not the user's GPUs).
fn is_build_config_line(line: &str) -> bool {
    [
        "Compiling for",
        "_TARGETS",
        "offload-arch",
        "amdgpu-target",
        "--targets",
    ]
    .iter()
    .any(|k| line.contains(k))
}

/// The explicit gfx processors named on `line` (`gfx1100`, `gfx90a:xnack-` → `gfx90a`), known to
/// [`crate::recipe::known_processors`]; generic targets and families (`gfx110X`) are skipped.
fn gfx_names(line: &str) -> Vec<String> {
    let known = crate::recipe::known_processors();
    let b = line.as_bytes();
    let mut out = vec![];
    for i in find_all(line, "gfx", false) {
        if i > 0 && b[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let name: String = line[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        // `gfx906:sramecc+:xnack-` and `…-gfx906` count; `gfx1030kdb` (a kernel database package
        // for every target) does not.
        if known.contains(&name.as_str()) && !out.contains(&name) {
            out.push(name);
        }
    }
    // HSA_OVERRIDE_GFX_VERSION=11.0.0 makes the runtime load gfx1100 code.
    if let Some(v) = value_after(line, "HSA_OVERRIDE_GFX_VERSION=") {
        let p: Vec<u32> = v
            .trim_matches(['"', '\''])
            .split('.')
            .filter_map(|x| x.parse().ok())
            .collect();
        if let [a, b, c] = p[..] {
            let name = format!("gfx{a}{b:x}{c:x}");
            if known.contains(&name.as_str()) && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// Whose kernel `name` is (CLR prints demangled names; a mangled one is demangled first).
pub fn kernel_owner(name: &str) -> KernelOwner {
    let demangled = crate::package::elf::demangle(name);
    let n = demangled.as_deref().unwrap_or(name);
    for p in ["ncclDevKernel", "ncclKernel", "mscclKernel", "ncclDevFunc"] {
        if n.contains(p) {
            return KernelOwner::Rccl {
                why: format!("{p}* is an RCCL kernel"),
            };
        }
    }
    KernelOwner::Other {
        library: library_for_kernel(n),
    }
}

/// The library a (demangled) kernel name points at, when it does.
pub fn library_for_kernel(n: &str) -> Option<String> {
    let lower = n.to_ascii_lowercase();
    let table: &[(&dyn Fn() -> bool, &str)] = &[
        (&|| n.contains("at::") || n.contains("c10::") || n.contains("torch::"), "PyTorch (libtorch_hip.so)"),
        (&|| n.contains("vllm::"), "vLLM (its _C extension)"),
        (&|| n.contains("aiter::"), "aiter"),
        (&|| n.starts_with("Cijk_") || lower.contains("tensile"), "rocBLAS or hipBLASLt (a Tensile kernel)"),
        (&|| lower.contains("hipblaslt"), "hipBLASLt"),
        (&|| lower.contains("rocblas"), "rocBLAS"),
        (&|| lower.contains("miopen"), "MIOpen"),
        (&|| n.contains("ck::") || n.contains("ck_tile::"), "composable_kernel (compiled into the library that launched it: MIOpen, hipBLASLt, aiter, …)"),
        (&|| lower.contains("triton"), "a Triton kernel (compiled at run time, e.g. by torch.compile or vLLM)"),
        (&|| n.contains("rocprim::") || n.contains("hipcub::"), "rocPRIM/hipCUB (header-only: compiled into the library that launched it)"),
        (&|| lower.contains("rocfft"), "rocFFT"),
    ];
    table
        .iter()
        .find(|(f, _)| f())
        .map(|(_, l)| (*l).to_owned())
}

/// Every release/RCCL hint on one line (`line_no` is 1-based).
fn hints_on_line(line: &str, line_no: usize) -> Vec<ReleaseHint> {
    let mut out = vec![];
    let mut push = |kind, value: String, source: String, rank| {
        let exact = value.split('.').count() >= 3;
        let value = first_n_components(&value, 3);
        if !out
            .iter()
            .any(|h: &ReleaseHint| h.kind == kind && h.value == value)
        {
            out.push(ReleaseHint {
                line_no,
                kind,
                value,
                exact,
                source,
                rank,
            });
        }
    };
    let lower = line.to_ascii_lowercase();
    // The library that actually ran, when it sits in a versioned ROCm tree.
    let librccl = line.contains("Librccl path");
    for i in find_all(line, "/opt/rocm-", false) {
        if let Some(r) = leading_version(&line[i + "/opt/rocm-".len()..]) {
            let (src, rank) = if librccl {
                (format!("Librccl path /opt/rocm-{r}"), 0)
            } else {
                (format!("path /opt/rocm-{r}"), 3)
            };
            push(HintKind::Rocm, r, src, rank);
        }
    }
    if let Some(t) = value_after(line, "RCCL version") {
        if let Some(ver) = leading_version(t) {
            push(HintKind::Rccl, ver, "RCCL version banner".into(), 1);
        }
        // `RCCL version 2.18.3+hip6.0`: the HIP (= ROCm) family it was built for.
        if let Some((_, hip)) = t.split_once("+hip") {
            if let Some(f) = leading_version(hip) {
                push(
                    HintKind::Rocm,
                    first_n_components(&f, 2),
                    format!("RCCL banner +hip{f}"),
                    9,
                );
            }
        }
    }
    if let Some(r) = value_after(line, "ROCm version").and_then(leading_version) {
        push(
            HintKind::Rocm,
            first_n_components(&r, 3),
            "ROCm version banner".into(),
            1,
        );
    }
    if lower.contains("clang") {
        if let Some(t) = line
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .find(|t| t.starts_with("roc-"))
        {
            if let Some(ver) = leading_version(&t[4..]) {
                push(HintKind::Rocm, ver.clone(), format!("clang roc-{ver}"), 2);
            }
        }
    }
    // Package versions: `rccl_2.27.7.70201-81~24.04_amd64.deb`, `ii  rccl  2.27.7.70201-81~24.04`,
    // `rocm-core-7.2.1.70201-81.el9`.
    let tokens: Vec<&str> = line.split_whitespace().collect();
    for (ti, tok) in tokens.iter().enumerate() {
        let bytes = tok.as_bytes();
        for p in 0..bytes.len() {
            if !bytes[p].is_ascii_digit() || (p > 0 && !matches!(bytes[p - 1], b'_' | b'-' | b'='))
            {
                continue;
            }
            let ver: String = tok[p..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let parts: Vec<&str> = ver.trim_end_matches('.').split('.').collect();
            if parts.len() != 4 || parts[3].len() != 5 {
                continue;
            }
            let rocmish = |n: &str| {
                let n = n.rsplit('/').next().unwrap_or(n).to_ascii_lowercase();
                (n.starts_with("rccl") || n.starts_with("rocm") || n.starts_with("hip"))
                    .then_some(n)
            };
            // `dpkg -l`: the name is the token before; apt's `Get:` lines put the architecture
            // between them.
            let name = if p == 0 {
                (1..=2)
                    .filter_map(|k| ti.checked_sub(k).map(|j| tokens[j]))
                    .find_map(rocmish)
            } else {
                rocmish(&tok[..p - 1])
            };
            let Some(name) = name else {
                continue;
            };
            let Some(rel) = parts[3].parse().ok().and_then(release_from_int) else {
                continue;
            };
            push(
                HintKind::Rocm,
                rel.clone(),
                format!("package {name} {ver}"),
                3,
            );
            if name == "rccl" || name == "librccl" || name == "rccl-dev" {
                push(
                    HintKind::Rccl,
                    parts[..3].join("."),
                    format!("package {name} {ver}"),
                    3,
                );
            }
            break;
        }
    }
    // torch's `DistBackendError: NCCL error in: …, NCCL version 2.27.7`: the RCCL torch runs.
    if let Some(r) = value_after(line, "NCCL version").and_then(leading_version) {
        if first_n_components(&r, 3).split('.').count() == 3 {
            push(HintKind::Rccl, r, "torch's \"NCCL version\"".into(), 4);
        }
    }
    for key in ["rccl-library=", "nccl-library="] {
        if let Some(t) = value_after(line, key) {
            let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
            if let Some(ver) = digits.parse().ok().and_then(version_from_code) {
                push(
                    HintKind::Rccl,
                    ver,
                    format!("{key}{digits} (rccl-tests)"),
                    4,
                );
            }
        }
    }
    for i in find_all(line, "+rocm", false) {
        if let Some(r) = leading_version(&line[i + 5..]) {
            let what = if lower.contains("torch") {
                "torch"
            } else {
                "a package"
            };
            push(
                HintKind::Rocm,
                r.clone(),
                format!("{what} +rocm{r} version suffix"),
                5,
            );
        }
    }
    for phrase in [
        "compiled with rocm",
        "built with rocm",
        "compiled against rocm",
    ] {
        for i in find_all(line, phrase, true) {
            let rest = line[i + phrase.len()..].trim_start_matches([' ', ':', 'v', 'V', '\t']);
            if let Some(r) = leading_version(rest) {
                push(
                    HintKind::Rocm,
                    r.clone(),
                    format!("\"{phrase} {r}\"").replace("rocm", "ROCm"),
                    6,
                );
            }
        }
    }
    for (key, src) in [
        ("HIP version", "HIP version"),
        ("HIP runtime version", "collect_env HIP runtime version"),
        ("ROCM used to build PyTorch", "ROCM used to build PyTorch"),
    ] {
        if let Some(r) = value_after(line, key).and_then(leading_version) {
            push(HintKind::Rocm, first_n_components(&r, 2), src.into(), 7);
        }
    }
    // Container images: `rocm/pytorch:rocm7.2_…`, `rocm/dev-ubuntu-24.04:7.2.1-complete`.
    for i in find_all(line, "rocm/", false) {
        let tok = line[i..].split_whitespace().next().unwrap_or("");
        if let Some((_, tag)) = tok.split_once(':') {
            let tag = tag.strip_prefix("rocm").unwrap_or(tag);
            if let Some(r) = leading_version(tag) {
                push(HintKind::Rocm, r, "container image tag".into(), 8);
            }
        }
    }
    out
}

/// Pick the strongest hint of `kind` (lowest rank, then earliest line).
fn best(hints: &[ReleaseHint], kind: HintKind) -> Option<&ReleaseHint> {
    hints
        .iter()
        .filter(|h| h.kind == kind)
        .min_by_key(|h| (h.rank, h.line_no))
}

/// Decide the ROCm release and the RCCL version from the hints; note when the log names
/// releases that disagree (a torch wheel carries its own RCCL next to the system's).
///
/// Returns (release, RCCL version, notes).
pub fn resolve(hints: &[ReleaseHint]) -> (Option<RocmRelease>, Option<String>, Vec<String>) {
    let mut notes = vec![];
    let rocm = best(hints, HintKind::Rocm).map(|h| RocmRelease {
        release: h.value.clone(),
        source: h.source.clone(),
        exact: h.exact,
    });
    let compatible = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
    if let Some(r) = &rocm {
        let others: Vec<String> = hints
            .iter()
            .filter(|h| h.kind == HintKind::Rocm && !compatible(&h.value, &r.release))
            .map(|h| format!("{} (line {}: {})", h.value, h.line_no, h.source))
            .collect();
        if !others.is_empty() {
            notes.push(format!(
                "the log names other ROCm releases too: {}; this report uses {} ({}). The RCCL that runs decides: a torch wheel loads its own torch/lib/librccl.so; NCCL_DEBUG=INFO prints its `Librccl path` and version",
                others.join(", "),
                r.release,
                r.source
            ));
        }
    }
    let rccl = best(hints, HintKind::Rccl).map(|h| h.value.clone());
    if let (Some(ran), Some(r)) = (&rccl, &rocm) {
        if let Some((shipped, _)) = rccl_for_rocm(&r.release) {
            if shipped != ran {
                notes.push(format!(
                    "RCCL {ran} ran, but ROCm {} ships RCCL {shipped}: the RCCL version decides the recipe",
                    r.release
                ));
            }
        }
    }
    (rocm, rccl, notes)
}

/// The RCCL version a ROCm release ships, and whether its shipped library declares hostcall
/// (community measurements: ROCm/ROCm#6074, ROCm/ROCm#6520). `release` is `X.Y.Z` or a family
/// `X.Y`.
pub fn rccl_for_rocm(release: &str) -> Option<(&'static str, &'static str)> {
    let fam = first_n_components(release, 2);
    Some(match (fam.as_str(), release) {
        ("5.4", _) => ("2.13.4", "not measured"),
        ("6.0", _) => ("2.18.3", "not measured"),
        ("6.1", _) => ("2.18.6", "not measured"),
        ("6.2", _) => ("2.20.5", "not measured"),
        ("6.3", _) => ("2.21.5", "not measured"),
        ("6.4", _) => ("2.22.3", "not measured"),
        ("7.0", _) => ("2.26.6", "no (0 kernels)"),
        ("7.1", _) => ("2.27.7", "no (0 kernels for 7.1.1)"),
        ("7.2", "7.2.0") => ("2.27.7", "disputed for 7.2.0: scan it"),
        ("7.2", "7.2") => ("2.27.7", "yes from 7.2.1 (7.2.0 disputed)"),
        ("7.2", _) => ("2.27.7", "yes (NDEBUG lost in packaging, ROCm/rccl#2124)"),
        ("7.11" | "7.12" | "7.13", _) => ("2.28.3", "not measured"),
        ("7.14", _) => ("2.30.4", "yes (13 kernels)"),
        ("10.0", _) => ("2.30.4", "yes"),
        ("10.1", _) => ("2.30.7", "not measured"),
        _ => return None,
    })
}

/// A `ShaderName :` line's kernel name.
fn shader_name(line: &str) -> Option<String> {
    let (_, r) = line.split_once("ShaderName :")?;
    let k = r.trim();
    (!k.is_empty()).then(|| k.to_owned())
}

/// `hipErrorIllegalState` returned by a kernel launch (`hipModuleLaunchKernel`, `hipLaunchKernel`,
/// `hipExtLaunchKernel`, …).
fn is_launch_illegal_state(line: &str) -> bool {
    line.contains("hipErrorIllegalState") && line.contains("Launch")
}

/// A HIP call inside RCCL returned hipErrorIllegalState: RCCL's own warning (`enqueue.cc … NCCL WARN
/// HIP failure '…present state'`) or its `Last error: Cuda failure '…present state'` that torch
/// quotes.
fn is_rccl_launch_illegal_state(line: &str) -> bool {
    line.contains("present state")
        && (line.contains("NCCL WARN HIP failure") || line.contains("Cuda failure '"))
}

/// Who built a librccl, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Packager {
    /// AMD's ROCm packages: under `/opt/rocm` or `/opt/rocm-<release>`.
    Amd,
    /// The distribution's package (Debian/Ubuntu `librccl1`: `/usr/lib/<triplet>/librccl.so.1`,
    /// or another path under `/usr`).
    Distribution,
    /// The copy a PyTorch wheel bundles (`…/torch/lib/librccl.so`, TheRock `_rocm_sdk_*`).
    TorchWheel,
    /// Anywhere else (an own build).
    Other,
}

impl Packager {
    /// Words for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Packager::Amd => "AMD's ROCm package (/opt/rocm)",
            Packager::Distribution => {
                "the distribution's package (e.g. Debian's librccl1, built from RCCL's source with its own flags), not AMD's"
            }
            Packager::TorchWheel => "the copy the PyTorch wheel bundles, not the system's",
            Packager::Other => "not AMD's /opt/rocm package (an own or third-party build)",
        }
    }
}

/// Who built the librccl at `path` (by its path: `/opt/rocm*` is AMD's, `/usr/…` the
/// distribution's, `…/torch/lib/` or `_rocm_sdk_` a wheel's).
pub fn packager_of(path: &str) -> Packager {
    if path.starts_with("/opt/rocm") {
        Packager::Amd
    } else if path.contains("/torch/lib/") || path.contains("_rocm_sdk_") {
        Packager::TorchWheel
    } else if path.starts_with("/usr/") || path.starts_with("/lib/") {
        Packager::Distribution
    } else {
        Packager::Other
    }
}

/// A line that shows a PyTorch operator ran (`z=torch.sum(y)` in a traceback, `at::native`, a
/// `libtorch_hip.so` frame), pytorch/pytorch#103973, pytorch/pytorch#115734.
fn is_torch_op_line(line: &str) -> bool {
    line.contains("libtorch_hip")
        || line.contains("at::native::")
        || line.find("torch.").is_some_and(|i| {
            let before = line[..i].trim_end();
            let ident: String = line[i + 6..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            !ident.is_empty()
                && line[i + 6 + ident.len()..].starts_with('(')
                && (before.is_empty() || before.ends_with('='))
        })
}

/// A line that shows the log goes through RCCL.
fn is_rccl_line(line: &str) -> bool {
    [
        "enqueue.cc",
        "NCCL WARN",
        "NCCL INFO",
        "RCCL version",
        "unhandled cuda error",
        "NCCL error",
        "librccl",
        "ncclDevKernel",
        "mscclKernel",
    ]
    .iter()
    .any(|k| line.contains(k))
}

/// Triage log text. `path` is only used for display.
pub fn triage(text: &str, path: &str) -> LogTriage {
    let mut findings = vec![];
    let mut v = Versions::default();
    let mut hints: Vec<ReleaseHint> = vec![];
    let mut refusals: Vec<Refusal> = vec![];
    let mut last_shader: Option<String> = None;
    // A refusal (or a hostcall-buffer failure) whose follow-up lines (AQL dispatch failed, the
    // launch's return code, RCCL's warning) belong to the same dispatch.
    let mut event_open = false;
    let mut rccl_line: Option<(usize, String)> = None;
    // A PyTorch operator in a traceback (`z=torch.sum(y)`) or a libtorch_hip frame: who launched
    // a refused kernel the log does not name, when nothing ties the log to RCCL.
    let mut torch_line: Option<(usize, String)> = None;
    let mut enqueue = vec![];
    let mut o0_build = false;
    let mut lines = 0;
    for (i, raw) in text.lines().enumerate() {
        lines += 1;
        let line = raw.trim();
        let line_no = i + 1;
        if rccl_line.is_none() && is_rccl_line(line) {
            rccl_line = Some((line_no, line.chars().take(120).collect()));
        }
        if torch_line.is_none() && is_torch_op_line(line) {
            torch_line = Some((line_no, line.chars().take(120).collect()));
        }
        if line.contains("NCCL WARN HIP failure") {
            if let Some((_, r)) = line.split_once("enqueue.cc:") {
                let n: String = r.chars().take_while(char::is_ascii_digit).collect();
                let loc = format!("enqueue.cc:{n}");
                if !n.is_empty() && !enqueue.contains(&loc) {
                    enqueue.push(loc);
                }
            }
        }
        if line.contains(" -O0") && !line.contains("-O0:") {
            o0_build = true;
        }
        if let Some(k) = shader_name(line) {
            last_shader = Some(k);
            event_open = false;
        } else if line.contains(REFUSAL_LINE) {
            refusals.push(Refusal {
                line_no,
                kernel: last_shader.take(),
                owner: KernelOwner::Unknown,
                confirmed: true,
            });
            event_open = true;
        } else if line.contains("Kernel expects a hostcall buffer, but none found") {
            last_shader = None;
            event_open = true;
        } else if !event_open && is_launch_illegal_state(line) {
            refusals.push(Refusal {
                line_no,
                kernel: last_shader.take(),
                owner: KernelOwner::Unknown,
                confirmed: false,
            });
            event_open = true;
        } else if !event_open && is_rccl_launch_illegal_state(line) {
            refusals.push(Refusal {
                line_no,
                kernel: None,
                owner: KernelOwner::Rccl {
                    why: if line.contains("enqueue.cc") {
                        "RCCL's kernel launch (enqueue.cc) returned hipErrorIllegalState".into()
                    } else {
                        "a HIP call inside RCCL returned hipErrorIllegalState, the code of a refused dispatch".into()
                    },
                },
                confirmed: false,
            });
            event_open = true;
        }
        for s in SIGNATURES {
            if line.contains(s.needle) {
                if s.name == "rccl-configure-targets" {
                    v.configure_targets = line
                        .split_once("-- Compiling for")
                        .map(|(_, r)| r.trim().to_owned());
                }
                if findings.len() < 200 {
                    findings.push(Finding {
                        line_no,
                        line: line.chars().take(400).collect(),
                        signature: s.name,
                        meaning: s.meaning,
                        explanation: s.explanation,
                    });
                }
                break;
            }
        }
        if let Some(t) = value_after(line, "RCCL version") {
            if let Some(ver) = leading_version(t) {
                v.rccl = Some(ver);
                v.rccl_commit = t
                    .split_once("HEAD:")
                    .map(|(_, c)| c.trim_end_matches(',').to_owned());
            }
        }
        if let Some(t) = value_after(line, "HIP version") {
            v.hip.get_or_insert_with(|| t.to_owned());
        }
        if let Some(t) = value_after(line, "ROCm version") {
            v.rocm.get_or_insert_with(|| t.to_owned());
        }
        if let Some((_, r)) = line.split_once("Librccl path") {
            let p = r.trim_start_matches([' ', ':']).trim();
            if !p.is_empty() {
                v.librccl_path = Some(p.to_owned());
            }
        }
        if let Some(t) = value_after(line, "ROCM used to build PyTorch") {
            v.torch_rocm = Some(t.to_owned());
        }
        if line.to_ascii_lowercase().contains("clang") {
            if let Some(t) = line
                .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
                .find(|t| t.starts_with("roc-"))
            {
                if let Some(ver) = leading_version(&t[4..]) {
                    v.clang_roc = Some(ver);
                }
            }
        }
        if let Some(t) = value_after(line, "Kernel version") {
            v.kernel = Some(t.to_owned());
        }
        for key in ["-DAMDGPU_TARGETS=", "-DGPU_TARGETS="] {
            if let Some((_, r)) = line.split_once(key) {
                let t = r
                    .trim_start_matches(['"', '\''])
                    .split(['"', '\'', ' '])
                    .next()
                    .unwrap_or("");
                if !t.is_empty() {
                    v.requested_targets = Some(t.to_owned());
                }
            }
        }
        if !is_build_config_line(line) {
            for g in gfx_names(line) {
                if !v.gfx.contains(&g) {
                    v.gfx.push(g);
                }
            }
        }
        if let Some(i) = line.find("rocm/") {
            if let Some((_, tag)) = line[i..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .split_once(":rocm")
            {
                if let Some(ver) = leading_version(tag) {
                    v.image_rocm.get_or_insert(ver);
                }
            }
        }
        for h in hints_on_line(line, line_no) {
            if hints.len() < 100
                && !hints
                    .iter()
                    .any(|x| x.kind == h.kind && x.value == h.value && x.source == h.source)
            {
                hints.push(h);
            }
        }
    }
    // The configure log lists other targets than the cmake line asked for (ROCm/rccl#958).
    if let (Some(req), Some(got)) = (&v.requested_targets, &v.configure_targets) {
        let set = |s: &str| {
            let mut x: Vec<String> = s
                .split([';', ',', ' '])
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            x.sort();
            x
        };
        if set(req) != set(got) {
            findings.push(Finding {
                line_no: findings.iter().find(|f| f.signature == "rccl-configure-targets").map_or(0, |f| f.line_no),
                line: format!("requested {req}, configure builds {got}"),
                signature: "rccl-target-list-ignored",
                meaning: Meaning::DifferentCause,
                explanation: "the build ignored the requested gfx target list (ROCm/rccl#958): a build configuration problem, not this bug; pass both GPU_TARGETS and AMDGPU_TARGETS and check the configure log",
            });
        }
    }
    // Whose kernels were refused.
    for r in refusals.iter_mut() {
        if r.owner != KernelOwner::Unknown {
            continue;
        }
        r.owner = match &r.kernel {
            Some(k) => kernel_owner(k),
            None => match (&rccl_line, &torch_line) {
                (Some((n, l)), _) => KernelOwner::Rccl {
                    why: format!("no kernel name, but the log goes through RCCL (line {n}: {l})"),
                },
                (None, Some((n, l))) => KernelOwner::Other {
                    library: Some(format!(
                        "PyTorch (libtorch_hip.so; launched by the PyTorch operator at line {n}: {l})"
                    )),
                },
                (None, None) => KernelOwner::Unknown,
            },
        };
        if let Some(k) = &r.kernel {
            if let Some(d) = crate::package::elf::demangle(k) {
                r.kernel = Some(d);
            }
        }
    }
    refusals.truncate(50);
    let mut refused: Vec<String> = vec![];
    for k in refusals.iter().filter_map(|r| r.kernel.clone()) {
        if !refused.contains(&k) {
            refused.push(k);
        }
    }
    let (rocm, rccl_ran, mut notes) = resolve(&hints);
    let rccl = rccl_ran.or_else(|| {
        rocm.as_ref()
            .and_then(|r| rccl_for_rocm(&r.release))
            .map(|(x, _)| x.to_owned())
    });
    // The release measurements are of AMD's packages: a distribution's librccl (Debian's librccl1
    // 7.2.4 is RCCL 2.27.7 built with NDEBUG, 0 declaring kernels) is judged by its scan instead.
    let packager = v.librccl_path.as_deref().map(packager_of);
    let shipped_declares = rocm
        .as_ref()
        .and_then(|r| rccl_for_rocm(&r.release))
        .map(|(_, d)| d)
        .filter(|_| packager.is_none_or(|p| p == Packager::Amd));
    if let (Some(p), Some(path)) = (packager, v.librccl_path.as_deref()) {
        if p != Packager::Amd && rocm.is_some() {
            notes.push(format!(
                "the RCCL that ran is {path}, {}: what AMD's packages of this release do says nothing about it; scan that file (rcclfix scan {path}, or rcclfix doctor --library {path})",
                p.describe()
            ));
        }
    }
    let mut different: Vec<&'static str> = findings
        .iter()
        .filter(|f| f.meaning == Meaning::DifferentCause)
        .map(|f| f.signature)
        .collect();
    different.dedup();
    let is_rccl = |r: &&Refusal| matches!(r.owner, KernelOwner::Rccl { .. });
    let is_other = |r: &&Refusal| matches!(r.owner, KernelOwner::Other { .. });
    let any = |f: &dyn Fn(&&Refusal) -> bool, confirmed: Option<bool>| {
        refusals
            .iter()
            .any(|r| f(&r) && confirmed.is_none_or(|c| r.confirmed == c))
    };
    let symptom = findings.iter().any(|f| f.meaning == Meaning::Symptom);
    let class = if any(&is_rccl, Some(true)) {
        LogClass::ConfirmedRefusal
    } else if any(&is_other, Some(true)) {
        LogClass::RefusalOutsideRccl
    } else if any(&is_rccl, Some(false)) && different.is_empty() {
        LogClass::ConsistentWithRefusal
    } else if any(&is_other, Some(false)) && different.is_empty() {
        LogClass::RefusalOutsideRccl
    } else if refusals.iter().any(|r| r.confirmed) {
        LogClass::RefusalUnattributed
    } else if !different.is_empty() {
        LogClass::DifferentProblem
    } else if symptom || !refusals.is_empty() {
        LogClass::Inconclusive
    } else {
        LogClass::NoSignature
    };
    if class == LogClass::RefusalOutsideRccl && any(&is_rccl, None) {
        notes.push(
            "RCCL's launch failed too: once the other kernel is fixed, RCCL may be refused next"
                .into(),
        );
    }
    LogTriage {
        path: path.to_owned(),
        lines,
        findings,
        versions: v,
        hints,
        refusals,
        refused_kernels: refused,
        rocm,
        rccl,
        shipped_declares,
        class,
        different_causes: different,
        rccl_enqueue_lines: enqueue,
        o0_build,
        notes,
        cut: None,
    }
}

/// Read and triage a log file: its last [`super::input::MAX_INPUT_BYTES`] only.
///
/// Errors: the file cannot be read, or is not a regular file.
pub fn triage_file(path: &Path) -> anyhow::Result<LogTriage> {
    let tail = super::input::read_tail(path, super::input::MAX_INPUT_BYTES)
        .context("cannot read the log")?;
    let mut t = triage(&tail.text, &path.display().to_string());
    t.cut = tail.cut_note(path);
    Ok(t)
}

/// The sentence doctor prints when no log or machine names the ROCm release.
pub const RELEASE_UNKNOWN: &str =
    "ROCm release unknown: run `rcclfix build --list` and pick the recipe for your release";

/// The rebuild advice for a ROCm release / RCCL version: the recipe to pass to `rcclfix build --tag`,
/// and the GPU targets to build.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RebuildAdvice {
    /// The `--tag` value (a recipe id); `None` when the release is unknown or has no recipe.
    pub tag: Option<String>,
    /// Whether `tag` names a recipe embedded in this rcclfix.
    pub recipe_exists: bool,
    /// The ROCm release the advice is for, when known.
    pub rocm: Option<String>,
    /// The RCCL version the advice is for, when known.
    pub rccl: Option<String>,
    /// The gfx targets of every affected GPU found (`--targets`); empty when none was found.
    pub targets: Vec<String>,
    /// Whether the recipe needs `--experimental`.
    pub experimental: bool,
    /// The recipe's status (`verified`, `expected`, `experimental`), when a recipe was chosen.
    pub status: Option<String>,
    /// The whole command (`rcclfix build --tag 2.27.7 --targets gfx1100,gfx1201`), when a recipe
    /// was chosen.
    pub command: Option<String>,
    /// Caveats, one sentence each.
    pub notes: Vec<String>,
}

/// Pick the recipe that rebuilds the RCCL of `rocm`/`rccl` (either may be unknown), from
/// [`crate::recipe::embedded`], for `targets` (the affected GPUs' gfx processors).
///
/// Rule: only the user's release line. The recipes for this RCCL version built for this ROCm
/// family (when both are known; else for whichever is known), best status first (`verified`,
/// `expected`, `experimental`; `unfixable-by-rebuild` never). The other recipes of that RCCL
/// version are named with their status; a different release line (2.27.7 with NDEBUG, the
/// community-verified remedy of ROCm/ROCm#6520 and ROCm/ROCm#6074) is only ever named as an
/// explicit alternative, never chosen. When the line has no recipe, the advice says so (no tag),
/// naming the nearest recipe and why it is not the user's. Nothing is defaulted: an unknown
/// release gives no tag and [`RELEASE_UNKNOWN`].
pub fn rebuild_advice(rocm: Option<&str>, rccl: Option<&str>, targets: &[String]) -> RebuildAdvice {
    use crate::recipe::{Recipe, Status};
    let all = crate::recipe::embedded().unwrap_or_default();
    let rccl = rccl
        .map(str::to_owned)
        .or_else(|| rocm.and_then(rccl_for_rocm).map(|(r, _)| r.to_owned()));
    let usable = |r: &&Recipe| r.status != Status::UnfixableByRebuild;
    fn best(mut v: Vec<&Recipe>) -> Option<&Recipe> {
        v.sort_by_key(|r| (r.status, r.id().len(), r.id().to_owned()));
        v.first().copied()
    }
    // A recipe is of the user's ROCm line when its release is that release, or in that family.
    let fam = |v: &str| first_n_components(v, 2);
    let rocm_ok = |r: &Recipe| {
        rocm.is_none_or(|rel| {
            r.rocm_release == rel
                || (rel.split('.').count() < 3 && fam(&r.rocm_release) == fam(rel))
        })
    };
    let line: Vec<&Recipe> = all
        .values()
        .filter(|r| rccl.as_deref().is_none_or(|v| r.rccl_version == v))
        .filter(|_| rccl.is_some() || rocm.is_some())
        .collect();
    let mut in_line: Vec<&Recipe> = line.iter().copied().filter(|r| rocm_ok(r)).collect();
    if in_line.is_empty() && rocm.is_some_and(|rel| rel.split('.').count() >= 3) {
        // A point release without its own recipe: the family's recipes of that RCCL version.
        in_line = line
            .iter()
            .copied()
            .filter(|r| rocm.is_some_and(|rel| fam(&r.rocm_release) == fam(rel)))
            .collect();
    }
    let matching = best(in_line.iter().copied().filter(usable).collect());
    let mut notes = vec![];
    let unfixable: Vec<&str> = all
        .values()
        .filter(|r| {
            rccl.as_deref() == Some(r.rccl_version.as_str())
                && r.status == Status::UnfixableByRebuild
        })
        .map(|r| r.id())
        .collect();
    let chosen = match matching {
        Some(m) => {
            if m.status == Status::Experimental {
                notes.push(format!(
                    "recipe {} is experimental: {}",
                    m.id(),
                    m.status_reason.as_deref().unwrap_or("not verified")
                ));
            }
            let others: Vec<String> = in_line
                .iter()
                .filter(|r| r.id() != m.id() && r.status != Status::UnfixableByRebuild)
                .map(|r| {
                    format!(
                        "{} (ROCm {}, {})",
                        r.id(),
                        r.rocm_release,
                        r.status.as_str()
                    )
                })
                .collect();
            if !others.is_empty() {
                notes.push(format!(
                    "other recipes of RCCL {}: {}{}",
                    m.rccl_version,
                    others.join(", "),
                    if rocm.is_none() {
                        "; the ROCm release is not in the evidence: pick the recipe built for yours"
                    } else {
                        ""
                    }
                ));
            }
            if m.status == Status::Experimental && m.rccl_version != "2.27.7" {
                if let Some(p) = best(
                    all.values()
                        .filter(|r| r.rccl_version == "2.27.7" && r.rocm_release.starts_with("7.2"))
                        .filter(|r| matches!(r.status, Status::Verified | Status::Expected))
                        .collect(),
                ) {
                    notes.push(format!(
                        "a different release line, only if you choose it: RCCL 2.27.7 with NDEBUG is the community-verified remedy (ROCm/ROCm#6520): rcclfix build --tag {}{}; check first that your torch's nccl* imports exist in 2.27.7 (`rcclfix package` audits this; kyuz0/amd-strix-halo-vllm-toolboxes#60)",
                        p.id(),
                        targets_flag(targets)
                    ));
                }
            }
            Some(m)
        }
        None => {
            match (&rccl, rocm) {
                (None, None) => notes.push(RELEASE_UNKNOWN.into()),
                (Some(v), Some(r)) if !line.is_empty() => {
                    let near: Vec<String> = line
                        .iter()
                        .filter(|x| x.status != Status::UnfixableByRebuild)
                        .map(|x| format!("{} (ROCm {}, {})", x.id(), x.rocm_release, x.status.as_str()))
                        .collect();
                    notes.push(format!(
                        "no recipe for RCCL {v} on ROCm {r} in this rcclfix: {} build{} against another ROCm, whose runtime your machine does not have; rebuild RCCL {v} with NDEBUG against your ROCm {r} yourself, or move to that ROCm release and use its recipe",
                        near.join(", "),
                        if near.len() == 1 { "s" } else { "" }
                    ));
                }
                (Some(v), _) => notes.push(format!(
                    "no usable recipe for RCCL {v} in this rcclfix: run `rcclfix build --list` and pick the recipe for your release"
                )),
                (None, Some(r)) => notes.push(format!(
                    "no recipe for ROCm {r} in this rcclfix: run `rcclfix build --list` and pick the recipe for your release"
                )),
            }
            None
        }
    };
    if !unfixable.is_empty() {
        notes.push(format!(
            "not: {} (a rebuild with the device linker keeps the declaration)",
            unfixable.join(", ")
        ));
    }
    let Some(r) = chosen else {
        return RebuildAdvice {
            tag: None,
            recipe_exists: false,
            rocm: rocm.map(str::to_owned),
            rccl,
            targets: targets.to_vec(),
            experimental: false,
            status: None,
            command: None,
            notes,
        };
    };
    if rccl.as_deref().is_some_and(|v| v != r.rccl_version) && notes.is_empty() {
        notes.push(format!(
            "this recipe builds RCCL {} (ROCm {})",
            r.rccl_version, r.rocm_release
        ));
    }
    if r.rccl_version.starts_with("2.27.") {
        notes.push(
            "NDEBUG carries the AllReduce hang risk of ROCm/rccl#2124: `rcclfix verify` checks for it".into(),
        );
    }
    if targets.is_empty() {
        notes.push(format!(
            "no GPU target found: the recipe builds {}; add --targets for your GPU (`rocminfo | grep -m1 gfx`)",
            r.build.targets.join(",")
        ));
    }
    let experimental = r.status == Status::Experimental;
    RebuildAdvice {
        tag: Some(r.id().to_owned()),
        recipe_exists: true,
        rocm: rocm.map(str::to_owned),
        rccl,
        targets: targets.to_vec(),
        experimental,
        status: Some(r.status.as_str().to_owned()),
        command: Some(format!(
            "rcclfix build --tag {}{}{}",
            r.id(),
            targets_flag(targets),
            if experimental { " --experimental" } else { "" }
        )),
        notes,
    }
}

fn targets_flag(targets: &[String]) -> String {
    if targets.is_empty() {
        String::new()
    } else {
        format!(" --targets {}", targets.join(","))
    }
}
