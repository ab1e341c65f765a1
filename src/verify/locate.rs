//! Which GPU runtime library `verify`'s child loads, and which file a loaded symbol really came
//! from: the runtime's names and folders searched in order (the NCCL library's own folder, the
//! pip-wheel siblings, the install prefixes, then the loader's search), and `/proc/self/maps`
//! read for the mapping that holds an address.

use std::path::{Path, PathBuf};

use super::codes::RuntimeKind;

/// Runtime library names tried, in order, when `--runtime-lib` is not given.
pub fn runtime_names(kind: RuntimeKind) -> &'static [&'static str] {
    match kind {
        RuntimeKind::Hip => &[
            "libamdhip64.so",
            "libamdhip64.so.7",
            "libamdhip64.so.6",
            "libamdhip64.so.5",
        ],
        RuntimeKind::Cuda => &[
            "libcudart.so",
            "libcudart.so.13",
            "libcudart.so.12",
            "libcudart.so.11.0",
        ],
    }
}

/// Folders searched for the runtime before the loader's own search: the library's folder, the
/// pip-wheel siblings of an NCCL wheel (`nvidia/nccl/lib` → `nvidia/cu13/lib`,
/// `nvidia/cuda_runtime/lib`), and the usual install prefixes.
pub fn runtime_dirs(kind: RuntimeKind, lib: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = lib.parent() {
        dirs.push(d.to_owned());
        if let Some(nvidia) = d.parent().and_then(|p| p.parent()) {
            if kind == RuntimeKind::Cuda {
                dirs.push(nvidia.join("cu13/lib"));
                dirs.push(nvidia.join("cuda_runtime/lib"));
            }
        }
    }
    match kind {
        RuntimeKind::Hip => {
            if let Ok(p) = std::env::var("ROCM_PATH") {
                dirs.push(PathBuf::from(p).join("lib"));
            }
            dirs.push("/opt/rocm/lib".into());
        }
        RuntimeKind::Cuda => {
            if let Ok(p) = std::env::var("CUDA_HOME") {
                dirs.push(PathBuf::from(p).join("lib64"));
            }
            dirs.push("/usr/local/cuda/lib64".into());
            dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
        }
    }
    dirs
}

/// Pick the runtime library: the first [`runtime_names`] entry that exists in a [`runtime_dirs`]
/// folder, else the bare name for the loader to search (`LD_LIBRARY_PATH`, ld.so.cache).
pub fn find_runtime(kind: RuntimeKind, lib: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in runtime_dirs(kind, lib) {
        for n in runtime_names(kind) {
            let p = d.join(n);
            if p.exists() {
                out.push(p);
            }
        }
    }
    out.extend(runtime_names(kind).iter().map(PathBuf::from));
    out
}

/// The runtime a library needs, from its file name: `librccl*` → HIP, otherwise CUDA.
pub fn guess_runtime(lib: &Path) -> RuntimeKind {
    let name = lib
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if name.contains("rccl") {
        RuntimeKind::Hip
    } else {
        RuntimeKind::Cuda
    }
}

/// The file mapped at `addr` in this process, from `/proc/self/maps`: which library actually
/// provided a symbol, whatever the loader search found.
pub fn mapped_file_at(addr: usize) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    parse_maps_for(&maps, addr)
}

/// Pure part of [`mapped_file_at`]: find the path of the mapping that contains `addr` in the text of
/// a `/proc/<pid>/maps` file (`start-end perms offset dev inode path`).
pub fn parse_maps_for(maps: &str, addr: usize) -> Option<String> {
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let range = f.next()?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        if (a..b).contains(&addr) {
            let path: Vec<&str> = f.skip(4).collect();
            return (!path.is_empty()).then(|| path.join(" "));
        }
    }
    None
}

/// Every mapped file in this process whose name looks like an NCCL/RCCL or GPU runtime library
/// (a second copy of NCCL loaded by something else shows up here).
pub fn mapped_collective_libs() -> Vec<String> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return vec![];
    };
    let mut out: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5).map(str::to_owned))
        .filter(|p| {
            let n = p.rsplit('/').next().unwrap_or("");
            [
                "libnccl",
                "librccl",
                "libcudart",
                "libamdhip64",
                "libcuda.so",
            ]
            .iter()
            .any(|k| n.starts_with(k))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
