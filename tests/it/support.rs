//! What the integration tests share: the slow-test gate, the binary runner, the toolchain runner
//! (through `rcclfix toolchain run`, so the tests run LLVM's tools the way rcclfix runs its own
//! builds: bubblewrap, network off), the hostile-input runner (a deadline, escaped-output checks),
//! the Debian librccl1 input and the minihip build-test setup.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_rcclfix");

/// The repository root (the crate's manifest folder).
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the slow tests run: `RCCLFIX_SLOW_TESTS=1` (set by `cargo xtask test`). Once set, a
/// missing prerequisite fails the test rather than skipping it.
pub(crate) fn slow() -> bool {
    std::env::var_os("RCCLFIX_SLOW_TESTS").is_some_and(|v| v == "1")
}

/// [`slow`], printing `skipped: set RCCLFIX_SLOW_TESTS=1` on stderr when it is off.
pub(crate) fn slow_or_note() -> bool {
    if !slow() {
        eprintln!("skipped: set RCCLFIX_SLOW_TESTS=1");
    }
    slow()
}

/// The path in the environment variable `var`, which an `#[ignore = "needs …"]` test cannot run
/// without: it panics naming `var` when it is unset or empty, so a test asked for with
/// `--ignored` never passes without its input (`cargo xtask test` asks only when it is set).
pub(crate) fn required_input(var: &str) -> PathBuf {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => panic!("{var} is not set: this ignored test needs it"),
    }
}

/// The RCCL 2.21.5 control builds (no NDEBUG) in `$RCCLFIX_CONTROL_LIBS`: its files named
/// `librccl-2.21.5-*-control-gfx1100.so` (made by `rcclfix prove`; no download provides them).
/// Panics when the variable is unset or the folder holds none.
pub(crate) fn control_libs() -> Vec<PathBuf> {
    let folder = required_input("RCCLFIX_CONTROL_LIBS");
    let libs: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("RCCLFIX_CONTROL_LIBS: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-control-gfx1100.so"))
        .collect();
    assert!(
        !libs.is_empty(),
        "no librccl-2.21.5-*-control-gfx1100.so in {folder:?}"
    );
    libs
}

/// A command running the binary under test, with nothing set.
pub(crate) fn rcclfix() -> Command {
    Command::new(BIN)
}

/// A command running the binary under test under an address-space limit of `kib` KiB
/// (`sh -c 'ulimit -v KIB && exec rcclfix "$@"'`); add the arguments to it.
pub(crate) fn rcclfix_under_ulimit(kib: u64) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(BIN);
    c
}

// ---------------------------------------------------------------------------------------------
// Hostile inputs.

/// Run `cmd` with stdin closed and stdout/stderr piped; `Err` (the child killed) when it does not
/// finish within `limit` (an input that blocks, a hang). Both pipes are drained while it runs, so
/// a child that writes more than a pipe holds (64 KiB) is not mistaken for a hang.
pub(crate) fn output_with_deadline(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    use std::io::Read;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            return Err(format!(
                "did not finish within {} s (a hang, or blocked on an input?)",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    })
}

#[test]
fn output_with_deadline_drains_what_does_not_fit_a_pipe() {
    let o = output_with_deadline(
        Command::new("sh").args([
            "-c",
            "head -c 1000000 /dev/zero; head -c 300000 /dev/zero >&2",
        ]),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!((o.stdout.len(), o.stderr.len()), (1_000_000, 300_000));
}

/// Settings from the caller's environment that change what a run reads, streams or prints; the
/// hostile tables clear them so every row sees rcclfix's defaults.
const CALLER_SETTINGS: &[&str] = &[
    "RCCLFIX_GIT_MIRROR",
    "RCCLFIX_MAX_BUNDLE_BYTES",
    "RCCLFIX_SCAN_MEMORY_BUDGET",
    "RCCLFIX_SCAN_MAX_CODE_OBJECT",
    "RUST_LOG",
    "NO_COLOR",
];

/// Run `rcclfix ARGS` in `dir` for a hostile-table row: `dir/home` as `RCCLFIX_HOME` and `HOME`,
/// `dir/tmp` as `TMPDIR`, the [`CALLER_SETTINGS`] cleared, then `env` set, under
/// `ulimit -v ulimit_kib` when given, killed at `deadline`. Returns the exit code (-1 for a
/// signal), stdout and stderr.
pub(crate) fn run_row(
    dir: &Path,
    args: &[std::ffi::OsString],
    env: &[(&str, std::ffi::OsString)],
    ulimit_kib: Option<u64>,
    deadline: Duration,
) -> (i32, String, String) {
    let mut cmd = match ulimit_kib {
        Some(kib) => rcclfix_under_ulimit(kib),
        None => rcclfix(),
    };
    cmd.args(args)
        .current_dir(dir)
        .env("RCCLFIX_HOME", dir.join("home"))
        .env("HOME", dir.join("home"))
        .env("TMPDIR", dir.join("tmp"));
    for k in CALLER_SETTINGS {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = output_with_deadline(&mut cmd, deadline).unwrap_or_else(|e| panic!("{args:?} {e}"));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// [`run_row`] (no extra environment) under `ulimit -f blocks` (512-byte blocks) instead of
/// `ulimit -v`: the signal a write past the limit raises (SIGXFSZ) shows as exit -1.
pub(crate) fn run_row_fsize(
    dir: &Path,
    args: &[std::ffi::OsString],
    blocks: u64,
    deadline: Duration,
) -> (i32, String, String) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .current_dir(dir)
        .env("RCCLFIX_HOME", dir.join("home"))
        .env("HOME", dir.join("home"))
        .env("TMPDIR", dir.join("tmp"));
    for k in CALLER_SETTINGS {
        cmd.env_remove(k);
    }
    let o = output_with_deadline(&mut cmd, deadline).unwrap_or_else(|e| panic!("{args:?} {e}"));
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// One entry of [`listing`]: path relative to the root, size (0 for a folder), link target, and
/// modification time (none for a folder).
pub(crate) type Entry = (PathBuf, u64, Option<PathBuf>, Option<std::time::SystemTime>);

/// Every entry under `root` (links not followed, their targets recorded), except the `writable`
/// folders (relative to `root`) and what they hold, sorted: the hostile tables compare it before
/// and after a run to show that nothing was written outside them.
pub(crate) fn listing(root: &Path, writable: &[&str]) -> Vec<Entry> {
    let mut v = vec![];
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap().to_owned();
        if writable.iter().any(|w| rel.starts_with(w)) {
            continue;
        }
        let md = e.path().symlink_metadata().unwrap();
        let link = md
            .file_type()
            .is_symlink()
            .then(|| std::fs::read_link(e.path()).unwrap());
        let mtime = if md.is_dir() {
            None
        } else {
            md.modified().ok()
        };
        v.push((rel, if md.is_dir() { 0 } else { md.len() }, link, mtime));
    }
    v.sort();
    v
}

/// The characters of `s` other than `\n` that `ui::escape` would escape (none may reach a
/// terminal unescaped).
pub(crate) fn control_chars(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| c != '\n' && rcclfix::ui::needs_escape(c))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Toolchains.

/// The rootfs of toolchain `debian-<suite>` (`rcclfix toolchain build` put it under
/// `$RCCLFIX_HOME/toolchains`).
pub(crate) fn toolchain_rootfs(suite: &str) -> PathBuf {
    rcclfix::paths::toolchain_rootfs(&format!("debian-{suite}"))
}

/// Panic unless toolchain `debian-<suite>` has `usr/bin/<program>` (the slow tests need it).
pub(crate) fn require_tool(suite: &str, program: &str) {
    let root = toolchain_rootfs(suite);
    assert!(
        root.join("usr/bin").join(program).exists(),
        "RCCLFIX_SLOW_TESTS=1 but the debian-{suite} toolchain rootfs {} has no {program}\nhelp: run `cargo xtask test` (it builds the toolchains), or `rcclfix toolchain build debian-{suite}` as root",
        root.display()
    );
}

/// Run `argv` inside toolchain `debian-<suite>` with `rcclfix toolchain run --engine bubblewrap`
/// (network off; `work` mounted read-write at its own path and the working directory, so
/// relative paths name files in `work`). The command's exit status is passed through.
pub(crate) fn in_toolchain(suite: &str, work: &Path, argv: &[&str]) -> Output {
    rcclfix()
        .args(["-q", "toolchain", "run", "--engine", "bubblewrap"])
        .arg(format!("debian-{suite}"))
        .arg("--")
        .args(argv)
        .current_dir(work)
        .env_remove("RCCLFIX_ENGINE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("rcclfix toolchain run")
}

/// [`in_toolchain`], asserting success; returns stdout.
pub(crate) fn in_toolchain_ok(suite: &str, work: &Path, argv: &[&str]) -> String {
    let o = in_toolchain(suite, work, argv);
    assert!(
        o.status.success(),
        "{argv:?} in debian-{suite}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The Debian librccl1 5.4.3 input.

/// Where `cargo xtask test` downloads real inputs: `$RCCLFIX_TEST_INPUTS`, else
/// `target/test-inputs`.
pub(crate) fn test_inputs() -> PathBuf {
    std::env::var_os("RCCLFIX_TEST_INPUTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/test-inputs"))
}

/// The Debian `librccl1_5.4.3-3+b1_amd64.deb`; panics (slow tests only) when it is missing.
pub(crate) fn librccl1_deb() -> PathBuf {
    let deb = test_inputs().join("librccl1_5.4.3-3+b1_amd64.deb");
    assert!(
        deb.exists(),
        "RCCLFIX_SLOW_TESTS=1 but {} is missing\nhelp: run `cargo xtask test` (it downloads it), or set RCCLFIX_TEST_INPUTS",
        deb.display()
    );
    deb
}

/// The library of [`librccl1_deb`], extracted once with dpkg-deb beside the `.deb`.
pub(crate) fn librccl1_lib() -> PathBuf {
    let deb = librccl1_deb();
    let x = test_inputs().join("librccl1_5.4.3-3+b1");
    let lib = x.join("usr/lib/x86_64-linux-gnu/librccl.so.1.0");
    extract_deb_once(&deb, &x, &lib);
    lib
}

/// Extract `deb` into `x` once, for every test that needs it: into a private folder beside `x`
/// first, then renamed into place, so a test running at the same time never reads a half-written
/// `lib` (two tests extracting into `x` at once did race in CI).
pub(crate) fn extract_deb_once(deb: &Path, x: &Path, lib: &Path) {
    if lib.exists() {
        return;
    }
    let tmp = x.with_file_name(format!(
        ".{}.extract-{}-{:?}",
        x.file_name().unwrap().to_string_lossy(),
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let st = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(&tmp)
        .status()
        .expect("dpkg-deb");
    assert!(st.success(), "dpkg-deb -x {}", deb.display());
    if std::fs::rename(&tmp, x).is_err() {
        // Another test put it in place first.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert!(
        lib.exists(),
        "{} missing after extracting {}",
        lib.display(),
        deb.display()
    );
}

// ---------------------------------------------------------------------------------------------
// The minihip build tests.

/// A minihip build test's scratch tree: a temporary folder holding `home` (a scratch
/// `RCCLFIX_HOME` whose `toolchains` is the real one) and `tests/data/minihip` as a git repository
/// tagged `v0.1.0` at `commit`.
pub(crate) struct Minihip {
    pub(crate) t: tempfile::TempDir,
    pub(crate) home: PathBuf,
    pub(crate) repo: PathBuf,
    pub(crate) commit: String,
}

impl Minihip {
    /// The scratch tree (no toolchain needed: for tests that stop before the build).
    pub(crate) fn new() -> Minihip {
        let t = tempfile::tempdir().unwrap();
        let home = crate::build::scratch_home(t.path());
        let (repo, commit) = crate::build::minihip_repo(t.path());
        Minihip {
            t,
            home,
            repo,
            commit,
        }
    }

    /// For a slow build test: `None` unless [`slow`]; then the debian-trixie toolchain must be
    /// built.
    pub(crate) fn slow() -> Option<Minihip> {
        if !slow() {
            return None;
        }
        crate::build::require_toolchain();
        Some(Minihip::new())
    }

    /// The temporary folder.
    pub(crate) fn path(&self) -> &Path {
        self.t.path()
    }

    /// Write the minihip recipe pinned to `commit` with strategy `ndebug` as `file`.
    pub(crate) fn recipe(&self, file: &str, ndebug: &str) -> PathBuf {
        crate::build::write_recipe(
            self.path(),
            file,
            &crate::build::recipe(&self.repo, Some(&self.commit), ndebug, ""),
        )
    }
}
