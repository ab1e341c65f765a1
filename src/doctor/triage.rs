//! Log triage (`rcclfix doctor --log FILE`): find the hostcall refusal and say whose kernel was
//! refused, recognise the look-alikes (the rules table in [`super::rules`], which this walks), and
//! read every hint a pasted report carries about the ROCm release, the RCCL version and the GPU
//! targets ([`super::release`] resolves them and maps the release to the recipe of its line).
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

use super::release::{find_all, hints_on_line, leading_version, value_after};
pub use super::release::{
    packager_of, rccl_for_rocm, rebuild_advice, release_from_int, resolve, version_from_code,
    HintKind, Packager, RebuildAdvice, ReleaseHint, RocmRelease, RELEASE_UNKNOWN,
};
use super::rules::SIGNATURES;
pub use super::rules::{Finding, Meaning, REFUSAL_LINE};

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
    /// The AMD GPUs the log's kernel lines name (a pasted `dmesg` excerpt), with what they say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kernel_gpus: Vec<super::kmsg::LogGpu>,
    /// Set when only the end of the file was read ([`super::input::MAX_INPUT_BYTES`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
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

/// The project a source file named on `line` belongs to (`…/ggml-cuda/ggml-cuda.cu:1234` →
/// ggml): a log that names the file where the failing call was made names the kernel's owner.
/// Only GPU source files count (`.cu`, `.hip`, `.cuh`); the runtime's and RCCL's own files
/// (`rocvirtual.cpp`, `enqueue.cc`) do not.
pub fn project_of_source(line: &str) -> Option<String> {
    if line.contains("ggml-cuda") || line.contains("ggml-hip") || line.contains("ggml/src") {
        return Some("ggml (llama.cpp's GPU backend: the log names ggml-cuda.cu)".into());
    }
    let file = line
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '"' | '\'' | ','))
        .map(|t| t.split(':').next().unwrap_or(t))
        .find(|t| [".cu", ".hip", ".cuh"].iter().any(|e| t.ends_with(e)))?;
    let name = file.rsplit('/').next().unwrap_or(file);
    (!name.starts_with('.') && name.len() <= 120)
        .then(|| format!("the project that owns {name} (the source file the log names)"))
}

/// A kept kernel name is cut at this many characters (a `ShaderName` line can be megabytes long).
pub const MAX_KERNEL_NAME_CHARS: usize = 4 << 10;
/// At most this many refused dispatches are kept per log.
pub const MAX_REFUSALS: usize = 50;

/// A `ShaderName :` line's kernel name (at most [`MAX_KERNEL_NAME_CHARS`]; a longer one is cut
/// and ends in `…`, and is not demangled).
fn shader_name(line: &str) -> Option<String> {
    let (_, r) = line.split_once("ShaderName :")?;
    let k = r.trim();
    if k.is_empty() {
        return None;
    }
    Some(match k.char_indices().nth(MAX_KERNEL_NAME_CHARS) {
        Some((i, _)) => format!("{}…", &k[..i]),
        None => k.to_owned(),
    })
}

use super::api::is_launch_illegal_state;

/// A HIP call inside RCCL returned hipErrorIllegalState: RCCL's own warning (`enqueue.cc … NCCL WARN
/// HIP failure '…present state'`) or its `Last error: Cuda failure '…present state'` that torch
/// quotes.
fn is_rccl_launch_illegal_state(line: &str) -> bool {
    line.contains("present state")
        && (line.contains("NCCL WARN HIP failure") || line.contains("Cuda failure '"))
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

/// Keep `r` if fewer than [`MAX_REFUSALS`] are kept.
fn keep(refusals: &mut Vec<Refusal>, r: Refusal) {
    if refusals.len() < MAX_REFUSALS {
        refusals.push(r);
    }
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
    // A GPU source file the log names (`ggml-cuda.cu`): whose code made the failing call.
    let mut source_project: Option<String> = None;
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
        if source_project.is_none() {
            source_project = project_of_source(line);
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
            keep(
                &mut refusals,
                Refusal {
                    line_no,
                    kernel: last_shader.take(),
                    owner: KernelOwner::Unknown,
                    confirmed: true,
                },
            );
            event_open = true;
        } else if line.contains("Kernel expects a hostcall buffer, but none found") {
            last_shader = None;
            event_open = true;
        } else if !event_open && is_launch_illegal_state(line) {
            keep(
                &mut refusals,
                Refusal {
                    line_no,
                    kernel: last_shader.take(),
                    owner: KernelOwner::Unknown,
                    confirmed: false,
                },
            );
            event_open = true;
        } else if !event_open && is_rccl_launch_illegal_state(line) {
            keep(
                &mut refusals,
                Refusal {
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
                },
            );
            event_open = true;
        }
        // The failing call first (only a dispatch can be the refusal), then the look-alikes.
        let look = super::lookalike::illegal_state_elsewhere(line)
            .map(|(name, why, next)| {
                (
                    name,
                    "HIP hip_runtime_api.h (the call that returned it)",
                    why,
                    next,
                )
            })
            .or_else(|| {
                super::lookalike::matching(line)
                    .map(|l| (l.name, l.source, l.explanation, l.next_step))
            });
        if let Some((name, source, explanation, next)) = look {
            if findings.len() < 200 {
                findings.push(Finding {
                    line_no,
                    line: line.chars().take(400).collect(),
                    signature: name,
                    source,
                    meaning: Meaning::DifferentCause,
                    explanation,
                    next_step: Some(next),
                });
            }
        }
        for s in SIGNATURES.iter().filter(|_| look.is_none()) {
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
                        source: s.source,
                        meaning: s.meaning,
                        explanation: s.explanation,
                        next_step: None,
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
                source: "ROCm/rccl#958",
                meaning: Meaning::DifferentCause,
                explanation: "the build ignored the requested gfx target list (ROCm/rccl#958): a build configuration problem, not this bug; pass both GPU_TARGETS and AMDGPU_TARGETS and check the configure log",
                next_step: None,
            });
        }
    }
    // Whose kernels were refused.
    for r in refusals.iter_mut() {
        if r.owner != KernelOwner::Unknown {
            continue;
        }
        r.owner = match &r.kernel {
            Some(k) => match (kernel_owner(k), &source_project) {
                (KernelOwner::Other { library: None }, Some(p)) => KernelOwner::Other {
                    library: Some(p.clone()),
                },
                (o, _) => o,
            },
            None => match (&rccl_line, &torch_line) {
                (Some((n, l)), _) => KernelOwner::Rccl {
                    why: format!("no kernel name, but the log goes through RCCL (line {n}: {l})"),
                },
                (None, _) if source_project.is_some() => KernelOwner::Other {
                    library: source_project.clone(),
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
    refusals.truncate(MAX_REFUSALS);
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
    } else if !refusals.is_empty() && !different.is_empty() {
        // A launch that failed the refusal's way next to a look-alike: the evidence for the other
        // problem is not clear, and neither is the refusal.
        notes.push(format!(
            "the log shows {} and also a kernel launch that returned hipErrorIllegalState (line {}): which came first decides; AMD_LOG_LEVEL=1 prints the runtime's own refusal line if it is the refusal",
            different.join(", "),
            refusals[0].line_no
        ));
        LogClass::Inconclusive
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
        kernel_gpus: super::kmsg::parse(
            text,
            super::kmsg::LogOrigin::Unavailable {
                reason: String::new(),
            },
        )
        .gpus
        .into_values()
        .collect(),
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
