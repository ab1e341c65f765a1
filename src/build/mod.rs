//! `rcclfix build`: recipe → pinned source → NDEBUG injection → configure and build in a toolchain →
//! scan gate → output folder with provenance.
//!
//! [`plan::plan`] computes every step as data first ([`plan::BuildPlan`], printed by
//! `build --plan --json`); [`build`] then fetches, prepares the work folder and toolchain, and
//! [`exec::execute`] runs the plan's steps through an [`exec::Runner`].
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
//! 6. scan gate ([`scan_gate`]): every requested target `clean`, else exit 1 and no output folder;
//! 7. assemble `out/rccl-<recipe>-<targets>/` (library + SONAME symlinks, `scan.json`,
//!    `manifest.json`, `build.log`) in a temporary folder, optionally `--verify`, then rename it into
//!    place; optionally `--package`.

pub mod cache;
pub mod eta;
pub mod exec;
pub mod frame;
pub mod load;
pub mod ndebug;
pub mod ninja_cpu;
pub mod plan;
pub mod progress;
pub mod prove;
pub mod rss;
pub mod running;
pub mod scan_gate;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use crate::container::{self, EngineKind};
use crate::recipe::Recipe;
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
    /// Build as the negative control of `rcclfix prove`: in the work folder
    /// `control/<recipe>-<targets>`, gate it, and return the result without writing an output
    /// folder.
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
    pub gate: scan_gate::GateResult,
    /// sha256 of the library the control built (hex).
    pub library_sha256: String,
    /// Wall time of configure + build, in seconds.
    pub build_seconds: f64,
    /// The work folder (its `scan.json` and `build.log` are kept there).
    pub work: PathBuf,
    /// The toolchain it ran in, as `prove.json` records it.
    pub toolchain: prove::ToolchainRecord,
}

/// The output folder name: `rccl-<recipe>-<targets joined by '+'>` (the recipe's id, so that two
/// recipes of one RCCL version, e.g. `2.21.5` and `2.21.5-debian-sid`, never share a folder; a
/// recipe id holds no `:` and a target list no `-` outside a target feature, so no two pairs of
/// recipe and targets give one name).
pub fn output_name(recipe: &Recipe, targets: &[String]) -> String {
    format!("rccl-{}-{}", recipe.id(), targets.join("+"))
}

/// Refuse to replace an output folder that another recipe built, or that is no rcclfix output
/// folder at all (a `--out-dir` may collide with anything), unless `force`: a build replaces only
/// its own recipe's earlier output. Nothing is read but `dest/manifest.json`'s `recipe` field.
///
/// Errors (one line naming the folder, the recipe that owns it, and `--force`): `dest` exists and
/// its manifest names another recipe, or it has no readable `manifest.json`.
pub fn check_output_owner(dest: &Path, recipe: &Recipe, force: bool) -> anyhow::Result<()> {
    if force || fs_err::symlink_metadata(dest).is_err() {
        return Ok(());
    }
    let mpath = dest.join("manifest.json");
    let owner = crate::fsutil::read_text_capped(&mpath, 16 << 20, "a manifest")
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("recipe").and_then(|r| r.as_str()).map(str::to_owned));
    match owner {
        Some(o) if o == recipe.id() => Ok(()),
        Some(o) => bail!(
            "{} holds the output of recipe {}, not {}; building would replace it\nhelp: pass --force to replace it, or choose another --out-dir",
            crate::ui::escape_path(dest),
            crate::ui::escape(&o),
            recipe.id()
        ),
        None => bail!(
            "{} exists and is not an rcclfix output folder (no readable manifest.json); building recipe {} would replace it\nhelp: pass --force to replace it, or choose another --out-dir",
            crate::ui::escape_path(dest),
            recipe.id()
        ),
    }
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

/// The CMake configure arguments for `recipe` and `targets` with the checkout at `src` and the
/// build folder at `build` as the toolchain sees them (`/src` and `/build` in a container, the
/// work folder's own paths on the host): source `<src>[/subdir]`, build folder, Ninja, compiler,
/// ROCm path, build type, `GPU_TARGETS`/`AMDGPU_TARGETS`, the recipe's options and the NDEBUG
/// strategy's flags; a ccache launcher is added by `build` when used.
pub fn configure_args(recipe: &Recipe, targets: &[String], src: &str, build: &str) -> Vec<String> {
    let tc_desc = &recipe.toolchain;
    let strategy = recipe.build.ndebug;
    let guest_src = if recipe.source.subdir.is_empty() {
        src.to_owned()
    } else {
        format!("{src}/{}", recipe.source.subdir)
    };
    let target_list = targets.join(";");
    let mut cmake_args: Vec<String> = vec![
        "-S".into(),
        guest_src,
        "-B".into(),
        build.to_owned(),
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

/// The artifact-cache key of the build `plan` of `recipe` ([`cache::BuildKey`]) with toolchain
/// identity `toolchain_id`.
///
/// Errors: a patch cannot be found.
fn build_key(
    recipe: &Recipe,
    recipe_root: Option<&Path>,
    commit: &str,
    plan: &plan::BuildPlan,
    toolchain_id: &str,
) -> anyhow::Result<cache::BuildKey> {
    let targets = &plan.targets;
    Ok(cache::BuildKey {
        rcclfix_version: env!("CARGO_PKG_VERSION").into(),
        recipe: serde_json::to_value(recipe)?,
        commit: commit.into(),
        patches: crate::source::patch_digests(recipe, recipe_root)?,
        extra_files: cache::BuildKey::extra_file_digests(recipe),
        toolchain_id: toolchain_id.into(),
        targets: targets.to_vec(),
        ndebug_strategy: plan::strategy_name(recipe.build.ndebug),
        cmake_args: plan.cmake_args.clone(),
        post_link_patch: recipe.build.post_link_patch,
    })
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
    let gate = scan_gate::run(&lib, &m.library.file, targets)?;
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
    let pkg_dir = args
        .package_dir
        .clone()
        .unwrap_or_else(|| args.out_dir.clone());
    write_packages(dest, &args.package, &pkg_dir, ui)?;
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
    plan::timing_record_in(&crate::paths::home(), recipe_id, targets)
}

/// The load trace kept beside a timing record ([`load`]): `<recipe>-<targets>.load` next to
/// `<recipe>-<targets>.ninja_log`.
pub fn load_trace_path(record: &Path) -> PathBuf {
    record.with_extension("load")
}

/// [`build_with`] without `--force`: another recipe's output folder is never replaced
/// ([`check_output_owner`]).
///
/// Errors: as [`build_with`].
pub fn build(
    args: &BuildOptions,
    recipe: &Recipe,
    recipe_root: Option<&Path>,
    ui: &Ui,
) -> anyhow::Result<Outcome> {
    build_with(args, false, recipe, recipe_root, ui)
}

/// Run the whole build for `recipe`. `recipe_root` is the checkout a `--recipe FILE` lives in
/// (patches are looked up there); `force` (`--force`) lets it replace an output folder that
/// another recipe built ([`check_output_owner`], checked before the fetch).
///
/// The engine asked for (`--engine`, `RCCLFIX_ENGINE`) is parsed first, then the plan
/// ([`plan::plan`]: targets, work paths, every step), then what only a run
/// can do: fetch the pinned source (before any toolchain work), the artifact cache, a fresh work
/// folder with the patched checkout, the toolchain and engine; then [`exec::execute`] runs the
/// plan's steps.
///
/// Errors: any step that could not run (fetch, toolchain, configure, the checks after it, ninja,
/// the output folder); a failed scan gate or verify is [`Outcome::CheckFailed`], not an error.
pub fn build_with(
    args: &BuildOptions,
    force: bool,
    recipe: &Recipe,
    recipe_root: Option<&Path>,
    ui: &Ui,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    // A bogus RCCLFIX_ENGINE is refused here, before the fetch or any toolchain build.
    let requested_engine = container::requested_engine(args.engine)?;
    let host = plan::HostFacts::detect();
    let plan = plan::plan(recipe, args, &host)?;
    let targets = plan.targets.clone();
    let dest = plan.output.dir.clone();
    if plan.output.written {
        check_output_owner(&dest, recipe, force)?;
    }
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
    if let Some(avail) = host.available_ram_gib {
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
    let mut key = None;
    let mut early_tc = None;
    if plan.cacheable {
        if let Some(n) = &recipe.toolchain.name {
            if let Ok(tc) = container::Toolchain::local(n) {
                let k = build_key(recipe, recipe_root, &fetched.commit, &plan, tc.id())?;
                if let Some(o) = try_reuse(args, ui, &dest, &k, &targets, started)? {
                    return Ok(o);
                }
                key = Some(k);
                early_tc = Some(tc);
            }
        }
    }

    // A fresh work folder holding exactly the verified commit, patched.
    fresh_work_folder(&plan.work.root, &fetched)?;
    let patches = crate::source::apply_patches_and_files(recipe, &plan.work.src, recipe_root)?;

    // Toolchain and engine.
    let tc_desc = &recipe.toolchain;
    if let Some(n) = &tc_desc.name {
        container::toolchain::ensure_built(n)?;
    }
    let mut tc = match early_tc {
        Some(tc) => tc,
        None => container::Toolchain::for_recipe(tc_desc)?,
    };
    let engine = container::Engine::select(requested_engine, &tc.root(), tc.name())?;
    let content_id = tc.id().to_owned();
    container::toolchain::pin_base_image(
        &engine,
        &mut tc,
        args.locked,
        &crate::source::user_lockfile(),
    )?;
    container::prepare(&engine, &mut tc)?;
    container::drift::check_record_versions(recipe, &tc, recipe_root, args.locked)?;
    ui.status(
        "Toolchain",
        format_args!("{} ({}) via {}", tc.name(), tc.id(), engine.name()),
    );
    if plan.cacheable && key.is_none() {
        // An image toolchain: its identity is the image id known after `prepare`.
        let id = if content_id.is_empty() {
            tc.id()
        } else {
            &content_id
        };
        let k = build_key(recipe, recipe_root, &fetched.commit, &plan, id)?;
        if let Some(o) = try_reuse(args, ui, &dest, &k, &targets, started)? {
            return Ok(o);
        }
        key = Some(k);
    }

    let prov = exec::Provenance {
        commit: fetched.commit.clone(),
        origin: fetched.origin.clone(),
        patches,
        toolchain: tc.name().into(),
        toolchain_id: tc.id().into(),
        toolchain_digest: tc.base_digest().map(str::to_owned),
        toolchain_packages: tc.packages().to_vec(),
        engine: engine.name().into(),
        key,
    };
    let mut runner = exec::EngineRunner {
        engine: &engine,
        toolchain: &tc,
    };
    exec::execute(plan, recipe, &prov, &mut runner, ui, started)
}

/// Write `formats` (`deb`, `whl`) for the output folder `dir` into `pkg_dir`, one `Packaged`
/// status line each (`build --package`; nothing for an empty list).
///
/// Errors: see [`crate::package::package_build_dir`].
fn write_packages(dir: &Path, formats: &[String], pkg_dir: &Path, ui: &Ui) -> anyhow::Result<()> {
    if formats.is_empty() {
        return Ok(());
    }
    for p in crate::package::package_build_dir(dir, formats, pkg_dir)? {
        ui.status("Packaged", p.display());
    }
    Ok(())
}

pub(crate) fn fmt_secs(s: f64) -> String {
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
