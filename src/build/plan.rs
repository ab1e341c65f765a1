//! The build plan: recipe + [`BuildOptions`] + [`HostFacts`] → every step `rcclfix build` will run,
//! as data ([`BuildPlan`]): the targets, the work paths, each step's argv, mounts and environment
//! inside the toolchain, and the outputs it expects. [`plan`] is pure (no file, process or network
//! access), so `rcclfix build --plan --json` prints it without running anything, and
//! `build` executes it step by step (`super::exec`). The JSON shape is `docs/build-plan.md`.
//!
//! What only a run can know is not in the plan: the fetched commit (the plan names the pin when the
//! recipe has one), the toolchain's content id, the engine chosen for it, and whether the toolchain
//! has ccache (a step that plans ccache loses it, with a warning, when the probe fails:
//! [`BuildPlan::without_ccache`]).

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::BuildOptions;
use crate::container::{Mount, RunSpec};
use crate::recipe::{NdebugStrategy, Recipe, Status};

/// Schema version of [`BuildPlan`]'s JSON (`docs/build-plan.md`); bumped on incompatible changes.
pub const PLAN_SCHEMA_VERSION: u32 = 1;

/// Where ccache lives inside the toolchain.
pub const CCACHE_GUEST: &str = "/ccache";

/// The facts of this machine a plan depends on, read once ([`HostFacts::detect`]) so that
/// [`plan`] itself reads nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// `$RCCLFIX_HOME` ([`crate::paths::home`]): work folders and timing records live under it.
    pub home: PathBuf,
    /// CPU cores available to this process.
    pub cores: usize,
    /// `MemAvailable` in GiB ([`super::available_ram_gib`]); `None` when `/proc/meminfo` is
    /// unreadable.
    pub available_ram_gib: Option<f64>,
    /// `RCCLFIX_CCACHE_DIR` (absolute; canonical when it exists), `None` when unset or empty.
    pub ccache_dir: Option<PathBuf>,
    /// `CCACHE_MAXSIZE`, passed on to ccache inside the toolchain.
    pub ccache_maxsize: Option<String>,
}

impl HostFacts {
    /// Read the facts of this machine and environment.
    pub fn detect() -> HostFacts {
        let ccache_dir = std::env::var_os("RCCLFIX_CCACHE_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .map(|d| {
                std::fs::canonicalize(&d)
                    .or_else(|_| std::path::absolute(&d))
                    .unwrap_or(d)
            });
        HostFacts {
            home: crate::paths::home(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            available_ram_gib: super::available_ram_gib(),
            ccache_dir,
            ccache_maxsize: std::env::var("CCACHE_MAXSIZE").ok(),
        }
    }
}

/// Everything `rcclfix build` will do for one recipe, before it does any of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildPlan {
    /// [`PLAN_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The rcclfix version that planned it.
    pub rcclfix_version: String,
    /// The recipe id.
    pub recipe: String,
    /// The RCCL version the recipe builds.
    pub rccl_version: String,
    /// The recipe's status (`expected`, `verified`, `experimental`, `unfixable-by-rebuild`).
    pub status: String,
    /// Where the source comes from.
    pub source: PlanSource,
    /// The gfx targets built and gated (the request, else the recipe's).
    pub targets: Vec<String>,
    /// The NDEBUG strategy (`compile-definition`, `cmake-flags`, `none`, …).
    pub ndebug_strategy: String,
    /// For the `compile-definition` strategy: the `CMakeLists.txt` (host path) that gets
    /// `add_compile_definitions(NDEBUG)` after its top `project(...)` before configure.
    pub inject_compile_definition: Option<PathBuf>,
    /// The toolchain the steps run in.
    pub toolchain: PlanToolchain,
    /// The engine asked for (`--engine`), `None`: chosen at run time (`RCCLFIX_ENGINE`, else
    /// podman, docker, bubblewrap, host).
    pub engine: Option<String>,
    /// A control build of `rcclfix prove` (gated, no output folder).
    pub control: bool,
    /// Whether the artifact cache may answer (not for control builds or `--verify`; `--rebuild`
    /// still looks but never reuses).
    pub cacheable: bool,
    /// ninja's `-j` (`--jobs`, else [`super::choose_jobs`] from the host's cores and RAM).
    pub jobs: u32,
    /// RAM the device link needs, in GiB (the recipe's `build.link_ram_gib`).
    pub link_ram_gib: f64,
    /// The work folder and the files in it.
    pub work: WorkPaths,
    /// The CMake arguments of the recipe ([`super::configure_args`]; without the ccache launcher,
    /// as the artifact cache's key has them).
    pub cmake_args: Vec<String>,
    /// ccache, when `RCCLFIX_CCACHE_DIR` is set (dropped at run time when the toolchain has none).
    pub ccache: Option<PlanCcache>,
    /// The steps run in the toolchain, in order: `configure`, then `build`.
    pub steps: Vec<Step>,
    /// Whether the post-link patch runs on the library before the gate.
    pub post_link_patch: bool,
    /// The timing record the progress estimate reads and the build replaces:
    /// `$RCCLFIX_HOME/records/<recipe>-<targets>.ninja_log`, a control build's
    /// `$RCCLFIX_HOME/records/control/<recipe>-<targets>.ninja_log` (its code is not the fix's).
    pub timing_record: PathBuf,
    /// The output folder.
    pub output: PlanOutput,
    /// Whether `verify` runs on two GPUs before the output folder is committed.
    pub verify: bool,
    /// Packages written after the output folder (`deb`, `whl`).
    pub packages: Vec<String>,
    /// Where packages go.
    pub package_dir: PathBuf,
}

/// The source of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSource {
    /// The recipe's git URL.
    pub git: String,
    /// `tag <name>` or `branch <name>`.
    pub rev: String,
    /// The local mirror used instead of `git` (`--git-mirror`).
    pub mirror: Option<PathBuf>,
    /// The recipe's own pin (`source.commit`); `None` when the lockfile pins it (or nothing does
    /// yet).
    pub commit: Option<String>,
    /// The folder of the CMake project inside the repository (`""`: its root).
    pub subdir: String,
    /// Patches applied after checkout (names under `patches/`).
    pub patches: Vec<String>,
    /// Files written into the source tree after the patches (relative paths).
    pub extra_files: Vec<String>,
}

/// The toolchain of a plan (one of `name` and `image` is set), resolved when planning: a name
/// that is neither an embedded toolchain description nor `host`, or an image whose Containerfile
/// rcclfix does not carry, fails the plan before anything runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanToolchain {
    /// A local toolchain (`containers/<name>/toolchain.toml`), built first when missing, or
    /// `host`.
    pub name: Option<String>,
    /// An official image toolchain.
    pub image: Option<String>,
    /// `rootfs` (a Debian rootfs rcclfix builds), `image` (an official image extended by an
    /// embedded Containerfile) or `host` (no container: the steps run on the host with the work
    /// folder's own paths, and the host's network, which no engine can cut there).
    #[serde(default)]
    pub kind: String,
}

/// The work folder `$RCCLFIX_HOME/work/<recipe>-<targets>/` (a control build's:
/// `$RCCLFIX_HOME/work/control/<recipe>-<targets>/`, which no recipe's own work folder can be),
/// emptied at the start of every build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkPaths {
    /// The folder.
    pub root: PathBuf,
    /// The checkout of the pinned commit (mounted at `/src`).
    pub src: PathBuf,
    /// The CMake project inside it (`src/<subdir>`).
    pub project: PathBuf,
    /// CMake's build folder (mounted at `/build`).
    pub build: PathBuf,
    /// `/tmp` inside the toolchain.
    pub tmp: PathBuf,
    /// The full log of configure and build.
    pub log: PathBuf,
    /// `build.ninja`, read after configure for the NDEBUG and target checks.
    pub build_ninja: PathBuf,
    /// ninja's step timings, kept as the next build's timing record.
    pub ninja_log: PathBuf,
    /// Where the scan report stays when the gate fails (or for a control build).
    pub scan_json: PathBuf,
}

/// ccache in a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanCcache {
    /// The host folder (`RCCLFIX_CCACHE_DIR`), mounted at [`CCACHE_GUEST`].
    pub dir: PathBuf,
    /// The CMake argument that makes ccache the compiler launcher.
    pub launcher_arg: String,
    /// The environment it adds to every step (`CCACHE_DIR`, `CCACHE_MAXSIZE`).
    pub env: Vec<(String, String)>,
}

/// One command run in the toolchain, with the network off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// `configure` or `build`.
    pub name: String,
    /// argv inside the toolchain.
    pub argv: Vec<String>,
    /// Host folders visible inside.
    pub mounts: Vec<PlanMount>,
    /// The working directory inside.
    pub workdir: String,
    /// Environment inside, beyond what every toolchain sets (PATH, HOME, LANG).
    pub env: Vec<(String, String)>,
    /// Whether the network is reachable: never in a container; on the `host` toolchain always
    /// (no engine cuts it there).
    pub network: bool,
    /// The host folder used as `/tmp` inside.
    pub tmp: Option<PathBuf>,
}

/// A host folder visible inside the toolchain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanMount {
    /// Host path.
    pub host: PathBuf,
    /// Absolute path inside.
    pub guest: String,
    /// Read-write (else read-only).
    pub writable: bool,
}

/// The output folder of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanOutput {
    /// `<out-dir>/rccl-<recipe>-<targets>/` ([`super::output_name`]).
    pub dir: PathBuf,
    /// Whether it is written (not for a control build); only when every target scans clean.
    pub written: bool,
    /// What it will hold: the library (`librccl.so*`, found in the build folder) and its SONAME
    /// links, then these files.
    pub files: Vec<String>,
}

impl Step {
    /// The step as the engine runs it.
    pub fn run_spec(&self) -> RunSpec {
        RunSpec {
            summary: self.name.clone(),
            argv: self.argv.clone(),
            mounts: self
                .mounts
                .iter()
                .map(|m| Mount {
                    host: m.host.clone(),
                    guest: m.guest.clone(),
                    writable: m.writable,
                })
                .collect(),
            workdir: self.workdir.clone(),
            env: self.env.clone(),
            network: self.network,
            tmp: self.tmp.clone(),
        }
    }
}

impl BuildPlan {
    /// The step named `name` (`configure`, `build`).
    ///
    /// Panics: no such step (every plan has both).
    pub fn step(&self, name: &str) -> &Step {
        self.steps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("a build plan has a {name} step"))
    }

    /// The plan without ccache (its toolchain has none): no `/ccache` mount, no ccache
    /// environment, no launcher argument.
    pub fn without_ccache(mut self) -> BuildPlan {
        let Some(c) = self.ccache.take() else {
            return self;
        };
        for s in &mut self.steps {
            s.mounts.retain(|m| m.host != c.dir);
            s.env.retain(|e| !c.env.contains(e));
            s.argv.retain(|a| *a != c.launcher_arg);
        }
        self
    }

    /// The CMake arguments the configure step passes (argv without `cmake`), as `manifest.json`
    /// records them.
    pub fn configure_cmake_args(&self) -> Vec<String> {
        self.step("configure").argv[1..].to_vec()
    }
}

/// The serialised name of an NDEBUG strategy (`compile-definition`, …).
pub fn strategy_name(s: NdebugStrategy) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The toolchain of `recipe`, resolved from what the binary carries (no file is read): a local
/// name must be an embedded toolchain description or `host`, an image's Containerfile an
/// embedded one.
///
/// Errors (one line naming the recipe and the value): an unknown toolchain or Containerfile.
pub fn resolve_toolchain(recipe: &Recipe) -> anyhow::Result<PlanToolchain> {
    use crate::container::toolchain::{EMBEDDED_CONTAINERFILES, EMBEDDED_TOOLCHAINS};
    let tc = &recipe.toolchain;
    let kind = match (&tc.name, &tc.image) {
        (Some(n), _) if n == "host" => "host",
        (Some(n), _) => {
            if !EMBEDDED_TOOLCHAINS.iter().any(|(k, _)| k == n) {
                let known: Vec<&str> = EMBEDDED_TOOLCHAINS.iter().map(|(k, _)| *k).collect();
                bail!(
                    "recipe {}: unknown toolchain.name {n:?} (known: {}, host)",
                    recipe.id(),
                    known.join(", ")
                );
            }
            "rootfs"
        }
        (None, Some(_)) => {
            let cf = tc.containerfile.as_deref().unwrap_or_default();
            if !EMBEDDED_CONTAINERFILES.iter().any(|(p, _)| *p == cf) {
                bail!(
                    "recipe {}: unknown toolchain.containerfile {cf:?} (known: {})",
                    recipe.id(),
                    EMBEDDED_CONTAINERFILES
                        .iter()
                        .map(|(p, _)| *p)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            "image"
        }
        (None, None) => bail!("recipe {}: toolchain needs `name` or `image`", recipe.id()),
    };
    Ok(PlanToolchain {
        name: tc.name.clone(),
        image: tc.image.clone(),
        kind: kind.into(),
    })
}

/// Refuse a path that is not UTF-8: plans, manifests and the artifact cache's key record paths
/// as JSON text, where it would fail late with serde's message, which names no path.
///
/// Errors: one line naming `what` and the path (escaped).
fn check_utf8(what: &str, p: &Path) -> anyhow::Result<()> {
    if p.to_str().is_none() {
        bail!(
            "{what} {} is not UTF-8 (rcclfix records paths as text in plans and manifests)",
            crate::ui::escape_path(p)
        );
    }
    Ok(())
}

/// Refuse an output folder (`what`: `--out-dir`, `--package-dir`) inside the work folder `work`:
/// every build empties its work folder first ([`super::fresh_work_folder`]), so the next build,
/// even one that fails, would delete the good output. Both paths are compared absolute, with
/// `.`/`..` taken out and the longest existing ancestor's links resolved, so a relative path or a
/// link into the work folder is caught too.
fn check_outside_work(what: &str, out: &Path, work: &Path) -> anyhow::Result<()> {
    let (o, w) = (resolved(out), resolved(work));
    if o.starts_with(&w) {
        bail!(
            "{what} {} is inside the work folder {}, which every build empties first\nhelp: choose an output folder outside {}",
            crate::ui::escape_path(out),
            crate::ui::escape_path(work),
            crate::ui::escape_path(work)
        );
    }
    Ok(())
}

/// `p` made absolute (against the current folder), its longest existing ancestor replaced by that
/// ancestor's canonical path (links and `..` resolved as the kernel does), and `.` and `..` in the
/// rest (which does not exist yet, so holds no link) taken out lexically.
fn resolved(p: &Path) -> PathBuf {
    use std::path::Component;
    let abs = if p.is_absolute() {
        p.to_owned()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut rest = Vec::new();
    let mut base = abs.as_path();
    let mut out = loop {
        if let Ok(canon) = base.canonicalize() {
            break canon;
        }
        match (base.parent(), base.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last.as_os_str().to_owned());
                base = parent;
            }
            _ => break PathBuf::from("/"),
        }
    };
    for c in rest.iter().rev() {
        match Path::new(c).components().next() {
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::Normal(n)) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Plan the build of `recipe` (`recipe_root`: the checkout a `--recipe FILE` lives in, for its
/// patches; not read here).
///
/// A `host` toolchain runs its steps without a container, where no folder can be mounted
/// elsewhere: its steps use the work folder's own paths (`-S <work>/src -B <work>/build`,
/// mounts that map to themselves) where a container's use `/src` and `/build`.
///
/// Errors: no or an unknown gfx target; an experimental or unfixable recipe without
/// `--experimental`; an unknown toolchain ([`resolve_toolchain`]); a path that is not UTF-8
/// (`--out-dir`, `--package-dir`, `--git-mirror`, `RCCLFIX_HOME`, `RCCLFIX_CCACHE_DIR`); an
/// output folder inside the work folder ([`check_outside_work`]).
pub fn plan(recipe: &Recipe, opts: &BuildOptions, host: &HostFacts) -> anyhow::Result<BuildPlan> {
    let targets: Vec<String> = if opts.targets.is_empty() {
        recipe.build.targets.clone()
    } else {
        opts.targets.clone()
    };
    super::check_targets(&targets)?;
    let toolchain = resolve_toolchain(recipe)?;
    check_utf8("--out-dir", &opts.out_dir)?;
    check_utf8("RCCLFIX_HOME", &host.home)?;
    for (what, p) in [
        ("--package-dir", &opts.package_dir),
        ("--git-mirror", &opts.git_mirror),
        ("RCCLFIX_CCACHE_DIR", &host.ccache_dir),
    ] {
        if let Some(p) = p {
            check_utf8(what, p)?;
        }
    }
    let on_host = toolchain.kind == "host";
    match recipe.status {
        Status::Experimental | Status::UnfixableByRebuild if !opts.experimental => bail!(
            "recipe {} is {}: {}\nhelp: pass --experimental to build it anyway (the scan gate still decides)",
            recipe.id(),
            recipe.status.as_str(),
            recipe.status_reason.as_deref().unwrap_or("no reason given")
        ),
        _ => {}
    }
    let work_dir = host.home.join("work");
    check_outside_work("--out-dir", &opts.out_dir, &work_dir)?;
    if let Some(p) = &opts.package_dir {
        check_outside_work("--package-dir", p, &work_dir)?;
    }
    let root = if opts.control {
        work_dir.join("control")
    } else {
        work_dir
    }
    .join(format!("{}-{}", recipe.id(), targets.join("+")));
    let src = root.join("src");
    let project = if recipe.source.subdir.is_empty() {
        src.clone()
    } else {
        src.join(&recipe.source.subdir)
    };
    let build = root.join("build");
    let work = WorkPaths {
        log: root.join("build.log"),
        build_ninja: build.join("build.ninja"),
        ninja_log: build.join(".ninja_log"),
        scan_json: root.join("scan.json"),
        tmp: root.join("tmp"),
        src,
        project,
        build,
        root,
    };
    // Inside a container the checkout is /src and the build folder /build; on the host they are
    // where they are.
    let (guest_src, guest_build) = if on_host {
        (
            work.src.display().to_string(),
            work.build.display().to_string(),
        )
    } else {
        ("/src".to_owned(), "/build".to_owned())
    };
    let cmake_args = super::configure_args(recipe, &targets, &guest_src, &guest_build);
    let ccache = host.ccache_dir.as_ref().map(|dir| PlanCcache {
        dir: dir.clone(),
        launcher_arg: "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache".into(),
        env: std::iter::once((
            "CCACHE_DIR".to_owned(),
            if on_host {
                dir.display().to_string()
            } else {
                CCACHE_GUEST.to_owned()
            },
        ))
        .chain(
            host.ccache_maxsize
                .iter()
                .map(|m| ("CCACHE_MAXSIZE".to_owned(), m.clone())),
        )
        .collect(),
    });
    let mut mounts = vec![
        PlanMount {
            host: work.src.clone(),
            guest: guest_src.clone(),
            writable: true,
        },
        PlanMount {
            host: work.build.clone(),
            guest: guest_build.clone(),
            writable: true,
        },
    ];
    let mut env = vec![];
    let mut cmake_argv = vec!["cmake".to_owned()];
    cmake_argv.extend(cmake_args.iter().cloned());
    if let Some(c) = &ccache {
        mounts.push(PlanMount {
            host: c.dir.clone(),
            guest: if on_host {
                c.dir.display().to_string()
            } else {
                CCACHE_GUEST.into()
            },
            writable: true,
        });
        env.extend(c.env.iter().cloned());
        cmake_argv.push(c.launcher_arg.clone());
    }
    let jobs = opts.jobs.unwrap_or_else(|| {
        super::choose_jobs(
            host.cores,
            host.available_ram_gib,
            recipe.build.link_ram_gib,
        )
    });
    let step = |name: &str, argv: Vec<String>, extra_env: &[(String, String)]| Step {
        name: name.into(),
        argv,
        mounts: mounts.clone(),
        workdir: guest_build.clone(),
        env: env.iter().chain(extra_env).cloned().collect(),
        // The host engine cannot cut the network; the plan says so rather than claim it.
        network: on_host,
        tmp: Some(work.tmp.clone()),
    };
    let steps = vec![
        step("configure", cmake_argv, &[]),
        step(
            "build",
            vec![
                "ninja".to_owned(),
                "-C".into(),
                guest_build.clone(),
                format!("-j{jobs}"),
            ],
            &[("NINJA_STATUS".into(), super::eta::NINJA_STATUS.into())],
        ),
    ];
    let strategy = recipe.build.ndebug;
    Ok(BuildPlan {
        schema_version: PLAN_SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        recipe: recipe.id().into(),
        rccl_version: recipe.rccl_version.clone(),
        status: recipe.status.as_str().into(),
        source: PlanSource {
            git: recipe.source.git.clone(),
            rev: recipe.source.rev_label(),
            mirror: opts.git_mirror.clone(),
            commit: recipe.source.commit.clone(),
            subdir: recipe.source.subdir.clone(),
            patches: recipe.build.patches.clone(),
            extra_files: recipe.build.extra_files.keys().cloned().collect(),
        },
        ndebug_strategy: strategy_name(strategy),
        inject_compile_definition: (strategy == NdebugStrategy::CompileDefinition)
            .then(|| work.project.join("CMakeLists.txt")),
        toolchain,
        engine: opts.engine.map(|e| e.as_str().to_owned()),
        control: opts.control,
        cacheable: !opts.control && !opts.verify,
        jobs,
        link_ram_gib: recipe.build.link_ram_gib,
        cmake_args,
        ccache,
        steps,
        post_link_patch: recipe.build.post_link_patch,
        // A control build (no NDEBUG) compiles other code than the fix: its steps must not become
        // the fix's estimate, so it keeps a record of its own, as it has a work folder of its own.
        timing_record: if opts.control {
            host.home.join("records/control").join(format!(
                "{}-{}.ninja_log",
                recipe.id(),
                targets.join("+")
            ))
        } else {
            timing_record_in(&host.home, recipe.id(), &targets)
        },
        output: PlanOutput {
            dir: opts.out_dir.join(super::output_name(recipe, &targets)),
            written: !opts.control,
            files: ["scan.json", "manifest.json", "build.log", "ninja_log"]
                .map(String::from)
                .to_vec(),
        },
        verify: opts.verify,
        packages: opts.package.clone(),
        package_dir: opts
            .package_dir
            .clone()
            .unwrap_or_else(|| opts.out_dir.clone()),
        work,
        targets,
    })
}

/// [`super::timing_record_path`] under the given `$RCCLFIX_HOME`.
pub fn timing_record_in(home: &Path, recipe_id: &str, targets: &[String]) -> PathBuf {
    home.join("records")
        .join(format!("{recipe_id}-{}.ninja_log", targets.join("+")))
}

/// The plan as short text for `rcclfix build --plan` (without `--json`): the recipe, the work and
/// output folders, and one line per step (argv joined by spaces; untrusted parts are escaped by
/// the caller's [`crate::ui::escape`]).
pub fn render(p: &BuildPlan) -> String {
    use crate::ui::{escape, escape_path};
    use std::fmt::Write as _;
    // Every value is escaped on its own (a newline in a value cannot forge a line), and an argv
    // word with a space or a quote is shown quoted, so the words read as the argv they are.
    let word = |w: &String| -> String {
        let e = escape(w).into_owned();
        if e.is_empty() || e.contains([' ', '\'', '"']) {
            format!("{e:?}")
        } else {
            e
        }
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "recipe {} (rccl {}, {}) for {}, NDEBUG strategy {}",
        escape(&p.recipe),
        escape(&p.rccl_version),
        escape(&p.source.rev),
        escape(&p.targets.join(",")),
        p.ndebug_strategy
    );
    let _ = writeln!(s, "work folder {}", escape_path(&p.work.root));
    if p.toolchain.kind == "host" {
        let _ = writeln!(
            s,
            "toolchain host: no container; the steps run on this machine in the work folder, with the network on"
        );
    }
    for st in &p.steps {
        let argv: Vec<String> = st.argv.iter().map(word).collect();
        let _ = writeln!(s, "{:<9} {}", escape(&st.name), argv.join(" "));
    }
    let _ = writeln!(
        s,
        "output    {}{}",
        escape_path(&p.output.dir),
        if p.output.written {
            ""
        } else {
            " (not written: control build)"
        }
    );
    s
}
