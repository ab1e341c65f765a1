//! Hostile inputs to the source, build-output and recipe surfaces (issue 20): writes and commands
//! that escape (class 3: a link in the checked-out tree or one a recipe patch creates, git's
//! `ext::` transport, `ls-remote`'s suffix match), a good output replaced (class 6: another
//! recipe's output folder, a folder that is no rcclfix output) and errors a person can act on
//! (class 7: TOML and lockfile errors, paths that are not UTF-8, FIFOs, unknown toolchains, a
//! `verify --lib` that is no shared library); the recipe rows of the issue's mediums (class 5:
//! `recipe pin` of a tag that is no commit, `cmake_options` that override rcclfix) are built in
//! [`super::hostile_recipe`].
//!
//! Every row makes its input in a fresh folder `d` (`in/`, `out/`, `home/`, `tmp/` and
//! `victim/`, a host folder a link points at), runs the real binary there with `RCCLFIX_HOME`,
//! `HOME` and `TMPDIR` inside `d`, and checks the exit code, a fragment of the message, that
//! nothing changed under `d` outside `home/` (rcclfix's own source cache, work folder and
//! lockfile) and the paths the row names, that no control character reached the terminal and
//! that no message carries a literal `\n`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::control_chars;

/// The folder beside a recipe file's folder where its patches are looked up.
const PATCHES: &str = "patches";

/// Where a row's fragment is looked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum In {
    Stdout,
    Stderr,
}

pub(crate) type Check = Box<dyn Fn(&Path, &str, &str) -> Result<(), String>>;

/// One hostile input and what must come out.
pub(crate) struct Row {
    /// `class N: what`.
    pub(crate) name: &'static str,
    pub(crate) args: Vec<OsString>,
    pub(crate) code: i32,
    pub(crate) fragment: String,
    pub(crate) looked_in: In,
    /// Paths under `d` (besides `home/`) the run may create or change.
    pub(crate) may_write: Vec<&'static str>,
    /// A further check on (`d`, stdout, stderr).
    pub(crate) check: Option<Check>,
}

pub(crate) fn row(
    name: &'static str,
    args: &[&dyn AsRef<std::ffi::OsStr>],
    code: i32,
    fragment: &str,
) -> Row {
    Row {
        name,
        args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
        code,
        fragment: fragment.to_owned(),
        looked_in: In::Stderr,
        may_write: vec![],
        check: None,
    }
}

/// [`crate::support::listing`] with `home/` and the row's `may_write` folders writable.
fn listing(root: &Path, may_write: &[&str]) -> Vec<crate::support::Entry> {
    crate::support::listing(root, &[&["home"], may_write].concat())
}

/// `git` in `dir` with a fixed identity and no user configuration.
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
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// A file of a test repository: its text, or a symbolic link to a path.
pub(crate) enum Entry<'a> {
    File(&'a str),
    Link(&'a Path),
}

/// A git repository at `dir` holding `entries` (and a CMakeLists.txt), committed and tagged
/// `v0.1.0`; returns the commit.
pub(crate) fn repo(dir: &Path, entries: &[(&str, Entry)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(hostile CXX)\n",
    )
    .unwrap();
    for (name, e) in entries {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        match e {
            Entry::File(t) => std::fs::write(&p, t).unwrap(),
            Entry::Link(to) => std::os::unix::fs::symlink(to, &p).unwrap(),
        }
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "hostile"]);
    git(dir, &["tag", "-a", "v0.1.0", "-m", "v0.1.0"]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A recipe named `hostile` of the repository `git` at `commit` (`None`: unpinned), with extra
/// lines in `[source]` and `[build]`.
pub(crate) fn recipe(
    git: &str,
    commit: Option<&str>,
    source_extra: &str,
    build_extra: &str,
) -> String {
    let commit = commit
        .map(|c| format!("commit = \"{c}\"\n"))
        .unwrap_or_default();
    format!(
        r#"rccl_version = "0.1.0"
name = "hostile"
rocm_release = "0.0.0"
status = "expected"

[source]
git = "{git}"
tag = "v0.1.0"
{commit}{source_extra}

[toolchain]
name = "debian-trixie"
cxx = "/usr/bin/hipcc"
rocm_path = "/usr"

[build]
targets = ["gfx1100"]
ndebug = "none"
link_ram_gib = 0.5
{build_extra}
"#
    )
}

/// Write `text` as `d/in/<rel>`; returns `in/<rel>` (the argument).
pub(crate) fn input(d: &Path, rel: &str, text: &str) -> String {
    let p = d.join("in").join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    format!("in/{rel}")
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

/// A symbolic-link patch: `name -> target`.
fn link_patch(name: &str, target: &Path) -> String {
    format!(
        "diff --git a/{name} b/{name}\nnew file mode 120000\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+{}\n\\ No newline at end of file\n",
        target.display()
    )
}

fn no_fetch() -> Option<Check> {
    Some(Box::new(|d: &Path, _: &str, _: &str| {
        if d.join("home/src").exists() {
            return Err("it fetched before refusing".into());
        }
        Ok(())
    }))
}

/// The rows: class 3, then 6, then 7.
fn rows(d: &Path) -> Vec<Row> {
    let victim = d.join("victim");
    let mut rows = vec![];
    let build = |r: &str| -> Vec<OsString> {
        ["build", "--recipe", r, "--out-dir", "out"]
            .map(OsString::from)
            .to_vec()
    };
    let with_args = |mut r: Row, args: Vec<OsString>| {
        r.args = args;
        r
    };

    // Class 3: writes and commands that escape.
    let src = d.join("src-link");
    let c = repo(&src, &[("evil", Entry::Link(&victim))]);
    let r = input(
        d,
        "link.toml",
        &recipe(
            &src.display().to_string(),
            Some(&c),
            "",
            "extra_files = { \"evil/x.txt\" = \"pwned\" }",
        ),
    );
    rows.push(with_args(
        row(
            "class 3: an extra file through a link the source repository holds",
            &[],
            2,
            "build.extra_files \"evil/x.txt\": evil is a symbolic link in the source tree",
        ),
        build(&r),
    ));

    let src = d.join("src-plain");
    let c = repo(&src, &[("README", Entry::File("plain\n"))]);
    input(
        d,
        &format!("{PATCHES}/link.patch"),
        &link_patch("evil2", &victim),
    );
    let r = input(
        d,
        "r/patched.toml",
        &recipe(
            &src.display().to_string(),
            Some(&c),
            "",
            "patches = [\"link.patch\"]\nextra_files = { \"evil2/deep/x.txt\" = \"pwned\" }",
        ),
    );
    rows.push(with_args(
        row(
            "class 3: an extra file through a link one of the recipe's patches creates",
            &[],
            2,
            "evil2 is a symbolic link in the source tree",
        ),
        build(&r),
    ));

    let through = format!(
        "{}diff --git a/evil3/y.txt b/evil3/y.txt\nnew file mode 100644\n--- /dev/null\n+++ b/evil3/y.txt\n@@ -0,0 +1 @@\n+pwned\n",
        link_patch("evil3", &victim)
    );
    input(d, &format!("{PATCHES}/through.patch"), &through);
    let r = input(
        d,
        "r/through.toml",
        &recipe(
            &src.display().to_string(),
            Some(&c),
            "",
            "patches = [\"through.patch\"]",
        ),
    );
    rows.push(with_args(
        row(
            "class 3: a patch that writes through a link it creates (git apply refuses)",
            &[],
            2,
            "patch through.patch does not apply",
        ),
        build(&r),
    ));

    let src = d.join("src-subdir");
    let c = repo(&src, &[("proj", Entry::Link(&victim))]);
    let r = input(
        d,
        "subdir.toml",
        &recipe(
            &src.display().to_string(),
            Some(&c),
            "subdir = \"proj\"",
            "extra_files = { \"x.txt\" = \"pwned\" }",
        ),
    );
    rows.push(with_args(
        row(
            "class 3: source.subdir that is a link in the repository",
            &[],
            2,
            "source.subdir \"proj\"",
        ),
        build(&r),
    ));

    // git's ext:: transport, allowed in the user's git configuration.
    std::fs::create_dir_all(d.join("home")).unwrap();
    std::fs::write(
        d.join("home/.gitconfig"),
        "[protocol \"ext\"]\n\tallow = always\n",
    )
    .unwrap();
    let ext = format!("ext::sh -c touch% {}", victim.join("pwned").display());
    let r = input(d, "ext.toml", &recipe(&ext, None, "", ""));
    for (name, args) in [
        (
            "class 3: source.git with git's ext:: transport, in recipe pin",
            vec![
                "recipe",
                "pin",
                "--lockfile",
                "out/lock.toml",
                "--recipe",
                &r,
            ],
        ),
        (
            "class 3: source.git with git's ext:: transport, in build --plan",
            vec!["build", "--plan", "--recipe", &r],
        ),
    ] {
        rows.push(with_args(
            row(
                name,
                &[],
                2,
                "is not an https://, http://, ssh://, git:// or file:// URL",
            ),
            args.into_iter().map(OsString::from).collect(),
        ));
    }
    let good = input(
        d,
        "good.toml",
        &recipe(&src.display().to_string(), None, "", ""),
    );
    let mut r = row(
        "class 3: --git-mirror with git's ext:: transport",
        &[
            &"recipe",
            &"pin",
            &"--lockfile",
            &"out/lock.toml",
            &"--recipe",
            &good,
            &"--git-mirror",
            &ext,
        ],
        2,
        "does not exist",
    );
    r.check = Some(Box::new(|_: &Path, out: &str, _: &str| {
        if out.is_empty() {
            Ok(())
        } else {
            Err(format!("the pin table started before the refusal: {out}"))
        }
    }));
    rows.push(r);

    // `git ls-remote refs/tags/v1` also lists refs/tags/zz/refs/tags/v1 (a suffix match).
    let src = d.join("src-tags");
    let want = repo(&src, &[]);
    git(&src, &["tag", "-d", "v0.1.0"]);
    git(&src, &["tag", "-a", "v1", "-m", "v1"]);
    std::fs::write(src.join("later"), "later\n").unwrap();
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "later"]);
    git(&src, &["tag", "-a", "zz/refs/tags/v1", "-m", "decoy"]);
    let text = recipe(&src.display().to_string(), None, "", "").replace("v0.1.0", "v1");
    let r = input(d, "tags.toml", &text);
    let mut row_ = row(
        "class 3: recipe pin takes refs/tags/v1, not refs/tags/zz/refs/tags/v1",
        &[
            &"recipe",
            &"pin",
            &"--lockfile",
            &"out/lock.toml",
            &"--recipe",
            &r,
        ],
        0,
        &format!("hostile  v1   {want}  pinned"),
    );
    row_.looked_in = In::Stdout;
    row_.may_write = vec!["out/lock.toml"];
    let w = want.clone();
    row_.check = Some(Box::new(move |d: &Path, _: &str, _: &str| {
        let lock = std::fs::read_to_string(d.join("out/lock.toml")).map_err(|e| e.to_string())?;
        if lock.contains(&w) {
            Ok(())
        } else {
            Err(format!("the lockfile pins another commit: {lock}"))
        }
    }));
    rows.push(row_);

    rows.extend(super::hostile_recipe::rows(d));

    // Class 6: a good output silently replaced.
    let src = d.join("src-out");
    let c = repo(&src, &[]);
    let r = input(
        d,
        "own.toml",
        &recipe(&src.display().to_string(), Some(&c), "", ""),
    );
    let theirs = d.join("out-theirs/rccl-hostile-gfx1100");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(
        theirs.join("manifest.json"),
        "{\"recipe\": \"2.21.5-debian-sid\"}\n",
    )
    .unwrap();
    std::fs::write(theirs.join("librccl.so.1.0"), "a good library\n").unwrap();
    let mut row_ = with_args(
        row(
            "class 6: another recipe's output folder is not replaced",
            &[],
            2,
            "out-theirs/rccl-hostile-gfx1100 holds the output of recipe 2.21.5-debian-sid, not hostile; building would replace it",
        ),
        ["build", "--recipe", &r, "--out-dir", "out-theirs"]
            .map(OsString::from)
            .to_vec(),
    );
    row_.check = no_fetch();
    rows.push(row_);
    let mine = d.join("out-user/rccl-hostile-gfx1100");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("thesis.tex"), "years of work\n").unwrap();
    let mut row_ = with_args(
        row(
            "class 6: a folder that is not an rcclfix output is not replaced",
            &[],
            2,
            "out-user/rccl-hostile-gfx1100 exists and is not an rcclfix output folder",
        ),
        ["build", "--recipe", &r, "--out-dir", "out-user"]
            .map(OsString::from)
            .to_vec(),
    );
    row_.check = no_fetch();
    rows.push(row_);

    // Class 7: errors a person can act on, one line naming the file and the value.
    let bad = input(d, "bad.toml", "rccl_version = \"0.1.0\"\n[build\n");
    rows.push(row(
        "class 7: a TOML error with a two-line reason",
        &[&"build", &"--plan", &"--recipe", &bad],
        2,
        "in/bad.toml (line 2, column 7): invalid table header; expected `.`, `]`",
    ));
    let neg = input(
        d,
        "neg.toml",
        &recipe("/nonexistent/x.git", None, "", "")
            .replace("link_ram_gib = 0.5", "link_ram_gib = -5"),
    );
    rows.push(row(
        "class 7: a field out of range names the field and the value",
        &[&"build", &"--plan", &"--recipe", &neg],
        2,
        "error: in/neg.toml: invalid recipe: build.link_ram_gib = -5: must be a positive number of GiB",
    ));
    let lock = input(d, "missing-field.lock", "[[pin]]\nrecipe = \"hostile\"\n");
    rows.push(row(
        "class 7: a lockfile entry without its tag",
        &[&"recipe", &"pin", &"--recipe", &good, &"--lockfile", &lock],
        2,
        "in/missing-field.lock (line 1, column 1): missing field `tag`",
    ));
    let lock = input(
        d,
        "short.lock",
        "[[pin]]\nrecipe = \"hostile\"\ntag = \"v0.1.0\"\ncommit = \"abc\"\n",
    );
    rows.push(row(
        "class 7: a lockfile pin that is not a commit",
        &[&"recipe", &"pin", &"--recipe", &good, &"--lockfile", &lock],
        2,
        "in/short.lock: pin of hostile tag v0.1.0 has commit \"abc\", not a full 40-hex commit",
    ));
    let bad_dir = OsString::from(std::ffi::OsStr::from_bytes(b"out/\xff\xfe"));
    rows.push(row(
        "class 7: an --out-dir that is not UTF-8 is named",
        &[
            &"build",
            &"--plan",
            &"--json",
            &"--recipe",
            &good,
            &"--out-dir",
            &bad_dir,
        ],
        2,
        "--out-dir out/",
    ));
    mkfifo(&d.join("in").join(PATCHES).join("fifo.patch"));
    let r = input(
        d,
        "r/fifo.toml",
        &recipe(
            &d.join("src-out").display().to_string(),
            Some(&c),
            "",
            "patches = [\"fifo.patch\"]",
        ),
    );
    rows.push(with_args(
        row(
            "class 7: a patch that is a FIFO is named as one, not \"not found\"",
            &[],
            2,
            "in/patches/fifo.patch: not a regular file (a FIFO)",
        ),
        build(&r),
    ));
    mkfifo(&d.join("in/mirror.fifo"));
    rows.push(row(
        "class 7: a --git-mirror that is a FIFO",
        &[
            &"recipe",
            &"pin",
            &"--lockfile",
            &"out/lock.toml",
            &"--recipe",
            &good,
            &"--git-mirror",
            &"in/mirror.fifo",
        ],
        2,
        "git mirror in/mirror.fifo is a FIFO, not a git repository folder",
    ));
    let notes = input(d, "notes.txt", "not a library\n");
    let mut r = row(
        "class 7: verify --lib of a text file, refused before any child loads a runtime",
        &[&"verify", &"--lib", &notes],
        2,
        "error: in/notes.txt: not an ELF shared library",
    );
    r.check = Some(Box::new(|_: &Path, out: &str, _: &str| {
        if out.is_empty() {
            Ok(())
        } else {
            Err(format!("a child ran (its table is on stdout): {out}"))
        }
    }));
    rows.push(r);
    let unknown = input(
        d,
        "unknown-tc.toml",
        &recipe(&d.join("src-out").display().to_string(), Some(&c), "", "")
            .replace("name = \"debian-trixie\"", "name = \"debian-nosuch\""),
    );
    rows.push(row(
        "class 7: build --plan of a recipe whose toolchain is unknown",
        &[&"build", &"--plan", &"--recipe", &unknown],
        2,
        "recipe hostile: unknown toolchain.name \"debian-nosuch\" (known: debian-sid, debian-trixie, debian-rocm7.2, host)",
    ));
    let mut r = with_args(
        row(
            "class 7: build of a recipe whose toolchain is unknown stops before anything",
            &[],
            2,
            "recipe hostile: unknown toolchain.name \"debian-nosuch\"",
        ),
        build(&unknown),
    );
    r.check = Some(Box::new(|d: &Path, _: &str, err: &str| {
        if err.contains("building it first") || d.join("home/src").exists() {
            return Err("it fetched or started a toolchain build first".into());
        }
        Ok(())
    }));
    rows.push(r);
    rows
}

/// The table: each row in its own folder, checked as the module docs say.
#[test]
fn hostile_source_inputs_table() {
    let probe = tempfile::tempdir().unwrap();
    let n = {
        for sub in ["in", "out", "home", "tmp", "victim"] {
            std::fs::create_dir_all(probe.path().join(sub)).unwrap();
        }
        rows(probe.path()).len()
    };
    let mut failures = vec![];
    for k in 0..n {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for sub in ["in", "out", "home", "tmp", "victim"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        std::fs::write(d.join("victim/keep.txt"), "a host file\n").unwrap();
        // A toolchain that is "built" but unreadable: a build that got past its refusal stops
        // at the toolchain (quickly, and without building one) instead of going on.
        let stamp = d.join("home/toolchains/debian-trixie/stamp.json");
        std::fs::create_dir_all(stamp.parent().unwrap()).unwrap();
        std::fs::write(&stamp, "not a stamp\n").unwrap();
        let r = rows(d).swap_remove(k);
        let before = listing(d, &r.may_write);
        let mut cmd = crate::support::rcclfix();
        cmd.args(&r.args)
            .current_dir(d)
            .env("RCCLFIX_HOME", d.join("home"))
            .env("HOME", d.join("home"))
            .env("TMPDIR", d.join("tmp"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_CONFIG_GLOBAL")
            .env_remove("RCCLFIX_GIT_MIRROR")
            .env_remove("RCCLFIX_CCACHE_DIR")
            .env_remove("RCCLFIX_ENGINE")
            .env_remove("NO_COLOR");
        let o = match crate::support::output_with_deadline(&mut cmd, Duration::from_secs(120)) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{}: {e}\n  args {:?}", r.name, r.args));
                continue;
            }
        };
        let (code, out, err) = (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        let after = listing(d, &r.may_write);
        let mut why = vec![];
        if code != r.code {
            why.push(format!("exit {code}, expected {}", r.code));
        }
        let text = match r.looked_in {
            In::Stdout => &out,
            In::Stderr => &err,
        };
        if !text.contains(&r.fragment) {
            why.push(format!("{:?} lacks {:?}", r.looked_in, r.fragment));
        }
        if before != after {
            let new: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
            let gone: Vec<_> = before.iter().filter(|e| !after.contains(e)).collect();
            why.push(format!(
                "written outside home/: new or changed {new:?}, removed {gone:?}"
            ));
        }
        for (what, s) in [("stdout", &out), ("stderr", &err)] {
            let cc = control_chars(s);
            if !cc.is_empty() {
                why.push(format!("control characters on {what}: {cc:?}"));
            }
        }
        if err.contains("\\n") {
            why.push("a literal \\n in a message".into());
        }
        if r.code == 2 {
            // Status lines (indented) may come first; then the one `error: ` line.
            match err.lines().position(|l| l.starts_with("error: ")) {
                None => why.push("stderr has no `error: ` line".into()),
                Some(i) if err.lines().take(i).any(|l| !l.starts_with(' ')) => {
                    why.push("stderr has other lines before its `error: ` line".into())
                }
                Some(_) => {}
            }
        }
        if let Some(c) = &r.check {
            if let Err(e) = c(d, &out, &err) {
                why.push(e);
            }
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n  args {:?}\n  stdout: {out}\n  stderr: {err}",
                r.name,
                why.join("; "),
                r.args
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Which `source.git` values a recipe may name: the transports that move data and run nothing of
/// the origin's choosing (`source::check_origin` applies the same rule to every origin).
#[test]
fn git_origins_are_limited_to_data_transports() {
    let ok = [
        "https://github.com/ROCm/rccl.git",
        "http://mirror.internal/rccl.git",
        "ssh://git@example.org:2222/rccl.git",
        "git://example.org/rccl.git",
        "file:///srv/mirror/rccl.git",
        "git@example.org:ROCm/rccl.git",
        "example.org:rccl.git",
        "/srv/mirror/rccl.git",
        "/srv/a path with spaces/rccl.git",
    ];
    let refused = [
        "ext::sh -c touch% /tmp/pwned",
        "fd::17",
        "testgit::/srv/x",
        "foo://example.org/x",
        "HTTPS://example.org/x",
        "ssh://-oProxyCommand=touch%20x/rccl",
        "ssh://user@-oProxyCommand=x/rccl",
        "-oProxyCommand=x:rccl",
        "git@-o:rccl",
        "file://relative/path",
        "relative/path.git",
        "rccl.git",
        "host:",
        "https://",
    ];
    for o in ok {
        assert!(rcclfix::recipe::is_git_origin(o), "{o} refused");
        rcclfix::source::check_origin(o).unwrap();
    }
    for o in refused {
        assert!(!rcclfix::recipe::is_git_origin(o), "{o} accepted");
        let err = rcclfix::source::check_origin(o).unwrap_err().to_string();
        assert!(err.starts_with("git origin"), "{err}");
        let text = include_str!("../../recipes/2.13.4.toml").replacen(
            "git = \"https://github.com/ROCm/rccl.git\"",
            &format!("git = {o:?}"),
            1,
        );
        let err = rcclfix::recipe::Recipe::parse(&text, "r.toml").unwrap_err();
        assert!(format!("{err:#}").contains("source.git"), "{o}: {err:#}");
    }
}
