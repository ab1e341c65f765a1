//! The catalogue of common look-alikes: failures users report next to (or instead of) the hostcall
//! refusal, each with its signature lines, a one-line explanation and the usual next step.
//! [`super::triage`] checks a line against this table before the rules of [`super::rules`]; a
//! match is a [`super::rules::Meaning::DifferentCause`] finding, so a log whose only failure is one
//! of these is "a different problem" (exit 0), and a log with no recognisable failure stays
//! inconclusive.
//!
//! Sources: HIP `hip_runtime_api.h` (error codes), ROCr `amd_gpu_agent.cpp` / CLR (`Memory access
//! fault by GPU node`), glibc `assert.c` (`Assertion … failed`), amdgpu `mxgpu_ai.c` (the VF
//! mailbox), torch `ProcessGroupNCCL.cpp` (watchdog), ROCm/rccl#2124 (waitPeer),
//! pytorch/pytorch#191366 (librocm_smi64), Linux `kernel/hung_task.c`.

use super::api::{self, ApiKind};

/// One look-alike.
pub struct LookAlike {
    /// Short name (`Finding::signature`, `LogTriage::different_causes`).
    pub name: &'static str,
    /// Signature lines: a line matches when it holds every string of one of these sets
    /// (case-sensitive).
    pub any_of: &'static [&'static [&'static str]],
    /// Lines holding any of these never match (a device-side assert is not a host one).
    pub unless: &'static [&'static str],
    /// Where such a line comes from.
    pub source: &'static str,
    /// What it means, one line; it says it is not the hostcall refusal.
    pub explanation: &'static str,
    /// The usual next step, one line.
    pub next_step: &'static str,
}

/// The catalogue, first match wins.
pub const LOOKALIKES: &[LookAlike] = &[
    LookAlike {
        name: "hip-out-of-memory",
        any_of: &[
            &["hipErrorOutOfMemory"],
            &["HIP out of memory"],
            &["CUDA out of memory"],
            &["OutOfMemoryError"],
            &["rror: out of memory"],
        ],
        unless: &[],
        source: "HIP hip_runtime_api.h (hipErrorOutOfMemory), torch OutOfMemoryError",
        explanation: "the GPU ran out of memory: not the hostcall refusal (a refused dispatch returns hipErrorIllegalState, not an allocation failure)",
        next_step: "out of memory: lower the batch size or the memory share (vLLM --gpu-memory-utilization), and check what else holds the GPU's memory (rocm-smi --showmemuse)",
    },
    LookAlike {
        name: "host-assertion",
        any_of: &[&["Assertion", "failed"]],
        unless: &["Device-side", "device-side"],
        source: "glibc assert.c (a host-side assert in ROCr, CLR or the program)",
        explanation: "a host-side assertion aborted the process (in ROCr when the path names ROCR-Runtime or hsa-runtime): not the hostcall refusal, which returns an error and never aborts",
        next_step: "host assertion: the file, line and condition in the assertion name the check that failed; report it with the ROCm release and the command that hit it",
    },
    LookAlike {
        name: "gpu-memory-access-fault",
        any_of: &[&["Memory access fault by GPU"], &["amdgpu", "page fault"]],
        unless: &[],
        source: "ROCr (Memory access fault by GPU node), amdgpu gmc_v*_0.c (page fault)",
        explanation: "a kernel touched an address it may not (a GPU page fault): a kernel, driver or (in a VM) IOMMU problem, not the hostcall refusal — a refused kernel never runs",
        next_step: "GPU page fault: the fault line names the process and address; rerun with AMD_LOG_LEVEL=1, and in a VM or Xen guest check the IOMMU/passthrough mapping",
    },
    LookAlike {
        name: "p2p-unsupported",
        any_of: &[&["hipErrorPeerAccessUnsupported"], &["peer access is not supported"], &["hipErrorPeerAccessNotEnabled"]],
        unless: &[],
        source: "HIP hip_runtime_api.h (hipErrorPeerAccessUnsupported)",
        explanation: "the GPUs cannot reach each other's memory directly (P2P): a topology or IOMMU problem, not the hostcall refusal",
        next_step: "P2P: confirm with NCCL_P2P_DISABLE=1, then check the IOMMU (iommu=pt) and the PCIe topology (rocm-smi --showtopo)",
    },
    LookAlike {
        name: "hip-stream-capture",
        any_of: &[
            &["operation not permitted when stream is capturing"],
            &["hipErrorStreamCaptureUnsupported"],
            &["hipErrorStreamCaptureInvalidated"],
            &["operation would make the legacy stream depend on a capturing blocking stream"],
        ],
        unless: &[],
        source: "HIP hip_runtime_api.h (hipErrorStreamCapture*)",
        explanation: "a call that is not allowed while a stream is being captured into a graph: a capture problem, not the hostcall refusal",
        next_step: "stream capture: run without graph capture (vLLM --enforce-eager, torch without cudagraphs) to see whether the capture is what fails",
    },
    LookAlike {
        name: "host-hung-task",
        any_of: &[&["blocked for more than", "seconds"]],
        unless: &[],
        source: "Linux kernel/hung_task.c",
        explanation: "a process hung in the kernel (a P2P transfer or a driver call that never returned): a hang, and the hostcall refusal fails at once",
        next_step: "host hang: capture the stack (`cat /proc/<pid>/stack`, `echo w > /proc/sysrq-trigger`) and try NCCL_P2P_DISABLE=1 to see whether P2P is what hangs",
    },
    LookAlike {
        name: "torch-collective-timeout",
        any_of: &[&["Watchdog caught collective operation timeout"]],
        unless: &[],
        source: "torch ProcessGroupNCCL.cpp (ROCm/rccl#2124)",
        explanation: "a collective hung until the watchdog fired; the hostcall refusal fails at once, so a hang is a different bug (ROCm/rccl#2124)",
        next_step: "collective hang: rerun with NCCL_DEBUG=INFO and try NCCL_P2P_DISABLE=1; an NDEBUG RCCL 2.27.x can hang in AllReduce (ROCm/rccl#2124): `rcclfix verify` checks for it",
    },
    LookAlike {
        name: "rccl-waitpeer-hang",
        any_of: &[&["waitPeer"]],
        unless: &[],
        source: "ROCm/rccl#2124",
        explanation: "a hang in RCCL's waitPeer() loop (the NDEBUG hang of ROCm/rccl#2124): not the refusal",
        next_step: "waitPeer hang: `rcclfix verify` runs the out-of-place AllReduce that shows it; use a build without the ROCm/rccl#2124 hang",
    },
    LookAlike {
        name: "hip-invalid-device-function",
        any_of: &[&["invalid device function"], &["hipErrorInvalidDeviceFunction"]],
        unless: &[],
        source: "HIP hip_runtime_api.h (hipErrorInvalidDeviceFunction)",
        explanation: "no code for this GPU's gfx target in the library: rebuild for the right target, not this bug",
        next_step: "wrong gfx target: `rocminfo | grep gfx` names the GPU's target; `rcclfix scan` the library to list the targets it has, and build for the missing one",
    },
    LookAlike {
        name: "vf-mailbox",
        any_of: &[&["ACK should not assert"], &["get ack from pf"], &["from pf, error"]],
        unless: &[],
        source: "amdgpu mxgpu_ai.c / mxgpu_nv.c (the virtual function's mailbox)",
        explanation: "the GPU's virtual function gets no answer from the host driver (SR-IOV or a passthrough/Thunderbolt link): the driver never comes up, which is not the hostcall refusal",
        next_step: "VF mailbox: check the host side (its amdgpu/SR-IOV driver, the passthrough or Thunderbolt link), not the guest's libraries",
    },
    LookAlike {
        name: "wheel-missing-rocm-smi",
        any_of: &[&["librocm_smi64", "cannot open shared object file"], &["librocm_smi64", "No such file"]],
        unless: &[],
        source: "pytorch/pytorch#191366",
        explanation: "the torch wheel does not bundle librocm_smi64 (pytorch/pytorch#191366): a packaging problem, not this bug",
        next_step: "missing librocm_smi64: install the ROCm SMI library of the wheel's ROCm release (or put its lib folder on LD_LIBRARY_PATH); `rcclfix package` audits what the wheel needs",
    },
];

/// The look-alike `line` shows, if any.
pub fn matching(line: &str) -> Option<&'static LookAlike> {
    LOOKALIKES.iter().find(|l| {
        !l.unless.iter().any(|u| line.contains(u))
            && l.any_of
                .iter()
                .any(|set| set.iter().all(|n| line.contains(n)))
    })
}

/// `hipErrorIllegalState` from a call that is not a dispatch, as a finding's name, explanation
/// and next step (issue 38: only a dispatch can be the refusal).
pub fn illegal_state_elsewhere(line: &str) -> Option<(&'static str, &'static str, &'static str)> {
    let (_, kind) = api::illegal_state_elsewhere(line)?;
    Some(match kind {
        ApiKind::Capture => (
            "hip-illegal-state-capture",
            "hipErrorIllegalState from stream capture (hipStreamBeginCapture…): a stream in the wrong capture state (capture begun twice, or a forbidden call while capturing), not a refused dispatch",
            "stream capture: run without graph capture (vLLM --enforce-eager, torch without cudagraphs) to see whether the capture is what fails",
        ),
        ApiKind::Graph => (
            "hip-illegal-state-graph",
            "hipErrorIllegalState from a graph call: the graph's state, not a refused dispatch (AMD_LOG_LEVEL=1 prints `Pcie atomics not enabled` if a kernel in it was refused)",
            "graph: run without graphs (vLLM --enforce-eager) and with AMD_LOG_LEVEL=1 to see which call fails",
        ),
        ApiKind::Memory => (
            "hip-illegal-state-memory",
            "hipErrorIllegalState from a memory call (allocation, copy, peer access): not a refused dispatch",
            "memory call: AMD_LOG_LEVEL=3 shows the call and its arguments; check P2P (NCCL_P2P_DISABLE=1) and IPC settings",
        ),
        _ => (
            "hip-illegal-state-event",
            "hipErrorIllegalState from an event call: an event used in the wrong state, not a refused dispatch",
            "event call: AMD_LOG_LEVEL=3 shows which event call fails; check events recorded during capture",
        ),
    })
}

/// The next step for a finding's signature, when it is a look-alike.
pub fn next_step(name: &str) -> Option<&'static str> {
    LOOKALIKES
        .iter()
        .find(|l| l.name == name)
        .map(|l| l.next_step)
}
