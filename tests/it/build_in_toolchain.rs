//! `rcclfix build` in a real toolchain (slow, `RCCLFIX_SLOW_TESTS=1`): the miniature HIP library
//! `tests/data/minihip` built through the real path (pinned clone, NDEBUG injection, the
//! debian-trixie toolchain under podman or bubblewrap, the scan gate), the artifact cache, the
//! post-link patch's refusal, `toolchain run` and `toolchain list`, and pinned toolchain images.
//! The fast recipe, source and pinning errors are in `build.rs`.

use std::path::Path;
use std::process::{Command, Output};

use crate::build::{
    assert_one_line_error, rcclfix, recipe, require_toolchain, scratch_home, stderr, test_engine,
    write_recipe,
};
use crate::support::{slow, Minihip};

fn build_minihip(t: &Path, home: &Path, recipe_file: &Path, engine: &str) -> Output {
    build_minihip_with(t, home, recipe_file, engine, &[])
}

fn build_minihip_with(
    t: &Path,
    home: &Path,
    recipe_file: &Path,
    engine: &str,
    extra: &[&str],
) -> Output {
    let out = t.join("out");
    let mut args = vec![
        "build",
        "--recipe",
        recipe_file.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--engine",
        engine,
    ];
    args.extend(extra);
    rcclfix(home, &args)
}

pub(crate) fn out_entries(t: &Path) -> Vec<String> {
    match std::fs::read_dir(t.join("out")) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => vec![],
    }
}

#[test]
fn minihip_without_injection_fails_the_gate_and_writes_nothing() {
    let Some(m) = Minihip::slow() else { return };
    let f = m.recipe("none.toml", "none");
    let Minihip { t, home, .. } = m;
    let o = build_minihip(t.path(), &home, &f, test_engine());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("scan gate failed"), "{err}");
    let gate_line = err
        .lines()
        .find(|l| l.starts_with("gfx1100:"))
        .unwrap_or_else(|| panic!("no gfx1100 line:\n{err}"));
    assert!(gate_line.contains("mh_assert"), "{gate_line}");
    assert!(!gate_line.contains("mh_plain"), "{gate_line}");
    assert!(
        out_entries(t.path()).is_empty(),
        "output left behind: {:?}",
        out_entries(t.path())
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn minihip_release_build_type_is_refused_before_the_build() {
    let Some(m) = Minihip::slow() else { return };
    // minihip's toolchain file shadows CMake's Release flags, like RCCL 2.27's: Release alone does
    // not put -DNDEBUG on the device compile, and the build.ninja check must say so.
    let f = m.recipe("rbt.toml", "release-build-type");
    let Minihip { t, home, .. } = m;
    let o = build_minihip(t.path(), &home, &f, test_engine());
    assert_one_line_error(
        &o,
        &["release-build-type", "-DNDEBUG", "1 of 1 device compile"],
    );
    let log = std::fs::read_to_string(home.join("work/minihip-gfx1100/build.log")).unwrap();
    assert!(log.contains("Compiling for gfx1100"), "configure ran");
    assert!(!log.contains("[1/"), "ninja must not have started:\n{log}");
    assert!(out_entries(t.path()).is_empty());
}

fn check_complete_output(t: &Path, commit: &str, engine: &str) {
    let dir = t.join("out/rccl-minihip-gfx1100");
    let lib = dir.join("librccl.so.1.0");
    assert!(lib.is_file());
    assert_eq!(
        std::fs::read_link(dir.join("librccl.so.1")).unwrap(),
        Path::new("librccl.so.1.0")
    );
    assert_eq!(
        std::fs::read_link(dir.join("librccl.so")).unwrap(),
        Path::new("librccl.so.1")
    );
    let m = rcclfix::manifest::Manifest::load(&dir.join("manifest.json")).unwrap();
    assert_eq!(m.commit, commit);
    assert_eq!(m.tag, "v0.1.0");
    assert_eq!(m.recipe, "minihip");
    assert_eq!(m.engine, engine);
    assert_eq!(m.toolchain, "debian-trixie");
    // The stamp's id, whatever the engine (podman's image id would follow each re-import).
    let stamp_id = rcclfix::container::Toolchain::local("debian-trixie").unwrap();
    assert_eq!(m.toolchain_id, stamp_id.id(), "engine {engine}");
    assert_eq!(m.targets, vec!["gfx1100"]);
    assert_eq!(m.ndebug_strategy, "compile-definition");
    assert!(m.ndebug_on_device_compile);
    assert_eq!(m.library.file, "librccl.so.1.0");
    assert_eq!(m.library.soname, "librccl.so.1");
    assert_eq!(
        m.library.sha256,
        rcclfix::fsutil::sha256_file(&lib).unwrap()
    );
    assert_eq!(m.library.size, std::fs::metadata(&lib).unwrap().len());
    assert_eq!(m.gate.get("gfx1100").map(String::as_str), Some("clean"));
    assert!(m.cmake_args.iter().any(|a| a == "-DGPU_TARGETS=gfx1100"));
    assert!(m.cmake_args.iter().any(|a| a == "-DAMDGPU_TARGETS=gfx1100"));
    assert!(m.build_seconds > 0.0);
    let scan: rcclfix::scan::ScanReport =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scan.json")).unwrap()).unwrap();
    for f in ["manifest.json", "scan.json", "build.log"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "{f} mode {mode:o}");
    }
    let paths: Vec<&str> = scan.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        vec!["librccl.so.1.0"],
        "scan.json names the file in the output folder"
    );
    let kernels: Vec<&str> = scan
        .files
        .iter()
        .flat_map(|f| &f.images)
        .filter(|i| i.processor == "gfx1100")
        .flat_map(|i| &i.kernels)
        .map(|k| k.name.as_str())
        .collect();
    assert!(
        kernels.contains(&"mh_assert") && kernels.contains(&"mh_plain"),
        "{kernels:?}"
    );
    let log = std::fs::read_to_string(dir.join("build.log")).unwrap();
    assert!(
        log.contains("device compile lines, -DNDEBUG on 1; offload targets in build.ninja: gfx1100; `Compiling for` line: gfx1100"),
        "{log}"
    );
    assert!(
        log.contains("Linking CXX shared library librccl.so.1.0"),
        "{log}"
    );
    let mut entries = out_entries(t);
    entries.sort();
    assert_eq!(
        entries,
        vec!["rccl-minihip-gfx1100"],
        "only the committed folder, no partial left over"
    );
}

#[test]
fn minihip_with_injection_passes_the_gate_and_writes_a_complete_folder() {
    let Some(m) = Minihip::slow() else { return };
    let f = m.recipe("cd.toml", "compile-definition");
    let Minihip {
        t, home, commit, ..
    } = m;
    let engine = test_engine();
    let o = build_minihip(t.path(), &home, &f, engine);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        t.path()
            .join("out/rccl-minihip-gfx1100")
            .display()
            .to_string()
    );
    check_complete_output(t.path(), &commit, engine);

    // A second build with --rebuild reuses the source cache (no "Cloning"), not the artifact
    // cache, and replaces the folder atomically; under bubblewrap too when podman was the first
    // engine.
    let second = if engine == "podman" && which::which("bwrap").is_ok() {
        "bubblewrap"
    } else {
        engine
    };
    let o = build_minihip_with(t.path(), &home, &f, second, &["--rebuild"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("Cloning"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("Reused"), "{}", stderr(&o));
    check_complete_output(t.path(), &commit, second);
}

#[test]
fn minihip_artifact_cache_reuses_and_rebuilds_on_a_changed_input_or_a_tampered_library() {
    let Some(Minihip {
        t,
        home,
        repo,
        commit,
    }) = Minihip::slow()
    else {
        return;
    };
    let text = recipe(&repo, Some(&commit), "compile-definition", "");
    let f = write_recipe(t.path(), "cd.toml", &text);
    let engine = test_engine();
    let dir = t.path().join("out/rccl-minihip-gfx1100");
    let o = build_minihip(t.path(), &home, &f, engine);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("Reused"), "{}", stderr(&o));
    let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
    let m = rcclfix::manifest::Manifest::load(&dir.join("manifest.json")).unwrap();
    let rec = m.cache.expect("manifest.cache is written");
    assert_eq!(rec.key.len(), 64);
    let lib_mtime = std::fs::metadata(dir.join("librccl.so.1.0"))
        .unwrap()
        .modified()
        .unwrap();

    // Same inputs: reused, same folder, gate re-run, nothing rewritten.
    let o = build_minihip(t.path(), &home, &f, engine);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        dir.display().to_string()
    );
    let reused = err
        .lines()
        .find(|l| l.contains("Reused"))
        .unwrap_or_else(|| panic!("no Reused line:\n{err}"));
    assert!(reused.contains(&dir.display().to_string()), "{reused}");
    assert!(reused.contains(" UTC"), "says when: {reused}");
    assert!(reused.contains("gate re-run: gfx1100 clean"), "{reused}");
    assert!(!err.contains("Configuring"), "{err}");
    assert_eq!(std::fs::read(dir.join("manifest.json")).unwrap(), manifest);
    assert_eq!(
        std::fs::metadata(dir.join("librccl.so.1.0"))
            .unwrap()
            .modified()
            .unwrap(),
        lib_mtime
    );

    // A changed key input (a CMake option): rebuilt, and the changed inputs are named.
    let f2 = write_recipe(
        t.path(),
        "cd2.toml",
        &format!("{text}cmake_options = [\"-DMH_UNUSED_OPTION=1\"]\n"),
    );
    let o = build_minihip(t.path(), &home, &f2, engine);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let why = err
        .lines()
        .find(|l| l.contains("Rebuilding"))
        .unwrap_or_else(|| panic!("no Rebuilding line:\n{err}"));
    assert!(
        why.contains("cmake_args") && why.contains("recipe"),
        "{why}"
    );
    assert!(err.contains("Configuring"), "{err}");
    let m2 = rcclfix::manifest::Manifest::load(&dir.join("manifest.json")).unwrap();
    assert_ne!(m2.cache.unwrap().key, rec.key);
    assert!(m2.cmake_args.iter().any(|a| a == "-DMH_UNUSED_OPTION=1"));

    // A tampered cached library: rebuilt, saying why.
    let lib = dir.join("librccl.so.1.0");
    let mut bytes = std::fs::read(&lib).unwrap();
    bytes.push(0);
    std::fs::write(&lib, &bytes).unwrap();
    let o = build_minihip(t.path(), &home, &f2, engine);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let why = err
        .lines()
        .find(|l| l.contains("Rebuilding"))
        .unwrap_or_else(|| panic!("no Rebuilding line:\n{err}"));
    assert!(
        why.contains("librccl.so.1.0") && why.contains("modified after the build"),
        "{why}"
    );
    let m3 = rcclfix::manifest::Manifest::load(&dir.join("manifest.json")).unwrap();
    assert_eq!(
        m3.library.sha256,
        rcclfix::fsutil::sha256_file(&lib).unwrap()
    );
}

#[test]
fn toolchain_list_names_every_description() {
    let t = tempfile::tempdir().unwrap();
    let o = rcclfix(t.path(), &["toolchain", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for name in ["debian-trixie", "debian-sid"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{out}"));
        assert!(
            row.contains("not built"),
            "a fresh RCCLFIX_HOME has nothing built: {row}"
        );
    }
}

/// `toolchain run` under every engine present: the toolchain's own tools, the exit status passed
/// through, the current directory visible, and no network but loopback.
#[test]
fn toolchain_run_uses_the_rootfs_without_network() {
    if !slow() {
        return;
    }
    require_toolchain();
    let t = tempfile::tempdir().unwrap();
    let home = scratch_home(t.path());
    std::fs::write(t.path().join("hello.txt"), "hi\n").unwrap();
    let mut engines = vec![];
    if which::which("podman").is_ok() {
        engines.push("podman");
    }
    if which::which("bwrap").is_ok() {
        engines.push("bubblewrap");
    }
    assert!(
        !engines.is_empty(),
        "RCCLFIX_SLOW_TESTS=1 but neither podman nor bwrap is installed"
    );
    for engine in engines {
        let run = |argv: &[&str]| {
            let mut args = vec![
                "toolchain",
                "run",
                "--engine",
                engine,
                "debian-trixie",
                "--",
            ];
            args.extend(argv);
            crate::support::rcclfix()
                .args(&args)
                .env("RCCLFIX_HOME", &home)
                .current_dir(t.path())
                .output()
                .unwrap()
        };
        let o = run(&["hipcc", "--version"]);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("HIP version: 5.7"),
            "{engine}"
        );
        let o = run(&["llvm-readelf", "--version"]);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("LLVM version 17"),
            "{engine}: unsuffixed llvm tools on PATH"
        );
        let o = run(&["cat", "hello.txt"]);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "hi\n",
            "{engine}: {}",
            stderr(&o)
        );
        assert_eq!(
            run(&["sh", "-c", "exit 3"]).status.code(),
            Some(3),
            "{engine}"
        );
        let o = run(&["cat", "/proc/net/dev"]);
        let ifaces: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(2)
            .filter_map(|l| l.split(':').next().map(|s| s.trim().to_owned()))
            .collect();
        assert_eq!(ifaces, vec!["lo"], "{engine}: network must be off");
    }
}

#[test]
fn minihip_post_link_patch_refuses_a_live_assert_and_writes_nothing() {
    // `post_link_patch = true` runs `rcclfix patch` on the built library before the gate. With no
    // NDEBUG the assert kernel really reaches hostcall, so the patch must refuse, naming it.
    let Some(Minihip {
        t,
        home,
        repo,
        commit,
    }) = Minihip::slow()
    else {
        return;
    };
    let text = recipe(&repo, Some(&commit), "none", "") + "post_link_patch = true\n";
    let f = write_recipe(t.path(), "patch.toml", &text);
    let o = build_minihip(t.path(), &home, &f, test_engine());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("post-link patch of"), "{err}");
    assert!(err.contains("refusing to patch"), "{err}");
    assert!(err.contains("mh_assert"), "{err}");
    assert!(
        out_entries(t.path()).is_empty(),
        "output left behind: {:?}",
        out_entries(t.path())
    );
}

#[test]
fn toolchain_run_under_bubblewrap_works_from_a_folder_outside_tmp() {
    // bwrap cannot create a mount point inside the read-only rootfs (e.g. under /var): the
    // current folder then appears as /work, and relative paths still work.
    if !slow() {
        return;
    }
    require_toolchain();
    if which::which("bwrap").is_err() {
        panic!("RCCLFIX_SLOW_TESTS=1 but bwrap is not installed\nhelp: apt-get install bubblewrap");
    }
    let t = tempfile::tempdir_in("/var/tmp").unwrap();
    let home = scratch_home(t.path());
    std::fs::write(t.path().join("hello.txt"), "hi\n").unwrap();
    let o = crate::support::rcclfix()
        .args([
            "toolchain",
            "run",
            "--engine",
            "bubblewrap",
            "debian-trixie",
            "--",
            "sh",
            "-c",
            "pwd; cat hello.txt",
        ])
        .env("RCCLFIX_HOME", &home)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "/work\nhi\n",
        "{}",
        stderr(&o)
    );
}

/// `tar -C root -cf tar .`: a folder as the rootfs tar an engine imports.
fn tar_of(root: &Path, tar: &Path) {
    let st = Command::new("tar")
        .arg("-C")
        .arg(root)
        .arg("-cf")
        .arg(tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success(), "tar of {}", root.display());
}

/// Images this test made in the engine's store, removed when it ends.
struct TestImages(Vec<String>);

impl Drop for TestImages {
    fn drop(&mut self) {
        for r in &self.0 {
            let _ = Command::new("podman").args(["rmi", "-f", r]).output();
        }
    }
}

fn podman(args: &[&str]) -> String {
    let o = Command::new("podman").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

#[test]
fn toolchain_image_digest_is_pinned_and_a_retagged_image_is_refused() {
    if !slow() || which::which("podman").is_err() {
        return;
    }
    use rcclfix::container::{toolchain, Engine, EngineKind, Toolchain};
    let t = tempfile::tempdir().unwrap();
    let name = format!("localhost/rcclfix-test-digest-{}", std::process::id());
    let reference = format!("{name}:v1");
    let mut images = TestImages(vec![]);
    // Two different one-file images, imported from tars this test writes.
    for (suffix, body) in [("a", "first\n"), ("b", "second\n")] {
        let root = t.path().join(suffix);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("content"), body).unwrap();
        let tar = t.path().join(format!("{suffix}.tar"));
        tar_of(&root, &tar);
        let r = format!("{name}-{suffix}:latest");
        podman(&["import", tar.to_str().unwrap(), &r]);
        images.0.push(r);
    }
    images.0.push(reference.clone());
    podman(&["tag", &images.0[0], &reference]);
    let digest_of = |r: &str| podman(&["image", "inspect", "--format", "{{.Digest}}", r]);
    let (da, db) = (digest_of(&images.0[0]), digest_of(&images.0[1]));
    assert_ne!(da, db);

    let containerfile = "containers/rocm-7.2.1/Containerfile";
    let mut tc = Toolchain::image(&reference, containerfile);
    let engine = Engine::select(Some(EngineKind::Podman), &tc.root(), tc.name()).unwrap();
    let lock = t.path().join("home/rcclfix.lock");

    // --locked refuses to pin.
    let err = toolchain::pin_base_image(&engine, &mut tc, true, &lock).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("--locked refuses to pin") && msg.contains(&da),
        "{msg}"
    );
    assert!(!lock.exists());

    // First use pins the digest beside the commit pins.
    let got = toolchain::pin_base_image(&engine, &mut tc, false, &lock).unwrap();
    assert_eq!(got.as_deref(), Some(da.as_str()));
    assert_eq!(tc.base_digest(), Some(da.as_str()));
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(text.contains("[[image]]") && text.contains(&da), "{text}");
    let parsed = rcclfix::recipe::Lockfile::load(&lock).unwrap();
    assert_eq!(parsed.image_digest(&reference), Some(da.as_str()));
    // The same image again is fine, also with --locked.
    let mut tc2 = Toolchain::image(&reference, containerfile);
    toolchain::pin_base_image(&engine, &mut tc2, true, &lock).unwrap();

    // The tag now names another image: refused, naming both digests; the pin stays.
    podman(&["tag", &images.0[1], &reference]);
    let mut tc3 = Toolchain::image(&reference, containerfile);
    let err = toolchain::pin_base_image(&engine, &mut tc3, false, &lock).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&da) && msg.contains(&db) && msg.contains(&reference),
        "{msg}"
    );
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), text);
    drop(images);
}

/// `prove`'s peak RSS counts the container's processes under podman as under bubblewrap: a
/// 300 MiB `dd` buffer held for 5 s inside the toolchain shows in the sampled peak of
/// this test's process tree under both engines (under podman the container runs under `conmon`,
/// not under the `rcclfix` that started it).
#[test]
fn peak_rss_counts_the_container_under_every_engine() {
    if !slow() {
        return;
    }
    require_toolchain();
    let t = tempfile::tempdir().unwrap();
    let home = scratch_home(t.path());
    let mut engines = vec![];
    for (engine, program) in [("podman", "podman"), ("bubblewrap", "bwrap")] {
        if which::which(program).is_ok() {
            engines.push(engine);
        }
    }
    assert!(!engines.is_empty(), "neither podman nor bwrap is installed");
    for engine in engines {
        let sampler = rcclfix::build::rss::RssSampler::start();
        let o = crate::support::rcclfix()
            .args([
                "-q",
                "toolchain",
                "run",
                "--engine",
                engine,
                "debian-trixie",
            ])
            // dd fills its 300 MiB buffer, then blocks writing it into a pipe nobody reads until
            // `sleep` exits: the buffer stays resident for 5 s, whatever the machine's speed, so
            // the once-a-second sampler sees it (a `dd` to /dev/null ended between two samples on
            // a fast machine).
            .args([
                "--",
                "sh",
                "-c",
                "dd if=/dev/zero bs=300M count=1 status=none | sleep 5",
            ])
            .env("RCCLFIX_HOME", &home)
            .current_dir(t.path())
            .output()
            .unwrap();
        let peak = sampler.take_peak();
        drop(sampler);
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        assert!(
            peak >= 280 << 20,
            "{engine}: sampled peak {peak} bytes, below the container's 300 MiB buffer"
        );
    }
}

/// Toolchain images carry the `RCCLFIX_HOME` they were imported for, and pruning in one home
/// removes only that home's other tags: never another home's image, never an unlabelled one.
#[test]
fn pruning_toolchain_images_keeps_other_homes_images() {
    if !slow() || which::which("podman").is_err() {
        return;
    }
    use rcclfix::container::{Engine, EngineKind, Toolchain};
    let t = tempfile::tempdir().unwrap();
    let repo = format!("localhost/rcclfix-test-homes-{}", std::process::id());
    let root = t.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("content"), "x\n").unwrap();
    let tar = t.path().join("root.tar");
    tar_of(&root, &tar);
    let tc = Toolchain::image(&format!("{repo}:a1"), "containers/rocm-7.2.1/Containerfile");
    let engine = Engine::select(Some(EngineKind::Podman), &tc.root(), tc.name()).unwrap();
    let (a, b) = ("/home/a user/.cache/rcclfix", "/tmp/rcclfix home b");
    let mut images = TestImages(vec![]);
    for (tag, home) in [
        ("a1", Some(a)),
        ("a2", Some(a)),
        ("b1", Some(b)),
        ("b2", Some(b)),
        ("none", None),
    ] {
        let r = format!("{repo}:{tag}");
        match home {
            Some(h) => engine.import_image(&tar, &r, h).unwrap(),
            None => {
                podman(&["import", tar.to_str().unwrap(), &r]);
            }
        }
        images.0.push(r);
    }
    assert_eq!(
        engine.image_home(&format!("{repo}:a1")).as_deref(),
        Some(rcclfix::container::engine::label_value(a).as_str())
    );
    assert_eq!(engine.image_home(&format!("{repo}:none")), None);
    let removed = engine.remove_other_tags(&repo, &format!("{repo}:b2"), b);
    assert_eq!(removed, vec![format!("{repo}:b1")]);
    let left = podman(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    let mut left: Vec<&str> = left.lines().filter(|l| l.starts_with(&repo)).collect();
    left.sort();
    assert_eq!(
        left,
        ["a1", "a2", "b2", "none"]
            .map(|x| format!("{repo}:{x}"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    drop(images);
}
