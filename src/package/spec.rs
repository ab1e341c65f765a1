//! What a package says, from the build folder's manifest and the scan of the bytes it ships: the
//! `.deb`'s and the wheel's specs ([`deb::DebSpec`], [`wheel::WheelSpec`]) with their names,
//! versions, `Maintainer:`, default `Depends:` and stock path, descriptions and changelog.
//! Pure but for reading the toolchain's apt lists (`default_depends`) and the library's bytes
//! (its sha256); [`super::package`] writes what these describe.

use std::path::Path;

use anyhow::Context;

use super::{
    deb, depends, elf, fields, shipped, stock, strip, wheel, BuildFolder, Flavor, PackageOptions,
};
use crate::manifest::Manifest;

/// The package version: `<rccl version>+rcclfix<N>` (valid both as a Debian native version and as
/// a PEP 440 version with a local label).
pub fn package_version(m: &Manifest, revision: u32) -> String {
    format!("{}+rcclfix{revision}", m.rccl_version)
}

/// `[gfx1100, gfx1101]` → `gfx1100-gfx1101`, lowercased, for package names.
pub(super) fn targets_slug(m: &Manifest) -> String {
    m.targets
        .iter()
        .map(|t| t.to_ascii_lowercase().replace(':', "."))
        .collect::<Vec<_>>()
        .join("-")
}

pub(super) fn flavor(m: &Manifest, opts: &PackageOptions) -> Flavor {
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

/// The default `Depends:` for a flavor: for Debian, the `librccl1` of the toolchain's own
/// distribution ([`stock::read`] on the rootfs of the toolchain the manifest names); for ROCm,
/// AMD's `rccl` of the manifest's ROCm release.
///
/// Errors: the toolchain's rootfs or its apt lists are missing, or describe no `librccl1` (the
/// message says how to build the toolchain or to give `--depends`); a `rocm_release` that is not
/// `X.Y[.Z]`.
pub fn default_depends(m: &Manifest, flavor: Flavor) -> anyhow::Result<String> {
    Ok(match flavor {
        Flavor::Debian => {
            let rootfs = stock::toolchain_rootfs(&m.toolchain)?;
            let p = stock::read(&rootfs, "librccl1", "amd64").map_err(|e| {
                anyhow::anyhow!(
                    "{e:#}\nhelp: the .deb depends on the librccl1 of toolchain {}'s distribution; build the toolchain (`rcclfix toolchain build {}`) or give --depends",
                    m.toolchain,
                    m.toolchain
                )
            })?;
            p.depends()
        }
        // ROCm's rccl is `<rccl>.<ROCm int>-<build>~<distro>` (e.g. `2.27.7.70201-…` in AMD's
        // ROCm 7.2.1 apt repository).
        Flavor::Rocm => {
            let code = rocm_int(&m.rocm_release).with_context(|| "reading manifest.json")?;
            format!(
                "rccl (>= {v}.{code}), rccl (<< {v}.{})",
                code + 1,
                v = m.rccl_version
            )
        }
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

pub(super) fn deb_spec(
    b: &BuildFolder,
    info: &elf::ElfInfo,
    opts: &PackageOptions,
    mtime: u64,
    library: strip::Rewritten,
    scan: &shipped::ShippedScan,
    deps: depends::DebDepends,
) -> anyhow::Result<deb::DebSpec> {
    let m = &b.manifest;
    let fl = flavor(m, opts);
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
    let depends::DebDepends {
        depends,
        stock_pkg,
        standalone,
        given_without_stock,
    } = deps;
    let given_note = if given_without_stock {
        format!(" Its Depends: was given with --depends and does not name {stock_pkg}.")
    } else {
        String::new()
    };
    let targets = m.targets.join(", ");
    let patched = if asserts_patched(m, scan) {
        format!(" and patched ({})", ASSERTS_PROVENANCE)
    } else if m.patched.is_some() {
        " and patched".to_owned()
    } else {
        String::new()
    };
    let spec = deb::DebSpec {
        package: format!("rcclfix-rccl-{}", targets_slug(m)),
        version: package_version(m, opts.revision),
        arch: info.machine.debian().to_owned(),
        maintainer,
        depends,
        synopsis: format!("RCCL {} without hidden_hostcall_buffer ({})", m.rccl_version, targets),
        long_description: vec![
            match &standalone {
                None => format!(
                    "Overlay for the stock {stock_pkg} package: RCCL {} (ROCm {}) rebuilt{patched} by rcclfix so \
                     that no GPU kernel for {targets} declares hidden_hostcall_buffer, the cause of \
                     hipErrorIllegalState on multi-GPU systems without PCIe AtomicOps.{given_note}",
                    m.rccl_version, m.rocm_release
                ),
                Some(why) => format!(
                    "Stand-alone RCCL library, in place of {stock_pkg}: RCCL {} (ROCm {}) rebuilt{patched} by rcclfix so \
                     that no GPU kernel for {targets} declares hidden_hostcall_buffer, the cause of \
                     hipErrorIllegalState on multi-GPU systems without PCIe AtomicOps. It does not \
                     depend on {stock_pkg}: {why}.",
                    m.rccl_version, m.rocm_release
                ),
            },
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
            format!(
                "rcclfix scanned this package's library when it made the package: {}, none \
                 declares hidden_hostcall_buffer (the report is scan.json beside the manifest).",
                scan.counts()
            ),
            format!(
                "verify: {}. Check the library on this machine's GPUs before relying on it: \
                 rcclfix verify --lib {stock_path} (two GPUs; exit 0 means every all_reduce and \
                 all_gather case gave the exact result).",
                m.verify_summary()
            ),
        ],
        stock_path,
        library,
        manifest_json: b.manifest_json.clone(),
        scan_json: scan.json()?,
        changelog: vec![format!(
            "RCCL {} from {} at {}, built by rcclfix {} (recipe {}) for {targets}{}; \
             scanned when packaged by rcclfix {}: {}, none declares hidden_hostcall_buffer.",
            m.rccl_version,
            m.rev_label(),
            short(&m.commit),
            m.rcclfix_version,
            m.recipe,
            if asserts_patched(m, scan) {
                format!(", patched after the link ({ASSERTS_PROVENANCE})")
            } else if m.patched.is_some() {
                ", patched after the link".to_owned()
            } else {
                String::new()
            },
            env!("CARGO_PKG_VERSION"),
            scan.counts()
        )],
        mtime,
    };
    Ok(spec)
}

/// Whether the shipped library was patched with `--asserts`: its manifest's patch record lists
/// rewritten functions, or the scan of what the package ships finds hostcall users whose entry
/// traps (a library patched outside `build`, which records nothing): the package says so either
/// way.
fn asserts_patched(m: &Manifest, scan: &shipped::ShippedScan) -> bool {
    m.asserts_rewritten() > 0
        || scan
            .report
            .files
            .iter()
            .any(|f| f.images.iter().any(|i| !i.trapped_users.is_empty()))
}

/// What a package made from a library that `rcclfix patch --asserts` rewrote says about it, in
/// its description and changelog (the manifest's `patched` record lists every instruction).
pub const ASSERTS_PROVENANCE: &str = "rcclfix patch --asserts: the device-assert handler now \
traps without printing its message (it and the hostcall code no kernel reaches are filled with \
s_trap 2; s_endpgm); not verified on AMD hardware, run rcclfix verify before relying on it";

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

pub(super) fn wheel_spec(
    b: &BuildFolder,
    info: &elf::ElfInfo,
    opts: &PackageOptions,
    mtime: u64,
    library: &Path,
    scan: &shipped::ShippedScan,
) -> anyhow::Result<wheel::WheelSpec> {
    let m = &b.manifest;
    let version = package_version(m, opts.revision);
    fields::pep440_version(&version)
        .map_err(|e| anyhow::anyhow!("wheel version {version:?} {e}"))?;
    let targets = m.targets.join(", ");
    let patched = if asserts_patched(m, scan) {
        format!(" (patched after the link; {ASSERTS_PROVENANCE})")
    } else if m.patched.is_some() {
        " (patched after the link)".to_owned()
    } else {
        String::new()
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
             rcclfix scanned this wheel's library when it made the wheel: {counts}, none declares \
             `hidden_hostcall_buffer`.\n\n\
             verify: {verify}. Check the library on the GPUs of the machine that runs it before \
             relying on it: `rcclfix verify --lib $(python3 -c 'import {pkg}; print({pkg}.LIBRARY)')` \
             (two GPUs; exit 0 means every all_reduce and all_gather case gave the exact result).\n\n\
             Provenance: recipe `{recipe}`, `{tag}` at `{commit}`, toolchain `{tc}`; \
             `{pkg}/manifest.json` and `{pkg}/scan.json` hold the build manifest and the scanner's report.",
            counts = scan.counts(),
            verify = m.verify_summary(),
            ver = m.rccl_version,
            rocm = m.rocm_release,
            pkg = wheel::IMPORT_PACKAGE,
            dis = wheel::DISABLE_ENV,
            recipe = m.recipe,
            tag = m.rev_label(),
            commit = m.commit,
            tc = m.toolchain,
        ),
        library: library.to_owned(),
        manifest_json: b.manifest_json.clone(),
        scan_json: scan.json()?,
        mtime,
    };
    wheel::validate(&spec)?;
    Ok(spec)
}
