//! The values of the C ABI `verify` calls: `ncclResult_t` and `cudaError_t`/`hipError_t` codes
//! with their names, the enum constants passed to the calls, the runtime flavour, and the leaf
//! errors a failed call becomes. Nothing here calls a library ([`super::abi`] does).
//!
//! Sources: NCCL's `nccl.h` (`ncclResult_t`, `ncclRedOp_t`), the CUDA Runtime API and HIP Runtime
//! API references (`cudaError_t`/`hipError_t`, `cudaMemcpyKind`, device attributes).

use std::ffi::c_int;

/// `ncclResult_t` values (nccl.h enum).
pub mod nccl_result {
    /// `ncclSuccess`.
    pub const SUCCESS: i32 = 0;
    /// `ncclUnhandledCudaError`: a CUDA/HIP call inside the library failed.
    pub const UNHANDLED_CUDA_ERROR: i32 = 1;
    /// `ncclInProgress` (non-blocking communicators only).
    pub const IN_PROGRESS: i32 = 7;
}

/// Name of an `ncclResult_t` value.
pub fn nccl_result_name(r: i32) -> &'static str {
    match r {
        0 => "ncclSuccess",
        1 => "ncclUnhandledCudaError",
        2 => "ncclSystemError",
        3 => "ncclInternalError",
        4 => "ncclInvalidArgument",
        5 => "ncclInvalidUsage",
        6 => "ncclRemoteError",
        7 => "ncclInProgress",
        _ => "ncclResult?",
    }
}

/// `ncclRedOp_t` `ncclSum`.
pub const NCCL_SUM: c_int = 0;

/// `cudaMemcpyKind`/`hipMemcpyKind` host → device.
pub const MEMCPY_HOST_TO_DEVICE: c_int = 1;
/// `cudaMemcpyKind`/`hipMemcpyKind` device → host.
pub const MEMCPY_DEVICE_TO_HOST: c_int = 2;

/// `cudaErrorNotReady` / `hipErrorNotReady`: `StreamQuery` on a stream with work pending.
pub const ERROR_NOT_READY: c_int = 600;
/// `cudaErrorIllegalState` / `hipErrorIllegalState`: "the operation cannot be performed in the
/// present state"; on HIP at dispatch, a kernel declaring `hidden_hostcall_buffer` on a GPU whose
/// link lacks PCIe AtomicOps.
pub const ERROR_ILLEGAL_STATE: c_int = 401;
/// `hipDeviceAttributeHostNativeAtomicSupported` in the HIP ≥ 6.0 enum (hip_runtime_api.h, 15th
/// entry after `hipDeviceAttributeEccEnabled` = 0): the flag CLR's `checkAtomicSupport()` computes
/// and its hostcall check consults.
pub const HIP_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED: c_int = 15;
/// `cudaDevAttrHostNativeAtomicSupported`.
pub const CUDA_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED: c_int = 86;

/// The GPU runtime flavour.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// AMD HIP (`libamdhip64.so`), for RCCL.
    Hip,
    /// NVIDIA CUDA runtime (`libcudart.so`), for NCCL.
    Cuda,
}

impl RuntimeKind {
    /// Symbol prefix: `hip` / `cuda`.
    pub fn prefix(self) -> &'static str {
        match self {
            RuntimeKind::Hip => "hip",
            RuntimeKind::Cuda => "cuda",
        }
    }
    /// `hip` / `cuda`.
    pub fn as_str(self) -> &'static str {
        self.prefix()
    }
}

/// Name of a `cudaError_t`/`hipError_t` value, for the codes `verify` explains.
pub fn runtime_error_name(kind: RuntimeKind, code: i32) -> String {
    let p = kind.prefix();
    let s = match (kind, code) {
        (_, 0) => "Success",
        (_, 1) => "ErrorInvalidValue",
        (_, 2) => "ErrorMemoryAllocation",
        (_, 98) => "ErrorInvalidDeviceFunction",
        (_, 100) => "ErrorNoDevice",
        (_, 101) => "ErrorInvalidDevice",
        (_, 209) => "ErrorNoBinaryForGpu",
        (RuntimeKind::Hip, 303) => "ErrorSharedObjectInitFailed",
        (_, 401) => "ErrorIllegalState",
        (_, 600) => "ErrorNotReady",
        (_, 700) => "ErrorIllegalAddress",
        (_, 719) => "ErrorLaunchFailure",
        (RuntimeKind::Cuda, 35) => "ErrorInsufficientDriver",
        (_, 999) => "ErrorUnknown",
        _ => return format!("{p}Error({code})"),
    };
    format!("{p}{s}")
}

/// A failed runtime call (leaf error; the diagnosis branches on `code`).
#[derive(Debug, thiserror::Error)]
#[error("{call}: {name} ({code}) '{text}'")]
pub struct RuntimeError {
    /// The call, e.g. `cudaMalloc`, or `the runtime's last error`.
    pub call: String,
    /// `cudaError_t`/`hipError_t` value.
    pub code: i32,
    /// Its name, e.g. `hipErrorIllegalState`.
    pub name: String,
    /// `GetErrorString` text.
    pub text: String,
}

/// A failed NCCL call (leaf error; the diagnosis branches on `result`).
#[derive(Debug, thiserror::Error)]
#[error("{call} failed: {name} ({result}) '{text}'{}", last.as_deref().map(|l| format!("; last error: {l}")).unwrap_or_default())]
pub struct NcclError {
    /// The call, e.g. `ncclAllReduce`.
    pub call: String,
    /// `ncclResult_t` value.
    pub result: i32,
    /// Its name.
    pub name: String,
    /// `ncclGetErrorString` text.
    pub text: String,
    /// `ncclGetLastError` text, when non-empty.
    pub last: Option<String>,
}
