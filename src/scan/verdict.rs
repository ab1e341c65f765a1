//! Verdicts: kernels → per-image "why", images → per-target [`TargetState`], and which generic
//! targets can run on which processors.
//!
//! Source: llvm `AMDGPUUsage.rst` ("Code Object V5 Metadata", `hidden_hostcall_buffer`), llvm
//! `AMDGPUAttributor.cpp` (`amdgpu-no-hostcall-ptr`), docs/scan-json.md (states); llvm
//! `AMDGPUUsage.rst` ("Generic processors") for the generic families.

use std::collections::BTreeMap;

use super::callgraph::{Trace, User};
use super::model::{ImageReport, KernelReport, ScanReport, TargetState};

/// Generic targets and the processors they cover (llvm `AMDGPUUsage.rst`, "Generic Processors").
const GENERIC: &[(&str, &[&str])] = &[
    (
        "gfx9-generic",
        &["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"],
    ),
    ("gfx9-4-generic", &["gfx940", "gfx941", "gfx942", "gfx950"]),
    (
        "gfx10-1-generic",
        &["gfx1010", "gfx1011", "gfx1012", "gfx1013"],
    ),
    (
        "gfx10-3-generic",
        &[
            "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036",
        ],
    ),
    (
        "gfx11-generic",
        &[
            "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153",
        ],
    ),
    ("gfx12-generic", &["gfx1200", "gfx1201"]),
];

/// Whether device code built for `image_processor` can run on (or is meant for) `target`: the same
/// processor, or a generic target whose family includes it. Features (`:xnack-`) are ignored.
pub fn runs_on(image_processor: &str, target: &str) -> bool {
    let p = image_processor.split(':').next().unwrap_or("");
    let t = target.split(':').next().unwrap_or("");
    p == t
        || GENERIC
            .iter()
            .any(|(g, members)| *g == p && members.contains(&t))
}

/// Hidden arguments the attributor removes when it can prove them unused; a kernel declaring all
/// of them had no attributor pass (`-O0`) or one that gave up (an unknown or indirect callee).
const OPTIONAL_V4: &[&str] = &[
    "hidden_default_queue",
    "hidden_completion_action",
    "hidden_multigrid_sync_arg",
];
const OPTIONAL_V5: &[&str] = &[
    "hidden_default_queue",
    "hidden_completion_action",
    "hidden_multigrid_sync_arg",
    "hidden_heap_v1",
];

fn declares_everything(k: &KernelReport, cov: u32) -> bool {
    let want = if cov >= 5 { OPTIONAL_V5 } else { OPTIONAL_V4 };
    want.iter()
        .all(|w| k.hidden_args.iter().any(|a| a.value_kind == *w))
}

/// What kinds of hostcall use the named users stand for, e.g. `device assert: build with -DNDEBUG`.
fn hostcall_kinds<S: AsRef<str>>(users: &[S]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    let has = |p: &dyn Fn(&str) -> bool| users.iter().any(|u| p(u.as_ref()));
    if has(&|u| u.starts_with("__ockl_hostcall") || u.starts_with("__ockl_call_host_function")) {
        kinds.push("the hostcall primitive");
    }
    if has(&|u| u.contains("printf") || u.starts_with("__ockl_fputs")) {
        kinds.push("device printf");
    }
    if has(&|u| u.contains("assert")) {
        kinds.push("device assert: build with -DNDEBUG");
    }
    if has(&|u| u.contains("malloc") || u.contains("free") || u.starts_with("__ockl_d")) {
        kinds.push("device malloc/free");
    }
    if has(&|u| u.contains("sanitizer") || u.starts_with("__asan_")) {
        kinds.push("a sanitizer");
    }
    kinds
}

/// Fill `why` for every declaring kernel of an image: the kernel's own call path to a hostcall
/// user or to an indirect call, from `traces` (by kernel `.name`, see
/// [`callgraph::trace_kernels`]), and whether the attributor gave up (every optional hidden
/// argument declared). Without a trace for the kernel (the call graph could not be read) the
/// reason falls back to the image's hostcall-using symbols.
pub fn explain(image: &mut ImageReport, traces: &BTreeMap<String, Trace>) {
    let cov = image.code_object_version;
    // Unlisted kernels (a compact scan) are the ones that do not declare.
    let n = image.kernel_count();
    let all_declare =
        n > 0 && image.unlisted_kernels == 0 && image.kernels.iter().all(|k| k.declares_hostcall);
    let all_everything = n > 0 && image.kernels.iter().all(|k| declares_everything(k, cov));
    let users = &image.hostcall_users;
    for k in image.kernels.iter_mut().filter(|k| k.declares_hostcall) {
        let mut parts = Vec::new();
        let trace = traces.get(&k.name);
        if let Some(d) = trace.and_then(Trace::describe) {
            let t = trace.expect("described");
            let kinds = match (t.user.as_ref(), t.path.last()) {
                (Some(User::Named), Some(last)) => hostcall_kinds(&[&last.function]),
                _ => Vec::new(),
            };
            parts.push(if kinds.is_empty() {
                d
            } else {
                format!("{d} ({})", kinds.join(", "))
            });
        }
        if all_declare && all_everything && n > 1 {
            parts.push("the attributor gave up: the kernel declares every optional hidden argument, and so does every kernel of the image, even trivial ones (an -O0 build: the AMDGPU attributor did not run)".to_owned());
        } else if declares_everything(k, cov) {
            parts.push("the attributor gave up: the kernel declares every optional hidden argument (an indirect or external call, or -O0)".to_owned());
        }
        if trace.is_some() {
            if parts.is_empty() {
                parts.push("no call path from the kernel reaches a hostcall user, an indirect call or an undefined function, and the attributor did not give up (the slot is read some other way, e.g. through the implicit-argument pointer)".to_owned());
            }
        } else if !users.is_empty() {
            parts.push(format!(
                "this image contains hostcall users: {} ({}) (image-wide: the call graph could not be read)",
                users.join(", "),
                hostcall_kinds(users).join(", ")
            ));
        } else if parts.is_empty() {
            parts.push("declared but no hostcall user anywhere in the image (inlined printf, or the device-linker / indirect-call pattern: the attributor could not prove the slot unused)".to_owned());
        } else {
            parts.push("no hostcall-using symbol in the image".to_owned());
        }
        k.why = Some(parts.join("; "));
    }
}

impl ScanReport {
    /// Every processor that has an image or an attributed unreadable record, sorted.
    pub fn processors(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .files
            .iter()
            .flat_map(|f| {
                f.images
                    .iter()
                    .map(|i| i.processor.clone())
                    .chain(f.unreadable.iter().filter_map(|u| u.processor.clone()))
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The verdict per requested target (docs/scan-json.md): `Declares` (names as `file: kernel`) when
    /// a readable image for it (or a generic image covering it) has a declaring kernel; otherwise
    /// `Unknown` when any device code that may belong to it could not be read; otherwise `NoCode`
    /// when no image is for it; otherwise `Clean`. A build passes only when every requested target
    /// is `Clean`.
    pub fn target_states(&self, targets: &[String]) -> BTreeMap<String, TargetState> {
        let mut out = BTreeMap::new();
        for t in targets {
            let mut declaring = Vec::new();
            let mut kernels = 0usize;
            let mut images = 0usize;
            let mut unknown: Vec<String> = Vec::new();
            for f in &self.files {
                for img in f.images.iter().filter(|i| runs_on(&i.processor, t)) {
                    images += 1;
                    kernels += img.kernel_count();
                    for k in img.kernels.iter().filter(|k| k.declares_hostcall) {
                        declaring.push(format!("{}: {}", f.path, k.name));
                    }
                }
                for u in &f.unreadable {
                    let may_belong = match &u.processor {
                        None => true,
                        Some(p) => runs_on(p, t),
                    };
                    if may_belong {
                        unknown.push(format!("{} at offset {}: {}", f.path, u.offset, u.reason));
                    }
                }
            }
            let state = if !declaring.is_empty() {
                TargetState::Declares { kernels: declaring }
            } else if !unknown.is_empty() {
                let more = if unknown.len() > 1 {
                    format!(" (and {} more)", unknown.len() - 1)
                } else {
                    String::new()
                };
                TargetState::Unknown {
                    reason: format!("{}{more}", unknown[0]),
                }
            } else if images == 0 {
                TargetState::NoCode {
                    reason: format!("no device code for {t}"),
                }
            } else {
                TargetState::Clean { kernels }
            };
            out.insert(t.clone(), state);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_families() {
        assert!(runs_on("gfx11-generic", "gfx1100"));
        assert!(runs_on("gfx90a:xnack-", "gfx90a"));
        assert!(!runs_on("gfx11-generic", "gfx1030"));
        assert!(!runs_on("gfx1101", "gfx1100"));
    }
}
