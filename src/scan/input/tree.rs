//! The folder walk of [`super::scan_paths`]: paths given on the command line and folders walked
//! in name order (links to folders followed, each folder once), links and hard links read once, entries that cannot be read reported as
//! records (a FIFO, a dangling link), everything skipped logged.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{io_unreadable, skipped, Source};
use crate::scan::model::FileReport;
use crate::scan::Settings;

pub(super) fn top_sources(
    path: &Path,
    out: &mut Vec<Source>,
    opts: &Settings,
) -> anyhow::Result<()> {
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

/// Walk a directory in name order. Folders on the kernel's pseudo file systems ([`crate::fsutil::on_pseudo_fs`])
/// are not walked: one reached through a link is reported unread, a mount point met walking a
/// root is skipped (logged). Regular files are read; a link to a regular file is read
/// too, under the link's name, unless the same file is also met under another name (a SONAME
/// link beside its library, a hard link), then it is read once, under its own name when the walk
/// meets it, else under the first link's name. Links to folders are followed, each folder walked
/// once (by device and inode: a link back to an enclosing folder, or a second link to a folder
/// already walked, adds nothing, since its files are read under the first name). Entries that
/// cannot be read are reported: I/O errors on regular files always; dangling links, link loops,
/// FIFOs and other non-regular files when their name looks like a library, object or archive
/// ([`may_carry_device_code`]; a dangling `sitecustomize.py` link in a rootfs is not one), and a
/// dangling link also when its target's name does (`libx.so -> libx.so.1`) or has no extension
/// (it may have been a folder of libraries). Everything skipped is logged (`-v`).
fn walk_dir(root: &Path, out: &mut Vec<Source>, opts: &Settings) {
    struct Cand {
        name: String,
        path: PathBuf,
        link: bool,
        key: (u64, u64),
    }
    let mut found: Vec<Result<Cand, FileReport>> = Vec::new();
    let mut seen = 0u64;
    // Folders walked so far, by (device, inode).
    let mut dirs = std::collections::HashSet::<(u64, u64)>::new();
    // Folders on the kernel's pseudo file systems (a link to `/` or `/proc` inside the folder)
    // are not walked: `/proc/kcore` alone claims 128 TiB. They are reported unread, never fine.
    let outside = std::cell::RefCell::new(Vec::<(String, PathBuf)>::new());
    let walk = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            if !e.file_type().is_dir() {
                return true;
            }
            if e.depth() > 0 && crate::fsutil::on_pseudo_fs(e.path()) {
                if e.path_is_symlink() {
                    let to = fs::canonicalize(e.path()).unwrap_or_else(|_| e.path().to_path_buf());
                    outside
                        .borrow_mut()
                        .push((e.path().display().to_string(), to));
                } else {
                    // A mount point met walking a root (`scan /`): not content of the folder.
                    skipped(
                        &e.path().display().to_string(),
                        "a kernel pseudo file system (proc, sysfs, …) mounted here; not walked",
                    );
                }
                return false;
            }
            let Ok(md) = e.metadata() else {
                return true;
            };
            let first = dirs.insert((md.dev(), md.ino()));
            if !first {
                skipped(
                    &e.path().display().to_string(),
                    "link to a folder already walked; its files are read under that name",
                );
            }
            first
        });
    for entry in walk {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let p = e.path().map(Path::to_owned);
                let name = p
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| root.display().to_string());
                if let Some(up) = e.loop_ancestor() {
                    skipped(
                        &name,
                        format!(
                            "link to the enclosing folder {}; its files are read under that name",
                            up.display()
                        ),
                    );
                    continue;
                }
                let link = p.as_deref().filter(|p| p.is_symlink());
                if let Some(p) = link {
                    let to = fs::read_link(p).unwrap_or_default();
                    let why = if e.io_error().and_then(|e| e.raw_os_error()) == Some(40) {
                        format!("symbolic link loop ({})", to.display())
                    } else {
                        format!("dangling symlink to {}", to.display())
                    };
                    let may = may_carry_device_code(p)
                        || may_carry_device_code(&to)
                        || to.extension().is_none();
                    if may {
                        found.push(Err(io_unreadable(&name, "io", why)));
                    } else {
                        skipped(
                            &name,
                            format!("{why} (neither its name nor its target's is one of a library, object, archive or folder)"),
                        );
                    }
                    continue;
                }
                found.push(Err(io_unreadable(&name, "io", format!("cannot read: {e}"))));
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
        // The target's type, for a link.
        let ft = entry.file_type();
        if ft.is_dir() {
            continue;
        }
        let link = entry.path_is_symlink();
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
        if !ft.is_file() {
            let why = if link {
                let to = fs::read_link(p).unwrap_or_default();
                format!(
                    "link to {}, which is not a regular file (FIFO, socket or device); not read",
                    to.display()
                )
            } else {
                "not a regular file (FIFO, socket or device); not read".into()
            };
            found.extend(unread("not-regular", why));
            continue;
        }
        match entry.metadata() {
            Ok(md) => found.push(Ok(Cand {
                name,
                path: p.to_owned(),
                link,
                key: (md.dev(), md.ino()),
            })),
            Err(e) => found.push(Err(io_unreadable(&name, "io", format!("cannot read: {e}")))),
        }
    }
    for (name, to) in outside.into_inner() {
        found.push(Err(io_unreadable(
            &name,
            "io",
            format!(
                "link to {}, on a kernel pseudo file system (proc, sysfs, devtmpfs, …); not walked",
                to.display()
            ),
        )));
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
