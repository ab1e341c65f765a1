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
//! The walk itself is the scanner's (`scan::input::sniff`, `scan::elf::inspect`,
//! `scan::bundle::{next_item, parse_bundle, EntryId}`, `scan::ccob::decode`,
//! `scan::verdict::runs_on`), so `patch` and `scan` read the same images the same way; this
//! module adds the writing back.
//!
//! Source: clang `ClangOffloadBundler.rst`,
//! `OffloadBundler.cpp`: bundle layout, entry IDs, CCOB v1/v2/v3 headers and hash).

use std::io::Read;

use serde::Serialize;

use super::asserts::{CutPath, InstructionRecord};
use super::codeobj::{self, KernelRecord, NoteSpan, Outcome, Proof};
use super::refusal::{Refusal, RefusalKind};
use crate::scan::{bundle, ccob as sccob, elf as selfh, input, verdict};

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
    /// `--asserts`: the device-assert handler entries rewritten to `s_trap 2; s_endpgm`, the
    /// only code bytes that differ (empty, and left out of the JSON, otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<InstructionRecord>,
    /// `--asserts`: the declaring kernels' paths to a hostcall user that the rewrite cut.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cut_paths: Vec<CutPath>,
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
    /// zstd: long-distance matching was on with this window (log2 bytes), as the original
    /// frame's window says it was made (`src/patch/zfit.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub long_window_log: Option<u32>,
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

/// One replaced byte range of the output: `bytes` go at file offset `offset` (same length as
/// what they replace). A walk holds only these, never a copy of the whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// File offset (or offset in the plain bundle, inside a CCOB's own walk).
    pub offset: usize,
    /// The new bytes.
    pub bytes: Vec<u8>,
}

/// What a walk over a file produced.
#[derive(Debug, Default)]
pub struct Walk {
    /// Where the output differs from the input, sorted by offset, disjoint. Apply them with
    /// [`apply_edits`], or copy the file with them (what `patch` writes).
    pub edits: Vec<Edit>,
    /// How the input was read: `code-object`, `bundle`, `ccob`, `host-elf`.
    pub kind: String,
    /// Rewritten images.
    pub images: Vec<ImageRecord>,
    /// Images read that declare nothing.
    pub clean: Vec<CleanImage>,
    /// Entries left alone because their target was not requested.
    pub skipped: Vec<String>,
    /// Of `skipped`, those in which a kernel declares `hidden_hostcall_buffer` (or whose metadata
    /// cannot be read): left declaring.
    pub skipped_declaring: Vec<String>,
    /// `--asserts`: device-assert handlers may be rewritten ([`codeobj::patch`]).
    pub asserts: bool,
    /// The first refusal of a code object; the walk reads on and returns it at the end.
    pub refused: Option<Located>,
    /// Refusals after the first, by location, so that a refusal can say how many code objects
    /// were refused (the first is what the walk returns).
    pub more_refused: Vec<String>,
}

impl Walk {
    /// Keep a refusal: the first is returned at the end of the walk, the others counted.
    fn note_refusal(&mut self, l: Located) {
        match self.refused {
            None => self.refused = Some(l),
            Some(_) => self.more_refused.push(l.location),
        }
    }
}

/// Whether a code object (`data`) left alone still declares `hidden_hostcall_buffer` in any
/// kernel; true also when its metadata cannot be read (it may).
fn declares(data: &[u8]) -> bool {
    match crate::scan::codeobj::parse_with(data, crate::scan::meta::Detail::Declaring) {
        Ok(co) => co.metadata.kernels.iter().any(|k| {
            k.args
                .iter()
                .any(|a| a.value_kind == "hidden_hostcall_buffer")
        }),
        Err(_) => true,
    }
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
    targets.is_empty() || targets.iter().any(|t| verdict::runs_on(processor, t))
}

/// Walk `data` and compute the edits that patch every requested code object.
///
/// Memory: beyond `data`, one code object's copy at a time while it is rewritten, and for a CCOB
/// its plain bundle (at most `limits.max_bundle_bytes`) plus the new compressed payload.
///
/// Errors: a [`Located`] refusal for the first image that cannot be proven or rewritten, for
/// device code that cannot be read at all, or for a CCOB that claims more than the limit.
pub fn walk(data: &[u8], targets: &[String], asserts: bool, limits: &Limits) -> Res<Walk> {
    let mut w = Walk {
        asserts,
        ..Walk::default()
    };
    match input::sniff(data) {
        Some(input::Format::CodeObject) => {
            w.kind = "code-object".into();
            // Skip a bare code object for another target before proving anything about it.
            let mach = data
                .get(48..52)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()) & 0xff);
            match mach.and_then(crate::scan::codeobj::mach_name) {
                Some(p) if !wanted(p, targets) => {
                    w.skipped.push(format!("code object ({p})"));
                    if declares(data) {
                        w.skipped_declaring.push(format!("code object ({p})"));
                    }
                }
                _ => image(&mut w, data, 0, "", "bare", targets)?,
            }
        }
        Some(input::Format::HostElf) => {
            w.kind = "host-elf".into();
            let h = selfh::inspect(data).map_err(|p| {
                refuse(
                    format!("offset 0x{:x}", p.offset),
                    RefusalKind::Unproven,
                    p.reason,
                )
            })?;
            if h.fatbin_nobits.is_some()
                || h.kpack_ref.is_some()
                || h.wrappers.iter().any(|(_, m)| *m == selfh::HIPK)
            {
                return Err(refuse(
                    ".hip_fatbin",
                    RefusalKind::Unproven,
                    "device code externalized (NOBITS .hip_fatbin, kpack): nothing here to patch",
                ));
            }
            match h.fatbin {
                Some((off, bytes)) => {
                    region(&mut w, data, off as usize, bytes.len(), targets, limits)?
                }
                None if !h.rdc.is_empty() => {
                    return Err(refuse(
                        "-fgpu-rdc sections",
                        RefusalKind::Unproven,
                        "an -fgpu-rdc object holds bitcode; hostcall is decided at the device link, so patch the linked library",
                    ))
                }
                None => return Err(refuse("section table", RefusalKind::Unproven, "no .hip_fatbin section: the file carries no HIP device code")),
            }
        }
        Some(input::Format::Bundle) => {
            w.kind = "bundle".into();
            region(&mut w, data, 0, data.len(), targets, limits)?;
        }
        Some(input::Format::Ccob) => {
            w.kind = "ccob".into();
            region(&mut w, data, 0, data.len(), targets, limits)?;
        }
        _ => {
            return Err(refuse(
                "file start",
                RefusalKind::Unproven,
                "not a host ELF, code object, offload bundle or CCOB",
            ))
        }
    }
    if let Some(mut first) = w.refused.take() {
        if !w.more_refused.is_empty() {
            let n = w.more_refused.len();
            let shown: Vec<&str> = w.more_refused.iter().take(3).map(String::as_str).collect();
            first.refusal.reason = format!(
                "{} (and {n} more code object(s) refused: {}{})",
                first.refusal.reason,
                shown.join(", "),
                if n > shown.len() { ", …" } else { "" }
            );
        }
        return Err(first);
    }
    w.edits.sort_by_key(|e| e.offset);
    Ok(w)
}

/// Memory limits of a patch walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest uncompressed size a CCOB may claim; a larger claim is refused before anything
    /// is decompressed.
    pub max_bundle_bytes: u64,
}

/// The output as bytes: `data` with `edits` applied (a copy; for tests and small inputs).
pub fn apply_edits(data: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = data.to_vec();
    for e in edits {
        out[e.offset..e.offset + e.bytes.len()].copy_from_slice(&e.bytes);
    }
    out
}

/// The byte ranges `[start, end)` where `edits` differ from `data`, merged where they touch.
pub fn changed_ranges(data: &[u8], edits: &[Edit]) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for e in edits {
        for (k, (a, b)) in data[e.offset..].iter().zip(&e.bytes).enumerate() {
            if a != b {
                let i = (e.offset + k) as u64;
                match ranges.last_mut() {
                    Some((_, end)) if *end == i => *end += 1,
                    _ => ranges.push((i, i + 1)),
                }
            }
        }
    }
    ranges
}

/// The spans where `new` differs from `old` (same length), as edits at `base`; runs closer than
/// 16 bytes are joined.
fn diff_edits(old: &[u8], new: &[u8], base: usize) -> Vec<Edit> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (i, (a, b)) in old.iter().zip(new).enumerate() {
        if a != b {
            match spans.last_mut() {
                Some((_, end)) if i <= *end + 16 => *end = i + 1,
                _ => spans.push((i, i + 1)),
            }
        }
    }
    spans
        .into_iter()
        .map(|(a, b)| Edit {
            offset: base + a,
            bytes: new[a..b].to_vec(),
        })
        .collect()
}

/// Walk a `.hip_fatbin` (or a whole bundle file) at `base..base+len` with the scanner's walk
/// (as CLR's `hipamd/src/hip_fatbin.cpp` walks them). Unreadable device code refuses: it could hide a declaration.
fn region(
    w: &mut Walk,
    data: &[u8],
    base: usize,
    len: usize,
    targets: &[String],
    limits: &Limits,
) -> Res<()> {
    let sect = &data[base..base + len];
    let mut pos = 0;
    while let Some(item) = bundle::next_item(sect, pos) {
        match item {
            bundle::Item::Plain { offset } => {
                let end = plain_bundle(w, sect, base, offset, targets)?;
                pos = bundle::align_up(offset + end.max(1));
            }
            bundle::Item::Ccob { offset } => {
                let end = match ccob(w, sect, base, offset, targets, limits) {
                    Ok(end) => end,
                    Err(l) => {
                        w.note_refusal(l);
                        // Read on past it when its header says where it ends.
                        match sccob::parse_header(&sect[offset..])
                            .ok()
                            .and_then(|h| h.total_size)
                        {
                            Some(total) => total as usize,
                            None => break,
                        }
                    }
                };
                pos = bundle::align_up(offset + end.max(1));
            }
            bundle::Item::Unknown { offset, end } => {
                return Err(refuse(
                    format!("offset 0x{:x}", base + offset),
                    RefusalKind::Unproven,
                    format!("{} bytes of unknown data in the device code (no bundle magic on a 4096-byte boundary)", end - offset),
                ))
            }
        }
    }
    Ok(())
}

/// Patch the plain bundle at `sect[offset..]` (file offset `base + offset`) into `w.edits`;
/// return its end relative to `offset`.
fn plain_bundle(
    w: &mut Walk,
    sect: &[u8],
    base: usize,
    offset: usize,
    targets: &[String],
) -> Res<usize> {
    let at = base + offset;
    let b = bundle::parse_bundle(&sect[offset..]).map_err(|p| {
        refuse(
            format!("bundle at 0x{at:x}"),
            RefusalKind::Unproven,
            p.reason,
        )
    })?;
    for e in &b.entries {
        let id = bundle::EntryId::parse(e.id);
        if id.is_host() || e.data.is_empty() {
            continue;
        }
        if !id.is_amdgcn() {
            return Err(refuse(
                format!("bundle at 0x{at:x} entry {}", e.id),
                RefusalKind::Unproven,
                "not an amdgcn entry",
            ));
        }
        if !wanted(id.processor(), targets) {
            w.skipped.push(e.id.to_string());
            if declares(e.data) {
                w.skipped_declaring.push(e.id.to_string());
            }
            continue;
        }
        if let Err(l) = image(w, e.data, at + e.offset as usize, e.id, "plain", targets) {
            // Keep reading: the refusal says how many code objects were refused in all.
            w.note_refusal(l);
        }
    }
    Ok(b.end as usize)
}

/// Analyse and rewrite one code object lying at `file_off` in the output.
fn image(
    w: &mut Walk,
    co: &[u8],
    file_off: usize,
    entry_id: &str,
    container: &str,
    targets: &[String],
) -> Res<()> {
    let location = if entry_id.is_empty() {
        format!("code object at 0x{file_off:x}")
    } else {
        format!("{entry_id} at 0x{file_off:x}")
    };
    match codeobj::patch(co, w.asserts) {
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
            w.edits.extend(diff_edits(co, &p.bytes, file_off));
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
                instructions: p
                    .instructions
                    .into_iter()
                    .map(|mut i| {
                        i.file_offset = Some(file_off as u64 + i.code_object_offset);
                        i
                    })
                    .collect(),
                cut_paths: p.cut_paths,
                ccob: None,
            });
            Ok(())
        }
    }
}

/// Patch the CCOB at `sect[offset..]` (file offset `base + offset`); return its end relative to
/// `offset` (its total size).
fn ccob(
    w: &mut Walk,
    sect: &[u8],
    base: usize,
    offset: usize,
    targets: &[String],
    limits: &Limits,
) -> Res<usize> {
    let at = base + offset;
    let loc = format!("compressed bundle at 0x{at:x}");
    let unproven = |r: String| refuse(loc.clone(), RefusalKind::Unproven, r);
    // The claim is checked before anything is allocated for it.
    let claimed = sccob::parse_header(&sect[offset..])
        .map_err(|p| unproven(p.reason))?
        .uncompressed_size;
    if claimed > limits.max_bundle_bytes {
        return Err(unproven(format!(
            "it claims {claimed} bytes uncompressed, over the limit of {} bytes; set {}=<bytes> to raise it",
            limits.max_bundle_bytes,
            super::MAX_BUNDLE_ENV
        )));
    }
    // The scanner's decoder: header, bounded decompression, size and hash checks.
    let d = sccob::decode(&sect[offset..]).map_err(|p| unproven(p.reason))?;
    let h = &d.header;
    let version = h.version;
    let Some(total) = h.total_size else {
        return Err(unproven("CCOB v1 has no total-size field, so the space a recompressed bundle may use is unknown; not supported".into()));
    };
    let (total, hlen, hash) = (total as usize, h.header_len, h.hash);
    let (method, label) = match h.method {
        sccob::Method::Zlib => (0u16, "zlib"),
        sccob::Method::Zstd => (1u16, "zstd"),
    };
    let mut plain = d.bundle;
    // Patch the inner bundle in a walk of its own, then move its records into ours.
    let mut inner = Walk {
        asserts: w.asserts,
        ..Walk::default()
    };
    plain_bundle(&mut inner, &plain, 0, 0, targets).map_err(|mut l| {
        l.location = format!("{loc}: {}", l.location);
        l
    })?;
    if let Some(mut l) = inner.refused.take() {
        l.location = format!("{loc}: {}", l.location);
        w.more_refused
            .extend(inner.more_refused.iter().map(|m| format!("{loc}: {m}")));
        return Err(l);
    }
    w.clean.extend(inner.clean);
    w.skipped.extend(inner.skipped);
    w.skipped_declaring.extend(inner.skipped_declaring);
    if inner.images.is_empty() {
        return Ok(total);
    }
    // The patched bundle, edited in place (no second copy).
    for e in &inner.edits {
        plain[e.offset..e.offset + e.bytes.len()].copy_from_slice(&e.bytes);
    }
    let new_plain = plain;
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
    let Recompressed {
        level,
        payload,
        frame_len,
        smallest,
        long_window_log,
    } = recompress(
        method,
        &new_plain,
        room,
        &sect[offset + hlen..offset + total],
    )
    .map_err(unproven)?;
    let Some(payload) = payload else {
        return Err(Located {
            location: loc.clone(),
            refusal: Refusal {
                kind: RefusalKind::Unproven,
                kernels,
                reason: if smallest == usize::MAX {
                    format!(
                        "the recompressed bundle does not fit: more than {} bytes at every level ({label}), the original space is {total} bytes",
                        hlen + room + (room / 16).max(64 << 10)
                    )
                } else {
                    format!(
                        "the recompressed bundle does not fit: {} bytes at best ({label}), the original space is {total} bytes",
                        hlen + smallest
                    )
                },
            },
        });
    };
    // Round trip over the whole padded payload, as a reader that ignores the total size sees it,
    // compared step by step (no second copy of the bundle).
    let same = match method {
        1 => zstd::stream::read::Decoder::with_buffer(&payload[..])
            .map(|d| reads_exactly(d, &new_plain))
            .unwrap_or(false),
        _ => reads_exactly(flate2::read::ZlibDecoder::new(&payload[..]), &new_plain),
    };
    if !same {
        return Err(unproven(
            "internal: the recompressed bundle does not decompress to the patched bundle".into(),
        ));
    }
    let new_hash = sccob::md5_low64(&new_plain);
    drop(new_plain);
    // Total and uncompressed sizes stay as they were; only the hash and the payload change.
    let hash_at = if version == 2 { 16 } else { 24 };
    w.edits.push(Edit {
        offset: at + hash_at,
        bytes: new_hash.to_le_bytes().to_vec(),
    });
    w.edits.push(Edit {
        offset: at + hlen,
        bytes: payload,
    });
    let rec = CcobRecord {
        offset: at as u64,
        total_size: total as u64,
        frame_bytes: frame_len as u64,
        padding_bytes: (room - frame_len) as u64,
        level,
        long_window_log,
        hash_before: format!("{hash:016x}"),
        hash_after: format!("{new_hash:016x}"),
    };
    for mut img in inner.images {
        img.container = format!("ccob-v{version}-{label}");
        img.file_offset = at as u64;
        img.ccob = Some(rec.clone());
        // Inside the compressed payload: no file offset of its own.
        for i in &mut img.instructions {
            i.file_offset = None;
        }
        w.images.push(img);
    }
    Ok(total)
}

/// Whether `r` yields exactly `want` and then ends.
fn reads_exactly(mut r: impl Read, want: &[u8]) -> bool {
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return pos == want.len(),
            Ok(n) => {
                if want.get(pos..pos + n) != Some(&buf[..n]) {
                    return false;
                }
                pos += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The outcome of [`recompress`].
struct Recompressed {
    /// Compression level used.
    level: i32,
    /// Stream + padding, exactly `room` bytes; `None` when no level fits.
    payload: Option<Vec<u8>>,
    /// Length of the stream alone.
    frame_len: usize,
    /// The smallest stream seen, for the refusal message (`usize::MAX`: every one overflowed
    /// its buffer).
    smallest: usize,
    /// zstd: long-distance matching with this window (log2 bytes).
    long_window_log: Option<u32>,
}

/// Compress `plain` with `method` so that it fills exactly `room` payload bytes: the stream, then
/// padding (a zstd skippable frame of at least 8 bytes, or zeros after a zlib stream). zstd is
/// fitted from the `original` payload's frame ([`super::zfit::fit`]). Returns the level, the
/// padded payload (`None` when no level fits), the stream length, and the smallest stream seen.
fn recompress(
    method: u16,
    plain: &[u8],
    room: usize,
    original: &[u8],
) -> Result<Recompressed, String> {
    let mut smallest = usize::MAX;
    if method == 1 {
        let f = super::zfit::fit(plain, room, original)?;
        return Ok(Recompressed {
            level: if f.payload.is_some() {
                f.params.level
            } else {
                0
            },
            payload: f.payload,
            frame_len: f.frame_len,
            smallest: f.smallest,
            long_window_log: f.params.long_window_log,
        });
    }
    for lvl in [6u32, 9] {
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(lvl));
        std::io::Write::write_all(&mut enc, plain).map_err(|e| format!("zlib: {e}"))?;
        let mut c = enc.finish().map_err(|e| format!("zlib: {e}"))?;
        smallest = smallest.min(c.len());
        let frame = c.len();
        if frame <= room {
            c.resize(room, 0);
            return Ok(Recompressed {
                level: lvl as i32,
                payload: Some(c),
                frame_len: frame,
                smallest,
                long_window_log: None,
            });
        }
    }
    Ok(Recompressed {
        level: 0,
        payload: None,
        frame_len: 0,
        smallest,
        long_window_log: None,
    })
}
