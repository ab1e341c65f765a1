//! Find every `librccl` that programs on this machine load, and which consumer binds to which
//! copy: doctor's discovery ([`crate::doctor::library::discover`]: `VLLM_NCCL_SO_PATH`, the
//! active Python's `torch/lib`, `_rocm_sdk_libraries/lib` and `_rocm_sdk_devel/lib`, `$ROCM_PATH`
//! and `/opt/rocm*`), the ld.so cache (`ldconfig -p`), and the loader's search for each
//! consumer's `DT_NEEDED` `librccl*` entry.
//!
//! The search order is glibc's (ld.so(8), "Dynamic linker search order"): `DT_RPATH` when the
//! object has no `DT_RUNPATH`, then `DT_RUNPATH`, then the ld.so cache, then the default folders
//! `/lib` and `/usr/lib` (and their `64` forms); `$ORIGIN` (or `${ORIGIN}`) is the folder of the
//! consumer as it was found. Not followed: `LD_LIBRARY_PATH` and `LD_PRELOAD` (they belong to a
//! process's environment, not to the files), the `DT_RPATH` of the object that loaded the
//! consumer, `$LIB` and `$PLATFORM`, and a `DT_NEEDED` that names a path.
//!
//! Consumers are the shared libraries (`lib*.so*`) beside the copies in a Python environment's
//! library folders (`torch/lib/libtorch_hip.so` in the legacy wheel layout). Every file is looked
//! at without being opened unless it is a regular file, and ELF headers are read through a
//! bounded map ([`crate::fsutil::open_regular`], [`crate::fsutil::map_readonly`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{Dyn, FileHeader};
use object::Endianness;
use serde::Serialize;

/// Where one copy was seen: the path as found, and why it is a candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The path as found (a link is kept as the link; [`super::plan`] groups by the file).
    pub path: PathBuf,
    /// Why: `--library`, `VLLM_NCCL_SO_PATH`, `torch/lib (legacy wheel)`, `ld.so cache`, ….
    pub via: String,
    /// The consumer whose `DT_NEEDED` entry the loader resolves to this path, when that is how
    /// it was found.
    pub binding: Option<Binding>,
}

/// A consumer and the copy its `DT_NEEDED` entry resolves to, by the loader's search order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    /// The consumer, e.g. `…/torch/lib/libtorch_hip.so`.
    pub consumer: PathBuf,
    /// The `DT_NEEDED` entry, e.g. `librccl.so` or `librccl.so.1`.
    pub needed: String,
    /// How the loader gets there: `DT_RPATH $ORIGIN`, `DT_RUNPATH …`, `ld.so cache`, `default
    /// folder /usr/lib`.
    pub via: String,
}

/// What to search ([`find`]).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `--library FILE`s, as given.
    pub libraries: Vec<PathBuf>,
    /// `--rocm DIR`s: their `lib/` folders are searched.
    pub rocm: Vec<PathBuf>,
    /// Each `--python`'s site-packages folders (and torch's package folder), canonical.
    pub python_roots: Vec<PathBuf>,
    /// Each `--python` with its folders (as in `python_roots`): the interpreter whose pip
    /// installs a pip-owned copy's overlay.
    pub pythons: Vec<(PathBuf, Vec<PathBuf>)>,
    /// Also doctor's own discovery and every copy the ld.so cache names (no `--python`,
    /// `--rocm` or `--library` given).
    pub machine: bool,
}

/// The library folders of a Python environment where the wheels put `librccl` and its
/// consumers (pytorch/pytorch#191366: the legacy wheel and TheRock's layouts).
const PYTHON_LIB_DIRS: [(&str, &str); 3] = [
    ("torch/lib", "torch/lib (legacy wheel)"),
    (
        "_rocm_sdk_libraries/lib",
        "_rocm_sdk_libraries/lib (TheRock wheel)",
    ),
    (
        "_rocm_sdk_devel/lib",
        "_rocm_sdk_devel/lib (TheRock devel copy)",
    ),
];

/// At most this many consumers are read per folder (torch/lib holds about 60 libraries).
const MAX_CONSUMERS_PER_DIR: usize = 512;
/// The ld.so cache probe's deadline.
const LDCONFIG_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Every copy the sources name, with the consumers found to bind to them. Paths that are not
/// regular files (or links to one) are left out, except `--library`, which is checked by the
/// caller.
///
/// Errors: none; a consumer that cannot be read is skipped (with a debug log line).
pub fn find(src: &Sources) -> Vec<Seen> {
    let mut out: Vec<Seen> = Vec::new();
    for p in &src.libraries {
        out.push(Seen {
            path: p.clone(),
            via: "--library".into(),
            binding: None,
        });
    }
    for r in &src.rocm {
        for f in rccl_files_in(&r.join("lib")) {
            out.push(Seen {
                path: f,
                via: format!("--rocm {}", r.display()),
                binding: None,
            });
        }
    }
    // Read only when something needs it (the machine's copies, or a consumer's search).
    let cache = std::cell::OnceCell::new();
    let cache = || cache.get_or_init(LdCache::load);
    let mut lib_dirs: Vec<PathBuf> = Vec::new();
    for root in &src.python_roots {
        for (sub, via) in PYTHON_LIB_DIRS {
            // A root may be torch's own package folder's `lib` (the probe adds it).
            let dir = if root.ends_with(sub) {
                root.clone()
            } else {
                root.join(sub)
            };
            if !dir.is_dir() || lib_dirs.contains(&dir) {
                continue;
            }
            for f in rccl_files_in(&dir) {
                out.push(Seen {
                    path: f,
                    via: via.to_string(),
                    binding: None,
                });
            }
            lib_dirs.push(dir);
        }
    }
    if src.machine {
        for c in crate::doctor::library::discover() {
            let wheel = c.found_via.contains("torch/lib") || c.found_via.contains("_rocm_sdk");
            if let Some(d) = c.path.parent().filter(|_| wheel) {
                if !lib_dirs.iter().any(|x| x == d) {
                    lib_dirs.push(d.to_path_buf());
                }
            }
            out.push(Seen {
                path: c.path,
                via: c.found_via,
                binding: None,
            });
        }
        for (name, paths) in &cache().entries {
            if name.starts_with("librccl") {
                for p in paths {
                    out.push(Seen {
                        path: p.clone(),
                        via: format!("ld.so cache ({name})"),
                        binding: None,
                    });
                }
            }
        }
    }
    for dir in &lib_dirs {
        for consumer in consumers_in(dir) {
            out.extend(bindings_of(&consumer, cache()));
        }
    }
    out
}

/// The regular files (not links) in `dir` whose names `keep` accepts, sorted (none when `dir`
/// cannot be read).
fn regular_files_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| keep(name_of(p)))
        .collect();
    v.sort();
    v
}

/// The regular files (not links) named `librccl.so*` in `dir`, sorted.
fn rccl_files_in(dir: &Path) -> Vec<PathBuf> {
    regular_files_in(dir, |n| n.starts_with("librccl.so"))
}

fn name_of(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// The shared libraries in `dir` other than RCCL itself (`lib*.so*`, regular files), sorted, at
/// most [`MAX_CONSUMERS_PER_DIR`].
fn consumers_in(dir: &Path) -> Vec<PathBuf> {
    let mut v = regular_files_in(dir, |n| {
        n.starts_with("lib") && n.contains(".so") && !n.starts_with("librccl")
    });
    v.truncate(MAX_CONSUMERS_PER_DIR);
    v
}

/// The dynamic entries of an ELF file the loader's search needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicInfo {
    /// `DT_NEEDED`, in file order.
    pub needed: Vec<String>,
    /// `DT_RPATH`, split at `:`.
    pub rpath: Vec<String>,
    /// `DT_RUNPATH`, split at `:`.
    pub runpath: Vec<String>,
}

/// Read `path`'s `DT_NEEDED`, `DT_RPATH` and `DT_RUNPATH` (64-bit little-endian ELF).
///
/// Errors (one line naming the file): not a regular file, not such an ELF file, no dynamic
/// section, a malformed table.
pub fn dynamic_info(path: &Path) -> anyhow::Result<DynamicInfo> {
    let (f, meta) = crate::fsutil::open_regular(path)?;
    if meta.len() == 0 {
        anyhow::bail!("{}: empty file", path.display());
    }
    let map = crate::fsutil::map_readonly(&f)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    parse_dynamic(&map).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn parse_dynamic(data: &[u8]) -> anyhow::Result<DynamicInfo> {
    let e = |x: object::read::Error| anyhow::anyhow!("not a readable ELF file: {x}");
    let header = elf::FileHeader64::<Endianness>::parse(data).map_err(e)?;
    let endian = header.endian().map_err(e)?;
    let sections = header.sections(endian, data).map_err(e)?;
    let (dynamic, link) = sections
        .dynamic(endian, data)
        .map_err(e)?
        .ok_or_else(|| anyhow::anyhow!("no dynamic section"))?;
    let strings = sections.strings(endian, data, link).map_err(e)?;
    let mut info = DynamicInfo::default();
    for d in dynamic {
        let tag = d.d_tag(endian) as u32;
        let list = match tag {
            elf::DT_NEEDED => None,
            elf::DT_RPATH => Some(&mut info.rpath),
            elf::DT_RUNPATH => Some(&mut info.runpath),
            _ => continue,
        };
        let s = String::from_utf8_lossy(d.string(endian, strings).map_err(e)?).into_owned();
        match list {
            None => info.needed.push(s),
            Some(l) => l.extend(s.split(':').filter(|x| !x.is_empty()).map(String::from)),
        }
    }
    Ok(info)
}

/// The copies `consumer`'s `librccl*` `DT_NEEDED` entries resolve to (empty when it needs none,
/// or cannot be read).
fn bindings_of(consumer: &Path, cache: &LdCache) -> Vec<Seen> {
    let info = match dynamic_info(consumer) {
        Ok(i) => i,
        Err(e) => {
            tracing::debug!("not a consumer: {e:#}");
            return vec![];
        }
    };
    info.needed
        .iter()
        .filter(|n| n.starts_with("librccl") && !n.contains('/'))
        .filter_map(|n| {
            let (path, via) = resolve(consumer, &info, n, cache)?;
            Some(Seen {
                path,
                via: format!("DT_NEEDED {n} of {}", name_of(consumer)),
                binding: Some(Binding {
                    consumer: consumer.to_path_buf(),
                    needed: n.clone(),
                    via,
                }),
            })
        })
        .collect()
}

/// Where the loader now finds `b.needed` for `b.consumer` (the consumer read again, the ld.so
/// cache asked again), canonical; `None` when it finds nothing.
///
/// Errors: the consumer cannot be read.
pub fn rebind(b: &Binding) -> anyhow::Result<Option<PathBuf>> {
    let info = dynamic_info(&b.consumer)?;
    let cache = LdCache::load();
    Ok(resolve(&b.consumer, &info, &b.needed, &cache)
        .and_then(|(p, _)| std::fs::canonicalize(p).ok()))
}

/// Where the loader finds `needed` for `consumer` (ld.so(8) order, see the module docs), and
/// how. `None` when no folder has it.
pub fn resolve(
    consumer: &Path,
    info: &DynamicInfo,
    needed: &str,
    cache: &LdCache,
) -> Option<(PathBuf, String)> {
    let origin = consumer.parent().unwrap_or(Path::new("."));
    let search = |list: &[String], tag: &str| -> Option<(PathBuf, String)> {
        for entry in list {
            if entry.contains("$LIB") || entry.contains("${LIB}") || entry.contains("PLATFORM") {
                continue;
            }
            let dir = entry
                .replace("${ORIGIN}", &origin.to_string_lossy())
                .replace("$ORIGIN", &origin.to_string_lossy());
            let p = Path::new(&dir).join(needed);
            if p.is_file() {
                return Some((lexical(&p), format!("{tag} {entry}")));
            }
        }
        None
    };
    if info.runpath.is_empty() {
        if let Some(r) = search(&info.rpath, "DT_RPATH") {
            return Some(r);
        }
    }
    if let Some(r) = search(&info.runpath, "DT_RUNPATH") {
        return Some(r);
    }
    if let Some(p) = cache.entries.get(needed).and_then(|v| v.first()) {
        return Some((p.clone(), "ld.so cache".into()));
    }
    for d in ["/lib", "/usr/lib", "/lib64", "/usr/lib64"] {
        let p = Path::new(d).join(needed);
        if p.is_file() {
            return Some((p, format!("default folder {d}")));
        }
    }
    None
}

/// `a/b/../c` → `a/c` without touching the file system (the loader keeps the path it opened;
/// the copy is identified by its file later).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The ld.so cache as `ldconfig -p` prints it: library name → paths, in the cache's order.
#[derive(Debug, Clone, Default)]
pub struct LdCache {
    /// Name (`librccl.so.1`) → paths.
    pub entries: BTreeMap<String, Vec<PathBuf>>,
}

impl LdCache {
    /// Ask `ldconfig -p` (`/sbin/ldconfig` when it is not on `PATH`). Empty when it cannot be
    /// run (a debug log line says why): the search then goes on to the default folders.
    pub fn load() -> LdCache {
        let prog = which::which("ldconfig")
            .ok()
            .or_else(|| Some(PathBuf::from("/sbin/ldconfig")).filter(|p| p.is_file()));
        let Some(prog) = prog else {
            tracing::debug!("no ldconfig: the ld.so cache is not read");
            return LdCache::default();
        };
        match crate::process::Cmd::new("read the ld.so cache", prog)
            .arg("-p")
            .read_with_deadline(LDCONFIG_DEADLINE)
        {
            Ok(text) => LdCache::parse(&text),
            Err(e) => {
                tracing::debug!("ldconfig -p: {e:#}");
                LdCache::default()
            }
        }
    }

    /// Parse `ldconfig -p` output: lines `\tNAME (FLAGS) => PATH`, and the count line first.
    pub fn parse(text: &str) -> LdCache {
        let mut c = LdCache::default();
        for line in text.lines() {
            let Some((left, path)) = line.split_once(" => ") else {
                continue;
            };
            let Some(name) = left.split_whitespace().next() else {
                continue;
            };
            c.entries
                .entry(name.to_string())
                .or_default()
                .push(PathBuf::from(path.trim()));
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldconfig_lines_are_read() {
        let c = LdCache::parse(
            "3 libs found in cache `/etc/ld.so.cache'\n\tlibrccl.so.1 (libc6,x86-64) => /opt/rocm-6.4.3/lib/librccl.so.1\n\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6\n",
        );
        assert_eq!(
            c.entries["librccl.so.1"],
            vec![PathBuf::from("/opt/rocm-6.4.3/lib/librccl.so.1")]
        );
        assert_eq!(c.entries.len(), 2);
    }

    #[test]
    fn lexical_folds_parent_components() {
        assert_eq!(
            lexical(Path::new(
                "/a/torch/lib/../../_rocm_sdk_libraries/lib/librccl.so.1"
            )),
            PathBuf::from("/a/_rocm_sdk_libraries/lib/librccl.so.1")
        );
    }
}
