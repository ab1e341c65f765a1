//! `rcclfix package`: drop-in .deb and .whl overlays with export checks and provenance.
//!
//! Flow: read the build folder (`manifest.json`, `scan.json`, the library; [`BuildFolder`]) →
//! export/ABI gate ([`export_gate::check`]) → assemble every requested package in a temporary file in the
//! output folder ([`deb::write_deb`], [`wheel::write_wheel`]) → rename them all into place. A failed
//! gate or a failed package writes nothing.

pub mod deb;
pub mod elf;
pub mod export_gate;
pub mod fields;
pub mod strip;
pub mod wheel;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::manifest::Manifest;

/// A package format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Format {
    /// Debian binary package that diverts the stock library.
    Deb,
    /// Python wheel with a start-up hook that preloads the library.
    Whl,
}

impl std::str::FromStr for Format {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Format> {
        match s.trim() {
            "deb" => Ok(Format::Deb),
            "whl" | "wheel" => Ok(Format::Whl),
            other => {
                anyhow::bail!("unknown package format {other:?}\nhelp: formats are deb and whl")
            }
        }
    }
}

/// Which stock RCCL the .deb overlays (decides `Depends:` and the stock library path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Flavor {
    /// Debian's `librccl1` (`/usr/lib/<triplet>/librccl.so.1.0`).
    Debian,
    /// AMD's ROCm apt package `rccl` (`/opt/rocm-<release>/lib/librccl.so.1.0.<ROCm int>`).
    Rocm,
}

/// Where packages go without `--out-dir`: beside the build folder (its parent), not inside it,
/// because `build` replaces the whole build folder on a rebuild.
pub fn default_out_dir(build_dir: &Path) -> PathBuf {
    let abs = std::path::absolute(build_dir).unwrap_or_else(|_| build_dir.to_owned());
    match abs.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => abs,
    }
}

/// Everything `package` needs besides the build folder.
#[derive(Debug, Clone)]
pub struct PackageOptions {
    /// Formats to write (duplicates are ignored).
    pub formats: Vec<Format>,
    /// Output folder (created if missing).
    pub out_dir: PathBuf,
    /// What the export gate compares with.
    pub gate: export_gate::GateInputs,
    /// N in `+rcclfix<N>`.
    pub revision: u32,
    /// Stock package kind; `None` derives it from the manifest's toolchain.
    pub flavor: Option<Flavor>,
    /// `Depends:` override.
    pub depends: Option<String>,
    /// Stock library path override.
    pub stock_path: Option<String>,
    /// `Maintainer:` override (`Name <address>`, or a bare address).
    pub maintainer: Option<String>,
    /// Also write the `-dbgsym` .deb (needs `Format::Deb`).
    pub dbgsym: bool,
}

impl PackageOptions {
    /// Options with the given formats and output folder, no gate references, revision 1, and the
    /// package metadata derived from the manifest.
    pub fn new(formats: Vec<Format>, out_dir: &Path) -> Self {
        PackageOptions {
            formats,
            out_dir: out_dir.to_owned(),
            gate: Default::default(),
            revision: 1,
            flavor: None,
            depends: None,
            stock_path: None,
            maintainer: None,
            dbgsym: false,
        }
    }
}

/// Called by `build --package deb,whl` (and `package --from`): run the export gate, then write the
/// requested overlays for the build folder `build_dir` (holding the library, `manifest.json`,
/// `scan.json`) into `out_dir`. Returns the paths written. Nothing is written when a gate fails.
///
/// Errors: an unknown format name; see [`package`].
pub fn package_build_dir(
    build_dir: &std::path::Path,
    formats: &[String],
    out_dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let formats = formats
        .iter()
        .map(|f| f.parse())
        .collect::<anyhow::Result<Vec<Format>>>()?;
    package(build_dir, &PackageOptions::new(formats, out_dir))
}

/// A build folder, read and checked.
#[derive(Debug, Clone)]
pub struct BuildFolder {
    /// The folder.
    pub dir: PathBuf,
    /// `manifest.json`, parsed.
    pub manifest: Manifest,
    /// `manifest.json` as stored (embedded verbatim).
    pub manifest_json: Vec<u8>,
    /// `scan.json` as stored (embedded verbatim; parsed once to check it is a scan report).
    pub scan_json: Vec<u8>,
    /// The library file named by the manifest.
    pub library: PathBuf,
}

impl BuildFolder {
    /// Read `dir`: `manifest.json` (schema `crate::manifest`), `scan.json` (schema
    /// `crate::scan::model`), and the library `manifest.library.file`, whose sha256 must match the
    /// manifest. The manifest's scan gate must say `clean` for every target.
    ///
    /// Errors name the file and what is wrong.
    pub fn read(dir: &Path) -> anyhow::Result<BuildFolder> {
        match std::fs::metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
                "{}: does not exist (--from takes a build folder, e.g. out/rccl-2.13.4-gfx1100/)",
                dir.display()
            ),
            Err(e) => anyhow::bail!("{}: cannot read: {e}", dir.display()),
            Ok(m) if !m.is_dir() => anyhow::bail!(
                "{}: is {}, not a folder (--from takes a build folder, e.g. out/rccl-2.13.4-gfx1100/)",
                dir.display(),
                kind_of(&m)
            ),
            Ok(_) => {}
        }
        let mpath = dir.join("manifest.json");
        regular_file(&mpath, "the build manifest")?;
        let manifest_json = read_all(&mpath)?;
        let manifest = read_manifest(&mpath, &manifest_json)?;
        fields::check_manifest(&mpath, &manifest)?;
        let spath = dir.join("scan.json");
        regular_file(&spath, "the scanner's report")?;
        let scan_json = read_all(&spath)?;
        let scan: crate::scan::model::ScanReport =
            serde_json::from_slice(&scan_json).map_err(|e| {
                anyhow::anyhow!("{}: not a valid rcclfix scan report: {e}", spath.display())
            })?;
        // Version 2 changed only the CLI's default `--json` shape; the build's full report has
        // the same fields in versions 1 and 2 (docs/scan-json.md).
        if !(1..=crate::scan::model::SCHEMA_VERSION).contains(&scan.schema_version) {
            anyhow::bail!(
                "{}: scan schema version {} (this rcclfix reads {})",
                spath.display(),
                scan.schema_version,
                crate::scan::model::SCHEMA_VERSION
            );
        }
        let library = dir.join(&manifest.library.file);
        let meta = regular_file(
            &library,
            &format!("the library named by {}", mpath.display()),
        )?;
        if meta.len() != manifest.library.size {
            anyhow::bail!(
                "{}: library.size {} differs from the size of {} ({} bytes)",
                mpath.display(),
                manifest.library.size,
                library.display(),
                meta.len()
            );
        }
        let sha = crate::fsutil::sha256_file(&library)
            .map_err(|e| anyhow::anyhow!("{}: cannot read: {e:#}", library.display()))?;
        if sha != manifest.library.sha256 {
            anyhow::bail!(
                "{}: sha256 {sha} differs from {} ({})\nhelp: the library changed after the build; rebuild, or re-run the step that rewrote it",
                library.display(),
                mpath.display(),
                manifest.library.sha256
            );
        }
        for t in &manifest.targets {
            match manifest.gate.get(t).map(String::as_str) {
                Some("clean") => {}
                Some(v) => anyhow::bail!(
                    "{}: the scan gate says {v:?} for {t}; refusing to package a library that may declare hidden_hostcall_buffer",
                    mpath.display()
                ),
                None => anyhow::bail!("{}: no scan gate verdict for {t}", mpath.display()),
            }
        }
        Ok(BuildFolder {
            dir: dir.to_owned(),
            manifest,
            manifest_json,
            scan_json,
            library,
        })
    }
}

/// `s` with every control character (C0, DEL, C1) written as a `\u{..}` escape, for strings read
/// from the files being packaged (symbol names, SONAMEs, `DT_NEEDED` entries, manifest keys) that
/// go to the terminal.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// What a non-regular file is, for messages: `a folder`, `a FIFO (named pipe)`, ….
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Check, without opening it (a FIFO would block), that `path` (following symbolic links) is a
/// regular file; `what` says what it should be. Returns its metadata.
///
/// Errors (one line): `<path>: missing (<what>)`, `<path>: is a folder, not a file (<what>)`, ….
pub fn regular_file(path: &Path, what: &str) -> anyhow::Result<std::fs::Metadata> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(m),
        Ok(m) => anyhow::bail!(
            "{}: is {}, not a file ({what})",
            path.display(),
            kind_of(&m)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                anyhow::bail!("{}: a symbolic link to nothing ({what})", path.display())
            }
            anyhow::bail!("{}: missing ({what})", path.display())
        }
        Err(e) => anyhow::bail!("{}: cannot read: {e} ({what})", path.display()),
    }
}

/// The most `manifest.json` or `scan.json` may hold. A build writes a few KiB (a scan report
/// of every RCCL kernel stays far below a MiB); the cap keeps a hostile build folder from making
/// `package` read gigabytes into memory. It is the `--log` cap of `doctor`.
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// Read a small file (at most [`MAX_JSON_BYTES`]); the error is one line naming it.
fn read_all(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
    let mut v = Vec::new();
    f.take(MAX_JSON_BYTES + 1)
        .read_to_end(&mut v)
        .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
    if v.len() as u64 > MAX_JSON_BYTES {
        anyhow::bail!(
            "{}: larger than {} MiB, which no rcclfix build writes (a build's manifest.json and scan.json are a few KiB)",
            path.display(),
            MAX_JSON_BYTES >> 20
        );
    }
    Ok(v)
}

/// Read the build folder, run the gate, write the packages. Returns the paths written, in format
/// order. Errors: [`BuildFolder::read`]'s; [`export_gate::GateError`] when the gate fails (nothing is
/// written); a package that cannot be assembled (nothing is written either).
pub fn package(build_dir: &Path, opts: &PackageOptions) -> anyhow::Result<Vec<PathBuf>> {
    let mut formats = opts.formats.clone();
    formats.sort();
    formats.dedup();
    if formats.is_empty() {
        anyhow::bail!("no package format requested\nhelp: --format deb,whl");
    }
    let build = BuildFolder::read(build_dir)?;
    let info = elf::ElfInfo::read(&build.library)?;
    if info.soname.as_deref() != Some(build.manifest.library.soname.as_str()) {
        anyhow::bail!(
            "{}: library.soname {:?} differs from the DT_SONAME of {} ({})",
            build.dir.join("manifest.json").display(),
            build.manifest.library.soname,
            build.library.display(),
            info.soname.as_deref().unwrap_or("none")
        );
    }

    crate::ui::status(
        "Checking",
        format!("exports of {}", build.library.display()),
    );
    let report = export_gate::check(&build.library, &opts.gate)?;
    for n in &report.notes {
        crate::ui::note(n);
    }
    if !report.needed_added.is_empty() || !report.needed_removed.is_empty() {
        crate::ui::warn(printable(&format!(
            "DT_NEEDED differs from the stock library: added [{}], removed [{}]",
            report.needed_added.join(", "),
            report.needed_removed.join(", ")
        )));
    }
    if !report.passed() {
        return Err(export_gate::GateError::error(
            build.library.display().to_string(),
            report.failures().iter().map(|l| printable(l)).collect(),
        ));
    }
    crate::ui::note(format_args!(
        "export gate passed: SONAME {}, {} nccl/rccl exports",
        export_gate::RCCL_SONAME,
        report.nccl_exports
    ));

    let mtime = source_date_epoch()?;
    if opts.dbgsym && !formats.contains(&Format::Deb) {
        anyhow::bail!("--dbgsym needs the deb format (--format deb or deb,whl)");
    }
    // Every package is described (and every value checked) before anything is written.
    enum Job {
        Deb(deb::DebSpec),
        Dbgsym(deb::DebSpec, strip::Rewritten, String),
        Whl(wheel::WheelSpec),
    }
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for f in &formats {
        match f {
            Format::Deb => {
                let map = strip::map_file(&build.library)?;
                let stripped = strip::strip(map.clone()).map_err(|e| {
                    anyhow::anyhow!(
                        "{}: cannot strip the debug information: {e:#}",
                        build.library.display()
                    )
                })?;
                let spec = deb_spec(&build, &info, opts, mtime, stripped)?;
                if opts.dbgsym {
                    let (debug, id) = dbgsym_parts(&build.library, &map)?;
                    let name = format!(
                        "{}_{}_{}.deb",
                        deb::dbgsym_name(&spec.package),
                        spec.version,
                        spec.arch
                    );
                    jobs.push((name, Job::Dbgsym(spec.clone(), debug, id)));
                }
                jobs.insert(0, (spec.file_name(), Job::Deb(spec)));
            }
            Format::Whl => {
                let spec = wheel_spec(&build, &info, opts, mtime)?;
                jobs.push((spec.file_name(), Job::Whl(spec)));
            }
        }
    }
    for (name, _) in &jobs {
        output_name(name)?;
    }
    if let Ok(m) = std::fs::metadata(&opts.out_dir) {
        if !m.is_dir() {
            anyhow::bail!(
                "{}: is {}, not a folder (--out-dir)",
                opts.out_dir.display(),
                kind_of(&m)
            );
        }
    }

    // A folder created here is removed again when the run fails or is interrupted before writing.
    let out_dir = crate::fsutil::OutDir::create(&opts.out_dir)?;
    let mut staged: Vec<(crate::fsutil::TempFile, PathBuf)> = Vec::new();
    for (name, job) in jobs {
        let dest = opts.out_dir.join(&name);
        let mut tmp = crate::fsutil::TempFile::new_in(out_dir.path())?;
        crate::ui::status("Packaging", &name);
        let written: anyhow::Result<()> = (|| {
            match &job {
                Job::Deb(spec) => {
                    let mut w = std::io::BufWriter::new(tmp.as_file_mut());
                    deb::write_deb(spec, &mut w)?;
                    std::io::Write::flush(&mut w)?;
                }
                Job::Dbgsym(spec, debug, id) => {
                    let mut w = std::io::BufWriter::new(tmp.as_file_mut());
                    deb::write_dbgsym(spec, debug, id, &mut w)?;
                    std::io::Write::flush(&mut w)?;
                }
                Job::Whl(spec) => {
                    let w = std::io::BufWriter::new(tmp.as_file_mut());
                    let mut w = wheel::write_wheel(spec, w)?;
                    std::io::Write::flush(&mut w)?;
                }
            }
            Ok(())
        })();
        written.map_err(|e| write_error(&dest, &e))?;
        staged.push((tmp, dest));
    }
    let mut written = Vec::new();
    for (tmp, dest) in staged {
        tmp.persist(&dest, 0o644)
            .map_err(|e| write_error(&dest, &e))?;
        written.push(dest);
    }
    drop(out_dir);
    Ok(written)
}

/// The detached debug file of the library and its build ID, for `--dbgsym`.
fn dbgsym_parts(
    library: &Path,
    map: &std::sync::Arc<memmap2::Mmap>,
) -> anyhow::Result<(strip::Rewritten, String)> {
    let fail = |e: anyhow::Error| {
        anyhow::anyhow!(
            "{}: cannot extract the debug information: {e:#}",
            library.display()
        )
    };
    if !strip::has_debug_info(map).map_err(fail)? {
        anyhow::bail!(
            "{}: has no debug information or symbol table, so there is no -dbgsym package to write (--dbgsym)",
            library.display()
        );
    }
    let Some(id) = strip::build_id(map).map_err(fail)? else {
        anyhow::bail!(
            "{}: has no build ID (.note.gnu.build-id), which a -dbgsym package is found by (--dbgsym; link with -Wl,--build-id)",
            library.display()
        );
    };
    let debug = strip::only_keep_debug(map.clone()).map_err(fail)?;
    Ok((debug, id))
}

/// Check that a package file name is one plain file name, so the package lands in the output
/// folder and nowhere else. The names are built from checked values ([`fields`]); this is the
/// last line of defence. Errors (one line): the name and what is wrong with it.
fn output_name(name: &str) -> anyhow::Result<()> {
    let mut comps = Path::new(name).components();
    let plain = matches!(comps.next(), Some(std::path::Component::Normal(_)))
        && comps.next().is_none()
        && !name.contains('/');
    if !plain {
        anyhow::bail!("package file name {name:?} is not a plain file name");
    }
    if name.len() > fields::NAME_MAX {
        anyhow::bail!(
            "package file name {name:?} is longer than {} bytes (too many targets?)",
            fields::NAME_MAX
        );
    }
    Ok(())
}

/// One line for a failed write: the destination and the underlying I/O error (e.g. `No space
/// left on device`), without the writer's internals.
fn write_error(dest: &Path, e: &anyhow::Error) -> anyhow::Error {
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>());
    match io {
        Some(io) => anyhow::anyhow!("cannot write {}: {io}", dest.display()),
        None => anyhow::anyhow!("cannot write {}: {e:#}", dest.display()),
    }
}

/// Parse `manifest.json` (bytes `json`, read from `path`): its `schema_version` must be
/// [`crate::manifest::MANIFEST_SCHEMA_VERSION`] (checked before the typed parse, so a newer
/// manifest is named as such rather than as malformed). Fields this rcclfix does not know are
/// accepted with one warning naming them (a newer rcclfix of the same schema version may add
/// optional fields); they are still embedded verbatim in the packages.
///
/// Errors: not JSON, an unsupported `schema_version`, or a shape that does not parse as
/// [`Manifest`]; each names the file.
pub fn read_manifest(path: &Path, json: &[u8]) -> anyhow::Result<Manifest> {
    let invalid = |e: serde_json::Error| {
        anyhow::anyhow!("{}: not a valid rcclfix manifest: {e}", path.display())
    };
    let v: serde_json::Value = serde_json::from_slice(json).map_err(invalid)?;
    let want = crate::manifest::MANIFEST_SCHEMA_VERSION;
    match v.get("schema_version").and_then(serde_json::Value::as_u64) {
        Some(n) if n == u64::from(want) => {}
        Some(n) => anyhow::bail!(
            "{}: manifest schema version {n} is not supported (this rcclfix reads {want})",
            path.display()
        ),
        None => anyhow::bail!(
            "{}: no schema_version (this rcclfix reads manifest schema version {want})",
            path.display()
        ),
    }
    let m: Manifest = serde_json::from_value(v.clone()).map_err(invalid)?;
    let known = serde_json::to_value(&m)?;
    let mut unknown = Vec::new();
    unknown_fields(&v, &known, "", &mut unknown);
    if !unknown.is_empty() {
        crate::ui::warn(format!(
            "{}: ignoring field(s) this rcclfix does not know: {}",
            path.display(),
            printable(&unknown.join(", "))
        ));
    }
    Ok(m)
}

/// Keys of `got` (recursively through objects) that `known` lacks, as dotted paths.
fn unknown_fields(
    got: &serde_json::Value,
    known: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    if let (Some(g), Some(k)) = (got.as_object(), known.as_object()) {
        for (key, gv) in g {
            let path = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}.{key}")
            };
            match k.get(key) {
                Some(kv) => unknown_fields(gv, kv, &path, out),
                None => out.push(path),
            }
        }
    }
}

/// `SOURCE_DATE_EPOCH` (reproducible-builds.org), else a fixed date (2024-01-01T00:00:00Z), so
/// packages are reproducible by default. Errors: the variable is set but not a non-negative integer.
pub fn source_date_epoch() -> anyhow::Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(s) => s
            .trim()
            .parse()
            .with_context(|| format!("SOURCE_DATE_EPOCH={s:?} is not a number of seconds")),
        Err(_) => Ok(1_704_067_200),
    }
}

/// The package version: `<rccl version>+rcclfix<N>` (valid both as a Debian native version and as
/// a PEP 440 version with a local label).
pub fn package_version(m: &Manifest, revision: u32) -> String {
    format!("{}+rcclfix{revision}", m.rccl_version)
}

/// `[gfx1100, gfx1101]` → `gfx1100-gfx1101`, lowercased, for package names.
fn targets_slug(m: &Manifest) -> String {
    m.targets
        .iter()
        .map(|t| t.to_ascii_lowercase().replace(':', "."))
        .collect::<Vec<_>>()
        .join("-")
}

fn flavor(m: &Manifest, opts: &PackageOptions) -> Flavor {
    opts.flavor.unwrap_or(if m.toolchain.starts_with("debian") {
        Flavor::Debian
    } else {
        Flavor::Rocm
    })
}

/// `6.4.0` → 60400 (ROCm's integer release code, used in package versions and file names).
fn rocm_int(release: &str) -> anyhow::Result<u32> {
    let mut it = release.split('.').map(|p| p.parse::<u32>());
    match (it.next(), it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b)), c) => {
            Ok(a * 10_000 + b * 100 + c.and_then(|c| c.ok()).unwrap_or(0))
        }
        _ => anyhow::bail!("rocm_release {release:?} is not X.Y[.Z]"),
    }
}

/// The default `Depends:` for a flavor: the stock package, pinned to the manifest's ROCm release.
pub fn default_depends(m: &Manifest, flavor: Flavor) -> anyhow::Result<String> {
    let code = rocm_int(&m.rocm_release).with_context(|| "reading manifest.json")?;
    Ok(match flavor {
        // Debian's librccl1 is versioned by the ROCm release (5.4.3-3+b1 is ROCm 5.4.3).
        Flavor::Debian => {
            let (a, b, c) = (code / 10_000, code / 100 % 100, code % 100);
            format!(
                "librccl1 (>= {a}.{b}.{c}~), librccl1 (<< {a}.{b}.{}~)",
                c + 1
            )
        }
        // ROCm's rccl is `<rccl>.<ROCm int>-<build>~<distro>` (e.g. `2.27.7.70201-…` in AMD's
        // ROCm 7.2.1 apt repository).
        Flavor::Rocm => format!(
            "rccl (>= {v}.{code}), rccl (<< {v}.{})",
            code + 1,
            v = m.rccl_version
        ),
    })
}

/// The default installed path of the stock library for a flavor.
pub fn default_stock_path(
    m: &Manifest,
    flavor: Flavor,
    machine: elf::Machine,
) -> anyhow::Result<String> {
    Ok(match flavor {
        Flavor::Debian => format!("/usr/lib/{}-linux-gnu/librccl.so.1.0", machine.uname()),
        Flavor::Rocm => format!(
            "/opt/rocm-{}/lib/librccl.so.1.0.{}",
            m.rocm_release,
            rocm_int(&m.rocm_release)?
        ),
    })
}

fn deb_spec(
    b: &BuildFolder,
    info: &elf::ElfInfo,
    opts: &PackageOptions,
    mtime: u64,
    library: strip::Rewritten,
) -> anyhow::Result<deb::DebSpec> {
    let m = &b.manifest;
    let fl = flavor(m, opts);
    let depends = match &opts.depends {
        Some(d) => {
            fields::depends(d).map_err(|e| anyhow::anyhow!("--depends {d:?} {e} (Policy §7.1)"))?;
            d.clone()
        }
        None => default_depends(m, fl)?,
    };
    let stock_path = match &opts.stock_path {
        Some(p) => {
            fields::stock_path(p).map_err(|e| anyhow::anyhow!("--stock-path {p:?} {e}"))?;
            p.clone()
        }
        None => default_stock_path(m, fl, info.machine)?,
    };
    let maintainer = maintainer(opts.maintainer.as_deref())?;
    let sha = sha256_hex(library.reader())?;
    let stripped = if library.changed_sections.is_empty() {
        format!(
            "The library is the build's own file (sha256 {}).",
            m.library.sha256
        )
    } else {
        format!(
            "The library is the build's file (sha256 {} in manifest.json) with its debug \
             information and static symbol table removed, as dh_strip does (sha256 {sha}); \
             every allocated section, .hip_fatbin included, is byte for byte the build's.",
            m.library.sha256
        )
    };
    // The stock package is the first one named in Depends (before libc6 is added below).
    let stock_pkg = depends
        .split([' ', ',', '('])
        .next()
        .unwrap_or("")
        .to_owned();
    let depends = match info.glibc {
        // The library's own libc requirement (what dpkg-shlibdeps would add); the rest of its
        // NEEDED libraries come with the stock package it depends on.
        Some((a, b)) if opts.depends.is_none() && !depends.contains("libc6") => {
            format!("libc6 (>= {a}.{b}), {depends}")
        }
        _ => depends,
    };
    let targets = m.targets.join(", ");
    let patched = if m.patched.is_some() {
        " and patched"
    } else {
        ""
    };
    let spec = deb::DebSpec {
        package: format!("rcclfix-rccl-{}", targets_slug(m)),
        version: package_version(m, opts.revision),
        arch: info.machine.debian().to_owned(),
        maintainer,
        depends,
        synopsis: format!("RCCL {} without hidden_hostcall_buffer ({})", m.rccl_version, targets),
        long_description: vec![
            format!(
                "Overlay for the stock {stock_pkg} package: RCCL {} (ROCm {}) rebuilt{patched} by rcclfix so \
                 that no GPU kernel for {targets} declares hidden_hostcall_buffer, the cause of \
                 hipErrorIllegalState on multi-GPU systems without PCIe AtomicOps.",
                m.rccl_version, m.rocm_release
            ),
            format!(
                "The stock library {stock_path} is diverted into {}/ by dpkg-divert while this \
                 package is installed, and put back when it is removed.",
                split_parent(&stock_path)
            ),
            format!(
                "Recipe {}, commit {}, toolchain {}. The build manifest and the scanner's report \
                 are in /usr/share/doc/rcclfix-rccl-{}/.",
                m.recipe,
                m.commit,
                m.toolchain,
                targets_slug(m)
            ),
            stripped,
        ],
        stock_path,
        library,
        manifest_json: b.manifest_json.clone(),
        scan_json: b.scan_json.clone(),
        changelog: vec![format!(
            "RCCL {} from {} at {}, built by rcclfix {} (recipe {}) for {targets}{}; \
             no kernel declares hidden_hostcall_buffer.",
            m.rccl_version,
            m.rev_label(),
            short(&m.commit),
            m.rcclfix_version,
            m.recipe,
            if m.patched.is_some() { ", patched after the link" } else { "" }
        )],
        mtime,
    };
    Ok(spec)
}

/// The `Maintainer:` field when neither `--maintainer` nor `DEBEMAIL` is given: fixed, so a
/// package never carries the host or user name, and lintian-clean (a two-label mail host, no
/// `root`; the `.invalid` top-level domain never delivers mail, RFC 2606).
pub const DEFAULT_MAINTAINER: &str = "rcclfix local build <noreply@rcclfix.invalid>";

/// `Maintainer:`: the option (`Name <address>`, or a bare address named `$DEBFULLNAME`, else
/// "rcclfix local build"), else [`DEFAULT_MAINTAINER`]. Errors (one line): the value is not one
/// line of `Full Name <local@domain>` ([`fields::maintainer`]).
fn maintainer(opt: Option<&str>) -> anyhow::Result<String> {
    let value = match opt {
        None => return Ok(DEFAULT_MAINTAINER.to_owned()),
        Some(s) if s.contains('<') => s.trim().to_owned(),
        Some(s) => {
            let name =
                std::env::var("DEBFULLNAME").unwrap_or_else(|_| "rcclfix local build".into());
            fields::single_line(&name).map_err(|e| anyhow::anyhow!("DEBFULLNAME {name:?} {e}"))?;
            format!("{} <{}>", name.trim(), s.trim())
        }
    };
    fields::maintainer(&value).map_err(|e| {
        anyhow::anyhow!(
            "--maintainer (or DEBEMAIL/DEBFULLNAME) {value:?} {e}; give \"Full Name <you@example.org>\""
        )
    })?;
    if value.contains("<root@") || value.starts_with("root <") {
        crate::ui::warn(format!(
            "Maintainer: {value:?} names root, which lintian reports as root-in-contact"
        ));
    }
    Ok(value)
}

/// sha256 of what `r` yields, lowercase hex.
fn sha256_hex(mut r: impl std::io::Read) -> anyhow::Result<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    std::io::copy(&mut r, &mut h).context("cannot read the library")?;
    Ok(hex::encode(h.finalize()))
}

fn split_parent(p: &str) -> String {
    match p.rfind('/') {
        Some(i) => format!("{}/{}", &p[..i], deb::ASIDE_DIR),
        None => deb::ASIDE_DIR.to_owned(),
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

fn wheel_spec(
    b: &BuildFolder,
    info: &elf::ElfInfo,
    opts: &PackageOptions,
    mtime: u64,
) -> anyhow::Result<wheel::WheelSpec> {
    let m = &b.manifest;
    let version = package_version(m, opts.revision);
    fields::pep440_version(&version)
        .map_err(|e| anyhow::anyhow!("wheel version {version:?} {e}"))?;
    let targets = m.targets.join(", ");
    let patched = if m.patched.is_some() {
        " (patched after the link)"
    } else {
        ""
    };
    let spec = wheel::WheelSpec {
        distribution: wheel::escape_name(&format!("rcclfix-rccl-{}", targets_slug(m))),
        version,
        platform: wheel::platform_tag(info.glibc, info.machine.uname()),
        summary: format!("RCCL {} without hidden_hostcall_buffer for {targets}", m.rccl_version),
        description: format!(
            "# rcclfix RCCL overlay\n\n\
             RCCL {ver} (ROCm {rocm}) rebuilt by rcclfix{patched} so that no GPU kernel for {targets} \
             declares `hidden_hostcall_buffer`, the cause of `hipErrorIllegalState` on multi-GPU \
             systems without PCIe AtomicOps.\n\n\
             A start-up hook (`{pkg}.pth`) loads `{pkg}/lib/librccl.so.1` with `RTLD_GLOBAL` before \
             PyTorch, so torch's `librccl.so.1` resolves to this copy, and sets `VLLM_NCCL_SO_PATH` \
             unless it is already set. Set `{dis}=1` to turn the hook off; `pip uninstall` removes it.\n\n\
             Provenance: recipe `{recipe}`, `{tag}` at `{commit}`, toolchain `{tc}`; \
             `{pkg}/manifest.json` and `{pkg}/scan.json` hold the build manifest and the scanner's report.",
            ver = m.rccl_version,
            rocm = m.rocm_release,
            pkg = wheel::IMPORT_PACKAGE,
            dis = wheel::DISABLE_ENV,
            recipe = m.recipe,
            tag = m.rev_label(),
            commit = m.commit,
            tc = m.toolchain,
        ),
        library: b.library.clone(),
        manifest_json: b.manifest_json.clone(),
        scan_json: b.scan_json.clone(),
        mtime,
    };
    wheel::validate(&spec)?;
    Ok(spec)
}
