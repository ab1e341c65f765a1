//! A recorded build's toolchain against the toolchain about to build its recipe again: a Debian
//! suite moves, and the rootfs's package versions (`name=version`, from its dpkg database) are
//! what decide the library's bytes. [`record_manifest`] finds the record a verified recipe names,
//! [`package_drift`] compares two version lists, [`check_record_versions`] warns or (`--locked`)
//! refuses when they differ.

use std::path::Path;

use anyhow::{bail, Context};

use super::toolchain::Toolchain;

/// What differs between two `name=version` lists (a record's and a toolchain's now), one line
/// each, sorted by name: `hipcc 7.2.4+dfsg-1~exp1 -> 7.2.5+dfsg-1~exp1`, `libfoo 1.0 (gone)`,
/// `libbar 2.0 (new)`. Empty when they agree.
pub fn package_drift(recorded: &[String], now: &[String]) -> Vec<String> {
    let split = |l: &[String]| -> std::collections::BTreeMap<String, String> {
        l.iter()
            .map(|nv| match nv.split_once('=') {
                Some((n, v)) => (n.to_owned(), v.to_owned()),
                None => (nv.clone(), String::new()),
            })
            .collect()
    };
    let (old, new) = (split(recorded), split(now));
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| match (old.get(n), new.get(n)) {
            (Some(a), Some(b)) if a == b => None,
            (Some(a), Some(b)) => Some(format!("{n} {a} -> {b}")),
            (Some(a), None) => Some(format!("{n} {a} (gone)")),
            (None, Some(b)) => Some(format!("{n} {b} (new)")),
            (None, None) => None,
        })
        .collect()
}

/// The record a verified recipe names (`verified_by = "recipes/records/<folder>"`): its
/// `manifest.json` under `recipe_root` when that checkout has it, else the copy embedded at build
/// time (`recipe::EMBEDDED_RECORD_MANIFESTS`). `None` for other recipes and unknown folders.
///
/// Errors: the manifest does not parse.
pub fn record_manifest(
    recipe: &crate::recipe::Recipe,
    recipe_root: Option<&Path>,
) -> anyhow::Result<Option<(String, crate::manifest::Manifest)>> {
    let Some(v) = recipe.verified_by.as_deref() else {
        return Ok(None);
    };
    let Some(folder) = v.strip_prefix("recipes/records/") else {
        return Ok(None);
    };
    if let Some(root) = recipe_root {
        let path = root.join(v).join("manifest.json");
        if path.is_file() {
            return Ok(Some((
                v.to_owned(),
                crate::manifest::Manifest::load(&path)?,
            )));
        }
    }
    match crate::recipe::EMBEDDED_RECORD_MANIFESTS
        .iter()
        .find(|(f, _)| *f == folder)
    {
        Some((_, text)) => Ok(Some((
            v.to_owned(),
            serde_json::from_str(text)
                .with_context(|| format!("{v}/manifest.json: not a valid rcclfix manifest"))?,
        ))),
        None => Ok(None),
    }
}

/// A Debian suite moves; the rootfs's package versions are what decide the bytes. Compare the
/// versions `recipe`'s record was made with ([`record_manifest`], `manifest.toolchain_packages`)
/// with those of the toolchain `tc` about to build it. Nothing to compare (no record, a record
/// from another toolchain or without package versions, an image or host toolchain): `Ok`. When
/// they differ the build is no longer the recorded one: a warning naming the record and the
/// differing packages, or, with `locked` (`--locked`), an error. Either way the scan gate still
/// judges the library that comes out.
///
/// Errors: `locked` and the versions differ; the record does not parse.
pub fn check_record_versions(
    recipe: &crate::recipe::Recipe,
    tc: &Toolchain,
    recipe_root: Option<&Path>,
    locked: bool,
) -> anyhow::Result<()> {
    let Some((folder, m)) = record_manifest(recipe, recipe_root)? else {
        return Ok(());
    };
    if m.toolchain != tc.name() || m.toolchain_packages.is_empty() || tc.packages().is_empty() {
        return Ok(());
    }
    let drift = package_drift(&m.toolchain_packages, tc.packages());
    if drift.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 12;
    let mut list: Vec<String> = drift
        .iter()
        .take(SHOWN)
        .map(|d| crate::ui::escape(d).to_string())
        .collect();
    if drift.len() > SHOWN {
        list.push(format!("and {} more", drift.len() - SHOWN));
    }
    let msg = format!(
        "toolchain {} differs from the one {folder} was made with ({} packages: {})",
        tc.name(),
        drift.len(),
        list.join(", ")
    );
    if locked {
        bail!("{msg}\nhelp: --locked refuses a toolchain whose package versions differ from the record's; build without --locked to build anyway (the scan gate still judges), or see docs/build.md, \"Toolchains from Debian's archive, and refreshing one\"");
    }
    crate::ui::warn(format_args!(
        "{msg}\nhelp: the library may differ from the recorded sha256 {}; the scan gate still judges it (docs/build.md, \"Toolchains from Debian's archive, and refreshing one\")",
        m.library.sha256
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::toolchain::{Stamp, ToolchainDesc};

    /// A verified recipe's record names the toolchain versions it was made with; a toolchain whose
    /// versions differ warns (`Ok`), and is refused with `--locked`, naming each package.
    #[test]
    fn record_versions_are_compared_and_locked_refuses_a_drift() {
        let recipe = crate::recipe::embedded().unwrap()["2.21.5-debian-sid"].clone();
        let folder = recipe.verified_by.clone().unwrap();
        let root = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(&folder)
            .join("manifest.json");
        let mut m = crate::manifest::Manifest::load(&src).unwrap();
        m.toolchain_packages = vec!["hipcc=7.0.2+dfsg-3".into(), "libc6=2.43-7".into()];
        fs_err::create_dir_all(root.path().join(&folder)).unwrap();
        m.save(&root.path().join(&folder).join("manifest.json"))
            .unwrap();
        let tc = |packages: &[&str]| Toolchain::with_packages("debian-sid", packages);
        let same = tc(&["hipcc=7.0.2+dfsg-3", "libc6=2.43-7"]);
        let moved = tc(&["hipcc=7.0.3+dfsg-1", "libc6=2.43-7"]);
        let r = Some(root.path());
        check_record_versions(&recipe, &same, r, true).unwrap();
        check_record_versions(&recipe, &moved, r, false).unwrap();
        let e = check_record_versions(&recipe, &moved, r, true).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains(&format!("differs from the one {folder} was made with (1 packages: hipcc 7.0.2+dfsg-3 -> 7.0.3+dfsg-1)")),
            "{msg}"
        );
        // The embedded record carries the versions it was built with: they pass `--locked`, a
        // moved `hipcc` does not.
        let recorded = crate::manifest::Manifest::load(&src)
            .unwrap()
            .toolchain_packages;
        assert!(!recorded.is_empty(), "{folder} has no toolchain_packages");
        let recorded: Vec<&str> = recorded.iter().map(String::as_str).collect();
        check_record_versions(&recipe, &tc(&recorded), None, true).unwrap();
        let hipcc = recorded.iter().find(|p| p.starts_with("hipcc=")).unwrap();
        let moved_now: Vec<&str> = recorded
            .iter()
            .map(|&p| if p == *hipcc { "hipcc=99.0-1" } else { p })
            .collect();
        let e = check_record_versions(&recipe, &tc(&moved_now), None, true).unwrap_err();
        assert!(format!("{e:#}").contains("-> 99.0-1"), "{e:#}");
    }

    /// The package versions a built toolchain reports are its rootfs's dpkg database, not its
    /// stamp (issue 40, item 10): a stamp that still lists the recorded versions while the
    /// database says another `hipcc` is refused by `--locked`, and a package whose files are gone
    /// (`deinstall ok config-files`) is not listed.
    #[test]
    fn package_versions_come_from_the_rootfs_dpkg_database() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("toolchains/debian-sid");
        let recorded = ["hipcc=7.0.2+dfsg-3", "libc6=2.43-7"]
            .map(String::from)
            .to_vec();
        let stamp = Stamp {
            name: "debian-sid".into(),
            description_sha256: ToolchainDesc::embedded("debian-sid").unwrap().hash(),
            suite: "sid".into(),
            mirror: "http://deb.debian.org/debian".into(),
            built_at: 0,
            rootfs_bytes: 0,
            packages: recorded.clone(),
            from_suites: Default::default(),
        };
        fs_err::create_dir_all(dir.join("rootfs/var/lib/dpkg")).unwrap();
        fs_err::write(dir.join("stamp.json"), serde_json::to_vec(&stamp).unwrap()).unwrap();
        fs_err::write(
            dir.join("rootfs/var/lib/dpkg/status"),
            "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.43-7\nDescription: GNU C Library\n Shared libraries.\n\n\
             Package: hipcc\nStatus: install ok installed\nVersion: 7.0.3+dfsg-1\n\n\
             Package: oldlib\nStatus: deinstall ok config-files\nVersion: 1.0-1\n",
        )
        .unwrap();
        let tc = Toolchain::local_at(&t.path().join("toolchains"), "debian-sid").unwrap();
        assert_eq!(tc.packages(), ["hipcc=7.0.3+dfsg-1", "libc6=2.43-7"]);

        let recipe = crate::recipe::embedded().unwrap()["2.21.5-debian-sid"].clone();
        let folder = recipe.verified_by.clone().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(&folder)
            .join("manifest.json");
        let mut m = crate::manifest::Manifest::load(&src).unwrap();
        m.toolchain_packages = recorded;
        let root = t.path().join("checkout");
        fs_err::create_dir_all(root.join(&folder)).unwrap();
        m.save(&root.join(&folder).join("manifest.json")).unwrap();
        let e = check_record_versions(&recipe, &tc, Some(&root), true).unwrap_err();
        assert!(
            format!("{e:#}").contains("hipcc 7.0.2+dfsg-3 -> 7.0.3+dfsg-1"),
            "{e:#}"
        );
    }

    #[test]
    fn drift_names_changed_gone_and_new_packages() {
        let rec: Vec<String> = ["a=1", "b=2", "c=3"].map(String::from).to_vec();
        let now: Vec<String> = ["a=1", "b=2.1", "d=4"].map(String::from).to_vec();
        assert_eq!(
            package_drift(&rec, &now),
            ["b 2 -> 2.1", "c 3 (gone)", "d 4 (new)"]
        );
        assert!(package_drift(&rec, &rec).is_empty());
    }
}
