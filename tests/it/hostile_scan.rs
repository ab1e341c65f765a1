//! Hostile inputs to `rcclfix scan` (issue 20), one table row per case, grouped by class:
//! 1. a MessagePack count that claims more than the note holds (run under `ulimit -v`),
//! 2. a target a library has no code for is `no code`, never `unknown`,
//! 3. unread input is never "no device code" (exit 0),
//! 4. a closed stdout or stderr keeps the verdict's exit code (its own table),
//! 5. a folder of 70,000 small ELF files (more than `vm.max_map_count` maps),
//! 6. hangs: an interpreter that writes 90 KB to stderr,
//! 7. terminal control characters in the `--python`/`--rocm` summary.
//!
//! Every row makes its input in a fresh folder (`in/`), runs the real binary there (with
//! `RCCLFIX_HOME`, `HOME` and `TMPDIR` inside that folder and a deadline), and checks the exit
//! code, a fragment of the output, that nothing was written outside `out/`, and that no control
//! character reached stdout or stderr.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::control_chars;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn fixture(p: &str) -> PathBuf {
    repo().join("tests/fixtures").join(p)
}

/// Address space for the class-1 rows, in KiB. A scan of the unmodified 30 KB fixture with two
/// threads succeeds with 48 MiB and fails with 32 MiB (bisected with `ulimit -v`, debug build:
/// the binary, two thread stacks and glibc's per-thread malloc arenas); 256 MiB leaves room for
/// another allocator and is three orders of magnitude below what the bug reserved (the
/// 4,294,967,295-kernel claim asked for 343 GB).
const CLAIM_BUDGET_KIB: u64 = 256 << 10;

/// One hostile input: how to make it in the row's folder, what to run there, what must come out.
pub(crate) struct Row {
    /// `class N: what`, for failure messages.
    pub(crate) name: &'static str,
    pub(crate) setup: Box<dyn Fn(&Path)>,
    pub(crate) args: Vec<OsString>,
    /// Run under `ulimit -v` of this many KiB.
    pub(crate) ulimit_kib: Option<u64>,
    /// Run under `ulimit -f` of this many 512-byte blocks (the largest file it may write).
    pub(crate) ulimit_f: Option<u64>,
    pub(crate) code: i32,
    /// Looked for on stdout, then on stderr.
    pub(crate) fragment: String,
    /// Text that must not appear on stdout or stderr.
    pub(crate) absent: Vec<&'static str>,
    /// Set in the environment of the run (not with `ulimit_f`).
    pub(crate) env: Vec<(&'static str, OsString)>,
}

pub(crate) fn row(
    name: &'static str,
    setup: impl Fn(&Path) + 'static,
    args: &[&dyn AsRef<std::ffi::OsStr>],
    code: i32,
    fragment: &str,
) -> Row {
    Row {
        name,
        setup: Box::new(setup),
        args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
        ulimit_kib: None,
        ulimit_f: None,
        code,
        fragment: fragment.to_owned(),
        absent: vec![],
        env: vec![],
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

/// A committed fixture library with the MessagePack array header after `key` (a fixstr key in
/// the kernel metadata note) rewritten to `0xdd ff ff ff ff`, an array32 claiming 4,294,967,295
/// elements. The five bytes overwrite the old header and the start of the first element, so the
/// note keeps its length and the ELF stays valid around it.
fn claiming_library(key: &[u8]) -> Vec<u8> {
    let mut lib = std::fs::read(fixture("sid/kernels.so")).unwrap();
    let at = lib
        .windows(key.len())
        .position(|w| w == key)
        .unwrap_or_else(|| panic!("{key:?} in sid/kernels.so"))
        + key.len();
    assert!(
        (0x90..=0x9f).contains(&lib[at]),
        "a fixarray follows {key:?}"
    );
    lib[at..at + 5].copy_from_slice(&[0xdd, 0xff, 0xff, 0xff, 0xff]);
    lib
}

/// An `ar` archive (a .deb) of `members` (name, bytes), written by the `ar` crate.
pub(crate) fn ar_archive(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = ar::Builder::new(Vec::new());
    for (n, data) in members {
        let h = ar::Header::new(n.as_bytes().to_vec(), data.len() as u64);
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// A tar archive of `members` (path, bytes); `finish`: with the end-of-archive blocks.
pub(crate) fn tar_archive(members: &[(&str, &[u8])], finish: bool) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (n, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, n, *data).unwrap();
    }
    if finish {
        b.into_inner().unwrap()
    } else {
        // The builder writes the end blocks on `into_inner`; take the members only.
        let all = b.into_inner().unwrap();
        all[..all.len() - 1024].to_vec()
    }
}

pub(crate) fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A .deb with `debian-binary`, a control archive and `data` as `data.tar.xz`.
pub(crate) fn deb_with_data(data: &[u8]) -> Vec<u8> {
    let control = xz(&tar_archive(
        &[("./control", b"Package: x\nVersion: 1\n".as_slice())],
        true,
    ));
    ar_archive(&[
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", &control),
        ("data.tar.xz", data),
    ])
}

pub(crate) fn write(p: &Path, data: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

/// A venv made with the interpreter on `PATH` (`python3 -m venv --without-pip`), whose
/// site-packages folder is returned.
fn venv(dir: &Path) -> PathBuf {
    let st = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .status()
        .expect("python3 -m venv");
    assert!(st.success(), "python3 -m venv {}", dir.display());
    let lib = dir.join("lib");
    let py = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("python")
        })
        .expect("lib/pythonX.Y in the venv");
    let site = py.join("site-packages");
    assert!(site.is_dir(), "{}", site.display());
    site
}

/// An empty KFD topology: this machine's GPUs are not known.
fn no_gpus(d: &Path) {
    std::fs::create_dir_all(d.join("in/nosys")).unwrap();
}

/// A host ELF of only its 64-byte header (x86-64 shared object, no sections, no segments): a
/// readable ELF file without device code.
fn tiny_elf() -> Vec<u8> {
    let mut h = std::fs::read(fixture("sid/implicit.so")).unwrap()[..64].to_vec();
    h[24..64].fill(0); // e_entry, e_phoff, e_shoff, e_flags, sizes and counts
    h[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    h
}

/// Files in the class-5 folder: more than Linux's default `vm.max_map_count` (65,530).
const MANY_FILES: usize = 70_000;

fn rows() -> Vec<Row> {
    let mut rows = vec![];

    // Class 1: a count that claims more than the note holds is an unreadable record (exit 3),
    // never an allocation.
    for (name, key) in [
        (
            "class 1: amdhsa.kernels claiming 4,294,967,295 kernels",
            &b"\xaeamdhsa.kernels"[..],
        ),
        (
            "class 1: .args claiming 4,294,967,295 arguments",
            &b"\xa5.args"[..],
        ),
    ] {
        let mut r = row(
            name,
            move |d| write(&d.join("in/claims.so"), &claiming_library(key)),
            &[&"scan", &"-j", &"2", &"in/claims.so"],
            3,
            "claims 4294967295 items, more than the",
        );
        r.ulimit_kib = Some(CLAIM_BUDGET_KIB);
        rows.push(r);
    }
    let mut r = row(
        "class 1: the claim in --json",
        |d| {
            write(
                &d.join("in/claims.so"),
                &claiming_library(b"\xaeamdhsa.kernels"),
            )
        },
        &[&"scan", &"-j", &"2", &"--json", &"in/claims.so"],
        3,
        "\"class\":\"metadata\"",
    );
    r.ulimit_kib = Some(CLAIM_BUDGET_KIB);
    rows.push(r);
    let mut r = row(
        "class 1: the claim in a ROCm install's lib/",
        |d| {
            write(
                &d.join("in/rocm/lib/librccl.so.1"),
                &claiming_library(b"\xa5.args"),
            );
            no_gpus(d);
        },
        &[
            &"scan",
            &"-j",
            &"2",
            &"--rocm",
            &"in/rocm",
            &"--sysfs",
            &"in/nosys",
        ],
        3,
        "librccl.so.1  unknown",
    );
    r.ulimit_kib = Some(CLAIM_BUDGET_KIB);
    rows.push(r);

    // Class 2: a target a library has no code for is `no code`, never `unknown`.
    let two_libs = |d: &Path, root: &str| {
        write(
            &d.join(root).join("libclean.so"),
            &std::fs::read(fixture("sid/implicit.so")).unwrap(),
        );
        write(
            &d.join(root).join("libmulti.so"),
            &std::fs::read(fixture("trixie/multi.so")).unwrap(),
        );
        no_gpus(d);
    };
    let mut r = row(
        "class 2: --rocm without --target: a gfx1100-only clean library beside a gfx1030/gfx1100/gfx90a one is clean",
        move |d| two_libs(d, "in/rocm/lib"),
        &[&"scan", &"--rocm", &"in/rocm", &"--sysfs", &"in/nosys"],
        1,
        "libclean.so  clean ",
    );
    r.absent = vec!["unknown"];
    rows.push(r);
    let mut r = row(
        "class 2: --python without --target, the same two libraries in a venv",
        move |d| {
            let site = venv(&d.join("in/venv"));
            two_libs(d, site.strip_prefix(d).unwrap().to_str().unwrap());
        },
        &[
            &"scan",
            &"--python",
            &"in/venv/bin/python",
            &"--sysfs",
            &"in/nosys",
        ],
        1,
        "libclean.so  clean ",
    );
    r.absent = vec!["unknown"];
    rows.push(r);
    rows.push(row(
        "class 2: --rocm --target gfx1030: the gfx1100-only library has no code for it",
        move |d| two_libs(d, "in/rocm/lib"),
        &[
            &"scan",
            &"--rocm",
            &"in/rocm",
            &"--target",
            &"gfx1030",
            &"--sysfs",
            &"in/nosys",
        ],
        1,
        "libclean.so  no code           0  gfx1100 (1)  [no code for gfx1030]",
    ));
    rows.push(row(
        "class 2: a requested target with no code is its own state in --json, and exit 3",
        |d| {
            write(
                &d.join("in/libclean.so"),
                &std::fs::read(fixture("sid/implicit.so")).unwrap(),
            )
        },
        &[&"scan", &"--json", &"--target", &"gfx1030", &"in/libclean.so"],
        3,
        "\"gfx1030\": {\"state\":\"no-code\",\"images\":0,\"kernels\":0,\"declaring\":0,\"reason\":\"no device code for gfx1030; found: gfx1100\"}",
    ));
    rows.push(row(
        "class 2: ... and in the table",
        |d| {
            write(
                &d.join("in/libclean.so"),
                &std::fs::read(fixture("sid/implicit.so")).unwrap(),
            )
        },
        &[&"scan", &"--target", &"gfx1030", &"in/libclean.so"],
        3,
        "gfx1030          no code         0        0  no device code for gfx1030; found: gfx1100",
    ));

    // Class 3: unread input is never "no device code" with exit 0.
    // A member the scanner passes over must be one no unpacker installs (found by an
    // adversarial pass): GNU tar extracts typeflag 7 and unknown typeflags as regular files, pip
    // writes a zip member whose mode says "symlink" as a regular file of its bytes.
    for (flag, what) in [
        (b'7', "a contiguous file (typeflag 7)"),
        (b'A', "an unknown typeflag"),
    ] {
        for file in ["t.tar", "t.deb"] {
            let name: &'static str = Box::leak(
                format!("class 3: a tar member that is {what}, in {file}").into_boxed_str(),
            );
            let arg: &'static str = Box::leak(format!("in/{file}").into_boxed_str());
            rows.push(row(
                name,
                move |d| {
                    let lib = std::fs::read(fixture("sid/kernels.so")).unwrap();
                    let mut t = tar_archive(&[("usr/lib/x.so", lib.as_slice())], true);
                    t[156] = flag;
                    t[148..156].copy_from_slice(b"        ");
                    let sum: u32 = t[..512].iter().map(|&b| u32::from(b)).sum();
                    t[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
                    write(&d.join("in/t.tar"), &t);
                    write(&d.join("in/t.deb"), &deb_with_data(&xz(&t)));
                },
                &[&"scan", &arg],
                1,
                "gfx1100          declares",
            ));
        }
    }
    rows.push(row(
        "class 3: a wheel member whose Unix mode says symlink but holds a library",
        |d| {
            let lib = std::fs::read(fixture("sid/kernels.so")).unwrap();
            let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            z.start_file("lib/x.so", zip::write::SimpleFileOptions::default())
                .unwrap();
            z.write_all(&lib).unwrap();
            let mut w = z.finish().unwrap().into_inner();
            // The central directory entry's external attributes (APPNOTE 4.3.12, offset 38): a
            // Unix mode of S_IFLNK | 0777 in the high half, made by Unix (version made by 3.x).
            let cd = w.windows(4).rposition(|x| x == b"PK\x01\x02").unwrap();
            w[cd + 5] = 3;
            w[cd + 38..cd + 42].copy_from_slice(&(0o120777u32 << 16).to_le_bytes());
            write(&d.join("in/l.whl"), &w);
        },
        &[&"scan", &"in/l.whl"],
        1,
        "gfx1100          declares",
    ));
    rows.push(row(
        "class 3: a .deb cut to its 8-byte ar magic",
        |d| write(&d.join("in/cut.deb"), b"!<arch>\n"),
        &[&"scan", &"in/cut.deb"],
        3,
        "a Debian package without a data.tar member (no member at all)",
    ));
    rows.push(row(
        "class 3: the same with --json",
        |d| write(&d.join("in/cut.deb"), b"!<arch>\n"),
        &[&"scan", &"--json", &"in/cut.deb"],
        3,
        "\"class\":\"truncated\"",
    ));
    rows.push(row(
        "class 3: a .deb holding only debian-binary",
        |d| {
            write(
                &d.join("in/only.deb"),
                &ar_archive(&[("debian-binary", b"2.0\n")]),
            )
        },
        &[&"scan", &"in/only.deb"],
        3,
        "a Debian package without a data.tar member (first member \"debian-binary\")",
    ));
    rows.push(row(
        "class 3: a .deb whose data.tar is of a compression the scanner does not read (bzip2)",
        |d| {
            write(
                &d.join("in/bz.deb"),
                &ar_archive(&[
                    ("debian-binary", b"2.0\n"),
                    ("data.tar.bz2", b"BZh91AY&SY not really"),
                ]),
            )
        },
        &[&"scan", &"in/bz.deb"],
        3,
        "the package's data archive is not a tar archive",
    ));
    rows.push(row(
        "class 3: a .deb whose data.tar.xz is not xz",
        |d| write(&d.join("in/bad.deb"), &deb_with_data(b"\xfd7zXZ\0garbage")),
        &[&"scan", &"in/bad.deb"],
        3,
        "in/bad.deb!data.tar.xz at offset 0 (decompress): cannot decompress: lzma data error",
    ));
    rows.push(row(
        "class 3: a .deb whose data.tar.xz decompresses to something that is not a tar",
        |d| write(&d.join("in/notar.deb"), &deb_with_data(&xz(&[b'x'; 4096]))),
        &[&"scan", &"in/notar.deb"],
        3,
        "is not a tar archive",
    ));
    rows.push(row(
        "class 3: a .deb whose data tar stops after a member (cut at a block boundary)",
        |d| {
            let tar = tar_archive(
                &[("./usr/share/doc/x/README", b"hello\n".as_slice())],
                false,
            );
            write(&d.join("in/cuttar.deb"), &deb_with_data(&xz(&tar)));
        },
        &[&"scan", &"in/cuttar.deb"],
        3,
        "without its end-of-archive block",
    ));
    rows.push(row(
        "class 3: a .deb whose data.tar.xz is cut in the xz index, after the tar's end",
        |d| {
            let tar = tar_archive(&[("./usr/share/doc/x/README", b"hello\n".as_slice())], true);
            let x = xz(&tar);
            write(&d.join("in/cutxz.deb"), &deb_with_data(&x[..x.len() - 20]));
        },
        &[&"scan", &"in/cutxz.deb"],
        3,
        "the compressed stream after the tar archive's end cannot be read (cut or corrupt)",
    ));
    rows.push(row(
        "class 3: a complete .deb without device code is read completely: exit 0",
        |d| {
            let tar = tar_archive(&[("./usr/share/doc/x/README", b"hello\n".as_slice())], true);
            write(&d.join("in/doc.deb"), &deb_with_data(&xz(&tar)));
        },
        &[&"scan", &"in/doc.deb"],
        0,
        "no device code found",
    ));
    rows.push(row(
        "class 3: a .whl with no member",
        |d| {
            let z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            write(&d.join("in/empty.whl"), &z.finish().unwrap().into_inner());
        },
        &[&"scan", &"in/empty.whl"],
        3,
        "a wheel without any file member (0 members)",
    ));
    rows.push(row(
        "class 3: an uncompressed tar cut after its member",
        |d| {
            let tar = tar_archive(
                &[(
                    "lib/libclean.so",
                    &std::fs::read(fixture("sid/implicit.so")).unwrap(),
                )],
                false,
            );
            write(&d.join("in/cut.tar"), &tar);
        },
        &[&"scan", &"in/cut.tar"],
        3,
        "without its end-of-archive block",
    ));

    // Class 5: a folder of more small ELF files than the process may hold maps.
    if std::env::var_os("RCCLFIX_SLOW_TESTS").is_some() {
        let mut r = row(
            "class 5: 70,000 small ELF files in one folder",
            |d| {
                let elf = tiny_elf();
                let dir = d.join("in/many");
                std::fs::create_dir_all(&dir).unwrap();
                for i in 0..MANY_FILES {
                    std::fs::write(dir.join(format!("lib{i:05}.so")), &elf).unwrap();
                }
            },
            &[&"scan", &"in/many"],
            0,
            "no device code found",
        );
        r.absent = vec!["cannot map", "Cannot allocate memory"];
        rows.push(r);
    }

    // Class 6: an interpreter whose `.pth` hook writes 90 KB to stderr (more than a pipe holds).
    rows.push(row(
        "class 6: --python whose site-packages .pth prints 90 KB to stderr",
        |d| {
            let site = venv(&d.join("in/venv"));
            write(
                &site.join("noisy.pth"),
                b"import sys; sys.stderr.write('x' * 92160); sys.stderr.flush()\n",
            );
            no_gpus(d);
        },
        &[
            &"scan",
            &"--python",
            &"in/venv/bin/python",
            &"--sysfs",
            &"in/nosys",
        ],
        0,
        "0 libraries with device code under",
    ));

    // Class 7: control characters from file names and the interpreter's answer.
    let evil: &[u8] = b"lib\x1b]0;pwned\x07.so";
    let forged: &[u8] = b"x.so\nlibfake.so  clean  0  gfx1100 (1)\x1b[2J";
    let names = [evil.to_vec(), forged.to_vec()];
    let evil_names = move |d: &Path, root: &Path| {
        for n in &names {
            let p = root.join(std::ffi::OsStr::from_bytes(n));
            write(&p, &std::fs::read(fixture("sid/implicit.so")).unwrap());
        }
        no_gpus(d);
    };
    let en = evil_names.clone();
    rows.push(row(
        "class 7: --rocm summary rows with OSC, BEL and a newline that forges a row",
        move |d| en(d, &d.join("in/rocm/lib")),
        &[&"scan", &"--rocm", &"in/rocm", &"--sysfs", &"in/nosys"],
        0,
        "lib\\e]0;pwned\\x07.so",
    ));
    let en = evil_names.clone();
    rows.push(row(
        "class 7: the forged row stays on its own line, escaped",
        move |d| en(d, &d.join("in/rocm/lib")),
        &[&"scan", &"--rocm", &"in/rocm", &"--sysfs", &"in/nosys"],
        0,
        "x.so\\nlibfake.so  clean  0  gfx1100 (1)\\e[2J",
    ));
    rows.push(row(
        "class 7: --python summary with the venv's prefix holding CSI",
        move |d| {
            let site = venv(&d.join(std::ffi::OsStr::from_bytes(b"in/venv\x1b[2J")));
            evil_names(d, &site);
        },
        &[
            &"scan",
            &"--python",
            &std::ffi::OsStr::from_bytes(b"in/venv\x1b[2J/bin/python"),
            &"--sysfs",
            &"in/nosys",
        ],
        0,
        "venv\\e[2J: 2 libraries with device code under",
    ));
    rows.push(row(
        "class 7: --python whose interpreter answers with OSC in its version and a newline in its prefix",
        |d| {
            let site = d.join("in/site");
            write(
                &site.join("libclean.so"),
                &std::fs::read(fixture("sid/implicit.so")).unwrap(),
            );
            let answer = format!(
                "{{\"paths\":[{}],\"version\":\"3.11\\u001b]0;pwned\\u0007\",\"prefix\":\"/x\\nPython 3.12 at /forged\\u001b[2J\"}}",
                serde_json::to_string(site.to_str().unwrap()).unwrap()
            );
            let py = d.join("in/python");
            write(&py, format!("#!/bin/sh\ncat <<'EOF'\n{answer}\nEOF\n").as_bytes());
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
            no_gpus(d);
        },
        &[&"scan", &"--python", &"in/python", &"--sysfs", &"in/nosys"],
        0,
        "Python 3.11\\e]0;pwned\\x07 at /x\\nPython 3.12 at /forged\\e[2J: 1 library with device code under",
    ));
    rows
}

#[test]
fn hostile_scan_inputs_table() {
    check_rows(rows());
}

/// Run every row in its own folder and check it (module docs); panics naming each failed row,
/// and prints the row count per class (the first word pair of each name, `class N`).
pub(crate) fn check_rows(rows: Vec<Row>) {
    let mut failures = vec![];
    let mut per_class = std::collections::BTreeMap::<String, usize>::new();
    for r in rows {
        let class = r.name.split(':').next().unwrap_or(r.name).to_owned();
        *per_class.entry(class).or_default() += 1;
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for sub in ["in", "out", "home", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        (r.setup)(d);
        let before = crate::support::listing(d, &["out"]);
        let (code, out, err) = match r.ulimit_f {
            Some(blocks) => {
                crate::support::run_row_fsize(d, &r.args, blocks, Duration::from_secs(120))
            }
            None => run_in(d, &r.args, &r.env, r.ulimit_kib),
        };
        let after = crate::support::listing(d, &["out"]);
        let mut why = vec![];
        if code != r.code {
            why.push(format!("exit {code}, expected {}", r.code));
        }
        if !out.contains(&r.fragment) && !err.contains(&r.fragment) {
            why.push(format!("the output lacks {:?}", r.fragment));
        }
        for a in &r.absent {
            if out.contains(a) || err.contains(a) {
                why.push(format!("the output holds {a:?}"));
            }
        }
        if before != after {
            let new: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
            let gone: Vec<_> = before.iter().filter(|e| !after.contains(e)).collect();
            why.push(format!(
                "written outside out/: new or changed {new:?}, removed {gone:?}"
            ));
        }
        for (what, s) in [("stdout", &out), ("stderr", &err)] {
            let cc = control_chars(s);
            if !cc.is_empty() {
                why.push(format!("control characters on {what}: {cc:?}"));
            }
        }
        if err.contains("panicked") || err.contains("memory allocation of") {
            why.push("a panic or an allocation failure on stderr".into());
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n  args {:?}\n  stdout: {}\n  stderr: {}",
                r.name,
                why.join("; "),
                r.args,
                &out[..out.len().min(4000)],
                &err[..err.len().min(4000)]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!("hostile scan rows per class: {per_class:?}");
}

/// `doctor --library` reads a library through the same scanner: the claim is an unreadable
/// record there too, under the same address-space budget (the verdict wording is doctor's).
#[test]
fn doctor_library_with_a_claiming_count_does_not_abort() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    for sub in ["in/sys", "in/proc", "home", "tmp"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    write(
        &d.join("in/librccl.so.1"),
        &claiming_library(b"\xaeamdhsa.kernels"),
    );
    let args: Vec<OsString> = [
        "doctor",
        "--sysfs",
        "in/sys",
        "--proc",
        "in/proc",
        "--library",
        "in/librccl.so.1",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let (code, out, err) = run_in(d, &args, &[], Some(CLAIM_BUDGET_KIB));
    assert!(
        (0..=3).contains(&code) && !err.contains("memory allocation of"),
        "exit {code}\n{out}\n{err}"
    );
}

/// How a stream of the child is connected in [`closed_pipes_keep_the_exit_code`].
#[derive(Debug, Clone, Copy)]
enum Closed {
    Stdout,
    Stderr,
    Both,
}

/// Class 4: a closed stdout, stderr or both (a pipe whose read end is gone before the child
/// starts, so every write meets `EPIPE`: deterministic, unlike `| true`) does not change the
/// exit code, and nothing panics.
#[test]
fn closed_pipes_keep_the_exit_code() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    write(&d.join("cut.deb"), b"!<arch>\n");
    let lib = fixture("sid/kernels.so");
    let clean = fixture("sid/implicit.so");
    let cases: Vec<(Vec<OsString>, i32)> = vec![
        (vec!["scan".into(), lib.clone().into()], 1),
        (vec!["scan".into(), "--json".into(), lib.clone().into()], 1),
        (vec!["scan".into(), "-k".into(), lib.into()], 1),
        (vec!["scan".into(), clean.into()], 0),
        (vec!["scan".into(), d.join("cut.deb").into()], 3),
        (vec!["scan".into(), d.join("missing.so").into()], 2),
        (vec!["scan".into(), "--target".into(), "".into()], 2),
        (vec!["scan".into(), "--no-such-flag".into()], 2),
        (vec!["matrix".into()], 0),
        (vec!["recipe".into(), "list".into()], 0),
    ];
    let mut failures = vec![];
    for (args, want) in &cases {
        for closed in [Closed::Stdout, Closed::Stderr, Closed::Both] {
            let closed_pipe = || {
                let (reader, writer) = std::io::pipe().unwrap();
                drop(reader);
                Stdio::from(writer)
            };
            let (out, err) = match closed {
                Closed::Stdout => (closed_pipe(), Stdio::null()),
                Closed::Stderr => (Stdio::null(), closed_pipe()),
                Closed::Both => (closed_pipe(), closed_pipe()),
            };
            let st = crate::support::rcclfix()
                .args(args)
                .current_dir(repo())
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .status()
                .unwrap();
            if st.code() != Some(*want) {
                failures.push(format!(
                    "{args:?} with {closed:?} closed: {st}, expected {want}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
