//! `rcclfix recipe`: recipe maintenance (`recipe list`, `recipe show`, `recipe pin`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::recipe::Recipe;
use crate::ui::Ui;

/// `rcclfix recipe …`
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: RecipeCmd,
}

#[derive(Debug, clap::Subcommand)]
enum RecipeCmd {
    /// List the embedded recipes.
    List,
    /// Print one recipe as resolved (TOML).
    Show {
        /// Recipe name or RCCL version.
        tag: String,
    },
    /// Resolve unpinned tags to commits where the network (or a mirror) allows; write the lockfile.
    Pin(PinArgs),
}

/// Arguments of `rcclfix recipe pin`.
#[derive(Debug, clap::Args)]
pub struct PinArgs {
    /// Recipes to pin (names or RCCL versions); default: every embedded recipe.
    tags: Vec<String>,
    /// A recipe file instead of the embedded recipes.
    #[arg(long, value_name = "FILE", conflicts_with = "tags")]
    recipe: Option<PathBuf>,
    /// Resolve tags in this local git mirror instead of the recipe URLs.
    #[arg(long, value_name = "PATH", env = "RCCLFIX_GIT_MIRROR")]
    git_mirror: Option<PathBuf>,
    /// The lockfile to write (default: $RCCLFIX_HOME/rcclfix.lock; maintainers: recipes/rcclfix.lock).
    #[arg(long, value_name = "FILE")]
    lockfile: Option<PathBuf>,
}

/// Run the subcommand: `list` and `show` print on stdout; `pin` prints one row per recipe on
/// stdout as each tag is resolved and exits 2 when a tag is missing, unreachable or differs from
/// its pin.
///
/// Errors: an unknown recipe; a recipe file or the lockfile cannot be read or written.
pub fn run(a: Args, ui: &Ui) -> anyhow::Result<ExitCode> {
    match a.cmd {
        RecipeCmd::List => {
            crate::out!("{}", crate::recipe::list_table(&crate::recipe::embedded()?))?;
            Ok(ExitCode::SUCCESS)
        }
        RecipeCmd::Show { tag } => {
            let all = crate::recipe::embedded()?;
            crate::out!(
                "{}",
                toml::to_string_pretty(crate::recipe::find(&all, &tag)?)?
            )?;
            Ok(ExitCode::SUCCESS)
        }
        RecipeCmd::Pin(p) => pin(p, ui),
    }
}

fn pin(a: PinArgs, ui: &Ui) -> anyhow::Result<ExitCode> {
    let recipes: Vec<Recipe> = match &a.recipe {
        Some(f) => vec![crate::recipe::load_file(f)?],
        None => {
            let all = crate::recipe::embedded()?;
            if a.tags.is_empty() {
                all.into_values().collect()
            } else {
                a.tags
                    .iter()
                    .map(|t| crate::recipe::find(&all, t).cloned())
                    .collect::<anyhow::Result<_>>()?
            }
        }
    };
    let opts = crate::source::PinOptions {
        git_mirror: a.git_mirror,
        lockfile: a.lockfile.unwrap_or_else(crate::source::user_lockfile),
    };
    // A mirror that is not a repository folder is refused before the table starts.
    if let Some(m) = &opts.git_mirror {
        crate::source::mirror_origin(m)?;
    }
    // A folder cannot become the lockfile: say so before any row claims a pin.
    let lf = &opts.lockfile;
    if lf.is_dir() || lf.as_os_str().as_encoded_bytes().ends_with(b"/") {
        anyhow::bail!(
            "--lockfile {} is a folder; give the lockfile's file name",
            crate::ui::escape_path(lf)
        );
    }
    // Rows print as each tag is resolved, so the widths come from the recipes up front.
    let wid = recipes
        .iter()
        .map(|r| r.id().chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let wtag = recipes
        .iter()
        .map(|r| r.source.rev_name().chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    crate::outln!(
        "{:<wid$}  {:<wtag$}  {:<40}  STATE",
        "RECIPE",
        "TAG",
        "COMMIT"
    )?;
    let mut failed = 0usize;
    let mut write_error = None;
    let outcome = crate::source::pin(&recipes, &opts, |row| {
        // Recipe names and refs are checked when the recipe is parsed; escaped all the same.
        let esc = crate::ui::escape;
        if !row.ok {
            failed += 1;
        }
        if let Err(e) = crate::outln!(
            "{:<wid$}  {:<wtag$}  {:<40}  {}",
            esc(&row.recipe),
            esc(&row.rev),
            esc(&row.commit),
            esc(&row.state)
        ) {
            write_error.get_or_insert(e);
        }
    })?;
    if let Some(e) = write_error {
        return Err(e.into());
    }
    if let Some(p) = &outcome.wrote {
        ui.status("Wrote", p.display());
    }
    if !outcome.all_ok {
        anyhow::bail!(
            "{} recipe(s) could not be pinned: see the STATE column",
            failed.max(1)
        );
    }
    Ok(ExitCode::SUCCESS)
}
