//! How contended the machine was while ninja ran: a trace of the kernel's runnable-task count,
//! kept beside a build's timing record so that the next build's estimate ([`super::eta`]) can scale
//! the device link apart from the parallel compiles.
//!
//! A CPU-bound task gets `share = min(1, cores / runnable)` of a core, where `runnable` counts
//! every runnable task on the machine, the task's own included. The compiles' speed relative to
//! the record, learned from finished steps, mixes two things: the per-core speed of the two
//! machines and how much of a core each compile got in either run. The trace separates them:
//! `per-core factor = compile factor × share now, compiles / share recorded, compiles`.
//!
//! The device link is one step but not one thread (its parallel phases showed 8–10 runnable tasks
//! on a 2-core machine, most of it one or two). A model of its threads (each phase of `n` threads
//! progressing at `n × share(n + other work)`) missed a real pair: one busy loop slowed a recorded
//! RCCL build's compiles to 0.83x and its link to 0.82x, where that model said 0.78x for the link
//! and the runnable-task count said 0.67x for the compiles (the scheduler does not share cores out
//! task by task). So the link is scaled as the compiles would have been beside the other work of
//! each run's link phase: `link factor = per-core factor × share(jobs rec + other rec) /
//! share(jobs now + other now)`, `jobs` each run's mean running compiles
//! ([`Trace::running_between`]). The other work in the record is what its last compiles ran beside
//! (`runnable - running`, each compile one task; [`Trace::background_between`]), or less where the
//! link's least-threaded phases show less ([`Trace::low_beside_one`]: that work ended before the
//! link). The other work now is measured the same way: beside this run's last compiles, and once
//! its link has run a while, from the link's own samples against as many of the record's. Where
//! the other work is the same in both phases of each run, the link gets the compiles' factor.
//!
//! The count is `procs_running` of `/proc/stat` (the kernel's `fs/proc/stat.c`: tasks on a run
//! queue at the moment of reading, the reader included, which is subtracted), sampled once a
//! second with ninja's running-step count (`%r`) at that moment.
//!
//! Since v2 each sample also carries the CPU time of the build's finished steps
//! ([`super::ninja_cpu`]): what the build's steps actually got, beside what was runnable. It is what
//! [`super::eta`] scales the link by when both runs have it ([`Trace::cpu_in`], [`cap`],
//! [`Trace::link_time_ratio`]).
//!
//! File format (`$RCCLFIX_HOME/records/<recipe>-<targets>.load`): a header line
//! `# rcclfix load v2 cores=<n>`, then one line per sample, `<seconds since ninja started ([`Sample::t`])>\t<runnable>\t<running steps>\t<CPU seconds of finished steps, or ->`.
//! v1 files (three columns, no CPU time) are still read.

/// One sample: seconds since ninja started, runnable tasks (the sampler excluded), this build's
/// running steps (ninja's `%r`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the progress display started, just before the engine started ninja: the
    /// `.ninja_log` time base, late by the engine's start-up.
    pub t: f64,
    /// Runnable tasks on the machine, the sampling thread excluded.
    pub runnable: f64,
    /// Steps ninja was running (`%r`), 0 before its first status line.
    pub running: f64,
    /// CPU seconds (user + system) of the steps ninja had reaped ([`super::ninja_cpu`]); `None`
    /// where it could not be read.
    pub cpu: Option<f64>,
}

/// The load trace of one ninja run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Online CPUs of the machine that ran it.
    pub cores: usize,
    /// Samples in time order.
    pub samples: Vec<Sample>,
}

const HEADER: &str = "# rcclfix load v2 cores=";
const HEADER_V1: &str = "# rcclfix load v1 cores=";

/// The share of a core a CPU-bound task gets with `runnable` tasks on `cores` CPUs (1 at most).
pub fn share(runnable: f64, cores: usize) -> f64 {
    (cores.max(1) as f64 / runnable.max(1.0)).min(1.0)
}

/// A compile that got at least this share of a core ran as if alone: the build was not held back
/// ([`cap`]).
pub const UNCONTENDED_SHARE: f64 = 0.9;

/// The extra CPU time a time-sliced step needs for the same work, per unit of the core it did not
/// get: beside one busy loop the real pair's compiles, at half a core each, used 8 % more CPU time
/// than alone (544 s against 502 s; `tests/data/eta/busy3.load`, `quiet3.load`), and two `xz`
/// processes held to one core between them 7 % more than at a core each.
pub const TIME_SLICE_CPU: f64 = 0.16;

/// The CPU time a step getting `share` of a core needs, relative to the same step alone:
/// `1 + TIME_SLICE_CPU × (1 − share)` ([`TIME_SLICE_CPU`]).
pub fn time_slice_cpu(share: f64) -> f64 {
    1.0 + TIME_SLICE_CPU * (1.0 - share.clamp(0.0, 1.0))
}

/// The cores a build could use at once, judged from its compiles: `rate` (the CPU seconds per
/// second they got between them) when each of its `jobs` compiles got under 90 % of
/// a core (the machine or the scheduler's split between the build and other work held it to
/// that, [`UNCONTENDED_SHARE`]), else the cores the `other` work left, never less than `rate`.
///
/// A busy loop beside a build in a container (another cgroup) held the two compiles to one core
/// between them, 0.49x of their quiet speed, where the runnable-task count (3 on 2 cores) said
/// 0.67x; a one-threaded step beside it still got a whole core.
pub fn cap(rate: f64, jobs: f64, cores: usize, other: f64) -> f64 {
    if rate < UNCONTENDED_SHARE * jobs {
        rate
    } else {
        (cores as f64 - other).max(rate)
    }
}

impl Trace {
    /// An empty trace of this machine ([`std::thread::available_parallelism`]).
    pub fn here() -> Trace {
        Trace {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            samples: vec![],
        }
    }

    /// Parse the file format of the module docs (v2, or v1 without the CPU column).
    ///
    /// Blank lines are skipped.
    ///
    /// Errors (naming the line and the field): another header, a line that is not three numbers
    /// and (v2) a number or `-`, a number out of range (negative, times and CPU seconds over
    /// 10^9, counts over 10^6), times that go back.
    pub fn parse(text: &str) -> anyhow::Result<Trace> {
        let mut lines = text.lines();
        let head = lines.next().unwrap_or_default();
        let (cores, columns) = [(HEADER, 4), (HEADER_V1, 3)]
            .iter()
            .find_map(|&(h, n)| {
                let c = head.strip_prefix(h)?.trim().parse::<usize>().ok()?;
                (c > 0 && c <= 65536).then_some((c, n))
            })
            .ok_or_else(|| anyhow::anyhow!("not an rcclfix load trace (first line {head:?})"))?;
        let mut samples: Vec<Sample> = vec![];
        for (i, l) in lines.enumerate() {
            if l.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() != columns {
                anyhow::bail!(
                    "load trace line {}: expected {columns} tab-separated fields, found {}",
                    i + 2,
                    f.len()
                );
            }
            // Each column within what a real build can show: times and CPU seconds under 10^9
            // (31 years), counts under 10^6 (a trace that parses never drives the estimate to
            // infinities).
            let field = |k: usize, max: f64| -> anyhow::Result<f64> {
                f[k].parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && (0.0..=max).contains(v))
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "load trace line {}: {} {:?} is not a number from 0 to {max:e}",
                            i + 2,
                            ["time", "runnable count", "running count", "CPU time"][k],
                            f[k]
                        )
                    })
            };
            let v = [field(0, 1e9)?, field(1, 1e6)?, field(2, 1e6)?];
            let cpu = match f.get(3) {
                None | Some(&"-") => None,
                Some(_) => Some(field(3, 1e9)?),
            };
            if samples.last().is_some_and(|s| v[0] < s.t) {
                anyhow::bail!("load trace line {}: time goes back", i + 2);
            }
            samples.push(Sample {
                t: v[0],
                runnable: v[1],
                running: v[2],
                cpu,
            });
        }
        Ok(Trace { cores, samples })
    }

    /// The file text, v2 ([`Trace::parse`] reads it back).
    pub fn render(&self) -> String {
        let mut s = format!("{HEADER}{}\n", self.cores);
        for x in &self.samples {
            let cpu = x.cpu.map_or("-".to_owned(), |c| format!("{c:.2}"));
            s.push_str(&format!(
                "{:.1}\t{}\t{}\t{cpu}\n",
                x.t, x.runnable, x.running
            ));
        }
        s
    }

    /// Mean share of a core a CPU-bound step got between `from` and `to` seconds (`None`: no
    /// sample there).
    pub fn share_between(&self, from: f64, to: f64) -> Option<f64> {
        mean(
            self.samples
                .iter()
                .filter(|s| s.t >= from && s.t <= to)
                .map(|s| share(s.runnable, self.cores)),
        )
    }

    /// Mean of this build's running steps (ninja's `%r`) between `from` and `to`, counting only
    /// samples with at least one (`None`: no such sample there).
    pub fn running_between(&self, from: f64, to: f64) -> Option<f64> {
        mean(
            self.samples
                .iter()
                .filter(|s| s.t >= from && s.t <= to && s.running >= 1.0)
                .map(|s| s.running),
        )
    }

    /// The tasks that were not this build's running steps between `from` and `to`: the median of
    /// `runnable - running` (`None`: no sample there). During compiles each running step is one
    /// task, so this is the other work on the machine.
    pub fn background_between(&self, from: f64, to: f64) -> Option<f64> {
        quantile(
            self.samples
                .iter()
                .filter(|s| s.t >= from && s.t <= to)
                .map(|s| (s.runnable - s.running).max(0.0))
                .collect(),
            0.5,
        )
    }

    /// The low (20th-percentile) `runnable - 1` of the first `n` samples from `from` on, while one
    /// step (the link) runs alone: the other work plus the link's threads beyond one in its least
    /// threaded phases (`None`: no sample there).
    pub fn low_beside_one(&self, from: f64, n: usize) -> Option<f64> {
        quantile(
            self.samples
                .iter()
                .filter(|s| s.t >= from)
                .take(n)
                .map(|s| (s.runnable - 1.0).max(0.0))
                .collect(),
            0.2,
        )
    }

    /// The CPU column ([`Sample::cpu`]) of the last sample between `from` and `to` that has it:
    /// the CPU seconds of the steps ninja had reaped by then (`None`: no such sample).
    pub fn cpu_in(&self, from: f64, to: f64) -> Option<f64> {
        (self.samples.iter().rev())
            .filter(|s| s.t >= from && s.t <= to)
            .find_map(|s| s.cpu)
    }

    /// How much longer (above 1) or shorter a one-step phase of this trace, the record's link from
    /// `from` to `to`, takes beside other work that leaves the build `cap_now` cores instead of
    /// `cap_rec` ([`cap`]), per CPU second alike. Each second the link ran `d = max(1, runnable -
    /// other)` threads (`other`: the record's other work) and did `min(d, cap_rec)` CPU seconds;
    /// now they take `min(d, cap_now)` per second. Returns the mean over the phase's samples of
    /// `min(d, cap_rec) / min(d, cap_now)` (`None`: no sample there).
    pub fn link_time_ratio(
        &self,
        from: f64,
        to: f64,
        other: f64,
        cap_rec: f64,
        cap_now: f64,
    ) -> Option<f64> {
        mean(
            self.samples
                .iter()
                .filter(|s| s.t >= from && s.t <= to)
                .map(|s| {
                    let d = (s.runnable - other).max(1.0);
                    d.min(cap_rec.max(0.05)) / d.min(cap_now.max(0.05))
                }),
        )
    }

    /// Mean runnable tasks over the whole trace (for reports).
    pub fn mean_runnable(&self) -> Option<f64> {
        mean(self.samples.iter().map(|s| s.runnable))
    }
}

/// The `q` quantile (0..=1, nearest rank) of `v` (`None`: empty).
fn quantile(mut v: Vec<f64>, q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[((v.len() - 1) as f64 * q).round() as usize])
}

fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = it.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

/// Runnable tasks on this machine now, the caller excluded (`procs_running` of `/proc/stat`
/// minus one); `None` where `/proc/stat` cannot be read or has no such line.
pub fn runnable_now() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let n: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))?
        .trim()
        .parse()
        .ok()?;
    Some((n - 1.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let t = Trace {
            cores: 2,
            samples: vec![
                Sample {
                    t: 0.0,
                    runnable: 3.0,
                    running: 2.0,
                    cpu: Some(1.25),
                },
                Sample {
                    t: 1.5,
                    runnable: 1.0,
                    running: 1.0,
                    cpu: None,
                },
            ],
        };
        assert_eq!(Trace::parse(&t.render()).unwrap(), t);
        // Blank lines are skipped; a refusal names the line and the field.
        let blank = Trace::parse("# rcclfix load v2 cores=2\n0\t3\t2\t-\n\n  \n").unwrap();
        assert_eq!(blank.samples.len(), 1);
        let e = Trace::parse("# rcclfix load v2 cores=2\n0\t3\t2\t-\n1\t3\tx\t-\n").unwrap_err();
        assert!(e.to_string().contains("line 3: running count \"x\""), "{e}");
        // A v1 trace (no CPU column) still reads.
        let v1 = Trace::parse("# rcclfix load v1 cores=2\n0\t3\t2\n").unwrap();
        assert_eq!(v1.samples[0].cpu, None);
        assert_eq!(v1.samples[0].running, 2.0);
        for bad in [
            "# rcclfix load v2 cores=2\n1\t2\t1\n",
            "# rcclfix load v2 cores=2\n1\t2\t1\tx\n",
            "# rcclfix load v2 cores=2\n1\t2\t1\t-1\n",
            "# rcclfix load v1 cores=2\n1\t2\t1\t3\n",
            "# rcclfix load v1 cores=1\n500\t1.7e308\t1.7e308\n",
            "# rcclfix load v2 cores=2\n1\t2\t1\t2e9\n",
            "# rcclfix load v2 cores=2\n1\tNaN\t1\t-\n",
            "",
            "# ninja log v5\n",
            "# rcclfix load v1 cores=0\n",
            "# rcclfix load v1 cores=2\n1\t2\n",
            "# rcclfix load v1 cores=2\n1\t2\tx\n",
            "# rcclfix load v1 cores=2\n1\t-2\t1\n",
            "# rcclfix load v1 cores=2\n2\t1\t1\n1\t1\t1\n",
        ] {
            assert!(Trace::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shares() {
        assert_eq!(share(1.0, 2), 1.0);
        assert_eq!(share(4.0, 2), 0.5);
        assert_eq!(share(0.0, 2), 1.0);
        let t = Trace {
            cores: 2,
            samples: (0..10)
                .map(|i| Sample {
                    t: f64::from(i),
                    // Two compiles and two other tasks, then the link alone.
                    runnable: if i < 5 { 4.0 } else { 1.0 },
                    running: if i < 5 { 2.0 } else { 1.0 },
                    cpu: None,
                })
                .collect(),
        };
        assert_eq!(t.share_between(0.0, 4.0), Some(0.5));
        assert_eq!(t.share_between(5.0, 9.0), Some(1.0));
        assert_eq!(t.share_between(20.0, 30.0), None);
        assert_eq!(t.mean_runnable(), Some(2.5));
        // Two other tasks beside the compiles, none beside the link.
        assert_eq!(t.background_between(0.0, 4.0), Some(2.0));
        assert_eq!(t.background_between(5.0, 9.0), Some(0.0));
        assert_eq!(t.low_beside_one(5.0, 3), Some(0.0));
        // Two compiles, then the link; samples before ninja's first status line do not count.
        assert_eq!(t.running_between(0.0, 4.0), Some(2.0));
        assert_eq!(t.running_between(0.0, 9.0), Some(1.5));
        assert_eq!(t.running_between(20.0, 30.0), None);
        assert_eq!(t.low_beside_one(0.0, 3), Some(3.0));
        assert_eq!(t.low_beside_one(20.0, 3), None);
    }

    #[test]
    fn cpu_rate_cap_and_link_time() {
        // Two compiles held to one core between them for 20 s (the CPU column rises 1 s per
        // second, read only every other second), then a link of 1 thread for 4 s and 3 for 4 s
        // (not reaped within the trace: the column stays at 20).
        let t = Trace {
            cores: 2,
            samples: (0..=28)
                .map(|i| {
                    let t = f64::from(i);
                    let (runnable, running) = match i {
                        0..=20 => (3.0, 2.0),
                        21..=24 => (2.0, 1.0),
                        _ => (4.0, 1.0),
                    };
                    Sample {
                        t,
                        runnable,
                        running,
                        cpu: (i % 2 == 0).then_some(t.min(20.0)),
                    }
                })
                .collect(),
        };
        assert_eq!(t.cpu_in(0.0, 20.0), Some(20.0));
        assert_eq!(t.cpu_in(0.0, 9.0), Some(8.0), "the last reading there");
        assert_eq!(t.cpu_in(21.0, 28.0), Some(20.0), "flat while the link runs");
        assert_eq!(t.cpu_in(30.0, 40.0), None);
        assert_eq!(time_slice_cpu(1.0), 1.0);
        assert!((time_slice_cpu(0.5) - 1.08).abs() < 1e-12);
        // Held under 90 % of a core each: the cap is what they got; else the cores left.
        assert_eq!(cap(1.0, 2.0, 2, 1.0), 1.0);
        assert_eq!(cap(1.9, 2.0, 2, 0.0), 2.0);
        assert_eq!(cap(1.9, 2.0, 2, 1.0), 1.9);
        // Beside one other task (the busy loop): 1 thread, then 3 threads. With two cores now
        // instead of one, the one-thread seconds take as long and the three-thread ones half.
        let r = t.link_time_ratio(21.0, 28.0, 1.0, 1.0, 2.0).unwrap();
        assert!((r - 0.75).abs() < 1e-9, "{r}");
        // And back: the one-thread seconds as long, the three-thread ones twice as long.
        let r = t.link_time_ratio(21.0, 28.0, 1.0, 2.0, 1.0).unwrap();
        assert!((r - 1.5).abs() < 1e-9, "{r}");
        assert_eq!(t.link_time_ratio(40.0, 50.0, 1.0, 1.0, 2.0), None);
    }
}
