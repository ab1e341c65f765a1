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
//! File format (`$RCCLFIX_HOME/records/<recipe>-<targets>.load`): a header line
//! `# rcclfix load v1 cores=<n>`, then one line per sample, `<seconds since ninja started>\t<runnable>\t<running steps>`.

/// One sample: seconds since ninja started, runnable tasks (the sampler excluded), this build's
/// running steps (ninja's `%r`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since ninja started (the `.ninja_log` time base).
    pub t: f64,
    /// Runnable tasks on the machine, the sampling thread excluded.
    pub runnable: f64,
    /// Steps ninja was running (`%r`), 0 before its first status line.
    pub running: f64,
}

/// The load trace of one ninja run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Online CPUs of the machine that ran it.
    pub cores: usize,
    /// Samples in time order.
    pub samples: Vec<Sample>,
}

const HEADER: &str = "# rcclfix load v1 cores=";

/// The share of a core a CPU-bound task gets with `runnable` tasks on `cores` CPUs (1 at most).
pub fn share(runnable: f64, cores: usize) -> f64 {
    (cores.max(1) as f64 / runnable.max(1.0)).min(1.0)
}

impl Trace {
    /// An empty trace of this machine ([`std::thread::available_parallelism`]).
    pub fn here() -> Trace {
        Trace {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            samples: vec![],
        }
    }

    /// Parse the file format of the module docs.
    ///
    /// Errors: another header, a line that is not three numbers, times that go back.
    pub fn parse(text: &str) -> anyhow::Result<Trace> {
        let mut lines = text.lines();
        let head = lines.next().unwrap_or_default();
        let cores = head
            .strip_prefix(HEADER)
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|&c| c > 0 && c <= 65536)
            .ok_or_else(|| anyhow::anyhow!("not an rcclfix load trace (first line {head:?})"))?;
        let mut samples: Vec<Sample> = vec![];
        for (i, l) in lines.enumerate() {
            let f: Vec<f64> = l
                .split('\t')
                .map(|x| x.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0))
                .collect::<Option<_>>()
                .filter(|f: &Vec<f64>| f.len() == 3)
                .ok_or_else(|| anyhow::anyhow!("load trace line {}: expected 3 numbers", i + 2))?;
            if samples.last().is_some_and(|s| f[0] < s.t) {
                anyhow::bail!("load trace line {}: time goes back", i + 2);
            }
            samples.push(Sample {
                t: f[0],
                runnable: f[1],
                running: f[2],
            });
        }
        Ok(Trace { cores, samples })
    }

    /// The file text ([`Trace::parse`] reads it back).
    pub fn render(&self) -> String {
        let mut s = format!("{HEADER}{}\n", self.cores);
        for x in &self.samples {
            s.push_str(&format!("{:.1}\t{}\t{}\n", x.t, x.runnable, x.running));
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
                },
                Sample {
                    t: 1.5,
                    runnable: 1.0,
                    running: 1.0,
                },
            ],
        };
        assert_eq!(Trace::parse(&t.render()).unwrap(), t);
        for bad in [
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
}
