//! The packages a library's `DT_NEEDED` entries come from, in the Debian root it was built in,
//! and the minimum versions it needs of them: what `dpkg-shlibdeps` writes into a package's
//! `Depends:` (dpkg-shlibdeps(1), "Algorithm").
//!
//! Each `DT_NEEDED` SONAME is looked up in the root's dpkg database
//! (`var/lib/dpkg/info/<package>[:<arch>].list`): the package that installed a file of that name
//! in a library directory owns it. Its `.symbols` file (deb-symbols(5)) gives the minimum version
//! of each symbol; the dependency is the highest minimum over the symbols the library imports.
//! Without a symbols entry for any imported symbol, its `.shlibs` file (deb-shlibs(5)) gives the
//! dependency; without either, the owner's installed version is the minimum (what it was built
//! against, never lower than needed).
//!
//! A `.deb` overlay built in a toolchain needs this because the distribution's `librccl1` it
//! overlays can depend on another HIP runtime than the one the build linked: Debian sid's
//! `librccl1` 5.4.3 is not what brings `libamdhip64.so.6` of HIP 6.4.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::elf::ElfInfo;
use super::stock::compare_versions;

/// Directories a `DT_NEEDED` SONAME resolves in on Debian (ld.so(8), the multiarch and the
/// traditional library directories).
fn lib_dirs(triplet: &str) -> [String; 4] {
    [
        format!("/usr/lib/{triplet}"),
        format!("/lib/{triplet}"),
        "/usr/lib".to_owned(),
        "/lib".to_owned(),
    ]
}

/// One `Depends:` entry derived from a `DT_NEEDED` library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeededDep {
    /// The `DT_NEEDED` SONAME, e.g. `libamdhip64.so.6`.
    pub soname: String,
    /// The package that owns it in the root, without the architecture qualifier.
    pub package: String,
    /// The dependency as written into `Depends:`, e.g. `libamdhip64-6 (>= 6.1.5)`.
    pub depends: String,
}

/// The `Depends:` entries for `lib`'s `DT_NEEDED` libraries as the Debian root `rootfs` (a
/// toolchain's rootfs) provides them, in `DT_NEEDED` order, one per owning package.
///
/// Errors (one line each, naming the SONAME and the root): the dpkg database cannot be read; a
/// `DT_NEEDED` library is owned by no package of the root (a library the package could not
/// bring, so the overlay would not load after installing).
pub fn needed_depends(
    rootfs: &Path,
    lib: &ElfInfo,
    triplet: &str,
) -> anyhow::Result<Vec<NeededDep>> {
    let info = rootfs.join("var/lib/dpkg/info");
    let owners = owners(&info, &lib.needed, triplet)?;
    let status = installed_versions(&rootfs.join("var/lib/dpkg/status"))?;
    let mut out: Vec<NeededDep> = Vec::new();
    for soname in &lib.needed {
        let Some(file_pkg) = owners.get(soname) else {
            anyhow::bail!(
                "{}: no package of the toolchain's root owns {soname} (a DT_NEEDED library of the package's library)",
                info.display()
            );
        };
        let package = file_pkg.split(':').next().unwrap_or(file_pkg).to_owned();
        let depends = symbols_dep(&info.join(format!("{file_pkg}.symbols")), soname, lib)?
            .or(shlibs_dep(
                &info.join(format!("{file_pkg}.shlibs")),
                soname,
            )?)
            .or_else(|| status.get(&package).map(|v| format!("{package} (>= {v})")))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: {package} owns {soname} but is not installed there",
                    rootfs.join("var/lib/dpkg/status").display()
                )
            })?;
        super::fields::depends(&depends).map_err(|e| {
            anyhow::anyhow!(
                "{}: the dependency {depends:?} for {soname} {e}",
                info.display()
            )
        })?;
        // One entry per package (libc.so.6 and libm.so.6 are both libc6's): the stronger
        // minimum wins, as dpkg-shlibdeps merges them.
        match out.iter_mut().find(|d| d.package == package) {
            Some(prev) => {
                if let (Some(a), Some(b)) = (min_version(&prev.depends), min_version(&depends)) {
                    if compare_versions(b, a) == Ordering::Greater {
                        prev.depends = depends;
                    }
                }
            }
            None => out.push(NeededDep {
                soname: soname.clone(),
                package,
                depends,
            }),
        }
    }
    Ok(out)
}

/// `V` of a dependency that is exactly `pkg (>= V)`.
fn min_version(dep: &str) -> Option<&str> {
    let (_, rest) = dep.split_once(" (>= ")?;
    let v = rest.strip_suffix(')')?;
    (!v.contains([',', '|', '('])).then_some(v)
}

/// `soname` → owning `package[:arch]` (the `.list` file's stem) for each wanted SONAME.
fn owners(
    info: &Path,
    wanted: &[String],
    triplet: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let dirs = lib_dirs(triplet);
    let wanted: BTreeSet<&str> = wanted.iter().map(String::as_str).collect();
    let rd = std::fs::read_dir(info).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read the toolchain's dpkg database: {e}",
            info.display()
        )
    })?;
    let mut lists: Vec<_> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "list"))
        .collect();
    lists.sort();
    let mut found = BTreeMap::new();
    for list in lists {
        let Some(stem) = list.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let text = crate::fsutil::read_text_capped(&list, MAX_DPKG_BYTES, "a dpkg file list")?;
        for line in text.lines() {
            let Some((dir, name)) = line.rsplit_once('/') else {
                continue;
            };
            if wanted.contains(name) && dirs.iter().any(|d| d == dir) {
                found
                    .entry(name.to_owned())
                    .or_insert_with(|| stem.to_owned());
            }
        }
    }
    Ok(found)
}

/// Installed packages' versions from a dpkg `status` file (package name without architecture).
fn installed_versions(status: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = crate::fsutil::read_text_capped(status, MAX_DPKG_BYTES, "a dpkg status file")?;
    let mut out = BTreeMap::new();
    for para in text.split("\n\n") {
        let field = |k: &str| super::fields::deb822_field(para, k);
        if let (Some(p), Some(v), Some(s)) = (field("Package"), field("Version"), field("Status")) {
            if s.ends_with(" installed") {
                out.insert(p.to_owned(), v.to_owned());
            }
        }
    }
    Ok(out)
}

/// The dependency a `.symbols` file (deb-symbols(5)) gives for the symbols `lib` imports from
/// `soname`: its template with `#MINVER#` replaced by ` (>= V)`, V the highest minimum version of
/// an imported symbol. `None` when the file is absent, has no block for `soname` or lists none of
/// the imported symbols.
fn symbols_dep(path: &Path, soname: &str, lib: &ElfInfo) -> anyhow::Result<Option<String>> {
    let text = match crate::fsutil::read_state(path, MAX_DPKG_BYTES, "a symbols file")? {
        Some(b) => String::from_utf8(b)
            .map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))?,
        None => return Ok(None),
    };
    // Imported symbols as `name@VERSION` (`@Base` when unversioned), as symbols files key them.
    let imported: BTreeSet<String> = lib
        .imports
        .iter()
        .map(|(n, (v, _))| format!("{n}@{}", v.as_deref().unwrap_or("Base")))
        .collect();
    let mut template: Option<String> = None;
    let mut best: Option<String> = None;
    let mut in_block = false;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            if !in_block {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(sym), Some(min)) = (words.next(), words.next()) else {
                continue;
            };
            if imported.contains(sym)
                && best
                    .as_deref()
                    .is_none_or(|b| compare_versions(min, b) == Ordering::Greater)
            {
                best = Some(min.to_owned());
            }
        } else if line.starts_with(['*', '|', '#']) {
            continue;
        } else {
            let mut words = line.splitn(2, char::is_whitespace);
            in_block = words.next() == Some(soname);
            if in_block {
                template = words.next().map(|t| t.trim().to_owned());
            }
        }
    }
    Ok(match (template, best) {
        (Some(t), Some(v)) if t.contains("#MINVER#") => Some(
            t.replace(" #MINVER#", &format!(" (>= {v})"))
                .replace("#MINVER#", &format!(" (>= {v})")),
        ),
        _ => None,
    })
}

/// The dependency a `.shlibs` file (deb-shlibs(5): `library-name soversion dependencies`) gives
/// for `soname` (`libfoo.so.6` is library `libfoo`, soversion `6`). `None` when absent.
fn shlibs_dep(path: &Path, soname: &str) -> anyhow::Result<Option<String>> {
    let text = match crate::fsutil::read_state(path, MAX_DPKG_BYTES, "a shlibs file")? {
        Some(b) => String::from_utf8(b)
            .map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))?,
        None => return Ok(None),
    };
    let Some((name, ver)) = soname.split_once(".so.") else {
        return Ok(None);
    };
    for line in text.lines() {
        // An optional `type:` prefix (udeb) is not for a .deb.
        if line.starts_with('#')
            || line
                .split_whitespace()
                .next()
                .is_some_and(|w| w.ends_with(':'))
        {
            continue;
        }
        let mut w = line.splitn(3, char::is_whitespace);
        if w.next() == Some(name) && w.next() == Some(ver) {
            return Ok(w
                .next()
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty()));
        }
    }
    Ok(None)
}

/// The largest dpkg database file read from a toolchain's rootfs (`status`, `info/*.list`,
/// `info/*.symbols`: 256 MiB; a full Debian system's `status` is a few MB).
pub const MAX_DPKG_BYTES: u64 = 256 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let info = t.path().join("var/lib/dpkg/info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("libamdhip64-6:amd64.list"),
            "/.\n/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/libamdhip64.so.6\n",
        )
        .unwrap();
        std::fs::write(
            info.join("libamdhip64-6:amd64.symbols"),
            "libamdhip64.so.6 libamdhip64-6 #MINVER#\n* Build-Depends-Package: libamdhip64-dev\n hipMalloc@hip_4.2 6.1.5\n hipFree@hip_4.2 5.2.3\n hipNew@hip_6.4 6.4.3\n",
        )
        .unwrap();
        std::fs::write(
            info.join("libamdhip64-6:amd64.shlibs"),
            "libamdhip64 6 libamdhip64-6 (>= 6.4.3)\n",
        )
        .unwrap();
        std::fs::write(
            info.join("libfoo1:amd64.list"),
            "/usr/lib/x86_64-linux-gnu/libfoo.so.1\n/usr/share/doc/libbar.so.2\n",
        )
        .unwrap();
        std::fs::write(
            info.join("libfoo1:amd64.shlibs"),
            "libfoo 1 libfoo1 (>= 1.2)\n",
        )
        .unwrap();
        std::fs::write(info.join("libbaz0.list"), "/lib/libbaz.so.0\n").unwrap();
        std::fs::write(
            info.join("libc6:amd64.list"),
            "/usr/lib/x86_64-linux-gnu/libc.so.6\n/usr/lib/x86_64-linux-gnu/libm.so.6\n",
        )
        .unwrap();
        std::fs::write(
            info.join("libc6:amd64.symbols"),
            "libc.so.6 libc6 #MINVER#\n| libc6 (>> 2.43), libc6 (<< 2.44)\n free@GLIBC_2.2.5 2.2.5\n memcpy@GLIBC_2.14 2.14\nlibm.so.6 libc6 #MINVER#\n sin@GLIBC_2.2.5 2.2.5\n",
        )
        .unwrap();
        std::fs::write(
            t.path().join("var/lib/dpkg/status"),
            "Package: libbaz0\nStatus: install ok installed\nVersion: 0.9-1\n\nPackage: libfoo1\nStatus: install ok installed\nVersion: 1.3-1\n",
        )
        .unwrap();
        t
    }

    fn lib(needed: &[&str], imports: &[(&str, &str)]) -> ElfInfo {
        ElfInfo {
            needed: needed.iter().map(|s| s.to_string()).collect(),
            imports: imports
                .iter()
                .map(|(n, v)| (n.to_string(), (Some(v.to_string()), None)))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn symbols_give_the_highest_minimum_of_what_is_imported() {
        let t = root();
        let l = lib(
            &["libamdhip64.so.6", "libfoo.so.1", "libbaz.so.0"],
            &[("hipMalloc", "hip_4.2"), ("hipFree", "hip_4.2")],
        );
        let d = needed_depends(t.path(), &l, "x86_64-linux-gnu").unwrap();
        let deps: Vec<&str> = d.iter().map(|d| d.depends.as_str()).collect();
        // symbols (6.1.5, not the shlibs' 6.4.3), shlibs, installed version.
        assert_eq!(
            deps,
            [
                "libamdhip64-6 (>= 6.1.5)",
                "libfoo1 (>= 1.2)",
                "libbaz0 (>= 0.9-1)"
            ]
        );
    }

    #[test]
    fn two_libraries_of_one_package_give_one_entry_with_the_stronger_minimum() {
        let t = root();
        let l = lib(
            &["libm.so.6", "libc.so.6"],
            &[
                ("sin", "GLIBC_2.2.5"),
                ("memcpy", "GLIBC_2.14"),
                ("free", "GLIBC_2.2.5"),
            ],
        );
        let d = needed_depends(t.path(), &l, "x86_64-linux-gnu").unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].depends, "libc6 (>= 2.14)");
    }

    #[test]
    fn shlibs_when_no_imported_symbol_is_listed() {
        let t = root();
        let l = lib(&["libamdhip64.so.6"], &[("other", "hip_4.2")]);
        let d = needed_depends(t.path(), &l, "x86_64-linux-gnu").unwrap();
        assert_eq!(d[0].depends, "libamdhip64-6 (>= 6.4.3)");
    }

    #[test]
    fn an_unowned_library_or_one_outside_the_library_folders_is_an_error() {
        let t = root();
        for soname in ["libnone.so.3", "libbar.so.2"] {
            let e = needed_depends(t.path(), &lib(&[soname], &[]), "x86_64-linux-gnu")
                .unwrap_err()
                .to_string();
            assert!(e.contains(soname) && e.contains("no package"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_missing_database_names_it() {
        let t = tempfile::tempdir().unwrap();
        let e = needed_depends(t.path(), &lib(&["libc.so.6"], &[]), "x86_64-linux-gnu")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("dpkg database") && e.contains("var/lib/dpkg/info"),
            "{e}"
        );
    }
}
