//! One AMDGPU code object: the proof that nothing in it can use the hostcall buffer, and the
//! same-length rewrite of its metadata note(s) that turns each `hidden_hostcall_buffer` into
//! `hidden_none`.
//!
//! The proof is about the whole image, because an indirect call can land in any function of it:
//! 1. the image is a linked code object (`ET_DYN`, `EM_AMDGPU`) with a symbol table (`.symtab`);
//! 2. no symbol names a hostcall user (`__ockl_hostcall*`, the printf and assert paths, …);
//! 3. nothing leaves the image: no undefined symbol, no `DT_NEEDED`, every dynamic relocation
//!    (function-pointer table entry) resolves to a defined function or data in the image;
//! 4. no machine code signals the host: hostcall wakes the host's listener with
//!    `s_sendmsg sendmsg(MSG_INTERRUPT)` (ROCm-Device-Libs `ockl`: `hostcall_impl.cl` signals the
//!    doorbell through `__ockl_hsa_signal_add`; measured in every printf and assert fixture), and
//!    no executable word holds that instruction outside LLVM's gfx11 trap sequence
//!    (`SITargetLowering::lowerTrapHsa`, which saves `m0` in `ttmp2` around it). This
//!    catches hostcall code that was inlined and left no symbol behind. The detector is the
//!    scanner's (`scan::callgraph::interrupt_sites`), so `scan`'s per-kernel `why` and this proof
//!    read the same sites.
//!
//! 5. every declaring kernel's declaration is explained by its code, as the AMDGPU attributor
//!    decides it (llvm `AMDGPUAttributor.cpp`): a call path to a hostcall user, or, when the
//!    kernel declares every optional hidden argument (the attributor gave up), an indirect or
//!    undefined call it reaches. A declaration nothing explains may come from the kernel reading
//!    its hostcall slot (`__builtin_amdgcn_implicitarg_ptr()`): refused. A kernel whose
//!    attributor gave up because of an indirect call may read its slot as well: a word-level net
//!    refuses the loads the compiler writes for that (`Graph::slot_load`).
//! 6. last, once everything else holds: no declaring kernel reads its slot, by following its
//!    kernarg segment pointer (and the dispatch packet and queue pointers) through every
//!    instruction it may run (`Graph::slot_flow`, on the exact decoder `scan::callgraph::decode`):
//!    a pointer copied, selected, offset, sent through memory, LDS or a buffer resource, or found
//!    again through the dispatch packet is refused unless every load through it is known to miss
//!    the slot (`tests/fixtures/patch/findings2/`, `findings3/`).
//!
//! Sources: llvm `AMDGPUUsage.rst` (ELF header, note records, relocation types, the v3–v6
//! kernel argument metadata where `hidden_none` is "an argument that is not used by the kernel;
//! space needs to be left for it, but it does not need to be set up"); CLR `rocvirtual.cpp`
//! (`HiddenNone` is skipped when the kernarg segment is filled; only `HiddenHostcallBuffer`
//! requires the hostcall buffer and PCIe atomics).

use object::elf;
use object::read::elf::{Dyn, FileHeader, Rela, SectionHeader, Sym};
use object::LittleEndian as LE;
use serde::Serialize;

use super::asserts::{self, CutPath, InstructionRecord};
use super::msgpack::{self, Item, Rewrite};
use crate::scan::callgraph::{interrupt_sites, Isa};

pub use super::refusal::{Refusal, RefusalKind};

/// `NT_AMDGPU_METADATA`: the note type of the MessagePack metadata (code object v3+).
pub const NT_AMDGPU_METADATA: u32 = 32;
/// `R_AMDGPU_ABS32`, `R_AMDGPU_ABS64`, `R_AMDGPU_RELATIVE64` (llvm `ELFRelocs/AMDGPU.def`).
const R_AMDGPU_ABS32: u32 = 6;
const R_AMDGPU_ABS64: u32 = 3;
const R_AMDGPU_RELATIVE64: u32 = 13;

/// One rewritten kernel argument.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KernelRecord {
    /// `.name`.
    pub name: String,
    /// `.symbol` (the kernel descriptor, name + `.kd`).
    pub symbol: String,
    /// `.kernarg_segment_size` in bytes, unchanged by the patch.
    pub kernarg_segment_size: u64,
    /// `.offset` of the rewritten argument in the kernarg segment, in bytes, unchanged.
    pub arg_offset: u64,
    /// `.size` of the rewritten argument in bytes, unchanged.
    pub arg_size: u64,
    /// The value kind before: `hidden_hostcall_buffer`.
    pub from: String,
    /// The value kind after: `hidden_none`.
    pub to: String,
    /// Why the compiler declared it, as far as the code object records it.
    pub cause: String,
}

/// The evidence that nothing in one code object uses the hostcall buffer.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Proof {
    /// Entries in `.symtab`.
    pub symtab_entries: usize,
    /// Defined functions (`STT_FUNC`) in the image.
    pub functions: usize,
    /// Hostcall-user symbols found (always empty in a proof that holds).
    pub hostcall_user_symbols: Vec<String>,
    /// Undefined symbols (always empty in a proof that holds).
    pub undefined_symbols: Vec<String>,
    /// Dynamic relocations checked (function-pointer table entries and other addresses).
    pub dynamic_relocations: usize,
    /// Functions that dynamic relocations point at: every possible indirect-call target that is
    /// stored in data.
    pub relocation_targets: Vec<String>,
    /// Executable bytes scanned.
    pub code_bytes: u64,
    /// `s_sendmsg sendmsg(MSG_INTERRUPT)` sites outside the trap sequence (always 0 when it holds).
    pub host_interrupt_sites: usize,
    /// `s_sendmsg sendmsg(MSG_INTERRUPT)` sites inside LLVM's gfx11 trap sequence (not hostcall).
    pub trap_interrupt_sites: usize,
    /// The proof as sentences, in order.
    pub statements: Vec<String>,
}

/// The metadata note descriptor span inside the code object.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NoteSpan {
    /// Byte offset of the descriptor within the code object.
    pub offset: u64,
    /// Descriptor length in bytes (unchanged by the patch).
    pub size: u64,
}

/// The outcome for one code object that declares the buffer and passed the proof.
#[derive(Debug, Clone)]
pub struct Patched {
    /// The rewritten code object (same length as the input).
    pub bytes: Vec<u8>,
    /// Processor from `amdhsa.target`, e.g. `gfx1100`.
    pub processor: String,
    /// Code object version (`EI_ABIVERSION` + 2).
    pub code_object_version: u32,
    /// Kernels rewritten.
    pub kernels: Vec<KernelRecord>,
    /// Kernels read in all.
    pub kernels_total: usize,
    /// The proof.
    pub proof: Proof,
    /// Descriptors rewritten.
    pub notes: Vec<NoteSpan>,
    /// `--asserts`: the device-assert handler entries rewritten to trap (empty otherwise).
    pub instructions: Vec<InstructionRecord>,
    /// `--asserts`: the declaring kernels' paths that no longer reach a hostcall user.
    pub cut_paths: Vec<CutPath>,
}

/// Result of looking at one code object.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// No kernel declares `hidden_hostcall_buffer`: nothing to do.
    Clean {
        /// Processor from `amdhsa.target`.
        processor: String,
        /// Kernels read.
        kernels: usize,
    },
    /// Declaring kernels were found, the proof holds, and the rewrite is ready.
    Patched(Box<Patched>),
}

struct Note<'a> {
    offset: usize,
    desc: &'a [u8],
}

/// Whether a symbol name is a known user of the hostcall buffer: the scanner's list
/// (`scan::codeobj::is_hostcall_user`: the hostcall primitive, printf and assert paths, device
/// malloc, sanitizers), plus `fprintf`.
pub fn is_hostcall_user(name: &str) -> bool {
    crate::scan::codeobj::is_hostcall_user(name) || name == "fprintf"
}

/// Analyse one code object and, if kernels declare the buffer and the proof holds, rewrite it.
///
/// With `asserts` (`patch --asserts`), an image whose hostcall code is present but might be
/// reachable only through device-assert handlers gets those handlers' entries rewritten to trap
/// ([`asserts::rewrite_and_prove`]); the whole-image proof is tried first, so an image it
/// clears keeps its code untouched.
///
/// Errors: a [`Refusal`] naming the declaring kernels and the first reason the proof fails; an
/// unreadable image is refused as `Unproven`.
pub fn patch(data: &[u8], asserts: bool) -> Result<Outcome, Refusal> {
    let none: &[String] = &[];
    let e = LE;
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|err| {
        Refusal::unproven(
            none,
            format!("not a 64-bit little-endian ELF code object: {err}"),
        )
    })?;
    if hdr.e_ident().data != elf::ELFDATA2LSB {
        return Err(Refusal::unproven(none, "code object is not little-endian"));
    }
    if hdr.e_machine(e) != elf::EM_AMDGPU {
        return Err(Refusal::unproven(
            none,
            format!("not an AMDGPU code object (e_machine {})", hdr.e_machine(e)),
        ));
    }
    let cov = u32::from(hdr.e_ident().abi_version) + 2;
    if cov < 3 {
        return Err(Refusal::unproven(
            none,
            format!("code object v{cov} (YAML metadata) is not supported"),
        ));
    }
    let sections = hdr
        .sections(e, data)
        .map_err(|err| Refusal::unproven(none, format!("section table: {err}")))?;

    // Metadata notes: every NOTE section, every AMDGPU/32 record.
    let mut notes = Vec::new();
    for s in sections.iter() {
        let Ok(Some(mut it)) = s.notes(e, data) else {
            continue;
        };
        loop {
            match it.next() {
                Ok(Some(n)) => {
                    if n.name() == b"AMDGPU" && n.n_type(e) == NT_AMDGPU_METADATA {
                        let desc = n.desc();
                        notes.push(Note {
                            offset: desc.as_ptr() as usize - data.as_ptr() as usize,
                            desc,
                        });
                    }
                }
                Ok(None) => break,
                Err(err) => return Err(Refusal::unproven(none, format!("malformed note: {err}"))),
            }
        }
    }
    if notes.is_empty() {
        return Err(Refusal::unproven(none, "no NT_AMDGPU_METADATA note"));
    }

    // Declaring kernels, per note.
    let mut processor = String::new();
    let mut kernels_total = 0;
    let mut found: Vec<(usize, Item, Vec<usize>)> = Vec::new(); // (note index, root, declaring kernel indices)
    let mut declaring: Vec<String> = Vec::new();
    // Every kernel: (name, symbol), for the reachability proof of `--asserts`.
    let mut all_kernels: Vec<(String, String)> = Vec::new();
    // Each kernel's kernarg segment, for `Graph::slot_flow`.
    let mut arg_ranges: Vec<crate::scan::callgraph::ArgSegment> = Vec::new();
    // Per kernel: whether it declares every optional hidden argument (the attributor gave up).
    let mut gave_up: Vec<(String, bool)> = Vec::new();
    // Per declaring kernel: its `hidden_hostcall_buffer` `.offset` in the kernarg segment.
    let mut slots: Vec<(String, u64)> = Vec::new();
    // Per declaring kernel: its `.kernarg_segment_size`.
    let mut sizes: Vec<(String, u64)> = Vec::new();
    for (ni, n) in notes.iter().enumerate() {
        let root = msgpack::parse(n.desc).map_err(|err| {
            Refusal::unproven(none, format!("metadata note at byte {}: {err}", n.offset))
        })?;
        if let Some(t) = root.get("amdhsa.target").and_then(Item::as_str) {
            processor = t
                .rsplit("--")
                .next()
                .unwrap_or(t)
                .split(':')
                .next()
                .unwrap_or("")
                .to_string();
        }
        let mut idx = Vec::new();
        if let Some(ks) = root.get("amdhsa.kernels").and_then(Item::as_array) {
            kernels_total += ks.len();
            for (ki, k) in ks.iter().enumerate() {
                let field = |f: &str| k.get(f).and_then(Item::as_str).unwrap_or("").to_string();
                all_kernels.push((field(".name"), field(".symbol")));
                let args = k.get(".args").and_then(Item::as_array).unwrap_or(&[]);
                let kd = match field(".symbol") {
                    s if s.is_empty() => format!("{}.kd", field(".name")),
                    s => s,
                };
                arg_ranges.push(crate::scan::callgraph::ArgSegment {
                    kd,
                    size: k
                        .get(".kernarg_segment_size")
                        .and_then(Item::as_u64)
                        .unwrap_or(0),
                    hazards: super::explain::arg_hazards(args),
                });
                let kinds: Vec<&str> = args
                    .iter()
                    .filter_map(|a| a.get(".value_kind").and_then(Item::as_str))
                    .collect();
                let optional = super::explain::optional_hidden_args(cov);
                gave_up.push((field(".name"), optional.iter().all(|o| kinds.contains(o))));
                if let Some(a) = args.iter().find(|a| {
                    a.get(".value_kind").and_then(Item::as_str) == Some("hidden_hostcall_buffer")
                }) {
                    slots.push((
                        field(".name"),
                        a.get(".offset").and_then(Item::as_u64).unwrap_or(u64::MAX),
                    ));
                    sizes.push((
                        field(".name"),
                        k.get(".kernarg_segment_size")
                            .and_then(Item::as_u64)
                            .unwrap_or(0),
                    ));
                    idx.push(ki);
                    declaring.push(
                        k.get(".name")
                            .and_then(Item::as_str)
                            .unwrap_or("?")
                            .to_string(),
                    );
                }
            }
        }
        if !idx.is_empty() {
            found.push((ni, root, idx));
        }
    }
    if declaring.is_empty() {
        return Ok(Outcome::Clean {
            processor,
            kernels: kernels_total,
        });
    }
    let ks = &declaring;
    if hdr.e_type(e) != elf::ET_DYN {
        return Err(Refusal::unproven(
            ks,
            format!(
                "not a linked code object (e_type {}, expected ET_DYN)",
                hdr.e_type(e)
            ),
        ));
    }

    let mut proof = Proof::default();
    // 1. Symbol table.
    let symtab = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(|err| Refusal::unproven(ks, format!("symbol table: {err}")))?;
    if symtab.len() <= 1 {
        return Err(Refusal::unproven(
            ks,
            "symbol table stripped (no .symtab): the functions in the image cannot be named",
        ));
    }
    proof.symtab_entries = symtab.len();
    let dynsym = sections
        .symbols(e, data, elf::SHT_DYNSYM)
        .map_err(|err| Refusal::unproven(ks, format!("dynamic symbol table: {err}")))?;
    let mut funcs: Vec<(u64, u64, String)> = Vec::new();
    let mut has_indirect: std::collections::BTreeMap<String, u64> = Default::default();
    for table in [&symtab, &dynsym] {
        for (i, sym) in table.symbols().iter().enumerate() {
            if i == 0 {
                continue;
            }
            let name =
                String::from_utf8_lossy(table.symbol_name(e, sym).unwrap_or(b"?")).into_owned();
            let shndx = sym.st_shndx(e);
            if shndx == elf::SHN_ABS {
                if let Some(k) = name.strip_suffix(".has_indirect_call") {
                    has_indirect.insert(k.to_string(), sym.st_value(e));
                }
                continue;
            }
            if matches!(sym.st_type(), elf::STT_SECTION | elf::STT_FILE) {
                continue;
            }
            if is_hostcall_user(&name) && !proof.hostcall_user_symbols.contains(&name) {
                proof.hostcall_user_symbols.push(name.clone());
            }
            if shndx == elf::SHN_UNDEF {
                if !proof.undefined_symbols.contains(&name) {
                    proof.undefined_symbols.push(name.clone());
                }
            } else if sym.st_type() == elf::STT_FUNC && std::ptr::eq(table, &symtab) {
                funcs.push((sym.st_value(e), sym.st_size(e), name));
            }
        }
    }
    proof.functions = funcs.len();
    proof.statements.push(format!(
        "the image is a linked code object v{cov} with a symbol table of {} entries naming {} functions",
        proof.symtab_entries, proof.functions
    ));
    // The call graph, read once: the refusal's example path (2), the explanations (4) and
    // `--asserts` (after 5) all use it; a graph that cannot be built refuses only at (4).
    let graph = crate::scan::callgraph::Graph::build(data, hdr.e_flags(e));
    // 2. Hostcall users by name. With `asserts`, the refusal waits: the handlers may be all
    // that reaches them.
    let mut deferred: Option<Refusal> = None;
    if !proof.hostcall_user_symbols.is_empty() {
        let r = Refusal::uses(
            ks,
            format!(
                "hostcall user in the image: {}",
                proof.hostcall_user_symbols.join(", ")
            ),
        );
        if !asserts {
            let hint = if proof
                .hostcall_user_symbols
                .iter()
                .any(|n| n == "__assert_fail")
            {
                "; help: if only device asserts reach them, `rcclfix patch --asserts` makes the assert handler trap instead of printing and proves the rest"
            } else {
                ""
            };
            // One declaring kernel's path, as `scan`'s `why` reads it, says where the use is.
            let example = graph
                .as_ref()
                .ok()
                .and_then(|g| {
                    all_kernels.iter().find_map(|(n, sym)| {
                        let t = g.trace(sym).or_else(|| g.trace(n))?;
                        (ks.contains(n) && !t.path.is_empty())
                            .then(|| format!("; e.g. {}", t.describe().unwrap_or_default()))
                    })
                })
                .unwrap_or_default();
            return Err(Refusal {
                reason: format!("{}{example}{hint}", r.reason),
                ..r
            });
        }
        deferred = Some(r);
    } else {
        proof.statements.push("no symbol names a hostcall user (__ockl_hostcall*, __ockl_fprintf*, __ockl_printf*, printf, __assert_fail, device malloc, sanitizer)".into());
    }
    // 3. Closed world.
    if !proof.undefined_symbols.is_empty() {
        return Err(Refusal::unproven(
            ks,
            format!(
                "undefined symbol {}: an indirect call may leave the image",
                proof.undefined_symbols.join(", ")
            ),
        ));
    }
    let name_at = |addr: u64| -> Option<&str> {
        funcs
            .iter()
            .find(|(v, _, _)| *v == addr)
            .map(|(_, _, n)| n.as_str())
    };
    let func_containing = |addr: u64| -> Option<&str> {
        funcs
            .iter()
            .find(|(v, sz, _)| addr >= *v && addr < v + (*sz).max(1))
            .map(|(_, _, n)| n.as_str())
    };
    let mut exec_ranges = Vec::new();
    let mut alloc_ranges = Vec::new();
    for s in sections.iter() {
        let flags = s.sh_flags(e);
        if flags & u64::from(elf::SHF_ALLOC) != 0 {
            alloc_ranges.push((s.sh_addr(e), s.sh_addr(e) + s.sh_size(e)));
        }
        if flags & u64::from(elf::SHF_EXECINSTR) != 0 {
            exec_ranges.push((s.sh_addr(e), s.sh_addr(e) + s.sh_size(e)));
        }
        match s.dynamic(e, data) {
            Ok(Some((dyns, _))) => {
                if dyns.iter().any(|d| d.d_tag(e) == u64::from(elf::DT_NEEDED)) {
                    return Err(Refusal::unproven(
                        ks,
                        "the code object needs another shared object (DT_NEEDED)",
                    ));
                }
            }
            Ok(None) => {}
            Err(err) => return Err(Refusal::unproven(ks, format!(".dynamic: {err}"))),
        }
    }
    for s in sections.iter() {
        if s.sh_type(e) == elf::SHT_REL {
            return Err(Refusal::unproven(
                ks,
                "REL relocations (without addends) are not supported",
            ));
        }
        let (relas, link) = match s.rela(e, data) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(err) => return Err(Refusal::unproven(ks, format!("relocation section: {err}"))),
        };
        let linked = sections.symbol_table_by_index(e, data, link).ok();
        for r in relas {
            proof.dynamic_relocations += 1;
            let ty = r.r_type(e, false);
            let target = match ty {
                R_AMDGPU_RELATIVE64 => r.r_addend(e) as u64,
                R_AMDGPU_ABS64 | R_AMDGPU_ABS32 => {
                    let sym = linked
                        .as_ref()
                        .and_then(|t| {
                            t.symbol(object::SymbolIndex(r.r_sym(e, false) as usize))
                                .ok()
                        })
                        .ok_or_else(|| {
                            Refusal::unproven(
                                ks,
                                format!("relocation at 0x{:x}: symbol not found", r.r_offset(e)),
                            )
                        })?;
                    if sym.st_shndx(e) == elf::SHN_UNDEF {
                        return Err(Refusal::unproven(
                            ks,
                            format!(
                                "relocation at 0x{:x} against an undefined symbol",
                                r.r_offset(e)
                            ),
                        ));
                    }
                    sym.st_value(e).wrapping_add(r.r_addend(e) as u64)
                }
                other => {
                    return Err(Refusal::unproven(
                        ks,
                        format!(
                            "unsupported dynamic relocation type {other} at 0x{:x}",
                            r.r_offset(e)
                        ),
                    ))
                }
            };
            if exec_ranges.iter().any(|(a, b)| target >= *a && target < *b) {
                match name_at(target) {
                    Some(n) => {
                        if !proof.relocation_targets.iter().any(|t| t == n) {
                            proof.relocation_targets.push(n.to_string());
                        }
                    }
                    None => {
                        return Err(Refusal::unproven(
                            ks,
                            format!("relocation at 0x{:x} points into code at 0x{target:x}, which is not the start of a named function", r.r_offset(e)),
                        ))
                    }
                }
            } else if !alloc_ranges
                .iter()
                .any(|(a, b)| target >= *a && target <= *b)
            {
                return Err(Refusal::unproven(
                    ks,
                    format!(
                        "relocation at 0x{:x} points outside the image (0x{target:x})",
                        r.r_offset(e)
                    ),
                ));
            }
        }
    }
    proof.statements.push(format!(
        "nothing leaves the image: no undefined symbol, no DT_NEEDED, and all {} dynamic relocations resolve inside it{}",
        proof.dynamic_relocations,
        if proof.relocation_targets.is_empty() {
            String::new()
        } else {
            format!(" (function-pointer targets: {})", proof.relocation_targets.join(", "))
        }
    ));
    // 4. Each declaration is explained by what the code shows (the attributor's rules).
    let g = graph.map_err(|err| {
        Refusal::unproven(
            ks,
            format!("the call graph that explains the declarations cannot be built: {err}"),
        )
    })?;
    let explained =
        super::explain::explain_declarations(&g, cov, &all_kernels, &gave_up, &slots, ks)
            .map_err(|u| Refusal::unproven(&u.kernels, u.reason))?;
    proof.statements.push(explained);
    // 5. Machine code: no host interrupt outside the trap sequence (the scanner's detector).
    let isa = Isa::from_e_flags(hdr.e_flags(e));
    let mut sites = Vec::new();
    for s in sections.iter() {
        if s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) == 0 || s.sh_type(e) == elf::SHT_NOBITS {
            continue;
        }
        let code = s
            .data(e, data)
            .map_err(|err| Refusal::unproven(ks, format!("code section: {err}")))?;
        proof.code_bytes += code.len() as u64;
        let found = interrupt_sites(code, s.sh_addr(e), isa);
        proof.trap_interrupt_sites += found.trap;
        sites.extend(found.host);
    }
    proof.host_interrupt_sites = sites.len();
    if let Some(&at) = sites.first() {
        let f = func_containing(at)
            .map(|f| format!(" in {f}"))
            .unwrap_or_default();
        let r = Refusal::uses(
            ks,
            format!(
                "machine code signals the host (s_sendmsg MSG_INTERRUPT at 0x{at:x}{f}; {} site(s)): hostcall code is present, possibly inlined",
                sites.len()
            ),
        );
        if !asserts {
            return Err(r);
        }
        deferred.get_or_insert(r);
    } else {
        proof.statements.push(format!(
            "no machine code signals the host: 0 s_sendmsg MSG_INTERRUPT outside the trap sequence in {} executable bytes ({} inside trap sequences)",
            proof.code_bytes, proof.trap_interrupt_sites
        ));
    }
    let mut bytes = data.to_vec();
    let mut trapped = asserts::AssertPatch::default();
    match deferred {
        None => proof.statements.push(
            "so no function reachable from any kernel, directly or through a function pointer, can use the hostcall buffer".into(),
        ),
        Some(r) => {
            match asserts::rewrite_and_prove(
                &g,
                data,
                &mut bytes,
                hdr.e_flags(e),
                &processor,
                &all_kernels,
                ks,
            ) {
                Ok(a) => trapped = a,
                Err(asserts::Failed::NoHandler) => {
                    return Err(Refusal {
                        reason: format!(
                            "{}; --asserts: the image defines no device-assert handler ({}) to rewrite",
                            r.reason,
                            asserts::ASSERT_HANDLERS
                                .iter()
                                .map(|(h, _)| *h)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        ..r
                    })
                }
                Err(asserts::Failed::Refused(x)) => return Err(x),
            }
            proof.statements.append(&mut trapped.statements);
        }
    }

    // 6. Last, no declaring kernel reads its slot: its kernarg pointer followed through every
    //    instruction it may run.
    let flow = super::explain::kernarg_flow(
        &g,
        data,
        hdr.e_flags(e),
        cov,
        &all_kernels,
        &slots,
        &sizes,
        ks,
        &arg_ranges,
        &trapped
            .instructions
            .iter()
            .filter(|i| i.why == "device-assert handler")
            .map(|i| i.address)
            .collect::<Vec<_>>(),
    )
    .map_err(|u| Refusal::unproven(&u.kernels, u.reason))?;
    proof.statements.push(flow);

    // Rewrite: hidden_hostcall_buffer → hidden_none, same offset, size and note length.
    let mut records = Vec::new();
    let mut spans = Vec::new();
    for (ni, root, idx) in &found {
        let n = &notes[*ni];
        let mut rw = Rewrite::default();
        let all = root
            .get("amdhsa.kernels")
            .and_then(Item::as_array)
            .unwrap_or(&[]);
        for &ki in idx {
            let k = &all[ki];
            let name = k
                .get(".name")
                .and_then(Item::as_str)
                .unwrap_or("?")
                .to_string();
            let cause = match has_indirect.get(&name) {
                Some(1) => "indirect call: the compiler could not see the callee, so AMDGPUAttributor kept every hidden argument".to_string(),
                Some(_) => "not recorded as an indirect call (kernel.has_indirect_call = 0)".to_string(),
                None if k.get(".uses_dynamic_stack").is_some_and(|v| item_bool(n.desc, v)) => {
                    "dynamic stack (typical of an indirect call); the image records no has_indirect_call symbol".to_string()
                }
                None => "not recorded in the code object".to_string(),
            };
            for a in k.get(".args").and_then(Item::as_array).unwrap_or(&[]) {
                let Some(vk) = a.get(".value_kind") else {
                    continue;
                };
                if vk.as_str() != Some("hidden_hostcall_buffer") {
                    continue;
                }
                // Make up the length inside this argument's own map: the new string, the offset
                // and size values, the map header, then its keys.
                let mut near: Vec<&Item> = vec![vk];
                near.extend([".offset", ".size"].iter().filter_map(|key| a.get(key)));
                near.push(a);
                if let msgpack::Kind::Map(kv) = &a.kind {
                    near.extend(kv.iter().map(|(key, _)| key));
                }
                rw.replace_str(vk, "hidden_none", &near);
                records.push(KernelRecord {
                    name: name.clone(),
                    symbol: k
                        .get(".symbol")
                        .and_then(Item::as_str)
                        .unwrap_or("")
                        .to_string(),
                    kernarg_segment_size: k
                        .get(".kernarg_segment_size")
                        .and_then(Item::as_u64)
                        .unwrap_or(0),
                    arg_offset: a.get(".offset").and_then(Item::as_u64).unwrap_or(0),
                    arg_size: a.get(".size").and_then(Item::as_u64).unwrap_or(0),
                    from: "hidden_hostcall_buffer".into(),
                    to: "hidden_none".into(),
                    cause: cause.clone(),
                });
            }
        }
        let new = rw.apply(n.desc, root).map_err(|err| {
            Refusal::unproven(ks, format!("metadata note at byte {}: {err}", n.offset))
        })?;
        bytes[n.offset..n.offset + new.len()].copy_from_slice(&new);
        spans.push(NoteSpan {
            offset: n.offset as u64,
            size: new.len() as u64,
        });
    }
    Ok(Outcome::Patched(Box::new(Patched {
        bytes,
        processor,
        code_object_version: cov,
        kernels: records,
        kernels_total,
        proof,
        notes: spans,
        instructions: trapped.instructions,
        cut_paths: trapped.cut_paths,
    })))
}

/// Decode a boolean item of `desc` (false for anything else).
fn item_bool(desc: &[u8], it: &Item) -> bool {
    desc.get(it.start..it.end)
        .and_then(|b| rmpv::decode::read_value(&mut &b[..]).ok())
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostcall_users() {
        assert!(is_hostcall_user("__ockl_hostcall_internal"));
        assert!(is_hostcall_user("__assert_fail"));
        assert!(!is_hostcall_user("_Z11devFunc_AddPfi"));
    }
}
