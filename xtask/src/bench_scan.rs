//! `cargo xtask bench-scan`: rcclfix's scanner against the LLVM pipeline and raw `zstd -d`, side
//! by side, on the same inputs in the same run; prints median wall times, the 2-core floor of the
//! compressed input, peak RSS (with its anonymous and file-backed parts), and the size of both
//! `--json` shapes.
//!
//! Inputs (prepared once under `target/bench-scan/`):
//! - `librocsparse.so.0.1`: Debian trixie's librocsparse0 5.7.1 (`cargo xtask inputs --bench`,
//!   extracted with `dpkg-deb -x`): 1.2 GB, 122 plain bundles × 10 targets;
//! - `rocsparse-ccob.bin`: the same code objects re-bundled by the sid toolchain's
//!   `clang-offload-bundler --compress` (what `hipcc --offload-compress` runs) with
//!   `COMPRESSED_BUNDLE_FORMAT_VERSION=3`: 122 CCOB v3 zstd bundles back to back on 4096-byte
//!   boundaries, as in a `.hip_fatbin`;
//! - the Debian librccl1 5.4.3 library (`$RCCLFIX_TEST_INPUTS`), for the memory rows.
//!
//! Timed (one untimed warm-up run, then the median of `-n` runs, default 5, all in this run):
//! - `rcclfix scan --json` (release build) with every core and with `-j1`, and `--verify-hash`
//!   on the compressed input;
//! - the LLVM pipeline in the toolchain rootfs (bubblewrap, one sandbox per run): `llvm-objcopy
//!   --dump-section .hip_fatbin` → split at 4096-aligned magics → `clang-offload-bundler --list`
//!   → `--unbundle` + `llvm-readelf --notes` per target (trixie's LLVM 17 for the plain library,
//!   sid's LLVM 21 for CCOB v3, which LLVM 17 cannot read);
//! - `zstd -d` of every CCOB payload to /dev/null in one process: one core's decode time. The
//!   2-core floor is that time divided by 2 (the scan cannot decode faster than both cores do).
//!   It is timed in turn with `rcclfix scan --json` of the CCOB input (one of each per round), so
//!   the row's percentage compares runs made under the same load.
//!
//! The `.deb` rows ([`crate::bench_scan_deb`]): `rcclfix scan --json` of Debian's librccl1 5.4.3
//! and 7.2.4 `.deb`s against their floor (`xz -dc data.tar.xz` plus the scan of the extracted
//! library), timed in rounds in this run.
//!
//! `--memory` adds peak-RSS rows for inputs it generates (an honest CCOB with a 4 GiB host entry,
//! one with a 2 GiB device entry the scan must hold, a wheel with a 4 GiB deflated member) and for
//! the librccl1 library and `.deb`.
//!
//! `--rows LIST` (comma-separated: `plain`, `ccob`, `deb`, `rss`; default all) picks the tables;
//! `--no-llvm` leaves out the LLVM pipeline columns (minutes per run on a loaded machine).
//!
//! Usage: `cargo xtask bench-scan [-n RUNS] [--rows LIST] [--no-llvm] [--memory]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::Context;
use xshell::{cmd, Shell};

use crate::bench_build_timing::median;

fn run_once(c: &mut Command) -> anyhow::Result<f64> {
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
}

fn median_secs(runs: usize, mut cmd: impl FnMut() -> Command) -> anyhow::Result<f64> {
    run_once(&mut cmd())?;
    let mut v = Vec::new();
    for _ in 0..runs {
        v.push(run_once(&mut cmd())?);
    }
    Ok(median(&mut v))
}

/// Medians of `runs` warm runs of `a` and of `b`, in seconds, timed in turn (a, b, a, b, …) after
/// one warm-up of each: a slow spell of the machine lands on both columns, not on whichever block
/// of runs it happened to overlap (a floor timed after the measured tool once came out 2x slow).
fn median_secs_paired(
    runs: usize,
    mut a: impl FnMut() -> Command,
    mut b: impl FnMut() -> Command,
) -> anyhow::Result<(f64, f64)> {
    run_once(&mut a())?;
    run_once(&mut b())?;
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        va.push(run_once(&mut a())?);
        vb.push(run_once(&mut b())?);
    }
    Ok((median(&mut va), median(&mut vb)))
}

/// Peak anonymous and file-backed RSS in MiB of one run of `c`, sampled from `/proc/<pid>/status`
/// (`RssAnon`, `RssFile`) every 2 ms: the memory the scan holds, apart from the pages of the
/// mapped input it touched (page cache, shared and reclaimable). A sample can miss a short peak.
fn peak_rss_split_mib(c: &mut Command) -> anyhow::Result<(f64, f64)> {
    let mut child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let status = format!("/proc/{}/status", child.id());
    let (mut anon, mut file) = (0u64, 0u64);
    while child.try_wait()?.is_none() {
        if let Ok(text) = std::fs::read_to_string(&status) {
            for line in text.lines() {
                let kb = |l: &str| -> u64 {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0)
                };
                if line.starts_with("RssAnon:") {
                    anon = anon.max(kb(line));
                } else if line.starts_with("RssFile:") {
                    file = file.max(kb(line));
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Ok((anon as f64 / 1024.0, file as f64 / 1024.0))
}

/// Peak RSS in MiB of one run of `c` (GNU time's `%M`).
fn peak_rss_mib(c: &Command) -> anyhow::Result<f64> {
    let mut t = Command::new("/usr/bin/time");
    t.args(["-f", "%M"]).arg(c.get_program()).args(c.get_args());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => t.env(k, v),
            None => t.env_remove(k),
        };
    }
    let o = t.stdout(Stdio::null()).stderr(Stdio::piped()).output()?;
    let err = String::from_utf8_lossy(&o.stderr);
    let kb: f64 = err
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("/usr/bin/time printed {err:?}"))?;
    Ok(kb / 1024.0)
}

const PIPELINE: &str = r#"set -e
V=$1; IN=$2; W=/tmp/p; mkdir -p $W
if head -c 4 "$IN" | grep -q ELF; then
  llvm-objcopy-$V --dump-section .hip_fatbin=$W/fb "$IN" $W/copy
  FB=$W/fb
else
  FB=$IN
fi
python3 /mnt/split.py "$FB" $W
for b in $W/b*; do
  for t in $(clang-offload-bundler-$V --list --type=o --input=$b | grep -v '^host-'); do
    clang-offload-bundler-$V --unbundle --type=o --input=$b --targets=$t --output=$W/co
    llvm-readelf-$V --notes $W/co > /dev/null
  done
done
"#;

/// Split a `.hip_fatbin` into its bundles at 4096-aligned magics (a CCOB cut at its total size:
/// clang-offload-bundler decompresses everything after a CCOB header).
const SPLIT: &str = r#"import struct, sys
d = open(sys.argv[1], 'rb').read()
w = sys.argv[2]
st = [o for o in range(0, len(d), 4096)
      if d[o:o + 24] == b'__CLANG_OFFLOAD_BUNDLE__' or d[o:o + 4] == b'CCOB']
for i, s in enumerate(st):
    e = st[i + 1] if i + 1 < len(st) else len(d)
    if d[s:s + 4] == b'CCOB':
        v = struct.unpack_from('<H', d, s + 4)[0]
        t = struct.unpack_from('<I' if v == 2 else '<Q', d, s + 8)[0]
        e = min(e, s + t)
    open('%s/b%05d' % (w, i), 'wb').write(d[s:e])
"#;

/// Re-bundle every plain bundle of a `.hip_fatbin` as a CCOB v3 with `--compress`, and write
/// them back to back on 4096-byte boundaries to `/mnt/rocsparse-ccob.bin`.
const REBUNDLE: &str = r#"set -e
W=/tmp/r; mkdir -p $W/co
python3 /mnt/split.py /mnt/fatbin $W
export COMPRESSED_BUNDLE_FORMAT_VERSION=3
for b in $W/b*; do
  targets=""; inputs=""
  for t in $(clang-offload-bundler-21 --list --type=o --input=$b); do
    case $t in
      host-*) f=/dev/null ;;
      *) f=$W/co/$(basename $b).$(echo $t | tr ':' '_')
         clang-offload-bundler-21 --unbundle --type=o --input=$b --targets=$t --output=$f ;;
    esac
    targets="$targets,$t"; inputs="$inputs --input=$f"
  done
  clang-offload-bundler-21 --type=o --bundle-align=4096 --compress --targets=${targets#,} $inputs --output=$b.ccob
  rm -f $W/co/*
done
python3 - <<'EOF'
import glob
out = open('/mnt/rocsparse-ccob.bin', 'wb')
for f in sorted(glob.glob('/tmp/r/b*.ccob')):
    d = open(f, 'rb').read()
    out.write(d)
    out.write(b'\0' * (-len(d) % 4096))
EOF
"#;

/// Generate the memory inputs: `host4g.ccob` (a CCOB v3 whose bundle holds a 4 GiB host entry
/// and the gfx1100 code object `kernels.co`), `gfx2g.ccob` (a 2 GiB gfx1030 entry that is no
/// ELF: the scan must hold it), and `member4g.whl` (a wheel whose deflated member is `kernels.so`
/// followed by 4 GiB). The filler is 4 KiB blocks of 64 random bytes and zeros (about 60:1 under
/// zstd, well inside the scanner's 1024:1 bomb ratio: the claims are honest).
const MEMORY_INPUTS: &str = r#"import hashlib, os, struct, subprocess, sys, zipfile
w, co_path, so_path = sys.argv[1], sys.argv[2], sys.argv[3]
co = open(co_path, 'rb').read()
so = open(so_path, 'rb').read()
def filler(n):
    z = b'\0' * 4032
    for i in range(n // 4096):
        yield os.urandom(64) + z
def ccob(path, big_id, big_size):
    ids = [big_id, 'hipv4-amdgcn-amd-amdhsa--gfx1100']
    hdr_len = 32 + sum(24 + len(i) for i in ids)
    off1 = (hdr_len + 4095) // 4096 * 4096
    off2 = off1 + big_size
    hdr = b'__CLANG_OFFLOAD_BUNDLE__' + struct.pack('<Q', 2)
    for i, (o, s) in zip(ids, [(off1, big_size), (off2, len(co))]):
        hdr += struct.pack('<QQQ', o, s, len(i)) + i.encode()
    parts = [hdr + b'\0' * (off1 - len(hdr))]
    md5 = hashlib.md5()
    z = subprocess.Popen(['zstd', '-1', '-T2', '-q', '-c'], stdin=subprocess.PIPE, stdout=open(path + '.zst', 'wb'))
    total = 0
    def put(b):
        nonlocal total
        md5.update(b); z.stdin.write(b); total += len(b)
    put(parts[0])
    for b in filler(big_size):
        put(b)
    put(co)
    z.stdin.close(); z.wait()
    payload = open(path + '.zst', 'rb').read()
    h = b'CCOB' + struct.pack('<HHQQ', 3, 1, 32 + len(payload), total) + md5.digest()[:8]
    with open(path, 'wb') as f:
        f.write(h); f.write(payload)
ccob(w + '/host4g.ccob', 'host-x86_64-unknown-linux-gnu-', 4 << 30)
ccob(w + '/gfx2g.ccob', 'hipv4-amdgcn-amd-amdhsa--gfx1030', 2 << 30)
with zipfile.ZipFile(w + '/member4g.whl', 'w', zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
    with zf.open('pkg/lib/libbig.so', 'w', force_zip64=True) as m:
        m.write(so)
        for b in filler(4 << 30):
            m.write(b)
"#;

/// `uptime`'s load averages (the machine's load, for the report).
fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().take(3).collect();
            format!("load average {} (1, 5, 15 min)", v.join(", "))
        })
        .unwrap_or_else(|e| format!("/proc/loadavg: {e}"))
}

fn bwrap(root: &Path, work: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("bwrap");
    c.args(crate::fixtures::in_rootfs(root, work)).args(args);
    c
}

/// The compressed payloads of the CCOBs in `data` (back to back on 4096-byte boundaries).
fn ccob_payloads(data: &[u8]) -> anyhow::Result<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 32 <= data.len() {
        if &data[pos..pos + 4] != b"CCOB" {
            pos += 4096;
            continue;
        }
        let ver = u16::from_le_bytes([data[pos + 4], data[pos + 5]]);
        anyhow::ensure!(
            ver == 3,
            "CCOB v{ver} at {pos}: the bench input should be v3"
        );
        let total = u64::from_le_bytes(data[pos + 8..pos + 16].try_into()?) as usize;
        out.push(&data[pos + 32..pos + total]);
        pos = (pos + total).div_ceil(4096) * 4096;
    }
    Ok(out)
}

pub fn run(sh: &Shell, rest: &[String]) -> anyhow::Result<()> {
    let mut runs = 5usize;
    let mut memory = false;
    let mut llvm = true;
    let all = ["plain", "ccob", "deb", "rss"];
    let mut rows: Vec<String> = all.iter().map(|s| s.to_string()).collect();
    let usage = "usage: cargo xtask bench-scan [-n RUNS] [--rows plain,ccob,deb,rss] [--no-llvm] [--memory]";
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-n" => runs = it.next().context("-n RUNS")?.parse().context("-n RUNS")?,
            "--memory" => memory = true,
            "--no-llvm" => llvm = false,
            "--rows" => {
                rows = it
                    .next()
                    .context(usage)?
                    .split(',')
                    .map(str::to_owned)
                    .collect();
                if let Some(r) = rows.iter().find(|r| !all.contains(&r.as_str())) {
                    anyhow::bail!("--rows: unknown row {r:?}; {usage}");
                }
            }
            _ => anyhow::bail!("{usage}"),
        }
    }
    anyhow::ensure!(runs > 0, "-n RUNS: at least one run");
    let want = |r: &str| rows.iter().any(|x| x == r);
    cmd!(sh, "cargo build --release --quiet --locked --bin rcclfix").run()?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::project_root().join("target"));
    let rcclfix = target.join("release/rcclfix");
    let inputs = crate::inputs::dir();
    crate::inputs::fetch(sh, crate::inputs::PACKAGES)?;
    let work: PathBuf = crate::project_root().join("target/bench-scan");
    std::fs::create_dir_all(&work)?;
    eprintln!("load before: {}", uptime());
    let debs = if want("deb") {
        crate::bench_scan_deb::measure(sh, &rcclfix, &inputs, &work, runs)?
    } else {
        Vec::new()
    };
    if !(want("plain") || want("ccob") || want("rss")) {
        crate::bench_scan_deb::print(&debs);
        println!("\nload after: {}", uptime());
        return Ok(());
    }
    crate::inputs::fetch(sh, crate::inputs::BENCH_PACKAGES)?;
    let extract = |deb: &str, dir: &str, file: &str| -> anyhow::Result<PathBuf> {
        let x = inputs.join(dir);
        let lib = x.join(file);
        if !lib.exists() {
            let deb = inputs.join(deb);
            cmd!(sh, "dpkg-deb -x {deb} {x}").run()?;
        }
        Ok(lib)
    };
    let rccl = extract(
        "librccl1_5.4.3-3+b1_amd64.deb",
        "librccl1_5.4.3-3+b1",
        "usr/lib/x86_64-linux-gnu/librccl.so.1.0",
    )?;
    let sparse_src = extract(
        "librocsparse0_5.7.1-6_amd64.deb",
        "librocsparse0_5.7.1-6",
        "usr/lib/x86_64-linux-gnu/librocsparse.so.0.1",
    )?;
    std::fs::write(work.join("pipeline.sh"), PIPELINE)?;
    std::fs::write(work.join("split.py"), SPLIT)?;
    let sparse = work.join("librocsparse.so.0.1");
    if !sparse.exists() {
        std::fs::copy(&sparse_src, &sparse)?;
    }
    let trixie = crate::fixtures::toolchain_root("trixie")?;
    let sid = crate::fixtures::toolchain_root("sid")?;
    let ccob = work.join("rocsparse-ccob.bin");
    if !ccob.exists() {
        eprintln!("building {} (once; minutes)…", ccob.display());
        std::fs::write(work.join("rebundle.sh"), REBUNDLE)?;
        let fb = work.join("fatbin");
        let ok = bwrap(
            &sid,
            &work,
            &[
                "llvm-objcopy-21",
                "--dump-section",
                ".hip_fatbin=/mnt/fatbin",
                "/mnt/librocsparse.so.0.1",
                "/tmp/copy",
            ],
        )
        .status()?
        .success();
        anyhow::ensure!(ok, "llvm-objcopy --dump-section failed");
        let ok = bwrap(&sid, &work, &["sh", "/mnt/rebundle.sh"])
            .status()?
            .success();
        anyhow::ensure!(
            ok,
            "re-bundling with clang-offload-bundler --compress failed"
        );
        std::fs::remove_file(&fb)?;
    }
    // The raw zstd payloads, for the floor.
    let zdir = work.join("payloads");
    let data = std::fs::read(&ccob)?;
    let payloads = ccob_payloads(&data)?;
    if !zdir.exists() {
        std::fs::create_dir_all(&zdir)?;
        for (i, p) in payloads.iter().enumerate() {
            std::fs::write(zdir.join(format!("b{i:05}.zst")), p)?;
        }
    }
    let mut zfiles: Vec<PathBuf> = std::fs::read_dir(&zdir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    zfiles.sort();
    let compressed: usize = payloads.iter().map(|p| p.len()).sum();
    let n_ccob = payloads.len();
    drop(data);

    let scan = |args: &[&str], p: &Path| {
        let (r, p) = (rcclfix.clone(), p.to_owned());
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        move || {
            let mut c = Command::new(&r);
            c.arg("scan").args(&args).arg(&p);
            c
        }
    };
    let pipeline = |root: &Path, v: &'static str, input: &'static str| {
        let (root, work) = (root.to_owned(), work.clone());
        move || {
            let mut c = bwrap(&root, &work, &["sh", "/mnt/pipeline.sh", v, input]);
            c.env_clear();
            c
        }
    };
    eprintln!("timing: median of {runs} warm runs each, all in this run…");
    let time = |on: bool, c: &mut dyn FnMut() -> Command| -> anyhow::Result<Option<f64>> {
        if on {
            median_secs(runs, c).map(Some)
        } else {
            Ok(None)
        }
    };
    let (plain, ccob_on) = (want("plain"), want("ccob"));
    let t_sparse = time(plain, &mut scan(&["--json"], &sparse))?;
    let t_sparse_1 = time(plain, &mut scan(&["--json", "-j1"], &sparse))?;
    let t_sparse_llvm = time(
        plain && llvm,
        &mut pipeline(&trixie, "17", "/mnt/librocsparse.so.0.1"),
    )?;
    // The CCOB row's rcclfix column and its floor are timed in turn (median_secs_paired).
    let zstd = move || {
        let mut c = Command::new("zstd");
        c.args(["-d", "-q", "-c", "--memory=2048MB"]).args(&zfiles);
        c
    };
    let (t_ccob, t_zstd) = if ccob_on {
        let (a, b) = median_secs_paired(runs, scan(&["--json"], &ccob), zstd)?;
        (Some(a), Some(b))
    } else {
        (None, None)
    };
    let t_ccob_1 = time(ccob_on, &mut scan(&["--json", "-j1"], &ccob))?;
    let t_ccob_hash = time(ccob_on, &mut scan(&["--json", "--verify-hash"], &ccob))?;
    let t_ccob_llvm = time(
        ccob_on && llvm,
        &mut pipeline(&sid, "21", "/mnt/rocsparse-ccob.bin"),
    )?;
    let mib = |p: &Path| std::fs::metadata(p).map(|m| m.len() as f64 / (1 << 20) as f64);
    let json_size = |shape: &str, p: &Path| -> anyhow::Result<f64> {
        let o = Command::new(&rcclfix)
            .args(["scan", shape])
            .arg(p)
            .stderr(Stdio::null())
            .output()?;
        Ok(o.stdout.len() as f64 / (1 << 20) as f64)
    };
    let ms = |s: Option<f64>| s.map_or("–".to_owned(), |s| format!("{:.0} ms", s * 1e3));
    let times = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!(" ({:.0}x)", a / b),
        _ => String::new(),
    };
    println!(
        "\n| input | rcclfix (2 cores) | rcclfix -j1 | LLVM pipeline | raw zstd -d (1 core) | 2-core floor |"
    );
    println!("|---|---|---|---|---|---|");
    if plain {
        println!(
            "| librocsparse.so.0.1 ({:.0} MiB, plain) | {} | {} | {}{} | – | – |",
            mib(&sparse)?,
            ms(t_sparse),
            ms(t_sparse_1),
            ms(t_sparse_llvm),
            times(t_sparse_llvm, t_sparse)
        );
    }
    if let (Some(t_ccob), Some(t_zstd), Some(t_hash)) = (t_ccob, t_zstd, t_ccob_hash) {
        let floor = t_zstd / 2.0;
        println!(
            "| rocsparse-ccob.bin ({:.0} MiB, {n_ccob} CCOB v3, {:.0} MiB payload) | {} | {} | {}{} | {} | {} ({:.0} % of it) |",
            mib(&ccob)?,
            compressed as f64 / (1 << 20) as f64,
            ms(Some(t_ccob)),
            ms(t_ccob_1),
            ms(t_ccob_llvm),
            times(t_ccob_llvm, Some(t_ccob)),
            ms(Some(t_zstd)),
            ms(Some(floor)),
            100.0 * floor / t_ccob
        );
        println!(
            "| rocsparse-ccob.bin --verify-hash | {} | | | | ({:.0} % of the floor) |",
            ms(Some(t_hash)),
            100.0 * floor / t_hash
        );
    }
    crate::bench_scan_deb::print(&debs);
    if !want("rss") {
        println!("\nload after: {}", uptime());
        return Ok(());
    }
    println!("\n| input | --json (compact) | --json=full (the v1 --json) |");
    println!("|---|---|---|");
    for (n, p) in [
        ("librocsparse.so.0.1", &sparse),
        ("rocsparse-ccob.bin", &ccob),
    ] {
        println!(
            "| {n} | {:.2} MiB | {:.1} MiB |",
            json_size("--json", p)?,
            json_size("--json=full", p)?
        );
    }
    let mut rss: Vec<(String, PathBuf)> = vec![
        ("librocsparse.so.0.1".into(), sparse.clone()),
        ("rocsparse-ccob.bin".into(), ccob.clone()),
        ("librccl.so.1.0 (Debian librccl1)".into(), rccl.clone()),
        (
            "librccl1_5.4.3-3+b1_amd64.deb".into(),
            inputs.join("librccl1_5.4.3-3+b1_amd64.deb"),
        ),
    ];
    if memory {
        let m = work.join("memory");
        std::fs::create_dir_all(&m)?;
        if !m.join("member4g.whl").exists() {
            eprintln!("generating the memory inputs (once; minutes)…");
            let fx = crate::project_root().join("tests/fixtures/sid");
            let (co, so) = (fx.join("kernels.co"), fx.join("kernels.so"));
            std::fs::write(m.join("gen.py"), MEMORY_INPUTS)?;
            let gen = m.join("gen.py");
            cmd!(sh, "python3 {gen} {m} {co} {so}").run()?;
        }
        for (n, f) in [
            ("CCOB claiming 4 GiB (4 GiB host entry)", "host4g.ccob"),
            (
                "CCOB claiming 2 GiB (2 GiB gfx1030 entry, held)",
                "gfx2g.ccob",
            ),
            ("wheel, deflated member claiming 4 GiB", "member4g.whl"),
        ] {
            rss.push((n.into(), m.join(f)));
        }
    }
    println!("\n| input | peak RSS of rcclfix scan --json | of it, peak anonymous / file-backed (sampled) |");
    println!("|---|---|---|");
    for (n, p) in rss {
        let mut c = Command::new(&rcclfix);
        c.args(["scan", "--json"]).arg(&p);
        let (anon, file) = peak_rss_split_mib(&mut c)?;
        println!(
            "| {n} | {:.0} MiB | {anon:.0} MiB / {file:.0} MiB |",
            peak_rss_mib(&c)?
        );
    }
    println!("\nload after: {}", uptime());
    println!(
        "\nlimits: --max-code-object 4G (RCCLFIX_SCAN_MAX_CODE_OBJECT), --memory-budget 256M (RCCLFIX_SCAN_MEMORY_BUDGET); {} cores here",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    Ok(())
}
