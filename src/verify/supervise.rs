//! The parent side of a verify run: start the `verify-child` processes, read their protocol lines,
//! keep the watchdog, kill the children after a hang, error or crash, and fill in the [`Report`].
//!
//! One [`Supervisor`] per run. Messages from every child (protocol events, log lines, end of
//! output) arrive on one channel, read by two threads per child; the supervisor itself is a single
//! loop over that channel with one deadline at a time (`Watch`).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::abi::{self, RuntimeKind};
use super::diagnose;
use super::protocol::{self, Event};
use super::report::{CaseStatus, Mode, Report};
use super::Options;

/// Extra seconds the parent's watchdog allows beyond the child's own per-case deadline (host-side
/// data preparation and checking of the large cases).
pub const WATCHDOG_GRACE_S: f64 = 10.0;
/// Seconds the children get to destroy their communicators and exit after the last case.
pub const FINISH_TIMEOUT_S: f64 = 30.0;
/// Library log lines kept for the diagnosis.
const LOG_KEEP: usize = 400;

enum Msg {
    Event(usize, Event),
    Log(usize, String),
    Eof(usize),
}

struct Proc {
    label: String,
    child: std::process::Child,
    done: bool,
    exited: bool,
}

/// Start `exe verify-child ARGS` with piped output; two threads turn its stdout and stderr into
/// [`Msg`]s tagged with `idx`.
fn spawn(
    exe: &Path,
    args: &[OsString],
    idx: usize,
    label: String,
    tx: &mpsc::Sender<Msg>,
) -> anyhow::Result<Proc> {
    tracing::debug!(
        "+ {} verify-child {}",
        exe.display(),
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut child = Command::new(exe)
        .arg("verify-child")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {} verify-child", exe.display()))?;
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    let t = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_owned();
            let msg = match protocol::decode(&line) {
                Ok(Some(ev)) => Msg::Event(idx, ev),
                Ok(None) => Msg::Log(idx, line),
                Err(e) => Msg::Log(idx, format!("{e:#}")),
            };
            if t.send(msg).is_err() {
                return;
            }
        }
        let _ = t.send(Msg::Eof(idx));
    });
    let t = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(err).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_owned();
            if t.send(Msg::Log(idx, line)).is_err() {
                return;
            }
        }
    });
    Ok(Proc {
        label,
        child,
        done: false,
        exited: false,
    })
}

/// What the watchdog is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// Loading and communicator set-up (`--init-timeout`).
    Init,
    /// A case's collectives (`--timeout` + [`WATCHDOG_GRACE_S`]).
    Case(usize),
    /// The next case to start.
    Between,
    /// Communicator destruction and exit ([`FINISH_TIMEOUT_S`]).
    Finish,
}

/// Whether the loop goes on.
enum Flow {
    Go,
    Stop,
}

/// Details of the first failure, for [`diagnose::diagnose`].
#[derive(Default)]
struct FailInfo {
    nccl_result: Option<i32>,
    runtime_error: Option<i32>,
    message: String,
    signal: Option<i32>,
}

/// One verify run in progress.
pub struct Supervisor<'a> {
    exe: &'a Path,
    args: &'a Options,
    kind: RuntimeKind,
    base: Vec<OsString>,
    nchildren: usize,
    report: Report,
    procs: Vec<Option<Proc>>,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    log: VecDeque<String>,
    init_done: usize,
    cases_done: Vec<usize>,
    done: usize,
    watch: Watch,
    deadline: Instant,
    current: Option<usize>,
    fail: FailInfo,
    hung: bool,
    t0: Instant,
}

impl<'a> Supervisor<'a> {
    /// A run of `exe verify-child BASE…` for `args`, filling `report` (whose cases are all not run).
    pub fn new(
        exe: &'a Path,
        args: &'a Options,
        kind: RuntimeKind,
        base: Vec<OsString>,
        report: Report,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        let nchildren = match args.mode {
            Mode::Single => 1,
            Mode::Multi => args.gpus.len(),
        };
        let ncases = report.cases.len();
        let t0 = Instant::now();
        Supervisor {
            exe,
            args,
            kind,
            base,
            nchildren,
            report,
            procs: (0..nchildren).map(|_| None).collect(),
            tx,
            rx,
            log: VecDeque::new(),
            init_done: 0,
            cases_done: vec![0; ncases],
            done: 0,
            watch: Watch::Init,
            deadline: t0 + Duration::from_secs_f64(args.init_timeout),
            current: None,
            fail: FailInfo::default(),
            hung: false,
            t0,
        }
    }

    /// Run to the end (every case, or the first hang, error or crash) and return the report.
    ///
    /// Errors: the first child process cannot be started.
    pub fn run(mut self) -> anyhow::Result<Report> {
        let (first, label) = match self.args.mode {
            Mode::Single => (self.base.clone(), "child".to_owned()),
            Mode::Multi => (
                [self.base.clone(), vec!["--rank".into(), "0".into()]].concat(),
                "rank 0".to_owned(),
            ),
        };
        self.procs[0] = Some(spawn(self.exe, &first, 0, label, &self.tx)?);
        loop {
            let wait = self.deadline.saturating_duration_since(Instant::now());
            let flow = match self.rx.recv_timeout(wait) {
                Ok(Msg::Log(i, line)) => self.on_log(i, line),
                Ok(Msg::Event(i, ev)) => self.on_event(i, ev),
                Ok(Msg::Eof(i)) => self.on_eof(i),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.on_timeout();
                    Flow::Stop
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => Flow::Stop,
            };
            if let Flow::Stop = flow {
                break;
            }
        }
        self.stop_children();
        Ok(self.finish())
    }

    fn arm(&mut self, watch: Watch) {
        let secs = match watch {
            Watch::Init => self.args.init_timeout,
            Watch::Case(_) | Watch::Between => self.args.timeout + WATCHDOG_GRACE_S,
            Watch::Finish => FINISH_TIMEOUT_S,
        };
        self.watch = watch;
        self.deadline = Instant::now() + Duration::from_secs_f64(secs);
    }

    fn label(&self, i: usize) -> &str {
        self.procs[i].as_ref().map_or("?", |p| p.label.as_str())
    }

    fn on_log(&mut self, i: usize, line: String) -> Flow {
        // The library's own log lines: escaped, and kept (for the diagnosis) even with -q.
        crate::ui::child_line(self.label(i), &line);
        if self.log.len() == LOG_KEEP {
            self.log.pop_front();
        }
        self.log.push_back(line);
        Flow::Go
    }

    fn on_timeout(&mut self) {
        let args = self.args;
        match self.watch {
            Watch::Init => {
                self.report.errors.push(format!(
                    "loading and communicator set-up did not finish within {} s (a rank that never joins hangs ncclCommInitRank)",
                    args.init_timeout
                ));
                self.hung = true;
            }
            Watch::Case(c) => {
                let row = &mut self.report.cases[c];
                row.status = CaseStatus::Hung;
                row.message = Some(format!(
                    "did not finish within {} s; the library process was killed (watchdog)",
                    args.timeout + WATCHDOG_GRACE_S
                ));
                self.hung = true;
            }
            Watch::Between => {
                let next = self.current.map_or(0, |c| c + 1);
                match self.report.cases.get_mut(next) {
                    Some(row) => {
                        row.status = CaseStatus::Hung;
                        row.message = Some("the library process stopped responding before this case started".into());
                    }
                    None => self.report.errors.push("the library process stopped responding".into()),
                }
                self.hung = true;
            }
            Watch::Finish => crate::ui::warn(format!(
                "the library process did not exit within {FINISH_TIMEOUT_S} s after the last case (ncclCommDestroy); killed it"
            )),
        }
    }

    fn on_event(&mut self, i: usize, ev: Event) -> Flow {
        let nranks = self.args.gpus.len();
        match ev {
            Event::Loaded {
                nccl_path,
                nccl_version,
                runtime_path,
                host_atomics,
                mapped,
                ..
            } => {
                let r = &mut self.report;
                if i == 0 {
                    r.loaded = Some(nccl_path);
                    r.nccl_version = Some(abi::format_nccl_version(nccl_version));
                    r.runtime_path = Some(runtime_path);
                }
                for m in mapped {
                    if !r.mapped.contains(&m) {
                        r.mapped.push(m);
                    }
                }
                match self.args.mode {
                    Mode::Single => {
                        for (rank, a) in host_atomics.into_iter().enumerate().take(nranks) {
                            r.host_atomics[rank] = a;
                        }
                    }
                    Mode::Multi => r.host_atomics[i] = host_atomics.first().copied().flatten(),
                }
            }
            Event::UniqueId { hex } => {
                // Rank 0 made the unique id and waits in ncclCommInitRank: start the other ranks.
                for r in 1..nranks {
                    let extra: Vec<OsString> = vec![
                        "--rank".into(),
                        r.to_string().into(),
                        "--unique-id".into(),
                        hex.clone().into(),
                    ];
                    match spawn(
                        self.exe,
                        &[self.base.clone(), extra].concat(),
                        r,
                        format!("rank {r}"),
                        &self.tx,
                    ) {
                        Ok(p) => self.procs[r] = Some(p),
                        Err(e) => {
                            self.report.errors.push(format!("{e:#}"));
                            return Flow::Stop;
                        }
                    }
                }
            }
            Event::InitDone { ms } => {
                self.init_done += 1;
                self.report.init_ms = Some(self.report.init_ms.map_or(ms, |m| m.max(ms)));
                if self.init_done == self.nchildren {
                    let ms = self.report.init_ms.unwrap_or(ms);
                    crate::ui::status("Initialised", format!("{nranks} ranks in {ms:.0} ms"));
                    self.arm(Watch::Between);
                }
            }
            Event::CaseStart { case } => {
                if self.watch != Watch::Case(case) {
                    self.current = Some(case);
                    self.arm(Watch::Case(case));
                }
            }
            Event::CaseDone {
                case,
                time_us,
                checks,
            } => {
                let Some(row) = self.report.cases.get_mut(case) else {
                    return Flow::Go;
                };
                row.finish(nranks, time_us, checks);
                self.cases_done[case] += 1;
                if self.cases_done[case] == self.nchildren {
                    // After the last case only communicator destruction is left.
                    let last = case + 1 == self.report.cases.len();
                    self.arm(if last { Watch::Finish } else { Watch::Between });
                }
            }
            Event::Hang {
                case,
                waited_s,
                pending,
            } => {
                let ranks = pending
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                let absent: Vec<String> = (0..nranks)
                    .filter(|r| !pending.contains(r))
                    .map(|r| r.to_string())
                    .collect();
                // One process sees every rank; a process per rank sees only its own.
                let others = if absent.is_empty() || self.args.mode == Mode::Multi {
                    String::new()
                } else {
                    format!(
                        " (rank {} did not join or already finished)",
                        absent.join(",")
                    )
                };
                if let Some(row) = self.report.cases.get_mut(case) {
                    row.status = CaseStatus::Hung;
                    row.message = Some(format!(
                        "rank {ranks} still waiting after {waited_s} s{others}; the library processes were killed"
                    ));
                }
                self.hung = true;
                return Flow::Stop;
            }
            Event::Error {
                case,
                message,
                nccl_result,
                runtime_error,
            } => {
                match case.and_then(|c| self.report.cases.get_mut(c)) {
                    Some(row) => {
                        row.status = CaseStatus::Error;
                        row.message = Some(message.clone());
                    }
                    None => self.report.errors.push(message.clone()),
                }
                self.fail = FailInfo {
                    nccl_result,
                    runtime_error,
                    message,
                    signal: None,
                };
                return Flow::Stop;
            }
            Event::Done => {
                if let Some(p) = self.procs[i].as_mut() {
                    p.done = true;
                }
                self.done += 1;
                if self.done == self.nchildren {
                    self.arm(Watch::Finish);
                }
            }
        }
        Flow::Go
    }

    /// A child closed its stdout: fine after `Done`, otherwise it died (crash, abort, exit).
    fn on_eof(&mut self, i: usize) -> Flow {
        let Some(p) = self.procs[i].as_mut() else {
            return Flow::Go;
        };
        let mut status = None;
        for _ in 0..200 {
            if let Ok(Some(s)) = p.child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        p.exited = status.is_some();
        if p.done {
            let all = self.done == self.nchildren
                && self.procs.iter().flatten().all(|p| p.done && p.exited);
            return if all { Flow::Stop } else { Flow::Go };
        }
        use std::os::unix::process::ExitStatusExt;
        let signal = status.and_then(|s| s.signal());
        let how = match (status, signal) {
            (_, Some(sig)) => format!("died from signal {sig} ({})", diagnose::signal_name(sig)),
            (Some(s), None) => format!("exited ({s}) without reporting"),
            (None, None) => "closed its output without reporting".to_owned(),
        };
        let msg = format!("the library process ({}) {how}", p.label);
        let unfinished = self
            .current
            .filter(|&c| self.cases_done[c] < self.nchildren);
        match unfinished.and_then(|c| self.report.cases.get_mut(c)) {
            Some(row) => {
                row.status = CaseStatus::Error;
                row.message = Some(msg.clone());
            }
            None => self.report.errors.push(msg.clone()),
        }
        self.fail = FailInfo {
            message: msg,
            signal,
            ..Default::default()
        };
        Flow::Stop
    }

    /// Kill whatever still runs: after a hang or error the library cannot be shut down cleanly.
    fn stop_children(&mut self) {
        for p in self.procs.iter_mut().flatten() {
            if p.exited || matches!(p.child.try_wait(), Ok(Some(_))) {
                continue;
            }
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    /// Total time, diagnosis and verdict.
    fn finish(self) -> Report {
        let mut report = self.report;
        report.total_s = self.t0.elapsed().as_secs_f64();
        let log_text = self
            .log
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        let f = &self.fail;
        if !f.message.is_empty() {
            report.diagnosis = diagnose::diagnose(
                self.kind,
                &diagnose::Failure {
                    nccl_result: f.nccl_result,
                    runtime_error: f.runtime_error,
                    message: &f.message,
                    log: &log_text,
                    host_atomics: &report.host_atomics,
                    signal: f.signal,
                },
                &self.args.lib.display().to_string(),
            );
        }
        if self.hung {
            report.diagnosis.extend(diagnose::hang_notes());
        }
        if report.loaded.is_none() && report.errors.is_empty() && f.message.is_empty() && !self.hung
        {
            report
                .errors
                .push("the library process reported nothing".into());
        }
        report.settle();
        report
    }
}
