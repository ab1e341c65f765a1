//! `cargo xtask bench-scan`: rcclfix's scanner against the LLVM pipeline, side by side, on the
//! same inputs in the same run; prints median wall times and the ratios.
//!
//! Inputs (prepared under `target/bench-scan/`):
//! - the Debian librccl1 5.4.3 library (`$RCCLFIX_TEST_INPUTS`, extracted with `dpkg-deb -x`);
//! - `big.ccob`: its 286 MB plain bundle compressed into one CCOB v2 (zstd -3, MD5-low-64 hash),
//!   i.e. a compressed fixture scaled up to a real size.
//!
//! Commands timed (warm: one untimed run first, then the median of `-n` runs, default 7):
//! - `rcclfix scan --json` (release build) on both inputs, and with `--no-hash-check` on the CCOB;
//! - the LLVM pipeline inside the toolchain rootfs (bubblewrap): `llvm-objcopy --dump-section
//!   .hip_fatbin` → `clang-offload-bundler --list` → `--unbundle` + `llvm-readelf --notes` for
//!   every target (trixie tools for the library, sid's for the CCOB, which clang-17 cannot read);
//! - `zstd -d -c` of the same payload to /dev/null: raw zstd decode speed.
//!
//! Usage: `cargo xtask bench-scan [-n RUNS]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use xshell::{cmd, Shell};

fn median_secs(runs: usize, mut cmd: impl FnMut() -> Command) -> anyhow::Result<f64> {
    let run = |c: &mut Command| -> anyhow::Result<f64> {
        let t = Instant::now();
        let st = c
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .with_context(|| format!("{c:?}"))?;
        let dt = t.elapsed().as_secs_f64();
        // rcclfix exits 1 when a kernel declares hostcall; only 2 (error) and signals are failures.
        if !matches!(st.code(), Some(0 | 1 | 3)) {
            anyhow::bail!("{c:?} failed: {st}");
        }
        Ok(dt)
    };
    run(&mut cmd())?;
    let mut v = Vec::new();
    for _ in 0..runs {
        v.push(run(&mut cmd())?);
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Ok(v[v.len() / 2])
}

const PIPELINE: &str = r#"set -e
V=$1; IN=$2
if head -c 4 "$IN" | grep -q ELF; then
  llvm-objcopy-$V --dump-section .hip_fatbin=/tmp/fb "$IN" /tmp/copy
  FB=/tmp/fb
else
  FB=$IN
fi
for t in $(clang-offload-bundler-$V --list --type=o --input=$FB | grep -v '^host-'); do
  clang-offload-bundler-$V --unbundle --type=o --input=$FB --targets=$t --output=/tmp/co
  llvm-readelf-$V --notes /tmp/co > /dev/null
done
"#;

fn pipeline(root: &Path, work: &Path, v: &str, input: &str) -> Command {
    let mut c = Command::new("bwrap");
    c.args(crate::fixtures::in_rootfs(root, work))
        .args(["sh", "/mnt/pipeline.sh", v, input]);
    c
}

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let runs: usize = match rest {
        [flag, n] if flag == "-n" => n.parse().context("-n RUNS")?,
        [] => 7,
        _ => anyhow::bail!("usage: cargo xtask bench-scan [-n RUNS]"),
    };
    cmd!(sh, "cargo build --release --quiet --bin rcclfix").run()?;
    let rcclfix = crate::project_root().join("target/release/rcclfix");
    let inputs = crate::inputs::dir();
    crate::inputs::fetch(sh, crate::inputs::PACKAGES)?;
    let x = inputs.join("librccl1_5.4.3-3+b1");
    let lib_src = x.join("usr/lib/x86_64-linux-gnu/librccl.so.1.0");
    if !lib_src.exists() {
        let deb = inputs.join("librccl1_5.4.3-3+b1_amd64.deb");
        cmd!(sh, "dpkg-deb -x {deb} {x}").run()?;
    }
    let work: PathBuf = crate::project_root().join("target/bench-scan");
    std::fs::create_dir_all(&work)?;
    std::fs::write(work.join("pipeline.sh"), PIPELINE)?;
    let lib = work.join("librccl.so.1.0");
    if !lib.exists() {
        std::fs::copy(&lib_src, &lib)?;
    }
    let trixie = crate::fixtures::toolchain_root("trixie")?;
    let sid = crate::fixtures::toolchain_root("sid")?;
    // The scaled-up CCOB: the library's plain bundle, zstd -3, with a v2 header.
    let ccob = work.join("big.ccob");
    let zst = work.join("fatbin.zst");
    if !ccob.exists() {
        let mut objcopy = Command::new("bwrap");
        objcopy
            .args(crate::fixtures::in_rootfs(&trixie, &work))
            .args([
                "llvm-objcopy-17",
                "--dump-section",
                ".hip_fatbin=/mnt/fatbin",
                "/mnt/librccl.so.1.0",
                "/tmp/copy",
            ]);
        anyhow::ensure!(
            objcopy.status()?.success(),
            "llvm-objcopy --dump-section failed"
        );
        let fb = work.join("fatbin");
        cmd!(sh, "zstd -3 -q -f {fb} -o {zst}").run()?;
        let md5 = cmd!(sh, "md5sum {fb}").read()?;
        let digest: Vec<u8> = (0..8)
            .map(|i| u8::from_str_radix(&md5[2 * i..2 * i + 2], 16))
            .collect::<Result<_, _>>()?;
        let payload = std::fs::read(&zst)?;
        let raw_len = std::fs::metadata(&fb)?.len();
        let mut out = b"CCOB".to_vec();
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&u32::try_from(24 + payload.len())?.to_le_bytes());
        out.extend_from_slice(&u32::try_from(raw_len)?.to_le_bytes());
        out.extend_from_slice(&digest);
        out.extend_from_slice(&payload);
        std::fs::write(&ccob, out)?;
        std::fs::remove_file(&fb)?;
    }
    let scan = |args: &'static [&'static str], p: &Path| {
        let (r, p) = (rcclfix.clone(), p.to_owned());
        move || {
            let mut c = Command::new(&r);
            c.arg("scan").args(args).arg(&p);
            c
        }
    };
    eprintln!("timing (median of {runs} warm runs each)…");
    let t_lib = median_secs(runs, scan(&["--json"], &lib))?;
    let t_lib_llvm = median_secs(runs.min(3), || {
        pipeline(&trixie, &work, "17", "/mnt/librccl.so.1.0")
    })?;
    let t_ccob = median_secs(runs, scan(&["--json"], &ccob))?;
    let t_ccob_nohash = median_secs(runs, scan(&["--json", "--no-hash-check"], &ccob))?;
    let t_ccob_llvm = median_secs(runs.min(3), || pipeline(&sid, &work, "21", "/mnt/big.ccob"))?;
    let zst2 = zst.clone();
    let t_zstd = median_secs(runs, move || {
        let mut c = Command::new("zstd");
        c.args(["-d", "-q", "-c"]).arg(&zst2);
        c
    })?;
    let mib = std::fs::metadata(&lib)?.len() as f64 / (1 << 20) as f64;
    println!("input                         rcclfix      llvm pipeline   llvm/rcclfix");
    println!(
        "librccl.so.1.0 ({mib:.0} MiB)     {:>8.1} ms  {:>10.1} ms   {:>8.1}x",
        t_lib * 1e3,
        t_lib_llvm * 1e3,
        t_lib_llvm / t_lib
    );
    println!(
        "big.ccob (CCOB v2 zstd)       {:>8.1} ms  {:>10.1} ms   {:>8.1}x",
        t_ccob * 1e3,
        t_ccob_llvm * 1e3,
        t_ccob_llvm / t_ccob
    );
    println!(
        "big.ccob --no-hash-check      {:>8.1} ms",
        t_ccob_nohash * 1e3
    );
    println!("raw zstd -d of the payload    {:>8.1} ms", t_zstd * 1e3);
    println!(
        "compressed scan speed vs raw zstd decode: {:.0} % (hash checked), {:.0} % (--no-hash-check)",
        100.0 * t_zstd / t_ccob,
        100.0 * t_zstd / t_ccob_nohash
    );
    Ok(())
}
