//! `rcclfix verify`: two-GPU all_reduce/all_gather correctness run against constructed truth.
//!
//! The parent (this module) never loads the library. It starts `rcclfix verify-child` — one process
//! driving every GPU (`--mode single`, `ncclCommInitAll`), or one per rank (`--mode multi`,
//! `ncclGetUniqueId` in rank 0's child, `ncclCommInitRank` everywhere) — reads its protocol lines,
//! runs a watchdog per case, kills the children after a hang, turns a crash into an error naming
//! the case, and prints the report. Parts:
//! - `cases`: the case list, input construction, expected values, the bitwise checker;
//! - `floats`: binary16/bfloat16 conversions for the expected values;
//! - `abi`: the NCCL and CUDA/HIP runtime C ABI, loaded with libloading;
//! - `child`: the `verify-child` process;
//! - `protocol`: the child → parent line protocol;
//! - `report`: results, the nccl-tests-like table, JSON, exit code;
//! - `diagnose`: error codes and log lines mapped to causes.

pub mod abi;
pub mod cases;
pub mod child;
pub mod diagnose;
pub mod floats;
pub mod protocol;
pub mod report;

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;

pub use abi::RuntimeKind;
pub use child::ChildArgs;
use protocol::Event;
pub use report::{CaseReport, CaseStatus, Mode, Report, Verdict};

/// Extra seconds the parent's watchdog allows beyond the child's own deadline (host-side data
/// preparation and checking of the large cases).
const WATCHDOG_GRACE_S: f64 = 10.0;
/// Seconds the children get to destroy their communicators and exit after the last case.
const FINISH_TIMEOUT_S: f64 = 30.0;
/// Library log lines kept for the diagnosis.
const LOG_KEEP: usize = 400;

/// Arguments of `rcclfix verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// The NCCL-API library to verify (librccl.so.1, libnccl.so.2).
    #[arg(long, value_name = "PATH")]
    pub lib: PathBuf,
    /// GPU runtime: hip (RCCL) or cuda (NCCL); guessed from the library's file name.
    #[arg(long, value_enum)]
    pub runtime: Option<RuntimeKind>,
    /// Runtime library to load (libamdhip64.so / libcudart.so.N) instead of searching for it.
    #[arg(long, value_name = "PATH")]
    pub runtime_lib: Option<PathBuf>,
    /// Device indices, one rank per device.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,1",
        value_name = "LIST"
    )]
    pub gpus: Vec<i32>,
    /// single: one process drives every GPU (ncclCommInitAll); multi: one process per rank
    /// (ncclGetUniqueId + ncclCommInitRank), as PyTorch and vLLM do.
    #[arg(long, value_enum, default_value = "single")]
    pub mode: Mode,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Seconds each case may take before it counts as hung.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub timeout: f64,
    /// Seconds loading and communicator set-up may take.
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    pub init_timeout: f64,
    /// Size of the large cases in bytes (all_reduce buffer; all_gather receive buffer).
    #[arg(long, default_value_t = cases::DEFAULT_LARGE_BYTES, value_name = "BYTES")]
    pub large_bytes: usize,
    /// Timed iterations per case (after one warm-up), as nccl-tests' -n.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Fault injection: CASE:INDEX flips one expected element; the run must report that index.
    #[arg(long, hide = true, value_name = "CASE:INDEX")]
    pub inject_wrong_expectation: Option<String>,
    /// Fault injection: CASE (name or number) — the last rank never joins that collective;
    /// `init` — it never joins the communicator (multi mode).
    #[arg(long, hide = true, value_name = "CASE|init")]
    pub inject_hang: Option<String>,
}

impl VerifyArgs {
    /// Run the subcommand: print the table (or JSON) on stdout; exit 0 when every case is right,
    /// 1 when a case is wrong or hung, 2 on errors.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let report = run_suite(&self)?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.render());
        }
        Ok(ExitCode::from(report.exit_code()))
    }

    /// The arguments `build --verify` uses: GPUs 0,1, single mode, default sizes and timeouts,
    /// the runtime guessed from the library's name.
    pub fn for_library(lib: &Path) -> VerifyArgs {
        VerifyArgs {
            lib: lib.to_owned(),
            runtime: None,
            runtime_lib: None,
            gpus: vec![0, 1],
            mode: Mode::Single,
            json: true,
            timeout: 30.0,
            init_timeout: 120.0,
            large_bytes: cases::DEFAULT_LARGE_BYTES,
            iters: 20,
            inject_wrong_expectation: None,
            inject_hang: None,
        }
    }
}

/// Called by `build --verify` after the scan gate passed: run the full verify suite on `lib`.
/// Returns `Ok(None)` when fewer than two GPUs are present (nothing was run), otherwise the JSON
/// report (recorded in `manifest.json`) and whether every case passed.
///
/// Errors: the library path is unusable or rcclfix cannot start its child process.
pub fn verify_for_build(lib: &Path) -> anyhow::Result<Option<(serde_json::Value, bool)>> {
    let exe = std::env::current_exe().context("cannot find the rcclfix executable")?;
    verify_for_build_with(&exe, &VerifyArgs::for_library(lib))
}

/// [`verify_for_build`] with the `rcclfix` executable that runs the children and every argument
/// spelled out (the tests run it from a test binary, with a small large size).
pub fn verify_for_build_with(
    exe: &Path,
    args: &VerifyArgs,
) -> anyhow::Result<Option<(serde_json::Value, bool)>> {
    let kind = args
        .runtime
        .unwrap_or_else(|| abi::guess_runtime(&args.lib));
    match probe_devices(exe, &args.lib, kind, args.runtime_lib.as_deref()) {
        Ok(n) if n >= args.gpus.len() as i32 => {}
        Ok(n) => {
            crate::ui::warn(format!(
                "verify skipped: the {} runtime sees {n} GPU(s), {} are needed",
                kind.as_str(),
                args.gpus.len()
            ));
            return Ok(None);
        }
        Err(e) => {
            crate::ui::warn(format!(
                "verify skipped: no usable {} runtime ({e:#})",
                kind.as_str()
            ));
            return Ok(None);
        }
    }
    let report = run_suite_with(exe, args)?;
    let pass = report.verdict == Verdict::Pass;
    Ok(Some((serde_json::to_value(&report)?, pass)))
}

/// Load only the runtime in a `verify-child` of `exe` and return the device count it sees.
///
/// Errors: the runtime cannot be loaded or cannot count devices (no driver, no GPU).
pub fn probe_devices(
    exe: &Path,
    lib: &Path,
    kind: RuntimeKind,
    runtime_lib: Option<&Path>,
) -> anyhow::Result<i32> {
    let mut cmd = crate::process::Cmd::new("probe GPUs", exe)
        .args([
            "verify-child",
            "--probe",
            "--runtime",
            kind.as_str(),
            "--lib",
        ])
        .arg(lib);
    if let Some(r) = runtime_lib {
        cmd = cmd.arg("--runtime-lib").arg(r);
    }
    let out = cmd.read()?;
    for line in out.lines() {
        if let Some(Event::Loaded { device_count, .. }) = protocol::decode(line)? {
            return Ok(device_count);
        }
        if let Some(Event::Error { message, .. }) = protocol::decode(line)? {
            anyhow::bail!("{message}");
        }
    }
    anyhow::bail!("verify-child --probe reported nothing")
}

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
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
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
#[derive(Debug, Clone, Copy)]
enum Watch {
    Init,
    Case(usize),
    Between,
    Finish,
}

/// Details of the first failure, for [`diagnose::diagnose`].
#[derive(Default)]
struct FailInfo {
    nccl_result: Option<i32>,
    runtime_error: Option<i32>,
    message: String,
    signal: Option<i32>,
}

/// Run every case on the GPUs named in `args` and return the report (also on failure: a wrong,
/// hung or crashed case is a result, not an `Err`).
///
/// Errors: bad arguments (missing library file, fewer than 2 or more than [`cases::MAX_RANKS`]
/// GPUs, a large size that does not split into elements, an unknown injected case) or the child
/// process cannot be started.
pub fn run_suite(args: &VerifyArgs) -> anyhow::Result<Report> {
    let exe = std::env::current_exe().context("cannot find the rcclfix executable")?;
    run_suite_with(&exe, args)
}

/// [`run_suite`] with the `rcclfix` executable that runs the children.
pub fn run_suite_with(exe: &Path, args: &VerifyArgs) -> anyhow::Result<Report> {
    let lib = &args.lib;
    if !lib.exists() {
        anyhow::bail!("{}: no such file\nhelp: pass the NCCL-API library, e.g. --lib /opt/rocm/lib/librccl.so.1", lib.display());
    }
    if std::fs::File::open(lib).is_err() || lib.is_dir() {
        anyhow::bail!("{}: not a readable file", lib.display());
    }
    let lib_abs = std::path::absolute(lib).with_context(|| lib.display().to_string())?;
    let nranks = args.gpus.len();
    if !(2..=cases::MAX_RANKS).contains(&nranks) {
        anyhow::bail!(
            "--gpus lists {nranks} device(s); verify needs 2 to {}",
            cases::MAX_RANKS
        );
    }
    let mut seen = args.gpus.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != nranks {
        anyhow::bail!("--gpus lists a device twice: {:?}", args.gpus);
    }
    if !(args.timeout > 0.0 && args.init_timeout > 0.0) {
        anyhow::bail!("--timeout and --init-timeout must be positive");
    }
    let case_list = cases::case_list(nranks, args.large_bytes).context("--large-bytes")?;
    if let Some(s) = &args.inject_wrong_expectation {
        let (c, i) = s
            .rsplit_once(':')
            .context("--inject-wrong-expectation wants CASE:INDEX")?;
        let case = cases::find_case(&case_list, c)
            .with_context(|| format!("--inject-wrong-expectation: no case {c:?}"))?;
        let i: usize = i.parse().context("--inject-wrong-expectation INDEX")?;
        if i >= case.recv_count(nranks) {
            anyhow::bail!(
                "--inject-wrong-expectation: index {i} is outside {} ({} elements)",
                case.name(),
                case.recv_count(nranks)
            );
        }
    }
    if let Some(h) = &args.inject_hang {
        if h == "init" {
            if args.mode != Mode::Multi {
                anyhow::bail!("--inject-hang init needs --mode multi");
            }
        } else if cases::find_case(&case_list, h).is_none() {
            anyhow::bail!("--inject-hang: no case {h:?}");
        }
    }
    let kind = args.runtime.unwrap_or_else(|| abi::guess_runtime(lib));

    let mut base: Vec<OsString> = vec![
        "--lib".into(),
        lib_abs.clone().into(),
        "--runtime".into(),
        kind.as_str().into(),
    ];
    if let Some(r) = &args.runtime_lib {
        base.push("--runtime-lib".into());
        base.push(
            std::path::absolute(r)
                .with_context(|| format!("--runtime-lib {}", r.display()))?
                .into(),
        );
    }
    let gpus = args
        .gpus
        .iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",");
    for (k, v) in [
        ("--gpus", gpus),
        ("--timeout", args.timeout.to_string()),
        ("--large-bytes", args.large_bytes.to_string()),
        ("--iters", args.iters.to_string()),
    ] {
        base.push(k.into());
        base.push(v.into());
    }
    if let Some(s) = &args.inject_wrong_expectation {
        base.push("--inject-wrong-expectation".into());
        base.push(s.into());
    }
    if let Some(s) = &args.inject_hang {
        base.push("--inject-hang".into());
        base.push(s.into());
    }

    let mut report = Report {
        library: lib.display().to_string(),
        loaded: None,
        nccl_version: None,
        runtime: kind,
        runtime_path: None,
        mapped: vec![],
        mode: args.mode,
        gpus: args.gpus.clone(),
        nranks,
        host_atomics: vec![None; nranks],
        init_ms: None,
        total_s: 0.0,
        cases: case_list
            .iter()
            .map(|c| CaseReport::new(c, nranks))
            .collect(),
        errors: vec![],
        diagnosis: vec![],
        verdict: Verdict::Error,
    };

    crate::ui::status(
        "Verifying",
        format!(
            "{} ({} runtime, {} mode, GPUs {}, {} cases)",
            lib.display(),
            kind.as_str(),
            match args.mode {
                Mode::Single => "single",
                Mode::Multi => "multi",
            },
            args.gpus
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(","),
            case_list.len()
        ),
    );
    let t0 = Instant::now();
    let (tx, rx) = mpsc::channel::<Msg>();
    let nchildren = match args.mode {
        Mode::Single => 1,
        Mode::Multi => nranks,
    };
    let mut procs: Vec<Option<Proc>> = (0..nchildren).map(|_| None).collect();
    let first_args = match args.mode {
        Mode::Single => base.clone(),
        Mode::Multi => [base.clone(), vec!["--rank".into(), "0".into()]].concat(),
    };
    let label0 = match args.mode {
        Mode::Single => "child".to_owned(),
        Mode::Multi => "rank 0".to_owned(),
    };
    procs[0] = Some(spawn(exe, &first_args, 0, label0, &tx)?);

    let mut log: std::collections::VecDeque<String> = Default::default();
    let mut init_done = 0usize;
    let mut cases_done: Vec<usize> = vec![0; case_list.len()];
    let mut done = 0usize;
    let mut watch = Watch::Init;
    let mut deadline = t0 + Duration::from_secs_f64(args.init_timeout);
    let mut fail = FailInfo::default();
    let mut hung = false;
    let case_budget = Duration::from_secs_f64(args.timeout + WATCHDOG_GRACE_S);
    let mut current: Option<usize> = None;

    loop {
        let now = Instant::now();
        let msg = match rx.recv_timeout(deadline.saturating_duration_since(now)) {
            Ok(m) => m,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                match watch {
                    Watch::Init => {
                        report.errors.push(format!(
                            "loading and communicator set-up did not finish within {} s (a rank that never joins hangs ncclCommInitRank)",
                            args.init_timeout
                        ));
                        hung = true;
                    }
                    Watch::Case(c) => {
                        let row = &mut report.cases[c];
                        row.status = CaseStatus::Hung;
                        row.message = Some(format!(
                            "did not finish within {} s; the library process was killed (watchdog)",
                            args.timeout + WATCHDOG_GRACE_S
                        ));
                        hung = true;
                    }
                    Watch::Between => {
                        let next = current.map_or(0, |c| c + 1);
                        if let Some(row) = report.cases.get_mut(next) {
                            row.status = CaseStatus::Hung;
                            row.message = Some(
                                "the library process stopped responding before this case started"
                                    .into(),
                            );
                        } else {
                            report
                                .errors
                                .push("the library process stopped responding".into());
                        }
                        hung = true;
                    }
                    Watch::Finish => {
                        crate::ui::warn(format!(
                            "the library process did not exit within {FINISH_TIMEOUT_S} s after the last case (ncclCommDestroy); killed it"
                        ));
                    }
                }
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Msg::Log(i, line) => {
                let label = procs[i]
                    .as_ref()
                    .map(|p| p.label.clone())
                    .unwrap_or_default();
                eprintln!("[{label}] {line}");
                if log.len() == LOG_KEEP {
                    log.pop_front();
                }
                log.push_back(line);
            }
            Msg::Event(i, ev) => match ev {
                Event::Loaded {
                    nccl_path,
                    nccl_version,
                    runtime_path,
                    host_atomics,
                    mapped,
                    ..
                } => {
                    if i == 0 {
                        report.loaded = Some(nccl_path);
                        report.nccl_version = Some(abi::format_nccl_version(nccl_version));
                        report.runtime_path = Some(runtime_path);
                    }
                    for m in mapped {
                        if !report.mapped.contains(&m) {
                            report.mapped.push(m);
                        }
                    }
                    match args.mode {
                        Mode::Single => {
                            for (r, a) in host_atomics.into_iter().enumerate() {
                                report.host_atomics[r] = a;
                            }
                        }
                        Mode::Multi => {
                            report.host_atomics[i] = host_atomics.first().copied().flatten()
                        }
                    }
                }
                Event::UniqueId { hex } => {
                    let mut failed = None;
                    #[allow(clippy::needless_range_loop)]
                    for r in 1..nranks {
                        let a = [
                            base.clone(),
                            vec![
                                "--rank".into(),
                                r.to_string().into(),
                                "--unique-id".into(),
                                hex.clone().into(),
                            ],
                        ]
                        .concat();
                        match spawn(exe, &a, r, format!("rank {r}"), &tx) {
                            Ok(p) => procs[r] = Some(p),
                            Err(e) => {
                                failed = Some(format!("{e:#}"));
                                break;
                            }
                        }
                    }
                    if let Some(e) = failed {
                        report.errors.push(e);
                        break;
                    }
                }
                Event::InitDone { ms } => {
                    init_done += 1;
                    report.init_ms = Some(report.init_ms.map_or(ms, |m: f64| m.max(ms)));
                    if init_done == nchildren {
                        crate::ui::status("Initialised", format!("{nranks} ranks in {ms:.0} ms"));
                        watch = Watch::Between;
                        deadline = Instant::now() + case_budget;
                    }
                }
                Event::CaseStart { case } => {
                    if !matches!(watch, Watch::Case(c) if c == case) {
                        watch = Watch::Case(case);
                        current = Some(case);
                        deadline = Instant::now() + case_budget;
                    }
                }
                Event::CaseDone {
                    case,
                    time_us,
                    checks,
                } => {
                    if let Some(row) = report.cases.get_mut(case) {
                        row.finish(nranks, time_us, checks);
                    }
                    cases_done[case] += 1;
                    if cases_done[case] == nchildren {
                        if case + 1 == case_list.len() {
                            // Only communicator destruction is left.
                            watch = Watch::Finish;
                            deadline = Instant::now() + Duration::from_secs_f64(FINISH_TIMEOUT_S);
                        } else {
                            watch = Watch::Between;
                            deadline = Instant::now() + case_budget;
                        }
                    }
                }
                Event::Hang { case, waited_s } => {
                    let row = &mut report.cases[case];
                    row.status = CaseStatus::Hung;
                    row.message = Some(format!(
                        "the collective did not complete within {waited_s} s on rank(s) driven by {}; the library process was killed",
                        procs[i].as_ref().map(|p| p.label.as_str()).unwrap_or("?")
                    ));
                    hung = true;
                    break;
                }
                Event::Error {
                    case,
                    message,
                    nccl_result,
                    runtime_error,
                } => {
                    match case.and_then(|c| report.cases.get_mut(c)) {
                        Some(row) => {
                            row.status = CaseStatus::Error;
                            row.message = Some(message.clone());
                        }
                        None => report.errors.push(message.clone()),
                    }
                    fail = FailInfo {
                        nccl_result,
                        runtime_error,
                        message,
                        signal: None,
                    };
                    break;
                }
                Event::Done => {
                    if let Some(p) = procs[i].as_mut() {
                        p.done = true;
                    }
                    done += 1;
                    if done == nchildren {
                        watch = Watch::Finish;
                        deadline = Instant::now() + Duration::from_secs_f64(FINISH_TIMEOUT_S);
                    }
                }
            },
            Msg::Eof(i) => {
                let Some(p) = procs[i].as_mut() else { continue };
                // Wait briefly for the exit status.
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
                    if procs.iter().flatten().all(|p| p.done && p.exited) && done == nchildren {
                        break;
                    }
                    continue;
                }
                use std::os::unix::process::ExitStatusExt;
                let signal = status.and_then(|s| s.signal());
                let how = match (status, signal) {
                    (_, Some(sig)) => {
                        format!("died from signal {sig} ({})", diagnose::signal_name(sig))
                    }
                    (Some(s), None) => format!("exited ({s}) without reporting"),
                    (None, None) => "closed its output without reporting".to_owned(),
                };
                let msg = format!("the library process ({}) {how}", p.label);
                match current
                    .filter(|&c| cases_done[c] < nchildren)
                    .and_then(|c| report.cases.get_mut(c))
                {
                    Some(row) => {
                        row.status = CaseStatus::Error;
                        row.message = Some(msg.clone());
                    }
                    None => report.errors.push(msg.clone()),
                }
                fail = FailInfo {
                    message: msg,
                    signal,
                    ..Default::default()
                };
                break;
            }
        }
    }

    // Stop whatever still runs: after a hang or error the library cannot be shut down cleanly.
    for p in procs.iter_mut().flatten() {
        if !p.exited {
            if let Ok(Some(_)) = p.child.try_wait() {
                continue;
            }
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
    report.total_s = t0.elapsed().as_secs_f64();

    let log_text: Vec<String> = log.into_iter().collect();
    let log_text = log_text.join("\n");
    if !fail.message.is_empty() {
        report.diagnosis = diagnose::diagnose(
            kind,
            &diagnose::Failure {
                nccl_result: fail.nccl_result,
                runtime_error: fail.runtime_error,
                message: &fail.message,
                log: &log_text,
                host_atomics: &report.host_atomics,
                signal: fail.signal,
            },
            &lib.display().to_string(),
        );
    }
    if hung {
        report.diagnosis.extend(diagnose::hang_notes());
    }
    if report.loaded.is_none() && report.errors.is_empty() && fail.message.is_empty() && !hung {
        report
            .errors
            .push("the library process reported nothing".into());
    }
    report.settle();
    Ok(report)
}
