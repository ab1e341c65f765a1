//! Reading files rcclfix did not write itself, or state it keeps but does not trust: only a
//! regular file (never a FIFO, socket, device or folder, so a read never blocks and `/dev/zero` is
//! refused), of a bounded size, each refusal one line naming the path. Re-exported by
//! [`crate::fsutil`]; every input, state file under `$RCCLFIX_HOME` and file of the live build
//! folder is read through here.

use std::path::Path;

/// What kind of file `meta` describes, for messages: `a folder`, `a FIFO`, `a character device`, …
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

/// Open `path` for reading only if it is a regular file (symbolic links followed), and return it
/// with its metadata. It is checked with `stat` before the open, opened with `O_NONBLOCK`, so a
/// FIFO swapped in meanwhile cannot block the open, and checked again with `fstat` on the open
/// descriptor, so what is read is what was checked;
/// `O_NONBLOCK` has no effect on reads of a regular file.
///
/// Errors (one line naming the path): it does not exist or cannot be opened; it is a folder, FIFO,
/// socket or device (`PATH: not a regular file (a FIFO)`).
pub fn open_regular(path: &Path) -> anyhow::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    // Refuse a special file before any open (opening a device can have effects of its own).
    let pre = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if !pre.is_file() {
        anyhow::bail!(
            "{}: not a regular file ({})",
            path.display(),
            file_kind(&pre)
        );
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let meta = f
        .metadata()
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        anyhow::bail!(
            "{}: not a regular file ({})",
            path.display(),
            file_kind(&meta)
        );
    }
    Ok((f, meta))
}

/// Check without opening it that `path` is a regular file (symbolic links followed), for paths
/// another process opens (the library `verify` hands to its child).
///
/// Errors: as [`open_regular`]; `PATH: no such file` when it does not exist.
pub fn require_regular(path: &Path) -> anyhow::Result<std::fs::Metadata> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(m),
        Ok(m) => anyhow::bail!("{}: not a regular file ({})", path.display(), file_kind(&m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("{}: no such file", path.display())
        }
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
}

/// Read the whole regular file `path` ([`open_regular`]: never a FIFO or device) as text, refusing
/// one larger than `max` bytes (`what` names the kind of input in that message). Invalid UTF-8 is
/// an error.
///
/// Errors (one line naming the file): as [`open_regular`]; larger than `max`
/// (`PATH: 3000000 bytes, more than the 1048576-byte limit for a recipe`); not UTF-8.
pub fn read_text_capped(path: &Path, max: u64, what: &str) -> anyhow::Result<String> {
    let bytes = read_capped(path, max, what)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Read the whole regular file `path` ([`open_regular`]: never a FIFO or device, so a read never
/// blocks and `/dev/zero` is refused) as bytes, refusing one larger than `max` bytes (`what` names
/// the kind of file in that message); a file that grows past `max` while read is refused too.
///
/// Errors (one line naming the file): as [`read_text_capped`], without the UTF-8 check.
pub fn read_capped(path: &Path, max: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let (f, meta) = open_regular(path)?;
    let too_big = |n: u64| {
        anyhow::anyhow!(
            "{}: {n} bytes, more than the {max}-byte limit for {what}",
            path.display()
        )
    };
    if meta.len() > max {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Read a state file rcclfix keeps for itself (timing records and load traces under
/// `RCCLFIX_HOME/records`, toolchain stamps, manifests) through [`read_capped`]: `Ok(None)` when
/// nothing is at `path` (not even a dangling link), the bytes when it is a regular file of at
/// most `max` bytes. Callers ignore a bad one with a warning carrying the error.
///
/// Errors (one line naming the file): a FIFO, socket, device or folder (never opened, so never a
/// hang), a link that leads nowhere or to one of those, more than `max` bytes, a read error.
pub fn read_state(path: &Path, max: u64, what: &str) -> anyhow::Result<Option<Vec<u8>>> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => read_capped(path, max, what).map(Some),
    }
}

/// Open a file another process is appending to (ninja's live `.ninja_log`) for reading, without
/// following a symbolic link at its last component, without blocking on a FIFO, and only when it
/// is a regular file (checked on the open descriptor).
///
/// Errors: it does not exist, is a link, or is not a regular file.
pub fn open_regular_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(f)
}
