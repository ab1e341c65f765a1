//! The build's progress display as a user sees it: `rcclfix build` on a pty (`script` from
//! util-linux) whose window is 80 or 120 columns, during a link that runs for a while.
//!
//! Slow (`RCCLFIX_SLOW_TESTS=1`): it builds `tests/data/minihip` with the debian-trixie toolchain,
//! its library's link slowed by a `PRE_LINK` `sleep` added to the test's copy of the project, so
//! the link is the one running step for [`LINK_SLEEP_S`] seconds, as RCCL's device link is for
//! minutes.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::build::{copy_tree, git, recipe, scratch_home, test_engine, write_recipe};
use crate::support::slow;

/// How long the slowed link sleeps before linking (seconds).
const LINK_SLEEP_S: u32 = 14;

/// `tests/data/minihip` as a git repository tagged `v0.1.0`, its link slowed; returns (repo,
/// commit).
fn slowed_minihip(dir: &Path) -> (std::path::PathBuf, String) {
    let repo = dir.join("minihip-slow.git-src");
    copy_tree(&crate::support::repo().join("tests/data/minihip"), &repo);
    let cml = repo.join("CMakeLists.txt");
    let mut text = std::fs::read_to_string(&cml).unwrap();
    text.push_str(&format!(
        "# rcclfix's progress test: a link that runs for a while.\n\
         add_custom_command(TARGET rccl PRE_LINK COMMAND sleep {LINK_SLEEP_S})\n"
    ));
    std::fs::write(&cml, text).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "minihip, slow link"]);
    git(&repo, &["tag", "-a", "v0.1.0", "-m", "v0.1.0"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    (repo, commit)
}

/// Run `rcclfix ARGS` on a pty `cols` columns wide; returns the transcript and the exit code.
fn on_a_terminal(dir: &Path, home: &Path, cols: u32, args: &[&str]) -> (String, i32) {
    let line: Vec<String> = std::iter::once(crate::support::BIN.to_owned())
        .chain(args.iter().map(|a| (*a).to_owned()))
        .map(|a| rcclfix::process::quote(&a))
        .collect();
    let script = format!("stty cols {cols} rows 24 && exec {}", line.join(" "));
    let o = Command::new("script")
        .args(["-q", "-e", "-c", &script, "/dev/null"])
        .current_dir(dir)
        .env("SHELL", "/bin/sh")
        .env("RCCLFIX_HOME", home)
        .env("TERM", "xterm-256color")
        .env("NO_COLOR", "1")
        .env_remove("RCCLFIX_GIT_MIRROR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run script (util-linux): {e}"));
    let mut all = o.stdout;
    all.extend(o.stderr);
    (
        String::from_utf8_lossy(&all).into_owned(),
        o.status.code().unwrap_or(-1),
    )
}

/// The transcript as the screen's successive lines: escape sequences (indicatif's cursor moves
/// and line clears) taken out, split at every `\r` and `\n`, without the trailing blanks
/// indicatif writes over what an earlier frame left.
fn screen_lines(transcript: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut chars = transcript.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ parameters final-byte.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                }
            }
            '\r' | '\n' => {
                let l = std::mem::take(&mut cur);
                if !l.trim_end().is_empty() {
                    out.push(l.trim_end().to_owned());
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.trim_end().is_empty() {
        out.push(cur.trim_end().to_owned());
    }
    out
}

/// Check one run's transcript at `cols` columns: the running link is named with its time, and
/// no progress line is wider than the window. Returns the longest time the link was shown
/// running (seconds) and the lines, for the report.
fn check(transcript: &str, cols: usize) -> (u64, Vec<String>) {
    let lines = screen_lines(transcript);
    let progress: Vec<String> = lines
        .iter()
        .filter(|l| l.contains("Building [") || l.starts_with("running: "))
        .cloned()
        .collect();
    for l in &progress {
        assert!(
            l.chars().count() < cols,
            "{cols} columns: a progress line of {} columns: {l:?}\n{transcript}",
            l.chars().count()
        );
    }
    let link = "running: linking librccl.so.1.0 (device link, mostly single-threaded), ";
    let secs = progress
        .iter()
        .filter_map(|l| l.strip_prefix(link))
        .filter_map(|t| t.strip_suffix('s')?.parse::<u64>().ok())
        .max()
        .unwrap_or_else(|| {
            panic!("{cols} columns: the running link was never shown:\n{progress:#?}")
        });
    (secs, progress)
}

#[test]
fn the_running_link_is_shown_at_80_and_120_columns() {
    if !slow() {
        return;
    }
    crate::build::require_toolchain();
    let t = tempfile::tempdir().unwrap();
    let home = scratch_home(t.path());
    let (repo, commit) = slowed_minihip(t.path());
    let f = write_recipe(
        t.path(),
        "slow-link.toml",
        &recipe(&repo, Some(&commit), "compile-definition", ""),
    );
    let out = t.path().join("out");
    let args = [
        "build",
        "--recipe",
        f.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--engine",
        test_engine(),
        "--rebuild",
    ];
    // 80 columns, the first build: no timing record. 120 columns, the second: with one.
    for cols in [80, 120] {
        let (transcript, code) = on_a_terminal(t.path(), &home, cols as u32, &args);
        assert_eq!(code, 0, "{cols} columns:\n{transcript}");
        let (secs, progress) = check(&transcript, cols);
        assert!(
            secs + 6 >= u64::from(LINK_SLEEP_S),
            "{cols} columns: the link was shown running for {secs}s of its {LINK_SLEEP_S}s:\n{progress:#?}"
        );
        let eta = if cols == 80 {
            "no timing record for this recipe yet"
        } else {
            " left"
        };
        assert!(
            progress.iter().any(|l| l.contains(eta)),
            "{cols} columns: no {eta:?}:\n{progress:#?}"
        );
        eprintln!(
            "{cols} columns, the last frames:\n{}",
            progress[progress.len().saturating_sub(4)..].join("\n")
        );
    }
}
