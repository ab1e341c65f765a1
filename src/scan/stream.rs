//! Device code read from a byte stream with bounded memory: plain offload bundles one entry at a
//! time, and a `.hip_fatbin` (bundles back to back on 4096-byte boundaries) from start to end.
//!
//! Used for the decompressed stream of every CCOB (the bundle is never held whole) and for archive
//! members too large to hold ([`super::Settings::memory_budget`]). At most one code object is in
//! memory per stream, and only up to [`super::Settings::max_code_object`] bytes; entries for the
//! host, for other triples and bitcode are skipped without being kept.
//!
//! The layout is the one [`super::bundle`] parses in place (clang `ClangOffloadBundler.rst`,
//! "Bundled Binary File Layout"); entries are visited in offset order and reported in header order.

use std::io::{self, Read};

use super::bundle::{EntryId, ALIGN, BUNDLE_MAGIC, CCOB_MAGIC};
use super::Problem;

/// Look-ahead window of a [`Stream`] (bytes); headers and magics are read through it.
const WINDOW: usize = 64 << 10;

/// Memory reserved up front for a member or code object, whatever size its header claims; the
/// buffer grows only as real bytes arrive, so a lying header cannot make the scanner reserve more
/// (256 MiB).
pub const MAX_RESERVE: u64 = 256 << 20;

/// Largest plain-bundle header (entry table) read from a stream: 16 MiB. Real headers hold a few
/// dozen entries (a few KB); a bigger one is refused rather than held.
pub const MAX_HEADER: u64 = 16 << 20;

/// A forward-only reader with a small look-ahead window that can also copy long runs straight
/// into a caller's buffer (no second copy of a code object).
pub struct Stream<R> {
    inner: R,
    buf: Box<[u8]>,
    lo: usize,
    hi: usize,
    pos: u64,
}

impl<R: Read> Stream<R> {
    /// Wrap `inner`; [`Stream::pos`] starts at 0.
    pub fn new(inner: R) -> Stream<R> {
        Stream {
            inner,
            buf: vec![0; WINDOW].into_boxed_slice(),
            lo: 0,
            hi: 0,
            pos: 0,
        }
    }

    /// The wrapped reader (bytes still in the look-ahead window are dropped).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The next `n` bytes (`n` ≤ 64 KiB), fewer only at the end of the stream. Nothing is consumed.
    pub fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        let n = n.min(WINDOW);
        if self.hi - self.lo < n {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
            while self.hi < n {
                match self.inner.read(&mut self.buf[self.hi..]) {
                    Ok(0) => break,
                    Ok(k) => self.hi += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(&self.buf[self.lo..self.hi.min(self.lo + n)])
    }

    /// Consume `n` bytes already returned by [`Stream::peek`].
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.hi - self.lo);
        self.lo += n;
        self.pos += n as u64;
    }

    /// Skip `n` bytes; returns how many were skipped (fewer only at the end of the stream).
    pub fn skip(&mut self, n: u64) -> io::Result<u64> {
        let mut left = n;
        while left > 0 {
            let avail = self
                .peek(WINDOW.min(left.try_into().unwrap_or(usize::MAX)))?
                .len();
            if avail == 0 {
                break;
            }
            self.consume(avail);
            left -= avail as u64;
        }
        Ok(n - left)
    }

    /// Append the next `n` bytes to `out`; returns how many were appended (fewer only at the end
    /// of the stream). Memory is reserved only as bytes arrive (at most 256 MiB ahead of them).
    pub fn read_to(&mut self, out: &mut Vec<u8>, n: u64) -> io::Result<u64> {
        let from_buf = ((self.hi - self.lo) as u64).min(n) as usize;
        out.reserve(n.min(MAX_RESERVE) as usize);
        out.extend_from_slice(&self.buf[self.lo..self.lo + from_buf]);
        self.consume(from_buf);
        let rest = n - from_buf as u64;
        let got = (&mut self.inner).take(rest).read_to_end(out)? as u64;
        self.pos += got;
        Ok(from_buf as u64 + got)
    }

    /// Read the next `n` bytes into `buf[..got]` and return `got` (less than `n` only at the end of
    /// the stream). `buf`'s length is how much of it holds initialised bytes, kept from call to
    /// call: it grows (zero-filled, at most 256 MiB ahead of the bytes read, doubling as they
    /// arrive) only past what an earlier call left, so a buffer reused for every entry is not
    /// cleared for each one again (`read_to_end` zero-fills all the spare room it reads into, each
    /// call). Bytes of `buf` past `got` are stale.
    pub fn read_into(&mut self, buf: &mut Vec<u8>, n: u64) -> io::Result<u64> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let mut got = 0usize;
        while got < n {
            if got == buf.len() {
                let grow = if got == 0 {
                    MAX_RESERVE as usize
                } else {
                    got.min(MAX_RESERVE as usize)
                };
                buf.resize(n.min(got.saturating_add(grow.max(WINDOW))), 0);
            }
            let end = buf.len().min(n);
            match self.read(&mut buf[got..end]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got as u64)
    }
}

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.lo < self.hi {
            let n = (self.hi - self.lo).min(out.len());
            out[..n].copy_from_slice(&self.buf[self.lo..self.lo + n]);
            self.consume(n);
            return Ok(n);
        }
        let n = self.inner.read(out)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Why a streamed bundle could not be read: bad bytes (offsets relative to the bundle start), or
/// the stream itself failed or ended (`at`: bytes of the bundle read before).
#[derive(Debug)]
pub enum Fail {
    /// The bytes are wrong.
    Bad(Problem),
    /// Reading failed, or the stream ended before the bundle did.
    Io {
        /// Bytes of the bundle consumed before the failure.
        at: u64,
        /// The error; `UnexpectedEof` when the stream ended.
        error: io::Error,
    },
}

/// One entry as the stream meets it.
#[derive(Debug, Clone)]
pub struct StreamEntry {
    /// Position in the header's entry table.
    pub index: usize,
    /// The bundle entry ID.
    pub id: String,
    /// Payload offset from the bundle start.
    pub offset: u64,
    /// Payload size in bytes.
    pub size: u64,
}

/// An entry's bytes as handed to the caller of [`read_bundle`].
#[derive(Debug)]
pub enum Body<'a> {
    /// The whole payload of an AMDGPU entry; only its first bytes for bitcode (which is not kept);
    /// empty for the host entry, entries of other triples and empty entries.
    Bytes(&'a [u8]),
    /// The payload is larger than the code-object limit; it was skipped.
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn eof(at: u64) -> Fail {
    Fail::Io {
        at,
        error: io::Error::new(io::ErrorKind::UnexpectedEof, "stream ended"),
    }
}

/// Read the plain bundle at the stream position. `avail` is how many bytes of the container
/// remain from the bundle start (bounds for every entry, as [`super::bundle::parse_bundle`]
/// checks against its buffer); `limit` is the largest payload held.
///
/// `on_entry` is called once per entry in offset order (the host entry and empty entries too);
/// the caller sorts by [`StreamEntry::index`] to report them in header order. Returns the bundle
/// end relative to its start (the furthest payload end, at least the header end), with the
/// stream consumed up to there.
///
/// Errors: the same problems as `parse_bundle`, a header over [`MAX_HEADER`], entries whose
/// payloads overlap (they can only be read in memory), or [`Fail::Io`] when the stream fails.
pub fn read_bundle<R: Read>(
    s: &mut Stream<R>,
    avail: u64,
    limit: u64,
    mut on_entry: impl FnMut(&StreamEntry, Body<'_>),
) -> Result<u64, Fail> {
    let start = s.pos();
    let rel = |s: &Stream<R>| s.pos() - start;
    let io = |at: u64| move |error| Fail::Io { at, error };
    let head = s.peek(32).map_err(io(0))?;
    if head.len() < BUNDLE_MAGIC.len() || &head[..BUNDLE_MAGIC.len()] != BUNDLE_MAGIC {
        return Err(Fail::Bad(Problem::new(
            0,
            "bad-magic",
            "not an offload bundle (no __CLANG_OFFLOAD_BUNDLE__ magic)",
        )));
    }
    if head.len() < 32 || avail < 32 {
        return Err(Fail::Bad(Problem::new(
            24,
            "truncated",
            format!(
                "bundle header truncated: entry count needs 8 bytes, {} left",
                head.len().min(avail as usize).saturating_sub(24)
            ),
        )));
    }
    let n = le64(head, 24);
    s.consume(32);
    let max_entries = (avail - 32) / 24;
    if n > max_entries {
        return Err(Fail::Bad(Problem::new(
            24,
            "truncated",
            format!(
                "bundle claims {n} entries but only {} bytes of entry table follow",
                avail - 32
            ),
        )));
    }
    let mut entries = Vec::new();
    for i in 0..n as usize {
        let rec = rel(s);
        if rec > MAX_HEADER {
            return Err(Fail::Bad(Problem::new(
                rec,
                "unsupported",
                format!("bundle header is larger than {MAX_HEADER} bytes ({n} entries); not read"),
            )));
        }
        let r = s.peek(24).map_err(io(rec))?;
        if r.len() < 24 || rec + 24 > avail {
            return Err(Fail::Bad(Problem::new(
                rec,
                "truncated",
                format!("bundle entry {i}: record truncated"),
            )));
        }
        let (off, size, id_len) = (le64(r, 0), le64(r, 8), le64(r, 16));
        s.consume(24);
        let remaining = avail - rel(s);
        if id_len > remaining || id_len > MAX_HEADER {
            return Err(Fail::Bad(Problem::new(
                rec + 16,
                "truncated",
                format!(
                    "bundle entry {i}: entry ID length {id_len} exceeds the {remaining} bytes left"
                ),
            )));
        }
        let id_at = rel(s);
        let mut id = Vec::new();
        if s.read_to(&mut id, id_len).map_err(io(id_at))? < id_len {
            return Err(eof(rel(s)));
        }
        let id = String::from_utf8(id).map_err(|_| {
            Fail::Bad(Problem::new(
                id_at,
                "bad-entry-id",
                format!("bundle entry {i}: entry ID is not UTF-8"),
            ))
        })?;
        if !matches!(off.checked_add(size), Some(e) if e <= avail) {
            return Err(Fail::Bad(Problem::new(
                rec,
                "truncated",
                format!(
                    "bundle entry {i} ({id}): payload at {off}+{size} runs past the end of the data ({avail} bytes)"
                ),
            )));
        }
        entries.push(StreamEntry {
            index: i,
            id,
            offset: off,
            size,
        });
    }
    let header_end = rel(s);
    let end = entries
        .iter()
        .map(|e| e.offset + e.size)
        .max()
        .unwrap_or(0)
        .max(header_end);
    let mut order: Vec<&StreamEntry> = entries.iter().collect();
    order.sort_by_key(|e| (e.offset, e.index));
    with_scratch(|data| read_entries(s, start, &order, limit, data, &mut on_entry))?;
    let at = rel(s);
    if end > at && s.skip(end - at).map_err(io(at))? < end - at {
        return Err(eof(rel(s)));
    }
    Ok(end)
}

thread_local! {
    /// The code-object buffer of this thread, reused from entry to entry (a fresh one for every
    /// entry would page in new memory each time).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` with this thread's code-object buffer (or a new one if it is in use); a buffer that
/// grew past 256 MiB is given back afterwards.
fn with_scratch<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            let r = f(&mut buf);
            if buf.capacity() as u64 > MAX_RESERVE {
                *buf = Vec::new();
            }
            r
        }
        Err(_) => f(&mut Vec::new()),
    })
}

fn read_entries<R: Read>(
    s: &mut Stream<R>,
    start: u64,
    order: &[&StreamEntry],
    limit: u64,
    data: &mut Vec<u8>,
    on_entry: &mut impl FnMut(&StreamEntry, Body<'_>),
) -> Result<(), Fail> {
    let rel = |s: &Stream<R>| s.pos() - start;
    let io = |at: u64| move |error| Fail::Io { at, error };
    for &e in order {
        if e.size == 0 {
            on_entry(e, Body::Bytes(&[]));
            continue;
        }
        let at = rel(s);
        if e.offset < at {
            return Err(Fail::Bad(Problem::new(
                e.offset,
                "unsupported",
                format!(
                    "bundle entry {} at +{} overlaps the header or the entry before it (read up to +{at}); overlapping entries are read only when the bundle is held in memory",
                    e.id, e.offset
                ),
            )));
        }
        if s.skip(e.offset - at).map_err(io(at))? < e.offset - at {
            return Err(eof(rel(s)));
        }
        let id = EntryId::parse(&e.id);
        if id.is_host() || !id.is_amdgcn() {
            skip_exact(s, e.size, start)?;
            on_entry(e, Body::Bytes(&[]));
            continue;
        }
        let prefix = s.peek(4).map_err(io(e.offset))?;
        if super::bundle::is_bitcode(prefix) {
            let p = prefix.to_vec();
            skip_exact(s, e.size, start)?;
            on_entry(e, Body::Bytes(&p));
            continue;
        }
        if e.size > limit {
            skip_exact(s, e.size, start)?;
            on_entry(e, Body::TooLarge { limit });
            continue;
        }
        if s.read_into(data, e.size).map_err(io(e.offset))? < e.size {
            return Err(eof(rel(s)));
        }
        on_entry(e, Body::Bytes(&data[..e.size as usize]));
    }
    Ok(())
}

fn skip_exact<R: Read>(s: &mut Stream<R>, n: u64, start: u64) -> Result<(), Fail> {
    let at = s.pos() - start;
    match s.skip(n) {
        Ok(k) if k == n => Ok(()),
        Ok(_) => Err(eof(s.pos() - start)),
        Err(error) => Err(Fail::Io { at, error }),
    }
}

/// What [`walk`] meets at a 4096-aligned position of a streamed `.hip_fatbin`.
#[derive(Debug)]
pub enum Found {
    /// A plain bundle starts here.
    Plain,
    /// A CCOB starts here.
    Ccob,
    /// Non-zero bytes that are no bundle, up to the next aligned magic or the end (`len` bytes).
    Unknown {
        /// Length of the unknown run.
        len: u64,
    },
    /// The end of the data.
    End,
}

/// Advance `s` (at relative position `pos` of a `.hip_fatbin` of `len` bytes) over zero padding
/// to the next item, as [`super::bundle::next_item`] does in memory: magics count only at
/// 4096-aligned offsets; other non-zero bytes are unknown up to the next aligned magic. On
/// [`Found::Plain`] / [`Found::Ccob`] the stream stands at the magic; on `Unknown` the run was
/// consumed. Returns the item and its relative offset.
pub fn next<R: Read>(s: &mut Stream<R>, start: u64, len: u64) -> io::Result<(u64, Found)> {
    loop {
        let pos = s.pos() - start;
        if pos >= len {
            return Ok((pos, Found::End));
        }
        let left = (len - pos).min(WINDOW as u64) as usize;
        let w = s.peek(left)?;
        if w.is_empty() {
            return Ok((pos, Found::End));
        }
        if pos.is_multiple_of(ALIGN as u64) {
            if w.starts_with(BUNDLE_MAGIC) && (len - pos) >= BUNDLE_MAGIC.len() as u64 {
                return Ok((pos, Found::Plain));
            }
            if w.starts_with(CCOB_MAGIC) {
                return Ok((pos, Found::Ccob));
            }
        }
        match w.iter().position(|&b| b != 0) {
            None => {
                let n = w.len();
                s.consume(n);
            }
            Some(k) if k > 0 => s.consume(k),
            Some(_) => {
                // Unknown data: consume up to the next aligned position that starts with a magic.
                let from = pos;
                s.consume(1);
                loop {
                    let p = s.pos() - start;
                    let q = (p.div_ceil(ALIGN as u64) * ALIGN as u64).min(len);
                    if s.skip(q - p)? < q - p || q >= len {
                        let end = (s.pos() - start).min(len);
                        return Ok((from, Found::Unknown { len: end - from }));
                    }
                    let h = s.peek(BUNDLE_MAGIC.len())?;
                    if h.starts_with(BUNDLE_MAGIC) || h.starts_with(CCOB_MAGIC) || h.is_empty() {
                        return Ok((from, Found::Unknown { len: q - from }));
                    }
                    s.consume(1);
                }
            }
        }
    }
}
