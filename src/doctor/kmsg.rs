//! The kernel log: amdgpu's AtomicOps message (both wordings, mapped to the GPU by PCI address), the
//! KFD "PCI rejects atomics" line, and whether the log covers amdgpu at all.
//!
//! Source: amdgpu `amdgpu_device.c` (`PCIE atomic ops is not supported` — older `dev_info`;
//! `PCIe atomic ops are not supported` — newer `dev_warn`), amdkfd `kfd_device.c`
//! (`skipped device 1002:XXXX, PCI rejects atomics`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use super::pci::Bdf;
use crate::process::Cmd;

/// The older amdgpu wording (`dev_info`).
pub const ATOMICS_MSG_OLD: &str = "PCIE atomic ops is not supported";
/// The newer amdgpu wording (`dev_warn`).
pub const ATOMICS_MSG_NEW: &str = "PCIe atomic ops are not supported";
/// The amdkfd phrase for a GPU KFD refused because it needs atomics.
pub const KFD_REJECTS: &str = "PCI rejects atomics";

/// Where the kernel log came from.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LogOrigin {
    /// `--dmesg FILE` (or `dmesg.txt` of a snapshot).
    File {
        /// The file name as given.
        path: String,
    },
    /// The output of a command (`dmesg`, `journalctl -k -b -o cat`).
    Command {
        /// The argv.
        argv: String,
    },
    /// Nothing could be read (e.g. `kernel.dmesg_restrict=1` without root).
    Unavailable {
        /// Why.
        reason: String,
    },
}

/// What the kernel log says.
#[derive(Debug, Clone, Serialize)]
pub struct KernelLog {
    /// Where it came from.
    pub origin: LogOrigin,
    /// Number of lines read.
    pub lines: usize,
    /// Whether any `amdgpu` line was present (no amdgpu line at all means the log is wrapped,
    /// restricted or from another boot: inconclusive, never "OK").
    pub has_amdgpu_lines: bool,
    /// PCI addresses amdgpu printed any line for.
    pub amdgpu_bdfs: BTreeSet<Bdf>,
    /// PCI address → the verbatim atomics message line.
    pub atomics_not_supported: BTreeMap<Bdf, String>,
    /// `vendor:device` IDs KFD skipped with "PCI rejects atomics" → the verbatim line.
    pub kfd_rejects: BTreeMap<String, String>,
    /// The matching lines, verbatim (for the report and for `--capture`).
    pub relevant: Vec<String>,
    /// Set when only the end of a `--dmesg` file was read ([`super::input::MAX_INPUT_BYTES`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

impl KernelLog {
    /// Whether the log can say anything about amdgpu (it has lines and some are amdgpu's).
    pub fn usable(&self) -> bool {
        !matches!(self.origin, LogOrigin::Unavailable { .. }) && self.has_amdgpu_lines
    }
}

/// The first token of `line` that is a PCI address (a trailing `:` is allowed).
fn find_bdf(line: &str) -> Option<Bdf> {
    line.split_whitespace()
        .find_map(|t| Bdf::parse(t.trim_end_matches(':')))
}

/// Whether `line` is one of amdgpu's two exact AtomicOps phrases.
pub fn is_atomics_message(line: &str) -> bool {
    line.contains(ATOMICS_MSG_OLD) || line.contains(ATOMICS_MSG_NEW)
}

/// Whether a line is relevant to doctor (kept in `relevant` and in captures).
pub fn is_relevant(line: &str) -> bool {
    is_atomics_message(line)
        || line.contains(KFD_REJECTS)
        || line.contains("amdgpu")
        || line.contains("kfd")
}

/// Parse kernel log text.
pub fn parse(text: &str, origin: LogOrigin) -> KernelLog {
    let mut log = KernelLog {
        origin,
        lines: 0,
        has_amdgpu_lines: false,
        amdgpu_bdfs: BTreeSet::new(),
        atomics_not_supported: BTreeMap::new(),
        kfd_rejects: BTreeMap::new(),
        relevant: vec![],
        cut: None,
    };
    for line in text.lines() {
        log.lines += 1;
        let amd = line.contains("amdgpu");
        if amd {
            log.has_amdgpu_lines = true;
            // `amdgpu 0000:03:00.0: …` — the device name follows the driver name.
            if let Some(rest) = line.split_once("amdgpu ").map(|(_, r)| r) {
                if let Some(b) = rest
                    .split_whitespace()
                    .next()
                    .and_then(|t| Bdf::parse(t.trim_end_matches(':')))
                {
                    log.amdgpu_bdfs.insert(b);
                }
            }
        }
        if is_atomics_message(line) {
            if let Some(b) = find_bdf(line) {
                log.atomics_not_supported.insert(b, line.trim().to_owned());
            }
        }
        if line.contains(KFD_REJECTS) {
            let id = line
                .split_whitespace()
                .map(|t| t.trim_end_matches(','))
                .find(|t| t.len() == 9 && t.as_bytes()[4] == b':' && t.starts_with("1002"))
                .unwrap_or("unknown")
                .to_ascii_lowercase();
            log.kfd_rejects.insert(id, line.trim().to_owned());
        }
        if is_relevant(line) {
            log.relevant.push(line.trim_end().to_owned());
        }
    }
    log
}

/// Read a kernel log file (`--dmesg FILE`): its last [`super::input::MAX_INPUT_BYTES`] only.
///
/// Errors: the file cannot be read, or is not a regular file (a FIFO or `/dev/zero` would hang or
/// never end).
///
/// `shown` is the name the report uses for it: the path as given, or `snap.tar!dmesg.txt` for a
/// snapshot's member (never the temporary folder it was extracted to).
pub fn from_file(path: &Path, shown: &str) -> anyhow::Result<KernelLog> {
    let tail = super::input::read_tail(path, super::input::MAX_INPUT_BYTES)
        .context("cannot read the kernel log")?;
    let mut log = parse(
        &tail.text,
        LogOrigin::File {
            path: shown.to_owned(),
        },
    );
    log.cut = tail.cut_note(Path::new(shown));
    Ok(log)
}

/// Read the live kernel log: `dmesg`, then `journalctl -k -b -o cat` if `dmesg` fails or prints
/// nothing (e.g. `kernel.dmesg_restrict=1`). Never fails: an empty result is
/// [`LogOrigin::Unavailable`].
pub fn from_system() -> KernelLog {
    let tries: [(&str, &[&str]); 2] = [
        ("dmesg", &[]),
        ("journalctl", &["-k", "-b", "-o", "cat", "--no-pager", "-q"]),
    ];
    let mut why = vec![];
    for (prog, args) in tries {
        let cmd = Cmd::new(format!("read the kernel log with {prog}"), prog).args(args.iter());
        match cmd.read_with_deadline(crate::process::PROBE_DEADLINE) {
            Ok(out) if !out.trim().is_empty() => {
                return parse(
                    &out,
                    LogOrigin::Command {
                        argv: cmd.display(),
                    },
                )
            }
            Ok(_) => why.push(format!("`{}` printed nothing", cmd.display())),
            Err(e) => why.push(format!(
                "`{}` failed: {}",
                cmd.display(),
                e.to_string().lines().next().unwrap_or("")
            )),
        }
    }
    parse(
        "",
        LogOrigin::Unavailable {
            reason: why.join("; "),
        },
    )
}
