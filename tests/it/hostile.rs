//! Hostile inputs, one table row per class of issue 12 this module owns: terminal control
//! characters (3), unread input that must not read as "fine" (4), hangs (5), memory that follows
//! the attacker's claim (6), smaller user-visible contracts (8) and CLI conventions (10).
//!
//! Every row generates its input in a fresh folder, runs the real binary there (with
//! `RCCLFIX_HOME`, `HOME` and `TMPDIR` inside that folder and a deadline), and checks the exit
//! code, a fragment of the message, that nothing was written outside `out/`, and that no control
//! character reached stderr. Then: `-q` and `NO_COLOR`/`--color=never` in every subcommand
//! (through a pty for the terminal case), the probe deadline, and table layout.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::control_chars;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(p: &str) -> PathBuf {
    repo().join("tests/fixtures").join(p)
}

/// Where a row's message fragment is looked for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum In {
    Stdout,
    Stderr,
}

/// One hostile input: what to run (relative to the row's folder) and what must come out.
struct Row {
    /// `class N: what`, for failure messages.
    name: &'static str,
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    /// Run under `ulimit -v` of this many KiB.
    ulimit_kib: Option<u64>,
    code: i32,
    fragment: String,
    looked_in: In,
}

fn row(name: &'static str, args: &[&dyn AsRef<std::ffi::OsStr>], code: i32, fragment: &str) -> Row {
    Row {
        name,
        args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
        env: vec![],
        ulimit_kib: None,
        code,
        fragment: fragment.to_owned(),
        looked_in: In::Stderr,
    }
}

/// [`crate::support::run_row`] with a 120 s deadline.
fn run_in(
    dir: &Path,
    args: &[OsString],
    env: &[(&str, OsString)],
    ulimit_kib: Option<u64>,
) -> (i32, String, String) {
    crate::support::run_row(dir, args, env, ulimit_kib, Duration::from_secs(120))
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

/// The 2.13.4 recipe with one line changed.
fn recipe_with(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("recipes/2.13.4.toml")).unwrap();
    assert!(text.contains(from), "{from}");
    let p = dir.join(name);
    std::fs::write(&p, text.replace(from, to)).unwrap();
    p
}

/// The rows; each gets its folder `d` with `in/`, `out/`, `home/` and `tmp/` created.
fn rows(d: &Path) -> Vec<Row> {
    let i = d.join("in");
    let mut rows = vec![];

    // Class 3: terminal control characters in file names, error messages and log lines.
    let evil = std::ffi::OsStr::from_bytes(b"in/lib\x1b]0;pwned\x07\n\x1b[2J.so").to_owned();
    std::fs::copy(fixture("sid/kernels.so"), d.join(&evil)).unwrap();
    let mut r = row(
        "class 3: a file name with OSC, CSI and a newline, in scan's table",
        &[&"scan", &evil],
        1,
        "in/lib\\e]0;pwned\\x07\\n\\e[2J.so",
    );
    r.looked_in = In::Stdout;
    rows.push(r);
    let missing = OsString::from("in/missing\x1b[2J\nhelp? \u{9b}.so");
    rows.push(row(
        "class 3: a missing file's name in the error message",
        &[&"scan", &missing],
        2,
        "error: cannot read in/missing\\e[2J\\nhelp? \\x9b.so",
    ));
    std::fs::create_dir_all(i.join("sys/bus/pci/devices")).unwrap();
    std::fs::create_dir_all(i.join("proc")).unwrap();
    std::fs::write(
        i.join("run.log"),
        b"banner \x1b]0;pwned\x07\n:1:rocvirtual.cpp           :4208: 1 us: Pcie atomics not enabled, hostcall not supported \x1b[2J\x1b[31m\n",
    )
    .unwrap();
    let mut r = row(
        "class 3: log lines with OSC and CSI in doctor --log",
        &[
            &"doctor",
            &"--sysfs",
            &"in/sys",
            &"--proc",
            &"in/proc",
            &"--log",
            &"in/run.log",
        ],
        // A refusal with no kernel name and no RCCL context is inconclusive (whose kernel?).
        2,
        "hostcall not supported \\e[2J\\e[31m",
    );
    r.looked_in = In::Stdout;
    rows.push(r);

    // Class 4: what could not be read is an error (2), never "no problem".
    rows.push(row(
        "class 4: matrix --check with a git mirror that does not exist",
        &[
            &"matrix",
            &"--check",
            &"--root",
            &repo(),
            &"--git-mirror",
            &"in/nonexistent",
        ],
        2,
        "--git-mirror in/nonexistent: not a folder",
    ));
    std::fs::create_dir_all(i.join("not-git")).unwrap();
    rows.push(row(
        "class 4: matrix --check with a folder that is no git repository",
        &[
            &"matrix",
            &"--check",
            &"--root",
            &repo(),
            &"--git-mirror",
            &"in/not-git",
        ],
        2,
        "--git-mirror in/not-git: not a git repository",
    ));
    rows.push(row(
        "class 4: matrix --check --root that does not exist",
        &[&"matrix", &"--check", &"--root", &"in/nope"],
        2,
        "--root in/nope: not a folder",
    ));

    // Class 5: a FIFO is refused before it is opened (opening it would block).
    mkfifo(&i.join("fifo"));
    rows.push(row(
        "class 5: patch FIFO",
        &[&"patch", &"in/fifo", &"--out", &"out/x.so"],
        2,
        "error: in/fifo: not a regular file (a FIFO)",
    ));
    rows.push(row(
        "class 5: verify --lib FIFO",
        &[&"verify", &"--lib", &"in/fifo"],
        2,
        "error: in/fifo: not a regular file (a FIFO)",
    ));
    rows.push(row(
        "class 5: build --recipe FIFO",
        &[&"build", &"--recipe", &"in/fifo", &"--out-dir", &"out"],
        2,
        "error: in/fifo: not a regular file (a FIFO)",
    ));

    // Class 6: patch's memory is the output plus a fixed budget, and a claim over the limit is
    // refused with the claim, the limit and the knob.
    let big = i.join("big.so");
    std::fs::copy(fixture("patch/libdispatch-plain.so"), &big).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
    f.set_len(256 << 20).unwrap(); // sparse tail: the file is 256 MiB
    let mut r = row(
        "class 6: patch of a 256 MiB library within 256 MiB + 512 MiB of address space",
        &[&"-q", &"patch", &"in/big.so", &"--out", &"out/big.so"],
        0,
        "out/big.so",
    );
    r.ulimit_kib = Some((256 + 512) << 10);
    r.looked_in = In::Stdout;
    rows.push(r);
    let mut ccob = std::fs::read(fixture("patch/libdispatch-ccob.so")).unwrap();
    let at = ccob.windows(4).position(|w| w == b"CCOB").unwrap();
    assert_eq!(&ccob[at + 4..at + 6], &2u16.to_le_bytes(), "a CCOB v2");
    ccob[at + 12..at + 16].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(i.join("claims-4g.so"), &ccob).unwrap();
    rows.push(row(
        "class 6: patch of a CCOB claiming 4 GiB",
        &[&"patch", &"in/claims-4g.so", &"--out", &"out/x.so"],
        2,
        &format!("compressed bundle at 0x{at:x}: refusing to patch: it claims 4294967295 bytes uncompressed, over the limit of 1073741824 bytes; set RCCLFIX_MAX_BUNDLE_BYTES=<bytes> to raise it"),
    ));
    let mut r = row(
        "class 6: RCCLFIX_MAX_BUNDLE_BYTES lowers the limit",
        &[
            &"patch",
            &fixture("patch/libdispatch-ccob.so"),
            &"--out",
            &"out/x.so",
        ],
        2,
        "over the limit of 1024 bytes; set RCCLFIX_MAX_BUNDLE_BYTES",
    );
    r.env.push(("RCCLFIX_MAX_BUNDLE_BYTES", "1K".into()));
    rows.push(r);

    // Class 8: recipe validation, and verify's errors on stderr.
    for (name, from, to, msg) in [
        (
            "class 8: a target feature the processor lacks",
            r#"targets = ["gfx1100"]"#,
            r#"targets = ["gfx1100:xnack+"]"#,
            "\"gfx1100:xnack+\": gfx1100 has no xnack feature",
        ),
        (
            "class 8: a target listed twice",
            r#"targets = ["gfx1100"]"#,
            r#"targets = ["gfx1100", "gfx1100"]"#,
            "build.targets: \"gfx1100\" is listed twice",
        ),
        (
            "class 8: a negative link_ram_gib",
            "link_ram_gib = 3.5",
            "link_ram_gib = -5",
            "build.link_ram_gib = -5: must be a positive number of GiB",
        ),
    ] {
        let file = format!("{}.toml", rows.len());
        recipe_with(&i, &file, from, to);
        let p = format!("in/{file}");
        rows.push(row(
            name,
            &[&"build", &"--recipe", &p, &"--out-dir", &"out"],
            2,
            msg,
        ));
    }
    let fake = crate::verify::fake_lib();
    let mut r = row(
        "class 8: verify prints its errors on stderr",
        &[
            &"verify",
            &"--runtime",
            &"hip",
            &"--large-bytes",
            &"65536",
            &"--iters",
            &"1",
            &"--lib",
            &fake,
            &"--runtime-lib",
            &fake,
        ],
        2,
        "error: case 0 (all_reduce-f32-small-out): the library process (child) died from signal 6 (SIGABRT)",
    );
    r.env.push(("FAKENCCL_FAULT", "abort:0".into()));
    rows.push(r);

    // Class 10: CLI conventions.
    rows.push(row(
        "class 10: -q and -v together",
        &[&"-q", &"-v", &"matrix"],
        2,
        "the argument '--quiet' cannot be used with '--verbose",
    ));
    let mut r = row(
        "class 10: doctor --capture --json prints JSON",
        &[
            &"doctor",
            &"--sysfs",
            &"in/sys",
            &"--proc",
            &"in/proc",
            &"--capture",
            &"out/snap.tar",
            &"--json",
        ],
        0,
        "\"snapshot\": \"out/snap.tar\"",
    );
    r.looked_in = In::Stdout;
    rows.push(r);
    rows
}

#[test]
fn hostile_inputs_table() {
    let probe = tempfile::tempdir().unwrap();
    let n = {
        for sub in ["in", "out", "home", "tmp"] {
            std::fs::create_dir_all(probe.path().join(sub)).unwrap();
        }
        rows(probe.path()).len()
    };
    let mut failures = vec![];
    for k in 0..n {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for sub in ["in", "out", "home", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let r = rows(d).swap_remove(k);
        let before = crate::support::listing(d, &["out"]);
        let (code, out, err) = run_in(d, &r.args, &r.env, r.ulimit_kib);
        let after = crate::support::listing(d, &["out"]);
        let text = match r.looked_in {
            In::Stdout => &out,
            In::Stderr => &err,
        };
        let mut why = vec![];
        if code != r.code {
            why.push(format!("exit {code}, expected {}", r.code));
        }
        if !text.contains(&r.fragment) {
            why.push(format!("{:?} lacks {:?}", r.looked_in, r.fragment));
        }
        if before != after {
            let new: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
            let gone: Vec<_> = before.iter().filter(|e| !after.contains(e)).collect();
            why.push(format!(
                "written outside out/: new or changed {new:?}, removed {gone:?}"
            ));
        }
        let cc = control_chars(&err);
        if !cc.is_empty() {
            why.push(format!("control characters on stderr: {cc:?}"));
        }
        if r.looked_in == In::Stdout && !control_chars(&out).is_empty() {
            why.push(format!(
                "control characters on stdout: {:?}",
                control_chars(&out)
            ));
        }
        if r.code == 2 && r.looked_in == In::Stderr {
            // One error line (plus `caused by:` lines), never a split message.
            let first = err.lines().next().unwrap_or("");
            if !first.starts_with("error: ") && !r.name.starts_with("class 8: verify") {
                why.push("stderr does not start with `error: `".into());
            }
            if err.lines().skip(1).any(|l| {
                !(l.starts_with("caused by: ")
                    || l.starts_with("help: ")
                    || l.starts_with("note: ")
                    || l.starts_with("Usage: ")
                    || l.is_empty()
                    || l.starts_with("For more information"))
            }) && !r.name.starts_with("class 8: verify")
            {
                why.push("the message is split over lines".into());
            }
        }
        if r.name.starts_with("class 8: verify") && !out.contains("verdict: ERROR") {
            why.push("verify's result table is not on stdout".into());
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

/// The pre-change `patch` read the file and made two copies of it (3x the file); under the row's
/// address-space limit that fails, so the limit also proves the budget is not trivially large.
#[test]
fn patch_needs_less_than_twice_the_file() {
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big.so");
    std::fs::copy(fixture("patch/libdispatch-plain.so"), &big).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    // 1 GiB file, 1.5 GiB of address space: one mapping of it fits, two copies do not.
    let (code, out, err) = run_in(
        t.path(),
        &[
            "-q".into(),
            "patch".into(),
            big.clone().into(),
            "--out".into(),
            "o.so".into(),
        ],
        &[],
        Some((1024 + 512) << 10),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::metadata(t.path().join("o.so")).unwrap().len(),
        1 << 30
    );
}

/// A successful run of each subcommand: (name, args), run in `dir`; keep the returned folder (the
/// package run's build folder) while they run.
type Runs = (Vec<(&'static str, Vec<OsString>)>, tempfile::TempDir);

fn successful_runs(dir: &Path) -> Runs {
    let os = |v: &[&dyn AsRef<std::ffi::OsStr>]| -> Vec<OsString> {
        v.iter().map(|a| a.as_ref().to_owned()).collect()
    };
    std::fs::create_dir_all(dir.join("sys/bus/pci/devices")).unwrap();
    std::fs::create_dir_all(dir.join("proc")).unwrap();
    let fake = crate::verify::fake_lib();
    let f = crate::package::fixtures();
    let (keep, build) = crate::package::build_folder(&f.ours);
    let runs = vec![
        (
            "scan",
            os(&[&"scan", &repo().join("tests/data/doctor/plain-gfx1100.so")]),
        ),
        ("matrix", os(&[&"matrix"])),
        ("matrix --json", os(&[&"matrix", &"--json"])),
        (
            "matrix --check",
            os(&[&"matrix", &"--check", &"--root", &repo()]),
        ),
        ("build --list", os(&[&"build", &"--list"])),
        ("recipe list", os(&[&"recipe", &"list"])),
        ("recipe show", os(&[&"recipe", &"show", &"2.13.4"])),
        ("toolchain list", os(&[&"toolchain", &"list"])),
        (
            "doctor",
            os(&[
                &"doctor",
                &"--sysfs",
                &dir.join("sys"),
                &"--proc",
                &dir.join("proc"),
            ]),
        ),
        (
            "doctor --capture",
            os(&[
                &"doctor",
                &"--sysfs",
                &dir.join("sys"),
                &"--proc",
                &dir.join("proc"),
                &"--capture",
                &dir.join("snap.tar"),
            ]),
        ),
        (
            "patch",
            os(&[
                &"patch",
                &fixture("patch/libdispatch-plain.so"),
                &"--out",
                &dir.join("patched.so"),
            ]),
        ),
        (
            "verify",
            os(&[
                &"verify",
                &"--runtime",
                &"hip",
                &"--large-bytes",
                &"65536",
                &"--iters",
                &"1",
                &"--lib",
                &fake,
                &"--runtime-lib",
                &fake,
            ]),
        ),
        (
            "package",
            os(&[
                &"package",
                &"--from",
                &build,
                &"--out-dir",
                &dir.join("pkg"),
                &"--stock",
                &f.stock,
                // RCCLFIX_HOME is empty here: no toolchain rootfs to read librccl1 from.
                &"--depends",
                &"librccl1",
            ]),
        ),
    ];
    (runs, keep)
}

#[test]
fn quiet_means_an_empty_stderr_in_every_subcommand() {
    let t = tempfile::tempdir().unwrap();
    let (runs, _keep) = successful_runs(t.path());
    for (name, args) in runs {
        // Without -q the run is successful and (for most) says something on stderr.
        let (code, _, _) = run_in(t.path(), &args, &[], None);
        assert_eq!(code, 0, "{name}");
        let mut q = vec![OsString::from("-q")];
        q.extend(args.iter().cloned());
        let (code, _, err) = run_in(t.path(), &q, &[], None);
        assert_eq!(code, 0, "{name} -q");
        assert_eq!(err, "", "{name} -q wrote to stderr");
    }
}

/// Run `rcclfix ARGS` on a pty (`script` from util-linux) and return the whole transcript.
fn on_a_terminal(dir: &Path, args: &[OsString], env: &[(&str, &str)]) -> Vec<u8> {
    let line: Vec<String> = std::iter::once(crate::support::BIN.to_owned())
        .chain(args.iter().map(|a| a.to_str().unwrap().to_owned()))
        .map(|a| rcclfix::process::quote(&a))
        .collect();
    let mut cmd = Command::new("script");
    cmd.args(["-q", "-e", "-c", &line.join(" "), "/dev/null"])
        .current_dir(dir)
        .env("RCCLFIX_HOME", dir.join("home"))
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("RCCLFIX_GIT_MIRROR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run script (util-linux): {e}"));
    let mut all = o.stdout;
    all.extend(o.stderr);
    all
}

#[test]
fn no_color_and_color_never_mean_no_escape_on_a_terminal() {
    let t = tempfile::tempdir().unwrap();
    // The check can see colour: on a terminal, `patch` colours its status verb.
    let patch = vec![
        OsString::from("patch"),
        fixture("patch/libdispatch-plain.so").into(),
        "--out".into(),
        t.path().join("p.so").into(),
    ];
    assert!(
        on_a_terminal(t.path(), &patch, &[]).contains(&0x1b),
        "no colour on a terminal at all: the check below would prove nothing"
    );
    let (mut runs, _keep) = successful_runs(t.path());
    // Clap's own error and a warning are coloured too unless told otherwise.
    runs.push(("a usage error", vec!["scan".into(), "--bogus".into()]));
    runs.push(("an error", vec!["scan".into(), "/nonexistent".into()]));
    for (name, args) in runs {
        let t1 = on_a_terminal(t.path(), &args, &[("NO_COLOR", "1")]);
        assert!(
            !t1.contains(&0x1b),
            "{name} with NO_COLOR: {}",
            String::from_utf8_lossy(&t1)
        );
        let mut never = vec![OsString::from("--color=never")];
        never.extend(args.iter().cloned());
        let t2 = on_a_terminal(t.path(), &never, &[]);
        assert!(
            !t2.contains(&0x1b),
            "{name} --color=never: {}",
            String::from_utf8_lossy(&t2)
        );
    }
    // --color=always colours even into a pipe.
    let (_, _, err) = run_in(
        t.path(),
        &[
            "--color=always".into(),
            "scan".into(),
            "/nonexistent".into(),
        ],
        &[],
        None,
    );
    assert!(err.starts_with("\x1b[1;31merror\x1b[0m: "), "{err:?}");
}

#[test]
fn a_probe_that_hangs_is_stopped_at_its_deadline() {
    let start = Instant::now();
    let e = rcclfix::process::Cmd::new("a hanging probe", "sleep")
        .arg("30")
        .read_with_deadline(Duration::from_millis(500))
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(
        e.downcast_ref::<rcclfix::process::DeadlineError>()
            .is_some(),
        "{e:#}"
    );
    assert!(e.to_string().contains("did not finish within 0.5s"), "{e}");
    // A child that exits but leaves a grandchild holding its output open ends at the deadline too.
    let start = Instant::now();
    let e = rcclfix::process::Cmd::new("a daemonising probe", "sh")
        .args(["-c", "sleep 30 & echo started"])
        .read_with_deadline(Duration::from_millis(500))
        .unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(e
        .downcast_ref::<rcclfix::process::DeadlineError>()
        .is_some());
    // A quick one returns its output; a failing one its status and stderr.
    let out = rcclfix::process::Cmd::new("echo", "echo")
        .arg("hi")
        .read_with_deadline(Duration::from_secs(10))
        .unwrap();
    assert_eq!(out, "hi\n");
    let e = rcclfix::process::Cmd::new("false", "sh")
        .args(["-c", "echo oops >&2; exit 3"])
        .read_with_deadline(Duration::from_secs(10))
        .unwrap_err();
    assert!(e.to_string().contains("oops"), "{e}");
}

#[test]
fn build_list_columns_hold_long_recipe_names() {
    let (code, out, _) = run_in(
        &std::env::temp_dir(),
        &["build".into(), "--list".into()],
        &[],
        None,
    );
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    let col = lines[0].find("TOOLCHAIN").unwrap();
    assert!(lines.len() > 5);
    for l in &lines[1..] {
        // Every row's toolchain starts under the header, after a gap.
        assert_eq!(&l[col - 2..col], "  ", "{l:?}");
        assert_ne!(&l[col..col + 1], " ", "{l:?}");
    }
    assert!(out.contains("2.30.4-rocm7.14.0-device-linker  "), "{out}");
}

/// One vocabulary for the pipelines: what `matrix` prints is what the README and recipes say.
#[test]
fn pipelines_have_one_name() {
    let mut texts = vec![std::fs::read_to_string(repo().join("README.md")).unwrap()];
    for e in std::fs::read_dir(repo().join("recipes")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "toml") {
            texts.push(std::fs::read_to_string(e.path()).unwrap());
        }
    }
    for t in &texts {
        assert!(!t.contains("Pipeline A") && !t.contains("Pipeline B"));
    }
    let (_, out, _) = run_in(&std::env::temp_dir(), &["matrix".into()], &[], None);
    assert!(
        out.contains(" rdc ") && texts[0].contains("rdc pipeline"),
        "{out}"
    );
}

/// The embedded 2.13.4 recipe with one line replaced (or appended under its table).
fn recipe_2134_with(find: &str, replace: &str) -> String {
    let base = include_str!("../../recipes/2.13.4.toml");
    assert!(base.contains(find), "2.13.4.toml has no {find:?}");
    base.replacen(find, replace, 1)
}

/// Every recipe field that becomes a path, a git or engine argument, or a terminal line is
/// refused when the recipe is parsed, naming the field: a `name` with `..` chose the work folder
/// `rcclfix build` empties, a `source.git` starting with `-` was an option to `git ls-remote`
/// (`--upload-pack=…` runs a command), a `subdir` with `..` let `extra_files` write outside the tree.
#[test]
fn hostile_recipe_fields_are_refused_when_parsed() {
    let git = "git = \"https://github.com/ROCm/rccl.git\"";
    let cases: Vec<(&str, String)> = vec![
        (
            "name",
            recipe_2134_with(
                "rccl_version = ",
                "name = \"../../victim\"\nrccl_version = ",
            ),
        ),
        (
            "name",
            recipe_2134_with(
                "rccl_version = ",
                "name = \"a\\nerror: forged\"\nrccl_version = ",
            ),
        ),
        (
            "source.git",
            recipe_2134_with(git, "git = \"--upload-pack=touch /tmp/rcclfix-pwned\""),
        ),
        (
            "source.subdir",
            recipe_2134_with(git, &format!("{git}\nsubdir = \"../../../x\"")),
        ),
        (
            "source.subdir",
            recipe_2134_with(git, &format!("{git}\nsubdir = \"/etc\"")),
        ),
        (
            "source.subdir",
            recipe_2134_with(git, &format!("{git}\nsubdir = \"projects/.git\"")),
        ),
        (
            "toolchain.name",
            recipe_2134_with("name = \"debian-trixie\"", "name = \"../../../etc\""),
        ),
        (
            "build.extra_files",
            recipe_2134_with("[build]", "[build]\nextra_files = { \"../boom\" = \"x\" }"),
        ),
        (
            "build.extra_files",
            recipe_2134_with("[build]", "[build]\nextra_files = { \"/etc/x\" = \"x\" }"),
        ),
        (
            "build.patches",
            recipe_2134_with("[build]", "[build]\npatches = [\"/etc/shadow\"]"),
        ),
        (
            "build.cmake_options",
            recipe_2134_with(
                "cmake_options = [",
                "cmake_options = [\"-DX=1\\nerror: z\", ",
            ),
        ),
        (
            "build.cmake_options",
            recipe_2134_with("cmake_options = [", "cmake_options = [\"--trace\", "),
        ),
    ];
    for (field, text) in cases {
        let err = rcclfix::recipe::Recipe::parse(&text, "hostile.toml")
            .expect_err(&format!("{field}: a hostile value was accepted"));
        let chain = format!("{err:#}");
        assert!(chain.starts_with("hostile.toml: invalid recipe"), "{chain}");
        assert!(chain.contains(field), "{field}: {chain}");
    }
    // The image and its Containerfile, on a recipe of the image kind.
    let image = include_str!("../../recipes/2.27.7.toml");
    for (find, replace, field) in [
        ("image = \"", "image = \"--privileged", "toolchain.image"),
        (
            "containerfile = \"",
            "containerfile = \"../../../../etc/passwd\" #",
            "toolchain.containerfile",
        ),
    ] {
        let text = image.replacen(find, replace, 1);
        let err = rcclfix::recipe::Recipe::parse(&text, "hostile.toml").expect_err(field);
        assert!(format!("{err:#}").contains(field), "{err:#}");
    }
}

/// `build --plan` and `recipe pin` on a recipe whose `source.git` is a git option: one error line,
/// exit 2, and the command it smuggles never runs; a `--git-mirror` that reads as an option is
/// refused before git sees it.
#[test]
fn a_recipe_or_mirror_that_is_a_git_option_runs_nothing() {
    let t = tempfile::tempdir().unwrap();
    let marker = t.path().join("pwned");
    let file = t.path().join("r.toml");
    let git = "git = \"https://github.com/ROCm/rccl.git\"";
    std::fs::write(
        &file,
        recipe_2134_with(
            git,
            &format!("git = \"--upload-pack=touch {}\"", marker.display()),
        ),
    )
    .unwrap();
    let home = t.path().join("home");
    for args in [
        vec!["build", "--plan", "--recipe"],
        vec!["recipe", "pin", "--recipe"],
    ] {
        let out = crate::support::rcclfix()
            .args(&args)
            .arg(&file)
            .env("RCCLFIX_HOME", &home)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("source.git"), "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?} ran the smuggled command");
    }
    // A mirror path that is an option: `recipe pin` refuses it.
    let good = t.path().join("good.toml");
    std::fs::write(&good, include_str!("../../recipes/2.13.4.toml")).unwrap();
    let out = crate::support::rcclfix()
        .args(["recipe", "pin", "--recipe"])
        .arg(&good)
        .arg("--lockfile")
        .arg(t.path().join("lock.toml"))
        .arg(format!(
            "--git-mirror=--upload-pack=touch {}",
            marker.display()
        ))
        .env("RCCLFIX_HOME", &home)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("error:"), "{err}");
    assert!(!marker.exists(), "the mirror option ran");
}

/// `-j 0` is refused (ninja reads `-j0` as unlimited parallel jobs, which a 2-core machine with a
/// 4 GB device link cannot take), as a usage error, before anything runs.
#[test]
fn zero_jobs_is_a_usage_error() {
    for sub in ["build", "prove"] {
        let out = crate::support::rcclfix()
            .args([sub, "-j", "0"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sub}: {err}");
        assert!(err.contains("-j") && err.contains('0'), "{sub}: {err}");
        assert!(err.contains("not in 1.."), "{sub}: {err}");
    }
}

/// `recipe pin --lockfile` naming a folder is refused before any row is printed (it printed
/// `pinned` and then failed to write).
#[test]
fn a_lockfile_that_is_a_folder_is_refused_before_pinning() {
    let t = tempfile::tempdir().unwrap();
    let good = t.path().join("good.toml");
    std::fs::write(&good, include_str!("../../recipes/2.13.4.toml")).unwrap();
    for lock in [t.path().to_path_buf(), t.path().join("missing/")] {
        let out = crate::support::rcclfix()
            .args(["recipe", "pin", "--recipe"])
            .arg(&good)
            .arg("--lockfile")
            .arg(&lock)
            .env("RCCLFIX_HOME", t.path().join("home"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("is a folder"), "{err}");
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
