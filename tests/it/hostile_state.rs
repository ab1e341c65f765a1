//! Hostile state under `$RCCLFIX_HOME` and in the live build folder (issue 40, item 7, the
//! hostile pass redone): what rcclfix reads back from its own folders is not trusted to be a
//! regular file of a sane size, and no output is renamed or written over a node that is not one.
//! One row per attack, each with a deadline (a hang fails the row, it never stalls the suite):
//! 1. the cached stock `.deb` (`stock/<toolchain>/<name>.deb`, read by `package`'s export gate):
//!    a FIFO, a link to `/dev/zero`, a folder, or a real `.deb` (built by `dpkg-deb`) whose
//!    `data.tar` inflates past its bound before the library: refused in one line naming it,
//!    exit 2, the node left as it was; before, the first three went on to download over it and
//!    the last was decompressed to the end whatever its size;
//! 2. the timing record and load trace (`records/<id>.ninja_log`, `records/<id>.load`) and the
//!    live `.ninja_log` a build step leaves in the build folder: a FIFO, a link to `/dev/zero` or
//!    a 3 GiB sparse file costs the remaining-time estimate (a warning naming it), never the build,
//!    and is never replaced by a rename; before, the successful build then failed writing the
//!    new record over it;
//! 3. `toolchains/<name>.log`, which `toolchain build` truncates and writes as root: a FIFO is
//!    refused naming it (before, the open blocked for ever), and a link is replaced, never
//!    written through (before, the host file it pointed at was truncated and overwritten).

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::package::{build_folder, fixtures, ok, toolchain_home};
use crate::support::output_with_deadline;

/// What a node is, for the after-checks.
fn kind(p: &Path) -> &'static str {
    match std::fs::symlink_metadata(p) {
        Err(_) => "missing",
        Ok(m) if m.file_type().is_fifo() => "fifo",
        Ok(m) if m.file_type().is_symlink() => "link",
        Ok(m) if m.is_dir() => "folder",
        Ok(m) if m.is_file() => "file",
        Ok(_) => "other",
    }
}

fn mkfifo(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    ok(Command::new("mkfifo").arg(p));
}

/// The stand-in stock `librccl1 5.4.3-3+b1` built by `dpkg-deb` (gzip) into `deb`, with
/// `usr/lib/aaa-zeros` (`zeros` bytes of zeros, sorted before the library) when `zeros > 0`.
fn stock_deb(stage: &Path, deb: &Path, zeros: u64) {
    let _ = std::fs::remove_dir_all(stage);
    let libdir = stage.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(stage.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::copy(&fixtures().stock, libdir.join("librccl.so.1.0")).unwrap();
    if zeros > 0 {
        let f = std::fs::File::create(stage.join("usr/lib/aaa-zeros")).unwrap();
        // Sparse on disk; dpkg-deb reads (and gzip packs) every zero.
        f.set_len(zeros).unwrap();
    }
    std::fs::write(
        stage.join("DEBIAN/control"),
        "Package: librccl1\nVersion: 5.4.3-3+b1\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: test\n test\n",
    )
    .unwrap();
    ok(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "-z1", "--build"])
        .arg(stage)
        .arg(deb));
}

#[test]
fn hostile_cached_stock_packages_are_refused_naming_them() {
    let t = tempfile::Builder::new()
        .prefix("hostile-stock-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let home = t.path().join("home");
    ok(Command::new("cp")
        .arg("-a")
        .arg(toolchain_home())
        .arg(&home));
    let cached = home.join("stock/debian-trixie/librccl1_5.4.3-3+b1_amd64.deb");
    let stage = t.path().join("stage");
    let (_b, dir) = build_folder(&fixtures().ours);
    type Setup<'a> = Box<dyn Fn(&Path) + 'a>;
    let rows: Vec<(&str, Setup, &str, &str)> = vec![
        (
            "a FIFO",
            Box::new(mkfifo),
            "not a regular file (a FIFO): not a cached package",
            "fifo",
        ),
        (
            "a link to /dev/zero",
            Box::new(|p: &Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
            "not a regular file (a character device): not a cached package",
            "link",
        ),
        (
            "a folder",
            Box::new(|p: &Path| std::fs::create_dir(p).unwrap()),
            "not a regular file (a folder): not a cached package",
            "folder",
        ),
        (
            "a .deb whose data.tar inflates past 64 MiB before the library",
            Box::new(|p: &Path| stock_deb(&stage, p, 100 << 20)),
            "more than 67108864 bytes when decompressed, the limit for a",
            "file",
        ),
    ];
    let mut bad = vec![];
    for (what, setup, fragment, after) in rows {
        let _ = std::fs::remove_dir_all(home.join("stock"));
        std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
        setup(&cached);
        let out = t.path().join("pkgs");
        let o = output_with_deadline(
            crate::support::rcclfix()
                .args(["package", "--format", "deb", "--from"])
                .arg(&dir)
                .arg("--out-dir")
                .arg(&out)
                .env("RCCLFIX_HOME", &home)
                .env("SOURCE_DATE_EPOCH", "1700000000"),
            Duration::from_secs(60),
        );
        let o = match o {
            Ok(o) => o,
            Err(e) => {
                bad.push(format!("{what}: {e}"));
                continue;
            }
        };
        let stderr = String::from_utf8_lossy(&o.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("error: "))
            .collect();
        let named = errors.len() == 1
            && errors[0].contains(&cached.display().to_string())
            && errors[0].contains(fragment);
        if o.status.code() != Some(2) || !named {
            bad.push(format!(
                "{what}: exit {:?}, expected 2 and one error naming {} with {fragment:?}:\n{stderr}",
                o.status.code(),
                cached.display()
            ));
        }
        if kind(&cached) != after {
            bad.push(format!("{what}: the cached path is now {}", kind(&cached)));
        }
        if out.exists() {
            bad.push(format!("{what}: wrote {}", out.display()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// A record the pretend build's estimate accepts.
const RECORD: &str = "# ninja log v5\n0\t1200\t0\tCMakeFiles/minihip.dir/src/k.cpp.o\t1\n1200\t1500\t0\tlibrccl.so.1.0\t2\n";

/// One class 2 row: the state it puts under the home (given the timing record's path), what the
/// build step leaves as the live `.ninja_log`, the warning the build log must hold, and what the
/// timing record must be afterwards (`None`: not checked).
struct BuildRow {
    name: &'static str,
    state: fn(&Path),
    live: Option<fn(&Path)>,
    warning: &'static str,
    record_after: Option<&'static str>,
}

#[test]
fn hostile_build_state_costs_the_estimate_never_the_build() {
    use crate::build_plan::{host, minihip, options, run, work_folder, Recording};
    let sparse = |p: &Path| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::File::create(p).unwrap().set_len(3 << 30).unwrap();
    };
    let zero = |p: &Path| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", p).unwrap();
    };
    let rows = [
        BuildRow {
            name: "the timing record a FIFO",
            state: mkfifo,
            live: None,
            warning: "minihip-gfx1100.ninja_log: not a regular file (a FIFO); ignored, no remaining-time estimate",
            record_after: Some("fifo"),
        },
        BuildRow {
            name: "the timing record a link to /dev/zero",
            state: zero,
            live: None,
            warning: "minihip-gfx1100.ninja_log: not a regular file (a character device); ignored",
            record_after: Some("link"),
        },
        BuildRow {
            name: "the timing record a 3 GiB sparse file",
            state: sparse,
            live: None,
            warning: "minihip-gfx1100.ninja_log: 3221225472 bytes, more than the",
            record_after: Some("file"),
        },
        BuildRow {
            name: "the load trace a FIFO beside a good record",
            state: |p| {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, RECORD).unwrap();
                mkfifo(&p.with_extension("load"));
            },
            live: None,
            warning: "minihip-gfx1100.load: not a regular file (a FIFO); ignored",
            record_after: Some("file"),
        },
        BuildRow {
            name: "the live .ninja_log a FIFO",
            state: |_| {},
            live: Some(mkfifo),
            warning: ".ninja_log is a FIFO in the build folder, not a regular file; no timing record kept",
            record_after: Some("missing"),
        },
        BuildRow {
            name: "the live .ninja_log a link to /dev/zero",
            state: |_| {},
            live: Some(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap()),
            warning: ".ninja_log is a symbolic link in the build folder; refusing to read through it; no timing record kept",
            record_after: Some("missing"),
        },
    ];
    let mut bad = vec![];
    for r in rows {
        let t = tempfile::tempdir().unwrap();
        let recipe = minihip("compile-definition", "");
        let p = rcclfix::build::plan::plan(
            &recipe,
            &options(&t.path().join("out")),
            &host(&t.path().join("home")),
        )
        .unwrap();
        (r.state)(&p.timing_record);
        work_folder(&p);
        let (tx, rx) = std::sync::mpsc::channel();
        let (plan, record) = (p.clone(), p.timing_record.clone());
        let live = r.live;
        // A hang (a FIFO opened or read) fails the row at the deadline; the thread is left behind.
        std::thread::spawn(move || {
            let mut rec = Recording::new(&plan, "trixie/implicit.so");
            rec.live_ninja_log = live;
            let _ = tx.send(run(&plan, &recipe, &mut rec).map_err(|e| format!("{e:#}")));
        });
        let dir = match rx.recv_timeout(Duration::from_secs(60)) {
            Err(_) => {
                bad.push(format!("{}: hung", r.name));
                continue;
            }
            Ok(Err(e)) => {
                bad.push(format!("{}: the build failed: {e}", r.name));
                continue;
            }
            Ok(Ok(rcclfix::build::Outcome::Built(d))) => d,
            Ok(Ok(o)) => {
                bad.push(format!("{}: {o:?}", r.name));
                continue;
            }
        };
        let log = std::fs::read_to_string(dir.join("build.log")).unwrap();
        if !log
            .lines()
            .any(|l| l.starts_with("# rcclfix: warning: ") && l.contains(r.warning))
        {
            bad.push(format!(
                "{}: build.log has no warning with {:?}:\n{log}",
                r.name, r.warning
            ));
        }
        if let Some(k) = r.record_after {
            if kind(&record) != k {
                bad.push(format!(
                    "{}: the record is now {}, expected {k}",
                    r.name,
                    kind(&record)
                ));
            }
        }
        if big_file(&record) {
            bad.push(format!("{}: the 3 GiB record was kept", r.name));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// Whether `p` is a regular file of more than 1 MiB (the sparse record left in place).
fn big_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.len() > 1 << 20)
}

fn is_root() -> bool {
    // `id -u` rather than libc's geteuid: the tests hold no unsafe code.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

/// Class 3: `toolchain build` (root only: it refuses anyone else before the log) with a FIFO or
/// a link to a host file as its log. The mirror is a closed local port, so a build that gets
/// past the log fails at once in debootstrap, downloading nothing.
#[test]
fn hostile_toolchain_logs_are_never_written_through() {
    if !is_root() || which("debootstrap").is_none() || which("unshare").is_none() {
        eprintln!("hostile toolchain logs: needs root, debootstrap and unshare; not run");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let log = home.join("toolchains/debian-sid.log");
    let victim = t.path().join("victim.txt");
    type Setup = fn(&Path, &Path);
    let rows: [(&str, Setup, i32, &str, &str); 2] = [
        (
            "a FIFO",
            |log, _| mkfifo(log),
            2,
            "debian-sid.log: exists and is a FIFO, not a regular file; refusing to replace it",
            "fifo",
        ),
        (
            "a link to a host file",
            |log, victim| {
                std::fs::create_dir_all(log.parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(victim, log).unwrap();
            },
            2,
            "debootstrap failed",
            "file",
        ),
    ];
    let mut bad = vec![];
    for (what, setup, code, fragment, after) in rows {
        let _ = std::fs::remove_dir_all(&home);
        std::fs::write(&victim, "precious\n").unwrap();
        setup(&log, &victim);
        let o = output_with_deadline(
            crate::support::rcclfix()
                .args(["toolchain", "build", "debian-sid"])
                .env("RCCLFIX_HOME", &home)
                .env("RCCLFIX_DEBIAN_MIRROR", "http://127.0.0.1:9/debian"),
            Duration::from_secs(60),
        );
        let o = match o {
            Ok(o) => o,
            Err(e) => {
                bad.push(format!("{what}: {e}"));
                continue;
            }
        };
        let stderr = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(code) || !stderr.contains(fragment) {
            bad.push(format!(
                "{what}: exit {:?}, expected {code} and {fragment:?}:\n{stderr}",
                o.status.code()
            ));
        }
        if kind(&log) != after {
            bad.push(format!(
                "{what}: the log is now {}, expected {after}",
                kind(&log)
            ));
        }
        if std::fs::read_to_string(&victim).unwrap() != "precious\n" {
            bad.push(format!("{what}: the host file behind the link was written"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|f| f.is_file())
    })
}
