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
    assert!(
        !d.path().join("out").exists(),
        "dropped folder removed, and the parent it created while still empty"
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

/// Start `cmd` paused (test hook `RCCLFIX_TEST_PAUSE_MS`) after its temporary output exists, wait
/// until a `.rcclfix-*` entry appears under `watch`, send `signal`, and return the exit status.
pub fn interrupt_when_temp_appears(
    cmd: &mut std::process::Command,
    watch: &std::path::Path,
    signal: &str,
) -> std::process::ExitStatus {
    let mut child = cmd
        .env("RCCLFIX_TEST_PAUSE_MS", "60000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let has_temp = || {
        std::fs::read_dir(watch).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(".rcclfix-"))
        })
    };
    let start = std::time::Instant::now();
    while !has_temp() {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("exited before writing a temporary file: {st}: {err}");
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no temporary file appeared in {}",
            watch.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let k = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(k.success());
    let st = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("interrupted; removed partial output"), "{err}");
    st
}

#[test]
fn interrupted_patch_leaves_nothing() {
    let lib = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/patch/libdispatch-plain.so");
    for signal in ["INT", "TERM"] {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("r.so");
        let st = interrupt_when_temp_appears(
            std::process::Command::new(env!("CARGO_BIN_EXE_rcclfix"))
                .arg("patch")
                .arg(&lib)
                .arg("--out")
                .arg(&out),
            d.path(),
            signal,
        );
        assert_eq!(st.code(), Some(130), "SIG{signal}");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert!(left.is_empty(), "SIG{signal} left {left:?}");
    }
}

#[test]
fn scratch_temp_dir_is_removed_on_drop() {
    let d = tempfile::tempdir().unwrap();
    let t = rcclfix::fsutil::TempDir::new_in(d.path(), ".rcclfix-clone-").unwrap();
    std::fs::write(t.path().join("repo.git"), b"x").unwrap();
    assert!(t.path().starts_with(d.path()));
    drop(t);
    assert!(std::fs::read_dir(d.path()).unwrap().next().is_none());
}
