//! LLVM offload binaries: the device code of an object compiled by clang's new offload driver
//! (`--offload-new-driver`, e.g. with `-fgpu-rdc -c`), in its `.llvm.offloading` section
//! (`SHT_LLVM_OFFLOADING`), one binary per device image, back to back on 8-byte boundaries.
//! The device link (`clang-linker-wrapper`) turns them into the `.hip_fatbin` and wrappers the
//! runtime reads, so until then the images are what `-fgpu-rdc` bundles are: not yet linked.
//!
//! Layout (llvm `include/llvm/Object/OffloadBinary.h`, `OffloadBinary::Header`, `Entry`,
//! `StringEntry`; all integers little-endian): a 32-byte header (magic `10 ff 10 ad`, u32
//! version 1, u64 size of the whole binary, u64 offset and u64 size of the entry), a 40-byte
//! entry (u16 image kind, u16 offload kind, u32 flags, u64 string table offset, u64 string count,
//! u64 image offset, u64 image size), and string pairs (u64 key offset, u64 value offset, each a
//! NUL-terminated string) such as `triple` and `arch`. Every offset is from the binary's start.

use object::elf::FileHeader64;
use object::read::elf::{FileHeader, SectionHeader};
use object::LittleEndian;

use super::Problem;

/// Magic of an LLVM offload binary.
pub const MAGIC: [u8; 4] = [0x10, 0xff, 0x10, 0xad];
/// The section that holds them in an object file.
pub const SECTION: &[u8] = b".llvm.offloading";
/// `SHT_LLVM_OFFLOADING` (llvm `BinaryFormat/ELF.h`).
pub const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;
/// The one version this reader knows (`OffloadBinary::Version`).
pub const VERSION: u32 = 1;
/// `IMG_Bitcode` (llvm `Object/OffloadBinary.h`, `ImageKind`).
pub const IMG_BITCODE: u16 = 2;
const HEADER_SIZE: usize = 32;
const ENTRY_SIZE: usize = 40;

/// One device image of an offload binary.
#[derive(Debug, Clone)]
pub struct Image<'a> {
    /// File offset of the offload binary that holds it.
    pub offset: u64,
    /// Image kind (`IMG_Object` 1, `IMG_Bitcode` 2, ...).
    pub kind: u16,
    /// The `triple` string (empty when absent), e.g. `amdgcn-amd-amdhsa`.
    pub triple: String,
    /// The `arch` string (empty when absent): the target ID, e.g. `gfx1100` or `gfx90a:xnack-`.
    pub arch: String,
    /// The image bytes.
    pub bytes: &'a [u8],
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The `.llvm.offloading` sections of a host ELF (by name or by type): file offset and bytes.
///
/// Errors: the ELF header or section table does not read, or such a section lies past the end
/// of the file.
pub fn sections(d: &[u8]) -> Result<Vec<(u64, &[u8])>, Problem> {
    let endian = LittleEndian;
    let hdr = FileHeader64::<LittleEndian>::parse(d)
        .map_err(|e| Problem::new(0, "bad-elf", format!("host ELF header: {e}")))?;
    let table = hdr
        .sections(endian, d)
        .map_err(|e| Problem::new(0x28, "bad-elf", format!("host ELF section table: {e}")))?;
    let mut out = Vec::new();
    for s in table.iter() {
        let named = table.section_name(endian, s).is_ok_and(|n| n == SECTION);
        if !named && s.sh_type(endian) != SHT_LLVM_OFFLOADING {
            continue;
        }
        let (off, size) = (s.sh_offset(endian), s.sh_size(endian));
        let bytes = off
            .checked_add(size)
            .filter(|&e| e <= d.len() as u64)
            .map(|e| &d[off as usize..e as usize])
            .ok_or_else(|| {
                Problem::new(
                    off,
                    "truncated",
                    format!("section .llvm.offloading ({size} bytes at {off}) runs past the end of the file"),
                )
            })?;
        out.push((off, bytes));
    }
    Ok(out)
}

/// The images of the offload binaries in `sec` (a `.llvm.offloading` section at file offset
/// `base`), in order.
///
/// Errors (offsets are file offsets): bytes that are neither zero padding nor an offload binary,
/// a version other than [`VERSION`], a size, entry, image or string that lies outside its
/// binary.
pub fn images(sec: &[u8], base: u64) -> Result<Vec<Image<'_>>, Problem> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < sec.len() {
        if sec[pos] == 0 {
            pos += 1;
            continue;
        }
        let at = base + pos as u64;
        let b = &sec[pos..];
        let bad = |what: String| Problem::new(at, "bad-magic", format!("offload binary: {what}"));
        if !b.starts_with(&MAGIC) {
            return Err(bad(format!(
                "{} bytes in .llvm.offloading that are not an offload binary (no 10 ff 10 ad magic)",
                b.len()
            )));
        }
        if b.len() < HEADER_SIZE {
            return Err(Problem::new(
                at,
                "truncated",
                "offload binary: the header is cut short",
            ));
        }
        let version = u32::from_le_bytes(b[4..8].try_into().unwrap());
        if version != VERSION {
            return Err(Problem::new(
                at,
                "unsupported",
                format!("offload binary version {version}; this rcclfix reads version {VERSION}"),
            ));
        }
        let size = u64_at(b, 8).unwrap_or(0);
        if size < HEADER_SIZE as u64 || size > b.len() as u64 {
            return Err(Problem::new(
                at,
                "truncated",
                format!(
                    "offload binary of {size} bytes, with {} bytes left in the section",
                    b.len()
                ),
            ));
        }
        let bin = &b[..size as usize];
        let range = |off: u64, len: u64, what: &str| -> Result<&[u8], Problem> {
            off.checked_add(len)
                .filter(|&e| e <= size)
                .map(|e| &bin[off as usize..e as usize])
                .ok_or_else(|| {
                    Problem::new(
                        at,
                        "truncated",
                        format!("offload binary: its {what} ({len} bytes at +{off}) lies outside its {size} bytes"),
                    )
                })
        };
        let entry_off = u64_at(bin, 16).unwrap_or(0);
        let entry = range(entry_off, ENTRY_SIZE as u64, "entry")?;
        let kind = u16::from_le_bytes([entry[0], entry[1]]);
        let strings_off = u64_at(entry, 8).unwrap_or(0);
        let strings = u64_at(entry, 16).unwrap_or(0);
        let image = range(
            u64_at(entry, 24).unwrap_or(0),
            u64_at(entry, 32).unwrap_or(0),
            "image",
        )?;
        let table = range(strings_off, strings.saturating_mul(16), "string table")?;
        let cstr = |off: u64| -> Result<String, Problem> {
            let s = range(off, 0, "string")
                .ok()
                .and_then(|_| bin.get(off as usize..))
                .and_then(|r| r.iter().position(|&c| c == 0).map(|n| &r[..n]))
                .ok_or_else(|| {
                    Problem::new(
                        at,
                        "truncated",
                        format!("offload binary: a string at +{off} is not NUL-terminated"),
                    )
                })?;
            Ok(String::from_utf8_lossy(s).into_owned())
        };
        let (mut triple, mut arch) = (String::new(), String::new());
        for pair in table.chunks_exact(16) {
            let key = cstr(u64::from_le_bytes(pair[..8].try_into().unwrap()))?;
            let value = cstr(u64::from_le_bytes(pair[8..].try_into().unwrap()))?;
            match key.as_str() {
                "triple" => triple = value,
                "arch" => arch = value,
                _ => {}
            }
        }
        out.push(Image {
            offset: at,
            kind,
            triple,
            arch,
            bytes: image,
        });
        pos = (pos + size as usize).next_multiple_of(8);
    }
    Ok(out)
}
