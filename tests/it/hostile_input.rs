//! Hostile inputs to `rcclfix scan`, continued (issue 20, the second adversarial pass), one row
//! per case in the table of [`super::hostile_scan`] (same runner, same checks: exit code, message
//! fragment, nothing written outside `out/`, no control character on the terminal):
//! 8. an archive with two members of one name: a zip's second central-directory record of a name
//!    replaced the first (a declaring library hid behind a clean one), so such a zip is
//!    ambiguous (exit 3); a tar's two members are both read (every unpacker keeps the last);
//! 9. a folder whose libraries sit behind a link to a folder (followed, each folder once), link
//!    loops, and dangling links;
//! 10. a compressed tar cut mid-stream, zstd, xz and gzip alike: exit 3;
//! 11. a member spilled to a temporary file under `ulimit -f`: no SIGXFSZ death;
//! 12. a `--target` value with ESC bytes: escaped on the terminal;
//! 13. a library with holes stored as a sparse member by GNU tar (`--sparse`, pax formats 0.0,
//!     0.1 and 1.0, and the old GNU `S` member) in a `.tar`, `.tar.gz` and a `.deb`'s
//!     `data.tar.xz`: read as `tar -x` writes it (issue 40, item 4), and a map GNU tar would not
//!     write is unreadable (exit 3);
//! 14. a code object for a target of LLVM's `EF_AMDGPU_MACH` table the scanner lacked (gfx1251,
//!     0x5a) is read, and a value no LLVM names is "not known to this rcclfix" (issue 40, item 5);
//! 15. `scan -j N` with N past the machine's available parallelism: capped, and said on stderr
//!     (issue 40, item 8);
//!
//! and, in process, the metadata-count mutation loop of `hostile_scan`'s class 1, and class 13's
//! oracle: what `tar -x` and `dpkg-deb -x` extract scans the same as the archive.

use std::io::Write as _;
use std::path::Path;

use super::hostile_scan::{check_rows, deb_with_data, fixture, row, tar_archive, write, xz, Row};

fn lib(p: &str) -> Vec<u8> {
    std::fs::read(fixture(p)).unwrap()
}

/// A zip (stored members) of `members` (name, bytes), written by the `zip` crate, which refuses
/// a second member of one name: the second's name is written as `lib/X.so` and renamed in both
/// its local header and its central-directory record to `rename` afterwards.
fn zip_of(members: &[(&str, &[u8])], rename: Option<(&str, &str)>) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (n, data) in members {
        z.start_file(*n, opts).unwrap();
        z.write_all(data).unwrap();
    }
    let mut w = z.finish().unwrap().into_inner();
    if let Some((from, to)) = rename {
        assert_eq!(from.len(), to.len());
        let mut at = 0;
        while let Some(i) = w[at..]
            .windows(from.len())
            .position(|x| x == from.as_bytes())
        {
            w[at + i..at + i + to.len()].copy_from_slice(to.as_bytes());
            at += i + to.len();
        }
    }
    w
}

/// A zip of `clean` then `declaring` (or the reverse) under one name, `lib/x.so`.
fn zip_dup(declaring_first: bool) -> Vec<u8> {
    let (clean, bad) = (lib("sid/implicit.so"), lib("sid/kernels.so"));
    let (a, b) = if declaring_first {
        (bad, clean)
    } else {
        (clean, bad)
    };
    zip_of(
        &[("lib/x.so", &a), ("lib/y.so", &b)],
        Some(("lib/y.so", "lib/x.so")),
    )
}

/// A tar of `clean` then `declaring` (or the reverse) under one name.
fn tar_dup(declaring_first: bool) -> Vec<u8> {
    let (clean, bad) = (lib("sid/implicit.so"), lib("sid/kernels.so"));
    let (a, b) = if declaring_first {
        (bad, clean)
    } else {
        (clean, bad)
    };
    tar_archive(&[("usr/lib/x.so", &a), ("usr/lib/x.so", &b)], true)
}

fn symlink(to: &str, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(to, at).unwrap();
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zst(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

/// The committed declaring library with holes, written as a sparse file at `at`: 64 KiB of
/// zeros before its section header table (`e_shoff` moved past them) and 128 KiB of zeros after
/// it, each left unwritten. Panics when the file system stored the holes (GNU tar stores a file
/// as sparse only when it has fewer blocks than its size says), so the rows never pass on a
/// member that is not sparse. Returns the file's bytes.
fn sparse_lib(at: &Path) -> Vec<u8> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::MetadataExt;
    let lib = lib("sid/kernels.so");
    let shoff = u64::from_le_bytes(lib[0x28..0x30].try_into().unwrap()) as usize;
    const GAP: usize = 64 << 10;
    let len = lib.len() + GAP + (128 << 10);
    let mut full = lib[..shoff].to_vec();
    full.resize(shoff + GAP, 0);
    full.extend_from_slice(&lib[shoff..]);
    full.resize(len, 0);
    full[0x28..0x30].copy_from_slice(&((shoff + GAP) as u64).to_le_bytes());
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let mut f = std::fs::File::create(at).unwrap();
    f.write_all(&full[..shoff]).unwrap();
    f.seek(SeekFrom::Start((shoff + GAP) as u64)).unwrap();
    f.write_all(&lib[shoff..]).unwrap();
    f.set_len(len as u64).unwrap();
    drop(f);
    assert_eq!(std::fs::read(at).unwrap(), full);
    let m = std::fs::metadata(at).unwrap();
    assert!(
        m.blocks() * 512 < m.size(),
        "{} is not sparse on this file system ({} blocks for {} bytes)",
        at.display(),
        m.blocks(),
        m.size()
    );
    full
}

/// The sparse forms GNU tar writes: `--format` and `--sparse-version` (none for `gnu`).
const SPARSE_FORMS: [(&str, Option<&str>); 4] = [
    ("posix", Some("1.0")),
    ("posix", Some("0.1")),
    ("posix", Some("0.0")),
    ("gnu", None),
];

/// Runs `cmd`, panicking with its stderr when it fails.
fn run_ok(cmd: &mut std::process::Command) -> Vec<u8> {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// A tar archive of `usr/lib/x.so`, the [`sparse_lib`] made in `dir/stage`, written by GNU tar
/// with `--sparse` in `form`, uncompressed. Panics unless the member is sparse in it (a
/// `GNU.sparse.` pax record, or a typeflag `S` header).
fn gnu_sparse_tar(dir: &Path, (format, version): (&str, Option<&str>)) -> Vec<u8> {
    let stage = dir.join("stage");
    sparse_lib(&stage.join("usr/lib/x.so"));
    let mut tar = std::process::Command::new("tar");
    tar.args(["--sparse", "--format", format, "--owner=0", "--group=0"]);
    if let Some(v) = version {
        tar.arg(format!("--sparse-version={v}"));
    }
    let out = run_ok(tar.arg("-cf").arg("-").arg("-C").arg(&stage).arg("usr"));
    std::fs::remove_dir_all(&stage).unwrap();
    let sparse = match version {
        Some(_) => out.windows(11).any(|w| w == b"GNU.sparse."),
        None => out
            .chunks(512)
            .any(|b| b.len() == 512 && b[156] == b'S' && &b[257..262] == b"ustar"),
    };
    assert!(
        sparse,
        "GNU tar wrote no sparse member ({format} {version:?})"
    );
    out
}

/// [`super::hostile_scan::deb_with_data`] with a control archive from `dpkg-deb --build` and
/// `data` (an xz tar) as its `data.tar.xz`: dpkg-deb builds its own data archive without
/// `--sparse`, so the sparse one is put in its place.
fn deb_of_sparse_data(dir: &Path, data: &[u8]) -> Vec<u8> {
    let stage = dir.join("debstage");
    write(
        &stage.join("DEBIAN/control"),
        b"Package: x\nVersion: 1\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: t\n",
    );
    let deb = dir.join("built.deb");
    run_ok(
        std::process::Command::new("dpkg-deb")
            .args(["-Zxz", "--root-owner-group", "--build"])
            .arg(&stage)
            .arg(&deb),
    );
    let control = run_ok(
        std::process::Command::new("ar")
            .arg("p")
            .arg(&deb)
            .arg("control.tar.xz"),
    );
    std::fs::remove_dir_all(&stage).unwrap();
    std::fs::remove_file(&deb).unwrap();
    super::hostile_scan::ar_archive(&[
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", &control),
        ("data.tar.xz", data),
    ])
}

/// Class 13's archive `file` (`.tar`, `.tar.gz` or `.deb`) in `form`, written under `dir/in`.
fn sparse_archive(dir: &Path, form: (&str, Option<&str>), file: &str) {
    let tar = gnu_sparse_tar(dir, form);
    let bytes = match file {
        f if f.ends_with(".tar.gz") => gz(&tar),
        f if f.ends_with(".deb") => deb_of_sparse_data(dir, &xz(&tar)),
        _ => tar,
    };
    write(&dir.join("in").join(file), &bytes);
}

fn rows() -> Vec<Row> {
    let mut rows = vec![];

    // Class 15: -j past the machine (issue 40, item 8).
    rows.push(row(
        "class 15: scan -j 4096 is capped at the machine's parallelism, and says so",
        |d| write(&d.join("in/k.so"), &lib("sid/kernels.so")),
        &[&"scan", &"-j", &"4096", &"in/k.so"],
        1,
        "-j 4096 is more than the",
    ));

    // Class 14: targets (issue 40, item 5).
    rows.push(row(
        "class 14: a gfx1251 code object (EF_AMDGPU_MACH 0x5a) is read",
        |d| {
            let mut co = lib("sid/kernels.co");
            co[48] = 0x5a;
            let (from, to) = (b"amdgcn-amd-amdhsa--gfx1100", b"amdgcn-amd-amdhsa--gfx1251");
            let at = co.windows(from.len()).position(|w| w == from).unwrap();
            co[at..at + to.len()].copy_from_slice(to);
            write(&d.join("in/k.co"), &co);
        },
        &[&"scan", &"in/k.co"],
        1,
        "gfx1251          declares",
    ));
    rows.push(row(
        "class 14: an EF_AMDGPU_MACH no LLVM names is a target not known to this rcclfix",
        |d| {
            let mut co = lib("sid/kernels.co");
            co[48] = 0x70;
            write(&d.join("in/k.co"), &co);
        },
        &[&"scan", &"in/k.co"],
        3,
        "target not known to this rcclfix (EF_AMDGPU_MACH 0x70)",
    ));

    // Class 13: sparse members (issue 40, item 4).
    for form in SPARSE_FORMS {
        for file in ["lib.tar", "lib.tar.gz", "lib.deb"] {
            let name: &'static str = Box::leak(
                format!(
                    "class 13: a library with holes as a GNU tar --sparse --format={} {} member in {file}",
                    form.0,
                    form.1.map_or(String::new(), |v| format!("--sparse-version={v}"))
                )
                .into_boxed_str(),
            );
            let arg: &'static str = Box::leak(format!("in/{file}").into_boxed_str());
            let mut r = row(
                name,
                move |d| sparse_archive(d, form, file),
                &[&"scan", &arg],
                1,
                "gfx1100          declares",
            );
            r.absent = vec!["no device code found"];
            rows.push(r);
        }
    }
    rows.push(row(
        "class 13: a sparse member over the memory budget is rebuilt into the spill file",
        |d| sparse_archive(d, ("posix", Some("1.0")), "lib.tar.gz"),
        &[&"scan", &"--memory-budget", &"4K", &"in/lib.tar.gz"],
        1,
        "gfx1100          declares",
    ));
    rows.push(row(
        "class 13: a 1.0 sparse map whose last segment ends past the real size is unreadable",
        |d| {
            let mut t = gnu_sparse_tar(d, ("posix", Some("1.0")));
            let (from, to) = (b"GNU.sparse.realsize=2", b"GNU.sparse.realsize=1");
            let at = t.windows(from.len()).position(|w| w == from).unwrap();
            t[at..at + to.len()].copy_from_slice(to);
            write(&d.join("in/lib.tar"), &t);
        },
        &[&"scan", &"in/lib.tar"],
        3,
        "a sparse member whose map cannot be used (sparse segment",
    ));
    rows.push(row(
        "class 13: a sparse format GNU tar does not write is unreadable",
        |d| {
            let mut t = gnu_sparse_tar(d, ("posix", Some("1.0")));
            let (from, to) = (b"GNU.sparse.major=1", b"GNU.sparse.major=2");
            let at = t.windows(from.len()).position(|w| w == from).unwrap();
            t[at..at + to.len()].copy_from_slice(to);
            write(&d.join("in/lib.tar"), &t);
        },
        &[&"scan", &"in/lib.tar"],
        3,
        "sparse format 2.0 is not one GNU tar writes",
    ));

    // Class 8: two members of one name.
    for (first, what) in [(false, "clean first"), (true, "declaring first")] {
        for file in ["dup.whl", "dup.zip"] {
            let name: &'static str = Box::leak(
                format!("class 8: a zip ({file}) with two members named lib/x.so, {what}")
                    .into_boxed_str(),
            );
            let arg: &'static str = Box::leak(format!("in/{file}").into_boxed_str());
            let mut r = row(
                name,
                move |d| write(&d.join("in").join(file), &zip_dup(first)),
                &[&"scan", &arg],
                3,
                "two members are named `lib/x.so`",
            );
            r.absent = vec!["no device code found", "gfx1100          clean"];
            rows.push(r);
        }
    }
    rows.push(row(
        "class 8: the same zip in --json",
        |d| write(&d.join("in/dup.whl"), &zip_dup(false)),
        &[&"scan", &"--json", &"in/dup.whl"],
        3,
        "\"class\":\"ambiguous\"",
    ));
    rows.push(row(
        "class 8: a zip whose end record counts 1 member, its central directory holding 2 (Python's zipfile reads both)",
        |d| {
            let mut w = zip_of(
                &[
                    ("lib/a.so", lib("sid/implicit.so").as_slice()),
                    ("lib/b.so", lib("sid/kernels.so").as_slice()),
                ],
                None,
            );
            let eocd = w.windows(4).rposition(|x| x == b"PK\x05\x06").unwrap();
            w[eocd + 8..eocd + 12].copy_from_slice(&[1, 0, 1, 0]);
            write(&d.join("in/count.whl"), &w);
        },
        &[&"scan", &"in/count.whl"],
        3,
        "it holds 2 records, but its end record counts 1",
    ));
    rows.push(row(
        "class 8: a zip with two members of distinct names is read as before",
        |d| {
            write(
                &d.join("in/two.whl"),
                &zip_of(
                    &[
                        ("lib/a.so", lib("sid/implicit.so").as_slice()),
                        ("lib/b.so", lib("sid/kernels.so").as_slice()),
                    ],
                    None,
                ),
            )
        },
        &[&"scan", &"in/two.whl"],
        1,
        "gfx1100          declares",
    ));
    // A zip behind a prefix (a shell stub): Python's zipfile, and pip, read it; so does scan.
    let prefixed = |z: Vec<u8>| [b"#!/bin/sh\nexit 0\n".as_slice(), &[0u8; 100], &z].concat();
    rows.push(row(
        "class 8: a wheel behind a shell-script prefix, with a declaring member",
        move |d| {
            let z = zip_of(&[("lib/x.so", lib("sid/kernels.so").as_slice())], None);
            write(&d.join("in/stub.whl"), &prefixed(z));
        },
        &[&"scan", &"in/stub.whl"],
        1,
        "gfx1100          declares",
    ));
    for arg in ["in/f/stub.whl", "in/f"] {
        let name: &'static str = Box::leak(
            format!("class 8: the prefixed zip with two members named lib/x.so, scanning {arg}")
                .into_boxed_str(),
        );
        rows.push(row(
            name,
            move |d| write(&d.join("in/f/stub.whl"), &prefixed(zip_dup(true))),
            &[&"scan", &arg],
            3,
            "two members are named `lib/x.so`",
        ));
    }
    rows.push(row(
        "class 8: a zip that names one folder twice (no bytes, nothing ambiguous) is read",
        |d| {
            let z = zip_of(
                &[
                    ("lib/", b"".as_slice()),
                    ("lib/x.so", lib("sid/kernels.so").as_slice()),
                    ("li0/", b"".as_slice()),
                ],
                Some(("li0/", "lib/")),
            );
            write(&d.join("in/dirs.whl"), &z);
        },
        &[&"scan", &"in/dirs.whl"],
        1,
        "gfx1100          declares",
    ));
    rows.push(row(
        "class 8: a named file that only looks like it ends in a zip end record",
        |d| write(&d.join("in/g.bin"), b"hello PK\x05\x06 garbage"),
        &[&"scan", &"in/g.bin"],
        2,
        "error: in/g.bin: not a recognised input at offset 0",
    ));
    for (first, what) in [(false, "clean first"), (true, "declaring first")] {
        for file in ["dup.tar", "dup.tar.xz", "dup.deb"] {
            let name: &'static str = Box::leak(
                format!("class 8: a tar ({file}) with two members named usr/lib/x.so, {what}: both read")
                    .into_boxed_str(),
            );
            let arg: &'static str = Box::leak(format!("in/{file}").into_boxed_str());
            rows.push(row(
                name,
                move |d| {
                    let t = tar_dup(first);
                    match file {
                        "dup.tar" => write(&d.join("in/dup.tar"), &t),
                        "dup.tar.xz" => write(&d.join("in/dup.tar.xz"), &xz(&t)),
                        _ => write(&d.join("in/dup.deb"), &deb_with_data(&xz(&t))),
                    }
                },
                &[&"scan", &arg],
                1,
                "gfx1100          declares",
            ));
        }
    }

    // Class 9: links to folders, loops, dangling links.
    rows.push(row(
        "class 9: a folder whose library sits behind a link to a folder",
        |d| {
            write(&d.join("in/real/libx.so"), &lib("sid/kernels.so"));
            std::fs::create_dir_all(d.join("in/root")).unwrap();
            symlink("../real", &d.join("in/root/lib"));
        },
        &[&"scan", &"in/root"],
        1,
        "gfx1100          declares",
    ));
    rows.push(row(
        "class 9: a link back to the folder itself (a loop) beside a clean library",
        |d| {
            write(&d.join("in/root/libc.so"), &lib("sid/implicit.so"));
            symlink("..", &d.join("in/root/sub/up"));
            symlink(".", &d.join("in/root/self"));
        },
        &[&"scan", &"in/root"],
        0,
        "gfx1100          clean",
    ));
    rows.push(row(
        "class 9: two links to one folder of a declaring library",
        |d| {
            write(&d.join("in/real/libx.so"), &lib("sid/kernels.so"));
            symlink("../real", &d.join("in/root/a"));
            symlink("../real", &d.join("in/root/b"));
        },
        &[&"scan", &"in/root"],
        1,
        "gfx1100          declares",
    ));
    rows.push(row(
        "class 9: a link to /proc beside a clean library (not walked: /proc/kcore alone claims 128 TiB)",
        |d| {
            write(&d.join("in/root/libc.so"), &lib("sid/implicit.so"));
            symlink("/proc", &d.join("in/root/p"));
        },
        &[&"scan", &"in/root"],
        3,
        "on a kernel pseudo file system",
    ));
    rows.push(row(
        "class 9: links to folders that link on to each other (a cycle through two folders)",
        |d| {
            write(&d.join("in/x/libc.so"), &lib("sid/implicit.so"));
            write(&d.join("in/y/libd.so"), &lib("sid/kernels.so"));
            symlink("../y", &d.join("in/x/to-y"));
            symlink("../x", &d.join("in/y/to-x"));
        },
        &[&"scan", &"in/x"],
        1,
        "gfx1100          declares",
    ));
    rows.push(row(
        "class 9: a dangling link named like a library",
        |d| {
            write(&d.join("in/root/libc.so"), &lib("sid/implicit.so"));
            symlink("libgone.so.1", &d.join("in/root/libgone.so"));
        },
        &[&"scan", &"in/root"],
        3,
        "dangling symlink to libgone.so.1",
    ));
    rows.push(row(
        "class 9: a dangling link that may have been a folder (no extension)",
        |d| {
            write(&d.join("in/root/libc.so"), &lib("sid/implicit.so"));
            symlink("../gone/lib", &d.join("in/root/lib64"));
        },
        &[&"scan", &"in/root"],
        3,
        "dangling symlink to ../gone/lib",
    ));
    rows.push(row(
        "class 9: a dangling link to a library name under another name",
        |d| {
            std::fs::create_dir_all(d.join("in/root")).unwrap();
            symlink("librccl.so.1.0", &d.join("in/root/rccl-current"));
        },
        &[&"scan", &"in/root"],
        3,
        "dangling symlink to librccl.so.1.0",
    ));
    rows.push(row(
        "class 9: a dangling link of a text file is not device code (exit 0, as before)",
        |d| {
            write(&d.join("in/root/README"), b"hello\n");
            symlink("gone.txt", &d.join("in/root/NOTES.txt"));
        },
        &[&"scan", &"in/root"],
        0,
        "no device code found",
    ));
    rows.push(row(
        "class 9: a link loop named like a library",
        |d| {
            std::fs::create_dir_all(d.join("in/root")).unwrap();
            symlink("libloop.so", &d.join("in/root/libloop.so"));
        },
        &[&"scan", &"in/root"],
        3,
        "symbolic link loop",
    ));

    // Class 10: a compressed tar cut mid-stream is unread, whatever the compression.
    type Compress = fn(&[u8]) -> Vec<u8>;
    for (ext, f) in [
        ("tar.zst", zst as Compress),
        ("tar.xz", xz as Compress),
        ("tar.gz", gz as Compress),
    ] {
        for (named, at) in [(true, "named"), (false, "in a folder")] {
            let name: &'static str = Box::leak(
                format!("class 10: a .{ext} of a library cut in the middle, {at}").into_boxed_str(),
            );
            let arg: &'static str = if named {
                Box::leak(format!("in/d/cut.{ext}").into_boxed_str())
            } else {
                "in/d"
            };
            rows.push(row(
                name,
                move |d| {
                    let t =
                        tar_archive(&[("usr/lib/x.so", lib("sid/kernels.so").as_slice())], true);
                    let c = f(&t);
                    write(&d.join(format!("in/d/cut.{ext}")), &c[..c.len() / 2]);
                },
                &[&"scan", &arg],
                3,
                "cut.",
            ));
        }
    }

    // Class 11: a member over the memory budget spilled under `ulimit -f` (8 KiB).
    for ext in ["tar.xz", "whl"] {
        let name: &'static str = Box::leak(
            format!("class 11: a .{ext} member spilled to a temporary file under ulimit -f")
                .into_boxed_str(),
        );
        let arg: &'static str = Box::leak(format!("in/big.{ext}").into_boxed_str());
        let mut r = row(
            name,
            move |d| {
                let l = lib("sid/kernels.so");
                if ext == "whl" {
                    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
                    z.start_file("lib/x.so", zip::write::SimpleFileOptions::default())
                        .unwrap();
                    z.write_all(&l).unwrap();
                    write(&d.join("in/big.whl"), &z.finish().unwrap().into_inner());
                } else {
                    write(
                        &d.join("in/big.tar.xz"),
                        &xz(&tar_archive(&[("usr/lib/x.so", l.as_slice())], true)),
                    );
                }
            },
            &[&"scan", &"--memory-budget", &"4K", &arg],
            1,
            "gfx1100          declares",
        );
        r.ulimit_f = Some(16);
        rows.push(r);
    }

    // Class 12: a `--target` value with ESC and BEL bytes.
    rows.push(row(
        "class 12: --target with OSC and CSI bytes",
        |d| write(&d.join("in/libc.so"), &lib("sid/implicit.so")),
        &[
            &"scan",
            &"--target",
            &"gfx\x1b]0;pwned\x07\x1b[2J",
            &"in/libc.so",
        ],
        3,
        "no device code for gfx\\e]0;pwned\\x07\\e[2J; found: gfx1100",
    ));
    rows
}

#[test]
fn hostile_scan_inputs_table_continued() {
    check_rows(rows());
}

/// Class 13's oracle: for each sparse form GNU tar writes, `tar -x` (and `dpkg-deb -x` for the
/// `.deb`) extracts exactly the library with holes, and `scan --json=full` of the archive reports
/// the same images as a scan of what was extracted.
#[test]
fn sparse_members_scan_as_tar_extracts_them() {
    let images = |d: &Path, arg: &str| -> serde_json::Value {
        let (code, out, err) = crate::support::run_row(
            d,
            &["scan".into(), "--json=full".into(), arg.into()],
            &[],
            None,
            std::time::Duration::from_secs(120),
        );
        assert_eq!(code, 1, "scan {arg}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let files = v["files"].as_array().unwrap();
        assert_eq!(files.len(), 1, "scan {arg}: {out}");
        files[0]["images"].clone()
    };
    for form in SPARSE_FORMS {
        for file in ["lib.tar", "lib.deb"] {
            let t = tempfile::tempdir().unwrap();
            let d = t.path();
            for sub in ["in", "x", "home", "tmp"] {
                std::fs::create_dir_all(d.join(sub)).unwrap();
            }
            let want = sparse_lib(&d.join("want.so"));
            sparse_archive(d, form, file);
            let mut x = if file.ends_with(".deb") {
                let mut c = std::process::Command::new("dpkg-deb");
                c.arg("-x").arg(d.join("in").join(file)).arg(d.join("x"));
                c
            } else {
                let mut c = std::process::Command::new("tar");
                c.arg("-xf")
                    .arg(d.join("in").join(file))
                    .arg("-C")
                    .arg(d.join("x"));
                c
            };
            run_ok(&mut x);
            let got = std::fs::read(d.join("x/usr/lib/x.so")).unwrap();
            assert!(
                got == want,
                "{form:?} {file}: the extracted file differs from the library"
            );
            assert_eq!(
                images(d, &format!("in/{file}")),
                images(d, "x/usr/lib/x.so"),
                "{form:?} {file}"
            );
        }
    }
}

/// [`super::hostile_scan`]'s class 1, a bounded mutation loop beside the cargo-fuzz target `fuzz/metadata_counts`: the
/// metadata note of a committed code object, mutated with container headers whose counts are
/// often huge (array16/32, map16/32, fixarray, fixmap), random bytes and cuts, fed to the
/// scanner's note reader and to `patch`'s. Each must refuse or read what fits in the note; a
/// reservation by the claim would abort the test (343 GB for the worst claim). 5,000 runs, or
/// 100,000 with `RCCLFIX_SLOW_TESTS=1` (about 0.8 ms a run in a debug build); a fixed seed, so a
/// failure repeats. The 10^6-run count is the cargo-fuzz target's (`fuzz/README.md`).
#[test]
fn metadata_count_mutations_are_refused_or_read_within_the_note() {
    use rcclfix::scan::meta;
    let co = std::fs::read(fixture("sid/kernels.co")).unwrap();
    let name = co
        .windows(8)
        .position(|w| w == b"AMDGPU\0\0")
        .expect("an AMDGPU note in sid/kernels.co");
    let len = u32::from_le_bytes(co[name - 8..name - 4].try_into().unwrap()) as usize;
    let seed_note = &co[name + 8..name + 8 + len];
    let mut md = meta::Metadata::default();
    meta::merge_msgpack(seed_note, &mut md).expect("the seed note reads");
    assert_eq!(md.kernels.len(), 3);
    let runs: u64 = if std::env::var_os("RCCLFIX_SLOW_TESTS").is_some() {
        100_000
    } else {
        5_000
    };
    // xorshift64*, fixed seed.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let (mut refused, mut read) = (0u64, 0u64);
    for _ in 0..runs {
        let mut note = seed_note.to_vec();
        for _ in 0..1 + rnd() % 3 {
            let at = (rnd() as usize) % note.len();
            let huge = rnd() % 2 == 0;
            let count = if huge { u32::MAX } else { rnd() as u32 };
            let mut patch = match rnd() % 8 {
                0 => vec![0xdd],
                1 => vec![0xdf],
                2 => vec![0xdc],
                3 => vec![0xde],
                4 => vec![0x90 | (rnd() as u8 & 0x0f)],
                5 => vec![0x80 | (rnd() as u8 & 0x0f)],
                6 => vec![rnd() as u8],
                _ => {
                    note.truncate(at.max(1));
                    continue;
                }
            };
            match patch[0] {
                0xdd | 0xdf => patch.extend_from_slice(&count.to_be_bytes()),
                0xdc | 0xde => patch.extend_from_slice(&(count as u16).to_be_bytes()),
                _ => {}
            }
            let end = (at + patch.len()).min(note.len());
            note[at..end].copy_from_slice(&patch[..end - at]);
        }
        let mut md = meta::Metadata::default();
        match meta::merge_msgpack(&note, &mut md) {
            Ok(()) => {
                read += 1;
                assert!(md.kernels.len() <= note.len());
                let args: usize = md.kernels.iter().map(|k| k.args.len()).sum();
                assert!(
                    args <= note.len(),
                    "{args} arguments from {} bytes",
                    note.len()
                );
            }
            Err(_) => refused += 1,
        }
        let _ = rcclfix::patch::msgpack::parse(&note);
    }
    eprintln!("metadata count mutations: {runs} runs, {read} read, {refused} refused");
    assert_eq!(read + refused, runs);
}
