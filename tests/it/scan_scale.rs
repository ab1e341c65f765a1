//! Scans at scale: parallel and serial scans give the same bytes; archive members larger than
//! the memory budget are streamed to the same result; the compact and full `--json` shapes;
//! folders with links; environment scans (`--python` on a venv the test makes); and inputs that
//! must never read as clean (a cut `.deb`, a code object over the limit, a target not present).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{fixture, root};

fn rcclfix() -> Command {
    let mut c = crate::support::rcclfix();
    c.current_dir(root())
        .env_remove("RCCLFIX_SCAN_MEMORY_BUDGET")
        .env_remove("RCCLFIX_SCAN_MAX_CODE_OBJECT");
    c
}

fn run(c: &mut Command) -> Output {
    c.output().expect("rcclfix runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every fixture of both suites, relative to the crate root.
fn fixtures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for suite in ["trixie", "sid", "patch"] {
        let dir = root().join("tests/fixtures").join(suite);
        let mut e: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"))
            .map(|p| p.strip_prefix(root()).unwrap().to_owned())
            .collect();
        e.sort();
        v.extend(e);
    }
    v
}

/// `rcclfix scan ARGS PATHS` with `-j1` and with `-j4`: both JSON shapes must be byte-identical.
fn same_parallel_and_serial(paths: &[PathBuf], env: &[(&str, &str)]) -> usize {
    let mut bytes = 0;
    for shape in ["--json", "--json=full"] {
        let go = |j: &str| {
            let mut c = rcclfix();
            c.args(["scan", shape, j]).args(paths);
            for (k, v) in env {
                c.env(k, v);
            }
            let o = run(&mut c);
            assert!(
                matches!(o.status.code(), Some(0 | 1 | 3)),
                "{paths:?} {shape} {j}: {}",
                text(&o)
            );
            o.stdout
        };
        let serial = go("-j1");
        let parallel = go("-j4");
        assert!(
            serial == parallel,
            "{paths:?} {shape}: -j1 and -j4 differ\n--- -j1\n{}\n--- -j4\n{}",
            String::from_utf8_lossy(&serial),
            String::from_utf8_lossy(&parallel)
        );
        let v: serde_json::Value = serde_json::from_slice(&serial).unwrap_or_else(|e| {
            panic!(
                "{paths:?} {shape}: not JSON: {e}\n{}",
                String::from_utf8_lossy(&serial)
            )
        });
        assert_eq!(v["schema_version"], 3);
        assert_eq!(
            v["shape"],
            if shape == "--json" { "compact" } else { "full" }
        );
        bytes += serial.len();
    }
    bytes
}

#[test]
fn parallel_and_serial_scans_are_byte_identical_on_every_fixture() {
    let all = fixtures();
    assert!(all.len() >= 30, "{all:?}");
    for f in &all {
        same_parallel_and_serial(std::slice::from_ref(f), &[]);
    }
    // All at once (their jobs share the pool), and each suite as a folder walk.
    same_parallel_and_serial(&all, &[]);
    for suite in ["trixie", "sid", "patch"] {
        same_parallel_and_serial(&[PathBuf::from("tests/fixtures").join(suite)], &[]);
    }
}

fn test_inputs() -> PathBuf {
    std::env::var_os("RCCLFIX_TEST_INPUTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/test-inputs"))
}

/// The Debian librccl1 library and its `.deb` (its 292 MB library is streamed: larger than the
/// default memory budget) give the same bytes with one thread and with four.
#[test]
fn parallel_and_serial_scans_are_byte_identical_on_debian_librccl1() {
    if !crate::support::slow_or_note() {
        return;
    }
    let deb = test_inputs().join("librccl1_5.4.3-3+b1_amd64.deb");
    assert!(
        deb.exists(),
        "RCCLFIX_SLOW_TESTS=1 but {} is missing\nhelp: run `cargo xtask inputs`",
        deb.display()
    );
    let x = test_inputs().join("librccl1_5.4.3-3+b1");
    let lib = x.join("usr/lib/x86_64-linux-gnu/librccl.so.1.0");
    if !lib.exists() {
        let st = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(&x)
            .status()
            .unwrap();
        assert!(st.success());
    }
    same_parallel_and_serial(std::slice::from_ref(&lib), &[]);
    same_parallel_and_serial(std::slice::from_ref(&deb), &[]);
    // The .deb with its library held in memory reads the same as streamed.
    let full = |budget: &str| {
        let o = run(rcclfix()
            .args(["scan", "--json=full"])
            .arg(&deb)
            .env("RCCLFIX_SCAN_MEMORY_BUDGET", budget));
        o.stdout
    };
    assert!(full("1G") == full("256M"), "held and streamed differ");
}

fn lib(rel: &str) -> Vec<u8> {
    std::fs::read(root().join(fixture(rel))).unwrap()
}

/// A wheel and tar archives whose members are the fixtures: with a 4 KiB memory budget every
/// member is decompressed once into an unnamed spill file and mapped, or, without a spill folder,
/// streamed (host ELF in three passes, raw bundles and CCOBs in one), and both reports equal the
/// one read in memory, byte for byte.
#[test]
fn members_over_the_memory_budget_are_streamed_to_the_same_result() {
    let d = tempfile::tempdir().unwrap();
    let members: Vec<(String, Vec<u8>)> = [
        "sid/kernels-ccob.so",
        "sid/two-tu-ccob.so",
        "sid/multi-ccob.so",
        "sid/kernels-ccob3.so",
        "trixie/multi.so",
        "trixie/two-tu.so",
        "trixie/rdc_a.o",
        "trixie/rdc.so",
        "sid/kernels.co",
        "patch/dispatch-v4.bundle",
    ]
    .iter()
    .map(|r| (format!("pkg/lib/{}", r.replace('/', "-")), lib(r)))
    .collect();
    // The raw CCOB of a fixture as a member of its own.
    let so = lib("sid/two-tu-ccob.so");
    let h = rcclfix::scan::elf::inspect(&so).unwrap();
    let (_, fb) = h.fatbin.unwrap();
    let first = fb.iter().position(|&b| b != 0).unwrap();
    let mut members = members;
    members.push(("pkg/lib/raw.ccob".into(), fb[first..].to_vec()));

    let whl = d.path().join("t.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    for (n, b) in &members {
        z.start_file(
            n.as_str(),
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated),
        )
        .unwrap();
        z.write_all(b).unwrap();
    }
    z.finish().unwrap();
    let mut t = tar::Builder::new(Vec::new());
    for (n, b) in &members {
        let mut h = tar::Header::new_gnu();
        h.set_size(b.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, n, &b[..]).unwrap();
    }
    let tar_bytes = t.into_inner().unwrap();
    let tzst = d.path().join("t.tar.zst");
    std::fs::write(&tzst, zstd::bulk::compress(&tar_bytes, 3).unwrap()).unwrap();
    let tgz = d.path().join("t.tar.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar_bytes).unwrap();
    std::fs::write(&tgz, gz.finish().unwrap()).unwrap();
    let tar_plain = d.path().join("t.tar");
    std::fs::write(&tar_plain, &tar_bytes).unwrap();
    for p in [&whl, &tzst, &tgz, &tar_plain] {
        // `spill`: the spill folder (RCCLFIX_SCAN_SPILL_DIR; empty: none, so the member is
        // streamed in passes).
        let go = |budget: &str, spill: &std::path::Path| {
            let o = run(rcclfix()
                .args(["scan", "--json=full"])
                .arg(p)
                .env("RCCLFIX_SCAN_MEMORY_BUDGET", budget)
                .env("RCCLFIX_SCAN_SPILL_DIR", spill));
            assert_eq!(o.status.code(), Some(1), "{}: {}", p.display(), text(&o));
            o.stdout
        };
        let spill_dir = tempfile::tempdir().unwrap();
        let held = go("1G", spill_dir.path());
        let streamed = go("4K", std::path::Path::new(""));
        let spilled = go("4K", spill_dir.path());
        for (how, out) in [("streamed", &streamed), ("spilled", &spilled)] {
            assert!(
                &held == out,
                "{}: held and {how} differ\n--- held\n{}\n--- {how}\n{}",
                p.display(),
                String::from_utf8_lossy(&held),
                String::from_utf8_lossy(out)
            );
        }
        // The spill file has no name: nothing is left in its folder.
        assert_eq!(std::fs::read_dir(spill_dir.path()).unwrap().count(), 0);
        let v: serde_json::Value = serde_json::from_slice(&held).unwrap();
        let files = v["files"].as_array().unwrap();
        assert_eq!(files.len(), members.len(), "{}", p.display());
        let kernels: usize = files
            .iter()
            .flat_map(|f| f["images"].as_array().unwrap())
            .map(|i| i["kernels"].as_array().unwrap().len())
            .sum();
        assert!(kernels >= 40, "{}: {kernels} kernels", p.display());
        same_parallel_and_serial(
            std::slice::from_ref(p),
            &[("RCCLFIX_SCAN_MEMORY_BUDGET", "4K")],
        );
    }
}

/// A `.deb` cut inside its second member header is truncated (exit 3), never "no device code
/// found" with exit 0; so is one cut inside the first.
#[test]
fn deb_cut_inside_a_member_header_is_unknown() {
    let d = tempfile::tempdir().unwrap();
    let mut deb = b"!<arch>\n".to_vec();
    let member = |name: &str, body: &[u8]| {
        let mut m = format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            name,
            0,
            0,
            0,
            644,
            body.len()
        )
        .into_bytes();
        m.extend_from_slice(body);
        if body.len() % 2 == 1 {
            m.push(b'\n');
        }
        m
    };
    deb.extend(member("debian-binary", b"2.0\n"));
    let second = deb.len();
    deb.extend(member("control.tar.gz", b"not really"));
    for (cut, header_at) in [(second + 10, second), (second + 59, second), (8 + 30, 8)] {
        let p = d.path().join(format!("cut{cut}.deb"));
        std::fs::write(&p, &deb[..cut]).unwrap();
        let o = run(rcclfix().arg("scan").arg(&p));
        let t = text(&o);
        assert_eq!(o.status.code(), Some(3), "{t}");
        assert!(!t.contains("no device code found"), "{t}");
        assert!(
            t.contains(&format!(
                "ar member header at offset {header_at} is truncated"
            )),
            "{t}"
        );
    }
}

/// A folder holding only a link to an affected library scans the library; a link to a folder
/// is followed (its files read under the link's name), a loop is reported, and every skipped entry is named with `-v`.
#[test]
fn folder_links_are_followed_once() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("librccl.so.1.0");
    std::fs::copy(root().join(fixture("sid/kernels-ccob.so")), &target).unwrap();
    std::fs::create_dir(outside.path().join("libdir")).unwrap();
    std::fs::copy(
        root().join(fixture("trixie/kernels.so")),
        outside.path().join("libdir/libhidden.so"),
    )
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&target, d.path().join("librccl.so.1")).unwrap();
    let o = run(rcclfix().arg("scan").arg(d.path()));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("librccl.so.1 (host-elf)"), "{t}");
    // Beside it: a link to a folder (followed since issue 20: its libraries are read under the
    // link's name), a loop, a text file, and the library itself under a second name (read once,
    // under its own name).
    std::os::unix::fs::symlink(outside.path().join("libdir"), d.path().join("libs")).unwrap();
    std::os::unix::fs::symlink("libloop.so", d.path().join("libloop.so")).unwrap();
    std::fs::write(d.path().join("README"), "text").unwrap();
    std::fs::copy(&target, d.path().join("librccl.so.1.0")).unwrap();
    std::os::unix::fs::symlink("librccl.so.1.0", d.path().join("librccl.so")).unwrap();
    let o = run(rcclfix().args(["-v", "scan"]).arg(d.path()));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("libs/libhidden.so (host-elf)"),
        "a link to a folder was not followed: {t}"
    );
    assert!(t.contains("symbolic link loop"), "{t}");
    for name in ["README", "librccl.so"] {
        let p = d.path().join(name).display().to_string();
        assert!(
            t.lines()
                .any(|l| l.contains("skipped") && l.contains(&format!("{p}:"))),
            "{name} is not named as skipped with -v: {t}"
        );
    }
    // librccl.so.1 (outside target) and librccl.so.1.0 are two files; librccl.so is a link to
    // the second and is not read twice.
    assert!(t.contains("librccl.so.1.0 (host-elf)"), "{t}");
    assert!(!t.contains("/librccl.so (host-elf)"), "{t}");
}

/// `--target` for a target the file has no code for names what it found.
#[test]
fn a_target_that_is_not_there_names_what_is() {
    let o = run(rcclfix()
        .args(["scan", "--target", "gfx1200"])
        .arg(fixture("trixie/multi.so")));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(
        t.starts_with("no device code for gfx1200; found: gfx1030, gfx1100, gfx90a\n"),
        "{t}"
    );
    assert!(!t.contains("no device code found"), "{t}");
    let o = run(rcclfix()
        .args(["scan", "--json", "--target", "gfx1200"])
        .arg(fixture("trixie/multi.so")));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["targets"]["gfx1200"]["reason"],
        "no device code for gfx1200; found: gfx1030, gfx1100, gfx90a"
    );
}

/// A code object over `--max-code-object` is unknown, with a one-line reason naming the file,
/// the size, the limit and how to raise it.
#[test]
fn a_code_object_over_the_limit_is_unknown_and_says_how_to_raise_it() {
    for (args, env) in [
        (vec!["--max-code-object", "16K"], None),
        (vec![], Some("16K")),
    ] {
        let mut c = rcclfix();
        c.arg("scan")
            .args(&args)
            .arg(fixture("sid/kernels-ccob.so"));
        if let Some(e) = env {
            c.env("RCCLFIX_SCAN_MAX_CODE_OBJECT", e);
        }
        let o = run(&mut c);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(3), "{t}");
        let line = t
            .lines()
            .find(|l| l.contains("(too-large)"))
            .unwrap_or_else(|| panic!("{t}"));
        for want in [
            "kernels-ccob.so",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "more than the 16384-byte limit",
            "--max-code-object",
            "RCCLFIX_SCAN_MAX_CODE_OBJECT",
        ] {
            assert!(line.contains(want), "{want:?} missing: {line}");
        }
    }
}

/// The compact document lists every declaring kernel and one line per image; the full one
/// every kernel; both say which they are.
#[test]
fn json_shapes() {
    let p = fixture("trixie/kernels-ndebug.so");
    let o = run(rcclfix().args(["scan", "--json"]).arg(&p));
    let compact = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&compact).unwrap();
    assert_eq!(v["shape"], "compact");
    assert_eq!(v["targets"]["gfx1100"]["state"], "declares");
    assert_eq!(v["targets"]["gfx1100"]["kernels"], 3);
    assert_eq!(v["targets"]["gfx1100"]["declaring"], 1);
    let f = &v["files"][0];
    assert_eq!(f["images"][0]["kernels"], 3);
    let ks = f["kernels"].as_array().unwrap();
    assert_eq!(ks.len(), 1);
    assert_eq!(ks[0]["name"], "k_printf");
    assert_eq!(ks[0]["image"], 0);
    assert!(ks[0]["why"].as_str().unwrap().contains("printf"));
    assert!(ks[0]["hidden_args"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["value_kind"] == "hidden_hostcall_buffer"));
    // One line per image and per kernel.
    let image_lines = compact
        .lines()
        .filter(|l| l.trim_start().starts_with("{\"entry_id\""))
        .count();
    assert_eq!(image_lines, 1, "{compact}");
    for shape in [&["--json=full"][..], &["--json", "--kernels"][..]] {
        let o = run(rcclfix().arg("scan").args(shape).arg(&p));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["shape"], "full", "{shape:?}");
        assert_eq!(
            v["files"][0]["images"][0]["kernels"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        let _: rcclfix::scan::ScanReport = serde_json::from_value(v).unwrap();
    }
}

/// A wheel built from our fixtures, installed into a venv made here with pip: `scan --python`
/// finds the library in the venv's site-packages, gives its verdict for the machine's GPUs (a
/// KFD topology with one gfx1100), lists it first, and exits 1.
#[test]
fn python_environment_scan_finds_the_library_and_its_verdict() {
    let d = tempfile::tempdir().unwrap();
    let whl = d.path().join("rcclfix_fixture-0.1-py3-none-any.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("rcclfix_fixture/__init__.py", b"".to_vec()),
        ("rcclfix_fixture/lib/librccl.so.1", lib("sid/kernels-ccob.so")),
        ("rcclfix_fixture/lib/libclean.so", lib("sid/implicit.so")),
        (
            "rcclfix_fixture-0.1.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: rcclfix-fixture\nVersion: 0.1\n".to_vec(),
        ),
        (
            "rcclfix_fixture-0.1.dist-info/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: rcclfix-tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
                .to_vec(),
        ),
    ];
    let mut record = String::new();
    for (n, b) in &files {
        z.start_file(*n, o).unwrap();
        z.write_all(b).unwrap();
        record.push_str(&format!("{n},,\n"));
    }
    record.push_str("rcclfix_fixture-0.1.dist-info/RECORD,,\n");
    z.start_file("rcclfix_fixture-0.1.dist-info/RECORD", o)
        .unwrap();
    z.write_all(record.as_bytes()).unwrap();
    z.finish().unwrap();
    let venv = d.path().join("venv");
    let st = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(st.success());
    let py = venv.join("bin/python");
    let o = Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(o.status.success(), "pip install: {}", text(&o));
    let sysfs = d.path().join("sys");
    let node = sysfs.join("class/kfd/kfd/topology/nodes/1");
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(
        node.join("properties"),
        "simd_count 96\ngfx_target_version 110000\n",
    )
    .unwrap();
    std::fs::create_dir_all(sysfs.join("class/kfd/kfd/topology/nodes/0")).unwrap();
    std::fs::write(
        sysfs.join("class/kfd/kfd/topology/nodes/0/properties"),
        "simd_count 0\ncpu_cores_count 8\n",
    )
    .unwrap();
    let o = run(rcclfix()
        .args(["scan", "--python"])
        .arg(&py)
        .arg("--sysfs")
        .arg(&sysfs));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("verdicts for this machine's GPUs: gfx1100"),
        "{t}"
    );
    let rows: Vec<&str> = t
        .lines()
        .skip_while(|l| !l.starts_with("LIBRARY"))
        .skip(1)
        .collect();
    assert!(
        rows[0].starts_with("rcclfix_fixture/lib/librccl.so.1 ")
            && rows[0].contains("declares")
            && rows[0].contains("gfx1100 (1)"),
        "{t}"
    );
    assert!(
        rows.iter()
            .any(|r| r.starts_with("rcclfix_fixture/lib/libclean.so ") && r.contains("clean")),
        "{t}"
    );
    // The same environment as JSON: the library is in the document with its verdict.
    let o = run(rcclfix()
        .args(["scan", "--json", "--python"])
        .arg(&py)
        .arg("--sysfs")
        .arg(&sysfs));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["targets"]["gfx1100"]["state"], "declares");
    assert!(v["files"].as_array().unwrap().iter().any(|f| f["path"]
        .as_str()
        .unwrap()
        .ends_with("rcclfix_fixture/lib/librccl.so.1")));
}

#[test]
fn rocm_scan_needs_a_lib_folder() {
    let d = tempfile::tempdir().unwrap();
    let o = run(rcclfix().args(["scan", "--rocm"]).arg(d.path()));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no lib/ folder"), "{}", text(&o));
    std::fs::create_dir(d.path().join("lib")).unwrap();
    std::fs::copy(
        root().join(fixture("trixie/kernels-ndebug.so")),
        d.path().join("lib/librccl.so.1"),
    )
    .unwrap();
    let o = run(rcclfix()
        .args(["scan", "--rocm"])
        .arg(d.path())
        .arg("--sysfs")
        .arg(d.path().join("nosys")));
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("librccl.so.1") && t.contains("declares"), "{t}");
}

fn under_ulimit(kib: u64, args: &[&str], p: &Path) -> Output {
    crate::support::rcclfix_under_ulimit(kib)
        .args(args)
        .arg(p)
        .output()
        .unwrap()
}

/// An honest CCOB whose bundle holds a 1 GiB host entry beside a real gfx1100 code object
/// decodes in bounded memory (the host entry is never kept; the bundle is never held whole):
/// under a 768 MiB address-space limit, with the hash checked.
#[test]
fn an_honest_ccob_of_1_gib_scans_in_bounded_memory() {
    if !crate::support::slow_or_note() {
        return;
    }
    use md5::Digest;
    let co = lib("sid/kernels.co");
    let big = 1u64 << 30;
    let ids = [
        "host-x86_64-unknown-linux-gnu-",
        "hipv4-amdgcn-amd-amdhsa--gfx1100",
    ];
    let hlen = 32 + ids.iter().map(|i| 24 + i.len()).sum::<usize>();
    let off1 = hlen.div_ceil(4096) as u64 * 4096;
    let mut hdr = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    hdr.extend_from_slice(&2u64.to_le_bytes());
    for (id, (o, s)) in ids.iter().zip([(off1, big), (off1 + big, co.len() as u64)]) {
        hdr.extend_from_slice(&o.to_le_bytes());
        hdr.extend_from_slice(&s.to_le_bytes());
        hdr.extend_from_slice(&(id.len() as u64).to_le_bytes());
        hdr.extend_from_slice(id.as_bytes());
    }
    hdr.resize(off1 as usize, 0);
    let mut md5 = md5::Md5::new();
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    let mut total = 0u64;
    let mut put = |b: &[u8], enc: &mut zstd::stream::write::Encoder<Vec<u8>>| {
        md5.update(b);
        enc.write_all(b).unwrap();
        total += b.len() as u64;
    };
    put(&hdr, &mut enc);
    // 64 pseudo-random bytes per 4 KiB: about 60:1 under zstd, an honest ratio.
    let mut block = vec![0u8; 4096];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..big / 4096 {
        for w in block[..64].chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        put(&block, &mut enc);
    }
    put(&co, &mut enc);
    let payload = enc.finish().unwrap();
    let digest = md5.finalize();
    let mut c = b"CCOB".to_vec();
    c.extend_from_slice(&3u16.to_le_bytes());
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&(32 + payload.len() as u64).to_le_bytes());
    c.extend_from_slice(&total.to_le_bytes());
    c.extend_from_slice(&digest[..8]);
    c.extend_from_slice(&payload);
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big.ccob");
    std::fs::write(&p, &c).unwrap();
    let o = under_ulimit(768 << 10, &["scan", "--verify-hash"], &p);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("k_assert") && t.contains("ccob-v3-zstd"), "{t}");
}

/// Streamed members cut anywhere, or holding a bundle magic with no header after it, are
/// unknown, never clean, and never hang.
#[test]
fn streamed_members_cut_anywhere_are_unknown() {
    let d = tempfile::tempdir().unwrap();
    let so = lib("sid/two-tu-ccob.so");
    let mut cuts: Vec<usize> = (1..24).map(|i| so.len() * i / 24).collect();
    cuts.push(64);
    let mut raw = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    raw.extend_from_slice(&[1, 2, 3]);
    for (i, cut) in cuts.iter().enumerate() {
        let whl = d.path().join(format!("cut{i}.whl"));
        let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file("lib/libk.so", o).unwrap();
        z.write_all(&so[..*cut]).unwrap();
        z.start_file("lib/raw.bundle", o).unwrap();
        z.write_all(&raw).unwrap();
        z.finish().unwrap();
        let mut c = Command::new("timeout");
        c.arg("60")
            .arg(crate::support::BIN)
            .args(["scan", "--json=full"])
            .arg(&whl)
            .env("RCCLFIX_SCAN_MEMORY_BUDGET", "8");
        let o = run(&mut c);
        assert!(
            matches!(o.status.code(), Some(1 | 3)),
            "cut at {cut}: {}",
            text(&o)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_ne!(v["exit_code"], 0, "cut at {cut}");
        let raw_file = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str().unwrap().ends_with("raw.bundle"))
            .unwrap_or_else(|| panic!("cut at {cut}: {v}"));
        assert!(!raw_file["unreadable"].as_array().unwrap().is_empty());
    }
}
