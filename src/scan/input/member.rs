//! Archive members too large to hold ([`crate::scan::Settings::memory_budget`]): decompressed once
//! into an unnamed temporary file and mapped ([`spill`], when the spill folder has room), or else
//! streamed: a raw bundle or CCOB in one pass, a host ELF in a few ([`super::stream_elf`]), each
//! reopened through [`super::archive::Reopen`]. Nothing is extracted to a named file.

use std::io::{self, Read};

use super::archive::{over_budget, size_lie, Reopen};
use super::{io_unreadable, kpack_file, new_file, scan_buffer, too_deep, Format, MAX_DEPTH};
use crate::scan::model::{FileReport, Unreadable};
use crate::scan::stream::{self, Stream};
use crate::scan::walk::{self, Part};
use crate::scan::Settings;

/// Scan a member of `size` bytes that is too large to hold: `first` reads it once from its start
/// (bytes already sniffed included; `None`: `again` opens it for the first pass too), `again`
/// reads it again. A bare code object is held (it is
/// the code object); a raw bundle or CCOB file is streamed in one pass; a host ELF in a few, as
/// the runtime finds its device code ([`super::stream_elf::stream_elf`]). Nested archives are
/// not streamed (unknown, naming the budget).
#[allow(clippy::too_many_arguments)]
pub(super) fn stream_member(
    mname: &str,
    what: &str,
    fmt: Format,
    size: u64,
    first: Option<&mut dyn Read>,
    again: &mut dyn Reopen,
    depth: u32,
    opts: &Settings,
) -> Vec<FileReport> {
    let mut files = Vec::new();
    if fmt == Format::HostElf {
        files.extend(super::stream_elf::stream_elf(
            mname, what, size, first, again, opts,
        ));
        return files;
    }
    let mut own;
    let first: &mut dyn Read = match first {
        Some(r) => r,
        None => match again.reopen() {
            Ok(r) => {
                own = r;
                &mut own
            }
            Err(e) => {
                files.push(io_unreadable(mname, "io", format!("{what}: {e}")));
                return files;
            }
        },
    };
    match fmt {
        Format::CodeObject => {
            if size > opts.max_code_object {
                files.push(io_unreadable(
                    mname,
                    "too-large",
                    walk::too_large(what, size, opts.max_code_object),
                ));
                return files;
            }
            let mut s = Stream::new(first);
            let mut body = Vec::new();
            match s.read_to(&mut body, size + 1) {
                Ok(n) if n == size => {
                    if let Err(e) = scan_buffer(mname, &body, false, depth + 1, &mut files, opts) {
                        files.push(io_unreadable(mname, "io", format!("{e:#}")));
                    }
                }
                Ok(n) => files.push(size_lie(mname, what, size, n)),
                Err(e) => files.push(io_unreadable(mname, "io", format!("{what}: {e}"))),
            }
        }
        Format::Bundle | Format::Ccob => {
            let mut f = new_file(
                mname,
                if fmt == Format::Bundle {
                    "bundle"
                } else {
                    "ccob"
                },
            );
            let mut s = Stream::new(first);
            let mut part = Part::default();
            let r = walk_stream(&mut s, size, 0, &mut part, &mut Vec::new(), opts);
            part.append_to(&mut f);
            if let Err(e) = r {
                f.unreadable.push(stream_failed(what, size, s.pos(), e));
            } else if let Some(u) = rest_of(&mut s, what, size) {
                f.unreadable.push(u);
            }
            files.push(f);
        }
        Format::Kpack => files.push(kpack_file(mname)),
        _ if depth + 1 >= MAX_DEPTH => files.push(too_deep(mname)),
        _ => files.push(over_budget(mname, what, size, opts)),
    }
    files
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

/// The record for a stream that failed or ended at `pos` of a member claiming `size` bytes.
fn stream_failed(what: &str, size: u64, pos: u64, e: io::Error) -> Unreadable {
    let reason = if e.kind() == io::ErrorKind::UnexpectedEof || pos < size {
        format!("{what} claims {size} bytes but holds {pos}: {e}")
    } else {
        format!("{what}: cannot read at byte {pos}: {e}")
    };
    Unreadable {
        offset: pos,
        processor: None,
        entry_id: None,
        class: "truncated".into(),
        reason,
    }
}

/// Read a streamed member to its end: `None` when it holds exactly `size` bytes, else the record.
fn rest_of<R: Read>(s: &mut Stream<R>, what: &str, size: u64) -> Option<Unreadable> {
    let at = s.pos();
    match s.skip(size.saturating_sub(at) + 1) {
        Ok(_) if s.pos() == size => None,
        Ok(_) => Some(Unreadable {
            offset: 0,
            processor: None,
            entry_id: None,
            class: "truncated".into(),
            reason: format!(
                "{what} claims {size} bytes but holds {}{}",
                if s.pos() > size { "more than " } else { "" },
                s.pos().min(size)
            ),
        }),
        Err(e) => Some(stream_failed(what, size, s.pos(), e)),
    }
}

/// Walk a streamed `.hip_fatbin` (or raw bundle/CCOB file) of `len` bytes at file offset `base`,
/// as [`walk::locate_fatbin`] does in memory (after a bad bundle the walk goes on at the next
/// aligned magic after what was read). CCOB v1 (whose end only a full decode finds) is not read
/// from a stream.
///
/// Errors: the stream failed or ended early (what was found so far is in `part`).
pub(super) fn walk_stream<R: Read>(
    s: &mut Stream<R>,
    len: u64,
    base: u64,
    part: &mut Part,
    starts: &mut Vec<u64>,
    opts: &Settings,
) -> io::Result<()> {
    let start = s.pos();
    loop {
        let (pos, found) = stream::next(s, start, len)?;
        match found {
            stream::Found::End => return Ok(()),
            stream::Found::Unknown { len } => {
                part.unreadable.push(walk::unknown_data(base + pos, len))
            }
            stream::Found::Plain | stream::Found::Ccob => {
                starts.push(base + pos);
                stream_item(s, found, start, pos, len, base, part, opts)?;
            }
        }
    }
}

/// Read the one bundle or CCOB that a `__hip_fatbin_wrapper` (at file offset `wrapper`) points
/// at, at the stream position (file offset `base`), from a stream of `len` bytes (to the end of
/// the loaded bytes that hold it), as [`walk::locate_pointed`] does in memory.
///
/// Errors: the stream failed or ended early (what was found so far is in `part`).
pub(super) fn stream_pointed<R: Read>(
    s: &mut Stream<R>,
    len: u64,
    base: u64,
    wrapper: u64,
    part: &mut Part,
    opts: &Settings,
) -> io::Result<()> {
    let head = s.peek(crate::scan::bundle::BUNDLE_MAGIC.len())?;
    let found = if head.starts_with(crate::scan::bundle::BUNDLE_MAGIC) {
        stream::Found::Plain
    } else if head.starts_with(crate::scan::bundle::CCOB_MAGIC) {
        stream::Found::Ccob
    } else {
        part.unreadable.push(Unreadable {
            offset: base,
            processor: None,
            entry_id: None,
            class: "wrapper".into(),
            reason: format!("the __hip_fatbin_wrapper at file offset {wrapper} points here, and no offload bundle or CCOB magic is here"),
        });
        return Ok(());
    };
    let start = s.pos();
    stream_item(s, found, start, 0, len, base, part, opts)
}

/// The plain bundle or CCOB (`found`) at relative position `pos` of a stream that began at
/// `start` and holds `len` bytes (file offset `base` at `start`).
#[allow(clippy::too_many_arguments)]
fn stream_item<R: Read>(
    s: &mut Stream<R>,
    found: stream::Found,
    start: u64,
    pos: u64,
    len: u64,
    base: u64,
    part: &mut Part,
    opts: &Settings,
) -> io::Result<()> {
    let at = base + pos;
    match found {
        stream::Found::End | stream::Found::Unknown { .. } => {}
        stream::Found::Plain => {
            let mut got = Vec::new();
            let r = stream::read_bundle(s, len - pos, opts.max_code_object, |e, body| {
                got.push((
                    e.index,
                    stream_record(e, body, at, "plain", None, opts.kernels),
                ));
            });
            got.sort_by_key(|(i, _)| *i);
            push_records(part, got);
            match r {
                Ok(_) => {}
                Err(stream::Fail::Bad(p)) => {
                    part.unreadable.push(p.unreadable(at, None, None));
                    // Go on past the magic even when nothing of the bundle was consumed.
                    if s.pos() == start + pos {
                        s.consume(1);
                    }
                }
                Err(stream::Fail::Io { error, .. }) => return Err(error),
            }
        }
        stream::Found::Ccob => {
            let h = s.peek(32)?.to_vec();
            let header = match crate::scan::ccob::parse_header_in(&h, len - pos) {
                Ok(hd) if hd.total_size.is_some() => hd,
                Ok(hd) => {
                    part.unreadable.push(Unreadable {
                            offset: at,
                            processor: None,
                            entry_id: None,
                            class: "unsupported".into(),
                            reason: format!("CCOB v{} (no total size) inside a member larger than the memory budget is not read; raise it with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET", hd.version),
                        });
                    s.consume(1);
                    return Ok(());
                }
                Err(p) => {
                    part.unreadable.push(p.unreadable(at, None, None));
                    s.consume(1);
                    return Ok(());
                }
            };
            let total = header.total_size.unwrap_or(0);
            let payload_len = total - header.header_len as u64;
            s.consume(header.header_len);
            let label = header.label();
            if let Err(p) = crate::scan::ccob::check_claim(&header, payload_len) {
                part.unreadable.push(p.unreadable(at, None, None));
            } else {
                let payload = io::BufReader::new((&mut *s).take(payload_len));
                let r =
                    crate::scan::ccob::decode_streamed(&header, payload, opts.verify_hash, |ds| {
                        let mut got = Vec::new();
                        stream::read_bundle(
                            ds,
                            header.uncompressed_size,
                            opts.max_code_object,
                            |e, body| {
                                got.push((
                                    e.index,
                                    stream_record(e, body, at, &label, Some(&label), opts.kernels),
                                ));
                            },
                        )?;
                        got.sort_by_key(|(i, _)| *i);
                        Ok(got)
                    });
                match r {
                    Err(p) => part.unreadable.push(p.unreadable(at, None, None)),
                    Ok((Err(p), _)) => part.unreadable.push(Unreadable {
                        offset: at,
                        processor: None,
                        entry_id: None,
                        class: p.class.to_owned(),
                        reason: format!(
                            "{label}: decompressed bundle at +{}: {}",
                            p.offset, p.reason
                        ),
                    }),
                    Ok((Ok(got), _)) => push_records(part, got),
                }
            }
            let done = s.pos() - start - pos;
            if done < total && s.skip(total - done)? < total - done {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended inside a CCOB",
                ));
            }
        }
    }
    Ok(())
}

fn stream_record(
    e: &stream::StreamEntry,
    body: stream::Body<'_>,
    at: u64,
    container: &str,
    inner: Option<&str>,
    detail: crate::scan::meta::Detail,
) -> Option<Result<crate::scan::model::ImageReport, Unreadable>> {
    walk::entry_or_too_large(e, body, at, container, inner, detail)
}

fn push_records(
    part: &mut Part,
    got: Vec<(
        usize,
        Option<Result<crate::scan::model::ImageReport, Unreadable>>,
    )>,
) {
    for (_, r) in got {
        match r {
            Some(Ok(i)) => part.images.push(i),
            Some(Err(u)) => part.unreadable.push(u),
            None => {}
        }
    }
}
