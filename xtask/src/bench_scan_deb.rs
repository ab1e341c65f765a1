//! The `.deb` rows of `cargo xtask bench-scan`: `rcclfix scan --json` of a Debian package
//! against its floor, the raw decompression of its `data.tar.*` (`xz -dc` or `zstd -dc` to
//! /dev/null) plus `rcclfix scan --json` of the library extracted from it, on Debian's librccl1
//! 5.4.3 and 7.2.4 `.deb`s (`cargo xtask inputs`).
//!
//! Each run times the three commands back to back (the `.deb` scan, the decompression, the
//! library scan), so the machine's load reaches the row and its floor alike; one untimed warm-up
//! round, then the median of `-n` rounds. The floor of a round is its decompression time plus its
//! library scan time; the row reports the median of those sums and the ratio of the medians.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use xshell::{cmd, Shell};

/// (the `.deb` in `cargo xtask inputs`' folder, the library path inside its data.tar).
pub const DEBS: &[(&str, &str)] = &[
    (
        "librccl1_5.4.3-3+b1_amd64.deb",
        "usr/lib/x86_64-linux-gnu/librccl.so.1.0",
    ),
    (
        "librccl1_7.2.4-1~exp3_amd64.deb",
        "usr/lib/x86_64-linux-gnu/librccl.so.1.0",
    ),
];

/// One measured row: medians in seconds.
pub struct Row {
    /// The `.deb` file name.
    pub name: String,
    /// Its size in MiB.
    pub mib: f64,
    /// `data.tar.*`'s compression (`xz`, `zst`, `gz`).
    pub method: String,
    /// `rcclfix scan --json` of the `.deb`.
    pub scan_deb: f64,
    /// The raw decompression of `data.tar.*`.
    pub decompress: f64,
    /// `rcclfix scan --json` of the extracted library.
    pub scan_lib: f64,
    /// Median over rounds of decompress + library scan.
    pub floor: f64,
}

/// The decompressor's argv for a `data.tar.<ext>` member.
fn decompressor(ext: &str) -> anyhow::Result<Vec<&'static str>> {
    Ok(match ext {
        "xz" => vec!["xz", "-dc"],
        "zst" => vec!["zstd", "-dc", "-q", "--memory=2048MB"],
        "gz" => vec!["gzip", "-dc"],
        _ => anyhow::bail!("data.tar.{ext}: no decompressor known to the bench"),
    })
}

/// Extract `data.tar.*` and the library from `deb` into `dir` (once); returns (data.tar path,
/// its extension, the library path).
fn prepare(
    sh: &Shell,
    deb: &Path,
    lib: &str,
    dir: &Path,
) -> anyhow::Result<(PathBuf, String, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let find = || -> anyhow::Result<Option<(PathBuf, String)>> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            let n = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if let Some(ext) = n.strip_prefix("data.tar.") {
                return Ok(Some((p.clone(), ext.to_owned())));
            }
        }
        Ok(None)
    };
    let data = match find()? {
        Some(x) => x,
        None => {
            let _d = sh.push_dir(dir);
            cmd!(sh, "ar x {deb}").run()?;
            find()?.with_context(|| format!("{}: no data.tar.* member", deb.display()))?
        }
    };
    let x = dir.join("x");
    let lib = x.join(lib);
    if !lib.exists() {
        cmd!(sh, "dpkg-deb -x {deb} {x}").run()?;
    }
    Ok((data.0, data.1, lib))
}

fn time(c: &mut Command) -> anyhow::Result<f64> {
    let t = std::time::Instant::now();
    let st = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .with_context(|| format!("{c:?}"))?;
    let dt = t.elapsed().as_secs_f64();
    // rcclfix exits 1 when a kernel declares hostcall, 3 when something was not read.
    if !matches!(st.code(), Some(0 | 1 | 3)) {
        anyhow::bail!("{c:?} failed: {st}");
    }
    Ok(dt)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Measure every `.deb` of [`DEBS`] found in `inputs` (`runs` rounds after a warm-up); `work` is
/// where the extracted members are kept.
pub fn measure(
    sh: &Shell,
    rcclfix: &Path,
    inputs: &Path,
    work: &Path,
    runs: usize,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (name, lib) in DEBS {
        let deb = inputs.join(name);
        let dir = work.join(format!("deb-{}", name.trim_end_matches(".deb")));
        let (data, ext, lib) = prepare(sh, &deb, lib, &dir)?;
        let dec = decompressor(&ext)?;
        let scan = |p: &Path| {
            let mut c = Command::new(rcclfix);
            c.args(["scan", "--json"]).arg(p);
            c
        };
        let unpack = || {
            let mut c = Command::new(dec[0]);
            c.args(&dec[1..]).arg(&data);
            c
        };
        eprintln!(
            "timing {name}: {runs} rounds of (scan .deb, {} data.tar.{ext}, scan library)…",
            dec.join(" ")
        );
        let (mut sd, mut dc, mut sl, mut fl) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..=runs {
            let a = time(&mut scan(&deb))?;
            let b = time(&mut unpack())?;
            let c = time(&mut scan(&lib))?;
            if round > 0 {
                sd.push(a);
                dc.push(b);
                sl.push(c);
                fl.push(b + c);
            }
        }
        rows.push(Row {
            name: (*name).to_owned(),
            mib: std::fs::metadata(&deb)?.len() as f64 / (1 << 20) as f64,
            method: ext,
            scan_deb: median(sd),
            decompress: median(dc),
            scan_lib: median(sl),
            floor: median(fl),
        });
    }
    Ok(rows)
}

/// Print the rows as a Markdown table.
pub fn print(rows: &[Row]) {
    let s = |x: f64| format!("{x:.1} s");
    println!("\n| .deb | rcclfix scan of the .deb | raw decompression of data.tar | scan of the extracted library | floor (sum, median of rounds) | .deb / floor |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} ({:.0} MiB, data.tar.{}) | {} | {} | {} | {} | {:.2}x |",
            r.name,
            r.mib,
            r.method,
            s(r.scan_deb),
            s(r.decompress),
            s(r.scan_lib),
            s(r.floor),
            r.scan_deb / r.floor
        );
    }
}
