//! Build progress on stderr, driven by ninja's `[n/m r] description` lines (`NINJA_STATUS`
//! [`super::eta::NINJA_STATUS`]) and by the build's own `.ninja_log`, which ninja appends to as each
//! step ends.
//!
//! On a terminal: an indicatif bar with elapsed time, ticking every second so the silent device link
//! still shows time passing. Not on a terminal: a heartbeat line every [`HEARTBEAT`] while a step is
//! running (the RCCL device link prints nothing for minutes to over an hour).
//!
//! With a timing record of an earlier build of the same recipe and targets ([`super::eta`]), both
//! show the predicted remaining time and name a long step while it runs (the device link); without
//! one they say so and show elapsed time only. Either way, when the build graph tells what is
//! running ([`super::running`]), the line names it rather than the step that finished last.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::eta::{self, Estimator};
use super::frame;
use super::load::{self, Sample, Trace};
use super::ninja_cpu::NinjaCpu;
use super::running::{Graph, Running};

/// The most bytes of the live `.ninja_log` read in one poll (16 MiB; ninja appends a line of
/// about 100 bytes per finished step).
const MAX_POLL_BYTES: u64 = 16 << 20;

/// How often the non-terminal heartbeat prints.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct State {
    done: u64,
    total: u64,
    last: String,
    est: Option<Estimator>,
    /// The running edges, inferred from the build graph (none without a `build.ninja`).
    running: Option<Running>,
    /// ninja's `-j`.
    jobs: usize,
    /// The build's `.ninja_log` on the host and how far it was read.
    ninja_log: Option<(std::path::PathBuf, u64)>,
    targets: String,
    started: Instant,
    /// ninja's running count (`%r`) in its last status line.
    running_now: u64,
    /// This run's load trace ([`super::load`]) when there is no estimator (which keeps it
    /// otherwise), kept as the next build's.
    load: Trace,
    /// The CPU time of ninja's finished steps, read with each load sample.
    cpu: Option<NinjaCpu>,
    /// The running step last named on the terminal and when it was first named.
    since: Option<(String, Instant)>,
}

/// What the terminal frame shows besides the bar's own position and clock: set by the ticker
/// every 2 s, read by the bar at every redraw ([`frame::render`]). Its own lock, never held
/// while calling the bar, so a redraw never waits on [`State`].
#[derive(Debug, Default)]
struct Shown {
    eta: String,
    running: Option<(String, Instant, Duration)>,
    last: String,
}

impl State {
    /// Read the lines ninja appended to `.ninja_log` since the last call and feed their durations.
    fn poll_log(&mut self) {
        let Some((path, off)) = &mut self.ninja_log else {
            return;
        };
        if self.est.is_none() && self.running.is_none() {
            return;
        }
        // Only the bytes appended since the last call (ninja writes whole lines), at most
        // `MAX_POLL_BYTES` a call, from a regular file reached through no link (a build step
        // could put a FIFO or a link to `/dev/zero` there).
        use std::io::{Read, Seek};
        let Ok(mut f) = crate::fsutil::open_regular_nofollow(path) else {
            return;
        };
        let mut new = vec![];
        if f.seek(std::io::SeekFrom::Start(*off)).is_err()
            || f.take(MAX_POLL_BYTES).read_to_end(&mut new).is_err()
        {
            return;
        }
        let Some(end) = new.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        for l in String::from_utf8_lossy(&new[..end]).lines() {
            let f: Vec<&str> = l.split('\t').collect();
            if let [s, e, _, out, _] = f[..] {
                if let (Ok(s), Ok(e)) = (s.parse::<u64>(), e.parse::<u64>()) {
                    if let Some(est) = &mut self.est {
                        est.finished(out, e.saturating_sub(s) as f64 / 1000.0);
                    }
                    if let Some(r) = &mut self.running {
                        r.finished(out);
                    }
                }
            }
        }
        *off += end as u64 + 1;
    }

    /// What is running, when the build graph tells ([`Running::describe`]).
    fn running_text(&mut self) -> Option<String> {
        self.poll_log();
        let what = self.running.as_ref()?.describe(self.jobs)?;
        Some(crate::ui::escape(&what).chars().take(160).collect())
    }

    /// Take one load sample (once a second): for the estimate and for the next build's record.
    fn sample_load(&mut self) {
        let Some(runnable) = load::runnable_now() else {
            return;
        };
        let s = Sample {
            t: self.started.elapsed().as_secs_f64(),
            runnable,
            running: self.running_now as f64,
            cpu: self.cpu.as_mut().and_then(NinjaCpu::seconds),
        };
        // One copy: the estimator's when there is one, else the state's.
        match &mut self.est {
            Some(est) => est.load_sample(s),
            None => self.load.samples.push(s),
        }
    }

    /// A `-v` line with the estimate in seconds, for measuring it (`cargo xtask bench-build
    /// --slow` reads these): `eta: t=<s> remaining=<s> compiles=<x> long=<x>`.
    fn eta_debug(&mut self) {
        self.poll_log();
        if let Some(est) = &self.est {
            let t = self.started.elapsed().as_secs_f64();
            let e = est.estimate(t);
            tracing::debug!(
                "eta: t={t:.0} remaining={:.0} compiles={:.3} long={:.3} overrun={:.0}",
                e.remaining,
                e.speed,
                e.long_speed,
                e.overrun
            );
        }
    }

    /// The ETA text: remaining time and the step running, or why there is none.
    fn eta_text(&mut self) -> String {
        let mut t = self.estimate_text();
        if let Some(r) = self.running_step() {
            t.push_str("; running: ");
            t.push_str(&r);
        }
        t
    }

    /// The step running: the record's long step while it runs, else what the build graph tells
    /// ([`Self::running_text`]).
    fn running_step(&mut self) -> Option<String> {
        self.poll_log();
        if let Some(est) = &self.est {
            let e = est.estimate(self.started.elapsed().as_secs_f64());
            if let Some((out, secs)) = e.long_running.first() {
                return Some(eta::describe_step(out, *secs, &self.targets));
            }
        }
        self.running_text()
    }

    /// The running step and how long it has been the running step (since the first poll that
    /// named it), for the terminal frame.
    fn running_since(&mut self) -> Option<(String, Duration)> {
        let now = self.running_step();
        match (&now, &self.since) {
            (Some(n), Some((was, _))) if n == was => {}
            (Some(n), _) => self.since = Some((n.clone(), Instant::now())),
            (None, _) => self.since = None,
        }
        self.since.as_ref().map(|(n, t)| (n.clone(), t.elapsed()))
    }

    /// The estimate alone (remaining time, or why there is none), without the running step.
    fn estimate_text(&mut self) -> String {
        self.poll_log();
        let Some(est) = &self.est else {
            return String::from("no timing record for this recipe yet: elapsed time only");
        };
        let e = est.estimate(self.started.elapsed().as_secs_f64());
        if e.overrun > 0.0 {
            format!(
                "running {} longer than the record predicts (steps ran at {:.2}x the recorded time; the long step is at {:.2}x so far)",
                fmt_mins(e.overrun),
                e.speed,
                e.long_speed
            )
        } else {
            format!(
                "about {} left (steps run at {:.2}x the recorded time)",
                fmt_mins(e.remaining),
                e.speed
            )
        }
    }

    /// The tail of a progress line: what is known to run, else what finished last.
    fn doing(&mut self) -> String {
        if self.running_text().is_some() {
            return String::new();
        }
        format!(
            "; last finished: {}",
            if self.last.is_empty() {
                "none yet"
            } else {
                &self.last
            }
        )
    }
}

/// `12m`, `1h05m`, `40s`.
fn fmt_mins(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", (s + 30) / 60)
    } else {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    }
}

/// What the progress display knows about the build before it starts.
#[derive(Debug, Default)]
pub struct EtaInput {
    /// A timing record of an earlier build of the same recipe and targets.
    pub record: Option<eta::Record>,
    /// The `-j` ninja runs with.
    pub jobs: usize,
    /// This build's `.ninja_log` on the host (read as ninja appends to it).
    pub ninja_log: Option<std::path::PathBuf>,
    /// The targets, for naming the device link (`gfx1100`).
    pub targets: String,
    /// The configured `build.ninja`'s graph, to name the running step without a record.
    pub graph: Option<Graph>,
    /// The build folder as the toolchain names it (`/build`), for the `.ninja_log`'s absolute
    /// outputs.
    pub build_dir: String,
    /// The record's load trace ([`super::load`]), when it was kept.
    pub record_load: Option<Trace>,
}

/// Progress of one ninja run. Feed it every output line with [`Progress::line`]; call
/// [`Progress::finish`] at the end (dropping it also stops the heartbeat).
pub struct Progress {
    bar: Option<ProgressBar>,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    heartbeat: Option<std::thread::JoinHandle<()>>,
}

/// Parse ninja's status prefix: `[12/60] Building CXX object …` → `(12, 60, "Building CXX object …")`
/// (also `[12/60 3] …`, with the running count of [`super::eta::NINJA_STATUS`]).
pub fn parse_ninja_status(line: &str) -> Option<(u64, u64, &str)> {
    eta::parse_status(line).map(|(n, m, _, t)| (n, m, t))
}

impl Progress {
    /// Start showing progress for `label` (e.g. `rccl 2.13.4`). `tty`: draw a bar (pass
    /// [`crate::ui::progress_bars`]), else heartbeat lines (which `-q` silences). The bar is
    /// coloured only when [`crate::ui::color`] says so; ninja's text is escaped.
    pub fn start(label: &str, tty: bool, input: EtaInput) -> Progress {
        let started = Instant::now();
        let state = Arc::new(Mutex::new(State {
            done: 0,
            total: 0,
            last: String::new(),
            est: input
                .record
                .map(|r| Estimator::new(r, input.jobs).with_load(input.record_load, Trace::here())),
            running: input.graph.map(|g| Running::new(g, &input.build_dir)),
            jobs: input.jobs,
            cpu: input
                .ninja_log
                .as_deref()
                .and_then(std::path::Path::parent)
                .and_then(NinjaCpu::new),
            ninja_log: input.ninja_log.map(|p| (p, 0)),
            targets: input.targets,
            started,
            running_now: 0,
            load: Trace::here(),
            since: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        if tty {
            let bar = ProgressBar::new(0);
            let shown = Arc::new(Mutex::new(Shown {
                eta: label.to_owned(),
                ..Shown::default()
            }));
            let color = crate::ui::color();
            let sh = shown.clone();
            bar.set_style(
                ProgressStyle::with_template("{frame}")
                    .expect("valid template")
                    .with_key(
                        "frame",
                        move |st: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                            let s = sh.lock().unwrap();
                            let f = frame::Frame {
                                elapsed: st.elapsed(),
                                pos: st.pos(),
                                len: st.len().unwrap_or(0),
                                eta: &s.eta,
                                running: s
                                    .running
                                    .as_ref()
                                    .map(|(r, at, d)| (r.as_str(), *d + at.elapsed())),
                                last: &s.last,
                            };
                            let _ =
                                w.write_str(&frame::render(&f, crate::ui::stderr_width(), color));
                        },
                    ),
            );
            bar.enable_steady_tick(Duration::from_secs(1));
            let (st, sp) = (state.clone(), stop.clone());
            // Refresh the ETA every 2 s (the bar's own tick redraws every second).
            let ticker = std::thread::spawn(move || {
                let mut n = 0u32;
                while !sp.load(Ordering::Relaxed) {
                    // Parked, not slept: `finish` unparks it, so stopping never waits out the interval.
                    std::thread::park_timeout(Duration::from_millis(250));
                    n += 1;
                    if n.is_multiple_of(4) {
                        st.lock().unwrap().sample_load();
                    }
                    if n.is_multiple_of(120) {
                        st.lock().unwrap().eta_debug();
                    }
                    if n.is_multiple_of(8) {
                        let (eta, running, last) = {
                            let mut s = st.lock().unwrap();
                            (s.estimate_text(), s.running_since(), s.last.clone())
                        };
                        *shown.lock().unwrap() = Shown {
                            eta,
                            running: running.map(|(r, d)| (r, Instant::now(), d)),
                            last,
                        };
                    }
                }
            });
            return Progress {
                bar: Some(bar),
                state,
                stop,
                heartbeat: Some(ticker),
            };
        }
        let (st, sp) = (state.clone(), stop.clone());
        let label = label.to_owned();
        let heartbeat = std::thread::spawn(move || {
            let mut next = started + HEARTBEAT;
            let mut n = 0u32;
            while !sp.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_millis(250));
                n += 1;
                if n.is_multiple_of(4) {
                    let mut s = st.lock().unwrap();
                    s.sample_load();
                    if n.is_multiple_of(60) {
                        s.eta_debug();
                    }
                }
                if Instant::now() >= next {
                    next += HEARTBEAT;
                    let mut s = st.lock().unwrap();
                    let e = started.elapsed().as_secs();
                    let eta = s.eta_text();
                    let doing = s.doing();
                    crate::ui::status(
                        "Building",
                        format_args!(
                            "{label}: [{}/{}] {}m{:02}s elapsed; {eta}{doing}",
                            s.done,
                            s.total,
                            e / 60,
                            e % 60,
                        ),
                    );
                }
            }
        });
        Progress {
            bar: None,
            state,
            stop,
            heartbeat: Some(heartbeat),
        }
    }

    /// Feed one output line; ninja status lines advance the progress.
    pub fn line(&self, line: &str) {
        if let Some((n, m, r, text)) = eta::parse_status(line) {
            let mut s = self.state.lock().unwrap();
            s.done = n;
            s.total = m;
            s.running_now = r.unwrap_or(0);
            // ninja's descriptions come from the build files: control characters are escaped.
            s.last = crate::ui::escape(text).chars().take(120).collect();
            let now = s.started.elapsed().as_secs_f64();
            s.poll_log();
            if let Some(est) = &mut s.est {
                est.status(n as usize, r.unwrap_or(0) as usize, now);
            }
            if let Some(b) = &self.bar {
                b.set_length(m);
                b.set_position(n);
            }
        }
    }

    /// Stop the bar or heartbeat; returns this run's load trace ([`super::load`]).
    pub fn finish(mut self) -> Trace {
        self.stop_now();
        let mut st = self.state.lock().unwrap();
        match st.est.as_mut() {
            Some(est) => est.take_live_load(),
            None => std::mem::take(&mut st.load),
        }
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if let Some(h) = self.heartbeat.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_follows_the_live_ninja_log_and_names_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(".ninja_log");
        let record = eta::Record::parse(
            "# ninja log v6\n0\t10000\t0\ta.o\t1\n0\t10000\t0\tb.o\t2\n10000\t610000\t0\tlibrccl.so.1.0\t3\n",
        )
        .unwrap();
        let p = Progress::start(
            "rccl test",
            false,
            EtaInput {
                record: Some(record),
                jobs: 2,
                ninja_log: Some(live.clone()),
                targets: "gfx1100".into(),
                ..Default::default()
            },
        );
        // This run's compiles took twice as long as the record's; the link is running.
        std::fs::write(
            &live,
            "# ninja log v6\n0\t20000\t0\ta.o\t1\n0\t20000\t0\tb.o\t2\n",
        )
        .unwrap();
        p.line("[2/3 1] Building CXX object b.o");
        let text = p.state.lock().unwrap().eta_text();
        assert!(text.contains("2.00x the recorded time"), "{text}");
        assert!(text.contains("about 20m left"), "{text}");
        assert!(text.contains("device link for gfx1100"), "{text}");
        p.finish();

        let p = Progress::start("rccl test", false, EtaInput::default());
        let text = p.state.lock().unwrap().eta_text();
        assert!(text.contains("no timing record"), "{text}");
    }

    /// Without a record, the line names what runs (from the build graph, ninja's `-j` and the
    /// live `.ninja_log`), not the compile that finished last.
    #[test]
    fn without_a_record_the_running_link_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(".ninja_log");
        let graph = Graph::parse(
            "build a.o: CXX_COMPILER__rccl_unscanned_Release a.cpp\n\
             build b.o: CXX_COMPILER__rccl_unscanned_Release b.cpp\n\
             build librccl.so.1.0: CXX_SHARED_LIBRARY_LINKER__rccl_Release a.o b.o\n",
        );
        let p = Progress::start(
            "rccl test",
            false,
            EtaInput {
                ninja_log: Some(live.clone()),
                graph: Some(graph),
                build_dir: "/build".into(),
                jobs: 1,
                ..Default::default()
            },
        );
        std::fs::write(&live, "# ninja log v6\n0\t20000\t0\ta.o\t1\n").unwrap();
        p.line("[1/3 1] Building CXX object a.o");
        {
            // One compile left and one job slot: that compile runs, whichever finished last.
            let mut s = p.state.lock().unwrap();
            assert!(
                s.eta_text().ends_with("running: compiling b.o"),
                "{}",
                s.eta_text()
            );
        }
        std::fs::write(
            &live,
            "# ninja log v6\n0\t20000\t0\ta.o\t1\n0\t21000\t0\t/build/b.o\t2\n",
        )
        .unwrap();
        p.line("[2/3 1] Building CXX object b.o");
        let mut s = p.state.lock().unwrap();
        let text = s.eta_text();
        assert!(text.contains("no timing record"), "{text}");
        assert!(
            text.ends_with("running: linking librccl.so.1.0 (device link, mostly single-threaded)"),
            "{text}"
        );
        assert_eq!(
            s.doing(),
            "",
            "the heartbeat still names the last finished step"
        );
        drop(s);
        p.finish();
    }

    #[test]
    fn ninja_status_lines() {
        assert_eq!(
            parse_ninja_status("[3/60] Linking CXX shared library librccl.so"),
            Some((3, 60, "Linking CXX shared library librccl.so"))
        );
        assert_eq!(
            parse_ninja_status("ninja: Entering directory `build'"),
            None
        );
        assert_eq!(parse_ninja_status("[x/y] no"), None);
    }
}
