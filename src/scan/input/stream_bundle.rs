//! Offload bundles and CCOBs read from a stream rather than from memory, as [`walk`] reads them
//! in memory: a whole `.hip_fatbin` or raw bundle/CCOB member ([`walk_stream`]), or the one
//! bundle a `__hip_fatbin_wrapper` points at ([`stream_pointed`]), each image's record as the
//! in-memory walk gives it. Both streamed readers, of a bundle member and of a host ELF member,
//! use it.

use std::io::{self, Read};

use crate::scan::model::Unreadable;
use crate::scan::stream::{self, Stream};
use crate::scan::walk::{self, Part};
use crate::scan::Settings;

/// The record for a stream that failed or ended at `pos` of a member claiming `size` bytes.
pub(super) fn stream_failed(what: &str, size: u64, pos: u64, e: io::Error) -> Unreadable {
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
pub(super) fn rest_of<R: Read>(s: &mut Stream<R>, what: &str, size: u64) -> Option<Unreadable> {
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
                    walk::entry_or_too_large(e, body, at, "plain", None, opts.kernels),
                ));
            });
            got.sort_by_key(|(i, _)| *i);
            part.push_records(got);
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
            if let Err(p) = crate::scan::ccob::check_claim(&header, payload_len) {
                part.unreadable.push(p.unreadable(at, None, None));
            } else {
                let payload = io::BufReader::new((&mut *s).take(payload_len));
                walk::ccob_bundle_into(part, &header, payload, at, opts.verify_hash, opts);
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
