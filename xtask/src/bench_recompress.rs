//! `cargo xtask bench-recompress`: how long `patch` takes to recompress a CCOB bundle so that it
//! fits its original space, against the floor (one compression with the parameters found), in
//! one run, on every zstd CCOB of a real library.
//!
//! Input (default): Debian's librccl1 7.2.4 (`cargo xtask inputs`, extracted with `dpkg-deb -x`
//! into `target/bench-recompress/`): one CCOB v3 zstd bundle of 1.2 GB (376 MB compressed, nine
//! targets). Its kernels declare nothing, so `patch` has nothing to do there; the bench stands in
//! for a patch by changing one byte of the bundle's first `hidden_` metadata string, as the
//! patch's note rewrite does, and recompresses that.
//!
//! Rows per bundle, each timed once, in this order: the new search (`src/patch/zfit.rs`, compiled
//! here by path: long-distance matching with the frame's window, the level predicted from a
//! 32 MiB sample of the original frame); the floor, one compression with the level and
//! parameters the search chose; the old search (levels 3, 1, 2, 4 … 22 with the level's own
//! parameters, the first that fits), stopped once it has run `--old-budget` seconds (default
//! 300) without fitting. Decoding the original is timed too (patch does it anyway).
//!
//! A bundle with no `hidden_` string (no code object metadata a patch would rewrite) is listed
//! and skipped. `--at OFFSET` (hex or decimal, repeatable) times only the bundles at those file
//! offsets: the ones `patch` names (Debian's librocsparse1 7.2.4 holds many CCOBs, two of which
//! hold declaring kernels, at 0x3af1000 and 0x4188000).
//!
//! Usage: `cargo xtask bench-recompress [--lib FILE] [--old-budget SECONDS] [--at OFFSET]…`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use xshell::{cmd, Shell};

#[allow(dead_code)]
#[path = "../../src/patch/zfit.rs"]
mod zfit;

/// The old order of levels (patch before the search), each with the level's own parameters.
const OLD_LEVELS: [i32; 22] = [
    3, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
];

/// Run the bench.
pub fn run(sh: &Shell, args: &[String]) -> anyhow::Result<()> {
    let mut lib: Option<PathBuf> = None;
    let mut old_budget = 300.0f64;
    let mut only: Vec<usize> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--lib" => lib = it.next().map(PathBuf::from),
            "--old-budget" => {
                old_budget = it
                    .next()
                    .context("--old-budget needs seconds")?
                    .parse()
                    .context("--old-budget: not a number")?
            }
            "--at" => {
                let a = it.next().context("--at needs a file offset")?;
                let n = match a.strip_prefix("0x") {
                    Some(h) => usize::from_str_radix(h, 16),
                    None => a.parse(),
                }
                .with_context(|| format!("--at {a}: not an offset"))?;
                only.push(n);
            }
            _ => anyhow::bail!(
                "usage: cargo xtask bench-recompress [--lib FILE] [--old-budget SECONDS] [--at OFFSET]…"
            ),
        }
    }
    let lib = match lib {
        Some(l) => l,
        None => default_library(sh)?,
    };
    let data = std::fs::read(&lib).with_context(|| format!("cannot read {}", lib.display()))?;
    println!("library: {} ({} bytes)", lib.display(), data.len());
    let mut found = 0;
    let mut at = 0usize;
    while let Some(i) = find(&data[at..], b"CCOB").map(|i| i + at) {
        let Some((hlen, total, unc)) = header(&data[i..]) else {
            at = i + 4;
            continue;
        };
        if only.is_empty() || only.contains(&i) {
            found += 1;
            bench_one(&data[i + hlen..i + total], unc, i, old_budget)?;
        }
        at = i + total;
    }
    if found == 0 {
        anyhow::bail!(
            "{}: no zstd CCOB (v2 or v3) found{}",
            lib.display(),
            if only.is_empty() {
                ""
            } else {
                " at the offsets --at gives"
            }
        );
    }
    Ok(())
}

/// The default input: librccl1 7.2.4's library, extracted once.
fn default_library(sh: &Shell) -> anyhow::Result<PathBuf> {
    let inputs = std::env::var_os("RCCLFIX_TEST_INPUTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::project_root().join("target/test-inputs"));
    let deb = inputs.join("librccl1_7.2.4-1~exp3_amd64.deb");
    if !deb.is_file() {
        anyhow::bail!(
            "{} is missing: run `cargo xtask inputs` first (or give --lib FILE)",
            deb.display()
        );
    }
    let dir = crate::project_root().join("target/bench-recompress");
    let lib = dir.join("usr/lib/x86_64-linux-gnu/librccl.so.1.0");
    if !lib.is_file() {
        std::fs::create_dir_all(&dir)?;
        cmd!(sh, "dpkg-deb -x {deb} {dir}").run()?;
    }
    Ok(lib)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `(header length, total size, uncompressed size)` of a zstd CCOB v2 or v3 header (clang
/// `ClangOffloadBundler.rst`), or `None`.
fn header(b: &[u8]) -> Option<(usize, usize, usize)> {
    let u16at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize);
    let (version, method) = (u16at(4)?, u16at(6)?);
    let (hlen, total, unc) = match version {
        2 => (24, u32at(8)?, u32at(12)?),
        3 => (32, u64at(8)?, u64at(16)?),
        _ => return None,
    };
    (method == 1 && total > hlen && total <= b.len()).then_some((hlen, total, unc))
}

fn bench_one(original: &[u8], unc: usize, at: usize, old_budget: f64) -> anyhow::Result<()> {
    let room = original.len();
    let t = Instant::now();
    let mut plain = zstd::bulk::decompress(original, unc).context("cannot decode the CCOB")?;
    let decode = t.elapsed().as_secs_f64();
    let Some(h) = find(&plain, b"hidden_") else {
        println!("CCOB at 0x{at:x}: {unc} bytes, {room} compressed: no hidden_ string, nothing a patch would rewrite (skipped)");
        return Ok(());
    };
    plain[h + 7] ^= 0x01;
    println!(
        "CCOB at 0x{at:x}: {unc} bytes, {room} compressed, frame window 2^{}; one byte changed at {h}",
        zfit::window_log(original).unwrap_or(0)
    );
    println!("  decode the original               {decode:8.2} s");

    let t = Instant::now();
    let fit = zfit::fit(&plain, room, original).map_err(anyhow::Error::msg)?;
    let new = t.elapsed().as_secs_f64();
    let payload = fit
        .payload
        .as_ref()
        .context("the new search found nothing that fits")?;
    anyhow::ensure!(
        zstd::stream::decode_all(&payload[..])? == plain,
        "the new search's payload does not decode to the bundle"
    );
    println!(
        "  new search                        {new:8.2} s  level {}, long window {:?}, {} sample + {} full compression(s), stream {} bytes",
        fit.params.level, fit.params.long_window_log, fit.sample_compressions, fit.full_compressions, fit.frame_len
    );

    let t = Instant::now();
    let one = zfit::compress(&plain, fit.params, room + (64 << 10)).map_err(anyhow::Error::msg)?;
    let floor = t.elapsed().as_secs_f64();
    println!(
        "  floor: one compression, same params {floor:8.2} s  ({} bytes; new search = {:.2}x the floor)",
        one.map_or(0, |c| c.len()),
        new / floor
    );

    let t = Instant::now();
    let mut outcome = String::from("nothing fits");
    for level in OLD_LEVELS {
        if t.elapsed().as_secs_f64() > old_budget {
            outcome = format!("stopped after {old_budget:.0} s, before level {level}, nothing fit");
            break;
        }
        let p = zfit::Params {
            level,
            long_window_log: None,
        };
        if let Some(c) = zfit::compress(&plain, p, room + (room / 16).max(64 << 10))
            .map_err(anyhow::Error::msg)?
        {
            let len = c.len();
            if zfit::pad(c, room).is_some() {
                outcome = format!("level {level} fits ({len} bytes)");
                break;
            }
            outcome = format!("smallest so far {len} bytes at level {level}");
        }
    }
    let old = t.elapsed().as_secs_f64();
    println!("  old search (3, 1, 2, 4 … 22)      {old:8.2} s  {outcome}");
    Ok(())
}
