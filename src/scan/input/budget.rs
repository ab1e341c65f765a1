//! Archive members too large to hold in memory ([`Settings::memory_budget`]): what reads one
//! again from its start ([`Reopen`]), the unnamed file one may be decompressed into once and
//! mapped ([`spill`]), and the records for one that cannot be read within the budget
//! ([`over_budget`]) or that holds another size than it claims ([`size_lie`]). The archive
//! readers, the sparse-member rebuild and the streamed readers share them.

use std::io::{self, Read};

use super::io_unreadable;
use crate::scan::model::FileReport;
use crate::scan::Settings;

/// Reads a streamed member again from its start (the second and third passes over a member too
/// large to hold).
pub(super) trait Reopen {
    /// The member from its first byte.
    fn reopen(&mut self) -> io::Result<Box<dyn Read + '_>>;
}

/// What [`spill`] did with a member too large to hold.
pub(super) enum Spill {
    /// The member, exactly its claimed size, decompressed into an unnamed file and mapped.
    Mapped(memmap2::Mmap),
    /// The member held this many bytes, not the claimed size (at most one byte past it is read).
    Short(u64),
    /// Decompressing the member failed: it is unreadable, as when it is held in memory.
    ReadFailed(io::Error),
    /// Nothing was read: no spill folder, or too little space in it.
    NotSpilled,
    /// Writing the spill failed after part of the member was read; it must be read again from
    /// its start.
    WriteFailed,
}

/// Decompress a compressed archive member of `size` bytes, of which `head` was already read from
/// `rest`, once into an unnamed file in [`Settings::spill_dir`] and map it, so that the passes a
/// host ELF needs (section headers, section names, `.hip_fatbin`) read the map rather than decode
/// the archive again from its start: streamed, a 370 MB library in Debian's
/// `librccl1_7.2.4-1~exp3_amd64.deb` (`data.tar.xz`) was decoded about three times.
///
/// The spill is used only when its file system has twice `size` free, so a member that claims
/// more than the disk holds (a decompression bomb) is streamed as before, and at most one byte
/// past the claim is ever written.
pub(super) fn spill(head: &[u8], rest: &mut dyn Read, size: u64, opts: &Settings) -> Spill {
    let Some(dir) = &opts.spill_dir else {
        return Spill::NotSpilled;
    };
    match crate::fsutil::free_bytes(dir) {
        Ok(free) if size.saturating_mul(2) <= free => {}
        _ => return Spill::NotSpilled,
    }
    let Ok(mut file) = crate::fsutil::unnamed_temp_in(dir) else {
        return Spill::NotSpilled;
    };
    if io::Write::write_all(&mut file, head).is_err() {
        return Spill::NotSpilled;
    }
    let mut got = head.len() as u64;
    let mut r = rest.take((size + 1).saturating_sub(got));
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Spill::ReadFailed(e),
        };
        if io::Write::write_all(&mut file, &buf[..k]).is_err() {
            return Spill::WriteFailed;
        }
        got += k as u64;
    }
    if got != size {
        return Spill::Short(got);
    }
    match crate::fsutil::map_readonly(&file) {
        Ok(map) => Spill::Mapped(map),
        Err(_) => Spill::WriteFailed,
    }
}

/// The record for a member that claims `claimed` bytes but holds `got`, more or fewer.
pub(super) fn size_lie(mname: &str, what: &str, claimed: u64, got: u64) -> FileReport {
    io_unreadable(
        mname,
        "truncated",
        format!(
            "{what} claims {claimed} bytes but holds {}{}",
            if got > claimed { "more than " } else { "" },
            got.min(claimed)
        ),
    )
}

/// The record for a member of `size` bytes over the memory budget that cannot be streamed.
pub(super) fn over_budget(mname: &str, what: &str, size: u64, opts: &Settings) -> FileReport {
    io_unreadable(
        mname,
        "too-large",
        format!(
            "{what}: {size} bytes, more than the {}-byte memory budget, and this kind of member cannot be streamed; raise it with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET",
            opts.memory_budget
        ),
    )
}
