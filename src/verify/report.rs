//! The verify report: per-case results, the nccl-tests-like table, the JSON form and the exit code.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::abi::RuntimeKind;
use super::cases::{self, Case, Collective, DType, Placement, SizeClass};
use super::protocol::RankCheck;

/// How the ranks were driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One process drives every GPU (`ncclCommInitAll` + group calls).
    Single,
    /// One process per rank (`ncclGetUniqueId` + `ncclCommInitRank`), as PyTorch and vLLM do.
    Multi,
}

/// Outcome of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaseStatus {
    /// Every element on every rank bitwise right.
    Ok,
    /// Some element wrong.
    Wrong,
    /// The collective did not finish before the timeout.
    Hung,
    /// A call failed or the library process died.
    Error,
    /// Not run because an earlier case hung or failed.
    NotRun,
}

impl CaseStatus {
    /// Table text.
    pub fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Ok => "ok",
            CaseStatus::Wrong => "WRONG",
            CaseStatus::Hung => "HUNG",
            CaseStatus::Error => "ERROR",
            CaseStatus::NotRun => "not run",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    /// Case id.
    pub id: usize,
    /// Case name (`all_reduce-f32-large-out`).
    pub name: String,
    /// The collective.
    pub coll: Collective,
    /// Element type.
    pub dtype: DType,
    /// Size class.
    pub size: SizeClass,
    /// In/out of place.
    pub placement: Placement,
    /// nccl-tests "size" S in bytes ([`Case::table_bytes`]).
    pub bytes: usize,
    /// nccl-tests "count" (elements of S).
    pub count: usize,
    /// `sum` for all_reduce, none for all_gather.
    pub redop: Option<String>,
    /// Outcome.
    pub status: CaseStatus,
    /// Per-iteration time in µs (max over ranks).
    pub time_us: Option<f64>,
    /// S / time, GB/s.
    pub algbw_gbs: Option<f64>,
    /// algbw × bus factor, GB/s.
    pub busbw_gbs: Option<f64>,
    /// Wrong elements summed over ranks.
    pub wrong: usize,
    /// The ranks whose check failed.
    pub failures: Vec<RankCheck>,
    /// Hang/error text.
    pub message: Option<String>,
}

impl CaseReport {
    /// A row for `case`, not run yet.
    pub fn new(case: &Case, nranks: usize) -> Self {
        CaseReport {
            id: case.id,
            name: case.name(),
            coll: case.coll,
            dtype: case.dtype,
            size: case.size,
            placement: case.placement,
            bytes: case.table_bytes(nranks),
            count: case.table_count(nranks),
            redop: (case.coll == Collective::AllReduce).then(|| "sum".to_owned()),
            status: CaseStatus::NotRun,
            time_us: None,
            algbw_gbs: None,
            busbw_gbs: None,
            wrong: 0,
            failures: vec![],
            message: None,
        }
    }

    /// Record the checks and time of every rank (merged from one or more children).
    pub fn finish(&mut self, nranks: usize, time_us: f64, checks: Vec<RankCheck>) {
        self.time_us = Some(self.time_us.map_or(time_us, |t| t.max(time_us)));
        let t = self.time_us.unwrap_or(time_us);
        self.algbw_gbs = Some(cases::algbw_gbs(self.bytes, t));
        self.busbw_gbs = Some(cases::busbw_gbs(self.coll, nranks, self.bytes, t));
        for c in checks {
            if let Some(m) = &c.mismatch {
                self.wrong += m.wrong;
                self.failures.push(c);
            }
        }
        self.failures.sort_by_key(|c| c.rank);
        self.status = if self.failures.is_empty() {
            CaseStatus::Ok
        } else {
            CaseStatus::Wrong
        };
    }
}

/// Overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every case right.
    Pass,
    /// A case wrong or hung.
    Fail,
    /// The run could not complete (load, init, call error, crash).
    Error,
}

/// The whole verify report (`--json` prints it; `build --verify` records it in `manifest.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The library path as given.
    pub library: String,
    /// The file that actually provided `ncclGetVersion` in the child.
    pub loaded: Option<String>,
    /// `ncclGetVersion`, formatted.
    pub nccl_version: Option<String>,
    /// Runtime flavour.
    pub runtime: RuntimeKind,
    /// The runtime file actually loaded.
    pub runtime_path: Option<String>,
    /// NCCL/RCCL/runtime files mapped in the child.
    pub mapped: Vec<String>,
    /// How the ranks were driven.
    pub mode: Mode,
    /// Device indices, one per rank.
    pub gpus: Vec<i32>,
    /// Number of ranks.
    pub nranks: usize,
    /// `hostNativeAtomicSupported` per rank.
    pub host_atomics: Vec<Option<bool>>,
    /// Communicator set-up time in ms (max over ranks).
    pub init_ms: Option<f64>,
    /// Wall time of the whole run, children's start to exit, in seconds.
    pub total_s: f64,
    /// The cases.
    pub cases: Vec<CaseReport>,
    /// Errors outside a case's check (load, init, crash).
    pub errors: Vec<String>,
    /// `note:`/`help:` lines explaining a failure.
    pub diagnosis: Vec<String>,
    /// Overall verdict.
    pub verdict: Verdict,
}

impl Report {
    /// Compute [`Report::verdict`] from the cases and errors: fail when a case is wrong or hung,
    /// else error when anything errored or did not run, else pass.
    pub fn settle(&mut self) {
        let bad = self
            .cases
            .iter()
            .any(|c| matches!(c.status, CaseStatus::Wrong | CaseStatus::Hung));
        let err = !self.errors.is_empty()
            || self
                .cases
                .iter()
                .any(|c| matches!(c.status, CaseStatus::Error | CaseStatus::NotRun));
        self.verdict = if bad {
            Verdict::Fail
        } else if err || self.cases.is_empty() {
            Verdict::Error
        } else {
            Verdict::Pass
        };
    }

    /// Exit code: 0 pass, 1 a case wrong or hung, 2 error.
    pub fn exit_code(&self) -> u8 {
        match self.verdict {
            Verdict::Pass => crate::EXIT_OK,
            Verdict::Fail => crate::EXIT_CHECK_FAILED,
            Verdict::Error => crate::EXIT_ERROR,
        }
    }

    /// The nccl-tests-like table, header lines starting with `#`, then failures and the summary.
    /// [`Report::errors`] and [`Report::diagnosis`] are not in it: `verify` prints them on stderr.
    pub fn render(&self) -> String {
        let mut s = String::new();
        use crate::ui::escape as e;
        let _ = writeln!(s, "# library: {}", e(&self.library));
        if let Some(l) = &self.loaded {
            let _ = writeln!(
                s,
                "# loaded:  {} (NCCL API {})",
                e(l),
                e(self.nccl_version.as_deref().unwrap_or("?"))
            );
        }
        if let Some(r) = &self.runtime_path {
            let _ = writeln!(s, "# runtime: {} ({})", e(r), self.runtime.as_str());
        }
        let others: Vec<&String> = self
            .mapped
            .iter()
            .filter(|m| Some(*m) != self.loaded.as_ref() && Some(*m) != self.runtime_path.as_ref())
            .collect();
        if !others.is_empty() {
            let _ = writeln!(
                s,
                "# also mapped: {}",
                e(&others
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
            );
        }
        let atomics: Vec<String> = self
            .host_atomics
            .iter()
            .map(|a| match a {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "?".into(),
            })
            .collect();
        let _ = writeln!(
            s,
            "# mode: {} ({}), {} ranks on GPUs {}, host native atomics: {}",
            match self.mode {
                Mode::Single => "single",
                Mode::Multi => "multi",
            },
            match self.mode {
                Mode::Single => "one process, ncclCommInitAll",
                Mode::Multi => "one process per rank, ncclCommInitRank",
            },
            self.nranks,
            self.gpus
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(","),
            if atomics.is_empty() {
                "?".into()
            } else {
                atomics.join(",")
            }
        );
        if self.loaded.is_some() {
            let _ = writeln!(s, "#");
            let _ = writeln!(
                s,
                "# {:<10} {:>12} {:>11} {:>9} {:>5} {:>7} {:>10} {:>8} {:>8} {:>7}  result",
                "collective",
                "size",
                "count",
                "type",
                "redop",
                "place",
                "time",
                "algbw",
                "busbw",
                "#wrong",
            );
            let _ = writeln!(
                s,
                "# {:<10} {:>12} {:>11} {:>9} {:>5} {:>7} {:>10} {:>8} {:>8} {:>7}",
                "", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""
            );
            for c in &self.cases {
                let f = |v: Option<f64>, p: usize| v.map_or("-".to_owned(), |x| format!("{x:.p$}"));
                let _ = writeln!(
                    s,
                    "  {:<10} {:>12} {:>11} {:>9} {:>5} {:>7} {:>10} {:>8} {:>8} {:>7}  {}",
                    c.coll.name(),
                    c.bytes,
                    c.count,
                    c.dtype.table_name(),
                    c.redop.as_deref().unwrap_or("none"),
                    match c.placement {
                        Placement::OutOfPlace => "out",
                        Placement::InPlace => "in",
                    },
                    f(c.time_us, 2),
                    f(c.algbw_gbs, 2),
                    f(c.busbw_gbs, 2),
                    if matches!(c.status, CaseStatus::Ok | CaseStatus::Wrong) {
                        c.wrong.to_string()
                    } else {
                        "-".into()
                    },
                    c.status.as_str()
                );
            }
        }
        for c in &self.cases {
            for rc in &c.failures {
                if let Some(m) = &rc.mismatch {
                    let slot = m.slot.map(|s| format!(" (slot {s})")).unwrap_or_default();
                    let _ = writeln!(
                        s,
                        "# WRONG {} (case {}): rank {}, first wrong index {}{slot} of {}: expected {}, got {}; {} wrong{}",
                        c.name,
                        c.id,
                        rc.rank,
                        m.index,
                        m.count,
                        m.expected.display(c.dtype),
                        m.got.display(c.dtype),
                        m.wrong,
                        m.note.as_deref().map(|n| format!("; {n}")).unwrap_or_default()
                    );
                }
            }
            if let (Some(msg), CaseStatus::Hung | CaseStatus::Error) = (&c.message, c.status) {
                let _ = writeln!(
                    s,
                    "# {} {} (case {}): {}",
                    c.status.as_str(),
                    c.name,
                    c.id,
                    e(msg)
                );
            }
        }
        // `errors` and `diagnosis` are printed on stderr by `verify` (and are in the JSON).
        let count = |st: CaseStatus| self.cases.iter().filter(|c| c.status == st).count();
        let _ = writeln!(
            s,
            "# {} cases: {} ok, {} wrong, {} hung, {} error, {} not run; init {}; total {:.2} s; verdict: {}",
            self.cases.len(),
            count(CaseStatus::Ok),
            count(CaseStatus::Wrong),
            count(CaseStatus::Hung),
            count(CaseStatus::Error),
            count(CaseStatus::NotRun),
            self.init_ms.map_or("-".into(), |m| format!("{m:.0} ms")),
            self.total_s,
            match self.verdict {
                Verdict::Pass => "pass",
                Verdict::Fail => "FAIL",
                Verdict::Error => "ERROR",
            }
        );
        s
    }
}
