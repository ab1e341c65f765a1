//! Hostile paths rcclfix writes and the state it reads back (issue 40, items 6 and 7), one row
//! per case, each in a fresh folder with `RCCLFIX_HOME`, `HOME` and `TMPDIR` inside it:
//! 1. an output path that exists and is a FIFO, a socket, a link to a FIFO or (as root) a
//!    character device made with `mknod` in the row's folder: refused naming it, exit 2, and
//!    the node is still what it was (renamed over, it became a regular file);
//! 2. state under `RCCLFIX_HOME` (a toolchain's `stamp.json`) that is a FIFO, a link to
//!    `/dev/zero`, a 3 GiB sparse file or no stamp at all: ignored with a warning naming it, never
//!    a hang or a read without bound (a 20 s deadline per row); the rest of the state is in
//!    `tests/it/hostile_state.rs`;
//! 3. an output folder (`--out-dir`, `--package-dir`) inside the work folder, named directly or
//!    through a link (item 9): `build` and `prove` refuse it before anything runs, naming both
//!    folders, and the output already there is kept (every build empties its work folder first).

use std::ffi::OsString;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn fixture(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

/// What a node is, for the after-check.
fn kind(p: &Path) -> &'static str {
    match std::fs::symlink_metadata(p) {
        Err(_) => "missing",
        Ok(m) if m.file_type().is_fifo() => "fifo",
        Ok(m) if m.file_type().is_socket() => "socket",
        Ok(m) if m.file_type().is_char_device() => "char",
        Ok(m) if m.file_type().is_symlink() => "link",
        Ok(m) if m.is_file() => "file",
        Ok(_) => "other",
    }
}

fn mkfifo(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

struct Row {
    name: &'static str,
    setup: Box<dyn Fn(&Path)>,
    args: Vec<OsString>,
    code: i32,
    fragment: &'static str,
    /// (path in the row's folder, the kind it must still be afterwards).
    after: Vec<(&'static str, &'static str)>,
}

fn row(
    name: &'static str,
    setup: impl Fn(&Path) + 'static,
    args: &[&str],
    code: i32,
    fragment: &'static str,
    after: &[(&'static str, &'static str)],
) -> Row {
    Row {
        name,
        setup: Box::new(setup),
        args: args.iter().map(OsString::from).collect(),
        code,
        fragment,
        after: after.to_vec(),
    }
}

fn is_root() -> bool {
    // `id -u` rather than libc's geteuid: the tests hold no unsafe code.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

/// `doctor` on an empty machine with `--capture OUT`.
fn capture_args(out: &'static str) -> Vec<&'static str> {
    vec![
        "doctor",
        "--no-hip",
        "--sysfs",
        "in/sys",
        "--proc",
        "in/proc",
        "--capture",
        out,
    ]
}

fn empty_machine(d: &Path) {
    std::fs::create_dir_all(d.join("in/sys/bus/pci/devices")).unwrap();
    std::fs::create_dir_all(d.join("in/proc")).unwrap();
}

fn rows() -> Vec<Row> {
    let lib = fixture("patch/libdispatch-plain.so");
    let lib: &'static str = Box::leak(lib.display().to_string().into_boxed_str());
    let mut rows = vec![
        row(
            "class 1: patch --out a FIFO",
            |d| mkfifo(&d.join("in/fifo")),
            &["patch", lib, "--out", "in/fifo"],
            2,
            "in/fifo: exists and is a FIFO, not a regular file; refusing to replace it",
            &[("in/fifo", "fifo")],
        ),
        row(
            "class 1: patch --out a socket",
            |d| {
                let l = std::os::unix::net::UnixListener::bind(d.join("in/sock")).unwrap();
                std::mem::forget(l);
            },
            &["patch", lib, "--out", "in/sock"],
            2,
            "in/sock: exists and is a socket, not a regular file",
            &[("in/sock", "socket")],
        ),
        row(
            "class 1: patch --out a link to a FIFO",
            |d| {
                mkfifo(&d.join("in/fifo"));
                std::os::unix::fs::symlink("fifo", d.join("in/link")).unwrap();
            },
            &["patch", lib, "--out", "in/link"],
            2,
            "in/link: exists and is a FIFO, not a regular file",
            &[("in/fifo", "fifo"), ("in/link", "link")],
        ),
        row(
            "class 1: patch --out a link to a regular file replaces the link, as before",
            |d| {
                std::fs::write(d.join("in/old.so"), b"old").unwrap();
                std::os::unix::fs::symlink("old.so", d.join("in/link")).unwrap();
            },
            &["patch", lib, "--out", "in/link"],
            0,
            "",
            &[("in/old.so", "file"), ("in/link", "file")],
        ),
        row(
            "class 1: doctor --capture a FIFO",
            |d| {
                empty_machine(d);
                mkfifo(&d.join("in/fifo"));
            },
            &capture_args("in/fifo"),
            2,
            "in/fifo: exists and is a FIFO, not a regular file",
            &[("in/fifo", "fifo")],
        ),
    ];
    if is_root() {
        rows.push(row(
            "class 1: patch --out a character device made with mknod (as root)",
            |d| {
                let st = Command::new("mknod")
                    .arg(d.join("in/null"))
                    .args(["c", "1", "3"])
                    .status()
                    .unwrap();
                assert!(st.success(), "mknod");
            },
            &["patch", lib, "--out", "in/null"],
            2,
            "in/null: exists and is a character device, not a regular file",
            &[("in/null", "char")],
        ));
    } else {
        eprintln!("hostile paths: the mknod row needs root and was not run");
    }

    // Class 2: toolchain stamps that are no regular file of a sane size.
    let stamp = "home/toolchains/debian-sid/stamp.json";
    rows.push(row(
        "class 2: toolchain list with a FIFO as a stamp.json",
        move |d| mkfifo(&d.join(stamp)),
        &["toolchain", "list"],
        0,
        "debian-sid/stamp.json: not a regular file (a FIFO); ignored",
        &[(stamp, "fifo")],
    ));
    rows.push(row(
        "class 2: toolchain list with a link to /dev/zero as a stamp.json",
        move |d| {
            std::fs::create_dir_all(d.join(stamp).parent().unwrap()).unwrap();
            std::os::unix::fs::symlink("/dev/zero", d.join(stamp)).unwrap();
        },
        &["toolchain", "list"],
        0,
        "debian-sid/stamp.json: not a regular file (a character device); ignored",
        &[],
    ));
    rows.push(row(
        "class 2: toolchain list with a 3 GiB sparse stamp.json",
        move |d| {
            std::fs::create_dir_all(d.join(stamp).parent().unwrap()).unwrap();
            let f = std::fs::File::create(d.join(stamp)).unwrap();
            f.set_len(3 << 30).unwrap();
        },
        &["toolchain", "list"],
        0,
        "debian-sid/stamp.json: 3221225472 bytes, more than the 1048576-byte limit for a toolchain stamp; ignored",
        &[],
    ));

    rows.push(row(
        "class 2: toolchain list with a stamp.json that is no stamp",
        move |d| {
            std::fs::create_dir_all(d.join(stamp).parent().unwrap()).unwrap();
            std::fs::write(d.join(stamp), b"garbage\n").unwrap();
        },
        &["toolchain", "list"],
        0,
        "debian-sid/stamp.json: not a toolchain stamp (expected value at line 1 column 1); ignored",
        &[(stamp, "file")],
    ));

    // Class 3: an output folder inside the work folder, which every build empties first.
    let keep = |d: &Path| {
        std::fs::create_dir_all(d.join("home/work/out")).unwrap();
        std::fs::write(d.join("home/work/out/keep"), b"good output").unwrap();
    };
    rows.push(row(
        "class 3: build --out-dir inside the work folder",
        keep,
        &["build", "--out-dir", "home/work/out"],
        2,
        "--out-dir home/work/out is inside the work folder",
        &[("home/work/out/keep", "file")],
    ));
    rows.push(row(
        "class 3: prove --out-dir through a link into the work folder",
        move |d| {
            keep(d);
            std::os::unix::fs::symlink("../home/work", d.join("in/w")).unwrap();
        },
        &["prove", "2.21.5", "--out-dir", "in/w/out/../out"],
        2,
        "--out-dir in/w/out/../out is inside the work folder",
        &[("home/work/out/keep", "file")],
    ));
    rows.push(row(
        "class 3: build --package-dir inside the work folder",
        keep,
        &[
            "build",
            "--package",
            "deb",
            "--package-dir",
            "home/work/out",
        ],
        2,
        "--package-dir home/work/out is inside the work folder",
        &[("home/work/out/keep", "file")],
    ));
    rows
}

#[test]
fn hostile_paths_table() {
    let mut failures = vec![];
    for r in rows() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for sub in ["in", "out", "home", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        (r.setup)(d);
        // A run past the deadline (a hang) panics in `run_row`: a failure of this row.
        let run = std::panic::catch_unwind(|| {
            crate::support::run_row(d, &r.args, &[], None, Duration::from_secs(20))
        });
        let (code, out, err) = run.unwrap_or_else(|_| (-1, String::new(), "hung".into()));
        let mut why = vec![];
        if code != r.code {
            why.push(format!("exit {code}, expected {}", r.code));
        }
        if !out.contains(r.fragment) && !err.contains(r.fragment) {
            why.push(format!("the output lacks {:?}", r.fragment));
        }
        for (p, k) in &r.after {
            let now = kind(&d.join(p));
            if now != *k {
                why.push(format!("{p} is now {now}, was {k}"));
            }
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n  stdout: {}\n  stderr: {}",
                r.name,
                why.join("; "),
                &out[..out.len().min(2000)],
                &err[..err.len().min(2000)]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
