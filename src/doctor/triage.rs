//! Log triage (`rcclfix doctor --log FILE`): recognise the signatures of the hostcall refusal and of
//! the look-alikes, pull the RCCL/HIP/ROCm versions out of banners and `collect_env` dumps, and map
//! the ROCm release to the RCCL it ships and the recipe that rebuilds it.
//!
//! Source: CLR `rocvirtual.cpp` (refusal lines), RCCL `enqueue.cc` / `init.cc` (banner), torch
//! `collect_env.py`; shared/reference/platform.md §5, rccl.md §1, cases C01–C04, C07–C09.

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
    /// The line, trimmed.
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

const SIGNATURES: &[Sig] = &[
    Sig { needle: "Pcie atomics not enabled, hostcall not supported", name: "clr-hostcall-refused", meaning: Meaning::Confirmed,
          explanation: "CLR refused a kernel that declares hidden_hostcall_buffer because the GPU has no PCIe AtomicOps to the host: this is the bug" },
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
          explanation: "torch/rccl-tests wrapper for any HIP error inside RCCL; look for the HIP text next to it" },
    Sig { needle: "Kernel expects a hostcall buffer, but none found", name: "clr-hostcall-buffer-missing", meaning: Meaning::DifferentCause,
          explanation: "atomics are present but CLR could not create the hostcall buffer: a different cause, not the AtomicOps refusal" },
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
          explanation: "vLLM could not enumerate the GPUs (amdsmi/rocm_smi clash after a library swap, cases C09): not this bug" },
    Sig { needle: "Watchdog caught collective operation timeout", name: "torch-collective-timeout", meaning: Meaning::DifferentCause,
          explanation: "a collective hung until the watchdog fired; the hostcall refusal fails at once, so a hang is a different bug (ROCm/rccl#2124)" },
    Sig { needle: "waitPeer", name: "rccl-waitpeer-hang", meaning: Meaning::DifferentCause,
          explanation: "a hang in RCCL's waitPeer() loop (the NDEBUG hang of ROCm/rccl#2124, cases C07): not the refusal" },
    Sig { needle: "-- Compiling for", name: "rccl-configure-targets", meaning: Meaning::Info,
          explanation: "RCCL's configure step lists the gfx targets it really builds; compare with what was requested (ROCm/rccl#958)" },
];

/// Versions and paths found in banners and environment dumps.
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
    /// gfx names from `rocminfo` (`Name: gfx1100`), in order, deduplicated.
    pub gfx: Vec<String>,
    /// ROCm version from a ROCm container image tag (`rocm/pytorch:rocm7.2_…`).
    pub image_rocm: Option<String>,
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

/// Overall class of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogClass {
    /// The runtime's own refusal line is present.
    ConfirmedRefusal,
    /// Symptoms the refusal produces, without the runtime line (rerun with `AMD_LOG_LEVEL=1`).
    ConsistentWithRefusal,
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
                "confirmed: the runtime refused a kernel that declares hostcall"
            }
            LogClass::ConsistentWithRefusal => {
                "consistent with the hostcall refusal (rerun with AMD_LOG_LEVEL=1 to confirm)"
            }
            LogClass::DifferentProblem => "a different problem (look-alike signatures only)",
            LogClass::NoSignature => "no known signature",
        }
    }
}

/// The triage of one log file.
#[derive(Debug, Clone, Serialize)]
pub struct LogTriage {
    /// The file name as given.
    pub path: String,
    /// Every recognised line (at most 200).
    pub findings: Vec<Finding>,
    /// Versions found.
    pub versions: Versions,
    /// Kernel names from `ShaderName :` lines right before a refusal.
    pub refused_kernels: Vec<String>,
    /// The ROCm release, resolved from the versions.
    pub rocm: Option<RocmRelease>,
    /// The RCCL version that ran (banner) or that the ROCm release ships.
    pub rccl: Option<String>,
    /// What the shipped RCCL of that release is known to do (rccl.md §1).
    pub shipped_declares: Option<&'static str>,
    /// The class.
    pub class: LogClass,
    /// The look-alike problems found, by signature name.
    pub different_causes: Vec<&'static str>,
    /// `enqueue.cc:<line>` locations of RCCL's HIP-failure warnings (2061, 2118, 2119 observed).
    pub rccl_enqueue_lines: Vec<String>,
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
    (v.split('.').count() >= 2 && !v.is_empty()).then(|| v.to_owned())
}

fn first_n_components(v: &str, n: usize) -> String {
    v.split('.').take(n).collect::<Vec<_>>().join(".")
}

/// The RCCL version a ROCm release ships, and whether its shipped library declares hostcall
/// (community measurements, rccl.md §1). `release` is `X.Y.Z` or a family `X.Y`.
pub fn rccl_for_rocm(release: &str) -> Option<(&'static str, &'static str)> {
    let fam = first_n_components(release, 2);
    Some(match (fam.as_str(), release) {
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

/// Triage log text. `path` is only used for display.
pub fn triage(text: &str, path: &str) -> LogTriage {
    let mut findings = vec![];
    let mut v = Versions::default();
    let mut refused = vec![];
    let mut last_shader: Option<String> = None;
    let mut enqueue = vec![];
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.contains("NCCL WARN HIP failure") {
            if let Some((_, r)) = line.split_once("enqueue.cc:") {
                let n: String = r.chars().take_while(char::is_ascii_digit).collect();
                let loc = format!("enqueue.cc:{n}");
                if !n.is_empty() && !enqueue.contains(&loc) {
                    enqueue.push(loc);
                }
            }
        }
        for s in SIGNATURES {
            if line.contains(s.needle) {
                if s.name == "clr-shader-name" {
                    last_shader = value_after(line, "ShaderName :").map(|_| {
                        line.split_once("ShaderName :")
                            .map(|(_, r)| r.trim().to_owned())
                            .unwrap_or_default()
                    });
                }
                if s.name == "clr-hostcall-refused" {
                    if let Some(k) = last_shader.take() {
                        if !refused.contains(&k) {
                            refused.push(k);
                        }
                    }
                }
                if s.name == "rccl-configure-targets" {
                    v.configure_targets = line
                        .split_once("-- Compiling for")
                        .map(|(_, r)| r.trim().to_owned());
                }
                if findings.len() < 200 {
                    findings.push(Finding {
                        line_no: i + 1,
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
        if let Some(t) = value_after(line, "Name:").filter(|t| t.starts_with("gfx") && t.len() <= 8)
        {
            if !v.gfx.iter().any(|g| g == t) {
                v.gfx.push(t.to_owned());
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
    let rocm = resolve_rocm(&v);
    let rccl = v.rccl.clone().or_else(|| {
        rocm.as_ref()
            .and_then(|r| rccl_for_rocm(&r.release))
            .map(|(x, _)| x.to_owned())
    });
    let shipped_declares = rocm
        .as_ref()
        .and_then(|r| rccl_for_rocm(&r.release))
        .map(|(_, d)| d);
    let has = |m: Meaning| findings.iter().any(|f| f.meaning == m);
    let mut different: Vec<&'static str> = findings
        .iter()
        .filter(|f| f.meaning == Meaning::DifferentCause)
        .map(|f| f.signature)
        .collect();
    different.dedup();
    let class = if has(Meaning::Confirmed) {
        LogClass::ConfirmedRefusal
    } else if findings.iter().any(|f| {
        matches!(
            f.signature,
            "hip-illegal-state" | "hip-illegal-state-text" | "clr-aql-dispatch-failed"
        ) || (f.signature == "rccl-enqueue-hip-failure" && f.line.contains("present state"))
    }) && different.is_empty()
    {
        LogClass::ConsistentWithRefusal
    } else if !different.is_empty() {
        LogClass::DifferentProblem
    } else if has(Meaning::Symptom) {
        LogClass::ConsistentWithRefusal
    } else {
        LogClass::NoSignature
    };
    LogTriage {
        path: path.to_owned(),
        findings,
        versions: v,
        refused_kernels: refused,
        rocm,
        rccl,
        shipped_declares,
        class,
        different_causes: different,
        rccl_enqueue_lines: enqueue,
        cut: None,
    }
}

/// Decide the ROCm release: clang's `roc-X.Y.Z` (exact) > the `ROCm version` banner (exact) > the HIP
/// version or `ROCM used to build PyTorch` (family only: `7.2.53211` occurs in several 7.2.x).
pub fn resolve_rocm(v: &Versions) -> Option<RocmRelease> {
    if let Some(r) = &v.clang_roc {
        return Some(RocmRelease {
            release: first_n_components(r, 3),
            source: format!("clang roc-{r}"),
            exact: true,
        });
    }
    if let Some(r) = v.rocm.as_deref().and_then(leading_version) {
        return Some(RocmRelease {
            release: first_n_components(&r, 3),
            source: "ROCm version banner".into(),
            exact: true,
        });
    }
    for (val, src) in [
        (&v.hip, "HIP version"),
        (&v.torch_rocm, "ROCM used to build PyTorch"),
        (&v.image_rocm, "container image tag"),
    ] {
        if let Some(r) = val.as_deref().and_then(leading_version) {
            return Some(RocmRelease {
                release: first_n_components(&r, 2),
                source: src.into(),
                exact: false,
            });
        }
    }
    None
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

/// The rebuild advice for a ROCm release / RCCL version: the recipe to pass to `rcclfix build --tag`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RebuildAdvice {
    /// The `--tag` value (a recipe id).
    pub tag: String,
    /// Whether a recipe with that id is embedded in this rcclfix.
    pub recipe_exists: bool,
    /// Caveats, one sentence each.
    pub notes: Vec<String>,
}

/// Pick the recipe that rebuilds the RCCL of `rocm`/`rccl` (either may be unknown), from
/// [`crate::recipe::embedded`].
///
/// Rule: the recipes for exactly this ROCm release (else for this RCCL version), best status first
/// (`verified`, `expected`, `experimental`; `unfixable-by-rebuild` never). If the best of them is
/// only `experimental` and a proven 2.27.7 recipe exists, that one comes first (the community-verified
/// remedy of cases C01/C02) and the matching experimental recipe is named as the alternative.
pub fn rebuild_advice(rocm: Option<&str>, rccl: Option<&str>) -> RebuildAdvice {
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
    let by_rocm = rocm.and_then(|rel| {
        best(
            all.values()
                .filter(|r| r.rocm_release == rel)
                .filter(usable)
                .collect(),
        )
    });
    let by_rccl = rccl.as_deref().and_then(|v| {
        best(
            all.values()
                .filter(|r| r.rccl_version == v)
                .filter(usable)
                .collect(),
        )
    });
    let matching = by_rocm.or(by_rccl);
    let proven_2277 = best(
        all.values()
            .filter(|r| r.rccl_version == "2.27.7" && r.rocm_release.starts_with("7.2"))
            .filter(|r| matches!(r.status, Status::Verified | Status::Expected))
            .collect(),
    );
    let mut notes = vec![];
    let unfixable: Vec<&str> = all
        .values()
        .filter(|r| {
            rccl.as_deref() == Some(r.rccl_version.as_str())
                && r.status == Status::UnfixableByRebuild
        })
        .map(|r| r.id())
        .collect();
    let chosen = match (matching, proven_2277) {
        (Some(m), Some(p))
            if m.status == Status::Experimental && m.rccl_version != p.rccl_version =>
        {
            notes.push(format!(
                "RCCL {} has no proven recipe: {} (ROCm/ROCm#6520); rebuilding 2.27.7 with NDEBUG is the community-verified remedy",
                m.rccl_version,
                m.status_reason.as_deref().unwrap_or("experimental")
            ));
            notes.push(format!(
                "alternative that keeps RCCL {}: rcclfix build --tag {} --experimental",
                m.rccl_version,
                m.id()
            ));
            notes.push(
                "check that your torch's nccl* imports exist in 2.27.7 before installing it (`rcclfix package` audits this; cases C08)".into(),
            );
            Some(p)
        }
        (Some(m), _) => {
            if m.status == Status::Experimental {
                notes.push(format!(
                    "recipe {} is experimental: {}",
                    m.id(),
                    m.status_reason.as_deref().unwrap_or("not verified")
                ));
            }
            Some(m)
        }
        (None, p) => {
            match (&rccl, rocm) {
                (Some(v), _) => notes.push(format!("no usable recipe for RCCL {v}; the 2.27.7 recipe (community-verified remedy) is the fallback")),
                (None, _) => notes.push(
                    "the ROCm release is unknown: the 2.27.7 recipe (community-verified remedy) is suggested; `rcclfix matrix` lists the recipe per ROCm release".into(),
                ),
            }
            p
        }
    };
    if !unfixable.is_empty() {
        notes.push(format!(
            "not: {} (a rebuild with the device linker keeps the declaration)",
            unfixable.join(", ")
        ));
    }
    if let Some(r) = chosen {
        if rccl.as_deref().is_some_and(|v| v != r.rccl_version) && notes.is_empty() {
            notes.push(format!(
                "this recipe builds RCCL {} (ROCm {})",
                r.rccl_version, r.rocm_release
            ));
        }
        if r.rccl_version.starts_with("2.27.") {
            notes.push(
                "NDEBUG carries the AllReduce hang risk of ROCm/rccl#2124 (ROCm/rccl#2124): `rcclfix verify` checks for it".into(),
            );
        }
        return RebuildAdvice {
            tag: r.id().to_owned(),
            recipe_exists: true,
            notes,
        };
    }
    RebuildAdvice {
        tag: "2.27.7".into(),
        recipe_exists: false,
        notes,
    }
}
