//! Inputs: files (mmapped), folders (walked), and archives (.deb / ar, tar with gzip, xz or zstd,
//! .whl / zip), each member identified by its magic bytes.
//!
//! A scan runs in three steps: the paths and folders are walked in name order (cheap: metadata
//! and the first bytes of each file); every file that carries device code is mapped and its
//! bundles and code objects are located (headers only) as [`Job`]s; then every job runs on the
//! rayon pool and the results are put back in walk order, so the output does not depend on the
//! number of threads. A job holds at most one decoded code object, so at most one per thread is
//! in flight.
//!
//! Archive members are named `archive!member`. `ar` members, stored zip members and members of an
//! uncompressed tar are parsed in place; a compressed member up to [`Settings::memory_budget`]
//! is read into memory once, a larger one is streamed ([`member`]) and read again for what
//! the first pass located (nothing is extracted to disk). Source: ar(5), POSIX ustar, PKWARE
//! APPNOTE, deb(5).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;

use super::bundle::{BUNDLE_MAGIC, CCOB_MAGIC};
use super::model::{FileReport, Unreadable};
use super::walk::{self, Job, Part};
use super::Settings;

mod archive;
mod budget;
mod member;
mod sparse;
mod stream_bundle;
mod stream_elf;
mod tree;

use archive::{scan_ar, scan_compressed_tar, scan_tar, scan_zip};
pub use tree::may_carry_device_code;
use tree::top_sources;

/// Deepest archive nesting followed (a .deb holds a data.tar.xz holding files: depth 2).
pub const MAX_DEPTH: u32 = 4;
pub use super::stream::MAX_RESERVE;
/// Largest section header table or section name table read from a streamed ELF member (16 MiB).
pub const MAX_ELF_TABLE: u64 = 16 << 20;

/// What the first bytes of a buffer say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// AMDGPU ELF (`e_machine` 224).
    CodeObject,
    /// Any other ELF.
    HostElf,
    /// Plain offload bundle.
    Bundle,
    /// Compressed offload bundle.
    Ccob,
    /// `!<arch>` (.deb, .a).
    Ar,
    /// zip (.whl).
    Zip,
    /// POSIX / GNU tar.
    Tar,
    /// gzip stream (tar.gz).
    Gzip,
    /// xz stream (tar.xz).
    Xz,
    /// zstd stream (tar.zst).
    Zstd,
    /// kpack device-code archive (`KPAK`).
    Kpack,
}

/// Identify a buffer by its magic bytes.
pub fn sniff(d: &[u8]) -> Option<Format> {
    if d.starts_with(b"\x7fELF") {
        let machine = d.get(18..20).map(|b| u16::from_le_bytes([b[0], b[1]]));
        return Some(if machine == Some(224) {
            Format::CodeObject
        } else {
            Format::HostElf
        });
    }
    if d.starts_with(BUNDLE_MAGIC) {
        return Some(Format::Bundle);
    }
    if d.starts_with(CCOB_MAGIC) {
        return Some(Format::Ccob);
    }
    if d.starts_with(b"!<arch>\n") {
        return Some(Format::Ar);
    }
    if d.starts_with(b"PK\x03\x04") || d.starts_with(b"PK\x05\x06") {
        return Some(Format::Zip);
    }
    if d.get(257..262) == Some(b"ustar") {
        return Some(Format::Tar);
    }
    if d.starts_with(&[0x1f, 0x8b]) {
        return Some(Format::Gzip);
    }
    if d.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        return Some(Format::Xz);
    }
    if d.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Some(Format::Zstd);
    }
    if d.starts_with(b"KPAK") {
        return Some(Format::Kpack);
    }
    None
}

fn new_file(name: &str, kind: &str) -> FileReport {
    FileReport {
        path: name.to_owned(),
        kind: kind.to_owned(),
        images: Vec::new(),
        unreadable: Vec::new(),
    }
}

fn io_unreadable(name: &str, class: &str, reason: String) -> FileReport {
    let mut f = new_file(name, "unreadable");
    f.unreadable.push(Unreadable {
        offset: 0,
        processor: None,
        entry_id: None,
        class: class.into(),
        reason,
    });
    f
}

/// Scan files and folders given on the command line: each file (any [`Format`]) or folder (walked
/// in name order) in the order given; the reports come back in that order.
///
/// Errors: a path does not exist or cannot be read, is not a regular file or directory, or is a
/// file that is empty or of no known format; an archive given directly whose structure cannot be
/// read at all.
pub fn scan_paths(paths: &[PathBuf], opts: &Settings) -> anyhow::Result<Vec<FileReport>> {
    with_pool(opts, || {
        let mut sources = Vec::new();
        for p in paths {
            top_sources(p, &mut sources, opts)?;
        }
        scan_sources(sources, opts)
    })
}

/// Run `f` on a pool of `opts.jobs` threads (the global pool, one thread per core, for 0).
pub fn with_pool<T: Send>(
    opts: &Settings,
    f: impl FnOnce() -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    if opts.jobs == 0 {
        return f();
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs)
        .build()
        .context("cannot start the scan threads")?
        .install(f)
}

/// Scan a path given on the command line: a file (any [`Format`]) or a directory (walked).
///
/// Errors: as [`scan_paths`].
pub fn scan_top(path: &Path, files: &mut Vec<FileReport>, opts: &Settings) -> anyhow::Result<()> {
    files.extend(scan_paths(&[path.to_owned()], opts)?);
    Ok(())
}

/// What the walk found: a file to read (named as displayed; `explicit`: named by the user), or a
/// record already complete (an entry that could not be read).
enum Source {
    File {
        name: String,
        path: PathBuf,
        explicit: bool,
    },
    Report(FileReport),
}

/// Log a skipped entry (visible with `-v`).
fn skipped(name: &str, why: impl std::fmt::Display) {
    tracing::info!("skipped {name}: {why}");
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A file's work, located: its report so far and its jobs (in file order), or reports already
/// complete (archives, records), or nothing (no device code), or an unknown format.
enum Planned<'a> {
    Jobs {
        file: FileReport,
        jobs: Vec<Job<'a>>,
    },
    Reports(Vec<FileReport>),
    Nothing,
    Unknown,
}

/// Most files mapped at once. The sources are read in chunks of this many, and a chunk's maps
/// are dropped before the next chunk is mapped, so a folder of 70,000 small objects never holds a
/// map per file (Linux's `vm.max_map_count` defaults to 65,530 maps per process).
pub const MAX_MAPPED_FILES: usize = 512;

/// Read, locate and run every source, [`MAX_MAPPED_FILES`] at a time; reports in source order.
fn scan_sources(sources: Vec<Source>, opts: &Settings) -> anyhow::Result<Vec<FileReport>> {
    let mut out = Vec::new();
    let mut sources = sources.into_iter().peekable();
    while sources.peek().is_some() {
        let chunk: Vec<Source> = sources.by_ref().take(MAX_MAPPED_FILES).collect();
        out.extend(scan_chunk(chunk, opts)?);
    }
    Ok(out)
}

/// Open `path` as a regular file ([`crate::fsutil::open_regular`]: `O_NONBLOCK`, then `fstat`),
/// so a file swapped for a FIFO between the folder walk and the open cannot block the scan.
/// Errors as an unreadable record's class and reason (`not-regular` or `io`).
fn open_input(path: &Path) -> Result<fs::File, (&'static str, String)> {
    match crate::fsutil::open_regular(path) {
        Ok((f, _)) => Ok(f),
        Err(e) => Err(match fs::metadata(path) {
            Ok(md) if !md.is_file() => (
                "not-regular",
                format!(
                    "not a regular file ({}) when opened; not read",
                    crate::fsutil::file_kind(&md)
                ),
            ),
            _ => ("io", format!("cannot open: {e:#}")),
        }),
    }
}

/// [`scan_sources`] for one chunk: map every file whose first bytes have a known format (the rest
/// is never mapped), locate its work, run it; the maps are dropped on return.
fn scan_chunk(sources: Vec<Source>, opts: &Settings) -> anyhow::Result<Vec<FileReport>> {
    enum Loaded {
        Map(String, memmap2::Mmap, bool),
        Report(FileReport),
        Skip,
    }
    let loaded: Vec<Loaded> = sources
        .into_iter()
        .map(|s| -> anyhow::Result<Loaded> {
            let (name, path, explicit) = match s {
                Source::Report(r) => return Ok(Loaded::Report(r)),
                Source::File {
                    name,
                    path,
                    explicit,
                } => (name, path, explicit),
            };
            let f = if explicit {
                crate::fsutil::open_regular(&path)?.0
            } else {
                match open_input(&path) {
                    Ok(f) => f,
                    Err((class, why)) => {
                        return Ok(Loaded::Report(io_unreadable(&name, class, why)))
                    }
                }
            };
            let mut head = [0u8; 264];
            let n = match read_up_to(&mut &f, &mut head) {
                Ok(n) => n,
                Err(e) if explicit => {
                    return Err(anyhow::Error::new(e).context(format!("cannot read {name}")))
                }
                Err(e) => {
                    return Ok(Loaded::Report(io_unreadable(
                        &name,
                        "io",
                        format!("cannot read: {e}"),
                    )))
                }
            };
            if !explicit && n < 4 {
                skipped(&name, format!("{n} bytes, too short for any device code"));
                return Ok(Loaded::Skip);
            }
            if sniff(&head[..n]).is_none() && !ends_like_zip(&f) {
                if explicit {
                    let hex: String = head[..n.min(8)]
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    anyhow::bail!(
                        "{name}: not a recognised input at offset 0 (first bytes {hex})\nhelp: scan takes a host ELF (.so, executable, .o), a code object, an offload bundle (plain or CCOB), a .deb, a .whl/zip, a tar archive or a folder"
                    );
                }
                skipped(&name, "no ELF, offload bundle or archive magic");
                return Ok(Loaded::Skip);
            }
            match crate::fsutil::map_readonly(&f) {
                Ok(m) => {
                    // Only headers, notes and symbol tables are read, scattered over the file:
                    // no read-ahead (it would page in the code the scan never looks at).
                    let _ = m.advise(memmap2::Advice::Random);
                    Ok(Loaded::Map(name, m, explicit))
                }
                Err(e) if explicit => Err(anyhow::Error::new(e).context(format!("cannot map {name}"))),
                Err(e) => Ok(Loaded::Report(io_unreadable(
                    &name,
                    "io",
                    format!("cannot map: {e}"),
                ))),
            }
        })
        .collect::<anyhow::Result<_>>()?;
    let mut plans = Vec::with_capacity(loaded.len());
    for l in &loaded {
        plans.push(match l {
            Loaded::Map(name, map, explicit) => match plan(name, map, *explicit, 0, opts) {
                Ok(Planned::Nothing) => {
                    skipped(name, "an ELF file without device code");
                    Planned::Nothing
                }
                Ok(p) => p,
                Err(e) if *explicit => return Err(e),
                Err(e) => Planned::Reports(vec![io_unreadable(name, "io", format!("{e:#}"))]),
            },
            Loaded::Report(r) => Planned::Reports(vec![r.clone()]),
            Loaded::Skip => Planned::Nothing,
        });
    }
    Ok(execute(plans, opts))
}

/// Run the jobs of every plan on the pool and assemble the reports in plan order.
fn execute(plans: Vec<Planned<'_>>, opts: &Settings) -> Vec<FileReport> {
    let mut slots = Vec::with_capacity(plans.len());
    let mut jobs = Vec::new();
    for (i, p) in plans.into_iter().enumerate() {
        match p {
            Planned::Jobs { file, jobs: js } => {
                jobs.extend(js.into_iter().map(|j| (i, j)));
                slots.push(vec![file]);
            }
            Planned::Reports(r) => slots.push(r),
            Planned::Nothing | Planned::Unknown => slots.push(Vec::new()),
        }
    }
    opts.progress.inc_length(jobs.len() as u64);
    // Largest first, each job to whichever thread is free (a queue, not rayon's halving of the
    // list): a large CCOB met last would otherwise run alone at the end (one of 122 in a
    // re-bundled rocsparse holds an eighth of the bytes). Parts go back in plan order.
    let mut queue: Vec<(usize, usize, Job<'_>)> = jobs
        .into_iter()
        .enumerate()
        .map(|(k, (i, j))| (k, i, j))
        .collect();
    // Cached: a CCOB's cost reads its header, once per job rather than once per comparison.
    queue.sort_by_cached_key(|(k, _, j)| (std::cmp::Reverse(j.cost()), *k));
    let mut parts: Vec<(usize, usize, Part)> = queue
        .into_iter()
        .par_bridge()
        .map(|(k, i, j)| {
            let p = j.run(opts);
            opts.progress.inc(1);
            (k, i, p)
        })
        .collect();
    parts.sort_by_key(|(k, _, _)| *k);
    for (_, i, p) in parts {
        p.append_to(&mut slots[i][0]);
    }
    slots.into_iter().flatten().collect()
}

/// Locate the work in one buffer named `name` (see [`scan_buffer`]). Archives are scanned here,
/// member by member (each member's jobs run on the pool before the next member is read).
fn plan<'a>(
    name: &str,
    data: &'a [u8],
    explicit: bool,
    depth: u32,
    opts: &Settings,
) -> anyhow::Result<Planned<'a>> {
    let fmt = match sniff(data) {
        Some(f) => f,
        None if is_prefixed_zip(data) => Format::Zip,
        None if explicit => anyhow::bail!(
            "{name}: not a recognised input at offset 0 (no ELF, offload bundle or archive magic, and the zip end record near its end does not read)"
        ),
        None => return Ok(Planned::Unknown),
    };
    let mut files = Vec::new();
    match fmt {
        Format::CodeObject => {
            return Ok(Planned::Jobs {
                file: new_file(name, "code-object"),
                jobs: vec![Job::CodeObject { data }],
            })
        }
        Format::HostElf => {
            let mut file = new_file(name, "host-elf");
            let mut jobs = Vec::new();
            if super::host::locate_host_elf(data, &mut file.kind, opts, &mut jobs) || explicit {
                return Ok(Planned::Jobs { file, jobs });
            }
            return Ok(Planned::Nothing);
        }
        Format::Bundle | Format::Ccob => {
            let file = new_file(
                name,
                if fmt == Format::Bundle {
                    "bundle"
                } else {
                    "ccob"
                },
            );
            let mut jobs = Vec::new();
            walk::locate_fatbin(data, 0, opts, &mut jobs);
            return Ok(Planned::Jobs { file, jobs });
        }
        Format::Kpack => files.push(kpack_file(name)),
        _ if depth >= MAX_DEPTH => files.push(too_deep(name)),
        Format::Ar => scan_ar(name, data, depth, &mut files, opts)?,
        Format::Zip => scan_zip(name, data, depth, &mut files, opts)?,
        Format::Tar => scan_tar(name, data, depth, &mut files, opts)?,
        Format::Gzip | Format::Xz | Format::Zstd => {
            scan_compressed_tar(name, fmt, data, explicit, depth, &mut files, opts)?
        }
    }
    Ok(Planned::Reports(files))
}

/// Whether the last 65,557 bytes of `f` hold a zip end-of-central-directory signature (see
/// [`is_prefixed_zip`], which decides once the file is mapped). Errors read as `false`.
fn ends_like_zip(f: &fs::File) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return false;
    };
    let start = len.saturating_sub(65_557);
    let mut tail = vec![0u8; (len - start) as usize];
    f.read_exact_at(&mut tail, start).is_ok() && tail.windows(4).any(|w| w == b"PK\x05\x06")
}

/// Whether `data`, which starts with no known magic, is a zip archive behind a prefix (a
/// self-extracting stub, a shell script): its end-of-central-directory record (`PK\x05\x06`,
/// within the last 65,557 bytes, PKWARE APPNOTE 4.3.16) is there and the zip reader accepts it.
/// Python's `zipfile`, and so pip, reads such a file as the zip it ends with.
fn is_prefixed_zip(data: &[u8]) -> bool {
    let tail = &data[data.len().saturating_sub(65_557)..];
    tail.windows(4).any(|w| w == b"PK\x05\x06")
        && zip::ZipArchive::new(std::io::Cursor::new(data)).is_ok()
}

fn kpack_file(name: &str) -> FileReport {
    let mut f = new_file(name, "kpack");
    f.unreadable.push(Unreadable {
        offset: 0,
        processor: None,
        entry_id: None,
        class: "kpack".into(),
        reason:
            "device code externalized (kpack archive); its format is still changing and is not read"
                .into(),
    });
    f
}

fn too_deep(name: &str) -> FileReport {
    let mut f = new_file(name, "archive");
    f.unreadable.push(Unreadable {
        offset: 0,
        processor: None,
        entry_id: None,
        class: "unsupported".into(),
        reason: format!("archive nested deeper than {MAX_DEPTH} levels; not read"),
    });
    f
}

/// Scan one buffer named `name`. `explicit`: the user named it (an ELF without device code is
/// still reported). Returns whether the format was recognised. The buffer's jobs run on the pool.
///
/// Errors: an archive whose container structure cannot be read at all (the member scan continues
/// past individual bad members).
pub fn scan_buffer(
    name: &str,
    data: &[u8],
    explicit: bool,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<bool> {
    let p = plan(name, data, explicit, depth, opts)?;
    let known = !matches!(p, Planned::Unknown);
    files.extend(execute(vec![p], opts));
    Ok(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A walked entry that became a FIFO before it is opened (the walk saw a regular file) is a
    /// `not-regular` record at once: the open does not wait for a writer.
    #[test]
    fn an_input_swapped_for_a_fifo_is_not_opened_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("libswapped.so");
        let st = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        let (done, wait) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || {
            let _ = done.send(open_input(&q).map(|_| ()));
        });
        let got = wait
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("open_input blocked on a FIFO");
        let (class, why) = got.expect_err("a FIFO is not an input");
        assert_eq!(class, "not-regular");
        assert_eq!(why, "not a regular file (a FIFO) when opened; not read");
    }
}
