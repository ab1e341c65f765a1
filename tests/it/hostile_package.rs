//! `rcclfix package` on hostile input: a build folder, a manifest or command-line values made by
//! someone else. One row per input: the test makes the input, runs the real binary, and checks the
//! exit code, a fragment of the one-line error, that nothing was written anywhere (the whole
//! scratch tree is listed before and after; the output folder sits four levels deep in it, so a
//! `../` escape would land inside the listing), and that no control character reached stderr.
//!
//! Classes (issue 12): 1, manifest values that become file names, package names, versions or
//! control fields; 2, command-line values that become control fields; 8, the package step's own
//! error messages (missing, FIFO and folder inputs, a full disk, a size that disagrees).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::package::{build_folder, fixtures, rcclfix, tool};

/// One generated case: the scratch tree, the build folder in it, and the output folder.
struct Case {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: PathBuf,
    out: PathBuf,
}

impl Case {
    fn new(lib: &Path) -> Case {
        let (tmp, dir) = build_folder(lib);
        let root = tmp.path().to_owned();
        let out = root.join("a/b/c/d/pkgs");
        Case {
            _tmp: tmp,
            root,
            dir,
            out,
        }
    }

    fn manifest(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }

    /// Rewrite `manifest.json` through its JSON value.
    fn edit(&self, f: impl FnOnce(&mut serde_json::Value)) {
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.manifest()).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(self.manifest(), serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }

    /// Replace `name` in the build folder with a FIFO.
    fn fifo(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
        crate::package::ok(Command::new("mkfifo").arg(path));
    }

    /// Every path under the scratch tree, sorted.
    fn listing(&self) -> Vec<String> {
        let mut v: Vec<String> = walkdir::WalkDir::new(&self.root)
            .into_iter()
            .map(|e| {
                let e = e.unwrap();
                format!(
                    "{} {}",
                    e.path().strip_prefix(&self.root).unwrap().display(),
                    if e.file_type().is_dir() { "d" } else { "f" }
                )
            })
            .collect();
        v.sort();
        v
    }
}

/// How a row runs rcclfix.
#[derive(Default)]
struct Inv {
    /// Arguments after `package --from DIR --out-dir OUT` (or instead of them with `own_args`).
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    /// `args` are the whole argument list after `package`.
    own_args: bool,
    /// Run inside a bubblewrap sandbox whose output folder is a tmpfs of this many bytes.
    disk_bytes: Option<u64>,
}

fn args(a: &[&str]) -> Inv {
    Inv {
        args: a.iter().map(OsString::from).collect(),
        ..Default::default()
    }
}

type Setup = Box<dyn Fn(&Case) -> Inv>;

/// A row: name, library fixture, setup, expected exit code, fragment of the error line.
struct Row {
    name: &'static str,
    lib: fn() -> PathBuf,
    setup: Setup,
    code: i32,
    fragment: &'static str,
}

fn row(name: &'static str, code: i32, fragment: &'static str, setup: Setup) -> Row {
    Row {
        name,
        lib: || fixtures().ours.clone(),
        setup,
        code,
        fragment,
    }
}

fn manifest_row(name: &'static str, fragment: &'static str, f: fn(&mut serde_json::Value)) -> Row {
    row(
        name,
        2,
        fragment,
        Box::new(move |c: &Case| {
            c.edit(f);
            Inv::default()
        }),
    )
}

/// Run one row; returns a description of what went wrong, or `None`.
fn check(r: &Row) -> Option<String> {
    let case = Case::new(&(r.lib)());
    let inv = (r.setup)(&case);
    std::fs::create_dir_all(case.out.parent().unwrap()).unwrap();
    if inv.disk_bytes.is_some() {
        std::fs::create_dir_all(&case.out).unwrap();
    }
    let before = case.listing();
    let mut cmd = match inv.disk_bytes {
        None => rcclfix(&["package"]),
        Some(bytes) => {
            let mut c = Command::new(tool("bwrap", "bubblewrap"));
            c.args([
                "--dev-bind",
                "/",
                "/",
                "--size",
                &bytes.to_string(),
                "--tmpfs",
            ])
            .arg(&case.out)
            .arg(crate::support::BIN)
            .arg("package")
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .env_remove("DEBEMAIL");
            c
        }
    };
    if !inv.own_args {
        cmd.arg("--from")
            .arg(&case.dir)
            .arg("--out-dir")
            .arg(&case.out);
    }
    cmd.args(&inv.args);
    // No row is about the stock library's download: a row names its stock library, or the gate
    // compares with none (the bwrap rows run with the machine's own home).
    if !inv.args.iter().any(|a| a == "--stock") {
        cmd.arg("--no-stock");
    }
    for (k, v) in &inv.env {
        cmd.env(k, v);
    }
    // A FIFO input must never block: give every row a deadline.
    let o = match crate::support::output_with_deadline(&mut cmd, Duration::from_secs(120)) {
        Ok(o) => o,
        Err(e) => return Some(e),
    };
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let mut problems = Vec::new();
    if o.status.code() != Some(r.code) {
        problems.push(format!("exit {:?}, expected {}", o.status.code(), r.code));
    }
    let error_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    if error_lines.len() != 1 || !error_lines[0].contains(r.fragment) {
        problems.push(format!("no single error line containing {:?}", r.fragment));
    }
    if stderr.contains("ZipWriter") {
        problems.push("a writer's debug output reached stderr".into());
    }
    if stderr.contains("caused by:") {
        problems.push("the error is more than one line".into());
    }
    if let Some(c) = stderr.chars().find(|c| c.is_control() && *c != '\n') {
        problems.push(format!("control character {c:?} on stderr"));
    }
    if !o.stdout.is_empty() {
        problems.push("stdout is not empty".into());
    }
    let after = case.listing();
    if after != before {
        let added: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
        let gone: Vec<&String> = before.iter().filter(|p| !after.contains(p)).collect();
        problems.push(format!("files changed: added {added:?}, removed {gone:?}"));
    }
    if problems.is_empty() {
        None
    } else {
        Some(format!("{}\n--- stderr:\n{stderr}", problems.join("; ")))
    }
}

fn run_table(rows: &[Row]) {
    let mut failed = Vec::new();
    for r in rows {
        if let Some(why) = check(r) {
            failed.push(format!("{}: {why}", r.name));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} rows failed:\n\n{}",
        failed.len(),
        rows.len(),
        failed.join("\n\n")
    );
}

/// Class 1: manifest values that reach a file name, package name, version or control field.
#[test]
fn hostile_manifest_values_are_refused_naming_the_field() {
    use serde_json::json;
    run_table(&[
        manifest_row(
            "rccl_version escapes the output folder",
            "manifest.json: rccl_version \"x/../../../../ESCAPE\" is not a release number",
            |v| v["rccl_version"] = json!("x/../../../../ESCAPE"),
        ),
        manifest_row(
            "an unknown key with a terminal escape (the warning names it escaped)",
            "rccl_version \"v\" is not a release number",
            |v| {
                v["x\u{1b}]0;pwned\u{7}"] = json!(1);
                v["rccl_version"] = json!("v");
            },
        ),
        manifest_row(
            "rccl_version adds a control field",
            "rccl_version \"2.13.4\\nPre-Depends: evil\" is not a release number",
            |v| v["rccl_version"] = json!("2.13.4\nPre-Depends: evil"),
        ),
        manifest_row(
            "rccl_version with a local label of its own",
            "rccl_version \"2.13.4+local\"",
            |v| v["rccl_version"] = json!("2.13.4+local"),
        ),
        manifest_row(
            "rocm_release becomes the stock path",
            "rocm_release \"5.4.3/../../../etc\"",
            |v| v["rocm_release"] = json!("5.4.3/../../../etc"),
        ),
        manifest_row(
            "rocm_release overflows the release code",
            "rocm_release \"5000.1.0\" is not a ROCm release",
            |v| v["rocm_release"] = json!("5000.1.0"),
        ),
        manifest_row(
            "target becomes a path in the package name",
            "targets: \"gfx1100/../../x\" is not an explicit gfx target",
            |v| v["targets"] = json!(["gfx1100/../../x"]),
        ),
        manifest_row(
            "target carries a terminal escape",
            "targets: \"gfx1100\\u{1b}]0;pwned\\u{7}\"",
            |v| v["targets"] = json!(["gfx1100\u{1b}]0;pwned\u{7}"]),
        ),
        manifest_row(
            "a target listed twice",
            "targets \"gfx1100\" is listed twice",
            |v| v["targets"] = json!(["gfx1100", "gfx1100"]),
        ),
        manifest_row("no targets", "manifest.json: targets is empty", |v| {
            v["targets"] = json!([])
        }),
        manifest_row(
            "recipe breaks out of the hook's docstring",
            "recipe \"r\\\"\\\"\\\"; import os\"",
            |v| v["recipe"] = json!("r\"\"\"; import os"),
        ),
        manifest_row(
            "tag with a terminal title escape",
            "tag \"rocm-5.4.3\\u{1b}]0;pwned\\u{7}\"",
            |v| v["tag"] = json!("rocm-5.4.3\u{1b}]0;pwned\u{7}"),
        ),
        manifest_row("tag with dot-dot", "tag \"rocm-5.4.3/../x\"", |v| {
            v["tag"] = json!("rocm-5.4.3/../x")
        }),
        manifest_row(
            "commit that is not a commit id",
            "commit \"HEAD\" is not a full commit id",
            |v| v["commit"] = json!("HEAD"),
        ),
        manifest_row(
            "toolchain spans lines",
            "toolchain \"debian-trixie\\nDepends: evil\"",
            |v| v["toolchain"] = json!("debian-trixie\nDepends: evil"),
        ),
        manifest_row(
            "rcclfix_version with a space",
            "rcclfix_version \"0.1 evil\"",
            |v| v["rcclfix_version"] = json!("0.1 evil"),
        ),
        manifest_row(
            "library.file leaves the build folder",
            "library.file \"../../../etc/passwd\"",
            |v| v["library"]["file"] = json!("../../../etc/passwd"),
        ),
        manifest_row(
            "library.soname is a path",
            "library.soname \"librccl.so.1/../x\"",
            |v| v["library"]["soname"] = json!("librccl.so.1/../x"),
        ),
        manifest_row(
            "library.soname disagrees with the library",
            "library.soname \"librccl.so.7\" differs from the DT_SONAME",
            |v| v["library"]["soname"] = json!("librccl.so.7"),
        ),
        manifest_row(
            "library.sha256 is not a digest",
            "library.sha256 \"zz\" is not 64 lowercase hex digits",
            |v| v["library"]["sha256"] = json!("zz"),
        ),
        manifest_row(
            "library.size disagrees with the file",
            "library.size 1 differs from the size of",
            |v| v["library"]["size"] = json!(1),
        ),
        manifest_row(
            "so many targets that the file name passes NAME_MAX",
            "is longer than 255 bytes (too many targets?)",
            |v| {
                let all: Vec<&str> = rcclfix::recipe::known_processors()
                    .into_iter()
                    .take(40)
                    .collect();
                assert_eq!(all.len(), 40);
                v["targets"] = json!(all);
                for t in all {
                    v["gate"][t] = json!("clean");
                }
            },
        ),
        row(
            "manifest.json claims more memory than any build writes",
            2,
            "manifest.json: larger than 64 MiB",
            Box::new(|c: &Case| {
                let f = std::fs::File::create(c.manifest()).unwrap();
                f.set_len((64 << 20) + 1).unwrap();
                Inv::default()
            }),
        ),
        manifest_row(
            "gate verdict disagrees with package's own scan",
            "manifest.json: the gate says \"unknown\" for gfx1100, but rcclfix's scan of",
            |v| v["gate"]["gfx1100"] = json!("unknown"),
        ),
    ]);
}

/// Class 2: command-line (and environment) values that become `.deb` control fields.
#[test]
fn hostile_control_values_from_the_command_line_are_refused() {
    run_table(&[
        row(
            "--maintainer adds a field",
            2,
            "--maintainer (or DEBEMAIL/DEBFULLNAME) \"A <a@example.org>\\nPre-Depends: evil\" spans more than one line",
            Box::new(|_| args(&["--maintainer", "A <a@example.org>\nPre-Depends: evil"])),
        ),
        row(
            "--maintainer with a terminal escape",
            2,
            "contains the control character '\\u{1b}'",
            Box::new(|_| args(&["--maintainer", "A \u{1b}[2J <a@example.org>"])),
        ),
        row(
            "--maintainer with two addresses",
            2,
            "has an invalid address \"a@example.org>, B <b@example.org\"",
            Box::new(|_| args(&["--maintainer", "A <a@example.org>, B <b@example.org>"])),
        ),
        row(
            "--maintainer with a bogus mail host",
            2,
            "has the mail host \"localhost\", which is not a domain name",
            Box::new(|_| args(&["--maintainer", "Jane <jane@localhost>"])),
        ),
        row(
            "DEBEMAIL with a newline",
            2,
            "spans more than one line",
            Box::new(|_| Inv {
                env: vec![("DEBEMAIL", "a@example.org\nPre-Depends: evil".into())],
                ..Default::default()
            }),
        ),
        row(
            "DEBFULLNAME with a newline",
            2,
            "DEBFULLNAME \"Evil\\nPre-Depends: x\" spans more than one line",
            Box::new(|_| Inv {
                env: vec![
                    ("DEBEMAIL", "a@example.org".into()),
                    ("DEBFULLNAME", "Evil\nPre-Depends: x".into()),
                ],
                ..Default::default()
            }),
        ),
        row(
            "multi-line --depends",
            2,
            "--depends \"librccl1\\nPre-Depends: evil\" spans more than one line",
            Box::new(|_| args(&["--depends", "librccl1\nPre-Depends: evil"])),
        ),
        row(
            "terminal escapes in a consumer's symbol and the stock library's SONAME",
            1,
            "export gate failed for",
            Box::new(|c: &Case| {
                let evil = c.root.join("evil.s");
                std::fs::write(
                    &evil,
                    ".section .note.GNU-stack,\"\",@progbits\n.text\n.globl use\n.type use,@function\nuse:\n  call \"ncclEvil\x1b]0;pwned\x07\"\n  ret\n",
                )
                .unwrap();
                let lib = c.root.join("libevil.so");
                crate::package::ok(
                    Command::new("gcc")
                        .arg("-shared")
                        .arg("-Wl,-soname,librccl.so.1\x1b[2J")
                        .arg(&evil)
                        .arg("-o")
                        .arg(&lib),
                );
                Inv {
                    args: vec![
                        "--consumer".into(),
                        lib.clone().into(),
                        "--stock".into(),
                        lib.into(),
                    ],
                    ..Default::default()
                }
            }),
        ),
        row(
            "--depends with an architecture restriction",
            2,
            "--depends \"librccl1 [amd64]\"",
            Box::new(|_| args(&["--depends", "librccl1 [amd64]"])),
        ),
        row(
            "--depends with a bad relation",
            2,
            "the relation must be one of << <= = >= >>",
            Box::new(|_| args(&["--depends", "librccl1 (~ 5.4.3)"])),
        ),
        row(
            "--depends with an empty entry",
            2,
            "has an empty entry",
            Box::new(|_| args(&["--depends", "librccl1,,libc6"])),
        ),
        row(
            "--depends with a bad version",
            2,
            "has version \"5.4.3 evil\"",
            Box::new(|_| args(&["--depends", "librccl1 (>= 5.4.3 evil)"])),
        ),
        row(
            "--stock-path leaves the root",
            2,
            "--stock-path \"/usr/lib/../../etc/shadow\" has an empty, `.` or `..` component",
            Box::new(|_| args(&["--stock-path", "/usr/lib/../../etc/shadow"])),
        ),
        row(
            "--stock-path breaks the maintainer scripts' quoting",
            2,
            "--stock-path \"/usr/lib/x'; rm -rf /; '\" contains '\\''",
            Box::new(|_| args(&["--stock-path", "/usr/lib/x'; rm -rf /; '"])),
        ),
        row(
            "--stock-path replaces a documentation file",
            2,
            "two files of the package would be installed at /usr/share/doc/rcclfix-rccl-gfx1100/copyright",
            Box::new(|_| {
                args(&["--stock-path", "/usr/share/doc/rcclfix-rccl-gfx1100/copyright"])
            }),
        ),
    ]);
}

/// Class 8: what the package step says about inputs it cannot use, and about a full disk.
#[test]
fn unusable_inputs_are_named_for_what_they_are() {
    let unstripped = || fixtures().unstripped.clone();
    let mut rows = vec![
        row(
            "--from a missing folder",
            2,
            "/missing-build: does not exist",
            Box::new(|c: &Case| Inv {
                args: vec![
                    "--from".into(),
                    c.root.join("missing-build").into(),
                    "--out-dir".into(),
                    c.out.clone().into(),
                ],
                own_args: true,
                ..Default::default()
            }),
        ),
        row(
            "--from a file",
            2,
            "manifest.json: is a regular file, not a folder",
            Box::new(|c: &Case| Inv {
                args: vec![
                    "--from".into(),
                    c.manifest().into(),
                    "--out-dir".into(),
                    c.out.clone().into(),
                ],
                own_args: true,
                ..Default::default()
            }),
        ),
        row(
            "--consumer a folder",
            2,
            "--consumer",
            Box::new(|c: &Case| Inv {
                args: vec!["--consumer".into(), c.root.clone().into()],
                ..Default::default()
            }),
        ),
        row(
            "--consumer a folder says folder",
            2,
            ": is a folder, not a file (an ELF shared library)",
            Box::new(|c: &Case| Inv {
                args: vec!["--consumer".into(), c.root.clone().into()],
                ..Default::default()
            }),
        ),
        row(
            "--stock a FIFO",
            2,
            "/stock.fifo: is a FIFO (named pipe), not a file",
            Box::new(|c: &Case| {
                let p = c.root.join("stock.fifo");
                c.fifo(&p);
                Inv {
                    args: vec!["--stock".into(), p.into()],
                    ..Default::default()
                }
            }),
        ),
        row(
            "--consumer missing",
            2,
            "/nope.so: missing (an ELF shared library)",
            Box::new(|c: &Case| Inv {
                args: vec!["--consumer".into(), c.root.join("nope.so").into()],
                ..Default::default()
            }),
        ),
        row(
            "the library is a FIFO",
            2,
            "librccl.so.1.0: is a FIFO (named pipe), not a file (the library named by",
            Box::new(|c: &Case| {
                c.fifo(&c.dir.join("librccl.so.1.0"));
                Inv::default()
            }),
        ),
        row(
            "the library is a folder",
            2,
            "librccl.so.1.0: is a folder, not a file (the library named by",
            Box::new(|c: &Case| {
                std::fs::remove_file(c.dir.join("librccl.so.1.0")).unwrap();
                std::fs::create_dir(c.dir.join("librccl.so.1.0")).unwrap();
                Inv::default()
            }),
        ),
        row(
            "the library is missing",
            2,
            "librccl.so.1.0: missing (the library named by",
            Box::new(|c: &Case| {
                std::fs::remove_file(c.dir.join("librccl.so.1.0")).unwrap();
                Inv::default()
            }),
        ),
        row(
            "scan.json is a FIFO",
            2,
            "scan.json: is a FIFO (named pipe), not a file (the scanner's report)",
            Box::new(|c: &Case| {
                c.fifo(&c.dir.join("scan.json"));
                Inv::default()
            }),
        ),
        row(
            "manifest.json is a FIFO",
            2,
            "manifest.json: is a FIFO (named pipe), not a file (the build manifest)",
            Box::new(|c: &Case| {
                c.fifo(&c.manifest());
                Inv::default()
            }),
        ),
        row(
            "--out-dir is a file",
            2,
            "not a folder (--out-dir)",
            Box::new(|c: &Case| Inv {
                args: vec![
                    "--from".into(),
                    c.dir.clone().into(),
                    "--out-dir".into(),
                    c.manifest().into(),
                ],
                own_args: true,
                ..Default::default()
            }),
        ),
        row(
            "--dbgsym without a .deb",
            2,
            "--dbgsym needs the deb format",
            Box::new(|_| args(&["--dbgsym", "--format", "whl"])),
        ),
        row(
            "--dbgsym for a library without debug information",
            2,
            "has no debug information or symbol table, so there is no -dbgsym package",
            Box::new(|_| args(&["--dbgsym"])),
        ),
    ];
    // A full disk. `package` first copies the library into a hidden folder of the output folder
    // (the .deb's stripped copy too), so a 4 KiB tmpfs fails at that copy, naming the folder;
    // one with room for exactly those copies fails at the package itself, naming it.
    tool("bwrap", "bubblewrap");
    let pages = |n: u64| n.div_ceil(4096) * 4096;
    rows.push(Row {
        name: "disk full before anything is copied",
        lib: unstripped,
        setup: Box::new(|_| Inv {
            disk_bytes: Some(4096),
            ..args(&["--format", "deb"])
        }),
        code: 2,
        fragment: "pkgs: No space left on device (os error 28) (the library is copied there first)",
    });
    for (format, fragment) in [
        ("whl", "rcclfix_rccl_gfx1100-2.13.4+rcclfix1-py3-none-manylinux_2_28_x86_64.whl: No space left on device"),
        ("deb", "rcclfix-rccl-gfx1100_2.13.4+rcclfix1_amd64.deb: No space left on device"),
    ] {
        rows.push(Row {
            name: if format == "whl" {
                "disk full writing the wheel"
            } else {
                "disk full writing the .deb"
            },
            lib: unstripped,
            setup: Box::new(move |c: &Case| {
                let lib = std::fs::read(c.dir.join("librccl.so.1.0")).unwrap();
                let mut room = pages(lib.len() as u64);
                if format == "deb" {
                    room += pages(rcclfix::package::strip::strip(std::sync::Arc::new(lib)).unwrap().len());
                }
                Inv {
                    disk_bytes: Some(room),
                    ..args(&["--format", format])
                }
            }),
            code: 2,
            fragment,
        });
    }
    run_table(&rows);
}

/// `--consumer DIR` used to say "No such device" (mmap of a folder); the row above checks the new
/// wording, this one that the old one is gone.
#[test]
fn consumer_folder_is_not_no_such_device() {
    let c = Case::new(&fixtures().ours);
    let o = crate::package::run(
        rcclfix(&["package", "--from"])
            .arg(&c.dir)
            .arg("--out-dir")
            .arg(&c.out)
            .arg("--consumer")
            .arg(&c.root),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("No such device"), "{stderr}");
    assert!(!stderr.contains("ZipWriter"), "{stderr}");
}
