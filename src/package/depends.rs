//! The `.deb`'s `Depends:` and whether it overlays the distribution's `librccl1` or stands alone.
//!
//! For the debian flavor the dependencies are the owners of the library's `DT_NEEDED` libraries
//! in the toolchain's root ([`super::shlibs::needed_depends`], what dpkg-shlibdeps writes) and, for
//! an overlay, the stock `librccl1` of the toolchain's distribution ([`super::stock::read`]).
//!
//! An overlay replaces the stock library file in place, so it must run on the HIP runtime the
//! stock package brings. When the stock `librccl1` depends on another HIP runtime package than the
//! one that owns the library's `libamdhip64.so.N` (Debian sid: `librccl1` 5.4.3 depends on
//! `libamdhip64-5`, the sid toolchain links HIP 6.4's `libamdhip64.so.6`), there is nothing to
//! overlay: depending on `librccl1` would pull in a second HIP runtime, or nothing installable at
//! all (in sid, `libamdhip64-5` depends on a `libamd-comgr2` the suite no longer has). The package
//! is then stand-alone: it depends only on what its library needs, and still diverts a stock file
//! that is present, so installing it over `librccl1` and removing it again both work.

use super::elf::ElfInfo;
use crate::manifest::Manifest;

/// What `Depends:` says, and about whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebDepends {
    /// The whole `Depends:` value.
    pub depends: String,
    /// The stock package the `.deb` overlays or takes the place of (`librccl1`, `rccl`).
    pub stock_pkg: String,
    /// `Some(reason)` when the package does not depend on the stock package (stand-alone).
    pub standalone: Option<String>,
    /// Whether `depends` came from `--depends` without naming `stock_pkg` (the description then
    /// says so; the export gate is not relaxed for it, as it is for `standalone`).
    pub given_without_stock: bool,
}

impl DebDepends {
    /// A `--depends` value, taken as it is. The stock package stays the flavor's (`stock_pkg`,
    /// whose library the `.deb` diverts), whatever `--depends` names first.
    pub fn given(d: &str, stock_pkg: &str) -> DebDepends {
        let names_stock = d
            .split([',', '|'])
            .any(|alt| first_package(alt) == stock_pkg);
        DebDepends {
            depends: d.to_owned(),
            stock_pkg: stock_pkg.to_owned(),
            standalone: None,
            given_without_stock: !names_stock,
        }
    }
}

/// The stock package whose library a `.deb` of `flavor` diverts: `librccl1` or `rccl`.
pub fn stock_package(flavor: super::Flavor) -> &'static str {
    match flavor {
        super::Flavor::Debian => "librccl1",
        super::Flavor::Rocm => "rccl",
    }
}

fn first_package(d: &str) -> String {
    d.split([' ', ',', '(', '|'])
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_owned()
}

/// The rocm flavor: AMD's `rccl` of the release ([`super::default_depends`]) after the library's
/// own libc requirement (the rest of its NEEDED libraries come with `rccl`).
pub fn rocm(stock_depends: String, info: &ElfInfo) -> DebDepends {
    let stock_pkg = first_package(&stock_depends);
    let depends = match info.glibc {
        Some((a, b)) if !stock_depends.contains("libc6") => {
            format!("libc6 (>= {a}.{b}), {stock_depends}")
        }
        _ => stock_depends,
    };
    DebDepends {
        depends,
        stock_pkg,
        standalone: None,
        given_without_stock: false,
    }
}

/// The debian flavor (see the module doc).
///
/// Errors: the toolchain's apt lists name no `librccl1`, or its dpkg database cannot say who owns
/// a `DT_NEEDED` library (one line, with a `help:` naming `--depends`).
pub fn debian(m: &Manifest, info: &ElfInfo) -> anyhow::Result<DebDepends> {
    let rootfs = super::stock::toolchain_rootfs(&m.toolchain)?;
    let stock = super::stock::read(&rootfs, "librccl1", info.machine.debian()).map_err(|e| {
        anyhow::anyhow!(
            "{e:#}\nhelp: the .deb depends on the librccl1 of toolchain {}'s distribution; build the toolchain (`rcclfix toolchain build {}`) or give --depends",
            m.toolchain,
            m.toolchain
        )
    })?;
    let needed = super::shlibs::needed_depends(
        &rootfs,
        info,
        &format!("{}-linux-gnu", info.machine.uname()),
    )
    .map_err(|e| anyhow::anyhow!("{e:#}\nhelp: give --depends to write Depends: yourself"))?;
    let stock_names: Vec<String> = stock
        .depends_field
        .split([',', '|'])
        .map(first_package)
        .collect();
    let standalone = needed
        .iter()
        .find(|d| d.soname.starts_with("libamdhip64.so."))
        .filter(|hip| !stock_names.contains(&hip.package))
        .map(|hip| {
            format!(
                "the distribution's {} {} is built for another HIP runtime than this library's {} ({})",
                stock.package, stock.version, hip.soname, hip.package
            )
        });
    let mut all: Vec<String> = needed
        .into_iter()
        .filter(|d| d.package != stock.package)
        .map(|d| d.depends)
        .collect();
    if standalone.is_none() {
        all.push(stock.depends());
    }
    Ok(DebDepends {
        depends: all.join(", "),
        stock_pkg: stock.package,
        standalone,
        given_without_stock: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stock_package_is_the_flavors_whatever_depends_names_first() {
        let d = DebDepends::given("libc6, librccl1 (>= 5)", "librccl1");
        assert_eq!(
            (d.stock_pkg.as_str(), d.given_without_stock),
            ("librccl1", false)
        );
        let d = DebDepends::given(" rccl|librccl1", "librccl1");
        assert_eq!(
            (d.stock_pkg.as_str(), d.given_without_stock),
            ("librccl1", false)
        );
        let d = DebDepends::given("libfoo (>= 1)", "rccl");
        assert_eq!(
            (d.stock_pkg.as_str(), d.given_without_stock),
            ("rccl", true)
        );
    }

    #[test]
    fn rocm_puts_libc_first_unless_named() {
        let info = ElfInfo {
            glibc: Some((2, 34)),
            ..Default::default()
        };
        assert_eq!(
            rocm("rccl (>= 1)".into(), &info).depends,
            "libc6 (>= 2.34), rccl (>= 1)"
        );
        assert_eq!(rocm("libc6, rccl".into(), &info).depends, "libc6, rccl");
    }
}
