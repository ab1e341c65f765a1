//! Terminal output. stdout carries results only (tables, `--json`, artifact paths); everything else —
//! logs, status lines, progress bars — goes to stderr.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Set up `tracing` on stderr. `verbose` is the `-v` count (0 = info, 1 = debug, 2+ = trace);
/// `quiet` keeps only errors. `RUST_LOG` overrides both.
pub fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info,rcclfix=debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(stderr_is_tty())
        .with_target(false)
        .compact()
        .try_init();
}

/// Whether stderr is a terminal (progress bars and colour only then).
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// Print a right-aligned status verb and a message to stderr, cargo style: `   Building rccl 2.13.4`.
pub fn status(verb: &str, msg: impl std::fmt::Display) {
    if stderr_is_tty() {
        eprintln!("\x1b[1;32m{verb:>12}\x1b[0m {msg}");
    } else {
        eprintln!("{verb:>12} {msg}");
    }
}

/// Print a warning line to stderr.
pub fn warn(msg: impl std::fmt::Display) {
    if stderr_is_tty() {
        eprintln!("\x1b[1;33mwarning\x1b[0m: {msg}");
    } else {
        eprintln!("warning: {msg}");
    }
}

/// Print `error: …` and one `caused by: …` line per source in the chain.
pub fn print_error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("caused by: {cause}");
    }
}

/// Whether the error chain contains a broken pipe (e.g. `rcclfix scan | head`), which exits 0.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
    })
}

/// Make a closed stdout (`rcclfix matrix | head -1`) end the process quietly with exit 0, as
/// the exit-code contract says, instead of `println!`'s "failed printing to stdout" panic.
/// Every other panic still goes to the default hook.
pub fn exit_quietly_on_broken_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// How often a [`Phase`] prints its heartbeat line when stderr is not a terminal.
pub const PHASE_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// A long phase that prints nothing of its own (debootstrap, an image import, CMake's configure):
/// on a terminal a spinner with the phase and the elapsed time, otherwise a heartbeat line
/// (`  Still configuring: 0m45s elapsed`) every [`PHASE_HEARTBEAT`]. Ends when dropped.
pub struct Phase {
    bar: Option<indicatif::ProgressBar>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Phase {
    /// Start showing `what` (e.g. `configuring rccl 2.13.4`).
    pub fn start(what: &str) -> Phase {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        if stderr_is_tty() {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner:.green} {msg} [{elapsed}]")
                    .expect("valid template"),
            );
            bar.set_message(what.to_owned());
            bar.enable_steady_tick(std::time::Duration::from_millis(200));
            return Phase {
                bar: Some(bar),
                stop,
                thread: None,
            };
        }
        let (sp, what) = (stop.clone(), what.to_owned());
        let thread = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut next = started + PHASE_HEARTBEAT;
            while !sp.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(200));
                if std::time::Instant::now() >= next {
                    next += PHASE_HEARTBEAT;
                    let e = started.elapsed().as_secs();
                    eprintln!("{:>12} {what}: {}m{:02}s elapsed", "Still", e / 60, e % 60);
                }
            }
        });
        Phase {
            bar: None,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
