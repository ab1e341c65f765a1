//! Running host processes: argv only (never a `sh -c` string), `+ argv` logged at debug level, exit
//! status checked, the tail of stderr kept for the error message.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// How many trailing lines of output an error message carries.
pub const TAIL_LINES: usize = 30;

/// A failed command: what it was for, its argv, its exit status and the tail of its output.
#[derive(Debug, thiserror::Error)]
#[error("{summary} failed ({status}): {argv}\n--- last lines ---\n{tail}")]
pub struct CommandError {
    /// What the command was for, e.g. "configure rccl".
    pub summary: String,
    /// The argv, shell-quoted for display.
    pub argv: String,
    /// Exit status as text (`exit status: 1`, `signal: 9`).
    pub status: String,
    /// The last [`TAIL_LINES`] lines of stderr (or of the combined log).
    pub tail: String,
}

impl CommandError {
    /// The message as [`crate::ui::print_error`] shows it: every part escaped
    /// ([`crate::escape::escape`]), the output tail escaped line by line under its own header.
    pub fn escaped(&self) -> String {
        use crate::escape::escape;
        let mut s = format!(
            "{} failed ({}): {}\n--- last lines ---",
            escape(&self.summary),
            escape(&self.status),
            escape(&self.argv)
        );
        for line in self.tail.lines() {
            s.push('\n');
            s.push_str(&escape(line));
        }
        s
    }
}

/// A command that did not finish within its deadline ([`Cmd::read_with_deadline`]); it was killed.
#[derive(Debug, thiserror::Error)]
#[error("{summary} did not finish within {}s and was stopped: {argv}", .after.as_secs_f64())]
pub struct DeadlineError {
    /// What the command was for.
    pub summary: String,
    /// The argv, shell-quoted for display.
    pub argv: String,
    /// The deadline it ran past.
    pub after: Duration,
}

/// The deadline of a short host probe (`dmesg`, `python3 -c`, `docker version`): long enough for a
/// slow machine, short enough that a wedged daemon or driver cannot hang rcclfix.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(30);

/// How much of each output stream [`Cmd::read_with_deadline`] keeps (the rest is read and
/// dropped, so a chatty child cannot fill rcclfix's memory or block on a full pipe).
pub const MAX_CAPTURE_BYTES: usize = 16 << 20;

/// A command to run: a summary for messages plus argv, environment and working directory.
#[derive(Debug, Clone)]
pub struct Cmd {
    summary: String,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_clear: bool,
    cwd: Option<PathBuf>,
}

impl Cmd {
    /// A new command `prog` with a summary used in logs and errors.
    pub fn new(summary: impl Into<String>, prog: impl AsRef<OsStr>) -> Self {
        Cmd {
            summary: summary.into(),
            argv: vec![prog.as_ref().to_owned()],
            env: vec![],
            env_clear: false,
            cwd: None,
        }
    }
    /// Append one argument.
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.argv.push(a.as_ref().to_owned());
        self
    }
    /// Append arguments.
    pub fn args<I, S>(mut self, it: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.argv
            .extend(it.into_iter().map(|s| s.as_ref().to_owned()));
        self
    }
    /// Set an environment variable for the child.
    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        self.env
            .push((k.as_ref().to_owned(), v.as_ref().to_owned()));
        self
    }
    /// Start the child with an empty environment (plus what [`Cmd::env`] sets).
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }
    /// Run in this directory.
    pub fn cwd(mut self, d: impl AsRef<Path>) -> Self {
        self.cwd = Some(d.as_ref().to_owned());
        self
    }
    /// The argv as given.
    pub fn argv(&self) -> &[OsString] {
        &self.argv
    }
    /// The summary.
    pub fn summary(&self) -> &str {
        &self.summary
    }
    /// The argv shell-quoted for display (`+ podman run …`).
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]);
        if self.env_clear {
            c.env_clear();
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        if let Some(d) = &self.cwd {
            c.current_dir(d);
        }
        c
    }

    /// Run to completion, capturing stdout and stderr; fail with [`CommandError`] on a non-zero exit.
    /// Returns stdout.
    pub fn read(&self) -> anyhow::Result<String> {
        tracing::debug!("+ {}", crate::escape::Esc(self.display()));
        let out = self
            .command()
            .stdin(Stdio::null())
            .output()
            .with_context(|| self.start_error())?;
        if !out.status.success() {
            let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
            if text.trim().is_empty() {
                text = String::from_utf8_lossy(&out.stdout).into_owned();
            }
            return Err(self.error(out.status, &text).into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// [`Cmd::read`] with a deadline: the child gets `deadline` to exit and close its output;
    /// past it the child is killed (SIGKILL) and the result is a [`DeadlineError`]. Each output
    /// stream is drained concurrently and kept up to [`MAX_CAPTURE_BYTES`]. Returns stdout.
    ///
    /// For probes of other software (a GPU runtime initialising, a device count) that must not
    /// hang rcclfix. A grandchild that keeps the output pipe open past the deadline also ends
    /// the wait with a [`DeadlineError`].
    ///
    /// Errors: the command cannot start; it exits non-zero ([`CommandError`]); the deadline.
    pub fn read_with_deadline(&self, deadline: Duration) -> anyhow::Result<String> {
        tracing::debug!(
            "+ {} (deadline {}s)",
            crate::escape::Esc(self.display()),
            deadline.as_secs_f64()
        );
        let start = Instant::now();
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| self.start_error())?;
        let (tx, rx) = std::sync::mpsc::channel::<(bool, Vec<u8>)>();
        for (is_out, stream) in [
            (
                true,
                child
                    .stdout
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
            ),
            (
                false,
                child
                    .stderr
                    .take()
                    .map(|s| Box::new(s) as Box<dyn Read + Send>),
            ),
        ] {
            let Some(mut stream) = stream else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let room = MAX_CAPTURE_BYTES.saturating_sub(kept.len());
                            kept.extend_from_slice(&buf[..n.min(room)]);
                        }
                    }
                }
                let _ = tx.send((is_out, kept));
            });
        }
        drop(tx);
        let timed_out = || DeadlineError {
            summary: self.summary.clone(),
            argv: self.display(),
            after: deadline,
        };
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) if start.elapsed() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(timed_out().into());
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(e).with_context(|| format!("{}: waiting", self.summary)),
            }
        };
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            let left = deadline.saturating_sub(start.elapsed());
            match rx.recv_timeout(left) {
                Ok((true, b)) => stdout = b,
                Ok((false, b)) => stderr = b,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return Err(timed_out().into()),
            }
        }
        if !status.success() {
            let mut text = String::from_utf8_lossy(&stderr).into_owned();
            if text.trim().is_empty() {
                text = String::from_utf8_lossy(&stdout).into_owned();
            }
            return Err(self.error(status, &text).into());
        }
        Ok(String::from_utf8_lossy(&stdout).into_owned())
    }

    /// Run with inherited stdio; fail with [`CommandError`] on a non-zero exit.
    pub fn run(&self) -> anyhow::Result<()> {
        tracing::debug!("+ {}", crate::escape::Esc(self.display()));
        let status = self
            .command()
            .stdin(Stdio::null())
            .status()
            .with_context(|| self.start_error())?;
        if !status.success() {
            return Err(self.error(status, "").into());
        }
        Ok(())
    }

    /// Run with stdout and stderr merged into one line stream: each line goes to `on_line` (for
    /// progress parsing) and to `log` (the full build log). On failure the error carries the last
    /// [`TAIL_LINES`] lines.
    pub fn stream(
        &self,
        log: &mut dyn std::io::Write,
        mut on_line: impl FnMut(&str),
    ) -> anyhow::Result<()> {
        tracing::debug!("+ {}", crate::escape::Esc(self.display()));
        writeln!(log, "+ {}", self.display())?;
        let (reader, writer) = std::io::pipe().context("cannot create a pipe")?;
        let writer2 = writer.try_clone()?;
        let mut cmd = self.command();
        cmd.stdin(Stdio::null()).stdout(writer).stderr(writer2);
        let mut child = cmd.spawn().with_context(|| self.start_error())?;
        drop(cmd);
        let mut tail: std::collections::VecDeque<String> = Default::default();
        for line in BufReader::new(reader).split(b'\n') {
            let line = line?;
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches('\r');
            writeln!(log, "{line}")?;
            on_line(line);
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line.to_owned());
        }
        let status = child.wait()?;
        log.flush()?;
        if !status.success() {
            let t: Vec<String> = tail.into_iter().collect();
            return Err(self.error(status, &t.join("\n")).into());
        }
        Ok(())
    }

    fn start_error(&self) -> String {
        format!(
            "{}: cannot start `{}`",
            self.summary,
            self.argv[0].to_string_lossy()
        )
    }

    fn error(&self, status: std::process::ExitStatus, text: &str) -> CommandError {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
        CommandError {
            summary: self.summary.clone(),
            argv: self.display(),
            status: status.to_string(),
            tail,
        }
    }
}

/// Quote one argument for display in a POSIX shell.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
