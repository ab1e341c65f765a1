//! `rcclfix doctor --capture FILE.tar`: a snapshot of exactly what doctor reads, for a bug report,
//! and its reader (`--snapshot FILE.tar|DIR`).
//!
//! Layout (paths inside the tar): `sys/…` mirrors sysfs (each GPU's path and slot siblings under
//! `sys/devices/…`, `sys/bus/pci/devices/<bdf>` as relative symlinks like the real ones, the KFD
//! topology, DMI `sys_vendor`/`product_name`/`product_version`), `proc/cpuinfo` (model name and
//! flags of CPU 0 only), `dmesg.txt` (amdgpu/kfd lines only), `rcclfix-snapshot.json`. The `sys/`
//! and `proc/` folder entries are always written, so a capture of a machine without an AMD GPU
//! reads back (as "no AMD GPU").
//!
//! **Privacy:** files are whitelisted, never globbed: no DMI serial/UUID/asset files, KFD
//! `unique_id` lines dropped, config space cut to the first 256 bytes (the extended space holds the
//! Device Serial Number capability), host names removed from log lines. Deterministic: mtime 0,
//! uid/gid 0, sorted entries. Written atomically through `fsutil::atomic_write`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::kmsg::KernelLog;
use super::pci;

/// Bytes of config space kept (standard space; the PCI Express capability lives here).
pub const CONFIG_KEEP: usize = 256;
/// The PCI function files copied per device.
pub const PCI_FILES: &[&str] = &[
    "vendor",
    "device",
    "class",
    "revision",
    "subsystem_vendor",
    "subsystem_device",
];
/// The DMI files copied (no serials, UUIDs, asset tags).
pub const DMI_FILES: &[&str] = &["sys_vendor", "product_name", "product_version"];

enum Entry {
    File(Vec<u8>),
    Link(PathBuf),
    Dir,
}

/// A machine file for the snapshot: at most [`super::input::MAX_SYSFS_FILE_BYTES`], regular files
/// only (`None` for anything else).
fn small(p: &Path) -> Option<Vec<u8>> {
    super::input::read_small(p, super::input::MAX_SYSFS_FILE_BYTES)
}

fn small_text(p: &Path) -> Option<String> {
    small(p).map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn rel(root: &Path, p: &Path) -> Option<PathBuf> {
    p.strip_prefix(root).ok().map(Path::to_owned)
}

/// Remove host names from one log line: the journal's `<date> <host> kernel:` prefix, and any
/// occurrence of the given host name.
pub fn scrub_line(line: &str, hostname: Option<&str>) -> String {
    let mut l = match line.find(" kernel: ") {
        Some(i) if !line.starts_with('[') => line[i + 1..].to_owned(),
        _ => line.to_owned(),
    };
    if let Some(h) = hostname.filter(|h| h.len() >= 2) {
        l = l.replace(h, "<host>");
    }
    l
}

/// Write the snapshot to `out`. Returns the number of files in it.
///
/// Errors: `out`'s folder does not exist or is not writable. Unreadable sysfs files are skipped.
pub fn write(out: &Path, sysfs: &Path, proc: &Path, klog: &KernelLog) -> anyhow::Result<usize> {
    let root = std::fs::canonicalize(sysfs)
        .with_context(|| format!("cannot open sysfs root {}", sysfs.display()))?;
    let mut entries: BTreeMap<PathBuf, Entry> = BTreeMap::new();
    let devices = pci::list_devices(&root);
    let mut dirs: Vec<PathBuf> = vec![];
    for gpu in devices.iter().filter(|d| d.is_amd_gpu()) {
        dirs.push(gpu.dir.clone());
        for b in pci::upstream_bridges(gpu).unwrap_or_default() {
            dirs.push(b.dir);
        }
        for s in devices
            .iter()
            .filter(|d| d.bdf != gpu.bdf && d.bdf.with_func(0) == gpu.bdf.with_func(0))
        {
            dirs.push(s.dir.clone());
        }
    }
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        let Some(r) = rel(&root, d) else { continue };
        for f in PCI_FILES {
            if let Some(b) = small(&d.join(f)) {
                entries.insert(Path::new("sys").join(&r).join(f), Entry::File(b));
            }
        }
        if let Some(mut b) = small(&d.join("config")) {
            b.truncate(CONFIG_KEEP);
            entries.insert(Path::new("sys").join(&r).join("config"), Entry::File(b));
        }
        let name = d.file_name().unwrap_or_default();
        // sys/bus/pci/devices/<bdf> -> ../../../devices/…
        entries.insert(
            Path::new("sys/bus/pci/devices").join(name),
            Entry::Link(Path::new("../../..").join(&r)),
        );
    }
    // KFD topology.
    let nodes = root.join("class/kfd/kfd/topology/nodes");
    if let Ok(rd) = std::fs::read_dir(&nodes) {
        for n in rd.filter_map(|e| e.ok()) {
            let nd = n.path();
            let r = Path::new("sys/class/kfd/kfd/topology/nodes").join(n.file_name());
            if let Some(t) = small_text(&nd.join("properties")) {
                let kept: String = t
                    .lines()
                    .filter(|l| !l.contains("unique_id") && !l.contains("serial"))
                    .map(|l| format!("{l}\n"))
                    .collect();
                entries.insert(r.join("properties"), Entry::File(kept.into_bytes()));
            }
            if let Some(b) = small(&nd.join("name")) {
                entries.insert(r.join("name"), Entry::File(b));
            }
            if let Ok(rd) = std::fs::read_dir(nd.join("io_links")) {
                for l in rd.filter_map(|e| e.ok()) {
                    if let Some(b) = small(&l.path().join("properties")) {
                        entries.insert(
                            r.join("io_links").join(l.file_name()).join("properties"),
                            Entry::File(b),
                        );
                    }
                }
            }
        }
    }
    for f in DMI_FILES {
        if let Some(b) = small(&root.join("class/dmi/id").join(f)) {
            entries.insert(Path::new("sys/class/dmi/id").join(f), Entry::File(b));
        }
    }
    if let Some(t) = small_text(&proc.join("cpuinfo")) {
        let mut kept = String::from("processor\t: 0\n");
        for key in ["model name", "flags"] {
            if let Some(l) = t.lines().find(|l| l.starts_with(key)) {
                kept.push_str(l);
                kept.push('\n');
            }
        }
        entries.insert(
            PathBuf::from("proc/cpuinfo"),
            Entry::File(kept.into_bytes()),
        );
    }
    let hostname = small_text(&proc.join("sys/kernel/hostname")).map(|s| s.trim().to_owned());
    let log: String = klog
        .relevant
        .iter()
        .map(|l| format!("{}\n", scrub_line(l, hostname.as_deref())))
        .collect();
    entries.insert(PathBuf::from("dmesg.txt"), Entry::File(log.into_bytes()));
    let manifest = serde_json::json!({
        "kind": "rcclfix-doctor-snapshot",
        "rcclfix_version": env!("CARGO_PKG_VERSION"),
        "kernel_log_origin": klog.origin,
    });
    entries.insert(
        PathBuf::from("rcclfix-snapshot.json"),
        Entry::File(serde_json::to_vec_pretty(&manifest)?),
    );

    // Always present, even with no AMD GPU (nothing else under sys/): the reader requires it.
    entries.insert(PathBuf::from("sys"), Entry::Dir);
    entries.insert(PathBuf::from("proc"), Entry::Dir);
    let count = entries
        .values()
        .filter(|e| !matches!(e, Entry::Dir))
        .count();
    let mut tar = tar::Builder::new(Vec::new());
    for (path, e) in &entries {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        match e {
            Entry::File(b) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(0o644);
                h.set_size(b.len() as u64);
                tar.append_data(&mut h, path, b.as_slice())?;
            }
            Entry::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                tar.append_data(&mut h, path, std::io::empty())?;
            }
            Entry::Link(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, path, target)?;
            }
        }
    }
    let bytes = tar.into_inner()?;
    crate::fsutil::atomic_write(out, &bytes)?;
    Ok(count)
}

/// The most bytes a snapshot may unpack (all members together): a real one is a few hundred KiB.
pub const MAX_SNAPSHOT_BYTES: u64 = super::input::MAX_INPUT_BYTES;

/// Whether `target`, the target of a symlink at member `path`, is one a capture writes:
/// `sys/bus/pci/devices/<bdf>` → `../../../devices/<pci…>/…/<bdf>` with only plain folder names
/// after `devices/`, so it stays inside the snapshot's `sys/devices`.
fn allowed_link(path: &Path, target: &Path) -> bool {
    use std::path::Component;
    let p: Vec<Component> = path.components().collect();
    let name_ok = matches!(
        p.as_slice(),
        [Component::Normal(a), Component::Normal(b), Component::Normal(c), Component::Normal(d), Component::Normal(n)]
            if *a == "sys" && *b == "bus" && *c == "pci" && *d == "devices"
                && n.to_str().and_then(pci::Bdf::parse).is_some()
    );
    let t: Vec<Component> = target.components().collect();
    name_ok
        && t.len() >= 5
        && t[..3].iter().all(|c| *c == Component::ParentDir)
        && t[3] == Component::Normal("devices".as_ref())
        && t[4..].iter().all(|c| {
            matches!(c, Component::Normal(n) if n.to_str().is_some_and(|s| s.starts_with("pci") || pci::Bdf::parse(s).is_some()))
        })
        && t.last().and_then(|c| c.as_os_str().to_str()) == path.file_name().and_then(|n| n.to_str())
}

/// Why a member of a snapshot is refused, or `None` when it may be unpacked. `kind` is the tar
/// entry type, or the file type of a folder's entry.
fn refuse_member(path: &Path, kind: MemberKind, link: Option<&Path>) -> Option<String> {
    use std::path::Component;
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Some("its path leaves the snapshot (an absolute path or `..`)".into());
    }
    match kind {
        MemberKind::File | MemberKind::Dir => None,
        MemberKind::Symlink => match link {
            Some(t) if allowed_link(path, t) => None,
            Some(t) => Some(format!(
                "a symbolic link to {} (a snapshot holds links only as sys/bus/pci/devices/<address> → ../../../devices/…)",
                printable(&t.display().to_string())
            )),
            None => Some("a symbolic link without a target".into()),
        },
        MemberKind::Hardlink => Some("a hard link (a snapshot holds plain files)".into()),
        MemberKind::Special(what) => Some(format!("{what} (a snapshot holds plain files)")),
    }
}

#[derive(Debug, Clone, Copy)]
enum MemberKind {
    File,
    Dir,
    Symlink,
    Hardlink,
    Special(&'static str),
}

/// Extract a snapshot tar into `dest`, member by member: only regular files, folders and the
/// `sys/bus/pci/devices/<bdf>` links a capture writes are unpacked; anything else (a `dmesg.txt`
/// that is a symlink to a host file, `sys` as a link to `/sys`, hard links, devices, FIFOs,
/// `..` or absolute paths) is refused, naming the member. At most [`MAX_SNAPSHOT_BYTES`] are
/// unpacked.
///
/// Errors (one line naming the file, printable ASCII only, at most [`ERROR_DETAIL_MAX`] characters
/// of detail): it cannot be opened, it is not a tar archive (no `ustar` magic at offset 257 of the
/// first 512-byte header; POSIX.1-2001 `ustar`, which GNU headers share), a member is refused, or
/// a member cannot be unpacked.
pub fn extract(tar_path: &Path, dest: &Path) -> anyhow::Result<()> {
    use std::io::Read;
    let mut f = fs_err::File::open(tar_path)?;
    let mut head = Vec::with_capacity(512);
    (&mut f)
        .take(512)
        .read_to_end(&mut head)
        .with_context(|| format!("{}: cannot read", tar_path.display()))?;
    if head.len() < 512 || &head[257..262] != b"ustar" {
        anyhow::bail!(
            "{}: not an rcclfix doctor snapshot (not a tar archive; {} bytes, starts with {})",
            tar_path.display(),
            fs_err::metadata(tar_path).map(|m| m.len()).unwrap_or(0),
            head.iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let bad = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!(
            "{}: not a readable snapshot tar: {}",
            tar_path.display(),
            printable(&e.to_string())
        )
    };
    let f = fs_err::File::open(tar_path)?;
    let mut ar = tar::Archive::new(f);
    let mut total = 0u64;
    let mut seen: std::collections::BTreeSet<PathBuf> = Default::default();
    for entry in ar.entries().map_err(|e| bad(&e))? {
        let mut entry = entry.map_err(|e| bad(&e))?;
        let path = entry.path().map_err(|e| bad(&e))?.into_owned();
        let ty = entry.header().entry_type();
        let kind = match ty {
            tar::EntryType::Regular | tar::EntryType::Continuous => MemberKind::File,
            tar::EntryType::Directory => MemberKind::Dir,
            tar::EntryType::Symlink => MemberKind::Symlink,
            tar::EntryType::Link => MemberKind::Hardlink,
            tar::EntryType::Char => MemberKind::Special("a character device"),
            tar::EntryType::Block => MemberKind::Special("a block device"),
            tar::EntryType::Fifo => MemberKind::Special("a FIFO"),
            _ => MemberKind::Special("a special tar entry"),
        };
        let link = entry
            .link_name()
            .map_err(|e| bad(&e))?
            .map(|l| l.into_owned());
        if let Some(why) = refuse_member(&path, kind, link.as_deref()) {
            anyhow::bail!(
                "{}: refused snapshot member {}: {why}",
                tar_path.display(),
                printable(&path.display().to_string())
            );
        }
        // Two members of one name: which one a reader sees is the archive's choice, not the
        // machine's (a capture writes each path once).
        let key: PathBuf = path
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect();
        if !seen.insert(key) {
            anyhow::bail!(
                "{}: refused snapshot member {}: it appears twice in the archive (a capture writes each path once)",
                tar_path.display(),
                printable(&path.display().to_string())
            );
        }
        // `Entry::size` is the size the archive reader will copy: a PAX `size` record overrides
        // the ustar header's field (POSIX.1-2001 pax), so the header's size is not the one to bound.
        total = total.saturating_add(entry.size().max(entry.header().size().unwrap_or(u64::MAX)));
        if total > MAX_SNAPSHOT_BYTES {
            anyhow::bail!(
                "{}: refused snapshot member {}: the members add up to more than {} MiB (a snapshot is a few hundred KiB)",
                tar_path.display(),
                printable(&path.display().to_string()),
                MAX_SNAPSHOT_BYTES >> 20
            );
        }
        // The archive reader's error names the temporary folder: show the member instead.
        let ok = entry.unpack_in(dest).map_err(|e| {
            bad(&format!("{e:#}").replace(
                &format!("{}/", dest.display()),
                &format!("{}!", tar_path.display()),
            ))
        })?;
        if !ok {
            anyhow::bail!(
                "{}: refused snapshot member {}: its path leaves the snapshot",
                tar_path.display(),
                printable(&path.display().to_string())
            );
        }
    }
    Ok(())
}

/// Check an extracted snapshot folder with the rules [`extract`] applies to a tar (regular files,
/// folders and the capture's own `sys/bus/pci/devices` links only; at most 100 000 entries; the
/// files' sizes add up to at most [`MAX_SNAPSHOT_BYTES`], a sparse file counted at its length).
///
/// Errors: a refused entry (named), or a folder that cannot be read.
pub fn check_folder(root: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let mut stack = vec![root.to_owned()];
    let mut seen = 0usize;
    let mut total = 0u64;
    while let Some(dir) = stack.pop() {
        for e in fs_err::read_dir(&dir)? {
            let e = e?;
            seen += 1;
            if seen > 100_000 {
                anyhow::bail!(
                    "{}: more than 100000 entries: not a doctor snapshot",
                    root.display()
                );
            }
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap_or(&p).to_owned();
            let t = e.file_type()?;
            let (kind, link) = if t.is_symlink() {
                (MemberKind::Symlink, fs_err::read_link(&p).ok())
            } else if t.is_dir() {
                stack.push(p.clone());
                (MemberKind::Dir, None)
            } else if t.is_file() {
                total = total.saturating_add(e.metadata()?.len());
                if total > MAX_SNAPSHOT_BYTES {
                    anyhow::bail!(
                        "{}: refused snapshot entry {}: the files add up to more than {} MiB (a snapshot is a few hundred KiB)",
                        root.display(),
                        printable(&rel.display().to_string()),
                        MAX_SNAPSHOT_BYTES >> 20
                    );
                }
                (MemberKind::File, None)
            } else if t.is_fifo() {
                (MemberKind::Special("a FIFO"), None)
            } else if t.is_char_device() {
                (MemberKind::Special("a character device"), None)
            } else if t.is_block_device() {
                (MemberKind::Special("a block device"), None)
            } else {
                (MemberKind::Special("a socket"), None)
            };
            if let Some(why) = refuse_member(&rel, kind, link.as_deref()) {
                anyhow::bail!(
                    "{}: refused snapshot entry {}: {why}",
                    root.display(),
                    printable(&rel.display().to_string())
                );
            }
        }
    }
    Ok(())
}

/// Check the snapshot's `rcclfix-snapshot.json`, when present: valid JSON whose `kind` is
/// `rcclfix-doctor-snapshot`. Returns whether it is present.
///
/// Errors: it cannot be read, is larger than 1 MiB, is not JSON, or names another kind.
pub fn check_manifest(dir: &Path, shown_as: &Path) -> anyhow::Result<bool> {
    let p = dir.join("rcclfix-snapshot.json");
    if !p.exists() {
        return Ok(false);
    }
    let text = super::input::read_capped(&p, 1 << 20).map_err(|e| {
        anyhow::anyhow!(
            "{}: rcclfix-snapshot.json: {}",
            shown_as.display(),
            printable(&format!("{e:#}"))
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: rcclfix-snapshot.json is not valid JSON ({}): not a doctor snapshot",
            shown_as.display(),
            printable(&e.to_string())
        )
    })?;
    if v.get("kind").and_then(|k| k.as_str()) != Some("rcclfix-doctor-snapshot") {
        anyhow::bail!(
            "{}: rcclfix-snapshot.json has no \"kind\": \"rcclfix-doctor-snapshot\": not a doctor snapshot",
            shown_as.display()
        );
    }
    Ok(true)
}

/// The most characters of an underlying error kept in [`extract`]'s message.
pub const ERROR_DETAIL_MAX: usize = 160;

/// `s` with control and non-ASCII characters escaped (`\x01`, `\u{fffd}`), cut to
/// [`ERROR_DETAIL_MAX`] characters (`...` marks the cut): archive errors quote raw header bytes.
pub fn printable(s: &str) -> String {
    let esc: String = s
        .chars()
        .flat_map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                vec![c]
            } else {
                c.escape_default().collect()
            }
        })
        .collect();
    if esc.chars().count() > ERROR_DETAIL_MAX {
        let cut: String = esc.chars().take(ERROR_DETAIL_MAX).collect();
        format!("{cut}...")
    } else {
        esc
    }
}
