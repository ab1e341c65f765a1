//! Apply to a pip-owned copy through pip: an overlay wheel made from the patched library
//! ([`crate::package::library::library_wheel`]) is installed into that Python's environment with
//! its own pip, and taken back with `pip uninstall`. Nothing pip's owner (torch, TheRock's
//! `rocm-sdk-libraries`) installed is touched, so its `RECORD` hashes hold throughout.
//!
//! The wheel's start-up hook (`rcclfix_rccl.pth`) loads the patched copy with `RTLD_GLOBAL`
//! before anything else runs, so it is first in the global scope and every RCCL symbol a consumer
//! resolves binds to it. That alone leaves the unpatched copy mapped beside it in the legacy
//! layout (`libtorch_hip.so` needs `librccl.so`, the copy's SONAME is `librccl.so.1`): the loader
//! opens it, runs its constructors and registers its kernels with HIP. So the shipped copy is
//! given the SONAME its consumers need ([`super::soname`]), and the loader takes it for theirs.
//!
//! The self-test ([`check`]) asks the real loader in a real process of that Python (the hook
//! runs as it does for the user): `LD_DEBUG=bindings` with `LD_BIND_NOW=1` says which file each
//! of the consumer's symbols binds to, and `/proc/self/maps` which `librccl` files are mapped.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::record::{self, FixRecord, Mechanism};
use super::steps;
use super::{Copy, Owner};

pub use super::record::PipFix;

/// The overlay's distribution name (one per environment: `rcclfix_rccl/` is its import package).
pub const DISTRIBUTION: &str = "rcclfix_rccl_fix";
/// The installed library, relative to site-packages.
pub const INSTALLED: &str = "rcclfix_rccl/lib/librccl.so.1";
const PIP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);
const PROBE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

impl PipFix {
    /// The installed library: `<site>/rcclfix_rccl/lib/librccl.so.1`.
    pub fn installed(&self) -> PathBuf {
        self.site.join(INSTALLED)
    }
}

/// Apply the proven patch to the pip-owned `copy` by installing an overlay wheel with `python`'s
/// pip. Returns the record kept in `$RCCLFIX_HOME/fixes/<id>/` (with the wheel).
///
/// Errors (nothing installed): the copy is not pip-owned or its `RECORD` hash does not match it;
/// an overlay is already installed there; the patch, the SONAME, the wheel or pip fail; the
/// installed library is not the one shipped (then pip uninstall runs again).
pub fn apply(copy: &Copy, targets: &[String], python: &Path) -> anyhow::Result<FixRecord> {
    let path = &copy.path;
    let Owner::Pip {
        record,
        record_hash_matches,
        ..
    } = &copy.owner
    else {
        anyhow::bail!("{}: not owned by pip", path.display());
    };
    if *record_hash_matches != Some(true) {
        anyhow::bail!(
            "{}: its sha256 is not the one {} gives (already changed?); nothing was changed",
            path.display(),
            record.display()
        );
    }
    let site = record
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow::anyhow!("{}: no site-packages folder", record.display()))?
        .to_path_buf();
    if std::fs::symlink_metadata(site.join("rcclfix_rccl")).is_ok() {
        anyhow::bail!(
            "{}: an rcclfix overlay is already installed there (rcclfix_rccl/); pip uninstall it (or rcclfix fix --undo) first; nothing was changed",
            site.display()
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
    let patched = scratch.path().join("librccl.so.1");
    let (id, keep, rec) = steps::patch_planned(copy, &opts, &patched)?;
    let soname = give_needed_soname(&patched, copy)?;
    steps::rescan_clean(&patched, &copy.decision)?;
    let version = format!("1+{id}");
    let w = crate::package::library::LibraryWheel {
        distribution: DISTRIBUTION.into(),
        version: version.clone(),
        summary: "rcclfix fix: a patched copy of a pip-installed librccl, preloaded".into(),
        manifest: crate::package::library::LibraryManifest {
            schema_version: crate::package::library::LIBRARY_MANIFEST_VERSION,
            kind: "library-overlay".into(),
            rcclfix_version: env!("CARGO_PKG_VERSION").into(),
            library_sha256: String::new(),
            library_size: 0,
            original: Some(crate::package::library::Original {
                path: path.clone(),
                sha256: copy.sha256.clone(),
                owner: copy.owner.describe(),
            }),
            soname_changed_to: soname.clone(),
            patch: Some(serde_json::to_value(&rec)?),
            unverified: super::UNVERIFIED.into(),
        },
    };
    let kept = crate::fsutil::AtomicDir::new(&keep)?;
    let (wheel, shipped) = crate::package::library::library_wheel(&patched, &w, kept.path())?;
    let pip = PipFix {
        python: python.to_path_buf(),
        site: site.clone(),
        owner_record: record.clone(),
        version,
        wheel: wheel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        soname,
    };
    let record_doc = FixRecord {
        schema_version: record::FIX_SCHEMA_VERSION,
        id: id.clone(),
        path: path.clone(),
        original_sha256: copy.sha256.clone(),
        patched_sha256: shipped.clone(),
        size: rec.size,
        mode: 0o755,
        asserts: opts.asserts,
        targets: targets.to_vec(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        rcclfix_version: env!("CARGO_PKG_VERSION").to_string(),
        mechanism: Mechanism::Pip,
        pip: Some(pip.clone()),
        dpkg: None,
    };
    let mut doc = serde_json::to_vec_pretty(&record_doc)?;
    doc.push(b'\n');
    fs_err::write(kept.path().join("record.json"), doc)?;
    kept.commit()?;
    let installed = (|| -> anyhow::Result<()> {
        pip_run(
            python,
            &["install", "--no-index", "--no-deps"],
            Some(&wheel_at(&id, &pip)),
        )?;
        let got = crate::fsutil::sha256_file(&pip.installed())?;
        if got != shipped {
            anyhow::bail!(
                "{}: sha256 {got} after pip install, not the shipped {shipped}",
                pip.installed().display()
            );
        }
        Ok(())
    })();
    if let Err(e) = installed {
        let _ = pip_run(python, &["uninstall", "-y", DISTRIBUTION], None);
        let _ = std::fs::remove_dir_all(&keep);
        return Err(e.context(format!(
            "{}: the overlay was not installed; nothing was changed",
            path.display()
        )));
    }
    Ok(record_doc)
}

fn wheel_at(id: &str, pip: &PipFix) -> PathBuf {
    record::fixes_dir().join(id).join(&pip.wheel)
}

/// Give the patched file at `patched` the SONAME its consumers need, when they all need one name
/// that is not its SONAME. Returns the new SONAME, or `None` when nothing changed.
///
/// Errors: the consumers need different names; the SONAME cannot be cut to the name.
fn give_needed_soname(patched: &Path, copy: &Copy) -> anyhow::Result<Option<String>> {
    let mut names: Vec<&str> = copy.consumers.iter().map(|b| b.needed.as_str()).collect();
    names.sort();
    names.dedup();
    let want = match names.as_slice() {
        [] => return Ok(None),
        [one] => *one,
        many => anyhow::bail!(
            "{}: its consumers need it under several names ({}); one overlay cannot be all of them; nothing was changed",
            copy.path.display(),
            many.join(", ")
        ),
    };
    let bytes = fs_err::read(patched)?;
    match super::soname::soname_cut(&bytes, want) {
        Ok(super::soname::SonameCut::Already) => Ok(None),
        Ok(super::soname::SonameCut::At(off)) => {
            use std::io::{Seek, Write};
            let mut f = fs_err::OpenOptions::new().write(true).open(patched)?;
            f.seek(std::io::SeekFrom::Start(off))?;
            f.write_all(&[0])?;
            f.sync_all()?;
            Ok(Some(want.to_string()))
        }
        Err(e) => anyhow::bail!(
            "{}: its consumers need {want}, and the overlay cannot carry that SONAME: {e:#}; nothing was changed",
            copy.path.display()
        ),
    }
}

/// Run `python -m pip <args> [file]` quietly, offline.
fn pip_run(python: &Path, args: &[&str], file: Option<&Path>) -> anyhow::Result<String> {
    let mut c = crate::process::Cmd::new("run pip", python)
        .args(["-m", "pip"])
        .args(args)
        .args(["--disable-pip-version-check", "--no-input", "-q"]);
    if let Some(f) = file {
        c = c.arg(f);
    }
    c.read_with_deadline(PIP_DEADLINE)
}

/// The owner's `RECORD` line for the copy still gives the copy's sha256 (`Ok(())`), or why not.
fn owner_record_verifies(r: &FixRecord, pip: &PipFix) -> anyhow::Result<()> {
    let text = crate::fsutil::read_text_capped(
        &pip.owner_record,
        super::owner::MAX_RECORD_BYTES,
        "a RECORD",
    )?;
    let rel = r
        .path
        .strip_prefix(&pip.site)
        .map_err(|_| anyhow::anyhow!("{}: not under {}", r.path.display(), pip.site.display()))?;
    let want = super::owner::record_hash(&crate::fsutil::sha256_file(&r.path)?);
    match super::owner::record_lists(&text, rel) {
        Some(Some(h)) if h == want => Ok(()),
        _ => anyhow::bail!(
            "{}: its RECORD line does not give the file's sha256 ({})",
            r.path.display(),
            pip.owner_record.display()
        ),
    }
}

/// Check a pip record read from `$RCCLFIX_HOME` before anything runs: absolute paths without
/// `..`, the overlay's own names, the interpreter's prefix above its site-packages.
///
/// Errors: one line naming what is wrong.
pub fn check_record(r: &FixRecord) -> anyhow::Result<&PipFix> {
    let pip = r
        .pip
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("a pip fix without its pip part"))?;
    for p in [&pip.python, &pip.site, &pip.owner_record] {
        if !p.is_absolute()
            || p.components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            anyhow::bail!("{}: not an absolute path", p.display());
        }
    }
    if pip.version != format!("1+{}", r.id)
        || pip.wheel
            != format!(
                "{DISTRIBUTION}-{}-py3-none-{}",
                pip.version,
                pip.wheel
                    .rsplit_once("-py3-none-")
                    .map(|x| x.1)
                    .unwrap_or("")
            )
        || pip.wheel.contains('/')
        || !pip.owner_record.starts_with(&pip.site)
        || !r.path.starts_with(&pip.site)
    {
        anyhow::bail!("not the overlay this fix installs (its names or paths differ)");
    }
    // The interpreter's path as recorded (a venv's bin/python is a link out of the venv): its
    // prefix, the folder above bin/, must hold the site-packages folder.
    let prefix = pip.python.parent().and_then(Path::parent);
    if !prefix.is_some_and(|p| pip.site.starts_with(p)) {
        anyhow::bail!(
            "{}: its site-packages {} is not under its prefix; not run",
            pip.python.display(),
            pip.site.display()
        );
    }
    Ok(pip)
}

/// Undo a pip fix: `pip uninstall` the overlay, then check that it is gone and that the owner's
/// `RECORD` line for the copy verifies.
///
/// Errors: see [`check_record`]; the overlay installed there is not this fix's (its library's
/// sha256); pip fails; the files are still there afterwards.
pub fn undo(r: &FixRecord) -> anyhow::Result<()> {
    let pip = check_record(r)?;
    let installed = pip.installed();
    if installed.exists() {
        let now = crate::fsutil::sha256_file(&installed)?;
        if now != r.patched_sha256 {
            anyhow::bail!(
                "{}: sha256 {now}, not the library fix {} installed ({}); not uninstalled",
                installed.display(),
                r.id,
                r.patched_sha256
            );
        }
        pip_run(&pip.python, &["uninstall", "-y", DISTRIBUTION], None)?;
    }
    if std::fs::symlink_metadata(&installed).is_ok() {
        anyhow::bail!("{}: still there after pip uninstall", installed.display());
    }
    owner_record_verifies(r, pip)?;
    let now = crate::fsutil::sha256_file(&r.path)?;
    if now != r.original_sha256 {
        anyhow::bail!(
            "{}: sha256 {now}, not the original {}",
            r.path.display(),
            r.original_sha256
        );
    }
    Ok(())
}

/// What the real loader did in a process of the fix's Python that loaded one consumer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Measured {
    /// `librccl*` files mapped (canonical), sorted.
    pub mapped: Vec<PathBuf>,
    /// `(symbol, file)` for each of the consumer's symbols bound to a `librccl*` file or to the
    /// installed overlay (canonical), in the loader's order, each once.
    pub bindings: Vec<(String, PathBuf)>,
}

/// Load `consumer` in a process of `python` (its start-up hook runs as for the user) with
/// `LD_DEBUG=bindings` and `LD_BIND_NOW=1`, and report what the loader mapped and bound.
///
/// Errors: the process fails (the consumer cannot be loaded there), or its output is unreadable.
pub fn measure(python: &Path, consumer: &Path, overlay: Option<&Path>) -> anyhow::Result<Measured> {
    let dir = crate::fsutil::TempDir::new("rcclfix-bindings-")?;
    let log = dir.path().join("ld");
    let script = "import ctypes, json, sys\nctypes.CDLL(sys.argv[1])\nprint(json.dumps(sorted({l.split()[-1] for l in open('/proc/self/maps') if '/' in l})))";
    let out = crate::process::Cmd::new("load a consumer with the loader's own account", python)
        .args(["-c", script])
        .arg(consumer)
        .env("LD_DEBUG", "bindings")
        .env("LD_BIND_NOW", "1")
        .env("LD_DEBUG_OUTPUT", &log)
        .read_with_deadline(PROBE_DEADLINE)?;
    let canon = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
    let overlay = overlay.map(|o| std::fs::canonicalize(o).unwrap_or_else(|_| o.to_path_buf()));
    let is_rccl = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("librccl"))
            || overlay.as_deref() == Some(p)
    };
    let all: Vec<String> = serde_json::from_str(out.trim())
        .map_err(|e| anyhow::anyhow!("the probe's answer is not a JSON list: {e}"))?;
    let mut m = Measured {
        mapped: all
            .iter()
            .map(|p| canon(p))
            .filter(|p| is_rccl(p))
            .collect(),
        bindings: vec![],
    };
    m.mapped.sort();
    m.mapped.dedup();
    let consumer = canon(&consumer.to_string_lossy());
    for e in fs_err::read_dir(dir.path())? {
        let text = crate::fsutil::read_text_capped(&e?.path(), 256 << 20, "the loader's log")?;
        for line in text.lines() {
            let Some((file, to, sym)) = parse_binding(line) else {
                continue;
            };
            let (file, to) = (canon(file), canon(to));
            if file == consumer && is_rccl(&to) && !m.bindings.iter().any(|(s, _)| s == sym) {
                m.bindings.push((sym.to_string(), to));
            }
        }
    }
    Ok(m)
}

/// `(file, to, symbol)` of an `LD_DEBUG=bindings` line: `binding file F [0] to T [0]: normal
/// symbol `S'` (glibc elf/dl-lookup.c, `_dl_debug_bindings`).
fn parse_binding(line: &str) -> Option<(&str, &str, &str)> {
    let rest = line.split_once("binding file ")?.1;
    let (file, rest) = rest.split_once(" [")?;
    let rest = rest.split_once("] to ")?.1;
    let (to, rest) = rest.split_once(" [")?;
    let sym = rest.split_once('`')?.1.split_once('\'')?.0;
    Some((file, to, sym))
}

/// The self-test after a pip fix: per consumer, loaded in the fix's Python, every RCCL symbol it
/// binds must bind to the installed overlay and the original copy must not be mapped; and the
/// installed file must be the shipped one and scan clean. One line each, `Ok` when it holds.
pub fn check(copy: &Copy, r: &FixRecord) -> Vec<Result<String, String>> {
    let Some(pip) = &r.pip else {
        return vec![Err("not a pip fix".into())];
    };
    let installed = pip.installed();
    let mut out = vec![match crate::fsutil::sha256_file(&installed) {
        Ok(s) if s == r.patched_sha256 => match steps::rescan_clean(&installed, &copy.decision) {
            Ok(()) => Ok(format!(
                "{} is the shipped file and scans clean",
                installed.display()
            )),
            Err(e) => Err(format!("{e:#}")),
        },
        Ok(s) => Err(format!(
            "{}: sha256 {s}, not the shipped one",
            installed.display()
        )),
        Err(e) => Err(format!("{e:#}")),
    }];
    let original = std::fs::canonicalize(&copy.path).unwrap_or_else(|_| copy.path.clone());
    for b in &copy.consumers {
        let c = b.consumer.display();
        out.push(match measure(&pip.python, &b.consumer, Some(&installed)) {
            Err(e) => Err(format!(
                "{c}: could not be loaded in {}: {e:#}",
                pip.python.display()
            )),
            Ok(m) => {
                let inst = std::fs::canonicalize(&installed).unwrap_or(installed.clone());
                let wrong: Vec<&(String, PathBuf)> =
                    m.bindings.iter().filter(|(_, f)| *f != inst).collect();
                if !wrong.is_empty() {
                    Err(format!(
                        "{c}: {} symbol(s) bind elsewhere, e.g. {} to {}",
                        wrong.len(),
                        wrong[0].0,
                        wrong[0].1.display()
                    ))
                } else if m.mapped.contains(&original) {
                    Err(format!(
                        "{c}: the original {} is still mapped beside the overlay",
                        original.display()
                    ))
                } else if !m.mapped.contains(&inst) {
                    Err(format!(
                        "{c}: the overlay is not mapped (is RCCLFIX_DISABLE set?)"
                    ))
                } else {
                    Ok(format!(
                        "{c} binds {} symbol(s) to {} (the patched file); mapped: {}",
                        m.bindings.len(),
                        inst.display(),
                        m.mapped
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_binding_lines() {
        let l = "     12345:\tbinding file /v/torch/lib/libtorch_hip.so [0] to /v/rcclfix_rccl/lib/librccl.so.1 [0]: normal symbol `ncclAllReduce'";
        assert_eq!(
            parse_binding(l),
            Some((
                "/v/torch/lib/libtorch_hip.so",
                "/v/rcclfix_rccl/lib/librccl.so.1",
                "ncclAllReduce"
            ))
        );
        let v = "binding file /a.so [0] to /b.so [0]: normal symbol `memcpy' [GLIBC_2.14]";
        assert_eq!(parse_binding(v), Some(("/a.so", "/b.so", "memcpy")));
        assert_eq!(parse_binding("calling init: /b.so"), None);
    }
}
