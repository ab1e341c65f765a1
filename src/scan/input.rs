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
//! is read into memory once, a larger one is streamed ([`stream`]) and read again for what
//! the first pass located (nothing is extracted to disk). Source: ar(5), POSIX ustar, PKWARE
//! APPNOTE, deb(5).

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;

use super::bundle::{BUNDLE_MAGIC, CCOB_MAGIC};
use super::model::{FileReport, Unreadable};
use super::stream::{self, Stream};
use super::walk::{self, Job, Part};
use super::Settings;

/// Deepest archive nesting followed (a .deb holds a data.tar.xz holding files: depth 2).
pub const MAX_DEPTH: u32 = 4;
/// Memory reserved up front for a member or code object, whatever size its header claims; the
/// buffer grows only as real bytes arrive, so a lying header cannot make the scanner reserve more
/// (256 MiB).
pub const MAX_RESERVE: u64 = 256 << 20;
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

fn top_sources(path: &Path, out: &mut Vec<Source>, opts: &Settings) -> anyhow::Result<()> {
    let md = fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let name = path.display().to_string();
    if md.is_dir() {
        walk_dir(path, out, opts);
        return Ok(());
    }
    if !md.is_file() {
        anyhow::bail!("{name}: not a regular file or directory");
    }
    if md.len() == 0 {
        anyhow::bail!("{name}: file is empty (offset 0): no ELF, offload bundle or archive header");
    }
    out.push(Source::File {
        name,
        path: path.to_owned(),
        explicit: true,
    });
    Ok(())
}

/// Whether a file name looks like something that can carry device code (a library, object, code
/// object, bundle, kpack or archive). Used only for entries whose bytes cannot be read at all.
pub fn may_carry_device_code(path: &Path) -> bool {
    let n = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    const EXT: &[&str] = &[
        ".o", ".a", ".co", ".hsaco", ".fatbin", ".bundle", ".ccob", ".kpack", ".deb", ".whl",
        ".zip", ".tar", ".tgz", ".gz", ".xz", ".zst", ".bz2",
    ];
    n.ends_with(".so") || n.contains(".so.") || EXT.iter().any(|e| n.ends_with(e))
}

/// Log a skipped entry (visible with `-v`).
fn skipped(name: &str, why: impl std::fmt::Display) {
    tracing::info!("skipped {name}: {why}");
}

/// Walk a directory in name order. Regular files are read; a link to a regular file is read
/// too, under the link's name, unless the same file is also met under another name (a SONAME
/// link beside its library, a hard link), then it is read once, under its own name when the walk
/// meets it, else under the first link's name. Links to folders are not followed. Entries that
/// cannot be read are reported: I/O errors on regular files always; dangling links, link loops,
/// FIFOs and other non-regular files when their name looks like a library, object or archive
/// ([`may_carry_device_code`]; a dangling `sitecustomize.py` link in a rootfs is not one).
/// Everything skipped is logged (`-v`).
fn walk_dir(root: &Path, out: &mut Vec<Source>, opts: &Settings) {
    struct Cand {
        name: String,
        path: PathBuf,
        link: bool,
        key: (u64, u64),
    }
    let mut found: Vec<Result<Cand, FileReport>> = Vec::new();
    let mut seen = 0u64;
    for entry in walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
    {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let p = e
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| root.display().to_string());
                found.push(Err(io_unreadable(&p, "io", format!("cannot read: {e}"))));
                continue;
            }
        };
        seen += 1;
        if seen.is_multiple_of(256) {
            opts.progress
                .set_message(format!("walking: {seen} entries"));
        }
        let p = entry.path();
        let name = p.display().to_string();
        let ft = entry.file_type();
        if ft.is_dir() {
            continue;
        }
        let unread = |class: &str, why: String| {
            if may_carry_device_code(p) {
                Some(Err(io_unreadable(&name, class, why)))
            } else {
                skipped(
                    &name,
                    format!("{why} (its name is not one of a library, object or archive)"),
                );
                None
            }
        };
        if ft.is_symlink() {
            let to = fs::read_link(p)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            match fs::metadata(p) {
                Ok(md) if md.is_dir() => skipped(&name, format!("link to the folder {to} (links to folders are not followed)")),
                Ok(md) if md.is_file() => found.push(Ok(Cand {
                    name,
                    path: p.to_owned(),
                    link: true,
                    key: (md.dev(), md.ino()),
                })),
                Ok(_) => found.extend(unread(
                    "not-regular",
                    format!("link to {to}, which is not a regular file (FIFO, socket or device); not read"),
                )),
                Err(e) if e.raw_os_error() == Some(40) => {
                    found.extend(unread("io", format!("symbolic link loop ({to})")))
                }
                Err(_) => found.extend(unread("io", format!("dangling symlink to {to}"))),
            }
            continue;
        }
        if !ft.is_file() {
            found.extend(unread(
                "not-regular",
                "not a regular file (FIFO, socket or device); not read".into(),
            ));
            continue;
        }
        match entry.metadata() {
            Ok(md) => found.push(Ok(Cand {
                name,
                path: p.to_owned(),
                link: false,
                key: (md.dev(), md.ino()),
            })),
            Err(e) => found.push(Err(io_unreadable(&name, "io", format!("cannot read: {e}")))),
        }
    }
    // One name per file: its own (not a link) when the walk meets it, else the first link.
    let mut chosen: std::collections::HashMap<(u64, u64), (usize, bool)> = Default::default();
    for (i, c) in found.iter().enumerate() {
        if let Ok(c) = c {
            let e = chosen.entry(c.key).or_insert((i, c.link));
            if e.1 && !c.link {
                *e = (i, false);
            }
        }
    }
    let names: Vec<Option<String>> = found
        .iter()
        .map(|c| c.as_ref().ok().map(|c| c.name.clone()))
        .collect();
    for (i, c) in found.into_iter().enumerate() {
        match c {
            Err(r) => out.push(Source::Report(r)),
            Ok(c) => {
                let (first, _) = chosen[&c.key];
                if first == i {
                    out.push(Source::File {
                        name: c.name,
                        path: c.path,
                        explicit: false,
                    });
                } else {
                    let other = names[first].as_deref().unwrap_or("");
                    skipped(
                        &c.name,
                        format!("the same file as {other}, read under that name"),
                    );
                }
            }
        }
    }
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
            if sniff(&head[..n]).is_none() {
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
    let parts: Vec<(usize, Part)> = jobs
        .into_par_iter()
        .map(|(i, j)| {
            let p = j.run(opts);
            opts.progress.inc(1);
            (i, p)
        })
        .collect();
    for (i, p) in parts {
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
    let Some(fmt) = sniff(data) else {
        return Ok(Planned::Unknown);
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
            if walk::locate_host_elf(data, &mut file.kind, opts, &mut jobs) || explicit {
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

fn member_name(archive: &str, member: &str) -> String {
    format!("{archive}!{}", member.trim_start_matches("./"))
}

/// Whether an `ar` archive named `name` whose first member is `first` is a Debian package: a
/// `.deb` (`.udeb`, `.ddeb`) name, or `debian-binary` first (deb(5)).
fn is_deb(name: &str, first: Option<&str>) -> bool {
    let n = name.rsplit('!').next().unwrap_or(name).to_ascii_lowercase();
    first == Some("debian-binary") || [".deb", ".udeb", ".ddeb"].iter().any(|e| n.ends_with(e))
}

/// A Debian package's `data.tar[.gz|.xz|.zst]` member (deb(5)), which holds every file the
/// package installs: it must read as a tar archive to its end. Anything else (another
/// compression, not a tar, a stream that cannot be decompressed) is an unreadable record, never
/// "no device code".
fn scan_deb_data(
    mname: &str,
    body: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) {
    match sniff(body) {
        Some(Format::Tar | Format::Gzip | Format::Xz | Format::Zstd) => {
            if let Err(e) = scan_buffer(mname, body, true, depth, files, opts) {
                files.push(io_unreadable(
                    mname,
                    "decompress",
                    format!("the package's data archive cannot be read: {e:#}"),
                ));
            }
        }
        _ => files.push(io_unreadable(
            mname,
            "unsupported",
            format!(
                "the package's data archive is not a tar archive (uncompressed, gzip, xz or zstd; first bytes {}); its files were not read",
                hex_head(body)
            ),
        )),
    }
}

/// The first (up to) 8 bytes of `b` in hex, for messages.
fn hex_head(b: &[u8]) -> String {
    b.iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `ar` archives (.deb, .a), parsed in place. GNU (`//` long-name table, `/N`) and BSD (`#1/N`)
/// long names are understood. An archive that ends inside a member header is truncated
/// (unknown), never a clean end. A Debian package ([`is_deb`]) must hold a `data.tar*` member
/// that reads completely ([`scan_deb_data`]); one without (cut to its magic, or holding only
/// `debian-binary`) is unreadable, not a package without device code.
fn scan_ar(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut pos = 8usize;
    let mut long_names: &[u8] = &[];
    let mut first: Option<String> = None;
    let mut saw_data = false;
    while pos < data.len() {
        if pos + 60 > data.len() {
            let mut f = new_file(name, "ar");
            f.unreadable.push(Unreadable {
                offset: pos as u64,
                processor: None,
                entry_id: None,
                class: "truncated".into(),
                reason: format!(
                    "ar member header at offset {pos} is truncated: {} of its 60 bytes present; the archive was cut",
                    data.len() - pos
                ),
            });
            files.push(f);
            return Ok(());
        }
        let h = &data[pos..pos + 60];
        if &h[58..60] != b"`\n" {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("ar member header at offset {pos} has no terminator"),
            ));
            return Ok(());
        }
        let raw_name = std::str::from_utf8(&h[..16]).unwrap_or("").trim_end();
        let size: usize = match std::str::from_utf8(&h[48..58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            Some(s) => s,
            None => {
                files.push(io_unreadable(
                    name,
                    "bad-size",
                    format!("ar member header at offset {pos}: bad size field"),
                ));
                return Ok(());
            }
        };
        let start = pos + 60;
        let Some(end) = start.checked_add(size).filter(|&e| e <= data.len()) else {
            let mut f = new_file(name, "ar");
            f.unreadable.push(Unreadable {
                offset: pos as u64,
                processor: None,
                entry_id: None,
                class: "truncated".into(),
                reason: format!("ar member {raw_name:?} ({size} bytes at {start}) runs past the end of the archive"),
            });
            files.push(f);
            return Ok(());
        };
        let mut body = &data[start..end];
        let mut mname = raw_name.trim_end_matches('/').to_owned();
        if raw_name == "//" {
            long_names = body;
        } else if raw_name == "/" || raw_name == "/SYM64/" {
            // Symbol table.
        } else {
            if let Some(n) = raw_name
                .strip_prefix('/')
                .and_then(|n| n.parse::<usize>().ok())
            {
                if let Some(rest) = long_names.get(n..) {
                    let e = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
                    mname = String::from_utf8_lossy(&rest[..e])
                        .trim_end_matches('/')
                        .to_owned();
                }
            } else if let Some(n) = raw_name
                .strip_prefix("#1/")
                .and_then(|n| n.parse::<usize>().ok())
            {
                if n <= body.len() {
                    mname = String::from_utf8_lossy(&body[..n])
                        .trim_end_matches('\0')
                        .to_owned();
                    body = &body[n..];
                }
            }
            let first = first.get_or_insert_with(|| mname.clone());
            if is_deb(name, Some(first.as_str())) && mname.starts_with("data.tar") {
                saw_data = true;
                scan_deb_data(&member_name(name, &mname), body, depth + 1, files, opts);
            } else {
                scan_buffer(
                    &member_name(name, &mname),
                    body,
                    false,
                    depth + 1,
                    files,
                    opts,
                )
                .with_context(|| format!("{name}: ar member {mname}"))?;
            }
        }
        pos = end + (end & 1);
    }
    if is_deb(name, first.as_deref()) && !saw_data {
        let mut f = new_file(name, "ar");
        f.unreadable.push(Unreadable {
            offset: data.len() as u64,
            processor: None,
            entry_id: None,
            class: "truncated".into(),
            reason: format!(
                "a Debian package without a data.tar member ({}): cut, or not a package; the files it would install were not read",
                match &first {
                    None => "no member at all".to_owned(),
                    Some(f) => format!("first member {f:?}"),
                }
            ),
        });
        files.push(f);
    }
    Ok(())
}

/// Reads a streamed member again from its start (the second and third passes over a member too
/// large to hold).
trait Reopen {
    fn reopen(&mut self) -> io::Result<Box<dyn Read + '_>>;
}

struct ZipAgain<'z, 'a> {
    z: &'z mut zip::ZipArchive<std::io::Cursor<&'a [u8]>>,
    index: usize,
}

impl Reopen for ZipAgain<'_, '_> {
    fn reopen(&mut self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(
            self.z.by_index(self.index).map_err(io::Error::other)?,
        ))
    }
}

/// zip archives (.whl): stored members are parsed in place; deflated ones are inflated into
/// memory when they fit [`Settings::memory_budget`], else streamed. A member that cannot be
/// inflated is an unreadable record. A `.whl` holds at least its `*.dist-info` files (PEP 427):
/// one without any file member (an empty zip) is unreadable, not a wheel without device code.
fn scan_zip(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut z = match zip::ZipArchive::new(std::io::Cursor::new(data)) {
        Ok(z) => z,
        Err(e) => {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("zip central directory: {e}"),
            ));
            return Ok(());
        }
    };
    let is_wheel = name
        .rsplit('!')
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase()
        .ends_with(".whl");
    if is_wheel && !z.file_names().any(|n| !n.ends_with('/')) {
        files.push(io_unreadable(
            name,
            "truncated",
            format!(
                "a wheel without any file member ({} members): cut, or not a wheel; nothing in it was read",
                z.len()
            ),
        ));
        return Ok(());
    }
    for i in 0..z.len() {
        let mut m = match z.by_index(i) {
            Ok(m) => m,
            Err(e) => {
                files.push(io_unreadable(
                    name,
                    "unsupported",
                    format!("zip member {i}: {e}"),
                ));
                continue;
            }
        };
        if !m.is_file() || m.size() < 4 {
            continue;
        }
        let mname = member_name(name, m.name());
        if m.compression() == zip::CompressionMethod::Stored {
            let start = m.data_start() as usize;
            if let Some(body) = data.get(start..start.saturating_add(m.compressed_size() as usize))
            {
                scan_buffer(&mname, body, false, depth + 1, files, opts)?;
                continue;
            }
        }
        let mut head = [0u8; 264];
        let n = match read_up_to(&mut m, &mut head) {
            Ok(n) => n,
            Err(e) => {
                files.push(io_unreadable(
                    &mname,
                    "decompress",
                    format!(
                        "zip member at byte {}: cannot inflate: {e}",
                        m.header_start()
                    ),
                ));
                continue;
            }
        };
        let Some(fmt) = sniff(&head[..n]) else {
            continue;
        };
        let at = m.header_start();
        let claimed = m.size();
        let what = format!("zip member at byte {at}");
        if claimed > opts.memory_budget {
            drop(m);
            let mut again = ZipAgain {
                z: &mut z,
                index: i,
            };
            files.extend(stream_member(
                &mname, &what, fmt, claimed, None, &mut again, depth, opts,
            ));
            continue;
        }
        let mut body = Vec::with_capacity(claimed.min(MAX_RESERVE) as usize);
        body.extend_from_slice(&head[..n]);
        // One byte past the claim, so a member longer than its header says is seen.
        let rest = claimed.saturating_sub(n as u64) + 1;
        if let Err(e) = (&mut m).take(rest).read_to_end(&mut body) {
            files.push(io_unreadable(
                &mname,
                "decompress",
                format!("{what}: cannot inflate: {e}"),
            ));
            continue;
        }
        if body.len() as u64 != claimed {
            files.push(size_lie(&mname, &what, claimed, body.len() as u64));
            continue;
        }
        scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
    }
    Ok(())
}

fn size_lie(mname: &str, what: &str, claimed: u64, got: u64) -> FileReport {
    io_unreadable(
        mname,
        "truncated",
        format!(
            "{what} claims {claimed} bytes but holds {}{}",
            if got > claimed { "more than " } else { "" },
            got.min(claimed)
        ),
    )
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

/// A fresh decoder over a compressed archive held in memory.
fn decoder<'a>(fmt: Format, data: &'a [u8]) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match fmt {
        Format::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Format::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(data)),
        _ => Box::new(zstd::stream::read::Decoder::with_buffer(data)?),
    })
}

/// A compressed stream (gzip, xz, zstd): scanned as a tar archive when its first 512 decompressed
/// bytes are a tar header; otherwise skipped (a compressed changelog in a .deb), or an error when
/// named directly. A stream whose start cannot be decompressed is an error when named directly,
/// else an unreadable record (it may be a tar of libraries).
fn scan_compressed_tar(
    name: &str,
    fmt: Format,
    data: &[u8],
    explicit: bool,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut head = vec![0u8; 512];
    let started = decoder(fmt, data).and_then(|mut r| Ok((read_up_to(&mut r, &mut head)?, r)));
    let (n, r) = match started {
        Ok(s) => s,
        Err(e) if explicit => {
            return Err(anyhow::Error::new(e).context(format!("{name}: cannot decompress")))
        }
        Err(e) => {
            files.push(io_unreadable(
                name,
                "decompress",
                format!("cannot decompress: {e}"),
            ));
            return Ok(());
        }
    };
    head.truncate(n);
    if head.get(257..262) != Some(b"ustar") {
        if explicit {
            anyhow::bail!("{name}: compressed stream at offset 0 is not a tar archive");
        }
        return Ok(());
    }
    let again = |at: u64| -> io::Result<Box<dyn Read + Send + '_>> {
        let mut r = decoder(fmt, data)?;
        if io::copy(&mut (&mut r).take(at), &mut io::sink())? < at {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the stream ended before the member",
            ));
        }
        Ok(r)
    };
    let mut r = r;
    let ended = tar_members(
        name,
        std::io::Cursor::new(head).chain(&mut r),
        None,
        Some(&again),
        depth,
        files,
        opts,
    )?;
    // The rest of the stream after the tar's end (padding, the compressor's checksum and index)
    // is read to its end, so a stream cut or corrupt there is not taken as complete.
    if ended {
        if let Err(e) = io::copy(&mut r, &mut io::sink()) {
            files.push(io_unreadable(
                name,
                "decompress",
                format!("the compressed stream after the tar archive's end cannot be read (cut or corrupt): {e}"),
            ));
        }
    }
    Ok(())
}

/// An uncompressed tar archive in memory: members are parsed in place.
fn scan_tar(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    tar_members(name, data, Some(data), None, depth, files, opts)?;
    Ok(())
}

type Again<'a> = dyn Fn(u64) -> io::Result<Box<dyn Read + Send + 'a>> + 'a;

struct TarAgain<'f, 'a> {
    again: &'f Again<'a>,
    at: u64,
    size: u64,
}

impl Reopen for TarAgain<'_, '_> {
    fn reopen(&mut self) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new((self.again)(self.at)?.take(self.size)))
    }
}

/// The members of a tar stream: each regular member's first bytes are sniffed; a member of a
/// known format is taken in place from `in_place` (an uncompressed archive in memory), read into
/// memory when it fits [`Settings::memory_budget`], or else streamed (`again` reopens the
/// decompressed stream at a position for the later passes).
///
/// The archive must end with its end-of-archive block (a 512-byte zero block after the last
/// member, POSIX `ustar`): a stream that simply stops after a member, as one cut at a block
/// boundary does, is truncated (unknown), never a clean end. Returns whether the archive was read
/// to its end-of-archive block.
fn tar_members<'a>(
    name: &str,
    r: impl Read,
    in_place: Option<&'a [u8]>,
    again: Option<&Again<'a>>,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<bool> {
    /// Counts the bytes the tar reader consumed.
    struct Counting<'c, R> {
        r: R,
        n: &'c std::cell::Cell<u64>,
    }
    impl<R: Read> Read for Counting<'_, R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let k = self.r.read(buf)?;
            self.n.set(self.n.get() + k as u64);
            Ok(k)
        }
    }
    let consumed = std::cell::Cell::new(0u64);
    // Where the block after the last member seen starts.
    let mut members_end = 0u64;
    let mut ar = tar::Archive::new(Counting { r, n: &consumed });
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("not a readable tar stream: {e}"),
            ));
            return Ok(false);
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                files.push(io_unreadable(name, "truncated", format!("tar stream: {e}")));
                return Ok(false);
            }
        };
        let ty = entry.header().entry_type();
        let stored = if ty.is_gnu_sparse() {
            entry.header().entry_size().unwrap_or(0)
        } else {
            entry.size()
        };
        members_end = entry
            .raw_file_position()
            .saturating_add(stored.div_ceil(512).saturating_mul(512));
        if !ty.is_file() || entry.size() < 4 {
            continue;
        }
        let mname = member_name(
            name,
            &entry
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        );
        let size = entry.size();
        let what = format!("tar member at byte {}", entry.raw_header_position());
        let data_at = entry.raw_file_position();
        if let (Some(d), false) = (in_place, ty.is_gnu_sparse()) {
            let body = usize::try_from(data_at)
                .ok()
                .and_then(|s| Some(s..s.checked_add(usize::try_from(size).ok()?)?))
                .and_then(|r| d.get(r));
            match body {
                Some(b) => {
                    scan_buffer(&mname, b, false, depth + 1, files, opts)?;
                }
                None => {
                    files.push(io_unreadable(
                        &mname,
                        "truncated",
                        format!(
                            "{what} claims {size} bytes at {data_at}, past the end of the archive ({} bytes)",
                            d.len()
                        ),
                    ));
                    return Ok(false);
                }
            }
            continue;
        }
        let mut head = [0u8; 264];
        let n = match read_up_to(&mut entry, &mut head) {
            Ok(n) => n,
            Err(e) => {
                files.push(io_unreadable(
                    &mname,
                    "truncated",
                    format!("tar member: {e}"),
                ));
                return Ok(false);
            }
        };
        let Some(fmt) = sniff(&head[..n]) else {
            continue;
        };
        if size > opts.memory_budget {
            let Some(again) = again else {
                files.push(over_budget(&mname, &what, size, opts));
                continue;
            };
            let mut first = io::Cursor::new(head[..n].to_vec()).chain(&mut entry);
            let mut re = TarAgain {
                again,
                at: data_at,
                size,
            };
            files.extend(stream_member(
                &mname,
                &what,
                fmt,
                size,
                Some(&mut first),
                &mut re,
                depth,
                opts,
            ));
            continue;
        }
        let mut body = Vec::with_capacity(size.min(MAX_RESERVE) as usize);
        body.extend_from_slice(&head[..n]);
        if let Err(e) = entry.read_to_end(&mut body) {
            files.push(io_unreadable(
                &mname,
                "truncated",
                format!("tar member: {e}"),
            ));
            return Ok(false);
        }
        if body.len() as u64 != size {
            files.push(size_lie(&mname, &what, size, body.len() as u64));
            return Ok(false);
        }
        scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
    }
    drop(ar);
    if consumed.get() < members_end.saturating_add(512) {
        let mut f = new_file(name, "archive");
        f.unreadable.push(Unreadable {
            offset: consumed.get(),
            processor: None,
            entry_id: None,
            class: "truncated".into(),
            reason: format!(
                "the tar archive ends at byte {} without its end-of-archive block: it was cut, and members after that point were not read",
                consumed.get()
            ),
        });
        files.push(f);
        return Ok(false);
    }
    Ok(true)
}

fn over_budget(mname: &str, what: &str, size: u64, opts: &Settings) -> FileReport {
    io_unreadable(
        mname,
        "too-large",
        format!(
            "{what}: {size} bytes, more than the {}-byte memory budget, and this kind of member cannot be streamed; raise it with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET",
            opts.memory_budget
        ),
    )
}

/// Scan a member of `size` bytes that is too large to hold: `first` reads it once from its start
/// (bytes already sniffed included; `None`: `again` opens it for the first pass too), `again`
/// reads it again. A bare code object is held (it is
/// the code object); a raw bundle or CCOB file is streamed in one pass; a host ELF in up to three
/// (section headers; section names; the device-code sections, `.hip_fatbin` streamed). Nested
/// archives are not streamed (unknown, naming the budget).
#[allow(clippy::too_many_arguments)]
fn stream_member(
    mname: &str,
    what: &str,
    fmt: Format,
    size: u64,
    first: Option<&mut dyn Read>,
    again: &mut dyn Reopen,
    depth: u32,
    opts: &Settings,
) -> Vec<FileReport> {
    let mut files = Vec::new();
    if fmt == Format::HostElf {
        files.extend(stream_elf(mname, what, size, first, again, opts));
        return files;
    }
    let mut own;
    let first: &mut dyn Read = match first {
        Some(r) => r,
        None => match again.reopen() {
            Ok(r) => {
                own = r;
                &mut own
            }
            Err(e) => {
                files.push(io_unreadable(mname, "io", format!("{what}: {e}")));
                return files;
            }
        },
    };
    match fmt {
        Format::CodeObject => {
            if size > opts.max_code_object {
                files.push(io_unreadable(
                    mname,
                    "too-large",
                    walk::too_large(what, size, opts.max_code_object),
                ));
                return files;
            }
            let mut s = Stream::new(first);
            let mut body = Vec::new();
            match s.read_to(&mut body, size + 1) {
                Ok(n) if n == size => {
                    if let Err(e) = scan_buffer(mname, &body, false, depth + 1, &mut files, opts) {
                        files.push(io_unreadable(mname, "io", format!("{e:#}")));
                    }
                }
                Ok(n) => files.push(size_lie(mname, what, size, n)),
                Err(e) => files.push(io_unreadable(mname, "io", format!("{what}: {e}"))),
            }
        }
        Format::Bundle | Format::Ccob => {
            let mut f = new_file(
                mname,
                if fmt == Format::Bundle {
                    "bundle"
                } else {
                    "ccob"
                },
            );
            let mut s = Stream::new(first);
            let mut part = Part::default();
            let r = walk_stream(&mut s, size, 0, &mut part, opts);
            part.append_to(&mut f);
            if let Err(e) = r {
                f.unreadable.push(stream_failed(what, size, s.pos(), e));
            } else if let Some(u) = rest_of(&mut s, what, size) {
                f.unreadable.push(u);
            }
            files.push(f);
        }
        Format::Kpack => files.push(kpack_file(mname)),
        _ if depth + 1 >= MAX_DEPTH => files.push(too_deep(mname)),
        _ => files.push(over_budget(mname, what, size, opts)),
    }
    files
}

/// The record for a stream that failed or ended at `pos` of a member claiming `size` bytes.
fn stream_failed(what: &str, size: u64, pos: u64, e: io::Error) -> Unreadable {
    let reason = if e.kind() == io::ErrorKind::UnexpectedEof || pos < size {
        format!("{what} claims {size} bytes but holds {pos}: {e}")
    } else {
        format!("{what}: cannot read at byte {pos}: {e}")
    };
    Unreadable {
        offset: pos,
        processor: None,
        entry_id: None,
        class: "truncated".into(),
        reason,
    }
}

/// Read a streamed member to its end: `None` when it holds exactly `size` bytes, else the record.
fn rest_of<R: Read>(s: &mut Stream<R>, what: &str, size: u64) -> Option<Unreadable> {
    let at = s.pos();
    match s.skip(size.saturating_sub(at) + 1) {
        Ok(_) if s.pos() == size => None,
        Ok(_) => Some(Unreadable {
            offset: 0,
            processor: None,
            entry_id: None,
            class: "truncated".into(),
            reason: format!(
                "{what} claims {size} bytes but holds {}{}",
                if s.pos() > size { "more than " } else { "" },
                s.pos().min(size)
            ),
        }),
        Err(e) => Some(stream_failed(what, size, s.pos(), e)),
    }
}

/// Walk a streamed `.hip_fatbin` (or raw bundle/CCOB file) of `len` bytes at file offset `base`,
/// as [`walk::locate_fatbin`] does in memory (after a bad bundle the walk goes on at the next
/// aligned magic after what was read). CCOB v1 (whose end only a full decode finds) is not read
/// from a stream.
///
/// Errors: the stream failed or ended early (what was found so far is in `part`).
fn walk_stream<R: Read>(
    s: &mut Stream<R>,
    len: u64,
    base: u64,
    part: &mut Part,
    opts: &Settings,
) -> io::Result<()> {
    let start = s.pos();
    loop {
        let (pos, found) = stream::next(s, start, len)?;
        let at = base + pos;
        match found {
            stream::Found::End => return Ok(()),
            stream::Found::Unknown { len } => part.unreadable.push(walk::unknown_data(at, len)),
            stream::Found::Plain => {
                let mut got = Vec::new();
                let r = stream::read_bundle(s, len - pos, opts.max_code_object, |e, body| {
                    got.push((e.index, stream_record(e, body, at, "plain", None)));
                });
                got.sort_by_key(|(i, _)| *i);
                push_records(part, got);
                match r {
                    Ok(_) => {}
                    Err(stream::Fail::Bad(p)) => {
                        part.unreadable.push(p.unreadable(at, None, None));
                        // Go on past the magic even when nothing of the bundle was consumed.
                        if s.pos() == start + pos {
                            s.consume(1);
                        }
                    }
                    Err(stream::Fail::Io { error, .. }) => return Err(error),
                }
            }
            stream::Found::Ccob => {
                let h = s.peek(32)?.to_vec();
                let header = match super::ccob::parse_header_in(&h, len - pos) {
                    Ok(hd) if hd.total_size.is_some() => hd,
                    Ok(hd) => {
                        part.unreadable.push(Unreadable {
                            offset: at,
                            processor: None,
                            entry_id: None,
                            class: "unsupported".into(),
                            reason: format!("CCOB v{} (no total size) inside a member larger than the memory budget is not read; raise it with --memory-budget SIZE or RCCLFIX_SCAN_MEMORY_BUDGET", hd.version),
                        });
                        s.consume(1);
                        continue;
                    }
                    Err(p) => {
                        part.unreadable.push(p.unreadable(at, None, None));
                        s.consume(1);
                        continue;
                    }
                };
                let total = header.total_size.unwrap_or(0);
                let payload_len = total - header.header_len as u64;
                s.consume(header.header_len);
                let label = header.label();
                if let Err(p) = super::ccob::check_claim(&header, payload_len) {
                    part.unreadable.push(p.unreadable(at, None, None));
                } else {
                    let payload = io::BufReader::new((&mut *s).take(payload_len));
                    let r =
                        super::ccob::decode_streamed(&header, payload, opts.verify_hash, |ds| {
                            let mut got = Vec::new();
                            stream::read_bundle(
                                ds,
                                header.uncompressed_size,
                                opts.max_code_object,
                                |e, body| {
                                    got.push((
                                        e.index,
                                        stream_record(e, body, at, &label, Some(&label)),
                                    ));
                                },
                            )?;
                            got.sort_by_key(|(i, _)| *i);
                            Ok(got)
                        });
                    match r {
                        Err(p) => part.unreadable.push(p.unreadable(at, None, None)),
                        Ok((Err(p), _)) => part.unreadable.push(Unreadable {
                            offset: at,
                            processor: None,
                            entry_id: None,
                            class: p.class.to_owned(),
                            reason: format!(
                                "{label}: decompressed bundle at +{}: {}",
                                p.offset, p.reason
                            ),
                        }),
                        Ok((Ok(got), _)) => push_records(part, got),
                    }
                }
                let done = s.pos() - start - pos;
                if done < total && s.skip(total - done)? < total - done {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the stream ended inside a CCOB",
                    ));
                }
            }
        }
    }
}

fn stream_record(
    e: &stream::StreamEntry,
    body: stream::Body<'_>,
    at: u64,
    container: &str,
    inner: Option<&str>,
) -> Option<Result<super::model::ImageReport, Unreadable>> {
    walk::entry_or_too_large(e, body, at, container, inner)
}

fn push_records(
    part: &mut Part,
    got: Vec<(usize, Option<Result<super::model::ImageReport, Unreadable>>)>,
) {
    for (_, r) in got {
        match r {
            Some(Ok(i)) => part.images.push(i),
            Some(Err(u)) => part.unreadable.push(u),
            None => {}
        }
    }
}

/// One section header of a streamed ELF.
#[derive(Debug, Clone)]
struct Shdr {
    name: u32,
    ty: u32,
    offset: u64,
    size: u64,
}

/// A host ELF member too large to hold: pass 1 reads the ELF header and the section header table
/// (and the whole member, to check its size); pass 2 the section names; pass 3 the device-code
/// sections in file order (`.hip_fatbin` streamed, the rest held). `None`: no device code.
fn stream_elf(
    mname: &str,
    what: &str,
    size: u64,
    first: Option<&mut dyn Read>,
    again: &mut dyn Reopen,
    opts: &Settings,
) -> Option<FileReport> {
    let mut f = new_file(mname, "host-elf");
    let fail = |mut f: FileReport, u: Unreadable| {
        f.unreadable.push(u);
        Some(f)
    };
    let bad = |offset: u64, class: &str, reason: String| Unreadable {
        offset,
        processor: None,
        entry_id: None,
        class: class.into(),
        reason: format!("{what}: {reason}"),
    };
    // Pass 1.
    // The ELF header, the section header table's offset, and the table.
    type Pass1 = Option<(Vec<u8>, u64, Vec<u8>)>;
    let pass1 = |r: &mut dyn Read| -> Result<Pass1, Unreadable> {
        let mut s = Stream::new(r);
        let hdr = match s.peek(64) {
            Ok(h) if h.len() == 64 => h.to_vec(),
            Ok(h) => {
                let n = h.len() as u64;
                return Err(stream_failed(
                    what,
                    size,
                    n,
                    io::ErrorKind::UnexpectedEof.into(),
                ));
            }
            Err(e) => return Err(stream_failed(what, size, 0, e)),
        };
        if hdr[4] != 2 || hdr[5] != 1 {
            return Err(bad(4, "unsupported", "a host ELF larger than the memory budget is read only when it is 64-bit little-endian".into()));
        }
        let u16_at = |o: usize| u16::from_le_bytes([hdr[o], hdr[o + 1]]) as u64;
        let shoff = u64::from_le_bytes(hdr[0x28..0x30].try_into().unwrap());
        let (shentsize, shnum) = (u16_at(0x3a), u16_at(0x3c));
        if shnum == 0 || shoff == 0 {
            return Ok(None);
        }
        let table = shnum * 64;
        if shentsize != 64 || table > MAX_ELF_TABLE || shoff.checked_add(table).ends_past(size) {
            return Err(bad(0x28, "bad-elf", format!("section header table ({shnum} entries of {shentsize} bytes at {shoff}) does not fit the {size}-byte member")));
        }
        let mut raw = Vec::new();
        let read = (|| -> io::Result<u64> {
            let k = s.skip(shoff)?;
            if k < shoff {
                return Ok(k);
            }
            s.read_to(&mut raw, table)?;
            Ok(s.pos())
        })();
        match read {
            Ok(p) if p == shoff + table => {}
            Ok(p) => {
                return Err(stream_failed(
                    what,
                    size,
                    p,
                    io::ErrorKind::UnexpectedEof.into(),
                ))
            }
            Err(e) => return Err(stream_failed(what, size, s.pos(), e)),
        }
        if let Some(u) = rest_of(&mut s, what, size) {
            return Err(u);
        }
        Ok(Some((hdr, shoff, raw)))
    };
    let p1 = match first {
        Some(r) => pass1(r),
        None => match again.reopen() {
            Ok(mut r) => pass1(&mut r),
            Err(e) => Err(stream_failed(what, size, 0, e)),
        },
    };
    let (hdr, shoff, raw) = match p1 {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(u) => return fail(f, u),
    };
    let shnum = raw.len() as u64 / 64;
    let shstrndx = u16::from_le_bytes([hdr[0x3e], hdr[0x3f]]) as u64;
    let shdrs: Vec<Shdr> = raw
        .chunks_exact(64)
        .map(|r| Shdr {
            name: u32::from_le_bytes(r[0..4].try_into().unwrap()),
            ty: u32::from_le_bytes(r[4..8].try_into().unwrap()),
            offset: u64::from_le_bytes(r[24..32].try_into().unwrap()),
            size: u64::from_le_bytes(r[32..40].try_into().unwrap()),
        })
        .collect();
    let Some(strtab) = shdrs.get(shstrndx as usize).cloned() else {
        return fail(
            f,
            bad(
                0x3e,
                "bad-elf",
                format!("section name table index {shstrndx} is past the {shnum} sections"),
            ),
        );
    };
    if strtab.size > MAX_ELF_TABLE || strtab.offset.checked_add(strtab.size).ends_past(size) {
        return fail(f, bad(shoff, "bad-elf", format!("section name table ({} bytes at {}) does not fit the member or exceeds {MAX_ELF_TABLE} bytes", strtab.size, strtab.offset)));
    }
    // Pass 2: the names.
    let names = match read_range(again, strtab.offset, strtab.size) {
        Ok(n) => n,
        Err(e) => return fail(f, stream_failed(what, size, strtab.offset, e)),
    };
    let name_of = |sh: &Shdr| -> &[u8] {
        let s = names.get(sh.name as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    };
    const NOBITS: u32 = 8;
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        Fatbin,
        Wrappers,
        Rdc,
    }
    let mut wanted: Vec<(Want, Shdr, String)> = Vec::new();
    let mut nobits_fatbin = None;
    let mut kpack_ref = None;
    for sh in &shdrs {
        let n = name_of(sh);
        match n {
            b".hip_fatbin" | b".hip_fat" if sh.ty == NOBITS => nobits_fatbin = Some(sh.offset),
            b".hip_fatbin" | b".hip_fat" => wanted.push((Want::Fatbin, sh.clone(), String::new())),
            b".hipFatBinSegment" | b".hipFatB" if sh.ty != NOBITS => {
                wanted.push((Want::Wrappers, sh.clone(), String::new()))
            }
            b".rocm_kpack_ref" | b".kpackrf" => kpack_ref = Some(sh.offset),
            n if n.starts_with(super::elf::RDC_PREFIX.as_bytes()) => {
                if let Ok(id) = std::str::from_utf8(&n[super::elf::RDC_PREFIX.len()..]) {
                    wanted.push((Want::Rdc, sh.clone(), id.to_owned()));
                }
            }
            _ => {}
        }
    }
    if wanted.is_empty() && nobits_fatbin.is_none() && kpack_ref.is_none() {
        return None;
    }
    for (_, sh, _) in &wanted {
        if sh.ty == NOBITS {
            continue;
        }
        if sh.offset.checked_add(sh.size).ends_past(size) {
            return fail(
                f,
                Unreadable {
                    offset: sh.offset,
                    processor: None,
                    entry_id: None,
                    class: "truncated".into(),
                    reason: format!(
                        "{what}: section {} ({} bytes at {}) runs past the end of the member",
                        String::from_utf8_lossy(name_of(sh)),
                        sh.size,
                        sh.offset
                    ),
                },
            );
        }
    }
    // Pass 3: the device-code sections in file order.
    wanted.sort_by_key(|(_, sh, _)| sh.offset);
    let mut wrappers = Vec::new();
    let mut fatbin = Part::default();
    let mut rdc = Part::default();
    let mut has_fatbin = false;
    let mut r = match again.reopen() {
        Ok(r) => Stream::new(r),
        Err(e) => return fail(f, stream_failed(what, size, 0, e)),
    };
    for (want, sh, id) in &wanted {
        if sh.ty == NOBITS && *want != Want::Fatbin {
            continue;
        }
        let at = r.pos();
        if sh.offset < at {
            rdc.unreadable.push(bad(
                sh.offset,
                "unsupported",
                format!(
                    "section {} at {} overlaps the section before it; not read from a stream",
                    String::from_utf8_lossy(name_of(sh)),
                    sh.offset
                ),
            ));
            continue;
        }
        if let Err(e) = r.skip(sh.offset - at) {
            return fail(f, stream_failed(what, size, r.pos(), e));
        }
        match want {
            Want::Fatbin => {
                has_fatbin = true;
                let mut sec = Stream::new((&mut r).take(sh.size));
                if let Err(e) = walk_stream(&mut sec, sh.size, sh.offset, &mut fatbin, opts) {
                    return fail(f, stream_failed(what, size, sh.offset + sec.pos(), e));
                }
                let done = sec.pos();
                drop(sec);
                if let Err(e) = r.skip(sh.size - done.min(sh.size)) {
                    return fail(f, stream_failed(what, size, r.pos(), e));
                }
            }
            Want::Wrappers => {
                let mut b = Vec::new();
                if sh.size > MAX_ELF_TABLE {
                    continue;
                }
                if let Err(e) = r.read_to(&mut b, sh.size) {
                    return fail(f, stream_failed(what, size, r.pos(), e));
                }
                for (i, w) in b.chunks_exact(24).enumerate() {
                    wrappers.push((
                        sh.offset + 24 * i as u64,
                        u32::from_le_bytes(w[..4].try_into().unwrap()),
                    ));
                }
            }
            Want::Rdc => {
                if sh.size > opts.max_code_object {
                    rdc.unreadable.push(Unreadable {
                        offset: sh.offset,
                        processor: Some(super::bundle::EntryId::parse(id).processor().to_owned())
                            .filter(|p| !p.is_empty()),
                        entry_id: Some(id.clone()),
                        class: "too-large".into(),
                        reason: walk::too_large(
                            &format!("{what}: section __CLANG_OFFLOAD_BUNDLE__{id}"),
                            sh.size,
                            opts.max_code_object,
                        ),
                    });
                    if let Err(e) = r.skip(sh.size) {
                        return fail(f, stream_failed(what, size, r.pos(), e));
                    }
                    continue;
                }
                let mut b = Vec::new();
                if let Err(e) = r.read_to(&mut b, sh.size) {
                    return fail(f, stream_failed(what, size, r.pos(), e));
                }
                let p = walk::rdc_section(id, sh.offset, &b);
                rdc.images.extend(p.images);
                rdc.unreadable.extend(p.unreadable);
            }
        }
    }
    let h = super::elf::HostElf {
        fatbin: None,
        fatbin_nobits: nobits_fatbin,
        wrappers,
        kpack_ref,
        rdc: Vec::new(),
    };
    if let Some(u) = walk::kpack_record(&h) {
        f.unreadable.push(u);
    }
    if !has_fatbin && wanted.iter().any(|(w, _, _)| *w == Want::Rdc) {
        f.kind = "rdc-object".into();
    }
    fatbin.append_to(&mut f);
    rdc.append_to(&mut f);
    Some(f)
}

/// Read `len` bytes at `offset` of a member opened again.
fn read_range(again: &mut dyn Reopen, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut s = Stream::new(again.reopen()?);
    let mut out = Vec::new();
    if s.skip(offset)? < offset || s.read_to(&mut out, len)? < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the member ended early when read again",
        ));
    }
    Ok(out)
}

/// `checked_add(..)` results: whether the range overflowed or ends past `limit`.
trait EndsPast {
    fn ends_past(&self, limit: u64) -> bool;
}

impl EndsPast for Option<u64> {
    fn ends_past(&self, limit: u64) -> bool {
        !matches!(self, Some(e) if *e <= limit)
    }
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
