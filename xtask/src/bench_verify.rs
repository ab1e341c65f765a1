//! `cargo xtask bench-verify --lib PATH [--runtime hip|cuda] [--bytes N] [--all-reduce-perf PATH]`:
//! the `verify` benchmark (issue 4's targets), on a machine with two GPUs.
//!
//! 1. Builds `rcclfix` in release mode and runs `rcclfix verify` with the large size set to `--bytes`
//!    (default 256 MiB); target: all 24 cases, communicator set-up included, in under 10 s.
//! 2. With `--all-reduce-perf` (NVIDIA's nccl-tests or ROCm's rccl-tests binary, built from their
//!    public source; never committed here) runs `-b N -e N -g 2` in the same session and compares the
//!    float all_reduce busbw at that size; target: rcclfix within 5 %.
//!
//! Prints both numbers and fails when a target is missed.

use anyhow::{bail, Context};
use xshell::{cmd, Shell};

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let mut lib = None;
    let mut runtime = None;
    let mut perf = None;
    let mut bytes: u64 = 256 << 20;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .with_context(|| format!("{a} needs a value"))
        };
        match a.as_str() {
            "--lib" => lib = Some(val()?),
            "--runtime" => runtime = Some(val()?),
            "--all-reduce-perf" => perf = Some(val()?),
            "--bytes" => bytes = val()?.parse().context("--bytes")?,
            _ => bail!("unknown argument {a:?}; usage: bench-verify --lib PATH [--runtime hip|cuda] [--bytes N] [--all-reduce-perf PATH]"),
        }
    }
    let lib = lib.context("--lib PATH is required")?;
    cmd!(sh, "cargo build --release --quiet --bin rcclfix").run()?;
    let rcclfix = crate::project_root().join("target/release/rcclfix");
    let rt: Vec<String> = runtime
        .map(|r| vec!["--runtime".into(), r])
        .unwrap_or_default();
    let bytes_s = bytes.to_string();
    let t = std::time::Instant::now();
    let table = cmd!(
        sh,
        "{rcclfix} verify --lib {lib} {rt...} --large-bytes {bytes_s}"
    )
    .read()?;
    let wall = t.elapsed().as_secs_f64();
    let ours = ours_busbw(&table, bytes)?;
    println!("rcclfix verify: 24 cases in {wall:.2} s (target < 10 s)");
    println!("rcclfix verify: all_reduce float {bytes} B busbw out-of-place {:.2} GB/s, in-place {:.2} GB/s", ours.0, ours.1);
    let mut failed = Vec::new();
    if wall >= 10.0 {
        failed.push(format!("verify took {wall:.2} s"));
    }
    if let Some(perf) = perf {
        let out = cmd!(sh, "{perf} -b {bytes_s} -e {bytes_s} -g 2").read()?;
        let peer = peer_busbw(&out, bytes)?;
        println!(
            "{perf}: busbw out-of-place {:.2} GB/s, in-place {:.2} GB/s",
            peer.0, peer.1
        );
        for (name, a, b) in [
            ("out-of-place", ours.0, peer.0),
            ("in-place", ours.1, peer.1),
        ] {
            let ratio = a / b;
            println!("{name}: rcclfix / peer = {ratio:.3} (target ≥ 0.95)");
            if ratio < 0.95 {
                failed.push(format!("{name} busbw {a:.2} < 95 % of {b:.2}"));
            }
        }
    }
    if !failed.is_empty() {
        bail!("verify benchmark missed its targets: {}", failed.join("; "));
    }
    Ok(())
}

/// The float rows of `bytes` bytes in `text`, split into whitespace-separated fields.
fn rows(text: &str, bytes: u64, size_col: usize) -> Vec<Vec<&str>> {
    let size = bytes.to_string();
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.get(size_col) == Some(&size.as_str()) && f.contains(&"float"))
        .collect()
}

fn num(f: &[&str], i: usize) -> anyhow::Result<f64> {
    f.get(i)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no number in column {i} of {f:?}"))
}

/// rcclfix's table: one all_reduce row per placement, busbw in column 8.
fn ours_busbw(text: &str, bytes: u64) -> anyhow::Result<(f64, f64)> {
    let r: Vec<_> = rows(text, bytes, 1)
        .into_iter()
        .filter(|f| f[0] == "all_reduce")
        .collect();
    let out = r
        .iter()
        .find(|f| f[5] == "out")
        .with_context(|| format!("no out-of-place all_reduce row of {bytes} bytes"))?;
    let inp = r
        .iter()
        .find(|f| f[5] == "in")
        .with_context(|| format!("no in-place all_reduce row of {bytes} bytes"))?;
    Ok((num(out, 8)?, num(inp, 8)?))
}

/// nccl-tests' table: one row with both placements, busbw in columns 7 and 11.
fn peer_busbw(text: &str, bytes: u64) -> anyhow::Result<(f64, f64)> {
    let r = rows(text, bytes, 0);
    let f = r
        .first()
        .with_context(|| format!("no float row of {bytes} bytes in:\n{text}"))?;
    Ok((num(f, 7)?, num(f, 11)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_both_tables() {
        let ours = "  all_reduce    268435456    67108864     float   sum     out     890.96   301.29   301.29       0  ok\n  all_reduce    268435456    67108864     float   sum      in     888.97   301.30   301.96       0  ok\n";
        assert_eq!(
            super::ours_busbw(ours, 268435456).unwrap(),
            (301.29, 301.96)
        );
        let peer = "   268435456      67108864     float     sum      -1   893.85  300.31  300.31       0   892.27  300.84  300.84       0\n";
        assert_eq!(
            super::peer_busbw(peer, 268435456).unwrap(),
            (300.31, 300.84)
        );
        assert!(super::peer_busbw(peer, 8).is_err());
    }
}
