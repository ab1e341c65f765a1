//! The `.deb` overlay: a binary package that ships the fixed library at the stock library's path,
//! which its `preinst` first takes over with `dpkg-divert --rename` (the stock file moves into a
//! `rcclfix-stock/` folder beside it, out of `ldconfig`'s reach) and its `postrm` gives back.
//!
//! Written with the `ar`, `tar` and `xz2` crates rather than `dpkg-deb` (ARCHITECTURE.md says why):
//! `debian-binary` first, then `control.tar.xz` and `data.tar.xz`; every member and tar entry has
//! uid/gid 0, mtime `SOURCE_DATE_EPOCH`, fixed modes, and the entries are sorted, so the bytes
//! depend on the inputs only. Sources: deb(5), deb-control(5), deb-triggers(5), dpkg-divert(1),
//! Debian Policy §3–§8 and §10.7 (maintainer scripts), cargo-deb `src/deb/{ar,tar}.rs`.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use anyhow::Context;

/// Everything the `.deb` is made of.
#[derive(Debug, Clone)]
pub struct DebSpec {
    /// Binary package name, e.g. `rcclfix-rccl-gfx1100`.
    pub package: String,
    /// Version, e.g. `2.13.4+rcclfix1`.
    pub version: String,
    /// Debian architecture (`amd64`).
    pub arch: String,
    /// `Maintainer:` (`Name <address>`).
    pub maintainer: String,
    /// `Depends:` (the stock RCCL package of the same ROCm release).
    pub depends: String,
    /// Description synopsis (one line, no trailing period).
    pub synopsis: String,
    /// Extended description, as paragraphs of plain text (wrapped here).
    pub long_description: Vec<String>,
    /// Absolute path of the stock library file in the installed system, which the package takes
    /// over, e.g. `/usr/lib/x86_64-linux-gnu/librccl.so.1.0`.
    pub stock_path: String,
    /// The library file as shipped: the build's library with its debug sections removed
    /// ([`super::strip::strip`]), or unchanged.
    pub library: super::strip::Rewritten,
    /// `manifest.json` and `scan.json` bytes, shipped under `/usr/share/doc/<package>/`.
    pub manifest_json: Vec<u8>,
    /// See `manifest_json`.
    pub scan_json: Vec<u8>,
    /// Changelog entry lines (`* …` bullets without the bullet).
    pub changelog: Vec<String>,
    /// Modification time of every member and entry, seconds since the epoch.
    pub mtime: u64,
}

/// The virtual package every rcclfix overlay provides and conflicts with, so two overlays (which
/// would divert the same file) cannot be installed together (Policy §7.6.2).
pub const OVERLAY_VIRTUAL: &str = "rcclfix-rccl-overlay";

/// The folder, next to the stock library, that holds the diverted stock file.
pub const ASIDE_DIR: &str = "rcclfix-stock";

impl DebSpec {
    /// The `.deb` file name: `<package>_<version>_<arch>.deb` (the epoch-less Debian convention).
    pub fn file_name(&self) -> String {
        format!("{}_{}_{}.deb", self.package, self.version, self.arch)
    }

    /// Where the stock file is diverted to: `<dir>/rcclfix-stock/<name>`.
    pub fn aside_path(&self) -> String {
        let (dir, name) = split_dir(&self.stock_path);
        format!("{dir}/{ASIDE_DIR}/{name}")
    }

    fn doc_dir(&self) -> String {
        format!("usr/share/doc/{}", self.package)
    }
}

fn split_dir(p: &str) -> (&str, &str) {
    match p.rfind('/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => ("", p),
    }
}

/// A file of the data or control archive: bytes in memory, or a (rewritten) mapped file.
enum Body {
    Bytes(Vec<u8>),
    Image(super::strip::Rewritten),
    /// A symbolic link to the given (relative) target.
    Symlink(String),
}

struct Entry {
    mode: u32,
    body: Body,
}

/// Write the `.deb` to `out`. Errors: a spec value that the format cannot carry (see
/// `validate`); the library cannot be read; an output write fails.
pub fn write_deb(spec: &DebSpec, out: &mut dyn Write) -> anyhow::Result<()> {
    validate(spec)?;
    // data.tar: path (relative, no leading "./") → entry. Directories are derived from the files.
    let mut files: BTreeMap<String, Entry> = BTreeMap::new();
    let stock_rel = spec.stock_path.trim_start_matches('/').to_owned();
    add_file(
        &mut files,
        &stock_rel,
        0o644,
        Body::Image(spec.library.clone()),
    )?;
    add_doc_files(&mut files, spec, &spec.package)?;
    add_file(
        &mut files,
        &format!("{doc}/manifest.json", doc = spec.doc_dir()),
        0o644,
        Body::Bytes(spec.manifest_json.clone()),
    )?;
    add_file(
        &mut files,
        &format!("{doc}/scan.json", doc = spec.doc_dir()),
        0o644,
        Body::Bytes(spec.scan_json.clone()),
    )?;
    add_file(
        &mut files,
        &format!("usr/share/lintian/overrides/{}", spec.package),
        0o644,
        Body::Bytes(lintian_overrides(spec).into_bytes()),
    )?;
    let (md5sums, installed_kib) = md5sums(&files)?;
    let mut control: BTreeMap<String, Entry> = BTreeMap::new();
    let control_text = control_file(spec, installed_kib);
    for (name, mode, bytes) in [
        ("control", 0o644, control_text.into_bytes()),
        ("md5sums", 0o644, md5sums.into_bytes()),
        ("preinst", 0o755, preinst(spec).into_bytes()),
        ("postrm", 0o755, postrm(spec).into_bytes()),
        ("triggers", 0o644, triggers().into_bytes()),
    ] {
        add_file(&mut control, name, mode, Body::Bytes(bytes))?;
    }
    assemble(&control, &files, spec.mtime, out)
}

/// The `-dbgsym` package of an overlay, as debhelper's `dh_strip` + `dh_gencontrol` make one:
/// `<package>-dbgsym`, `Section: debug`, `Depends: <package> (= <version>)`, a `Build-Ids:`
/// field, and the detached debug file `debug` ([`super::strip::only_keep_debug`]) at
/// `/usr/lib/debug/.build-id/<first two hex digits>/<the rest>.debug`, where gdb looks for it.
pub fn write_dbgsym(
    spec: &DebSpec,
    debug: &super::strip::Rewritten,
    build_id: &str,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    validate(spec)?;
    if build_id.len() < 4 || !build_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!("build ID {build_id:?} is not a hex string");
    }
    let pkg = dbgsym_name(&spec.package);
    let mut files: BTreeMap<String, Entry> = BTreeMap::new();
    add_file(
        &mut files,
        &format!(
            "usr/lib/debug/.build-id/{}/{}.debug",
            &build_id[..2],
            &build_id[2..]
        ),
        0o644,
        Body::Image(debug.clone()),
    )?;
    // As dh_strip makes it: the documentation folder is a link to the overlay's (Policy §12.5).
    add_file(
        &mut files,
        &format!("usr/share/doc/{pkg}"),
        0o777,
        Body::Symlink(spec.package.clone()),
    )?;
    let (md5sums, installed_kib) = md5sums(&files)?;
    let mut c = String::new();
    c.push_str(&format!("Package: {pkg}\n"));
    c.push_str(&format!("Source: {}\n", spec.package));
    c.push_str(&format!("Version: {}\n", spec.version));
    c.push_str("Auto-Built-Package: debug-symbols\n");
    c.push_str(&format!("Architecture: {}\n", spec.arch));
    c.push_str(&format!("Maintainer: {}\n", spec.maintainer));
    c.push_str(&format!("Installed-Size: {installed_kib}\n"));
    c.push_str(&format!("Depends: {} (= {})\n", spec.package, spec.version));
    c.push_str("Section: debug\n");
    c.push_str("Priority: optional\n");
    c.push_str(&format!(
        "Description: debug symbols for {}\n",
        spec.package
    ));
    for line in wrap(
        &format!(
            "The DWARF debugging information and the symbol table that rcclfix removed from \
             {} in {}; gdb finds them by the library's build ID.",
            spec.stock_path, spec.package
        ),
        78,
    ) {
        c.push_str(&format!(" {line}\n"));
    }
    c.push_str(&format!("Build-Ids: {build_id}\n"));
    let mut control: BTreeMap<String, Entry> = BTreeMap::new();
    add_file(&mut control, "control", 0o644, Body::Bytes(c.into_bytes()))?;
    add_file(
        &mut control,
        "md5sums",
        0o644,
        Body::Bytes(md5sums.into_bytes()),
    )?;
    assemble(&control, &files, spec.mtime, out)
}

/// `<package>-dbgsym`.
pub fn dbgsym_name(package: &str) -> String {
    format!("{package}-dbgsym")
}

/// Insert one file; two files at one path are an error (e.g. a `--stock-path` that names one of
/// the documentation files), never a silent replacement.
fn add_file(
    files: &mut BTreeMap<String, Entry>,
    path: &str,
    mode: u32,
    body: Body,
) -> anyhow::Result<()> {
    if files
        .insert(path.to_owned(), Entry { mode, body })
        .is_some()
    {
        anyhow::bail!("two files of the package would be installed at /{path}");
    }
    Ok(())
}

/// `usr/share/doc/<package>/{copyright,changelog.gz}` (Policy §12.5, §12.7).
fn add_doc_files(
    files: &mut BTreeMap<String, Entry>,
    spec: &DebSpec,
    package: &str,
) -> anyhow::Result<()> {
    let doc = format!("usr/share/doc/{package}");
    add_file(
        files,
        &format!("{doc}/copyright"),
        0o644,
        Body::Bytes(copyright(spec).into_bytes()),
    )?;
    add_file(
        files,
        &format!("{doc}/changelog.gz"),
        0o644,
        Body::Bytes(gzip(changelog(spec).as_bytes())?),
    )
}

/// The `md5sums` control file for `files` and the `Installed-Size:` in KiB (files rounded up to
/// whole KiB, plus one per directory, as dpkg-gencontrol counts).
fn md5sums(files: &BTreeMap<String, Entry>) -> anyhow::Result<(String, u64)> {
    let mut md5sums = String::new();
    let mut installed_kib = 0u64;
    for (path, e) in files {
        let (md5, size) = match &e.body {
            Body::Bytes(b) => (hex::encode(md5::Md5::digest_bytes(b)), b.len() as u64),
            Body::Image(img) => (md5_reader(img.reader())?, img.len()),
            // dpkg lists regular files only.
            Body::Symlink(_) => {
                installed_kib += 1;
                continue;
            }
        };
        md5sums.push_str(&format!("{md5}  {path}\n"));
        installed_kib += size.div_ceil(1024);
    }
    installed_kib += parent_dirs(files.keys().map(String::as_str)).len() as u64;
    Ok((md5sums, installed_kib))
}

/// The ar archive: `debian-binary`, `control.tar.xz`, `data.tar.xz`.
fn assemble(
    control: &BTreeMap<String, Entry>,
    files: &BTreeMap<String, Entry>,
    mtime: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let dirs = parent_dirs(files.keys().map(String::as_str));
    let data = xz_tar(&dirs, files, mtime).context("cannot assemble data.tar.xz")?;
    let control =
        xz_tar(&[String::new()], control, mtime).context("cannot assemble control.tar.xz")?;
    let mut ar = ar::Builder::new(out);
    for (name, bytes) in [
        ("debian-binary", &b"2.0\n"[..]),
        ("control.tar.xz", &control[..]),
        ("data.tar.xz", &data[..]),
    ] {
        let mut h = ar::Header::new(name.as_bytes().to_vec(), bytes.len() as u64);
        h.set_mtime(mtime);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mode(0o100644);
        ar.append(&h, bytes)
            .with_context(|| format!("cannot write ar member {name}"))?;
    }
    Ok(())
}

/// Check every value that reaches the control file, the maintainer scripts or a path against
/// its grammar ([`super::fields`]). Errors (one line) name the field and the value.
fn validate(spec: &DebSpec) -> anyhow::Result<()> {
    use super::fields;
    let check = |field: &str, value: &str, r: Result<(), String>| -> anyhow::Result<()> {
        r.map_err(|why| anyhow::anyhow!("{field} {value:?} {why}"))
    };
    check(
        "package name",
        &spec.package,
        fields::debian_package_name(&spec.package).map_err(|e| format!("{e} (Policy §5.6.1)")),
    )?;
    check(
        "version",
        &spec.version,
        fields::debian_version(&spec.version).map_err(|e| format!("{e} (Policy §5.6.12)")),
    )?;
    check(
        "architecture",
        &spec.arch,
        fields::debian_package_name(&spec.arch),
    )?;
    check(
        "Maintainer:",
        &spec.maintainer,
        fields::maintainer(&spec.maintainer),
    )?;
    check(
        "Depends:",
        &spec.depends,
        fields::depends(&spec.depends).map_err(|e| format!("{e} (Policy §7.1)")),
    )?;
    check(
        "stock path",
        &spec.stock_path,
        fields::stock_path(&spec.stock_path),
    )?;
    check(
        "synopsis",
        &spec.synopsis,
        fields::single_line(&spec.synopsis),
    )?;
    for text in spec.long_description.iter().chain(&spec.changelog) {
        check("description", text, fields::single_line(text))?;
    }
    Ok(())
}

/// Every parent directory of the given relative paths, with `""` for the root (`./`), sorted.
fn parent_dirs<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    dirs.insert(String::new());
    for p in paths {
        let mut acc = String::new();
        let parts: Vec<&str> = p.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            dirs.insert(acc.clone());
        }
    }
    dirs.into_iter().collect()
}

/// A tar (GNU format) of `dirs` and `files`, entries in path order with every directory before its
/// contents, xz-compressed (preset 6, single-threaded, hence deterministic).
fn xz_tar(dirs: &[String], files: &BTreeMap<String, Entry>, mtime: u64) -> anyhow::Result<Vec<u8>> {
    // Merge directories ("usr/" style keys) and files into one sorted order.
    let mut order: Vec<(String, Option<&Entry>)> = dirs.iter().map(|d| (d.clone(), None)).collect();
    order.extend(files.iter().map(|(p, e)| (p.clone(), Some(e))));
    order.sort_by(|a, b| {
        let ka = if a.1.is_none() && !a.0.is_empty() {
            format!("{}/", a.0)
        } else {
            a.0.clone()
        };
        let kb = if b.1.is_none() && !b.0.is_empty() {
            format!("{}/", b.0)
        } else {
            b.0.clone()
        };
        ka.cmp(&kb)
    });
    let enc = xz2::write::XzEncoder::new(Vec::new(), 6);
    let mut tar = tar::Builder::new(enc);
    for (path, entry) in order {
        let mut h = tar::Header::new_gnu();
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("root")?;
        h.set_groupname("root")?;
        h.set_mtime(mtime);
        let name = match entry {
            None if path.is_empty() => "./".to_owned(),
            None => format!("./{path}/"),
            Some(_) => format!("./{path}"),
        };
        match entry {
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                append(&mut tar, &mut h, &name, std::io::empty())?;
            }
            Some(Entry {
                body: Body::Symlink(target),
                ..
            }) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                h.set_link_name(target)?;
                append(&mut tar, &mut h, &name, std::io::empty())?;
            }
            Some(e) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(e.mode);
                match &e.body {
                    Body::Symlink(_) => unreachable!("handled above"),
                    Body::Bytes(b) => {
                        h.set_size(b.len() as u64);
                        append(&mut tar, &mut h, &name, &b[..])?;
                    }
                    Body::Image(img) => {
                        h.set_size(img.len());
                        append(&mut tar, &mut h, &name, img.reader())?;
                    }
                }
            }
        }
    }
    let enc = tar.into_inner()?;
    Ok(enc.finish()?)
}

/// Append with the name written verbatim ("./usr/…", as dpkg-deb writes it) when it fits the
/// 100-byte name field; longer names go through the tar crate's GNU long-name extension.
fn append<W: Write, R: Read>(
    tar: &mut tar::Builder<W>,
    h: &mut tar::Header,
    name: &str,
    data: R,
) -> anyhow::Result<()> {
    if name.len() < 100 {
        let field = &mut h.as_old_mut().name;
        field.fill(0);
        field[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        tar.append(h, data)?;
    } else {
        tar.append_data(h, name, data)?;
    }
    Ok(())
}

fn control_file(spec: &DebSpec, installed_kib: u64) -> String {
    let mut s = String::new();
    s.push_str(&format!("Package: {}\n", spec.package));
    s.push_str(&format!("Version: {}\n", spec.version));
    s.push_str(&format!("Architecture: {}\n", spec.arch));
    s.push_str(&format!("Maintainer: {}\n", spec.maintainer));
    s.push_str(&format!("Installed-Size: {installed_kib}\n"));
    s.push_str(&format!("Depends: {}\n", spec.depends));
    s.push_str(&format!("Conflicts: {OVERLAY_VIRTUAL}\n"));
    s.push_str(&format!("Provides: {OVERLAY_VIRTUAL}\n"));
    s.push_str("Section: libs\n");
    s.push_str("Priority: optional\n");
    s.push_str(&format!("Description: {}\n", spec.synopsis));
    for (i, para) in spec.long_description.iter().enumerate() {
        if i > 0 {
            s.push_str(" .\n");
        }
        for line in wrap(para, 78) {
            s.push_str(&format!(" {line}\n"));
        }
    }
    s
}

/// Greedy word wrap at `width` columns.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// `preinst`: on install/upgrade, divert the stock file into `rcclfix-stock/` (renaming it), so
/// the file this package ships at the stock path is unpacked in its place. `dpkg-divert --add` of
/// an identical diversion is a no-op, so the script is idempotent.
fn preinst(spec: &DebSpec) -> String {
    let (dir, _) = split_dir(&spec.stock_path);
    format!(
        r#"#!/bin/sh
# preinst of {pkg} (written by rcclfix): take over the stock RCCL library path.
set -e

stock='{stock}'
aside='{aside}'

case "$1" in
    install|upgrade)
        mkdir -p '{dir}/{ASIDE_DIR}'
        dpkg-divert --package '{pkg}' --add --rename --divert "$aside" "$stock"
        ;;
    abort-upgrade)
        ;;
    *)
        echo "preinst called with unknown argument '$1'" >&2
        exit 1
        ;;
esac

exit 0
"#,
        pkg = spec.package,
        stock = spec.stock_path,
        aside = spec.aside_path(),
    )
}

/// `postrm`: on remove (and when an install is aborted), drop the diversion and rename the stock
/// file back. `dpkg-divert --remove` of a diversion that no longer exists is a no-op, so the script
/// is idempotent; purge has nothing left to do.
fn postrm(spec: &DebSpec) -> String {
    let (dir, _) = split_dir(&spec.stock_path);
    format!(
        r#"#!/bin/sh
# postrm of {pkg} (written by rcclfix): give the stock RCCL library its path back.
set -e

stock='{stock}'
aside='{aside}'

case "$1" in
    remove|abort-install|disappear)
        dpkg-divert --package '{pkg}' --remove --rename --divert "$aside" "$stock"
        if [ -d '{dir}/{ASIDE_DIR}' ]; then
            rmdir --ignore-fail-on-non-empty '{dir}/{ASIDE_DIR}'
        fi
        ;;
    purge|upgrade|failed-upgrade|abort-upgrade)
        ;;
    *)
        echo "postrm called with unknown argument '$1'" >&2
        exit 1
        ;;
esac

exit 0
"#,
        pkg = spec.package,
        stock = spec.stock_path,
        aside = spec.aside_path(),
    )
}

/// deb-triggers(5): let libc-bin run `ldconfig` once after the package is configured or removed
/// (Policy §8.1.1), instead of calling it from the scripts.
fn triggers() -> String {
    "# Run ldconfig (libc-bin's trigger) after this package is installed or removed.\nactivate-noawait ldconfig\n".into()
}

fn copyright(spec: &DebSpec) -> String {
    format!(
        "{pkg}: RCCL (ROCm Communication Collectives Library) rebuilt by rcclfix.\n\n\
         The library is built from the unmodified RCCL sources named in manifest.json\n\
         (git URL, tag and commit), plus the patches listed there.\n\n\
         RCCL:\n\
         Copyright (c) 2015-2022, NVIDIA CORPORATION. All rights reserved.\n\
         Modifications Copyright (c) 2019-2022 Advanced Micro Devices, Inc. All rights reserved.\n\
         License: BSD-3-Clause; the full text is LICENSE.txt in the RCCL source tree.\n\n\
         Packaging (the maintainer scripts and these files): generated by rcclfix,\n\
         licensed MIT OR Apache-2.0. On Debian systems the full text of the Apache\n\
         License 2.0 is in /usr/share/common-licenses/Apache-2.0.\n",
        pkg = spec.package
    )
}

fn changelog(spec: &DebSpec) -> String {
    let mut s = format!(
        "{} ({}) unstable; urgency=medium\n\n",
        spec.package, spec.version
    );
    for item in &spec.changelog {
        let lines = wrap(item, 74);
        for (i, l) in lines.iter().enumerate() {
            s.push_str(if i == 0 { "  * " } else { "    " });
            s.push_str(l);
            s.push('\n');
        }
    }
    s.push_str(&format!(
        "\n -- {}  {}\n",
        spec.maintainer,
        rfc2822(spec.mtime)
    ));
    s
}

/// Lintian overrides shipped with the package, each with the reason.
fn lintian_overrides(spec: &DebSpec) -> String {
    let p = &spec.package;
    let mut s = String::new();
    s.push_str("# The overlay takes over the stock package's file through dpkg-divert; it must not be named\n");
    s.push_str("# after the SONAME (librccl1): that is the stock package it depends on.\n");
    s.push_str(&format!(
        "{p}: package-name-doesnt-match-sonames librccl1\n"
    ));
    s.push_str("# The SONAME link (librccl.so.1) and the shlibs file belong to the stock package, which this\n");
    s.push_str("# one depends on; shipping them too would clash with its files.\n");
    s.push_str(&format!("{p}: lacks-versioned-link-to-shared-library *\n"));
    s.push_str(&format!("{p}: no-shlibs *\n"));
    s.push_str(&format!("{p}: no-symbols-control-file *\n"));
    if spec.stock_path.starts_with("/opt/") {
        s.push_str("# ROCm's own packages install under /opt/rocm-<release>; the overlay must use their path.\n");
        s.push_str(&format!("{p}: dir-or-file-in-opt *\n"));
    }
    s
}

/// `Thu, 01 Jan 1970 00:00:00 +0000` from seconds since the epoch (UTC).
fn rfc2822(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let (y, m, d) = civil_from_days(days);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days.rem_euclid(7)) as usize];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(m - 1) as usize];
    format!(
        "{wd}, {d:02} {mon} {y} {:02}:{:02}:{:02} +0000",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day); Howard Hinnant's `civil_from_days`.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// gzip at maximum compression with no file name and mtime 0 (reproducible, as dh_compress does).
fn gzip(bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes)?;
    Ok(enc.finish()?)
}

fn md5_reader(mut r: impl Read) -> anyhow::Result<String> {
    use md5::Digest;
    let mut h = md5::Md5::new();
    std::io::copy(&mut r, &mut h).context("cannot read the library")?;
    Ok(hex::encode(h.finalize()))
}

trait DigestBytes {
    fn digest_bytes(b: &[u8]) -> Vec<u8>;
}
impl DigestBytes for md5::Md5 {
    fn digest_bytes(b: &[u8]) -> Vec<u8> {
        use md5::Digest;
        md5::Md5::digest(b).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc2822(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc2822(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 +0000");
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
    }

    #[test]
    fn dirs_are_all_parents() {
        let d = parent_dirs(["usr/lib/a.so", "usr/share/doc/p/x"].into_iter());
        assert_eq!(
            d,
            [
                "",
                "usr",
                "usr/lib",
                "usr/share",
                "usr/share/doc",
                "usr/share/doc/p"
            ]
        );
    }

    #[test]
    fn wraps() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
    }
}
