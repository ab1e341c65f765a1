//! Remaining-time estimates for a ninja build from the per-step durations of an earlier build.
//!
//! ninja appends one line per finished edge to `.ninja_log` (format v5+, ninja's
//! `src/build_log.cc`): `start_ms \t end_ms \t mtime \t output \t command_hash`, times relative to
//! the start of that ninja run; an edge with several outputs writes one line per output with the
//! same times and hash. [`Record::parse`] turns such a log into one [`Step`] per edge.
//!
//! [`Estimator`] predicts the rest of a run from a record: it learns this run's speed from the
//! steps that finished (their durations in this run's `.ninja_log` against the record's), knows how
//! many steps run (`%r` in `NINJA_STATUS`), takes the running steps to be the next ones in the
//! record's start order, and simulates the remaining steps on as many slots as ninja used. A step
//! that started in the record only after every earlier step had ended (the device link) is a
//! barrier: it waits for everything before it.
//!
//! Long steps ([`Step::long`]: in RCCL's record, the device link) get their own speed once
//! one of them finished in this run (a link need not scale like the compiles: it runs alone and
//! single-threaded); before that they are assumed to scale like the short ones. A long step that
//! runs past its predicted end is a lower bound for the long steps still pending: they are taken to
//! be at least as slow, relative to the record, as it already is.
//!
//! **Limit:** RCCL's build has one long step, the device link, which starts after every compile
//! ended and during which nothing finishes. Until it ends nothing observable tells how it scales, so
//! when it scales differently from the compiles the estimate is off by the difference of the two
//! factors times its recorded length (the `mixed_scaling` test bounds exactly that). The load
//! traces below narrow it: where both runs have the CPU column, to what the link's threads and
//! the cores the build could use say.
//!
//! **With load traces** ([`super::load`]) of the recorded run and of this one, the long steps'
//! factor before any of them finished is no longer the compiles': the compile factor is split into
//! the two machines' per-core speed and how much of a core each compile got in either run, and the
//! link is scaled by the per-core speed and by how much of the machine the compiles would have got
//! beside the other work of the record's link against the other work now (`super::load` has the
//! formula). A record made while other work loaded its compiles but had ended by its link no longer
//! predicts a link as fast as the now quicker compiles; one made beside the same other work
//! throughout predicts the link at the compiles' factor, which is what a real pair measured (a busy
//! loop slowed the compiles to 0.83x and the link to 0.82x, where a model of the link's threads
//! said 0.78x and the runnable-task count said the compiles should have been at 0.67x). Once the
//! link has run 30 s, the other work now is measured from its own samples.
//!
//! **With the CPU time** of each run's finished steps in both traces ([`super::ninja_cpu`]) the
//! runnable count is not trusted to say what the compiles got: a second real pair had them held to
//! one core between them by one busy loop (a container's cgroup shares the CPU with the loop's, not
//! task by task: 0.49x quiet, where the count said 0.67x), while its link, wanting one thread most
//! of the time, got a whole core (0.62x). So the compiles' factor is split into the share of a core
//! each got (the CPU time of the finished compiles over their summed wall time, measured) and the
//! CPU each needed (less what time-slicing cost them: sharing a core, they needed 8 % more CPU
//! for the same work, [`super::load::time_slice_cpu`], which the link on a core of its own does
//! not); the cores the build
//! could use at once in either run come from the same rate ([`super::load::cap`]); and the record's
//! link is replayed second by second, its threads (runnable tasks beyond the record's other work)
//! given `min(threads, cores the build could use)` then and now ([`Trace::link_time_ratio`]).
//! This model takes the other work now from the compiles only; a load that starts or stops
//! during the link shows only through the overrun bound below.

use std::collections::HashMap;

use super::load::{Sample, Trace};

mod replay;
pub use replay::{replay, replay_errors, replay_errors_loaded};

/// A step is "long" (the device link's class: named while it runs, scaled apart from the compiles)
/// only when it took at least this long in the record, and [`Step::long`] says the rest.
pub const LONG_STEP_S: f64 = 60.0;

/// ... and ran alone (a barrier with nothing beside it), or took at least this many times the
/// record's median step. A compile that crossed [`LONG_STEP_S`] because the recorded run was
/// loaded is neither (a record made under load had a 69 s compile that took 18 s quiet; RCCL's link
/// is over 100 times its median compile).
pub const LONG_OVER_MEDIAN: f64 = 20.0;

/// `NINJA_STATUS` rcclfix sets: finished/total, then the number of running edges.
pub const NINJA_STATUS: &str = "[%f/%t %r] ";

/// One edge of a recorded build.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The first output ninja logged for the edge (relative to the build folder).
    pub output: String,
    /// Start and end, seconds since the start of the recorded ninja run.
    pub start: f64,
    /// End, seconds.
    pub end: f64,
    /// Whether it started only after every earlier step ended (a dependency barrier).
    pub barrier: bool,
    /// Whether it is a long step: at least [`LONG_STEP_S`], and either run alone (a barrier that
    /// ended before the next step started) or at least [`LONG_OVER_MEDIAN`] times the median of
    /// the record's steps of 0.2 s or more. Set by [`Record::parse`].
    pub long: bool,
}

impl Step {
    /// Duration in seconds.
    pub fn secs(&self) -> f64 {
        self.end - self.start
    }
}

/// A recorded build: its steps in start order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Steps sorted by start time.
    pub steps: Vec<Step>,
}

/// Strip the build folder prefix ninja sometimes logs (`/build/x` and `x` for one edge).
fn norm(output: &str) -> &str {
    output.strip_prefix("/build/").unwrap_or(output)
}

impl Record {
    /// Parse a `.ninja_log` (`# ninja log v5` … `v7`). Only the last run in the log counts: a
    /// start time lower than the previous line's starts a new run (ninja appends runs).
    ///
    /// Errors: no header, or a line that is not five tab-separated fields with numeric times.
    pub fn parse(text: &str) -> anyhow::Result<Record> {
        let mut lines = text.lines();
        let head = lines.next().unwrap_or_default();
        if !head.starts_with("# ninja log v") {
            anyhow::bail!("not a ninja log (first line {:?})", head);
        }
        let mut edges: Vec<(u64, u64, String, String)> = vec![];
        let mut seen: HashMap<(u64, u64, String), ()> = HashMap::new();
        for (i, l) in lines.enumerate() {
            if l.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() != 5 {
                anyhow::bail!("ninja log line {}: expected 5 tab-separated fields", i + 2);
            }
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| anyhow::anyhow!("ninja log line {}: bad time {s:?}", i + 2))
            };
            let (start, end) = (num(f[0])?, num(f[1])?);
            if end < start {
                anyhow::bail!("ninja log line {}: ends before it starts", i + 2);
            }
            if let Some(last) = edges.last() {
                if end < last.1 && start < last.0 && start == 0 {
                    // A later ninja run appended to the same log.
                    edges.clear();
                    seen.clear();
                }
            }
            if seen.insert((start, end, f[4].to_owned()), ()).is_some() {
                continue;
            }
            edges.push((start, end, norm(f[3]).to_owned(), f[4].to_owned()));
        }
        edges.sort_by_key(|e| (e.0, e.1));
        let mut steps = vec![];
        let mut max_end = 0u64;
        for (idx, (s, e, out, _)) in edges.into_iter().enumerate() {
            steps.push(Step {
                output: out,
                start: s as f64 / 1000.0,
                end: e as f64 / 1000.0,
                barrier: idx > 0 && s >= max_end,
                long: false,
            });
            max_end = max_end.max(e);
        }
        let mut timed: Vec<f64> = steps.iter().map(Step::secs).filter(|&d| d >= 0.2).collect();
        timed.sort_by(f64::total_cmp);
        let median = timed.get(timed.len() / 2).copied().unwrap_or(0.0);
        for i in 0..steps.len() {
            let s = &steps[i];
            let alone = s.barrier && steps.get(i + 1).is_none_or(|n| n.start >= s.end);
            let long = s.secs() >= LONG_STEP_S && (alone || s.secs() >= LONG_OVER_MEDIAN * median);
            steps[i].long = long;
        }
        Ok(Record { steps })
    }

    /// Wall time of the recorded run, seconds.
    pub fn wall(&self) -> f64 {
        self.steps.iter().map(|s| s.end).fold(0.0, f64::max)
    }

    /// The most steps that ran at once in the record.
    pub fn parallelism(&self) -> usize {
        let mut ev: Vec<(f64, i32)> = vec![];
        for s in &self.steps {
            ev.push((s.start, 1));
            ev.push((s.end, -1));
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut cur, mut max) = (0i32, 0i32);
        for (_, d) in ev {
            cur += d;
            max = max.max(cur);
        }
        max.max(1) as usize
    }
}

/// What the estimator says at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Predicted seconds until ninja finishes.
    pub remaining: f64,
    /// This run's step durations over the record's (1.5 = 50 % slower); 1.0 before any step
    /// finished. Short steps only once a long one has finished (then see `long_speed`).
    pub speed: f64,
    /// The factor assumed for long steps ([`Step::long`]): measured on the long steps that
    /// finished in this run, else `speed`; never below what a long step running past its predicted
    /// end already shows (elapsed / recorded).
    pub long_speed: f64,
    /// The long steps believed running now, with their recorded duration in seconds.
    pub long_running: Vec<(String, f64)>,
    /// Seconds by which the running steps have already exceeded the record scaled by `speed`
    /// (0 when on time).
    pub overrun: f64,
}

/// Predicts the rest of one ninja run from a [`Record`] (see the module docs). Feed it what ninja
/// says with [`Estimator::status`] and each finished step's duration with [`Estimator::finished`].
#[derive(Debug, Clone)]
pub struct Estimator {
    record: Record,
    index: HashMap<String, usize>,
    done: Vec<bool>,
    started_at: Vec<Option<f64>>,
    sum_actual: f64,
    /// Summed durations of every finished short step (the CPU-time model's wall time).
    done_wall: f64,
    sum_recorded: f64,
    long_actual: f64,
    long_recorded: f64,
    finished: usize,
    running: usize,
    slots: usize,
    /// The recorded run's load trace, when it was kept.
    rec_load: Option<Trace>,
    /// This run's load samples.
    live_load: Trace,
}

impl Estimator {
    /// An estimator for a run like `record`, with ninja running at most `jobs` steps at once.
    pub fn new(record: Record, jobs: usize) -> Estimator {
        let n = record.steps.len();
        let index = record
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.output.clone(), i))
            .collect();
        Estimator {
            record,
            index,
            done: vec![false; n],
            started_at: vec![None; n],
            sum_actual: 0.0,
            done_wall: 0.0,
            sum_recorded: 0.0,
            long_actual: 0.0,
            long_recorded: 0.0,
            finished: 0,
            running: 0,
            slots: jobs.max(1),
            rec_load: None,
            live_load: Trace::here(),
        }
    }

    /// Use the recorded run's load trace and this run's (`live`, empty so far unless replayed),
    /// see the module docs. A trace without samples is ignored.
    pub fn with_load(mut self, recorded: Option<Trace>, live: Trace) -> Estimator {
        self.rec_load = recorded.filter(|t| !t.samples.is_empty());
        self.live_load = live;
        self
    }

    /// One load sample of this run ([`super::load::Sample`], its `t` on the `status` time base).
    pub fn load_sample(&mut self, s: Sample) {
        if self.live_load.samples.last().is_none_or(|l| s.t >= l.t) {
            self.live_load.samples.push(s);
        }
    }

    /// This run's load samples so far.
    pub fn live_load(&self) -> &Trace {
        &self.live_load
    }

    /// Take this run's load samples (for the next build's record), leaving none.
    pub fn take_live_load(&mut self) -> Trace {
        let cores = self.live_load.cores;
        std::mem::replace(
            &mut self.live_load,
            Trace {
                cores,
                samples: vec![],
            },
        )
    }

    /// The record's first long step (its start and end, seconds), when it has one.
    fn first_long(&self) -> Option<(f64, f64)> {
        let s = self
            .record
            .steps
            .iter()
            .filter(|s| s.long)
            .min_by(|a, b| a.start.total_cmp(&b.start))?;
        Some((s.start, s.end))
    }

    /// The other work in the record's trace `rec` before its first long step at `first_long`:
    /// what its last compiles ran beside, unless the link's own least-threaded phases show less
    /// (that work ended before the link).
    fn rec_other(rec: &Trace, first_long: f64) -> Option<f64> {
        Some(
            rec.background_between((first_long - 120.0).max(0.0), first_long)?
                .min(rec.low_beside_one(first_long, usize::MAX)?),
        )
    }

    /// The long steps' factor from the CPU time the compiles got (module docs), given the
    /// compiles' factor `speed`, the time `now` and when this run's first long step started
    /// (`None`: not yet). `None` when either trace lacks the CPU column over its compiles, or the
    /// record has no long step or no samples of it.
    fn long_speed_from_cpu(&self, speed: f64, now: f64, long_started: Option<f64>) -> Option<f64> {
        use super::load::{cap, time_slice_cpu};
        let rec = self.rec_load.as_ref()?;
        let (first_long, long_end) = self.first_long()?;
        let live = &self.live_load;
        let compile_end = long_started.unwrap_or(now);
        // Each run's share of a core per compile: the CPU time of its finished compiles over their
        // summed wall time. The record's compiles were all reaped when its link started, and the
        // link is not counted until it ends; this run's CPU and wall time are of the steps that
        // finished (no lag from the ones still running).
        let rec_wall: f64 = (self.record.steps.iter())
            .filter(|s| !s.long && s.start < first_long)
            .map(Step::secs)
            .sum();
        let rec_share = rec.cpu_in(first_long, long_end - 1.0)? / rec_wall;
        if self.done_wall < 10.0 {
            return None;
        }
        let now_share = live.cpu_in(0.0, now)? / self.done_wall;
        if !(rec_share > 0.0 && now_share > 0.0 && rec_share.is_finite()) {
            return None;
        }
        let rec_jobs = rec.running_between(0.0, first_long)?.max(1.0);
        let now_jobs = live.running_between(0.0, compile_end)?.max(1.0);
        let rec_other = Self::rec_other(rec, first_long)?;
        let now_other = live.background_between((compile_end - 60.0).max(0.0), compile_end)?;
        // The compiles' factor is the CPU each needed over the share of a core each got; with
        // the shares measured, the rest is the per-CPU-second factor, less the extra CPU that
        // time-slicing costs a compile sharing its core (the link's work is taken at its cost
        // on a core of its own).
        let per_cpu =
            speed * now_share / rec_share * time_slice_cpu(rec_share) / time_slice_cpu(now_share);
        let cap_rec = cap(rec_share * rec_jobs, rec_jobs, rec.cores, rec_other);
        let cap_now = cap(now_share * now_jobs, now_jobs, live.cores, now_other);
        let ratio = rec.link_time_ratio(first_long, long_end, rec_other, cap_rec, cap_now)?;
        Some(per_cpu * ratio)
            .filter(|f| f.is_finite())
            .map(|f| f.clamp(0.05, 20.0))
    }

    /// The long steps' factor from the load traces (module docs), given the compiles' factor
    /// `speed`, the time `now` and when this run's first long step started (`None`: not yet).
    /// `None` when a trace lacks samples for a phase or the record has no long step.
    fn long_speed_from_load(&self, speed: f64, now: f64, long_started: Option<f64>) -> Option<f64> {
        let rec = self.rec_load.as_ref()?;
        let (first_long, _) = self.first_long()?;
        let rec_compile = rec.share_between(0.0, first_long)?;
        if !rec
            .samples
            .iter()
            .any(|s| s.t >= first_long && s.t <= self.record.wall())
        {
            return None;
        }
        let rec_other = Self::rec_other(rec, first_long)?;
        let live = &self.live_load;
        let compile_end = long_started.unwrap_or(now);
        let now_compile = live.share_between(0.0, compile_end)?;
        let mut now_other = live.background_between((compile_end - 60.0).max(0.0), compile_end)?;
        if let Some(t0) = long_started.filter(|t0| now - t0 >= 30.0) {
            // The link runs: the other work now is what its samples show beyond what the record's
            // link showed over as many samples (its own threads beyond one).
            let n = live.samples.iter().filter(|s| s.t >= t0).count();
            let own = rec.low_beside_one(first_long, n)? - rec_other;
            now_other = (live.low_beside_one(t0, n)? - own.max(0.0)).max(0.0);
        }
        // The link is scaled as the compiles are: as each run's compiles (its mean running steps)
        // beside the other work. Where the other work is the same in both phases of each run, the
        // link loses (or gains) exactly what the compiles did, however the scheduler shared the
        // cores out.
        let rec_jobs = rec.running_between(0.0, first_long)?.max(1.0);
        let now_jobs = live.running_between(0.0, compile_end)?.max(1.0);
        let link_ratio = super::load::share(rec_jobs + rec_other, rec.cores)
            / super::load::share(now_jobs + now_other, live.cores);
        let per_core = speed * now_compile / rec_compile;
        Some(per_core * link_ratio)
            .filter(|f| f.is_finite())
            .map(|f| f.clamp(0.05, 20.0))
    }

    /// The record this estimator predicts from.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// A step of this run finished: its first output and how long it took (seconds), from this
    /// run's `.ninja_log`. Outputs the record does not know are ignored.
    pub fn finished(&mut self, output: &str, secs: f64) {
        if let Some(&i) = self.index.get(norm(output)) {
            if !self.done[i] {
                self.done[i] = true;
                let rec = self.record.steps[i].secs();
                // Steps under 0.2 s measure process start, not speed.
                if !self.record.steps[i].long {
                    self.done_wall += secs;
                }
                if self.record.steps[i].long {
                    self.long_actual += secs;
                    self.long_recorded += rec;
                } else if rec >= 0.2 {
                    self.sum_actual += secs;
                    self.sum_recorded += rec;
                }
            }
        }
    }

    /// ninja's status at time `now` (seconds since ninja started): `finished` steps done, `running`
    /// steps running (`%f` and `%r`). ninja prints a finished edge's line before it takes the edge
    /// off its running count (`StatusPrinter::BuildEdgeFinished`, its `src/status_printer.cc`), and
    /// fills the freed slot next, so `finished + running` is the count of steps started once it
    /// has: the device link is taken to start with the last compile's line.
    pub fn status(&mut self, finished: usize, running: usize, now: f64) {
        self.finished = finished;
        self.running = running;
        let started = (finished + running).min(self.record.steps.len());
        // Steps start in the record's order: the first `started` are running or done; a newly
        // started one started now (ninja starts the next step as one finishes).
        for at in self.started_at.iter_mut().take(started) {
            if at.is_none() {
                *at = Some(now);
            }
        }
    }

    /// (short steps' factor, long steps' factor) from the finished steps; each falls back to the
    /// other, then to 1.0.
    fn speeds(&self) -> (f64, f64) {
        let ratio = |a: f64, r: f64| (r > 0.0).then(|| (a / r).clamp(0.05, 20.0));
        let short = ratio(self.sum_actual, self.sum_recorded);
        let long = ratio(self.long_actual, self.long_recorded);
        let s = short.or(long).unwrap_or(1.0);
        (s, long.unwrap_or(s))
    }

    /// The estimate at time `now` (seconds since ninja started).
    pub fn estimate(&self, now: f64) -> Estimate {
        let (speed, mut long_speed) = self.speeds();
        let started = self.finished + self.running;
        if self.long_recorded == 0.0 {
            let long_started = self
                .record
                .steps
                .iter()
                .enumerate()
                .filter(|(i, s)| s.long && *i < started && !self.done[*i])
                .filter_map(|(i, _)| self.started_at[i])
                .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.min(t))));
            if let Some(l) = self
                .long_speed_from_cpu(speed, now, long_started)
                .or_else(|| self.long_speed_from_load(speed, now, long_started))
            {
                long_speed = l;
            }
        }
        let factor = |s: &Step, long_speed: f64| {
            if s.long {
                long_speed
            } else {
                speed
            }
        };
        // Running: the first `running` steps (in record order) that started and are not done.
        let mut running = vec![];
        let mut pending = vec![];
        for (i, s) in self.record.steps.iter().enumerate() {
            if self.done[i] {
                continue;
            }
            if i < started && running.len() < self.running {
                running.push(i);
            } else {
                pending.push(s);
            }
        }
        let mut overrun: f64 = 0.0;
        let ran = |i: usize| now - self.started_at[i].unwrap_or(now);
        let mut slots: Vec<f64> = running
            .iter()
            .map(|&i| {
                let s = &self.record.steps[i];
                let left = s.secs() * factor(s, long_speed) - ran(i);
                // Only a long step's overrun is reported: a compile that runs a little past its
                // scaled time says nothing about the build (and flipped the message mid-build).
                if left < 0.0 && s.long {
                    overrun = overrun.max(-left);
                }
                left.max(0.0)
            })
            .collect();
        // A long step past its predicted end: the pending long steps are at least that slow.
        for &i in &running {
            let s = &self.record.steps[i];
            if s.long {
                long_speed = long_speed.max(ran(i) / s.secs());
            }
        }
        let n_slots = self.slots.max(slots.len()).max(1);
        while slots.len() < n_slots {
            slots.push(0.0);
        }
        // Greedy list scheduling of the pending steps; a barrier waits for all earlier ones.
        for s in pending {
            if s.barrier {
                let t = slots.iter().cloned().fold(0.0, f64::max);
                slots.iter_mut().for_each(|x| *x = t);
            }
            let (i, _) = slots
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .expect("at least one slot");
            slots[i] += s.secs() * factor(s, long_speed);
        }
        let remaining = slots.iter().cloned().fold(0.0, f64::max);
        let long_running = running
            .iter()
            .map(|&i| &self.record.steps[i])
            .filter(|s| s.long)
            .map(|s| (s.output.clone(), s.secs()))
            .collect();
        Estimate {
            remaining,
            speed,
            long_speed,
            long_running,
            overrun,
        }
    }
}

/// Parse a `NINJA_STATUS` prefix as rcclfix sets it ([`NINJA_STATUS`]): `[12/60 3] text` →
/// `(12, 60, Some(3), "text")`; ninja's default `[12/60] text` → `(12, 60, None, "text")`.
pub fn parse_status(line: &str) -> Option<(u64, u64, Option<u64>, &str)> {
    let rest = line.strip_prefix('[')?;
    let (nums, text) = rest.split_once(']')?;
    let (n, rest) = nums.split_once('/')?;
    let mut it = rest.split_whitespace();
    let m = it.next()?.parse().ok()?;
    let r = match it.next() {
        Some(x) => Some(x.parse().ok()?),
        None => None,
    };
    if it.next().is_some() {
        return None;
    }
    Some((n.trim().parse().ok()?, m, r, text.trim()))
}

/// A human name for a long step: the device link of the library, or its output path.
pub fn describe_step(output: &str, recorded_secs: f64, targets: &str) -> String {
    let mins = (recorded_secs / 60.0).round().max(1.0);
    let file = output.rsplit('/').next().unwrap_or(output);
    if file.starts_with("librccl.so") {
        format!(
            "device link for {targets} (-fgpu-rdc: all device code linked and optimised in one process, mostly on one thread, ~{mins:.0} min in the recorded build)"
        )
    } else {
        format!("{file} (~{mins:.0} min in the recorded build)")
    }
}

#[cfg(test)]
mod tests;
