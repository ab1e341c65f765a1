//! Where the code objects are, and how a rewritten code object goes back in place: bare code
//! objects, plain offload bundles, compressed bundles (CCOB), and host ELFs whose `.hip_fatbin`
//! holds any of those.
//!
//! A plain bundle keeps every byte outside the rewritten metadata descriptors. A CCOB is
//! decompressed, patched, recompressed with the same method and written over its original
//! payload space, which it fills exactly: the stream, then a zstd skippable frame (or zeros after
//! a zlib stream) that decoders do not read. The header's total and uncompressed sizes therefore
//! stay as they were and only its MD5-low-64 hash changes, so a reader that bounds the bundle by
//! the total size and one that reads to the end of the section both see the same bundle. If no
//! compression level makes it fit, the patch is refused.
//!
//! Source: shared/reference/formats.md §2–§6 (clang `ClangOffloadBundler.rst`,
//! `OffloadBundler.cpp`: bundle layout, entry IDs, CCOB v1/v2/v3 headers and hash).

use std::io::Read;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader};
use object::LittleEndian as LE;
use serde::Serialize;

use super::codeobj::{self, KernelRecord, NoteSpan, Outcome, Proof, Refusal, RefusalKind};

/// Magic of a plain offload bundle.
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Magic of a compressed offload bundle.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";
/// Bundle alignment inside `.hip_fatbin`.
const ALIGN: usize = 4096;
/// zstd levels tried when recompressing, in order (3 is clang's default); the first that fits is
/// used.
const ZSTD_LEVELS: &[i32] = &[
    3, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
];
/// First magic of a zstd skippable frame (RFC 8878 §3.1.2: `0x184D2A5?`, then a u32 size).
const ZSTD_SKIPPABLE_MAGIC: u32 = 0x184D_2A50;

/// One rewritten code object.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ImageRecord {
    /// Bundle entry ID (empty for a bare code object).
    pub entry_id: String,
    /// Processor, e.g. `gfx1100`.
    pub processor: String,
    /// Code object version.
    pub code_object_version: u32,
    /// `bare`, `plain`, or the CCOB label (`ccob-v2-zstd`, …).
    pub container: String,
    /// File offset of the code object (plain, bare) or of its CCOB.
    pub file_offset: u64,
    /// Code object size in bytes (unchanged).
    pub size: u64,
    /// Kernels in the code object.
    pub kernels_total: usize,
    /// Rewritten kernel arguments.
    pub kernels: Vec<KernelRecord>,
    /// Why this is safe.
    pub proof: Proof,
    /// Rewritten metadata note descriptors (offsets within the code object).
    pub notes: Vec<NoteSpan>,
    /// For a compressed bundle: how it was written back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ccob: Option<CcobRecord>,
}

/// How a CCOB was written back.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CcobRecord {
    /// File offset of the CCOB header.
    pub offset: u64,
    /// Header + payload bytes, before and after (unchanged).
    pub total_size: u64,
    /// Bytes of the new compressed stream.
    pub frame_bytes: u64,
    /// Bytes after it that fill the original payload space: a zstd skippable frame (zstd), or
    /// zeros after the end of the zlib stream (zlib), which decoders do not read.
    pub padding_bytes: u64,
    /// Compression level used.
    pub level: i32,
    /// MD5-low-64 of the uncompressed bundle before and after, hex.
    pub hash_before: String,
    /// See `hash_before`.
    pub hash_after: String,
}

/// A code object that did not need patching.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CleanImage {
    /// Bundle entry ID (empty for a bare code object).
    pub entry_id: String,
    /// Processor.
    pub processor: String,
    /// Kernels read; none declares `hidden_hostcall_buffer`.
    pub kernels: usize,
}

/// What a walk over a file produced.
#[derive(Debug, Default)]
pub struct Walk {
    /// The file as it should be written (same length as the input).
    pub bytes: Vec<u8>,
    /// How the input was read: `code-object`, `bundle`, `ccob`, `host-elf`.
    pub kind: String,
    /// Rewritten images.
    pub images: Vec<ImageRecord>,
    /// Images read that declare nothing.
    pub clean: Vec<CleanImage>,
    /// Entries left alone because their target was not requested.
    pub skipped: Vec<String>,
}

/// A refusal with the place it happened.
#[derive(Debug, Clone)]
pub struct Located {
    /// Where: entry ID and offset, or a section name.
    pub location: String,
    /// Why.
    pub refusal: Refusal,
}

type Res<T> = Result<T, Located>;

fn refuse(location: impl Into<String>, kind: RefusalKind, reason: impl Into<String>) -> Located {
    Located {
        location: location.into(),
        refusal: Refusal {
            kind,
            kernels: Vec::new(),
            reason: reason.into(),
        },
    }
}

/// Whether an image for `processor` should be patched for the requested `targets` (empty: all).
/// Generic processors match the family they run on (`gfx11-generic` for `gfx1100`, …).
pub fn wanted(processor: &str, targets: &[String]) -> bool {
    if targets.is_empty() {
        return true;
    }
    targets.iter().any(|t| {
        t == processor
            || match processor {
                "gfx11-generic" => t.starts_with("gfx11"),
                "gfx12-generic" => t.starts_with("gfx12"),
                "gfx10-3-generic" => t.starts_with("gfx103"),
                "gfx10-1-generic" => t.starts_with("gfx101"),
                "gfx9-4-generic" => t.starts_with("gfx94") || t.starts_with("gfx95"),
                "gfx9-generic" => t.starts_with("gfx90"),
                _ => false,
            }
    })
}

/// Walk `data` and patch every requested code object in a copy of it.
///
/// Errors: a [`Located`] refusal for the first image that cannot be proven or rewritten, or for
/// device code that cannot be read at all.
pub fn walk(data: &[u8], targets: &[String]) -> Res<Walk> {
    let mut w = Walk {
        bytes: data.to_vec(),
        ..Default::default()
    };
    if data.starts_with(b"\x7fELF") {
        let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|e| {
            refuse(
                "ELF header",
                RefusalKind::Unproven,
                format!("not a 64-bit little-endian ELF: {e}"),
            )
        })?;
        if hdr.e_machine(LE) == elf::EM_AMDGPU {
            w.kind = "code-object".into();
            image(&mut w, data, 0, "", "bare", targets, None)?;
            return Ok(w);
        }
        w.kind = "host-elf".into();
        let (off, size) = fatbin_section(data, &hdr)?;
        region(&mut w, data, off, size, targets)?;
        return Ok(w);
    }
    if data.starts_with(BUNDLE_MAGIC) {
        w.kind = "bundle".into();
    } else if data.starts_with(CCOB_MAGIC) {
        w.kind = "ccob".into();
    } else {
        return Err(refuse(
            "file start",
            RefusalKind::Unproven,
            "not a host ELF, code object, offload bundle or CCOB",
        ));
    }
    region(&mut w, data, 0, data.len(), targets)?;
    Ok(w)
}

/// File offset and size of `.hip_fatbin`. Refuses NOBITS (device code moved out, kpack) and a
/// host ELF without device code.
fn fatbin_section(data: &[u8], hdr: &elf::FileHeader64<LE>) -> Res<(usize, usize)> {
    let sections = hdr
        .sections(LE, data)
        .map_err(|e| refuse("section table", RefusalKind::Unproven, e.to_string()))?;
    for s in sections.iter() {
        let name = sections.section_name(LE, s).unwrap_or(b"");
        if name != b".hip_fatbin" {
            continue;
        }
        if s.sh_type(LE) == elf::SHT_NOBITS {
            return Err(refuse(
                ".hip_fatbin",
                RefusalKind::Unproven,
                "device code externalized (NOBITS .hip_fatbin, kpack): nothing here to patch",
            ));
        }
        let (off, size) = s.file_range(LE).unwrap_or((0, 0));
        let end = off.checked_add(size).filter(|&e| e <= data.len() as u64);
        if end.is_none() {
            return Err(refuse(
                ".hip_fatbin",
                RefusalKind::Unproven,
                "section runs past the end of the file",
            ));
        }
        return Ok((off as usize, size as usize));
    }
    Err(refuse(
        "section table",
        RefusalKind::Unproven,
        "no .hip_fatbin section: the file carries no HIP device code",
    ))
}

/// Walk a `.hip_fatbin` (or a whole bundle file) at `base..base+len` (formats.md §6).
fn region(w: &mut Walk, data: &[u8], base: usize, len: usize, targets: &[String]) -> Res<()> {
    let sect = &data[base..base + len];
    let mut pos = 0;
    while pos < sect.len() {
        let r = &sect[pos..];
        if pos % ALIGN == 0 && r.starts_with(BUNDLE_MAGIC) {
            let end = plain_bundle(w, data, base + pos, sect.len() - pos, targets)?;
            pos = (pos + end).div_ceil(ALIGN) * ALIGN;
        } else if pos % ALIGN == 0 && r.starts_with(CCOB_MAGIC) {
            let end = ccob(w, data, base + pos, sect.len() - pos, targets)?;
            pos = (pos + end).div_ceil(ALIGN) * ALIGN;
        } else if r[0] == 0 {
            match r.iter().position(|&b| b != 0) {
                None => break,
                Some(k) => pos += k,
            }
            if pos % ALIGN != 0 {
                return Err(refuse(
                    format!("offset 0x{:x}", base + pos),
                    RefusalKind::Unproven,
                    "unknown bytes in the device code (not a bundle magic on a 4096-byte boundary)",
                ));
            }
        } else {
            return Err(refuse(
                format!("offset 0x{:x}", base + pos),
                RefusalKind::Unproven,
                "unknown bytes in the device code (no bundle magic)",
            ));
        }
    }
    Ok(())
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
}

/// Patch the plain bundle at `data[at..]` (at most `room` bytes) in `w.bytes`; return its end
/// relative to `at`.
fn plain_bundle(
    w: &mut Walk,
    data: &[u8],
    at: usize,
    room: usize,
    targets: &[String],
) -> Res<usize> {
    let b = &data[at..at + room];
    let loc = |s: &str| format!("bundle at 0x{at:x}{s}");
    let n = u64_at(b, 24)
        .ok_or_else(|| refuse(loc(""), RefusalKind::Unproven, "bundle header truncated"))?;
    if n > (room as u64).saturating_sub(32) / 24 {
        return Err(refuse(
            loc(""),
            RefusalKind::Unproven,
            format!("bundle claims {n} entries, more than fit"),
        ));
    }
    let mut p = 32usize;
    let mut end = p;
    let mut entries = Vec::new();
    for _ in 0..n {
        let (off, size, idlen) = match (u64_at(b, p), u64_at(b, p + 8), u64_at(b, p + 16)) {
            (Some(o), Some(s), Some(l)) => (o, s, l),
            _ => {
                return Err(refuse(
                    loc(""),
                    RefusalKind::Unproven,
                    "bundle entry table truncated",
                ))
            }
        };
        let id_end = (p + 24)
            .checked_add(idlen as usize)
            .filter(|&e| e <= b.len())
            .ok_or_else(|| {
                refuse(
                    loc(""),
                    RefusalKind::Unproven,
                    "entry ID runs past the bundle",
                )
            })?;
        let id = std::str::from_utf8(&b[p + 24..id_end])
            .map_err(|_| refuse(loc(""), RefusalKind::Unproven, "entry ID is not UTF-8"))?
            .to_string();
        let pend = off
            .checked_add(size)
            .filter(|&e| e <= b.len() as u64)
            .ok_or_else(|| {
                refuse(
                    loc(&format!(" entry {id}")),
                    RefusalKind::Unproven,
                    "entry payload runs past the bundle",
                )
            })?;
        end = end.max(id_end).max(pend as usize);
        entries.push((id, off as usize, size as usize));
        p = id_end;
    }
    for (id, off, size) in entries {
        // `<kind>-<arch>-<vendor>-<os>-<env>[-<target id>]`
        let parts: Vec<&str> = id.splitn(6, '-').collect();
        if parts.first() == Some(&"host") || size == 0 {
            continue;
        }
        if parts.get(1) != Some(&"amdgcn") {
            return Err(refuse(
                loc(&format!(" entry {id}")),
                RefusalKind::Unproven,
                "not an amdgcn entry",
            ));
        }
        let processor = parts
            .get(5)
            .unwrap_or(&"")
            .split(':')
            .next()
            .unwrap_or("")
            .to_string();
        if !wanted(&processor, targets) {
            w.skipped.push(id);
            continue;
        }
        image(
            w,
            &data[at + off..at + off + size],
            at + off,
            &id,
            "plain",
            targets,
            None,
        )?;
    }
    Ok(end)
}

/// Analyse and rewrite one code object lying at `file_off` in the output.
fn image(
    w: &mut Walk,
    co: &[u8],
    file_off: usize,
    entry_id: &str,
    container: &str,
    targets: &[String],
    ccob: Option<CcobRecord>,
) -> Res<()> {
    let location = if entry_id.is_empty() {
        format!("code object at 0x{file_off:x}")
    } else {
        format!("{entry_id} at 0x{file_off:x}")
    };
    match codeobj::patch(co) {
        Err(refusal) => Err(Located { location, refusal }),
        Ok(Outcome::Clean { processor, kernels }) => {
            if entry_id.is_empty() && !wanted(&processor, targets) {
                w.skipped.push(format!("code object ({processor})"));
            } else {
                w.clean.push(CleanImage {
                    entry_id: entry_id.into(),
                    processor,
                    kernels,
                });
            }
            Ok(())
        }
        Ok(Outcome::Patched(p)) => {
            if entry_id.is_empty() && !wanted(&p.processor, targets) {
                w.skipped.push(format!("code object ({})", p.processor));
                return Ok(());
            }
            w.bytes[file_off..file_off + co.len()].copy_from_slice(&p.bytes);
            w.images.push(ImageRecord {
                entry_id: entry_id.into(),
                processor: p.processor,
                code_object_version: p.code_object_version,
                container: container.into(),
                file_offset: file_off as u64,
                size: co.len() as u64,
                kernels_total: p.kernels_total,
                kernels: p.kernels,
                proof: p.proof,
                notes: p.notes,
                ccob,
            });
            Ok(())
        }
    }
}

/// Patch the CCOB at `data[at..]`; return its end relative to `at` (its total size).
fn ccob(w: &mut Walk, data: &[u8], at: usize, room: usize, targets: &[String]) -> Res<usize> {
    let b = &data[at..at + room];
    let loc = format!("compressed bundle at 0x{at:x}");
    let unproven = |r: String| refuse(loc.clone(), RefusalKind::Unproven, r);
    if b.len() < 8 {
        return Err(unproven("CCOB header truncated".into()));
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    let method = u16::from_le_bytes([b[6], b[7]]);
    let (hlen, total, usize_, hash) = match version {
        2 if b.len() >= 24 => (24, u32::from_le_bytes(b[8..12].try_into().unwrap()) as u64, u32::from_le_bytes(b[12..16].try_into().unwrap()) as u64, u64_at(b, 16).unwrap()),
        3 if b.len() >= 32 => (32, u64_at(b, 8).unwrap(), u64_at(b, 16).unwrap(), u64_at(b, 24).unwrap()),
        1 => return Err(unproven("CCOB v1 has no total-size field, so a recompressed bundle cannot be shorter than the original; not supported".into())),
        v => return Err(unproven(format!("CCOB version {v} not supported (or header truncated)"))),
    };
    if total < hlen as u64 || total > b.len() as u64 {
        return Err(unproven(format!(
            "CCOB total size {total} does not fit its section ({} bytes left)",
            b.len()
        )));
    }
    let total = total as usize;
    let payload = &b[hlen..total];
    let label = match method {
        0 => "zlib",
        1 => "zstd",
        m => return Err(unproven(format!("unknown CCOB compression method {m}"))),
    };
    if usize_ > (8u64 << 30) || usize_ > payload.len() as u64 * 2048 + (1 << 20) {
        return Err(unproven(format!("implausible uncompressed size {usize_}")));
    }
    let plain = match method {
        1 => zstd::bulk::decompress(payload, usize_ as usize)
            .map_err(|e| unproven(format!("zstd: {e}")))?,
        _ => {
            let mut v = Vec::new();
            flate2::read::ZlibDecoder::new(payload)
                .take(usize_ + 1)
                .read_to_end(&mut v)
                .map_err(|e| unproven(format!("zlib: {e}")))?;
            v
        }
    };
    if plain.len() as u64 != usize_ {
        return Err(unproven(format!(
            "decompressed {} bytes, header says {usize_}",
            plain.len()
        )));
    }
    if crate_md5_low64(&plain) != hash {
        return Err(unproven(
            "CCOB hash mismatch: the stored MD5-low-64 does not match the decompressed bundle"
                .into(),
        ));
    }
    if !plain.starts_with(BUNDLE_MAGIC) {
        return Err(unproven("decompressed CCOB is not a plain bundle".into()));
    }
    // Patch the inner bundle in a walk of its own, then move its records into ours.
    let mut inner = Walk {
        bytes: plain.clone(),
        ..Default::default()
    };
    plain_bundle(&mut inner, &plain, 0, plain.len(), targets).map_err(|mut l| {
        l.location = format!("{loc}: {}", l.location);
        l
    })?;
    w.clean.extend(inner.clean);
    w.skipped.extend(inner.skipped);
    if inner.images.is_empty() {
        return Ok(total);
    }
    let new_plain = inner.bytes;
    let kernels: Vec<String> = inner
        .images
        .iter()
        .flat_map(|i| i.kernels.iter().map(|k| k.name.clone()))
        .fold(Vec::new(), |mut v, k| {
            if !v.contains(&k) {
                v.push(k);
            }
            v
        });
    let room = total - hlen;
    let (level, payload, frame_len, smallest) =
        recompress(method, &new_plain, room).map_err(unproven)?;
    let Some(payload) = payload else {
        return Err(Located {
            location: loc.clone(),
            refusal: Refusal {
                kind: RefusalKind::Unproven,
                kernels,
                reason: format!(
                    "the recompressed bundle does not fit: {} bytes at best ({label}), the original space is {total} bytes",
                    hlen + smallest
                ),
            },
        });
    };
    // Round trip over the whole padded payload, as a reader that ignores the total size sees it.
    let check = match method {
        1 => zstd::bulk::decompress(&payload, new_plain.len()).ok(),
        _ => {
            let mut v = Vec::new();
            flate2::read::ZlibDecoder::new(&payload[..])
                .read_to_end(&mut v)
                .ok()
                .map(|_| v)
        }
    };
    if check.as_deref() != Some(&new_plain[..]) {
        return Err(unproven(
            "internal: the recompressed bundle does not decompress to the patched bundle".into(),
        ));
    }
    let new_hash = crate_md5_low64(&new_plain);
    let out = &mut w.bytes[at..at + total];
    // Total and uncompressed sizes stay as they were; only the hash and the payload change.
    let hash_at = if version == 2 { 16 } else { 24 };
    out[hash_at..hash_at + 8].copy_from_slice(&new_hash.to_le_bytes());
    out[hlen..].copy_from_slice(&payload);
    let rec = CcobRecord {
        offset: at as u64,
        total_size: total as u64,
        frame_bytes: frame_len as u64,
        padding_bytes: (room - frame_len) as u64,
        level,
        hash_before: format!("{hash:016x}"),
        hash_after: format!("{new_hash:016x}"),
    };
    for mut img in inner.images {
        img.container = format!("ccob-v{version}-{label}");
        img.file_offset = at as u64;
        img.ccob = Some(rec.clone());
        w.images.push(img);
    }
    Ok(total)
}

/// Compress `plain` with `method` so that it fills exactly `room` payload bytes: the stream, then
/// padding (a zstd skippable frame of at least 8 bytes, or zeros after a zlib stream). Returns the
/// level, the padded payload (`None` when no level fits), the stream length, and the smallest
/// stream seen.
fn recompress(
    method: u16,
    plain: &[u8],
    room: usize,
) -> Result<(i32, Option<Vec<u8>>, usize, usize), String> {
    let mut smallest = usize::MAX;
    if method == 1 {
        for &lvl in ZSTD_LEVELS {
            let mut c = zstd::bulk::compress(plain, lvl).map_err(|e| format!("zstd: {e}"))?;
            smallest = smallest.min(c.len());
            let frame = c.len();
            let slack = room.checked_sub(frame);
            match slack {
                Some(0) => return Ok((lvl, Some(c), frame, smallest)),
                Some(n) if n >= 8 => {
                    c.extend_from_slice(&ZSTD_SKIPPABLE_MAGIC.to_le_bytes());
                    c.extend_from_slice(&((n - 8) as u32).to_le_bytes());
                    c.resize(room, 0);
                    return Ok((lvl, Some(c), frame, smallest));
                }
                _ => {}
            }
        }
        return Ok((0, None, 0, smallest));
    }
    for lvl in [6u32, 9] {
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(lvl));
        std::io::Write::write_all(&mut enc, plain).map_err(|e| format!("zlib: {e}"))?;
        let mut c = enc.finish().map_err(|e| format!("zlib: {e}"))?;
        smallest = smallest.min(c.len());
        let frame = c.len();
        if frame <= room {
            c.resize(room, 0);
            return Ok((lvl as i32, Some(c), frame, smallest));
        }
    }
    Ok((0, None, 0, smallest))
}

/// The CCOB hash: MD5 digest bytes 0..8 as a little-endian u64 (formats.md §5).
fn crate_md5_low64(data: &[u8]) -> u64 {
    use md5::Digest;
    let d = md5::Md5::digest(data);
    u64::from_le_bytes(d[..8].try_into().unwrap())
}
