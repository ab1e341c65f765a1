//! A CCOB payload decompressed as a stream: the zstd or zlib decoder behind a reader that stops at
//! the size the header claims, hashes what passes (MD5, the low 64 bits the header states), and
//! reports a stream that ends early, runs over or fails as one [`Problem`] at the header field it
//! contradicts. The whole-buffer decoders and the header parser are in `ccob.rs`.

use md5::{Digest, Md5};

use super::{field_offsets, too_long, Header, Method};
use crate::scan::Problem;

/// The payload decoder behind a [`Checked`] stream (zstd on a context of this thread).
pub enum Decoder<'c, P: std::io::BufRead> {
    /// zstd frames.
    Zstd(zstd::stream::read::Decoder<'c, P>),
    /// A zlib stream.
    Zlib(flate2::bufread::ZlibDecoder<P>),
}

thread_local! {
    /// One zstd context per thread, reused from bundle to bundle: its window (up to 128 MiB for
    /// clang's long-distance frames) is allocated and paged in once, not once per bundle.
    static DCTX: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

impl<P: std::io::BufRead> std::io::Read for Decoder<'_, P> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Decoder::Zstd(d) => d.read(out),
            Decoder::Zlib(d) => d.read(out),
        }
    }
}

/// The decompressed bundle as a stream: at most the header's uncompressed size is handed out;
/// the bytes are counted and (optionally) hashed as they pass, and the first decoder error or an
/// output longer than the stored size is remembered, so no second copy is needed for the checks.
pub struct Checked<D> {
    inner: D,
    n: u64,
    claimed: u64,
    md5: Option<Md5>,
    error: Option<String>,
    over: bool,
}

impl<D: std::io::Read> std::io::Read for Checked<D> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let stopped = || std::io::Error::other("CCOB payload stream stopped");
        if self.error.is_some() || self.over {
            return Err(stopped());
        }
        if out.is_empty() {
            return Ok(0);
        }
        if self.n >= self.claimed {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe) {
                Ok(0) => Ok(0),
                Ok(_) => {
                    self.over = true;
                    Err(stopped())
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    Err(stopped())
                }
            };
        }
        let want = out.len().min((self.claimed - self.n) as usize);
        match self.inner.read(&mut out[..want]) {
            Ok(k) => {
                if let Some(m) = &mut self.md5 {
                    m.update(&out[..k]);
                }
                self.n += k as u64;
                Ok(k)
            }
            Err(e) => {
                self.error = Some(e.to_string());
                Err(stopped())
            }
        }
    }
}

/// The stream [`decode_streamed`] hands to its reader.
pub type DecodedStream<'c, P> = crate::scan::stream::Stream<Checked<Decoder<'c, P>>>;

/// Decode the CCOB payload `payload` (its compressed bytes, e.g. from [`open`]) as a stream and
/// let `read` consume the decompressed bundle (typically [`crate::scan::stream::read_bundle`]); then
/// read the rest, and check the decoded size against the header (and the MD5-low-64 hash when
/// `verify_hash`).
///
/// Returns `Ok((result of read, compressed bytes used))`; the inner `Err` is a problem in the
/// decompressed bundle (offset inside it). Memory: the decoder's window (zstd: at most 128 MiB,
/// its default limit) plus whatever `read` keeps; the bundle is never held whole.
///
/// Errors (offsets relative to the CCOB header): `decompress` (the payload is corrupt, or the
/// decompressed size differs from the header's), `hash-mismatch`; they take precedence over a
/// problem `read` found, since a bad stream explains it.
pub fn decode_streamed<P: std::io::BufRead, T>(
    header: &Header,
    payload: P,
    verify_hash: bool,
    read: impl FnOnce(&mut DecodedStream<'_, P>) -> Result<T, crate::scan::stream::Fail>,
) -> Result<(Result<T, Problem>, u64), Problem> {
    if header.method == Method::Zstd {
        return DCTX.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                let ctx = slot.get_or_insert_with(zstd::zstd_safe::DCtx::create);
                let _ = ctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly);
                decode_on(header, payload, verify_hash, Some(ctx), read)
            }
            Err(_) => {
                let mut ctx = zstd::zstd_safe::DCtx::create();
                decode_on(header, payload, verify_hash, Some(&mut ctx), read)
            }
        });
    }
    decode_on(header, payload, verify_hash, None, read)
}

fn decode_on<'c, P: std::io::BufRead, T>(
    header: &Header,
    payload: P,
    verify_hash: bool,
    ctx: Option<&'c mut zstd::zstd_safe::DCtx<'static>>,
    read: impl FnOnce(&mut DecodedStream<'c, P>) -> Result<T, crate::scan::stream::Fail>,
) -> Result<(Result<T, Problem>, u64), Problem> {
    let h = header.header_len as u64;
    let (uoff, hoff) = field_offsets(header.version);
    let claimed = header.uncompressed_size;
    let method = match header.method {
        Method::Zlib => "zlib",
        Method::Zstd => "zstd",
    };
    let dec = match (header.method, ctx) {
        (Method::Zstd, Some(ctx)) => {
            Decoder::Zstd(zstd::stream::read::Decoder::with_context(payload, ctx))
        }
        (Method::Zstd, None) => Decoder::Zstd(
            zstd::stream::read::Decoder::with_buffer(payload)
                .map_err(|e| Problem::new(h, "decompress", format!("CCOB payload: zstd: {e}")))?,
        ),
        (Method::Zlib, _) => Decoder::Zlib(flate2::bufread::ZlibDecoder::new(payload)),
    };
    let mut s = crate::scan::stream::Stream::new(Checked {
        inner: dec,
        n: 0,
        claimed,
        md5: verify_hash.then(Md5::new),
        error: None,
        over: false,
    });
    let result = read(&mut s);
    // Whatever the reader left: count it (and hash it) to the end of the stream.
    let mut scratch = vec![0u8; 64 << 10];
    while let Ok(k) = std::io::Read::read(&mut s, &mut scratch) {
        if k == 0 {
            break;
        }
    }
    let c = s.into_inner();
    if let Some(e) = &c.error {
        return Err(if e.contains("Destination buffer is too small") {
            Problem::new(
                uoff,
                "decompress",
                format!("CCOB decompressed size mismatch: the {method} stream holds more than the {claimed} bytes the header states"),
            )
        } else {
            Problem::new(
                h,
                "decompress",
                format!(
                    "CCOB payload is corrupt: the {method} stream fails after {} of the {claimed} decompressed bytes the header states ({})",
                    c.n,
                    e.to_lowercase()
                ),
            )
        });
    }
    if c.over {
        return Err(too_long(claimed as usize)).map_err(|mut p| {
            p.offset = uoff;
            p.reason.push_str(" (decompressed size mismatch)");
            p
        });
    }
    if c.n != claimed {
        return Err(Problem::new(
            uoff,
            "decompress",
            format!(
                "CCOB decompressed size mismatch: the payload decompresses to {} bytes but the header says {claimed}",
                c.n
            ),
        ));
    }
    if let Some(m) = c.md5 {
        let got = u64::from_le_bytes(m.finalize()[..8].try_into().unwrap());
        if got != header.hash {
            return Err(Problem::new(
                hoff,
                "hash-mismatch",
                format!("CCOB hash mismatch (the payload is corrupt or was changed): stored {:016x}, MD5-low-64 of the decompressed bundle is {got:016x}", header.hash),
            ));
        }
    }
    let used = match c.inner {
        Decoder::Zlib(z) => z.total_in(),
        Decoder::Zstd(_) => 0,
    };
    let result = result.map_err(|f| match f {
        crate::scan::stream::Fail::Bad(p) => p,
        crate::scan::stream::Fail::Io { at, error } => Problem::new(
            at,
            "truncated",
            format!("decompressed bundle ends early: {error}"),
        ),
    });
    Ok((result, used))
}
