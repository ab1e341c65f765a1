//! Archive members too large to hold ([`crate::scan::Settings::memory_budget`]): decompressed once
//! into an unnamed temporary file and mapped ([`spill`], when the spill folder has room), or else
//! streamed: a raw bundle or CCOB in one pass, a host ELF in up to three (section headers; section
//! names; the device-code sections), each reopened through [`super::archive::Reopen`]. Nothing is
//! extracted to a named file.

use std::io::{self, Read};

use super::archive::{over_budget, size_lie, Reopen};
use super::{
    io_unreadable, kpack_file, new_file, scan_buffer, too_deep, Format, MAX_DEPTH, MAX_ELF_TABLE,
};
use crate::scan::model::{FileReport, Unreadable};
use crate::scan::stream::{self, Stream};
use crate::scan::walk::{self, Part};
use crate::scan::Settings;

/// Scan a member of `size` bytes that is too large to hold: `first` reads it once from its start
/// (bytes already sniffed included; `None`: `again` opens it for the first pass too), `again`
/// reads it again. A bare code object is held (it is
/// the code object); a raw bundle or CCOB file is streamed in one pass; a host ELF in up to three
/// (section headers; section names; the device-code sections, `.hip_fatbin` streamed). Nested
/// archives are not streamed (unknown, naming the budget).
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
        files.extend(stream_elf(mname, what, size, first, again, opts));
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
            let r = walk_stream(&mut s, size, 0, &mut part, opts);
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
fn walk_stream<R: Read>(
    s: &mut Stream<R>,
    len: u64,
    base: u64,
    part: &mut Part,
    opts: &Settings,
) -> io::Result<()> {
    let start = s.pos();
    loop {
        let (pos, found) = stream::next(s, start, len)?;
        let at = base + pos;
        match found {
            stream::Found::End => return Ok(()),
            stream::Found::Unknown { len } => part.unreadable.push(walk::unknown_data(at, len)),
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
                        continue;
                    }
                    Err(p) => {
                        part.unreadable.push(p.unreadable(at, None, None));
                        s.consume(1);
                        continue;
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
                    let r = crate::scan::ccob::decode_streamed(
                        &header,
                        payload,
                        opts.verify_hash,
                        |ds| {
                            let mut got = Vec::new();
                            stream::read_bundle(
                                ds,
                                header.uncompressed_size,
                                opts.max_code_object,
                                |e, body| {
                                    got.push((
                                        e.index,
                                        stream_record(
                                            e,
                                            body,
                                            at,
                                            &label,
                                            Some(&label),
                                            opts.kernels,
                                        ),
                                    ));
                                },
                            )?;
                            got.sort_by_key(|(i, _)| *i);
                            Ok(got)
                        },
                    );
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
    }
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

/// One section header of a streamed ELF.
#[derive(Debug, Clone)]
struct Shdr {
    name: u32,
    ty: u32,
    offset: u64,
    size: u64,
}

/// A host ELF member too large to hold: pass 1 reads the ELF header and the section header table
/// (and the whole member, to check its size); pass 2 the section names; pass 3 the device-code
/// sections in file order (`.hip_fatbin` streamed, the rest held). `None`: no device code.
fn stream_elf(
    mname: &str,
    what: &str,
    size: u64,
    first: Option<&mut dyn Read>,
    again: &mut dyn Reopen,
    opts: &Settings,
) -> Option<FileReport> {
    let mut f = new_file(mname, "host-elf");
    let fail = |mut f: FileReport, u: Unreadable| {
        f.unreadable.push(u);
        Some(f)
    };
    let bad = |offset: u64, class: &str, reason: String| Unreadable {
        offset,
        processor: None,
        entry_id: None,
        class: class.into(),
        reason: format!("{what}: {reason}"),
    };
    // Pass 1.
    // The ELF header, the section header table's offset, and the table.
    type Pass1 = Option<(Vec<u8>, u64, Vec<u8>)>;
    let pass1 = |r: &mut dyn Read| -> Result<Pass1, Unreadable> {
        let mut s = Stream::new(r);
        let hdr = match s.peek(64) {
            Ok(h) if h.len() == 64 => h.to_vec(),
            Ok(h) => {
                let n = h.len() as u64;
                return Err(stream_failed(
                    what,
                    size,
                    n,
                    io::ErrorKind::UnexpectedEof.into(),
                ));
            }
            Err(e) => return Err(stream_failed(what, size, 0, e)),
        };
        if hdr[4] != 2 || hdr[5] != 1 {
            return Err(bad(4, "unsupported", "a host ELF larger than the memory budget is read only when it is 64-bit little-endian".into()));
        }
        let u16_at = |o: usize| u16::from_le_bytes([hdr[o], hdr[o + 1]]) as u64;
        let shoff = u64::from_le_bytes(hdr[0x28..0x30].try_into().unwrap());
        let (shentsize, shnum) = (u16_at(0x3a), u16_at(0x3c));
        if shnum == 0 || shoff == 0 {
            return Ok(None);
        }
        let table = shnum * 64;
        if shentsize != 64 || table > MAX_ELF_TABLE || shoff.checked_add(table).ends_past(size) {
            return Err(bad(0x28, "bad-elf", format!("section header table ({shnum} entries of {shentsize} bytes at {shoff}) does not fit the {size}-byte member")));
        }
        let mut raw = Vec::new();
        let read = (|| -> io::Result<u64> {
            let k = s.skip(shoff)?;
            if k < shoff {
                return Ok(k);
            }
            s.read_to(&mut raw, table)?;
            Ok(s.pos())
        })();
        match read {
            Ok(p) if p == shoff + table => {}
            Ok(p) => {
                return Err(stream_failed(
                    what,
                    size,
                    p,
                    io::ErrorKind::UnexpectedEof.into(),
                ))
            }
            Err(e) => return Err(stream_failed(what, size, s.pos(), e)),
        }
        if let Some(u) = rest_of(&mut s, what, size) {
            return Err(u);
        }
        Ok(Some((hdr, shoff, raw)))
    };
    let p1 = match first {
        Some(r) => pass1(r),
        None => match again.reopen() {
            Ok(mut r) => pass1(&mut r),
            Err(e) => Err(stream_failed(what, size, 0, e)),
        },
    };
    let (hdr, shoff, raw) = match p1 {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(u) => return fail(f, u),
    };
    let shnum = raw.len() as u64 / 64;
    let shstrndx = u16::from_le_bytes([hdr[0x3e], hdr[0x3f]]) as u64;
    let shdrs: Vec<Shdr> = raw
        .chunks_exact(64)
        .map(|r| Shdr {
            name: u32::from_le_bytes(r[0..4].try_into().unwrap()),
            ty: u32::from_le_bytes(r[4..8].try_into().unwrap()),
            offset: u64::from_le_bytes(r[24..32].try_into().unwrap()),
            size: u64::from_le_bytes(r[32..40].try_into().unwrap()),
        })
        .collect();
    let Some(strtab) = shdrs.get(shstrndx as usize).cloned() else {
        return fail(
            f,
            bad(
                0x3e,
                "bad-elf",
                format!("section name table index {shstrndx} is past the {shnum} sections"),
            ),
        );
    };
    if strtab.size > MAX_ELF_TABLE || strtab.offset.checked_add(strtab.size).ends_past(size) {
        return fail(f, bad(shoff, "bad-elf", format!("section name table ({} bytes at {}) does not fit the member or exceeds {MAX_ELF_TABLE} bytes", strtab.size, strtab.offset)));
    }
    // Pass 2: the names.
    let names = match read_range(again, strtab.offset, strtab.size) {
        Ok(n) => n,
        Err(e) => return fail(f, stream_failed(what, size, strtab.offset, e)),
    };
    let name_of = |sh: &Shdr| -> &[u8] {
        let s = names.get(sh.name as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    };
    const NOBITS: u32 = 8;
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        Fatbin,
        Wrappers,
        Rdc,
    }
    let mut wanted: Vec<(Want, Shdr, String)> = Vec::new();
    let mut nobits_fatbin = None;
    let mut kpack_ref = None;
    for sh in &shdrs {
        let n = name_of(sh);
        match n {
            b".hip_fatbin" | b".hip_fat" if sh.ty == NOBITS => nobits_fatbin = Some(sh.offset),
            b".hip_fatbin" | b".hip_fat" => wanted.push((Want::Fatbin, sh.clone(), String::new())),
            b".hipFatBinSegment" | b".hipFatB" if sh.ty != NOBITS => {
                wanted.push((Want::Wrappers, sh.clone(), String::new()))
            }
            b".rocm_kpack_ref" | b".kpackrf" => kpack_ref = Some(sh.offset),
            n if n.starts_with(crate::scan::elf::RDC_PREFIX.as_bytes()) => {
                if let Ok(id) = std::str::from_utf8(&n[crate::scan::elf::RDC_PREFIX.len()..]) {
                    wanted.push((Want::Rdc, sh.clone(), id.to_owned()));
                }
            }
            _ => {}
        }
    }
    if wanted.is_empty() && nobits_fatbin.is_none() && kpack_ref.is_none() {
        return None;
    }
    for (_, sh, _) in &wanted {
        if sh.ty == NOBITS {
            continue;
        }
        if sh.offset.checked_add(sh.size).ends_past(size) {
            return fail(
                f,
                Unreadable {
                    offset: sh.offset,
                    processor: None,
                    entry_id: None,
                    class: "truncated".into(),
                    reason: format!(
                        "{what}: section {} ({} bytes at {}) runs past the end of the member",
                        String::from_utf8_lossy(name_of(sh)),
                        sh.size,
                        sh.offset
                    ),
                },
            );
        }
    }
    // Pass 3: the device-code sections in file order.
    wanted.sort_by_key(|(_, sh, _)| sh.offset);
    let mut wrappers = Vec::new();
    let mut fatbin = Part::default();
    let mut rdc = Part::default();
    let mut has_fatbin = false;
    let mut r = match again.reopen() {
        Ok(r) => Stream::new(r),
        Err(e) => return fail(f, stream_failed(what, size, 0, e)),
    };
    for (want, sh, id) in &wanted {
        if sh.ty == NOBITS && *want != Want::Fatbin {
            continue;
        }
        let at = r.pos();
        if sh.offset < at {
            rdc.unreadable.push(bad(
                sh.offset,
                "unsupported",
                format!(
                    "section {} at {} overlaps the section before it; not read from a stream",
                    String::from_utf8_lossy(name_of(sh)),
                    sh.offset
                ),
            ));
            continue;
        }
        if let Err(e) = r.skip(sh.offset - at) {
            return fail(f, stream_failed(what, size, r.pos(), e));
        }
        match want {
            Want::Fatbin => {
                has_fatbin = true;
                let mut sec = Stream::new((&mut r).take(sh.size));
                if let Err(e) = walk_stream(&mut sec, sh.size, sh.offset, &mut fatbin, opts) {
                    return fail(f, stream_failed(what, size, sh.offset + sec.pos(), e));
                }
                let done = sec.pos();
                drop(sec);
                if let Err(e) = r.skip(sh.size - done.min(sh.size)) {
                    return fail(f, stream_failed(what, size, r.pos(), e));
                }
            }
            Want::Wrappers => {
                let mut b = Vec::new();
                if sh.size > MAX_ELF_TABLE {
                    continue;
                }
                if let Err(e) = r.read_to(&mut b, sh.size) {
                    return fail(f, stream_failed(what, size, r.pos(), e));
                }
                for (i, w) in b.chunks_exact(24).enumerate() {
                    wrappers.push((
                        sh.offset + 24 * i as u64,
                        u32::from_le_bytes(w[..4].try_into().unwrap()),
                    ));
                }
            }
            Want::Rdc => {
                if sh.size > opts.max_code_object {
                    rdc.unreadable.push(Unreadable {
                        offset: sh.offset,
                        processor: Some(
                            crate::scan::bundle::EntryId::parse(id)
                                .processor()
                                .to_owned(),
                        )
                        .filter(|p| !p.is_empty()),
                        entry_id: Some(id.clone()),
                        class: "too-large".into(),
                        reason: walk::too_large(
                            &format!("{what}: section __CLANG_OFFLOAD_BUNDLE__{id}"),
                            sh.size,
                            opts.max_code_object,
                        ),
                    });
                    if let Err(e) = r.skip(sh.size) {
                        return fail(f, stream_failed(what, size, r.pos(), e));
                    }
                    continue;
                }
                let mut b = Vec::new();
                if let Err(e) = r.read_to(&mut b, sh.size) {
                    return fail(f, stream_failed(what, size, r.pos(), e));
                }
                let p = walk::rdc_section(id, sh.offset, &b, opts.kernels);
                rdc.images.extend(p.images);
                rdc.unreadable.extend(p.unreadable);
            }
        }
    }
    let h = crate::scan::elf::HostElf {
        fatbin: None,
        fatbin_nobits: nobits_fatbin,
        wrappers,
        kpack_ref,
        rdc: Vec::new(),
    };
    if let Some(u) = walk::kpack_record(&h) {
        f.unreadable.push(u);
    }
    if !has_fatbin && wanted.iter().any(|(w, _, _)| *w == Want::Rdc) {
        f.kind = "rdc-object".into();
    }
    fatbin.append_to(&mut f);
    rdc.append_to(&mut f);
    Some(f)
}

/// Read `len` bytes at `offset` of a member opened again.
fn read_range(again: &mut dyn Reopen, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut s = Stream::new(again.reopen()?);
    let mut out = Vec::new();
    if s.skip(offset)? < offset || s.read_to(&mut out, len)? < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the member ended early when read again",
        ));
    }
    Ok(out)
}

/// `checked_add(..)` results: whether the range overflowed or ends past `limit`.
trait EndsPast {
    fn ends_past(&self, limit: u64) -> bool;
}

impl EndsPast for Option<u64> {
    fn ends_past(&self, limit: u64) -> bool {
        !matches!(self, Some(e) if *e <= limit)
    }
}
