//! `rcclfix package`: drop-in .deb and .whl overlays with export checks and provenance.
//!
//! Flow: read the build folder (`manifest.json`, `scan.json`, the library; [`BuildFolder`]) →
//! a private copy of the library, checked against the manifest's sha256 and size, and rcclfix's
//! own scan of it ([`shipped`]: only `clean` for every requested target passes, and a manifest or
//! `scan.json` that disagrees is refused) → export/ABI gate ([`export_gate::check`]) → the `.deb`'s
//! stripped library, scanned again → assemble every requested package in a temporary file in the
//! output folder ([`deb::write_deb`], [`wheel::write_wheel`]) → rename them all into place. A failed
//! gate or a failed package writes nothing.

pub mod deb;
pub mod depends;
pub mod elf;
pub mod export_gate;
pub mod fields;
pub mod folder;
pub mod library;
pub mod shipped;
pub mod shlibs;
pub mod spec;
pub mod stock;
pub mod stock_deb;
pub mod strip;
pub mod tool_wheel;
pub mod wheel;
pub mod wheel_writer;

pub use folder::{read_manifest, regular_file, BuildFolder, MAX_JSON_BYTES};
use spec::{deb_spec, flavor, targets_slug, wheel_spec};
pub use spec::{
    default_depends, default_stock_path, package_version, ASSERTS_PROVENANCE, DEFAULT_MAINTAINER,
};

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
    /// Skip the automatic stock library of the export gate (when `gate.stock` is `None`).
    pub no_stock: bool,
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
            no_stock: false,
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
    if opts.dbgsym && !formats.contains(&Format::Deb) {
        anyhow::bail!("--dbgsym needs the deb format (--format deb or deb,whl)");
    }
    let build = BuildFolder::read(build_dir)?;
    if let Ok(m) = std::fs::metadata(&opts.out_dir) {
        if !m.is_dir() {
            anyhow::bail!(
                "{}: is {}, not a folder (--out-dir)",
                opts.out_dir.display(),
                folder::kind_of(&m)
            );
        }
    }

    // A folder created here (and the private copy below, a hidden folder in it) is removed again when the run fails or is interrupted before writing.
    let out_dir = crate::fsutil::OutDir::create(&opts.out_dir)?;
    // Every package is made from this copy, so what is checked below is what ships.
    let snap = shipped::Snapshot::take(&build, out_dir.path())?;
    let info = elf::ElfInfo::read(&snap.path)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", build.library.display()))?;
    if info.soname.as_deref() != Some(build.manifest.library.soname.as_str()) {
        anyhow::bail!(
            "{}: library.soname {:?} differs from the DT_SONAME of {} ({})",
            build.dir.join("manifest.json").display(),
            build.manifest.library.soname,
            build.library.display(),
            info.soname.as_deref().unwrap_or("none")
        );
    }
    // Names are checked before the (long) scan: a manifest whose targets make no valid file
    // name is refused at once.
    let version = package_version(&build.manifest, opts.revision);
    let deb_pkg = format!("rcclfix-rccl-{}", targets_slug(&build.manifest));
    let deb_name = format!(
        "{}_{version}_{}.deb",
        if opts.dbgsym {
            deb::dbgsym_name(&deb_pkg)
        } else {
            deb_pkg
        },
        info.machine.debian()
    );
    let whl_name = format!(
        "{}-{version}-py3-none-{}.whl",
        wheel::escape_name(&format!("rcclfix-rccl-{}", targets_slug(&build.manifest))),
        wheel::platform_tag(info.glibc, info.machine.uname())
    );
    for name in [deb_name, whl_name] {
        output_name(&name)?;
    }
    crate::ui::status(
        "Scanning",
        format!("{} (what the packages ship)", build.library.display()),
    );
    let lib_name = build.manifest.library.file.clone();
    let scan = shipped::scan_shipped(&build, &snap.path, &lib_name, "the library")?;
    crate::ui::note(format_args!(
        "scan gate passed: {}, none declares hidden_hostcall_buffer",
        scan.counts()
    ));

    crate::ui::status(
        "Checking",
        format!("exports of {}", build.library.display()),
    );
    let (gate, _stock_copy) = gate_inputs(&build.manifest, &info, opts, out_dir.path())?;
    let mut report = export_gate::check(&snap.path, &gate)?;
    // A stand-alone .deb is built for another HIP runtime than the distribution's librccl1 and
    // does not depend on it: programs built against that package cannot run on this library
    // either way, so the comparison with the stock library it found by itself is reported, not
    // enforced. A stock library given with --stock is always enforced.
    // Computed once: the gate needs it for a stock library it found itself, the .deb always.
    let mut deb_deps: Option<depends::DebDepends> = None;
    if let Some(name) = gate.stock_name.as_deref() {
        let deps = deb_deps.insert(deb_depends(&build.manifest, &info, opts)?);
        if let Some(why) = deps.standalone.clone() {
            let (advisory, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut report.missing)
                .into_iter()
                .partition(|m| m.required_by == name);
            report.missing = kept;
            if !advisory.is_empty() {
                crate::ui::warn(printable(&format!(
                    "the .deb is stand-alone ({why}); {} exports of the {name} are missing and not enforced: {}",
                    advisory.len(),
                    advisory.iter().map(|m| m.symbol.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
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
                let map = snap.map.clone();
                let stripped = strip::strip(map.clone()).map_err(|e| {
                    anyhow::anyhow!(
                        "{}: cannot strip the debug information: {e:#}",
                        build.library.display()
                    )
                })?;
                // The .deb's library is the stripped file: write it, scan exactly those bytes.
                let (spath, smap) = snap.write_beside("stripped", &stripped)?;
                let deb_scan = shipped::scan_shipped(
                    &build,
                    &spath,
                    &lib_name,
                    "the .deb's stripped library",
                )?;
                if deb_scan.kernels != scan.kernels {
                    anyhow::bail!(
                        "{}: stripping changed the device code ({} before, {} after)",
                        build.library.display(),
                        scan.counts(),
                        deb_scan.counts()
                    );
                }
                let shipped_lib = strip::Rewritten::whole(smap, stripped.changed_sections);
                let deps = match deb_deps.take() {
                    Some(d) => d,
                    None => deb_depends(&build.manifest, &info, opts)?,
                };
                let spec = deb_spec(&build, &info, opts, mtime, shipped_lib, &deb_scan, deps)?;
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
                let spec = wheel_spec(&build, &info, opts, mtime, &snap.path, &scan)?;
                jobs.push((spec.file_name(), Job::Whl(spec)));
            }
        }
    }
    for (name, _) in &jobs {
        output_name(name)?;
    }
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
    drop(snap);
    drop(out_dir);
    Ok(written)
}

/// The `.deb`'s `Depends:` ([`depends`]): `--depends` as given, the debian flavor's from the
/// toolchain's root, the rocm flavor's from the release.
///
/// Errors: a `--depends` that is no relationship field (Policy §7.1); see [`depends::debian`].
fn deb_depends(
    m: &Manifest,
    info: &elf::ElfInfo,
    opts: &PackageOptions,
) -> anyhow::Result<depends::DebDepends> {
    let fl = flavor(m, opts);
    Ok(match (&opts.depends, fl) {
        (Some(d), _) => {
            fields::depends(d).map_err(|e| anyhow::anyhow!("--depends {d:?} {e} (Policy §7.1)"))?;
            depends::DebDepends::given(d, depends::stock_package(fl))
        }
        (None, Flavor::Debian) => depends::debian(m, info)?,
        (None, Flavor::Rocm) => depends::rocm(default_depends(m, fl)?, info),
    })
}

/// The export gate's inputs: `opts.gate`, with the stock library filled in when none was given.
/// For the debian flavor that is the toolchain distribution's `librccl1` ([`stock::read`],
/// [`stock_deb::fetch`]), its library extracted into a private file in `tmp_dir` (returned, so it
/// lives as long as the gate needs it); for the rocm flavor, and with `--no-stock`, no stock
/// library is compared and a warning says so.
///
/// Errors: the toolchain's apt lists name no `librccl1`, or the download or the extraction fails
/// (one line each, with a `help:` naming `--stock` and `--no-stock`).
fn gate_inputs(
    m: &Manifest,
    info: &elf::ElfInfo,
    opts: &PackageOptions,
    tmp_dir: &Path,
) -> anyhow::Result<(export_gate::GateInputs, Option<crate::fsutil::TempFile>)> {
    let mut gate = opts.gate.clone();
    if gate.stock.is_some() {
        return Ok((gate, None));
    }
    let fl = flavor(m, opts);
    if opts.no_stock || fl == Flavor::Rocm {
        crate::ui::warn(if opts.no_stock {
            "the export gate compares with no stock library (--no-stock)".to_owned()
        } else {
            format!(
                "the export gate compares with no stock library (rocm flavor): give --stock /opt/rocm-{}/lib/librccl.so.1 of the release the overlay replaces",
                printable(&m.rocm_release)
            )
        });
        return Ok((gate, None));
    }
    let arch = info.machine.debian();
    let rootfs = stock::toolchain_rootfs(&m.toolchain)?;
    let pkg = stock::read(&rootfs, "librccl1", arch).map_err(|e| {
        anyhow::anyhow!(
            "{e:#}\nhelp: the export gate compares with the librccl1 of toolchain {}'s distribution; build the toolchain, or give --stock FILE or --no-stock",
            m.toolchain
        )
    })?;
    let stock_path = match &opts.stock_path {
        Some(p) => p.clone(),
        None => default_stock_path(m, fl, info.machine)?,
    };
    let deb = stock_deb::fetch(&m.toolchain, &pkg, arch)?;
    crate::ui::status("Extracting", format!("{stock_path} from {}", deb.display()));
    let mut tmp = crate::fsutil::TempFile::new_in(tmp_dir)?;
    stock_deb::extract(&deb, &pkg, &stock_path, tmp.as_file_mut())?;
    gate.stock = Some(tmp.path().to_path_buf());
    gate.stock_name = Some(format!(
        "stock {} {} ({stock_path})",
        pkg.package, pkg.version
    ));
    Ok((gate, Some(tmp)))
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
