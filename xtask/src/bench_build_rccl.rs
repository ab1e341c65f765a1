//! `cargo xtask bench-build --slow --git-mirror PATH [--bin PATH] [--engine E] [--runs N]
//! [--burn-first | --burn-rounds N,M] [--eta-only] [--record DIR]`: the real-RCCL row of
//! bench-build (issue 23, item 5) and the remaining-time estimate measured on real builds (item 3).
//!
//! Builds the embedded recipe `2.21.5-debian-sid` (needs the debian-sid toolchain and a local
//! mirror of RCCL's repository) in a scratch `RCCLFIX_HOME` whose `toolchains` link to the real
//! one, `--runs` rounds (default 3), each both commands back to back, the order alternating:
//! - A: `rcclfix -v build --tag 2.21.5-debian-sid --rebuild` (the whole command, phases as
//!   [`crate::bench_build_timing::phases`]);
//! - B: bare `cmake` + `ninja` with the same CMake arguments (the first A's `manifest.json`), the
//!   same `-j` (its `build.log`), the same patched checkout (copied once from the first A's work
//!   folder) and the same mounts, each through `rcclfix toolchain run --volume`.
//!
//! There is no warm-up round (each build takes 13–60 minutes): round 1 starts with A, whose fetch
//! phase therefore includes cloning the mirror, a few seconds against a quarter of an hour.
//!
//! `--burn-first` runs one busy loop (a shell `while :; do :; done`) through round 1, both
//! commands alike, so that the second A builds from a timing record made under another load:
//! the case the estimate must survive. For every A that had a record, the predictions it logged
//! (`eta: t=… remaining=…`, `-v`) at 25, 50 and 75 % of its ninja time are compared with the
//! truth, and the mean runnable-task count of the record's and of its own load trace
//! (`records/*.load`) says what load each ran under.
//!
//! `--burn-rounds 1,3` runs the busy loop through the rounds named (`--burn-first` is `1`), so
//! that the estimate is measured in both directions: round 2 builds quiet from a busy record,
//! round 3 busy from a quiet one. `--eta-only` runs only the A builds (no bare builds, no overhead
//! verdict): the ETA table alone, in half the time. `--record DIR` starts from a kept timing
//! record (a `records/round-N/` folder of an earlier run), so that round 1 already has one.
//!
//! Each A's timing record is copied to `target/bench-build-rccl/records/round-N/` (the next A
//! overwrites the one in `RCCLFIX_HOME`), so that every pair can be replayed afterwards.
//!
//! Prints each run (with each A's ETA row as soon as that A ends, so a run stopped early keeps
//! it), then the medians split at ninja (outside it: A's fetch, patches, engine, cmake, gates and
//! output against B's cmake; inside: the same ninja in the same image), the overhead of the
//! medians, the paired overhead of each round, what the machine did through each build
//! (`/proc/stat`'s CPU busy, iowait and steal, `/proc/pressure` stalls) and the ETA table.
//!
//! Every build starts alike: the previous tree deleted before the clock starts (A's work folder,
//! B's build folder), then `sync` and, as root, the page cache dropped, so that neither command
//! pays for the other's writeback (5 GB of objects) or finds the other's files cached.
//!
//! Fails when the overhead of the medians is 3 % or more.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use xshell::Shell;

use crate::bench_build_timing::{copy_tree, json_string_array, loadavg, median, phases, run_timed};

const RECIPE: &str = "2.21.5-debian-sid";
const TOOLCHAIN: &str = "debian-sid";

/// Options of the slow row.
pub struct Options {
    /// The rcclfix binary.
    pub bin: PathBuf,
    /// Container engine for both commands.
    pub engine: String,
    /// Rounds (A and B each).
    pub runs: usize,
    /// The local mirror of RCCL's repository.
    pub mirror: PathBuf,
    /// The rounds (from 1) run beside one busy loop.
    pub burn_rounds: Vec<usize>,
    /// Only the A builds and the ETA table.
    pub eta_only: bool,
    /// A kept timing record to start from (its `*.ninja_log` and `*.load`).
    pub record: Option<PathBuf>,
}

/// One A run's estimate against the truth.
struct EtaRow {
    round: usize,
    record_load: Option<f64>,
    own_load: Option<f64>,
    /// (fraction, predicted, true remaining) seconds.
    points: Vec<(f64, f64, f64)>,
}

impl EtaRow {
    /// The ETA table's row: `| round | record's load | own load | predicted s / true s (error) |…`.
    fn cells(&self) -> String {
        let f = |x: Option<f64>| x.map_or("–".to_owned(), |v| format!("{v:.2}"));
        let pts: Vec<String> = self
            .points
            .iter()
            .map(|(_, p, t)| format!("{p:.0} s / {t:.0} s ({:+.1} %)", (p - t) / t * 100.0))
            .collect();
        format!(
            "| {} | {} | {} | {} |",
            self.round,
            f(self.record_load),
            f(self.own_load),
            pts.join(" | ")
        )
    }
}

/// Mean runnable count of a load trace file (`# rcclfix load v1 …`, then `t\trunnable\trunning`).
fn mean_runnable(path: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: Vec<f64> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').nth(1)?.parse().ok())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The last end time in a `.ninja_log`'s last run, seconds.
fn ninja_wall(path: &Path) -> anyhow::Result<f64> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let ends = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').nth(1)?.parse::<u64>().ok());
    Ok(ends.max().context("empty ninja log")? as f64 / 1000.0)
}

/// The `eta: t=<s> remaining=<s>` debug lines of one run: (t, remaining).
fn eta_lines(lines: &[(f64, String)]) -> Vec<(f64, f64)> {
    lines
        .iter()
        .filter_map(|(_, l)| {
            let rest = &l[l.find("eta: t=")? + 7..];
            let (t, rest) = rest.split_once(' ')?;
            let rem = rest.strip_prefix("remaining=")?.split(' ').next()?;
            Some((t.parse().ok()?, rem.parse().ok()?))
        })
        .collect()
}

/// One build's wall time and the part of it ninja ran, seconds, and what the machine did meanwhile.
struct Timed {
    total: f64,
    ninja: f64,
    used: Counters,
}

/// Machine-wide counters, seconds: `/proc/stat`'s first line (USER_HZ, 100 per second on Linux;
/// busy is user + nice + system + irq + softirq, guest time being counted in user) and the `some`
/// totals of `/proc/pressure/cpu` and `/proc/pressure/io` (microseconds in the file; Linux's
/// Documentation/accounting/psi.rst). Steal is the time the hypervisor ran something else while
/// this guest had work: the drift that no order can cancel shows here, not in the build.
#[derive(Clone, Copy)]
struct Counters {
    busy: f64,
    iowait: f64,
    steal: f64,
    cpu_stall: f64,
    io_stall: f64,
}

impl Counters {
    /// Read them now; a counter the kernel does not expose reads NaN (printed so), never 0.
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let f: Vec<f64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse::<f64>().unwrap_or(f64::NAN) / 100.0)
            .collect();
        let at = |i: usize| f.get(i).copied().unwrap_or(f64::NAN);
        let psi = |file: &str| {
            std::fs::read_to_string(file)
                .ok()
                .and_then(|t| {
                    let some = t.lines().find(|l| l.starts_with("some "))?;
                    let total = some
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("total="))?;
                    Some(total.parse::<f64>().ok()? / 1e6)
                })
                .unwrap_or(f64::NAN)
        };
        Counters {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            iowait: at(4),
            steal: at(7),
            cpu_stall: psi("/proc/pressure/cpu"),
            io_stall: psi("/proc/pressure/io"),
        }
    }

    /// `self − earlier`.
    fn since(self, earlier: Counters) -> Counters {
        Counters {
            busy: self.busy - earlier.busy,
            iowait: self.iowait - earlier.iowait,
            steal: self.steal - earlier.steal,
            cpu_stall: self.cpu_stall - earlier.cpu_stall,
            io_stall: self.io_stall - earlier.io_stall,
        }
    }

    /// `CPU busy … s, iowait … s, steal … s; some task stalled on CPU … s, on IO … s`.
    fn line(&self) -> String {
        format!(
            "CPU busy {:.0} s, iowait {:.0} s, steal {:.0} s; some task stalled on CPU {:.0} s, on IO {:.0} s",
            self.busy, self.iowait, self.steal, self.cpu_stall, self.io_stall
        )
    }
}

/// The same start for every build: the previous build's dirty pages written out (`sync`) and, when
/// this process may, the page cache dropped (`/proc/sys/vm/drop_caches`), so that neither command
/// pays for the other's writeback or finds the other's files cached. Returns what was done.
fn settle() -> &'static str {
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    let dropped = synced && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok();
    match (synced, dropped) {
        (true, true) => "synced, page cache dropped",
        (true, false) => "synced (page cache kept: /proc/sys/vm/drop_caches is not writable)",
        _ => "not synced (sync failed)",
    }
}

/// A busy loop the bench started, ended by its PID when dropped.
struct Burner(std::process::Child);

impl Burner {
    /// Start one (`sh -c 'while :; do :; done'`).
    fn start() -> anyhow::Result<Burner> {
        Ok(Burner(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()?,
        ))
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The ETA table: each A that had a record, its load and its errors at 25, 50 and 75 %.
fn print_eta_table(etas: &[EtaRow]) {
    println!();
    println!(
        "| A of round | record's mean runnable | own mean runnable | ETA at 25 % | 50 % | 75 % |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for r in etas {
        println!("{}", r.cells());
    }
}

/// Run the slow row (module docs).
pub fn run(sh: &Shell, o: &Options) -> anyhow::Result<()> {
    let root = crate::project_root();
    let toolchains = std::env::var_os("RCCLFIX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rcclfix")
        })
        .join("toolchains");
    if !toolchains.join(format!("{TOOLCHAIN}/stamp.json")).exists() {
        bail!(
            "the {TOOLCHAIN} toolchain is not built in {}\nhelp: rcclfix toolchain build {TOOLCHAIN}",
            toolchains.display()
        );
    }
    // A kept record is read before the scratch folder (where earlier runs keep theirs) goes.
    let seed: Vec<(&str, Vec<u8>)> = match &o.record {
        None => vec![],
        Some(dir) => ["ninja_log", "load"]
            .iter()
            .filter_map(|ext| {
                let f = dir.join(format!("{RECIPE}-gfx1100.{ext}"));
                // The load trace is optional: a build that took no samples keeps none.
                match std::fs::read(&f) {
                    Ok(b) => Some(Ok((*ext, b))),
                    Err(_) if *ext == "load" => None,
                    Err(e) => Some(Err(anyhow::anyhow!("--record: {}: {e}", f.display()))),
                }
            })
            .collect::<anyhow::Result<_>>()?,
    };
    // On disk, not in a tmpfs: a build needs up to 5 GB.
    let scratch = root.join("target/bench-build-rccl");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)?;
    }
    let home = scratch.join("home");
    std::fs::create_dir_all(&home)?;
    std::os::unix::fs::symlink(&toolchains, home.join("toolchains"))?;
    let out = scratch.join("out");
    let (bin, engine) = (&o.bin, &o.engine);
    let (out_s, mirror_s) = (out.display().to_string(), o.mirror.display().to_string());
    let record = home.join(format!("records/{RECIPE}-gfx1100.ninja_log"));
    let record_load = home.join(format!("records/{RECIPE}-gfx1100.load"));
    let rcclfix_build = |round: usize, etas: &mut Vec<EtaRow>| -> anyhow::Result<Timed> {
        let rec_load = mean_runnable(&record_load);
        let had_record = record.exists();
        // The previous A's tree goes before the clock starts, as B's does (bare_run); what
        // `--rebuild` would have spent on it is printed.
        let work = home.join(format!("work/{RECIPE}-gfx1100"));
        let t_rm = std::time::Instant::now();
        if work.exists() {
            std::fs::remove_dir_all(&work)?;
        }
        let rm = t_rm.elapsed().as_secs_f64();
        println!(
            "  before rcclfix build: previous work folder deleted in {rm:.1} s; {}",
            settle()
        );
        let args = [
            "-v",
            "build",
            "--tag",
            RECIPE,
            "--rebuild",
            "--git-mirror",
            &mirror_s,
            "--out-dir",
            &out_s,
            "--engine",
            engine,
        ];
        let c0 = Counters::now();
        let (lines, total) = run_timed(bin, &args, &home)?;
        let used = Counters::now().since(c0);
        let p = phases(&lines, total)?;
        // Keep this A's timing record (the next A overwrites it) for replays of each pair.
        let kept = scratch.join(format!("records/round-{round}"));
        std::fs::create_dir_all(&kept)?;
        for f in [&record, &record_load] {
            if f.exists() {
                std::fs::copy(f, kept.join(f.file_name().expect("a file name")))?;
            }
        }
        if had_record {
            let wall = ninja_wall(&record)?;
            let etas_here = eta_lines(&lines);
            let points = [0.25, 0.5, 0.75]
                .iter()
                .filter_map(|&f| {
                    let &(t, pred) = etas_here.iter().rev().find(|(t, _)| *t <= f * wall)?;
                    Some((f, pred, wall - t))
                })
                .collect();
            etas.push(EtaRow {
                round,
                record_load: rec_load,
                own_load: mean_runnable(&record_load),
                points,
            });
            // Printed as it comes too: a run stopped before the last round keeps this A's row.
            let r = etas.last().expect("pushed above");
            println!(
                "  ETA (round, record's and own mean runnable, 25/50/75 %): {}",
                r.cells()
            );
        }
        println!(
            "  rcclfix build: {:.0} s (ninja {:.0} s), load average {}; {}",
            p.total,
            p.ninja,
            loadavg(),
            used.line()
        );
        Ok(Timed {
            total: p.total,
            ninja: p.ninja,
            used,
        })
    };
    let mut etas = vec![];
    let mut ours: Vec<Timed> = vec![];
    let mut theirs: Vec<Timed> = vec![];
    let bare = scratch.join("bare");
    let mut bare_ready: Option<(Vec<String>, String)> = None;
    println!(
        "bench-build --slow: {} rounds of {RECIPE}, order alternating, engine {engine}{}; load average {}",
        o.runs,
        if o.burn_rounds.is_empty() {
            String::new()
        } else {
            format!(", one busy loop through round(s) {:?}", o.burn_rounds)
        },
        loadavg()
    );
    let burned = |i: usize| o.burn_rounds.contains(&(i + 1));
    if !seed.is_empty() {
        std::fs::create_dir_all(home.join("records"))?;
        for (ext, bytes) in &seed {
            std::fs::write(record.with_extension(ext), bytes)?;
        }
    }
    if o.eta_only {
        for i in 0..o.runs {
            let _burn = burned(i).then(Burner::start).transpose()?;
            println!(
                "round {}{}:",
                i + 1,
                if burned(i) { " (busy loop)" } else { "" }
            );
            rcclfix_build(i + 1, &mut etas)?;
        }
        print_eta_table(&etas);
        return Ok(());
    }
    for i in 0..o.runs {
        let _burn = burned(i).then(Burner::start).transpose()?;
        let a_first = i % 2 == 0 || bare_ready.is_none();
        let mut a = None;
        if a_first {
            a = Some(rcclfix_build(i + 1, &mut etas)?);
        }
        if bare_ready.is_none() {
            let manifest =
                std::fs::read_to_string(out.join(format!("rccl-{RECIPE}-gfx1100/manifest.json")))?;
            let cmake_args = json_string_array(&manifest, "cmake_args")?;
            let work = home.join(format!("work/{RECIPE}-gfx1100"));
            let jobs = std::fs::read_to_string(work.join("build.log"))?
                .lines()
                .find_map(|l| l.strip_prefix("# rcclfix: ninja "))
                .map(str::to_owned)
                .context("build.log names no ninja -j")?;
            std::fs::create_dir_all(&bare)?;
            copy_tree(&work.join("src"), &bare.join("src"))?;
            bare_ready = Some((cmake_args, jobs));
        }
        let (cmake_args, jobs) = bare_ready.as_ref().expect("set above");
        let b = {
            let _e = sh.push_env("RCCLFIX_HOME", &home);
            // bare_run deletes its previous tree before the clock starts; settle after that.
            let prepare = || {
                println!("  before bare cmake + ninja: {}", settle());
                Counters::now()
            };
            let (c, n, c0) = crate::bench_build_timing::bare_run(
                sh, &root, bin, TOOLCHAIN, engine, &bare, cmake_args, jobs, prepare,
            )?;
            Timed {
                total: c + n,
                ninja: n,
                used: Counters::now().since(c0),
            }
        };
        println!(
            "  bare cmake + ninja: {:.0} s (ninja {:.0} s), load average {}; {}",
            b.total,
            b.ninja,
            loadavg(),
            b.used.line()
        );
        let a = match a {
            Some(a) => a,
            None => rcclfix_build(i + 1, &mut etas)?,
        };
        println!(
            "round {} ({}): rcclfix build {:.0} s, bare {:.0} s ({:+.1} %); ninja alone {:+.1} %",
            i + 1,
            if a_first { "A B" } else { "B A" },
            a.total,
            b.total,
            (a.total / b.total - 1.0) * 100.0,
            (a.ninja / b.ninja - 1.0) * 100.0
        );
        ours.push(a);
        theirs.push(b);
    }
    let per_round: Vec<f64> = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a.total / b.total - 1.0) * 100.0)
        .collect();
    let med_of =
        |v: &[Timed], f: fn(&Timed) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    let (a_med, b_med) = (med_of(&ours, |x| x.total), med_of(&theirs, |x| x.total));
    let of_medians = (a_med / b_med - 1.0) * 100.0;
    println!();
    println!(
        "| {RECIPE}, median of {} | rcclfix build | bare cmake + ninja | A − B, % of B's total |",
        o.runs
    );
    println!("|---|---:|---:|---:|");
    // Outside ninja: A's fetch, checkout, patches, engine, cmake, gates and output against B's
    // cmake. Inside: the same ninja in the same toolchain image, read line by line by A's
    // progress (B's output goes to /dev/null); the machine's drift between runs lands here.
    // The total row is the overhead of the medians the target is set on.
    type Part = fn(&Timed) -> f64;
    let rows: [(&str, Part); 3] = [
        ("outside ninja", |x| x.total - x.ninja),
        ("ninja", |x| x.ninja),
        ("total", |x| x.total),
    ];
    for (name, f) in rows {
        let (a, b) = (med_of(&ours, f), med_of(&theirs, f));
        println!(
            "| {name} | {a:.0} s | {b:.0} s | {:+.1} % |",
            (a - b) / b_med * 100.0
        );
    }
    println!(
        "paired overhead per round: {}; median {:+.1} %",
        per_round
            .iter()
            .map(|o| format!("{o:+.1} %"))
            .collect::<Vec<_>>()
            .join(", "),
        median(&mut per_round.clone())
    );
    println!();
    // What the machine did through each build: a slow build with as much CPU busy as a fast one
    // waited (steal, IO); one with more busy ran slower per instruction or did more.
    println!("| round | order | A wall | B wall | A / B CPU busy | A / B iowait | A / B steal | A / B IO stall | A / B CPU stall |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        let pair = |f: fn(&Counters) -> f64| format!("{:.0} / {:.0} s", f(&a.used), f(&b.used));
        println!(
            "| {} | {} | {:.0} s | {:.0} s | {} | {} | {} | {} | {} |",
            i + 1,
            if i % 2 == 0 { "A B" } else { "B A" },
            a.total,
            b.total,
            pair(|c| c.busy),
            pair(|c| c.iowait),
            pair(|c| c.steal),
            pair(|c| c.io_stall),
            pair(|c| c.cpu_stall)
        );
    }
    let (a_busy, b_busy) = (
        med_of(&ours, |x| x.used.busy),
        med_of(&theirs, |x| x.used.busy),
    );
    println!(
        "CPU busy, medians: rcclfix build {a_busy:.0} s, bare {b_busy:.0} s ({:+.1} %)",
        (a_busy / b_busy - 1.0) * 100.0
    );
    print_eta_table(&etas);
    if of_medians >= 3.0 {
        bail!("bench-build --slow: overhead {of_medians:.1} % (target < 3 %)");
    }
    Ok(())
}
