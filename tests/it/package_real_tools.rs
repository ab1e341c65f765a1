//! The packages under the real tools (slow, `RCCLFIX_SLOW_TESTS=1`): the `.deb` taking over the
//! stock library with real dpkg in a debootstrapped Debian root, lintian and shellcheck on it, and
//! the wheel preloading our library with real pip in a fresh venv (check-wheel-contents too).
//! Fixtures and helpers: `package.rs`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rcclfix::manifest::Manifest;

use crate::package::*;

/// A minbase bookworm root, made once per target folder and copied per test (the copy is what
/// dpkg changes). See [`debian_root_of`].
pub(crate) fn debian_root() -> (tempfile::TempDir, PathBuf) {
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
pub(crate) fn space_free(dir: &Path) -> PathBuf {
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
pub(crate) fn host_mirror() -> String {
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
pub(crate) fn stock_deb(dir: &Path) -> PathBuf {
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
