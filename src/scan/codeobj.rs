//! AMDGPU code objects: ELF header checks, target from `e_flags`, every metadata note, and the
//! hostcall-using symbols that explain a declaration.
//!
//! Source: llvm `AMDGPUUsage.rst` ("ELF Code Object", "Note Records"), llvm `BinaryFormat/ELF.h`
//! (`EF_AMDGPU_MACH_*`).

use object::elf::{FileHeader64, EM_AMDGPU, PT_NOTE, SHT_DYNSYM, SHT_NOTE, SHT_SYMTAB};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::LittleEndian;

use std::collections::BTreeMap;

pub use super::amdgpu::{is_hostcall_user, mach_name};
use super::callgraph::{self, Trace};
use super::meta::{self, Detail, Metadata};
use super::Problem;

/// `ELFOSABI_AMDGPU_HSA`.
pub const OSABI_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA` (owner `AMDGPU`, msgpack, v3+).
pub const NT_AMDGPU_METADATA: u32 = 32;
/// `NT_AMD_HSA_METADATA` (owner `AMD`, YAML, v2).
pub const NT_AMD_HSA_METADATA: u32 = 10;
/// The PAL metadata note type (owner `AMD` or `AMDGPU`, msgpack), which comgr reads as metadata
/// like [`NT_AMDGPU_METADATA`] (ROCm/llvm-project `amd/comgr/src/comgr-metadata.cpp`,
/// `PAL_METADATA_NOTE_TYPE`, `processNote`).
pub const NT_PAL_METADATA: u32 = 13;

/// The target ID encoded in `e_flags` for a code object version (processor plus `:sramecc±` and
/// `:xnack±` when pinned), e.g. `gfx90a:xnack-`. `None` for an unknown `EF_AMDGPU_MACH`.
pub fn target_id_from_flags(e_flags: u32, cov: u32) -> Option<String> {
    let mut id = mach_name(e_flags & 0xff)?.to_owned();
    match cov {
        0..=2 => {}
        3 => {
            if e_flags & 0x200 != 0 {
                id.push_str(":sramecc+");
            }
            if e_flags & 0x100 != 0 {
                id.push_str(":xnack+");
            }
        }
        _ => {
            match e_flags & 0xC00 {
                0x800 => id.push_str(":sramecc-"),
                0xC00 => id.push_str(":sramecc+"),
                _ => {}
            }
            match e_flags & 0x300 {
                0x200 => id.push_str(":xnack-"),
                0x300 => id.push_str(":xnack+"),
                _ => {}
            }
        }
    }
    Some(id)
}

/// What was read from one code object.
#[derive(Debug, Clone)]
pub struct CodeObject {
    /// `e_flags`.
    pub e_flags: u32,
    /// Code object version (`EI_ABIVERSION` + 2 for HSA).
    pub version: u32,
    /// Target ID from `e_flags`, e.g. `gfx1100` or `gfx90a:xnack-`.
    pub target_id: String,
    /// Merged metadata from every note.
    pub metadata: Metadata,
    /// Names of hostcall-using functions found in the symbol tables, sorted, deduplicated.
    pub hostcall_users: Vec<String>,
    /// Of `hostcall_users`, the functions defined here whose entry is `s_trap 2; s_endpgm`
    /// (made to trap, e.g. by `rcclfix patch --asserts`), sorted.
    pub trapped_users: Vec<String>,
    /// For each kernel that declares `hidden_hostcall_buffer` (by `.name`): what the call graph
    /// says about it ([`callgraph::trace_kernels`]). Empty when no kernel declares it or the
    /// graph cannot be built.
    pub traces: BTreeMap<String, Trace>,
}

/// Parse a code object: header checks, every metadata note (those of the `PT_NOTE` segments, as
/// comgr reads them, or of the note sections when the segments have none; the two differing is
/// an error), and the symbol tables.
///
/// Errors (offsets relative to `data`): not a 64-bit little-endian ELF, not `EM_AMDGPU`, not the
/// HSA OS/ABI, malformed section or note tables, no metadata note, a note of the wrong shape, note
/// sections and `PT_NOTE` segments holding different metadata notes.
pub fn parse(data: &[u8]) -> Result<CodeObject, Problem> {
    parse_with(data, Detail::All)
}

/// [`parse`], keeping of the kernels what `detail` asks for: with [`Detail::Declaring`] the
/// metadata lists only the kernels that declare `hidden_hostcall_buffer` and counts the others
/// ([`Metadata::unlisted`]); a code object whose notes that reader does not take as they are (a
/// v2 YAML note, any note [`meta::merge_msgpack`] refuses) is read again with [`Detail::All`], so
/// the result and every error are [`parse`]'s.
pub fn parse_with<'a>(data: &'a [u8], detail: Detail) -> Result<CodeObject, Problem> {
    let hdr = FileHeader64::<LittleEndian>::parse(data).map_err(|e| {
        Problem::new(
            0,
            if data.len() < 64 {
                "truncated"
            } else {
                "bad-elf"
            },
            format!("code object: {e}"),
        )
    })?;
    let ident = hdr.e_ident();
    if ident.data != object::elf::ELFDATA2LSB {
        return Err(Problem::new(
            5,
            "bad-elf",
            "code object is not little-endian",
        ));
    }
    let endian = LittleEndian;
    if hdr.e_machine(endian) != EM_AMDGPU {
        return Err(Problem::new(
            18,
            "bad-elf",
            format!(
                "not an AMDGPU code object (e_machine {})",
                hdr.e_machine(endian)
            ),
        ));
    }
    match ident.os_abi {
        OSABI_HSA => {}
        65 => {
            return Err(Problem::new(
                7,
                "unsupported",
                "code object is for PAL (OS/ABI 65), not HSA",
            ))
        }
        66 => {
            return Err(Problem::new(
                7,
                "unsupported",
                "code object is for Mesa3D (OS/ABI 66), not HSA",
            ))
        }
        o => {
            return Err(Problem::new(
                7,
                "bad-elf",
                format!("code object has OS/ABI {o}, expected 64 (AMDGPU HSA)"),
            ))
        }
    }
    let version = ident.abi_version as u32 + 2;
    let e_flags = hdr.e_flags(endian);
    let target_id = target_id_from_flags(e_flags, version)
        .ok_or_else(|| Problem::new(48, "unsupported", super::amdgpu::unknown_mach(e_flags)))?;

    let sections = hdr
        .sections(endian, data)
        .map_err(|e| Problem::new(0x28, "bad-elf", format!("code object section table: {e}")))?;
    let mut md = Metadata::default();
    let mut note_err: Option<Problem> = None;
    let mut seen = meta::Seen::default();
    let mut again = false;
    let mut handle = |name: &[u8], ty: u32, desc: &'a [u8], desc_off: u64, md: &mut Metadata| {
        let r = match (name, ty, detail) {
            (b"AMDGPU", NT_AMDGPU_METADATA, Detail::Declaring) => {
                again |= meta::merge_msgpack_declaring(desc, md, &mut seen).is_err();
                Ok(())
            }
            (b"AMD", NT_AMD_HSA_METADATA, Detail::Declaring)
            | (b"AMD" | b"AMDGPU", NT_PAL_METADATA, Detail::Declaring) => {
                again = true;
                Ok(())
            }
            (b"AMDGPU", NT_AMDGPU_METADATA, _) | (b"AMD" | b"AMDGPU", NT_PAL_METADATA, _) => {
                meta::merge_msgpack(desc, md)
            }
            (b"AMD", NT_AMD_HSA_METADATA, _) => meta::merge_yaml_v2(desc, md),
            _ => Ok(()),
        };
        if let Err(reason) = r {
            note_err.get_or_insert(Problem::new(desc_off, "metadata", reason));
        }
    };
    let (from_sections, from_segments) = metadata_notes(hdr, &sections, data)?;
    // comgr (`amd_comgr_get_data_metadata`; ROCm/llvm-project `amd/comgr/src/comgr-metadata.cpp`,
    // `getElfMetadataRoot`) merges the metadata notes of the `PT_NOTE` segments, and reads the
    // note sections only when the segments have none: both are read here, and a code object
    // whose two views of its metadata differ is not read at all.
    if !from_sections.is_empty() && !from_segments.is_empty() {
        let same = from_sections.len() == from_segments.len()
            && from_sections
                .iter()
                .zip(&from_segments)
                .all(|(a, b)| (a.0, a.1, a.2) == (b.0, b.1, b.2));
        if !same {
            return Err(Problem::new(
                from_segments[0].3,
                "metadata",
                format!(
                    "the metadata in the note section (at offset {}) and in the PT_NOTE segment (at offset {}) differ; comgr reads the segment, other readers the section",
                    from_sections[0].3, from_segments[0].3
                ),
            ));
        }
    }
    let chosen = if from_segments.is_empty() {
        from_sections
    } else {
        from_segments
    };
    for (name, ty, desc, off) in chosen {
        handle(name, ty, desc, off, &mut md);
    }
    if again {
        return parse_with(data, Detail::All);
    }
    if let Some(p) = note_err {
        return Err(p);
    }
    if md.notes == 0 {
        return Err(Problem::new(
            0,
            "metadata",
            "code object has no AMDGPU metadata note",
        ));
    }

    let mut users = Vec::new();
    let mut trapped = Vec::new();
    for ty in [SHT_SYMTAB, SHT_DYNSYM] {
        let syms = sections
            .symbols(endian, data, ty)
            .map_err(|e| Problem::new(0, "bad-elf", format!("symbol table: {e}")))?;
        for sym in syms.iter() {
            if let Ok(name) = syms.symbol_name(endian, sym) {
                // Every hostcall user starts with `_`, `p`, `m` or `f` (is_hostcall_user).
                if !matches!(name.first(), Some(b'_' | b'p' | b'm' | b'f')) {
                    continue;
                }
                // The encoding only of a name that matches (a user's name is valid UTF-8).
                if super::amdgpu::is_hostcall_user_bytes(name) {
                    if let Ok(name) = std::str::from_utf8(name) {
                        users.push(name.to_owned());
                        if entry_traps(data, &sections, sym, e_flags) {
                            trapped.push(name.to_owned());
                        }
                    }
                }
            }
        }
    }
    users.sort();
    users.dedup();
    trapped.sort();
    trapped.dedup();
    // The call graph only for kernels that declare: most images have none, and it reads the code.
    let declaring: Vec<(&str, &str)> = md
        .kernels
        .iter()
        .filter(|k| {
            k.args
                .iter()
                .any(|a| a.value_kind == "hidden_hostcall_buffer")
        })
        .map(|k| (k.name.as_str(), k.symbol.as_str()))
        .collect();
    let traces = if declaring.is_empty() {
        BTreeMap::new()
    } else {
        callgraph::trace_kernels(data, e_flags, &declaring)
    };
    Ok(CodeObject {
        e_flags,
        version,
        target_id,
        metadata: md,
        hostcall_users: users,
        trapped_users: trapped,
        traces,
    })
}

/// Whether the defined function `sym` begins with `s_trap 2; s_endpgm` for the instruction set
/// of `e_flags` (`callgraph::trap_entry`): a hostcall user that `rcclfix patch --asserts` (or
/// anything else) made trap.
fn entry_traps(
    data: &[u8],
    sections: &object::read::elf::SectionTable<'_, FileHeader64<LittleEndian>>,
    sym: &object::elf::Sym64<LittleEndian>,
    e_flags: u32,
) -> bool {
    use object::read::elf::{SectionHeader, Sym};
    let endian = LittleEndian;
    let Some(trap) = callgraph::trap_entry(callgraph::Isa::from_e_flags(e_flags)) else {
        return false;
    };
    let shndx = sym.st_shndx(endian);
    if sym.st_type() != object::elf::STT_FUNC || shndx == object::elf::SHN_UNDEF {
        return false;
    }
    let Ok(sec) = sections.section(object::SectionIndex(shndx as usize)) else {
        return false;
    };
    let Some(off) = sym
        .st_value(endian)
        .checked_sub(sec.sh_addr(endian))
        .and_then(|o| o.checked_add(sec.sh_offset(endian)))
        .and_then(|o| usize::try_from(o).ok())
    else {
        return false;
    };
    let word = |i: usize| {
        data.get(off + 4 * i..off + 4 * i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    word(0) == Some(trap[0]) && word(1) == Some(trap[1])
}

/// A metadata note: owner name, type, descriptor, and the descriptor's offset in the code
/// object.
type Note<'a> = (&'a [u8], u32, &'a [u8], u64);

/// The metadata notes (`AMDGPU`/[`NT_AMDGPU_METADATA`], `AMD`/[`NT_AMD_HSA_METADATA`],
/// `AMD` or `AMDGPU`/[`NT_PAL_METADATA`]) of a code object, in file order: those of its `SHT_NOTE` sections, and those of its `PT_NOTE`
/// segments (llvm `AMDGPUUsage.rst`, "Note Records"; comgr reads the segments).
///
/// Errors: a note section, the program header table or a `PT_NOTE` segment does not read.
fn metadata_notes<'a>(
    hdr: &FileHeader64<LittleEndian>,
    sections: &object::read::elf::SectionTable<'a, FileHeader64<LittleEndian>>,
    data: &'a [u8],
) -> Result<(Vec<Note<'a>>, Vec<Note<'a>>), Problem> {
    let endian = LittleEndian;
    let wanted = |n: &object::read::elf::Note<'a, FileHeader64<LittleEndian>>| {
        matches!(
            (n.name(), n.n_type(endian)),
            (b"AMDGPU", NT_AMDGPU_METADATA)
                | (b"AMD", NT_AMD_HSA_METADATA)
                | (b"AMD" | b"AMDGPU", NT_PAL_METADATA)
        )
    };
    let note = |n: object::read::elf::Note<'a, FileHeader64<LittleEndian>>| -> Note<'a> {
        let off = n.desc().as_ptr() as u64 - data.as_ptr() as u64;
        (n.name(), n.n_type(endian), n.desc(), off)
    };
    let mut from_sections = Vec::new();
    for s in sections.iter().filter(|s| s.sh_type(endian) == SHT_NOTE) {
        let sec_off = s.sh_offset(endian);
        let err =
            |e: object::read::Error| Problem::new(sec_off, "bad-elf", format!("note section: {e}"));
        let Some(mut notes) = s.notes(endian, data).map_err(err)? else {
            continue;
        };
        while let Some(n) = notes.next().map_err(err)? {
            if wanted(&n) {
                from_sections.push(note(n));
            }
        }
    }
    let mut from_segments = Vec::new();
    let phdrs = hdr
        .program_headers(endian, data)
        .map_err(|e| Problem::new(0x20, "bad-elf", format!("program headers: {e}")))?;
    for p in phdrs.iter().filter(|p| p.p_type(endian) == PT_NOTE) {
        let poff = p.p_offset(endian);
        let err = |e: object::read::Error| Problem::new(poff, "bad-elf", format!("PT_NOTE: {e}"));
        let Some(mut notes) = p.notes(endian, data).map_err(err)? else {
            continue;
        };
        while let Some(n) = notes.next().map_err(err)? {
            if wanted(&n) {
                from_segments.push(note(n));
            }
        }
    }
    Ok((from_sections, from_segments))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert_eq!(target_id_from_flags(0x041, 4).as_deref(), Some("gfx1100"));
        assert_eq!(
            target_id_from_flags(0x23f, 4).as_deref(),
            Some("gfx90a:xnack-")
        );
        assert_eq!(
            target_id_from_flags(0xB30, 5).as_deref(),
            Some("gfx908:sramecc-:xnack+")
        );
        assert_eq!(
            target_id_from_flags(0x054, 6).as_deref(),
            Some("gfx11-generic")
        );
        assert_eq!(target_id_from_flags(0x1000, 4), None);
    }
}
