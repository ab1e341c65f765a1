//! `rcclfix build`'s fast paths, `rcclfix recipe pin`, and recipe/source errors: everything that
//! fails or finishes before any toolchain work, plus the helpers the build tests share (a scratch
//! `RCCLFIX_HOME`, the minihip git repository, recipes). The slow builds in a real toolchain are in
//! `build_in_toolchain.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The real toolchains folder (where `rcclfix toolchain build` put the rootfs).
fn real_toolchains() -> PathBuf {
    rcclfix::paths::toolchains_dir()
}

/// A scratch `RCCLFIX_HOME` whose `toolchains` points at the real one.
pub(crate) fn scratch_home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(real_toolchains(), home.join("toolchains")).unwrap();
    home
}

pub(crate) fn rcclfix(home: &Path, args: &[&str]) -> Output {
    crate::support::rcclfix()
        .args(args)
        .env("RCCLFIX_HOME", home)
        .env_remove("RCCLFIX_GIT_MIRROR")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args([
            "-c",
            "user.name=rcclfix-test",
            "-c",
            "user.email=test@rcclfix.invalid",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

pub(crate) fn copy_tree(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let dst = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// `tests/data/minihip` as a git repository with tag `v0.1.0`; returns (repo, commit).
pub(crate) fn minihip_repo(dir: &Path) -> (PathBuf, String) {
    let repo = dir.join("minihip.git-src");
    copy_tree(&crate::support::repo().join("tests/data/minihip"), &repo);
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "minihip"]);
    git(&repo, &["tag", "-a", "v0.1.0", "-m", "v0.1.0"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    (repo, commit)
}

pub(crate) fn recipe(repo: &Path, commit: Option<&str>, ndebug: &str, extra: &str) -> String {
    let commit = commit
        .map(|c| format!("commit = \"{c}\"\n"))
        .unwrap_or_default();
    format!(
        r#"rccl_version = "0.1.0"
name = "minihip"
rocm_release = "0.0.0"
status = "expected"
{extra}
[source]
git = "{}"
tag = "v0.1.0"
{commit}
[toolchain]
name = "debian-trixie"
cxx = "/usr/bin/hipcc"
rocm_path = "/usr"

[build]
targets = ["gfx1100"]
ndebug = "{ndebug}"
link_ram_gib = 0.5
"#,
        repo.display()
    )
}

pub(crate) fn write_recipe(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The first line of stderr is `error: …` and carries every needle.
pub(crate) fn assert_one_line_error(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(o));
    let err = stderr(o);
    let first = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line in {err}"));
    for n in needles {
        assert!(
            first.contains(n),
            "{n:?} not in the error line {first:?}\nfull stderr:\n{err}"
        );
    }
}

#[test]
fn cli_definition_is_consistent() {
    use clap::CommandFactory;
    rcclfix::cmd::cli::Cli::command().debug_assert();
}

#[test]
fn build_list_shows_the_recipes() {
    let t = tempfile::tempdir().unwrap();
    let o = rcclfix(t.path(), &["build", "--list"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for r in rcclfix::recipe::embedded().unwrap().keys() {
        assert!(out.contains(r.as_str()), "{r} missing from:\n{out}");
    }
}

/// A bogus `RCCLFIX_ENGINE` is refused before the fetch (issue 40, item 12): with a source that
/// cannot be fetched, `build` and `prove` name the engine variable, not the fetch.
#[test]
fn a_bogus_engine_is_refused_before_the_fetch() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let zeros = "0".repeat(40);
    let f = write_recipe(
        t.path(),
        "r.toml",
        &recipe(Path::new("/nonexistent/x.git"), Some(&zeros), "none", ""),
    );
    let out = t.path().join("out");
    for verb in ["build", "prove"] {
        let o = crate::support::rcclfix()
            .args([verb, "--recipe"])
            .arg(&f)
            .arg("--out-dir")
            .arg(&out)
            .env("RCCLFIX_HOME", &home)
            .env("RCCLFIX_ENGINE", "bogus")
            .env_remove("RCCLFIX_GIT_MIRROR")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert_one_line_error(&o, &["RCCLFIX_ENGINE", "unknown engine \"bogus\""]);
        assert!(!stderr(&o).contains("fetch"), "{verb}: {}", stderr(&o));
    }
}

#[test]
fn unknown_gfx_target_fails_before_any_fetch() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit) = minihip_repo(t.path());
    let f = write_recipe(
        t.path(),
        "r.toml",
        &recipe(&repo, Some(&commit), "none", ""),
    );
    let out = t.path().join("out");
    for (targets, needles) in [
        (
            "gfx9999",
            vec!["--targets", "\"gfx9999\"", "gfx1100", "gfx90a"],
        ),
        ("gfx1100,gfx9999", vec!["\"gfx9999\""]),
        ("", vec!["--targets", "empty gfx target"]),
        ("gfx1100,,gfx1101", vec!["empty gfx target"]),
        ("gfx11-generic", vec!["\"gfx11-generic\"", "generic"]),
        ("gfx90a:xnack", vec!["unknown target feature \"xnack\""]),
    ] {
        for src in [
            vec!["--tag", "2.13.4"],
            vec!["--recipe", f.to_str().unwrap()],
        ] {
            let mut args = vec!["build", "--targets", targets, "--out-dir"];
            args.push(out.to_str().unwrap());
            args.extend(src);
            let o = rcclfix(&home, &args);
            assert_one_line_error(&o, &needles);
            assert!(!home.join("src").exists(), "fetched for {targets:?}");
            assert!(!home.join("work").exists());
        }
    }
    assert!(!out.exists());
    // Target features of known processors pass.
    for ok in [
        "gfx1100",
        "gfx90a:xnack-",
        "gfx942:sramecc+:xnack-",
        "gfx1201",
    ] {
        rcclfix::recipe::check_target("--targets", ok).unwrap();
    }
}

#[test]
fn recipe_with_an_unknown_target_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit) = minihip_repo(t.path());
    for (bad, needle) in [
        (
            "gfx9999",
            "\"gfx9999\" is not an explicit gfx target rcclfix knows",
        ),
        ("", "empty gfx target"),
    ] {
        let text = recipe(&repo, Some(&commit), "none", "")
            .replace("targets = [\"gfx1100\"]", &format!("targets = [\"{bad}\"]"));
        let f = write_recipe(t.path(), "bad-target.toml", &text);
        let o = rcclfix(&home, &["build", "--recipe", f.to_str().unwrap()]);
        // `load_file` names the file first; the reason is the next line of the chain.
        assert_one_line_error(&o, &["bad-target.toml", "invalid recipe"]);
        let err = stderr(&o);
        assert!(err.contains(&format!("build.targets: {needle}")), "{err}");
        assert!(!home.join("src").exists());
    }
}

#[test]
fn matrix_and_scan_reject_unknown_or_empty_targets() {
    let t = tempfile::tempdir().unwrap();
    for (args, needles) in [
        (
            vec!["matrix", "--json", "--targets", "gfx9999"],
            vec!["--targets", "\"gfx9999\"", "gfx1100"],
        ),
        (
            vec!["matrix", "--json", "--targets", ""],
            vec!["empty gfx target"],
        ),
        (
            vec!["matrix", "--json", "--targets", "gfx1100,"],
            vec!["empty gfx target"],
        ),
        (
            vec!["scan", "--target", "", "/bin/true"],
            vec!["--target", "empty gfx target"],
        ),
        (
            vec!["scan", "--target", "gfx1100,", "/bin/true"],
            vec!["empty gfx target"],
        ),
    ] {
        let o = rcclfix(t.path(), &args);
        assert_one_line_error(&o, &needles);
        assert!(o.stdout.is_empty(), "{args:?} printed a result");
    }
}

#[test]
fn recipe_unknown_field_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let (repo, commit) = minihip_repo(t.path());
    let f = write_recipe(
        t.path(),
        "bad.toml",
        &recipe(&repo, Some(&commit), "none", "colour = \"blue\""),
    );
    let o = rcclfix(t.path(), &["build", "--recipe", f.to_str().unwrap()]);
    assert_one_line_error(&o, &["bad.toml", "unknown field `colour`"]);
}

#[test]
fn recipe_missing_field_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let (repo, commit) = minihip_repo(t.path());
    let text = recipe(&repo, Some(&commit), "none", "").replace("rocm_release = \"0.0.0\"\n", "");
    let f = write_recipe(t.path(), "norelease.toml", &text);
    let o = rcclfix(t.path(), &["build", "--recipe", f.to_str().unwrap()]);
    assert_one_line_error(&o, &["norelease.toml", "missing field `rocm_release`"]);
    // Neither a tag nor a branch: refused, saying what to give.
    let text = recipe(&repo, Some(&commit), "none", "").replace("tag = \"v0.1.0\"\n", "");
    let f = write_recipe(t.path(), "notag.toml", &text);
    let o = rcclfix(t.path(), &["build", "--recipe", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("source.tag is empty (give `tag`, or `branch` with `commit`)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn recipe_missing_commit_with_locked_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let (repo, _) = minihip_repo(t.path());
    let f = write_recipe(t.path(), "unpinned.toml", &recipe(&repo, None, "none", ""));
    let o = rcclfix(
        t.path(),
        &["build", "--locked", "--recipe", f.to_str().unwrap()],
    );
    assert_one_line_error(&o, &["minihip", "does not pin tag v0.1.0", "--locked"]);
}

#[test]
fn unknown_recipe_tag_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let o = rcclfix(t.path(), &["build", "--tag", "9.9.9"]);
    assert_one_line_error(&o, &["unknown tag \"9.9.9\"", "2.13.4"]);
}

#[test]
fn git_tag_missing_from_the_repository_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let (repo, commit) = minihip_repo(t.path());
    let text = recipe(&repo, Some(&commit), "none", "").replace("tag = \"v0.1.0\"", "tag = \"v9\"");
    let f = write_recipe(t.path(), "notthere.toml", &text);
    let o = rcclfix(t.path(), &["build", "--recipe", f.to_str().unwrap()]);
    assert_one_line_error(&o, &["tag \"v9\" not found in"]);
}

/// A recipe for tests that stop right after the source step: toolchain `host`, which the engine
/// `podman` refuses once the source is fetched and checked (nothing is built or imported).
pub(crate) fn source_only(recipe_text: &str) -> String {
    recipe_text.replace("name = \"debian-trixie\"", "name = \"host\"")
}

pub(crate) fn build_until_engine(home: &Path, t: &Path, f: &Path, extra: &[&str]) -> Output {
    let out = t.join("out");
    let mut args = vec![
        "build",
        "--recipe",
        f.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    args.extend(["--engine", "podman"]);
    rcclfix(home, &args)
}

pub(crate) fn stopped_at_engine(o: &Output) -> bool {
    let e = stderr(o);
    e.contains("the host toolchain runs without a container")
        || e.contains("`podman` is not installed")
}

#[test]
fn moved_tag_is_refused_naming_both_commits() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, pinned) = minihip_repo(t.path());
    let f = write_recipe(
        t.path(),
        "r.toml",
        &source_only(&recipe(&repo, Some(&pinned), "none", "")),
    );
    // Warm the source cache at the pinned tag.
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    std::fs::write(repo.join("README"), "moved\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "move the tag"]);
    git(&repo, &["tag", "-f", "-a", "v0.1.0", "-m", "moved"]);
    let moved = git(&repo, &["rev-parse", "HEAD"]);
    assert_ne!(moved, pinned);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_one_line_error(&o, &["v0.1.0", &moved, &pinned]);
    assert!(!t.path().join("out").exists());
}

/// The bare source cache under a scratch `RCCLFIX_HOME` (exactly one).
fn source_cache(home: &Path) -> PathBuf {
    let caches: Vec<PathBuf> = std::fs::read_dir(home.join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "git"))
        .collect();
    assert_eq!(caches.len(), 1, "{caches:?}");
    caches[0].clone()
}

/// Every ref of the source cache, as `git for-each-ref` prints it.
fn cache_refs(cache: &Path) -> String {
    git(
        cache,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    )
}

/// A clone of `repo` (as a mirror) whose tag `v0.1.0` was moved to a new commit; returns (mirror,
/// moved commit).
fn moved_tag_mirror(t: &Path, repo: &Path) -> (PathBuf, String) {
    let bad = t.join("bad-mirror");
    git(
        t,
        &["clone", "-q", repo.to_str().unwrap(), bad.to_str().unwrap()],
    );
    std::fs::write(bad.join("README"), "moved\n").unwrap();
    git(&bad, &["add", "README"]);
    git(&bad, &["commit", "-q", "-m", "move the tag"]);
    git(&bad, &["tag", "-f", "-a", "v0.1.0", "-m", "moved"]);
    let moved = git(&bad, &["rev-parse", "HEAD"]);
    (bad, moved)
}

#[test]
fn refused_mirror_fetch_leaves_the_source_cache_unchanged() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, pinned) = minihip_repo(t.path());
    let (bad, moved) = moved_tag_mirror(t.path(), &repo);
    let f = write_recipe(
        t.path(),
        "r.toml",
        &source_only(&recipe(&repo, Some(&pinned), "none", "")),
    );
    // Cold cache: the first fetch comes from the bad mirror and is refused; the new cache holds
    // no tag at all (no clone of every ref before the check).
    let bad_arg = bad.to_str().unwrap();
    let o = build_until_engine(&home, t.path(), &f, &["--git-mirror", bad_arg]);
    let bad_canon = bad.canonicalize().unwrap();
    assert_one_line_error(
        &o,
        &["v0.1.0", &moved, &pinned, bad_canon.to_str().unwrap()],
    );
    let cache = source_cache(&home);
    assert_eq!(cache_refs(&cache), "", "refused fetch wrote refs");
    // Warm the cache from the good repository, then refuse the bad mirror again.
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    let before = cache_refs(&cache);
    assert_eq!(
        git(&cache, &["rev-parse", "refs/tags/v0.1.0^{commit}"]),
        pinned
    );
    let o = build_until_engine(&home, t.path(), &f, &["--git-mirror", bad_arg]);
    assert_one_line_error(&o, &[&moved, &pinned, bad_canon.to_str().unwrap()]);
    assert_eq!(
        cache_refs(&cache),
        before,
        "refused fetch changed the cache"
    );
    // A later run from a different (good) mirror passes the source step and names no bad path.
    let good = t.path().join("good-mirror");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            good.to_str().unwrap(),
        ],
    );
    let o = build_until_engine(
        &home,
        t.path(),
        &f,
        &["--git-mirror", good.to_str().unwrap()],
    );
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(!stderr(&o).contains("bad-mirror"), "{}", stderr(&o));
    assert_eq!(cache_refs(&cache), before);
    assert!(!t.path().join("out").exists());
}

#[test]
fn tampered_work_folder_is_replaced_by_a_fresh_verified_checkout() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, pinned) = minihip_repo(t.path());
    let f = write_recipe(
        t.path(),
        "r.toml",
        &source_only(&recipe(&repo, Some(&pinned), "none", "")),
    );
    // What an interrupted or refused run could leave: `src` at another commit, with a modified
    // tracked file, an untracked file, and stale build output.
    let work = home.join("work/minihip-gfx1100");
    let src = work.join("src");
    git(
        t.path(),
        &["clone", "-q", repo.to_str().unwrap(), src.to_str().unwrap()],
    );
    std::fs::write(src.join("README"), "other\n").unwrap();
    git(&src, &["add", "README"]);
    git(&src, &["commit", "-q", "-m", "another commit"]);
    let other = git(&src, &["rev-parse", "HEAD"]);
    assert_ne!(other, pinned);
    std::fs::write(src.join("CMakeLists.txt"), "# tampered\n").unwrap();
    std::fs::write(src.join("stray.cpp"), "int x;\n").unwrap();
    std::fs::create_dir_all(work.join("build")).unwrap();
    std::fs::write(work.join("build/build.ninja"), "stale\n").unwrap();
    let err = rcclfix::source::verify_checkout(&src, &pinned).unwrap_err();
    assert!(err.to_string().contains(&other), "{err}");
    git(&src, &["checkout", "-q", &pinned]);
    let err = rcclfix::source::verify_checkout(&src, &pinned).unwrap_err();
    assert!(err.to_string().contains("not a clean checkout"), "{err}");
    git(&src, &["checkout", "-q", &other]);

    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert_eq!(git(&src, &["rev-parse", "HEAD"]), pinned);
    assert_eq!(
        git(
            &src,
            &[
                "status",
                "--porcelain",
                "--ignored",
                "--untracked-files=all"
            ]
        ),
        ""
    );
    assert!(!src.join("stray.cpp").exists());
    assert!(!work.join("build/build.ninja").exists());
    rcclfix::source::verify_checkout(&src, &pinned).unwrap();
}

#[test]
fn recipe_pin_writes_the_lockfile_and_build_then_checks_it() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit) = minihip_repo(t.path());
    let f = write_recipe(
        t.path(),
        "unpinned.toml",
        &source_only(&recipe(&repo, None, "none", "")),
    );
    let o = rcclfix(&home, &["recipe", "pin", "--recipe", f.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out,
        format!(
            "RECIPE   TAG     {:<40}  STATE\nminihip  v0.1.0  {commit}  pinned\n",
            "COMMIT"
        )
    );
    assert!(stderr(&o).contains("Wrote"), "{}", stderr(&o));
    let lock = rcclfix::recipe::Lockfile::load(&home.join("rcclfix.lock")).unwrap();
    assert_eq!(lock.get("minihip", "v0.1.0"), Some(commit.as_str()));
    // -q: the same rows, nothing on stderr.
    let q_lock = t.path().join("q.lock");
    let o = rcclfix(
        &home,
        &[
            "-q",
            "recipe",
            "pin",
            "--recipe",
            f.to_str().unwrap(),
            "--lockfile",
            q_lock.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), out);
    assert_eq!(stderr(&o), "");
    assert!(q_lock.is_file());
    // Now pinned: --locked accepts it and gets past the source step to the engine check.
    let o = build_until_engine(&home, t.path(), &f, &["--locked"]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
}

#[test]
fn first_fetch_of_an_unpinned_tag_pins_it() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit) = minihip_repo(t.path());
    let f = write_recipe(
        t.path(),
        "unpinned.toml",
        &source_only(&recipe(&repo, None, "none", "")),
    );
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(stderr(&o).contains("Pinned"), "{}", stderr(&o));
    let lock = rcclfix::recipe::Lockfile::load(&home.join("rcclfix.lock")).unwrap();
    assert_eq!(lock.get("minihip", "v0.1.0"), Some(commit.as_str()));
}

#[test]
fn a_tag_is_fetched_shallow_and_checks_out_verified() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, _) = minihip_repo(t.path());
    for n in ["one", "two"] {
        std::fs::write(repo.join("HISTORY"), format!("{n}\n")).unwrap();
        git(&repo, &["add", "HISTORY"]);
        git(&repo, &["commit", "-q", "-m", n]);
    }
    git(&repo, &["tag", "-f", "-a", "v0.1.0", "-m", "v0.1.0"]);
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let f = write_recipe(
        t.path(),
        "r.toml",
        &source_only(&recipe(&repo, Some(&head), "none", "")),
    );
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    // Only the tagged commit came over, not its two ancestors.
    let cache = source_cache(&home);
    let gd = format!("--git-dir={}", cache.display());
    assert_eq!(
        git(t.path(), &[&gd, "rev-parse", "--is-shallow-repository"]),
        "true"
    );
    assert_eq!(
        git(t.path(), &[&gd, "rev-list", "--count", "refs/tags/v0.1.0"]),
        "1"
    );
    let src = home.join("work/minihip-gfx1100/src");
    rcclfix::source::verify_checkout(&src, &head).unwrap();
    // A second fetch of the same tag needs nothing from the origin and checks out again.
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(!stderr(&o).contains("Fetching"), "{}", stderr(&o));
    rcclfix::source::verify_checkout(&src, &head).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Slow: real toolchain, real engine, real compiler.

pub(crate) fn require_toolchain() {
    let stamp = real_toolchains().join("debian-trixie/stamp.json");
    assert!(
        stamp.exists(),
        "RCCLFIX_SLOW_TESTS=1 but the debian-trixie toolchain is not built ({} missing)\nhelp: run `cargo xtask test`, or `rcclfix toolchain build debian-trixie` as root",
        stamp.display()
    );
}

/// podman when installed, else bubblewrap (the issue's rule); `None` fails the test.
pub(crate) fn test_engine() -> &'static str {
    if which::which("podman").is_ok() {
        "podman"
    } else if which::which("bwrap").is_ok() {
        "bubblewrap"
    } else {
        panic!("RCCLFIX_SLOW_TESTS=1 but neither podman nor bwrap is installed\nhelp: apt-get install podman runc bubblewrap (see .ci/apt.d/)")
    }
}
