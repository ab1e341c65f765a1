//! A host ELF archive member too large to hold, read as the in-memory path reads it
//! (`scan/host.rs`): its device code is what the `__hip_fatbin_wrapper`s point at, followed
//! through their relocations ([`wrapper`]), whatever the sections are called or whether they are
//! there; `.hip_fatbin`, the `-fgpu-rdc` sections and `.llvm.offloading` are read too, and a
//! `.hip_fatbin` bundle no wrapper points at is unknown.
//!
//! The member is read from its start in passes, each reopened through [`Reopen`]:
//! 1. the whole member: the ELF header, program and section header tables, `PT_DYNAMIC`, and every
//!    wrapper candidate (a HIPF or HIPK magic and version 1 at an 8-byte boundary) with its bytes;
//! 2. what [`wrapper::find`] and the section table then ask for that pass 1 did not hold (the
//!    section names, the relocation tables, a symbol), as many passes as it takes (at most
//!    [`MAX_TABLE_PASSES`]); [`Captured`] is the [`object::ReadRef`] they read through, so the
//!    code that follows a wrapper is the in-memory path's own;
//! 3. the device code in file order (`.hip_fatbin` and what a wrapper points at streamed, the
//!    rest held); a range that overlaps one read before it is read in a further pass (at most
//!    [`MAX_CODE_PASSES`] in all), and what is still left is unknown, never skipped.
//!
//! Anything this cannot follow (a table over [`MAX_STREAM_TABLE`], more than [`MAX_WRAPPERS`]
//! candidates, a stream that fails) is an unknown record: never "no device code".

use std::cell::RefCell;
use std::io::{self, Read};
use std::ops::Range;

use object::elf::{FileHeader64, ELFDATA2LSB, SHT_NOBITS};
use object::read::elf::{FileHeader, SectionHeader};
use object::{LittleEndian, ReadRef};

use super::budget::Reopen;
use super::stream_bundle::{stream_pointed, walk_stream};
use super::{new_file, read_up_to, MAX_ELF_TABLE};
use crate::scan::elf::{self, HostElf};
use crate::scan::host::{pointed, unreferenced};
use crate::scan::model::{FileReport, Unreadable};
use crate::scan::stream::Stream;
use crate::scan::walk::{self, Part};
use crate::scan::wrapper::{self, candidate_magic, Source, Wrapper, MAX_WRAPPERS, WRAPPER_SIZE};
use crate::scan::{offload, Problem, Settings};

/// Largest table (program or section headers, section names, `PT_DYNAMIC`, a relocation or
/// symbol table) held from a streamed ELF: 64 MiB. A larger one is not read (unknown).
pub const MAX_STREAM_TABLE: u64 = 64 << 20;
/// Most passes that read tables after the first.
pub const MAX_TABLE_PASSES: usize = 4;
/// Most passes that read device code.
pub const MAX_CODE_PASSES: usize = 3;
/// How much of the member's start pass 1 looks at before it decides what to keep (the ELF header
/// and, in every ELF a linker writes, the program header table).
const HEAD: usize = 64 << 10;

/// Bytes of the member held at `start`, laid out so that a byte's address has the alignment its
/// file offset has modulo 8 (the ELF structures `object` reads are aligned).
struct Held {
    start: u64,
    pad: usize,
    len: usize,
    buf: Vec<u8>,
}

impl Held {
    fn new(start: u64, len: usize) -> Held {
        let mut buf = vec![0u8; len + 8];
        let pad = (start as usize).wrapping_sub(buf.as_mut_ptr() as usize) % 8;
        Held {
            start,
            pad,
            len,
            buf,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.pad..self.pad + self.len]
    }

    fn end(&self) -> u64 {
        self.start + self.len as u64
    }
}

/// What the passes over a streamed host ELF hold: ranges of it, and its wrapper candidates with
/// their 24 bytes. Reads of bytes it does not hold fail and are remembered ([`Captured::misses`]).
pub struct Captured {
    size: u64,
    held: Vec<Held>,
    /// Wrapper candidates (file offset, magic), in file order; their bytes are in `cand_bytes`.
    cands: Vec<(u64, u32)>,
    cand_bytes: Vec<Held>,
    misses: RefCell<Vec<(u64, u64)>>,
}

impl Captured {
    fn find(&self, off: u64, len: u64) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        let i = self.cand_bytes.partition_point(|h| h.start <= off);
        let near = i.checked_sub(1).map(|i| &self.cand_bytes[i]);
        near.into_iter()
            .chain(self.held.iter())
            .find(|h| h.start <= off && end <= h.end())
            .map(|h| &h.bytes()[(off - h.start) as usize..(end - h.start) as usize])
    }

    fn miss(&self, off: u64, len: u64) {
        self.misses.borrow_mut().push((off, len));
    }

    /// The ranges asked for and not held, merged, in file order.
    fn take_misses(&self) -> Vec<(u64, u64)> {
        let mut m = std::mem::take(&mut *self.misses.borrow_mut());
        m.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (o, l) in m {
            match out.last_mut() {
                Some((lo, ll)) if o <= *lo + *ll => *ll = (*ll).max(o + l - *lo),
                _ => out.push((o, l)),
            }
        }
        out
    }
}

impl<'a> ReadRef<'a> for &'a Captured {
    fn len(self) -> Result<u64, ()> {
        Ok(self.size)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        match offset.checked_add(size) {
            Some(e) if e <= self.size => {}
            _ => return Err(()),
        }
        self.find(offset, size)
            .ok_or_else(|| self.miss(offset, size))
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        let end = range.end.min(self.size);
        if range.start >= end {
            return Err(());
        }
        let held = self
            .held
            .iter()
            .find(|h| h.start <= range.start && range.start < h.end());
        if let Some(h) = held {
            let b = &h.bytes()[(range.start - h.start) as usize..];
            let b = &b[..b.len().min((end - range.start) as usize)];
            if let Some(n) = b.iter().position(|&c| c == delimiter) {
                return Ok(&b[..n]);
            }
            if h.end() >= end {
                return Err(());
            }
        }
        self.miss(range.start, end - range.start);
        Err(())
    }
}

impl<'a> Source<'a> for &'a Captured {
    fn candidates(self, start: u64, end: u64, out: &mut Vec<(u64, u32)>) {
        let i = self.cands.partition_point(|c| c.0 < start);
        out.extend(
            self.cands[i..]
                .iter()
                .take_while(|c| c.0 + WRAPPER_SIZE as u64 <= end),
        );
    }
}

/// The wrapper candidates of pass 1: (file offset, magic), and their bytes.
type Cands = (Vec<(u64, u32)>, Vec<Held>);

/// Why a pass stopped: the record to report.
type Stop = Unreadable;

fn record(offset: u64, class: &str, reason: String) -> Unreadable {
    Unreadable {
        offset,
        processor: None,
        entry_id: None,
        class: class.into(),
        reason,
    }
}

fn failed(what: &str, size: u64, pos: u64, e: &io::Error) -> Stop {
    if e.kind() == io::ErrorKind::UnexpectedEof || pos < size {
        record(
            pos,
            "truncated",
            format!("{what} claims {size} bytes but holds {pos}: {e}"),
        )
    } else {
        record(pos, "io", format!("{what}: cannot read at byte {pos}: {e}"))
    }
}

/// One pass from the member's start: hold `want` (file ranges, sorted), and with `cands` collect
/// the wrapper candidates (up to [`MAX_WRAPPERS`]; `Err` past that). `whole`: read to the end
/// and check the member holds exactly `size` bytes; else stop after the last range.
fn pass(
    r: &mut dyn Read,
    size: u64,
    want: &[(u64, u64)],
    mut cands: Option<&mut Cands>,
    whole: bool,
    what: &str,
) -> Result<Vec<Held>, Stop> {
    let mut held: Vec<Held> = want
        .iter()
        .map(|&(o, l)| Held::new(o, l as usize))
        .collect();
    let last = want.iter().map(|&(o, l)| o + l).max().unwrap_or(0);
    let mut chunk = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    // The candidate scan: bytes of the last chunk not yet examined, and where they start.
    let mut carry: Vec<u8> = Vec::new();
    let mut next = 0u64;
    loop {
        if !whole && pos >= last {
            return Ok(held);
        }
        let k = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed(what, size, pos, &e)),
        };
        let c = &chunk[..k];
        let end = pos + k as u64;
        if end > size {
            return Err(record(
                0,
                "truncated",
                format!("{what} claims {size} bytes but holds more than {size}"),
            ));
        }
        for h in held.iter_mut() {
            let (s, e) = (h.start.max(pos), h.end().min(end));
            if s < e {
                let (pad, start) = (h.pad, h.start);
                h.buf[pad + (s - start) as usize..pad + (e - start) as usize]
                    .copy_from_slice(&c[(s - pos) as usize..(e - pos) as usize]);
            }
        }
        if let Some((list, bytes)) = cands.as_deref_mut() {
            let from = pos - carry.len() as u64;
            carry.extend_from_slice(c);
            while next + WRAPPER_SIZE as u64 <= end {
                let i = (next - from) as usize;
                let w = u64::from_le_bytes(carry[i..i + 8].try_into().unwrap());
                if let Some(m) = candidate_magic(w) {
                    if list.len() == MAX_WRAPPERS {
                        return Err(record(
                            next,
                            "unsupported",
                            format!("{what}: more than {MAX_WRAPPERS} __hip_fatbin_wrapper magics; a member larger than the memory budget with so many is not read; raise it with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET"),
                        ));
                    }
                    list.push((next, m));
                    let mut h = Held::new(next, WRAPPER_SIZE);
                    let pad = h.pad;
                    h.buf[pad..pad + WRAPPER_SIZE].copy_from_slice(&carry[i..i + WRAPPER_SIZE]);
                    bytes.push(h);
                }
                next += 8;
            }
            carry.drain(..(next - from) as usize);
        }
        pos = end;
    }
    if pos < size.min(if whole { size } else { last }) {
        return Err(failed(
            what,
            size,
            pos,
            &io::ErrorKind::UnexpectedEof.into(),
        ));
    }
    Ok(held)
}

/// A device-code section of the member, from its section table.
#[derive(Debug, Clone)]
struct Sec {
    kind: SecKind,
    offset: u64,
    size: u64,
    nobits: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum SecKind {
    Fatbin,
    Segment,
    KpackRef,
    Rdc(String),
    Offloading,
}

/// What the tables say, read through [`Captured`]: the wrappers and where they lead, the
/// device-code sections; or the record of an ELF that does not read (as the in-memory path
/// reports it).
struct Tables {
    wrappers: Vec<Wrapper>,
    secs: Vec<Sec>,
}

fn tables(c: &Captured) -> Result<Tables, Problem> {
    let endian = LittleEndian;
    let hdr = FileHeader64::<LittleEndian>::parse(c)
        .map_err(|e| Problem::new(0, "bad-elf", format!("host ELF header: {e}")))?;
    if hdr.e_ident().data != ELFDATA2LSB {
        return Err(Problem::new(
            5,
            "unsupported",
            "big-endian ELF is not supported",
        ));
    }
    let sections = hdr
        .sections(endian, c)
        .map_err(|e| Problem::new(0x28, "bad-elf", format!("host ELF section table: {e}")))?;
    let mut secs = Vec::new();
    for s in sections.iter() {
        let ty = s.sh_type(endian);
        let name = sections.section_name(endian, s).unwrap_or(&[]);
        let kind = match name {
            b".hip_fatbin" | b".hip_fat" => SecKind::Fatbin,
            b".hipFatBinSegment" | b".hipFatB" => SecKind::Segment,
            b".rocm_kpack_ref" | b".kpackrf" => SecKind::KpackRef,
            n if n.starts_with(elf::RDC_PREFIX.as_bytes()) => {
                match std::str::from_utf8(&n[elf::RDC_PREFIX.len()..]) {
                    Ok(id) => SecKind::Rdc(id.to_owned()),
                    Err(_) => continue,
                }
            }
            n if n == offload::SECTION || ty == offload::SHT_LLVM_OFFLOADING => SecKind::Offloading,
            _ => continue,
        };
        let (offset, size) = (s.sh_offset(endian), s.sh_size(endian));
        let nobits = ty == SHT_NOBITS;
        if !nobits
            && kind != SecKind::KpackRef
            && offset.checked_add(size).is_none_or(|e| e > c.size)
        {
            return Err(Problem::new(
                offset,
                "truncated",
                format!(
                    "section {} ({size} bytes at {offset}) runs past the end of the file",
                    String::from_utf8_lossy(name)
                ),
            ));
        }
        secs.push(Sec {
            kind,
            offset,
            size,
            nobits,
        });
    }
    let wrappers = wrapper::find(c)?;
    Ok(Tables { wrappers, secs })
}

/// A host ELF member too large to hold, read in passes (module doc). `None`: no device code.
pub(super) fn stream_elf(
    mname: &str,
    what: &str,
    size: u64,
    first: Option<&mut dyn Read>,
    again: &mut dyn Reopen,
    opts: &Settings,
) -> Option<FileReport> {
    let f = new_file(mname, "host-elf");
    let fail = |mut f: FileReport, u: Unreadable| {
        f.unreadable.push(u);
        Some(f)
    };
    // Pass 1.
    let p1 = |r: &mut dyn Read| -> Result<Captured, Stop> {
        let mut head = vec![0u8; HEAD.min(size as usize)];
        let mut rr = &mut *r;
        let n = read_up_to(&mut rr, &mut head).map_err(|e| failed(what, size, 0, &e))?;
        head.truncate(n);
        if n < 64 {
            return Err(failed(
                what,
                size,
                n as u64,
                &io::ErrorKind::UnexpectedEof.into(),
            ));
        }
        if head[4] != 2 || head[5] != 1 {
            return Err(record(4, "unsupported", format!("{what}: a host ELF larger than the memory budget is read only when it is 64-bit little-endian")));
        }
        let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as u64;
        let u64_at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap());
        let (phoff, phnum) = (u64_at(0x20), u16_at(0x38));
        let (shoff, shnum) = (u64_at(0x28), u16_at(0x3c));
        let mut want = vec![(0u64, 64u64)];
        let mut add = |o: u64, l: u64| {
            if l > 0 && l <= MAX_ELF_TABLE && o.checked_add(l).is_some_and(|e| e <= size) {
                want.push((o, l));
            }
        };
        add(phoff, phnum * 56);
        add(shoff, shnum.max(1) * 64);
        // PT_DYNAMIC, when the program header table is in the head.
        if let Some(ph) = head.get(phoff as usize..(phoff + phnum * 56) as usize) {
            for p in ph.chunks_exact(56) {
                if u32::from_le_bytes(p[..4].try_into().unwrap()) == object::elf::PT_DYNAMIC {
                    let o = u64::from_le_bytes(p[8..16].try_into().unwrap());
                    let l = u64::from_le_bytes(p[32..40].try_into().unwrap());
                    add(o, l.min(size.saturating_sub(o)));
                }
            }
        }
        want.sort_unstable();
        let mut cands = (Vec::new(), Vec::new());
        let mut r = io::Cursor::new(head).chain(r);
        let held = pass(&mut r, size, &want, Some(&mut cands), true, what)?;
        Ok(Captured {
            size,
            held,
            cands: cands.0,
            cand_bytes: cands.1,
            misses: RefCell::new(Vec::new()),
        })
    };
    let captured = match first {
        Some(r) => p1(r),
        None => match again.reopen() {
            Ok(mut r) => p1(&mut r),
            Err(e) => Err(failed(what, size, 0, &e)),
        },
    };
    let mut c = match captured {
        Ok(c) => c,
        Err(u) => return fail(f, u),
    };
    // Table passes.
    let mut left = MAX_TABLE_PASSES;
    let t = loop {
        let t = tables(&c);
        let misses = c.take_misses();
        if misses.is_empty() {
            break t;
        }
        if let Some(&(o, l)) = misses.iter().find(|m| m.1 > MAX_STREAM_TABLE) {
            return fail(f, record(o, "too-large", format!("{what}: a table of {l} bytes at {o}, more than {MAX_STREAM_TABLE} bytes, is not read from a member larger than the memory budget; raise it with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET")));
        }
        if left == 0 {
            return fail(f, record(misses[0].0, "unsupported", format!("{what}: its tables still lead to bytes not read after {MAX_TABLE_PASSES} passes; not read from a stream")));
        }
        left -= 1;
        let held = match again.reopen() {
            Ok(mut r) => pass(&mut r, size, &misses, None, false, what),
            Err(e) => Err(failed(what, size, 0, &e)),
        };
        match held {
            Ok(h) => c.held.extend(h),
            Err(u) => return fail(f, u),
        }
    };
    let t = match t {
        Ok(t) => t,
        Err(p) => return fail(f, p.unreadable(0, None, None)),
    };
    read_code(f, what, size, t, again, opts)
}

/// What the third kind of pass reads.
#[derive(Debug, Clone)]
enum Task {
    /// `.hip_fatbin`, walked.
    Fatbin { offset: u64, size: u64 },
    /// The bundle the wrappers' `i`th target (`pointed`) points at.
    Pointed(usize),
    /// A section held whole: `secs[i]`.
    Held(usize),
}

/// Pass 3 and after: the device code, then the report in the in-memory path's order.
fn read_code(
    mut f: FileReport,
    what: &str,
    size: u64,
    t: Tables,
    again: &mut dyn Reopen,
    opts: &Settings,
) -> Option<FileReport> {
    let secs = t.secs;
    let fatbin = secs
        .iter()
        .rev()
        .find(|s| s.kind == SecKind::Fatbin && !s.nobits)
        .cloned();
    let mut h = HostElf {
        fatbin: None,
        fatbin_nobits: secs
            .iter()
            .rev()
            .find(|s| s.kind == SecKind::Fatbin && s.nobits)
            .map(|s| s.offset),
        wrappers: t.wrappers.iter().map(|w| (w.offset, w.magic)).collect(),
        kpack_ref: secs
            .iter()
            .rev()
            .find(|s| s.kind == SecKind::KpackRef)
            .map(|s| s.offset),
        rdc: Vec::new(),
    };
    let rdc: Vec<usize> = (0..secs.len())
        .filter(|&i| matches!(secs[i].kind, SecKind::Rdc(_)))
        .collect();
    let offloading: Vec<usize> = (0..secs.len())
        .filter(|&i| secs[i].kind == SecKind::Offloading)
        .collect();
    let segments: Vec<usize> = (0..secs.len())
        .filter(|&i| secs[i].kind == SecKind::Segment && !secs[i].nobits)
        .collect();
    if fatbin.is_none()
        && h.fatbin_nobits.is_none()
        && h.wrappers.is_empty()
        && h.kpack_ref.is_none()
        && rdc.is_empty()
        && offloading.is_empty()
        && segments.is_empty()
    {
        return None;
    }
    let (pointed, wrapper_records) = pointed(&t.wrappers, !rdc.is_empty());
    let fb_range = fatbin.as_ref().map(|s| s.offset..s.offset + s.size);
    let mut tasks: Vec<(u64, Task)> = Vec::new();
    if let Some(s) = &fatbin {
        tasks.push((
            s.offset,
            Task::Fatbin {
                offset: s.offset,
                size: s.size,
            },
        ));
    }
    for (i, p) in pointed.iter().enumerate() {
        if !fb_range.as_ref().is_some_and(|r| r.contains(&p.0)) {
            tasks.push((p.0, Task::Pointed(i)));
        }
    }
    for &i in rdc.iter().chain(&offloading).chain(&segments) {
        if !secs[i].nobits {
            tasks.push((secs[i].offset, Task::Held(i)));
        }
    }
    let mut fb_part = Part::default();
    let mut starts = Vec::new();
    let mut pointed_parts: Vec<Part> = pointed.iter().map(|_| Part::default()).collect();
    let mut held: Vec<Option<Result<Vec<u8>, Unreadable>>> = secs.iter().map(|_| None).collect();
    let mut first_pass = true;
    for _ in 0..MAX_CODE_PASSES {
        if tasks.is_empty() {
            break;
        }
        tasks.sort_by_key(|t| t.0);
        let mut r = match again.reopen() {
            Ok(r) => Stream::new(r),
            Err(e) => {
                f.unreadable.push(failed(what, size, 0, &e));
                return Some(f);
            }
        };
        let mut later = Vec::new();
        for (at, task) in tasks.drain(..) {
            if at < r.pos() {
                later.push((at, task));
                continue;
            }
            if let Err(e) = r.skip(at - r.pos()) {
                f.unreadable.push(failed(what, size, r.pos(), &e));
                return Some(f);
            }
            let res = match &task {
                Task::Fatbin { offset, size: len } => {
                    let mut sec = Stream::new((&mut r).take(*len));
                    let res = walk_stream(&mut sec, *len, *offset, &mut fb_part, &mut starts, opts);
                    let done = sec.pos();
                    drop(sec);
                    res.and_then(|_| r.skip(len - done.min(*len)).map(|_| ()))
                }
                Task::Pointed(i) => {
                    let (tgt, end, w) = pointed[*i];
                    stream_pointed(&mut r, end - tgt, tgt, w, &mut pointed_parts[*i], opts)
                }
                Task::Held(i) => {
                    let s = &secs[*i];
                    let limit = if s.kind == SecKind::Segment {
                        MAX_ELF_TABLE
                    } else {
                        opts.max_code_object
                    };
                    if s.size > limit {
                        held[*i] = Some(Err(too_large(what, s, limit)));
                        Ok(())
                    } else {
                        let mut b = Vec::new();
                        match r.read_to(&mut b, s.size) {
                            Ok(n) if n == s.size => {
                                held[*i] = Some(Ok(b));
                                Ok(())
                            }
                            Ok(_) => Err(io::ErrorKind::UnexpectedEof.into()),
                            Err(e) => Err(e),
                        }
                    }
                }
            };
            if let Err(e) = res {
                f.unreadable.push(failed(what, size, r.pos(), &e));
                return Some(f);
            }
        }
        if first_pass {
            first_pass = false;
            // A target inside `.hip_fatbin` that its walk did not start a bundle at: read on
            // its own, as the in-memory path does.
            for (i, p) in pointed.iter().enumerate() {
                if fb_range.as_ref().is_some_and(|r| r.contains(&p.0)) && !starts.contains(&p.0) {
                    later.push((p.0, Task::Pointed(i)));
                }
            }
        }
        tasks = later;
    }
    // What overlaps what was read, after every pass: unknown.
    let mut overlapped = Vec::new();
    for (at, task) in tasks {
        let r = record(at, "unsupported", format!("{what}: device code at {at} overlaps device code read before it; after {MAX_CODE_PASSES} passes it was not read from a stream; raise the memory budget with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET"));
        match task {
            Task::Pointed(i) => pointed_parts[i].unreadable.push(r),
            Task::Held(i) => held[i] = Some(Err(r)),
            Task::Fatbin { .. } => overlapped.push(r),
        }
    }
    // `.hipFatBinSegment`'s 24-byte records count as wrappers, as elf::inspect reads them.
    for &i in &segments {
        if let Some(Ok(b)) = &held[i] {
            for (k, w) in b.chunks_exact(WRAPPER_SIZE).enumerate() {
                let off = secs[i].offset + (WRAPPER_SIZE * k) as u64;
                if !h.wrappers.iter().any(|(o, _)| *o == off) {
                    h.wrappers
                        .push((off, u32::from_le_bytes(w[..4].try_into().unwrap())));
                }
            }
        }
    }
    h.wrappers.sort_unstable();
    if fatbin.is_none()
        && h.fatbin_nobits.is_none()
        && h.wrappers.is_empty()
        && h.kpack_ref.is_none()
        && rdc.is_empty()
        && offloading.is_empty()
    {
        return None;
    }
    // The report, in the order of scan/host.rs's jobs.
    let mut parts: Vec<Part> = Vec::new();
    parts.extend(walk::kpack_record(&h).map(Part::unreadable));
    parts.extend(wrapper_records.into_iter().map(Part::unreadable));
    parts.extend(overlapped.into_iter().map(Part::unreadable));
    if fatbin.is_some() {
        f.kind = "host-elf".into();
        parts.push(fb_part);
        if h.wrappers.iter().any(|(_, m)| *m == elf::HIPF) {
            for &at in starts
                .iter()
                .filter(|s| !pointed.iter().any(|p| p.0 == **s))
            {
                parts.push(Part::unreadable(unreferenced(at)));
            }
        }
    }
    for (i, p) in pointed_parts.into_iter().enumerate() {
        if !starts.contains(&pointed[i].0) {
            f.kind = "host-elf".into();
            parts.push(p);
        }
    }
    if !rdc.is_empty() || !offloading.is_empty() {
        if fatbin.is_none() && pointed.is_empty() {
            f.kind = "rdc-object".into();
        }
        for &i in &rdc {
            let SecKind::Rdc(id) = &secs[i].kind else {
                continue;
            };
            let off = secs[i].offset;
            parts.push(match held[i].take() {
                Some(Ok(b)) => walk::rdc_section(id, off, &b, opts.kernels),
                Some(Err(u)) => Part::unreadable(Unreadable {
                    entry_id: Some(id.clone()),
                    processor: Some(
                        crate::scan::bundle::EntryId::parse(id)
                            .processor()
                            .to_owned(),
                    )
                    .filter(|p| !p.is_empty()),
                    ..u
                }),
                None => walk::rdc_section(id, off, &[], opts.kernels),
            });
        }
        for &i in &offloading {
            let off = secs[i].offset;
            match held[i].take() {
                Some(Ok(b)) => match offload::images(&b, off) {
                    Ok(images) => {
                        for img in images {
                            parts.push(walk::offload_image(&img, opts.kernels));
                        }
                    }
                    Err(p) => parts.push(Part::unreadable(p.unreadable(0, None, None))),
                },
                Some(Err(u)) => parts.push(Part::unreadable(u)),
                None => {}
            }
        }
    }
    for p in parts {
        p.append_to(&mut f);
    }
    Some(f)
}

fn too_large(what: &str, s: &Sec, limit: u64) -> Unreadable {
    let name = match &s.kind {
        SecKind::Rdc(id) => format!("section __CLANG_OFFLOAD_BUNDLE__{id}"),
        SecKind::Offloading => "section .llvm.offloading".into(),
        _ => "section .hipFatBinSegment".into(),
    };
    record(
        s.offset,
        "too-large",
        walk::too_large(&format!("{what}: {name}"), s.size, limit),
    )
}
