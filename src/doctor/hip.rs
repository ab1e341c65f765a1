//! The runtime view: `hipDeviceAttributeHostNativeAtomicSupported` per GPU, read from the HIP runtime
//! (`libamdhip64.so`) loaded at run time — the flag CLR's `checkAtomicSupport()` computes and the
//! hostcall check consults. Optional: without a HIP runtime this is skipped.
//!
//! The probe runs in a child process (`rcclfix doctor --internal-hip-probe`) so that a runtime that
//! crashes or hangs during initialisation cannot take doctor down with it. It calls the runtime
//! through `verify`'s binding ([`crate::verify::abi::Runtime`]): one declaration of the HIP ABI.
//!
//! Source: HIP `hip_runtime_api.h` (`hipDeviceAttribute_t`: `hipDeviceAttributeHostNativeAtomicSupported`
//! = 15 in the HIP 6+ numbering, `hipDeviceGetPCIBusId`, `hipRuntimeGetVersion`); CLR `hip_device.cpp`.

use std::ffi::c_int;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::verify::abi::HIP_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED;
use crate::verify::abi::{LoadError, Runtime, RuntimeKind};
/// The first runtime version (`hipRuntimeGetVersion`) whose enum numbering is trusted here.
pub const MIN_RUNTIME_VERSION: c_int = 60_000_000;
/// Library names tried, in order.
pub const HIP_LIBRARY_NAMES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "/opt/rocm/lib/libamdhip64.so",
];
/// How long the child may take (runtime initialisation enumerates every GPU).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// One GPU as the HIP runtime sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HipDevice {
    /// HIP device ordinal (what `HIP_VISIBLE_DEVICES` counts).
    pub ordinal: i32,
    /// PCI address from `hipDeviceGetPCIBusId`, lowercase.
    pub pci_bus_id: String,
    /// `hostNativeAtomicSupported` (1 = the runtime will run hostcall kernels on it).
    pub host_native_atomic_supported: i32,
}

/// The probe's result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum HipProbe {
    /// Not attempted (reading a snapshot, or `--no-hip`).
    NotRun {
        /// Why.
        reason: String,
    },
    /// No HIP runtime could be loaded, or it is too old.
    Absent {
        /// Why.
        reason: String,
    },
    /// The runtime answered.
    Ran {
        /// The library that was loaded.
        library: String,
        /// `hipRuntimeGetVersion`.
        runtime_version: i32,
        /// Each device.
        devices: Vec<HipDevice>,
    },
    /// The probe failed (crash, timeout, HIP error).
    Failed {
        /// Why.
        reason: String,
    },
}

/// Load the runtime in this process and query every device. Used by the child process only.
pub fn probe_in_process() -> HipProbe {
    let mut why = vec![];
    for name in HIP_LIBRARY_NAMES {
        let rt = match Runtime::load(RuntimeKind::Hip, Path::new(name)) {
            Ok(rt) => rt,
            Err(LoadError::Open { source, .. }) => {
                why.push(format!("{name}: {source}"));
                continue;
            }
            Err(LoadError::MissingSymbol { .. }) => {
                return HipProbe::Failed {
                    reason: format!("{name}: a HIP entry point is missing"),
                };
            }
        };
        return probe_runtime(name, &rt);
    }
    HipProbe::Absent {
        reason: format!("no HIP runtime: {}", why.join("; ")),
    }
}

/// Ask a loaded runtime for its version and each device's PCI address and
/// `hostNativeAtomicSupported`.
fn probe_runtime(name: &str, rt: &Runtime) -> HipProbe {
    let missing = || HipProbe::Failed {
        reason: format!("{name}: a HIP entry point is missing"),
    };
    let v = match rt.runtime_version() {
        None => return missing(),
        // As before the binding was shared: a failing version call reads as version 0.
        Some(r) => r.unwrap_or(0),
    };
    if v < MIN_RUNTIME_VERSION {
        return HipProbe::Absent {
            reason: format!(
                "{name}: HIP runtime {v} is older than 6.0; attribute numbering not checked"
            ),
        };
    }
    let n = match rt.device_count() {
        Ok(n) => n,
        Err(e) => {
            return HipProbe::Failed {
                reason: format!("{name}: hipGetDeviceCount returned error {}", e.code),
            }
        }
    };
    let mut devices = vec![];
    for d in 0..n {
        let val = match rt.device_attribute(HIP_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED, d) {
            Ok(v) => v,
            Err(e) => {
                return HipProbe::Failed {
                    reason: format!(
                        "{name}: hipDeviceGetAttribute(device {d}) returned error {}",
                        e.code
                    ),
                }
            }
        };
        let id = match rt.pci_bus_id(d) {
            None => return missing(),
            // As before: an address the runtime does not give is empty, never a guess.
            Some(r) => r.unwrap_or_default().to_ascii_lowercase(),
        };
        devices.push(HipDevice {
            ordinal: d,
            pci_bus_id: id,
            host_native_atomic_supported: val,
        });
    }
    HipProbe::Ran {
        library: name.to_owned(),
        runtime_version: v,
        devices,
    }
}

/// Run the probe in a child (`<current exe> doctor --internal-hip-probe`), with [`PROBE_TIMEOUT`]
/// as its deadline ([`crate::process::Cmd::read_with_deadline`]: killed past it, output drained
/// while it runs).
pub fn probe() -> HipProbe {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return HipProbe::Failed {
                reason: format!("cannot find the rcclfix executable: {e}"),
            }
        }
    };
    let cmd =
        crate::process::Cmd::new("the HIP probe", exe).args(["doctor", "--internal-hip-probe"]);
    match cmd.read_with_deadline(PROBE_TIMEOUT) {
        Ok(out) => serde_json::from_str(out.trim()).unwrap_or_else(|_| HipProbe::Failed {
            reason: "the probe printed no result (the HIP runtime failed to initialise)".into(),
        }),
        Err(e) if e.downcast_ref::<crate::process::DeadlineError>().is_some() => HipProbe::Failed {
            reason: format!(
                "the HIP runtime did not answer within {}s",
                PROBE_TIMEOUT.as_secs()
            ),
        },
        Err(e) if e.downcast_ref::<crate::process::CommandError>().is_some() => HipProbe::Failed {
            reason: "the probe crashed (the HIP runtime failed to initialise)".into(),
        },
        Err(e) => HipProbe::Failed {
            reason: format!("cannot start the probe: {}", e.root_cause()),
        },
    }
}
