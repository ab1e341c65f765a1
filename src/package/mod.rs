//! `rcclfix package`: drop-in .deb and .whl overlays with export checks and provenance.
//!
//! Flow: read the build folder (`manifest.json`, `scan.json`, the library; [`BuildFolder`]) →
//! export/ABI gate ([`gate::check`]) → assemble every requested package in a temporary file in the
//! output folder ([`deb::write_deb`], [`wheel::write_wheel`]) → rename them all into place. A failed
//! gate or a failed package writes nothing.

pub mod deb;
pub mod elf;
pub mod gate;
pub mod wheel;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

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

/// Arguments of `rcclfix package`.
#[derive(Debug, clap::Args)]
pub struct PackageArgs {
    /// Build folder (`out/rccl-<version>-<targets>/`) holding the library, manifest.json, scan.json.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// Package formats to write (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "deb,whl")]
    pub format: Vec<Format>,
    /// Folder for the packages [default: the folder holding the build folder, e.g. `out/`, so a
    /// rebuild, which replaces `out/rccl-<version>-<targets>/`, does not take the packages with it].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// The stock library the overlay replaces: every nccl*/rccl* symbol it exports must be exported.
    #[arg(long, value_name = "PATH", help_heading = "Export gate")]
    pub stock: Option<PathBuf>,
    /// A consumer (e.g. libtorch_hip.so): every nccl* symbol it imports must be exported.
    #[arg(long, value_name = "LIB", help_heading = "Export gate")]
    pub consumer: Vec<PathBuf>,
    /// A built-in consumer symbol list, for when the consumer is not at hand.
    #[arg(
        long,
        value_name = "SET",
        value_delimiter = ',',
        help_heading = "Export gate"
    )]
    pub consumer_symbols: Vec<gate::ConsumerSymbols>,
    /// rcclfix revision N of the version `<rccl version>+rcclfix<N>`.
    #[arg(long, default_value_t = 1, help_heading = "Package metadata")]
    pub revision: u32,
    /// Which stock package the .deb overlays [default: debian for debian-* toolchains, else rocm].
    #[arg(long, help_heading = "Package metadata")]
    pub flavor: Option<Flavor>,
    /// The .deb's Depends: line [default: the stock package of the manifest's ROCm release].
    #[arg(long, value_name = "DEPENDS", help_heading = "Package metadata")]
    pub depends: Option<String>,
    /// Installed path of the stock library file the .deb takes over [default: from --flavor].
    #[arg(long, value_name = "PATH", help_heading = "Package metadata")]
    pub stock_path: Option<String>,
    /// The .deb's Maintainer: field.
    #[arg(long, env = "DEBEMAIL", help_heading = "Package metadata")]
    pub maintainer: Option<String>,
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

impl PackageArgs {
    /// Run the subcommand: print each package path on stdout. Exit 1 when the export gate fails.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let out_dir = self
            .out_dir
            .clone()
            .unwrap_or_else(|| default_out_dir(&self.from));
        let opts = PackageOptions {
            formats: self.format.clone(),
            out_dir,
            gate: gate::GateInputs {
                stock: self.stock.clone(),
                consumers: self.consumer.clone(),
                consumer_symbols: self.consumer_symbols.clone(),
            },
            revision: self.revision,
            flavor: self.flavor,
            depends: self.depends.clone(),
            stock_path: self.stock_path.clone(),
            maintainer: self.maintainer.clone(),
        };
        match package(&self.from, &opts) {
            Ok(paths) => {
                for p in paths {
                    println!("{}", p.display());
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) if e.downcast_ref::<gate::GateError>().is_some() => {
                crate::ui::print_error(&e);
                Ok(ExitCode::from(crate::EXIT_CHECK_FAILED))
            }
            Err(e) => Err(e),
        }
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
    pub gate: gate::GateInputs,
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
        if !dir.is_dir() {
            anyhow::bail!("{}: not a folder\nhelp: --from takes a build folder, e.g. out/rccl-2.13.4-gfx1100/", dir.display());
        }
        let mpath = dir.join("manifest.json");
        if mpath.is_dir() {
            anyhow::bail!("{}: is a directory, not a manifest file", mpath.display());
        }
        if !mpath.is_file() {
            anyhow::bail!(
                "{}: missing\nhelp: --from takes the folder `rcclfix build` wrote",
                mpath.display()
            );
        }
        let manifest_json = fs_err::read(&mpath)?;
        let manifest = read_manifest(&mpath, &manifest_json)?;
        let spath = dir.join("scan.json");
        let scan_json =
            fs_err::read(&spath).context("the build folder needs the scanner's report")?;
        let scan: crate::scan::model::ScanReport = serde_json::from_slice(&scan_json)
            .with_context(|| format!("{}: not a valid rcclfix scan report", spath.display()))?;
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
        let file = &manifest.library.file;
        if file.is_empty() || file.contains('/') || file == "." || file == ".." {
            anyhow::bail!(
                "{}: library.file {file:?} must be a file name in the build folder",
                mpath.display()
            );
        }
        let library = dir.join(file);
        if !library.is_file() {
            anyhow::bail!(
                "{}: missing (named by {})",
                library.display(),
                mpath.display()
            );
        }
        let sha = crate::fsutil::sha256_file(&library)?;
        if sha != manifest.library.sha256 {
            anyhow::bail!(
                "{}: sha256 {sha} differs from {} ({})\nhelp: the library changed after the build; rebuild, or re-run the step that rewrote it",
                library.display(),
                mpath.display(),
                manifest.library.sha256
            );
        }
        if manifest.targets.is_empty() {
            anyhow::bail!("{}: no targets", mpath.display());
        }
        for t in &manifest.targets {
            match manifest.gate.get(t).map(String::as_str) {
                Some("clean") => {}
                Some(v) => anyhow::bail!(
                    "{}: the scan gate says {v} for {t}; refusing to package a library that may declare hidden_hostcall_buffer",
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

/// Read the build folder, run the gate, write the packages. Returns the paths written, in format
/// order. Errors: [`BuildFolder::read`]'s; [`gate::GateError`] when the gate fails (nothing is
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

    crate::ui::status(
        "Checking",
        format!("exports of {}", build.library.display()),
    );
    let report = gate::check(&build.library, &opts.gate)?;
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    if !report.needed_added.is_empty() || !report.needed_removed.is_empty() {
        crate::ui::warn(format!(
            "DT_NEEDED differs from the stock library: added [{}], removed [{}]",
            report.needed_added.join(", "),
            report.needed_removed.join(", ")
        ));
    }
    if !report.passed() {
        return Err(gate::GateError {
            library: build.library.display().to_string(),
            lines: report.failures(),
        }
        .into());
    }
    eprintln!(
        "note: export gate passed: SONAME {}, {} nccl/rccl exports",
        gate::RCCL_SONAME,
        report.nccl_exports
    );

    let mtime = source_date_epoch()?;
    // A folder created here is removed again when the run fails or is interrupted before writing.
    let out_dir = crate::fsutil::OutDir::create(&opts.out_dir)?;
    let mut staged: Vec<(crate::fsutil::TempFile, PathBuf)> = Vec::new();
    for f in formats {
        let mut tmp = crate::fsutil::TempFile::new_in(out_dir.path())?;
        let name = match f {
            Format::Deb => {
                let spec = deb_spec(&build, &info, opts, mtime)?;
                crate::ui::status("Packaging", spec.file_name());
                let mut w = std::io::BufWriter::new(tmp.as_file_mut());
                deb::write_deb(&spec, &mut w)?;
                std::io::Write::flush(&mut w)?;
                spec.file_name()
            }
            Format::Whl => {
                let spec = wheel_spec(&build, &info, opts, mtime);
                crate::ui::status("Packaging", spec.file_name());
                let w = std::io::BufWriter::new(tmp.as_file_mut());
                let mut w = wheel::write_wheel(&spec, w)?;
                std::io::Write::flush(&mut w)?;
                spec.file_name()
            }
        };
        staged.push((tmp, opts.out_dir.join(name)));
    }
    let mut written = Vec::new();
    for (tmp, dest) in staged {
        tmp.persist(&dest, 0o644)?;
        written.push(dest);
    }
    drop(out_dir);
    Ok(written)
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
    let invalid = || format!("{}: not a valid rcclfix manifest", path.display());
    let v: serde_json::Value = serde_json::from_slice(json).with_context(invalid)?;
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
    let m: Manifest = serde_json::from_value(v.clone()).with_context(invalid)?;
    let known = serde_json::to_value(&m)?;
    let mut unknown = Vec::new();
    unknown_fields(&v, &known, "", &mut unknown);
    if !unknown.is_empty() {
        crate::ui::warn(format!(
            "{}: ignoring field(s) this rcclfix does not know: {}",
            path.display(),
            unknown.join(", ")
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
        // ROCm's rccl is `<rccl>.<ROCm int>-<build>~<distro>` (rccl.md §1).
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
) -> anyhow::Result<deb::DebSpec> {
    let m = &b.manifest;
    let fl = flavor(m, opts);
    let depends = match &opts.depends {
        Some(d) => d.clone(),
        None => default_depends(m, fl)?,
    };
    let stock_path = match &opts.stock_path {
        Some(p) => p.clone(),
        None => default_stock_path(m, fl, info.machine)?,
    };
    let maintainer = maintainer(opts.maintainer.as_deref());
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
        ],
        stock_path,
        library: b.library.clone(),
        manifest_json: b.manifest_json.clone(),
        scan_json: b.scan_json.clone(),
        changelog: vec![format!(
            "RCCL {} from {} at {}, built by rcclfix {} (recipe {}) for {targets}{}; \
             no kernel declares hidden_hostcall_buffer.",
            m.rccl_version,
            m.tag,
            short(&m.commit),
            m.rcclfix_version,
            m.recipe,
            if m.patched.is_some() { ", patched after the link" } else { "" }
        )],
        mtime,
    };
    Ok(spec)
}

/// `Maintainer:`: the option (`Name <address>`, or a bare address), else `$DEBFULLNAME <$DEBEMAIL>`
/// as Debian's tools use them, else `<user>@<hostname>`.
fn maintainer(opt: Option<&str>) -> String {
    let name = std::env::var("DEBFULLNAME").unwrap_or_else(|_| "rcclfix user".into());
    match opt {
        Some(s) if s.contains('<') => s.to_owned(),
        Some(s) => format!("{name} <{s}>"),
        None => {
            let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
            let host = fs_err::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_default();
            let host = if host.is_empty() {
                "localhost".to_owned()
            } else {
                host
            };
            format!("{name} <{user}@{host}>")
        }
    }
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
) -> wheel::WheelSpec {
    let m = &b.manifest;
    let targets = m.targets.join(", ");
    let patched = if m.patched.is_some() {
        " (patched after the link)"
    } else {
        ""
    };
    wheel::WheelSpec {
        distribution: wheel::escape_name(&format!("rcclfix-rccl-{}", targets_slug(m))),
        version: package_version(m, opts.revision),
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
            tag = m.tag,
            commit = m.commit,
            tc = m.toolchain,
        ),
        library: b.library.clone(),
        manifest_json: b.manifest_json.clone(),
        scan_json: b.scan_json.clone(),
        mtime,
    }
}
