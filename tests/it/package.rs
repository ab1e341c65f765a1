//! `rcclfix package`: the export gate, the .deb and .whl bytes, and (with `RCCLFIX_SLOW_TESTS=1`)
//! real installs: dpkg in a debootstrapped Debian root, pip in a fresh venv, lintian, shellcheck,
//! check-wheel-contents.
//!
//! Fixture libraries are compiled here with gcc from `tests/data/package/*.c*`: a stand-in
//! `librccl.so.1` (C stubs of the NCCL API plus the C++-mangled `ncclCommDump`), an "old" variant
//! lacking `ncclCommShrink` and with another `ncclCommDump` signature, and a consumer linked
//! against `librccl.so.1` that stands in for `libtorch_hip.so`. Each carries the device code of a
//! committed scanner fixture (`package` scans what it ships); no GPU runs it. The stripper's
//! corrupted-header test reads the committed `tests/fixtures/package/librccl-unstripped.so`
//! instead, so its byte positions do not depend on this machine's compiler or paths.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use rcclfix::manifest::{LibraryRecord, Manifest};

/// `ncclGetVersion` of the library rcclfix packages ("ours").
const OURS: i32 = 21304;
/// `ncclGetVersion` of the stand-in stock library.
const STOCK: i32 = 11111;
const DEB_LIB: &str = "usr/lib/x86_64-linux-gnu/librccl.so.1.0";

use crate::support::slow;

/// Gate for tests that need real tools: false (and a line on stderr) unless RCCLFIX_SLOW_TESTS=1.
pub(crate) fn slow_gate(name: &str) -> bool {
    if !slow() {
        eprintln!("{name}: skipped; set RCCLFIX_SLOW_TESTS=1 (cargo xtask test does)");
    }
    slow()
}

/// A tool the test needs; panics with the package to install when missing.
pub(crate) fn tool(name: &str, package: &str) -> PathBuf {
    which::which(name).unwrap_or_else(|_| {
        panic!("{name} not found; install the Debian package {package} (listed in .ci/apt.d/package.txt)")
    })
}

pub(crate) fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    out
}

pub(crate) fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/package")
        .join(name)
}

pub(crate) fn sha256(p: &Path) -> String {
    rcclfix::fsutil::sha256_file(p).unwrap()
}

pub(crate) struct Fixtures {
    pub(crate) _dir: tempfile::TempDir,
    /// The library to package: full API, ncclGetVersion = OURS.
    pub(crate) ours: PathBuf,
    /// The stand-in stock library: full API, ncclGetVersion = STOCK; with librccl.so.1 and
    /// librccl.so symlinks beside it (its folder goes on LD_LIBRARY_PATH).
    pub(crate) stock: PathBuf,
    /// No ncclCommShrink, another ncclCommDump signature.
    pub(crate) old: PathBuf,
    /// SONAME librccl.so.2.
    pub(crate) bad_soname: PathBuf,
    /// Like `ours`, plus NEEDED librocm_smi64.so.1 (a stub).
    pub(crate) with_smi: PathBuf,
    /// Linked against librccl.so.1; `consumer_rccl_version()`.
    pub(crate) consumer: PathBuf,
    /// Like `ours` (every stand-in library carries the `.hip_fatbin` of the scanner's committed
    /// fixture `tests/fixtures/trixie/implicit.so`: one gfx1100 kernel, clean).
    pub(crate) with_device: PathBuf,
    /// Like `ours`, but its `.hip_fatbin` is `tests/fixtures/trixie/kernels-ndebug.so`'s
    /// (gfx1100, 3 kernels; `k_printf` declares hidden_hostcall_buffer through printf).
    pub(crate) declaring: PathBuf,
    /// `with_device` as a real build leaves it: compiled with `-g`, not stripped (DWARF,
    /// `.symtab`), with a GNU build ID.
    pub(crate) unstripped: PathBuf,
}

pub(crate) fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix(&format!("package-fixtures-{}-", std::process::id()))
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        remove_stale_fixture_dirs();
        let d = dir.path();
        tool("gcc", "gcc");
        tool("g++", "g++");
        // Device code, so `package`'s own scan has kernels to read: the `.hip_fatbin` of the
        // scanner's committed fixtures, linked in through `.incbin`. Every stand-in library gets
        // the clean one (trixie/implicit.so: one gfx1100 kernel, no hostcall); `declaring` gets
        // kernels-ndebug.so's (k_printf declares hidden_hostcall_buffer through printf).
        tool("objcopy", "binutils");
        let device_object = |name: &str, fixture: &str| -> PathBuf {
            let fatbin = d.join(format!("{name}.fatbin"));
            ok(Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.hip_fatbin"])
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(fixture))
                .arg(&fatbin));
            assert!(std::fs::metadata(&fatbin).unwrap().len() > 0, "{fixture} has no .hip_fatbin");
            let c = d.join(format!("{name}.c"));
            std::fs::write(
                &c,
                format!(
                    "__asm__(\".section .hip_fatbin,\\\"a\\\",@progbits\\n.p2align 12\\n.incbin \\\"{}\\\"\\n.previous\\n\");\n",
                    fatbin.display()
                ),
            )
            .unwrap();
            let o = d.join(format!("{name}.o"));
            ok(Command::new("gcc").args(["-c", "-fPIC"]).arg(&c).arg("-o").arg(&o));
            o
        };
        let clean_dev = device_object("clean-device", "trixie/implicit.so");
        let declaring_dev = device_object("declaring-device", "trixie/kernels-ndebug.so");
        let lib_with = |name: &str, soname: &str, defs: &[&str], extra: &[&str], strip: bool| -> PathBuf {
            let sub = d.join(name);
            std::fs::create_dir_all(&sub).unwrap();
            let c = sub.join("rccl.o");
            let cc = sub.join("dump.o");
            let g: &[&str] = if strip { &[] } else { &["-g"] };
            ok(Command::new("gcc")
                .args(["-c", "-fPIC", "-O2"])
                .args(g)
                .args(defs)
                .arg(data("rccl.c"))
                .arg("-o")
                .arg(&c));
            ok(Command::new("g++")
                .args(["-c", "-fPIC", "-O2"])
                .args(g)
                .args(defs)
                .arg(data("dump.cc"))
                .arg("-o")
                .arg(&cc));
            let out = sub.join("librccl.so.1.0");
            // One device object per library: `extra` may name another than the clean one.
            let dev = if extra.iter().any(|e| e.ends_with("-device.o")) {
                None
            } else {
                Some(&clean_dev)
            };
            ok(Command::new("g++")
                .args(["-shared", "-Wl,-z,relro,-z,now", "-Wl,--build-id"])
                .args(if strip { &["-s"][..] } else { &[][..] })
                .arg(format!("-Wl,-soname,{soname}"))
                .arg(&c)
                .arg(&cc)
                .args(dev)
                .args(extra)
                .arg("-o")
                .arg(&out));
            std::os::unix::fs::symlink("librccl.so.1.0", sub.join("librccl.so.1")).unwrap();
            std::os::unix::fs::symlink("librccl.so.1", sub.join("librccl.so")).unwrap();
            out
        };
        let lib = |name: &str, soname: &str, defs: &[&str], extra: &[&str]| {
            lib_with(name, soname, defs, extra, true)
        };
        let ours = lib(
            "ours",
            "librccl.so.1",
            &[&format!("-DFIXTURE_VERSION={OURS}")],
            &[],
        );
        let stock = lib(
            "stock",
            "librccl.so.1",
            &[&format!("-DFIXTURE_VERSION={STOCK}")],
            &[],
        );
        let old = lib("old", "librccl.so.1", &["-DFIXTURE_OLD"], &[]);
        let bad_soname = lib("bad-soname", "librccl.so.2", &[], &[]);
        // A stub librocm_smi64.so.1, so a candidate can carry the NEEDED entry pytorch/pytorch#191366 is about.
        let smi_dir = d.join("smi");
        std::fs::create_dir_all(&smi_dir).unwrap();
        let smi_c = smi_dir.join("smi.c");
        std::fs::write(
            &smi_c,
            "int rsmi_init(unsigned long flags) { (void)flags; return 1; }\n",
        )
        .unwrap();
        ok(Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,librocm_smi64.so.1"])
            .arg(&smi_c)
            .arg("-o")
            .arg(smi_dir.join("librocm_smi64.so.1")));
        let with_smi = lib(
            "with-smi",
            "librccl.so.1",
            &[],
            &[
                "-Wl,--no-as-needed",
                &format!("{}", smi_dir.join("librocm_smi64.so.1").display()),
                "-Wl,--as-needed",
            ],
        );
        let consumer = d.join("libconsumer.so");
        ok(Command::new("g++")
            .args(["-shared", "-fPIC", "-Wl,--no-as-needed"])
            .arg(data("consumer.cc"))
            .arg(format!("-L{}", stock.parent().unwrap().display()))
            .arg("-lrccl")
            .arg("-o")
            .arg(&consumer));
        let with_device = lib("with-device", "librccl.so.1", &[], &[]);
        let declaring = lib(
            "declaring",
            "librccl.so.1",
            &[],
            &[declaring_dev.to_str().unwrap()],
        );
        let unstripped = lib_with("unstripped", "librccl.so.1", &[], &[], false);
        Fixtures {
            _dir: dir,
            with_device,
            declaring,
            unstripped,
            ours,
            stock,
            old,
            bad_soname,
            with_smi,
            consumer,
        }
    })
}

/// Statics are never dropped, so the fixture folder outlives the test process: remove the ones
/// whose process (the pid in the name) is gone.
fn remove_stale_fixture_dirs() {
    for e in std::fs::read_dir(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("package-fixtures-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty()
            && pid.chars().all(|c| c.is_ascii_digit())
            && !Path::new("/proc").join(pid).exists()
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A build folder `out/rccl-2.13.4-gfx1100/` as `rcclfix build` writes it, around `lib`: its
/// `scan.json` and the manifest's `gate` are a real scan of `lib` (as the build's scan gate makes
/// them), so they describe the library honestly, whatever it holds.
pub(crate) fn build_folder(lib: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("package-build-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let dir = tmp.path().join("out/rccl-2.13.4-gfx1100");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(lib, dir.join("librccl.so.1.0")).unwrap();
    std::os::unix::fs::symlink("librccl.so.1.0", dir.join("librccl.so.1")).unwrap();
    let m = Manifest {
        schema_version: rcclfix::manifest::MANIFEST_SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        recipe: "rccl-2.13.4-rocm-5.4.3".into(),
        rccl_version: "2.13.4".into(),
        rocm_release: "5.4.3".into(),
        git: "https://example.invalid/rccl.git".into(),
        tag: "rocm-5.4.3".into(),
        branch: None,
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        patches: vec![],
        toolchain: "debian-trixie".into(),
        toolchain_id: "sha256:00".into(),
        toolchain_digest: None,
        toolchain_packages: vec![],
        engine: "bubblewrap".into(),
        targets: vec!["gfx1100".into()],
        ndebug_strategy: "cmake-build-type".into(),
        ndebug_on_device_compile: true,
        cmake_args: vec!["-DCMAKE_BUILD_TYPE=Release".into()],
        library: LibraryRecord {
            file: "librccl.so.1.0".into(),
            soname: rcclfix::package::elf::ElfInfo::read(lib)
                .unwrap()
                .soname
                .unwrap_or_default(),
            sha256: sha256(lib),
            size: std::fs::metadata(lib).unwrap().len(),
        },
        build_seconds: 480.0,
        gate: BTreeMap::new(),
        verify: None,
        patched: None,
        cache: None,
    };
    let targets = m.targets.clone();
    let mut scan = rcclfix::scan::scan_path_with(
        lib,
        &rcclfix::scan::ScanOptions {
            targets: targets.clone(),
        },
        &rcclfix::scan::Settings {
            verify_hash: true,
            ..Default::default()
        },
    )
    .unwrap();
    for f in &mut scan.files {
        f.path = "librccl.so.1.0".into();
    }
    let mut m = m;
    m.gate = scan
        .target_states(&targets)
        .into_iter()
        .map(|(t, s)| {
            let v = serde_json::to_value(&s).unwrap()["state"]
                .as_str()
                .unwrap()
                .to_owned();
            (t, v)
        })
        .collect();
    m.save(&dir.join("manifest.json")).unwrap();
    std::fs::write(
        dir.join("scan.json"),
        serde_json::to_vec_pretty(&scan).unwrap(),
    )
    .unwrap();
    (tmp, dir)
}

pub(crate) fn rcclfix(args: &[&str]) -> Command {
    let mut c = crate::support::rcclfix();
    c.args(args)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env("RCCLFIX_HOME", toolchain_home())
        .env_remove("DEBEMAIL");
    c
}

/// The `librccl1` stanza of Debian trixie's `Packages` list (main, amd64), as apt stores it.
pub(crate) const TRIXIE_LIBRCCL1: &str = "Package: librccl1\nSource: rccl (5.4.3-3)\nVersion: 5.4.3-3+b1\nInstalled-Size: 108813\nMaintainer: Debian ROCm Team <debian-ai@lists.debian.org>\nArchitecture: amd64\nDepends: libamdhip64-5 (>= 5.2.3), libc6 (>= 2.38), libgcc-s1 (>= 3.0), librocm-smi64-1 (>= 5.0.0), libstdc++6 (>= 11)\nDescription: ROCm Communication Collectives Library\nSection: libs\nPriority: optional\nFilename: pool/main/r/rccl/librccl1_5.4.3-3+b1_amd64.deb\n";

/// An `RCCLFIX_HOME` for the package tests whose `toolchains/debian-trixie/rootfs` holds only
/// the apt list `package` reads the stock `librccl1` from ([`TRIXIE_LIBRCCL1`] between two other
/// packages), so the tests do not depend on a toolchain built on this machine.
pub(crate) fn toolchain_home() -> &'static Path {
    static H: OnceLock<tempfile::TempDir> = OnceLock::new();
    H.get_or_init(|| {
        let h = tempfile::Builder::new()
            .prefix("package-home-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let lists = h.path().join("toolchains/debian-trixie/rootfs/var/lib/apt/lists");
        std::fs::create_dir_all(&lists).unwrap();
        std::fs::write(
            lists.join("mirror_debian_dists_trixie_main_binary-amd64_Packages"),
            format!(
                "Package: librccl-dev\nVersion: 5.4.3-3+b1\nArchitecture: amd64\n\n{TRIXIE_LIBRCCL1}\nPackage: librccl1\nVersion: 5.4.3-3+b1\nArchitecture: arm64\n"
            ),
        )
        .unwrap();
        // The toolchain's dpkg database as far as `package` reads it: the owners of the
        // fixtures' NEEDED libraries (host gcc links libc, libm, libstdc++, libgcc_s) and of the
        // stub librocm_smi64, with the shlibs files that give their dependencies.
        let info = h.path().join("toolchains/debian-trixie/rootfs/var/lib/dpkg/info");
        std::fs::create_dir_all(&info).unwrap();
        let mut status = String::new();
        for (pkg, sonames, shlibs) in FAKE_DPKG {
            let list: String = sonames
                .iter()
                .map(|so| format!("/usr/lib/x86_64-linux-gnu/{so}\n"))
                .collect();
            std::fs::write(info.join(format!("{pkg}:amd64.list")), list).unwrap();
            std::fs::write(info.join(format!("{pkg}:amd64.shlibs")), shlibs).unwrap();
            status.push_str(&format!(
                "Package: {pkg}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0-1\n\n"
            ));
        }
        std::fs::write(info.parent().unwrap().join("status"), status).unwrap();
        h
    })
    .path()
}

/// The fake toolchain's dpkg database: package, the SONAMEs it owns, its shlibs file.
pub(crate) const FAKE_DPKG: &[(&str, &[&str], &str)] = &[
    (
        "libc6",
        &["libc.so.6", "libm.so.6"],
        "libc 6 libc6 (>= 2.14)\nlibm 6 libc6 (>= 2.14)\n",
    ),
    (
        "libstdc++6",
        &["libstdc++.so.6"],
        "libstdc++ 6 libstdc++6 (>= 5)\n",
    ),
    (
        "libgcc-s1",
        &["libgcc_s.so.1"],
        "libgcc_s 1 libgcc-s1 (>= 3.0)\n",
    ),
    (
        "librocm-smi64-1",
        &["librocm_smi64.so.1"],
        "librocm_smi64 1 librocm-smi64-1 (>= 5.0.0)\n",
    ),
];

/// `rcclfix package --from DIR --out-dir OUT …`, expecting success; returns the paths printed.
pub(crate) fn package(dir: &Path, out: &Path, extra: &[&str]) -> Vec<PathBuf> {
    // The fixtures' home has no toolchain to download the stock package in: a test names its
    // stock library, or compares with none.
    let no_stock: &[&str] = if extra.contains(&"--stock") {
        &[]
    } else {
        &["--no-stock"]
    };
    let stdout = ok(rcclfix(&["package", "--from"])
        .arg(dir)
        .arg("--out-dir")
        .arg(out)
        .args(no_stock)
        .args(extra));
    stdout.lines().map(PathBuf::from).collect()
}

pub(crate) fn files_in(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return vec![];
    }
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Export gate.

/// Run the gate with `args` on a build folder around `lib`; expect exit 1, nothing written, and
/// every string of `expect` on stderr. Returns stderr.
fn check_gate_fails(lib: &Path, args: &[&str], expect: &[&str]) -> String {
    let (_t, dir) = build_folder(lib);
    let out_dir = dir.parent().unwrap().join("pkgs");
    let before = files_in(&dir);
    let o = run(rcclfix(&["package", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(if args.contains(&"--stock") {
            &[][..]
        } else {
            &["--no-stock"][..]
        })
        .args(args));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected exit 1 (check failed); stderr:\n{stderr}"
    );
    assert!(o.stdout.is_empty(), "stdout must stay empty on failure");
    for e in expect {
        assert!(stderr.contains(e), "stderr lacks {e:?}:\n{stderr}");
    }
    assert_eq!(
        files_in(&out_dir),
        Vec::<String>::new(),
        "a failed gate wrote something"
    );
    assert_eq!(files_in(&dir), before);
    stderr
}

#[test]
fn gate_fails_naming_symbols_a_consumer_imports() {
    let f = fixtures();
    let consumer = f.consumer.to_str().unwrap();
    let stderr = check_gate_fails(
        &f.old,
        &["--consumer", consumer],
        &[
            "missing export ncclCommShrink, needed by consumer",
            // The C++-mangled import, named raw and demangled, and the near miss explained.
            "missing export _Z12ncclCommDumpP8ncclCommRSt13unordered_map",
            "(ncclCommDump(ncclComm*, std::unordered_map<",
            "ours exports ncclCommDump with another signature: ncclCommDump(ncclComm*)",
        ],
    );
    // Exactly those two are missing.
    assert_eq!(stderr.matches("missing export").count(), 2, "{stderr}");
}

#[test]
fn gate_fails_naming_symbols_the_stock_library_exports() {
    let f = fixtures();
    let stderr = check_gate_fails(
        &f.old,
        &["--stock", f.stock.to_str().unwrap()],
        &[
            "missing export ncclCommShrink, needed by stock",
            "missing export pncclCommShrink, needed by stock",
        ],
    );
    assert!(
        !stderr.contains("rcclfix_fixture_internal_helper"),
        "non-API symbols are not gated:\n{stderr}"
    );
}

#[test]
fn gate_builtin_torch_list_matches_by_base_name() {
    let f = fixtures();
    let stderr = check_gate_fails(
        &f.old,
        &["--consumer-symbols", "torch-2.11"],
        &["missing export ncclCommShrink, needed by torch-2.11"],
    );
    // The list holds base names: the old fixture's ncclCommDump (other signature) satisfies it.
    assert_eq!(stderr.matches("missing export").count(), 1, "{stderr}");
}

#[test]
fn gate_fails_on_wrong_soname() {
    let f = fixtures();
    check_gate_fails(
        &f.bad_soname,
        &[],
        &["SONAME is librccl.so.2, expected librccl.so.1"],
    );
}

#[test]
fn gate_reports_needed_differences_and_the_rocm_smi_trap() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.with_smi);
    let out = dir.parent().unwrap().join("pkgs");
    let o = run(rcclfix(&["package", "--format", "whl", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out)
        .arg("--stock")
        .arg(&f.stock));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "DT_NEEDED differs from the stock library: added [librocm_smi64.so.1], removed []"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("NEEDED librocm_smi64.so.1, which the stock library does not need"),
        "{stderr}"
    );
    assert!(stderr.contains("ROCm/TheRock#4476"), "{stderr}");
}

#[test]
fn bad_build_folders_are_one_clear_error() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.ours);
    let out = dir.parent().unwrap().join("pkgs");
    // The library changed after the build (same size, one byte flipped).
    let mut bytes = std::fs::read(dir.join("librccl.so.1.0")).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(dir.join("librccl.so.1.0"), &bytes).unwrap();
    let o = run(rcclfix(&["package", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out)
        .arg("--no-stock"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("librccl.so.1.0: sha256") && stderr.contains("differs from"),
        "{stderr}"
    );
    // A broken manifest.
    std::fs::write(dir.join("manifest.json"), b"{").unwrap();
    let o = run(rcclfix(&["package", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(&out)
        .arg("--no-stock"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("manifest.json: not a valid rcclfix manifest"),
        "{stderr}"
    );
    // Not a build folder at all.
    let o = run(rcclfix(&["package", "--from"])
        .arg(dir.join("nope"))
        .arg("--out-dir")
        .arg(&out)
        .arg("--no-stock"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope: does not exist"));
    assert_eq!(files_in(&out), Vec::<String>::new());
}

#[test]
fn manifest_schema_version_dirs_and_unknown_fields() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.ours);
    let out = dir.parent().unwrap().join("pkgs");
    let mpath = dir.join("manifest.json");
    let good = std::fs::read_to_string(&mpath).unwrap();
    let attempt = || {
        let o = run(rcclfix(&["package", "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .arg("--no-stock")
            .args(["--format", "deb"]));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // A newer schema version: one line naming the file, the version found and the one supported.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["schema_version"] = 99.into();
    std::fs::write(&mpath, v.to_string()).unwrap();
    let (code, stderr) = attempt();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains(
                "manifest.json: manifest schema version 99 is not supported (this rcclfix reads 1)"
            ),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing written: {stderr}");
    // A directory named manifest.json.
    std::fs::remove_file(&mpath).unwrap();
    std::fs::create_dir(&mpath).unwrap();
    let (code, stderr) = attempt();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("manifest.json: is a folder, not a file"),
        "{stderr}"
    );
    std::fs::remove_dir(&mpath).unwrap();
    // Unknown fields: accepted with a warning naming them.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["from_the_future"] = true.into();
    v["library"]["extra"] = 1.into();
    std::fs::write(&mpath, v.to_string()).unwrap();
    let (code, stderr) = attempt();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("does not know: from_the_future, library.extra"),
        "{stderr}"
    );
}

#[test]
fn interrupted_package_leaves_no_temp_file_and_no_new_folder() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.ours);
    let top = dir.parent().unwrap().join("pkgs");
    let out = top.join("new");
    let st = crate::fsutil::interrupt_when_temp_appears(
        rcclfix(&["package", "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .arg("--no-stock")
            .args(["--format", "deb"]),
        &out,
        "INT",
    );
    assert_eq!(st.code(), Some(130));
    assert!(
        !top.exists(),
        "the output folders this run created are removed"
    );
}

/// A build folder whose manifest and scan.json call a declaring library clean (the issue 20
/// case: `"gate": {"gfx1100": "clean"}`, an empty `scan.json`): `package` scans the library
/// itself, refuses it with exit 1 naming the kernel and the manifest that lied, and writes nothing.
#[test]
fn declaring_library_is_refused_whatever_its_manifest_says() {
    let f = fixtures();
    let (_t, dir) = build_folder(&f.declaring);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    assert_eq!(
        m.gate["gfx1100"], "declares",
        "the honest gate of the declaring fixture"
    );
    m.gate.insert("gfx1100".into(), "clean".into());
    m.save(&dir.join("manifest.json")).unwrap();
    let empty = rcclfix::scan::model::ScanReport {
        schema_version: rcclfix::scan::model::SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        files: vec![],
    };
    std::fs::write(dir.join("scan.json"), serde_json::to_vec(&empty).unwrap()).unwrap();
    let out = dir.parent().unwrap().join("pkgs");
    let before = files_in(&dir);
    for format in ["deb", "whl", "deb,whl"] {
        let o = run(rcclfix(&["package", "--format", format, "--from"])
            .arg(&dir)
            .arg("--out-dir")
            .arg(&out)
            .arg("--no-stock"));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{format}: {stderr}");
        assert!(o.stdout.is_empty());
        assert!(
            stderr.contains("error: scan gate failed for")
                && stderr.contains("gfx1100: 1 kernel(s) declare hidden_hostcall_buffer")
                && stderr.contains("k_printf")
                && stderr.contains(
                    "manifest.json's gate says \"clean\": it does not describe this library"
                ),
            "{format}: {stderr}"
        );
        assert_eq!(files_in(&out), Vec::<String>::new(), "{format}");
        assert_eq!(files_in(&dir), before);
    }
}

/// Only `clean` passes, and a manifest or scan.json that disagrees with `package`'s own scan of
/// a clean library is refused with one line naming that file (exit 2).
#[test]
fn a_build_folder_that_disagrees_with_the_scan_is_refused() {
    let f = fixtures();
    let attempt = |dir: &Path| {
        let o = run(rcclfix(&["package", "--format", "deb", "--from"])
            .arg(dir)
            .arg("--out-dir")
            .arg(dir.parent().unwrap().join("pkgs"))
            .arg("--no-stock"));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // The manifest calls a clean library declaring.
    let (_t, dir) = build_folder(&f.ours);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    m.gate.insert("gfx1100".into(), "declares".into());
    m.save(&dir.join("manifest.json")).unwrap();
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| !l.contains("Scanning")).count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "manifest.json: the gate says \"declares\" for gfx1100, but rcclfix's scan of"
        ) && stderr.contains("finds 1 kernels, none declaring"),
        "{stderr}"
    );
    // scan.json is empty (or counts other kernels) for a clean library.
    let (_t, dir) = build_folder(&f.ours);
    let mut scan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("scan.json")).unwrap()).unwrap();
    scan["files"] = serde_json::json!([]);
    std::fs::write(dir.join("scan.json"), scan.to_string()).unwrap();
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("scan.json: for gfx1100 it says no-code: no device code for gfx1100, but")
            && stderr.contains("scan.json does not describe this library"),
        "{stderr}"
    );
    // The manifest names a target the library has no code for: not clean, refused (exit 1).
    let (_t, dir) = build_folder(&f.ours);
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    v["targets"] = serde_json::json!(["gfx1100", "gfx1101"]);
    v["gate"]["gfx1101"] = "clean".into();
    std::fs::write(dir.join("manifest.json"), v.to_string()).unwrap();
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("gfx1101: no-code: no device code for gfx1101"),
        "{stderr}"
    );
    // A library with no device code at all is never clean.
    let plain = f
        .stock
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("no-device.so");
    if !plain.exists() {
        ok(Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,librccl.so.1"])
            .arg(data("rccl.c"))
            .arg("-o")
            .arg(&plain));
    }
    let (_t, dir) = build_folder(&plain);
    let (code, stderr) = attempt(&dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no device code for gfx1100"), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// .deb bytes (checked with dpkg-deb as the outside oracle).

fn deb_once(extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let out = t.path().join("pkgs");
    let mut args = vec![
        "--format",
        "deb",
        "--stock",
        f.stock.to_str().unwrap(),
        "--consumer",
        f.consumer.to_str().unwrap(),
    ];
    if !extra.contains(&"--maintainer") {
        args.extend(["--maintainer", "rcclfix tests <rcclfix-tests@example.org>"]);
    }
    args.extend_from_slice(extra);
    let paths = package(&dir, &out, &args);
    assert_eq!(paths.len(), 1);
    let deb = paths[0].clone();
    (t, deb)
}

#[test]
fn deb_is_reproducible_and_well_formed() {
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (_t1, deb1) = deb_once(&[]);
    let (_t2, deb2) = deb_once(&[]);
    assert_eq!(
        deb1.file_name().unwrap(),
        "rcclfix-rccl-gfx1100_2.13.4+rcclfix1_amd64.deb"
    );
    let b1 = std::fs::read(&deb1).unwrap();
    assert_eq!(b1, std::fs::read(&deb2).unwrap(), "two builds differ");

    // ar members: debian-binary first, uid/gid 0, mode 100644, mtime = SOURCE_DATE_EPOCH.
    let mut ar = ar::Archive::new(&b1[..]);
    let mut names = vec![];
    while let Some(e) = ar.next_entry() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        assert_eq!(
            (h.uid(), h.gid(), h.mode(), h.mtime()),
            (0, 0, 0o100644, 1_700_000_000)
        );
        let name = String::from_utf8(h.identifier().to_vec()).unwrap();
        if name == "debian-binary" {
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            assert_eq!(s, "2.0\n");
        }
        names.push(name);
    }
    assert_eq!(names, ["debian-binary", "control.tar.xz", "data.tar.xz"]);

    let info = ok(Command::new("dpkg-deb").arg("--info").arg(&deb1));
    // Depends: the owners of the library's NEEDED libraries in the toolchain's dpkg database, in
    // NEEDED order and once each, with their shlibs dependencies; then the stock package.
    let mut owners: Vec<String> = Vec::new();
    for so in rcclfix::package::elf::ElfInfo::read(&fixtures().ours)
        .unwrap()
        .needed
    {
        let (pkg, _, shlibs) = FAKE_DPKG
            .iter()
            .find(|(_, sonames, _)| sonames.contains(&so.as_str()))
            .unwrap_or_else(|| panic!("the fake dpkg database has no owner of {so}"));
        let dep = shlibs
            .lines()
            .next()
            .unwrap()
            .splitn(3, ' ')
            .nth(2)
            .unwrap();
        if !owners.iter().any(|o| o.starts_with(&format!("{pkg} "))) {
            owners.push(dep.to_owned());
        }
    }
    assert!(owners.iter().any(|o| o.starts_with("libc6 ")), "{owners:?}");
    let depends = format!(
        "Depends: {}, librccl1 (>= 5.4.3~), librccl1 (<< 5.4.4~)",
        owners.join(", ")
    );
    for want in [
        "Package: rcclfix-rccl-gfx1100",
        "Version: 2.13.4+rcclfix1",
        "Architecture: amd64",
        "Maintainer: rcclfix tests <rcclfix-tests@example.org>",
        &depends,
        "Conflicts: rcclfix-rccl-overlay",
        "Description: RCCL 2.13.4 without hidden_hostcall_buffer (gfx1100)",
    ] {
        assert!(
            info.contains(want),
            "dpkg-deb --info lacks {want:?}:\n{info}"
        );
    }
    assert!(
        !info.contains("patched"),
        "not patched, so the description must not say so"
    );

    // Every entry root/root with the expected mode, sorted, directories first.
    let contents = ok(Command::new("dpkg-deb").arg("--contents").arg(&deb1));
    let entries: Vec<(String, String, String)> = contents
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0].to_owned(), w[1].to_owned(), w[5].to_owned())
        })
        .collect();
    for (mode, owner, path) in &entries {
        assert_eq!(owner, "root/root", "{path}");
        let want = if path.ends_with('/') {
            "drwxr-xr-x"
        } else {
            "-rw-r--r--"
        };
        assert_eq!(mode, want, "{path}");
    }
    let paths: Vec<&str> = entries.iter().map(|e| e.2.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    for want in [
        "./usr/lib/x86_64-linux-gnu/librccl.so.1.0",
        "./usr/share/doc/rcclfix-rccl-gfx1100/manifest.json",
        "./usr/share/doc/rcclfix-rccl-gfx1100/scan.json",
        "./usr/share/doc/rcclfix-rccl-gfx1100/copyright",
        "./usr/share/doc/rcclfix-rccl-gfx1100/changelog.gz",
    ] {
        assert!(paths.contains(&want), "{want} missing from\n{contents}");
    }

    // md5sums lists every file with its real digest; scripts are 0755.
    let x = tempfile::tempdir().unwrap();
    ok(Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb1)
        .arg(x.path().join("data")));
    ok(Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb1)
        .arg(x.path().join("DEBIAN")));
    let md5sums = std::fs::read_to_string(x.path().join("DEBIAN/md5sums")).unwrap();
    let files: Vec<&&str> = paths.iter().filter(|p| !p.ends_with('/')).collect();
    assert_eq!(md5sums.lines().count(), files.len());
    for line in md5sums.lines() {
        let (sum, path) = line.split_once("  ").unwrap();
        let bytes = std::fs::read(x.path().join("data").join(path)).unwrap();
        use md5::Digest;
        assert_eq!(hex::encode(md5::Md5::digest(&bytes)), sum, "{path}");
    }
    // The shipped library is the build's with .comment gone (dh_strip's rule; the fixture is
    // already stripped otherwise): every allocated section is the build's, byte for byte.
    assert_allocated_sections_identical(
        &std::fs::read(&f.ours).unwrap(),
        &std::fs::read(x.path().join("data").join(DEB_LIB)).unwrap(),
    );
    use std::os::unix::fs::PermissionsExt;
    for s in ["preinst", "postrm"] {
        let mode = std::fs::metadata(x.path().join("DEBIAN").join(s))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755, "{s}");
    }
    let manifest = std::fs::read(
        x.path()
            .join("data/usr/share/doc/rcclfix-rccl-gfx1100/manifest.json"),
    )
    .unwrap();
    assert_eq!(
        serde_json::from_slice::<Manifest>(&manifest)
            .unwrap()
            .library
            .sha256,
        sha256(&f.ours)
    );
}

#[test]
fn deb_flavor_and_overrides_follow_the_options() {
    tool("dpkg-deb", "dpkg");
    let (_t, deb) = deb_once(&[
        "--flavor",
        "rocm",
        "--revision",
        "3",
        "--maintainer",
        "Jane <jane@example.org>",
    ]);
    assert_eq!(
        deb.file_name().unwrap(),
        "rcclfix-rccl-gfx1100_2.13.4+rcclfix3_amd64.deb"
    );
    let info = ok(Command::new("dpkg-deb").arg("--info").arg(&deb));
    assert!(
        info.contains("Depends: libc6 (>= 2.14), rccl (>= 2.13.4.50403), rccl (<< 2.13.4.50404)"),
        "{info}"
    );
    assert!(
        info.contains("Maintainer: Jane <jane@example.org>"),
        "{info}"
    );
    let contents = ok(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    assert!(
        contents.contains("./opt/rocm-5.4.3/lib/librccl.so.1.0.50403"),
        "{contents}"
    );
}

/// `--depends` names what the `.deb` depends on, never the stock package (issue 40, item 12): a
/// value that names another package first keeps the description's stock package the flavor's
/// (`librccl1`, whose library it diverts) and says that Depends: does not name it.
#[test]
fn depends_never_renames_the_stock_package() {
    tool("dpkg-deb", "dpkg");
    let (_t, deb) = deb_once(&["--depends", "libfoo (>= 1), libc6"]);
    let info = ok(Command::new("dpkg-deb").arg("--info").arg(&deb));
    let words = info.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(info.contains("Depends: libfoo (>= 1), libc6"), "{info}");
    assert!(!words.contains("stock libfoo"), "{info}");
    assert!(
        words.contains("Overlay for the stock librccl1 package")
            && words.contains("Its Depends: was given with --depends and does not name librccl1."),
        "{info}"
    );
}

// ---------------------------------------------------------------------------------------------
// .whl bytes.

#[test]
fn whl_is_reproducible_and_its_record_is_right() {
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let a = package(&dir, &t.path().join("a"), &["--format", "whl"]);
    let b = package(&dir, &t.path().join("b"), &["--format", "whl"]);
    let whl = &a[0];
    assert_eq!(
        whl.file_name().unwrap(),
        "rcclfix_rccl_gfx1100-2.13.4+rcclfix1-py3-none-manylinux_2_28_x86_64.whl"
    );
    assert_eq!(
        std::fs::read(whl).unwrap(),
        std::fs::read(&b[0]).unwrap(),
        "two builds differ"
    );

    let mut z = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
    let names: Vec<String> = (0..z.len())
        .map(|i| z.by_index(i).unwrap().name().to_owned())
        .collect();
    let di = "rcclfix_rccl_gfx1100-2.13.4+rcclfix1.dist-info";
    assert_eq!(
        names.last().unwrap(),
        &format!("{di}/RECORD"),
        "RECORD comes last"
    );
    for want in [
        "rcclfix_rccl.pth",
        "rcclfix_rccl/__init__.py",
        "rcclfix_rccl/lib/librccl.so.1",
        "rcclfix_rccl/manifest.json",
        "rcclfix_rccl/scan.json",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    let read = |z: &mut zip::ZipArchive<std::fs::File>, n: &str| {
        let mut v = vec![];
        z.by_name(n).unwrap().read_to_end(&mut v).unwrap();
        v
    };
    let wheel = String::from_utf8(read(&mut z, &format!("{di}/WHEEL"))).unwrap();
    assert!(
        wheel.contains("Root-Is-Purelib: false\nTag: py3-none-manylinux_2_28_x86_64\n"),
        "{wheel}"
    );
    assert_eq!(
        String::from_utf8(read(&mut z, "rcclfix_rccl.pth")).unwrap(),
        "import rcclfix_rccl\n"
    );
    assert_eq!(
        read(&mut z, "rcclfix_rccl/lib/librccl.so.1"),
        std::fs::read(&f.ours).unwrap()
    );

    // RECORD: every other entry once, with urlsafe-b64-nopad sha256 and size; RECORD,, last.
    let record = String::from_utf8(read(&mut z, &format!("{di}/RECORD"))).unwrap();
    let lines: Vec<&str> = record.lines().collect();
    assert_eq!(lines.last().unwrap(), &format!("{di}/RECORD,,"));
    assert_eq!(lines.len(), names.len());
    for line in &lines[..lines.len() - 1] {
        let parts: Vec<&str> = line.split(',').collect();
        let bytes = read(&mut z, parts[0]);
        use base64::Engine;
        use sha2::Digest;
        let h =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&bytes));
        assert_eq!(parts[1], format!("sha256={h}"), "{line}");
        assert_eq!(parts[2], bytes.len().to_string(), "{line}");
    }
}

// ---------------------------------------------------------------------------------------------
// Real dpkg in a debootstrapped Debian root.

/// A minbase bookworm root, made once per target folder and copied per test (the copy is what
/// dpkg changes). See [`debian_root_of`].
fn debian_root() -> (tempfile::TempDir, PathBuf) {
    debian_root_of("bookworm")
}

/// A minbase root of Debian `suite`, made once per target folder and copied per test (the copy
/// is what dpkg and apt change). The mirror is the host's (sources.list(5)). debootstrap cannot
/// build a root whose path has a space in it (its `chroot "$TARGET" /bin/true` check fails), so a
/// target folder with whitespace in its path keeps the root in a folder of the system temp
/// directory named after a hash of that path instead.
pub(crate) fn debian_root_of(suite: &str) -> (tempfile::TempDir, PathBuf) {
    let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let cache = space_free(target_tmp).join("package-debroot");
    let root = cache.join(suite);
    let done = cache.join(format!("{suite}.done"));
    if !done.exists() {
        tool("debootstrap", "debootstrap");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&cache).unwrap();
        let mirror = host_mirror();
        ok(Command::new("debootstrap")
            .args(["--variant=minbase", suite])
            .arg(&root)
            .arg(&mirror));
        std::fs::write(&done, "").unwrap();
    }
    let tmp = tempfile::Builder::new()
        .prefix("package-root-")
        .tempdir_in(space_free(target_tmp))
        .unwrap();
    let copy = tmp.path().join("root");
    ok(Command::new("cp").arg("-a").arg(&root).arg(&copy));
    (tmp, copy)
}

/// `dir` itself when its path has no whitespace, else `$TMPDIR/rcclfix-tests-<hash of dir>`
/// (created), so tools that split paths on spaces (debootstrap) still get one folder per target
/// folder.
fn space_free(dir: &Path) -> PathBuf {
    if !dir.to_string_lossy().chars().any(char::is_whitespace) {
        return dir.to_path_buf();
    }
    use sha2::Digest;
    let name = format!(
        "rcclfix-tests-{:x}",
        sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes())
    );
    let alt = std::env::temp_dir().join(&name[..30]);
    std::fs::create_dir_all(&alt).unwrap();
    alt
}

/// The first `URIs:` of the host's deb822 sources, or the first `deb` URL of sources.list.
fn host_mirror() -> String {
    if let Ok(s) = std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources") {
        if let Some(l) = s.lines().find(|l| l.starts_with("URIs:")) {
            return l["URIs:".len()..]
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned();
        }
    }
    let s = std::fs::read_to_string("/etc/apt/sources.list")
        .expect("no apt sources on this host to take the mirror from");
    let l = s
        .lines()
        .find(|l| l.starts_with("deb "))
        .expect("no deb line in /etc/apt/sources.list");
    l.split_whitespace()
        .find(|w| w.contains("://"))
        .unwrap()
        .to_owned()
}

/// Run argv inside `root` (own mount and pid namespace, fresh /proc).
pub(crate) fn in_root(root: &Path, argv: &[&str]) -> Output {
    run(Command::new("unshare")
        .args(["--mount", "--pid", "--fork", "--mount-proc"])
        .arg(format!("--root={}", root.display()))
        .args(argv)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

pub(crate) fn in_root_ok(root: &Path, argv: &[&str]) -> String {
    let o = in_root(root, argv);
    assert!(
        o.status.success(),
        "{argv:?} in the Debian root failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The stand-in stock package: Debian's librccl1 layout (file + SONAME symlink), built with the
/// real dpkg-deb so it is an independent oracle.
fn stock_deb(dir: &Path) -> PathBuf {
    let f = fixtures();
    let st = dir.join("stock-staging");
    let libdir = st.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::create_dir_all(st.join("DEBIAN")).unwrap();
    std::fs::copy(&f.stock, libdir.join("librccl.so.1.0")).unwrap();
    std::os::unix::fs::symlink("librccl.so.1.0", libdir.join("librccl.so.1")).unwrap();
    std::fs::write(
        st.join("DEBIAN/control"),
        "Package: librccl1\nVersion: 5.4.3-3+b1\nArchitecture: amd64\nMaintainer: Test <test@example.org>\n\
         Section: libs\nPriority: optional\nDescription: stand-in for the stock RCCL library\n fixture built by the rcclfix tests\n",
    )
    .unwrap();
    let deb = dir.join("librccl1_5.4.3-3+b1_amd64.deb");
    ok(Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&st)
        .arg(&deb));
    deb
}

/// A program that dlopens librccl.so.1 by SONAME and prints ncclGetVersion (run inside the root).
pub(crate) fn version_probe(dir: &Path) -> PathBuf {
    let c = dir.join("probe.c");
    std::fs::write(
        &c,
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(void){void*h=dlopen(\"librccl.so.1\",RTLD_NOW);\
         if(!h){fprintf(stderr,\"%s\\n\",dlerror());return 1;}int(*f)(int*)=(int(*)(int*))dlsym(h,\"ncclGetVersion\");\
         int v=0;f(&v);printf(\"%d\\n\",v);return 0;}\n",
    )
    .unwrap();
    let exe = dir.join("probe");
    ok(Command::new("gcc").arg(&c).arg("-o").arg(&exe).arg("-ldl"));
    exe
}

#[test]
fn deb_takes_over_the_stock_library_with_real_dpkg() {
    if !slow_gate("deb_takes_over_the_stock_library_with_real_dpkg") {
        return;
    }
    tool("unshare", "util-linux");
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (_t, overlay) = deb_once(&[]);
    let (_r, root) = debian_root();
    let work = root.join("tmp/rcclfix");
    std::fs::create_dir_all(&work).unwrap();
    stock_deb(&work);
    std::fs::copy(&overlay, work.join("overlay.deb")).unwrap();
    version_probe(&work);
    // What the overlay ships at the stock path (the build's library, stripped).
    let shipped = sha256(&extract_deb_lib(&overlay, &work.join("shipped")));
    let lib = root.join(DEB_LIB);
    let aside = root.join("usr/lib/x86_64-linux-gnu/rcclfix-stock/librccl.so.1.0");

    // Without the stock package the overlay cannot be configured (Depends), and removing the
    // half-installed overlay leaves no diversion behind (postrm remove).
    let o = in_root(&root, &["dpkg", "-i", "/tmp/rcclfix/overlay.deb"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("depends on librccl1"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    in_root_ok(&root, &["dpkg", "-r", "rcclfix-rccl-gfx1100"]);
    assert_eq!(
        in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]),
        ""
    );
    assert!(!lib.exists());

    in_root_ok(
        &root,
        &["dpkg", "-i", "/tmp/rcclfix/librccl1_5.4.3-3+b1_amd64.deb"],
    );
    assert_eq!(sha256(&lib), sha256(&f.stock));
    assert_eq!(
        in_root_ok(&root, &["/tmp/rcclfix/probe"]).trim(),
        STOCK.to_string()
    );

    in_root_ok(&root, &["dpkg", "-i", "/tmp/rcclfix/overlay.deb"]);
    assert_eq!(sha256(&lib), shipped, "the stock path must hold our bytes");
    assert_eq!(
        sha256(&aside),
        sha256(&f.stock),
        "the stock file is kept aside"
    );
    let div = in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]);
    assert!(div.contains("diversion of /usr/lib/x86_64-linux-gnu/librccl.so.1.0 to /usr/lib/x86_64-linux-gnu/rcclfix-stock/librccl.so.1.0 by rcclfix-rccl-gfx1100"), "{div}");
    assert_eq!(
        in_root_ok(&root, &["/tmp/rcclfix/probe"]).trim(),
        OURS.to_string(),
        "dlopen(librccl.so.1) must load ours"
    );
    let status = in_root_ok(
        &root,
        &["dpkg-query", "-W", "-f=${Status}", "rcclfix-rccl-gfx1100"],
    );
    assert_eq!(status, "install ok installed");

    // Reinstalling (preinst upgrade, same diversion) is idempotent.
    in_root_ok(&root, &["dpkg", "-i", "/tmp/rcclfix/overlay.deb"]);
    assert_eq!(sha256(&lib), shipped);
    assert_eq!(sha256(&aside), sha256(&f.stock));

    // Removal gives the stock file back.
    in_root_ok(&root, &["dpkg", "--purge", "rcclfix-rccl-gfx1100"]);
    assert_eq!(
        sha256(&lib),
        sha256(&f.stock),
        "the stock file's sha256 must be back"
    );
    assert!(
        !aside.parent().unwrap().exists(),
        "the rcclfix-stock folder must be gone"
    );
    assert_eq!(
        in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]),
        ""
    );
    assert_eq!(
        in_root_ok(&root, &["/tmp/rcclfix/probe"]).trim(),
        STOCK.to_string()
    );
    // dpkg still knows the stock file as librccl1's.
    let owner = in_root_ok(
        &root,
        &["dpkg", "-S", "/usr/lib/x86_64-linux-gnu/librccl.so.1.0"],
    );
    assert!(owner.starts_with("librccl1:"), "{owner}");
}

#[test]
fn deb_passes_lintian_and_shellcheck() {
    if !slow_gate("deb_passes_lintian_and_shellcheck") {
        return;
    }
    let lintian = tool("lintian", "lintian");
    let shellcheck = tool("shellcheck", "shellcheck");
    let (t, deb) = deb_once(&[]);
    // Errors fail; warnings are printed for the record. Overrides ship in the package, each with
    // its reason (src/package/deb.rs, lintian_overrides).
    let o = run(Command::new(&lintian)
        .args(["--fail-on", "error", "--display-info"])
        .arg(&deb));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("lintian:\n{text}");
    assert!(o.status.success(), "lintian reports errors:\n{text}");
    assert!(!text.lines().any(|l| l.starts_with("E: ")), "{text}");

    let ctl = t.path().join("DEBIAN");
    ok(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&ctl));
    ok(Command::new(&shellcheck)
        .arg(ctl.join("preinst"))
        .arg(ctl.join("postrm")));
}

// ---------------------------------------------------------------------------------------------
// Real pip in a fresh venv.

pub(crate) fn tree(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| {
            e.unwrap()
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    v.sort();
    v
}

const PROBE_PY: &str = r#"
import ctypes, json, os, sys
c = ctypes.CDLL(sys.argv[1])
maps = sorted({l.split(None, 5)[5].rstrip("\n") for l in open("/proc/self/maps") if "librccl" in l})
print(json.dumps({"version": c.consumer_rccl_version(), "maps": maps, "vllm": os.environ.get("VLLM_NCCL_SO_PATH")}))
"#;

#[test]
fn whl_preloads_our_library_with_real_pip() {
    if !slow_gate("whl_preloads_our_library_with_real_pip") {
        return;
    }
    let python = tool("python3", "python3-venv");
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let whl = package(&dir, &t.path().join("pkgs"), &["--format", "whl"]).remove(0);
    let venv = t.path().join("venv");
    ok(Command::new(&python).args(["-m", "venv"]).arg(&venv));
    let py = venv.join("bin/python");
    let site = PathBuf::from(
        ok(Command::new(&py).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ]))
        .trim(),
    );
    let before = tree(&site);
    ok(Command::new(&py)
        .args(["-m", "pip", "install", "--no-index", "--no-deps", "-q"])
        .arg(&whl));
    let ours_path = site.join("rcclfix_rccl/lib/librccl.so.1");
    assert_eq!(sha256(&ours_path), sha256(&f.ours));

    let stock_dir = f.stock.parent().unwrap();
    let probe = |env: &[(&str, &str)]| -> serde_json::Value {
        let mut c = Command::new(&py);
        c.arg("-c")
            .arg(PROBE_PY)
            .arg(&f.consumer)
            .env("LD_LIBRARY_PATH", stock_dir)
            .env_remove("VLLM_NCCL_SO_PATH");
        for (k, v) in env {
            c.env(k, v);
        }
        serde_json::from_str(ok(&mut c).trim()).unwrap()
    };
    // With the hook: the consumer's librccl.so.1 is ours, although the stock one is on
    // LD_LIBRARY_PATH; only our copy is mapped; vLLM is pointed at it.
    let v = probe(&[]);
    assert_eq!(v["version"], OURS, "{v}");
    assert_eq!(
        v["maps"],
        serde_json::json!([ours_path.display().to_string()]),
        "{v}"
    );
    assert_eq!(v["vllm"], ours_path.display().to_string(), "{v}");
    // A user's own VLLM_NCCL_SO_PATH is kept.
    let v = probe(&[("VLLM_NCCL_SO_PATH", "/mine/librccl.so.1")]);
    assert_eq!(v["vllm"], "/mine/librccl.so.1", "{v}");
    assert_eq!(v["version"], OURS, "{v}");
    // RCCLFIX_DISABLE=1 turns the hook off: the stock library wins again (this also shows the
    // probe can tell the two apart).
    let v = probe(&[("RCCLFIX_DISABLE", "1")]);
    assert_eq!(v["version"], STOCK, "{v}");
    assert_eq!(
        v["maps"],
        serde_json::json!([f.stock.display().to_string()]),
        "{v}"
    );
    assert_eq!(v["vllm"], serde_json::Value::Null, "{v}");

    // A wheel checker from PyPI.
    ok(Command::new(&py).args(["-m", "pip", "install", "-q", "check-wheel-contents"]));
    let before_checker = tree(&site);
    let cwc = ok(Command::new(venv.join("bin/check-wheel-contents")).arg(&whl));
    eprintln!("check-wheel-contents: {cwc}");
    assert!(cwc.contains("OK"), "{cwc}");

    // Uninstall leaves nothing behind (the checker's own files aside).
    ok(Command::new(&py).args(["-m", "pip", "uninstall", "-y", "-q", "rcclfix_rccl_gfx1100"]));
    let after = tree(&site);
    let leftover: Vec<&String> = after.iter().filter(|p| p.contains("rcclfix")).collect();
    assert!(leftover.is_empty(), "pip uninstall left {leftover:?}");
    let expected: Vec<String> = before_checker
        .into_iter()
        .filter(|p| !p.contains("rcclfix"))
        .collect();
    assert_eq!(after, expected);
    assert!(before.iter().all(|p| after.contains(p)));
}

#[test]
fn patched_builds_say_so_and_build_package_entry_point_works() {
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    m.patched = Some(serde_json::json!({"kernels": 3}));
    // An image toolchain (AMD's rccl flavour): this in-process entry point reads this machine's
    // RCCLFIX_HOME, and the Debian flavour would read a toolchain rootfs from it.
    m.toolchain = "rocm/dev-ubuntu-22.04:5.4.3".into();
    m.save(&dir.join("manifest.json")).unwrap();
    // The entry point `build --package deb,whl` calls.
    let out = t.path().join("pkgs");
    let formats = ["deb".to_owned(), "whl".to_owned()];
    let paths = rcclfix::package::package_build_dir(&dir, &formats, &out).unwrap();
    assert_eq!(paths.len(), 2);
    let info = ok(Command::new("dpkg-deb").arg("--info").arg(&paths[0]));
    let words = info.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("Overlay for the stock rccl package: RCCL 2.13.4 (ROCm 5.4.3) rebuilt and patched by rcclfix"), "{info}");
    let mut z = zip::ZipArchive::new(std::fs::File::open(&paths[1]).unwrap()).unwrap();
    let mut meta = String::new();
    z.by_name("rcclfix_rccl_gfx1100-2.13.4+rcclfix1.dist-info/METADATA")
        .unwrap()
        .read_to_string(&mut meta)
        .unwrap();
    assert!(meta.contains("(patched after the link)"), "{meta}");
    // Unknown formats are refused before anything is written.
    let err = rcclfix::package::package_build_dir(&dir, &["rpm".to_owned()], &t.path().join("x"))
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("unknown package format \"rpm\""),
        "{err:#}"
    );
    assert!(!t.path().join("x").exists());
}

// ---------------------------------------------------------------------------------------------
// The scanner reads the packages.

/// `rcclfix scan` on the .deb and the .whl finds the library inside, with the same device images,
/// kernels and verdicts as a scan of the library itself.
#[test]
fn scan_finds_the_library_inside_the_packages() {
    let f = fixtures();
    let (t, dir) = build_folder(&f.with_device);
    let paths = package(&dir, &t.path().join("pkgs"), &["--format", "deb,whl"]);
    let opts = rcclfix::scan::ScanOptions::default();
    let direct = rcclfix::scan::scan_path(&f.with_device, &opts).unwrap();
    assert_eq!(direct.files.len(), 1);
    let want = &direct.files[0];
    assert_eq!(want.images.len(), 1, "{want:?}");
    let strip = |f: &rcclfix::scan::FileReport| {
        f.images
            .iter()
            .map(|i| (i.entry_id.clone(), i.processor.clone(), i.kernels.clone()))
            .collect::<Vec<_>>()
    };
    for (pkg, member) in paths.iter().zip([
        "usr/lib/x86_64-linux-gnu/librccl.so.1.0",
        "rcclfix_rccl/lib/librccl.so.1",
    ]) {
        let r = rcclfix::scan::scan_path(pkg, &opts).unwrap();
        let with_images: Vec<&rcclfix::scan::FileReport> =
            r.files.iter().filter(|f| !f.images.is_empty()).collect();
        assert_eq!(
            with_images.len(),
            1,
            "{}: {:?}",
            pkg.display(),
            r.files.iter().map(|f| &f.path).collect::<Vec<_>>()
        );
        let got = with_images[0];
        assert_eq!(
            got.path,
            format!(
                "{}!{}{member}",
                pkg.display(),
                if member.starts_with("usr") {
                    "data.tar.xz!"
                } else {
                    ""
                }
            )
        );
        assert!(got.unreadable.is_empty(), "{:?}", got.unreadable);
        assert_eq!(strip(got), strip(want), "{}", pkg.display());
        // Same verdict per target (kernel names carry the file path, so compare the last part).
        let verdict = |r: &rcclfix::scan::ScanReport| {
            use rcclfix::scan::TargetState;
            r.target_states(&["gfx1100".into()])
                .into_iter()
                .map(|(t, s)| match s {
                    TargetState::Declares { kernels } => {
                        let k: Vec<&str> = kernels
                            .iter()
                            .map(|k| k.rsplit(": ").next().unwrap())
                            .collect();
                        format!("{t}: declares {}", k.join(" "))
                    }
                    TargetState::Clean { kernels } => format!("{t}: clean {kernels}"),
                    TargetState::Unknown { reason } => format!("{t}: unknown ({reason})"),
                    TargetState::NoCode { reason } => format!("{t}: no code ({reason})"),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(verdict(&r), verdict(&direct));
        // The command line: the packaged library is clean (exit 0), named with the member path.
        let o = run(crate::support::rcclfix()
            .args(["scan", "--json=full", "--target", "gfx1100"])
            .arg(pkg));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            stdout.contains(member) && stdout.contains("k_implicit"),
            "{stdout}"
        );
    }
}

/// Nothing but the library is reported when scanning the packages. Fails today: the scanner
/// reads the .deb's `usr/share/doc/<pkg>/changelog.gz` (a gzipped text file, required by Debian
/// Policy §12.7) as a tar.gz and reports it unreadable ("tar stream: failed to read entire
/// block"), which would turn a clean library's verdict into unknown. Owned by `src/scan/`.
#[test]
fn scan_of_the_deb_reports_only_the_library() {
    let f = fixtures();
    let (t, dir) = build_folder(&f.with_device);
    let paths = package(&dir, &t.path().join("pkgs"), &["--format", "deb"]);
    let r = rcclfix::scan::scan_path(&paths[0], &rcclfix::scan::ScanOptions::default()).unwrap();
    let names: Vec<&String> = r.files.iter().map(|f| &f.path).collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn packages_default_to_the_folder_beside_the_build_folder() {
    // `build` replaces out/rccl-<v>-<t>/ on a rebuild, so packages must not live inside it.
    let d = rcclfix::package::default_out_dir(std::path::Path::new("out/rccl-2.13.4-gfx1100"));
    assert!(d.is_absolute());
    assert!(d.ends_with("out"), "{}", d.display());
    let d = rcclfix::package::default_out_dir(std::path::Path::new("/srv/b/rccl-2.13.4-gfx1100/"));
    assert_eq!(d, std::path::Path::new("/srv/b"));
}

// ---------------------------------------------------------------------------------------------
// Stripping: the .deb ships the library as Debian would (dh_strip), every allocated byte intact.

/// `(name, sh_type, sh_flags, sh_addr, sh_offset, sh_size)` of every section, read with `object`.
fn sections(data: &[u8]) -> Vec<(String, u32, u64, u64, u64, u64)> {
    use object::read::elf::{FileHeader, SectionHeader};
    let h = object::elf::FileHeader64::<object::Endianness>::parse(data).unwrap();
    let e = h.endian().unwrap();
    let table = h.sections(e, data).unwrap();
    table
        .iter()
        .map(|s| {
            (
                String::from_utf8_lossy(table.section_name(e, s).unwrap()).into_owned(),
                s.sh_type(e),
                s.sh_flags(e),
                s.sh_addr(e),
                s.sh_offset(e),
                s.sh_size(e),
            )
        })
        .collect()
}

/// Every allocated section of `before` is in `after` at the same index with the same name,
/// address, offset, size and bytes, and so is the program header table.
fn assert_allocated_sections_identical(before: &[u8], after: &[u8]) {
    let (s0, s1) = (sections(before), sections(after));
    for (i, s) in s0.iter().enumerate() {
        if s.2 & u64::from(object::elf::SHF_ALLOC) == 0 {
            continue;
        }
        assert_eq!(s1.get(i), Some(s), "section {i} changed");
        if s.1 != object::elf::SHT_NOBITS {
            let r = s.4 as usize..(s.4 + s.5) as usize;
            assert!(before[r.clone()] == after[r], "bytes of {} differ", s.0);
        }
    }
    let (phoff, phnum) = (
        u64::from_le_bytes(before[0x20..0x28].try_into().unwrap()) as usize,
        u16::from_le_bytes(before[0x38..0x3a].try_into().unwrap()) as usize,
    );
    assert!(phnum > 0);
    assert_eq!(
        before[phoff..phoff + 56 * phnum],
        after[phoff..phoff + 56 * phnum]
    );
}

pub(crate) fn extract_deb_lib(deb: &Path, into: &Path) -> PathBuf {
    ok(Command::new("dpkg-deb").arg("-x").arg(deb).arg(into));
    into.join(DEB_LIB)
}

#[test]
fn deb_library_is_stripped_and_every_allocated_section_is_identical() {
    tool("dpkg-deb", "dpkg");
    let file = tool("file", "file");
    let gnu_strip = tool("strip", "binutils");
    let f = fixtures();
    let (t, dir) = build_folder(&f.unstripped);
    let deb = package(&dir, &t.path().join("pkgs"), &["--format", "deb"]).remove(0);
    let lib = extract_deb_lib(&deb, &t.path().join("x"));
    let before = std::fs::read(&f.unstripped).unwrap();
    let after = std::fs::read(&lib).unwrap();
    let (s0, s1) = (sections(&before), sections(&after));
    assert!(
        s0.iter().any(|s| s.0.starts_with(".debug_")),
        "the fixture has no DWARF"
    );
    assert!(after.len() < before.len());

    // file(1), which lintian asks: stripped, no debug_info.
    let what = ok(Command::new(&file).arg("-b").arg(&lib));
    assert!(
        what.contains(", stripped") && !what.contains("debug_info"),
        "{what}"
    );
    let what0 = ok(Command::new(&file).arg("-b").arg(&f.unstripped));
    assert!(what0.contains("not stripped"), "{what0}");

    assert_allocated_sections_identical(&before, &after);
    assert!(
        s0.iter()
            .filter(|s| s.2 & u64::from(object::elf::SHF_ALLOC) != 0)
            .count()
            > 10
    );
    assert!(s1.iter().any(|s| s.0 == ".hip_fatbin" && s.5 > 0), "{s1:?}");
    assert!(
        !s1.iter()
            .any(|s| s.0.starts_with(".debug") || s.1 == object::elf::SHT_SYMTAB),
        "{s1:?}"
    );

    // The same sections as binutils' strip leaves when run as dh_strip runs it on shared
    // libraries.
    let gnu = t.path().join("gnu.so");
    ok(Command::new(&gnu_strip)
        .args([
            "--remove-section=.comment",
            "--remove-section=.note",
            "--strip-unneeded",
        ])
        .arg("-o")
        .arg(&gnu)
        .arg(&f.unstripped));
    let names =
        |v: &[(String, u32, u64, u64, u64, u64)]| v.iter().map(|s| s.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&s1), names(&sections(&std::fs::read(&gnu).unwrap())));

    // The stripped file still loads, and the scanner reads the same device code from it.
    ok(Command::new("python3")
        .args(["-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])"])
        .arg(&lib));
    let opts = rcclfix::scan::ScanOptions::default();
    let images = |p: &Path| {
        let r = rcclfix::scan::scan_path(p, &opts).unwrap();
        r.files
            .iter()
            .flat_map(|f| {
                f.images
                    .iter()
                    .map(|i| (i.entry_id.clone(), i.kernels.len()))
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(images(&lib), images(&f.unstripped));
    assert!(!images(&lib).is_empty());

    // The description says what was done and gives both digests.
    let info = ok(Command::new("dpkg-deb").arg("--info").arg(&deb));
    let words = info.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(&format!(
            "sha256 {} in manifest.json",
            sha256(&f.unstripped)
        )) && words.contains(&format!("as dh_strip does (sha256 {})", sha256(&lib))),
        "{info}"
    );
}

/// With no `--maintainer`, `DEBEMAIL` or `DEBFULLNAME`, the package carries the fixed neutral
/// maintainer, never the user or host name (it used to be `rcclfix user <root@HOSTNAME>`).
#[test]
fn default_maintainer_is_fixed_and_names_no_host() {
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let deb = package(&dir, &t.path().join("pkgs"), &["--format", "deb"]).remove(0);
    let info = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(&deb)
        .arg("Maintainer"));
    assert_eq!(info.trim(), rcclfix::package::DEFAULT_MAINTAINER);
    let x = t.path().join("x");
    ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&x));
    let gz = std::fs::read(x.join("usr/share/doc/rcclfix-rccl-gfx1100/changelog.gz")).unwrap();
    let mut changelog = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut changelog)
        .unwrap();
    assert!(
        changelog.contains(&format!(" -- {}  ", rcclfix::package::DEFAULT_MAINTAINER)),
        "{changelog}"
    );
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host = host.trim();
    if !host.is_empty() {
        assert!(
            !info.contains(host) && !changelog.contains(host),
            "{info}{changelog}"
        );
    }
}

/// Class 9 of issue 12: the package a user gets with default options (no `--maintainer`, a
/// library as a build leaves it: DWARF, `.symtab`, build ID) is lintian-clean, and so is its
/// `-dbgsym` package, whose debug file gdb uses for the stripped library.
#[test]
fn default_deb_and_dbgsym_pass_lintian_and_gdb_finds_the_symbols() {
    if !slow_gate("default_deb_and_dbgsym_pass_lintian_and_gdb_finds_the_symbols") {
        return;
    }
    let lintian = tool("lintian", "lintian");
    let gdb = tool("gdb", "gdb");
    let f = fixtures();
    let (t, dir) = build_folder(&f.unstripped);
    let paths = package(
        &dir,
        &t.path().join("pkgs"),
        &["--format", "deb", "--dbgsym"],
    );
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(
        paths[1]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("rcclfix-rccl-gfx1100-dbgsym_2.13.4+rcclfix1_amd64.deb"),
        "{paths:?}"
    );
    let o = run(Command::new(&lintian)
        .args(["--fail-on", "error", "--display-info"])
        .args(&paths)
        .env_remove("DEBEMAIL")
        .env_remove("DEBFULLNAME"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("lintian:\n{text}");
    assert!(o.status.success(), "lintian reports errors:\n{text}");
    for tag in [
        "bogus-mail-host",
        "root-in-contact",
        "unstripped-binary-or-object",
        "non-debug-file-in-debug-package",
    ] {
        assert!(!text.contains(tag), "{tag}:\n{text}");
    }
    assert!(!text.lines().any(|l| l.starts_with("E: ")), "{text}");

    // The dbgsym control fields, and gdb reads the line table through the build ID.
    let info = ok(Command::new("dpkg-deb").arg("--info").arg(&paths[1]));
    for want in [
        "Package: rcclfix-rccl-gfx1100-dbgsym",
        "Depends: rcclfix-rccl-gfx1100 (= 2.13.4+rcclfix1)",
        "Section: debug",
        "Build-Ids: ",
    ] {
        assert!(info.contains(want), "{want:?} missing:\n{info}");
    }
    let lib = extract_deb_lib(&paths[0], &t.path().join("x"));
    let dbg = t.path().join("dbg");
    ok(Command::new("dpkg-deb").arg("-x").arg(&paths[1]).arg(&dbg));
    let line = |debug_dir: &Path| {
        ok(Command::new(&gdb)
            .args(["-batch", "-nx"])
            // -iex runs before the file given on the command line is loaded, so the debug
            // folder is set when gdb looks for the separate debug file; the paths are argv words
            // (never parsed by gdb's command line), so a folder with spaces works.
            .arg("-iex")
            .arg(format!("set debug-file-directory {}", debug_dir.display()))
            .args(["-ex", "info line ncclAllReduce"])
            .arg(&lib))
    };
    let with = line(&dbg.join("usr/lib/debug"));
    assert!(with.contains("rccl.c\" starts at address"), "{with}");
    let without = line(&t.path().join("empty"));
    assert!(without.contains("No line number information"), "{without}");
}

/// Both packages say whether verify ran and how to run it on the target machine; a manifest
/// without a verify report says `not run`, one with a report says what ran on which GPUs.
#[test]
fn packages_say_whether_verify_ran() {
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        saved["verify"], "not run",
        "manifest.json records that verify did not run"
    );
    let read_whl_metadata = |whl: &Path| {
        let mut z = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
        let name = (0..z.len())
            .map(|i| z.by_index(i).unwrap().name().to_owned())
            .find(|n| n.ends_with(".dist-info/METADATA"))
            .unwrap();
        let mut s = String::new();
        z.by_name(&name).unwrap().read_to_string(&mut s).unwrap();
        s
    };
    let description = |deb: &Path| {
        ok(Command::new("dpkg-deb")
            .arg("--field")
            .arg(deb)
            .arg("Description"))
    };
    let paths = package(&dir, &t.path().join("pkgs"), &["--format", "deb,whl"]);
    let d = description(&paths[0]);
    assert!(d.contains("verify: not run."), "{d}");
    assert!(
        d.contains("rcclfix verify --lib /usr/lib/x86_64-linux-gnu/librccl.so.1.0"),
        "{d}"
    );
    let meta = read_whl_metadata(&paths[1]);
    assert!(meta.contains("verify: not run."), "{meta}");
    assert!(meta.contains("rcclfix verify --lib"), "{meta}");

    // A manifest with a verify report (the shape of `rcclfix verify --json`).
    let (t, dir) = build_folder(&f.ours);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    m.verify = Some(serde_json::json!({
        "verdict": "pass", "mode": "single", "gpus": [0, 1],
        "cases": vec![serde_json::json!({}); 24],
    }));
    m.save(&dir.join("manifest.json")).unwrap();
    let paths = package(&dir, &t.path().join("pkgs"), &["--format", "deb,whl"]);
    let want = "verify: pass: 24 cases, mode single, GPUs 0, 1 (on the build machine).";
    let d = description(&paths[0]);
    assert!(d.contains(want), "{d}");
    assert!(read_whl_metadata(&paths[1]).contains(want));
}

/// The .deb's Depends comes from the librccl1 of the toolchain's distribution (its apt lists),
/// not from the recipe's rocm_release: the manifest below says ROCm 6.3.0, for which no Debian
/// suite has a librccl1; a toolchain without lists is refused naming it.
#[test]
fn deb_depends_on_the_librccl1_of_the_toolchain_distribution() {
    tool("dpkg-deb", "dpkg");
    let f = fixtures();
    let (t, dir) = build_folder(&f.ours);
    let mut m = Manifest::load(&dir.join("manifest.json")).unwrap();
    m.rocm_release = "6.3.0".into();
    m.save(&dir.join("manifest.json")).unwrap();
    let paths = package(&dir, &t.path().join("pkgs"), &["--format", "deb"]);
    let depends = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(&paths[0])
        .arg("Depends"));
    assert!(
        depends.contains("librccl1 (>= 5.4.3~), librccl1 (<< 5.4.4~)") && !depends.contains("6.3"),
        "{depends}"
    );
    // A toolchain this machine has no rootfs (or apt lists) for.
    m.toolchain = "debian-nowhere".into();
    m.save(&dir.join("manifest.json")).unwrap();
    let o = run(rcclfix(&["package", "--format", "deb", "--from"])
        .arg(&dir)
        .arg("--out-dir")
        .arg(t.path().join("pkgs2"))
        .arg("--no-stock"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("toolchains/debian-nowhere/rootfs/var/lib/apt/lists: cannot read the toolchain's apt lists")
            && stderr.contains("help: the .deb depends on the librccl1 of toolchain debian-nowhere's distribution"),
        "{stderr}"
    );
    assert!(!t.path().join("pkgs2").exists());
}

/// With the real toolchains (slow): debian-sid's librccl1 is 5.4.3 (RCCL 2.13.4), and
/// debian-rocm7.2's (sid plus experimental) is experimental's 7.2.4-1~exp3 (RCCL 2.27.7).
#[test]
fn stock_librccl1_of_the_real_toolchains() {
    if !slow_gate("stock_librccl1_of_the_real_toolchains") {
        return;
    }
    use rcclfix::package::stock;
    for (tc, want) in [
        ("debian-trixie", "5.4.3-3+b1"),
        ("debian-sid", "5.4.3-3+b1"),
        ("debian-rocm7.2", "7.2.4-1~exp3"),
    ] {
        let root = stock::toolchain_rootfs(tc).unwrap();
        assert!(
            root.exists(),
            "{tc}: no rootfs at {} (RCCLFIX_SLOW_TESTS=1)\nhelp: cargo xtask test builds it",
            root.display()
        );
        let p = stock::read(&root, "librccl1", "amd64").unwrap();
        assert_eq!(p.version, want, "{tc}: {p:?}");
    }
}

/// The export gate on Debian's real libraries (slow; `cargo xtask inputs` fetches them):
/// librccl1 5.4.3 (RCCL 2.13.4) and experimental's 7.2.4-1~exp3 (RCCL 2.27.7) both ship the
/// stock path the Debian flavour diverts, and an overlay of the older RCCL over 2.27.7 is
/// refused, naming exports 2.27.7 added (among them the ones RCCL 2.21.5 lacks too).
#[test]
fn export_gate_refuses_an_older_rccl_over_debians_2_27_7() {
    if !slow_gate("export_gate_refuses_an_older_rccl_over_debians_2_27_7") {
        return;
    }
    let inputs = std::env::var_os("RCCLFIX_TEST_INPUTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-inputs"));
    let t = tempfile::tempdir().unwrap();
    let lib = |deb: &str, sub: &str| {
        let d = inputs.join(deb);
        assert!(
            d.exists(),
            "{}: missing; run cargo xtask inputs",
            d.display()
        );
        let x = t.path().join(sub);
        ok(Command::new("dpkg-deb").arg("-x").arg(&d).arg(&x));
        let l = x.join(DEB_LIB);
        assert!(l.is_file(), "{deb} ships no {DEB_LIB}");
        l
    };
    let old = lib("librccl1_5.4.3-3+b1_amd64.deb", "old");
    let stock = lib("librccl1_7.2.4-1~exp3_amd64.deb", "stock");
    let report = rcclfix::package::export_gate::check(
        &old,
        &rcclfix::package::export_gate::GateInputs {
            stock: Some(stock),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!report.passed());
    let missing: Vec<&str> = report.missing.iter().map(|m| m.symbol.as_str()).collect();
    for s in [
        "ncclCommShrink",
        "ncclCommWindowRegister",
        "ncclCommWindowDeregister",
        "ncclCommInitRankScalable",
        "ncclGroupSimulateEnd",
    ] {
        assert!(
            missing.iter().any(|m| m.starts_with(s)),
            "{s} not in {missing:?}"
        );
    }
    eprintln!("2.13.4 over 2.27.7: {} missing exports", missing.len());
}
