//! `patch --asserts`: make the device-assert handler trap over its whole extent, make every
//! hostcall user that no kernel can reach trap too, and prove that no kernel reaches a hostcall
//! user any more.
//!
//! RCCL built without NDEBUG (2.21.5's control build, and the shipped libraries whose packaging
//! lost NDEBUG) declares `hidden_hostcall_buffer` only because `assert` reaches `__assert_fail`,
//! which prints its message through hostcall before it traps. A failing device assert aborts the
//! kernel either way; with the handler rewritten, only the message is lost.
//!
//! The handler is `__assert_fail` (what `assert` calls in HIP's device headers, ROCm/clr
//! `hipamd/include/hip/amd_detail/hip_assert.h`: it builds the message with
//! `__ockl_fprintf_stderr_begin` / `__ockl_fprintf_append_string_n` /
//! `__ockl_fprintf_append_args`, then `__builtin_trap()`), and only when its own code shows it is
//! that handler ([`Graph::handler_shape`]): it never returns or jumps to a computed address,
//! contains `s_trap 2`, and calls only the device libraries' primitives. A program's own
//! `__assert_fail` that returns is never rewritten, and no other name is (`__assertfail`,
//! `_wassert` and `abort` print nothing in HIP's headers; on Linux `_wassert` is an ordinary
//! name).
//!
//! The proof ([`rewrite_and_prove`]) rests on [`Graph::reach`] from every kernel, which follows
//! every materialised address and sends every call to every address-taken function, with the
//! handler as a sink:
//! 1. no kernel reaches a hostcall user other than through the handler (named users, code that
//!    signals the host), an undefined function, or code that no function holds;
//! 2. the handler is filled with `s_trap 2; s_endpgm` pairs over its whole extent, so that
//!    code entering it anywhere (a computed address past its entry too) traps and ends the wave;
//! 3. every hostcall user that no kernel reaches (the printf primitives only the handler
//!    called) is filled the same way. What (1) could not see, a computed address that lands in
//!    such a function, then traps instead of signalling the host: after the rewrite no code in
//!    the image that is not filled signals the host or bears a hostcall user's name, which is
//!    checked on the rewritten bytes.
//!
//! Each filled function and each cut path is in the record, and `package` repeats it in a
//! package's description (`ASSERTS_PROVENANCE`). Not verified on AMD hardware here: that a
//! failing assert then aborts the dispatch as the original trap did. `rcclfix verify` on the
//! target machine is the check before use.

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::LittleEndian as LE;
use serde::Serialize;

use super::refusal::{Refusal, RefusalKind};
use crate::scan::callgraph::{trap_entry, Graph, Isa, Trace, User};

/// The device-assert handler `--asserts` may rewrite, with what it does in HIP's headers
/// (ROCm/clr `hipamd/include/hip/amd_detail/hip_assert.h`). Only this one prints; it is rewritten
/// only when its code shows it is that handler ([`Graph::handler_shape`]).
pub const ASSERT_HANDLERS: &[(&str, &str)] = &[(
    "__assert_fail",
    "what assert() calls: prints the message through hostcall (__ockl_fprintf_*), then traps",
)];

/// The text of the words every rewritten function is filled with.
pub const TRAP_TEXT: &str = "s_trap 2; s_endpgm";

/// One function filled with [`TRAP_TEXT`] pairs over its whole extent.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InstructionRecord {
    /// The function's symbol, e.g. `__assert_fail`.
    pub symbol: String,
    /// Its address in the code object (virtual address).
    pub address: u64,
    /// Bytes rewritten from `address` on: its whole extent (a multiple of 4, at least 8).
    pub size: u64,
    /// Byte offset of the rewritten bytes within the code object.
    pub code_object_offset: u64,
    /// Byte offset within the input file, when the code object lies uncompressed in it (`None`
    /// inside a compressed bundle).
    pub file_offset: Option<u64>,
    /// The first 8 bytes before, hex.
    pub old: String,
    /// The first 8 bytes after, hex ([`TRAP_TEXT`]).
    pub new: String,
    /// sha256 of the `size` bytes before, lowercase hex.
    pub old_sha256: String,
    /// [`TRAP_TEXT`], repeated over the extent (an odd word count ends with `s_endpgm`).
    pub new_text: String,
    /// Why it was rewritten: `device-assert handler` (on a kernel's path) or `hostcall user no
    /// kernel reaches`.
    pub why: String,
}

/// A kernel's path to a hostcall user before the rewrite, which no longer reaches one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CutPath {
    /// The kernel (`.name`).
    pub kernel: String,
    /// The functions from the kernel to the hostcall user, as the scanner's `why` names them.
    pub path: Vec<String>,
    /// The path as one line (the scanner's `why`).
    pub before: String,
    /// Why it is cut: the handler on it now traps wherever it is entered.
    pub now: String,
}

/// What `--asserts` did to one code object.
#[derive(Debug, Clone, Default)]
pub struct AssertPatch {
    /// The filled functions.
    pub instructions: Vec<InstructionRecord>,
    /// The declaring kernels' paths that no longer reach a hostcall user.
    pub cut_paths: Vec<CutPath>,
    /// The proof, as sentences.
    pub statements: Vec<String>,
}

/// Why [`rewrite_and_prove`] did not patch.
#[derive(Debug)]
pub enum Failed {
    /// The image defines no [`ASSERT_HANDLERS`] function: nothing to rewrite.
    NoHandler,
    /// The rewrite or the proof failed.
    Refused(Refusal),
}

/// The handler's `.symtab` entries, checked: (address, size) of every defined `STT_FUNC` so
/// named, in symbol-table order (an image linked from several partitions, as RCCL 2.21.5's control
/// builds are, holds one local copy per partition); empty when the image defines none. Errors: a
/// copy shorter than 8 bytes or outside every executable section's file data.
fn handler_symbols(data: &[u8], ks: &[String]) -> Result<Vec<(u64, u64)>, Refusal> {
    let e = LE;
    let bad = |r: String| Refusal {
        kind: RefusalKind::Unproven,
        kernels: ks.to_vec(),
        reason: r,
    };
    let name = ASSERT_HANDLERS[0].0;
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|err| bad(format!("ELF: {err}")))?;
    let sections = hdr
        .sections(e, data)
        .map_err(|err| bad(format!("section table: {err}")))?;
    let symtab = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(|err| bad(format!("symbol table: {err}")))?;
    let mut out = Vec::new();
    for sym in symtab.iter().filter(|sym| {
        sym.st_type() == elf::STT_FUNC
            && sym.st_shndx(e) != elf::SHN_UNDEF
            && symtab.symbol_name(e, sym).ok() == Some(name.as_bytes())
    }) {
        let (addr, size) = (sym.st_value(e), sym.st_size(e));
        if size < 8 {
            return Err(bad(format!(
                "{name} at 0x{addr:x} is {size} bytes long, too short for {TRAP_TEXT}"
            )));
        }
        if code_range(data, addr, addr.saturating_add(8)).is_none() {
            return Err(bad(format!(
                "{name} at 0x{addr:x} lies in no executable section of the file"
            )));
        }
        if !out.iter().any(|&(a, _)| a == addr) {
            out.push((addr, size));
        }
    }
    Ok(out)
}

fn code_range(data: &[u8], start: u64, end: u64) -> Option<std::ops::Range<usize>> {
    let e = LE;
    let hdr = elf::FileHeader64::<LE>::parse(data).ok()?;
    let sections = hdr.sections(e, data).ok()?;
    sections.iter().find_map(|s| {
        let exec = s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) != 0;
        let (a, sz) = (s.sh_addr(e), s.sh_size(e));
        if !exec || s.sh_type(e) == elf::SHT_NOBITS || start < a || end > a.checked_add(sz)? {
            return None;
        }
        let from = usize::try_from(s.sh_offset(e).checked_add(start - a)?).ok()?;
        let to = from.checked_add(usize::try_from(end - start).ok()?)?;
        (to <= data.len()).then_some(from..to)
    })
}

/// Fill `bytes` with `trap` pairs (`s_trap 2`, `s_endpgm`), ending with `s_endpgm`: entered at
/// any word, the wave traps or ends there.
fn fill(bytes: &mut [u8], trap: [u32; 2]) {
    let n = bytes.len() / 4;
    for (k, w) in bytes.chunks_exact_mut(4).enumerate() {
        let word = if k % 2 == 0 && k + 1 < n {
            trap[0]
        } else {
            trap[1]
        };
        w.copy_from_slice(&word.to_le_bytes());
    }
}

/// The refusal for kernel paths that still reach a hostcall user: `kind`, the first kernel and
/// its path as one line.
fn still_reaches(g: &Graph, r: &crate::scan::callgraph::Reach, u: u32, user: &User) -> Refusal {
    let path = r.path(g, u);
    let kernel = path.first().map(|h| h.function.clone()).unwrap_or_default();
    let t = Trace {
        path,
        user: Some(user.clone()),
        indirect: None,
        external: Vec::new(),
    };
    let how = t.describe().unwrap_or_default();
    Refusal {
        kind: RefusalKind::UsesHostcall,
        kernels: vec![kernel.clone()],
        reason: format!(
            "--asserts: kernel {kernel} still reaches a hostcall user with the device-assert handler trapping: {how}"
        ),
    }
}

/// Rewrite the handler and the hostcall users no kernel reaches in `bytes` (a copy of `data`,
/// the same code object, whose call graph is `g`) and prove that no kernel of `kernels` (`(name, symbol)`, every kernel of
/// the image) reaches a hostcall user afterwards. `declaring` names the kernels that declare the
/// buffer (their paths before the rewrite go into [`AssertPatch::cut_paths`]).
///
/// Errors: [`Failed::NoHandler`] (nothing rewritten), or a [`Refusal`]: `UsesHostcall` when a
/// kernel still reaches a hostcall user (real printf, device malloc, …), `Unproven` when the
/// call graph cannot be read, a kernel has no function, an undefined function or code outside
/// every function is reached, or the handler's code does not show that it never returns.
pub fn rewrite_and_prove(
    g: &Graph,
    data: &[u8],
    bytes: &mut [u8],
    e_flags: u32,
    processor: &str,
    kernels: &[(String, String)],
    declaring: &[String],
) -> Result<AssertPatch, Failed> {
    let ks = declaring;
    let unproven = |r: String| {
        Failed::Refused(Refusal {
            kind: RefusalKind::Unproven,
            kernels: ks.to_vec(),
            reason: format!("--asserts: {r}"),
        })
    };
    let handler_syms = handler_symbols(data, ks).map_err(Failed::Refused)?;
    if handler_syms.is_empty() {
        return Err(Failed::NoHandler);
    }
    let isa = Isa::from_e_flags(e_flags);
    // The bytes written follow e_flags (what the loader checks); the metadata must agree.
    if Isa::from_processor(processor) != isa {
        return Err(unproven(crate::scan::amdgpu::mach_disagreement(
            e_flags, processor,
        )));
    }
    let Some(trap) = trap_entry(isa) else {
        return Err(unproven(format!(
            "unknown instruction set (EF_AMDGPU_MACH 0x{:03x}): no trap encoding",
            e_flags & 0xff
        )));
    };
    // Every copy of the handler, each judged by its own code: a copy that shows it is the
    // handler becomes a sink, one that does not is refused if a kernel reaches it.
    let handlers: Vec<(u32, Result<(), String>)> = g
        .nodes()
        .filter(|&i| {
            let f = g.reached(i);
            f.name == ASSERT_HANDLERS[0].0
                && f.addr
                    .is_some_and(|a| handler_syms.iter().any(|&(h, _)| h == a))
        })
        .map(|i| (i, g.handler_shape(i)))
        .collect();
    if handlers.len() != handler_syms.len() {
        return Err(unproven(format!(
            "{} has no function in the call graph",
            ASSERT_HANDLERS[0].0
        )));
    }
    let sinks: Vec<u32> = handlers
        .iter()
        .filter(|(_, shape)| shape.is_ok())
        .map(|&(i, _)| i)
        .collect();
    let mut roots = Vec::new();
    for (name, symbol) in kernels {
        match g.node(symbol).or_else(|| g.node(name)) {
            Some(k) => roots.push(k),
            None => {
                return Err(unproven(format!(
                    "kernel {name} has no function in the symbol table"
                )))
            }
        }
    }
    let r = g.reach(&roots, &sinks);
    for &i in r.order() {
        let f = g.reached(i);
        if f.addr.is_none() {
            return Err(unproven(format!(
                "a kernel reaches {}, which the image does not define: {}",
                f.name,
                path_text(&r.path(g, i))
            )));
        }
        if f.loose {
            return Err(unproven(format!(
                "{} branches into code that no function holds, whose calls are not read",
                f.name
            )));
        }
        if sinks.contains(&i) {
            continue;
        }
        if let Some((_, Err(why))) = handlers.iter().find(|(h, _)| *h == i) {
            return Err(unproven(format!(
                "{} at 0x{:x} is reached ({}) but is not rewritten: {why}; only a handler that never returns may be made to trap",
                f.name,
                f.addr.unwrap_or(0),
                path_text(&r.path(g, i))
            )));
        }
        if let Some(u) = &f.user {
            return Err(Failed::Refused(still_reaches(g, &r, i, u)));
        }
    }
    if let Some(&at) = g.loose_interrupts().first() {
        return Err(Failed::Refused(Refusal {
            kind: RefusalKind::UsesHostcall,
            kernels: ks.to_vec(),
            reason: format!("--asserts: machine code outside every function signals the host (s_sendmsg MSG_INTERRUPT at 0x{at:x})"),
        }));
    }
    // What is filled: the handler, and every hostcall user no kernel reaches.
    let mut out = AssertPatch::default();
    for i in g.nodes() {
        let f = g.reached(i);
        let why = if sinks.contains(&i) {
            "device-assert handler"
        } else if !r.has(i) && f.user.is_some() {
            "hostcall user no kernel reaches"
        } else {
            continue;
        };
        let Some(start) = f.addr else { continue };
        if !start.is_multiple_of(4) || !f.end.is_multiple_of(4) || f.end < start.saturating_add(8) {
            return Err(unproven(format!(
                "{} at 0x{start:x}..0x{:x} is not whole instruction words of at least 8 bytes",
                f.name, f.end
            )));
        }
        let Some(range) = code_range(data, start, f.end) else {
            return Err(unproven(format!(
                "{} at 0x{start:x} lies in no executable section of the file",
                f.name
            )));
        };
        let old = &bytes[range.clone()];
        let record = InstructionRecord {
            symbol: f.name.clone(),
            address: start,
            size: f.end - start,
            code_object_offset: range.start as u64,
            file_offset: None,
            old: hex::encode(&old[..8]),
            new: String::new(),
            old_sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(old)),
            new_text: TRAP_TEXT.into(),
            why: why.into(),
        };
        fill(&mut bytes[range.clone()], trap);
        out.instructions.push(InstructionRecord {
            new: hex::encode(&bytes[range.start..range.start + 8]),
            ..record
        });
    }
    // The handler first, then the functions no kernel reaches, each in address order.
    out.instructions
        .sort_by_key(|i| (i.why != "device-assert handler", i.address));
    // The rewritten bytes: nothing left that is not filled signals the host.
    let filled: Vec<(u64, u64)> = out
        .instructions
        .iter()
        .map(|i| (i.address, i.address + i.size))
        .collect();
    let after = Graph::build(bytes, e_flags).map_err(unproven)?;
    for i in after.nodes() {
        let f = after.reached(i);
        let Some(start) = f.addr else { continue };
        if f.user.is_some() && !filled.iter().any(|&(a, b)| start >= a && start < b) {
            return Err(unproven(format!(
                "internal: after the rewrite {} still uses hostcall",
                f.name
            )));
        }
    }
    if !after.loose_interrupts().is_empty() {
        return Err(unproven(
            "internal: after the rewrite code outside every function signals the host".into(),
        ));
    }
    for k in declaring {
        let symbol = super::explain::kernel_symbol(kernels, k);
        let Some(t) = g.trace(symbol).or_else(|| g.trace(k)) else {
            continue;
        };
        if t.path.is_empty() {
            continue;
        }
        let path: Vec<String> = t.path.iter().map(|h| h.function.clone()).collect();
        let handler_name = path
            .iter()
            .find(|f| ASSERT_HANDLERS.iter().any(|(h, _)| h == f))
            .cloned()
            .unwrap_or_else(|| "a hostcall user no kernel reaches".into());
        out.cut_paths.push(CutPath {
            kernel: k.clone(),
            before: t.describe().unwrap_or_default(),
            path,
            now: format!("{handler_name} is now {TRAP_TEXT} over its whole extent: wherever it is entered, the wave traps"),
        });
    }
    let list = |why: &str| -> Vec<String> {
        out.instructions
            .iter()
            .filter(|i| i.why == why)
            .map(|i| format!("{} at 0x{:x} ({} bytes)", i.symbol, i.address, i.size))
            .collect()
    };
    let (handlers, dead) = (
        list("device-assert handler"),
        list("hostcall user no kernel reaches"),
    );
    out.statements.push(format!(
        "--asserts: the device-assert handler ({}) now reads {TRAP_TEXT} over its whole extent: a failing assert aborts the dispatch without printing its message, wherever the handler is entered",
        if handlers.is_empty() { "none reached".to_string() } else { handlers.join(", ") }
    ));
    out.statements.push(format!(
        "after the rewrite no kernel reaches a hostcall user: every call and computed jump was followed to every address-taken function{}, and none of the {} kernels reaches a named hostcall user, code that signals the host, an undefined function or code outside every function",
        match &r.opened_by {
            Some((f, at)) => format!(" (first in {f} at 0x{at:x})"),
            None => String::new(),
        },
        kernels.len()
    ));
    if !dead.is_empty() {
        out.statements.push(format!(
            "the hostcall users no kernel reaches ({}) are filled the same way, so that no code in the image that is not filled signals the host or bears a hostcall user's name (checked on the rewritten bytes)",
            dead.join(", ")
        ));
    }
    out.statements.push(format!(
        "{} declaring kernel path(s) to a hostcall user end at a rewritten function",
        out.cut_paths.len()
    ));
    Ok(out)
}

/// A path as `a → b → c`.
fn path_text(path: &[crate::scan::callgraph::Hop]) -> String {
    path.iter()
        .map(|h| h.function.as_str())
        .collect::<Vec<_>>()
        .join(" → ")
}
