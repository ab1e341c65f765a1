//! Tests of the estimator: the recorded RCCL build replayed at chosen speeds and loads.
#![cfg(test)]
use super::*;

const LOG: &str = include_str!("../../../tests/data/eta/rccl-2.21.5-debian-sid-control.ninja_log");

#[test]
fn parses_the_recorded_rccl_build() {
    let r = Record::parse(LOG).unwrap();
    // 393 edges in ninja's [n/m] count; the log holds the edges that ran.
    assert!(r.steps.len() > 250, "{}", r.steps.len());
    let link = r
        .steps
        .iter()
        .find(|s| s.output == "librccl.so.1.0")
        .unwrap();
    assert!(link.barrier);
    assert!((link.secs() - 1212.575).abs() < 0.01, "{}", link.secs());
    assert!((r.wall() - 2160.736).abs() < 0.01);
    assert!(r.parallelism() >= 2);
    assert!(Record::parse("nope\n").is_err());
    assert!(Record::parse("# ninja log v5\n1\t2\tx\n").is_err());
}

#[test]
fn status_lines_with_and_without_the_running_count() {
    assert_eq!(
        parse_status("[3/60 2] Linking CXX shared library librccl.so"),
        Some((3, 60, Some(2), "Linking CXX shared library librccl.so"))
    );
    assert_eq!(parse_status("[3/60] x"), Some((3, 60, None, "x")));
    assert_eq!(parse_status("[3/60 2 1] x"), None);
    assert_eq!(parse_status("ninja: no work to do."), None);
}

/// The error of each prediction relative to the true remaining time.
fn errors(r: &Record, jobs: usize, run: &[(usize, f64, f64)]) -> Vec<f64> {
    let at = [0.25, 0.5, 0.75];
    let res = replay_errors(r, jobs, run, &at);
    let errs: Vec<f64> = res.iter().map(|(p, t)| (p - t) / t).collect();
    eprintln!(
        "ETA at 25/50/75 %: {}",
        res.iter()
            .zip(&errs)
            .map(|((p, t), e)| format!("predicted {p:.0} s, truth {t:.0} s ({:+.1} %)", e * 100.0))
            .collect::<Vec<_>>()
            .join("; ")
    );
    errs
}

fn jitter(s: &Step) -> f64 {
    let h = s
        .output
        .bytes()
        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    0.8 + 0.4 * f64::from(h % 1000) / 1000.0
}

#[test]
fn the_recorded_build_replayed_slower_is_predicted_within_15_percent() {
    let r = Record::parse(LOG).unwrap();
    let jobs = r.parallelism();
    // The real schedule of the recorded build, every step 1.5x slower (a slower machine).
    let run: Vec<_> = r
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.start * 1.5, s.end * 1.5))
        .collect();
    for e in errors(&r, jobs, &run) {
        assert!(e.abs() < 0.15, "{:.1} %", e * 100.0);
    }
    // Rescheduled on the same slots, every step 1.6x slower, the compiles with ±20 % per step
    // around that.
    let run = replay(&r, jobs, |s| if s.long { 1.6 } else { 1.6 * jitter(s) });
    for e in errors(&r, jobs, &run) {
        assert!(e.abs() < 0.15, "{:.1} %", e * 100.0);
    }
}

#[test]
fn mixed_scaling_a_link_slower_or_faster_than_the_compiles_is_off_by_that_ratio_at_most() {
    // The estimate learns the speed from finished steps; the link runs alone and nothing
    // finishes during it, so a link that scales differently from the compiles (another core
    // count, a busy machine) is off by the difference of the two factors times the link's
    // recorded length, plus 5 % for the compiles' jitter (module docs, "Limit").
    let r = Record::parse(LOG).unwrap();
    let jobs = r.parallelism();
    let rec_link = r.steps.iter().map(Step::secs).fold(0.0, f64::max);
    for (compile, link) in [(1.6, 1.4), (1.2, 1.5)] {
        let run = replay(
            &r,
            jobs,
            |s| {
                if s.long {
                    link
                } else {
                    compile * jitter(s)
                }
            },
        );
        let at = [0.25, 0.5, 0.75];
        errors(&r, jobs, &run);
        for (pred, truth) in replay_errors(&r, jobs, &run, &at) {
            let bound = (compile - link).abs() * rec_link + 0.05 * truth;
            assert!(
                (pred - truth).abs() <= bound,
                "predicted {pred:.0} s, truth {truth:.0} s, bound {bound:.0} s"
            );
        }
    }
}

/// A load trace of `wall` seconds on 2 cores, sampled once a second: `at(t)` gives the sample's
/// (runnable, running).
fn sampled(wall: f64, at: impl Fn(f64) -> (f64, f64)) -> Trace {
    Trace {
        cores: 2,
        samples: (0..wall.ceil() as usize)
            .map(|i| {
                let t = i as f64;
                let (runnable, running) = at(t);
                Sample {
                    t,
                    runnable,
                    running,
                    cpu: None,
                }
            })
            .collect(),
    }
}

/// A load trace sampled once a second over `wall` seconds: `compile` runnable tasks (with
/// `jobs` of them this build's) before `link_start`, `link` (with one of them the link) after.
fn trace(wall: f64, link_start: f64, compile: f64, link: f64, jobs: f64) -> Trace {
    sampled(wall, |t| {
        if t < link_start {
            (compile, jobs)
        } else {
            (link, 1.0)
        }
    })
}

/// `r` replayed on a quiet machine: compiles at `compile` times the record (with jitter), long
/// steps at `link`; with its load trace (this build's two compiles, then the link alone).
fn quiet_run(r: &Record, jobs: usize, compile: f64, link: f64) -> (Vec<(usize, f64, f64)>, Trace) {
    let run = replay(r, jobs, |s| if s.long { link } else { compile * jitter(s) });
    let run_link = run.iter().find(|x| r.steps[x.0].long).unwrap().1;
    let run_wall = run.iter().map(|x| x.2).fold(0.0, f64::max);
    let load = trace(run_wall, run_link, 2.0, 1.0, 2.0);
    (run, load)
}

#[test]
fn a_record_made_under_load_scales_the_link_apart_from_the_compiles() {
    // Issue 23's case: the record was made while two other tasks loaded both cores during the
    // compiles (each compile got half a core) and none during the link; this run is quiet, so
    // its compiles run at 0.5x the record and its link at 1.0x.
    let r = Record::parse(LOG).unwrap();
    let jobs = r.parallelism();
    let link_start = r.steps.iter().find(|s| s.long).unwrap().start;
    let rec_load = trace(r.wall(), link_start, 4.0, 1.0, 2.0);
    let (run, run_load) = quiet_run(&r, jobs, 0.5, 1.0);
    let at = [0.25, 0.5, 0.75];
    let with = replay_errors_loaded(&r, Some(&rec_load), jobs, &run, Some(&run_load), &at);
    eprintln!("with the load traces: {with:.0?}");
    for (p, t) in &with {
        assert!(
            ((p - t) / t).abs() < 0.15,
            "with the traces: predicted {p:.0} s, truth {t:.0} s"
        );
    }
    // Without them the link is taken to scale like the compiles: far too short.
    let without = replay_errors(&r, jobs, &run, &at);
    eprintln!("without: {without:.0?}");
    assert!(
        without.iter().any(|(p, t)| (p - t) / t < -0.15),
        "{without:?}"
    );

    // A record whose other work went from two tasks to one when the link started, rebuilt on a
    // quiet machine 1.3x slower per core: compiles at 1.3 x share(4) / share(2) = 0.65x, the link
    // at 1.3 x share(3) / share(2) = 0.87x (the link is scaled as the compiles would have been
    // beside one other task).
    let rec_load = trace(r.wall(), link_start, 4.0, 2.0, 2.0);
    let (run, run_load) = quiet_run(&r, jobs, 0.65, 1.3 * 2.0 / 3.0);
    for (p, t) in replay_errors_loaded(&r, Some(&rec_load), jobs, &run, Some(&run_load), &at) {
        assert!(
            ((p - t) / t).abs() < 0.15,
            "predicted {p:.0} s, truth {t:.0} s"
        );
    }
}

/// The link's threads at `frac` of its length: one, then two, then eight (codegen in parallel).
fn link_threads(frac: f64) -> f64 {
    if frac < 0.2 {
        1.0
    } else if frac < 0.7 {
        2.0
    } else {
        8.0
    }
}

/// A trace of `wall` seconds, `other` tasks beside the build throughout: `jobs` compiles
/// before `link_start`, then the link with [`link_threads`] over `link_len` seconds.
fn threaded_trace(wall: f64, link_start: f64, link_len: f64, other: f64, jobs: f64) -> Trace {
    sampled(wall, |t| {
        if t < link_start {
            (jobs + other, jobs)
        } else {
            (link_threads((t - link_start) / link_len) + other, 1.0)
        }
    })
}

#[test]
fn a_link_recorded_beside_the_same_other_work_as_its_compiles_loses_what_they_lost() {
    // The record was made beside one busy loop throughout, this run is quiet. The link is not
    // single-threaded (one, two, then eight runnable threads), and a model of its threads would
    // have it at 0.8x (share(n + 1) / share(n) over its phases); the real pair below measured
    // it at the compiles' factor instead (0.82x against 0.83x), and so is it predicted: the other
    // work is the same in both phases, so the link gains what the compiles gained.
    let r = Record::parse(LOG).unwrap();
    let jobs = r.parallelism();
    let long = r.steps.iter().find(|s| s.long).unwrap();
    let (link_start, link_len) = (long.start, long.secs());
    let rec_load = threaded_trace(r.wall(), link_start, link_len, 1.0, 2.0);
    // Compiles got 2/3 of a core each in the record, a whole one now; so does the link.
    let factor = 2.0 / 3.0;
    let run = replay(
        &r,
        jobs,
        |s| if s.long { factor } else { factor * jitter(s) },
    );
    let run_long = run.iter().find(|x| r.steps[x.0].long).unwrap();
    let run_wall = run.iter().map(|x| x.2).fold(0.0, f64::max);
    let run_load = threaded_trace(run_wall, run_long.1, run_long.2 - run_long.1, 0.0, 2.0);
    let at = [0.25, 0.5, 0.75];
    let got = replay_errors_loaded(&r, Some(&rec_load), jobs, &run, Some(&run_load), &at);
    eprintln!("predicted, true: {got:.0?}");
    for (p, t) in &got {
        assert!(
            ((p - t) / t).abs() < 0.05,
            "predicted {p:.0} s, truth {t:.0} s"
        );
    }
}

/// `t` with its CPU column: each short step of the schedule `steps` ((step, start, end), as
/// [`replay`] gives it) used `share` of a core while it ran, counted from its end on (when ninja
/// reaps it); the long step is not counted (it ends after the trace).
fn with_cpu(mut t: Trace, r: &Record, steps: &[(usize, f64, f64)], share: f64) -> Trace {
    for s in &mut t.samples {
        let done: f64 = (steps.iter())
            .filter(|x| !r.steps[x.0].long && x.2 <= s.t)
            .map(|x| x.2 - x.1)
            .sum();
        s.cpu = Some(share * done);
    }
    t
}

/// The record's own schedule, as [`replay`] gives one.
fn schedule(r: &Record) -> Vec<(usize, f64, f64)> {
    r.steps
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.start, s.end))
        .collect()
}

/// `r` replayed with compiles at `compile` times the record (with jitter) and the long step at
/// `link`, with its load trace (`other` tasks beside it throughout, [`threaded_trace`]) and a CPU
/// column at `share` of a core per compile ([`with_cpu`]): the run and its trace.
fn cpu_run(
    r: &Record,
    compile: f64,
    link: f64,
    other: f64,
    share: f64,
) -> (Vec<(usize, f64, f64)>, Trace) {
    let run = replay(r, r.parallelism(), |s| {
        if s.long {
            link
        } else {
            compile * jitter(s)
        }
    });
    let long = run.iter().find(|x| r.steps[x.0].long).unwrap();
    let wall = run.iter().map(|x| x.2).fold(0.0, f64::max);
    let load = threaded_trace(wall, long.1, long.2 - long.1, other, 2.0);
    let load = with_cpu(load, r, &run, share);
    (run, load)
}

#[test]
fn a_record_whose_compiles_were_held_to_one_core_scales_the_link_by_the_cpu_they_got() {
    // The third real pair's case (below): a busy loop in another cgroup held the record's two
    // compiles to one core between them (runnable 3 on 2 cores, yet each got half a core), while
    // its link (one, two, then eight threads) got a core whenever it wanted at most one. Quiet,
    // the compiles run at 0.5x, less the 8 % more CPU time-slicing cost them
    // (load::time_slice_cpu); the link's one-thread seconds take as long as in the record, its
    // two-thread ones half, its eight-thread ones half (two cores): 0.2 + 0.5 x 0.5 + 0.3 x 0.5
    // = 0.6x. The CPU column tells it; the runnable count alone (no CPU column) does not.
    let r = Record::parse(LOG).unwrap();
    let jobs = r.parallelism();
    let long = r.steps.iter().find(|s| s.long).unwrap();
    let (link_start, link_len) = (long.start, long.secs());
    let sliced = super::super::load::time_slice_cpu(0.5);
    let at = [0.25, 0.5, 0.75];
    let within_5_percent = |what: &str, rec: &Trace, run: &[(usize, f64, f64)], live: &Trace| {
        let got = replay_errors_loaded(&r, Some(rec), jobs, run, Some(live), &at);
        eprintln!("{what}: {got:.0?}");
        for (p, t) in &got {
            assert!(
                ((p - t) / t).abs() < 0.05,
                "{what}: predicted {p:.0} s, truth {t:.0} s"
            );
        }
    };
    let rec_busy = threaded_trace(r.wall(), link_start, link_len, 1.0, 2.0);
    let rec_busy_cpu = with_cpu(rec_busy.clone(), &r, &schedule(&r), 0.5);
    let link = 0.2 + 0.5 * 0.5 + 0.3 * 0.5;
    let (run, live) = cpu_run(&r, 0.5 / sliced, link, 0.0, 1.0);
    within_5_percent(
        "quiet from busy, with the CPU column",
        &rec_busy_cpu,
        &run,
        &live,
    );
    let mut no_cpu = live.clone();
    no_cpu.samples.iter_mut().for_each(|s| s.cpu = None);
    let without = replay_errors_loaded(&r, Some(&rec_busy), jobs, &run, Some(&no_cpu), &at);
    eprintln!("runnable count only: {without:.0?}");
    assert!(
        without.iter().any(|(p, t)| ((p - t) / t).abs() > 0.15),
        "{without:?}"
    );
    // And the other way: the quiet record predicts the build held to one core. Its compiles run
    // at 2x and need 8 % more CPU, its link's one-thread seconds as before, the others twice as
    // long: 2 - 0.2 = 1.8x.
    let rec_quiet = threaded_trace(r.wall(), link_start, link_len, 0.0, 2.0);
    let rec_quiet = with_cpu(rec_quiet, &r, &schedule(&r), 1.0);
    let (run, live) = cpu_run(&r, 2.0 * sliced, 1.8, 1.0, 0.5);
    within_5_percent(
        "busy from quiet, with the CPU column",
        &rec_quiet,
        &run,
        &live,
    );
    // Both quiet, this machine 1.3x slower per CPU second: the compiles got whole cores in both
    // runs, so their CPU time is their work, and the link is 1.3x too.
    let (run, live) = cpu_run(&r, 1.3, 1.3, 0.0, 1.0);
    within_5_percent(
        "quiet from quiet, 1.3x per CPU second",
        &rec_quiet,
        &run,
        &live,
    );
    // A share a little under or over the 90 % that `cap` draws its line at moves the link's
    // factor a little, not a step: the measured compiles' speed is kept either side.
    let run_long = run.iter().find(|x| r.steps[x.0].long).unwrap().1;
    let at_share = |share: f64| {
        let (_, live) = cpu_run(&r, 1.3, 1.3, 0.0, share);
        let mut est = Estimator::new(r.clone(), jobs).with_load(Some(rec_quiet.clone()), live);
        for x in run.iter().filter(|x| x.2 <= run_long * 0.8) {
            est.finished(&r.steps[x.0].output, x.2 - x.1);
        }
        est.estimate(run_long * 0.8).long_speed
    };
    let (over, under) = (at_share(0.91), at_share(0.89));
    assert!((over - under).abs() < 0.15 * over, "{over} against {under}");
}

#[test]
fn a_compile_past_its_scaled_time_is_no_overrun() {
    // Only a long step's overrun is reported ("longer than the record predicts" must not
    // appear while only compiles run).
    let r = two_links();
    let mut e = Estimator::new(r.clone(), 2);
    e.status(0, 2, 0.0);
    let at = e.estimate(25.0);
    assert_eq!(at.overrun, 0.0, "{at:?}");
    assert!(at.long_running.is_empty());
}

/// Four 10 s compiles on two slots, then two 100 s links, each a barrier.
fn two_links() -> Record {
    Record::parse(
        "# ninja log v6\n0\t10000\t0\ta.o\t1\n0\t10000\t0\tb.o\t2\n10000\t20000\t0\tc.o\t3\n10000\t20000\t0\td.o\t4\n20000\t120000\t0\tliba.so\t5\n120000\t220000\t0\tlibb.so\t6\n",
    )
    .unwrap()
}

#[test]
fn a_finished_long_step_sets_the_speed_of_the_next_one() {
    // Compiles as fast as the record, links twice as slow.
    let r = two_links();
    assert!(r.steps[4].barrier && r.steps[5].barrier);
    let mut e = Estimator::new(r.clone(), 2);
    for s in &r.steps[..4] {
        e.finished(&s.output, s.secs());
    }
    e.finished("liba.so", 200.0);
    e.status(5, 1, 220.0);
    let at = e.estimate(220.0);
    assert!((at.speed - 1.0).abs() < 1e-9, "{at:?}");
    assert!((at.long_speed - 2.0).abs() < 1e-9, "{at:?}");
    // The truth: libb.so takes 200 s (one blended factor would say 171 s).
    assert!((at.remaining - 200.0).abs() < 1.0, "{at:?}");
}

#[test]
fn a_long_step_past_its_predicted_end_bounds_the_pending_ones() {
    let r = two_links();
    let mut e = Estimator::new(r.clone(), 2);
    for s in &r.steps[..4] {
        e.finished(&s.output, s.secs());
    }
    e.status(4, 1, 20.0);
    // 150 s into liba.so (100 s in the record, predicted 100 s at the compiles' speed).
    let at = e.estimate(170.0);
    assert!((at.overrun - 50.0).abs() < 1e-6, "{at:?}");
    assert!((at.long_speed - 1.5).abs() < 1e-9, "{at:?}");
    // libb.so is taken to be at least 1.5x too: 150 s, not the record's 100 s.
    assert!((at.remaining - 150.0).abs() < 1e-6, "{at:?}");
}

#[test]
fn the_running_link_is_named_and_an_overrun_is_reported() {
    let r = Record::parse(LOG).unwrap();
    let n = r.steps.len();
    let link = r
        .steps
        .iter()
        .position(|s| s.output == "librccl.so.1.0")
        .unwrap();
    let mut e = Estimator::new(r.clone(), 2);
    for s in &r.steps[..link] {
        e.finished(&s.output, s.secs());
    }
    let t0 = r.steps[link].start;
    e.status(link, 1, t0);
    let at = e.estimate(t0 + 60.0);
    assert_eq!(at.long_running.len(), 1);
    assert_eq!(at.long_running[0].0, "librccl.so.1.0");
    assert!(
        (at.remaining - (r.wall() - t0 - 60.0)).abs() < 5.0,
        "{at:?}"
    );
    let late = e.estimate(t0 + 1300.0);
    assert!(late.overrun > 80.0, "{late:?}");
    assert!(n > link);
    assert!(
        describe_step("librccl.so.1.0", 1212.0, "gfx1100").starts_with("device link for gfx1100")
    );
}

/// The recorded build with one compile stretched by `extra` seconds (as a loaded machine can
/// stretch one), as ninja would have logged it; returns the log and that compile's output.
fn with_a_stretched_compile(extra: f64) -> (String, String) {
    let r = Record::parse(LOG).unwrap();
    let link = r.steps.iter().find(|s| s.long).unwrap().start;
    // The longest compile that still ends before the link starts once stretched.
    let c = r
        .steps
        .iter()
        .filter(|s| !s.long && s.end + extra < link)
        .max_by(|a, b| a.secs().total_cmp(&b.secs()))
        .unwrap();
    let mut log = String::from("# ninja log v6\n");
    for s in &r.steps {
        let end = if s.output == c.output {
            s.end + extra
        } else {
            s.end
        };
        log.push_str(&format!(
            "{:.0}\t{:.0}\t0\t{}\t{:x}\n",
            s.start * 1000.0,
            end * 1000.0,
            s.output,
            s.output.len()
        ));
    }
    (log, c.output.clone())
}

#[test]
fn a_compile_that_crossed_a_minute_in_a_loaded_record_is_no_long_step() {
    // Session 6's miss: a compile took 69 s in a record made under load and 18 s in the quiet
    // run; counted as a long step, its factor (0.26) became the link's, and the link was
    // predicted at a quarter of its time. It is not the link's kind of step: it ran beside others
    // and is far from the median's 20 times.
    let (log, stretched) = with_a_stretched_compile(35.0);
    let r = Record::parse(&log).unwrap();
    let c = r.steps.iter().find(|s| s.output == stretched).unwrap();
    assert!(c.secs() >= LONG_STEP_S, "{c:?}");
    assert!(!c.long, "{c:?}");
    let long: Vec<&str> = r
        .steps
        .iter()
        .filter(|s| s.long)
        .map(|s| s.output.as_str())
        .collect();
    assert_eq!(long, ["librccl.so.1.0"]);
    // The quiet run: every step at 0.5x, the stretched compile at 0.25x (its unstretched time).
    let jobs = r.parallelism();
    let run = replay(&r, jobs, |s| if s.output == stretched { 0.25 } else { 0.5 });
    for e in errors(&r, jobs, &run) {
        assert!(e.abs() < 0.15, "{:.1} %", e * 100.0);
    }
    // A step that ran alone is long whatever the median (two_links: 100 s links, 10 s compiles).
    assert!(two_links().steps.iter().filter(|s| s.long).count() == 2);
}

/// Replay the real run `run` (a `.ninja_log` and its load trace) against the real record `rec`:
/// its steps and load samples are fed to the estimator as they came. Returns the predicted and
/// true remaining seconds at 10, 25, 50, 75 and 90 % of the run.
fn replay_real(rec: (&str, &str), run: (&str, &str)) -> Vec<(f64, f64)> {
    let (rec, rec_load) = (Record::parse(rec.0).unwrap(), Trace::parse(rec.1).unwrap());
    let (live, live_load) = (Record::parse(run.0).unwrap(), Trace::parse(run.1).unwrap());
    let index: HashMap<&str, usize> = rec
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.output.as_str(), i))
        .collect();
    let steps: Vec<(usize, f64, f64)> = live
        .steps
        .iter()
        .map(|s| (index[s.output.as_str()], s.start, s.end))
        .collect();
    assert_eq!(steps.len(), rec.steps.len());
    let at = [0.1, 0.25, 0.5, 0.75, 0.9];
    let jobs = rec.parallelism();
    replay_errors_loaded(&rec, Some(&rec_load), jobs, &steps, Some(&live_load), &at)
}

/// One real timing record of tests/data/eta/: its `.ninja_log` and its `.load`, by file stem.
macro_rules! real_record {
    ($stem:literal) => {
        (
            include_str!(concat!("../../../tests/data/eta/", $stem, ".ninja_log")),
            include_str!(concat!("../../../tests/data/eta/", $stem, ".load")),
        )
    };
}

const BUSY: (&str, &str) = real_record!("busy");
const QUIET: (&str, &str) = real_record!("quiet");

/// A real pair, measured (tests/data/eta/README.md): RCCL 2.21.5 built with `rcclfix build
/// --rebuild` on a 2-core machine beside one busy loop (`busy.*`), then again on the quiet machine
/// with that record (`quiet.*`). Each run is predicted from the other's record: the quiet rebuild
/// from the busy record (what happened), and the busy run from the quiet record (a record made
/// quiet, a rebuild beside other work).
///
/// The compiles ran at 0.83x the record and the link at 0.82x: one busy loop slowed both alike,
/// though a model of the link's threads (one or two for most of it, on two cores beside the loop)
/// says 0.78x and the runnable-task count says the compiles should have been at 0.67x. Issue 23's
/// goal is 15 % at 25, 50 and 75 % of the run; measured within 3.1 % from 10 to 90 %.
#[test]
fn a_real_pair_made_with_and_without_a_busy_loop_is_predicted_within_15_percent_either_way() {
    for (name, rec, run) in [
        ("quiet from busy", BUSY, QUIET),
        ("busy from quiet", QUIET, BUSY),
    ] {
        let got = replay_real(rec, run);
        eprintln!("{name}: predicted and true remaining at 10/25/50/75/90 %: {got:.0?}");
        for (p, t) in &got {
            assert!(
                ((p - t) / t).abs() < 0.15,
                "{name}: predicted {p:.0} s, truth {t:.0} s"
            );
        }
    }
}

const BUSY2: (&str, &str) = real_record!("busy2");
const QUIET2: (&str, &str) = real_record!("quiet2");

/// A second real pair (tests/data/eta/README.md), made as the first, where one busy loop slowed
/// the compiles and the link unlike: the quiet rebuild's compiles ran at 0.49x the busy record,
/// its link at 0.62x (348 s in the record, 215 s quiet). This is the module's "Limit": before the
/// link ends nothing tells its factor, and the estimate takes the compiles' one for it. It keeps
/// the estimate within that limit (the two factors' difference times the record's link, plus 5 %
/// of the truth) at 25, 50 and 75 %; issue 23's 15 % is not met on this pair without the CPU
/// column its traces lack (the live build said −11.8, −18.3 and −36.2 %, the replay −13.0, −19.4
/// and −39.0 %). The third pair, below, has that column and is met.
#[test]
fn a_real_pair_whose_link_scaled_unlike_its_compiles_is_off_by_the_documented_limit_at_most() {
    let (rec, run) = (
        Record::parse(BUSY2.0).unwrap(),
        Record::parse(QUIET2.0).unwrap(),
    );
    // Summed seconds of a record's long steps (`true`: the link) or of the others.
    let secs = |r: &Record, long: bool| {
        r.steps
            .iter()
            .filter(|s| s.long == long)
            .map(Step::secs)
            .sum::<f64>()
    };
    let factor = |long: bool| secs(&run, long) / secs(&rec, long);
    let (f_link, f_compile) = (factor(true), factor(false));
    assert!(
        (f_link - f_compile).abs() > 0.1,
        "the pair's link ({f_link:.2}x) and compiles ({f_compile:.2}x) scaled alike"
    );
    let got = replay_real(BUSY2, QUIET2);
    eprintln!("quiet2 from busy2: predicted and true remaining at 10/25/50/75/90 %: {got:.0?}");
    for (p, t) in &got[1..4] {
        let bound = (f_link - f_compile).abs() * secs(&rec, true) + 0.05 * t;
        assert!(
            (p - t).abs() <= bound,
            "predicted {p:.0} s, truth {t:.0} s, bound {bound:.0} s"
        );
    }
}

const BUSY3: (&str, &str) = real_record!("busy3");
const QUIET3: (&str, &str) = real_record!("quiet3");
const BUSY3B: (&str, &str) = real_record!("busy3b");

/// A third real pair, with the CPU column (tests/data/eta/README.md): a busy build, a quiet one
/// from its record, then a busy one from the quiet record. The busy loop held the compiles to one
/// core between them (1.03 CPU seconds per second against 1.98 quiet; 0.48x quiet) and slowed the
/// link less (0.67x: 316 s busy, 212 s quiet), the second pair's case. Each run is predicted from
/// the other kind's record; issue 23's goal is 15 % at 25, 50 and 75 %.
#[test]
fn a_real_pair_with_the_cpu_time_is_predicted_within_15_percent_either_way() {
    for (name, rec, run) in [
        ("quiet3 from busy3", BUSY3, QUIET3),
        ("busy3b from quiet3", QUIET3, BUSY3B),
        ("busy3 from quiet3", QUIET3, BUSY3),
        ("quiet3 from busy3b", BUSY3B, QUIET3),
    ] {
        assert!(Trace::parse(rec.1)
            .unwrap()
            .samples
            .iter()
            .any(|s| s.cpu.is_some()));
        let got = replay_real(rec, run);
        eprintln!("{name}: predicted and true remaining at 10/25/50/75/90 %: {got:.0?}");
        for (p, t) in &got[1..4] {
            assert!(
                ((p - t) / t).abs() < 0.15,
                "{name}: predicted {p:.0} s, truth {t:.0} s"
            );
        }
    }
}
