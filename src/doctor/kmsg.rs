//! The kernel log: amdgpu's AtomicOps message (both wordings, mapped to the GPU by PCI address), the
//! KFD "PCI rejects atomics" line, whether the log covers amdgpu at all, and every AMD GPU it names
//! with what it says about each ([`LogGpu`]: no AtomicOps path, page faults, resets, a virtual
//! function's mailbox failing), so a kernel log is evidence on its own.
//!
//! Lines may carry any prefix (`[    1.234]`, `dmesg -T`'s `[Fri Dec  4 12:00:00 2026]`,
//! journalctl's `Dec 04 12:00:00 host kernel:`, `dmesg -x`'s `kern  :warn  :`) and come
//! interleaved with other drivers' lines: a GPU is named only by `amdgpu <address>` or by the PCI
//! core's `pci <address>: [1002:xxxx] … class 0x03xxxx` line.
//!
//! Source: amdgpu `amdgpu_device.c` (`PCIE atomic ops is not supported` — older `dev_info`;
//! `PCIe atomic ops are not supported` — newer `dev_warn`), amdgpu `gmc_v*_0.c` (page faults),
//! `amdgpu_job.c` / `amdgpu_device.c` (ring timeouts, GPU reset), `mxgpu_ai.c` / `mxgpu_nv.c` (the
//! SR-IOV virtual function's mailbox), amdkfd `kfd_device.c` (`skipped device 1002:XXXX, PCI
//! rejects atomics`), Linux `drivers/pci/probe.c` (`pci 0000:03:00.0: [1002:744c] type 00 class
//! 0x030000`).

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

/// A problem amdgpu reports for a GPU that is not the AtomicOps path (the hostcall refusal prints
/// nothing in the kernel log: these are other problems).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// A GPU page fault (`[gfxhub] page fault`, `*_PROTECTION_FAULT_STATUS`).
    PageFault,
    /// A ring timeout or a GPU reset (`ring gfx_0.0.0 timeout`, `GPU reset begin!`).
    Reset,
    /// A virtual function's mailbox to the host driver failing (`ACK should not assert`, `Doesn't
    /// get ack from pf`): SR-IOV/passthrough trouble.
    VfMailbox,
}

impl ProblemKind {
    /// Words for the report.
    pub fn describe(self) -> &'static str {
        match self {
            ProblemKind::PageFault => "GPU page fault",
            ProblemKind::Reset => "ring timeout or GPU reset",
            ProblemKind::VfMailbox => "virtual-function mailbox to the host failing",
        }
    }

    /// The usual next step, one sentence.
    pub fn next_step(self) -> &'static str {
        match self {
            ProblemKind::PageFault => "a GPU page fault is a bad address in a kernel, a driver bug, or (in a VM or Xen guest) the IOMMU/passthrough mapping: the line names the process; rerun it with AMD_LOG_LEVEL=1 and check the hypervisor's IOMMU setup",
            ProblemKind::Reset => "a ring timeout or reset is a hang the driver recovered from (a kernel that never finished, firmware, power): check the amdgpu firmware and kernel versions and the job that ran",
            ProblemKind::VfMailbox => "the guest's virtual function gets no answer from the host driver: check the host side (its amdgpu/SR-IOV driver, the passthrough or Thunderbolt link), not the guest's libraries",
        }
    }
}

/// The kernel-log lines of a problem that is not the AtomicOps path: what kind, and how to read it.
const PROBLEMS: &[(&str, ProblemKind)] = &[
    ("page fault", ProblemKind::PageFault),
    ("PROTECTION_FAULT_STATUS", ProblemKind::PageFault),
    ("GPU reset", ProblemKind::Reset),
    ("GPU recovery", ProblemKind::Reset),
    ("timeout, signaled seq", ProblemKind::Reset),
    ("ACK should not assert", ProblemKind::VfMailbox),
    ("get ack from pf", ProblemKind::VfMailbox),
    ("from pf, error", ProblemKind::VfMailbox),
];

/// The problem a kernel-log line reports, if it is an amdgpu line holding one of the known phrases
/// (page faults, ring timeouts and resets, the VF mailbox).
pub fn problem_of(line: &str) -> Option<ProblemKind> {
    if !line.contains("amdgpu") {
        return None;
    }
    PROBLEMS
        .iter()
        .find(|(n, _)| line.contains(n))
        .map(|(_, k)| *k)
}

/// At most this many problem lines are kept per GPU (a faulting GPU prints thousands).
pub const MAX_PROBLEM_LINES: usize = 8;
/// At most this many GPUs are kept from one log (a forged log could name thousands).
pub const MAX_LOG_GPUS: usize = 64;
/// A kept line is cut to this many characters.
const MAX_LINE_CHARS: usize = 300;

/// One kernel-log problem line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProblemLine {
    /// What it is.
    pub kind: ProblemKind,
    /// The line, trimmed and cut to 300 characters (raw: escape before printing).
    pub line: String,
}

/// What the kernel log says about one AMD GPU, by PCI address.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LogGpu {
    /// The GPU's PCI address.
    pub bdf: Bdf,
    /// `1002:744c`, when the PCI core's enumeration line is in the log.
    pub id: Option<String>,
    /// amdgpu's AtomicOps line for it (verbatim): no AtomicOps path.
    pub no_atomics: Option<String>,
    /// Other problems amdgpu reported for it (at most [`MAX_PROBLEM_LINES`]).
    pub problems: Vec<ProblemLine>,
    /// KFD's `skipped device … PCI rejects atomics` line, when it came right after this GPU's
    /// amdgpu lines (KFD probes each GPU inside amdgpu's init of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kfd_rejected: Option<String>,
}

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
    /// Every AMD GPU the log names by PCI address, with what it says about each (at most
    /// [`MAX_LOG_GPUS`]).
    pub gpus: BTreeMap<Bdf, LogGpu>,
    /// amdgpu problem lines that name no PCI address (`[drm:amdgpu_job_timedout [amdgpu]] *ERROR*
    /// ring gfx_0.0.0 timeout`): given to the GPU when the log names only one (at most
    /// [`MAX_PROBLEM_LINES`]).
    pub unattributed: Vec<ProblemLine>,
    /// The kernel's `Hypervisor detected: KVM` (or Xen's paravirtualised boot) line: a guest.
    pub hypervisor: Option<String>,
    /// An AtomicOps line that names no device (older amdgpu: `[drm] PCIE atomic ops is not
    /// supported`), when the log names no single GPU to give it to.
    pub unnamed_no_atomics: Option<String>,
    /// How many `PCI rejects atomics` lines the log holds (one per GPU KFD skipped).
    pub kfd_reject_lines: usize,
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

/// `line` without ANSI escape sequences (CSI `ESC [ … letter`, and a lone ESC).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut it = line.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if it.peek() == Some(&'[') {
            it.next();
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

/// The first token of `line` that is a PCI address (a trailing `:` is allowed).
fn find_bdf(line: &str) -> Option<Bdf> {
    line.split_whitespace()
        .find_map(|t| Bdf::parse(t.trim_end_matches(':')))
}

/// The device amdgpu names on `line`: the address right after a `amdgpu ` token (dev_* prints
/// `amdgpu 0000:03:00.0: …`); every occurrence is tried, so a host named `amdgpu` in a journalctl
/// prefix does not hide it.
pub fn amdgpu_bdf(line: &str) -> Option<Bdf> {
    let mut rest = line;
    while let Some(i) = rest.find("amdgpu ") {
        let after = &rest[i + "amdgpu ".len()..];
        let word_start = i == 0
            || !rest.as_bytes()[i - 1].is_ascii_alphanumeric() && rest.as_bytes()[i - 1] != b'_';
        if word_start {
            if let Some(b) = after
                .split_whitespace()
                .next()
                .and_then(|t| Bdf::parse(t.trim_end_matches(':')))
            {
                return Some(b);
            }
        }
        rest = after;
    }
    None
}

/// The PCI core's enumeration line of an AMD display device: `pci 0000:03:00.0: [1002:744c] type
/// 00 class 0x030000 …` → (address, `1002:744c`).
pub fn pci_display_device(line: &str) -> Option<(Bdf, String)> {
    let i = line.find("pci ")?;
    if i > 0 && line.as_bytes()[i - 1].is_ascii_alphanumeric() {
        return None;
    }
    let mut t = line[i + 4..].split_whitespace();
    let bdf = Bdf::parse(t.next()?.trim_end_matches(':'))?;
    let id = t.next()?.strip_prefix("[1002:")?.strip_suffix(']')?;
    if id.len() != 4 || !id.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let class = line.split_once(" class 0x")?.1.get(..2)?;
    (class == "03").then(|| (bdf, format!("1002:{}", id.to_ascii_lowercase())))
}

fn cut(line: &str) -> String {
    let t = line.trim();
    if t.chars().count() > MAX_LINE_CHARS {
        format!("{}…", t.chars().take(MAX_LINE_CHARS).collect::<String>())
    } else {
        t.to_owned()
    }
}

impl KernelLog {
    /// The entry of the GPU at `bdf`, created if the log has room for another GPU.
    fn gpu(&mut self, bdf: Bdf) -> Option<&mut LogGpu> {
        if !self.gpus.contains_key(&bdf) && self.gpus.len() >= MAX_LOG_GPUS {
            return None;
        }
        Some(self.gpus.entry(bdf).or_insert_with(|| LogGpu {
            bdf,
            id: None,
            no_atomics: None,
            problems: vec![],
            kfd_rejected: None,
        }))
    }

    /// Give the unattributed problem lines and an AtomicOps line that names no device to the one
    /// GPU the log names, if it names exactly one.
    fn attribute(&mut self) {
        if self.gpus.len() == 1 {
            if let Some(l) = self.unnamed_no_atomics.take() {
                if let Some(g) = self.gpus.values_mut().next() {
                    self.atomics_not_supported
                        .entry(g.bdf)
                        .or_insert_with(|| l.clone());
                    g.no_atomics.get_or_insert(l);
                }
            }
            let lines = std::mem::take(&mut self.unattributed);
            if let Some(g) = self.gpus.values_mut().next() {
                for l in lines {
                    if g.problems.len() < MAX_PROBLEM_LINES {
                        g.problems.push(l);
                    }
                }
            }
        }
    }
}

/// Whether `line` is one of amdgpu's two exact AtomicOps phrases.
pub fn is_atomics_message(line: &str) -> bool {
    line.contains(ATOMICS_MSG_OLD) || line.contains(ATOMICS_MSG_NEW)
}

/// Whether a line is relevant to doctor (kept in `relevant` and in captures): amdgpu's and KFD's
/// lines, the PCI core's line for an AMD display device (its ID) and the hypervisor line.
pub fn is_relevant(line: &str) -> bool {
    is_atomics_message(line)
        || line.contains(KFD_REJECTS)
        || line.contains("amdgpu")
        || line.contains("kfd")
        || line.contains("Hypervisor detected: ")
        || pci_display_device(line).is_some()
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
        gpus: BTreeMap::new(),
        unattributed: vec![],
        hypervisor: None,
        unnamed_no_atomics: None,
        kfd_reject_lines: 0,
        cut: None,
    };
    // The GPU amdgpu named last (KFD's line about a GPU comes inside amdgpu's init of it), and the
    // previous line (a paste wrapped inside amdgpu's message).
    let mut last_gpu: Option<Bdf> = None;
    let mut prev = String::new();
    for raw in text.lines() {
        log.lines += 1;
        // `dmesg --color=always` pasted: the escape sequences split `amdgpu 0000:03:00.0:`.
        let stripped;
        let line = if raw.contains('\x1b') {
            stripped = strip_ansi(raw);
            stripped.as_str()
        } else {
            raw
        };
        let wrapped = line.trim_start().starts_with("supported")
            && (prev.ends_with("atomic ops is not") || prev.ends_with("atomic ops are not"));
        let joined;
        let line = if wrapped {
            joined = format!("{prev} {}", line.trim_start());
            joined.as_str()
        } else {
            line
        };
        prev = line.trim_end().chars().take(MAX_LINE_CHARS).collect();
        let amd = line.contains("amdgpu");
        let mut named = None;
        if amd {
            log.has_amdgpu_lines = true;
            // `amdgpu 0000:03:00.0: …` — the device name follows the driver name.
            if let Some(b) = amdgpu_bdf(line) {
                log.amdgpu_bdfs.insert(b);
                named = Some(b);
                last_gpu = Some(b);
                log.gpu(b);
            }
        }
        if let Some((b, id)) = pci_display_device(line) {
            if let Some(g) = log.gpu(b) {
                g.id = Some(id);
            }
        }
        if log.hypervisor.is_none() {
            if let Some((_, h)) = line.split_once("Hypervisor detected: ") {
                log.hypervisor = Some(cut(h));
            } else if line.contains("Booting paravirtualized kernel on Xen") {
                log.hypervisor = Some("Xen".into());
            }
        }
        if is_atomics_message(line) {
            if let Some(b) = named.or_else(|| find_bdf(line)) {
                log.atomics_not_supported.insert(b, line.trim().to_owned());
                if let Some(g) = log.gpu(b) {
                    g.no_atomics = Some(cut(line));
                }
            } else if log.unnamed_no_atomics.is_none() {
                log.unnamed_no_atomics = Some(cut(line));
            }
        } else if let Some(kind) = problem_of(line) {
            let p = ProblemLine {
                kind,
                line: cut(line),
            };
            let room = log.unattributed.len() < MAX_PROBLEM_LINES;
            match named.and_then(|b| log.gpu(b)) {
                Some(g) if g.problems.len() < MAX_PROBLEM_LINES => g.problems.push(p),
                Some(_) => {}
                None if room => log.unattributed.push(p),
                None => {}
            }
        }
        if line.contains(KFD_REJECTS) {
            let id = line
                .split_whitespace()
                .map(|t| t.trim_end_matches(','))
                .find(|t| t.len() == 9 && t.as_bytes()[4] == b':' && t.starts_with("1002"))
                .unwrap_or("unknown")
                .to_ascii_lowercase();
            log.kfd_reject_lines += 1;
            if let Some(g) = last_gpu.and_then(|b| log.gpu(b)) {
                // Only a GPU whose ID is unknown or the same: never another model's.
                if g.id.as_deref().is_none_or(|i| i == id) && g.kfd_rejected.is_none() {
                    g.kfd_rejected = Some(cut(line));
                    if id != "unknown" {
                        g.id = Some(id.clone());
                    }
                }
            }
            log.kfd_rejects.insert(id, line.trim().to_owned());
        }
        if is_relevant(line) {
            log.relevant.push(line.trim_end().to_owned());
        }
    }
    log.attribute();
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
