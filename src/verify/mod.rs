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
//! - `supervise`: the parent's loop over the children's messages, with the watchdog;
//! - `report`: results, the nccl-tests-like table, JSON, exit code;
//! - `diagnose`: error codes and log lines mapped to causes.

pub mod abi;
pub mod cases;
pub mod child;
pub mod codes;
pub mod diagnose;
pub mod floats;
pub mod locate;
pub mod protocol;
pub mod report;
pub mod supervise;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

pub use abi::RuntimeKind;
pub use child::ChildOptions;
use protocol::Event;
pub use report::{CaseReport, CaseStatus, Mode, Report, Verdict};

/// What `rcclfix verify` runs (the command line without its output flags; `build --verify` uses
/// [`Options::for_library`]).
#[derive(Debug, Clone)]
pub struct Options {
    /// The NCCL-API library to verify (librccl.so.1, libnccl.so.2).
    pub lib: PathBuf,
    /// GPU runtime: hip (RCCL) or cuda (NCCL); guessed from the library's file name.
    pub runtime: Option<RuntimeKind>,
    /// Runtime library to load (libamdhip64.so / libcudart.so.N) instead of searching for it.
    pub runtime_lib: Option<PathBuf>,
    /// Device indices, one rank per device.
    pub gpus: Vec<i32>,
    /// How the ranks are driven.
    pub mode: Mode,
    /// Seconds each case may take before it counts as hung.
    pub timeout: f64,
    /// Seconds loading and communicator set-up may take.
    pub init_timeout: f64,
    /// Size of the large cases in bytes (all_reduce buffer; all_gather receive buffer).
    pub large_bytes: usize,
    /// Timed iterations per case (after one warm-up), as nccl-tests' -n.
    pub iters: usize,
    /// Fault injection: CASE:INDEX flips one expected element; the run must report that index.
    pub inject_wrong_expectation: Option<String>,
    /// Fault injection: CASE (name or number) — the last rank never joins that collective;
    /// `init` — it never joins the communicator (multi mode).
    pub inject_hang: Option<String>,
}

impl Options {
    /// The arguments `build --verify` uses: GPUs 0,1, single mode, default sizes and timeouts,
    /// the runtime guessed from the library's name.
    pub fn for_library(lib: &Path) -> Options {
        Options {
            lib: lib.to_owned(),
            runtime: None,
            runtime_lib: None,
            gpus: vec![0, 1],
            mode: Mode::Single,
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
    verify_for_build_with(&exe, &Options::for_library(lib))
}

/// [`verify_for_build`] with the `rcclfix` executable that runs the children and every argument
/// spelled out (the tests run it from a test binary, with a small large size).
pub fn verify_for_build_with(
    exe: &Path,
    args: &Options,
) -> anyhow::Result<Option<(serde_json::Value, bool)>> {
    let kind = args
        .runtime
        .unwrap_or_else(|| locate::guess_runtime(&args.lib));
    match probe_devices(
        exe,
        &args.lib,
        kind,
        args.runtime_lib.as_deref(),
        args.init_timeout,
    ) {
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

/// Load only the runtime in a `verify-child` of `exe` and return the device count it sees;
/// the child is killed after `init_timeout` seconds.
///
/// Errors: the runtime cannot be loaded or cannot count devices (no driver, no GPU); the child
/// does not finish within `init_timeout` ([`crate::process::DeadlineError`]).
pub fn probe_devices(
    exe: &Path,
    lib: &Path,
    kind: RuntimeKind,
    runtime_lib: Option<&Path>,
    init_timeout: f64,
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
    // The runtime's initialisation may hang (a wedged driver): the probe gets the set-up deadline.
    let out = cmd.read_with_deadline(Duration::from_secs_f64(init_timeout))?;
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

/// Run every case on the GPUs named in `args` and return the report (also on failure: a wrong,
/// hung or crashed case is a result, not an `Err`).
///
/// Errors: bad arguments (missing library file, fewer than 2 or more than [`cases::MAX_RANKS`]
/// GPUs, a large size that does not split into elements, an unknown injected case) or the child
/// process cannot be started.
pub fn run_suite(args: &Options) -> anyhow::Result<Report> {
    let exe = std::env::current_exe().context("cannot find the rcclfix executable")?;
    run_suite_with(&exe, args)
}

/// Check that `file` (opened from `path`) starts as an ELF shared object does: the `\x7fELF`
/// magic and `e_type` `ET_DYN` (what `dlopen` loads; the ELF gABI's file header), so a text
/// file or an object file is refused by the parent in one line rather than by a child after the
/// GPU runtime came up.
///
/// Errors: one line naming the path and what it is instead.
fn check_shared_object(path: &Path, mut file: std::fs::File) -> anyhow::Result<()> {
    use std::io::Read;
    let mut h = [0u8; 18];
    let n = (&mut file)
        .take(h.len() as u64)
        .read(&mut h)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if n < h.len() || &h[..4] != b"\x7fELF" {
        anyhow::bail!(
            "{}: not an ELF shared library (no ELF header)\nhelp: pass the NCCL-API library, e.g. --lib /opt/rocm/lib/librccl.so.1",
            path.display()
        );
    }
    let e_type = match h[5] {
        2 => u16::from_be_bytes([h[16], h[17]]),
        _ => u16::from_le_bytes([h[16], h[17]]),
    };
    if e_type != 3 {
        let what = match e_type {
            1 => "a relocatable object",
            2 => "an executable",
            4 => "a core file",
            _ => "an ELF file of another type",
        };
        anyhow::bail!(
            "{}: {what}, not an ELF shared library\nhelp: pass the NCCL-API library, e.g. --lib /opt/rocm/lib/librccl.so.1",
            path.display()
        );
    }
    Ok(())
}

/// [`run_suite`] with the `rcclfix` executable that runs the children.
pub fn run_suite_with(exe: &Path, args: &Options) -> anyhow::Result<Report> {
    let lib = &args.lib;
    // Checked without opening it: opening a FIFO would block until something writes it.
    match std::fs::metadata(lib) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("{}: no such file\nhelp: pass the NCCL-API library, e.g. --lib /opt/rocm/lib/librccl.so.1", lib.display());
        }
        Err(e) => anyhow::bail!("cannot read {}: {e}", lib.display()),
        Ok(m) if !m.is_file() => anyhow::bail!(
            "{}: not a regular file ({})",
            lib.display(),
            crate::fsutil::file_kind(&m)
        ),
        Ok(_) => {}
    }
    // Readable? (O_NONBLOCK: the file may have been swapped for a FIFO since the check.) And an
    // ELF shared object, checked here, before any child loads a GPU runtime to dlopen it.
    let (f, _) = crate::fsutil::open_regular(lib)?;
    check_shared_object(lib, f)?;
    if let Some(r) = &args.runtime_lib {
        crate::fsutil::require_regular(r).context("--runtime-lib")?;
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
    let kind = args.runtime.unwrap_or_else(|| locate::guess_runtime(lib));

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

    let report = Report {
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
    supervise::Supervisor::new(exe, args, kind, base, report).run()
}
