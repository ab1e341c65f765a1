//! The log rules `triage` walks: one row per signature, with what a matching line proves and
//! where the line comes from ([`SIGNATURES`]). The first row a line matches decides its
//! [`Finding`]; the refusal bookkeeping (which kernel, whose) lives in `triage`.

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
    /// Where that line comes from (the rule's `source`).
    pub source: &'static str,
    /// How it weighs.
    pub meaning: Meaning,
    /// What it means, one sentence.
    pub explanation: &'static str,
    /// The usual next step, for a look-alike ([`super::lookalike`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<&'static str>,
}

/// One row of the rules table.
pub struct Sig {
    /// The text a line must contain (case-sensitive).
    pub needle: &'static str,
    /// Short name of the signature (`Finding::signature`).
    pub name: &'static str,
    /// Where the line comes from: the upstream source file that prints it, or the public report
    /// that shows it.
    pub source: &'static str,
    /// What a matching line proves.
    pub meaning: Meaning,
    /// What it means, one sentence.
    pub explanation: &'static str,
}

/// The runtime's refusal line (CLR `rocvirtual.cpp`, level 1).
pub const REFUSAL_LINE: &str = "Pcie atomics not enabled, hostcall not supported";

/// The rules, first match wins per line (after the look-alikes of [`super::lookalike`]).
pub const SIGNATURES: &[Sig] = &[
    Sig { needle: REFUSAL_LINE, name: "clr-hostcall-refused", source: "CLR rocvirtual.cpp", meaning: Meaning::Confirmed,
          explanation: "CLR refused a kernel that declares hidden_hostcall_buffer because the GPU has no PCIe AtomicOps to the host" },
    Sig { needle: "AQL dispatch failed!", name: "clr-aql-dispatch-failed", source: "CLR rocvirtual.cpp", meaning: Meaning::Symptom,
          explanation: "the dispatch was not submitted; right after the hostcall line it is the refusal itself" },
    Sig { needle: "ShaderName :", name: "clr-shader-name", source: "CLR rocvirtual.cpp", meaning: Meaning::Info,
          explanation: "AMD_LOG_LEVEL>=3 names the kernel being launched" },
    Sig { needle: "hipErrorIllegalState", name: "hip-illegal-state", source: "HIP hip_runtime_api.h (hipErrorIllegalState = 401)", meaning: Meaning::Symptom,
          explanation: "HIP error 401, what a refused hostcall dispatch returns" },
    Sig { needle: "NCCL WARN HIP failure", name: "rccl-enqueue-hip-failure", source: "RCCL enqueue.cc (ROCm/ROCm#6074)", meaning: Meaning::Symptom,
          explanation: "RCCL's collective kernel launch (enqueue.cc) returned a HIP error; with 'the operation cannot be performed in the present state' it is hipErrorIllegalState, what a refused hostcall dispatch returns" },
    Sig { needle: "the operation cannot be performed in the present state", name: "hip-illegal-state-text", source: "HIP hip_error.cpp (hipGetErrorString)", meaning: Meaning::Symptom,
          explanation: "the text of hipErrorIllegalState (401), what a refused hostcall dispatch returns" },
    Sig { needle: "unhandled cuda error", name: "torch-unhandled-cuda-error", source: "RCCL nccl.h (ncclUnhandledCudaError), torch ProcessGroupNCCL", meaning: Meaning::Symptom,
          explanation: "RCCL's return code for any HIP error inside it (ncclUnhandledCudaError): alone it says nothing about the cause; the HIP text or the refusal line next to it does" },
    Sig { needle: "Kernel expects a hostcall buffer, but none found", name: "clr-hostcall-buffer-missing", source: "CLR rocvirtual.cpp", meaning: Meaning::DifferentCause,
          explanation: "atomics are present but CLR could not create the hostcall buffer: a different cause, not the AtomicOps refusal" },
    Sig { needle: "Hostcall: invalid service request", name: "clr-hostcall-invalid-request", source: "CLR devhostcall.cpp (the hostcall listener)", meaning: Meaning::DifferentCause,
          explanation: "the runtime's hostcall listener (CLR devhostcall.cpp) received a request it does not know: the hostcall buffer existed and a kernel reached the host through it, so this GPU's AtomicOps path worked; evidence against the AtomicOps refusal (a malformed hostcall packet is a different bug)" },
    Sig { needle: "PCI rejects atomics", name: "kfd-rejects-atomics", source: "amdkfd kfd_device.c (ROCm/legacy-rocm-build#1214)", meaning: Meaning::DifferentCause,
          explanation: "KFD refused the whole GPU (an older chip or firmware that needs atomics for compute): a hardware/firmware requirement, not this bug" },
    Sig { needle: "PCIE atomic ops is not supported", name: "amdgpu-no-atomics", source: "amdgpu amdgpu_device.c", meaning: Meaning::Platform,
          explanation: "amdgpu found no AtomicOp path to this GPU's root port; hostcall kernels will be refused on it" },
    Sig { needle: "PCIe atomic ops are not supported", name: "amdgpu-no-atomics", source: "amdgpu amdgpu_device.c", meaning: Meaning::Platform,
          explanation: "amdgpu found no AtomicOp path to this GPU's root port; hostcall kernels will be refused on it" },
    Sig { needle: "cuMem support requires VMM RDMA support", name: "rccl-cumem-warning", source: "RCCL init.cc", meaning: Meaning::Noise,
          explanation: "unrelated RCCL init warning" },
    Sig { needle: "undefined symbol: nccl", name: "abi-undefined-nccl-symbol", source: "kyuz0/amd-strix-halo-vllm-toolboxes#60", meaning: Meaning::DifferentCause,
          explanation: "the loaded RCCL is older than the API torch was built against (kyuz0/amd-strix-halo-vllm-toolboxes#60): an ABI mismatch, not this bug; audit with `rcclfix package`" },
    Sig { needle: "hipErrorNoBinaryForGpu", name: "hip-no-binary-for-gpu", source: "HIP hip_runtime_api.h (hipErrorNoBinaryForGpu)", meaning: Meaning::DifferentCause,
          explanation: "no code for this GPU's gfx target in the library: rebuild for the right target, not this bug" },
    Sig { needle: "hipErrorInvalidKernelFile", name: "hip-invalid-kernel-file", source: "HIP hip_runtime_api.h (hipErrorInvalidKernelFile)", meaning: Meaning::DifferentCause,
          explanation: "the device code could not be loaded for this GPU: a target/packaging problem, not this bug" },
    Sig { needle: "Failed to infer device type", name: "vllm-device-type", source: "pytorch/pytorch#191366", meaning: Meaning::DifferentCause,
          explanation: "vLLM could not enumerate the GPUs (amdsmi/rocm_smi clash after a library swap, pytorch/pytorch#191366): not this bug" },
    Sig { needle: "Test NCCL failure", name: "rccl-tests-failure", source: "rccl-tests common.h", meaning: Meaning::Symptom,
          explanation: "rccl-tests stopped on an RCCL error; the quoted error string says which" },
    Sig { needle: "-- Compiling for", name: "rccl-configure-targets", source: "ROCm/rccl#958", meaning: Meaning::Info,
          explanation: "RCCL's configure step lists the gfx targets it really builds; compare with what was requested (ROCm/rccl#958)" },
];
