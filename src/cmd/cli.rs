//! Command-line types (clap derive): the global flags and the subcommand list. Each subcommand's
//! own arguments and its run function live in `src/cmd/<subcommand>.rs`.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

const AFTER_HELP: &str = "\
Exit codes:
  0  ok: no requested kernel declares hidden_hostcall_buffer / every check passed
  1  a check failed: a kernel declares hostcall, verify found a wrong value, doctor says affected
  2  usage, input or internal error; inconclusive
  3  some device code could not be read (scan: unknown)";

/// Rebuild RCCL so its gfx kernels declare no `hidden_hostcall_buffer`, and prove it.
#[derive(Debug, Parser)]
#[command(name = "rcclfix", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors on stderr (no status, warning, note or progress lines).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Colour on stderr: auto (a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, default_value_t = crate::ui::ColorChoice::Auto, value_name = "WHEN")]
    pub color: crate::ui::ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build RCCL from a pinned recipe, gate it with the scanner, write out/rccl-<recipe>-<targets>/.
    Build(crate::cmd::build::Args),
    /// Prove a recipe's fix: build it without NDEBUG (the control) and as the recipe says, and
    /// compare which kernels declare hidden_hostcall_buffer (exit 0 only when the control declares
    /// and the fix is clean).
    Prove(crate::cmd::prove::Args),
    /// Report, per gfx target and kernel, whether hidden_hostcall_buffer is declared, and why.
    Scan(crate::cmd::scan::Args),
    /// Two-GPU all_reduce/all_gather correctness run against constructed truth.
    Verify(crate::cmd::verify::Args),
    /// Write drop-in .deb and .whl overlays from a build folder.
    Package(crate::cmd::package::Args),
    /// Am I affected, and is the fix a VM setting, a rebuild, or neither?
    Doctor(crate::cmd::doctor::Args),
    /// The recipes per ROCm release, as a table or a GitHub Actions matrix.
    Matrix(crate::cmd::matrix::Args),
    /// Recipe maintenance (pin tags to commits in the lockfile).
    Recipe(crate::cmd::recipe::Args),
    /// Toolchain images: build the Debian-package rootfs, list what is cached.
    Toolchain(crate::cmd::toolchain::Args),
    /// Remove a provably unused hidden_hostcall_buffer declaration from a linked library.
    Patch(crate::cmd::patch::Args),
    /// Find every librccl programs load, decide per copy whether `patch` proves it, and fix it
    /// the way its owner expects (in place, an overlay wheel with pip, a .deb with apt), reversibly.
    Fix(crate::cmd::fix::Args),
    /// Internal: the child process that loads the NCCL-API library for `verify`.
    #[command(hide = true)]
    VerifyChild(crate::cmd::verify::ChildArgs),
    /// Internal: every instruction of a code object as `patch`'s decoder reads it (compared with
    /// llvm-objdump by the patch sweep).
    #[command(hide = true)]
    Decode(crate::cmd::decode::Args),
    /// Internal: write the wheel that carries this executable, for `pip install`
    /// (`cargo xtask wheel` runs it from the release build).
    #[command(hide = true)]
    SelfWheel(crate::cmd::self_wheel::Args),
    /// Internal: write the shell completions and man pages generated from these definitions
    /// (`cargo xtask docs` runs it; `self-wheel` ships its output).
    #[command(hide = true)]
    SelfDocs(crate::cmd::self_docs::Args),
}

/// Parse the process's command line with clap's own messages coloured as `--color`/`NO_COLOR`
/// say ([`crate::ui::ColorChoice::from_args`] reads the choice before clap runs). Exits like
/// `Cli::parse` on `--help`, `--version` and usage errors (2).
pub fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let color = if crate::ui::ColorChoice::from_args(&args).resolve_stderr() {
        clap::ColorChoice::Always
    } else {
        clap::ColorChoice::Never
    };
    let matches = Cli::command().color(color).get_matches_from(args);
    Cli::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.with_cmd(&Cli::command().color(color)).exit())
}
