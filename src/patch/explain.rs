//! Why each declaring kernel declares `hidden_hostcall_buffer`, as the AMDGPU attributor decides
//! it (llvm `AMDGPUAttributor.cpp`), read from the code: the fifth step of [`super::codeobj`]'s
//! proof, and the net for hostcall-slot loads an explanation could hide. It imports nothing of
//! `codeobj` (no circle): its refusals are [`Unexplained`], which `codeobj` words as its own.

/// Why the explanation fails: the kernels concerned and a one-line reason (always an unproven
/// refusal).
#[derive(Debug)]
pub(super) struct Unexplained {
    pub(super) kernels: Vec<String>,
    pub(super) reason: String,
}

impl Unexplained {
    fn new(kernels: &[String], reason: impl Into<String>) -> Unexplained {
        Unexplained {
            kernels: kernels.to_vec(),
            reason: reason.into(),
        }
    }
}

/// The optional hidden arguments a kernel declares only when the AMDGPU attributor gave up on
/// it (llvm `AMDGPUAttributor.cpp`: an indirect or unknown callee, or no attributor at `-O0`,
/// removes every `amdgpu-no-*` attribute at once): code object v4 and v5+ (llvm
/// `AMDGPUUsage.rst`, "Code Object V4/V5 Metadata"; the scanner's `verdict` uses the same lists).
const OPTIONAL_V4: [&str; 3] = [
    "hidden_default_queue",
    "hidden_completion_action",
    "hidden_multigrid_sync_arg",
];
const OPTIONAL_V5: [&str; 4] = [
    "hidden_default_queue",
    "hidden_completion_action",
    "hidden_multigrid_sync_arg",
    "hidden_heap_v1",
];

/// Check that every declaring kernel's `hidden_hostcall_buffer` is explained by its code, as the
/// AMDGPU attributor decides it (llvm `AMDGPUAttributor.cpp`): a call path to a hostcall user,
/// or, when the kernel declares every optional hidden argument (the attributor gave up), an
/// indirect or undefined call it reaches. Anything else means the kernel (or a function it
/// calls) reads the hostcall slot itself, e.g. through `__builtin_amdgcn_implicitarg_ptr()`, which
/// this rcclfix does not follow through the machine code: refused. An image in which every
/// kernel gave up (more than one) is an `-O0` build, whose declarations say nothing: refused.
///
/// `g` is the code object's call graph, `cov` its code object version, `kernels` every kernel
/// `(name, symbol)`, `gave_up` the same kernels' flags, `slots` the declaring kernels'
/// `hidden_hostcall_buffer` kernarg offsets, `declaring` their names. Returns the proof's
/// sentence. Errors: an unexplained declaration.
pub(super) fn explain_declarations(
    g: &crate::scan::callgraph::Graph,
    cov: u32,
    kernels: &[(String, String)],
    gave_up: &[(String, bool)],
    slots: &[(String, u64)],
    declaring: &[String],
) -> Result<String, Unexplained> {
    if gave_up.len() > 1 && gave_up.iter().all(|(_, g)| *g) {
        return Err(Unexplained::new(
            declaring,
            format!(
                "all {} kernels declare every optional hidden argument, even trivial ones: an -O0 build (the AMDGPU attributor did not run), whose declarations say nothing about what the code reads",
                gave_up.len()
            ),
        ));
    }
    // The handlers `--asserts` would make trap are sinks: their own reads are a user's. Every
    // copy (an image linked from several partitions, as RCCL's are, holds one per partition).
    let sinks: Vec<u32> = g
        .nodes()
        .filter(|&h| {
            let f = g.reached(h);
            f.name == "__assert_fail" && f.addr.is_some() && g.handler_shape(h).is_ok()
        })
        .collect();
    let (mut by_user, mut by_indirect) = (0, 0);
    for k in declaring {
        let symbol = kernel_symbol(kernels, k);
        let Some(t) = g.trace(symbol).or_else(|| g.trace(k)) else {
            return Err(Unexplained::new(
                std::slice::from_ref(k),
                format!("kernel {k} has no function in the symbol table"),
            ));
        };
        let gave = gave_up.iter().any(|(n, g)| n == k && *g);
        // The net for a slot read the attributor's verdict could hide: the kernel's own loads at
        // its slot's kernarg offset, other functions' loads at the implicit-argument slot.
        if let Some(kn) = g.node(symbol).or_else(|| g.node(k)) {
            let r = g.reach(&[kn], &sinks);
            let kernarg_slot = slots
                .iter()
                .find(|(n, _)| n == k)
                .map_or(u64::MAX, |(_, o)| *o);
            let implicit_slot = if cov >= 5 { 80 } else { 24 };
            if let Some((f, at)) = g.slot_load(&r, kn, kernarg_slot, implicit_slot) {
                return Err(Unexplained::new(
                    std::slice::from_ref(k),
                    format!("kernel {k} may read its hostcall slot: {f} loads at the slot's offset (the load at 0x{at:x}), which this rcclfix cannot tell from another load"),
                ));
            }
        }
        if !t.path.is_empty() {
            by_user += 1;
        } else if gave && (t.indirect.is_some() || !t.external.is_empty()) {
            by_indirect += 1;
        } else {
            let why = if gave {
                "it declares every optional hidden argument, but reaches no indirect call, undefined function or hostcall user"
            } else {
                "the attributor kept its other optional hidden arguments out, and no call path from it reaches a hostcall user"
            };
            return Err(Unexplained::new(
                std::slice::from_ref(k),
                format!("kernel {k} declares hidden_hostcall_buffer and nothing in its call graph explains it ({why}): it may read the hostcall slot itself (e.g. through __builtin_amdgcn_implicitarg_ptr()), which this rcclfix cannot rule out"),
            ));
        }
    }
    Ok(format!(
        "every declaration is explained by the code: {by_user} kernel(s) reach a hostcall user, {by_indirect} declare every optional hidden argument and reach an indirect or undefined call (the attributor gave up); none is left that could only come from reading the hostcall slot"
    ))
}

/// Check that no declaring kernel can read its hostcall slot, by following its kernarg segment
/// pointer (and the dispatch packet and queue pointers) through every instruction of the code
/// it may run ([`crate::scan::callgraph::Graph::slot_flow`]; the handlers `--asserts` made trap,
/// whose start addresses are `trapped`, are not entered: every copy of `__assert_fail`, one per
/// partition the image was linked from). `data` is the code object, `e_flags` its ELF flags,
/// `cov` its version, `kernels` every kernel `(name, symbol)`, `slots` and `sizes` the declaring
/// kernels' slot offsets and kernarg segment sizes (bytes), `declaring` their names. Returns the
/// proof's sentence.
/// Errors: the flow refuses, or a kernel's descriptor or function cannot be found.
#[allow(clippy::too_many_arguments)]
pub(super) fn kernarg_flow(
    g: &crate::scan::callgraph::Graph,
    data: &[u8],
    e_flags: u32,
    cov: u32,
    kernels: &[(String, String)],
    slots: &[(String, u64)],
    sizes: &[(String, u64)],
    declaring: &[String],
    args: &[crate::scan::callgraph::ArgSegment],
    trapped: &[u64],
) -> Result<String, Unexplained> {
    use crate::scan::callgraph::{kernel_descriptors, FlowRoot};
    // Exactly the functions `--asserts` filled with traps: entered anywhere, the wave traps.
    let sinks: Vec<u32> = g
        .nodes()
        .filter(|&h| g.reached(h).addr.is_some_and(|a| trapped.contains(&a)))
        .collect();
    let kds = kernel_descriptors(data);
    let mut roots = Vec::new();
    for k in declaring {
        let one = std::slice::from_ref(k);
        let symbol = kernel_symbol(kernels, k);
        let Some(node) = g.node(symbol).or_else(|| g.node(k)) else {
            return Err(Unexplained::new(
                one,
                format!("kernel {k} has no function in the symbol table"),
            ));
        };
        let kd_name = if symbol.ends_with(".kd") {
            symbol.to_string()
        } else {
            format!("{symbol}.kd")
        };
        let Some((kd_addr, kd)) = kds.get(&kd_name).copied().flatten() else {
            return Err(Unexplained::new(
                one,
                format!("kernel {k} has no readable kernel descriptor ({kd_name})"),
            ));
        };
        let find = |v: &[(String, u64)]| v.iter().find(|(n, _)| n == k).map(|(_, o)| *o);
        let (Some(slot), Some(size)) = (find(slots), find(sizes)) else {
            return Err(Unexplained::new(
                one,
                format!(
                    "kernel {k}: no hostcall slot offset or kernarg segment size in its metadata"
                ),
            ));
        };
        roots.push(FlowRoot {
            name: k.clone(),
            node,
            kd,
            kd_addr,
            slot,
            kernarg_size: size,
        });
    }
    match g.slot_flow(data, e_flags, cov, &roots, &sinks, args) {
        Ok(s) => Ok(format!(
            "no declaring kernel reads its hostcall slot: its kernarg segment pointer (and the dispatch packet and queue pointers) followed through {} function(s) and {} instruction(s) on every path; {} load(s) through it, none at the slot",
            s.functions, s.instructions, s.kernarg_loads
        )),
        Err(r) => Err(Unexplained::new(
            declaring,
            format!(
                "the kernarg segment pointer cannot be followed to a proof: in {} at 0x{:x}, {}",
                r.function, r.at, r.reason
            ),
        )),
    }
}

/// Value kinds whose bytes hold an argument the host or the runtime sets from the dispatch, never
/// a pointer to a runtime structure (llvm `AMDGPUUsage.rst`, "Code Object V3 Metadata", "Code
/// Object V5 Metadata"): explicit arguments but `queue`, and the scalar hidden arguments.
const CLEAN_KINDS: &[&str] = &[
    "by_value",
    "global_buffer",
    "dynamic_shared_pointer",
    "image",
    "sampler",
    "pipe",
    "hidden_global_offset_x",
    "hidden_global_offset_y",
    "hidden_global_offset_z",
    "hidden_block_count_x",
    "hidden_block_count_y",
    "hidden_block_count_z",
    "hidden_group_size_x",
    "hidden_group_size_y",
    "hidden_group_size_z",
    "hidden_remainder_x",
    "hidden_remainder_y",
    "hidden_remainder_z",
    "hidden_grid_dims",
    "hidden_dynamic_lds_size",
    "hidden_private_base",
    "hidden_shared_base",
];

/// The byte ranges `[offset, offset + size)` of a kernel's metadata `.args` (msgpack items)
/// whose value kind is not in [`CLEAN_KINDS`]: where a runtime pointer may lie. An argument
/// without a readable kind, offset or size makes the whole segment one (`[0, u64::MAX)`).
pub(super) fn arg_hazards(args: &[super::msgpack::Item]) -> Vec<(u64, u64)> {
    use super::msgpack::Item;
    let mut out = Vec::new();
    for a in args {
        let kind = a.get(".value_kind").and_then(Item::as_str);
        if kind.is_some_and(|k| CLEAN_KINDS.contains(&k)) {
            continue;
        }
        let off = a.get(".offset").and_then(Item::as_u64);
        let size = a.get(".size").and_then(Item::as_u64);
        match (kind, off, size) {
            (Some(_), Some(o), Some(s)) => out.push((o, o.saturating_add(s))),
            _ => return vec![(0, u64::MAX)],
        }
    }
    out
}

/// The optional hidden arguments of code object version `cov` ([`OPTIONAL_V5`] from v5 on).
pub(super) fn optional_hidden_args(cov: u32) -> &'static [&'static str] {
    if cov >= 5 {
        &OPTIONAL_V5
    } else {
        &OPTIONAL_V4
    }
}

/// The `.symbol` of the kernel named `name` among `kernels` (`(name, symbol)` pairs), or the name
/// itself when none is listed.
pub(super) fn kernel_symbol<'a>(kernels: &'a [(String, String)], name: &'a str) -> &'a str {
    kernels
        .iter()
        .find(|(n, _)| n == name)
        .map_or(name, |(_, s)| s.as_str())
}
