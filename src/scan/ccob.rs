//! Compressed offload bundles (`CCOB` v1, v2, v3; zlib or zstd), decoded with bounded memory and
//! checked against the stored sizes and the MD5-low-64 hash.
//!
//! Source: clang `OffloadBundler.cpp` (`CompressedOffloadBundle`), llvm `Object/OffloadBundle.cpp`.
//! All integers are little-endian.

use md5::{Digest, Md5};

use super::bundle::CCOB_MAGIC;
use super::Problem;

mod streamed;
pub use streamed::{decode_streamed, Checked, DecodedStream, Decoder};

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
    parse_header_in(buf, buf.len() as u64)
}

/// [`parse_header`] for a header whose CCOB is `avail` bytes long at most (a stream: `buf` holds
/// only the header's bytes).
pub fn parse_header_in(buf: &[u8], avail: u64) -> Result<Header, Problem> {
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
        if t > avail {
            return Err(Problem::new(
                8,
                "truncated",
                format!("CCOB total size {t} runs past the end of the data ({avail} bytes)"),
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

/// The decompressed bundle: a heap buffer, or for large bundles an anonymous mapping advised to
/// use huge pages (fewer page faults when a 300 MB bundle is written once).
pub enum Bytes {
    /// Small bundles.
    Heap(Vec<u8>),
    /// Bundles of [`HUGE_BUFFER`] bytes or more.
    Map(memmap2::MmapMut),
}

/// Bundles at least this large are decompressed into a huge-page mapping (4 MiB).
pub const HUGE_BUFFER: usize = 4 << 20;

impl Bytes {
    fn zeroed(len: usize, huge: bool) -> Result<Bytes, Problem> {
        if huge && len >= HUGE_BUFFER {
            let m = memmap2::MmapMut::map_anon(len).map_err(|e| {
                Problem::new(
                    0,
                    "bomb",
                    format!("cannot reserve {len} bytes for the decompressed bundle: {e}"),
                )
            })?;
            #[cfg(target_os = "linux")]
            let _ = m.advise(memmap2::Advice::HugePage);
            Ok(Bytes::Map(m))
        } else {
            Ok(Bytes::Heap(vec![0; len]))
        }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Bytes::Heap(v) => v,
            Bytes::Map(m) => m,
        }
    }

    fn truncate(&mut self, n: usize) {
        if let Bytes::Heap(v) = self {
            v.truncate(n)
        }
    }

    /// The bytes as a `Vec` (moved when on the heap, copied from a mapping).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Bytes::Heap(v) => v,
            Bytes::Map(m) => m.to_vec(),
        }
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Heap(v) => v,
            Bytes::Map(m) => m,
        }
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len())
    }
}

/// A decoded CCOB: the header, the plain bundle bytes (a `Vec`, or [`Bytes`] from
/// [`decode_mapped`]), and how many input bytes it occupied.
#[derive(Debug)]
pub struct Decoded<B = Vec<u8>> {
    /// The header.
    pub header: Header,
    /// The uncompressed plain bundle (exactly `header.uncompressed_size` bytes).
    pub bundle: B,
    /// Bytes of `buf` consumed (header + payload).
    pub consumed: usize,
}

/// Decode the CCOB at `buf[0]`: header, bounded decompression, size and hash checks.
///
/// Memory: exactly `uncompressed_size` bytes are allocated, and only when that size is within
/// [`MAX_RATIO`] × payload and [`MAX_UNCOMPRESSED`]; output beyond it is an error, never written.
/// The MD5 runs on a second thread over each decoded 8 MiB step while the next is decoded.
/// Errors (offsets relative to `buf`): see [`parse_header`]; `bomb`, `decompress` (corrupt or
/// truncated stream, or output longer or shorter than the stored size), `hash-mismatch`.
pub fn decode(buf: &[u8]) -> Result<Decoded, Problem> {
    decode_with(buf, true)
}

/// Output step: decoded bytes are handed to the hasher in pieces of this size.
const STEP: usize = 8 << 20;

/// [`decode`], with the hash check optional (`verify_hash: false` skips only the MD5; the sizes
/// and the stream itself are still checked).
pub fn decode_with(buf: &[u8], verify_hash: bool) -> Result<Decoded, Problem> {
    let d = decode_inner(buf, verify_hash, false)?;
    Ok(Decoded {
        header: d.header,
        bundle: d.bundle.into_vec(),
        consumed: d.consumed,
    })
}

/// [`decode_with`] for the scanner: a bundle of [`HUGE_BUFFER`] bytes or more is decoded into an
/// anonymous mapping advised to use huge pages instead of the heap (fewer page faults).
pub fn decode_mapped(buf: &[u8], verify_hash: bool) -> Result<Decoded<Bytes>, Problem> {
    decode_inner(buf, verify_hash, true)
}

fn decode_inner(buf: &[u8], verify_hash: bool, huge: bool) -> Result<Decoded<Bytes>, Problem> {
    let header = parse_header(buf)?;
    let h = header.header_len;
    let mut payload = match header.total_size {
        Some(t) => &buf[h..t as usize],
        None => &buf[h..],
    };
    let claimed = header.uncompressed_size;
    let cap = (payload.len() as u64)
        .saturating_mul(MAX_RATIO)
        .saturating_add(64 << 10)
        .min(MAX_UNCOMPRESSED);
    let (uoff, hoff) = match header.version {
        1 => (8, 12),
        2 => (12, 16),
        _ => (16, 24),
    };
    if claimed > cap {
        return Err(Problem::new(
            uoff,
            "bomb",
            format!(
                "CCOB claims {claimed} uncompressed bytes from a {}-byte payload (limit {cap}); refusing to decompress",
                payload.len()
            ),
        ));
    }
    if header.version == 1 && header.method == Method::Zstd {
        // v1 stores no total size: the payload ends with its zstd frame.
        match zstd::zstd_safe::find_frame_compressed_size(payload) {
            Ok(n) if n <= payload.len() => payload = &payload[..n],
            _ => {
                return Err(Problem::new(
                    h as u64,
                    "decompress",
                    "CCOB v1 zstd payload: no complete zstd frame",
                ))
            }
        }
    }
    let mut out = Bytes::zeroed(claimed as usize, huge)?;
    let (result, digest) = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<&[u8]>(8);
        let hasher = verify_hash.then(|| {
            s.spawn(move || {
                let mut m = Md5::new();
                for piece in rx {
                    m.update(piece);
                }
                u64::from_le_bytes(m.finalize()[..8].try_into().unwrap())
            })
        });
        let r = match header.method {
            Method::Zstd => stream_zstd(payload, out.as_mut(), &tx),
            Method::Zlib => stream_zlib(payload, out.as_mut(), &tx),
        };
        drop(tx);
        (r, hasher.map(|t| t.join().expect("md5 thread")))
    });
    let (written, used) = result.map_err(|mut p| {
        p.offset += h as u64;
        p
    })?;
    if written as u64 != claimed {
        return Err(Problem::new(
            uoff,
            "decompress",
            format!("CCOB payload decompressed to {written} bytes but the header says {claimed}"),
        ));
    }
    out.truncate(written);
    if let Some(got) = digest {
        if got != header.hash {
            return Err(Problem::new(
                hoff,
                "hash-mismatch",
                format!("CCOB hash mismatch (the payload is corrupt or was changed): stored {:016x}, MD5-low-64 of the decompressed bundle is {got:016x}", header.hash),
            ));
        }
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

fn too_long(claimed: usize) -> Problem {
    Problem::new(
        0,
        "decompress",
        format!("CCOB payload decompresses to more than the stored size {claimed}"),
    )
}

/// Stream-decode zstd frames into `out` in [`STEP`] pieces, sending each finished piece to `tx`.
/// Returns (bytes written, input bytes used). Offsets in errors are relative to the payload.
fn stream_zstd<'a>(
    input: &[u8],
    out: &'a mut [u8],
    tx: &std::sync::mpsc::SyncSender<&'a [u8]>,
) -> Result<(usize, usize), Problem> {
    use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer};
    let claimed = out.len();
    let mut dctx = DCtx::create();
    let mut inb = InBuffer::around(input);
    let mut rest: &'a mut [u8] = out;
    let mut written = 0usize;
    let mut last = 1usize;
    let zerr = |code, at: usize| {
        Problem::new(
            at as u64,
            "decompress",
            format!(
                "CCOB payload: zstd: {}",
                zstd::zstd_safe::get_error_name(code)
            ),
        )
    };
    loop {
        let n = STEP.min(rest.len());
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        let filled = {
            let mut ob = OutBuffer::around(&mut *head);
            while ob.pos() < n && (inb.pos() < input.len() || last != 0) {
                let (ip, op) = (inb.pos(), ob.pos());
                last = dctx
                    .decompress_stream(&mut ob, &mut inb)
                    .map_err(|c| zerr(c, inb.pos()))?;
                if inb.pos() == ip && ob.pos() == op {
                    break;
                }
            }
            ob.pos()
        };
        let head: &'a [u8] = head;
        let _ = tx.send(&head[..filled]);
        written += filled;
        if filled < n || tail.is_empty() {
            break;
        }
        rest = tail;
    }
    // The buffer is full (or the input ended): any further output means the header lied.
    if inb.pos() < input.len() || last != 0 {
        let mut scratch = [0u8; 1];
        let mut ob = OutBuffer::around(&mut scratch[..]);
        loop {
            let ip = inb.pos();
            last = dctx
                .decompress_stream(&mut ob, &mut inb)
                .map_err(|c| zerr(c, inb.pos()))?;
            if ob.pos() > 0 {
                return Err(too_long(claimed));
            }
            if (last == 0 && inb.pos() == input.len()) || inb.pos() == ip {
                break;
            }
        }
        if last != 0 {
            return Err(Problem::new(
                input.len() as u64,
                "decompress",
                "CCOB payload: zstd frame is truncated",
            ));
        }
    }
    Ok((written, inb.pos()))
}

/// Stream-decode a zlib stream into `out` in [`STEP`] pieces, sending each piece to `tx`.
fn stream_zlib<'a>(
    input: &[u8],
    out: &'a mut [u8],
    tx: &std::sync::mpsc::SyncSender<&'a [u8]>,
) -> Result<(usize, usize), Problem> {
    let claimed = out.len();
    let mut z = flate2::Decompress::new(true);
    let mut rest: &'a mut [u8] = out;
    let mut written = 0usize;
    let mut ended = false;
    loop {
        let n = STEP.min(rest.len());
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        let mut filled = 0usize;
        while filled < n && !ended {
            let (i0, o0) = (z.total_in(), z.total_out());
            let st = z
                .decompress(
                    &input[z.total_in() as usize..],
                    &mut head[filled..],
                    flate2::FlushDecompress::None,
                )
                .map_err(|e| {
                    Problem::new(
                        z.total_in(),
                        "decompress",
                        format!("CCOB zlib payload: {e}"),
                    )
                })?;
            filled += (z.total_out() - o0) as usize;
            if st == flate2::Status::StreamEnd {
                ended = true;
            } else if z.total_in() == i0 && z.total_out() == o0 {
                if z.total_in() as usize >= input.len() {
                    return Err(Problem::new(
                        input.len() as u64,
                        "decompress",
                        "CCOB zlib payload ends before the stream does",
                    ));
                }
                break;
            }
        }
        let head: &'a [u8] = head;
        let _ = tx.send(&head[..filled]);
        written += filled;
        if ended || filled < n || tail.is_empty() {
            break;
        }
        rest = tail;
    }
    if !ended {
        let mut scratch = [0u8; 1];
        let st = z
            .decompress(
                &input[z.total_in() as usize..],
                &mut scratch,
                flate2::FlushDecompress::Finish,
            )
            .map_err(|e| {
                Problem::new(
                    z.total_in(),
                    "decompress",
                    format!("CCOB zlib payload: {e}"),
                )
            })?;
        if z.total_out() as usize > written {
            return Err(too_long(claimed));
        }
        if st != flate2::Status::StreamEnd {
            return Err(Problem::new(
                input.len() as u64,
                "decompress",
                "CCOB zlib payload ends before the stream does",
            ));
        }
    }
    Ok((written, z.total_in() as usize))
}

/// The header and the compressed payload of the CCOB at `buf[0]`, after the header checks and
/// the bomb check: for v2/v3 the `total_size - header` bytes; for v1 zstd its first frame; for v1
/// zlib everything after the header (the zlib stream says where it ends).
///
/// Errors (offsets relative to `buf`): see [`parse_header`]; `bomb` when the claimed size exceeds
/// [`MAX_RATIO`] × payload or [`MAX_UNCOMPRESSED`]; `decompress` for a v1 zstd payload with no
/// complete frame.
pub fn open(buf: &[u8]) -> Result<(Header, &[u8]), Problem> {
    let header = parse_header(buf)?;
    let h = header.header_len;
    let mut payload = match header.total_size {
        Some(t) => &buf[h..t as usize],
        None => &buf[h..],
    };
    check_claim(&header, payload.len() as u64)?;
    if header.version == 1 && header.method == Method::Zstd {
        match zstd::zstd_safe::find_frame_compressed_size(payload) {
            Ok(n) if n <= payload.len() => payload = &payload[..n],
            _ => {
                return Err(Problem::new(
                    h as u64,
                    "decompress",
                    "CCOB v1 zstd payload: no complete zstd frame",
                ))
            }
        }
    }
    Ok((header, payload))
}

/// Offsets of the uncompressed-size and hash fields in a header of `version`.
fn field_offsets(version: u16) -> (u64, u64) {
    match version {
        1 => (8, 12),
        2 => (12, 16),
        _ => (16, 24),
    }
}

/// The bomb check: the claimed uncompressed size against [`MAX_RATIO`] × `payload_len` (plus
/// 64 KiB) and [`MAX_UNCOMPRESSED`].
pub fn check_claim(header: &Header, payload_len: u64) -> Result<(), Problem> {
    let claimed = header.uncompressed_size;
    let cap = payload_len
        .saturating_mul(MAX_RATIO)
        .saturating_add(64 << 10)
        .min(MAX_UNCOMPRESSED);
    if claimed > cap {
        return Err(Problem::new(
            field_offsets(header.version).0,
            "bomb",
            format!(
                "CCOB claims {claimed} uncompressed bytes from a {payload_len}-byte payload (limit {cap}); refusing to decompress"
            ),
        ));
    }
    Ok(())
}
