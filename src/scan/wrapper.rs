//! The `__hip_fatbin_wrapper` records of a host ELF, followed the way the HIP runtime follows
//! them: where the device code it loads really is, whatever the sections are called.
//!
//! A wrapper is 24 bytes: u32 magic ([`elf::HIPF`], or [`elf::HIPK`] after a kpack split), u32
//! version 1, u64 pointer to the fat binary, u64 null (clang `CGCUDANV.cpp`,
//! `makeModuleCtorFunction`, which puts it in `.hipFatBinSegment`). The module constructor hands
//! its address to `__hipRegisterFatBinary` (ROCm/clr `hipamd/src/hip_platform.cpp`), which checks
//! the magic and reads the bundle at the pointer (`hipamd/src/hip_fatbin.cpp`): no section name
//! is involved. In a shared library the pointer is filled at load time by a dynamic relocation
//! (`R_X86_64_RELATIVE`, or `R_X86_64_64` against `__hip_fatbin*`, x86-64 psABI §4.4; or a
//! `DT_RELR` entry, gABI), found through `PT_DYNAMIC` (`DT_RELA`/`DT_RELASZ`, `DT_RELR`/
//! `DT_RELRSZ`, `DT_SYMTAB`) with `PT_LOAD` mapping addresses to file offsets, so this reads
//! the same with the section headers gone (`llvm-objcopy --strip-sections`). In an object
//! (`ET_REL`) it is a static relocation in the `SHT_RELA` section that applies to the wrapper's
//! section.

use object::elf::{FileHeader64, ET_EXEC, ET_REL, PT_DYNAMIC, PT_LOAD, SHT_PROGBITS, SHT_RELA};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{LittleEndian, ReadRef};

use super::{elf, Problem};

/// `R_X86_64_64`: symbol value plus addend (x86-64 psABI, table 4.9).
const R_X86_64_64: u32 = 1;
/// `R_X86_64_RELATIVE`: load base plus addend (x86-64 psABI, table 4.9).
const R_X86_64_RELATIVE: u32 = 8;
/// `DT_RELA`, `DT_RELASZ`, `DT_SYMTAB`, `DT_RELRSZ`, `DT_RELR` (gABI, "Dynamic Section").
const DT_RELA: u64 = 7;
const DT_RELASZ: u64 = 8;
const DT_SYMTAB: u64 = 6;
const DT_RELRSZ: u64 = 35;
const DT_RELR: u64 = 36;
/// Size of an `Elf64_Rela` and of an `Elf64_Sym`, in bytes.
const RELA_SIZE: usize = 24;
const SYM_SIZE: usize = 24;
/// How [`follow_in_object`] says the pointer names a symbol defined elsewhere.
const UNDEFINED: &str = "is undefined in this object: the fat binary is made at the link";
/// Size of a wrapper, in bytes.
pub const WRAPPER_SIZE: usize = 24;
/// Most wrapper candidates followed in one host ELF (a real library has one per translation unit
/// with device code); past this the file is unknown. Without a bound, 8 million magics in a
/// 64 MB library kept a scan busy for more than ten minutes.
pub const MAX_WRAPPERS: usize = 1 << 16;

/// The bytes of a host ELF as this module reads them: the whole file in memory (`&[u8]`), or what
/// the passes over a streamed archive member captured (`scan/input/stream_elf.rs`), whose reads
/// of bytes it does not hold fail and are remembered, to be read in the next pass.
pub trait Source<'a>: ReadRef<'a> {
    /// Push the file offset and magic of every wrapper candidate in `[start, end)`: a HIPF or
    /// HIPK magic followed by version 1 at an 8-byte boundary, with all 24 bytes of the wrapper
    /// before `end`.
    fn candidates(self, start: u64, end: u64, out: &mut Vec<(u64, u32)>);
}

impl<'a> Source<'a> for &'a [u8] {
    fn candidates(self, start: u64, end: u64, out: &mut Vec<(u64, u32)>) {
        candidates(self, start, end, out)
    }
}

/// Whether the 8 bytes `w` (little-endian) are a wrapper's magic and version 1: its magic.
pub fn candidate_magic(w: u64) -> Option<u32> {
    let hipf = (elf::HIPF as u64) | (1 << 32);
    let hipk = (elf::HIPK as u64) | (1 << 32);
    (w == hipf || w == hipk).then_some(w as u32)
}

/// One `__hip_fatbin_wrapper` found in a host ELF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapper {
    /// File offset of the wrapper.
    pub offset: u64,
    /// Its magic ([`elf::HIPF`] or [`elf::HIPK`]).
    pub magic: u32,
    /// Where its pointer leads: the file offset of the fat binary and the end (exclusive file
    /// offset) of the loaded bytes that hold it; or why the pointer cannot be followed.
    pub target: Result<(u64, u64), String>,
    /// In an object file (`ET_REL`): the pointer names a symbol this object does not define
    /// (an `-fgpu-rdc` object's wrapper: the fat binary is made at the device link).
    pub unlinked: bool,
}

/// A file range loaded at an address: `PT_LOAD` (`vaddr`, `offset`, `filesz`), or an object's
/// section (address 0 is the section's start).
#[derive(Debug, Clone, Copy)]
struct Mapped {
    vaddr: u64,
    offset: u64,
    size: u64,
}

/// The file offset of address `v` and the end of its mapped bytes, when `v` lies in the file
/// bytes of one of `maps`.
fn file_offset(maps: &[Mapped], v: u64) -> Option<(u64, u64)> {
    maps.iter().find_map(|m| {
        let d = v.checked_sub(m.vaddr)?;
        (d < m.size).then(|| (m.offset + d, m.offset + m.size))
    })
}

fn u64_at<'a, R: ReadRef<'a>>(d: R, at: u64) -> Option<u64> {
    Some(u64::from_le_bytes(
        d.read_bytes_at(at, 8).ok()?.try_into().ok()?,
    ))
}

fn file_len<'a, R: ReadRef<'a>>(d: R) -> u64 {
    d.len().unwrap_or(0)
}

/// The wrappers in `d[start..end]` (file offsets), looked for at every 8-byte boundary: a HIPF or
/// HIPK magic followed by version 1. Returns their file offsets and magics.
fn candidates(d: &[u8], start: u64, end: u64, out: &mut Vec<(u64, u32)>) {
    let end = end.min(d.len() as u64);
    let mut at = start.next_multiple_of(8);
    while at + WRAPPER_SIZE as u64 <= end {
        let w = u64::from_le_bytes(d[at as usize..at as usize + 8].try_into().unwrap());
        if let Some(m) = candidate_magic(w) {
            out.push((at, m));
        }
        at += 8;
    }
}

/// The dynamic relocations of a loaded ELF that matter here: for each relocated address, the
/// relocation type, symbol index and addend (`DT_RELA`), or that a `DT_RELR` entry covers it
/// (type 0: the addend is the value in place).
#[derive(Default)]
struct Relocs {
    rela: Vec<(u64, u32, u32, u64)>,
    relr: Vec<u64>,
    symtab: Option<u64>,
}

/// Read the `PT_DYNAMIC` tables of `d`. Errors: a table that lies outside the loaded bytes.
fn dynamic_relocs<'a, R: ReadRef<'a>>(
    d: R,
    maps: &[Mapped],
    dynamic: (u64, u64),
) -> Result<Relocs, Problem> {
    let (doff, dsize) = dynamic;
    let bad = |what: String| Problem::new(doff, "bad-elf", what);
    let dyn_end = doff.saturating_add(dsize).min(file_len(d));
    let mut tags: Vec<(u64, u64)> = Vec::new();
    let dyn_bytes = d
        .read_bytes_at(doff, dyn_end.saturating_sub(doff))
        .unwrap_or(&[]);
    for e in dyn_bytes.chunks_exact(16) {
        let tag = u64::from_le_bytes(e[..8].try_into().unwrap());
        if tag == 0 {
            break;
        }
        tags.push((tag, u64::from_le_bytes(e[8..].try_into().unwrap())));
    }
    let get = |t: u64| tags.iter().find(|(k, _)| *k == t).map(|(_, v)| *v);
    let table = |addr: u64, size: u64, name: &str| -> Result<&'a [u8], Problem> {
        let (off, end) = file_offset(maps, addr).ok_or_else(|| {
            bad(format!(
                "{name} at address {addr:#x} is outside the loaded file bytes"
            ))
        })?;
        if size > end - off {
            return Err(bad(format!(
                "{name} ({size} bytes at address {addr:#x}) runs past the loaded file bytes"
            )));
        }
        d.read_bytes_at(off, size).map_err(|()| {
            bad(format!(
                "{name} ({size} bytes at address {addr:#x}) does not read"
            ))
        })
    };
    let mut r = Relocs {
        symtab: get(DT_SYMTAB),
        ..Relocs::default()
    };
    if let (Some(a), Some(n)) = (get(DT_RELA), get(DT_RELASZ)) {
        for e in table(a, n, "DT_RELA")?.chunks_exact(RELA_SIZE) {
            let info = u64::from_le_bytes(e[8..16].try_into().unwrap());
            r.rela.push((
                u64::from_le_bytes(e[..8].try_into().unwrap()),
                info as u32,
                (info >> 32) as u32,
                u64::from_le_bytes(e[16..24].try_into().unwrap()),
            ));
        }
    }
    if let (Some(a), Some(n)) = (get(DT_RELR), get(DT_RELRSZ)) {
        // gABI DT_RELR: an even entry is an address (relocated, then the next word is the
        // base); an odd one is a bitmap of the 63 words after the base.
        let mut base = 0u64;
        for e in table(a, n, "DT_RELR")?.chunks_exact(8) {
            let v = u64::from_le_bytes(e.try_into().unwrap());
            if v & 1 == 0 {
                r.relr.push(v);
                base = v.wrapping_add(8);
            } else {
                for bit in 1..64 {
                    if v >> bit & 1 == 1 {
                        r.relr.push(base.wrapping_add(8 * (bit - 1)));
                    }
                }
                base = base.wrapping_add(8 * 63);
            }
        }
    }
    r.rela.sort_unstable_by_key(|e| e.0);
    r.relr.sort_unstable();
    Ok(r)
}

/// Every wrapper of the host ELF `d` and where its pointer leads. Empty when there is none.
///
/// Errors: the ELF or program header table is malformed, or a dynamic relocation table lies
/// outside the loaded bytes.
pub fn find<'a, R: Source<'a>>(d: R) -> Result<Vec<Wrapper>, Problem> {
    let endian = LittleEndian;
    let hdr = FileHeader64::<LittleEndian>::parse(d)
        .map_err(|e| Problem::new(0, "bad-elf", format!("host ELF header: {e}")))?;
    if hdr.e_type(endian) == ET_REL {
        return find_in_object(d, hdr);
    }
    let phdrs = hdr
        .program_headers(endian, d)
        .map_err(|e| Problem::new(0x20, "bad-elf", format!("program headers: {e}")))?;
    let maps: Vec<Mapped> = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == PT_LOAD)
        .map(|p| Mapped {
            vaddr: p.p_vaddr(endian),
            offset: p.p_offset(endian),
            size: p
                .p_filesz(endian)
                .min(file_len(d).saturating_sub(p.p_offset(endian))),
        })
        .collect();
    let mut found = Vec::new();
    for m in &maps {
        // The wrapper's address is 8-aligned; PT_LOAD keeps address and offset congruent
        // modulo the page size, so its file offset is too.
        d.candidates(m.offset, m.offset + m.size, &mut found);
    }
    found.sort_unstable();
    found.dedup();
    if found.is_empty() {
        return Ok(Vec::new());
    }
    too_many(&found)?;
    let dynamic = phdrs
        .iter()
        .find(|p| p.p_type(endian) == PT_DYNAMIC)
        .map(|p| (p.p_offset(endian), p.p_filesz(endian)));
    let relocs = match dynamic {
        Some(dy) => Some(dynamic_relocs(d, &maps, dy)?),
        None => None,
    };
    let exec = hdr.e_type(endian) == ET_EXEC;
    Ok(found
        .into_iter()
        .map(|(offset, magic)| {
            let target = follow_loaded(d, &maps, relocs.as_ref(), exec, offset);
            Wrapper {
                offset,
                magic,
                target,
                unlinked: false,
            }
        })
        .collect())
}

/// Errors: more than [`MAX_WRAPPERS`] candidates.
fn too_many(found: &[(u64, u32)]) -> Result<(), Problem> {
    match found.get(MAX_WRAPPERS) {
        Some(&(at, _)) => Err(Problem::new(
            at,
            "unsupported",
            format!("more than {MAX_WRAPPERS} __hip_fatbin_wrapper magics; not followed"),
        )),
        None => Ok(()),
    }
}

/// The address of a wrapper's pointer in a loaded ELF, from its relocation (or, in an executable
/// without one, from the bytes in place), mapped to a file offset.
fn follow_loaded<'a, R: ReadRef<'a>>(
    d: R,
    maps: &[Mapped],
    relocs: Option<&Relocs>,
    exec: bool,
    offset: u64,
) -> Result<(u64, u64), String> {
    let at = offset + 8;
    let vaddr = maps
        .iter()
        .find(|m| at >= m.offset && at - m.offset < m.size)
        .map(|m| m.vaddr + (at - m.offset))
        .ok_or("its pointer is not in the loaded bytes")?;
    let in_place = u64_at(d, at).ok_or("its pointer runs past the end of the file")?;
    let (rela, count) = relocs.map_or((None, 0), |r| {
        let i = r.rela.partition_point(|e| e.0 < vaddr);
        let n = r.rela[i..].iter().take_while(|e| e.0 == vaddr).count()
            + usize::from(r.relr.binary_search(&vaddr).is_ok());
        (r.rela.get(i).filter(|e| e.0 == vaddr), n)
    });
    if count > 1 {
        return Err(format!(
            "{count} dynamic relocations fill its pointer (address {vaddr:#x}); which one wins is the loader's order"
        ));
    }
    let value = match rela {
        Some(&(_, R_X86_64_RELATIVE, _, addend)) => addend,
        Some(&(_, R_X86_64_64, sym, addend)) => {
            let symtab = relocs
                .and_then(|r| r.symtab)
                .ok_or("its R_X86_64_64 relocation names a symbol, and there is no DT_SYMTAB")?;
            let entry = symtab
                .checked_add(sym as u64 * SYM_SIZE as u64)
                .and_then(|a| file_offset(maps, a))
                .filter(|(o, e)| o + SYM_SIZE as u64 <= *e)
                .ok_or_else(|| format!("its relocation's symbol {sym} is outside the loaded bytes"))?
                .0;
            let entry = d
                .read_bytes_at(entry, SYM_SIZE as u64)
                .map_err(|()| format!("its relocation's symbol {sym} does not read"))?;
            let shndx = u16::from_le_bytes([entry[6], entry[7]]);
            if shndx == 0 {
                return Err(format!("its relocation's symbol {sym} is undefined here: the fat binary is resolved from another library at load time"));
            }
            u64::from_le_bytes(entry[8..16].try_into().unwrap()).wrapping_add(addend)
        }
        Some(&(_, ty, _, _)) => {
            return Err(format!(
                "its pointer has a relocation of type {ty}, neither R_X86_64_RELATIVE nor R_X86_64_64"
            ))
        }
        None if relocs.is_some_and(|r| r.relr.binary_search(&vaddr).is_ok()) => in_place,
        None if exec => in_place,
        None => {
            return Err(format!(
                "no dynamic relocation fills its pointer (address {vaddr:#x}), so it does not point into this library once loaded"
            ))
        }
    };
    file_offset(maps, value).ok_or_else(|| {
        format!("its pointer ({value:#x}) leads outside the file bytes the library loads")
    })
}

/// The wrappers of an object file (`ET_REL`): looked for in every `SHT_PROGBITS` section and
/// followed through the `SHT_RELA` section that applies to it (`R_X86_64_64` against a symbol
/// defined in a section of this file: that section's file offset plus the symbol's value plus
/// the addend).
fn find_in_object<'a, R: Source<'a>>(
    d: R,
    hdr: &FileHeader64<LittleEndian>,
) -> Result<Vec<Wrapper>, Problem> {
    let endian = LittleEndian;
    let sections = hdr
        .sections(endian, d)
        .map_err(|e| Problem::new(0x28, "bad-elf", format!("host ELF section table: {e}")))?;
    let mut out = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        if s.sh_type(endian) != SHT_PROGBITS {
            continue;
        }
        let (off, size) = (s.sh_offset(endian), s.sh_size(endian));
        let mut found = Vec::new();
        d.candidates(off, off.saturating_add(size), &mut found);
        too_many(&found)?;
        for (offset, magic) in found {
            let target = follow_in_object(d, &sections, i, offset - off);
            let unlinked = matches!(&target, Err(why) if why.contains(UNDEFINED));
            out.push(Wrapper {
                offset,
                magic,
                target,
                unlinked,
            });
        }
    }
    Ok(out)
}

/// The target of the wrapper at `at` bytes into section `index` of an object file.
fn follow_in_object<'a, R: ReadRef<'a>>(
    d: R,
    sections: &object::read::elf::SectionTable<'a, FileHeader64<LittleEndian>, R>,
    index: usize,
    at: u64,
) -> Result<(u64, u64), String> {
    let endian = LittleEndian;
    for rs in sections.iter() {
        if rs.sh_type(endian) != SHT_RELA || rs.sh_info(endian) as usize != index {
            continue;
        }
        let Ok(relas) = rs.data(endian, d) else {
            return Err("its relocation section does not read".into());
        };
        for e in relas.chunks_exact(RELA_SIZE) {
            if u64::from_le_bytes(e[..8].try_into().unwrap()) != at + 8 {
                continue;
            }
            let info = u64::from_le_bytes(e[8..16].try_into().unwrap());
            let addend = u64::from_le_bytes(e[16..24].try_into().unwrap());
            if info as u32 != R_X86_64_64 {
                return Err(format!(
                    "its pointer has a relocation of type {}, not R_X86_64_64",
                    info as u32
                ));
            }
            let symtab = sections
                .section(object::SectionIndex(rs.sh_link(endian) as usize))
                .ok()
                .and_then(|st| st.data(endian, d).ok())
                .ok_or("its relocation's symbol table does not read")?;
            let sym = (info >> 32) as usize;
            let entry = symtab
                .get(sym * SYM_SIZE..(sym + 1) * SYM_SIZE)
                .ok_or_else(|| format!("its relocation's symbol {sym} is not in the table"))?;
            let shndx = u16::from_le_bytes([entry[6], entry[7]]) as usize;
            let value = u64::from_le_bytes(entry[8..16].try_into().unwrap());
            if shndx == 0 {
                return Err(format!("its relocation's symbol {sym} {UNDEFINED}"));
            }
            let Ok(target) = sections.section(object::SectionIndex(shndx)) else {
                return Err(format!(
                    "its relocation's symbol {sym} is in no section of this object (section index {shndx})"
                ));
            };
            if target.sh_type(endian) == object::elf::SHT_NOBITS {
                return Err(format!(
                    "its relocation's symbol {sym} has no bytes in this object"
                ));
            }
            let (toff, tsize) = (target.sh_offset(endian), target.sh_size(endian));
            let rel = value.wrapping_add(addend);
            if rel >= tsize || toff.saturating_add(tsize) > file_len(d) {
                return Err(format!(
                    "its pointer leads {rel} bytes into a section of {tsize} bytes"
                ));
            }
            return Ok((toff + rel, toff + tsize));
        }
    }
    Err("no relocation fills its pointer".into())
}
