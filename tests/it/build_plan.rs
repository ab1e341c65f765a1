//! The build plan (`rcclfix build --plan`) and its execution between configure and the output
//! folder, without a container or a toolchain: a recording runner checks each step's argv, mounts
//! and environment against the plan and plays the toolchain's part — configure writes a
//! `build.ninja` and prints the `Compiling for` line, ninja puts one of our own compiled fixture
//! libraries (`tests/fixtures/trixie/*.so`, `tests/fixtures/README.md`) where the link would — so
//! the real checks, the real scan gate and the real output assembly run on it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use rcclfix::build::exec::{execute, Provenance, Runner};
use rcclfix::build::plan::{plan, BuildPlan, HostFacts, PlanMount};
use rcclfix::build::{BuildOptions, Outcome};
use rcclfix::container::RunSpec;
use rcclfix::recipe::Recipe;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

pub(crate) fn minihip(ndebug: &str, extra: &str) -> Recipe {
    let text = format!(
        r#"rccl_version = "0.1.0"
name = "minihip"
rocm_release = "0.0.0"
status = "expected"
{extra}
[source]
git = "/nonexistent/minihip.git"
tag = "v0.1.0"
commit = "{COMMIT}"

[toolchain]
name = "debian-trixie"
cxx = "/usr/bin/hipcc"
rocm_path = "/usr"

[build]
targets = ["gfx1100"]
ndebug = "{ndebug}"
link_ram_gib = 0.5
"#
    );
    Recipe::parse(&text, "minihip.toml").unwrap()
}

pub(crate) fn host(home: &Path) -> HostFacts {
    HostFacts {
        home: home.to_owned(),
        cores: 2,
        available_ram_gib: Some(16.0),
        ccache_dir: None,
        ccache_maxsize: None,
    }
}

pub(crate) fn options(out: &Path) -> BuildOptions {
    BuildOptions {
        out_dir: out.to_owned(),
        ..Default::default()
    }
}

fn quiet() -> rcclfix::ui::Ui {
    rcclfix::ui::Ui {
        quiet: true,
        verbose: 0,
        color: false,
    }
}

fn mount(host: PathBuf, guest: &str) -> PlanMount {
    PlanMount {
        host,
        guest: guest.into(),
        writable: true,
    }
}

/// A `build.ninja` with one device compile for `arch` (with `defines` on it) and the link.
fn ninja_text(arch: &str, defines: &str) -> String {
    format!(
        "build CMakeFiles/minihip.dir/src/k.cpp.o: CXX_COMPILER__minihip_unscanned_Release /src/src/k.cpp\n  DEFINES = -D__HIP_PLATFORM_AMD__=1 {defines}\n  FLAGS = -O3 -fPIC -x hip --offload-arch={arch}\n\nbuild librccl.so.1.0: CXX_SHARED_LIBRARY_LINKER__minihip_Release CMakeFiles/minihip.dir/src/k.cpp.o\n  LINK_FLAGS = --offload-arch={arch}\n"
    )
}

/// Plays the toolchain: records every spec, checks it against the plan, and writes what cmake
/// and ninja would.
pub(crate) struct Recording {
    plan: BuildPlan,
    calls: Vec<RunSpec>,
    build_ninja: String,
    configure_output: String,
    library: PathBuf,
    has_ccache: bool,
    /// ninja leaves `.ninja_log` as a symbolic link to this host file (a hostile build).
    ninja_log_link: Option<PathBuf>,
    /// How long the pretend ninja runs (long enough for load samples, which come once a second).
    pub(crate) ninja_time: std::time::Duration,
    /// A hostile build step: makes the live `.ninja_log` (its path given) before ninja's first
    /// status line, which polls it; ninja then writes no log of its own.
    pub(crate) live_ninja_log: Option<fn(&Path)>,
}

impl Recording {
    pub(crate) fn new(plan: &BuildPlan, library: &str) -> Recording {
        Recording {
            plan: plan.clone(),
            calls: vec![],
            build_ninja: ninja_text("gfx1100", "-DNDEBUG"),
            configure_output: "-- The CXX compiler identification is Clang 17.0.6\n-- Compiling for gfx1100\n-- Configuring done".into(),
            library: fixture(library),
            has_ccache: false,
            ninja_log_link: None,
            ninja_time: std::time::Duration::ZERO,
            live_ninja_log: None,
        }
    }

    fn host_of(spec: &RunSpec, guest: &str) -> PathBuf {
        spec.mounts
            .iter()
            .find(|m| m.guest == guest)
            .unwrap_or_else(|| panic!("no {guest} mount in {spec:?}"))
            .host
            .clone()
    }
}

impl Runner for Recording {
    fn run_streamed(
        &mut self,
        spec: &RunSpec,
        log: &mut dyn Write,
        on_line: &mut dyn FnMut(&str),
    ) -> anyhow::Result<()> {
        self.calls.push(spec.clone());
        // Only the host toolchain, where no engine can cut it, has the network.
        let on_host = self.plan.toolchain.kind == "host";
        assert_eq!(spec.network, on_host, "network on a build step: {spec:?}");
        assert_eq!(spec.tmp.as_deref(), Some(self.plan.work.tmp.as_path()));
        // The build folder is the working directory, the checkout is mounted too.
        let build = Self::host_of(spec, &spec.workdir);
        assert_eq!(build, self.plan.work.build);
        let src_guest = if on_host {
            self.plan.work.src.display().to_string()
        } else {
            "/src".into()
        };
        assert_eq!(Self::host_of(spec, &src_guest), self.plan.work.src);
        let mut say = |l: &str| {
            writeln!(log, "{l}").unwrap();
            on_line(l);
        };
        match spec.argv[0].as_str() {
            "cmake" => {
                assert_eq!(spec.argv, self.plan.step("configure").argv);
                std::fs::write(build.join("build.ninja"), &self.build_ninja).unwrap();
                for l in self.configure_output.clone().lines() {
                    say(l);
                }
            }
            "ninja" => {
                assert_eq!(spec.argv, self.plan.step("build").argv);
                assert!(spec
                    .env
                    .iter()
                    .any(|(k, v)| k == "NINJA_STATUS" && v.starts_with('[')));
                if let Some(make) = self.live_ninja_log {
                    make(&build.join(".ninja_log"));
                }
                say("[1/2 1] Building HIP object CMakeFiles/minihip.dir/src/k.cpp.o");
                std::thread::sleep(self.ninja_time);
                std::fs::copy(&self.library, build.join("librccl.so.1.0")).unwrap();
                say("[2/2 0] Linking HIP shared library librccl.so.1.0");
                match &self.ninja_log_link {
                    _ if self.live_ninja_log.is_some() => {}
                    Some(to) => std::os::unix::fs::symlink(to, build.join(".ninja_log")).unwrap(),
                    None => std::fs::write(
                        build.join(".ninja_log"),
                        "# ninja log v5\n0\t1200\t0\tCMakeFiles/minihip.dir/src/k.cpp.o\t1\n1200\t1500\t0\tlibrccl.so.1.0\t2\n",
                    )
                    .unwrap(),
                }
            }
            other => panic!("unexpected step {other}: {spec:?}"),
        }
        Ok(())
    }

    fn read(&mut self, spec: &RunSpec) -> anyhow::Result<String> {
        self.calls.push(spec.clone());
        assert_eq!(spec.argv, ["ccache", "--version"]);
        if self.has_ccache {
            Ok("ccache version 4.10\n".into())
        } else {
            anyhow::bail!("ccache: not found")
        }
    }
}

/// A work folder as `build` leaves it before the steps: `src` with the project, `build`, `tmp`.
pub(crate) fn work_folder(p: &BuildPlan) {
    std::fs::create_dir_all(&p.work.project).unwrap();
    std::fs::write(
        p.work.project.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(minihip CXX)\nadd_library(rccl SHARED src/k.cpp)\n",
    )
    .unwrap();
    std::fs::create_dir_all(&p.work.build).unwrap();
    std::fs::create_dir_all(&p.work.tmp).unwrap();
}

fn provenance() -> Provenance {
    Provenance {
        commit: COMMIT.into(),
        origin: "/nonexistent/minihip.git".into(),
        patches: vec![],
        toolchain: "debian-trixie".into(),
        toolchain_id: "stamp-0".into(),
        toolchain_digest: None,
        toolchain_packages: vec![],
        engine: "recording".into(),
        key: None,
    }
}

pub(crate) fn run(
    p: &BuildPlan,
    recipe: &Recipe,
    runner: &mut Recording,
) -> anyhow::Result<Outcome> {
    execute(
        p.clone(),
        recipe,
        &provenance(),
        runner,
        &quiet(),
        std::time::Instant::now(),
    )
}

#[test]
fn the_plan_names_every_step_with_its_argv_mounts_and_environment() {
    let recipe = minihip("compile-definition", "");
    let p = plan(&recipe, &options(Path::new("/o")), &host(Path::new("/h"))).unwrap();
    let work = PathBuf::from("/h/work/minihip-gfx1100");
    assert_eq!(p.targets, ["gfx1100"]);
    assert_eq!(p.work.root, work);
    assert_eq!(p.work.src, work.join("src"));
    assert_eq!(p.work.build, work.join("build"));
    assert_eq!(
        p.inject_compile_definition.as_deref(),
        Some(work.join("src").join("CMakeLists.txt").as_path())
    );
    assert_eq!(p.output.dir, Path::new("/o/rccl-minihip-gfx1100"));
    assert!(p.output.written && p.cacheable && !p.control);
    assert_eq!(
        p.timing_record,
        Path::new("/h/records/minihip-gfx1100.ninja_log")
    );
    assert_eq!(p.source.commit.as_deref(), Some(COMMIT));
    let names: Vec<&str> = p.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["configure", "build"]);
    let configure = p.step("configure");
    assert_eq!(
        configure.argv[..12],
        [
            "cmake",
            "-S",
            "/src",
            "-B",
            "/build",
            "-G",
            "Ninja",
            "-DCMAKE_CXX_COMPILER=/usr/bin/hipcc",
            "-DROCM_PATH=/usr",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGPU_TARGETS=gfx1100",
            "-DAMDGPU_TARGETS=gfx1100",
        ]
    );
    assert_eq!(configure.argv[1..], p.cmake_args[..]);
    let mounts = vec![
        mount(work.join("src"), "/src"),
        mount(work.join("build"), "/build"),
    ];
    for s in &p.steps {
        assert_eq!(s.mounts, mounts, "{}", s.name);
        assert!(!s.network, "{}", s.name);
        assert_eq!(s.workdir, "/build");
        assert_eq!(s.tmp.as_deref(), Some(work.join("tmp").as_path()));
    }
    assert!(configure.env.is_empty());
    // -j from the host's 2 cores (RAM is plenty).
    assert_eq!(p.step("build").argv, ["ninja", "-C", "/build", "-j2"]);
    assert_eq!(p.step("build").env[0].0, "NINJA_STATUS");
    // The JSON is the plan, exactly.
    let back: BuildPlan = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn a_control_plan_and_a_ccache_plan_differ_only_where_they_should() {
    let recipe = minihip("none", "");
    let mut o = options(Path::new("/o"));
    o.control = true;
    o.targets = vec!["gfx1100".into(), "gfx1101".into()];
    o.jobs = Some(7);
    let c = plan(&recipe, &o, &host(Path::new("/h"))).unwrap();
    assert_eq!(
        c.work.root,
        Path::new("/h/work/control/minihip-gfx1100+gfx1101")
    );
    // The control's steps are never the fix's estimate: each keeps its own timing record.
    assert_eq!(
        c.timing_record,
        Path::new("/h/records/control/minihip-gfx1100+gfx1101.ninja_log")
    );
    o.control = false;
    assert_eq!(
        plan(&recipe, &o, &host(Path::new("/h")))
            .unwrap()
            .timing_record,
        Path::new("/h/records/minihip-gfx1100+gfx1101.ninja_log")
    );
    assert!(!c.output.written && !c.cacheable);
    assert!(c.inject_compile_definition.is_none());
    assert_eq!(c.step("build").argv[3], "-j7");
    assert!(c
        .step("configure")
        .argv
        .contains(&"-DGPU_TARGETS=gfx1100;gfx1101".to_owned()));

    let mut h = host(Path::new("/h"));
    let plain = plan(&recipe, &options(Path::new("/o")), &h).unwrap();
    h.ccache_dir = Some("/cc".into());
    h.ccache_maxsize = Some("5G".into());
    let cc = plan(&recipe, &options(Path::new("/o")), &h).unwrap();
    for s in &cc.steps {
        assert_eq!(s.mounts[2], mount("/cc".into(), "/ccache"));
        assert!(s.env.contains(&("CCACHE_DIR".into(), "/ccache".into())));
        assert!(s.env.contains(&("CCACHE_MAXSIZE".into(), "5G".into())));
    }
    assert_eq!(
        cc.step("configure").argv.last().unwrap(),
        "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
    );
    // The cache key's CMake arguments never carry the launcher.
    assert_eq!(cc.cmake_args, plain.cmake_args);
    assert_eq!(cc.without_ccache(), plain.clone().without_ccache());
    assert_eq!(plain.clone().without_ccache(), plain);
}

#[test]
fn planning_refuses_what_build_refuses() {
    let h = host(Path::new("/h"));
    let recipe = minihip("none", "");
    let mut o = options(Path::new("/o"));
    o.targets = vec!["gfx9999".into()];
    let err = plan(&recipe, &o, &h).unwrap_err();
    assert!(format!("{err:#}").contains("gfx9999"), "{err:#}");
    // An unknown toolchain fails the plan (it used to fail after the fetch, announcing a
    // toolchain build first).
    let mut unknown = minihip("none", "");
    unknown.toolchain.name = Some("debian-nosuch".into());
    let err = plan(&unknown, &options(Path::new("/o")), &h).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("recipe minihip: unknown toolchain.name \"debian-nosuch\" (known: "),
        "{err}"
    );
    let mut cf =
        rcclfix::recipe::Recipe::parse(include_str!("../../recipes/2.27.7.toml"), "2.27.7.toml")
            .unwrap();
    cf.toolchain.containerfile = Some("containers/nosuch/Containerfile".into());
    let mut o = options(Path::new("/o"));
    o.experimental = true;
    let err = plan(&cf, &o, &h).unwrap_err();
    assert!(
        err.to_string().contains("unknown toolchain.containerfile"),
        "{err}"
    );
    let mut exp = minihip("none", "");
    exp.status = rcclfix::recipe::Status::Experimental;
    let err = plan(&exp, &options(Path::new("/o")), &h).unwrap_err();
    assert!(err.to_string().contains("--experimental"), "{err}");
    let mut o = options(Path::new("/o"));
    o.experimental = true;
    plan(&exp, &o, &h).unwrap();
}

#[test]
fn executing_a_plan_runs_configure_then_ninja_and_writes_a_complete_output_folder() {
    let t = tempfile::tempdir().unwrap();
    let recipe = minihip("compile-definition", "");
    let p = plan(
        &recipe,
        &options(&t.path().join("out")),
        &host(&t.path().join("home")),
    )
    .unwrap();
    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    r.ninja_time = std::time::Duration::from_millis(2600);
    let dir = match run(&p, &recipe, &mut r).unwrap() {
        Outcome::Built(d) => d,
        o => panic!("{o:?}"),
    };
    assert_eq!(dir, p.output.dir);
    // configure, then ninja, each exactly as planned (no ccache probe: none was planned).
    let argv0: Vec<&str> = r.calls.iter().map(|c| c.argv[0].as_str()).collect();
    assert_eq!(argv0, ["cmake", "ninja"]);
    // NDEBUG was injected after project(...) before configure.
    let cml = std::fs::read_to_string(p.work.project.join("CMakeLists.txt")).unwrap();
    assert!(
        cml.contains("project(minihip CXX)\nadd_compile_definitions(NDEBUG)"),
        "{cml}"
    );
    // The output folder: the library, its link name, the reports and the logs.
    let lib = dir.join("librccl.so.1.0");
    assert_eq!(
        rcclfix::fsutil::sha256_file(&lib).unwrap(),
        rcclfix::fsutil::sha256_file(&fixture("trixie/implicit.so")).unwrap()
    );
    assert_eq!(
        std::fs::read_link(dir.join("librccl.so")).unwrap(),
        Path::new("librccl.so.1.0")
    );
    for f in &p.output.files {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let m = rcclfix::manifest::Manifest::load(&dir.join("manifest.json")).unwrap();
    assert_eq!(m.commit, COMMIT);
    assert_eq!(m.engine, "recording");
    assert_eq!(m.cmake_args, p.step("configure").argv[1..]);
    assert_eq!(m.targets, ["gfx1100"]);
    assert!(m.ndebug_on_device_compile);
    assert_eq!(m.gate.get("gfx1100").map(String::as_str), Some("clean"));
    let log = std::fs::read_to_string(dir.join("build.log")).unwrap();
    assert!(log.contains("-- Compiling for gfx1100"), "{log}");
    assert!(log.contains("# rcclfix: ninja -j2"), "{log}");
    // The step timings became the timing record of the next build, and the load ninja ran under
    // (one sample a second, this machine's cores) is kept beside it.
    assert_eq!(
        std::fs::read(&p.timing_record).unwrap(),
        std::fs::read(dir.join("ninja_log")).unwrap()
    );
    let load = rcclfix::build::load::Trace::parse(
        &std::fs::read_to_string(rcclfix::build::load_trace_path(&p.timing_record)).unwrap(),
    )
    .unwrap();
    assert!(load.samples.len() >= 2, "{load:?}");
    assert_eq!(
        load.cores,
        std::thread::available_parallelism().unwrap().get()
    );
    assert!(
        load.samples.iter().all(|s| s.t <= 10.0 && s.running <= 1.0),
        "{load:?}"
    );
}

#[test]
fn a_library_that_declares_fails_the_gate_and_writes_no_output_folder() {
    let t = tempfile::tempdir().unwrap();
    let recipe = minihip("compile-definition", "");
    let p = plan(
        &recipe,
        &options(&t.path().join("out")),
        &host(&t.path().join("home")),
    )
    .unwrap();
    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/kernels.so");
    let err = match run(&p, &recipe, &mut r).unwrap() {
        Outcome::CheckFailed(e) => e,
        o => panic!("{o:?}"),
    };
    assert!(rcclfix::CheckFailed::in_chain(&err));
    assert!(
        err.to_string()
            .starts_with("scan gate failed for librccl.so.1.0: no output written"),
        "{err}"
    );
    assert!(!p.output.dir.exists());
    assert!(!t.path().join("out").exists());
    let kept: rcclfix::scan::ScanReport =
        serde_json::from_slice(&std::fs::read(&p.work.scan_json).unwrap()).unwrap();
    assert!(!kept.files.is_empty());
}

#[test]
fn a_configure_that_ignores_the_targets_or_ndebug_stops_before_ninja() {
    let t = tempfile::tempdir().unwrap();
    let recipe = minihip("compile-definition", "");
    let p = plan(
        &recipe,
        &options(&t.path().join("out")),
        &host(&t.path().join("home")),
    )
    .unwrap();

    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    r.build_ninja = ninja_text("gfx1030", "-DNDEBUG");
    r.configure_output = "-- Configuring done".into();
    let err = run(&p, &recipe, &mut r).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("build.ninja compiles and links for gfx1030 but gfx1100 was requested"),
        "{err}"
    );
    assert_eq!(r.calls.len(), 1, "ninja ran after a failed check");

    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    r.configure_output = "-- Compiling for gfx1100;gfx1030".into();
    let err = run(&p, &recipe, &mut r).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("configure compiles for gfx1030;gfx1100 but gfx1100 was requested"),
        "{err}"
    );
    assert_eq!(r.calls.len(), 1);

    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    r.build_ninja = ninja_text("gfx1100", "");
    let err = run(&p, &recipe, &mut r).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "NDEBUG strategy compile-definition did not put -DNDEBUG on 1 of 1 device compile lines"
        ),
        "{err}"
    );
    assert_eq!(r.calls.len(), 1);
    assert!(!p.output.dir.exists());
}

#[test]
fn a_planned_ccache_is_dropped_when_the_toolchain_has_none() {
    let t = tempfile::tempdir().unwrap();
    let recipe = minihip("compile-definition", "");
    let mut h = host(&t.path().join("home"));
    h.ccache_dir = Some(t.path().join("ccache"));
    let p = plan(&recipe, &options(&t.path().join("out")), &h).unwrap();
    let without = p.clone().without_ccache();

    work_folder(&p);
    let mut r = Recording::new(&without, "trixie/implicit.so");
    run(&p, &recipe, &mut r).unwrap();
    let argv0: Vec<&str> = r.calls.iter().map(|c| c.argv[0].as_str()).collect();
    assert_eq!(argv0, ["ccache", "cmake", "ninja"]);
    assert!(r.calls[1..]
        .iter()
        .all(|c| c.mounts.iter().all(|m| m.guest != "/ccache")));
    assert!(t.path().join("ccache").is_dir());

    // With ccache in the toolchain the steps keep it.
    std::fs::remove_dir_all(&p.output.dir).unwrap();
    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    r.has_ccache = true;
    run(&p, &recipe, &mut r).unwrap();
    assert!(r.calls[1..]
        .iter()
        .all(|c| c.mounts.iter().any(|m| m.guest == "/ccache")));
}

#[test]
fn build_plan_json_prints_the_plan_and_runs_nothing() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let recipe = t.path().join("minihip.toml");
    std::fs::write(
        &recipe,
        format!(
            r#"rccl_version = "0.1.0"
name = "minihip"
rocm_release = "0.0.0"
status = "expected"

[source]
git = "{}"
tag = "v0.1.0"

[toolchain]
name = "debian-trixie"
cxx = "/usr/bin/hipcc"
rocm_path = "/usr"

[build]
targets = ["gfx1100"]
ndebug = "cxx-flags"
link_ram_gib = 0.5
"#,
            t.path().join("no-such-repo").display()
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_rcclfix"))
        .args(["build", "--plan", "--json", "-j", "3", "--recipe"])
        .arg(&recipe)
        .arg("--out-dir")
        .arg(t.path().join("out"))
        .env("RCCLFIX_HOME", &home)
        .env_remove("RCCLFIX_GIT_MIRROR")
        .env_remove("RCCLFIX_CCACHE_DIR")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p: BuildPlan = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p.recipe, "minihip");
    assert_eq!(p.step("build").argv, ["ninja", "-C", "/build", "-j3"]);
    assert_eq!(p.work.root, home.join("work/minihip-gfx1100"));
    assert_eq!(p.output.dir, t.path().join("out/rccl-minihip-gfx1100"));
    // Nothing was fetched, checked out or written.
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    assert!(!t.path().join("out").exists());
    // Without --json: one line per step.
    let o = Command::new(env!("CARGO_BIN_EXE_rcclfix"))
        .args(["build", "--plan", "--recipe"])
        .arg(&recipe)
        .env("RCCLFIX_HOME", &home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("configure cmake -S /src -B /build")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("build     ninja -C /build -j")),
        "{text}"
    );
}

/// The `host` toolchain (no container, `container/toolchain.rs`) could not build at all: its
/// plan mounted /src and /build, which the host engine refuses. Its steps now run on the work
/// folder's own paths, the host engine accepts every step, and the plan executes to an output
/// folder.
#[test]
fn a_host_toolchain_plan_runs_on_the_work_paths() {
    use rcclfix::container::{Engine, EngineKind, Root};
    let t = tempfile::tempdir().unwrap();
    let mut recipe = minihip("compile-definition", "");
    recipe.toolchain.name = Some("host".into());
    let p = plan(
        &recipe,
        &options(&t.path().join("out")),
        &host(&t.path().join("home")),
    )
    .unwrap();
    assert_eq!(p.toolchain.kind, "host");
    let (src, build) = (
        p.work.src.display().to_string(),
        p.work.build.display().to_string(),
    );
    assert_eq!(p.step("configure").argv[1..5], ["-S", &src, "-B", &build]);
    assert_eq!(p.step("build").argv[..3], ["ninja", "-C", &build]);
    let engine = Engine::of_kind(EngineKind::Host).unwrap();
    for s in &p.steps {
        assert_eq!(s.workdir, build);
        assert!(
            s.network,
            "the host engine cannot cut the network; the plan says so"
        );
        for m in &s.mounts {
            assert_eq!(m.host, Path::new(&m.guest), "{}", s.name);
        }
        engine
            .command(&Root::Host, &s.run_spec())
            .unwrap_or_else(|e| panic!("the host engine refuses {}: {e:#}", s.name));
    }
    // A container plan of the same recipe keeps /src and /build.
    let mut boxed = recipe.clone();
    boxed.toolchain.name = Some("debian-trixie".into());
    let c = plan(&boxed, &options(Path::new("/o")), &host(Path::new("/h"))).unwrap();
    assert_eq!(
        c.step("configure").argv[1..5],
        ["-S", "/src", "-B", "/build"]
    );
    assert!(Engine::of_kind(EngineKind::Host)
        .unwrap()
        .command(&Root::Host, &c.step("configure").run_spec())
        .is_err());

    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    match run(&p, &recipe, &mut r).unwrap() {
        Outcome::Built(d) => assert!(d.join("librccl.so.1.0").is_file()),
        o => panic!("{o:?}"),
    }
}

/// Two recipes of one RCCL version (`2.21.5` and `2.21.5-debian-sid`, the three 2.27.7 ones)
/// shared `out/rccl-<version>-<targets>`, and a build of one replaced the other's output: every
/// embedded recipe now plans its own output folder, work folder and timing record, and a control
/// build's work folder and timing record are no recipe's own.
#[test]
fn every_embedded_recipe_plans_its_own_output_and_work_folder() {
    let h = host(Path::new("/h"));
    let mut o = options(Path::new("/o"));
    o.experimental = true;
    let mut seen = std::collections::BTreeMap::new();
    for r in rcclfix::recipe::embedded().unwrap().values() {
        for control in [false, true] {
            o.control = control;
            let p = plan(r, &o, &h).unwrap();
            for key in [
                p.work.root.clone(),
                p.timing_record.clone(),
                if control {
                    PathBuf::new()
                } else {
                    p.output.dir.clone()
                },
            ] {
                if key.as_os_str().is_empty() {
                    continue;
                }
                if let Some(prev) = seen.insert(key.clone(), r.id().to_owned()) {
                    panic!("{} and {} both plan {}", prev, r.id(), key.display());
                }
            }
        }
    }
    let sid = rcclfix::recipe::find(&rcclfix::recipe::embedded().unwrap(), "2.21.5-debian-sid")
        .unwrap()
        .clone();
    o.control = false;
    assert_eq!(
        plan(&sid, &o, &h).unwrap().output.dir,
        Path::new("/o/rccl-2.21.5-debian-sid-gfx1100")
    );
    // A recipe named `<x>-control` and the control build of `<x>`.
    let x = minihip("none", "");
    let mut xc = minihip("none", "");
    xc.name = Some("minihip-control".into());
    o.control = true;
    let control = plan(&x, &o, &h).unwrap();
    o.control = false;
    let named = plan(&xc, &o, &h).unwrap();
    assert_ne!(control.work.root, named.work.root);
}

/// A build replaces only its own recipe's earlier output: another recipe's folder, or a folder
/// that is no rcclfix output, needs `--force`.
#[test]
fn another_recipes_output_folder_is_refused_without_force() {
    use rcclfix::build::check_output_owner;
    let t = tempfile::tempdir().unwrap();
    let recipe = minihip("none", "");
    let dest = t.path().join("rccl-minihip-gfx1100");
    check_output_owner(&dest, &recipe, false).unwrap();
    std::fs::create_dir_all(&dest).unwrap();
    let err = check_output_owner(&dest, &recipe, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not an rcclfix output folder"), "{err}");
    assert!(err.contains("help: pass --force"), "{err}");
    std::fs::write(dest.join("manifest.json"), "{\"recipe\": \"2.21.5\"}").unwrap();
    let err = check_output_owner(&dest, &recipe, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("holds the output of recipe 2.21.5, not minihip"),
        "{err}"
    );
    check_output_owner(&dest, &recipe, true).unwrap();
    std::fs::write(dest.join("manifest.json"), "{\"recipe\": \"minihip\"}").unwrap();
    check_output_owner(&dest, &recipe, false).unwrap();
}

/// What rcclfix reads and writes in the work folder follows no symbolic link: a checkout whose
/// `CMakeLists.txt` links to a host file is refused before the NDEBUG injection touches it, and
/// a `.ninja_log` the build left as a link to a host file is neither copied into the output folder
/// nor kept as the timing record.
#[test]
fn the_ndebug_injection_and_the_timing_record_follow_no_link() {
    let t = tempfile::tempdir().unwrap();
    let recipe = minihip("compile-definition", "");
    let p = plan(
        &recipe,
        &options(&t.path().join("out")),
        &host(&t.path().join("home")),
    )
    .unwrap();
    let victim = t.path().join("victim.txt");
    let text = "project(victim CXX)\n";
    std::fs::write(&victim, text).unwrap();
    work_folder(&p);
    let cml = p.work.project.join("CMakeLists.txt");
    std::fs::remove_file(&cml).unwrap();
    std::os::unix::fs::symlink(&victim, &cml).unwrap();
    let mut r = Recording::new(&p, "trixie/implicit.so");
    let err = run(&p, &recipe, &mut r).unwrap_err();
    assert!(
        err.to_string()
            .contains("CMakeLists.txt is a symbolic link in the source tree"),
        "{err}"
    );
    assert!(r.calls.is_empty(), "a step ran");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), text);

    let secret = t.path().join("secret.txt");
    std::fs::write(&secret, "host secret\n").unwrap();
    std::fs::remove_dir_all(&p.work.root).unwrap();
    work_folder(&p);
    let mut r = Recording::new(&p, "trixie/implicit.so");
    r.ninja_log_link = Some(secret.clone());
    let dir = match run(&p, &recipe, &mut r).unwrap() {
        Outcome::Built(d) => d,
        o => panic!("{o:?}"),
    };
    for f in walkdir::WalkDir::new(&dir).into_iter().map(|e| e.unwrap()) {
        if f.file_type().is_file() {
            let bytes = std::fs::read(f.path()).unwrap();
            assert!(
                !bytes.windows(11).any(|w| w == b"host secret"),
                "{} holds the host file",
                f.path().display()
            );
        }
    }
    assert!(
        !p.timing_record.exists(),
        "the link became the timing record"
    );
}
