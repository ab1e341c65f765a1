//! `rcclfix build`: recipe → pinned source → NDEBUG injection → configure and build in a toolchain →
//! scan gate → output folder with provenance.
//!
//! The steps, in order (each fails fast with one clear error):
//! 1. resolve the recipe (`--tag`, `--recipe FILE`) and the target list (`--targets`);
//! 2. warn when free RAM is below the recipe's `link_ram_gib`; fetch the source at the pinned commit
//!    (`source::fetch`), check it out into a freshly emptied work folder
//!    `$RCCLFIX_HOME/work/<recipe>-<targets>/src` ([`fresh_work_folder`]: `HEAD` is the pinned
//!    commit and the tree is clean, whatever an earlier run left there), apply patches and extra
//!    files;
//! 3. open the toolchain and choose the engine (`container::open`);
//! 4. inject NDEBUG per strategy ([`ndebug`]), configure with CMake in the toolchain (network off),
//!    then check `build.ninja` (NDEBUG on every device compile, offload targets = requested) and the
//!    `Compiling for` line;
//! 5. build with ninja (progress from `[n/m]` lines, full log in `build.log`);
//! 6. scan gate ([`gate`]): every requested target `clean`, else exit 1 and no output folder;
//! 7. assemble `out/rccl-<version>-<targets>/` (library + SONAME symlinks, `scan.json`,
//!    `manifest.json`, `build.log`) in a temporary folder, optionally `--verify`, then rename it into
//!    place; optionally `--package`.

pub mod cache;
pub mod eta;
pub mod gate;
pub mod ndebug;
pub mod progress;
pub mod prove;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use crate::container::{self, EngineKind, Mount, RunSpec};
use crate::manifest::{LibraryRecord, Manifest, MANIFEST_SCHEMA_VERSION};
use crate::recipe::{NdebugStrategy, Recipe, Status};
use crate::ui::Ui;

/// What `rcclfix build` (and each of `prove`'s two builds) is asked to do besides the recipe.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// gfx targets to build and gate (empty: the recipe's `build.targets`).
    pub targets: Vec<String>,
    /// Clone from this local git mirror instead of the recipe URL.
    pub git_mirror: Option<PathBuf>,
    /// Container engine (`None`: `RCCLFIX_ENGINE`, else [`container::Engine::select`]'s order).
    pub engine: Option<EngineKind>,
    /// Where output folders go.
    pub out_dir: PathBuf,
    /// ninja -j (`None`: [`choose_jobs`]).
    pub jobs: Option<u32>,
    /// Refuse to pin an unpinned tag on first fetch or an image toolchain's digest on first use.
    pub locked: bool,
    /// Allow recipes whose status is experimental or unfixable-by-rebuild (the gate still judges).
    pub experimental: bool,
    /// After the gate, run `verify` on two GPUs and record the result in manifest.json.
    pub verify: bool,
    /// After the build, write these packages (`deb`, `whl`).
    pub package: Vec<String>,
    /// Where packages go (`None`: `out_dir`).
    pub package_dir: Option<PathBuf>,
    /// Build as the negative control of `rcclfix prove`: in the work folder `<recipe>-control-…`,
    /// gate it, and return the result without writing an output folder.
    pub control: bool,
    /// Build even when the output folder was built from the same inputs (the artifact cache
    /// otherwise reuses it after re-running the scan gate on it).
    pub rebuild: bool,
}

/// The recipe to build: a recipe file (`--recipe FILE`; patches are then looked up in the checkout
/// it lives in, returned second), else the embedded recipe named by `tag`, else
/// [`crate::recipe::DEFAULT_RECIPE`].
///
/// Errors: the file does not parse; no embedded recipe has that name or version.
pub fn resolve_recipe(
    tag: Option<&str>,
    file: Option<&Path>,
) -> anyhow::Result<(Recipe, Option<PathBuf>)> {
    Ok(match file {
        Some(f) => {
            let r = crate::recipe::load_file(f)?;
            let root = f
                .canonicalize()
                .ok()
                .and_then(|p| p.parent().and_then(|d| d.parent()).map(Path::to_owned));
            (r, root)
        }
        None => {
            let all = crate::recipe::embedded()?;
            let tag = tag.unwrap_or(crate::recipe::DEFAULT_RECIPE);
            (crate::recipe::find(&all, tag)?.clone(), None)
        }
    })
}

/// How a build ended when it did not error.
#[derive(Debug)]
pub enum Outcome {
    /// The output folder was committed.
    Built(PathBuf),
    /// A check failed (scan gate, verify): nothing was written to the output folder. The error
    /// carries a [`crate::CheckFailed`] (exit 1).
    CheckFailed(anyhow::Error),
    /// A control build ([`BuildOptions::control`]) finished and was gated; nothing was written to the
    /// output folder.
    Control(Box<ControlResult>),
}

/// What a control build leaves for `prove`: the gate verdict on the library built without NDEBUG.
#[derive(Debug)]
pub struct ControlResult {
    /// The gate's verdict and full scan report.
    pub gate: gate::GateResult,
    /// sha256 of the library the control built (hex).
    pub library_sha256: String,
    /// Wall time of configure + build, in seconds.
    pub build_seconds: f64,
    /// The work folder (its `scan.json` and `build.log` are kept there).
    pub work: PathBuf,
}

/// The output folder name: `rccl-<version>-<targets joined by '+'>`.
pub fn output_name(recipe: &Recipe, targets: &[String]) -> String {
    format!("rccl-{}-{}", recipe.rccl_version, targets.join("+"))
}

/// `MemAvailable` from `/proc/meminfo`, in GiB.
pub fn available_ram_gib() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: f64 = text
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / (1024.0 * 1024.0))
}

/// Check the requested targets before any fetch or toolchain work: at least one, each a known
/// explicit gfx target ([`crate::recipe::check_target`]).
fn check_targets(targets: &[String]) -> anyhow::Result<()> {
    if targets.is_empty() {
        bail!("no gfx targets given");
    }
    crate::recipe::check_target_list("--targets", targets)
}

/// Empty the work folder `work` (whatever an interrupted or refused run left there), create
/// `build/` and `tmp/` in it, and check out `fetched.commit` into `work/src`, verified to be at that
/// commit and clean ([`crate::source::verify_checkout`]). Returns `work/src`.
///
/// Errors: the folder cannot be cleared or created; the checkout fails or does not verify.
pub fn fresh_work_folder(work: &Path, fetched: &crate::source::Fetched) -> anyhow::Result<PathBuf> {
    if fs_err::symlink_metadata(work).is_ok() {
        fs_err::remove_dir_all(work)
            .with_context(|| format!("cannot clear the work folder {}", work.display()))?;
    }
    fs_err::create_dir_all(work.join("build"))?;
    fs_err::create_dir_all(work.join("tmp"))?;
    let tree = work.join("src");
    crate::source::checkout(fetched, &tree)?;
    Ok(tree)
}

/// The CMake configure arguments for `recipe` and `targets` (source `/src[/subdir]`, build `/build`,
/// Ninja, compiler, ROCm path, build type, `GPU_TARGETS`/`AMDGPU_TARGETS`, the recipe's options and
/// the NDEBUG strategy's flags); a ccache launcher is added by `build` when used.
pub fn configure_args(recipe: &Recipe, targets: &[String]) -> Vec<String> {
    let tc_desc = &recipe.toolchain;
    let strategy = recipe.build.ndebug;
    let guest_src = if recipe.source.subdir.is_empty() {
        "/src".to_owned()
    } else {
        format!("/src/{}", recipe.source.subdir)
    };
    let target_list = targets.join(";");
    let mut cmake_args: Vec<String> = vec![
        "-S".into(),
        guest_src,
        "-B".into(),
        "/build".into(),
        "-G".into(),
        "Ninja".into(),
        format!("-DCMAKE_CXX_COMPILER={}", tc_desc.cxx),
        format!("-DROCM_PATH={}", tc_desc.rocm_path),
        format!("-DCMAKE_BUILD_TYPE={}", recipe.build.build_type),
        format!("-DGPU_TARGETS={target_list}"),
        format!("-DAMDGPU_TARGETS={target_list}"),
    ];
    cmake_args.extend(ndebug::recipe_options(
        strategy,
        &recipe.build.cmake_options,
    ));
    cmake_args.extend(ndebug::cmake_flags(strategy, &recipe.build.cmake_options));
    cmake_args
}

/// The artifact-cache key of this build ([`cache::BuildKey`]) with toolchain identity
/// `toolchain_id`.
///
/// Errors: a patch cannot be found.
fn build_key(
    recipe: &Recipe,
    recipe_root: Option<&Path>,
    commit: &str,
    targets: &[String],
    toolchain_id: &str,
) -> anyhow::Result<cache::BuildKey> {
    Ok(cache::BuildKey {
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        recipe: serde_json::to_value(recipe)?,
        commit: commit.into(),
        patches: crate::source::patch_digests(recipe, recipe_root)?,
        extra_files: cache::BuildKey::extra_file_digests(recipe),
        toolchain_id: toolchain_id.into(),
        targets: targets.to_vec(),
        ndebug_strategy: strategy_name(recipe.build.ndebug),
        cmake_args: configure_args(recipe, targets),
        post_link_patch: recipe.build.post_link_patch,
    })
}

fn strategy_name(s: NdebugStrategy) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The artifact cache: when `dest` was built for `key` and its library is intact, re-run the scan
/// gate on it and return the outcome; `None` means build (the reason is printed when the folder
/// exists but is stale).
///
/// Errors: the library cannot be scanned.
fn try_reuse(
    args: &BuildOptions,
    ui: &Ui,
    dest: &Path,
    key: &cache::BuildKey,
    targets: &[String],
    started: Instant,
) -> anyhow::Result<Option<Outcome>> {
    if args.rebuild {
        return Ok(None);
    }
    let m = match cache::lookup(dest, key) {
        cache::Lookup::Missing => return Ok(None),
        cache::Lookup::Stale(why) => {
            ui.status("Rebuilding", why);
            return Ok(None);
        }
        cache::Lookup::Hit(m) => m,
    };
    let lib = dest.join(&m.library.file);
    let gate = gate::run(&lib, &m.library.file, targets)?;
    if !gate.passed() {
        ui.status(
            "Rebuilding",
            format_args!(
                "the cached library {} no longer passes the scan gate: {}",
                lib.display(),
                gate.failures().join("; ")
            ),
        );
        return Ok(None);
    }
    let built = m.cache.as_ref().map(|c| c.built_at_unix).unwrap_or(0);
    ui.status(
        "Reused",
        format_args!(
            "{} (built {}, {} ago, from the same inputs; key {}); gate re-run: {} clean in {}\nhelp: pass --rebuild to build it again",
            dest.display(),
            cache::fmt_utc(built),
            fmt_secs(cache::now_unix().saturating_sub(built) as f64),
            &key.sha256()[..12],
            targets.join(","),
            fmt_ms(started.elapsed().as_secs_f64())
        ),
    );
    if !args.package.is_empty() {
        let pkg_dir = args
            .package_dir
            .clone()
            .unwrap_or_else(|| args.out_dir.clone());
        for p in crate::package::package_build_dir(dest, &args.package, &pkg_dir)? {
            ui.status("Packaged", p.display());
        }
    }
    Ok(Some(Outcome::Built(dest.to_owned())))
}

fn fmt_ms(s: f64) -> String {
    if s < 10.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        fmt_secs(s)
    }
}

/// RAM one compile job is assumed to need, in GiB (hipcc on RCCL's largest generated sources;
/// an estimate, not a measurement), when choosing `-j`.
pub const COMPILE_JOB_GIB: f64 = 2.0;

/// The `-j` for ninja when `--jobs` is not given: one job per CPU core (ninja's own default is
/// cores plus 2, which oversubscribes a 2-core machine by half), fewer when the available RAM cannot hold
/// that many compile jobs at [`COMPILE_JOB_GIB`] each, never below 1. The device link runs alone
/// (every compile is its input), so `link_ram_gib` is checked against the whole available RAM, not
/// divided between jobs: when it does not fit, `build` warns and `-j` drops to 1 so nothing competes
/// with the link for memory.
pub fn choose_jobs(cores: usize, avail_gib: Option<f64>, link_ram_gib: f64) -> u32 {
    let mut j = cores.max(1) as f64;
    if let Some(a) = avail_gib {
        j = j.min((a / COMPILE_JOB_GIB).floor());
        if a < link_ram_gib {
            j = 1.0;
        }
    }
    j.max(1.0) as u32
}

/// Where the timing record of builds of `recipe_id` for `targets` lives:
/// `$RCCLFIX_HOME/records/<recipe>-<targets>.ninja_log` (the last finished build's `.ninja_log`).
pub fn timing_record_path(recipe_id: &str, targets: &[String]) -> PathBuf {
    crate::recipe::home()
        .join("records")
        .join(format!("{recipe_id}-{}.ninja_log", targets.join("+")))
}

/// Run the whole build for `recipe`. `recipe_root` is the checkout a `--recipe FILE` lives in
/// (patches are looked up there).
///
/// Errors: any step that could not run (fetch, toolchain, configure, the checks after it, ninja,
/// the output folder); a failed scan gate or verify is [`Outcome::CheckFailed`], not an error.
pub fn build(
    args: &BuildOptions,
    recipe: &Recipe,
    recipe_root: Option<&Path>,
    ui: &Ui,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let targets: Vec<String> = if args.targets.is_empty() {
        recipe.build.targets.clone()
    } else {
        args.targets.clone()
    };
    check_targets(&targets)?;
    match recipe.status {
        Status::Experimental | Status::UnfixableByRebuild if !args.experimental => bail!(
            "recipe {} is {}: {}\nhelp: pass --experimental to build it anyway (the scan gate still decides)",
            recipe.id(),
            recipe.status.as_str(),
            recipe.status_reason.as_deref().unwrap_or("no reason given")
        ),
        _ => {}
    }
    let name = output_name(recipe, &targets);
    let dest = args.out_dir.join(&name);
    ui.status(
        "Building",
        format_args!(
            "rccl {} (recipe {}, {}) for {}",
            recipe.rccl_version,
            recipe.id(),
            recipe.source.rev_label(),
            targets.join(",")
        ),
    );
    if let Some(avail) = available_ram_gib() {
        if avail < recipe.build.link_ram_gib {
            ui.warn(format_args!(
                "{avail:.1} GiB of RAM available, but the device link of recipe {} needs about {:.1} GiB\nhelp: close other programs or add swap; the link may be killed or very slow",
                recipe.id(),
                recipe.build.link_ram_gib
            ));
        }
    }

    // Source first: a wrong tag or pin fails before any toolchain work.
    let fetched = crate::source::fetch(
        recipe,
        &crate::source::SourceOptions {
            mirror: args.git_mirror.clone(),
            locked: args.locked,
        },
    )?;

    // The artifact cache: a rootfs (or host) toolchain is identified by its stamp without any engine
    // work, so an unchanged build is answered here; an image toolchain is looked up once prepared.
    // Control builds and --verify always build.
    let cacheable = !args.control && !args.verify;
    let mut key = None;
    let mut early_tc = None;
    if cacheable {
        if let Some(n) = &recipe.toolchain.name {
            if let Ok(tc) = container::Toolchain::local(n) {
                let k = build_key(recipe, recipe_root, &fetched.commit, &targets, tc.id())?;
                if let Some(o) = try_reuse(args, ui, &dest, &k, &targets, started)? {
                    return Ok(o);
                }
                key = Some(k);
                early_tc = Some(tc);
            }
        }
    }

    // A fresh work folder holding exactly the verified commit, patched.
    let work = crate::recipe::home().join("work").join(format!(
        "{}{}-{}",
        recipe.id(),
        if args.control { "-control" } else { "" },
        targets.join("+")
    ));
    let tree = fresh_work_folder(&work, &fetched)?;
    let build_dir = work.join("build");
    let tmp_dir = work.join("tmp");
    let src_dir = if recipe.source.subdir.is_empty() {
        tree.clone()
    } else {
        tree.join(&recipe.source.subdir)
    };
    let patches = crate::source::apply_patches_and_files(recipe, &tree, &src_dir, recipe_root)?;

    // Toolchain and engine.
    let tc_desc = &recipe.toolchain;
    if let Some(n) = &tc_desc.name {
        container::toolchain::ensure_built(n)?;
    }
    let mut tc = match early_tc {
        Some(tc) => tc,
        None => container::Toolchain::for_recipe(tc_desc)?,
    };
    let engine = container::Engine::select(container::requested_engine(args.engine)?, &tc)?;
    let content_id = tc.id().to_owned();
    container::toolchain::pin_base_image(
        &engine,
        &mut tc,
        args.locked,
        &crate::source::user_lockfile(),
    )?;
    container::prepare(&engine, &mut tc)?;
    ui.status(
        "Toolchain",
        format_args!("{} ({}) via {}", tc.name(), tc.id(), engine.name()),
    );
    if cacheable && key.is_none() {
        // An image toolchain: its identity is the image id known after `prepare`.
        let id = if content_id.is_empty() {
            tc.id()
        } else {
            &content_id
        };
        let k = build_key(recipe, recipe_root, &fetched.commit, &targets, id)?;
        if let Some(o) = try_reuse(args, ui, &dest, &k, &targets, started)? {
            return Ok(o);
        }
        key = Some(k);
    }

    // NDEBUG injection.
    let strategy = recipe.build.ndebug;
    if strategy == NdebugStrategy::CompileDefinition {
        let cml = src_dir.join("CMakeLists.txt");
        let text = fs_err::read_to_string(&cml)?;
        let new = ndebug::insert_compile_definition(&text)
            .with_context(|| format!("{}: cannot inject NDEBUG", cml.display()))?;
        crate::fsutil::atomic_write(&cml, new.as_bytes())?;
    }
    let target_list = targets.join(";");
    let mut cmake_args = configure_args(recipe, &targets);

    // ccache (RCCLFIX_CCACHE_DIR): mounted at /ccache and used as the compiler launcher when the
    // toolchain has ccache; the cache is outside the work folder so it survives fresh builds.
    let mut mounts = vec![
        Mount {
            host: tree.clone(),
            guest: "/src".into(),
            writable: true,
        },
        Mount {
            host: build_dir.clone(),
            guest: "/build".into(),
            writable: true,
        },
    ];
    let mut env = vec![];
    if let Some(dir) = std::env::var_os("RCCLFIX_CCACHE_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        fs_err::create_dir_all(&dir)?;
        let probe = RunSpec::new("probe ccache", vec!["ccache".into(), "--version".into()]);
        if engine.read(&tc, &probe).is_ok() {
            mounts.push(Mount {
                host: fs_err::canonicalize(&dir)?,
                guest: "/ccache".into(),
                writable: true,
            });
            env.push(("CCACHE_DIR".to_owned(), "/ccache".to_owned()));
            if let Ok(max) = std::env::var("CCACHE_MAXSIZE") {
                env.push(("CCACHE_MAXSIZE".to_owned(), max));
            }
            cmake_args.push("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache".into());
        } else {
            ui.warn(format_args!(
                "RCCLFIX_CCACHE_DIR is set but toolchain {} has no ccache; building without it",
                tc.name()
            ));
        }
    }

    let log_path = work.join("build.log");
    let mut log = std::io::LineWriter::new(fs_err::File::create(&log_path)?);
    writeln!(
        log,
        "# rcclfix {} build of recipe {} ({} {})",
        env!("CARGO_PKG_VERSION"),
        recipe.id(),
        recipe.source.rev_label(),
        fetched.commit
    )?;
    writeln!(
        log,
        "# toolchain {} ({}), engine {}",
        tc.name(),
        tc.id(),
        engine.name()
    )?;
    let spec = |summary: &str, argv: Vec<String>| RunSpec {
        summary: summary.into(),
        argv,
        mounts: mounts.clone(),
        workdir: "/build".into(),
        env: env.clone(),
        network: false,
        tmp: Some(tmp_dir.clone()),
    };

    // Configure.
    ui.status(
        "Configuring",
        format_args!(
            "cmake in {} (network off; log {})",
            tc.name(),
            log_path.display()
        ),
    );
    let build_started = Instant::now();
    let mut configure_out = String::new();
    let mut cmake_argv = vec!["cmake".to_owned()];
    cmake_argv.extend(cmake_args.iter().cloned());
    let phase = crate::ui::Phase::start(&format!("configuring rccl {}", recipe.rccl_version));
    let configured = engine.run_streamed(&tc, &spec("configure", cmake_argv), &mut log, |l| {
        configure_out.push_str(l);
        configure_out.push('\n');
    });
    drop(phase);
    configured.with_context(|| format!("configure failed (full log: {})", log_path.display()))?;

    // Checks before the long build.
    let ninja_text = fs_err::read_to_string(build_dir.join("build.ninja"))?;
    let facts = ndebug::scan_build_ninja(&ninja_text);
    let requested: BTreeSet<String> = targets.iter().cloned().collect();
    let configure_targets = ndebug::configure_targets(&configure_out);
    if let Some(ct) = &configure_targets {
        if ct != &requested {
            bail!(
                "configure compiles for {} but {} was requested (the `Compiling for` line; ROCm/rccl#958, ROCm/rccl#1138)\nhelp: the recipe's CMake may force its own target list; add a patch or a cmake option",
                ct.iter().cloned().collect::<Vec<_>>().join(";"),
                target_list
            );
        }
    }
    if facts.device_compiles.is_empty() {
        bail!("build.ninja has no device compile lines (no --offload-arch / -x hip); cannot check NDEBUG or targets\nhelp: full log: {}", log_path.display());
    }
    if facts.offload_targets != requested {
        bail!(
            "build.ninja compiles and links for {} but {} was requested\nhelp: the recipe's CMake ignores GPU_TARGETS/AMDGPU_TARGETS (ROCm/rccl#958, ROCm/rccl#1138); see {}",
            facts.offload_targets.iter().cloned().collect::<Vec<_>>().join(";"),
            target_list,
            build_dir.join("build.ninja").display()
        );
    }
    let ndebug_on = facts.ndebug_on_device();
    if strategy != NdebugStrategy::None && !ndebug_on {
        bail!(
            "NDEBUG strategy {} did not put -DNDEBUG on {} of {} device compile lines (e.g. {})\nhelp: this RCCL needs another strategy (the recipe's `build.ndebug` in recipes/); nothing was built",
            serde_json::to_value(strategy)?.as_str().unwrap_or_default(),
            facts.without_ndebug.len(),
            facts.device_compiles.len(),
            facts.without_ndebug[0]
        );
    }
    if strategy == NdebugStrategy::None {
        ui.warn(format_args!(
            "NDEBUG strategy none: -DNDEBUG is {} on the device compile lines",
            if ndebug_on { "present" } else { "absent" }
        ));
    }

    writeln!(
        log,
        "# rcclfix checks after configure: {} device compile lines, -DNDEBUG on {}; offload targets in build.ninja: {}; `Compiling for` line: {}; source from {}",
        facts.device_compiles.len(),
        facts.device_compiles.len() - facts.without_ndebug.len(),
        facts.offload_targets.iter().cloned().collect::<Vec<_>>().join(";"),
        configure_targets
            .as_ref()
            .map(|c| c.iter().cloned().collect::<Vec<_>>().join(";"))
            .unwrap_or_else(|| "(none printed)".into()),
        fetched.origin
    )?;

    // Build.
    let jobs = args.jobs.unwrap_or_else(|| {
        choose_jobs(
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            available_ram_gib(),
            recipe.build.link_ram_gib,
        )
    });
    let ninja_argv = vec![
        "ninja".to_owned(),
        "-C".into(),
        "/build".into(),
        format!("-j{jobs}"),
    ];
    let record_path = timing_record_path(recipe.id(), &targets);
    let record = match fs_err::read_to_string(&record_path) {
        Ok(t) => match eta::Record::parse(&t) {
            Ok(r) if !r.steps.is_empty() => Some(r),
            Ok(_) => None,
            Err(e) => {
                ui.warn(format_args!(
                    "{}: {e}; no remaining-time estimate",
                    record_path.display()
                ));
                None
            }
        },
        Err(_) => None,
    };
    ui.status(
        "Compiling",
        format_args!(
            "with ninja -j{jobs}; {}",
            match &record {
                Some(r) => format!(
                    "the last build of this recipe took {} in ninja ({})",
                    fmt_secs(r.wall()),
                    record_path.display()
                ),
                None => "no timing record of an earlier build: elapsed time only".into(),
            }
        ),
    );
    writeln!(log, "# rcclfix: ninja -j{jobs}")?;
    let progress = progress::Progress::start(
        &format!("rccl {}", recipe.rccl_version),
        ui.progress_bars(),
        progress::EtaInput {
            record,
            jobs: jobs as usize,
            ninja_log: Some(build_dir.join(".ninja_log")),
            targets: targets.join(","),
        },
    );
    let mut build_spec = spec("build", ninja_argv);
    build_spec
        .env
        .push(("NINJA_STATUS".into(), eta::NINJA_STATUS.into()));
    let res = engine.run_streamed(&tc, &build_spec, &mut log, |l| progress.line(l));
    progress.finish();
    res.with_context(|| format!("build failed (full log: {})", log_path.display()))?;
    // The step timings of this build: the record the next build's estimate uses.
    let ninja_log_path = build_dir.join(".ninja_log");
    if let Ok(text) = fs_err::read(&ninja_log_path) {
        if let Some(d) = record_path.parent() {
            fs_err::create_dir_all(d)?;
        }
        crate::fsutil::atomic_write(&record_path, &text)?;
    }
    let build_seconds = build_started.elapsed().as_secs_f64();
    log.flush()?;
    drop(log);
    ui.status("Built", format_args!("in {}", fmt_secs(build_seconds)));

    // Gate.
    let lib = find_library(&build_dir)?;
    ui.status(
        "Scanning",
        format_args!("{} for {}", lib.display(), targets.join(",")),
    );
    let lib_display = lib
        .file_name()
        .context("library has no file name")?
        .to_string_lossy()
        .into_owned();
    // Post-link patch (recipes with `post_link_patch = true`, the 2.30.x device-linker pattern):
    // rewrite provably unused hostcall declarations in the built library before the gate judges
    // it. A refusal fails the build; the record goes into `manifest.patched` only when something
    // was rewritten.
    let patched = if recipe.build.post_link_patch {
        ui.status(
            "Patching",
            format_args!("{} (post-link, {})", lib.display(), targets.join(",")),
        );
        let rec = crate::patch::patch_in_place(
            &lib,
            &crate::patch::PatchOptions {
                targets: targets.clone(),
            },
        )
        .with_context(|| {
            format!(
                "post-link patch of {} failed: no output written",
                lib.display()
            )
        })?;
        (!rec.images.is_empty())
            .then(|| serde_json::to_value(&rec))
            .transpose()?
    } else {
        None
    };
    let gate = gate::run(&lib, &lib_display, &targets)?;
    let scan_json = serde_json::to_string_pretty(&gate.report)? + "\n";
    if args.control {
        crate::fsutil::atomic_write(&work.join("scan.json"), scan_json.as_bytes())?;
        return Ok(Outcome::Control(Box::new(ControlResult {
            library_sha256: crate::fsutil::sha256_file(&lib)?,
            gate,
            build_seconds,
            work,
        })));
    }
    if !gate.passed() {
        let kept = work.join("scan.json");
        crate::fsutil::atomic_write(&kept, scan_json.as_bytes())?;
        let head = format!(
            "scan gate failed for {}: no output written",
            lib.file_name().unwrap_or_default().to_string_lossy()
        );
        return Ok(Outcome::CheckFailed(
            anyhow::Error::new(crate::ui::LinesError {
                head: head.clone(),
                lines: gate.failures(),
                help: Some(format!(
                    "the scan report is {}; NDEBUG strategy was {}",
                    kept.display(),
                    serde_json::to_value(strategy)?.as_str().unwrap_or_default()
                )),
            })
            .context(crate::CheckFailed::new(head)),
        ));
    }

    // Output folder.
    let out = crate::fsutil::AtomicDir::new(&dest)?;
    let lib_name = lib
        .file_name()
        .context("library has no file name")?
        .to_string_lossy()
        .into_owned();
    let out_lib = out.path().join(&lib_name);
    fs_err::copy(&lib, &out_lib)?;
    let soname = read_soname(&out_lib)?.unwrap_or_else(|| lib_name.clone());
    let mut links = vec![];
    if soname != lib_name {
        links.push((soname.clone(), lib_name.clone()));
    }
    if let Some(dev) = dev_link_name(&lib_name) {
        if dev != soname && dev != lib_name {
            links.push((dev, soname.clone()));
        }
    }
    for (link, target) in &links {
        std::os::unix::fs::symlink(target, out.path().join(link))
            .with_context(|| format!("cannot create symlink {link}"))?;
    }
    crate::fsutil::atomic_write(&out.path().join("scan.json"), scan_json.as_bytes())?;
    fs_err::copy(&log_path, out.path().join("build.log"))?;
    if ninja_log_path.is_file() {
        fs_err::copy(&ninja_log_path, out.path().join("ninja_log"))?;
    }
    let mut manifest = Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        recipe: recipe.id().into(),
        rccl_version: recipe.rccl_version.clone(),
        rocm_release: recipe.rocm_release.clone(),
        git: recipe.source.git.clone(),
        tag: recipe.source.tag.clone(),
        branch: recipe.source.branch.clone(),
        commit: fetched.commit.clone(),
        patches,
        toolchain: tc.name().into(),
        toolchain_id: tc.id().into(),
        toolchain_digest: tc.base_digest().map(str::to_owned),
        engine: engine.name().into(),
        targets: targets.clone(),
        ndebug_strategy: serde_json::to_value(strategy)?
            .as_str()
            .unwrap_or_default()
            .into(),
        ndebug_on_device_compile: ndebug_on,
        cmake_args,
        library: LibraryRecord {
            file: lib_name.clone(),
            soname,
            sha256: crate::fsutil::sha256_file(&out_lib)?,
            size: fs_err::metadata(&out_lib)?.len(),
        },
        build_seconds,
        gate: gate.summary(),
        verify: None,
        patched,
        cache: key.as_ref().map(|k| crate::manifest::CacheRecord {
            key: k.sha256(),
            inputs: serde_json::to_value(k).expect("a BuildKey serialises"),
            built_at_unix: cache::now_unix(),
        }),
    };
    if args.verify {
        ui.status("Verifying", format_args!("{} on two GPUs", lib_name));
        match crate::verify::verify_for_build(&out_lib)? {
            None => {
                ui.warn("fewer than two GPUs: verify did not run (manifest.verify stays empty)")
            }
            Some((report, ok)) => {
                manifest.verify = Some(report);
                if !ok {
                    let kept = work.join("manifest.json");
                    manifest.save(&kept)?;
                    return Ok(Outcome::CheckFailed(
                        crate::CheckFailed::new(format!(
                            "verify failed on the built library: no output written\nhelp: the report is in {}",
                            kept.display()
                        ))
                        .into(),
                    ));
                }
            }
        }
    }
    manifest.save(&out.path().join("manifest.json"))?;
    let dir = out.commit()?;
    ui.status(
        "Finished",
        format_args!(
            "{} in {} (gate: {} clean)",
            dir.display(),
            fmt_secs(started.elapsed().as_secs_f64()),
            targets.join(",")
        ),
    );
    if !args.package.is_empty() {
        let pkg_dir = args
            .package_dir
            .clone()
            .unwrap_or_else(|| args.out_dir.clone());
        for p in crate::package::package_build_dir(&dir, &args.package, &pkg_dir)? {
            ui.status("Packaged", p.display());
        }
    }
    Ok(Outcome::Built(dir))
}

fn fmt_secs(s: f64) -> String {
    let s = s.round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// The built library in a build folder: the regular file `librccl.so*` with the longest name (the
/// versioned one), at the top level or below.
///
/// Errors: none found.
pub fn find_library(build_dir: &Path) -> anyhow::Result<PathBuf> {
    let mut best: Option<PathBuf> = None;
    for e in walkdir::WalkDir::new(build_dir)
        .max_depth(3)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        let n = e.file_name().to_string_lossy();
        if e.file_type().is_file() && n.starts_with("librccl.so") {
            let better = match &best {
                None => true,
                Some(b) => {
                    let bd = b.components().count();
                    let ed = e.path().components().count();
                    ed < bd || (ed == bd && n.len() > b.file_name().map(|x| x.len()).unwrap_or(0))
                }
            };
            if better {
                best = Some(e.path().to_owned());
            }
        }
    }
    best.with_context(|| {
        format!(
            "the build finished but produced no librccl.so* in {}",
            build_dir.display()
        )
    })
}

/// `librccl.so` for `librccl.so.1.0` (the unversioned link name), `None` when already unversioned.
fn dev_link_name(file: &str) -> Option<String> {
    let i = file.find(".so.")?;
    Some(file[..i + 3].to_owned())
}

/// DT_SONAME of an ELF shared library, `None` when it has none.
///
/// Errors: the file is not a 64-bit ELF.
pub fn read_soname(path: &Path) -> anyhow::Result<Option<String>> {
    use object::read::elf::{Dyn, FileHeader, SectionHeader};
    let file = fs_err::File::open(path)?;
    // SAFETY: read-only map of a file rcclfix just wrote and nothing else modifies.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .with_context(|| format!("cannot map {}", path.display()))?;
    let data: &[u8] = &map;
    let hdr = object::elf::FileHeader64::<object::Endianness>::parse(data)
        .with_context(|| format!("{}: not an ELF64 file", path.display()))?;
    let endian = hdr.endian()?;
    let sections = hdr.sections(endian, data)?;
    for s in sections.iter() {
        if let Some((dyns, link)) = s.dynamic(endian, data)? {
            let strings = sections.strings(endian, data, link)?;
            for d in dyns {
                if d.tag32(endian) == Some(object::elf::DT_SONAME) {
                    let name = d.string(endian, strings)?;
                    return Ok(Some(String::from_utf8_lossy(name).into_owned()));
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_follow_cores_and_ram() {
        // A 2-core machine runs 2 jobs, not ninja's default 3.
        assert_eq!(choose_jobs(2, Some(16.0), 8.0), 2);
        assert_eq!(choose_jobs(16, Some(64.0), 8.0), 16);
        // RAM for 3 compile jobs only.
        assert_eq!(choose_jobs(16, Some(7.0), 4.0), 3);
        // Not enough RAM for the link: one job.
        assert_eq!(choose_jobs(8, Some(6.0), 18.5), 1);
        assert_eq!(choose_jobs(0, None, 8.0), 1);
        assert_eq!(choose_jobs(4, None, 8.0), 4);
    }
}
