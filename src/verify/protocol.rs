//! The line protocol between `rcclfix verify` and its `verify-child` processes.
//!
//! A child writes one JSON object per line to stdout, each prefixed with [`MARKER`]; NCCL and the
//! GPU runtimes also print to stdout (`NCCL_DEBUG` goes there by default), so unmarked lines are
//! library log lines, not protocol. The parent never writes to a child; it only reads and kills.

use serde::{Deserialize, Serialize};

use super::cases::Mismatch;

/// Prefix of every protocol line.
pub const MARKER: &str = "@rcclfix-verify@ ";

/// One rank's check of one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankCheck {
    /// The rank.
    pub rank: usize,
    /// `None` when every element was bitwise right.
    pub mismatch: Option<Mismatch>,
}

/// What a child reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Libraries loaded; what was actually mapped.
    Loaded {
        /// The NCCL-API file that provides `ncclGetVersion` (from `/proc/self/maps`).
        nccl_path: String,
        /// `ncclGetVersion` code.
        nccl_version: i32,
        /// The runtime file that provides its functions.
        runtime_path: String,
        /// Devices the runtime sees.
        device_count: i32,
        /// `hostNativeAtomicSupported` per device used (`None`: unknown).
        host_atomics: Vec<Option<bool>>,
        /// Every NCCL/RCCL/runtime library mapped in the child.
        mapped: Vec<String>,
    },
    /// Rank 0 of a one-process-per-rank run created the unique id (hex of the 128 bytes).
    UniqueId {
        /// Hex of `ncclUniqueId.internal`.
        hex: String,
    },
    /// The communicator(s) are ready.
    InitDone {
        /// Milliseconds spent in `ncclCommInitAll`/`ncclCommInitRank` (and setup before it).
        ms: f64,
    },
    /// A case begins (the parent's watchdog starts).
    CaseStart {
        /// Case id.
        case: usize,
    },
    /// A case finished on the ranks this child drives.
    CaseDone {
        /// Case id.
        case: usize,
        /// Per-iteration time in µs (max over this child's ranks), from runtime events.
        time_us: f64,
        /// One check per rank driven.
        checks: Vec<RankCheck>,
    },
    /// The case's collective did not complete before the deadline.
    Hang {
        /// Case id.
        case: usize,
        /// Seconds waited.
        waited_s: f64,
        /// Ranks whose collective never finished.
        pending: Vec<usize>,
    },
    /// A call failed.
    Error {
        /// Case id, when in a case.
        case: Option<usize>,
        /// The message.
        message: String,
        /// `ncclResult_t`, when an NCCL call failed.
        nccl_result: Option<i32>,
        /// `cudaError_t`/`hipError_t`, from the failing call or `GetLastError`.
        runtime_error: Option<i32>,
    },
    /// Every case ran and the communicators were destroyed.
    Done,
}

/// Format one protocol line (with [`MARKER`], without the newline).
pub fn encode(ev: &Event) -> String {
    format!(
        "{MARKER}{}",
        serde_json::to_string(ev).expect("events serialise")
    )
}

/// Parse a child's stdout line: `Some(event)` for a protocol line, `None` for a library log line.
///
/// Errors: a marked line that is not a valid event (a broken child).
pub fn decode(line: &str) -> anyhow::Result<Option<Event>> {
    let Some(json) = line.strip_prefix(MARKER) else {
        return Ok(None);
    };
    let ev = serde_json::from_str(json)
        .map_err(|e| anyhow::anyhow!("bad protocol line from verify-child: {e}: {json}"))?;
    Ok(Some(ev))
}
