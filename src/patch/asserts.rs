//! `patch --asserts`: make every device-assert handler trap at its entry, then prove by
//! reachability that no kernel can reach a hostcall user any more.
//!
//! RCCL built without NDEBUG (2.21.5's control build, and the shipped libraries whose packaging
//! lost NDEBUG) declares `hidden_hostcall_buffer` only because `assert` reaches `__assert_fail`,
//! which prints its message through hostcall before it traps. A failing device assert aborts the
//! kernel either way; with the entry rewritten, only the message is lost.
//!
//! The handlers, by name ([`ASSERT_HANDLERS`]), are the ones HIP's device headers define (ROCm/clr
//! `hipamd/include/hip/amd_detail/hip_assert.h`): `__assert_fail` (what `assert` calls; it builds
//! the message with `__ockl_fprintf_stderr_begin` / `__ockl_fprintf_append_string_n` /
//! `__ockl_fprintf_append_args`, then `__builtin_trap()`), `__assertfail` (the CUDA-compatible
//! entry, `__builtin_trap()` only), `_wassert` (Windows, `__builtin_trap()` only) and `abort`
//! (`__builtin_trap()`). The ROCm device libraries (ROCm/llvm-project `amd/device-libs`, `ockl`)
//! define no assert or abort handler of their own, only the printf primitives above and
//! `__ockl_sanitizer_report` (AddressSanitizer's report, which may return: not an abort, so it is
//! left alone and stays a hostcall user).
//!
//! Each handler's first 8 bytes become `s_trap 2; s_endpgm` ([`trap_entry`]); no other byte of
//! `.text` changes. Then the call graph of the rewritten image ([`Graph`], which reads an entry
//! that traps and ends the program as a function with no calls) must show, for every kernel of
//! the image (declaring or not): no path to a named hostcall user or to code that signals the
//! host, no undefined function reached, no branch or address that lands inside a handler after
//! its entry, and no host-signalling code outside every function. Anything else refuses.
//!
//! Not verified on AMD hardware here: that a failing assert then aborts the dispatch as the
//! original trap did. `rcclfix verify` on the target machine is the check before use.

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::LittleEndian as LE;
use serde::Serialize;

use super::codeobj::{Refusal, RefusalKind};
use crate::scan::callgraph::{trap_entry, Graph, Isa, Trace, User};

/// The device-assert and abort handlers rewritten by `--asserts`, with what each does in HIP's
/// headers (ROCm/clr `hipamd/include/hip/amd_detail/hip_assert.h`).
pub const ASSERT_HANDLERS: &[(&str, &str)] = &[
    (
        "__assert_fail",
        "what assert() calls: prints the message through hostcall (__ockl_fprintf_*), then traps",
    ),
    ("__assertfail", "the CUDA-compatible assert entry: traps"),
    ("_wassert", "the Windows assert entry: traps"),
    ("abort", "traps"),
];

/// The text of the entry every handler gets.
pub const TRAP_TEXT: &str = "s_trap 2; s_endpgm";

/// One rewritten instruction pair: a handler's entry.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InstructionRecord {
    /// The handler's symbol, e.g. `__assert_fail`.
    pub symbol: String,
    /// Its address in the code object (virtual address).
    pub address: u64,
    /// Byte offset of the rewritten bytes within the code object.
    pub code_object_offset: u64,
    /// Byte offset within the input file, when the code object lies uncompressed in it (`None`
    /// inside a compressed bundle).
    pub file_offset: Option<u64>,
    /// The 8 bytes before, hex.
    pub old: String,
    /// The 8 bytes after, hex ([`TRAP_TEXT`]).
    pub new: String,
    /// [`TRAP_TEXT`].
    pub new_text: String,
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
    /// Why it is cut: the handler on it now traps at its entry.
    pub now: String,
}

/// What `--asserts` did to one code object.
#[derive(Debug, Clone, Default)]
pub struct AssertPatch {
    /// The rewritten entries.
    pub instructions: Vec<InstructionRecord>,
    /// The declaring kernels' paths that no longer reach a hostcall user.
    pub cut_paths: Vec<CutPath>,
    /// The proof, as sentences.
    pub statements: Vec<String>,
}

/// Why [`rewrite_and_prove`] did not patch.
#[derive(Debug)]
pub enum Failed {
    /// The image defines none of [`ASSERT_HANDLERS`]: nothing to rewrite.
    NoHandler,
    /// The rewrite or the proof failed.
    Refused(Refusal),
}

/// A handler found in `.symtab`: (name, address, size, offset in the code object).
type Handler = (String, u64, u64, usize);

/// The handlers the image defines (`STT_FUNC` in `.symtab`, deduplicated by address), with the
/// code-object offset of their entry. Errors: a handler shorter than 8 bytes or outside every
/// executable section's file data.
fn handlers(data: &[u8], ks: &[String]) -> Result<Vec<Handler>, Refusal> {
    let e = LE;
    let bad = |r: String| Refusal {
        kind: RefusalKind::Unproven,
        kernels: ks.to_vec(),
        reason: r,
    };
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|err| bad(format!("ELF: {err}")))?;
    let sections = hdr
        .sections(e, data)
        .map_err(|err| bad(format!("section table: {err}")))?;
    let symtab = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(|err| bad(format!("symbol table: {err}")))?;
    let mut out: Vec<Handler> = Vec::new();
    for sym in symtab.iter() {
        if sym.st_type() != elf::STT_FUNC || sym.st_shndx(e) == elf::SHN_UNDEF {
            continue;
        }
        let Ok(name) = symtab.symbol_name(e, sym) else {
            continue;
        };
        let Some(&(name, _)) = ASSERT_HANDLERS.iter().find(|(h, _)| h.as_bytes() == name) else {
            continue;
        };
        let (addr, size) = (sym.st_value(e), sym.st_size(e));
        if out.iter().any(|h| h.1 == addr) {
            continue;
        }
        if size < 8 {
            return Err(bad(format!(
                "{name} at 0x{addr:x} is {size} bytes long, too short for {TRAP_TEXT}"
            )));
        }
        let off = sections.iter().find_map(|s| {
            let exec = s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) != 0;
            let (a, sz) = (s.sh_addr(e), s.sh_size(e));
            (exec && s.sh_type(e) != elf::SHT_NOBITS && addr >= a && addr + 8 <= a + sz)
                .then(|| s.sh_offset(e) + (addr - a))
        });
        match off.and_then(|o| usize::try_from(o).ok()) {
            Some(o) if o.checked_add(8).is_some_and(|end| end <= data.len()) => {
                out.push((name.to_string(), addr, size, o))
            }
            _ => {
                return Err(bad(format!(
                    "{name} at 0x{addr:x} lies in no executable section of the file"
                )))
            }
        }
    }
    out.sort_by_key(|h| h.1);
    Ok(out)
}

/// Rewrite every handler's entry in `bytes` (a copy of `data`, the same code object) and prove
/// that no kernel of `kernels` (`(name, symbol)`, every kernel of the image) reaches a hostcall
/// user afterwards. `declaring` names the kernels that declare the buffer (their paths before
/// the rewrite go into [`AssertPatch::cut_paths`]).
///
/// Errors: [`Failed::NoHandler`] (nothing rewritten), or a [`Refusal`]: `UsesHostcall` when a
/// kernel still reaches a hostcall user (real printf, device malloc, …), `Unproven` when the
/// call graph cannot be read, a kernel has no function, an undefined function is reached, or
/// code could enter a handler after its entry.
pub fn rewrite_and_prove(
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
    let found = handlers(data, ks).map_err(Failed::Refused)?;
    if found.is_empty() {
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
    let mut new = [0u8; 8];
    new[..4].copy_from_slice(&trap[0].to_le_bytes());
    new[4..].copy_from_slice(&trap[1].to_le_bytes());
    // Before: each declaring kernel's path, as the scanner reads it.
    let before = Graph::build(data, e_flags).map_err(unproven)?;
    let paths: Vec<(String, Trace)> = declaring
        .iter()
        .filter_map(|k| {
            let symbol = kernels
                .iter()
                .find(|(n, _)| n == k)
                .map_or(k.as_str(), |(_, s)| s.as_str());
            let t = before.trace(symbol).or_else(|| before.trace(k))?;
            Some((k.clone(), t))
        })
        .collect();
    drop(before);
    let mut out = AssertPatch::default();
    for (name, addr, _, off) in &found {
        let old = &bytes[*off..off + 8];
        if old == new {
            continue;
        }
        out.instructions.push(InstructionRecord {
            symbol: name.clone(),
            address: *addr,
            code_object_offset: *off as u64,
            file_offset: None,
            old: hex::encode(old),
            new: hex::encode(new),
            new_text: TRAP_TEXT.into(),
        });
        bytes[*off..off + 8].copy_from_slice(&new);
    }
    // After: the graph of the rewritten image.
    let g = Graph::build(bytes, e_flags).map_err(unproven)?;
    for (name, addr, size, _) in &found {
        if let Some(&(site, target)) = g.entries_into(*addr, addr.saturating_add(*size)).first() {
            return Err(unproven(format!(
                "code at 0x{site:x} branches to or takes the address 0x{target:x} inside {name} (entry 0x{addr:x}), past the rewritten entry"
            )));
        }
    }
    if let Some(&at) = g.loose_interrupts().first() {
        return Err(Failed::Refused(Refusal {
            kind: RefusalKind::UsesHostcall,
            kernels: ks.to_vec(),
            reason: format!("--asserts: machine code outside every function signals the host (s_sendmsg MSG_INTERRUPT at 0x{at:x})"),
        }));
    }
    if let Some(&(site, target)) = g.loose_branches().first() {
        return Err(unproven(format!(
            "the branch at 0x{site:x} lands at 0x{target:x}, in code that no function holds, whose calls are not read"
        )));
    }
    let mut indirect = 0;
    for (name, symbol) in kernels {
        let Some(t) = g.trace(symbol).or_else(|| g.trace(name)) else {
            return Err(unproven(format!(
                "kernel {name} has no function in the symbol table"
            )));
        };
        if !t.path.is_empty() {
            let how = t.describe().unwrap_or_default();
            let kind = match t.user {
                Some(User::Interrupt(_)) | Some(User::Named) => RefusalKind::UsesHostcall,
                None => RefusalKind::Unproven,
            };
            return Err(Failed::Refused(Refusal {
                kind,
                kernels: vec![name.clone()],
                reason: format!(
                    "--asserts: kernel {name} still reaches a hostcall user with the device-assert entries trapping: {how}"
                ),
            }));
        }
        if !t.external.is_empty() {
            return Err(unproven(format!(
                "kernel {name} reaches {}, which the image does not define",
                t.external.join(", ")
            )));
        }
        if t.indirect.is_some() {
            indirect += 1;
        }
    }
    for (k, t) in paths.into_iter().filter(|(_, t)| !t.path.is_empty()) {
        let path: Vec<String> = t.path.iter().map(|h| h.function.clone()).collect();
        let handler = path
            .iter()
            .find(|f| ASSERT_HANDLERS.iter().any(|(h, _)| h == f))
            .cloned()
            .unwrap_or_else(|| "a handler".into());
        out.cut_paths.push(CutPath {
            kernel: k,
            before: t.describe().unwrap_or_default(),
            path,
            now: format!("{handler} now begins with {TRAP_TEXT}: nothing after its entry runs"),
        });
    }
    let names: Vec<String> = found
        .iter()
        .map(|(n, a, _, _)| format!("{n} at 0x{a:x}"))
        .collect();
    out.statements.push(format!(
        "--asserts: the entry of each device-assert handler ({}) now reads {TRAP_TEXT} (8 bytes each; every other byte of the code is unchanged): a failing assert aborts the dispatch without printing its message",
        names.join(", ")
    ));
    out.statements.push(format!(
        "after the rewrite the call graph reaches no hostcall user from any of the {} kernels: no named hostcall user, no code that signals the host, no undefined function ({} kernel(s) reach an indirect call, whose possible targets were followed too)",
        kernels.len(),
        indirect
    ));
    out.statements.push("no branch and no stored or computed address lands inside a handler after its entry, no branch lands in code outside every function, and no host-signalling code lies outside a function".into());
    out.statements.push(format!(
        "{} declaring kernel path(s) to a hostcall user end at a rewritten entry",
        out.cut_paths.len()
    ));
    Ok(out)
}
