//! Atomic output: files and folders appear whole, with ordinary permissions, or not at all.

use std::os::unix::fs::PermissionsExt;

use rcclfix::fsutil::{atomic_write, AtomicDir};

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn atomic_write_makes_an_ordinary_file_and_keeps_an_existing_mode() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("manifest.json");
    atomic_write(&f, b"{}\n").unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"{}\n");
    assert_eq!(mode(&f), 0o644);
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    atomic_write(&f, b"[]\n").unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"[]\n");
    assert_eq!(mode(&f), 0o600);
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("manifest.json")],
        "no temp file left behind"
    );
}

#[test]
fn atomic_dir_appears_only_on_commit_and_vanishes_when_dropped() {
    let d = tempfile::tempdir().unwrap();
    let dest = d.path().join("out/rccl-1.2.3-gfx1100");
    {
        let dir = AtomicDir::new(&dest).unwrap();
        std::fs::write(dir.path().join("build.log"), "half").unwrap();
        assert!(!dest.exists());
    }
    assert!(!dest.exists());
    assert_eq!(
        std::fs::read_dir(d.path().join("out")).unwrap().count(),
        0,
        "dropped folder removed"
    );
    let dir = AtomicDir::new(&dest).unwrap();
    std::fs::write(dir.path().join("build.log"), "whole").unwrap();
    let got = dir.commit().unwrap();
    assert_eq!(got, dest);
    assert_eq!(
        std::fs::read_to_string(dest.join("build.log")).unwrap(),
        "whole"
    );
    assert_eq!(mode(&dest), 0o755);
}
