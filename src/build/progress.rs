//! Build progress on stderr, driven by ninja's `[n/m] description` lines.
//!
//! On a terminal: an indicatif bar with elapsed time, ticking every second so the silent device link
//! still shows time passing. Not on a terminal: a heartbeat line every [`HEARTBEAT`] while a step is
//! running (the RCCL device link prints nothing for minutes to over an hour).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often the non-terminal heartbeat prints.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
struct State {
    done: u64,
    total: u64,
    last: String,
}

/// Progress of one ninja run. Feed it every output line with [`Progress::line`]; call
/// [`Progress::finish`] at the end (dropping it also stops the heartbeat).
pub struct Progress {
    bar: Option<ProgressBar>,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    heartbeat: Option<std::thread::JoinHandle<()>>,
}

/// Parse ninja's status prefix: `[12/60] Building CXX object …` → `(12, 60, "Building CXX object …")`.
pub fn parse_ninja_status(line: &str) -> Option<(u64, u64, &str)> {
    let rest = line.strip_prefix('[')?;
    let (nums, text) = rest.split_once(']')?;
    let (n, m) = nums.split_once('/')?;
    Some((n.trim().parse().ok()?, m.trim().parse().ok()?, text.trim()))
}

impl Progress {
    /// Start showing progress for `label` (e.g. `rccl 2.13.4`). `tty`: draw a bar (pass
    /// [`crate::ui::progress_bars`]), else heartbeat lines (which `-q` silences). The bar is
    /// coloured only when [`crate::ui::color`] says so; ninja's text is escaped.
    pub fn start(label: &str, tty: bool) -> Progress {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        if tty {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(if crate::ui::color() {
                    "{prefix:>12.green.bold} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}"
                } else {
                    "{prefix:>12} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}"
                })
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix("Building");
            bar.set_message(label.to_owned());
            bar.enable_steady_tick(Duration::from_secs(1));
            return Progress {
                bar: Some(bar),
                state,
                stop,
                heartbeat: None,
            };
        }
        let (st, sp) = (state.clone(), stop.clone());
        let label = label.to_owned();
        let started = Instant::now();
        let heartbeat = std::thread::spawn(move || {
            let mut next = started + HEARTBEAT;
            while !sp.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                if Instant::now() >= next {
                    next += HEARTBEAT;
                    let s = st.lock().unwrap();
                    let e = started.elapsed().as_secs();
                    crate::ui::status(
                        "Building",
                        format_args!(
                            "{label}: [{}/{}] {}m{:02}s elapsed; last step: {}",
                            s.done,
                            s.total,
                            e / 60,
                            e % 60,
                            if s.last.is_empty() {
                                "configure/ninja start"
                            } else {
                                &s.last
                            }
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
        if let Some((n, m, text)) = parse_ninja_status(line) {
            let mut s = self.state.lock().unwrap();
            s.done = n;
            s.total = m;
            s.last = crate::ui::escape(text).chars().take(120).collect();
            if let Some(b) = &self.bar {
                b.set_length(m);
                b.set_position(n);
                b.set_message(s.last.clone());
            }
        }
    }

    /// Stop the bar or heartbeat.
    pub fn finish(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if let Some(h) = self.heartbeat.take() {
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
