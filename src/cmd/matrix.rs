//! `rcclfix matrix`: the recipes per ROCm release, as a table or a CI matrix, and `--check` (the
//! recipe lint rules of [`crate::recipe::check`]). The arguments, the calls and the rendering.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::matrix;
use crate::recipe::check;
use crate::ui::Ui;

/// The subcommand's arguments (clap): `rcclfix matrix`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the GitHub Actions matrix (`{"include":[…]}`, one line) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Statuses to include, comma-separated: verified, expected, experimental,
    /// unfixable-by-rebuild, or all. Default: every buildable status (all but unfixable-by-rebuild).
    #[arg(long, value_delimiter = ',', value_name = "STATUS")]
    pub status: Vec<String>,
    /// gfx targets for every entry, comma-separated (default: each recipe's own `build.targets`).
    #[arg(long, value_delimiter = ',', value_name = "GFX")]
    pub targets: Vec<String>,
    /// One entry per recipe with all targets joined (`"gfx1100,gfx1201"`) instead of one entry per
    /// target.
    #[arg(long)]
    pub joined: bool,
    /// Check every embedded recipe for consistency against the checkout at `--root` (and the git
    /// mirror, when given); print one line per problem; exit 1 when there is one.
    #[arg(long)]
    pub check: bool,
    /// The repository checkout whose `containers/` and `recipes/records/` `--check` reads.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub root: PathBuf,
    /// A bare git mirror of the recipes' source repository, for `--check` to verify commit pins and
    /// `makefiles/version.mk` at each tag it has.
    #[arg(long, env = "RCCLFIX_GIT_MIRROR", value_name = "GIT_DIR")]
    pub git_mirror: Option<PathBuf>,
}

/// Run the subcommand: the table, the JSON matrix, or `--check` (one line per problem on stdout).
///
/// Errors: an unreadable `--root` or `--git-mirror`, a mirror holding no recipe's tag, an unknown
/// status or target; problems found by `--check` are a [`crate::CheckFailed`] (exit 1).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    let all = crate::recipe::embedded()?;
    if a.check {
        // What cannot be read is an error (2), never "no problem" or a list of problems.
        if !a.root.is_dir() {
            anyhow::bail!(
                "--root {}: not a folder (the rcclfix checkout whose containers/ and recipes/records/ --check reads)",
                a.root.display()
            );
        }
        if let Some(m) = &a.git_mirror {
            check::require_git_mirror(m)?;
        }
        let lock = check::embedded_lockfile()?;
        let report = check::check_all(&all, &a.root, &lock, a.git_mirror.as_deref());
        for n in &report.notes {
            crate::ui::note(n);
        }
        for d in &report.drift {
            crate::ui::warn(d);
        }
        for p in &report.problems {
            crate::outln!("{p}")?;
        }
        if let (true, Some(m)) = (report.problems.is_empty(), &a.git_mirror) {
            if report.mirror_confirmed.is_empty() {
                anyhow::bail!(
                    "--git-mirror {}: holds no tag of any recipe, so nothing was checked against it\nhelp: mirror the recipes' source repository (ROCm/rccl or ROCm/rocm-systems) with its tags",
                    m.display()
                );
            }
        }
        if report.problems.is_empty() {
            crate::ui::status("Checked", format!("{} recipes, no problem", all.len()));
            return Ok(ExitCode::SUCCESS);
        }
        return Err(crate::CheckFailed::new(format!(
            "{} recipe problem(s)",
            report.problems.len()
        ))
        .into());
    }
    let filter = matrix::StatusFilter::parse(&a.status)?;
    let targets = if a.targets.is_empty() {
        None
    } else {
        Some(a.targets.as_slice())
    };
    let entries = matrix::entries(&all, &filter, targets, a.joined)?;
    if a.json {
        crate::outln!("{}", matrix::github_matrix_json(&entries)?)?;
    } else {
        crate::out!("{}", matrix::table(&entries, &all))?;
        let hidden = all.values().filter(|r| !filter.accepts(r.status)).count();
        if hidden > 0 {
            crate::ui::message(format_args!(
                "({hidden} recipe(s) with other statuses hidden; --status all shows them)"
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}
