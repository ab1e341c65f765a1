//! GNU tar sparse members of POSIX (pax) archives, sparse formats 0.0, 0.1 and 1.0, which the
//! `tar` crate hands over as their stored data: the data segments end to end (0.x), or a text
//! map followed by them (1.0). The map is read and checked, and the member is rebuilt as
//! `tar -x` writes it: each segment at its offset, holes as zeros, to the real size. A map that
//! is not exactly what GNU tar writes (a segment out of order, overlapping, past the real size,
//! segments that do not add up to the stored data, an unknown format) is a reason, never a
//! guess. Source: GNU tar manual, "Storing Sparse Files" and appendix "Sparse Formats"
//! (`GNU.sparse.*` keywords); GNU tar `src/sparse.c` (`pax_decode_header`).
//!
//! The old GNU format (typeflag `S`) is rebuilt by the `tar` crate itself.

use std::io::{self, Read};

use super::budget::{over_budget, size_lie, spill, Spill};
use super::{io_unreadable, read_up_to, sniff, MAX_RESERVE};
use crate::scan::model::FileReport;
use crate::scan::Settings;

/// The most segments a map may list (GNU tar writes one per data run of the file).
const MAX_SEGMENTS: u64 = 1 << 20;

/// A sparse member's map, from its pax records and (format 1.0) the start of its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SparseMap {
    /// The file's size once rebuilt, in bytes (`GNU.sparse.size` / `GNU.sparse.realsize`).
    pub(super) real: u64,
    /// `(offset, length)` of each data segment in the rebuilt file, in bytes, in file order.
    pub(super) segments: Vec<(u64, u64)>,
    /// The file's name when the header's is GNU tar's stand-in (`GNU.sparse.name`).
    pub(super) name: Option<String>,
}

/// What a member's pax records say about sparseness.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pax {
    /// No `GNU.sparse.*` record: an ordinary member.
    Plain,
    /// Format 0.0 or 0.1: the map is complete, the data is the segments end to end.
    Map(SparseMap),
    /// Format 1.0: the map is at the start of the data ([`read_map_v1`]); `segments` is empty.
    MapInData(SparseMap),
}

fn num(key: &str, v: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(v)
        .ok()
        .filter(|s| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            format!(
                "pax record {key} is not a decimal number: {:?}",
                String::from_utf8_lossy(&v[..v.len().min(40)])
            )
        })
}

/// Reads a member's pax records (`key`, value in archive order). Errors: a `GNU.sparse.*` record
/// that is malformed, contradicts another, or names a sparse format other than 0.0, 0.1, 1.0.
pub(super) fn from_pax(records: &[(String, Vec<u8>)]) -> Result<Pax, String> {
    let sparse: Vec<_> = records
        .iter()
        .filter(|(k, _)| k.starts_with("GNU.sparse."))
        .collect();
    if sparse.is_empty() {
        return Ok(Pax::Plain);
    }
    let one = |key: &str| -> Result<Option<&[u8]>, String> {
        let mut vals = sparse.iter().filter(|(k, _)| k == key).map(|(_, v)| v);
        let first = vals.next();
        if vals.next().is_some() {
            return Err(format!("pax record {key} appears twice"));
        }
        Ok(first.map(|v| v.as_slice()))
    };
    let name = one("GNU.sparse.name")?
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .filter(|n| !n.is_empty());
    let major = one("GNU.sparse.major")?
        .map(|v| num("GNU.sparse.major", v))
        .transpose()?;
    let minor = one("GNU.sparse.minor")?
        .map(|v| num("GNU.sparse.minor", v))
        .transpose()?;
    match (major, minor) {
        (Some(1), Some(0)) => {
            let real = one("GNU.sparse.realsize")?
                .ok_or("sparse format 1.0 without GNU.sparse.realsize")?;
            return Ok(Pax::MapInData(SparseMap {
                real: num("GNU.sparse.realsize", real)?,
                segments: Vec::new(),
                name,
            }));
        }
        (None, None) => {}
        (ma, mi) => {
            return Err(format!(
                "sparse format {}.{} is not one GNU tar writes (0.0, 0.1, 1.0)",
                ma.map_or("?".into(), |m| m.to_string()),
                mi.map_or("?".into(), |m| m.to_string())
            ))
        }
    }
    let real = num(
        "GNU.sparse.size",
        one("GNU.sparse.size")?.ok_or("sparse member without GNU.sparse.size")?,
    )?;
    let count = num(
        "GNU.sparse.numblocks",
        one("GNU.sparse.numblocks")?.ok_or("sparse member without GNU.sparse.numblocks")?,
    )?;
    let mut numbers = Vec::new();
    if let Some(map) = one("GNU.sparse.map")? {
        // Format 0.1: `offset,size,offset,size,…`.
        if sparse.iter().any(|(k, _)| k == "GNU.sparse.offset") {
            return Err("sparse member with both GNU.sparse.map and GNU.sparse.offset".into());
        }
        for n in map.split(|&b| b == b',') {
            numbers.push(num("GNU.sparse.map", n)?);
        }
    } else {
        // Format 0.0: `GNU.sparse.offset` and `GNU.sparse.numbytes`, alternating.
        for (i, (k, v)) in sparse
            .iter()
            .filter(|(k, _)| k == "GNU.sparse.offset" || k == "GNU.sparse.numbytes")
            .enumerate()
        {
            let want = ["GNU.sparse.offset", "GNU.sparse.numbytes"][i % 2];
            if k != want {
                return Err(format!("pax record {k} where {want} was due"));
            }
            numbers.push(num(k, v)?);
        }
    }
    if numbers.len() % 2 != 0 || numbers.len() as u64 / 2 != count {
        return Err(format!(
            "GNU.sparse.numblocks says {count} segments, the map lists {} numbers",
            numbers.len()
        ));
    }
    Ok(Pax::Map(SparseMap {
        real,
        segments: numbers.chunks_exact(2).map(|p| (p[0], p[1])).collect(),
        name,
    }))
}

/// Reads a format-1.0 map from the start of a member's data of `stored` bytes (decimal numbers
/// one per line: the segment count, then offset and length of each, padded with zeros to a
/// 512-byte block) into `map`. Returns the bytes the map took (a multiple of 512), after which
/// `r` is at the first segment's data. Errors: the data ends or the text is not that map.
pub(super) fn read_map_v1(
    r: &mut impl Read,
    stored: u64,
    map: &mut SparseMap,
) -> Result<u64, String> {
    let mut used = 0u64;
    let mut line = || -> Result<u64, String> {
        let mut digits = Vec::new();
        loop {
            let mut b = [0u8];
            match r.read(&mut b) {
                Ok(1) => {}
                Ok(_) => return Err("the data ends inside its sparse map".into()),
                Err(e) => return Err(format!("cannot read its sparse map: {e}")),
            }
            used += 1;
            if used > stored {
                return Err("the sparse map runs past the member's data".into());
            }
            if b[0] == b'\n' {
                return num("sparse map", &digits);
            }
            if digits.len() > 20 {
                return Err("a sparse map number longer than 20 digits".into());
            }
            digits.push(b[0]);
        }
    };
    let count = line()?;
    if count > MAX_SEGMENTS || count.saturating_mul(4) > stored {
        return Err(format!(
            "a sparse map of {count} segments in {stored} bytes of data"
        ));
    }
    let mut segments = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let off = line()?;
        segments.push((off, line()?));
    }
    let end = used.div_ceil(512) * 512;
    if end > stored {
        return Err("the sparse map's padding runs past the member's data".into());
    }
    let mut pad = vec![0u8; (end - used) as usize];
    r.read_exact(&mut pad)
        .map_err(|e| format!("cannot read its sparse map: {e}"))?;
    map.segments = segments;
    Ok(end)
}

/// Checks a map against the `data` bytes the member stores after it: segments in file order,
/// none overlapping the one before or ending past the real size, lengths adding up to `data`.
pub(super) fn check(map: &SparseMap, data: u64) -> Result<(), String> {
    if map.segments.len() as u64 > MAX_SEGMENTS {
        return Err(format!("a sparse map of {} segments", map.segments.len()));
    }
    let (mut end, mut sum) = (0u64, 0u64);
    for &(off, len) in &map.segments {
        if off < end {
            return Err(format!(
                "sparse segment at {off} starts before the previous one ends ({end}): out of order or overlapping"
            ));
        }
        end = off
            .checked_add(len)
            .filter(|&e| e <= map.real)
            .ok_or_else(|| {
                format!(
                    "sparse segment of {len} bytes at {off} ends past the file's real size ({})",
                    map.real
                )
            })?;
        sum = sum.saturating_add(len);
    }
    if sum != data {
        return Err(format!(
            "the sparse map's segments hold {sum} bytes, the member stores {data}"
        ));
    }
    Ok(())
}

/// The rebuilt file: reads `inner` (the stored segments) into place, zeros in the holes, to
/// `map.real` bytes. A stored stream that ends early is an `UnexpectedEof` error.
pub(super) struct Rebuilt<'m, R> {
    inner: R,
    map: &'m SparseMap,
    /// Position in the rebuilt file.
    pos: u64,
    /// The segment at or after `pos`.
    seg: usize,
}

impl<'m, R: Read> Rebuilt<'m, R> {
    /// `inner` at the first segment's data; `map` checked with [`check`].
    pub(super) fn new(inner: R, map: &'m SparseMap) -> Self {
        Rebuilt {
            inner,
            map,
            pos: 0,
            seg: 0,
        }
    }
}

impl<R: Read> Read for Rebuilt<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if buf.is_empty() || self.pos >= self.map.real {
                return Ok(0);
            }
            let (off, len) = match self.map.segments.get(self.seg) {
                Some(&s) => s,
                None => (self.map.real, 0),
            };
            let room = buf.len() as u64;
            if self.pos < off {
                let k = (off - self.pos).min(room) as usize;
                buf[..k].fill(0);
                self.pos += k as u64;
                return Ok(k);
            }
            if self.pos < off + len {
                let want = (off + len - self.pos).min(room) as usize;
                let k = self.inner.read(&mut buf[..want])?;
                if k == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the archive ends inside a sparse segment",
                    ));
                }
                self.pos += k as u64;
                return Ok(k);
            }
            self.seg += 1;
        }
    }
}

/// What became of a sparse member ([`rebuild`]).
pub(super) enum Member {
    /// Its first bytes are no format the scanner reads.
    Skip,
    /// Rebuilt in memory.
    Held(Vec<u8>),
    /// Rebuilt into an unnamed temporary file ([`super::budget::spill`]).
    Mapped(memmap2::Mmap),
    /// Unreadable, the archive goes on (a map that is refused, a member over the budget).
    Unread(FileReport),
    /// The archive ends inside the member: unreadable, and nothing after it was read.
    Cut(FileReport),
}

/// The reads a pax sparse member needs: its map from `pax` (and, format 1.0, from the start of
/// `entry`, which holds `stored` bytes), then the file rebuilt as `tar -x` writes it, in memory
/// up to [`Settings::memory_budget`], beyond it into a spill file, or else unread naming the
/// budget (holes cost no archive bytes, so a rebuilt file is never streamed: its claimed size is
/// bounded by the budget or by the spill folder's free space).
pub(super) fn rebuild(
    mname: &str,
    what: &str,
    entry: &mut impl Read,
    stored: u64,
    pax: Pax,
    opts: &Settings,
) -> Member {
    let refused = |why: String| {
        Member::Unread(io_unreadable(
            mname,
            "unsupported",
            format!("{what}: a sparse member whose map cannot be used ({why}); tar would rebuild it, so it was not read"),
        ))
    };
    let (mut map, v1) = match pax {
        Pax::Plain => unreachable!("rebuild is called for sparse members"),
        Pax::Map(m) => (m, false),
        Pax::MapInData(m) => (m, true),
    };
    let mut data = stored;
    if v1 {
        match read_map_v1(entry, stored, &mut map) {
            Ok(n) => data -= n,
            Err(why) => return refused(why),
        }
    }
    if let Err(why) = check(&map, data) {
        return refused(why);
    }
    let size = map.real;
    let mut r = Rebuilt::new(entry, &map);
    let cut = |e: io::Error| {
        Member::Cut(io_unreadable(
            mname,
            "truncated",
            format!("tar member: {e}"),
        ))
    };
    let mut head = [0u8; 264];
    let n = match read_up_to(&mut r, &mut head) {
        Ok(n) => n,
        Err(e) => return cut(e),
    };
    if sniff(&head[..n]).is_none() {
        return Member::Skip;
    }
    if size > opts.memory_budget {
        return match spill(&head[..n], &mut r, size, opts) {
            Spill::Mapped(m) => Member::Mapped(m),
            Spill::Short(got) => Member::Cut(size_lie(mname, what, size, got)),
            Spill::ReadFailed(e) => cut(e),
            Spill::NotSpilled | Spill::WriteFailed => {
                Member::Unread(over_budget(mname, &format!("{what} (sparse)"), size, opts))
            }
        };
    }
    let mut body = Vec::with_capacity(size.min(MAX_RESERVE) as usize);
    body.extend_from_slice(&head[..n]);
    if let Err(e) = r.read_to_end(&mut body) {
        return cut(e);
    }
    if body.len() as u64 != size {
        return Member::Cut(size_lie(mname, what, size, body.len() as u64));
    }
    Member::Held(body)
}

/// A member's pax records (key, value), in archive order; none for a member without them.
pub(super) fn pax_records<R: Read>(
    entry: &mut tar::Entry<'_, R>,
) -> io::Result<Vec<(String, Vec<u8>)>> {
    let Some(records) = entry.pax_extensions()? else {
        return Ok(Vec::new());
    };
    records
        .map(|r| {
            let r = r?;
            Ok((
                String::from_utf8_lossy(r.key_bytes()).into_owned(),
                r.value_bytes().to_vec(),
            ))
        })
        .collect()
}

/// A rebuilt sparse member, held or mapped; derefs to its bytes.
pub(super) enum Body {
    Held(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Body::Held(b) => b,
            Body::Mapped(m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pairs: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_three_pax_formats_give_one_map() {
        let want = SparseMap {
            real: 100,
            segments: vec![(0, 10), (50, 5), (100, 0)],
            name: None,
        };
        let v00 = rec(&[
            ("GNU.sparse.size", "100"),
            ("GNU.sparse.numblocks", "3"),
            ("GNU.sparse.offset", "0"),
            ("GNU.sparse.numbytes", "10"),
            ("GNU.sparse.offset", "50"),
            ("GNU.sparse.numbytes", "5"),
            ("GNU.sparse.offset", "100"),
            ("GNU.sparse.numbytes", "0"),
        ]);
        assert_eq!(from_pax(&v00), Ok(Pax::Map(want.clone())));
        let v01 = rec(&[
            ("GNU.sparse.size", "100"),
            ("GNU.sparse.numblocks", "3"),
            ("GNU.sparse.name", "lib.so"),
            ("GNU.sparse.map", "0,10,50,5,100,0"),
        ]);
        let named = SparseMap {
            name: Some("lib.so".into()),
            ..want.clone()
        };
        assert_eq!(from_pax(&v01), Ok(Pax::Map(named.clone())));
        let v10 = rec(&[
            ("GNU.sparse.major", "1"),
            ("GNU.sparse.minor", "0"),
            ("GNU.sparse.name", "lib.so"),
            ("GNU.sparse.realsize", "100"),
        ]);
        let Ok(Pax::MapInData(mut m)) = from_pax(&v10) else {
            panic!("1.0")
        };
        let mut data = b"3\n0\n10\n50\n5\n100\n0\n".to_vec();
        data.resize(512, 0);
        data.extend_from_slice(b"0123456789abcde");
        let mut r = data.as_slice();
        assert_eq!(read_map_v1(&mut r, data.len() as u64, &mut m), Ok(512));
        assert_eq!(m, named);
        check(&m, 15).unwrap();
        let mut out = Vec::new();
        Rebuilt::new(r, &m).read_to_end(&mut out).unwrap();
        let mut expect = vec![0u8; 100];
        expect[..10].copy_from_slice(b"0123456789");
        expect[50..55].copy_from_slice(b"abcde");
        assert_eq!(out, expect);
    }

    #[test]
    fn maps_gnu_tar_does_not_write_are_refused() {
        let m = |segments: Vec<(u64, u64)>| SparseMap {
            real: 100,
            segments,
            name: None,
        };
        assert!(check(&m(vec![(50, 5), (0, 10)]), 15).is_err());
        assert!(check(&m(vec![(0, 10), (5, 10)]), 20).is_err());
        assert!(check(&m(vec![(95, 10)]), 10).is_err());
        assert!(check(&m(vec![(u64::MAX, 10)]), 10).is_err());
        assert!(check(&m(vec![(0, 10)]), 11).is_err());
        for bad in [
            rec(&[("GNU.sparse.major", "2"), ("GNU.sparse.minor", "0")]),
            rec(&[("GNU.sparse.size", "100")]),
            rec(&[
                ("GNU.sparse.size", "100"),
                ("GNU.sparse.numblocks", "2"),
                ("GNU.sparse.map", "0,10"),
            ]),
            rec(&[
                ("GNU.sparse.size", "1x"),
                ("GNU.sparse.numblocks", "0"),
                ("GNU.sparse.map", ""),
            ]),
        ] {
            assert!(from_pax(&bad).is_err(), "{bad:?}");
        }
        let mut m1 = m(vec![]);
        let mut huge = b"99999999\n".as_slice();
        assert!(read_map_v1(&mut huge, 1 << 20, &mut m1).is_err());
        let mut cut = b"2\n0\n10\n".as_slice();
        assert!(read_map_v1(&mut cut, 512, &mut m1).is_err());
    }
}
