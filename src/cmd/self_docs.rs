//! `rcclfix self-docs --out-dir DIR` (hidden): the shell completions and man pages, generated
//! from the clap definitions (`cmd/cli.rs` and each subcommand's `Args`) with `clap_complete` and
//! `clap_mangen`, so they never drift from `--help`.
//!
//! Writes, each through a temporary file renamed into place ([`crate::fsutil::atomic_write`]):
//! - `DIR/completions/rcclfix.bash`, `DIR/completions/_rcclfix` (zsh), `DIR/completions/rcclfix.fish`;
//! - `DIR/man/man1/rcclfix.1` and one page per visible subcommand, nested ones included
//!   (`rcclfix-build.1`, `rcclfix-toolchain-build.1`, …), as `clap_mangen::generate_to` names them.
//!
//! `rcclfix self-wheel` runs the carried executable's `self-docs` and ships the files in the wheel
//! under the environment's `share/` ([`prefix_path`]); `cargo xtask docs` runs it from the
//! release build.

use std::path::PathBuf;
use std::process::ExitCode;

use clap_complete::Generator as _;

use crate::ui::Ui;

/// The name the completions complete and the man pages document.
pub const BIN: &str = "rcclfix";

/// The subcommand's arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder to write into (created if missing; must be a folder if it exists).
    #[arg(long, alias = "out", value_name = "DIR")]
    pub out_dir: PathBuf,
}

/// A generated file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocFile {
    /// Its path under `--out-dir`, `/`-separated: `completions/<file>` or `man/man1/<page>.1`.
    pub path: String,
    /// Its contents (a shell script, or a roff man page).
    pub bytes: Vec<u8>,
}

/// The shells completions are written for.
const SHELLS: [clap_complete::Shell; 3] = [
    clap_complete::Shell::Bash,
    clap_complete::Shell::Zsh,
    clap_complete::Shell::Fish,
];

/// Every completion script and man page for `cmd` (the whole command line, `Cli::command()`, not
/// yet built): the three completions first, then the man pages, `rcclfix.1` first and each
/// subcommand's page after its parent's. Hidden subcommands and arguments are in neither (the
/// completions are made from [`visible_tree`]). Man pages carry no date, so the same definitions
/// give the same bytes.
///
/// Errors: a generator fails to write into memory (not expected).
pub fn generate(cmd: &clap::Command) -> anyhow::Result<Vec<DocFile>> {
    let mut out = vec![];
    let visible = visible_tree(cmd);
    for shell in SHELLS {
        let mut bytes = vec![];
        clap_complete::generate(shell, &mut visible.clone(), BIN, &mut bytes);
        out.push(DocFile {
            path: format!("completions/{}", shell.file_name(BIN)),
            bytes,
        });
    }
    // As clap_mangen::generate_to: no `help` subcommand page, display names (`rcclfix-build`)
    // set by one build of the whole tree.
    let mut cmd = cmd.clone().bin_name(BIN).disable_help_subcommand(true);
    cmd.build();
    let source = format!("{BIN} {}", cmd.get_version().unwrap_or_default());
    man_pages(cmd, &source, &mut out)?;
    Ok(out)
}

/// `cmd` without its hidden subcommands and arguments, at every level. clap_complete's scripts
/// offer hidden ones too (clap-rs/clap issue 1335; clap_mangen leaves them out), and a
/// `clap::Command` cannot drop a subcommand or argument, so a command that has hidden ones is
/// rebuilt from its parts: name, about, version, visible aliases, the help and version settings,
/// its visible arguments, the groups of those, and its visible subcommands. What a completion
/// script does not read (help templates, `after_help`) is left behind.
pub fn visible_tree(cmd: &clap::Command) -> clap::Command {
    let hides = cmd.get_subcommands().any(|s| s.is_hide_set())
        || cmd.get_arguments().any(|a| a.is_hide_set());
    let mut out = if hides {
        rebuild_visible(cmd)
    } else {
        cmd.clone()
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out = out.mut_subcommand(sub.get_name(), |s| visible_tree(&s));
    }
    out
}

/// [`visible_tree`]'s rebuild of one command (its subcommands are copied as they are).
fn rebuild_visible(cmd: &clap::Command) -> clap::Command {
    let args: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .cloned()
        .collect();
    let kept = |id: &clap::Id| args.iter().any(|a| a.get_id() == id);
    let groups: Vec<clap::ArgGroup> = cmd
        .get_groups()
        .filter(|g| g.get_args().all(kept))
        .cloned()
        .collect();
    let mut out = clap::Command::new(cmd.get_name().to_owned())
        .visible_aliases(
            cmd.get_visible_aliases()
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
        .propagate_version(cmd.is_propagate_version_set())
        .disable_help_flag(cmd.is_disable_help_flag_set())
        .disable_version_flag(cmd.is_disable_version_flag_set())
        .disable_help_subcommand(cmd.is_disable_help_subcommand_set())
        .args(args)
        .groups(groups)
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(a) = cmd.get_about() {
        out = out.about(a.clone());
    }
    if let Some(a) = cmd.get_long_about() {
        out = out.long_about(a.clone());
    }
    if let Some(v) = cmd.get_version() {
        out = out.version(v.to_owned());
    }
    if let Some(v) = cmd.get_long_version() {
        out = out.long_version(v.to_owned());
    }
    out
}

/// The page of `cmd`, then its visible subcommands' pages. `source`: `.TH`'s fourth argument
/// (`rcclfix <version>`, the footer's left side) on every page; clap_mangen's default names the
/// subcommand alone.
fn man_pages(cmd: clap::Command, source: &str, out: &mut Vec<DocFile>) -> anyhow::Result<()> {
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let title = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_uppercase();
    // No date (the same definitions give the same bytes). roff 1.1 writes an empty `.TH`
    // argument as nothing, which moves the source into the date's place; `\&` is an argument
    // that prints nothing.
    let man = clap_mangen::Man::new(cmd)
        .title(title)
        .date("\\&")
        .source(source);
    let mut bytes = vec![];
    man.render(&mut bytes)?;
    out.push(DocFile {
        path: format!("man/man1/{}", man.get_filename()),
        bytes,
    });
    for sub in subs {
        man_pages(sub, source, out)?;
    }
    Ok(())
}

/// Where an installation prefix (a venv, `/usr/local`) keeps a file [`generate`] writes at
/// `path`: `share/bash-completion/completions/`, `share/zsh/site-functions/`,
/// `share/fish/vendor_completions.d/` or `share/man/man1/` and the file's name; `None` for a path
/// `generate` does not write. The tool wheel installs them there through its `.data/data/` tree.
///
/// Sources: bash-completion's `__load_completion` (a `completions/` folder under each data
/// folder, `<cmd>.bash` looked up), zsh's `site-functions` on `fpath`, fish's
/// `vendor_completions.d`, man-db's manpath(5) (`<prefix>/share/man` for `<prefix>/bin` on PATH).
pub fn prefix_path(path: &str) -> Option<String> {
    let (dir, name) = path.rsplit_once('/')?;
    if name.is_empty() || name.starts_with('.') {
        return None;
    }
    let share = match (dir, name) {
        ("completions", n) if n.ends_with(".bash") => "bash-completion/completions",
        ("completions", n) if n.starts_with('_') => "zsh/site-functions",
        ("completions", n) if n.ends_with(".fish") => "fish/vendor_completions.d",
        ("man/man1", n) if n.ends_with(".1") => "man/man1",
        _ => return None,
    };
    Some(format!("share/{share}/{name}"))
}

/// Write every file of [`generate`] under `a.out_dir`; print each path on stdout.
///
/// Errors (one line, naming the path): `--out-dir` exists and is not a folder (or a link to one),
/// a folder cannot be created, or a write fails (`main` prints it and exits 2).
pub fn run(a: Args, cmd: clap::Command, ui: &Ui) -> anyhow::Result<ExitCode> {
    crate::fsutil::check_output_dir(&a.out_dir)?;
    let files = generate(&cmd)?;
    let root = crate::fsutil::OutDir::create(&a.out_dir)?;
    let mut bytes = 0;
    for f in &files {
        let dest = root.path().join(&f.path);
        if let Some(parent) = dest.parent() {
            fs_err::create_dir_all(parent)?;
        }
        crate::fsutil::atomic_write(&dest, &f.bytes)?;
        bytes += f.bytes.len();
        crate::outln!("{}", dest.display())?;
    }
    ui.status(
        "Wrote",
        format!(
            "{} completions and {} man pages into {} ({:.1} kB)",
            SHELLS.len(),
            files.len() - SHELLS.len(),
            crate::ui::escape_path(&a.out_dir),
            bytes as f64 / 1e3
        ),
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_leave_out_hidden_subcommands_and_arguments() {
        let cmd = clap::Command::new(BIN)
            .version("1")
            .arg(
                clap::Arg::new("loud")
                    .long("loud")
                    .global(true)
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(
                clap::Arg::new("secret-flag")
                    .long("secret-flag")
                    .hide(true)
                    .action(clap::ArgAction::SetTrue),
            )
            .subcommand(
                clap::Command::new("shown")
                    .about("Shown.")
                    .arg(clap::Arg::new("deep-secret").long("deep-secret").hide(true))
                    .arg(clap::Arg::new("opt").long("opt"))
                    .subcommand(clap::Command::new("inner-hidden").hide(true))
                    .subcommand(clap::Command::new("inner")),
            )
            .subcommand(clap::Command::new("internal-only").hide(true));
        let files = generate(&cmd).unwrap();
        for f in &files[..SHELLS.len()] {
            let text = String::from_utf8_lossy(&f.bytes);
            for word in ["shown", "inner", "loud", "opt"] {
                assert!(text.contains(word), "{}: no {word}", f.path);
            }
            for word in [
                "secret-flag",
                "deep-secret",
                "inner-hidden",
                "internal-only",
            ] {
                assert!(!text.contains(word), "{}: {word}", f.path);
            }
        }
        // The rebuilt root keeps what it had besides the hidden parts.
        let v = visible_tree(&cmd);
        assert_eq!(v.get_version(), Some("1"));
        let names: Vec<&str> = v.get_subcommands().map(|s| s.get_name()).collect();
        assert_eq!(names, ["shown"]);
        let shown = v.find_subcommand("shown").unwrap();
        assert_eq!(shown.get_about().unwrap().to_string(), "Shown.");
        let args: Vec<&str> = shown.get_arguments().map(|a| a.get_id().as_str()).collect();
        assert_eq!(args, ["opt"]);
    }

    #[test]
    fn every_generated_path_has_a_place_under_a_prefix() {
        let cmd = clap::Command::new(BIN)
            .version("1")
            .subcommand(clap::Command::new("a").about("A."))
            .subcommand(clap::Command::new("h").hide(true))
            .subcommand(clap::Command::new("b").subcommand(clap::Command::new("c")));
        let files = generate(&cmd).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "completions/rcclfix.bash",
                "completions/_rcclfix",
                "completions/rcclfix.fish",
                "man/man1/rcclfix.1",
                "man/man1/rcclfix-a.1",
                "man/man1/rcclfix-b.1",
                "man/man1/rcclfix-b-c.1",
            ]
        );
        let prefixed: Vec<String> = paths.iter().map(|p| prefix_path(p).unwrap()).collect();
        assert_eq!(
            prefixed[..4],
            [
                "share/bash-completion/completions/rcclfix.bash",
                "share/zsh/site-functions/_rcclfix",
                "share/fish/vendor_completions.d/rcclfix.fish",
                "share/man/man1/rcclfix.1",
            ]
        );
        for bad in [
            "completions/x.sh",
            "man/man1/.1",
            "man/x.1",
            "rcclfix.1",
            "completions/",
        ] {
            assert_eq!(prefix_path(bad), None, "{bad}");
        }
    }
}
