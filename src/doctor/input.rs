//! Bounded reading of user-supplied text inputs (`--dmesg`, `--log`, `--vm-config`, `--lspci`).
//!
//! Only regular files are read (a FIFO, a character device such as `/dev/zero`, a socket or a
//! folder is refused with one line naming it). Logs are read from the end ([`read_tail`]: their
//! last [`MAX_INPUT_BYTES`]; kernel logs and runtime logs keep the interesting lines at the end);
//! inputs that are only meaningful whole (a VM config, pasted `lspci` text) are refused above that
//! size ([`read_capped`]). Memory stays bounded whatever the file size. The live kernel log
//! (`dmesg`/`journalctl` output) does not pass through here.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::Context;

/// The most bytes read from one input file: its last 64 MiB.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

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
/// Errors: it does not exist or cannot be read (the message names the file), or it is not a regular
/// file (FIFO, device, socket, folder: those could block forever or never end; the caller names the
/// file in its context).
pub fn read_tail(path: &Path, max: u64) -> anyhow::Result<TailText> {
    let meta = fs_err::metadata(path)?;
    if !meta.is_file() {
        anyhow::bail!(
            "not a regular file ({}); save it to a file first",
            crate::fsutil::file_kind(&meta)
        );
    }
    let mut f = fs_err::File::open(path)?;
    let file_len = meta.len();
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
/// Errors: it does not exist or cannot be read, it is not a regular file, or it is larger than
/// `max` (the message gives both sizes).
pub fn read_capped(path: &Path, max: u64) -> anyhow::Result<String> {
    let meta = fs_err::metadata(path)?;
    if !meta.is_file() {
        anyhow::bail!(
            "not a regular file ({}); save it to a file first",
            crate::fsutil::file_kind(&meta)
        );
    }
    if meta.len() > max {
        anyhow::bail!(
            "{} is larger than the {} limit for this input; not read",
            human(meta.len()),
            human(max)
        );
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // `take`: the file may grow while we read it.
    fs_err::File::open(path)?
        .take(max + 1)
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
