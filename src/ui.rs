//! Terminal output. stdout carries results only (tables, `--json`, artifact paths); everything else —
//! logs, status lines, progress bars — goes to stderr.
//!
//! One [`Ui`] per process, set by `main` from `-q`, `-v`, `--color` and `NO_COLOR` ([`init`]);
//! [`status`], [`warn`], [`note`], progress bars and `tracing` consult it, so every subcommand
//! honours the same flags.
//!
//! One escaping path: [`escape`] (and [`Esc`], [`escape_path`]) turns every untrusted string —
//! file names, archive member names, log lines, text from a child process — into text that cannot
//! move the cursor, retitle the window, clear the screen or start a new line. Human output goes
//! through it; `--json` keeps the exact value (the JSON encoder escapes control characters itself).

use std::borrow::Cow;
use std::fmt::{self, Display};
use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

pub use crate::escape::{escape, escape_message, escape_path, needs_escape, Esc};

/// `eprintln!` that never panics, for this file ([`write_stderr`]; elsewhere [`crate::errln!`]).
macro_rules! eline {
    ($($t:tt)*) => { write_stderr(format_args!("{}\n", format_args!($($t)*))) };
}

/// `--color`: when stderr output is coloured (status verbs, warnings, tracing, clap errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stderr is a terminal, `NO_COLOR` is unset or empty and `TERM` is not `dumb`.
    #[default]
    Auto,
    /// Always colour, even into a pipe and with `NO_COLOR` set.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Resolve the choice for stderr: `Auto` follows <https://no-color.org> (`NO_COLOR` set to a
    /// non-empty value turns colour off), `TERM=dumb` and whether stderr is a terminal.
    pub fn resolve_stderr(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
                    && stderr_is_tty()
            }
        }
    }

    /// The `--color` value in `args` (`--color X` or `--color=X`, the last one wins), read before
    /// clap parses so that clap's own errors already follow it. Unknown values are left to clap.
    pub fn from_args<I, S>(args: I) -> ColorChoice
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut choice = ColorChoice::Auto;
        let mut take_next = false;
        for a in args {
            let a = a.as_ref().to_string_lossy();
            let value = if take_next {
                take_next = false;
                Some(a.as_ref())
            } else if a == "--color" {
                take_next = true;
                None
            } else if a == "--" {
                break;
            } else {
                a.strip_prefix("--color=")
            };
            if let Some(v) = value {
                match v {
                    "auto" => choice = ColorChoice::Auto,
                    "always" => choice = ColorChoice::Always,
                    "never" => choice = ColorChoice::Never,
                    _ => {}
                }
            }
        }
        choice
    }
}

/// The process-wide output settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ui {
    /// `-q`: only errors on stderr (no status, warning, note or progress lines).
    pub quiet: bool,
    /// The `-v` count.
    pub verbose: u8,
    /// Whether stderr is coloured (resolved from `--color`, `NO_COLOR`, `TERM`, the terminal).
    pub color: bool,
}

static UI: OnceLock<Ui> = OnceLock::new();

/// Set the process-wide [`Ui`] and start `tracing` on stderr with it. Call once, from `main`;
/// later calls keep the first settings.
///
/// `verbose` is the `-v` count (0 = warnings, 1 = debug, 2+ = trace); `quiet` keeps only errors;
/// `RUST_LOG` overrides both for `tracing`.
pub fn init(quiet: bool, verbose: u8, color: ColorChoice) {
    let ui = Ui {
        quiet,
        verbose,
        color: color.resolve_stderr(),
    };
    let _ = UI.set(ui);
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
        .with_ansi(get().color)
        .with_target(false)
        .compact()
        .try_init();
}

/// Set up `tracing` on stderr (colour on a terminal). Kept for callers that predate [`init`].
pub fn init_logging(verbose: u8, quiet: bool) {
    init(quiet, verbose, ColorChoice::Auto);
}

/// The process-wide settings; before [`init`] (library use, unit tests): not quiet, not verbose,
/// colour only on a terminal.
pub fn get() -> Ui {
    *UI.get_or_init(|| Ui {
        quiet: false,
        verbose: 0,
        color: ColorChoice::Auto.resolve_stderr(),
    })
}

/// `-q` was given: print nothing but errors on stderr.
pub fn quiet() -> bool {
    get().quiet
}

/// Whether stderr output is coloured.
pub fn color() -> bool {
    get().color
}

/// The width of the terminal on stderr in columns (its window size, `TIOCGWINSZ`), 80 when
/// stderr is no terminal or the size is unknown (0).
pub fn stderr_width() -> usize {
    console::Term::stderr()
        .size_checked()
        .map(|(_, cols)| usize::from(cols))
        .filter(|&c| c > 0)
        .unwrap_or(80)
}

/// Whether stderr is a terminal (progress bars only then).
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// Whether to draw progress bars: stderr is a terminal and `-q` was not given.
pub fn progress_bars() -> bool {
    get().progress_bars()
}

impl Ui {
    /// Whether to draw progress bars: stderr is a terminal and `-q` was not given.
    pub fn progress_bars(&self) -> bool {
        !self.quiet && stderr_is_tty()
    }

    /// Print a right-aligned status verb and a message to stderr, cargo style:
    /// `   Building rccl 2.13.4`. Nothing with `-q`. The message is escaped ([`escape_message`]):
    /// it may carry file names.
    pub fn status(&self, verb: &str, msg: impl Display) {
        if self.quiet {
            return;
        }
        let msg = msg.to_string();
        let msg = escape_message(&msg);
        if self.color {
            eline!("\x1b[1;32m{verb:>12}\x1b[0m {msg}");
        } else {
            eline!("{verb:>12} {msg}");
        }
    }

    /// Print a warning line to stderr. Nothing with `-q`. The message is escaped
    /// ([`escape_message`]).
    pub fn warn(&self, msg: impl Display) {
        if self.quiet {
            return;
        }
        let msg = msg.to_string();
        let msg = escape_message(&msg);
        if self.color {
            eline!("\x1b[1;33mwarning\x1b[0m: {msg}");
        } else {
            eline!("warning: {msg}");
        }
    }

    /// Print a `note: …` line to stderr. Nothing with `-q`. The message is escaped
    /// ([`escape_message`]).
    pub fn note(&self, msg: impl Display) {
        if self.quiet {
            return;
        }
        let msg = msg.to_string();
        eline!("note: {}", escape_message(&msg));
    }

    /// Print an informational line to stderr as it is (no prefix). Nothing with `-q`. Escaped
    /// ([`escape_message`]).
    pub fn message(&self, msg: impl Display) {
        if self.quiet {
            return;
        }
        let msg = msg.to_string();
        eline!("{}", escape_message(&msg));
    }

    /// A progress bar counting `unit` (e.g. `bundles`) on stderr, or a hidden one when
    /// [`Ui::progress_bars`] says no (not a terminal, or `-q`): the caller drives it the same way
    /// either way and calls `finish_and_clear` at the end.
    pub fn counter_bar(&self, unit: &str) -> indicatif::ProgressBar {
        if !self.progress_bars() {
            return indicatif::ProgressBar::hidden();
        }
        let pb = indicatif::ProgressBar::new(0);
        pb.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{{spinner}} {{msg:24}} [{{bar:30}}] {{pos}}/{{len}} {unit}"
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        pb
    }
}

/// [`Ui::status`] with the process-wide [`Ui`] ([`get`]).
pub fn status(verb: &str, msg: impl Display) {
    get().status(verb, msg)
}

/// [`Ui::warn`] with the process-wide [`Ui`] ([`get`]).
pub fn warn(msg: impl Display) {
    get().warn(msg)
}

/// [`Ui::note`] with the process-wide [`Ui`] ([`get`]).
pub fn note(msg: impl Display) {
    get().note(msg)
}

/// [`Ui::message`] with the process-wide [`Ui`] ([`get`]).
pub fn message(msg: impl Display) {
    get().message(msg)
}

/// Print `[label] line` to stderr: a line the library under test logged in a verify child,
/// forwarded as it arrives. Nothing with `-q` (the caller keeps the line for the diagnosis).
/// Escaped ([`escape`]): it is another program's output.
pub fn child_line(label: &str, line: &str) {
    if quiet() {
        return;
    }
    eline!("[{}] {}", escape(label), escape(line));
}

/// Tell the user that an interrupt removed the in-flight partial output (from the signal thread
/// of [`crate::fsutil::install_interrupt_handler`], just before it exits); printed with `-q` too,
/// as errors are.
pub fn interrupted() {
    eline!("rcclfix: interrupted; removed partial output");
}

/// Write one line of the verify child's protocol to stdout and flush it (stdout is the child's
/// channel to its parent, whose watchdog reads the lines as they come). Write errors are ignored:
/// a parent that has gone away is noticed by its own watchdog.
pub fn protocol_line(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Print `error: …` and one `caused by: …` line per source in the chain. Every line is escaped
/// ([`escape_message`]), so a file name carrying ESC or a newline neither reaches the terminal
/// raw nor splits the message; the process's own output a [`crate::process::CommandError`]
/// carries, and the lines of a [`LinesError`], are escaped line by line.
/// Errors are printed with `-q` too.
///
/// A link whose text the next link repeats at its start (a [`crate::CheckFailed`] or another
/// marker used as context over a detailed error with the same summary, e.g.
/// `anyhow::Error::new(lines).context(CheckFailed::new(head))`) is not printed as a line of its
/// own, so the detailed error keeps its one-escaped-line-per-problem layout under the single
/// `error:` line.
pub fn print_error(err: &anyhow::Error) {
    let (err_label, cause_label) = if color() {
        ("\x1b[1;31merror\x1b[0m", "caused by")
    } else {
        ("error", "caused by")
    };
    for (i, link) in shown_links(err).into_iter().enumerate() {
        let label = if i == 0 { err_label } else { cause_label };
        eline!("{label}: {}", escape_error(link));
    }
}

/// The links of `err`'s chain that [`print_error`] prints: all but one whose text the next link
/// starts with.
fn shown_links(err: &anyhow::Error) -> Vec<&(dyn std::error::Error + 'static)> {
    let links: Vec<&(dyn std::error::Error + 'static)> = err.chain().collect();
    links
        .iter()
        .enumerate()
        .filter(|(i, e)| {
            let text = e.to_string();
            text.is_empty()
                || !links
                    .get(i + 1)
                    .is_some_and(|next| next.to_string().starts_with(&text))
        })
        .map(|(_, e)| *e)
        .collect()
}

/// One link of an error chain as printed by [`print_error`].
fn escape_error(e: &(dyn std::error::Error + 'static)) -> String {
    if let Some(c) = e.downcast_ref::<crate::process::CommandError>() {
        return c.escaped();
    }
    if let Some(m) = e.downcast_ref::<LinesError>() {
        let mut s = escape(&m.head).into_owned();
        for l in &m.lines {
            s.push('\n');
            s.push_str(&escape(l));
        }
        if let Some(h) = &m.help {
            s.push_str("\nhelp: ");
            s.push_str(&escape(h));
        }
        return s;
    }
    escape_message(&e.to_string()).into_owned()
}

/// An error of one head line, one line per problem and an optional `help:` line, each escaped on
/// its own by [`print_error`] (so a kernel or file name cannot split or forge a line, while the
/// problems still stand one per line), e.g. the scan gate's failure in `build`.
#[derive(Debug)]
pub struct LinesError {
    /// The first line, e.g. `scan gate failed for librccl.so.1.0: no output written`.
    pub head: String,
    /// One line per problem.
    pub lines: Vec<String>,
    /// The text of a trailing `help:` line.
    pub help: Option<String>,
}

impl std::fmt::Display for LinesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.head)?;
        for l in &self.lines {
            write!(f, "\n{l}")?;
        }
        if let Some(h) = &self.help {
            write!(f, "\nhelp: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LinesError {}

/// Lay out a text table: a header row and rows of cells, each column as wide as its widest cell
/// (in characters), two spaces between columns, the last column unpadded. Cells are escaped
/// ([`escape`]), so a long or hostile value widens its column instead of breaking the layout.
/// A row shorter than the header leaves its missing cells empty.
pub fn columns<S: AsRef<str>>(head: &[&str], rows: &[Vec<S>]) -> String {
    fn cell<S: AsRef<str>>(r: &[S], i: usize) -> Cow<'_, str> {
        r.get(i).map_or(Cow::Borrowed(""), |c| escape(c.as_ref()))
    }
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, wi) in w.iter_mut().enumerate() {
            *wi = (*wi).max(cell(r, i).chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<Cow<'_, str>>| {
        let n = cells.len();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n {
                out.push_str(&c);
            } else {
                let pad = w[i] - c.chars().count();
                out.push_str(&c);
                out.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        out.push('\n');
    };
    line(head.iter().map(|h| Cow::Borrowed(*h)).collect());
    for r in rows {
        line((0..head.len()).map(|i| cell(r, i)).collect());
    }
    out
}

/// Set once a write to stdout met a closed pipe; later writes are dropped.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether stdout was found closed (`rcclfix scan lib | true`): what was printed after that was
/// dropped.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The result channel: stdout, except that a closed pipe (`rcclfix scan lib | head -1`, `| true`)
/// is not an error. The first write that meets `EPIPE` marks stdout closed ([`stdout_closed`]),
/// and it and every later write succeed without writing, so the subcommand finishes and exits
/// with its verdict's code (1 stays 1, 3 stays 3). Other write errors (a full disk behind `>`)
/// are errors. Rust ignores `SIGPIPE`, so the write returns `EPIPE` instead of killing the process.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stdout;

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if stdout_closed() {
            return Ok(buf.len());
        }
        match std::io::stdout().lock().write(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(buf.len())
            }
            r => r,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if stdout_closed() {
            return Ok(());
        }
        match std::io::stdout().lock().flush() {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            r => r,
        }
    }
}

/// Write formatted text to stdout through [`Stdout`] (the [`crate::out!`] and [`crate::outln!`]
/// macros): a closed pipe is not an error.
///
/// Errors: stdout is open and the write fails (a full disk).
pub fn write_stdout(args: fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = Stdout;
    out.write_fmt(args)?;
    out.flush()
}

/// Write formatted text to stderr (the [`crate::err!`] and [`crate::errln!`] macros), ignoring
/// every error: a closed stderr (`rcclfix scan x 2>&1 | true`) must neither panic, as
/// `eprintln!` does, nor change the exit code.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args);
    let _ = err.flush();
}

/// `print!` for results: [`write_stdout`] (a closed stdout is not an error); evaluates to
/// `std::io::Result<()>`.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::ui::write_stdout(format_args!($($t)*)) };
}

/// `println!` for results: [`write_stdout`] (a closed stdout is not an error); evaluates to
/// `std::io::Result<()>`.
#[macro_export]
macro_rules! outln {
    () => { $crate::ui::write_stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::ui::write_stdout(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` that never panics: [`write_stderr`].
#[macro_export]
macro_rules! err {
    ($($t:tt)*) => { $crate::ui::write_stderr(format_args!($($t)*)) };
}

/// `eprintln!` that never panics: [`write_stderr`].
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => { $crate::ui::write_stderr(format_args!("{}\n", format_args!($($t)*))) };
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
        if progress_bars() {
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
                    status(
                        "Still",
                        format_args!("{what}: {}m{:02}s elapsed", e / 60, e % 60),
                    );
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_check_failed_marker_over_its_own_detail_is_not_printed_twice() {
        let lines = LinesError {
            head: "scan gate failed for librccl.so.1.0: no output written".into(),
            lines: vec!["gfx1100: declares 2".into()],
            help: None,
        };
        let err = anyhow::Error::new(lines).context(crate::CheckFailed::new(
            "scan gate failed for librccl.so.1.0: no output written",
        ));
        let shown: Vec<String> = shown_links(&err).iter().map(|e| escape_error(*e)).collect();
        assert_eq!(
            shown,
            ["scan gate failed for librccl.so.1.0: no output written\ngfx1100: declares 2"]
        );
        assert!(crate::CheckFailed::in_chain(&err));
        // The export gate: its marker and the CheckFailed over it collapse onto the lines.
        let err = crate::package::export_gate::GateError::error(
            "lib\x1b.so".into(),
            vec!["missing ncclAllReduce".into(), "SONAME x".into()],
        )
        .context(crate::CheckFailed::new("export gate failed for lib\x1b.so"));
        let shown: Vec<String> = shown_links(&err).iter().map(|e| escape_error(*e)).collect();
        assert_eq!(
            shown,
            ["export gate failed for lib\\e.so:\n  missing ncclAllReduce\n  SONAME x"]
        );
        assert!(crate::CheckFailed::in_chain(&err));
        // A summary of its own is a line of its own.
        let err =
            anyhow::anyhow!("the library is missing").context(crate::CheckFailed::new("gate"));
        assert_eq!(shown_links(&err).len(), 2);
    }

    #[test]
    fn escape_keeps_plain_text_borrowed() {
        assert!(matches!(escape("lib/librccl.so.1 ✓"), Cow::Borrowed(_)));
        assert_eq!(escape("a\\b"), "a\\b");
    }

    #[test]
    fn escape_control_characters() {
        assert_eq!(escape("\x1b]0;title\x07x"), "\\e]0;title\\x07x");
        assert_eq!(escape("\x1b[2J"), "\\e[2J");
        assert_eq!(escape("a\nb\r\tc\x7f"), "a\\nb\\r\\tc\\x7f");
        assert_eq!(escape("\u{9b}31m"), "\\x9b31m");
        assert_eq!(escape("\u{202e}gpj.exe"), "\\u{202e}gpj.exe");
        assert_eq!(escape("\0"), "\\x00");
    }

    #[test]
    fn escaped_text_has_no_control_character() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!escape(&all).chars().any(needs_escape));
        assert_eq!(escape("a\u{2028}b\u{2029}"), "a\\u{2028}b\\u{2029}");
        assert!(!escape_message(&all)
            .chars()
            .any(|c| c != '\n' && needs_escape(c)));
    }

    #[test]
    fn escape_message_keeps_hint_lines_only() {
        assert_eq!(
            escape_message("cannot read a\nb.so\nhelp: pass --lib"),
            "cannot read a\\nb.so\nhelp: pass --lib"
        );
        assert_eq!(escape_message("x\nnote: y\x1b"), "x\nnote: y\\e");
        assert_eq!(escape_message("x\nhelpful"), "x\\nhelpful");
    }

    #[test]
    fn esc_wrapper_escapes_display() {
        let p = Path::new("/tmp/a\x1b[2Jb");
        assert_eq!(Esc(p.display()).to_string(), "/tmp/a\\e[2Jb");
        assert_eq!(escape_path(p), "/tmp/a\\e[2Jb");
    }

    #[test]
    fn columns_fit_the_widest_cell() {
        let t = columns(
            &["A", "B", "C"],
            &[
                vec!["2.30.4-rocm7.14.0-device-linker", "x", "last"],
                vec!["1", "a\x1b[2Jb", "z"],
            ],
        );
        assert_eq!(
            t,
            "A                                B        C\n\
             2.30.4-rocm7.14.0-device-linker  x        last\n\
             1                                a\\e[2Jb  z\n"
        );
    }

    #[test]
    fn color_from_args() {
        assert_eq!(
            ColorChoice::from_args(["rcclfix", "scan"]),
            ColorChoice::Auto
        );
        assert_eq!(
            ColorChoice::from_args(["rcclfix", "--color", "never", "scan"]),
            ColorChoice::Never
        );
        assert_eq!(
            ColorChoice::from_args(["rcclfix", "--color=always", "--color=never"]),
            ColorChoice::Never
        );
        assert_eq!(
            ColorChoice::from_args(["rcclfix", "--", "--color=never"]),
            ColorChoice::Auto
        );
    }
}
