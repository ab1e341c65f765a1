//! The overlays installed where they claim to install (slow): the `.deb` with real apt and the
//! wheel with real pip, in a fresh debootstrapped root of the distribution of the toolchain the
//! build names (debian-sid for the default recipe), pulling the stock `librccl1` and every
//! dependency from the host's Debian mirror as a user's apt would. The `.deb` goes in with
//! `apt-get install ./file.deb`, must resolve its `Depends:` (the stock package and the owners of
//! the library's `DT_NEEDED` libraries, from the toolchain's dpkg database), must take over the
//! stock path so that `dlopen("librccl.so.1")` loads our bytes, and `apt-get remove` must give the
//! stock file back.
//!
//! The library is the package tests' stand-in (`package::fixtures`) under a manifest naming
//! debian-sid, or, with `RCCLFIX_PACKAGE_FROM=<build folder>` (e.g. the default main job's
//! `out/rccl-2.21.5-debian-sid-gfx1100`), that real build, whose export gate then compares with
//! the real stock library the toolchain's apt downloads.
//!
//! Uses the machine's `RCCLFIX_HOME` (the debian-sid toolchain that `cargo xtask test` builds).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::package::{build_folder, extract_deb_lib, fixtures, ok, sha256, slow_gate, tool, tree};
use crate::package_real_tools::{debian_root_of, in_root, in_root_ok, version_probe};

const TOOLCHAIN: &str = "debian-sid";

/// `rcclfix package` with the machine's own home (the real toolchain), SOURCE_DATE_EPOCH fixed.
fn package_real(from: &Path, out: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let stdout = ok(crate::support::rcclfix()
        .args(["package", "--from"])
        .arg(from)
        .arg("--out-dir")
        .arg(out)
        .args(extra)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env_remove("DEBEMAIL"));
    stdout.lines().map(PathBuf::from).collect()
}

/// The build folder to package (see the module doc), kept alive by the returned guard. The
/// stand-in is relinked against the toolchain's own `libamdhip64.so.6`, so that its `DT_NEEDED`
/// names the HIP runtime as a real build's does.
fn build_under_test(rootfs: &Path) -> (Option<tempfile::TempDir>, PathBuf, bool) {
    if let Some(dir) = std::env::var_os("RCCLFIX_PACKAGE_FROM") {
        return (None, PathBuf::from(dir), true);
    }
    let f = fixtures();
    let objs = f.ours.parent().unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("package-hip-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let lib = tmp.path().join("librccl.so.1.0");
    ok(Command::new("g++")
        .args(["-shared", "-Wl,-z,relro,-z,now", "-Wl,--build-id", "-s"])
        .arg("-Wl,-soname,librccl.so.1")
        .arg(objs.join("rccl.o"))
        .arg(objs.join("dump.o"))
        .arg(objs.parent().unwrap().join("clean-device.o"))
        .arg("-Wl,--no-as-needed")
        .arg(rootfs.join("usr/lib/x86_64-linux-gnu/libamdhip64.so.6"))
        .arg("-o")
        .arg(&lib));
    let (t, dir) = build_folder(&lib);
    let mpath = dir.join("manifest.json");
    let mut m = rcclfix::manifest::Manifest::load(&mpath).unwrap();
    m.toolchain = TOOLCHAIN.into();
    m.save(&mpath).unwrap();
    drop(tmp);
    (Some(t), dir, false)
}

#[test]
fn deb_and_wheel_install_load_and_remove_in_the_toolchains_distribution() {
    if !slow_gate("deb_and_wheel_install_load_and_remove_in_the_toolchains_distribution") {
        return;
    }
    tool("unshare", "util-linux");
    tool("dpkg-deb", "dpkg");
    let rootfs = rcclfix::paths::toolchain_rootfs(TOOLCHAIN);
    assert!(
        rootfs.join("var/lib/dpkg/status").is_file(),
        "toolchain {TOOLCHAIN} is not built ({}); cargo xtask test builds it",
        rootfs.display()
    );
    let (_guard, from, real) = build_under_test(&rootfs);
    let tmp = tempfile::Builder::new()
        .prefix("package-install-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let out = tmp.path().join("pkgs");
    let stock_arg = fixtures().stock.to_str().unwrap().to_owned();
    let extra: Vec<&str> = if real {
        vec![]
    } else {
        // The stand-in exports only a part of RCCL's API: its gate compares with the stand-in stock.
        vec!["--stock", &stock_arg]
    };
    let pkgs = package_real(&from, &out, &extra);
    let deb = pkgs
        .iter()
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .unwrap();
    let whl = pkgs
        .iter()
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap();
    let depends = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(deb)
        .arg("Depends"));
    eprintln!("Depends: {}", depends.trim());
    // Stand-alone in sid: its librccl1 5.4.3 is built for libamdhip64-5, this library links HIP
    // 6.4's libamdhip64.so.6 (and sid's libamdhip64-5 is not installable any more).
    assert!(!depends.contains("librccl1"), "{depends}");
    assert!(depends.contains("libamdhip64-6 (>= "), "{depends}");
    assert!(depends.contains("libc6 (>= "), "{depends}");
    let info = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(deb)
        .arg("Description"));
    assert!(
        info.contains("Stand-alone RCCL library, in place of librccl1"),
        "{info}"
    );

    let (_r, root) = debian_root_of("sid");
    let work = root.join("tmp/rcclfix");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(deb, work.join("overlay.deb")).unwrap();
    std::fs::copy(whl, work.join(whl.file_name().unwrap())).unwrap();
    version_probe(&work);
    let shipped = sha256(&extract_deb_lib(deb, &tmp.path().join("shipped")));
    let lib = root.join("usr/lib/x86_64-linux-gnu/librccl.so.1.0");

    // The host's mirror may serve a frozen snapshot of sid whose Release has expired (the
    // toolchains are built from the same mirror the same way).
    std::fs::write(
        root.join("etc/apt/apt.conf.d/99rcclfix-tests"),
        "Acquire::Check-Valid-Until \"false\";\n",
    )
    .unwrap();
    in_root_ok(&root, &["apt-get", "update", "-q"]);
    // apt resolves Depends from the archive: the stock librccl1 and the HIP runtime come in.
    let o = in_root(
        &root,
        &[
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "/tmp/rcclfix/overlay.deb",
        ],
    );
    assert!(
        o.status.success(),
        "apt-get install of the overlay failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(sha256(&lib), shipped, "the stock path must hold our bytes");
    let div = in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]);
    assert!(div.contains("by rcclfix-rccl-gfx1100"), "{div}");
    // Every NEEDED library resolves: dlopen by SONAME loads ours and runs ncclGetVersion.
    let v_ours = in_root_ok(&root, &["/tmp/rcclfix/probe"]);
    eprintln!("ncclGetVersion with the overlay: {}", v_ours.trim());
    let ldd = in_root_ok(&root, &["ldd", "/usr/lib/x86_64-linux-gnu/librccl.so.1.0"]);
    assert!(!ldd.contains("not found"), "{ldd}");

    // The wheel in a venv of the same root.
    in_root_ok(
        &root,
        &[
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "python3-venv",
        ],
    );
    in_root_ok(&root, &["python3", "-m", "venv", "/tmp/venv"]);
    let whl_in = format!(
        "/tmp/rcclfix/{}",
        whl.file_name().unwrap().to_str().unwrap()
    );
    let site = root.join(
        in_root_ok(
            &root,
            &[
                "/tmp/venv/bin/python",
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['platlib'])",
            ],
        )
        .trim()
        .trim_start_matches('/'),
    );
    let before = tree(&site);
    in_root_ok(
        &root,
        &[
            "/tmp/venv/bin/python",
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            &whl_in,
        ],
    );
    let maps = in_root_ok(
        &root,
        &[
            "/tmp/venv/bin/python",
            "-c",
            "import ctypes; ctypes.CDLL('librccl.so.1'); print([l.split()[-1] for l in open('/proc/self/maps') if 'librccl' in l][0])",
        ],
    );
    assert!(
        maps.contains("rcclfix_rccl/lib/librccl.so.1"),
        "the wheel's preload must win: {maps}"
    );
    in_root_ok(
        &root,
        &[
            "/tmp/venv/bin/python",
            "-m",
            "pip",
            "uninstall",
            "-y",
            "-q",
            "rcclfix_rccl_gfx1100",
        ],
    );
    assert_eq!(
        tree(&site),
        before,
        "pip uninstall must leave the venv as it was"
    );

    // Removal takes the library and the diversion away again.
    in_root_ok(
        &root,
        &["apt-get", "remove", "-y", "-q", "rcclfix-rccl-gfx1100"],
    );
    assert!(!lib.exists(), "the library must be gone");
    assert_eq!(
        in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]),
        ""
    );
    let o = in_root(&root, &["/tmp/rcclfix/probe"]);
    assert!(!o.status.success(), "no librccl.so.1 is left to load");
    if real {
        assert_eq!(v_ours.trim(), "22105", "RCCL 2.21.5");
    }
}

/// debian-rocm7.2's stock library is experimental's librccl1 7.2.4 (RCCL 2.27.7): with no
/// `--stock`, the export gate downloads it in the toolchain and compares, and an overlay that
/// lacks RCCL 2.27's newer API is refused (exit 1), each missing export named, nothing written.
/// The stand-in lacks much more than RCCL 2.21.5 does; the seven a real 2.21.5 lacks are among
/// the names.
#[test]
fn the_export_gate_compares_with_the_toolchains_stock_library_by_itself() {
    if !slow_gate("the_export_gate_compares_with_the_toolchains_stock_library_by_itself") {
        return;
    }
    let rootfs = rcclfix::paths::toolchain_rootfs("debian-rocm7.2");
    assert!(
        rootfs.join("var/lib/dpkg/status").is_file(),
        "toolchain debian-rocm7.2 is not built ({}); cargo xtask test builds it",
        rootfs.display()
    );
    let (t, dir) = build_folder(&fixtures().ours);
    let mpath = dir.join("manifest.json");
    let mut m = rcclfix::manifest::Manifest::load(&mpath).unwrap();
    m.toolchain = "debian-rocm7.2".into();
    m.save(&mpath).unwrap();
    let out = t.path().join("pkgs");
    let o = crate::package::run(
        crate::support::rcclfix()
            .args(["package", "--format", "deb", "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .env("SOURCE_DATE_EPOCH", "1700000000"),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stock librccl1 7.2.4-1~exp3 (/usr/lib/x86_64-linux-gnu/librccl.so.1.0)"),
        "{stderr}"
    );
    // The oracle: nm over the stock library that dpkg-deb extracts from the downloaded .deb.
    tool("nm", "binutils");
    let deb = rcclfix::paths::home().join("stock/debian-rocm7.2/librccl1_7.2.4-1~exp3_amd64.deb");
    let x = t.path().join("x");
    ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&x));
    // Raw names whose demangled base name is nccl*/rccl* (C++ ones such as ncclCommDump included,
    // the device kernels' host-side handles left out), as the gate compares exports; `-p` keeps nm's two
    // listings in one (the file's) order.
    let defined = |lib: &Path| -> std::collections::BTreeSet<String> {
        let raw = ok(Command::new("nm")
            .args(["-D", "--defined-only", "-p"])
            .arg(lib));
        let dem = ok(Command::new("nm")
            .args(["-D", "--defined-only", "-p", "-C"])
            .arg(lib));
        raw.lines()
            .zip(dem.lines())
            .filter_map(|(r, d)| {
                let r = r.split_whitespace().nth(2)?.split('@').next()?.to_owned();
                let d = d.splitn(3, ' ').nth(2)?;
                let base = d.split('(').next()?.rsplit("::").next()?;
                let handle = base.starts_with("ncclKernel") || base.starts_with("ncclDevKernel");
                ((base.starts_with("nccl") || base.starts_with("rccl")) && !handle).then_some(r)
            })
            .collect()
    };
    let stock = defined(&x.join("usr/lib/x86_64-linux-gnu/librccl.so.1.0"));
    let ours = defined(&fixtures().ours);
    let expected: Vec<&String> = stock.difference(&ours).collect();
    let named: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("missing export "))
        .map(|r| r.split([' ', ',', '@']).next().unwrap().to_owned())
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(named.iter().collect::<Vec<_>>(), expected, "{stderr}");
    assert!(stock.contains("ncclCommWindowRegister") && stock.contains("ncclAllReduceWithBias"));
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

/// A cached stock package is checked again on every use, never taken on its word: one of another
/// version, one that is no .deb, and one whose library is a symlink are each refused in one line
/// naming the cached file (exit 2), and nothing is written. The home is a copy of the package
/// tests' (its toolchain's apt lists name librccl1 5.4.3-3+b1), with the cache filled by the test.
#[test]
fn a_cached_stock_package_is_checked_again() {
    tool("dpkg-deb", "dpkg");
    let t = tempfile::Builder::new()
        .prefix("package-stock-cache-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let home = t.path().join("home");
    ok(Command::new("cp")
        .arg("-a")
        .arg(crate::package::toolchain_home())
        .arg(&home));
    let cache = home.join("stock/debian-trixie");
    std::fs::create_dir_all(&cache).unwrap();
    let cached = cache.join("librccl1_5.4.3-3+b1_amd64.deb");
    let stage = t.path().join("stage");
    let libdir = stage.join("usr/lib/x86_64-linux-gnu");
    let make_deb = |version: &str, symlink: bool| {
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir_all(stage.join("DEBIAN")).unwrap();
        std::fs::create_dir_all(&libdir).unwrap();
        if symlink {
            std::os::unix::fs::symlink("/etc/passwd", libdir.join("librccl.so.1.0")).unwrap();
        } else {
            std::fs::copy(&fixtures().stock, libdir.join("librccl.so.1.0")).unwrap();
        }
        std::fs::write(
            stage.join("DEBIAN/control"),
            format!("Package: librccl1\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: test\n test\n"),
        )
        .unwrap();
        ok(Command::new("dpkg-deb")
            .args(["--root-owner-group", "--build"])
            .arg(&stage)
            .arg(&cached));
    };
    let (_b, dir) = build_folder(&fixtures().ours);
    let try_package = |what: &str, fragment: &str| {
        let out = t.path().join("pkgs");
        let o = crate::package::run(
            crate::support::rcclfix()
                .args(["package", "--format", "deb", "--from"])
                .arg(&dir)
                .arg("--out-dir")
                .arg(&out)
                .env("RCCLFIX_HOME", &home)
                .env("SOURCE_DATE_EPOCH", "1700000000"),
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("error: "))
            .collect();
        assert_eq!(o.status.code(), Some(2), "{what}: {stderr}");
        assert!(
            errors.len() == 1
                && errors[0].contains(&cached.display().to_string())
                && errors[0].contains(fragment),
            "{what}: {stderr}"
        );
        assert!(!out.exists(), "{what}: wrote {out:?}");
    };
    make_deb("5.4.3-3", false);
    try_package(
        "another version",
        "is librccl1 5.4.3-3, not librccl1 5.4.3-3+b1",
    );
    make_deb("5.4.3-3+b1", true);
    try_package("a symlink", "is not a regular file in the package");
    std::fs::write(&cached, b"!<arch>\ngarbage").unwrap();
    try_package("no .deb", "not a readable .deb");
    // The right one passes, compared with the stand-in stock it holds.
    make_deb("5.4.3-3+b1", false);
    let o = crate::package::run(
        crate::support::rcclfix()
            .args(["package", "--format", "deb", "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(t.path().join("pkgs"))
            .env("RCCLFIX_HOME", &home)
            .env("SOURCE_DATE_EPOCH", "1700000000"),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("compared with stock librccl1 5.4.3-3+b1"),
        "{stderr}"
    );
}
