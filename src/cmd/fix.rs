//! `rcclfix fix` (issue 37): the arguments, the call into [`crate::fix`], and the
//! rendering of the plan (text, or `--json`), of `--list` and of `--undo`.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::fix::{self, Decision, Plan};
use crate::ui::{escape, escape_path, Ui};

/// The subcommand's arguments (clap): `rcclfix fix`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
--dry-run plans for every copy. Applying: a copy nobody owns is replaced in place; a pip-owned
copy gets an overlay wheel installed with its environment's pip (give --python); a dpkg-owned
copy gets a .deb overlay (dpkg-divert) installed with apt (as root).
The rewritten kernels have not run on AMD hardware here: run `rcclfix verify --lib FILE` first.

Exit codes:
  0  every copy is not affected or proven (dry run); applied; undone
  1  a copy's patch is refused because hostcall code is present
  2  a copy could not be decided or read; applying is not possible; an error")]
pub struct Args {
    /// Only plan: change nothing on disk.
    #[arg(long, conflicts_with_all = ["list", "undo", "all", "yes"])]
    pub dry_run: bool,
    /// Search this Python's environment (its site-packages, torch/lib, TheRock's
    /// _rocm_sdk_libraries/lib) and its consumers' bindings; repeatable.
    #[arg(long, value_name = "PYTHON")]
    pub python: Vec<PathBuf>,
    /// Search DIR/lib (a ROCm install such as /opt/rocm-7.2.0); repeatable.
    #[arg(long, value_name = "DIR")]
    pub rocm: Vec<PathBuf>,
    /// This librccl; repeatable.
    #[arg(long, value_name = "FILE")]
    pub library: Vec<PathBuf>,
    /// Judge and patch only these gfx targets (comma-separated; default: every target a copy
    /// carries).
    #[arg(long, value_delimiter = ',')]
    pub target: Vec<String>,
    /// Print the plan (or --list) as JSON on stdout.
    #[arg(long, conflicts_with = "yes")]
    pub json: bool,
    /// Apply: replace every proven copy nobody owns, install an overlay wheel for every proven
    /// pip-owned copy (required to change anything); the plan goes to stderr and each fix's ID
    /// to stdout.
    #[arg(long)]
    pub yes: bool,
    /// List the fixes kept in $RCCLFIX_HOME/fixes/.
    #[arg(long, conflicts_with_all = ["undo", "all", "yes"])]
    pub list: bool,
    /// Undo fix ID (from --list), or every kept fix with `--undo --all`: give each file its
    /// original bytes back.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub undo: Option<String>,
    /// With --undo: every kept fix.
    #[arg(long, requires = "undo")]
    pub all: bool,
    /// Read sysfs from this directory instead of /sys (whether this is a virtual machine).
    #[arg(long, value_name = "DIR", default_value = "/sys", hide = true)]
    pub sysfs: PathBuf,
    /// Read procfs from this directory instead of /proc.
    #[arg(long, value_name = "DIR", default_value = "/proc", hide = true)]
    pub proc: PathBuf,
}

/// Run `fix`. With neither `--python`, `--rocm` nor `--library`, the whole machine is searched
/// (doctor's discovery, the ld.so cache).
///
/// Errors: `--python` cannot run the interpreter; a `--library` is not a regular file; applying
/// fails (exit 2 via `main`).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    if a.list {
        return list(a.json);
    }
    if let Some(id) = &a.undo {
        return match (id.as_str(), a.all) {
            ("", true) => undo(None),
            ("", false) => anyhow::bail!("--undo needs a fix ID (rcclfix fix --list) or --all"),
            (_, true) => anyhow::bail!("--undo takes a fix ID or --all, not both"),
            (id, false) => undo(Some(id)),
        };
    }
    let mut python_roots = Vec::new();
    let mut pythons = Vec::new();
    for py in &a.python {
        let roots = super::scan::python_env(py)?.roots;
        python_roots.extend(roots.iter().cloned());
        // The interpreter as given (a venv's bin/python is a link to the base interpreter,
        // which would run outside the venv).
        pythons.push((std::path::absolute(py)?, roots));
    }
    let sources = fix::Sources {
        machine: a.python.is_empty() && a.rocm.is_empty() && a.library.is_empty(),
        libraries: a.library.clone(),
        rocm: a.rocm.clone(),
        python_roots,
        pythons,
    };
    let mut plan = fix::plan(&sources, &a.target)?;
    plan.vm = fix::vm_first(&a.sysfs, &a.proc);
    if a.json {
        crate::outln!("{}", serde_json::to_string_pretty(&plan)?)?;
    } else if a.yes {
        // Applying: stdout carries the IDs of the fixes made; the plan goes to stderr.
        crate::err!("{}", render(&plan));
    } else {
        crate::out!("{}", render(&plan))?;
    }
    if a.dry_run {
        return Ok(ExitCode::from(plan.exit_code()));
    }
    if !a.yes {
        crate::ui::note("nothing was changed: this was the plan; add --yes to apply it (or --dry-run to only plan)");
        return Ok(ExitCode::from(plan.exit_code()));
    }
    apply(&plan)
}

/// Apply the plan: refuse before anything changes when a proven copy is owned (pip, dpkg) or its
/// owner unknown; then replace each unowned proven copy.
fn apply(plan: &Plan) -> anyhow::Result<ExitCode> {
    let proven: Vec<&fix::Copy> = plan
        .copies
        .iter()
        .filter(|c| {
            matches!(
                c.decision,
                Decision::Patch { .. } | Decision::PatchAsserts { .. }
            )
        })
        .collect();
    let owned: Vec<String> = proven
        .iter()
        .filter(|c| !applicable(c))
        .map(|c| {
            format!(
                "{} ({}): {}",
                escape_path(&c.path),
                escape(&c.owner.describe()),
                c.apply
            )
        })
        .collect();
    if !owned.is_empty() {
        anyhow::bail!(
            "these copies cannot be applied to (see their apply line); nothing was changed:\n  {}",
            owned.join("\n  ")
        );
    }
    if proven.is_empty() {
        crate::ui::message("nothing to apply: no copy is both affected and proven");
        return Ok(ExitCode::from(plan.exit_code()));
    }
    for c in proven {
        let kind = |r: &fix::FixRecord| {
            if r.asserts {
                "patch --asserts"
            } else {
                "patch"
            }
        };
        let (r, checks) = match (&c.owner, &c.python) {
            (fix::Owner::Pip { .. }, Some(py)) => {
                let r = fix::pip::apply(c, &plan.targets, py)?;
                let pip = r.pip.as_ref().expect("a pip fix has its pip part");
                crate::ui::status(
                    "Fixed",
                    format!(
                        "{} ({}; fix {}: {} installed with {} -m pip{}; {} untouched)",
                        escape_path(&r.path),
                        kind(&r),
                        r.id,
                        escape(&pip.wheel),
                        escape_path(&pip.python),
                        pip.soname
                            .as_ref()
                            .map(|s| format!(", SONAME {}", escape(s)))
                            .unwrap_or_default(),
                        escape_path(&r.path),
                    ),
                );
                let checks = fix::pip::check(c, &r);
                (r, checks)
            }
            (fix::Owner::Dpkg { .. }, _) => {
                let r = fix::dpkg::apply(c, &plan.targets)?;
                let d = r.dpkg.as_ref().expect("a dpkg fix has its dpkg part");
                crate::ui::status(
                    "Fixed",
                    format!(
                        "{} ({}; fix {}: {} installed with apt, diverting the {} file)",
                        escape_path(&r.path),
                        kind(&r),
                        r.id,
                        escape(&d.deb),
                        escape(&d.owner_package),
                    ),
                );
                let checks = fix::dpkg::check(c, &r);
                (r, checks)
            }
            _ => {
                let r = fix::apply::apply(c, &plan.targets)?;
                crate::ui::status(
                    "Fixed",
                    format!(
                        "{} ({}; fix {}, original kept in {})",
                        escape_path(&r.path),
                        kind(&r),
                        r.id,
                        fix::apply::fixes_dir().join(&r.id).display()
                    ),
                );
                let checks = fix::apply::check_bindings(c, &r);
                (r, checks)
            }
        };
        crate::outln!("{}", r.id)?;
        let mut wrong = 0;
        for line in checks {
            match line {
                Ok(l) => crate::ui::status("Checked", escape(&l)),
                Err(l) => {
                    wrong += 1;
                    crate::ui::warn(escape(&l));
                }
            }
        }
        if wrong > 0 {
            anyhow::bail!(
                "{}: fixed as {}, but {wrong} consumer(s) do not bind the fixed file (above); rcclfix fix --undo {} takes it back",
                escape_path(&r.path),
                r.id,
                r.id
            );
        }
    }
    crate::ui::warn(fix::UNVERIFIED);
    crate::ui::note(fix::PROOF_CAVEAT);
    Ok(ExitCode::from(plan.exit_code()))
}

/// Whether `fix --yes` can apply to this proven copy: nobody owns it, or pip does, its
/// `RECORD` hash matches and its environment's interpreter was given.
fn applicable(c: &fix::Copy) -> bool {
    match &c.owner {
        fix::Owner::None | fix::Owner::Dpkg { .. } => true,
        fix::Owner::Pip {
            record_hash_matches: Some(true),
            ..
        } => c.python.is_some(),
        _ => false,
    }
}

fn list(json: bool) -> anyhow::Result<ExitCode> {
    let fixes = fix::apply::list()?;
    if json {
        crate::outln!("{}", serde_json::to_string_pretty(&fixes)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if fixes.is_empty() {
        crate::ui::message(format_args!(
            "no fixes kept in {}",
            fix::apply::fixes_dir().display()
        ));
    }
    for f in &fixes {
        match &f.record {
            Some(r) => crate::outln!(
                "{}  {}  {}  {}",
                f.id,
                if r.asserts {
                    "patch --asserts"
                } else {
                    "patch"
                },
                escape_path(&r.path),
                escape(&f.state)
            )?,
            None => crate::outln!("{}  {}", escape(&f.id), escape(&f.state))?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn undo(id: Option<&str>) -> anyhow::Result<ExitCode> {
    let ids: Vec<String> = match id {
        Some(i) => vec![i.to_string()],
        None => fix::apply::list()?.into_iter().map(|f| f.id).collect(),
    };
    if ids.is_empty() {
        crate::ui::message("no fixes to undo");
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = Vec::new();
    for i in &ids {
        match fix::apply::undo(i) {
            Ok(r) => crate::ui::status(
                "Undone",
                format!(
                    "{} (sha256 {}, fix {})",
                    escape_path(&r.path),
                    r.original_sha256,
                    r.id
                ),
            ),
            Err(e) if ids.len() == 1 => return Err(e),
            Err(e) => {
                crate::ui::warn(format!("fix {}: {}", escape(i), escape(&format!("{e:#}"))));
                failed.push(i.clone());
            }
        }
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} fixes not undone: {}",
            failed.len(),
            ids.len(),
            failed.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The plan as text: one block per copy.
pub fn render(plan: &Plan) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if plan.copies.is_empty() {
        let _ = writeln!(s, "no librccl found");
    }
    for c in &plan.copies {
        let _ = writeln!(s, "{}", escape_path(&c.path));
        for p in c.seen_as.iter().filter(|p| **p != c.path) {
            let _ = writeln!(s, "  also as   {}", escape_path(p));
        }
        let _ = writeln!(s, "  found via {}", escape(&c.found_via.join("; ")));
        for b in &c.consumers {
            let _ = writeln!(
                s,
                "  bound by  {} (DT_NEEDED {}, {})",
                escape_path(&b.consumer),
                escape(&b.needed),
                escape(&b.via)
            );
        }
        let _ = writeln!(s, "  owner     {}", escape(&c.owner.describe()));
        if let fix::Owner::Pip {
            record_hash_matches: Some(false),
            ..
        } = &c.owner
        {
            let _ = writeln!(
                s,
                "            (its sha256 is not the one its RECORD gives: already changed)"
            );
        }
        let _ = writeln!(s, "  sha256    {}", c.sha256);
        let _ = write!(s, "  decision  {}", c.decision.short());
        match &c.decision {
            Decision::NotAffected { targets } => {
                let _ = writeln!(s, " ({})", targets.join(", "));
            }
            Decision::Patch {
                targets,
                kernels,
                images,
            } => {
                let _ = writeln!(
                    s,
                    " ({}: {kernels} kernel argument(s) in {images} code object(s))",
                    targets.join(", ")
                );
            }
            Decision::PatchAsserts {
                targets,
                kernels,
                images,
                functions_filled,
                plain_refusal,
            } => {
                let _ = writeln!(s, " ({}: {kernels} kernel argument(s) in {images} code object(s), {functions_filled} function(s) filled with s_trap 2)", targets.join(", "));
                let _ = writeln!(
                    s,
                    "            plain patch refused: {}",
                    escape(plain_refusal)
                );
            }
            Decision::Refused { why, .. } => {
                let _ = writeln!(s, ": {}", escape(why));
                let rebuild = c.rebuild.as_ref().map_or_else(
                    || crate::doctor::release::RELEASE_UNKNOWN.to_string(),
                    fix::release::describe,
                );
                let _ = writeln!(s, "            the rebuild: {}", escape(&rebuild));
            }
        }
        let _ = writeln!(s, "  apply     {}", c.apply);
    }
    for u in &plan.unread {
        let _ = writeln!(s, "not read: {}: {}", escape_path(&u.path), escape(&u.why));
    }
    if let Some(vm) = &plan.vm {
        let _ = writeln!(s, "caveat: {vm}");
    }
    let _ = writeln!(s, "caveat: {}", plan.unverified);
    let _ = writeln!(s, "caveat: {}", plan.proof_caveat);
    s
}
