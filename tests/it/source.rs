//! Fetch only what is built: a recipe with `source.subdir` against a local monorepo shaped like
//! ROCm/rocm-systems (`projects/rccl` next to a large unrelated `projects/other`).
//!
//! The cache must end up a shallow, partial clone holding the subfolder's blobs and none of the
//! other project's; the work folder a sparse, complete, self-contained checkout of the subfolder
//! (git works in it with the cache and the origin gone, as inside a container); the pin and the
//! clean-tree check stay. Both from the recipe's URL (a local path) and from `--git-mirror`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::build::{
    assert_one_line_error, build_until_engine, copy_tree, git, recipe, source_only, stderr,
    stopped_at_engine, write_recipe,
};

/// Size of the unrelated blob: large and incompressible, so a transfer of it shows in the pack.
const BIG: usize = 4 << 20;

/// `len` bytes from xorshift64 (incompressible, the same on every run).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// A monorepo with `tests/data/minihip` as `projects/rccl`, a 4 MiB `projects/other/big.bin`, files
/// at the root and in `projects/`, an older commit with another large blob, and tag `v0.1.0`.
/// Returns (repo, tagged commit, big blob id, old blob id).
fn monorepo(dir: &Path) -> (PathBuf, String, String, String) {
    let repo = dir.join("mono.git-src");
    std::fs::create_dir_all(repo.join("projects/other")).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("projects/other/old.bin"), noise(BIG / 2)).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "history"]);
    let old = git(&repo, &["rev-parse", "HEAD:projects/other/old.bin"]);
    git(&repo, &["rm", "-q", "projects/other/old.bin"]);
    std::fs::create_dir_all(repo.join("projects")).unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/minihip"),
        &repo.join("projects/rccl"),
    );
    // `git rm` removed the emptied folders.
    std::fs::create_dir_all(repo.join("projects/other")).unwrap();
    std::fs::write(repo.join("projects/other/big.bin"), noise(BIG)).unwrap();
    std::fs::write(
        repo.join("projects/other/CMakeLists.txt"),
        "project(other)\n",
    )
    .unwrap();
    std::fs::write(repo.join("projects/README.md"), "the projects\n").unwrap();
    std::fs::write(repo.join("README.md"), "a monorepo\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "monorepo"]);
    git(&repo, &["tag", "-a", "v0.1.0", "-m", "v0.1.0"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let big = git(&repo, &["rev-parse", "HEAD:projects/other/big.bin"]);
    (repo, commit, big, old)
}

/// The minihip recipe for `git_url`, with `subdir`.
fn subdir_recipe(git_url: &str, commit: &str, subdir: &str) -> String {
    source_only(&recipe(Path::new(git_url), Some(commit), "none", "")).replace(
        "tag = \"v0.1.0\"\n",
        &format!("tag = \"v0.1.0\"\nsubdir = \"{subdir}\"\n"),
    )
}

/// The one bare source cache under `home`.
fn the_cache(home: &Path) -> PathBuf {
    let caches: Vec<PathBuf> = std::fs::read_dir(home.join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "git"))
        .collect();
    assert_eq!(caches.len(), 1, "{caches:?}");
    caches[0].clone()
}

/// Whether the repository `git_dir` holds `oid` (never fetching lazily).
fn has_object(git_dir: &Path, oid: &str) -> bool {
    Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(["cat-file", "-e", oid])
        .env("GIT_NO_LAZY_FETCH", "1")
        .output()
        .unwrap()
        .status
        .success()
}

/// Disk use of the objects of `git_dir`, loose (`size`) and packed (`size-pack`), KiB
/// (`git count-objects -v`; a small fetch is stored loose).
fn pack_kib(git_dir: &Path) -> u64 {
    let out = git(
        git_dir,
        &[
            &format!("--git-dir={}", git_dir.display()),
            "count-objects",
            "-v",
        ],
    );
    out.lines()
        .filter_map(|l| {
            l.strip_prefix("size: ")
                .or_else(|| l.strip_prefix("size-pack: "))
        })
        .map(|v| v.parse::<u64>().unwrap())
        .sum()
}

/// The cache and the work folder after a fetch of `projects/rccl`: the other project's blobs (and
/// the history's) absent from both, the subfolder complete and equal to the origin's, a clean
/// sparse checkout at the pin.
fn assert_only_the_subfolder(home: &Path, repo: &Path, commit: &str, big: &str, old: &str) {
    let cache = the_cache(home);
    assert!(rcclfix::source::is_partial(&cache));
    assert_eq!(
        git(
            &cache,
            &[
                &format!("--git-dir={}", cache.display()),
                "rev-parse",
                "--is-shallow-repository"
            ]
        ),
        "true"
    );
    assert!(!has_object(&cache, big), "the unrelated blob was fetched");
    assert!(
        !has_object(&cache, old),
        "a blob of the history was fetched"
    );
    let cml = git(repo, &["rev-parse", "HEAD:projects/rccl/CMakeLists.txt"]);
    assert!(has_object(&cache, &cml));
    // The whole cache is far smaller than the one blob it left out.
    let kib = pack_kib(&cache);
    assert!(kib * 1024 < BIG as u64 / 8, "cache pack {kib} KiB");

    let src = home.join("work/minihip-gfx1100/src");
    rcclfix::source::verify_checkout(&src, commit).unwrap();
    let dot_git = src.join(".git");
    assert!(
        !has_object(&dot_git, big),
        "the checkout holds the unrelated blob"
    );
    assert!(pack_kib(&dot_git) * 1024 < BIG as u64 / 8);
    assert!(!src.join("projects/other").exists());
    assert_eq!(
        std::fs::read_to_string(src.join("README.md")).unwrap(),
        "a monorepo\n"
    );
    assert!(src.join("projects/README.md").is_file());
    // Every file of the subfolder, byte for byte.
    let want = repo.join("projects/rccl");
    let mut n = 0;
    for e in walkdir::WalkDir::new(&want) {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let rel = e.path().strip_prefix(repo).unwrap();
            let got = std::fs::read(src.join(rel))
                .unwrap_or_else(|err| panic!("{} missing: {err}", rel.display()));
            assert_eq!(got, std::fs::read(e.path()).unwrap(), "{}", rel.display());
            n += 1;
        }
    }
    let tracked = git(repo, &["ls-files", "projects/rccl"]).lines().count();
    assert!(n >= 3 && n == tracked, "{n} files, {tracked} tracked");
    // No URL is left that git inside a container could try to reach.
    let urls = Command::new("git")
        .arg("-C")
        .arg(&src)
        .args(["config", "--get-regexp", r"^remote\..*\.url$"])
        .output()
        .unwrap();
    assert!(
        urls.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&urls.stdout)
    );
}

/// git in the checkout with the cache and the origin moved away (as inside a container: no
/// network, no cache): status clean, nothing of the cone missing, a patch applies and reverts.
fn assert_self_contained(home: &Path, repo: &Path, commit: &str) {
    let src = home.join("work/minihip-gfx1100/src");
    let cache = the_cache(home);
    let away = |p: &Path| p.with_extension("away");
    std::fs::rename(&cache, away(&cache)).unwrap();
    std::fs::rename(repo, away(repo)).unwrap();
    assert_eq!(git(&src, &["status", "--porcelain"]), "");
    let objs = git(
        &src,
        &[
            "rev-list",
            "--objects",
            "--missing=print",
            "HEAD",
            "--",
            "projects/rccl",
        ],
    );
    assert!(!objs.lines().any(|l| l.starts_with('?')), "{objs}");
    assert_eq!(git(&src, &["rev-parse", "HEAD"]), commit);
    let cml = src.join("projects/rccl/CMakeLists.txt");
    let before = std::fs::read_to_string(&cml).unwrap();
    std::fs::write(&cml, format!("{before}# changed\n")).unwrap();
    let diff = git(&src, &["diff"]);
    assert!(diff.contains("+# changed"), "{diff}");
    git(&src, &["checkout", "--", "projects/rccl/CMakeLists.txt"]);
    assert_eq!(std::fs::read_to_string(&cml).unwrap(), before);
    std::fs::rename(away(&cache), &cache).unwrap();
    std::fs::rename(away(repo), repo).unwrap();
}

#[test]
fn a_subdir_recipe_fetches_and_checks_out_only_its_subfolder() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit, big, old) = monorepo(t.path());
    let f = write_recipe(
        t.path(),
        "r.toml",
        &subdir_recipe(repo.to_str().unwrap(), &commit, "projects/rccl"),
    );
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("only projects/rccl: shallow, blob-filtered"),
        "{}",
        stderr(&o)
    );
    assert_only_the_subfolder(&home, &repo, &commit, &big, &old);
    assert_self_contained(&home, &repo, &commit);

    // Again, offline (the origin moved away): the cached tag and its blobs make a fresh checkout.
    let gone = repo.with_extension("gone");
    std::fs::rename(&repo, &gone).unwrap();
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("using the cached tag"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("Fetching"), "{}", stderr(&o));
    std::fs::rename(&gone, &repo).unwrap();
    assert_only_the_subfolder(&home, &repo, &commit, &big, &old);

    // The pin still holds: a moved tag is refused naming both commits.
    std::fs::write(repo.join("projects/rccl/NEW"), "moved\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "move the tag"]);
    git(&repo, &["tag", "-f", "-a", "v0.1.0", "-m", "moved"]);
    let moved = git(&repo, &["rev-parse", "HEAD"]);
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_one_line_error(&o, &["v0.1.0", &moved, &commit]);
}

#[test]
fn a_subdir_recipe_fetches_only_its_subfolder_from_a_git_mirror() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit, big, old) = monorepo(t.path());
    let mirror = t.path().join("mirror.git");
    git(
        t.path(),
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            mirror.to_str().unwrap(),
        ],
    );
    // The recipe names the upstream URL; the mirror serves it (no network is used).
    let f = write_recipe(
        t.path(),
        "r.toml",
        &subdir_recipe(
            "https://github.com/ROCm/rocm-systems.git",
            &commit,
            "projects/rccl",
        ),
    );
    let o = build_until_engine(
        &home,
        t.path(),
        &f,
        &["--git-mirror", mirror.to_str().unwrap()],
    );
    assert!(stopped_at_engine(&o), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("filtering not recognized"),
        "{}",
        stderr(&o)
    );
    assert_only_the_subfolder(&home, &repo, &commit, &big, &old);
    assert_self_contained(&home, &repo, &commit);
    // The mirror itself is not changed (no config written to it).
    assert!(!std::fs::read_to_string(mirror.join("config"))
        .unwrap()
        .contains("allowFilter"));
}

#[test]
fn a_subdir_missing_from_the_commit_is_one_line_and_caches_no_tag() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let (repo, commit, _, _) = monorepo(t.path());
    let f = write_recipe(
        t.path(),
        "r.toml",
        &subdir_recipe(repo.to_str().unwrap(), &commit, "projects/nope"),
    );
    let o = build_until_engine(&home, t.path(), &f, &[]);
    assert_one_line_error(&o, &["projects/nope", "is not a folder in commit", &commit]);
    let cache = the_cache(&home);
    assert_eq!(
        git(
            &cache,
            &[&format!("--git-dir={}", cache.display()), "tag", "--list"]
        ),
        ""
    );
}

#[test]
fn the_cone_is_the_subfolder_and_the_files_above_it() {
    let t = tempfile::tempdir().unwrap();
    let (repo, commit, _, _) = monorepo(t.path());
    let gd = repo.join(".git");
    let mut cone = rcclfix::source::cone_paths(&gd, &commit, "projects/rccl/").unwrap();
    cone.sort();
    assert_eq!(cone, ["README.md", "projects/README.md", "projects/rccl"]);
    assert!(rcclfix::source::cone_paths(&gd, &commit, "")
        .unwrap()
        .is_empty());
    for bad in ["../x", "/abs", "-x", "a//b", "a/./b"] {
        let e = rcclfix::source::cone_paths(&gd, &commit, bad).unwrap_err();
        assert!(e.to_string().contains("not a relative folder path"), "{e}");
    }
}
