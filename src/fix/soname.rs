//! Give a library the `DT_SONAME` its consumers ask for, by cutting its own SONAME short.
//!
//! Why: glibc's `_dl_map_object` (elf/dl-load.c) satisfies a `DT_NEEDED` name with an object
//! already loaded when the name equals that object's path as loaded, a name it was loaded under,
//! or its `DT_SONAME`. PyTorch's legacy ROCm wheels copy `librccl.so.1` to `torch/lib/librccl.so`
//! and rewrite `libtorch_hip.so`'s `DT_NEEDED` to `librccl.so` but keep the SONAME `librccl.so.1`
//! (pytorch `.ci/manywheel/build_rocm.sh`, `fname_without_so_number` and `replace_needed_sofiles`).
//! A patched copy preloaded with that SONAME therefore wins every symbol binding (the global
//! scope is searched first) but does not satisfy `librccl.so`: the loader opens the unpatched
//! `torch/lib/librccl.so` beside it, runs its constructors and registers its kernels with HIP.
//! A SONAME of `librccl.so` makes the loader take the preloaded copy and never open the other.
//!
//! The edit: one NUL byte written into `.dynstr` right after the wanted name, which must be the
//! current SONAME up to a `.` (`librccl.so.1` → `librccl.so`). Refused when any other string the
//! loader reads (another dynamic entry, a dynamic symbol's name, a version definition or need)
//! starts inside the bytes that change, so nothing but the SONAME can read differently.

use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader, SectionHeader, Sym};
use object::Endianness;

/// What [`soname_cut`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SonameCut {
    /// The SONAME already is the wanted name: nothing to change.
    Already,
    /// Write a NUL at this file offset to make the SONAME the wanted name.
    At(u64),
}

/// Where one NUL byte makes the SONAME of the ELF file `data` equal to `want` (64-bit, either
/// byte order).
///
/// Errors (one line, no file name: the caller adds it): not such an ELF file; no `PT_DYNAMIC`,
/// `DT_STRTAB` or `DT_SONAME`; `want` is not the SONAME cut at a `.`; no section headers to find
/// the dynamic symbols by; another string starts in the bytes that would change.
pub fn soname_cut(data: &[u8], want: &str) -> anyhow::Result<SonameCut> {
    let e = |x: object::read::Error| anyhow::anyhow!("not a readable ELF file: {x}");
    let header = elf::FileHeader64::<Endianness>::parse(data).map_err(e)?;
    let endian = header.endian().map_err(e)?;
    let phdrs = header.program_headers(endian, data).map_err(e)?;
    let dynamic = phdrs
        .iter()
        .find_map(|p| p.dynamic(endian, data).transpose())
        .transpose()
        .map_err(e)?
        .ok_or_else(|| anyhow::anyhow!("no PT_DYNAMIC segment"))?;
    let vaddr_to_offset = |v: u64| {
        phdrs.iter().find_map(|p| {
            let (va, fsz) = (p.p_vaddr(endian), p.p_filesz(endian));
            (p.p_type(endian) == elf::PT_LOAD && v >= va && v < va + fsz)
                .then(|| v - va + p.p_offset(endian))
        })
    };
    let mut strtab = None;
    let mut strsz = None;
    let mut soname = None;
    // String offsets the loader reads besides the SONAME's.
    let mut refs: Vec<u64> = Vec::new();
    for d in dynamic {
        let (tag, val) = (d.d_tag(endian) as u32, d.d_val(endian));
        match tag {
            elf::DT_STRTAB => strtab = Some(val),
            elf::DT_STRSZ => strsz = Some(val),
            elf::DT_SONAME => soname = Some(val),
            elf::DT_NEEDED
            | elf::DT_RPATH
            | elf::DT_RUNPATH
            | elf::DT_AUXILIARY
            | elf::DT_FILTER => refs.push(val),
            _ => {}
        }
    }
    let strtab = strtab.ok_or_else(|| anyhow::anyhow!("no DT_STRTAB"))?;
    let strsz = strsz.ok_or_else(|| anyhow::anyhow!("no DT_STRSZ"))?;
    let soname = soname.ok_or_else(|| anyhow::anyhow!("no DT_SONAME"))?;
    let base = vaddr_to_offset(strtab)
        .ok_or_else(|| anyhow::anyhow!("DT_STRTAB is in no PT_LOAD segment"))?;
    let table = data
        .get(base as usize..base.saturating_add(strsz) as usize)
        .ok_or_else(|| anyhow::anyhow!("DT_STRTAB past the end of the file"))?;
    let current = table
        .get(soname as usize..)
        .and_then(|t| t.iter().position(|&b| b == 0).map(|n| &t[..n]))
        .ok_or_else(|| anyhow::anyhow!("DT_SONAME is not a string in DT_STRTAB"))?;
    if current == want.as_bytes() {
        return Ok(SonameCut::Already);
    }
    let shown = String::from_utf8_lossy(current);
    if want.is_empty() || !current.starts_with(want.as_bytes()) || current[want.len()] != b'.' {
        anyhow::bail!("its SONAME {shown:?} is not {want:?} followed by a '.'");
    }
    // The dynamic symbols' names and the version names, from the section headers.
    let sections = header.sections(endian, data).map_err(e)?;
    let dynsym = sections
        .iter()
        .find(|s| s.sh_type(endian) == elf::SHT_DYNSYM)
        .ok_or_else(|| anyhow::anyhow!("no section headers with the dynamic symbols"))?;
    let syms: &[elf::Sym64<Endianness>] = dynsym
        .data_as_array(endian, data)
        .map_err(|_| anyhow::anyhow!("the dynamic symbol table is out of the file"))?;
    refs.extend(syms.iter().map(|s| u64::from(s.st_name(endian))));
    if let Some((mut it, _)) = sections.gnu_verdef(endian, data).map_err(e)? {
        while let Some((_, mut aux)) = it.next().map_err(e)? {
            while let Some(a) = aux.next().map_err(e)? {
                // A version definition may name the SONAME itself (the base version).
                let n = u64::from(a.vda_name.get(endian));
                if n != soname {
                    refs.push(n);
                }
            }
        }
    }
    if let Some((mut it, _)) = sections.gnu_verneed(endian, data).map_err(e)? {
        while let Some((v, mut aux)) = it.next().map_err(e)? {
            refs.push(u64::from(v.vn_file.get(endian)));
            while let Some(a) = aux.next().map_err(e)? {
                refs.push(u64::from(a.vna_name.get(endian)));
            }
        }
    }
    let cut = soname + want.len() as u64;
    if let Some(r) = refs.iter().find(|&&r| r >= soname && r <= cut) {
        anyhow::bail!(
            "another dynamic string starts inside its SONAME {shown:?} (DT_STRTAB offset {r}); it is left as it is"
        );
    }
    Ok(SonameCut::At(base + cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_an_elf_file_is_refused() {
        assert!(soname_cut(b"\x7fELF short", "librccl.so").is_err());
    }
}
