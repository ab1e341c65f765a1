//! The `.deb`'s library and metadata: stripped as Debian would (dh_strip) with every allocated
//! section intact, the dbgsym package (lintian, gdb finds the symbols), the default maintainer,
//! whether verify ran, and `Depends:` naming the toolchain distribution's `librccl1` (slow: the
//! real toolchains' stock libraries and an older RCCL refused over Debian's). Fixtures and
//! helpers: `package.rs`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use rcclfix::manifest::Manifest;

use crate::package::*;

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
