//! `rcclfix package`: drop-in .deb and .whl overlays from a build folder.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::package::{export_gate, Flavor, Format, PackageOptions};
use crate::ui::Ui;

/// Arguments of `rcclfix package`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build folder (`out/rccl-<version>-<targets>/`) holding the library, manifest.json, scan.json.
    #[arg(long, value_name = "DIR", required_unless_present = "library")]
    pub from: Option<PathBuf>,
    /// Package this library instead of a build folder (for example a patched copy of your own
    /// RCCL); only `--format whl` so far. It must scan clean for every target it carries.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "from",
        help_heading = "Any library"
    )]
    pub library: Option<PathBuf>,
    /// With --library: the file it was made from; its path, sha256 and owner (dpkg or pip
    /// package and version) go into the wheel's provenance.
    #[arg(
        long,
        value_name = "FILE",
        requires = "library",
        help_heading = "Any library"
    )]
    pub original: Option<PathBuf>,
    /// With --library: the patch record (`rcclfix patch --record FILE`) to put into the
    /// provenance.
    #[arg(
        long,
        value_name = "FILE",
        requires = "library",
        help_heading = "Any library"
    )]
    pub patch_record: Option<PathBuf>,
    /// Package formats to write (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "deb,whl")]
    pub format: Vec<Format>,
    /// Folder for the packages [default: the folder holding the build folder, e.g. `out/`, so a
    /// rebuild, which replaces `out/rccl-<version>-<targets>/`, does not take the packages with it].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// The stock library the overlay replaces: every nccl*/rccl* symbol it exports must be exported
    /// [default for the debian flavor: the library of the toolchain distribution's librccl1,
    /// downloaded once with apt inside the toolchain into $RCCLFIX_HOME/stock/].
    #[arg(long, value_name = "PATH", help_heading = "Export gate")]
    pub stock: Option<PathBuf>,
    /// Package without comparing exports with a stock library (a warning says so).
    #[arg(long, conflicts_with = "stock", help_heading = "Export gate")]
    pub no_stock: bool,
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
    pub consumer_symbols: Vec<crate::package::export_gate::ConsumerSymbols>,
    /// rcclfix revision N of the version `<rccl version>+rcclfix<N>`.
    #[arg(long, default_value_t = 1, help_heading = "Package metadata")]
    pub revision: u32,
    /// Which stock package the .deb overlays [default: debian for debian-* toolchains, else rocm].
    #[arg(long, help_heading = "Package metadata")]
    pub flavor: Option<Flavor>,
    /// The .deb's Depends: line [default: for a Debian toolchain the packages of the library's
    /// NEEDED libraries in it, plus its distribution's librccl1 unless that is built for another
    /// HIP runtime (then the .deb is stand-alone); for the rocm flavor AMD's rccl of the release].
    #[arg(long, value_name = "DEPENDS", help_heading = "Package metadata")]
    pub depends: Option<String>,
    /// Installed path of the stock library file the .deb takes over [default: from --flavor].
    #[arg(long, value_name = "PATH", help_heading = "Package metadata")]
    pub stock_path: Option<String>,
    /// The .deb's Maintainer: field, `Full Name <address>` or a bare address (then the name is
    /// $DEBFULLNAME) [default: `rcclfix local build <noreply@rcclfix.invalid>`].
    #[arg(long, env = "DEBEMAIL", help_heading = "Package metadata")]
    pub maintainer: Option<String>,
    /// Also write `<package>-dbgsym_<version>_<arch>.deb` with the debug information that is
    /// stripped from the .deb's library (needs a library with a build ID).
    #[arg(long, help_heading = "Package metadata")]
    pub dbgsym: bool,
}

impl Args {
    /// The domain's options (`--out-dir` defaults to the folder holding the build folder,
    /// [`crate::package::default_out_dir`]).
    pub fn options(&self) -> PackageOptions {
        PackageOptions {
            formats: self.format.clone(),
            out_dir: self.out_dir.clone().unwrap_or_else(|| {
                crate::package::default_out_dir(self.from.as_deref().unwrap_or(Path::new(".")))
            }),
            gate: export_gate::GateInputs {
                stock: self.stock.clone(),
                stock_name: None,
                consumers: self.consumer.clone(),
                consumer_symbols: self.consumer_symbols.clone(),
            },
            revision: self.revision,
            flavor: self.flavor,
            depends: self.depends.clone(),
            stock_path: self.stock_path.clone(),
            maintainer: self.maintainer.clone(),
            dbgsym: self.dbgsym,
            no_stock: self.no_stock,
        }
    }
}

/// Run the subcommand: print each package path on stdout.
///
/// Errors: see [`crate::package::package`]; a failed export gate or a library whose own scan is
/// not clean is a [`crate::CheckFailed`] (exit 1) over the [`export_gate::GateError`] or
/// [`crate::package::shipped::ScanRefused`] (one escaped line per problem).
pub fn run(a: Args, _ui: &Ui) -> anyhow::Result<ExitCode> {
    let result = match (&a.library, &a.from) {
        (Some(lib), _) => library(&a, lib).map(|p| vec![p]),
        (None, Some(from)) => crate::package::package(from, &a.options()),
        (None, None) => anyhow::bail!("give --from DIR or --library FILE"),
    };
    match result {
        Ok(paths) => {
            for p in paths {
                crate::outln!("{}", p.display())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let summary = if let Some(g) = e.downcast_ref::<export_gate::GateError>() {
                Some(format!("export gate failed for {}", g.library))
            } else {
                e.downcast_ref::<crate::package::shipped::ScanRefused>()
                    .map(|g| format!("scan gate failed for {}", g.library))
            };
            Err(match summary {
                Some(summary) => e.context(crate::CheckFailed::new(summary)),
                None => e,
            })
        }
    }
}

/// `package --library FILE`: the overlay wheel of any library, with the provenance
/// [`crate::package::library::LibraryManifest`] (the original's path, sha256 and owner, the patch
/// record). Written to `--out-dir`, default the library's folder.
///
/// Errors: a format other than whl; the library or original cannot be read; the patch record is
/// not JSON (at most 64 MiB); see [`crate::package::library::library_wheel`].
fn library(a: &Args, lib: &Path) -> anyhow::Result<PathBuf> {
    use crate::package::library::{self, LibraryManifest, LibraryWheel, Original};
    if a.format.iter().any(|f| *f != Format::Whl) {
        anyhow::bail!("--library packages only as --format whl so far (the .deb overlay of a user's library is not built yet)");
    }
    let sha = crate::fsutil::sha256_file(lib)?;
    let original = match &a.original {
        Some(o) => {
            let canon = std::fs::canonicalize(o)
                .map_err(|e| anyhow::anyhow!("--original {}: {e}", o.display()))?;
            let osha = crate::fsutil::sha256_file(&canon)?;
            let owner = crate::fix::owner::owner_of(std::slice::from_ref(o), &canon, &osha);
            Some(Original {
                path: canon,
                sha256: osha,
                owner: owner.describe(),
            })
        }
        None => None,
    };
    let patch =
        match &a.patch_record {
            Some(p) => {
                let bytes = crate::fsutil::read_capped(p, 64 << 20, "a patch record")?;
                Some(serde_json::from_slice(&bytes).map_err(|e| {
                    anyhow::anyhow!("{}: not a patch record (JSON): {e}", p.display())
                })?)
            }
            None => None,
        };
    let out_dir = match &a.out_dir {
        Some(d) => d.clone(),
        None => crate::package::default_out_dir(lib),
    };
    let w = LibraryWheel {
        distribution: "rcclfix_rccl_library".into(),
        version: format!("1+{}", &sha[..16]),
        summary: "rcclfix overlay of a library, preloaded at Python start-up".into(),
        manifest: LibraryManifest {
            schema_version: library::LIBRARY_MANIFEST_VERSION,
            kind: "library-overlay".into(),
            rcclfix_version: env!("CARGO_PKG_VERSION").into(),
            library_sha256: String::new(),
            library_size: 0,
            original,
            soname_changed_to: None,
            patch,
            unverified: crate::fix::UNVERIFIED.into(),
        },
    };
    Ok(library::library_wheel(lib, &w, &out_dir)?.0)
}
