//! `rcclfix build`: recipe → source → NDEBUG → configure/build → gates → output folder.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::build::{BuildOptions, Outcome};
use crate::container::EngineKind;
use crate::ui::Ui;

/// Arguments of `rcclfix build`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Recipe to build: an RCCL version or recipe name (see --list).
    #[arg(long, value_name = "VERSION", conflicts_with = "recipe")]
    pub tag: Option<String>,
    /// Build a recipe file from disk instead of an embedded recipe.
    #[arg(long, value_name = "FILE")]
    pub recipe: Option<PathBuf>,
    /// List the recipes and exit.
    #[arg(long)]
    pub list: bool,
    /// gfx targets to build and gate, comma-separated (default: the recipe's), e.g. gfx1100,gfx1101.
    #[arg(long, value_delimiter = ',', value_name = "GFX,…")]
    pub targets: Vec<String>,
    /// Clone from this local git mirror instead of the recipe URL (offline use).
    #[arg(long, value_name = "PATH", env = "RCCLFIX_GIT_MIRROR")]
    pub git_mirror: Option<PathBuf>,
    /// Container engine (default: podman, then docker, then bubblewrap; also RCCLFIX_ENGINE).
    #[arg(long, value_enum)]
    pub engine: Option<EngineKind>,
    /// Where output folders go.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub out_dir: PathBuf,
    /// ninja -j, at least 1 (default: the CPU cores, fewer when RAM is short; see `choose_jobs`;
    /// ninja's own `-j0` would mean unlimited).
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Refuse to pin an unpinned tag on first fetch or an image toolchain's digest on first use
    /// (the recipe or lockfile must pin them).
    #[arg(long)]
    pub locked: bool,
    /// Allow recipes whose status is experimental or unfixable-by-rebuild (the gate still judges).
    #[arg(long)]
    pub experimental: bool,
    /// After the gate, run `verify` on two GPUs and record the result in manifest.json.
    #[arg(long)]
    pub verify: bool,
    /// After the build, write these packages (comma-separated: deb, whl).
    #[arg(long, value_delimiter = ',', value_name = "FORMAT,…")]
    pub package: Vec<String>,
    /// Where packages go (default: the --out-dir).
    #[arg(long, value_name = "DIR")]
    pub package_dir: Option<PathBuf>,
    /// Build even when the output folder was built from the same inputs (the artifact cache
    /// otherwise reuses it after re-running the scan gate on it).
    #[arg(long)]
    pub rebuild: bool,
    /// Replace an output folder that another recipe built, or that is not an rcclfix output
    /// folder (without it such a folder is never replaced).
    #[arg(long)]
    pub force: bool,
    /// Print the build plan (targets, work paths, every step's argv, mounts and environment, the
    /// expected outputs) and exit without running anything.
    #[arg(long)]
    pub plan: bool,
    /// With --plan: print the plan as JSON (docs/build-plan.md).
    #[arg(long, requires = "plan")]
    pub json: bool,
}

impl Args {
    /// The domain's options.
    pub fn options(&self) -> BuildOptions {
        BuildOptions {
            targets: self.targets.clone(),
            git_mirror: self.git_mirror.clone(),
            engine: self.engine,
            out_dir: self.out_dir.clone(),
            jobs: self.jobs,
            locked: self.locked,
            experimental: self.experimental,
            verify: self.verify,
            package: self.package.clone(),
            package_dir: self.package_dir.clone(),
            control: false,
            rebuild: self.rebuild,
        }
    }
}

/// Run the subcommand: print the output folder on stdout (`--list`: the recipe table; `--plan`:
/// the plan, as text or `--json`, and nothing is run).
///
/// Errors: whatever the build returns (exit 2); a failed scan gate or `--verify` is a
/// [`crate::CheckFailed`] (exit 1).
pub fn run(a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    if a.list {
        crate::out!("{}", crate::recipe::list_table(&crate::recipe::embedded()?))?;
        return Ok(ExitCode::SUCCESS);
    }
    let (recipe, recipe_root) =
        crate::build::resolve_recipe(a.tag.as_deref(), a.recipe.as_deref())?;
    if a.plan {
        let plan = crate::build::plan::plan(
            &recipe,
            &a.options(),
            &crate::build::plan::HostFacts::detect(),
        )?;
        if a.json {
            crate::outln!("{}", serde_json::to_string_pretty(&plan)?)?;
        } else {
            // `render` escapes every value itself.
            for line in crate::build::plan::render(&plan).lines() {
                crate::outln!("{line}")?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    match crate::build::build_with(&a.options(), a.force, &recipe, recipe_root.as_deref(), ui)? {
        Outcome::Built(dir) => {
            crate::outln!("{}", dir.display())?;
            Ok(ExitCode::SUCCESS)
        }
        Outcome::CheckFailed(err) => Err(err),
        Outcome::Control(_) => unreachable!("only prove builds controls"),
    }
}
