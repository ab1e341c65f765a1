//! `cargo xtask bench-build [--bin PATH] [--engine E] [--runs N]`: `rcclfix build`'s overhead
//! against bare `cmake` + `ninja` in the same toolchain (issue 15's target: within 3 %), on our
//! miniature HIP project `tests/data/minihip`. With `--slow --git-mirror PATH`, the same on real
//! RCCL and the remaining-time estimate on real builds: [`crate::bench_build_rccl`].
//!
//! Needs the debian-trixie toolchain (`cargo xtask toolchain`). In a scratch `RCCLFIX_HOME` (its
//! `toolchains` linked to the real one) it makes minihip a git repository with tag `v0.1.0` and a
//! recipe for it, warms everything up once (the source cache, the page cache, one bare run), then
//! runs `--runs` rounds (default 5, at least 5 for the medians to mean anything on a shared
//! machine), each round both commands back to back, the order alternating (A B, B A, A B, …) so that
//! a drift of the machine's load hits both alike:
//! - A: `rcclfix -v build --rebuild` (the whole command: fetch, fresh checkout, patches, engine,
//!   configure, checks, ninja, scan gate, output folder), its phases timed from the moments its
//!   stderr lines arrive (status lines and `-v` command lines, see [`Phases`]);
//! - B: bare: the same patched checkout `rcclfix` prepared, copied once, configured with the same
//!   CMake arguments and built by ninja with the same `-j` rcclfix chose (its `build.log` says
//!   which), each through `rcclfix toolchain run --volume` (the same engine invocation `build`
//!   uses, with the same mounts: `/src`, `/build` and a folder on disk as `/tmp`, where `build`
//!   puts the compilers' temporaries), in a fresh build and tmp folder each run.
//!
//! Then a no-op `rcclfix build` (the artifact cache answers) `--runs` times.
//! Prints each run, then a table of per-phase medians and three overhead figures: of the medians
//! (issue 15's definition, the figure the target applies to); the median of each round's paired
//! overhead; and rcclfix's own phases (everything but configure and ninja) over the bare median.
//! Fails when the overhead of the medians is 3 % or more or the no-op build takes 2 s or more. The load average before and after is printed: on a machine other work is loading
//! the per-round figures spread by tens of percent and only the own-phases figure is stable.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let mut bin: Option<PathBuf> = None;
    let mut engine = "bubblewrap".to_owned();
    let mut runs: Option<usize> = None;
    let mut slow = false;
    let mut burn_rounds: Vec<usize> = vec![];
    let mut eta_only = false;
    let mut record: Option<PathBuf> = None;
    let mut mirror: Option<PathBuf> = std::env::var_os("RCCLFIX_GIT_MIRROR").map(PathBuf::from);
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .with_context(|| format!("{a} needs a value"))
        };
        match a.as_str() {
            "--bin" => bin = Some(val()?.into()),
            "--engine" => engine = val()?,
            "--runs" => runs = Some(val()?.parse().context("--runs")?),
            "--slow" => slow = true,
            "--burn-first" | "--burn-rounds" if !burn_rounds.is_empty() => {
                bail!("give --burn-first or --burn-rounds once")
            }
            "--burn-first" => burn_rounds = vec![1],
            "--burn-rounds" => {
                let v = val()?;
                burn_rounds = v
                    .split(',')
                    .map(|r| r.trim().parse::<usize>().ok().filter(|&r| r > 0))
                    .collect::<Option<_>>()
                    .with_context(|| {
                        format!("--burn-rounds {v:?}: round numbers from 1, comma-separated")
                    })?
            }
            "--eta-only" => eta_only = true,
            "--record" => record = Some(val()?.into()),
            "--git-mirror" => mirror = Some(val()?.into()),
            _ => bail!(
                "unknown argument {a:?}; usage: bench-build [--bin PATH] [--engine E] [--runs N] [--slow --git-mirror PATH [--burn-first | --burn-rounds N,M] [--eta-only] [--record DIR]]"
            ),
        }
    }
    if !slow && (!burn_rounds.is_empty() || eta_only || record.is_some()) {
        bail!("--burn-first, --burn-rounds, --eta-only and --record belong to --slow");
    }
    let runs = runs.map(|r| r.max(1));
    if let Some(&r) = burn_rounds.iter().find(|&&r| r > runs.unwrap_or(3)) {
        bail!(
            "--burn-rounds names round {r}, but there are {} rounds (--runs)",
            runs.unwrap_or(3)
        );
    }
    let root = crate::project_root();
    let bin = match bin {
        Some(b) => b,
        None => {
            cmd!(sh, "cargo build --release --quiet --bin rcclfix").run()?;
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            target.join("release/rcclfix")
        }
    };
    if slow {
        let mirror = mirror.context(
            "--slow builds real RCCL: pass --git-mirror PATH (or RCCLFIX_GIT_MIRROR), a local mirror of its repository",
        )?;
        return crate::bench_build_rccl::run(
            sh,
            &crate::bench_build_rccl::Options {
                bin,
                engine,
                runs: runs.unwrap_or(3),
                mirror,
                burn_rounds,
                eta_only,
                record,
            },
        );
    }
    let runs = runs.unwrap_or(5);
    let toolchains = std::env::var_os("RCCLFIX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rcclfix")
        })
        .join("toolchains");
    if !toolchains.join("debian-trixie/stamp.json").exists() {
        bail!(
            "the debian-trixie toolchain is not built in {}\nhelp: cargo xtask toolchain",
            toolchains.display()
        );
    }
    let tmp = sh.create_temp_dir()?;
    let t = tmp.path();
    let home = t.join("home");
    sh.create_dir(&home)?;
    std::os::unix::fs::symlink(&toolchains, home.join("toolchains"))?;
    let repo = t.join("minihip");
    copy_tree(&root.join("tests/data/minihip"), &repo)?;
    {
        let _d = sh.push_dir(&repo);
        let g = [
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@rcclfix.invalid",
        ];
        cmd!(sh, "git init -q").run()?;
        cmd!(sh, "git add -A").run()?;
        cmd!(sh, "git {g...} commit -q -m minihip").run()?;
        cmd!(sh, "git {g...} tag -a v0.1.0 -m v0.1.0").run()?;
    }
    let commit = {
        let _d = sh.push_dir(&repo);
        cmd!(sh, "git rev-parse HEAD").read()?
    };
    let recipe = t.join("minihip.toml");
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
commit = "{commit}"

[toolchain]
name = "debian-trixie"
cxx = "/usr/bin/hipcc"
rocm_path = "/usr"

[build]
targets = ["gfx1100"]
ndebug = "compile-definition"
link_ram_gib = 0.5
"#,
            repo.display()
        ),
    )?;
    let out = t.join("out");
    let _env = sh.push_env("RCCLFIX_HOME", &home);
    let recipe_s = recipe.display().to_string();
    let out_s = out.display().to_string();
    let rcclfix_build = |extra: &[&str]| -> anyhow::Result<Phases> {
        let mut args = vec![
            "-v",
            "build",
            "--recipe",
            &recipe_s,
            "--out-dir",
            &out_s,
            "--engine",
            &engine,
        ];
        args.extend(extra);
        timed_lines(&bin, &args, &home)
    };
    // Warm-up: the source cache, the engine's page cache, and the checkout the bare runs copy.
    rcclfix_build(&["--rebuild"])?;
    let manifest = std::fs::read_to_string(out.join("rccl-minihip-gfx1100/manifest.json"))?;
    let cmake_args = json_string_array(&manifest, "cmake_args")?;
    let cmake_args = &cmake_args;
    let work = home.join("work/minihip-gfx1100");
    let jobs = std::fs::read_to_string(work.join("build.log"))?
        .lines()
        .find_map(|l| l.strip_prefix("# rcclfix: ninja "))
        .map(str::to_owned)
        .context("build.log names no ninja -j")?;
    let bare = t.join("bare");
    std::fs::create_dir_all(&bare)?;
    copy_tree(&work.join("src"), &bare.join("src"))?;
    let run_bare = || {
        bare_run(
            sh,
            &root,
            &bin,
            "debian-trixie",
            &engine,
            &bare,
            cmake_args,
            &jobs,
            || (),
        )
        .map(|(c, n, ())| (c, n))
    };
    run_bare()?;
    let load_before = loadavg();
    println!("bench-build: {runs} rounds, order alternating; engine {engine}; ninja {jobs} for both (rcclfix's choice); load average {load_before}");
    let mut ours: Vec<Phases> = vec![];
    let mut theirs: Vec<(f64, f64)> = vec![];
    for i in 0..runs {
        let (a, b) = if i % 2 == 0 {
            let a = rcclfix_build(&["--rebuild"])?;
            (a, run_bare()?)
        } else {
            let b = run_bare()?;
            (rcclfix_build(&["--rebuild"])?, b)
        };
        let bt = b.0 + b.1;
        println!(
            "round {} ({}): rcclfix build {:.2} s, bare cmake+ninja {bt:.2} s ({:+.1} %)",
            i + 1,
            if i % 2 == 0 { "A B" } else { "B A" },
            a.total,
            (a.total / bt - 1.0) * 100.0
        );
        ours.push(a);
        theirs.push(b);
    }
    let mut noop = vec![];
    for _ in 0..runs {
        noop.push(rcclfix_build(&[])?.total);
    }
    let med = |f: &dyn Fn(&Phases) -> f64| median(&mut ours.iter().map(f).collect::<Vec<_>>());
    let bare_conf = median(&mut theirs.iter().map(|b| b.0).collect::<Vec<_>>());
    let bare_ninja = median(&mut theirs.iter().map(|b| b.1).collect::<Vec<_>>());
    let bare_total = median(&mut theirs.iter().map(|b| b.0 + b.1).collect::<Vec<_>>());
    let a_total = med(&|p| p.total);
    let n = median(&mut noop);
    println!();
    println!("| phase (median of {runs}) | rcclfix build | bare |");
    println!("|---|---:|---:|");
    let rows: [(&str, f64, Option<f64>); 7] = [
        ("start, recipe, fetch (ls-remote)", med(&|p| p.fetch), None),
        ("checkout (clone, verify)", med(&|p| p.checkout), None),
        ("patches, toolchain, engine start", med(&|p| p.engine), None),
        (
            "configure + build.ninja checks (bare: cmake, one engine start)",
            med(&|p| p.configure),
            Some(bare_conf),
        ),
        (
            "ninja (bare: one engine start)",
            med(&|p| p.ninja),
            Some(bare_ninja),
        ),
        ("scan gate + output folder", med(&|p| p.gate_output), None),
        ("exit", med(&|p| p.exit), None),
    ];
    for (name, a, b) in rows {
        println!(
            "| {name} | {a:.3} s | {} |",
            b.map_or("–".to_owned(), |b| format!("{b:.3} s"))
        );
    }
    let of_medians = (a_total / bare_total - 1.0) * 100.0;
    let per_round: Vec<f64> = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a.total / (b.0 + b.1) - 1.0) * 100.0)
        .collect();
    let paired = median(&mut per_round.clone());
    let own = med(&|p| p.fetch + p.checkout + p.engine + p.gate_output + p.exit);
    println!("| **total** | **{a_total:.2} s** | **{bare_total:.2} s** |");
    println!();
    println!(
        "overhead: of the medians {of_medians:+.1} % (target < 3 %); paired (median of the rounds' {}) {paired:+.1} %; rcclfix's own phases {own:.3} s = {:+.1} % of bare; no-op rebuild {n:.3} s (target < 2 s); load average after {}",
        per_round.iter().map(|o| format!("{o:+.1}")).collect::<Vec<_>>().join(", "),
        own / bare_total * 100.0,
        loadavg()
    );
    let mut failed = vec![];
    if of_medians >= 3.0 {
        failed.push(format!("overhead {of_medians:.1} %"));
    }
    if n >= 2.0 {
        failed.push(format!("no-op rebuild {n:.2} s"));
    }
    if !failed.is_empty() {
        bail!("bench-build targets missed: {}", failed.join(", "));
    }
    Ok(())
}

/// One `rcclfix -v build`, cut into phases by when its stderr lines arrived (seconds):
/// - `fetch`: from the start to the first command of the checkout (`git clone`/`git init` into
///   the work folder): process start, recipe, `git ls-remote`, the cache lookup;
/// - `checkout`: to the first line after the checkout's `git status` (the clean-tree check);
/// - `engine`: to `Configuring`: patches, toolchain, engine selection and preparation;
/// - `configure`: to `Compiling` (cmake in the engine, then the build.ninja checks);
/// - `ninja`: to `Built`;
/// - `gate_output`: to `Finished` (finding the library, the scan gate, the output folder, the
///   manifest);
/// - `exit`: to the process's exit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Phases {
    pub(crate) fetch: f64,
    pub(crate) checkout: f64,
    pub(crate) engine: f64,
    pub(crate) configure: f64,
    pub(crate) ninja: f64,
    pub(crate) gate_output: f64,
    pub(crate) exit: f64,
    pub(crate) total: f64,
}

/// Run `bin args` with `RCCLFIX_HOME=home`, timestamp each stderr line as it arrives, and cut the
/// run into [`Phases`]. A no-op (reused) build has only `total` (and `fetch`).
pub(crate) fn timed_lines(bin: &Path, args: &[&str], home: &Path) -> anyhow::Result<Phases> {
    let (lines, total) = run_timed(bin, args, home)?;
    phases(&lines, total)
}

/// Run `bin args` with `RCCLFIX_HOME=home`; returns each stderr line with the second it arrived,
/// and the total wall time. Errors: it cannot start or exits non-zero (with its last lines).
pub(crate) fn run_timed(
    bin: &Path,
    args: &[&str],
    home: &Path,
) -> anyhow::Result<(Vec<(f64, String)>, f64)> {
    use std::io::BufRead;
    let t0 = Instant::now();
    let mut child = std::process::Command::new(bin)
        .args(args)
        .env("RCCLFIX_HOME", home)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let mut lines: Vec<(f64, String)> = vec![];
    for l in std::io::BufReader::new(child.stderr.take().expect("piped")).lines() {
        lines.push((t0.elapsed().as_secs_f64(), l?));
    }
    let status = child.wait()?;
    let total = t0.elapsed().as_secs_f64();
    if !status.success() {
        let tail: Vec<&str> = lines.iter().rev().take(15).map(|l| l.1.as_str()).collect();
        bail!(
            "{} {} failed ({status}):\n{}",
            bin.display(),
            args.join(" "),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok((lines, total))
}

/// Cut a timed `rcclfix -v build` run ([`run_timed`]) into [`Phases`].
pub(crate) fn phases(lines: &[(f64, String)], total: f64) -> anyhow::Result<Phases> {
    let at = |pred: &dyn Fn(&str) -> bool, from: usize| -> Option<(usize, f64)> {
        lines
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, (_, l))| pred(l))
            .map(|(i, (t, _))| (i, *t))
    };
    let verb = |v: &'static str| move |l: &str| l.trim_start().starts_with(&format!("{v} "));
    let Some((ic, t_clone)) = at(
        &|l: &str| l.contains("+ git clone") || l.contains("+ git init"),
        0,
    ) else {
        return Ok(Phases {
            fetch: total,
            total,
            ..Phases::default()
        });
    };
    let (is, _) = at(&|l: &str| l.contains("status --porcelain"), ic)
        .context("no clean-tree check in the -v output")?;
    let t_checked = lines.get(is + 1).map_or(total, |l| l.0);
    let (_, t_conf) = at(&verb("Configuring"), is).context("no Configuring line")?;
    let (_, t_comp) = at(&verb("Compiling"), is).context("no Compiling line")?;
    let (_, t_built) = at(&verb("Built"), is).context("no Built line")?;
    let (_, t_fin) = at(&verb("Finished"), is).context("no Finished line")?;
    Ok(Phases {
        fetch: t_clone,
        checkout: t_checked - t_clone,
        engine: t_conf - t_checked,
        configure: t_comp - t_conf,
        ninja: t_built - t_comp,
        gate_output: t_fin - t_built,
        exit: total - t_fin,
        total,
    })
}

/// One bare run in `bare` (its `src`, a fresh `build` and `tmp`): `cmake cmake_args` then
/// `ninja -C /build jobs` in `toolchain`, each through `rcclfix toolchain run --volume` with the
/// mounts `build` uses (`/src`, `/build`, and a folder on disk as `/tmp`). `prepare` runs after
/// the previous tree is deleted, just before the clock starts. Returns (configure, ninja) seconds
/// and what `prepare` returned. Errors: a command fails.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bare_run<T>(
    sh: &Shell,
    root: &Path,
    bin: &Path,
    toolchain: &str,
    engine: &str,
    bare: &Path,
    cmake_args: &[String],
    jobs: &str,
    prepare: impl FnOnce() -> T,
) -> anyhow::Result<(f64, f64, T)> {
    let build = bare.join("build");
    let tmp = bare.join("tmp");
    for d in [&build, &tmp] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
        std::fs::create_dir_all(d)?;
    }
    let src_v = format!("{}:/src", bare.join("src").display());
    let build_v = format!("{}:/build", build.display());
    let tmp_v = format!("{}:/tmp", tmp.display());
    // Not from `bare`: it may be under the host's /tmp, which the /tmp volume would cover.
    let _d = sh.push_dir(root);
    let prepared = prepare();
    let t0 = Instant::now();
    cmd!(sh, "{bin} toolchain run {toolchain} --engine {engine} --volume {src_v} --volume {build_v} --volume {tmp_v} -- cmake {cmake_args...}").quiet().ignore_stdout().ignore_stderr().run()?;
    let c = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    cmd!(sh, "{bin} toolchain run {toolchain} --engine {engine} --volume {src_v} --volume {build_v} --volume {tmp_v} -- ninja -C /build {jobs}").quiet().ignore_stdout().ignore_stderr().run()?;
    Ok((c, t1.elapsed().as_secs_f64(), prepared))
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), for the record.
pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The string array `"key": [ ... ]` of a pretty-printed JSON object (manifest.json), without a
/// JSON crate in xtask: one string per line, as `serde_json::to_string_pretty` writes it.
pub(crate) fn json_string_array(text: &str, key: &str) -> anyhow::Result<Vec<String>> {
    let start = text
        .find(&format!("\"{key}\": ["))
        .with_context(|| format!("manifest.json has no {key}"))?;
    let body = &text[start..];
    let end = body.find(']').context("unterminated array")?;
    let mut out = vec![];
    for l in body[..end].lines().skip(1) {
        let l = l.trim().trim_end_matches(',');
        if let Some(s) = l.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            out.push(s.replace("\\\"", "\"").replace("\\\\", "\\"));
        }
    }
    Ok(out)
}

pub(crate) fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()?;
    if !status.success() {
        bail!("cp -a {} {} failed", from.display(), to.display());
    }
    Ok(())
}
