//! `rcclfix self-docs`: the shell completions and man pages generated from the clap
//! definitions, checked against clap's own list of subcommands (`Cli::command()`), never a list
//! written here. The bash completion is run in a real bash; the man pages are read as roff text
//! (no groff or man needed).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use clap::CommandFactory as _;

use crate::package::ok;
use crate::support::rcclfix;

/// The visible subcommands of `cmd` (built, so clap's own `help` is among them), each with its
/// path of names from the root, at every level.
fn visible_paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let path = [prefix, &[sub.get_name().to_owned()]].concat();
        out.push(path.clone());
        visible_paths(sub, &path, out);
    }
}

fn cli() -> clap::Command {
    let mut c = rcclfix::cmd::cli::Cli::command();
    c.build();
    c
}

/// Run `rcclfix self-docs --out-dir <dir>` and return its stdout.
fn self_docs(dir: &Path) -> String {
    ok(rcclfix().args(["-q", "self-docs", "--out-dir"]).arg(dir))
}

/// The words bash's completion offers after `words` (the cursor on a new, empty word), as
/// bash-completion calls the function: `_rcclfix <cmd> <cur> <prev>`.
fn bash_complete(script: &Path, words: &[&str]) -> BTreeSet<String> {
    let mut argv: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    argv.push(String::new());
    let program = r#"source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ));
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE};
_rcclfix rcclfix "" "${COMP_WORDS[COMP_CWORD-1]}"; printf '%s\n' "${COMPREPLY[@]}""#;
    let out = ok(Command::new("bash")
        .arg("-c")
        .arg(program)
        .arg("bash")
        .arg(script)
        .args(&argv));
    out.lines().map(str::to_owned).collect()
}

#[test]
fn the_bash_completion_offers_every_visible_subcommand_and_no_hidden_one() {
    let t = tempfile::tempdir().unwrap();
    self_docs(t.path());
    let script = t.path().join("completions/rcclfix.bash");
    let cli = cli();
    let mut commands = vec![vec![]];
    visible_paths(&cli, &[], &mut commands);
    let mut checked = 0;
    for path in commands {
        let cmd = path.iter().fold(&cli, |c, n| c.find_subcommand(n).unwrap());
        if !cmd.has_subcommands() {
            continue;
        }
        let want: BTreeSet<String> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_owned())
            .collect();
        let words: Vec<&str> = ["rcclfix"]
            .into_iter()
            .chain(path.iter().map(String::as_str))
            .collect();
        let offered: BTreeSet<String> = bash_complete(&script, &words)
            .into_iter()
            .filter(|w| !w.starts_with('-'))
            .collect();
        assert_eq!(offered, want, "rcclfix {} <TAB>", path.join(" "));
        checked += 1;
    }
    // The root, recipe and toolchain at least; and the root's hidden ones are clap's.
    assert!(checked >= 3, "{checked} commands with subcommands");
    let hidden: Vec<&str> = cli
        .get_subcommands()
        .filter(|s| s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    assert!(hidden.contains(&"self-docs"), "{hidden:?}");
    let bash = std::fs::read_to_string(&script).unwrap();
    for h in &hidden {
        assert!(!bash.contains(&format!(" {h} ")), "bash offers hidden {h}");
    }
    let zsh = std::fs::read_to_string(t.path().join("completions/_rcclfix")).unwrap();
    assert!(zsh.starts_with("#compdef rcclfix\n"), "{}", &zsh[..80]);
    let fish = std::fs::read_to_string(t.path().join("completions/rcclfix.fish")).unwrap();
    assert!(fish.contains("complete -c rcclfix "), "{}", &fish[..200]);
    for (shell, text) in [("zsh", &zsh), ("fish", &fish)] {
        for h in &hidden {
            assert!(!text.contains(h), "{shell} names hidden {h}");
        }
    }
}

#[test]
fn there_is_one_man_page_per_visible_subcommand_titled_by_its_path() {
    let t = tempfile::tempdir().unwrap();
    let stdout = self_docs(t.path());
    let cli = cli();
    let mut paths = vec![];
    visible_paths(&cli, &[], &mut paths);
    // No page for clap's `help` or what it lists under it (as clap_mangen::generate_to).
    paths.retain(|p| !p.iter().any(|n| n == "help"));
    let pages: BTreeSet<String> = std::fs::read_dir(t.path().join("man/man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut want: BTreeSet<String> = paths
        .iter()
        .map(|p| format!("rcclfix-{}.1", p.join("-")))
        .collect();
    want.insert("rcclfix.1".into());
    assert_eq!(pages, want);
    assert!(pages.contains("rcclfix-build.1") && pages.contains("rcclfix-toolchain-run.1"));

    let version = env!("CARGO_PKG_VERSION");
    for p in std::iter::once(vec![]).chain(paths) {
        let cmd = p.iter().fold(&cli, |c, n| c.find_subcommand(n).unwrap());
        let name = ["rcclfix".to_owned()]
            .into_iter()
            .chain(p.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        let page = std::fs::read_to_string(t.path().join(format!("man/man1/{name}.1"))).unwrap();
        let th = page.lines().find(|l| l.starts_with(".TH ")).unwrap();
        // Title, section, an empty date, the source (the footer's left side).
        assert_eq!(
            th,
            format!(".TH {} 1 \\& \"rcclfix {version}\" ", name.to_uppercase()),
            "{name}"
        );
        // NAME: the page's name and the subcommand's one-line about, roff-escaped.
        let about = cmd.get_about().unwrap().to_string();
        let first = about.lines().next().unwrap();
        assert!(
            page.contains(&format!(".SH NAME\n{} \\- {}", roff(&name), roff(first))),
            "{name}: {page}"
        );
        let sh = |s: &str| page.find(&format!(".SH {s}\n"));
        assert!(sh("NAME") < sh("SYNOPSIS"), "{name}");
        assert!(
            sh("DESCRIPTION").is_some() && sh("OPTIONS").is_some(),
            "{name}"
        );
        assert!(stdout.contains(&format!("man/man1/{name}.1\n")), "{stdout}");
    }
    // The root page lists each top-level subcommand's page.
    let root = std::fs::read_to_string(t.path().join("man/man1/rcclfix.1")).unwrap();
    for sub in cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        assert!(
            root.contains(&format!("rcclfix\\-{}(1)", roff(sub.get_name()))),
            "{}",
            sub.get_name()
        );
    }
}

/// `s` as roff 1.1 writes text: `-` as `\-`, `'` as the `Aq` string.
fn roff(s: &str) -> String {
    s.replace('-', "\\-").replace('\'', "\\*(Aq")
}

#[test]
fn self_docs_writes_the_same_bytes_again_over_its_own_output() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let listed = self_docs(&a);
    self_docs(&b);
    // Again into the same folder: each file is replaced through a temporary file.
    assert_eq!(self_docs(&a), listed);
    let tree_a = crate::package::tree(&a);
    assert_eq!(tree_a, crate::package::tree(&b));
    assert_eq!(
        listed.lines().count(),
        3 + tree_a.iter().filter(|p| p.ends_with(".1")).count()
    );
    for rel in tree_a.iter().filter(|p| a.join(p).is_file()) {
        assert_eq!(
            std::fs::read(a.join(rel)).unwrap(),
            std::fs::read(b.join(rel)).unwrap(),
            "{rel}"
        );
    }
    // No temporary file is left.
    assert!(tree_a.iter().all(|p| !p.contains(".tmp")), "{tree_a:?}");
}

#[test]
fn self_docs_refuses_an_out_dir_that_is_no_folder() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("not-a-folder");
    std::fs::write(&file, "keep me\n").unwrap();
    let out = rcclfix()
        .args(["self-docs", "--out-dir"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&file.display().to_string()) && err.contains("not a folder"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me\n");
}
