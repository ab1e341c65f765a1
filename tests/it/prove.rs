//! Branch-pinned sources, the recipes' patches against their pinned commits, and `rcclfix prove`.
//!
//! Fast tests cover recipes that name a branch: the commit is fetched by its id, the branch is a hint
//! checked when present (moved on and still containing the pin: fine; rewritten: refused naming both
//! commits; deleted: a warning). With `RCCLFIX_GIT_MIRROR` set to a mirror of ROCm/rccl, every
//! embedded recipe's pinned commit (or branch head) exists and its patches apply (`git apply
//! --check`). Slow tests (`RCCLFIX_SLOW_TESTS=1`) run `prove` on `tests/data/minihip`: its assert
//! kernel is the control's positive.

use std::path::Path;
use std::process::Command;

use super::build::{
    assert_one_line_error, build_until_engine, git, minihip_repo, rcclfix, recipe, source_only,
    stderr, stopped_at_engine, test_engine, write_recipe,
};
use crate::support::Minihip;

/// The minihip recipe, but naming `branch` (and pinning `commit`) instead of the tag.
fn branch_recipe(repo: &Path, commit: &str, branch: &str) -> String {
    source_only(&recipe(repo, Some(commit), "none", ""))
        .replace("tag = \"v0.1.0\"", &format!("branch = \"{branch}\""))
}

/// Exit 2 and one line: `error: FILE: invalid recipe: <the field and its value>`.
fn assert_invalid_recipe(o: &std::process::Output, reason: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let err = stderr(o);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error: ") && first.contains(": invalid recipe: "),
        "{err}"
    );
    assert!(first.contains(reason), "{err}");
}

#[test]
fn a_branch_needs_a_pinned_commit_and_excludes_a_tag() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit) = minihip_repo(t.path());
    let no_commit = source_only(&recipe(&repo, None, "none", ""))
        .replace("tag = \"v0.1.0\"", "branch = \"main\"");
    let f = write_recipe(t.path(), "a.toml", &no_commit);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_invalid_recipe(&o, "needs source.commit");
    let both = branch_recipe(&repo, &commit, "main")
        .replace("branch = \"main\"", "branch = \"main\"\ntag = \"v0.1.0\"");
    let f = write_recipe(t.path(), "b.toml", &both);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_invalid_recipe(&o, "either `tag` or `branch`");
    let bad = branch_recipe(&repo, &commit, "-main");
    let f = write_recipe(t.path(), "c.toml", &bad);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_invalid_recipe(&o, "not a valid git branch name");
}

#[test]
fn a_branch_recipe_fetches_its_commit_and_checks_the_branch() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, pinned) = minihip_repo(t.path());
    git(&repo, &["branch", "staging"]);
    let f = write_recipe(
        t.path(),
        "r.toml",
        &branch_recipe(&repo, &pinned, "staging"),
    );
    // The pin is the branch head.
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("Fetching commit {pinned}")),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("branch staging"), "{}", stderr(&o));

    // The branch moved on and still contains the pin: fine, and the cache is not fetched again.
    git(&repo, &["checkout", "-q", "staging"]);
    std::fs::write(repo.join("README"), "later\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "later"]);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(!stderr(&o).contains("Fetching commit"), "{}", stderr(&o));

    // The branch was rewritten and no longer contains the pin: refused, naming both commits.
    git(&repo, &["checkout", "-q", "--orphan", "rewritten"]);
    git(&repo, &["commit", "-q", "-m", "rewritten history"]);
    let rewritten = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["branch", "-f", "staging", "rewritten"]);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_one_line_error(&o, &["branch staging", &rewritten, &pinned]);
    assert!(!t.path().join("out").exists());

    // The branch is gone: the pinned commit is still built, with a warning.
    git(&repo, &["checkout", "-q", "main"]);
    git(&repo, &["branch", "-D", "staging"]);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no longer has branch staging"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_branch_recipe_with_a_commit_the_origin_lacks_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, _) = minihip_repo(t.path());
    git(&repo, &["branch", "staging"]);
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let f = write_recipe(
        t.path(),
        "r.toml",
        &branch_recipe(&repo, missing, "staging"),
    );
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_one_line_error(&o, &["cannot fetch the pinned commit", missing]);
}

/// With a mirror of ROCm/rccl (`RCCLFIX_GIT_MIRROR`): every embedded recipe of that repository
/// whose commit is pinned has it in the mirror, and its patches apply to it.
#[test]
#[ignore = "needs RCCLFIX_GIT_MIRROR: run with RCCLFIX_GIT_MIRROR=<a git mirror of ROCm/rccl> (cargo xtask test runs ignored tests whose input is there)"]
fn every_recipe_patch_applies_to_its_pinned_commit() {
    let mirror = crate::support::required_input("RCCLFIX_GIT_MIRROR");
    let mirror = Path::new(&mirror);
    let all = rcclfix::recipe::embedded().unwrap();
    let t = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for r in all.values() {
        if !r.source.git.ends_with("ROCm/rccl.git") {
            continue;
        }
        let lock = rcclfix::recipe::Lockfile::load(&t.path().join("none.lock")).unwrap();
        let Some(commit) = r.pinned_commit(&lock) else {
            continue;
        };
        let has = Command::new("git")
            .arg("--git-dir")
            .arg(mirror)
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .status()
            .unwrap();
        assert!(
            has.success(),
            "recipe {}: commit {commit} is not in {}",
            r.id(),
            mirror.display()
        );
        if let Some(b) = &r.source.branch {
            let head = Command::new("git")
                .arg("--git-dir")
                .arg(mirror)
                .args(["rev-parse", "--verify", "-q", &format!("refs/heads/{b}")])
                .output()
                .unwrap();
            if head.status.success() {
                let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
                let ok = Command::new("git")
                    .arg("--git-dir")
                    .arg(mirror)
                    .args(["merge-base", "--is-ancestor", commit, &head])
                    .status()
                    .unwrap();
                assert!(
                    ok.success(),
                    "recipe {}: branch {b} ({head}) lacks {commit}",
                    r.id()
                );
            }
        }
        if r.build.patches.is_empty() {
            continue;
        }
        let tree = t.path().join(r.id());
        let o = Command::new("git")
            .args(["clone", "-q", "--no-checkout"])
            .arg(mirror)
            .arg(&tree)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        git(&tree, &["checkout", "-q", "--detach", commit]);
        for p in &r.build.patches {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("patches")
                .join(p.trim_start_matches("patches/"));
            let o = Command::new("git")
                .arg("-C")
                .arg(&tree)
                .args(["apply", "--check"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "recipe {}: patch {p} does not apply to {commit}: {}",
                r.id(),
                String::from_utf8_lossy(&o.stderr)
            );
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "no recipe patch was checked against {}",
        mirror.display()
    );
}

/// Every file under `patches/` opens with a header (text before the first `diff --git`) that says
/// why, and which recipes use it, and is used by some recipe.
#[test]
fn every_patch_has_a_header_and_a_recipe() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("patches");
    let all = rcclfix::recipe::embedded().unwrap();
    let used: Vec<&String> = all.values().flat_map(|r| r.build.patches.iter()).collect();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let header = &text[..text
            .find("diff --git")
            .unwrap_or_else(|| panic!("{name}: no diff"))];
        for needle in ["Why:", "Used by:", "Upstream file:"] {
            assert!(header.contains(needle), "{name}: header lacks {needle:?}");
        }
        assert!(
            used.iter()
                .any(|u| u.trim_start_matches("patches/") == name),
            "{name} is used by no recipe"
        );
        for r in all.values().filter(|r| {
            r.build
                .patches
                .iter()
                .any(|u| u.trim_start_matches("patches/") == name)
        }) {
            assert!(
                header.contains(&format!("recipes/{}.toml", r.id())),
                "{name}: header does not name recipes/{}.toml",
                r.id()
            );
        }
    }
}

fn prove(home: &Path, t: &Path, f: &Path) -> std::process::Output {
    rcclfix(
        home,
        &[
            "prove",
            "--recipe",
            f.to_str().unwrap(),
            "--out-dir",
            t.join("out").to_str().unwrap(),
            "--engine",
            test_engine(),
        ],
    )
}

#[test]
fn prove_minihip_control_declares_and_fix_is_clean() {
    let Some(m) = Minihip::slow() else { return };
    let f = m.recipe("cd.toml", "compile-definition");
    let Minihip {
        t, home, commit, ..
    } = m;
    let o = prove(&home, t.path(), &f);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rec_path = t.path().join("out/prove-minihip-gfx1100/prove.json");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rec_path).unwrap()).unwrap();
    assert_eq!(rec["verdict"], "proven");
    assert_eq!(rec["commit"], commit.as_str());
    assert_eq!(rec["control"]["ndebug_strategy"], "none");
    assert_eq!(rec["fix"]["ndebug_strategy"], "compile-definition");
    assert_eq!(rec["control"]["gate"]["gfx1100"], "declares");
    assert_eq!(rec["fix"]["gate"]["gfx1100"], "clean");
    assert_eq!(rec["control"]["counts"]["gfx1100"]["declaring"], 1);
    assert_eq!(rec["fix"]["counts"]["gfx1100"]["declaring"], 0);
    let k = &rec["kernels"]["gfx1100"];
    assert_eq!(k["mh_assert"]["before"], true);
    assert_eq!(k["mh_assert"]["after"], false);
    assert_eq!(k["mh_plain"]["before"], false);
    assert_eq!(k["mh_plain"]["after"], false);
    let users = rec["control"]["hostcall_users"]["gfx1100"]
        .as_array()
        .unwrap();
    assert!(
        !users.is_empty(),
        "the control's image names its hostcall users"
    );
    assert!(rec["fix"]["hostcall_users"]["gfx1100"]
        .as_array()
        .unwrap()
        .is_empty());
    for run in ["control", "fix"] {
        assert_eq!(rec[run]["library_sha256"].as_str().unwrap().len(), 64);
        assert!(rec[run]["wall_seconds"].as_f64().unwrap() > 0.0);
        assert!(rec[run]["peak_rss_bytes"].as_u64().unwrap() > 0);
    }
    assert_ne!(
        rec["control"]["library_sha256"],
        rec["fix"]["library_sha256"]
    );
    // The fix's output folder is complete; the control wrote none.
    assert!(t
        .path()
        .join("out/rccl-minihip-gfx1100/manifest.json")
        .exists());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("mh_assert: declares -> clean"), "{stdout}");
    // prove.json names the toolchain by its content id (the stamp's, whatever the engine), the
    // engine of the fix's manifest, and the compiler and HIP packages.
    let tc = &rec["toolchain"];
    let stamp = rcclfix::container::Toolchain::local("debian-trixie").unwrap();
    assert_eq!(tc["name"], "debian-trixie", "{tc}");
    assert_eq!(tc["id"], stamp.id(), "{tc}");
    let fix =
        rcclfix::manifest::Manifest::load(&t.path().join("out/rccl-minihip-gfx1100/manifest.json"))
            .unwrap();
    assert_eq!(tc["engine"], fix.engine.as_str(), "{tc}");
    assert_eq!(fix.toolchain_id, stamp.id());
    let compiler: Vec<&str> = tc["compiler"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for want in ["clang-", "hipcc=", "libamdhip64-"] {
        assert!(
            compiler.iter().any(|p| p.starts_with(want)),
            "no {want}: {compiler:?}"
        );
    }
    assert!(
        stdout.contains(&format!("toolchain debian-trixie ({})", stamp.id())),
        "{stdout}"
    );
}

#[test]
fn prove_reports_a_control_that_is_already_clean() {
    let Some(Minihip { t, home, repo, .. }) = Minihip::slow() else {
        return;
    };
    // The same library without its live assert: nothing declares, with or without NDEBUG.
    let src = repo.join("src/kernels.cpp");
    let text = std::fs::read_to_string(&src).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("assert("))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&src, text).unwrap();
    git(&repo, &["commit", "-q", "-am", "no assert"]);
    git(&repo, &["tag", "-f", "-a", "v0.1.0", "-m", "no assert"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let f = write_recipe(
        t.path(),
        "cd.toml",
        &recipe(&repo, Some(&commit), "compile-definition", ""),
    );
    let o = prove(&home, t.path(), &f);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("the control is already clean: this recipe proves the pipeline, not the fix"),
        "{}",
        stderr(&o)
    );
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(t.path().join("out/prove-minihip-gfx1100/prove.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["verdict"], "control-clean");
}

/// A scan report of one gfx1100 image holding `kernels` (name, declares).
fn report_of(kernels: &[(String, bool)]) -> rcclfix::scan::ScanReport {
    let ks: Vec<serde_json::Value> = kernels
        .iter()
        .map(|(n, d)| {
            serde_json::json!({
                "name": n, "symbol": format!("{n}.kd"), "kernarg_segment_size": 64,
                "hidden_args": [], "declares_hostcall": d,
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "schema_version": 2, "rcclfix_version": "0", "files": [{
            "path": "librccl.so.1.0", "kind": "host-elf", "unreadable": [],
            "images": [{
                "entry_id": "hipv4-amdgcn-amd-amdhsa--gfx1100", "processor": "gfx1100",
                "target_id": "gfx1100", "code_object_version": 6, "container": "plain",
                "bundle_offset": 4096, "kernels": ks, "hostcall_users": [],
            }],
        }],
    }))
    .unwrap()
}

/// `prove`'s decision ([`rcclfix::build::prove::compare`]) on the recorded proof of
/// 2.21.5-debian-sid (`recipes/records/2.21.5-debian-sid-gfx1100/prove.json`, 4 of 124 kernels
/// declaring before, none after) and on pairs made from it: a fix that lost the declaring kernels
/// is not a proof (issue 20), a fix that lost a clean one is still one and names it, and the
/// table escapes kernel names.
#[test]
fn prove_compare_needs_the_declaring_kernels_present_and_clean_in_the_fix() {
    use rcclfix::build::prove::{compare, render, ProveRecord};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text =
        std::fs::read_to_string(root.join("recipes/records/2.21.5-debian-sid-gfx1100/prove.json"))
            .unwrap();
    let rec: ProveRecord = serde_json::from_str(&text).unwrap();
    let side = |before: bool| -> Vec<(String, bool)> {
        rec.kernels["gfx1100"]
            .iter()
            .filter_map(|(k, d)| {
                let v = if before { d.before } else { d.after };
                v.map(|v| (k.clone(), v))
            })
            .collect()
    };
    let (control, fix) = (side(true), side(false));
    let targets = vec!["gfx1100".to_owned()];
    let declaring: Vec<String> = control
        .iter()
        .filter(|(_, d)| *d)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(declaring.len(), 4);

    // The record as it is: proven, and (with the `.intern.<hash>` suffixes dropped) both builds
    // have the same 124 kernels.
    let c = compare(
        &report_of(&control),
        &report_of(&fix),
        &targets,
        "cxx-flags",
    );
    assert_eq!(c.verdict, "proven", "{}", c.summary);
    assert!(
        c.summary.starts_with("without NDEBUG 4 of 124 kernels"),
        "{}",
        c.summary
    );
    assert!(c.missing.is_empty(), "{:?}", c.missing);

    // The fix without the four declaring kernels: clean, but not comparable.
    let lost: Vec<(String, bool)> = fix
        .iter()
        .filter(|(k, _)| !declaring.contains(k))
        .cloned()
        .collect();
    let c = compare(
        &report_of(&control),
        &report_of(&lost),
        &targets,
        "cxx-flags",
    );
    assert_eq!(c.verdict, "not-comparable", "{}", c.summary);
    assert!(
        c.summary.contains("4 kernel(s) that declare"),
        "{}",
        c.summary
    );
    for k in &declaring {
        assert!(c.summary.contains(k.as_str()), "{k}: {}", c.summary);
    }
    assert_eq!(c.missing["gfx1100"].only_in_control, declaring);
    // One of them missing is enough.
    let one: Vec<(String, bool)> = fix
        .iter()
        .filter(|(k, _)| k != &declaring[0])
        .cloned()
        .collect();
    let c = compare(
        &report_of(&control),
        &report_of(&one),
        &targets,
        "cxx-flags",
    );
    assert_eq!(c.verdict, "not-comparable", "{}", c.summary);

    // A clean kernel missing from the fix: still proven, and named in the record.
    let clean_gone = fix
        .iter()
        .find(|(k, _)| !declaring.contains(k))
        .unwrap()
        .0
        .clone();
    let fewer: Vec<(String, bool)> = fix
        .iter()
        .filter(|(k, _)| k != &clean_gone)
        .cloned()
        .collect();
    let c = compare(
        &report_of(&control),
        &report_of(&fewer),
        &targets,
        "cxx-flags",
    );
    assert_eq!(c.verdict, "proven", "{}", c.summary);
    assert!(
        c.summary.contains("1 kernel(s) are in only one"),
        "{}",
        c.summary
    );
    assert_eq!(
        rcclfix::build::prove::stable_kernel_name(&c.missing["gfx1100"].only_in_control[0]),
        rcclfix::build::prove::stable_kernel_name(&clean_gone)
    );

    // A fix that declares fails; a control with no image for the target proves nothing; a
    // clean control proves the pipeline only.
    let mut bad_fix = fix.clone();
    bad_fix[0].1 = true;
    let c = compare(
        &report_of(&control),
        &report_of(&bad_fix),
        &targets,
        "cxx-flags",
    );
    assert_eq!(c.verdict, "fix-failed", "{}", c.summary);
    let nothing = rcclfix::scan::ScanReport {
        schema_version: 2,
        rcclfix_version: "0".into(),
        files: vec![],
    };
    let c = compare(&nothing, &report_of(&fix), &targets, "cxx-flags");
    assert_eq!(c.verdict, "control-unknown", "{}", c.summary);
    let c = compare(&report_of(&fix), &report_of(&fix), &targets, "cxx-flags");
    assert_eq!(c.verdict, "control-clean", "{}", c.summary);

    // The table: a kernel name carrying OSC and CSI sequences and a newline is escaped.
    let hostile = "k_evil\u{1b}]0;owned\u{7}\u{1b}[2J\nFORGED".to_owned();
    let mut with_evil = control.clone();
    with_evil.push((hostile.clone(), true));
    let c = compare(
        &report_of(&with_evil),
        &report_of(&fix),
        &targets,
        "cxx-flags",
    );
    assert_eq!(c.verdict, "not-comparable");
    let mut r = rec.clone();
    r.kernels = c.kernels;
    r.missing = c.missing;
    r.recipe = "r\u{1b}[31m".into();
    let table = render(&r);
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{7}'),
        "{table:?}"
    );
    assert!(!table.lines().any(|l| l.starts_with("FORGED")), "{table}");
    assert!(table.contains("k_evil\\e]0;owned"), "{table}");
}
