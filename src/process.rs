//! Running host processes: argv only (never a `sh -c` string), `+ argv` logged at debug level, exit
//! status checked, the tail of stderr kept for the error message.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
        tracing::debug!("+ {}", self.display());
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

    /// Run with inherited stdio; fail with [`CommandError`] on a non-zero exit.
    pub fn run(&self) -> anyhow::Result<()> {
        tracing::debug!("+ {}", self.display());
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
        tracing::debug!("+ {}", self.display());
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
