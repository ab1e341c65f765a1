//! `rcclfix prove`: the control build without NDEBUG beside the recipe's fix, compared kernel by kernel.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::build::prove::ProveOptions;
use crate::ui::Ui;

/// Arguments of `rcclfix prove`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The recipe to prove: an RCCL version or recipe name (see `build --list`).
    #[arg(
        value_name = "RECIPE",
        conflicts_with = "recipe",
        required_unless_present = "recipe"
    )]
    pub tag: Option<String>,
    /// Prove a recipe file from disk instead of an embedded recipe.
    #[arg(long, value_name = "FILE")]
    pub recipe: Option<PathBuf>,
    /// Everything else as for `rcclfix build`.
    #[command(flatten)]
    pub build: ProveBuildArgs,
}

/// The `build` options `prove` passes on to both builds.
#[derive(Debug, clap::Args)]
pub struct ProveBuildArgs {
    /// gfx targets to build and gate, comma-separated (default: the recipe's).
    #[arg(long, value_delimiter = ',', value_name = "GFX,…")]
    pub targets: Vec<String>,
    /// Clone from this local git mirror instead of the recipe URL (offline use).
    #[arg(long, value_name = "PATH", env = "RCCLFIX_GIT_MIRROR")]
    pub git_mirror: Option<PathBuf>,
    /// Container engine (default: podman, then docker, then bubblewrap; also RCCLFIX_ENGINE).
    #[arg(long, value_enum)]
    pub engine: Option<crate::container::EngineKind>,
    /// Where the fix's output folder and the prove record go.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub out_dir: PathBuf,
    /// ninja -j, at least 1 (default: as `build` chooses it; ninja's own `-j0` would mean
    /// unlimited).
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Refuse to pin an unpinned tag on first fetch.
    #[arg(long)]
    pub locked: bool,
    /// Allow recipes whose status is experimental or unfixable-by-rebuild.
    #[arg(long)]
    pub experimental: bool,
}

impl ProveBuildArgs {
    /// The domain's options.
    pub fn options(&self) -> ProveOptions {
        ProveOptions {
            targets: self.targets.clone(),
            git_mirror: self.git_mirror.clone(),
            engine: self.engine,
            out_dir: self.out_dir.clone(),
            jobs: self.jobs,
            locked: self.locked,
            experimental: self.experimental,
        }
    }
}

/// Run both builds, write `prove.json`, print the table and the record's path on stdout.
///
/// Errors: either build errors (exit 2); a proof that does not hold (control clean or unknown,
/// fix failed, declaring kernels absent from the fix) is a [`crate::CheckFailed`] carrying the
/// record's summary (exit 1). The table is escaped ([`crate::build::prove::render`]).
pub fn run(a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    let (recipe, recipe_root) =
        crate::build::resolve_recipe(a.tag.as_deref(), a.recipe.as_deref())?;
    let opts = a.build.options();
    let record = crate::build::prove::prove(&opts, &recipe, recipe_root.as_deref(), ui)?;
    let path = crate::build::prove::write_record(&opts.out_dir, &record)?;
    crate::out!("{}", crate::build::prove::render(&record))?;
    crate::outln!("{}", path.display())?;
    if record.verdict == "proven" {
        ui.status("Proven", &record.summary);
        Ok(ExitCode::SUCCESS)
    } else {
        Err(crate::CheckFailed::new(record.summary).into())
    }
}
