//! Recompress a patched CCOB bundle with zstd so that it fits the original payload's space, in
//! one or two full compressions instead of trying level after level.
//!
//! What the original frame tells: its window size (RFC 8878 §3.1.1.1.2, the frame header's
//! `Window_Descriptor`). clang-offload-bundler compresses at level 3 with long-distance matching
//! on (clang `OffloadBundler.cpp`: "Compression level 3 is usually sufficient for zstd since long
//! distance matching is enabled"), which gives a 128 MiB window (`windowLog` 27) that no level
//! below 20 picks on its own; `OFFLOAD_BUNDLER_COMPRESSION_LEVEL` may change the level. So a
//! window over 2^23 (the most levels 1–19 pick) means long-distance matching with that window.
//! Without it, level 3 of a 1.2 GB RCCL bundle is 24 % larger than the original, and no level
//! short of the slowest fits.
//!
//! What it does not tell is the level. The patch changes a few bytes of a metadata note, so the
//! patched bundle compresses like the original: the original's first `SAMPLE` bytes are decoded
//! to learn how many compressed bytes they took, the patched bundle's same prefix is compressed
//! at levels 3, 4, … with the frame's parameters until one is no larger (cheap: a prefix, and
//! the prefix of a frame could only refer back within itself too), and the whole bundle is
//! compressed from that level up until it fits. Small bundles skip the sample.
//!
//! This file uses only `std` and the `zstd` crate: `cargo xtask bench-recompress` compiles it by
//! path to compare it with the old search and with the floor, one compression at the level found.

/// The first magic of a zstd skippable frame (RFC 8878 §3.1.2: `0x184D2A5?`, then a u32 size).
pub const ZSTD_SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
/// The bundle prefix compared with the original's, in bytes.
pub const SAMPLE: usize = 32 << 20;
/// The largest window levels 1–19 choose (zstd `clevels.h`, inputs over 256 KiB), as a log2.
const LEVEL_WINDOW_LOG_MAX: u32 = 23;
/// The window long-distance matching takes when none is set (zstd `ZSTD_LDM_DEFAULT_WINDOW_LOG`).
const LDM_DEFAULT_WINDOW_LOG: u32 = 27;
/// The levels searched, lowest first.
const LEVELS: std::ops::RangeInclusive<i32> = 1..=22;
/// clang-offload-bundler's level.
const START_LEVEL: i32 = 3;

/// zstd parameters of one compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Compression level.
    pub level: i32,
    /// Long-distance matching on, with this window (log2 bytes); `None`: the level's own.
    pub long_window_log: Option<u32>,
}

/// The outcome of [`fit`].
#[derive(Debug, Clone)]
pub struct Fit {
    /// The parameters used (or last tried, when nothing fits).
    pub params: Params,
    /// Stream + padding, exactly `room` bytes; `None` when nothing fits.
    pub payload: Option<Vec<u8>>,
    /// Length of the stream alone.
    pub frame_len: usize,
    /// The smallest whole stream seen (`usize::MAX`: every one overflowed its buffer).
    pub smallest: usize,
    /// Compressions of the whole bundle made.
    pub full_compressions: u32,
    /// Compressions of the sample made.
    pub sample_compressions: u32,
}

/// The window of a zstd frame (log2 bytes, rounded up), from its header; `None` when `frame`
/// does not start with a readable zstd frame header.
pub fn window_log(frame: &[u8]) -> Option<u32> {
    if frame.get(..4)? != [0x28, 0xb5, 0x2f, 0xfd] {
        return None;
    }
    let fhd = *frame.get(4)?;
    if fhd & 0x20 != 0 {
        // Single segment: the window is the content size.
        let fcs_len = [1usize, 2, 4, 8][(fhd >> 6) as usize];
        let did_len = [0usize, 1, 2, 4][(fhd & 3) as usize];
        let at = 5 + did_len;
        let b = frame.get(at..at + fcs_len)?;
        let mut v = 0u64;
        for (i, x) in b.iter().enumerate() {
            v |= u64::from(*x) << (8 * i);
        }
        if fcs_len == 2 {
            v += 256;
        }
        return Some(64 - v.max(1).saturating_sub(1).leading_zeros());
    }
    let wd = *frame.get(5)?;
    let exp = u32::from(wd >> 3);
    let mantissa = u32::from(wd & 7);
    Some(10 + exp + u32::from(mantissa != 0))
}

/// How many bytes of the zstd `frame` decode to the first `prefix` bytes (block granularity:
/// the first block boundary at or past `prefix`); `None` when it cannot be decoded that far.
pub fn prefix_cost(frame: &[u8], prefix: usize) -> Option<usize> {
    use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer};
    let mut d = DCtx::create();
    d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(31))
        .ok()?;
    let mut out = vec![0u8; 1 << 20];
    let mut produced = 0usize;
    let mut consumed = 0usize;
    const STEP: usize = 64 << 10;
    while produced < prefix && consumed < frame.len() {
        let end = (consumed + STEP).min(frame.len());
        let mut input = InBuffer::around(&frame[consumed..end]);
        loop {
            let mut o = OutBuffer::around(&mut out[..]);
            d.decompress_stream(&mut o, &mut input).ok()?;
            let n = o.pos();
            produced += n;
            if produced >= prefix || (n < out.len() && input.pos() == input.src.len()) {
                break;
            }
        }
        consumed += input.pos();
    }
    (produced >= prefix).then_some(consumed)
}

/// Compress `plain` with `p` into a buffer of at most `cap` bytes; `None` when it needs more.
///
/// Errors: zstd refuses a parameter.
pub fn compress(plain: &[u8], p: Params, cap: usize) -> Result<Option<Vec<u8>>, String> {
    use zstd::stream::raw::CParameter;
    let mut z = zstd::bulk::Compressor::new(p.level).map_err(|e| format!("zstd: {e}"))?;
    if let Some(w) = p.long_window_log {
        z.set_parameter(CParameter::EnableLongDistanceMatching(true))
            .and_then(|_| z.set_parameter(CParameter::WindowLog(w)))
            .map_err(|e| format!("zstd: window log {w}: {e}"))?;
    }
    let mut c = Vec::with_capacity(cap);
    Ok(z.compress_to_buffer(plain, &mut c).ok().map(|_| c))
}

/// `stream` padded to exactly `room` bytes with a skippable frame (at least 8 bytes), or `None`
/// when it does not fit (longer than `room`, or short by 1 to 7 bytes).
pub fn pad(mut stream: Vec<u8>, room: usize) -> Option<Vec<u8>> {
    match room.checked_sub(stream.len())? {
        0 => Some(stream),
        n if n >= 8 => {
            stream.extend_from_slice(&ZSTD_SKIPPABLE_MAGIC.to_le_bytes());
            stream.extend_from_slice(&((n - 8) as u32).to_le_bytes());
            stream.resize(room, 0);
            Some(stream)
        }
        _ => None,
    }
}

/// The parameters the original frame may have been made with, but for the level, most likely
/// first: long-distance matching with its window when the window is larger than levels 1–19
/// pick; else (zstd shrinks the window to a small input, so the window does not tell) with and
/// without it; the level's own parameters when the frame header cannot be read.
pub fn modes_of(original: &[u8]) -> Vec<Option<u32>> {
    // Long mode without a window of its own is 2^27 (zstd `ZSTD_LDM_DEFAULT_WINDOW_LOG`), then
    // shrunk to the input: ask for that, so the matcher's tables are sized as they were.
    let long = |w: u32| Some(w.max(LDM_DEFAULT_WINDOW_LOG));
    match window_log(original) {
        Some(w) if w > LEVEL_WINDOW_LOG_MAX => vec![long(w)],
        Some(w) => vec![long(w), None],
        None => vec![None],
    }
}

/// Fit `plain` into `room` bytes, compressed like `original` (the payload it replaces): see the
/// module docs.
///
/// Errors: zstd refuses the parameters.
pub fn fit(plain: &[u8], room: usize, original: &[u8]) -> Result<Fit, String> {
    let modes = modes_of(original);
    let mut fit = Fit {
        params: Params {
            level: START_LEVEL,
            long_window_log: modes[0],
        },
        payload: None,
        frame_len: 0,
        smallest: usize::MAX,
        full_compressions: 0,
        sample_compressions: 0,
    };
    let mut from = START_LEVEL;
    if plain.len() > SAMPLE {
        if let Some(budget) = prefix_cost(original, SAMPLE) {
            for level in START_LEVEL..=*LEVELS.end() {
                fit.sample_compressions += 1;
                let p = Params {
                    level,
                    long_window_log: modes[0],
                };
                let cap = budget + (budget / 16).max(64 << 10);
                match compress(&plain[..SAMPLE], p, cap)? {
                    Some(c) if c.len() <= budget => {
                        from = level;
                        break;
                    }
                    _ => from = level + 1,
                }
            }
        }
    }
    // From the predicted level up; then, as a last resort, the levels below it.
    let from = from.min(*LEVELS.end());
    let order = (from..=*LEVELS.end()).chain((*LEVELS.start()..from).rev());
    let cap = room + (room / 16).max(64 << 10);
    for level in order {
        for &long_window_log in &modes {
            fit.params = Params {
                level,
                long_window_log,
            };
            fit.full_compressions += 1;
            let Some(c) = compress(plain, fit.params, cap)? else {
                continue;
            };
            fit.smallest = fit.smallest.min(c.len());
            let len = c.len();
            if let Some(p) = pad(c, room) {
                fit.frame_len = len;
                fit.payload = Some(p);
                return Ok(fit);
            }
        }
    }
    Ok(fit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_of_a_long_mode_frame_and_a_single_segment_one() {
        // RCCL 7.2.4's CCOB frame header: FHD 0x80 (4-byte content size), window byte 0x88.
        assert_eq!(window_log(&[0x28, 0xb5, 0x2f, 0xfd, 0x80, 0x88]), Some(27));
        let small = zstd::bulk::compress(&[7u8; 1000], 3).unwrap();
        assert_eq!(window_log(&small), Some(10));
        assert_eq!(window_log(b"not zstd"), None);
    }

    #[test]
    fn a_frame_compressed_in_long_mode_is_matched_and_fits() {
        // Repetitive data with repeats far apart, compressed as the bundler does.
        let mut plain = Vec::new();
        for i in 0u32..(2 << 20) {
            plain.extend_from_slice(&(i.wrapping_mul(2_654_435_761) >> 7).to_le_bytes());
        }
        let block = plain.clone();
        plain.extend_from_slice(&block);
        let p = Params {
            level: 3,
            long_window_log: Some(27),
        };
        let original = compress(&plain, p, plain.len() * 2).unwrap().unwrap();
        // 16 MiB: zstd shrinks the window to 2^24, still more than levels 1-19 pick.
        assert_eq!(window_log(&original), Some(24));
        assert_eq!(modes_of(&original), vec![Some(27)]);
        // The same parameters give the same bytes.
        assert_eq!(
            compress(&plain, p, plain.len() * 2).unwrap().unwrap(),
            original
        );
        plain[100] ^= 1;
        // A little slack: this changed bit breaks a long match and costs about 100 bytes.
        let room = original.len() + 256;
        let f = fit(&plain, room, &original).unwrap();
        let payload = f.payload.expect("fits");
        assert_eq!(payload.len(), room);
        assert_eq!(
            f.params,
            Params {
                level: 3,
                long_window_log: Some(27)
            }
        );
        assert_eq!(f.full_compressions, 1);
        assert_eq!(zstd::stream::decode_all(&payload[..]).unwrap(), plain);
        // No slack: a higher level with the same parameters makes up for it.
        let f = fit(&plain, original.len(), &original).unwrap();
        assert!(f.payload.is_some());
        assert!(f.params.level > 3 && f.full_compressions <= 3, "{f:?}");
        assert_eq!(f.params.long_window_log, Some(27));
        assert_eq!(prefix_cost(&original, 1000).map(|n| n > 0), Some(true));
    }
}
