//! The library view: find the `librccl` PyTorch or vLLM would load and ask the scanner whether its
//! kernels for this GPU's gfx target declare `hidden_hostcall_buffer`.
//!
//! Where the libraries live (PyTorch wheel layouts, pytorch/pytorch#191366): legacy
//! `torch/lib/librccl.so`, TheRock `_rocm_sdk_libraries/lib` and `_rocm_sdk_devel/lib`,
//! `/opt/rocm*/lib`, vLLM's `VLLM_NCCL_SO_PATH`. The per-target state is the scanner's own gate, `ScanReport::target_states`.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::process::Cmd;
use crate::scan::{ScanOptions, TargetState};

/// One candidate library and where it was found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Candidate {
    /// The path (as found, not canonicalised, so the user recognises it).
    pub path: PathBuf,
    /// Why it is a candidate: `VLLM_NCCL_SO_PATH`, `torch/lib (legacy wheel)`, `--library`, ….
    pub found_via: String,
}

/// The scan result of one library for the GPUs' targets.
#[derive(Debug, Clone, Serialize)]
pub struct LibraryScan {
    /// The candidate.
    pub candidate: Candidate,
    /// gfx target → state. `Unknown` with the error when the scan itself failed.
    pub targets: Vec<(String, TargetState)>,
}

impl LibraryScan {
    /// The state for `gfx`, if it was asked for.
    pub fn state(&self, gfx: &str) -> Option<&TargetState> {
        self.targets.iter().find(|(g, _)| g == gfx).map(|(_, s)| s)
    }
}

fn push(out: &mut Vec<Candidate>, p: PathBuf, via: &str) {
    if p.is_file() && !out.iter().any(|c| c.path == p) {
        out.push(Candidate {
            path: p,
            found_via: via.to_owned(),
        });
    }
}

fn rccl_files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("librccl.so"))
        })
        .filter(|p| !p.is_symlink())
        .collect();
    v.sort();
    v
}

/// The active Python's site-packages folders (`python3 -c …`); empty when there is no python3.
pub fn python_site_packages() -> Vec<PathBuf> {
    let code =
        "import site,sys\nfor p in site.getsitepackages()+[site.getusersitepackages()]: print(p)";
    match Cmd::new("ask python3 for site-packages", "python3")
        .arg("-c")
        .arg(code)
        .read_with_deadline(crate::process::PROBE_DEADLINE)
    {
        Ok(out) => out
            .lines()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect(),
        Err(e) => {
            tracing::debug!("no python3 site-packages: {e:#}");
            vec![]
        }
    }
}

/// Find the candidates, in the order a loader would prefer them: `VLLM_NCCL_SO_PATH`, then the
/// active Python's `torch/lib`, `_rocm_sdk_libraries/lib`, `_rocm_sdk_devel/lib`, then
/// `$ROCM_PATH/lib` and `/opt/rocm*/lib`. Only regular files named `librccl.so*` are returned
/// (symlinks are skipped so each file is scanned once).
pub fn discover() -> Vec<Candidate> {
    let mut out = vec![];
    if let Some(p) = std::env::var_os("VLLM_NCCL_SO_PATH") {
        push(
            &mut out,
            PathBuf::from(p),
            "VLLM_NCCL_SO_PATH (vLLM's pynccl loads this)",
        );
    }
    for sp in python_site_packages() {
        for (sub, via) in [
            (
                "torch/lib",
                "torch/lib (legacy wheel: the copy torch binds to)",
            ),
            (
                "_rocm_sdk_libraries/lib",
                "_rocm_sdk_libraries/lib (TheRock wheel: the copy torch binds to)",
            ),
            (
                "_rocm_sdk_devel/lib",
                "_rocm_sdk_devel/lib (TheRock devel copy)",
            ),
        ] {
            for f in rccl_files_in(&sp.join(sub)) {
                push(&mut out, f, via);
            }
        }
    }
    let mut roots: Vec<PathBuf> = std::env::var_os("ROCM_PATH")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Ok(rd) = std::fs::read_dir("/opt") {
        let mut opt: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rocm"))
            })
            .collect();
        opt.sort();
        roots.extend(opt);
    }
    for r in roots {
        for f in rccl_files_in(&r.join("lib")) {
            push(&mut out, f, "system ROCm");
        }
    }
    out
}

/// Scan one candidate for `targets`. A scan error becomes `Unknown` for every target (never clean).
pub fn scan(candidate: Candidate, targets: &[String]) -> LibraryScan {
    let opts = ScanOptions {
        targets: targets.to_vec(),
    };
    let states = match crate::scan::scan_path(&candidate.path, &opts) {
        Ok(report) => report.target_states(targets).into_iter().collect(),
        Err(e) => targets
            .iter()
            .map(|g| {
                (
                    g.clone(),
                    TargetState::Unknown {
                        reason: format!("scan failed: {e:#}"),
                    },
                )
            })
            .collect(),
    };
    LibraryScan {
        candidate,
        targets: states,
    }
}
