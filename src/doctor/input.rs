//! Bounded reading of user-supplied text inputs (`--dmesg`, `--log`, `--vm-config`, `--lspci`).
//!
//! Only regular files are read (a FIFO, a character device such as `/dev/zero`, a socket or a
//! folder is refused with one line naming it). Logs are read from the end ([`read_tail`]: their
//! last [`MAX_INPUT_BYTES`]; kernel logs and runtime logs keep the interesting lines at the end);
//! inputs that are only meaningful whole (a VM config, pasted `lspci` text) are refused above that
//! size ([`read_capped`]). Memory stays bounded whatever the file size. The live kernel log
//! (`dmesg`/`journalctl` output) does not pass through here.
//!
//! Every one of them must be text: a file with a NUL byte in its first [`TEXT_PROBE_BYTES`] is
//! refused ([`check_text`], the rule git uses to call a file binary: `buffer_is_binary` in git's
//! `xdiff-interface.c`), so an executable that happens to contain the refusal strings is never
//! triaged as a log.
//!
//! The machine's own files (sysfs/procfs, or a snapshot's copy of them) are read through
//! [`read_small`]: at most a fixed number of bytes each, regular files only, so a folder with a
//! sparse 1 GiB `config` or a FIFO named `vendor` costs nothing.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::Context;

/// The most bytes read from one input file: its last 64 MiB.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// How many leading bytes [`check_text`] looks at (git's `FIRST_FEW_BYTES`).
pub const TEXT_PROBE_BYTES: usize = 8000;

/// The most bytes [`read_small`] reads of one sysfs/procfs file: a PCI `config` is 256 or 4096
/// bytes, a KFD `properties` file about 2 KiB, `cpuinfo` of a big machine a few hundred KiB.
pub const MAX_SYSFS_FILE_BYTES: u64 = 1 << 20;

/// Refuse `head` (the first bytes of a file) when it is not text: a NUL byte in its first
/// [`TEXT_PROBE_BYTES`], or an ELF header.
///
/// Errors: `not a text file (…)`, naming the offset of the first NUL byte.
pub fn check_text(head: &[u8]) -> anyhow::Result<()> {
    let probe = &head[..head.len().min(TEXT_PROBE_BYTES)];
    if probe.starts_with(b"\x7fELF") {
        anyhow::bail!(
            "not a text file (an ELF file: an executable or a library); give the log it printed"
        );
    }
    if let Some(i) = probe.iter().position(|&b| b == 0) {
        anyhow::bail!(
            "not a text file (a NUL byte at offset {i}, in its first {TEXT_PROBE_BYTES} bytes: a binary file); give a text log"
        );
    }
    Ok(())
}

/// The first [`TEXT_PROBE_BYTES`] of the open file `f` (its position is restored to 0).
fn head_of(f: &mut std::fs::File) -> anyhow::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(TEXT_PROBE_BYTES);
    (&mut *f)
        .take(TEXT_PROBE_BYTES as u64)
        .read_to_end(&mut head)
        .context("cannot read")?;
    f.seek(SeekFrom::Start(0)).context("cannot seek")?;
    Ok(head)
}

/// At most `max` bytes of the machine file `path` (sysfs, procfs or a snapshot's copy), or `None`
/// when it is missing, unreadable or not a regular file (a FIFO is never opened: it could block).
/// A file longer than `max` is cut at `max` (sysfs files report a fixed size, often 4096, whatever
/// they hold).
pub fn read_small(path: &Path, max: u64) -> Option<Vec<u8>> {
    let (f, _) = crate::fsutil::open_regular(path).ok()?;
    let mut b = vec![];
    f.take(max).read_to_end(&mut b).ok()?;
    Some(b)
}

/// [`read_small`] as text (invalid UTF-8 replaced by U+FFFD).
pub fn read_small_string(path: &Path, max: u64) -> Option<String> {
    read_small(path, max).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The text of an input file, possibly cut at the front.
#[derive(Debug, Clone)]
pub struct TailText {
    /// The text (invalid UTF-8 replaced by U+FFFD).
    pub text: String,
    /// The file's size in bytes.
    pub file_len: u64,
    /// Bytes not read at the front (0: the whole file was read). When non-zero, the partial line
    /// the cut landed in is dropped from `text` as well.
    pub skipped: u64,
}

impl TailText {
    /// One line for the report when the input was cut, e.g.
    /// `dmesg.txt: read only the last 64 MiB of 2.0 GiB (earlier lines ignored)`.
    pub fn cut_note(&self, path: &Path) -> Option<String> {
        (self.skipped > 0).then(|| {
            format!(
                "{}: read only the last {} of {} (earlier lines ignored)",
                path.display(),
                human(self.file_len - self.skipped),
                human(self.file_len)
            )
        })
    }
}

fn human(n: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    let f = n as f64;
    if f >= GIB {
        format!("{:.1} GiB", f / GIB)
    } else if f >= MIB {
        format!("{:.1} MiB", f / MIB)
    } else {
        format!("{n} bytes")
    }
}

/// Read at most the last `max` bytes of the regular file `path`.
///
/// Errors: it does not exist or cannot be read (the message names the file), it is not a regular
/// file (FIFO, device, socket, folder: those could block forever or never end; the caller names the
/// file in its context), or it is not text ([`check_text`]).
pub fn read_tail(path: &Path, max: u64) -> anyhow::Result<TailText> {
    let mut f = open_input(path)?;
    check_text(&head_of(&mut f)?)?;
    let file_len = f.metadata().context("cannot read")?.len();
    let start = file_len.saturating_sub(max);
    if start > 0 {
        f.seek(SeekFrom::Start(start)).context("cannot seek")?;
    }
    let mut bytes = Vec::with_capacity((file_len - start) as usize);
    // `take`: the file may grow while we read it.
    f.take(max).read_to_end(&mut bytes).context("cannot read")?;
    if start > 0 {
        // Drop the partial line the cut landed in.
        let n = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..n);
    }
    Ok(TailText {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        file_len,
        skipped: start,
    })
}

/// Read the whole regular file `path`, refusing it when it is larger than `max` bytes (a VM config
/// or an lspci paste is a few KiB; one that large is not one).
///
/// Errors: it does not exist or cannot be read, it is not a regular file, it is larger than
/// `max` (the message gives both sizes), or it is not text ([`check_text`]).
pub fn read_capped(path: &Path, max: u64) -> anyhow::Result<String> {
    let mut f = open_input(path)?;
    let meta = f.metadata().context("cannot read")?;
    if meta.len() > max {
        anyhow::bail!(
            "{} is larger than the {} limit for this input; not read",
            human(meta.len()),
            human(max)
        );
    }
    check_text(&head_of(&mut f)?)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // `take`: the file may grow while we read it.
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .context("cannot read")?;
    if bytes.len() as u64 > max {
        anyhow::bail!(
            "grew past the {} limit while it was read; not read",
            human(max)
        );
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Open an input for reading when it is a regular file (checked before the open, which is
/// non-blocking, and again on the descriptor: `fsutil::open_regular`).
///
/// Errors: `not a regular file (a FIFO); save it to a file first`, or why it cannot be opened.
fn open_input(path: &Path) -> anyhow::Result<std::fs::File> {
    let meta = fs_err::metadata(path)?;
    if !meta.is_file() {
        anyhow::bail!(
            "not a regular file ({}); save it to a file first",
            crate::fsutil::file_kind(&meta)
        );
    }
    let (f, _) = crate::fsutil::open_regular(path)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_check_refuses_nul_bytes_and_elf_and_takes_text() {
        assert!(check_text(b"[ 1.0] amdgpu 0000:03:00.0: ok\n").is_ok());
        assert!(check_text("unicode ± é\n".as_bytes()).is_ok());
        let e = check_text(b"\x7fELF\x02\x01\x01").unwrap_err().to_string();
        assert!(e.contains("ELF"), "{e}");
        let e = check_text(b"text\0more").unwrap_err().to_string();
        assert!(e.contains("offset 4"), "{e}");
        // A NUL after the probe window does not count (a log with a later NUL is still text).
        let mut late = vec![b'a'; TEXT_PROBE_BYTES];
        late.push(0);
        assert!(check_text(&late).is_ok());
    }
}
