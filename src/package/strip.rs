//! Debug-info stripping of the library the `.deb` ships, the way Debian's `dh_strip` does it for a
//! shared library (`strip --strip-unneeded`, which lintian's `unstripped-binary-or-object` and
//! Policy §10.1–10.2 ask for), and the detached debug file of a `-dbgsym` package
//! (`objcopy --only-keep-debug`).
//!
//! Only non-allocated sections are touched: the debug sections (`.debug_*`, `.zdebug_*`,
//! `.gnu.debuglto_*`, `.stab*`, `.line`), the static symbol table `.symtab` with its string table,
//! relocation sections that apply to removed sections, and `.comment`/`.note` (dh_strip runs
//! `strip --remove-section=.comment --remove-section=.note --strip-unneeded` on shared libraries). `strip --strip-debug` alone would keep
//! `.symtab`, and `file(1)`, which lintian asks, calls any file with a `.symtab` "not stripped".
//! Every byte from the start of the file to the end of the last segment or allocated section
//! (program headers, `.hip_fatbin`, `.dynsym`, …) is copied unchanged, except `e_shoff` and
//! `e_shnum` in the ELF header; section indices of allocated sections never change (`.dynsym`
//! refers to them). The kept non-allocated sections, a rebuilt `.shstrtab` and the section header
//! table follow. The result is a list of pieces of the memory-mapped input, read without a copy.
//!
//! Bounds: the input is untrusted (a build folder someone else made). Every offset and size read
//! from a header is checked against the input before it is used, sections that overlap in the
//! file are refused, an empty section (`SHT_NOBITS`, `SHT_NULL`) contributes no offset to the
//! layout, and a rewritten file is accepted only when each of its pieces lies inside the input
//! and it is at most [`MAX_GROWTH`] bytes larger than the input (a real strip makes the file
//! smaller); anything else is one error naming what is wrong.
//!
//! Source: the System V gABI ("ELF Header", "Sections", "Program Header"), binutils `strip(1)` and
//! `objcopy(1)` (`--strip-unneeded`, `--only-keep-debug`), debhelper `dh_strip(1)` (debug files
//! under `/usr/lib/debug/.build-id/NN/REST.debug`). ELF64 little-endian only, as
//! [`super::elf::ElfInfo`].

use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

const SHT_NULL: u32 = 0;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_RELA: u32 = 4;
const SHT_NOTE: u32 = 7;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
const SHT_SYMTAB_SHNDX: u32 = 18;
const SHF_ALLOC: u64 = 0x2;
const SHF_INFO_LINK: u64 = 0x40;
const EHDR_SIZE: usize = 64;
const SHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const NT_GNU_BUILD_ID: u32 = 3;
/// Largest alignment accepted for a section that is moved (64 KiB).
const MAX_MOVED_ALIGN: u64 = 1 << 16;
/// The most a rewritten file may exceed its input by, in bytes (64 KiB): the new ELF header,
/// alignment padding of the moved sections and the rebuilt `.shstrtab` replace bytes the input
/// already holds, so a consistent input never grows by more than a few bytes of padding.
pub const MAX_GROWTH: u64 = 1 << 16;

/// The bytes a [`Rewritten`] file is cut from: a memory map ([`map_file`]) or a buffer.
pub type Input = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// One section header (`Elf64_Shdr`) plus its name.
#[derive(Debug, Clone)]
struct Shdr {
    name: String,
    typ: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

impl Shdr {
    fn alloc(&self) -> bool {
        self.flags & SHF_ALLOC != 0
    }
    /// The file bytes of the section (empty for `SHT_NOBITS`).
    fn file_range(&self) -> Range<u64> {
        if self.typ == SHT_NOBITS || self.typ == SHT_NULL {
            self.offset..self.offset
        } else {
            self.offset..self.offset + self.size
        }
    }
    /// `sh_info` holds a section index (relocation sections, `SHF_INFO_LINK`).
    fn info_is_section(&self) -> bool {
        self.typ == SHT_REL || self.typ == SHT_RELA || self.flags & SHF_INFO_LINK != 0
    }
    fn encode(&self, name: u32) -> [u8; SHDR_SIZE] {
        let mut b = [0u8; SHDR_SIZE];
        b[0..4].copy_from_slice(&name.to_le_bytes());
        b[4..8].copy_from_slice(&self.typ.to_le_bytes());
        b[8..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.size.to_le_bytes());
        b[40..44].copy_from_slice(&self.link.to_le_bytes());
        b[44..48].copy_from_slice(&self.info.to_le_bytes());
        b[48..56].copy_from_slice(&self.align.to_le_bytes());
        b[56..64].copy_from_slice(&self.entsize.to_le_bytes());
        b
    }
}

/// The headers of an ELF64 little-endian executable or shared object.
struct Elf {
    shdrs: Vec<Shdr>,
    shstrndx: usize,
    /// End of the ELF header, the program header table and every segment's file bytes.
    loaded_end: u64,
}

fn u16_at(d: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([d[at], d[at + 1]])
}
fn u32_at(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(d[at..at + 4].try_into().unwrap())
}
fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

impl Elf {
    fn parse(d: &[u8]) -> anyhow::Result<Elf> {
        if d.len() < EHDR_SIZE || &d[..4] != b"\x7fELF" {
            anyhow::bail!("not an ELF file");
        }
        if d[4] != 2 || d[5] != 1 {
            anyhow::bail!("not a 64-bit little-endian ELF file");
        }
        let e_type = u16_at(d, 0x10);
        if e_type != 2 && e_type != 3 {
            anyhow::bail!("ELF type {e_type} is not an executable or shared object");
        }
        let len = d.len() as u64;
        let phoff = u64_at(d, 0x20);
        let shoff = u64_at(d, 0x28);
        let phentsize = u16_at(d, 0x36) as usize;
        let phnum = u16_at(d, 0x38) as u64;
        let shentsize = u16_at(d, 0x3a) as usize;
        let shnum = u16_at(d, 0x3c) as u64;
        let shstrndx = u16_at(d, 0x3e) as usize;
        if shnum == 0 || shstrndx == 0xffff {
            anyhow::bail!("no section header table, or an extended one (not supported)");
        }
        if shentsize != SHDR_SIZE || (phnum > 0 && phentsize != PHDR_SIZE) {
            anyhow::bail!("unexpected header entry sizes ({phentsize}, {shentsize})");
        }
        let in_file = |off: u64, size: u64| off.checked_add(size).is_some_and(|e| e <= len);
        if !in_file(shoff, shnum * SHDR_SIZE as u64) || !in_file(phoff, phnum * PHDR_SIZE as u64) {
            anyhow::bail!("header table outside the file");
        }
        if phnum > 0 && phoff < EHDR_SIZE as u64 {
            anyhow::bail!("program headers overlap the ELF header");
        }
        let mut loaded_end = EHDR_SIZE as u64;
        if phnum > 0 {
            loaded_end = loaded_end.max(phoff + phnum * PHDR_SIZE as u64);
        }
        for i in 0..phnum as usize {
            let p = phoff as usize + i * PHDR_SIZE;
            let (off, filesz) = (u64_at(d, p + 8), u64_at(d, p + 32));
            if filesz > 0 {
                if !in_file(off, filesz) {
                    anyhow::bail!("segment {i} outside the file");
                }
                loaded_end = loaded_end.max(off + filesz);
            }
        }
        let mut raw = Vec::new();
        for i in 0..shnum as usize {
            let s = shoff as usize + i * SHDR_SIZE;
            raw.push((
                u32_at(d, s),
                Shdr {
                    name: String::new(),
                    typ: u32_at(d, s + 4),
                    flags: u64_at(d, s + 8),
                    addr: u64_at(d, s + 16),
                    offset: u64_at(d, s + 24),
                    size: u64_at(d, s + 32),
                    link: u32_at(d, s + 40),
                    info: u32_at(d, s + 44),
                    align: u64_at(d, s + 48),
                    entsize: u64_at(d, s + 56),
                },
            ));
        }
        // gABI: header 0 is the null header (all zero) unless extended numbering, refused
        // above, stores counts in it. The writers copy it as it is, so a header 0 that
        // claimed bytes would point outside every file they write.
        if d[shoff as usize..shoff as usize + SHDR_SIZE]
            .iter()
            .any(|&b| b != 0)
        {
            anyhow::bail!("section header 0 is not the null header");
        }
        if shstrndx >= raw.len() {
            anyhow::bail!("e_shstrndx {shstrndx} is not a section");
        }
        // The section name table is rebuilt and moved: it must be a string table no segment
        // loads.
        let names_hdr = &raw[shstrndx].1;
        if shstrndx == 0 || names_hdr.typ != SHT_STRTAB || names_hdr.alloc() {
            anyhow::bail!("e_shstrndx {shstrndx} is not a non-allocated string table");
        }
        for (i, (_, s)) in raw.iter().enumerate() {
            let has_bytes = s.typ != SHT_NOBITS && s.typ != SHT_NULL;
            if has_bytes && !in_file(s.offset, s.size) {
                anyhow::bail!("section {i} outside the file");
            }
            // Sections this may move (non-allocated ones and notes) are padded to their
            // alignment; no real file aligns them beyond a page or two.
            if (!s.alloc() || s.typ == SHT_NOTE) && s.align > MAX_MOVED_ALIGN {
                anyhow::bail!("section {i} asks for an alignment of {} bytes", s.align);
            }
            let r = s.file_range();
            if s.alloc() && r.start < r.end && r.start < EHDR_SIZE as u64 {
                anyhow::bail!("section {i} overlaps the ELF header");
            }
        }
        // No two sections share file bytes (a moved section is copied once per header, so
        // overlapping headers could multiply the output).
        let mut spans: Vec<(u64, u64, usize)> = raw
            .iter()
            .enumerate()
            .map(|(i, (_, s))| (s.file_range().start, s.file_range().end, i))
            .filter(|(a, b, _)| a < b)
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                anyhow::bail!("sections {} and {} overlap in the file", w[0].2, w[1].2);
            }
        }
        let names = raw[shstrndx].1.file_range();
        let names = &d[names.start as usize..names.end as usize];
        // Names may share bytes (a name is often the tail of another), so the copies can add up
        // to more than the table: bound them, or 65,000 headers naming one long string would be
        // an allocation sized by the claim.
        let name_budget = (names.len() as u64).saturating_mul(4).max(1 << 20);
        let mut name_bytes = 0u64;
        let mut shdrs = Vec::new();
        for (i, (off, mut s)) in raw.into_iter().enumerate() {
            if i > 0 {
                let at = off as usize;
                let rest = names
                    .get(at..)
                    .ok_or_else(|| anyhow::anyhow!("section {i}: name outside .shstrtab"))?;
                let end = rest.iter().position(|&b| b == 0).ok_or_else(|| {
                    anyhow::anyhow!("section {i}: unterminated name in .shstrtab")
                })?;
                name_bytes += end as u64;
                if name_bytes > name_budget {
                    anyhow::bail!(
                        "section names add up to more than {name_budget} bytes (a {}-byte .shstrtab)",
                        names.len()
                    );
                }
                s.name = String::from_utf8_lossy(&rest[..end]).into_owned();
            }
            shdrs.push(s);
        }
        Ok(Elf {
            shdrs,
            shstrndx,
            loaded_end,
        })
    }
}

/// Whether a non-allocated section named `name` is debugging information.
fn is_debug_name(name: &str) -> bool {
    name.starts_with(".debug")
        || name.starts_with(".zdebug")
        || name.starts_with(".gnu.debuglto_")
        || name.starts_with(".stab")
        || name == ".line"
}

/// Whether [`strip`] removes a non-allocated section named `name`: debugging information, plus
/// `.comment` and `.note`, which `dh_strip` also removes from shared libraries.
fn is_stripped_name(name: &str) -> bool {
    is_debug_name(name) || name == ".comment" || name == ".note"
}

/// A piece of a rewritten file: bytes of the input, or new bytes.
#[derive(Debug, Clone)]
enum Piece {
    Input(Range<usize>),
    Bytes(Vec<u8>),
}

/// A file assembled from pieces of an input file and new bytes (see the module docs);
/// [`Rewritten::reader`] streams it without a copy.
#[derive(Clone)]
pub struct Rewritten {
    map: Input,
    pieces: Vec<Piece>,
    len: u64,
    /// Names of the sections removed (stripping) or emptied (`SHT_NOBITS`, debug file), in
    /// section order; empty when the file is the input unchanged.
    pub changed_sections: Vec<String>,
}

impl std::fmt::Debug for Rewritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rewritten")
            .field("len", &self.len)
            .field("pieces", &self.pieces.len())
            .field("changed_sections", &self.changed_sections)
            .finish()
    }
}

impl Rewritten {
    /// The whole input, unchanged.
    pub fn unchanged(map: Input) -> Rewritten {
        Rewritten::whole(map, Vec::new())
    }

    /// The whole input, described as the result of a rewrite that changed `changed_sections`
    /// (e.g. a stripped file read back from where it was written).
    pub fn whole(map: Input, changed_sections: Vec<String>) -> Rewritten {
        let len = (*map).as_ref().len();
        Rewritten {
            map,
            pieces: vec![Piece::Input(0..len)],
            len: len as u64,
            changed_sections,
        }
    }

    /// A file of `pieces` cut from `map`, checked: every input piece lies inside the input, and
    /// the whole is at most [`MAX_GROWTH`] bytes larger than the input.
    ///
    /// Errors (one line): a piece outside the input; a file larger than that bound (the section
    /// headers describe a layout no consistent ELF file has).
    fn new(map: Input, pieces: Vec<Piece>, changed_sections: Vec<String>) -> anyhow::Result<Self> {
        let input = (*map).as_ref().len() as u64;
        let mut len = 0u64;
        for p in &pieces {
            len = len.saturating_add(match p {
                Piece::Input(r) => {
                    if r.start > r.end || r.end as u64 > input {
                        anyhow::bail!(
                            "inconsistent section headers: bytes {}..{} are outside the {input}-byte file",
                            r.start,
                            r.end
                        );
                    }
                    (r.end - r.start) as u64
                }
                Piece::Bytes(b) => b.len() as u64,
            });
        }
        if len > input.saturating_add(MAX_GROWTH) {
            anyhow::bail!(
                "inconsistent section headers: the rewritten file would be {len} bytes, more than the {input}-byte input plus {} KiB",
                MAX_GROWTH >> 10
            );
        }
        Ok(Rewritten {
            map,
            pieces,
            len,
            changed_sections,
        })
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A reader over the bytes.
    pub fn reader(&self) -> impl Read + '_ {
        let data: &[u8] = (*self.map).as_ref();
        let slices: Vec<&[u8]> = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Input(r) => &data[r.clone()],
                Piece::Bytes(b) => &b[..],
            })
            .collect();
        SliceReader { slices, at: 0 }
    }

    /// The bytes, copied into one buffer (tests, small files).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len as usize);
        self.reader()
            .read_to_end(&mut v)
            .expect("reading memory cannot fail");
        v
    }
}

struct SliceReader<'a> {
    slices: Vec<&'a [u8]>,
    at: usize,
}

impl Read for SliceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at < self.slices.len() {
            let s = &mut self.slices[self.at];
            if s.is_empty() {
                self.at += 1;
                continue;
            }
            let n = s.len().min(buf.len());
            buf[..n].copy_from_slice(&s[..n]);
            *s = &s[n..];
            return Ok(n);
        }
        Ok(0)
    }
}

/// Memory-map `path` read-only. Errors name the file.
pub fn map_file(path: &Path) -> anyhow::Result<Arc<memmap2::Mmap>> {
    let file = fs_err::File::open(path)?;
    let map = crate::fsutil::map_readonly(&file)
        .with_context(|| format!("cannot map {}", path.display()))?;
    Ok(Arc::new(map))
}

/// Builds the tail of a rewritten file: section contents and the header table.
struct Layout {
    pieces: Vec<Piece>,
    end: u64,
}

impl Layout {
    fn pad_to(&mut self, align: u64) {
        let align = align.max(1);
        let pad = (align - self.end % align) % align;
        if pad > 0 {
            self.pieces.push(Piece::Bytes(vec![0; pad as usize]));
            self.end += pad;
        }
    }
    /// Append input bytes `r` (nothing for an empty range, whose offset is never read).
    fn push_input(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        self.end += r.end - r.start;
        self.pieces
            .push(Piece::Input(r.start as usize..r.end as usize));
    }
    fn push_bytes(&mut self, b: Vec<u8>) {
        self.end += b.len() as u64;
        self.pieces.push(Piece::Bytes(b));
    }
}

/// A section name table for `shdrs` (`""` first); returns the bytes and each header's offset.
fn name_table(shdrs: &[Shdr]) -> (Vec<u8>, Vec<u32>) {
    let mut table = vec![0u8];
    let mut offs = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    for s in shdrs {
        if s.name.is_empty() {
            offs.push(0);
            continue;
        }
        let off = *seen.entry(s.name.clone()).or_insert_with(|| {
            let o = table.len() as u32;
            table.extend_from_slice(s.name.as_bytes());
            table.push(0);
            o
        });
        offs.push(off);
    }
    (table, offs)
}

/// The ELF header of `data` with new `e_shoff`, `e_shnum`, `e_shstrndx` and, for `drop_phdrs`,
/// no program header table.
fn new_ehdr(data: &[u8], shoff: u64, shnum: usize, shstrndx: usize, drop_phdrs: bool) -> Vec<u8> {
    let mut h = data[..EHDR_SIZE].to_vec();
    h[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    h[0x3c..0x3e].copy_from_slice(&(shnum as u16).to_le_bytes());
    h[0x3e..0x40].copy_from_slice(&(shstrndx as u16).to_le_bytes());
    if drop_phdrs {
        h[0x20..0x28].fill(0);
        h[0x38..0x3a].fill(0);
    }
    h
}

/// Strip `map` (an ELF64 shared object or executable) as described in the module docs. A file
/// with nothing to remove comes back unchanged.
///
/// Errors: not an ELF64 little-endian executable or shared object; malformed headers; an
/// allocated section that links to a section that would be removed.
pub fn strip<B: AsRef<[u8]> + Send + Sync + 'static>(map: Arc<B>) -> anyhow::Result<Rewritten> {
    let map: Input = map;
    let data: &[u8] = (*map).as_ref();
    let elf = Elf::parse(data)?;
    let n = elf.shdrs.len();
    let mut removed = vec![false; n];
    for (i, s) in elf.shdrs.iter().enumerate() {
        if i != elf.shstrndx && !s.alloc() && (s.typ == SHT_SYMTAB || is_stripped_name(&s.name)) {
            removed[i] = true;
        }
    }
    // Sections that only make sense with a removed one go too; anything else linking to one is a
    // layout this does not understand.
    loop {
        let mut changed = false;
        for (i, s) in elf.shdrs.iter().enumerate() {
            if removed[i] {
                continue;
            }
            let link = removed.get(s.link as usize).copied().unwrap_or(false) && s.link != 0;
            let info = s.info_is_section()
                && s.info != 0
                && removed.get(s.info as usize).copied().unwrap_or(false);
            if link || info {
                if !s.alloc() && matches!(s.typ, SHT_REL | SHT_RELA | SHT_SYMTAB_SHNDX) {
                    removed[i] = true;
                    changed = true;
                } else {
                    anyhow::bail!(
                        "cannot strip: section {} ({}) refers to a debug section or the symbol table",
                        i,
                        s.name
                    );
                }
            }
        }
        if !changed {
            break;
        }
    }
    // The string table of a removed .symtab, unless something kept still uses it.
    for (i, s) in elf.shdrs.iter().enumerate() {
        if !(removed[i] && s.typ == SHT_SYMTAB) {
            continue;
        }
        let t = s.link as usize;
        let Some(strtab) = elf.shdrs.get(t) else {
            continue;
        };
        let used = elf
            .shdrs
            .iter()
            .enumerate()
            .any(|(j, o)| !removed[j] && j != t && o.link as usize == t);
        if t != 0 && t != elf.shstrndx && !strtab.alloc() && strtab.typ == SHT_STRTAB && !used {
            removed[t] = true;
        }
    }
    if !removed.iter().any(|&r| r) {
        return Ok(Rewritten::unchanged(map));
    }
    let data: &[u8] = (*map).as_ref();

    // New indices: allocated sections keep theirs (a removed section before one becomes an
    // inactive SHT_NULL header); removed sections after the last allocated one are dropped.
    let last_alloc = elf.shdrs.iter().rposition(Shdr::alloc).unwrap_or(0);
    let mut new_index = vec![None; n];
    let mut out: Vec<Shdr> = Vec::new();
    for (i, s) in elf.shdrs.iter().enumerate() {
        if removed[i] {
            if i < last_alloc {
                new_index[i] = Some(out.len());
                out.push(Shdr {
                    name: String::new(),
                    typ: SHT_NULL,
                    flags: 0,
                    addr: 0,
                    offset: 0,
                    size: 0,
                    link: 0,
                    info: 0,
                    align: 0,
                    entsize: 0,
                });
            }
            continue;
        }
        new_index[i] = Some(out.len());
        out.push(s.clone());
    }
    let remap = |old: u32| -> u32 {
        new_index
            .get(old as usize)
            .copied()
            .flatten()
            .map_or(0, |v| v as u32)
    };
    let kept: Vec<usize> = (0..n).filter(|&i| !removed[i]).collect();
    for &i in &kept {
        let s = &mut out[new_index[i].unwrap()];
        s.link = remap(s.link);
        if s.info_is_section() {
            s.info = remap(s.info);
        }
    }

    // Bytes up to the end of the last segment or allocated section stay where they are.
    // Only sections with file bytes count: the `sh_offset` of a `SHT_NOBITS` (`.bss`) or
    // `SHT_NULL` header is never read, and a corrupted one must not stretch the layout.
    let mut keep_end = elf.loaded_end;
    for s in &elf.shdrs {
        let r = s.file_range();
        if s.alloc() && r.start < r.end {
            keep_end = keep_end.max(r.end);
        }
    }
    // A kept non-allocated section that starts inside that range stays in place too.
    for &i in &kept {
        let r = elf.shdrs[i].file_range();
        if i != elf.shstrndx && r.start < r.end && r.start < keep_end {
            keep_end = keep_end.max(r.end);
        }
    }
    let mut tail = Layout {
        pieces: Vec::new(),
        end: keep_end,
    };
    let mut movers: Vec<usize> = kept
        .iter()
        .copied()
        .filter(|&i| {
            let r = elf.shdrs[i].file_range();
            i != elf.shstrndx && r.start >= keep_end && r.start < r.end
        })
        .collect();
    movers.sort_by_key(|&i| elf.shdrs[i].offset);
    for i in movers {
        let s = &elf.shdrs[i];
        tail.pad_to(s.align);
        out[new_index[i].unwrap()].offset = tail.end;
        tail.push_input(s.file_range());
    }
    let (names, name_offs) = name_table(&out);
    let shstr = new_index[elf.shstrndx].unwrap();
    out[shstr].offset = tail.end;
    out[shstr].size = names.len() as u64;
    tail.push_bytes(names);
    tail.pad_to(8);
    let shoff = tail.end;
    let mut table = Vec::with_capacity(out.len() * SHDR_SIZE);
    for (s, name) in out.iter().zip(&name_offs) {
        table.extend_from_slice(&s.encode(*name));
    }
    tail.push_bytes(table);

    if keep_end > data.len() as u64 {
        anyhow::bail!(
            "inconsistent section headers: the loaded part ends past the end of the file"
        );
    }
    let mut pieces = vec![
        Piece::Bytes(new_ehdr(data, shoff, out.len(), shstr, false)),
        Piece::Input(EHDR_SIZE..keep_end as usize),
    ];
    pieces.extend(tail.pieces);
    let changed = (0..n)
        .filter(|&i| removed[i])
        .map(|i| elf.shdrs[i].name.clone())
        .collect();
    let r = Rewritten::new(map, pieces, changed)?;
    debug_assert_eq!(r.len, tail.end);
    Ok(r)
}

/// The detached debug file of `map` for a `-dbgsym` package, as `objcopy --only-keep-debug`
/// makes it: every section header at its index, allocated sections other than notes turned into
/// `SHT_NOBITS` (same address and size, no bytes), notes (the build ID) and non-allocated
/// sections (DWARF, `.symtab`) with their bytes, and no program headers.
///
/// Errors: as [`strip`].
pub fn only_keep_debug<B: AsRef<[u8]> + Send + Sync + 'static>(
    map: Arc<B>,
) -> anyhow::Result<Rewritten> {
    let map: Input = map;
    let data: &[u8] = (*map).as_ref();
    let elf = Elf::parse(data)?;
    let mut out = elf.shdrs.clone();
    let mut changed = Vec::new();
    let mut tail = Layout {
        pieces: Vec::new(),
        end: EHDR_SIZE as u64,
    };
    let mut order: Vec<usize> = (1..out.len()).collect();
    order.sort_by_key(|&i| elf.shdrs[i].offset);
    for i in order {
        let s = &elf.shdrs[i];
        if s.alloc() && s.typ != SHT_NOTE {
            if s.typ != SHT_NOBITS {
                changed.push(s.name.clone());
            }
            out[i].typ = SHT_NOBITS;
            out[i].offset = tail.end;
            continue;
        }
        if i == elf.shstrndx || s.typ == SHT_NOBITS {
            continue;
        }
        tail.pad_to(s.align);
        out[i].offset = tail.end;
        tail.push_input(s.file_range());
    }
    let (names, name_offs) = name_table(&out);
    out[elf.shstrndx].offset = tail.end;
    out[elf.shstrndx].size = names.len() as u64;
    tail.push_bytes(names);
    tail.pad_to(8);
    let shoff = tail.end;
    let mut table = Vec::with_capacity(out.len() * SHDR_SIZE);
    for (s, name) in out.iter().zip(&name_offs) {
        table.extend_from_slice(&s.encode(*name));
    }
    tail.push_bytes(table);
    let mut pieces = vec![Piece::Bytes(new_ehdr(
        data,
        shoff,
        out.len(),
        elf.shstrndx,
        true,
    ))];
    pieces.extend(tail.pieces);
    let r = Rewritten::new(map, pieces, changed)?;
    debug_assert_eq!(r.len, tail.end);
    Ok(r)
}

/// The GNU build ID (`NT_GNU_BUILD_ID` note of an allocated `SHT_NOTE` section), lowercase hex,
/// or `None` when the file has none. Errors: as [`strip`].
pub fn build_id(data: &[u8]) -> anyhow::Result<Option<String>> {
    let elf = Elf::parse(data)?;
    for s in elf.shdrs.iter().filter(|s| s.typ == SHT_NOTE) {
        let r = s.file_range();
        let mut note = &data[r.start as usize..r.end as usize];
        // Elf64_Nhdr: namesz, descsz, type; name and desc padded to 4 bytes.
        while note.len() >= 12 {
            let namesz = u32_at(note, 0) as usize;
            let descsz = u32_at(note, 4) as usize;
            let typ = u32_at(note, 8);
            let name_end = 12 + namesz.div_ceil(4) * 4;
            let desc_end = name_end + descsz.div_ceil(4) * 4;
            if desc_end > note.len() {
                break;
            }
            if typ == NT_GNU_BUILD_ID && &note[12..12 + namesz] == b"GNU\0" && descsz > 0 {
                return Ok(Some(hex::encode(&note[name_end..name_end + descsz])));
            }
            note = &note[desc_end..];
        }
    }
    Ok(None)
}

/// Whether the file has any section [`strip`] would remove (debug information or `.symtab`).
pub fn has_debug_info(data: &[u8]) -> anyhow::Result<bool> {
    let elf = Elf::parse(data)?;
    Ok(elf
        .shdrs
        .iter()
        .any(|s| !s.alloc() && (s.typ == SHT_SYMTAB || is_debug_name(&s.name))))
}

#[cfg(test)]
#[path = "strip_tests.rs"]
mod tests;
