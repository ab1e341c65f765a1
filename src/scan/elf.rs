//! Host ELF files (.so, executables, .o): where their device code lives.
//!
//! Finds `.hip_fatbin` (PROGBITS: bundles to walk; NOBITS: externalized), the `.hipFatBinSegment`
//! wrappers (HIPF, or HIPK when kpack-split), `.rocm_kpack_ref`, and the
//! `__CLANG_OFFLOAD_BUNDLE__<entry-id>` sections of `-fgpu-rdc` objects.
//! Source: clang `CGCUDANV.cpp`, ROCm/rocm-kpack, clang `ClangOffloadBundler.rst`.

use object::elf::{FileHeader64, SHT_NOBITS};
use object::read::elf::{FileHeader, SectionHeader};
use object::LittleEndian;

use super::Problem;

/// `__hip_fatbin_wrapper` magic, HIPF (u32 value).
pub const HIPF: u32 = 0x4849_5046;
/// Wrapper magic after kpack splitting, HIPK (u32 value).
pub const HIPK: u32 = 0x4B50_4948;
/// Section name prefix of `-fgpu-rdc` object bundles.
pub const RDC_PREFIX: &str = "__CLANG_OFFLOAD_BUNDLE__";

/// Device-code locations in a host ELF.
#[derive(Debug, Default)]
pub struct HostElf<'a> {
    /// `.hip_fatbin` (PROGBITS): file offset and bytes. Also the PE short name `.hip_fat`.
    pub fatbin: Option<(u64, &'a [u8])>,
    /// `.hip_fatbin` is present but has no file bytes (NOBITS): file offset of its section header.
    pub fatbin_nobits: Option<u64>,
    /// Wrapper magics found in `.hipFatBinSegment`, with their file offsets.
    pub wrappers: Vec<(u64, u32)>,
    /// `.rocm_kpack_ref` present (file offset).
    pub kpack_ref: Option<u64>,
    /// `-fgpu-rdc` sections: entry ID, file offset, bytes (empty for NOBITS).
    pub rdc: Vec<(&'a str, u64, &'a [u8])>,
}

impl HostElf<'_> {
    /// Whether the file carries (or refers to) any device code.
    pub fn has_device_code(&self) -> bool {
        self.fatbin.is_some()
            || self.fatbin_nobits.is_some()
            || !self.wrappers.is_empty()
            || self.kpack_ref.is_some()
            || !self.rdc.is_empty()
    }
}

/// Read the section table of a 64-bit little-endian host ELF and collect its device-code sections.
///
/// Errors: the ELF header or section table is malformed, or a device-code section lies past the
/// end of the file.
pub fn inspect(data: &[u8]) -> Result<HostElf<'_>, Problem> {
    let hdr = FileHeader64::<LittleEndian>::parse(data)
        .map_err(|e| Problem::new(0, "bad-elf", format!("host ELF header: {e}")))?;
    let endian = LittleEndian;
    if hdr.e_ident().data != object::elf::ELFDATA2LSB {
        return Err(Problem::new(
            5,
            "unsupported",
            "big-endian ELF is not supported",
        ));
    }
    let sections = hdr
        .sections(endian, data)
        .map_err(|e| Problem::new(0x28, "bad-elf", format!("host ELF section table: {e}")))?;
    let mut out = HostElf::default();
    for s in sections.iter() {
        let Ok(name) = sections.section_name(endian, s) else {
            continue;
        };
        let off = s.sh_offset(endian);
        let size = s.sh_size(endian);
        let bytes = || -> Result<&[u8], Problem> {
            if s.sh_type(endian) == SHT_NOBITS {
                return Ok(&[]);
            }
            off.checked_add(size)
                .filter(|&e| e <= data.len() as u64)
                .map(|e| &data[off as usize..e as usize])
                .ok_or_else(|| {
                    Problem::new(
                        off,
                        "truncated",
                        format!(
                            "section {} ({size} bytes at {off}) runs past the end of the file",
                            String::from_utf8_lossy(name)
                        ),
                    )
                })
        };
        match name {
            b".hip_fatbin" | b".hip_fat" => {
                if s.sh_type(endian) == SHT_NOBITS {
                    out.fatbin_nobits = Some(off);
                } else {
                    out.fatbin = Some((off, bytes()?));
                }
            }
            b".hipFatBinSegment" | b".hipFatB" => {
                let b = bytes()?;
                for (i, w) in b.chunks_exact(24).enumerate() {
                    out.wrappers.push((
                        off + 24 * i as u64,
                        u32::from_le_bytes(w[..4].try_into().unwrap()),
                    ));
                }
            }
            b".rocm_kpack_ref" | b".kpackrf" => out.kpack_ref = Some(off),
            n if n.starts_with(RDC_PREFIX.as_bytes()) => {
                if let Ok(id) = std::str::from_utf8(&n[RDC_PREFIX.len()..]) {
                    out.rdc.push((id, off, bytes()?));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}
