//! Offload bundles: the plain `__CLANG_OFFLOAD_BUNDLE__` layout, bundle entry IDs, and the walk over
//! a `.hip_fatbin` that holds several bundles (plain or CCOB) back to back on 4096-byte boundaries.
//!
//! Source: clang `ClangOffloadBundler.rst` and `OffloadBundler.cpp`. All integers are little-endian.

use super::Problem;

/// Magic of an uncompressed offload bundle (24 ASCII bytes, no NUL).
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Magic of a compressed offload bundle.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";
/// Bundle alignment inside `.hip_fatbin` (`HIPCodeObjectAlign`), in bytes.
pub const ALIGN: usize = 4096;

/// One entry of a plain bundle: an entry ID and its payload (a code object, bitcode, or empty).
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The bundle entry ID, e.g. `hipv4-amdgcn-amd-amdhsa--gfx1100`.
    pub id: &'a str,
    /// Payload offset from the start of the bundle, in bytes.
    pub offset: u64,
    /// The payload bytes.
    pub data: &'a [u8],
}

/// A parsed plain bundle: its entries and its end (max `offset + size`, at least the header end).
#[derive(Debug, Clone)]
pub struct Bundle<'a> {
    /// Entries in header order.
    pub entries: Vec<Entry<'a>>,
    /// Bytes from the bundle start to the end of its last payload.
    pub end: u64,
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    buf.get(at..at.checked_add(8)?)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// Parse a plain bundle starting at `buf[0]` (clang `ClangOffloadBundler.rst`). Every entry is bounds-checked against
/// `buf`; offsets in a [`Problem`] are relative to `buf`.
///
/// Errors: wrong magic, header or entry table truncated, an entry ID that is not UTF-8, a payload
/// past the end of `buf`.
pub fn parse_bundle(buf: &[u8]) -> Result<Bundle<'_>, Problem> {
    if buf.len() < BUNDLE_MAGIC.len() || &buf[..BUNDLE_MAGIC.len()] != BUNDLE_MAGIC {
        return Err(Problem::new(
            0,
            "bad-magic",
            "not an offload bundle (no __CLANG_OFFLOAD_BUNDLE__ magic)",
        ));
    }
    let n = u64_at(buf, 24).ok_or_else(|| {
        Problem::new(
            24,
            "truncated",
            format!(
                "bundle header truncated: entry count needs 8 bytes, {} left",
                buf.len() - 24
            ),
        )
    })?;
    // Each entry record is at least 24 bytes, so the count is bounded by the bytes that remain.
    let max_entries = (buf.len() as u64 - 32) / 24;
    if n > max_entries {
        return Err(Problem::new(
            24,
            "truncated",
            format!(
                "bundle claims {n} entries but only {} bytes of entry table follow",
                buf.len() - 32
            ),
        ));
    }
    let mut pos = 32usize;
    let mut end = 0u64;
    let mut entries = Vec::with_capacity(n as usize);
    for i in 0..n {
        let rec = pos;
        let (Some(off), Some(size), Some(id_len)) = (
            u64_at(buf, pos),
            u64_at(buf, pos + 8),
            u64_at(buf, pos + 16),
        ) else {
            return Err(Problem::new(
                rec as u64,
                "truncated",
                format!("bundle entry {i}: record truncated"),
            ));
        };
        pos += 24;
        let remaining = (buf.len() - pos) as u64;
        if id_len > remaining {
            return Err(Problem::new(
                (rec + 16) as u64,
                "truncated",
                format!(
                    "bundle entry {i}: entry ID length {id_len} exceeds the {remaining} bytes left"
                ),
            ));
        }
        let id_bytes = &buf[pos..pos + id_len as usize];
        let id = std::str::from_utf8(id_bytes).map_err(|_| {
            Problem::new(
                pos as u64,
                "bad-entry-id",
                format!("bundle entry {i}: entry ID is not UTF-8"),
            )
        })?;
        pos += id_len as usize;
        let stop = off.checked_add(size).filter(|&e| e <= buf.len() as u64).ok_or_else(|| {
            Problem::new(
                rec as u64,
                "truncated",
                format!(
                    "bundle entry {i} ({id}): payload at {off}+{size} runs past the end of the data ({} bytes)",
                    buf.len()
                ),
            )
        })?;
        end = end.max(stop);
        entries.push(Entry {
            id,
            offset: off,
            data: &buf[off as usize..stop as usize],
        });
    }
    Ok(Bundle {
        entries,
        end: end.max(pos as u64),
    })
}

/// A parsed bundle entry ID: `<offload-kind>-<triple>[-<target-id>]` (clang `ClangOffloadBundler.rst`, "Bundle Entry ID").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryId<'a> {
    /// `host`, `hip`, `hipv4`, `openmp`, ….
    pub kind: &'a str,
    /// Four-field triple, e.g. `amdgcn-amd-amdhsa-` (the environment may be empty).
    pub triple: String,
    /// Target ID, e.g. `gfx90a:xnack-`; empty when absent.
    pub target_id: &'a str,
}

impl<'a> EntryId<'a> {
    /// Split an entry ID. The kind is the text before the first `-`; the rest splits into at most
    /// five `-` fields (four triple fields, then the target ID, which keeps its `:xnack-` signs).
    pub fn parse(id: &'a str) -> EntryId<'a> {
        let (kind, rest) = id.split_once('-').unwrap_or((id, ""));
        let fields: Vec<&str> = rest.splitn(5, '-').collect();
        let triple = fields.iter().take(4).copied().collect::<Vec<_>>().join("-");
        let target_id = fields.get(4).copied().unwrap_or("");
        EntryId {
            kind,
            triple,
            target_id,
        }
    }

    /// Whether this is the host entry.
    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    /// Whether the triple is an AMDGPU one (`amdgcn-…`).
    pub fn is_amdgcn(&self) -> bool {
        self.triple.starts_with("amdgcn")
    }

    /// The processor part of the target ID (`gfx90a` for `gfx90a:xnack-`).
    pub fn processor(&self) -> &'a str {
        self.target_id.split(':').next().unwrap_or("")
    }
}

/// Round `n` up to the next multiple of [`ALIGN`].
pub fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN).saturating_mul(ALIGN)
}

/// What the walk found at one position of a `.hip_fatbin`.
#[derive(Debug)]
pub enum Item {
    /// A plain bundle at `offset`.
    Plain { offset: usize },
    /// A CCOB bundle at `offset`.
    Ccob { offset: usize },
    /// Bytes that are neither padding nor a bundle magic, from `offset` to `end`.
    Unknown { offset: usize, end: usize },
}

/// Find the next 4096-aligned position at or after `from` that starts with a bundle magic.
pub fn resync(data: &[u8], from: usize) -> usize {
    let mut q = align_up(from);
    while q < data.len() {
        let r = &data[q..];
        if r.starts_with(BUNDLE_MAGIC) || r.starts_with(CCOB_MAGIC) {
            return q;
        }
        q += ALIGN;
    }
    data.len()
}

/// Classify the bytes at `pos` (CLR `hipamd/src/hip_fatbin.cpp` walks the same way): skip zero padding to the next non-zero byte, then
/// test for a magic only at 4096-aligned offsets. Returns `None` at the end of the data.
pub fn next_item(data: &[u8], mut pos: usize) -> Option<Item> {
    loop {
        if pos >= data.len() {
            return None;
        }
        let r = &data[pos..];
        if pos.is_multiple_of(ALIGN) && r.starts_with(BUNDLE_MAGIC) {
            return Some(Item::Plain { offset: pos });
        }
        if pos.is_multiple_of(ALIGN) && r.starts_with(CCOB_MAGIC) {
            return Some(Item::Ccob { offset: pos });
        }
        match r.iter().position(|&b| b != 0) {
            None => return None,
            Some(0) => {
                let end = resync(data, pos + 1);
                return Some(Item::Unknown { offset: pos, end });
            }
            Some(k) => pos += k,
        }
    }
}

/// Bitcode magics: raw `BC C0 DE` and the bitcode wrapper `DE C0 17 0B`.
pub fn is_bitcode(b: &[u8]) -> bool {
    b.starts_with(b"BC\xC0\xDE") || b.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids() {
        let e = EntryId::parse("hipv4-amdgcn-amd-amdhsa--gfx908:sramecc+:xnack-");
        assert_eq!(
            (e.kind, e.triple.as_str(), e.target_id),
            ("hipv4", "amdgcn-amd-amdhsa-", "gfx908:sramecc+:xnack-")
        );
        assert_eq!(e.processor(), "gfx908");
        let h = EntryId::parse("host-x86_64-unknown-linux--");
        assert!(h.is_host());
        assert_eq!(h.target_id, "");
        let g = EntryId::parse("hip-amdgcn-amd-amdhsa--gfx11-generic");
        assert_eq!(g.processor(), "gfx11-generic");
    }
}
