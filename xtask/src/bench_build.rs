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

use std::path::PathBuf;

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

use crate::bench_build_timing::{
    bare_run, copy_tree, json_string_array, loadavg, median, timed_lines, Phases,
};

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
