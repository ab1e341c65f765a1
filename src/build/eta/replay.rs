//! Replays of a recorded build for tests and measurements: a simulated run of the record's steps
//! with chosen speed factors ([`replay`]), and the estimator fed that run's events as a live build
//! would feed it ([`replay_errors`], [`replay_errors_loaded`]).

use super::{Estimator, Record, Step, Trace};

/// One simulated run for tests and measurements: `record`'s steps, each taking its recorded
/// duration times `factor(step)`, scheduled in record order on `jobs` slots with the barriers kept.
/// Returns (step index, start, end) in seconds, in start order.
pub fn replay(
    record: &Record,
    jobs: usize,
    factor: impl Fn(&Step) -> f64,
) -> Vec<(usize, f64, f64)> {
    let mut slots = vec![0.0f64; jobs.max(1)];
    let mut out = vec![];
    for (i, s) in record.steps.iter().enumerate() {
        if s.barrier {
            let t = slots.iter().cloned().fold(0.0, f64::max);
            slots.iter_mut().for_each(|x| *x = t);
        }
        let (k, _) = slots
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .expect("a slot");
        let start = slots[k];
        let end = start + s.secs() * factor(s);
        slots[k] = end;
        out.push((i, start, end));
    }
    out
}

/// Feed `run` (from [`replay`]) to an estimator built on `record` and return, for each fraction of
/// the run's true wall time in `at` (e.g. 0.25), the predicted and the true remaining seconds.
///
/// The events are what a live build gives: at each step's end, its duration (the `.ninja_log`
/// line) and ninja's status line with the finished and running counts, the running count as
/// ninja prints it (with the step that just ended).
pub fn replay_errors(
    record: &Record,
    jobs: usize,
    run: &[(usize, f64, f64)],
    at: &[f64],
) -> Vec<(f64, f64)> {
    replay_errors_loaded(record, None, jobs, run, None, at)
}

/// [`replay_errors`] with the load traces of the recorded run (`rec_load`) and of the replayed
/// one (`run_load`, its samples fed as their time passes).
pub fn replay_errors_loaded(
    record: &Record,
    rec_load: Option<&Trace>,
    jobs: usize,
    run: &[(usize, f64, f64)],
    run_load: Option<&Trace>,
    at: &[f64],
) -> Vec<(f64, f64)> {
    let wall = run.iter().map(|r| r.2).fold(0.0, f64::max);
    let mut ends: Vec<&(usize, f64, f64)> = run.iter().collect();
    ends.sort_by(|a, b| a.2.total_cmp(&b.2));
    let live = Trace {
        cores: run_load.map_or(1, |t| t.cores),
        samples: vec![],
    };
    let mut est = Estimator::new(record.clone(), jobs).with_load(rec_load.cloned(), live);
    let samples = run_load.map_or(&[][..], |t| &t.samples[..]);
    let mut next_sample = 0;
    let mut out = vec![];
    let mut next = 0;
    let mut finished = 0;
    let mut feed_until = |est: &mut Estimator, t: f64| {
        while next_sample < samples.len() && samples[next_sample].t <= t {
            est.load_sample(samples[next_sample]);
            next_sample += 1;
        }
    };
    for &frac in at {
        let t = wall * frac;
        while next < ends.len() && ends[next].2 <= t {
            let (i, s, e) = *ends[next];
            feed_until(&mut est, e);
            est.finished(&record.steps[i].output, e - s);
            finished += 1;
            // ninja prints `%r` before it takes the finished edge off its running count
            // (`StatusPrinter::BuildEdgeFinished` in its `src/status_printer.cc`): the count
            // includes the step that just ended, whose slot it fills next (and not the step that
            // fills it, which starts after).
            let running = run.iter().filter(|r| r.1 < e && r.2 >= e).count();
            est.status(finished, running, e);
            next += 1;
        }
        feed_until(&mut est, t);
        out.push((est.estimate(t).remaining, wall - t));
    }
    out
}
