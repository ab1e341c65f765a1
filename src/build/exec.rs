//! Executing a [`BuildPlan`] from NDEBUG injection to the output folder: inject NDEBUG, configure,
//! check `build.ninja` and the `Compiling for` line, ninja, keep the timing record, post-link
//! patch, scan gate, output folder with `manifest.json`, `--verify`, `--package`.
//!
//! The steps run through a [`Runner`] (the one thing this module needs from `container/`:
//! [`RunSpec`] in, output lines out), so the orchestration is tested with a recording runner that
//! checks each step's argv and mounts and plays the toolchain's part (`tests/it/build_plan.rs`).
//! What comes before (fetch, cache lookup, work folder, patches, toolchain and engine) is
//! [`super::build`]'s.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Context};

use super::plan::BuildPlan;
use super::{cache, eta, ndebug, progress, scan_gate, ControlResult, Outcome};
use crate::container::RunSpec;
use crate::manifest::{FileDigest, LibraryRecord, Manifest, MANIFEST_SCHEMA_VERSION};
use crate::recipe::{NdebugStrategy, Recipe};
use crate::ui::Ui;

/// The largest timing record or load trace read from `RCCLFIX_HOME/records` (64 MiB; a full RCCL
/// build's `.ninja_log` is under 1 MB).
const MAX_RECORD_BYTES: u64 = 64 << 20;

/// Runs a step of a plan inside the toolchain (network off, as the [`RunSpec`] says).
pub trait Runner {
    /// Run `spec`, streaming its merged output lines to `log` and `on_line`.
    ///
    /// Errors: the step cannot start or fails (a [`crate::process::CommandError`] with the last
    /// lines of output, for real engines).
    fn run_streamed(
        &mut self,
        spec: &RunSpec,
        log: &mut dyn Write,
        on_line: &mut dyn FnMut(&str),
    ) -> anyhow::Result<()>;

    /// Run `spec` and return its stdout (probes, e.g. `ccache --version`).
    ///
    /// Errors: as [`Runner::run_streamed`].
    fn read(&mut self, spec: &RunSpec) -> anyhow::Result<String>;
}

/// The real [`Runner`]: an engine and the toolchain it runs in.
pub struct EngineRunner<'a> {
    /// The engine (podman, docker, bubblewrap, host).
    pub engine: &'a crate::container::Engine,
    /// The toolchain, prepared for that engine.
    pub toolchain: &'a crate::container::Toolchain,
}

impl Runner for EngineRunner<'_> {
    fn run_streamed(
        &mut self,
        spec: &RunSpec,
        log: &mut dyn Write,
        on_line: &mut dyn FnMut(&str),
    ) -> anyhow::Result<()> {
        self.engine
            .run_streamed(&self.toolchain.root(), spec, log, |l| on_line(l))
    }

    fn read(&mut self, spec: &RunSpec) -> anyhow::Result<String> {
        self.engine.read(&self.toolchain.root(), spec)
    }
}

/// What the run learnt before the steps, for the log and `manifest.json`.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// The fetched, verified commit (40 hex).
    pub commit: String,
    /// Where it was fetched from (the mirror path or the recipe URL).
    pub origin: String,
    /// The patches applied, with their sha256.
    pub patches: Vec<FileDigest>,
    /// The toolchain's name.
    pub toolchain: String,
    /// The toolchain's content id (rootfs stamp hash or image id).
    pub toolchain_id: String,
    /// An image toolchain's pinned base image digest.
    pub toolchain_digest: Option<String>,
    /// A rootfs toolchain's installed packages (`name=version`, from its stamp).
    pub toolchain_packages: Vec<String>,
    /// The engine's name.
    pub engine: String,
    /// The artifact-cache key, recorded in `manifest.cache` (`None`: not cacheable).
    pub key: Option<cache::BuildKey>,
}

/// Run `plan`'s steps in its work folder (whose `src` holds the patched checkout) through
/// `runner`, then gate and assemble the output. `started` is when the whole build began (for the
/// final status line).
///
/// Errors: NDEBUG injection, configure, the checks after it (targets, NDEBUG on every device
/// compile), ninja, the post-link patch, the gate's scan, writing the output. A failed gate or
/// verify is [`Outcome::CheckFailed`] and leaves no output folder.
pub fn execute(
    plan: BuildPlan,
    recipe: &Recipe,
    prov: &Provenance,
    runner: &mut dyn Runner,
    ui: &Ui,
    started: Instant,
) -> anyhow::Result<Outcome> {
    // NDEBUG injection, read and written only inside the checkout (no symbolic link of the
    // source tree is followed: `source::read_inside`).
    if let Some(cml) = &plan.inject_compile_definition {
        let rel = cml
            .strip_prefix(&plan.work.src)
            .with_context(|| format!("{} is not in the checkout", cml.display()))?;
        let text = crate::source::read_inside(&plan.work.src, rel, crate::source::SOURCE_TREE)?;
        let new = ndebug::insert_compile_definition(&text)
            .with_context(|| format!("{}: cannot inject NDEBUG", cml.display()))?;
        crate::fsutil::atomic_write(cml, new.as_bytes())?;
    }

    // ccache (RCCLFIX_CCACHE_DIR): mounted at /ccache and used as the compiler launcher when the
    // toolchain has ccache; the cache is outside the work folder so it survives fresh builds.
    let ccache_dir = plan.ccache.as_ref().map(|c| c.dir.clone());
    let plan = match ccache_dir {
        None => plan,
        Some(dir) => {
            fs_err::create_dir_all(&dir)?;
            let probe = RunSpec::new("probe ccache", vec!["ccache".into(), "--version".into()]);
            if runner.read(&probe).is_ok() {
                plan
            } else {
                ui.warn(format_args!(
                    "RCCLFIX_CCACHE_DIR is set but toolchain {} has no ccache; building without it",
                    prov.toolchain
                ));
                plan.without_ccache()
            }
        }
    };
    let work = &plan.work;

    let log_path = &work.log;
    let mut log = std::io::LineWriter::new(fs_err::File::from_parts(
        crate::fsutil::create_log(log_path)?,
        log_path,
    ));
    writeln!(
        log,
        "# rcclfix {} build of recipe {} ({} {})",
        env!("CARGO_PKG_VERSION"),
        recipe.id(),
        recipe.source.rev_label(),
        prov.commit
    )?;
    writeln!(
        log,
        "# toolchain {} ({}), engine {}",
        prov.toolchain, prov.toolchain_id, prov.engine
    )?;

    let build_started = Instant::now();
    let ndebug_on = configure_and_check(&plan, recipe, prov, runner, &mut log, ui)?;
    compile(&plan, recipe, runner, &mut log, ui)?;
    let build_seconds = build_started.elapsed().as_secs_f64();
    log.flush()?;
    drop(log);
    ui.status(
        "Built",
        format_args!("in {}", super::fmt_secs(build_seconds)),
    );

    gate_and_output(&plan, recipe, prov, ndebug_on, build_seconds, ui, started)
}

/// Configure (the plan's `configure` step), then check `build.ninja` and the `Compiling for`
/// line against the requested targets and the NDEBUG strategy before the long build. Returns
/// whether `-DNDEBUG` is on every device compile.
///
/// Errors: configure fails; a target or NDEBUG mismatch (nothing was built).
fn configure_and_check(
    plan: &BuildPlan,
    recipe: &Recipe,
    prov: &Provenance,
    runner: &mut dyn Runner,
    log: &mut dyn Write,
    ui: &Ui,
) -> anyhow::Result<bool> {
    let work = &plan.work;
    let log_path = &work.log;
    let targets = &plan.targets;
    let target_list = targets.join(";");
    let strategy = recipe.build.ndebug;
    // Configure.
    ui.status(
        "Configuring",
        format_args!(
            "cmake in {} (network off; log {})",
            prov.toolchain,
            log_path.display()
        ),
    );
    let mut configure_out = String::new();
    let phase = crate::ui::Phase::start(&format!("configuring rccl {}", recipe.rccl_version));
    let configured =
        runner.run_streamed(&plan.step("configure").run_spec(), log, &mut |l: &str| {
            configure_out.push_str(l);
            configure_out.push('\n');
        });
    drop(phase);
    configured.with_context(|| format!("configure failed (full log: {})", log_path.display()))?;

    // Checks before the long build.
    // What the configure wrote is read without following a link it may have made to a host file.
    let ninja_text = read_build_file(plan, &work.build_ninja)?;
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
            work.build_ninja.display()
        );
    }
    let ndebug_on = facts.ndebug_on_device();
    if strategy != NdebugStrategy::None && !ndebug_on {
        bail!(
            "NDEBUG strategy {} did not put -DNDEBUG on {} of {} device compile lines (e.g. {})\nhelp: this RCCL needs another strategy (the recipe's `build.ndebug` in recipes/); nothing was built",
            plan.ndebug_strategy,
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
        prov.origin
    )?;

    Ok(ndebug_on)
}

/// Run the plan's `build` step (ninja) with the progress display, and keep its `.ninja_log` as
/// the next build's timing record.
///
/// Errors: ninja fails (the message names the full log); the record cannot be written.
fn compile(
    plan: &BuildPlan,
    recipe: &Recipe,
    runner: &mut dyn Runner,
    log: &mut dyn Write,
    ui: &Ui,
) -> anyhow::Result<()> {
    let work = &plan.work;
    let log_path = &work.log;
    let targets = &plan.targets;
    // Build.
    let jobs = plan.jobs;
    let record_path = &plan.timing_record;
    let record = match crate::fsutil::read_state(record_path, MAX_RECORD_BYTES, "a timing record") {
        Ok(Some(t)) => match eta::Record::parse(&String::from_utf8_lossy(&t)) {
            Ok(r) if !r.steps.is_empty() => Some(r),
            Ok(_) => None,
            Err(e) => {
                let w = format!("{}: {e}; no remaining-time estimate", record_path.display());
                warn_state(ui, log, &w)?;
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            warn_state(
                ui,
                log,
                &format!("{e:#}; ignored, no remaining-time estimate"),
            )?;
            None
        }
    };
    ui.status(
        "Compiling",
        format_args!(
            "with ninja -j{jobs}; {}",
            match &record {
                Some(r) => format!(
                    "the last build of this recipe took {} in ninja ({})",
                    super::fmt_secs(r.wall()),
                    record_path.display()
                ),
                None => "no timing record of an earlier build: elapsed time only".into(),
            }
        ),
    );
    writeln!(log, "# rcclfix: ninja -j{jobs}")?;
    // The record's load trace, when one was kept with it (an unreadable one only costs the
    // load-aware link estimate).
    let load_path = super::load_trace_path(record_path);
    let mut load_warning = None;
    let record_load = record.as_ref().and_then(|_| {
        let text = match crate::fsutil::read_state(&load_path, MAX_RECORD_BYTES, "a load trace") {
            Ok(t) => String::from_utf8_lossy(&t?).into_owned(),
            Err(e) => {
                load_warning = Some(format!("{e:#}; ignored"));
                return None;
            }
        };
        super::load::Trace::parse(&text)
            .map_err(|e| tracing::debug!("{}: {e}", load_path.display()))
            .ok()
    });
    if let Some(w) = load_warning {
        warn_state(ui, log, &w)?;
    }
    let progress = progress::Progress::start(
        &format!("rccl {}", recipe.rccl_version),
        ui.progress_bars(),
        progress::EtaInput {
            record,
            jobs: jobs as usize,
            ninja_log: Some(work.ninja_log.clone()),
            targets: targets.join(","),
            graph: read_build_file(plan, &work.build_ninja)
                .ok()
                .map(|t| super::running::Graph::parse(&t)),
            build_dir: plan.step("build").workdir.clone(),
            record_load,
        },
    );
    let res = runner.run_streamed(&plan.step("build").run_spec(), log, &mut |l: &str| {
        progress.line(l)
    });
    let load = progress.finish();
    res.with_context(|| format!("build failed (full log: {})", log_path.display()))?;
    // The step timings of this build: the record the next build's estimate uses.
    // A record that cannot be kept (the live log or the old record is no regular file, the
    // records folder is not writable) costs the next build its estimate, never this build.
    let kept = read_build_file(plan, &work.ninja_log);
    if let Err(e) = &kept {
        warn_state(ui, log, &format!("{e:#}; no timing record kept"))?;
    }
    if let Ok(text) = kept {
        let write = || -> anyhow::Result<()> {
            if let Some(d) = record_path.parent() {
                fs_err::create_dir_all(d)?;
            }
            crate::fsutil::atomic_write(record_path, text.as_bytes())?;
            // The load it ran under, beside it (a stale one from an older build must not be
            // paired with this record).
            if load.samples.is_empty() {
                let _ = fs_err::remove_file(&load_path);
            } else {
                crate::fsutil::atomic_write(&load_path, load.render().as_bytes())?;
            }
            Ok(())
        };
        if let Err(e) = write() {
            warn_state(ui, log, &format!("{e:#}; no timing record kept"))?;
        }
    }
    Ok(())
}

/// A warning about state rcclfix keeps for itself (the timing record, its load trace, the live
/// `.ninja_log`): on stderr, and in the build log (`# rcclfix: warning: …`), which the output
/// folder keeps.
fn warn_state(ui: &Ui, log: &mut dyn Write, msg: &str) -> anyhow::Result<()> {
    ui.warn(msg);
    writeln!(log, "# rcclfix: warning: {}", msg.replace('\n', " "))?;
    Ok(())
}

/// After ninja: the post-link patch, the scan gate, then the output folder with the library, its
/// links, `scan.json`, `manifest.json` and the logs; `--verify` before it is committed,
/// `--package` after.
///
/// Errors: no library; the patch refuses; the scan, verify or a write fails.
fn gate_and_output(
    plan: &BuildPlan,
    recipe: &Recipe,
    prov: &Provenance,
    ndebug_on: bool,
    build_seconds: f64,
    ui: &Ui,
    started: Instant,
) -> anyhow::Result<Outcome> {
    let work = &plan.work;
    let log_path = &work.log;
    let targets = &plan.targets;
    // Gate.
    let lib = super::find_library(&work.build)?;
    ui.status(
        "Scanning",
        format_args!("{} for {}", lib.display(), targets.join(",")),
    );
    let lib_name = lib
        .file_name()
        .context("library has no file name")?
        .to_string_lossy()
        .into_owned();
    // Post-link patch (recipes with `post_link_patch = true`, the 2.30.x device-linker pattern):
    // rewrite provably unused hostcall declarations in the built library before the gate judges
    // it. A refusal fails the build; the record goes into `manifest.patched` only when something
    // was rewritten.
    let patched = if plan.post_link_patch {
        ui.status(
            "Patching",
            format_args!("{} (post-link, {})", lib.display(), targets.join(",")),
        );
        let rec = crate::patch::patch_in_place(
            &lib,
            &crate::patch::PatchOptions {
                targets: targets.clone(),
                asserts: false,
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
    let gate = scan_gate::run(&lib, &lib_name, targets)?;
    let scan_json = serde_json::to_string_pretty(&gate.report)? + "\n";
    if plan.control {
        crate::fsutil::atomic_write(&work.scan_json, scan_json.as_bytes())?;
        return Ok(Outcome::Control(Box::new(ControlResult {
            library_sha256: crate::fsutil::sha256_file(&lib)?,
            gate,
            build_seconds,
            work: work.root.clone(),
            toolchain: super::prove::ToolchainRecord::new(
                &prov.toolchain,
                &prov.toolchain_id,
                &prov.engine,
                &prov.toolchain_packages,
            ),
        })));
    }
    if !gate.passed() {
        let kept = &work.scan_json;
        crate::fsutil::atomic_write(kept, scan_json.as_bytes())?;
        let head = format!("scan gate failed for {lib_name}: no output written");
        return Ok(Outcome::CheckFailed(
            anyhow::Error::new(crate::ui::LinesError {
                head: head.clone(),
                lines: gate.failures(),
                help: Some(format!(
                    "the scan report is {}; NDEBUG strategy was {}",
                    kept.display(),
                    plan.ndebug_strategy
                )),
            })
            .context(crate::CheckFailed::new(head)),
        ));
    }

    // Output folder.
    let out = crate::fsutil::AtomicDir::new(&plan.output.dir)?;
    let out_lib = out.path().join(&lib_name);
    fs_err::copy(&lib, &out_lib)?;
    let soname = crate::package::elf::ElfInfo::read(&out_lib)?
        .soname
        .unwrap_or_else(|| lib_name.clone());
    let mut links = vec![];
    if soname != lib_name {
        links.push((soname.clone(), lib_name.clone()));
    }
    if let Some(dev) = super::dev_link_name(&lib_name) {
        if dev != soname && dev != lib_name {
            links.push((dev, soname.clone()));
        }
    }
    for (link, target) in &links {
        std::os::unix::fs::symlink(target, out.path().join(link))
            .with_context(|| format!("cannot create symlink {link}"))?;
    }
    crate::fsutil::atomic_write(&out.path().join("scan.json"), scan_json.as_bytes())?;
    fs_err::copy(log_path, out.path().join("build.log"))?;
    if let Ok(text) = read_build_file(plan, &work.ninja_log) {
        crate::fsutil::atomic_write(&out.path().join("ninja_log"), text.as_bytes())?;
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
        commit: prov.commit.clone(),
        patches: prov.patches.clone(),
        toolchain: prov.toolchain.clone(),
        toolchain_id: prov.toolchain_id.clone(),
        toolchain_digest: prov.toolchain_digest.clone(),
        toolchain_packages: prov.toolchain_packages.clone(),
        engine: prov.engine.clone(),
        targets: targets.clone(),
        ndebug_strategy: plan.ndebug_strategy.clone(),
        ndebug_on_device_compile: ndebug_on,
        cmake_args: plan.configure_cmake_args(),
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
        cache: prov.key.as_ref().map(|k| crate::manifest::CacheRecord {
            key: k.sha256(),
            inputs: serde_json::to_value(k).expect("a BuildKey serialises"),
            built_at_unix: cache::now_unix(),
        }),
    };
    if plan.verify {
        ui.status("Verifying", format_args!("{} on two GPUs", lib_name));
        match crate::verify::verify_for_build(&out_lib)? {
            None => {
                ui.warn("fewer than two GPUs: verify did not run (manifest.verify stays empty)")
            }
            Some((report, ok)) => {
                manifest.verify = Some(report);
                if !ok {
                    let kept = work.root.join("manifest.json");
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
            super::fmt_secs(started.elapsed().as_secs_f64()),
            targets.join(",")
        ),
    );
    super::write_packages(&dir, &plan.packages, &plan.package_dir, ui)?;
    Ok(Outcome::Built(dir))
}

/// Read a file the toolchain wrote in the build folder (`build.ninja`, `.ninja_log`) through no
/// symbolic link ([`crate::source::read_inside`]): a configure that links `.ninja_log` to a host
/// file cannot make rcclfix copy that file into the output folder and the timing record.
///
/// Errors: the file is missing, a link, not a regular file or not UTF-8.
fn read_build_file(plan: &BuildPlan, path: &std::path::Path) -> anyhow::Result<String> {
    let rel = path
        .strip_prefix(&plan.work.build)
        .with_context(|| format!("{} is not in the build folder", path.display()))?;
    crate::source::read_inside(&plan.work.build, rel, "build folder")
}
