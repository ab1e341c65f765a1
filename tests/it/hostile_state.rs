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
//! 3. `toolchains/<name>.log`, which `toolchain build` truncates and writes as root: a FIFO or a
//!    link to a host file is refused naming it, before anything is written through it.

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
