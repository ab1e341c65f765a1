//! What a failed verify run means: runtime and NCCL error codes plus the child's log lines mapped to
//! causes and next steps (CLR `rocclr/device/rocm/rocvirtual.cpp` refuses hostcall kernels without PCIe AtomicOps;
//! linux `drivers/pci/pci.c`, `pci_enable_atomic_ops_to_root`).
//!
//! Pure functions over what the child reported, so the mapping is tested without a GPU.

use super::abi::{runtime_error_name, RuntimeKind, ERROR_ILLEGAL_STATE};

/// Everything known about one failure.
#[derive(Debug, Clone, Default)]
pub struct Failure<'a> {
    /// `ncclResult_t` of the failing call, if an NCCL call failed.
    pub nccl_result: Option<i32>,
    /// `cudaError_t`/`hipError_t`, if known.
    pub runtime_error: Option<i32>,
    /// The child's message.
    pub message: &'a str,
    /// The child's library log lines (NCCL WARN lines, runtime logs).
    pub log: &'a str,
    /// `hostNativeAtomicSupported` per GPU used.
    pub host_atomics: &'a [Option<bool>],
    /// Whether the child died from a signal (crash/abort) rather than reporting.
    pub signal: Option<i32>,
}

const ILLEGAL_STATE_TEXT: &str = "the operation cannot be performed in the present state";

/// Map a failure to `note:`/`help:` lines (empty when nothing specific is known).
///
/// `lib` is the library path as the user gave it (used in the suggested `rcclfix scan` command).
pub fn diagnose(kind: RuntimeKind, f: &Failure<'_>, lib: &str) -> Vec<String> {
    let mut out = Vec::new();
    let text = format!("{}\n{}", f.message, f.log);
    let illegal_state =
        f.runtime_error == Some(ERROR_ILLEGAL_STATE) || text.contains(ILLEGAL_STATE_TEXT);
    let no_atomics = f.host_atomics.contains(&Some(false));
    if illegal_state && kind == RuntimeKind::Hip {
        let which = if no_atomics {
            "this GPU's link has no PCIe AtomicOps (hostNativeAtomicSupported = 0)"
        } else {
            "the GPU runtime refused the dispatch"
        };
        out.push(format!(
            "note: {} at kernel dispatch: {which}, and this library's kernels declare hidden_hostcall_buffer (hostcall), which HIP refuses without PCIe atomics",
            runtime_error_name(kind, ERROR_ILLEGAL_STATE)
        ));
        out.push(format!("help: run `rcclfix scan {lib}` to list the declaring kernels; `rcclfix build` makes a library without them"));
        out.push(
            "help: `rcclfix doctor` says whether a VM setting restores the atomics instead".into(),
        );
    } else if illegal_state {
        out.push(format!(
            "note: {} ({ILLEGAL_STATE_TEXT}) from the runtime",
            runtime_error_name(kind, ERROR_ILLEGAL_STATE)
        ));
    }
    if text.contains("Kernel expects a hostcall buffer, but none found") {
        out.push("note: atomics are present but the runtime could not create the hostcall buffer; a different cause than missing PCIe atomics".into());
    }
    if matches!(f.runtime_error, Some(98) | Some(209))
        || text.contains("invalid device function")
        || text.contains("no kernel image is available")
        || text.contains("no binary for gpu")
    {
        out.push("note: the library has no code object for this GPU's target".into());
        out.push(format!(
            "help: `rcclfix scan {lib}` lists the gfx targets it carries; rebuild for this GPU"
        ));
    }
    if f.nccl_result == Some(super::abi::nccl_result::UNHANDLED_CUDA_ERROR)
        && !illegal_state
        && out.is_empty()
    {
        out.push("note: \"unhandled cuda error\": a runtime call inside the library failed; its NCCL WARN line above names the call".into());
        out.push(
            "help: rerun with NCCL_DEBUG=INFO (and AMD_LOG_LEVEL=1 on HIP) for the failing call"
                .into(),
        );
    }
    if let Some(sig) = f.signal {
        out.push(format!(
            "note: the library process died from signal {sig} ({}); the log lines above come from it",
            signal_name(sig)
        ));
    }
    out
}

/// What a collective that never finished usually means (doctor's triage rules, src/doctor/): a hang is not the
/// hostcall refusal, which is immediate.
pub fn hang_notes() -> Vec<String> {
    vec![
        "note: a hang is not the hostcall refusal (that fails at once); suspects are a rank that never joined, GPU selection (an iGPU in the list), peer-to-peer transport, or an NDEBUG-related device hang (RCCL ≥ 2.27 without assertions)".into(),
        "help: rerun with NCCL_DEBUG=INFO; try NCCL_P2P_DISABLE=1 to tell transport from kernel problems".into(),
    ]
}

/// Name of a Linux signal number.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}
