//! `rcclfix scan`: per gfx target and kernel, is `hidden_hostcall_buffer` declared, and why.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::scan::output::{CliOptions, JsonShape};
use crate::scan::Settings;
use crate::ui::Ui;

const AFTER_HELP: &str = "\
Exit codes:
  0  no kernel of a requested target declares hidden_hostcall_buffer, and all device code was read
  1  at least one kernel of a requested target declares hidden_hostcall_buffer
  2  error: a path could not be read or is not a recognised input
  3  some device code that may belong to a requested target could not be read (unknown), or a
     requested target has no device code (no code)
A closed stdout or stderr does not change the exit code.

Without --target every target found is requested (with --python/--rocm: the GPUs of this machine
when KFD lists them). A scan for gfx1100 also reads generic entries (gfx11-generic).

The CCOB MD5 hash is checked only with --verify-hash. Nothing that loads a compressed bundle at
run time checks it: clang/lib/Driver/OffloadBundler.cpp (LLVM 21.1.8) recomputes it in
CompressedOffloadBundle::decompress only under `if (Verbose)` (OFFLOAD_BUNDLER_VERBOSE=1,
lines 1278-1324) and only prints \"Hashes match\"; CLR (hip_code_object.cpp, ROCm 6.4.3) hands
compressed bundles to comgr's unbundle action, which calls that function, and comgr 7.0.2
(comgr-cache-bundler-command.cpp, lines 155-178) uses the header with the hash as its cache key
without checking it. Sizes and the compressed stream are always checked. Details and the
--json schema: docs/scan-json.md.

Memory: one decoded code object per thread at most (--max-code-object caps one); archive members
up to --memory-budget are held whole, larger ones are streamed.";

/// `rcclfix scan PATH…`
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Files or folders: .so, executable, .o, code object, bundle, CCOB, .deb, .whl, tar, directory.
    #[arg(required_unless_present_any = ["python", "rocm"])]
    pub paths: Vec<PathBuf>,
    /// Only these gfx targets (comma-separated), e.g. gfx1100.
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Print JSON instead of a table: `--json` the compact document, `--json=full` every kernel.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "compact", value_name = "SHAPE")]
    pub json: Option<JsonShape>,
    /// Check each CCOB's MD5-low-64 hash (off by default: no runtime loader checks it; see below).
    #[arg(long)]
    pub verify_hash: bool,
    /// Ignored (the hash check is off by default now; kept so old scripts keep working).
    #[arg(long, hide = true, conflicts_with = "verify_hash")]
    pub no_hash_check: bool,
    /// List every kernel per target (also enabled by the global -v); with --json: the full shape.
    #[arg(short = 'k', long)]
    pub kernels: bool,
    /// Worker threads (0: one per core; more than the machine's available parallelism is capped
    /// at it, with a warning).
    #[arg(short = 'j', long, default_value_t = 0, value_name = "N")]
    pub jobs: usize,
    /// Largest single code object held in memory (e.g. 4G); a bigger one is reported unknown.
    #[arg(long, env = "RCCLFIX_SCAN_MAX_CODE_OBJECT", default_value = "4G", value_parser = parse_size, value_name = "SIZE")]
    pub max_code_object: u64,
    /// Archive members up to this size are read into memory; larger ones are streamed.
    #[arg(long, env = "RCCLFIX_SCAN_MEMORY_BUDGET", default_value = "256M", value_parser = parse_size, value_name = "SIZE")]
    pub memory_budget: u64,
    /// Scan a Python environment: the site-packages (with torch/lib) of PYTHON (default python3).
    #[arg(long, num_args = 0..=1, default_missing_value = "python3", value_name = "PYTHON")]
    pub python: Option<PathBuf>,
    /// Scan a ROCm install's lib/ folder (default /opt/rocm).
    #[arg(long, num_args = 0..=1, default_missing_value = "/opt/rocm", value_name = "ROOT")]
    pub rocm: Option<PathBuf>,
    /// Where KFD's topology is read to name this machine's GPUs (tests).
    #[arg(long, hide = true, default_value = "/sys")]
    pub sysfs: PathBuf,
}

fn parse_size(s: &str) -> Result<u64, String> {
    crate::scan::parse_size(s)
}

impl Args {
    /// The domain's options; `progress` is the bar the scan drives. With `--python` the
    /// interpreter is asked for its environment here ([`python_env`]).
    ///
    /// Errors: `--python` cannot run the interpreter, it fails, does not answer within
    /// [`PYTHON_DEADLINE`], or names no site-packages folder.
    pub fn options(&self, progress: indicatif::ProgressBar) -> anyhow::Result<CliOptions> {
        Ok(CliOptions {
            paths: self.paths.clone(),
            targets: self.target.clone(),
            python: self.python.as_deref().map(python_env).transpose()?,
            rocm: self.rocm.clone(),
            machine_gpus: if (self.python.is_some() || self.rocm.is_some())
                && self.target.is_empty()
            {
                machine_gpus(&self.sysfs)
            } else {
                Vec::new()
            },
            settings: Settings {
                verify_hash: self.verify_hash,
                max_code_object: self.max_code_object,
                memory_budget: self.memory_budget,
                jobs: self.jobs,
                progress,
                ..Settings::default()
            },
        })
    }
}

/// How long `--python`'s interpreter gets to answer (a slow `.pth` hook, a cold disk).
pub const PYTHON_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Ask `python` for its environment ([`crate::scan::output::PYTHON_PROBE`], run with `-I`) through
/// [`crate::process::Cmd::read_with_deadline`], which drains stdout and stderr while it waits, so
/// an interpreter whose `.pth` hooks print a lot cannot block on a full pipe.
///
/// Errors: the interpreter cannot be started, exits non-zero (its last stderr line is shown),
/// runs past [`PYTHON_DEADLINE`], or its answer is not the probe's ([`crate::scan::output::python_env_from_probe`]).
pub fn python_env(python: &std::path::Path) -> anyhow::Result<crate::scan::output::Env> {
    use crate::process::{Cmd, CommandError, DeadlineError};
    let shown = python.display().to_string();
    let cmd = Cmd::new(format!("--python {shown}"), python).args([
        "-I",
        "-c",
        crate::scan::output::PYTHON_PROBE,
    ]);
    let stdout = match cmd.read_with_deadline(PYTHON_DEADLINE) {
        Ok(o) => o,
        Err(e) => {
            if let Some(c) = e.downcast_ref::<CommandError>() {
                anyhow::bail!(
                    "--python {shown}: the interpreter failed ({}): {}",
                    c.status,
                    c.tail.lines().last().unwrap_or("").trim()
                );
            }
            if e.downcast_ref::<DeadlineError>().is_some() {
                anyhow::bail!(
                    "--python {shown}: no answer within {} s",
                    PYTHON_DEADLINE.as_secs()
                );
            }
            anyhow::bail!("--python {shown}: cannot run it: {}\nhelp: give the interpreter of the environment, e.g. --python .venv/bin/python", e.root_cause());
        }
    };
    crate::scan::output::python_env_from_probe(&shown, stdout.as_bytes())
}

/// The gfx targets of this machine's GPUs from KFD's topology under `sysfs` (empty when none).
fn machine_gpus(sysfs: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = crate::doctor::kfd::read_topology(sysfs)
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.gfx)
        .filter(|g| !g.is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Run the scan and print the table or JSON on stdout; the global `-v` lists kernels like
/// `--kernels`. The exit code is [`crate::scan::output::exit_code`]'s (0, 1 or 3), also when
/// stdout is closed ([`crate::ui::Stdout`]).
///
/// Errors: an empty `--target` string; a path cannot be read or is not a recognised input;
/// `--python` cannot run the interpreter; `--rocm` has no `lib/` (exit 2 via `main`).
pub fn run(mut a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    // Each worker holds a decoded code object and a pool thread's stack: more workers than the
    // machine runs at once only cost memory (and a huge -j made the pool hang at startup).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if a.jobs > cores {
        ui.warn(format_args!(
            "-j {} is more than the {cores} threads this machine runs at once; scanning with -j {cores}",
            a.jobs
        ));
        a.jobs = cores;
    }
    let mut opts = a.options(indicatif::ProgressBar::hidden())?;
    let shape = match a.json {
        Some(JsonShape::Compact) if a.kernels => Some(JsonShape::Full),
        s => s,
    };
    let list_kernels = a.kernels || ui.verbose > 0;
    // The compact document and the table list only declaring kernels: the rest are only counted.
    if shape != Some(JsonShape::Full) && !list_kernels {
        opts.settings.kernels = crate::scan::meta::Detail::Declaring;
    }
    if crate::scan::output::walks(&opts) {
        let bar = ui.counter_bar("bundles");
        bar.set_message("scanning");
        opts.settings.progress = bar;
    }
    let scan = crate::scan::output::scan_for_cli(&opts)?;
    // A closed stdout drops the rest of the output and keeps the verdict's exit code.
    let mut out = std::io::BufWriter::new(crate::ui::Stdout);
    crate::scan::output::write_output(&mut out, &scan, shape, list_kernels)?;
    Ok(ExitCode::from(scan.code))
}
