//! `rcclfix fix` on a dpkg-owned copy, with real dpkg and apt, never this machine's: the whole
//! `rcclfix fix` runs inside a throwaway copy of a debootstrapped Debian root (`unshare --root`,
//! `tests/it/package.rs`'s `debian_root_of`), where a stand-in of AMD's `rccl` package, built here
//! with the real `dpkg-deb`, installs `/opt/rocm-7.2.4/lib/librccl.so.1.0` (the gcc-built stand-in
//! RCCL of `tests/it/fix_pip.rs`, carrying our dispatcher bundle) and its `librccl.so.1` link.

use std::path::Path;
use std::process::Command;

use crate::fix::{ok, sha256};
use crate::package::{slow_gate, tool};
use crate::package_real_tools::{debian_root_of, in_root, in_root_ok};

const LIB: &str = "opt/rocm-7.2.4/lib/librccl.so.1.0";

/// The stand-in `rccl` package (AMD's name and layout), built with `dpkg-deb --build`.
fn rccl_deb(work: &Path) -> std::path::PathBuf {
    let lib = crate::fix_pip::stand_in_rccl(work);
    let st = work.join("rccl-staging");
    let dir = st.join("opt/rocm-7.2.4/lib");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(st.join("DEBIAN")).unwrap();
    std::fs::copy(&lib, dir.join("librccl.so.1.0")).unwrap();
    std::os::unix::fs::symlink("librccl.so.1.0", dir.join("librccl.so.1")).unwrap();
    std::fs::write(
        st.join("DEBIAN/control"),
        "Package: rccl\nVersion: 2.27.7.70204-1\nArchitecture: amd64\nMaintainer: Test <test@example.org>\n\
         Section: libs\nPriority: optional\nDescription: stand-in for AMD's rccl package\n built by the rcclfix tests\n",
    )
    .unwrap();
    let deb = work.join("rccl_2.27.7.70204-1_amd64.deb");
    ok(Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&st)
        .arg(&deb));
    deb
}

fn fix_in_root(root: &Path, args: &[&str]) -> std::process::Output {
    let mut argv = vec![
        "env",
        "RCCLFIX_HOME=/tmp/rcclfix/home",
        "/tmp/rcclfix/rcclfix",
        "fix",
    ];
    argv.extend_from_slice(args);
    in_root(root, &argv)
}

#[test]
fn dpkg_owned_copy_gets_a_diverting_deb_and_apt_remove_restores_it() {
    if !slow_gate("dpkg_owned_copy_gets_a_diverting_deb_and_apt_remove_restores_it") {
        return;
    }
    tool("unshare", "util-linux");
    tool("dpkg-deb", "dpkg");
    let t = tempfile::tempdir().unwrap();
    let deb = rccl_deb(t.path());
    let (_r, root) = debian_root_of("bookworm");
    let work = root.join("tmp/rcclfix");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(&deb, work.join("rccl.deb")).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_rcclfix"), work.join("rcclfix")).unwrap();
    in_root_ok(&root, &["dpkg", "-i", "/tmp/rcclfix/rccl.deb"]);
    let lib = root.join(LIB);
    let before = sha256(&lib);

    let plan = fix_in_root(
        &root,
        &["--dry-run", "--library", "/opt/rocm-7.2.4/lib/librccl.so.1"],
    );
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        plan.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    assert!(
        text.contains("owner     dpkg rccl 2.27.7.70204-1"),
        "{text}"
    );
    assert!(text.contains("install a .deb overlay"), "{text}");

    let started = std::time::Instant::now();
    let o = fix_in_root(
        &root,
        &["--yes", "--library", "/opt/rocm-7.2.4/lib/librccl.so.1"],
    );
    let fix_s = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let ours = format!("rcclfix-fix-{id}");
    assert!(err.contains(&format!("is diverted by {ours}")), "{err}");
    assert!(
        err.contains(&format!("dpkg --verify {ours} is clean")),
        "{err}"
    );
    assert!(err.contains("rcclfix verify --lib"), "{err}");
    let patched = sha256(&lib);
    assert_ne!(patched, before);
    ok(crate::support::rcclfix().arg("scan").arg(&lib));
    let div = in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]);
    assert!(div.contains(&format!("by {ours}")), "{div}");
    // The owner's files verify while diverted (dpkg checks the diverted copy), and the original
    // is kept byte for byte beside it.
    assert_eq!(in_root_ok(&root, &["dpkg", "--verify", "rccl"]), "");
    assert_eq!(
        sha256(&root.join("opt/rocm-7.2.4/lib/rcclfix-stock/librccl.so.1.0")),
        before
    );
    let list = String::from_utf8_lossy(&fix_in_root(&root, &["--list"]).stdout).into_owned();
    assert!(
        list.contains(&id) && list.contains("installed (dpkg overlay)"),
        "{list}"
    );

    let started = std::time::Instant::now();
    let u = fix_in_root(&root, &["--undo", &id]);
    let undo_s = started.elapsed().as_secs_f64();
    assert!(u.status.success(), "{}", String::from_utf8_lossy(&u.stderr));
    assert_eq!(sha256(&lib), before);
    assert_eq!(in_root_ok(&root, &["dpkg", "--verify", "rccl"]), "");
    let div = in_root_ok(&root, &["dpkg-divert", "--list", "*librccl*"]);
    assert!(!div.contains("rcclfix"), "{div}");
    let status = in_root_ok(
        &root,
        &["dpkg-query", "-W", "-f=${db:Status-Abbrev}", &ours],
    );
    assert!(!status.starts_with("ii"), "{status}");
    eprintln!(
        "dpkg layout: fix {fix_s:.2} s, undo {undo_s:.2} s; sha256 {before} before and after undo, {patched} fixed; dpkg --verify rccl clean throughout"
    );
}
