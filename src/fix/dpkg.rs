//! Apply to a dpkg-owned copy through dpkg: a `.deb` overlay of the patched library
//! ([`crate::package::deb::write_deb`], the same overlay `package` writes: its `preinst` moves
//! the owner's file aside with `dpkg-divert --rename`, its `postrm` moves it back) installed with
//! `apt-get install`, and taken back with `apt-get remove`. The owner's package is never edited
//! behind dpkg's back: after undo `dpkg --verify` of it is clean and the file is byte for byte
//! the original.
//!
//! Commands run on this machine's own dpkg and apt (root is needed, as for any package). The
//! tests run the whole `rcclfix fix` inside a throwaway copy of a Debian root (`tests/it/fix_dpkg.rs`).

use std::path::Path;

use anyhow::Context;

use super::record::{self, FixRecord, Mechanism};
use super::steps;
use super::{Copy, Owner};

pub use super::record::DpkgFix;

const APT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);
const DPKG_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// The overlay package's name for fix `id`.
pub fn package_name(id: &str) -> String {
    format!("rcclfix-fix-{id}")
}

fn valid_package(p: &str) -> bool {
    let (name, arch) = p.split_once(':').unwrap_or((p, "amd64"));
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
        && !arch.is_empty()
        && arch
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn run(
    summary: &str,
    prog: &str,
    args: &[&str],
    deadline: std::time::Duration,
) -> anyhow::Result<String> {
    crate::process::Cmd::new(summary.to_string(), prog)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .read_with_deadline(deadline)
}

/// The package that diverts `path`, if any (`dpkg-divert --listpackage`).
fn diverted_by(path: &Path) -> anyhow::Result<Option<String>> {
    let p = path.to_string_lossy();
    let out = run(
        "ask dpkg-divert",
        "dpkg-divert",
        &["--listpackage", &p],
        DPKG_DEADLINE,
    )?;
    Ok(Some(out.trim().to_string()).filter(|s| !s.is_empty()))
}

/// Apply the proven patch to the dpkg-owned `copy`: build the overlay `.deb` and install it with
/// apt. Returns the record kept in `$RCCLFIX_HOME/fixes/<id>/` (with the `.deb`).
///
/// Errors (nothing installed): not dpkg-owned or already diverted; the patch, the `.deb` or apt
/// fail; the file at the path is not the patched one afterwards (then apt removes it again).
pub fn apply(copy: &Copy, targets: &[String]) -> anyhow::Result<FixRecord> {
    let path = &copy.path;
    let Owner::Dpkg { package, version } = &copy.owner else {
        anyhow::bail!("{}: not owned by dpkg", path.display());
    };
    if !valid_package(package) {
        anyhow::bail!(
            "{}: dpkg owner {package:?} is not a package name",
            path.display()
        );
    }
    if let Some(d) = diverted_by(path)? {
        anyhow::bail!(
            "{}: already diverted by {d}; remove that first; nothing was changed",
            path.display()
        );
    }
    let opts = copy.decision.patch_options(targets).ok_or_else(|| {
        anyhow::anyhow!(
            "{}: {}; nothing to apply",
            path.display(),
            copy.decision.short()
        )
    })?;
    let scratch = crate::fsutil::TempDir::new("rcclfix-fix-")?;
    let patched = scratch.path().join("library");
    let (id, keep, rec) = steps::patch_planned(copy, &opts, &patched)?;
    steps::rescan_clean(&patched, &copy.decision)?;
    let ours = package_name(&id);
    let info = crate::package::elf::ElfInfo::read(&patched)?;
    let owner_name = package.split(':').next().unwrap_or(package);
    let provenance = serde_json::json!({
        "kind": "library-overlay",
        "rcclfix_version": env!("CARGO_PKG_VERSION"),
        "original": {"path": path, "sha256": copy.sha256, "owner": copy.owner.describe()},
        "library_sha256": rec.output_sha256,
        "patch": rec,
        "unverified": super::UNVERIFIED,
    });
    let spec = crate::package::deb::DebSpec {
        package: ours.clone(),
        version: "1".into(),
        arch: info.machine.debian().into(),
        maintainer: crate::package::DEFAULT_MAINTAINER.into(),
        depends: format!("{owner_name} (= {version})"),
        synopsis: format!("rcclfix fix {id}: patched {}", path.display()),
        long_description: vec![
            format!(
                "The library of {owner_name} {version} at {} with {} applied by rcclfix fix (kernels that declare hidden_hostcall_buffer but provably cannot use it rewritten). The stock file is diverted aside and comes back when this package is removed.",
                path.display(),
                if opts.asserts { "patch --asserts" } else { "patch" }
            ),
            super::UNVERIFIED.into(),
        ],
        stock_path: path.to_string_lossy().into_owned(),
        library: crate::package::strip::Rewritten::unchanged(crate::package::strip::map_file(
            &patched,
        )?),
        manifest_json: serde_json::to_vec_pretty(&provenance)?,
        scan_json: serde_json::to_vec_pretty(&crate::scan::scan_path(
            &patched,
            &crate::scan::ScanOptions::default(),
        )?)?,
        changelog: vec![format!("rcclfix fix {id} of {}", path.display())],
        mtime: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    };
    let dpkg = DpkgFix {
        package: ours.clone(),
        owner_package: package.clone(),
        owner_version: version.clone(),
        deb: spec.file_name(),
    };
    let record = FixRecord {
        schema_version: record::FIX_SCHEMA_VERSION,
        id: id.clone(),
        path: path.clone(),
        original_sha256: copy.sha256.clone(),
        patched_sha256: rec.output_sha256.clone(),
        size: rec.size,
        mode: 0o644,
        asserts: opts.asserts,
        targets: targets.to_vec(),
        created_unix: spec.mtime,
        rcclfix_version: env!("CARGO_PKG_VERSION").to_string(),
        mechanism: Mechanism::Dpkg,
        pip: None,
        dpkg: Some(dpkg.clone()),
    };
    let kept = crate::fsutil::AtomicDir::new(&keep)?;
    let mut deb = fs_err::File::create(kept.path().join(&dpkg.deb))?;
    crate::package::deb::write_deb(&spec, &mut deb)?;
    deb.sync_all()?;
    drop(deb);
    let mut doc = serde_json::to_vec_pretty(&record)?;
    doc.push(b'\n');
    fs_err::write(kept.path().join("record.json"), doc)?;
    kept.commit()?;
    let deb_path = keep.join(&dpkg.deb);
    let installed = (|| -> anyhow::Result<()> {
        run(
            "install the overlay with apt",
            "apt-get",
            &[
                "install",
                "-y",
                "--no-install-recommends",
                &deb_path.to_string_lossy(),
            ],
            APT_DEADLINE,
        )?;
        let now = crate::fsutil::sha256_file(path)?;
        if now != record.patched_sha256 {
            anyhow::bail!(
                "{}: sha256 {now} after apt, not the patched one",
                path.display()
            );
        }
        Ok(())
    })();
    if let Err(e) = installed {
        let _ = run(
            "remove the overlay",
            "apt-get",
            &["remove", "-y", &ours],
            APT_DEADLINE,
        );
        let _ = std::fs::remove_dir_all(&keep);
        return Err(e.context(format!(
            "{}: the overlay was not installed; nothing was changed",
            path.display()
        )));
    }
    Ok(record)
}

/// Check a dpkg record read from `$RCCLFIX_HOME` before anything runs: the overlay's own name,
/// package names that are package names, a `.deb` name without a folder.
///
/// Errors: one line naming what is wrong.
pub fn check_record(r: &FixRecord) -> anyhow::Result<&DpkgFix> {
    let d = r
        .dpkg
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("a dpkg fix without its dpkg part"))?;
    if d.package != package_name(&r.id)
        || !valid_package(&d.owner_package)
        || !d.deb.starts_with(&format!("{}_1_", d.package))
        || !d.deb.ends_with(".deb")
        || d.deb.contains('/')
    {
        anyhow::bail!("not the overlay this fix installs (its names differ)");
    }
    Ok(d)
}

/// Undo a dpkg fix: `apt-get remove` the overlay, then check that the diversion is gone, the file
/// is the original (sha256) and `dpkg --verify` of its owner is clean.
///
/// Errors: see [`check_record`]; the file is neither the patched one nor the original; apt fails;
/// a check fails afterwards (one line naming it).
pub fn undo(r: &FixRecord) -> anyhow::Result<()> {
    let d = check_record(r)?;
    let path = &r.path;
    let now = crate::fsutil::sha256_file(path)?;
    if now == r.patched_sha256 || diverted_by(path)?.as_deref() == Some(d.package.as_str()) {
        run(
            "remove the overlay with apt",
            "apt-get",
            &["remove", "-y", &d.package],
            APT_DEADLINE,
        )?;
    } else if now != r.original_sha256 {
        anyhow::bail!(
            "{}: changed since fix {} (sha256 {now}); not removed",
            path.display(),
            r.id
        );
    }
    if let Some(p) = diverted_by(path)? {
        anyhow::bail!("{}: still diverted by {p} after apt remove", path.display());
    }
    let after = crate::fsutil::sha256_file(path)?;
    if after != r.original_sha256 {
        anyhow::bail!(
            "{}: sha256 {after} after apt remove, not the original {}",
            path.display(),
            r.original_sha256
        );
    }
    verify_clean(&d.owner_package)
}

/// `dpkg --verify PACKAGE` reports nothing (every file as installed).
///
/// Errors: dpkg fails, or reports a file (named in the error).
pub fn verify_clean(package: &str) -> anyhow::Result<()> {
    let out = run(
        "dpkg --verify",
        "dpkg",
        &["--verify", package],
        DPKG_DEADLINE,
    )
    .with_context(|| format!("dpkg --verify {package}"))?;
    if !out.trim().is_empty() {
        anyhow::bail!(
            "dpkg --verify {package}: {}",
            out.trim().replace('\n', "; ")
        );
    }
    Ok(())
}

/// The self-test after a dpkg fix: the file is the patched one and scans clean, dpkg names the
/// overlay as diverting it, `dpkg --verify` of the overlay is clean, and each consumer's loader
/// search leads to it ([`steps::check_bindings`]). One line each, `Ok` when it holds.
pub fn check(copy: &Copy, r: &FixRecord) -> Vec<Result<String, String>> {
    let Some(d) = &r.dpkg else {
        return vec![Err("not a dpkg fix".into())];
    };
    let p = copy.path.display();
    let mut out = vec![match crate::fsutil::sha256_file(&copy.path) {
        Ok(s) if s == r.patched_sha256 => steps::rescan_clean(&copy.path, &copy.decision)
            .map(|_| format!("{p} is the patched file and scans clean"))
            .map_err(|e| format!("{e:#}")),
        Ok(s) => Err(format!("{p}: sha256 {s}, not the patched one")),
        Err(e) => Err(format!("{e:#}")),
    }];
    out.push(match diverted_by(&copy.path) {
        Ok(Some(x)) if x == d.package => Ok(format!("{p} is diverted by {x}")),
        Ok(other) => Err(format!("{p}: diverted by {other:?}, not {}", d.package)),
        Err(e) => Err(format!("{e:#}")),
    });
    out.push(
        verify_clean(&d.package)
            .map(|_| format!("dpkg --verify {} is clean", d.package))
            .map_err(|e| format!("{e:#}")),
    );
    out.extend(steps::check_bindings(copy, r));
    out
}
