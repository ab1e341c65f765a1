//! `rcclfix fix` (issue 37): find every `librccl` programs on this machine load, name each
//! copy's owner, decide per copy whether `patch` or `patch --asserts` proves it, and apply it
//! through the owner's mechanism: a copy nobody owns is replaced atomically ([`apply`]), a
//! pip-owned copy gets an overlay wheel installed with that environment's pip ([`pip`]); each is
//! taken back with `--undo`.
//!
//! Stages, one file each, nothing pointing back: [`find`] (doctor's discovery plus the loader's
//! search: `DT_NEEDED`, `DT_RPATH`/`DT_RUNPATH` with `$ORIGIN`, `VLLM_NCCL_SO_PATH`, the ld.so
//! cache) → [`plan`] here groups what was seen by file → [`owner`] (dpkg, pip's `RECORD`, or
//! none) → [`decide`] (the scanner, then the existing patch code in a scratch folder) →
//! [`apply`] (an unowned copy: temp file + rename beside it, the original kept under
//! `$RCCLFIX_HOME/fixes/<id>/`; `--list`, `--undo`) or [`pip`] (the overlay wheel, with
//! [`soname`] giving it the SONAME its consumers need, and a self-test in a real process).
//!
//! A dpkg-owned copy gets a `.deb` overlay that diverts it, installed with apt ([`dpkg`]).
//! The three applies share [`steps`] (patch into a scratch file, rescan, check the bindings) and
//! write a [`record`] (`FixRecord`, with the pip and dpkg parts); [`apply`] also reads records
//! back for `--list` and `--undo`, handing a pip or dpkg fix to [`pip`] or [`dpkg`].
//! The rewritten kernels have not run on AMD hardware here; every plan says so and names
//! `rcclfix verify --lib`.

pub mod apply;
pub mod decide;
pub mod dpkg;
pub mod find;
pub mod owner;
pub mod pip;
pub mod record;
pub mod release;
pub mod soname;
pub mod steps;

use std::path::PathBuf;

use serde::Serialize;

pub use decide::Decision;
pub use find::{Binding, Sources};
pub use owner::Owner;
pub use record::{FixRecord, Mechanism, FIXES_DIR};

/// Version of the plan's JSON shape (`rcclfix fix --dry-run --json`).
pub const PLAN_SCHEMA_VERSION: u32 = 1;

/// What every plan and every applied fix says about the rewritten kernels.
pub const UNVERIFIED: &str = "the rewritten kernels have not run on AMD hardware here: run `rcclfix verify --lib <the fixed library>` on two GPUs before you use it";

/// What every plan says about the proof it rests on: `fix` applies only what `patch` proves, and
/// What `fix` inherits from `patch`'s proof (`docs/patch.md`).
pub const PROOF_CAVEAT: &str = "fix applies only what `rcclfix patch` proves; patch follows each declaring kernel's kernarg segment pointer, and what it decides, through every instruction, under the assumptions docs/patch.md states, and takes a call through a function table to land on one of its entries (docs/patch.md says what that assumes), and the patched library is not verified on AMD hardware here";

/// One copy of `librccl` and what `fix` would do with it.
#[derive(Debug, Clone, Serialize)]
pub struct Copy {
    /// The file (canonical: the copy every path below leads to).
    pub path: PathBuf,
    /// The paths it was found at (links included), each once.
    pub seen_as: Vec<PathBuf>,
    /// Why it is a candidate, each reason once.
    pub found_via: Vec<String>,
    /// The consumers found to bind to it, and how.
    pub consumers: Vec<Binding>,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: String,
    /// Who owns it.
    pub owner: Owner,
    /// What `fix` would do.
    pub decision: Decision,
    /// For a refused copy: the rebuild of its release line, as doctor would advise it
    /// ([`release::rebuild_for`]).
    pub rebuild: Option<crate::doctor::release::RebuildAdvice>,
    /// For a pip-owned copy: the interpreter (from `--python`) whose site-packages holds its
    /// owner's `RECORD`, whose pip installs the overlay.
    pub python: Option<PathBuf>,
    /// What applying would do: `replace in place` (unowned and proven), an overlay wheel (pip),
    /// `nothing` (not affected), or why not.
    pub apply: String,
}

/// A path seen that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unread {
    /// The path as found.
    pub path: PathBuf,
    /// Why it was not read.
    pub why: String,
}

/// The plan: every copy found, in the order found.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// [`PLAN_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// rcclfix version.
    pub rcclfix_version: String,
    /// Targets asked for (empty: every target each copy carries).
    pub targets: Vec<String>,
    /// The copies.
    pub copies: Vec<Copy>,
    /// Paths seen that could not be read (a dangling link, a special file), with why.
    pub unread: Vec<Unread>,
    /// [`UNVERIFIED`].
    pub unverified: String,
    /// [`PROOF_CAVEAT`].
    pub proof_caveat: String,
    /// When this machine is a virtual machine: that the VM's configuration comes first
    /// ([`vm_first`]).
    pub vm: Option<String>,
}

/// When the machine whose sysfs and procfs are at `sysfs`, `proc` is a virtual machine
/// ([`crate::doctor::vm::detect`]: DMI and the `hypervisor` CPU flag): the sentence that puts the
/// VM's configuration first. A VM that passes the GPU as part of a multifunction device withholds
/// AtomicOps from it; fixing that layout needs no patched RCCL, and only doctor (as root, reading
/// PCI configuration space) can tell whether this VM does.
pub fn vm_first(sysfs: &std::path::Path, proc: &std::path::Path) -> Option<String> {
    let h = crate::doctor::vm::detect(sysfs, proc);
    h.is_vm.then(|| {
        format!(
            "this machine is a virtual machine ({}): if its PCIe layout withholds AtomicOps from the GPU (a GPU passed through as part of a multifunction device), fix the VM configuration first, which needs no patched RCCL; `rcclfix doctor` (as root) says whether it does",
            h.name.as_deref().unwrap_or("hypervisor unknown")
        )
    })
}

impl Plan {
    /// Exit code of a dry run: 0 when every copy is not affected or proven, 1 when a copy's
    /// patch is refused because hostcall code is present, 2 when a copy could not be decided
    /// (or a path could not be read).
    pub fn exit_code(&self) -> u8 {
        let mut code = crate::EXIT_OK;
        for c in &self.copies {
            if let Decision::Refused { uses_hostcall, .. } = &c.decision {
                code = code.max(if *uses_hostcall {
                    crate::EXIT_CHECK_FAILED
                } else {
                    crate::EXIT_ERROR
                });
            }
        }
        if !self.unread.is_empty() {
            code = code.max(crate::EXIT_ERROR);
        }
        code
    }
}

/// Find, own and decide every copy the sources name; nothing on disk changes.
///
/// Errors: a `--library` that is missing, a folder or a special file (one line naming it).
pub fn plan(src: &Sources, targets: &[String]) -> anyhow::Result<Plan> {
    for p in &src.libraries {
        let meta = std::fs::metadata(p)
            .map_err(|e| anyhow::anyhow!("--library {}: cannot open: {e}", p.display()))?;
        if !meta.is_file() {
            anyhow::bail!(
                "--library {}: not a regular file ({}); give a librccl.so file",
                p.display(),
                crate::fsutil::file_kind(&meta)
            );
        }
    }
    let mut copies: Vec<Copy> = Vec::new();
    let mut unread: Vec<Unread> = Vec::new();
    for seen in find::find(src) {
        let file = match std::fs::canonicalize(&seen.path) {
            Ok(f) if f.is_file() => f,
            Ok(f) => {
                push_unread(
                    &mut unread,
                    seen.path,
                    format!("{} is not a regular file", f.display()),
                );
                continue;
            }
            Err(e) => {
                push_unread(&mut unread, seen.path, format!("cannot resolve it: {e}"));
                continue;
            }
        };
        if let Some(c) = copies.iter_mut().find(|c| c.path == file) {
            if !c.seen_as.contains(&seen.path) {
                c.seen_as.push(seen.path);
            }
            if !c.found_via.contains(&seen.via) {
                c.found_via.push(seen.via);
            }
            if let Some(b) = seen.binding {
                if !c.consumers.contains(&b) {
                    c.consumers.push(b);
                }
            }
            continue;
        }
        copies.push(Copy {
            path: file,
            seen_as: vec![seen.path],
            found_via: vec![seen.via],
            consumers: seen.binding.into_iter().collect(),
            size: 0,
            sha256: String::new(),
            owner: Owner::None,
            decision: Decision::NotAffected { targets: vec![] },
            rebuild: None,
            python: None,
            apply: String::new(),
        });
    }
    for c in &mut copies {
        let read = crate::fsutil::open_regular(&c.path)
            .and_then(|(_, meta)| Ok((meta.len(), crate::fsutil::sha256_file(&c.path)?)));
        match read {
            Ok((size, sha256)) => (c.size, c.sha256) = (size, sha256),
            Err(e) => {
                c.decision = Decision::Refused {
                    targets: targets.to_vec(),
                    why: format!("{e:#}"),
                    uses_hostcall: false,
                };
                continue;
            }
        }
        c.owner = owner::owner_of(&c.seen_as, &c.path, &c.sha256);
        c.decision = decide::decide(&c.path, targets);
        if let Decision::Refused { targets, .. } = &c.decision {
            c.rebuild = Some(release::rebuild_for(&c.owner, &c.path, targets));
        }
        if let Owner::Pip { record, .. } = &c.owner {
            c.python = python_of(&src.pythons, record);
        }
    }
    for c in &mut copies {
        c.apply = apply_line(c);
    }
    Ok(Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        rcclfix_version: env!("CARGO_PKG_VERSION").to_string(),
        targets: targets.to_vec(),
        copies,
        unread,
        unverified: UNVERIFIED.to_string(),
        proof_caveat: PROOF_CAVEAT.to_string(),
        vm: None,
    })
}

fn push_unread(unread: &mut Vec<Unread>, path: PathBuf, why: String) {
    if !unread.iter().any(|u| u.path == path) {
        unread.push(Unread { path, why });
    }
}

/// The interpreter of `pythons` whose folders hold the site-packages folder of `record` (a
/// `*.dist-info/RECORD`).
fn python_of(pythons: &[(PathBuf, Vec<PathBuf>)], record: &std::path::Path) -> Option<PathBuf> {
    let site = record.parent()?.parent()?;
    let site = std::fs::canonicalize(site).unwrap_or_else(|_| site.to_path_buf());
    pythons
        .iter()
        .find(|(_, roots)| {
            roots
                .iter()
                .any(|r| std::fs::canonicalize(r).is_ok_and(|r| r == site))
        })
        .map(|(py, _)| py.clone())
}

/// What applying would do with a copy.
pub fn apply_line(c: &Copy) -> String {
    match &c.decision {
        Decision::NotAffected { .. } => return "nothing (not affected)".into(),
        Decision::Refused { .. } => return "nothing (refused; the copy is left as it is)".into(),
        _ => {}
    }
    match (&c.owner, &c.python) {
        (Owner::None, _) => "replace in place (temp file + rename; original kept under $RCCLFIX_HOME/fixes/)".into(),
        (Owner::Pip { record_hash_matches: Some(true), .. }, Some(py)) => format!(
            "install an overlay wheel of the patched copy with {} -m pip (its hook preloads it; {} itself is not touched)",
            py.display(),
            c.path.display()
        ),
        (Owner::Pip { record_hash_matches: Some(true), .. }, None) => "nothing: no interpreter of this environment was given (rerun with --python <its python>)".into(),
        (Owner::Pip { .. }, _) => "nothing: its sha256 is not the one its RECORD gives (already changed)".into(),
        (Owner::Dpkg { package, .. }, _) => format!(
            "install a .deb overlay of the patched copy with apt (it diverts {}, which {package} keeps; apt remove gives it back)",
            c.path.display()
        ),
        (Owner::Unknown { .. }, _) => "nothing (its owner could not be told)".into(),
    }
}
