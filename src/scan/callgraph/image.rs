//! The first stage of the call graph: the sections, symbols and relocations of one code object
//! ([`Image`]), read with `object`'s ELF reader. Addresses are virtual addresses in a linked
//! object; in a relocatable one each allocated section gets its own range, laid out one after
//! another (llvm `AMDGPUUsage.rst`: "Code Object", "Relocation Records").

use std::collections::HashMap;

use object::elf;
use object::read::elf::{FileHeader, Rela, SectionHeader, Sym};
use object::LittleEndian as LE;

use super::isa::Isa;
use super::trace::display_name;
use super::{Raw, R_GOTPCREL, R_GOTPCREL32_HI, R_GOTPCREL32_LO, R_RELATIVE64};

/// The sections and symbols the graph is built from.
pub(super) struct Image<'a> {
    pub(super) isa: Isa,
    /// Executable sections: (address, bytes).
    pub(super) code: Vec<(u64, &'a [u8])>,
    /// Named functions: (address, size, name, global).
    pub(super) funcs: Vec<(u64, u64, String, bool)>,
    /// Data objects: (address, size, name).
    pub(super) objects: Vec<(u64, u64, String)>,
    /// Relocations in executable code: address → (relocation type, target).
    pub(super) code_relocs: HashMap<u64, (u32, Raw)>,
    /// Relocations in data: (address, target), sorted by address.
    pub(super) data_relocs: Vec<(u64, Raw)>,
    pub(super) externs: Vec<String>,
}

impl Image<'_> {
    pub(super) fn in_code(&self, a: u64) -> bool {
        self.code
            .iter()
            .any(|(s, b)| a >= *s && a < s + b.len() as u64)
    }
}

/// Read sections, symbols and relocations. Addresses are virtual addresses in a linked object;
/// in a relocatable one each allocated section gets its own range, laid out one after another.
pub(super) fn read_image(data: &[u8], e_flags: u32) -> Result<Image<'_>, String> {
    let isa = Isa::from_e_flags(e_flags);
    if isa == Isa::Gfx1250 {
        return Err(format!(
            "the call forms of {} (s_get_pc_i64, s_add_nc_u64 with a 64-bit literal, s_swap_pc_i64) are not decoded by this rcclfix",
            crate::scan::amdgpu::mach_name(e_flags & 0xff).unwrap_or("gfx125x")
        ));
    }
    if isa.sop1().is_none() {
        return Err(format!(
            "unknown instruction set (EF_AMDGPU_MACH 0x{:03x})",
            e_flags & 0xff
        ));
    }
    let e = LE;
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|err| format!("ELF header: {err}"))?;
    let sections = hdr
        .sections(e, data)
        .map_err(|err| format!("section table: {err}"))?;
    let linked = hdr.e_type(e) != elf::ET_REL;
    let mut base = vec![None; sections.len()];
    let mut next = 0u64;
    for (i, s) in sections.iter().enumerate() {
        if s.sh_flags(e) & u64::from(elf::SHF_ALLOC) == 0 {
            continue;
        }
        base[i] = Some(if linked {
            s.sh_addr(e)
        } else {
            let align = s.sh_addralign(e).clamp(1, 1 << 16);
            let b = next.div_ceil(align).saturating_mul(align);
            next = b.saturating_add(s.sh_size(e));
            b
        });
    }
    let is_exec = |i: usize| {
        sections
            .section(object::SectionIndex(i))
            .is_ok_and(|s| s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) != 0)
    };
    let mut code = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        if s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) == 0 || s.sh_type(e) == elf::SHT_NOBITS {
            continue;
        }
        let bytes = s
            .data(e, data)
            .map_err(|err| format!("code section: {err}"))?;
        // A section whose end would not fit in 64 bits is left out (malformed input).
        if let Some(b) = base[i].filter(|b| b.checked_add(bytes.len() as u64).is_some()) {
            code.push((b, bytes));
        }
    }
    let mut symtab = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(|err| format!("symbol table: {err}"))?;
    if symtab.len() <= 1 {
        symtab = sections
            .symbols(e, data, elf::SHT_DYNSYM)
            .map_err(|err| format!("dynamic symbol table: {err}"))?;
    }
    let sym_addr = |sym: &elf::Sym64<LE>| -> Option<u64> {
        let shndx = sym.st_shndx(e);
        if shndx == elf::SHN_UNDEF || shndx >= elf::SHN_LORESERVE {
            return None;
        }
        let b = (*base.get(shndx as usize)?)?;
        Some(if linked {
            sym.st_value(e)
        } else {
            b.wrapping_add(sym.st_value(e))
        })
    };
    let mut funcs = Vec::new();
    let mut objects = Vec::new();
    for sym in symtab.iter().skip(1) {
        let ty = sym.st_type();
        let Some(addr) = sym_addr(sym) else { continue };
        let name = display_name(symtab.symbol_name(e, sym).unwrap_or(b"?"));
        let exec = is_exec(sym.st_shndx(e) as usize);
        // STT_AMDGPU_HSA_KERNEL (10) names kernels in code object v2.
        if (ty == elf::STT_FUNC || ty == 10) && exec {
            funcs.push((addr, sym.st_size(e), name, sym.st_bind() != elf::STB_LOCAL));
        } else if (ty == elf::STT_OBJECT || (ty == elf::STT_NOTYPE && sym.st_size(e) > 0)) && !exec
        {
            objects.push((addr, sym.st_size(e), name));
        }
    }
    let mut externs: Vec<String> = Vec::new();
    let mut code_relocs = HashMap::new();
    let mut data_relocs = Vec::new();
    for s in sections.iter() {
        if s.sh_type(e) != elf::SHT_RELA {
            continue;
        }
        let Ok(Some((relas, link))) = s.rela(e, data) else {
            continue;
        };
        let table = sections.symbol_table_by_index(e, data, link).ok();
        let target_base = if linked {
            Some(0)
        } else {
            base.get(s.sh_info(e) as usize).copied().flatten()
        };
        let Some(tb) = target_base else { continue };
        for r in relas {
            let at = tb.wrapping_add(r.r_offset(e));
            let ty = r.r_type(e, false);
            let addend = r.r_addend(e) as u64;
            let isym = r.r_sym(e, false) as usize;
            let got = matches!(ty, R_GOTPCREL | R_GOTPCREL32_LO | R_GOTPCREL32_HI);
            let raw = if ty == R_RELATIVE64 || isym == 0 {
                Raw::Addr(addend, false)
            } else {
                let Some(sym) = table
                    .as_ref()
                    .and_then(|t| t.symbol(object::SymbolIndex(isym)).ok())
                else {
                    continue;
                };
                match sym_addr(sym) {
                    Some(a) if got => Raw::Addr(a, true),
                    Some(a) => Raw::Addr(a.wrapping_add(addend), false),
                    None => {
                        let name = display_name(
                            table
                                .as_ref()
                                .and_then(|t| t.symbol_name(e, sym).ok())
                                .unwrap_or(b"?"),
                        );
                        let i = match externs.iter().position(|x| *x == name) {
                            Some(i) => i,
                            None => {
                                externs.push(name);
                                externs.len() - 1
                            }
                        };
                        Raw::Ext(i as u32, got)
                    }
                }
            };
            if code
                .iter()
                .any(|(b, c)| at >= *b && at < b + c.len() as u64)
            {
                code_relocs.insert(at, (ty, raw));
            } else {
                data_relocs.push((at, raw));
            }
        }
    }
    data_relocs.sort_by_key(|(a, _)| *a);
    Ok(Image {
        isa,
        code,
        funcs,
        objects,
        code_relocs,
        data_relocs,
        externs,
    })
}
