//! `rcclfix verify` (and its hidden child): two-GPU collective correctness against constructed
//! truth. The arguments, the call into [`crate::verify::run_suite`] and the rendering (the table
//! or JSON on stdout, errors and their explanation on stderr).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::ui::Ui;
use crate::verify::{self, CaseStatus, Mode, RuntimeKind};

/// The subcommand's arguments (clap): `rcclfix verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
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
    /// How the ranks are driven.
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
    #[arg(long, default_value_t = crate::verify::cases::DEFAULT_LARGE_BYTES, value_name = "BYTES")]
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

impl Args {
    fn into_options(self) -> verify::Options {
        verify::Options {
            lib: self.lib,
            runtime: self.runtime,
            runtime_lib: self.runtime_lib,
            gpus: self.gpus,
            mode: self.mode,
            timeout: self.timeout,
            init_timeout: self.init_timeout,
            large_bytes: self.large_bytes,
            iters: self.iters,
            inject_wrong_expectation: self.inject_wrong_expectation,
            inject_hang: self.inject_hang,
        }
    }
}

/// Run the subcommand: print the table (or JSON) on stdout; exit 0 when every case is right, 1
/// when a case is wrong or hung, 2 on errors.
///
/// Errors: whatever [`crate::verify::run_suite`] returns (bad arguments, no child process).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    let json = a.json;
    let report = verify::run_suite(&a.into_options())?;
    if json {
        crate::outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        crate::out!("{}", report.render())?;
    }
    // Errors and their explanation go to stderr (stdout carries the result), in both modes.
    for c in &report.cases {
        if let (Some(msg), CaseStatus::Hung | CaseStatus::Error) = (&c.message, c.status) {
            let hung = if c.status == CaseStatus::Hung {
                " hung"
            } else {
                ""
            };
            crate::errln!(
                "error: case {} ({}){hung}: {}",
                c.id,
                c.name,
                crate::ui::escape(msg)
            );
        }
    }
    for e in &report.errors {
        crate::errln!("error: {}", crate::ui::escape(e));
    }
    for d in &report.diagnosis {
        crate::errln!("{}", crate::ui::escape(d));
    }
    Ok(ExitCode::from(report.exit_code()))
}

/// The hidden `verify-child` subcommand's arguments (set by `rcclfix verify`).
#[derive(Debug, Clone, clap::Args)]
pub struct ChildArgs {
    /// The NCCL-API library.
    #[arg(long)]
    pub lib: PathBuf,
    /// GPU runtime flavour.
    #[arg(long, value_enum)]
    pub runtime: RuntimeKind,
    /// Runtime library to load instead of searching.
    #[arg(long)]
    pub runtime_lib: Option<PathBuf>,
    /// Device indices, one per rank.
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    pub gpus: Vec<i32>,
    /// Drive only this rank (`ncclCommInitRank`); without it, all ranks (`ncclCommInitAll`).
    #[arg(long)]
    pub rank: Option<usize>,
    /// Hex of the `ncclUniqueId` made by rank 0 (ranks ≥ 1).
    #[arg(long)]
    pub unique_id: Option<String>,
    /// Seconds each case may take on the GPU before it counts as hung.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Large size in bytes.
    #[arg(long, default_value_t = crate::verify::cases::DEFAULT_LARGE_BYTES)]
    pub large_bytes: usize,
    /// Timed iterations per case.
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Untimed warm-up iterations per case.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// `CASE:INDEX`: flip one expected element (fault injection for the checker).
    #[arg(long)]
    pub inject_wrong_expectation: Option<String>,
    /// `CASE` or `init`: the last rank never joins that collective (or the communicator).
    #[arg(long)]
    pub inject_hang: Option<String>,
    /// Only load the runtime and report the device count.
    #[arg(long)]
    pub probe: bool,
}

impl ChildArgs {
    fn into_options(self) -> verify::ChildOptions {
        verify::ChildOptions {
            lib: self.lib,
            runtime: self.runtime,
            runtime_lib: self.runtime_lib,
            gpus: self.gpus,
            rank: self.rank,
            unique_id: self.unique_id,
            timeout: self.timeout,
            large_bytes: self.large_bytes,
            iters: self.iters,
            warmup: self.warmup,
            inject_wrong_expectation: self.inject_wrong_expectation,
            inject_hang: self.inject_hang,
            probe: self.probe,
        }
    }
}

/// Run the hidden `verify-child` subcommand (the process that loads the NCCL-API library; it
/// speaks the line protocol of [`crate::verify::protocol`] on stdout).
pub fn run_child(a: ChildArgs, _ui: &Ui) -> anyhow::Result<ExitCode> {
    a.into_options().run()
}
