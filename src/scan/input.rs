//! Inputs: files (mmapped), folders (walked), and archives (.deb / ar, tar with gzip, xz or zstd,
//! .whl / zip), each member identified by its magic bytes and scanned in memory.
//!
//! Archive members are named `archive!member`. `ar` members and stored zip members are parsed in
//! place; compressed members are streamed and each interesting member is read into memory once
//! (nothing is extracted to disk). Source: ar(5), POSIX ustar, PKWARE APPNOTE, deb(5).

use std::fs;
use std::io::Read;
use std::path::Path;

use anyhow::Context;

use super::bundle::{BUNDLE_MAGIC, CCOB_MAGIC};
use super::model::{FileReport, Unreadable};
use super::walk;
use super::Settings;

/// Deepest archive nesting followed (a .deb holds a data.tar.xz holding files: depth 2).
pub const MAX_DEPTH: u32 = 4;
/// Largest archive member read into memory (4 GiB; the largest real device-code library, a ROCm
/// library, is about 1.3 GB). A member whose header claims more is reported as unknown, naming
/// the member and its header offset; memory is never reserved by a header's claim
/// ([`MAX_RESERVE`]), and a member whose real bytes differ from its claimed size is unknown too.
pub const MAX_MEMBER: u64 = 4 << 30;
/// Memory reserved up front for a member, whatever size its header claims; the buffer grows only
/// as real bytes arrive, so a lying header cannot make the scanner reserve more (256 MiB).
pub const MAX_RESERVE: u64 = 256 << 20;

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

/// Scan a path given on the command line: a file (any [`Format`]) or a directory (walked).
///
/// Errors: the path does not exist or cannot be read, is not a regular file or directory, or is a
/// file that is empty or of no known format.
pub fn scan_top(path: &Path, files: &mut Vec<FileReport>, opts: &Settings) -> anyhow::Result<()> {
    let md = fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    let name = path.display().to_string();
    if md.is_dir() {
        return walk_dir(path, files, opts);
    }
    if !md.is_file() {
        anyhow::bail!("{name}: not a regular file or directory");
    }
    if md.len() == 0 {
        anyhow::bail!("{name}: file is empty (offset 0): no ELF, offload bundle or archive header");
    }
    let f = fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
    // SAFETY: the map is read-only; a file truncated by another process while we read it would
    // fault, which is the usual caveat of mmap-based readers (ripgrep, object's examples).
    let map = unsafe { memmap2::Mmap::map(&f) }.with_context(|| format!("cannot map {name}"))?;
    let known = scan_buffer(&name, &map, true, 0, files, opts)?;
    if !known {
        let head: String = map
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ");
        anyhow::bail!(
            "{name}: not a recognised input at offset 0 (first bytes {head})\nhelp: scan takes a host ELF (.so, executable, .o), a code object, an offload bundle (plain or CCOB), a .deb, a .whl/zip, a tar archive or a folder"
        );
    }
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

/// Walk a directory in name order; report every file that carries device code, and every entry
/// that could not be read: I/O errors on regular files always, dangling symlinks and FIFOs or
/// other non-regular files when their name looks like a library, object or archive
/// ([`may_carry_device_code`]; a dangling `sitecustomize.py` link in a rootfs is not one).
fn walk_dir(root: &Path, files: &mut Vec<FileReport>, opts: &Settings) -> anyhow::Result<()> {
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
                files.push(io_unreadable(&p, "io", format!("cannot read: {e}")));
                continue;
            }
        };
        let p = entry.path();
        let name = p.display().to_string();
        let ft = entry.file_type();
        if ft.is_dir() {
            continue;
        }
        if ft.is_symlink() {
            // Links to files are scanned where the file lives (SONAME links would double-count);
            // a dangling link to what may be a library is reported, since it cannot be read.
            if fs::metadata(p).is_err() && may_carry_device_code(p) {
                let to = fs::read_link(p)
                    .map(|t| t.display().to_string())
                    .unwrap_or_default();
                files.push(io_unreadable(
                    &name,
                    "io",
                    format!("dangling symlink to {to}"),
                ));
            }
            continue;
        }
        if !ft.is_file() {
            if !may_carry_device_code(p) {
                continue;
            }
            files.push(io_unreadable(
                &name,
                "not-regular",
                "not a regular file (FIFO, socket or device); not read".into(),
            ));
            continue;
        }
        let f = match fs::File::open(p) {
            Ok(f) => f,
            Err(e) => {
                files.push(io_unreadable(&name, "io", format!("cannot open: {e}")));
                continue;
            }
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < 4 {
            continue;
        }
        // SAFETY: see scan_top.
        let map = match unsafe { memmap2::Mmap::map(&f) } {
            Ok(m) => m,
            Err(e) => {
                files.push(io_unreadable(&name, "io", format!("cannot map: {e}")));
                continue;
            }
        };
        if let Err(e) = scan_buffer(&name, &map, false, 0, files, opts) {
            files.push(io_unreadable(&name, "io", format!("{e:#}")));
        }
    }
    Ok(())
}

/// Scan one buffer named `name`. `explicit`: the user named it (an ELF without device code is
/// still reported). Returns whether the format was recognised.
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
    let Some(fmt) = sniff(data) else {
        return Ok(false);
    };
    match fmt {
        Format::CodeObject => {
            let mut f = new_file(name, "code-object");
            walk::scan_code_object_file(data, &mut f);
            files.push(f);
        }
        Format::HostElf => {
            let mut f = new_file(name, "host-elf");
            if walk::scan_host_elf(data, &mut f, opts) || explicit {
                files.push(f);
            }
        }
        Format::Bundle | Format::Ccob => {
            let mut f = new_file(
                name,
                if fmt == Format::Bundle {
                    "bundle"
                } else {
                    "ccob"
                },
            );
            walk::scan_fatbin(data, 0, &mut f, opts);
            files.push(f);
        }
        Format::Kpack => {
            let mut f = new_file(name, "kpack");
            f.unreadable.push(Unreadable {
                offset: 0,
                processor: None,
                entry_id: None,
                class: "kpack".into(),
                reason: "device code externalized (kpack archive); its format is still changing and is not read".into(),
            });
            files.push(f);
        }
        _ if depth >= MAX_DEPTH => {
            let mut f = new_file(name, "archive");
            f.unreadable.push(Unreadable {
                offset: 0,
                processor: None,
                entry_id: None,
                class: "unsupported".into(),
                reason: format!("archive nested deeper than {MAX_DEPTH} levels; not read"),
            });
            files.push(f);
        }
        Format::Ar => scan_ar(name, data, depth, files, opts)?,
        Format::Zip => scan_zip(name, data, depth, files, opts)?,
        Format::Tar => scan_tar(name, data, depth, files, opts)?,
        Format::Gzip => scan_compressed_tar(
            name,
            flate2::read::MultiGzDecoder::new(data),
            explicit,
            depth,
            files,
            opts,
        )?,
        Format::Xz => scan_compressed_tar(
            name,
            xz2::read::XzDecoder::new_multi_decoder(data),
            explicit,
            depth,
            files,
            opts,
        )?,
        Format::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(data)
                .with_context(|| format!("{name}: zstd stream"))?;
            scan_compressed_tar(name, dec, explicit, depth, files, opts)?
        }
    }
    Ok(true)
}

fn member_name(archive: &str, member: &str) -> String {
    format!("{archive}!{}", member.trim_start_matches("./"))
}

/// `ar` archives (.deb, .a), parsed in place. GNU (`//` long-name table, `/N`) and BSD (`#1/N`)
/// long names are understood.
fn scan_ar(
    name: &str,
    data: &[u8],
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut pos = 8usize;
    let mut long_names: &[u8] = &[];
    while pos + 60 <= data.len() {
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
        pos = end + (end & 1);
    }
    Ok(())
}

/// zip archives (.whl): stored members are parsed in place, deflated ones are inflated once.
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
        let n = read_up_to(&mut m, &mut head).with_context(|| mname.clone())?;
        if sniff(&head[..n]).is_none() {
            continue;
        }
        let at = m.header_start();
        let claimed = m.size();
        if claimed > MAX_MEMBER {
            files.push(io_unreadable(
                &mname,
                "unsupported",
                format!(
                    "zip member at byte {at} claims {claimed} bytes, more than the {MAX_MEMBER}-byte limit"
                ),
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
                format!("zip member at byte {at}: cannot inflate: {e}"),
            ));
            continue;
        }
        if body.len() as u64 != claimed {
            files.push(io_unreadable(
                &mname,
                "truncated",
                format!(
                    "zip member at byte {at} claims {claimed} bytes but holds {}{}",
                    if body.len() as u64 > claimed {
                        "more than "
                    } else {
                        ""
                    },
                    body.len().min(claimed as usize)
                ),
            ));
            continue;
        }
        scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
    }
    Ok(())
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// A compressed stream: scanned as a tar archive when its first 512 decompressed bytes are a tar
/// header; otherwise skipped (a compressed changelog in a .deb), or an error when named directly.
fn scan_compressed_tar(
    name: &str,
    mut r: impl Read,
    explicit: bool,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut head = vec![0u8; 512];
    let n = read_up_to(&mut r, &mut head).with_context(|| format!("{name}: cannot decompress"))?;
    head.truncate(n);
    if head.get(257..262) != Some(b"ustar") {
        if explicit {
            anyhow::bail!("{name}: compressed stream at offset 0 is not a tar archive");
        }
        return Ok(());
    }
    scan_tar(
        name,
        std::io::Cursor::new(head).chain(r),
        depth,
        files,
        opts,
    )
}

/// tar archives, streamed: each regular member's first bytes are sniffed, and only members of a
/// known format are read into memory.
fn scan_tar(
    name: &str,
    r: impl Read,
    depth: u32,
    files: &mut Vec<FileReport>,
    opts: &Settings,
) -> anyhow::Result<()> {
    let mut ar = tar::Archive::new(r);
    let entries = match ar.entries() {
        Ok(e) => e,
        Err(e) => {
            files.push(io_unreadable(
                name,
                "bad-magic",
                format!("not a readable tar stream: {e}"),
            ));
            return Ok(());
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                files.push(io_unreadable(name, "truncated", format!("tar stream: {e}")));
                return Ok(());
            }
        };
        if !entry.header().entry_type().is_file() || entry.size() < 4 {
            continue;
        }
        let mname = member_name(
            name,
            &entry
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        );
        let mut head = [0u8; 264];
        let n = match read_up_to(&mut entry, &mut head) {
            Ok(n) => n,
            Err(e) => {
                files.push(io_unreadable(
                    &mname,
                    "truncated",
                    format!("tar member: {e}"),
                ));
                return Ok(());
            }
        };
        if sniff(&head[..n]).is_none() {
            continue;
        }
        let size = entry.size();
        if size > MAX_MEMBER {
            files.push(io_unreadable(
                &mname,
                "unsupported",
                format!(
                    "tar member at byte {} claims {size} bytes, more than the {MAX_MEMBER}-byte limit",
                    entry.raw_header_position()
                ),
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
            return Ok(());
        }
        scan_buffer(&mname, &body, false, depth + 1, files, opts)?;
    }
    Ok(())
}
