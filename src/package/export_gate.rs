//! The export/ABI gate that runs before any package is written: the candidate library must carry
//! SONAME `librccl.so.1` and export every `nccl*`/`rccl*` symbol (with its symbol version) that the
//! stock library it replaces exports and that each consumer imports. `DT_NEEDED` differences against
//! the stock library are reported (not failed), with the librocm_smi64 trap called out.
//!
//! Sources: cadamcat/dual-radeon-vllm `build/required-symbols-torch.txt` (the `nccl*` symbols
//! `libtorch_hip.so` of torch 2.11 imports; `ncclCommDump` is C++-mangled there), ROCm/TheRock#4476
//! and pytorch/pytorch#192520 (a `librocm_smi64`/`libamd_smi` dependency of librccl makes torch see
//! no GPU), dlopen(3) (an object is reused when its SONAME matches the requested name).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::elf::{base_name, demangle, ElfInfo};

/// The SONAME every RCCL since ROCm 5 carries (`rocm_set_soversion(rccl "1.0")` in ROCm/rccl
/// `CMakeLists.txt`).
pub const RCCL_SONAME: &str = "librccl.so.1";

/// Built-in consumer symbol sets, for when the consumer library itself is not at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConsumerSymbols {
    /// The `nccl*` symbols `libtorch_hip.so` of torch 2.11 (ROCm 7.14) leaves undefined
    /// (cadamcat/dual-radeon-vllm `build/required-symbols-torch.txt`). `ncclCommDump` is matched by demangled base name, since torch imports it
    /// C++-mangled.
    #[value(name = "torch-2.11")]
    Torch2_11,
}

/// `nm -D --undefined-only libtorch_hip.so` of torch 2.11 / ROCm 7.14, base names
/// (cadamcat/dual-radeon-vllm `build/required-symbols-torch.txt`).
const TORCH_2_11: &[&str] = &[
    "ncclAllGather",
    "ncclAllReduce",
    "ncclAllToAll",
    "ncclAllToAllv",
    "ncclBcast",
    "ncclBroadcast",
    "ncclCommAbort",
    "ncclCommCount",
    "ncclCommDeregister",
    "ncclCommDestroy",
    "ncclCommDump",
    "ncclCommFinalize",
    "ncclCommGetAsyncError",
    "ncclCommInitAll",
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommInitRankScalable",
    "ncclCommRegister",
    "ncclCommShrink",
    "ncclCommSplit",
    "ncclCommUserRank",
    "ncclCommWindowDeregister",
    "ncclCommWindowRegister",
    "ncclGetErrorString",
    "ncclGetLastError",
    "ncclGetUniqueId",
    "ncclGetVersion",
    "ncclGroupEnd",
    "ncclGroupSimulateEnd",
    "ncclGroupStart",
    "ncclMemAlloc",
    "ncclMemFree",
    "ncclRecv",
    "ncclRedOpCreatePreMulSum",
    "ncclRedOpDestroy",
    "ncclReduce",
    "ncclReduceScatter",
    "ncclSend",
];

impl ConsumerSymbols {
    /// The label used in reports, e.g. `torch-2.11`.
    pub fn label(self) -> &'static str {
        match self {
            ConsumerSymbols::Torch2_11 => "torch-2.11",
        }
    }
    /// Base names (C names, or the unqualified name of a C++ function).
    pub fn base_names(self) -> &'static [&'static str] {
        match self {
            ConsumerSymbols::Torch2_11 => TORCH_2_11,
        }
    }
}

/// What to compare the candidate with.
#[derive(Debug, Clone, Default)]
pub struct GateInputs {
    /// The stock library the overlay replaces (its exports must all be present).
    pub stock: Option<PathBuf>,
    /// How reports name the stock library (e.g. `librccl1 7.2.4-1~exp3's
    /// /usr/lib/x86_64-linux-gnu/librccl.so.1.0`); `None`: `stock <path>`.
    pub stock_name: Option<String>,
    /// Consumer libraries or executables (their undefined `nccl*` symbols must be exported).
    pub consumers: Vec<PathBuf>,
    /// Built-in consumer symbol sets.
    pub consumer_symbols: Vec<ConsumerSymbols>,
}

/// A symbol the candidate lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// Raw name (mangled for C++), with `@VERSION` when a version is required.
    pub symbol: String,
    /// Demangled form for C++ names.
    pub demangled: Option<String>,
    /// Who needs it: `stock <path>`, `consumer <path>`, `torch-2.11`.
    pub required_by: String,
    /// Extra fact, e.g. "exported without version" or "exported with another signature: …".
    pub note: Option<String>,
}

/// The gate's findings.
#[derive(Debug, Clone, Default)]
pub struct GateReport {
    /// The candidate's `DT_SONAME`.
    pub soname: Option<String>,
    /// Number of `nccl*`/`rccl*` exports of the candidate.
    pub nccl_exports: usize,
    /// Symbols some reference needs and the candidate lacks.
    pub missing: Vec<Missing>,
    /// `DT_NEEDED` entries the candidate has and the stock library does not.
    pub needed_added: Vec<String>,
    /// `DT_NEEDED` entries the stock library has and the candidate does not.
    pub needed_removed: Vec<String>,
    /// Informational lines (what was compared, NEEDED traps).
    pub notes: Vec<String>,
}

impl GateReport {
    /// The gate passes when the SONAME is right and nothing is missing.
    pub fn passed(&self) -> bool {
        self.soname.as_deref() == Some(RCCL_SONAME) && self.missing.is_empty()
    }

    /// The failure reasons, one line each (empty when [`GateReport::passed`]).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.soname.as_deref() {
            Some(RCCL_SONAME) => {}
            Some(s) => out.push(format!("SONAME is {s}, expected {RCCL_SONAME}")),
            None => out.push(format!("no DT_SONAME, expected {RCCL_SONAME}")),
        }
        for m in &self.missing {
            let mut line = format!("missing export {}", m.symbol);
            if let Some(d) = &m.demangled {
                let _ = write!(line, " ({d})");
            }
            let _ = write!(line, ", needed by {}", m.required_by);
            if let Some(n) = &m.note {
                let _ = write!(line, "; {n}");
            }
            out.push(line);
        }
        out
    }
}

/// The gate failed: the lines name every missing symbol and a wrong SONAME. Callers branch on it
/// to exit with code 1 (check failed) rather than 2.
///
/// It is the context over a [`crate::ui::LinesError`] that holds the lines (see [`GateError::error`]),
/// so `ui::print_error` shows one `error:` line and one escaped line per failure.
#[derive(Debug, thiserror::Error)]
#[error("export gate failed for {library}")]
pub struct GateError {
    /// The candidate library.
    pub library: String,
}

impl GateError {
    /// The error of a failed gate on `library`: this marker as context over one line per failure
    /// (`export gate failed for <library>:` then `  <failure>` each).
    pub fn error(library: String, lines: Vec<String>) -> anyhow::Error {
        anyhow::Error::new(crate::ui::LinesError {
            head: format!("export gate failed for {library}:"),
            lines: lines.into_iter().map(|l| format!("  {l}")).collect(),
            help: None,
        })
        .context(GateError { library })
    }
}

/// Run the gate on `candidate`. Errors only when a file cannot be read; a failing gate is a
/// report with [`GateReport::passed`] false.
pub fn check(candidate: &Path, inputs: &GateInputs) -> anyhow::Result<GateReport> {
    let ours = ElfInfo::read(candidate)?;
    let mut report = GateReport {
        soname: ours.soname.clone(),
        nccl_exports: ours.nccl_exports().count(),
        ..Default::default()
    };
    let ours_base: BTreeSet<String> = ours.nccl_exports().map(base_name).collect();

    if let Some(stock_path) = &inputs.stock {
        // A stock library extracted from the cached package lives in a temporary file: the
        // error names the package, never that file as if it were `--stock`.
        let stock = ElfInfo::read(stock_path).map_err(|e| match &inputs.stock_name {
            Some(n) => anyhow::anyhow!(
                "{}",
                format!("{e:#}").replace(&stock_path.display().to_string(), n)
            ),
            None => anyhow::anyhow!("--stock {e:#}"),
        })?;
        let who = inputs
            .stock_name
            .clone()
            .unwrap_or_else(|| format!("stock {}", stock_path.display()));
        let mut n = 0;
        let mut handles = 0;
        for name in stock.nccl_exports() {
            if is_kernel_handle(name) {
                handles += 1;
                continue;
            }
            n += 1;
            let versions = &stock.exports[name];
            match ours.exports.get(name) {
                None => report.missing.push(missing(name, None, &who, &ours)),
                Some(have) => {
                    for v in versions.iter().flatten() {
                        if !have.iter().any(|h| h.as_deref() == Some(v)) {
                            let mut m = missing(name, Some(v), &who, &ours);
                            m.note = Some("ours exports it without that version".into());
                            report.missing.push(m);
                        }
                    }
                }
            }
        }
        report.notes.push(format!(
            "compared with {who}: {n} nccl/rccl exports ({handles} device kernels' host-side handles not compared)"
        ));
        let ours_needed: BTreeSet<&String> = ours.needed.iter().collect();
        let stock_needed: BTreeSet<&String> = stock.needed.iter().collect();
        report.needed_added = ours_needed
            .difference(&stock_needed)
            .map(|s| s.to_string())
            .collect();
        report.needed_removed = stock_needed
            .difference(&ours_needed)
            .map(|s| s.to_string())
            .collect();
        if stock.soname.as_deref() != Some(RCCL_SONAME) {
            report.notes.push(format!(
                "the stock library's SONAME is {}, not {RCCL_SONAME}: is --stock the right file?",
                stock.soname.as_deref().unwrap_or("(none)")
            ));
        }
    }
    if let Some(smi) = ours
        .needed
        .iter()
        .find(|n| n.starts_with("librocm_smi64.so"))
    {
        let added = report.needed_added.contains(smi);
        report.notes.push(format!(
            "NEEDED {smi}{}: loaded into the global scope it can make amdsmi (and so \
             torch.cuda.device_count()) see 0 GPUs; check device_count() after installing \
             (ROCm/TheRock#4476)",
            if added {
                ", which the stock library does not need"
            } else {
                ""
            }
        ));
    }

    for c in &inputs.consumers {
        let info = ElfInfo::read(c).map_err(|e| anyhow::anyhow!("--consumer {e:#}"))?;
        let who = format!("consumer {}", c.display());
        let mut n = 0;
        for (name, version) in info.nccl_imports() {
            n += 1;
            // Only a version that the consumer requires from librccl itself binds the candidate.
            let file = info.imports[name].1.as_deref();
            let version = version.filter(|_| file.is_none_or(|f| f.starts_with("librccl.so")));
            match ours.exports.get(name) {
                None => report.missing.push(missing(name, version, &who, &ours)),
                Some(have) => {
                    if let Some(v) = version {
                        if !have.iter().any(|h| h.as_deref() == Some(v)) {
                            let mut m = missing(name, Some(v), &who, &ours);
                            m.note = Some("ours exports it without that version".into());
                            report.missing.push(m);
                        }
                    }
                }
            }
        }
        if n == 0 {
            report.notes.push(format!(
                "{who} imports no nccl/rccl symbol: is it the right library?"
            ));
        } else {
            report
                .notes
                .push(format!("compared with {who}: {n} nccl/rccl imports"));
        }
    }

    if inputs.stock.is_none() && inputs.consumers.is_empty() && inputs.consumer_symbols.is_empty() {
        report.notes.push(
            "only the SONAME was checked: pass --stock (the library this one replaces) and \
             --consumer or --consumer-symbols to compare exports"
                .to_owned(),
        );
    }
    for set in &inputs.consumer_symbols {
        for base in set.base_names() {
            if !ours_base.contains(*base) {
                report.missing.push(Missing {
                    symbol: (*base).to_owned(),
                    demangled: None,
                    required_by: set.label().to_owned(),
                    note: None,
                });
            }
        }
        report.notes.push(format!(
            "compared with {}: {} symbols",
            set.label(),
            set.base_names().len()
        ));
    }
    Ok(report)
}

/// Whether `raw` is a device kernel's host-side handle (`ncclKernel_*`, `ncclDevKernel_*` and
/// their Debug/LL128 forms): RCCL launches those itself (ROCm/rccl `src/enqueue.cc`), no consumer
/// imports them, and their names follow the kernel list and signature of each release, so the
/// stock comparison leaves them out.
pub fn is_kernel_handle(raw: &str) -> bool {
    let b = base_name(raw);
    b.starts_with("ncclKernel") || b.starts_with("ncclDevKernel")
}

fn missing(name: &str, version: Option<&str>, who: &str, ours: &ElfInfo) -> Missing {
    let symbol = match version {
        Some(v) => format!("{name}@{v}"),
        None => name.to_owned(),
    };
    let base = base_name(name);
    // Same function name, other signature: say so, since the fix differs (headers vs version).
    let other: Vec<String> = ours
        .nccl_exports()
        .filter(|e| *e != name && base_name(e) == base)
        .map(|e| demangle(e).unwrap_or_else(|| e.to_owned()))
        .collect();
    let note = if other.is_empty() {
        None
    } else {
        Some(format!(
            "ours exports {base} with another signature: {}",
            other.join(", ")
        ))
    };
    Missing {
        symbol,
        demangled: demangle(name),
        required_by: who.to_owned(),
        note,
    }
}
