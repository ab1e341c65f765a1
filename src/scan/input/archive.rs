//! Archives, member by member: `ar` (.deb, .a), zip (.whl) and tar, uncompressed or gzip, xz or
//! zstd. Members are sniffed by their first bytes and scanned through [`super::scan_buffer`];
//! members over the memory budget are spilled to a mapped file ([`super::budget`]) or go to
//! [`super::member`]. An archive that was not read to its end is an unreadable record, never "no
//! device code". Source: ar(5), deb(5), POSIX ustar, PKWARE APPNOTE, PEP 427.

use std::io::{self, Read};

use anyhow::Context;

use super::budget::{over_budget, size_lie, spill, Reopen, Spill};
use super::member::stream_member;
use super::sparse::{self, pax_records, Body, Member, Pax};
use super::{io_unreadable, new_file, read_up_to, scan_buffer, sniff, Format, MAX_RESERVE};
use crate::scan::model::{FileReport, Unreadable};
use crate::scan::Settings;

pub(super) fn member_name(archive: &str, member: &str) -> String {
    format!("{archive}!{}", member.trim_start_matches("./"))
}

/// Whether an `ar` archive named `name` whose first member is `first` is a Debian package: a
/// `.deb` (`.udeb`, `.ddeb`) name, or `debian-binary` first (deb(5)).
fn is_deb(name: &str, first: Option<&str>) -> bool {
    let n = name.rsplit('!').next().unwrap_or(name).to_ascii_lowercase();
    first == Some("debian-binary") || [".deb", ".udeb", ".ddeb"].iter().any(|e| n.ends_with(e))
}

/// A Debian package's `data.tar[.gz|.xz|.zst]` member (deb(5)), which holds every file the
/// package installs: it must read as a tar archive to its end. Anything else (another
/// compression, not a tar, a stream that cannot be decompressed) is an unreadable record, never
/// "no device code".
fn scan_deb_data(
    mname: &str,
    body: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) {
    match sniff(body) {
        Some(Format::Tar | Format::Gzip | Format::Xz | Format::Zstd) => {
            if let Err(e) = scan_buffer(mname, body, true, depth, files, opts) {
                files.push(io_unreadable(
                    mname,
                    "decompress",
                    format!("the package's data archive cannot be read: {e:#}"),
                ));
            }
        }
        _ => files.push(io_unreadable(
            mname,
            "unsupported",
            format!(
                "the package's data archive is not a tar archive (uncompressed, gzip, xz or zstd; first bytes {}); its files were not read",
                hex_head(body)
            ),
        )),
    }
}

/// The first (up to) 8 bytes of `b` in hex, for messages.
fn hex_head(b: &[u8]) -> String {
    b.iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `ar` archives (.deb, .a), parsed in place. GNU (`//` long-name table, `/N`) and BSD (`#1/N`)
/// long names are understood. An archive that ends inside a member header is truncated
/// (unknown), never a clean end. A Debian package ([`is_deb`]) must hold a `data.tar*` member
/// that reads completely ([`scan_deb_data`]); one without (cut to its magic, or holding only
/// `debian-binary`) is unreadable, not a package without device code.
pub(super) fn scan_ar(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut pos = 8usize;
    let mut long_names: &[u8] = &[];
    let mut first: Option<String> = None;
    let mut saw_data = false;
    while pos < data.len() {
        if pos + 60 > data.len() {
            let mut f = new_file(name, "ar");
            f.unreadable.push(Unreadable {
                offset: pos as u64,
                processor: None,
                entry_id: None,
                class: "truncated".into(),
                reason: format!(
                    "ar member header at offset {pos} is truncated: {} of its 60 bytes present; the archive was cut",
                    data.len() - pos
                ),
            });
            files.push(f);
            return Ok(());
        }
        let h = &data[pos..pos + 60];
        if &h[58..60] != b"`\n" {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("ar member header at offset {pos} has no terminator"),
            ));
            return Ok(());
        }
        let raw_name = std::str::from_utf8(&h[..16]).unwrap_or("").trim_end();
        let size: usize = match std::str::from_utf8(&h[48..58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            Some(s) => s,
            None => {
                files.push(io_unreadable(
                    name,
                    "bad-size",
                    format!("ar member header at offset {pos}: bad size field"),
                ));
                return Ok(());
            }
        };
        let start = pos + 60;
        let Some(end) = start.checked_add(size).filter(|&e| e <= data.len()) else {
            let mut f = new_file(name, "ar");
            f.unreadable.push(Unreadable {
                offset: pos as u64,
                processor: None,
                entry_id: None,
                class: "truncated".into(),
                reason: format!("ar member {raw_name:?} ({size} bytes at {start}) runs past the end of the archive"),
            });
            files.push(f);
            return Ok(());
        };
        let mut body = &data[start..end];
        let mut mname = raw_name.trim_end_matches('/').to_owned();
        if raw_name == "//" {
            long_names = body;
        } else if raw_name == "/" || raw_name == "/SYM64/" {
            // Symbol table.
        } else {
            if let Some(n) = raw_name
                .strip_prefix('/')
                .and_then(|n| n.parse::<usize>().ok())
            {
                if let Some(rest) = long_names.get(n..) {
                    let e = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
                    mname = String::from_utf8_lossy(&rest[..e])
                        .trim_end_matches('/')
                        .to_owned();
                }
            } else if let Some(n) = raw_name
                .strip_prefix("#1/")
                .and_then(|n| n.parse::<usize>().ok())
            {
                if n <= body.len() {
                    mname = String::from_utf8_lossy(&body[..n])
                        .trim_end_matches('\0')
                        .to_owned();
                    body = &body[n..];
                }
            }
            let first = first.get_or_insert_with(|| mname.clone());
            if is_deb(name, Some(first.as_str())) && mname.starts_with("data.tar") {
                saw_data = true;
                scan_deb_data(&member_name(name, &mname), body, depth + 1, files, opts);
            } else {
                scan_buffer(
                    &member_name(name, &mname),
                    body,
                    false,
                    depth + 1,
                    files,
                    opts,
                )
                .with_context(|| format!("{name}: ar member {mname}"))?;
            }
        }
        pos = end + (end & 1);
    }
    if is_deb(name, first.as_deref()) && !saw_data {
        let mut f = new_file(name, "ar");
        f.unreadable.push(Unreadable {
            offset: data.len() as u64,
            processor: None,
            entry_id: None,
            class: "truncated".into(),
            reason: format!(
                "a Debian package without a data.tar member ({}): cut, or not a package; the files it would install were not read",
                match &first {
                    None => "no member at all".to_owned(),
                    Some(f) => format!("first member {f:?}"),
                }
            ),
        });
        files.push(f);
    }
    Ok(())
}

struct ZipAgain<'z, 'a> {
    z: &'z mut zip::ZipArchive<std::io::Cursor<&'a [u8]>>,
    index: usize,
}

impl Reopen for ZipAgain<'_, '_> {
    fn reopen(&mut self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(
            self.z.by_index(self.index).map_err(io::Error::other)?,
        ))
    }
}

/// zip archives (.whl): stored members are parsed in place; deflated ones are inflated into
/// memory when they fit [`Settings::memory_budget`], else streamed. A member that cannot be
/// inflated is an unreadable record. A `.whl` holds at least its `*.dist-info` files (PEP 427):
/// one without any file member (an empty zip) is unreadable, not a wheel without device code.
pub(super) fn scan_zip(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut z = match zip::ZipArchive::new(std::io::Cursor::new(data)) {
        Ok(z) => z,
        Err(e) => {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("zip central directory: {e}"),
            ));
            return Ok(());
        }
    };
    // The zip crate keys members by name, so a second central-directory record of one name
    // replaces the first, and it reads as many records as the end record counts, where Python's
    // `zipfile` (pip) reads the directory by its size. Either way a member that gets installed
    // could go unread: such a zip is ambiguous, and unread.
    if let Some(why) = ambiguous_directory(data, z.central_directory_start(), z.len()) {
        files.push(io_unreadable(
            name,
            "ambiguous",
            format!("zip central directory: {why}; unpackers disagree on which member is the file, so nothing in it was read"),
        ));
        return Ok(());
    }
    let is_wheel = name
        .rsplit('!')
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase()
        .ends_with(".whl");
    if is_wheel && !z.file_names().any(|n| !n.ends_with('/')) {
        files.push(io_unreadable(
            name,
            "truncated",
            format!(
                "a wheel without any file member ({} members): cut, or not a wheel; nothing in it was read",
                z.len()
            ),
        ));
        return Ok(());
    }
    for i in 0..z.len() {
        let mut m = match z.by_index(i) {
            Ok(m) => m,
            Err(e) => {
                files.push(io_unreadable(
                    name,
                    "unsupported",
                    format!("zip member {i}: {e}"),
                ));
                continue;
            }
        };
        // Only folders are skipped: a member whose Unix mode says "symlink" is still written as a
        // regular file of its bytes by pip (`ZipBackedFile.save`, pip's
        // `operations/install/wheel.py`), so its bytes are what gets installed.
        if m.is_dir() || m.size() < 4 {
            continue;
        }
        let mname = member_name(name, m.name());
        if m.compression() == zip::CompressionMethod::Stored {
            let start = m.data_start() as usize;
            if let Some(body) = data.get(start..start.saturating_add(m.compressed_size() as usize))
            {
                scan_buffer(&mname, body, false, depth + 1, files, opts)?;
                continue;
            }
        }
        let mut head = [0u8; 264];
        let n = match read_up_to(&mut m, &mut head) {
            Ok(n) => n,
            Err(e) => {
                files.push(io_unreadable(
                    &mname,
                    "decompress",
                    format!(
                        "zip member at byte {}: cannot inflate: {e}",
                        m.header_start()
                    ),
                ));
                continue;
            }
        };
        let Some(fmt) = sniff(&head[..n]) else {
            continue;
        };
        let at = m.header_start();
        let claimed = m.size();
        let what = format!("zip member at byte {at}");
        if claimed > opts.memory_budget {
            match spill(&head[..n], &mut m, claimed, opts) {
                Spill::Mapped(map) => {
                    drop(m);
                    scan_buffer(&mname, &map, false, depth + 1, files, opts)?;
                    continue;
                }
                Spill::Short(got) => {
                    files.push(size_lie(&mname, &what, claimed, got));
                    continue;
                }
                Spill::ReadFailed(e) => {
                    files.push(io_unreadable(
                        &mname,
                        "decompress",
                        format!("{what}: cannot inflate: {e}"),
                    ));
                    continue;
                }
                // The zip member is reopened from its start either way.
                Spill::NotSpilled | Spill::WriteFailed => {}
            }
            drop(m);
            let mut again = ZipAgain {
                z: &mut z,
                index: i,
            };
            files.extend(stream_member(
                &mname, &what, fmt, claimed, None, &mut again, depth, opts,
            ));
            continue;
        }
        let mut body = Vec::with_capacity(claimed.min(MAX_RESERVE) as usize);
        body.extend_from_slice(&head[..n]);
        // One byte past the claim, so a member longer than its header says is seen.
        let rest = claimed.saturating_sub(n as u64) + 1;
        if let Err(e) = (&mut m).take(rest).read_to_end(&mut body) {
            files.push(io_unreadable(
                &mname,
                "decompress",
                format!("{what}: cannot inflate: {e}"),
            ));
            continue;
        }
        if body.len() as u64 != claimed {
            files.push(size_lie(&mname, &what, claimed, body.len() as u64));
            continue;
        }
        scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
    }
    Ok(())
}

/// Walks the central directory of `data` from `start` record by record (PKWARE APPNOTE 4.3.12:
/// signature `PK\x01\x02`, 46 fixed bytes, then name, extra field and comment, whose lengths
/// are at offsets 28, 30 and 32) and says what makes it ambiguous: a name that two records
/// share, or more records than the `listed` members the zip crate read.
fn ambiguous_directory(data: &[u8], start: u64, listed: usize) -> Option<String> {
    let mut at = usize::try_from(start).ok()?;
    let mut seen = std::collections::HashSet::new();
    let mut records = 0usize;
    // Records of a folder name already seen: a folder holds no bytes, and the zip crate keeps one.
    let mut folders_again = 0usize;
    while let Some(h) = data.get(at..at.checked_add(46)?) {
        if &h[..4] != b"PK\x01\x02" {
            break;
        }
        let len = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]) as usize;
        let (n, m, k) = (len(28), len(30), len(32));
        let name = data.get(at + 46..at + 46 + n)?;
        records += 1;
        if !seen.insert(name) {
            if !name.ends_with(b"/") {
                return Some(format!(
                    "two members are named `{}`",
                    String::from_utf8_lossy(name)
                ));
            }
            folders_again += 1;
        }
        at += 46 + n + m + k;
    }
    (records > listed + folders_again)
        .then(|| format!("it holds {records} records, but its end record counts {listed}"))
}

/// A fresh decoder over a compressed archive held in memory.
fn decoder<'a>(fmt: Format, data: &'a [u8]) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match fmt {
        Format::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Format::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(data)),
        _ => Box::new(zstd::stream::read::Decoder::with_buffer(data)?),
    })
}

/// A compressed stream (gzip, xz, zstd): scanned as a tar archive when its first 512 decompressed
/// bytes are a tar header; otherwise skipped (a compressed changelog in a .deb), or an error when
/// named directly. A stream whose start cannot be decompressed (cut, corrupt) is an unreadable
/// record, named directly or not (it may be a tar of libraries).
pub(super) fn scan_compressed_tar(
    name: &str,
    fmt: Format,
    data: &[u8],
    explicit: bool,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut head = vec![0u8; 512];
    let started = decoder(fmt, data).and_then(|mut r| Ok((read_up_to(&mut r, &mut head)?, r)));
    let (n, r) = match started {
        Ok(s) => s,
        // Named or not: a stream with the format's magic whose start cannot be decompressed is
        // unread, exit 3, as one cut later is (zstd decodes whole blocks, so a cut in its first
        // block fails here where gzip and xz fail further on).
        Err(e) => {
            files.push(io_unreadable(
                name,
                "decompress",
                format!("cannot decompress: {e}"),
            ));
            return Ok(());
        }
    };
    head.truncate(n);
    if head.get(257..262) != Some(b"ustar") {
        if explicit {
            anyhow::bail!("{name}: compressed stream at offset 0 is not a tar archive");
        }
        return Ok(());
    }
    let again = |at: u64| -> io::Result<Box<dyn Read + Send + '_>> {
        let mut r = decoder(fmt, data)?;
        if io::copy(&mut (&mut r).take(at), &mut io::sink())? < at {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream ended before the member",
            ));
        }
        Ok(r)
    };
    let mut r = r;
    let ended = tar_members(
        name,
        std::io::Cursor::new(head).chain(&mut r),
        None,
        Some(&again),
        depth,
        files,
        opts,
    )?;
    // The rest of the stream after the tar's end (padding, the compressor's checksum and index)
    // is read to its end, so a stream cut or corrupt there is not taken as complete.
    if ended {
        if let Err(e) = io::copy(&mut r, &mut io::sink()) {
            files.push(io_unreadable(
                name,
                "decompress",
                format!("the compressed stream after the tar archive's end cannot be read (cut or corrupt): {e}"),
            ));
        }
    }
    Ok(())
}

/// An uncompressed tar archive in memory: members are parsed in place.
pub(super) fn scan_tar(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    tar_members(name, data, Some(data), None, depth, files, opts)?;
    Ok(())
}

type Again<'a> = dyn Fn(u64) -> io::Result<Box<dyn Read + Send + 'a>> + 'a;

struct TarAgain<'f, 'a> {
    again: &'f Again<'a>,
    at: u64,
    size: u64,
}

impl Reopen for TarAgain<'_, '_> {
    fn reopen(&mut self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new((self.again)(self.at)?.take(self.size)))
    }
}

/// The members of a tar stream: each regular member's first bytes are sniffed; a member of a
/// known format is taken in place from `in_place` (an uncompressed archive in memory), read into
/// memory when it fits [`Settings::memory_budget`], or else streamed (`again` reopens the
/// decompressed stream at a position for the later passes).
///
/// The archive must end with its end-of-archive block (a 512-byte zero block after the last
/// member, POSIX `ustar`): a stream that simply stops after a member, as one cut at a block
/// boundary does, is truncated (unknown), never a clean end. Returns whether the archive was read
/// to its end-of-archive block.
fn tar_members<'a>(
    name: &str,
    r: impl Read,
    in_place: Option<&'a [u8]>,
    again: Option<&Again<'a>>,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<bool> {
    /// Counts the bytes the tar reader consumed.
    struct Counting<'c, R> {
        r: R,
        n: &'c std::cell::Cell<u64>,
    }
    impl<R: Read> Read for Counting<'_, R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let k = self.r.read(buf)?;
            self.n.set(self.n.get() + k as u64);
            Ok(k)
        }
    }
    let consumed = std::cell::Cell::new(0u64);
    // Where the block after the last member seen starts.
    let mut members_end = 0u64;
    let mut ar = tar::Archive::new(Counting { r, n: &consumed });
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("not a readable tar stream: {e}"),
            ));
            return Ok(false);
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                files.push(io_unreadable(name, "truncated", format!("tar stream: {e}")));
                return Ok(false);
            }
        };
        let ty = entry.header().entry_type();
        let stored = if ty.is_gnu_sparse() {
            entry.header().entry_size().unwrap_or(0)
        } else {
            entry.size()
        };
        members_end = entry
            .raw_file_position()
            .saturating_add(stored.div_ceil(512).saturating_mul(512));
        if !carries_file_data(ty) || entry.size() < 4 {
            continue;
        }
        let what = format!("tar member at byte {}", entry.raw_header_position());
        let pax = match pax_records(&mut entry) {
            Ok(r) => sparse::from_pax(&r),
            Err(e) => Err(format!("its pax records cannot be read: {e}")),
        };
        let header_name = entry
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let real_name = match &pax {
            Ok(Pax::Map(m) | Pax::MapInData(m)) => m.name.clone(),
            _ => None,
        };
        let mname = member_name(name, real_name.as_deref().unwrap_or(&header_name));
        let size = entry.size();
        let data_at = entry.raw_file_position();
        match pax {
            Ok(Pax::Plain) => {}
            Err(why) => {
                files.push(io_unreadable(
                    &mname,
                    "unsupported",
                    format!("{what}: {why}; tar would rebuild it, so it was not read"),
                ));
                continue;
            }
            Ok(pax) => {
                let body = match sparse::rebuild(&mname, &what, &mut entry, size, pax, opts) {
                    Member::Skip => continue,
                    Member::Unread(f) => {
                        files.push(f);
                        continue;
                    }
                    Member::Cut(f) => {
                        files.push(f);
                        return Ok(false);
                    }
                    Member::Held(b) => Body::Held(b),
                    Member::Mapped(m) => Body::Mapped(m),
                };
                scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
                continue;
            }
        }
        if let (Some(d), false) = (in_place, ty.is_gnu_sparse()) {
            let body = usize::try_from(data_at)
                .ok()
                .and_then(|s| Some(s..s.checked_add(usize::try_from(size).ok()?)?))
                .and_then(|r| d.get(r));
            match body {
                Some(b) => {
                    scan_buffer(&mname, b, false, depth + 1, files, opts)?;
                }
                None => {
                    files.push(io_unreadable(
                        &mname,
                        "truncated",
                        format!(
                            "{what} claims {size} bytes at {data_at}, past the end of the archive ({} bytes)",
                            d.len()
                        ),
                    ));
                    return Ok(false);
                }
            }
            continue;
        }
        let mut head = [0u8; 264];
        let n = match read_up_to(&mut entry, &mut head) {
            Ok(n) => n,
            Err(e) => {
                files.push(io_unreadable(
                    &mname,
                    "truncated",
                    format!("tar member: {e}"),
                ));
                return Ok(false);
            }
        };
        let Some(fmt) = sniff(&head[..n]) else {
            continue;
        };
        if size > opts.memory_budget {
            let streamed_from_start = match spill(&head[..n], &mut entry, size, opts) {
                Spill::Mapped(map) => {
                    scan_buffer(&mname, &map, false, depth + 1, files, opts)?;
                    continue;
                }
                Spill::Short(got) => {
                    files.push(size_lie(&mname, &what, size, got));
                    return Ok(false);
                }
                Spill::ReadFailed(e) => {
                    files.push(io_unreadable(
                        &mname,
                        "truncated",
                        format!("tar member: {e}"),
                    ));
                    return Ok(false);
                }
                Spill::NotSpilled => false,
                Spill::WriteFailed => true,
            };
            // The `tar` crate rebuilds an old GNU sparse member (typeflag `S`), but the
            // stream opened again is its stored data: such a member is not streamed.
            let Some(again) = again.filter(|_| !ty.is_gnu_sparse()) else {
                files.push(over_budget(&mname, &what, size, opts));
                continue;
            };
            let mut first = io::Cursor::new(head[..n].to_vec()).chain(&mut entry);
            let mut re = TarAgain {
                again,
                at: data_at,
                size,
            };
            let first: Option<&mut dyn Read> = if streamed_from_start {
                None
            } else {
                Some(&mut first)
            };
            files.extend(stream_member(
                &mname, &what, fmt, size, first, &mut re, depth, opts,
            ));
            continue;
        }
        let mut body = Vec::with_capacity(size.min(MAX_RESERVE) as usize);
        body.extend_from_slice(&head[..n]);
        if let Err(e) = entry.read_to_end(&mut body) {
            files.push(io_unreadable(
                &mname,
                "truncated",
                format!("tar member: {e}"),
            ));
            return Ok(false);
        }
        if body.len() as u64 != size {
            files.push(size_lie(&mname, &what, size, body.len() as u64));
            return Ok(false);
        }
        scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
    }
    drop(ar);
    if consumed.get() < members_end.saturating_add(512) {
        let mut f = new_file(name, "archive");
        f.unreadable.push(Unreadable {
            offset: consumed.get(),
            processor: None,
            entry_id: None,
            class: "truncated".into(),
            reason: format!(
                "the tar archive ends at byte {} without its end-of-archive block: it was cut, and members after that point were not read",
                consumed.get()
            ),
        });
        files.push(f);
        return Ok(false);
    }
    Ok(true)
}

/// Whether a tar member's data is what an unpacker writes as a file. GNU tar (and so dpkg's
/// `tar -x`, and Python's `tarfile`) extract a contiguous file (typeflag `7`) and any typeflag
/// they do not know as a regular file (GNU tar `src/extract.c`: "Unknown file type; file
/// extracted as normal file"), so only the types that carry no file data are skipped: a member
/// the scanner passes over must never be one an unpacker installs.
fn carries_file_data(ty: tar::EntryType) -> bool {
    use tar::EntryType::*;
    !matches!(
        ty,
        Link | Symlink
            | Char
            | Block
            | Directory
            | Fifo
            | XGlobalHeader
            | XHeader
            | GNULongName
            | GNULongLink
    )
}
