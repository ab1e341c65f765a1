//! Compressed offload bundles (`CCOB` v1, v2, v3; zlib or zstd), decoded with bounded memory and
//! checked against the stored sizes and the MD5-low-64 hash.
//!
//! Source: clang `OffloadBundler.cpp` (`CompressedOffloadBundle`), llvm `Object/OffloadBundle.cpp`;
//! shared/reference/formats.md §5. All integers are little-endian.

use md5::{Digest, Md5};

use super::bundle::CCOB_MAGIC;
use super::Problem;

/// Largest accepted ratio of uncompressed size to compressed payload size. Real bundles compress
/// 2–20×; zstd's own ceiling is far above this, so a header claiming more is treated as a bomb.
pub const MAX_RATIO: u64 = 1024;
/// Largest accepted uncompressed size, whatever the ratio (8 GiB).
pub const MAX_UNCOMPRESSED: u64 = 8 << 30;

/// Compression method field (`llvm::compression::Format` order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// 0: zlib stream.
    Zlib,
    /// 1: zstd frame(s).
    Zstd,
}

/// A parsed CCOB header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// 1, 2 or 3.
    pub version: u16,
    /// Compression method.
    pub method: Method,
    /// Header + payload size in bytes (v2/v3); `None` for v1.
    pub total_size: Option<u64>,
    /// Size of the plain bundle after decompression, in bytes.
    pub uncompressed_size: u64,
    /// Low 64 bits of the MD5 of the uncompressed bundle (digest bytes 0..8, little-endian).
    pub hash: u64,
    /// Header length: 20 (v1), 24 (v2), 32 (v3).
    pub header_len: usize,
}

impl Header {
    /// Short label for reports, e.g. `ccob-v2-zstd`.
    pub fn label(&self) -> String {
        let m = match self.method {
            Method::Zlib => "zlib",
            Method::Zstd => "zstd",
        };
        format!("ccob-v{}-{m}", self.version)
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parse the CCOB header at `buf[0]`.
///
/// Errors (offsets relative to `buf`): wrong magic, truncated header, unknown version or method,
/// a total size past the end of `buf` or smaller than the header.
pub fn parse_header(buf: &[u8]) -> Result<Header, Problem> {
    if buf.len() < 8 || &buf[..4] != CCOB_MAGIC {
        if buf.len() >= 4 && &buf[..4] == CCOB_MAGIC {
            return Err(Problem::new(
                4,
                "truncated",
                format!("CCOB header truncated after {} bytes", buf.len()),
            ));
        }
        return Err(Problem::new(
            0,
            "bad-magic",
            "not a compressed offload bundle (no CCOB magic)",
        ));
    }
    let version = u16_at(buf, 4);
    let method = match u16_at(buf, 6) {
        0 => Method::Zlib,
        1 => Method::Zstd,
        m => {
            return Err(Problem::new(
                6,
                "unsupported",
                format!("CCOB v{version}: unknown compression method {m}"),
            ))
        }
    };
    let header_len = match version {
        1 => 20,
        2 => 24,
        3 => 32,
        v => {
            return Err(Problem::new(
                4,
                "unsupported",
                format!("unknown CCOB version {v}"),
            ))
        }
    };
    if buf.len() < header_len {
        return Err(Problem::new(
            buf.len() as u64,
            "truncated",
            format!(
                "CCOB v{version} header needs {header_len} bytes, {} present",
                buf.len()
            ),
        ));
    }
    let (total_size, uncompressed_size, hash) = match version {
        1 => (None, u32_at(buf, 8) as u64, u64_at(buf, 12)),
        2 => (
            Some(u32_at(buf, 8) as u64),
            u32_at(buf, 12) as u64,
            u64_at(buf, 16),
        ),
        _ => (Some(u64_at(buf, 8)), u64_at(buf, 16), u64_at(buf, 24)),
    };
    if let Some(t) = total_size {
        if t < header_len as u64 {
            return Err(Problem::new(
                8,
                "bad-size",
                format!("CCOB total size {t} is smaller than its {header_len}-byte header"),
            ));
        }
        if t > buf.len() as u64 {
            return Err(Problem::new(
                8,
                "truncated",
                format!(
                    "CCOB total size {t} runs past the end of the data ({} bytes)",
                    buf.len()
                ),
            ));
        }
    }
    Ok(Header {
        version,
        method,
        total_size,
        uncompressed_size,
        hash,
        header_len,
    })
}

/// The MD5-low-64 hash CCOB stores: digest bytes 0..8 read as a little-endian u64.
pub fn md5_low64(data: &[u8]) -> u64 {
    let d = Md5::digest(data);
    u64::from_le_bytes(d[..8].try_into().unwrap())
}

/// A decoded CCOB: the header, the plain bundle bytes, and how many input bytes it occupied.
#[derive(Debug)]
pub struct Decoded {
    /// The header.
    pub header: Header,
    /// The uncompressed plain bundle.
    pub bundle: Vec<u8>,
    /// Bytes of `buf` consumed (header + payload).
    pub consumed: usize,
}

/// Decode the CCOB at `buf[0]`: header, bounded decompression, size and hash checks.
///
/// Memory: at most `uncompressed_size` bytes are allocated, and only when that size is within
/// [`MAX_RATIO`] × payload and [`MAX_UNCOMPRESSED`]. Errors (offsets relative to `buf`): see
/// [`parse_header`]; `bomb`, `decompress` (corrupt stream, or output longer or shorter than the
/// stored size), `hash-mismatch`.
pub fn decode(buf: &[u8]) -> Result<Decoded, Problem> {
    let header = parse_header(buf)?;
    let h = header.header_len;
    let payload = match header.total_size {
        Some(t) => &buf[h..t as usize],
        None => &buf[h..],
    };
    let claimed = header.uncompressed_size;
    let cap = (payload.len() as u64)
        .saturating_mul(MAX_RATIO)
        .saturating_add(64 << 10)
        .min(MAX_UNCOMPRESSED);
    if claimed > cap {
        return Err(Problem::new(
            if header.version == 1 { 8 } else if header.version == 2 { 12 } else { 16 },
            "bomb",
            format!(
                "CCOB claims {claimed} uncompressed bytes from a {}-byte payload (limit {cap}); refusing to decompress",
                payload.len()
            ),
        ));
    }
    let mut out: Vec<u8> = Vec::with_capacity(claimed as usize);
    let used = match header.method {
        Method::Zstd => decode_zstd(payload, &mut out, claimed, header.total_size.is_none())?,
        Method::Zlib => decode_zlib(payload, &mut out, claimed)?,
    };
    let (uoff, hoff) = match header.version {
        1 => (8, 12),
        2 => (12, 16),
        _ => (16, 24),
    };
    if out.len() as u64 != claimed {
        return Err(Problem::new(
            uoff,
            "decompress",
            format!(
                "CCOB payload decompressed to {} bytes but the header says {claimed}",
                out.len()
            ),
        ));
    }
    let got = md5_low64(&out);
    if got != header.hash {
        return Err(Problem::new(
            hoff,
            "hash-mismatch",
            format!("CCOB hash mismatch: stored {:016x}, MD5-low-64 of the decompressed bundle is {got:016x}", header.hash),
        ));
    }
    let consumed = match header.total_size {
        Some(t) => t as usize,
        None => h + used,
    };
    Ok(Decoded {
        header,
        bundle: out,
        consumed,
    })
}

/// Decode zstd frames into `out` (capacity `claimed`). For v1 (`single_frame_bound`) the payload
/// has no stored length, so decode exactly the first frame(s) that produce `claimed` bytes and
/// return how many input bytes they used.
fn decode_zstd(
    payload: &[u8],
    out: &mut Vec<u8>,
    claimed: u64,
    single_frame_bound: bool,
) -> Result<usize, Problem> {
    let input = if single_frame_bound {
        match zstd::zstd_safe::find_frame_compressed_size(payload) {
            Ok(n) => &payload[..n.min(payload.len())],
            Err(_) => {
                return Err(Problem::new(
                    20,
                    "decompress",
                    "CCOB v1 zstd payload: no complete zstd frame",
                ))
            }
        }
    } else {
        payload
    };
    let mut dctx = zstd::zstd_safe::DCtx::create();
    // One extra byte of room lets us tell "exactly claimed" from "more than claimed".
    out.reserve_exact(1);
    match dctx.decompress(out, input) {
        Ok(_) => {}
        Err(code) => {
            let name = zstd::zstd_safe::get_error_name(code);
            let hint = if name.contains("too small") {
                format!("payload decompresses to more than the stored size {claimed}")
            } else {
                format!("zstd: {name}")
            };
            return Err(Problem::new(
                0,
                "decompress",
                format!("CCOB payload: {hint}"),
            ));
        }
    }
    Ok(input.len())
}

/// Decode a zlib stream into `out`, never growing it beyond `claimed` + 1 bytes.
fn decode_zlib(payload: &[u8], out: &mut Vec<u8>, claimed: u64) -> Result<usize, Problem> {
    let mut z = flate2::Decompress::new(true);
    out.reserve_exact(1);
    loop {
        let before_in = z.total_in();
        let before_out = z.total_out();
        let status = z
            .decompress_vec(
                &payload[z.total_in() as usize..],
                out,
                flate2::FlushDecompress::Finish,
            )
            .map_err(|e| {
                Problem::new(
                    z.total_in(),
                    "decompress",
                    format!("CCOB zlib payload: {e}"),
                )
            })?;
        if status == flate2::Status::StreamEnd {
            break;
        }
        if out.len() as u64 > claimed {
            return Err(Problem::new(
                0,
                "decompress",
                format!("CCOB payload decompresses to more than the stored size {claimed}"),
            ));
        }
        if z.total_in() == before_in && z.total_out() == before_out {
            if z.total_in() as usize >= payload.len() {
                return Err(Problem::new(
                    payload.len() as u64,
                    "decompress",
                    "CCOB zlib payload ends before the stream does",
                ));
            }
            return Err(Problem::new(
                z.total_in(),
                "decompress",
                "CCOB payload decompresses to more than the stored size",
            ));
        }
    }
    Ok(z.total_in() as usize)
}
