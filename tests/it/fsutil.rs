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
    for (signal, code) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("r.so");
        let st = interrupt_when_temp_appears(
            crate::support::rcclfix()
                .arg("patch")
                .arg(&lib)
                .arg("--out")
                .arg(&out),
            d.path(),
            signal,
        );
        assert_eq!(st.code(), Some(code), "SIG{signal} exits 128 + its number");
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

#[test]
fn temp_names_carry_the_pid() {
    use rcclfix::fsutil::stale_temp_pid;
    assert_eq!(
        stale_temp_pid(".rcclfix-1234-AbCd12.tmp"),
        Some((1234, false))
    );
    assert_eq!(
        stale_temp_pid(".rcclfix-partial-77-xYz123"),
        Some((77, true))
    );
    for other in [
        ".rcclfix-AbCd12.tmp",
        ".rcclfix-clone-AbCd12",
        ".rcclfix-12-.tmp",
        ".rcclfix--x.tmp",
        "rcclfix-12-x.tmp",
        ".rcclfix-1x2-abc.tmp",
    ] {
        assert_eq!(stale_temp_pid(other), None, "{other}");
    }
}

/// SIGKILL cannot be caught, so the killed run leaves its temporary file; the next run that writes
/// into the same folder removes it (its pid is gone), and leaves alone a temp name whose process is
/// alive and names that are not ours.
#[test]
fn the_next_run_removes_temp_files_a_sigkill_left() {
    let lib = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/patch/libdispatch-plain.so");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.so");
    let mut child = crate::support::rcclfix()
        .arg("patch")
        .arg(&lib)
        .arg("--out")
        .arg(&out)
        .env("RCCLFIX_TEST_PAUSE_MS", "60000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let start = std::time::Instant::now();
    while names().is_empty() {
        assert!(child.try_wait().unwrap().is_none(), "exited before writing");
        assert!(start.elapsed().as_secs() < 60, "no temporary file appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = names();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with(&format!(".rcclfix-{}-", child.id())) && left[0].ends_with(".tmp"),
        "{left:?}"
    );
    // Not stale: our own (live) pid; not ours: no pid in the name.
    let live = format!(".rcclfix-{}-AbCdEf.tmp", std::process::id());
    std::fs::write(d.path().join(&live), b"in flight").unwrap();
    std::fs::write(d.path().join(".rcclfix-AbCdEf.tmp"), b"not ours").unwrap();

    let st = crate::support::rcclfix()
        .arg("-q")
        .arg("patch")
        .arg(&lib)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    assert_eq!(
        names(),
        vec![live, ".rcclfix-AbCdEf.tmp".to_owned(), "r.so".to_owned()],
        "the killed run's temp file is gone, the others stay"
    );
}

/// A scratch folder in a lasting cache folder (the stock `.deb` download) carries the pid, and the
/// next one made there removes the one a killed run left, but not a live run's.
#[test]
fn a_partial_scratch_folder_a_killed_run_left_is_removed_by_the_next() {
    let d = tempfile::tempdir().unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let stale = d.path().join(format!(".rcclfix-partial-{gone_pid}-AbC123"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("librccl1_x_amd64.deb"), b"half").unwrap();
    let live = d
        .path()
        .join(format!(".rcclfix-partial-{}-LiVe12", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let t = rcclfix::fsutil::TempDir::partial_in(d.path()).unwrap();
    let name = t.path().file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!(".rcclfix-partial-{}-", std::process::id())),
        "{name}"
    );
    assert!(!stale.exists(), "the killed run's folder stays");
    assert!(live.exists());
    drop(t);
    assert!(live.exists());
}
