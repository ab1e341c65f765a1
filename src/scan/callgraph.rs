//! The call graph of one AMDGPU code object, and per kernel the path to the first hostcall user.
//!
//! A kernel declares `hidden_hostcall_buffer` when the AMDGPU attributor cannot prove that nothing
//! it calls reads the hostcall slot (llvm `AMDGPUAttributor.cpp`): a call chain that reaches a
//! hostcall user (`__assert_fail`, the printf and `__ockl_hostcall*` paths, device malloc, …), an
//! indirect call it cannot see through, or no attributor at all (`-O0`). This module reads the
//! first two from the machine code, so that `why` can name the path.
//!
//! What is read (llvm `AMDGPUUsage.rst`: "Code Object", "Relocation Records", "Call Convention";
//! the instruction encodings of the RDNA and CDNA ISA reference guides):
//! - functions from `STT_FUNC` symbols (`.symtab`, else `.dynsym`), plus unnamed code that a call
//!   lands on; data objects from `STT_OBJECT` symbols;
//! - direct calls: LLVM materialises a callee's address as `s_getpc_b64 s[N:N+1]` followed by
//!   `s_add_u32 sN, sN, lo` and `s_addc_u32 sN+1, sN+1, hi` (`SI_PC_ADD_REL_OFFSET`, with
//!   `s_sext_i32_i16 sN+1` in between on gfx12); the target is the `s_getpc_b64` result (the address
//!   of the next instruction) plus the 64-bit offset, or, in a relocatable object, the symbol of
//!   the `R_AMDGPU_REL32_LO` / `R_AMDGPU_GOTPCREL32_LO` relocation on the first literal. Every
//!   other relocation in executable code is a reference too;
//! - calls: `s_swappc_b64 s[30:31], s[N:N+1]` and tail calls `s_setpc_b64 s[N:N+1]` (N ≠ 30,
//!   since `s_setpc_b64 s[30:31]` is a return) are direct when `s[N:N+1]` still holds such an
//!   address (copies through `s_mov_b32`/`s_mov_b64` and a load through a GOT slot are followed;
//!   a write by another SALU or SMEM instruction, `v_readfirstlane_b32`, or a call that clobbers
//!   s0–s29 forgets it); otherwise they are indirect;
//! - function tables: data objects holding relocations (`R_AMDGPU_RELATIVE64`, `R_AMDGPU_ABS64`,
//!   …) that point at functions, wherever they live (`.rodata`, `.data.rel.ro`, `.data`). A
//!   function that takes a table's address may call any of its entries through its indirect calls;
//! - inlined hostcall code: `s_sendmsg sendmsg(MSG_INTERRUPT)` outside LLVM's trap sequence (see
//!   [`interrupt_sites`], which `patch` uses for its proof as well).
//!
//! The code is read one 32-bit word at a time, without decoding instruction lengths; the patterns
//! matched are specific enough (fixed opcode, destination and source fields) that a literal or the
//! second word of a 64-bit instruction does not pass for one in practice. The result explains a
//! declaration; it does not decide one (the metadata does).

use std::collections::{BTreeMap, HashMap, VecDeque};

use object::elf;
use object::read::elf::{FileHeader, Rela, SectionHeader, Sym};
use object::LittleEndian as LE;

use super::amdgpu::is_hostcall_user;

mod isa;
mod trace;

use isa::word;
pub use isa::{interrupt_sites, is_interrupt_msg, InterruptSites, Isa};
use trace::display_name;
#[cfg(test)]
use trace::list;
pub use trace::{Hop, IndirectCall, Trace, User, Via};

/// A function (named, unnamed code a call lands on, or an undefined symbol).
#[derive(Debug, Clone)]
struct Node {
    name: String,
    /// Start address; `None` for an undefined symbol.
    addr: Option<u64>,
    /// Functions called directly or whose address its code takes, in code order.
    calls: Vec<u32>,
    /// Function tables its code references.
    tables: Vec<u32>,
    /// Addresses of its indirect calls.
    indirect: Vec<u64>,
    /// Its `s_sendmsg MSG_INTERRUPT` sites outside the trap sequence.
    interrupts: Vec<u64>,
    /// Whether its name is a known hostcall user.
    named_user: bool,
}

/// A data object holding function pointers.
#[derive(Debug, Clone)]
struct Table {
    name: String,
    entries: Vec<u32>,
}

/// What an address in a register stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ref {
    /// The start of a function (node).
    Func(u32),
    /// A function table.
    Table(u32),
    /// A pointer slot (a GOT entry) that holds a function's address.
    Slot(u32),
    /// A pointer slot that holds a table's address.
    SlotTable(u32),
    /// Anything else (plain data, a label inside a function).
    Other,
}

/// A target before it is resolved: an address, or an undefined symbol (index into `externs`);
/// the flag is set when the code addresses the symbol's GOT slot (`R_AMDGPU_GOTPCREL*`), not the
/// symbol itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Raw {
    Addr(u64, bool),
    Ext(u32, bool),
}

/// `R_AMDGPU_*` (llvm `ELFRelocs/AMDGPU.def`).
const R_REL32: u32 = 4;
const R_GOTPCREL: u32 = 7;
const R_GOTPCREL32_LO: u32 = 8;
const R_GOTPCREL32_HI: u32 = 9;
const R_REL32_LO: u32 = 10;
const R_RELATIVE64: u32 = 13;

/// The call graph of one code object. Build it with [`Graph::build`], then ask [`Graph::trace`]
/// per kernel.
#[derive(Debug, Clone)]
pub struct Graph {
    nodes: Vec<Node>,
    tables: Vec<Table>,
    /// Nodes whose address is stored in data (relocation targets), sorted.
    address_taken: Vec<u32>,
    by_name: HashMap<String, u32>,
}

/// The sections and symbols the graph is built from.
struct Image<'a> {
    isa: Isa,
    /// Executable sections: (address, bytes).
    code: Vec<(u64, &'a [u8])>,
    /// Named functions: (address, size, name, global).
    funcs: Vec<(u64, u64, String, bool)>,
    /// Data objects: (address, size, name).
    objects: Vec<(u64, u64, String)>,
    /// Relocations in executable code: address → (relocation type, target).
    code_relocs: HashMap<u64, (u32, Raw)>,
    /// Relocations in data: (address, target), sorted by address.
    data_relocs: Vec<(u64, Raw)>,
    externs: Vec<String>,
}

impl Image<'_> {
    fn in_code(&self, a: u64) -> bool {
        self.code
            .iter()
            .any(|(s, b)| a >= *s && a < s + b.len() as u64)
    }
}

/// Registers tracked: s0–s105 (SGPRs), each holding half (`false` low, `true` high) of a [`Ref`].
type Regs = [Option<(Ref, bool)>; 106];

impl Graph {
    /// Build the graph of a code object (a 64-bit little-endian AMDGPU ELF, linked or
    /// relocatable) for the instruction set of `e_flags`.
    ///
    /// Errors: a one-line reason when the ELF's section or symbol tables cannot be read, or the
    /// instruction set is [`Isa::Unknown`].
    pub fn build(data: &[u8], e_flags: u32) -> Result<Graph, String> {
        let img = read_image(data, e_flags)?;
        Ok(build_graph(&img))
    }

    /// The trace of the kernel whose function symbol is `symbol` (a kernel descriptor name
    /// `k.kd` is accepted too), or `None` when the image has no such function.
    pub fn trace(&self, symbol: &str) -> Option<Trace> {
        let name = symbol.strip_suffix(".kd").unwrap_or(symbol);
        let &k = self.by_name.get(name)?;
        Some(self.trace_node(k))
    }

    /// How many functions the graph has (named, unnamed code a call lands on, and undefined
    /// symbols a relocation names).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no function at all.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every function's name, in address order (undefined symbols last).
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.name.as_str())
    }

    /// The functions `function` calls directly or whose address its code takes, in code order;
    /// `None` when there is no such function.
    pub fn calls(&self, function: &str) -> Option<Vec<&str>> {
        let &i = self.by_name.get(function)?;
        Some(
            self.nodes[i as usize]
                .calls
                .iter()
                .map(|&c| self.nodes[c as usize].name.as_str())
                .collect(),
        )
    }

    /// The addresses of the indirect calls in `function` (`None` when there is no such function).
    pub fn indirect_calls(&self, function: &str) -> Option<&[u64]> {
        let &i = self.by_name.get(function)?;
        Some(&self.nodes[i as usize].indirect)
    }

    /// The function tables of the image: (name, entries).
    pub fn tables(&self) -> Vec<(&str, Vec<&str>)> {
        self.tables
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.entries
                        .iter()
                        .map(|&e| self.nodes[e as usize].name.as_str())
                        .collect(),
                )
            })
            .collect()
    }

    fn trace_node(&self, k: u32) -> Trace {
        let n = self.nodes.len();
        // parent[i]: (predecessor, how) for every reached node; the kernel is its own parent.
        let mut parent: Vec<Option<(u32, Via)>> = vec![None; n];
        parent[k as usize] = Some((k, Via::Call));
        let mut order: Vec<u32> = vec![k];
        bfs(&self.nodes, &mut parent, &mut order, 0);
        let direct_found = self.first_user(&order);
        let mut indirect = None;
        let mut found = direct_found;
        let first_indirect = order
            .iter()
            .copied()
            .find(|&f| !self.nodes[f as usize].indirect.is_empty());
        if let Some(caller) = first_indirect {
            // Tables the reached functions reference, then their entries, to a fixpoint.
            let mut seen_tables: Vec<u32> = Vec::new();
            let mut scanned = 0;
            loop {
                for &f in &order[scanned..] {
                    for &t in &self.nodes[f as usize].tables {
                        if !seen_tables.contains(&t) {
                            seen_tables.push(t);
                        }
                    }
                }
                let start = order.len();
                scanned = start;
                let callers: Vec<u32> = order
                    .iter()
                    .copied()
                    .filter(|&f| !self.nodes[f as usize].indirect.is_empty())
                    .collect();
                let from = callers.first().copied().unwrap_or(caller);
                if seen_tables.is_empty() {
                    for &e in &self.address_taken {
                        if parent[e as usize].is_none() {
                            parent[e as usize] = Some((from, Via::AddressTaken));
                            order.push(e);
                        }
                    }
                } else {
                    for &t in &seen_tables {
                        for &e in &self.tables[t as usize].entries {
                            if parent[e as usize].is_none() {
                                parent[e as usize] =
                                    Some((from, Via::Table(self.tables[t as usize].name.clone())));
                                order.push(e);
                            }
                        }
                    }
                }
                if order.len() == start {
                    break;
                }
                bfs(&self.nodes, &mut parent, &mut order, start);
            }
            let tables = seen_tables
                .iter()
                .map(|&t| {
                    let t = &self.tables[t as usize];
                    (
                        t.name.clone(),
                        t.entries
                            .iter()
                            .map(|&e| self.nodes[e as usize].name.clone())
                            .collect(),
                    )
                })
                .collect();
            let c = &self.nodes[caller as usize];
            indirect = Some(IndirectCall {
                caller: c.name.clone(),
                at: c.indirect[0],
                tables,
                address_taken: self.address_taken.len(),
            });
            if found.is_none() {
                found = self.first_user(&order);
            }
        }
        let mut external: Vec<String> = order
            .iter()
            .filter(|&&f| self.nodes[f as usize].addr.is_none())
            .map(|&f| self.nodes[f as usize].name.clone())
            .collect();
        external.sort();
        let (path, user) = match found {
            None => (Vec::new(), None),
            Some((u, how)) => {
                let mut hops = Vec::new();
                let mut at = u;
                loop {
                    let (p, via) = parent[at as usize].clone().expect("reached node");
                    hops.push(Hop {
                        function: self.nodes[at as usize].name.clone(),
                        via,
                    });
                    if at == k {
                        break;
                    }
                    at = p;
                }
                hops.reverse();
                (hops, Some(how))
            }
        };
        Trace {
            path,
            user,
            indirect,
            external,
        }
    }

    /// The first node of `order` that is a named hostcall user, else the first that signals the
    /// host.
    fn first_user(&self, order: &[u32]) -> Option<(u32, User)> {
        order
            .iter()
            .find(|&&f| self.nodes[f as usize].named_user)
            .map(|&f| (f, User::Named))
            .or_else(|| {
                order.iter().find_map(|&f| {
                    self.nodes[f as usize]
                        .interrupts
                        .first()
                        .map(|&a| (f, User::Interrupt(a)))
                })
            })
    }
}

/// Breadth-first over direct edges from `order[start..]`, appending newly reached nodes.
fn bfs(nodes: &[Node], parent: &mut [Option<(u32, Via)>], order: &mut Vec<u32>, start: usize) {
    let mut q: VecDeque<u32> = order[start..].iter().copied().collect();
    while let Some(f) = q.pop_front() {
        for &c in &nodes[f as usize].calls {
            if parent[c as usize].is_none() {
                parent[c as usize] = Some((f, Via::Call));
                order.push(c);
                q.push_back(c);
            }
        }
    }
}

/// Read sections, symbols and relocations. Addresses are virtual addresses in a linked object;
/// in a relocatable one each allocated section gets its own range, laid out one after another.
fn read_image(data: &[u8], e_flags: u32) -> Result<Image<'_>, String> {
    let isa = Isa::from_e_flags(e_flags);
    if isa.sop1().is_none() {
        return Err(format!(
            "unknown instruction set (EF_AMDGPU_MACH 0x{:03x})",
            e_flags & 0xff
        ));
    }
    let e = LE;
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|err| format!("ELF header: {err}"))?;
    let sections = hdr
        .sections(e, data)
        .map_err(|err| format!("section table: {err}"))?;
    let linked = hdr.e_type(e) != elf::ET_REL;
    let mut base = vec![None; sections.len()];
    let mut next = 0u64;
    for (i, s) in sections.iter().enumerate() {
        if s.sh_flags(e) & u64::from(elf::SHF_ALLOC) == 0 {
            continue;
        }
        base[i] = Some(if linked {
            s.sh_addr(e)
        } else {
            let align = s.sh_addralign(e).clamp(1, 1 << 16);
            let b = next.div_ceil(align).saturating_mul(align);
            next = b.saturating_add(s.sh_size(e));
            b
        });
    }
    let is_exec = |i: usize| {
        sections
            .section(object::SectionIndex(i))
            .is_ok_and(|s| s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) != 0)
    };
    let mut code = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        if s.sh_flags(e) & u64::from(elf::SHF_EXECINSTR) == 0 || s.sh_type(e) == elf::SHT_NOBITS {
            continue;
        }
        let bytes = s
            .data(e, data)
            .map_err(|err| format!("code section: {err}"))?;
        // A section whose end would not fit in 64 bits is left out (malformed input).
        if let Some(b) = base[i].filter(|b| b.checked_add(bytes.len() as u64).is_some()) {
            code.push((b, bytes));
        }
    }
    let mut symtab = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(|err| format!("symbol table: {err}"))?;
    if symtab.len() <= 1 {
        symtab = sections
            .symbols(e, data, elf::SHT_DYNSYM)
            .map_err(|err| format!("dynamic symbol table: {err}"))?;
    }
    let sym_addr = |sym: &elf::Sym64<LE>| -> Option<u64> {
        let shndx = sym.st_shndx(e);
        if shndx == elf::SHN_UNDEF || shndx >= elf::SHN_LORESERVE {
            return None;
        }
        let b = (*base.get(shndx as usize)?)?;
        Some(if linked {
            sym.st_value(e)
        } else {
            b.wrapping_add(sym.st_value(e))
        })
    };
    let mut funcs = Vec::new();
    let mut objects = Vec::new();
    for sym in symtab.iter().skip(1) {
        let ty = sym.st_type();
        let Some(addr) = sym_addr(sym) else { continue };
        let name = display_name(symtab.symbol_name(e, sym).unwrap_or(b"?"));
        let exec = is_exec(sym.st_shndx(e) as usize);
        // STT_AMDGPU_HSA_KERNEL (10) names kernels in code object v2.
        if (ty == elf::STT_FUNC || ty == 10) && exec {
            funcs.push((addr, sym.st_size(e), name, sym.st_bind() != elf::STB_LOCAL));
        } else if (ty == elf::STT_OBJECT || (ty == elf::STT_NOTYPE && sym.st_size(e) > 0)) && !exec
        {
            objects.push((addr, sym.st_size(e), name));
        }
    }
    let mut externs: Vec<String> = Vec::new();
    let mut code_relocs = HashMap::new();
    let mut data_relocs = Vec::new();
    for s in sections.iter() {
        if s.sh_type(e) != elf::SHT_RELA {
            continue;
        }
        let Ok(Some((relas, link))) = s.rela(e, data) else {
            continue;
        };
        let table = sections.symbol_table_by_index(e, data, link).ok();
        let target_base = if linked {
            Some(0)
        } else {
            base.get(s.sh_info(e) as usize).copied().flatten()
        };
        let Some(tb) = target_base else { continue };
        for r in relas {
            let at = tb.wrapping_add(r.r_offset(e));
            let ty = r.r_type(e, false);
            let addend = r.r_addend(e) as u64;
            let isym = r.r_sym(e, false) as usize;
            let got = matches!(ty, R_GOTPCREL | R_GOTPCREL32_LO | R_GOTPCREL32_HI);
            let raw = if ty == R_RELATIVE64 || isym == 0 {
                Raw::Addr(addend, false)
            } else {
                let Some(sym) = table
                    .as_ref()
                    .and_then(|t| t.symbol(object::SymbolIndex(isym)).ok())
                else {
                    continue;
                };
                match sym_addr(sym) {
                    Some(a) if got => Raw::Addr(a, true),
                    Some(a) => Raw::Addr(a.wrapping_add(addend), false),
                    None => {
                        let name = display_name(
                            table
                                .as_ref()
                                .and_then(|t| t.symbol_name(e, sym).ok())
                                .unwrap_or(b"?"),
                        );
                        let i = match externs.iter().position(|x| *x == name) {
                            Some(i) => i,
                            None => {
                                externs.push(name);
                                externs.len() - 1
                            }
                        };
                        Raw::Ext(i as u32, got)
                    }
                }
            };
            if code
                .iter()
                .any(|(b, c)| at >= *b && at < b + c.len() as u64)
            {
                code_relocs.insert(at, (ty, raw));
            } else {
                data_relocs.push((at, raw));
            }
        }
    }
    data_relocs.sort_by_key(|(a, _)| *a);
    Ok(Image {
        isa,
        code,
        funcs,
        objects,
        code_relocs,
        data_relocs,
        externs,
    })
}

/// One SALU word decoded as SOP1: (opcode, sdst, ssrc0).
fn sop1(w: u32) -> Option<(u32, u32, u32)> {
    (w >> 23 == 0x17D).then_some(((w >> 8) & 0xff, (w >> 16) & 0x7f, w & 0xff))
}

/// One SALU word decoded as SOP2: (opcode, sdst, ssrc0, ssrc1).
fn sop2(w: u32) -> Option<(u32, u32, u32, u32)> {
    (w >> 30 == 2 && w >> 28 != 0xB).then_some((
        (w >> 23) & 0x7f,
        (w >> 16) & 0x7f,
        w & 0xff,
        (w >> 8) & 0xff,
    ))
}

/// An inline constant (128..=208) or the literal (255) as a 32-bit value.
fn constant(src: u32, literal: Option<u32>) -> Option<u32> {
    match src {
        128..=192 => Some(src - 128),
        193..=208 => Some((-((src - 192) as i32)) as u32),
        255 => literal,
        _ => None,
    }
}

/// `s_getpc_b64 s[P:P+1]`, optional `s_sext_i32_i16 sP+1`, `s_add_u32 sP, sP, lo`,
/// `s_addc_u32 sP+1, sP+1, hi` at word `i` of section `(base, code)`: (P, target, words used).
fn pc_rel(img: &Image<'_>, base: u64, code: &[u8], i: usize) -> Option<(u32, Raw, usize)> {
    let getpc = img.isa.sop1()?[2];
    let n = code.len() / 4;
    let (op, p, _) = sop1(word(code, i))?;
    if op != getpc || p % 2 != 0 || p >= 104 {
        return None;
    }
    let mut j = i + 1;
    if j < n {
        if let Some((_, d, s)) = sop1(word(code, j)) {
            if d == p + 1 && s == p + 1 {
                j += 1;
            }
        }
    }
    // One add: (value, literal word index if any, next word index).
    let add = |j: usize, want_op: u32, reg: u32| -> Option<(u32, Option<usize>, usize)> {
        if j >= n {
            return None;
        }
        let (op, d, s0, s1) = sop2(word(code, j))?;
        if op != want_op || d != reg {
            return None;
        }
        let other = if s0 == reg {
            s1
        } else if s1 == reg {
            s0
        } else {
            return None;
        };
        if other == 255 {
            let lit = (j + 1 < n).then(|| word(code, j + 1))?;
            Some((lit, Some(j + 1), j + 2))
        } else {
            Some((constant(other, None)?, None, j + 1))
        }
    };
    let (lo, lo_at, j) = add(j, 0, p)?;
    let (hi, _, j) = add(j, 4, p + 1)?;
    let pc_next = base + 4 * (i as u64 + 1);
    if let Some(at) = lo_at {
        let lit_addr = base + 4 * at as u64;
        if let Some(&(ty, raw)) = img.code_relocs.get(&lit_addr) {
            let adj = lit_addr - pc_next;
            let t = match (ty, raw) {
                (R_REL32_LO | R_REL32, Raw::Addr(a, false)) => {
                    Raw::Addr(a.wrapping_sub(adj), false)
                }
                (_, r) => r,
            };
            return Some((p, t, j - i));
        }
    }
    let off = (u64::from(hi) << 32) | u64::from(lo);
    Some((p, Raw::Addr(pc_next.wrapping_add(off), false), j - i))
}

/// Where functions and tables are: resolves addresses (and undefined symbols) to [`Ref`]s.
struct Layout<'i> {
    /// Start and end of each defined function (node), sorted by start.
    addrs: Vec<u64>,
    ends: Vec<u64>,
    /// Data objects (address, size), sorted, and the table each one is, if any.
    objects: Vec<(u64, u64)>,
    table_of_object: HashMap<usize, u32>,
    data_relocs: &'i [(u64, Raw)],
}

impl Layout<'_> {
    fn defined(&self) -> u32 {
        self.addrs.len() as u32
    }

    fn node_at(&self, a: u64) -> Option<u32> {
        let i = self.addrs.partition_point(|&x| x < a);
        (self.addrs.get(i) == Some(&a)).then_some(i as u32)
    }

    fn containing(&self, a: u64) -> Option<u32> {
        let i = self.addrs.partition_point(|&x| x <= a);
        (i > 0 && a < self.ends[i - 1]).then(|| (i - 1) as u32)
    }

    fn raw_node(&self, r: Raw) -> Option<u32> {
        match r {
            Raw::Addr(a, _) => self.node_at(a),
            Raw::Ext(i, _) => Some(self.defined() + i),
        }
    }

    fn table_at(&self, a: u64) -> Option<u32> {
        let i = self.objects.partition_point(|o| o.0 <= a);
        if i == 0
            || a >= self.objects[i - 1]
                .0
                .saturating_add(self.objects[i - 1].1.max(1))
        {
            return None;
        }
        self.table_of_object.get(&(i - 1)).copied()
    }

    fn resolve(&self, r: Raw) -> Ref {
        let (a, got) = match r {
            Raw::Ext(i, false) => return Ref::Func(self.defined() + i),
            Raw::Ext(i, true) => return Ref::Slot(self.defined() + i),
            Raw::Addr(a, got) => (a, got),
        };
        if let Some(nd) = self.node_at(a) {
            return if got { Ref::Slot(nd) } else { Ref::Func(nd) };
        }
        if let Some(t) = self.table_at(a) {
            return if got {
                Ref::SlotTable(t)
            } else {
                Ref::Table(t)
            };
        }
        if got {
            return Ref::Other;
        }
        // A pointer slot outside any named object (a GOT entry).
        let i = self.data_relocs.partition_point(|(x, _)| *x < a);
        match self.data_relocs.get(i) {
            Some(&(x, Raw::Addr(t, _))) if x == a => {
                if let Some(nd) = self.node_at(t) {
                    Ref::Slot(nd)
                } else if let Some(tb) = self.table_at(t) {
                    Ref::SlotTable(tb)
                } else {
                    Ref::Other
                }
            }
            Some(&(x, Raw::Ext(e, _))) if x == a => Ref::Slot(self.defined() + e),
            _ => Ref::Other,
        }
    }
}

/// What the registers hold while one function is read in address order.
struct State {
    regs: Regs,
    /// (VGPR, lane) → the SGPR value spilled there by `v_writelane_b32`.
    spilled: HashMap<(u32, u32), (Ref, bool)>,
}

impl State {
    fn set_pair(&mut self, d: u32, r: Option<Ref>) {
        if (d as usize) + 1 < self.regs.len() {
            self.regs[d as usize] = r.map(|r| (r, false));
            self.regs[d as usize + 1] = r.map(|r| (r, true));
        }
    }

    fn set(&mut self, d: u32, v: Option<(Ref, bool)>) {
        if let Some(x) = self.regs.get_mut(d as usize) {
            *x = v;
        }
    }

    fn get(&self, s: u32) -> Option<(Ref, bool)> {
        self.regs.get(s as usize).copied().flatten()
    }

    /// The [`Ref`] a register pair holds, when both halves hold the same one.
    fn pair(&self, s: u32) -> Option<Ref> {
        match (self.get(s), self.get(s + 1)) {
            (Some((a, false)), Some((b, true))) if a == b => Some(a),
            _ => None,
        }
    }
}

/// What the code of one function refers to.
#[derive(Default)]
struct Refs {
    calls: Vec<u32>,
    tables: Vec<u32>,
    indirect: Vec<u64>,
}

impl Refs {
    fn add(&mut self, own: u32, r: Ref) {
        match r {
            Ref::Func(x) | Ref::Slot(x) => {
                if x != own && !self.calls.contains(&x) {
                    self.calls.push(x);
                }
            }
            Ref::Table(t) | Ref::SlotTable(t) => {
                if !self.tables.contains(&t) {
                    self.tables.push(t);
                }
            }
            Ref::Other => {}
        }
    }
}

/// Read words `first..last` of `(base, code)` as the code of function `own`.
fn read_function(
    img: &Image<'_>,
    lay: &Layout<'_>,
    own: u32,
    (base, code): (u64, &[u8]),
    first: usize,
    last: usize,
) -> Refs {
    let [mov32, mov64, _getpc, setpc, swappc] = img.isa.sop1().expect("known isa");
    let smem = img.isa.smem();
    let lanes = img.isa.lanes();
    let mut st = State {
        regs: [None; 106],
        spilled: HashMap::new(),
    };
    let mut out = Refs::default();
    let mut i = first;
    while i < last {
        let at = base + 4 * i as u64;
        // Relocations on this word (relocatable objects): references.
        if !img.code_relocs.is_empty() {
            if let Some(&(_, raw)) = img.code_relocs.get(&at) {
                out.add(own, lay.resolve(raw));
            }
        }
        if let Some((p, raw, used)) = pc_rel(img, base, code, i) {
            let r = lay.resolve(raw);
            out.add(own, r);
            st.set_pair(p, Some(r));
            i += used;
            continue;
        }
        let w = word(code, i);
        let mut step = 1;
        if let Some((op, d, s)) = sop1(w) {
            if s == 255 {
                step = 2;
            }
            let direct = |st: &State| matches!(st.pair(s), Some(Ref::Func(_)));
            if op == swappc && d == 30 && s % 2 == 0 && s < 104 {
                if !direct(&st) {
                    out.indirect.push(at);
                }
                // The callee may clobber s0–s29; s[30:31] now holds the return address.
                st.regs[..32].fill(None);
            } else if op == setpc && d == 0 && s % 2 == 0 && s < 104 {
                if s != 30 && !direct(&st) {
                    out.indirect.push(at);
                }
            } else if op == mov64 && d % 2 == 0 && d < 104 {
                let (lo, hi) = if s % 2 == 0 && s < 104 {
                    (st.get(s), st.get(s + 1))
                } else {
                    (None, None)
                };
                st.set(d, lo);
                st.set(d + 1, hi);
            } else if op == mov32 {
                st.set(d, st.get(s));
            } else {
                st.set(d, None);
            }
        } else if let Some((_, d, s0, s1)) = sop2(w) {
            st.set(d, None);
            if s0 == 255 || s1 == 255 {
                step = 2;
            }
        } else if w >> 28 == 0xB && w >> 23 < 0x17D {
            // SOPK
            st.set((w >> 16) & 0x7f, None);
        } else if w >> 25 == 0x3F {
            // VOP1; v_readfirstlane_b32 (opcode 2) writes an SGPR.
            if (w >> 9) & 0xff == 2 {
                st.set((w >> 17) & 0xff, None);
            }
            if w & 0x1ff == 255 {
                step = 2;
            }
        } else if let Some((_, rd, wr)) = lanes.filter(|l| w >> 26 == l.0 && i + 1 < last) {
            let op = (w >> 16) & 0x3ff;
            if op == rd || op == wr {
                let w1 = word(code, i + 1);
                let (dst, src0) = (w & 0xff, w1 & 0x1ff);
                let lane = constant((w1 >> 9) & 0x1ff, None).filter(|l| *l < 64);
                if op == rd {
                    // v_readlane_b32 sDST, vSRC0, lane
                    let v = match (src0.checked_sub(256), lane) {
                        (Some(v), Some(l)) => st.spilled.get(&(v, l)).copied(),
                        _ => None,
                    };
                    st.set(dst, v);
                } else if let Some(l) = lane {
                    // v_writelane_b32 vDST, sSRC0, lane
                    match st.get(src0) {
                        Some(v) => st.spilled.insert((dst, l), v),
                        None => st.spilled.remove(&(dst, l)),
                    };
                }
                step = 2;
            }
        } else if smem == Some(w >> 26) && i + 1 < last {
            let sdata = (w >> 6) & 0x7f;
            let sbase = (w & 0x3f) << 1;
            let zero_offset = word(code, i + 1) & 0x1f_ffff == 0;
            let loaded = match st.pair(sbase) {
                Some(Ref::Slot(x)) if zero_offset => Some(Ref::Func(x)),
                Some(Ref::SlotTable(t)) if zero_offset => Some(Ref::Table(t)),
                _ => None,
            };
            if sdata.is_multiple_of(2) && sdata < 104 {
                st.set_pair(sdata, loaded);
            } else {
                st.set(sdata, None);
            }
            step = 2;
        }
        i += step;
    }
    out
}

/// The functions of the image: named ones (deduplicated by address, a global name winning over a
/// local alias) and unnamed code that a call or a data pointer lands on, as (start, end, name),
/// sorted by start.
fn functions_of(img: &Image<'_>) -> Vec<(u64, u64, String)> {
    let mut funcs = img.funcs.clone();
    funcs.sort_by(|a, b| a.0.cmp(&b.0).then(b.3.cmp(&a.3)));
    funcs.dedup_by_key(|f| f.0);
    let inside_named = |a: u64| {
        let i = funcs.partition_point(|f| f.0 <= a);
        i > 0 && {
            let f = &funcs[i - 1];
            f.0 == a || a < f.0.saturating_add(f.1)
        }
    };
    let mut unnamed: Vec<u64> = Vec::new();
    for &(base, code) in &img.code {
        let n = code.len() / 4;
        let mut i = 0;
        while i < n {
            if let Some((_, Raw::Addr(a, _), used)) = pc_rel(img, base, code, i) {
                if img.in_code(a) && !inside_named(a) {
                    unnamed.push(a);
                }
                i += used;
            } else {
                i += 1;
            }
        }
    }
    for (_, r) in &img.data_relocs {
        if let Raw::Addr(a, _) = *r {
            if img.in_code(a) && !inside_named(a) {
                unnamed.push(a);
            }
        }
    }
    unnamed.sort();
    unnamed.dedup();
    let mut starts: Vec<(u64, u64, String)> = funcs
        .into_iter()
        .map(|f| (f.0, f.1, f.2))
        .chain(unnamed.iter().map(|&a| (a, 0, format!("code at 0x{a:x}"))))
        .collect();
    starts.sort_by_key(|s| s.0);
    // A function ends at its symbol size, the next function, or the end of its section.
    let next: Vec<u64> = starts.iter().skip(1).map(|s| s.0).collect();
    for (i, s) in starts.iter_mut().enumerate() {
        let section_end = img
            .code
            .iter()
            .find(|(b, c)| s.0 >= *b && s.0 < b + c.len() as u64)
            .map_or(s.0, |(b, c)| b + c.len() as u64);
        let mut end = section_end.min(next.get(i).copied().unwrap_or(u64::MAX).max(s.0));
        if s.1 > 0 {
            end = end.min(s.0.saturating_add(s.1));
        }
        s.1 = end;
    }
    starts
}

fn build_graph(img: &Image<'_>) -> Graph {
    let funcs = functions_of(img);
    let node = |name: &str, addr: Option<u64>| Node {
        named_user: is_hostcall_user(name),
        name: name.to_owned(),
        addr,
        calls: Vec::new(),
        tables: Vec::new(),
        indirect: Vec::new(),
        interrupts: Vec::new(),
    };
    let mut nodes: Vec<Node> = funcs
        .iter()
        .map(|(a, _, name)| node(name, Some(*a)))
        .chain(img.externs.iter().map(|name| node(name, None)))
        .collect();
    let mut lay = Layout {
        addrs: funcs.iter().map(|f| f.0).collect(),
        ends: funcs.iter().map(|f| f.1).collect(),
        objects: Vec::new(),
        table_of_object: HashMap::new(),
        data_relocs: &img.data_relocs,
    };
    // Function tables: data objects with relocations pointing at functions.
    let mut objects = img.objects.clone();
    objects.sort_by_key(|o| o.0);
    let mut tables: Vec<Table> = Vec::new();
    for (oi, (a, size, name)) in objects.iter().enumerate() {
        let lo = img.data_relocs.partition_point(|(r, _)| *r < *a);
        let hi = img
            .data_relocs
            .partition_point(|(r, _)| *r < a.saturating_add(*size));
        let mut entries: Vec<u32> = Vec::new();
        for (_, r) in &img.data_relocs[lo..hi] {
            if let Some(nd) = lay.raw_node(*r) {
                if !entries.contains(&nd) {
                    entries.push(nd);
                }
            }
        }
        if !entries.is_empty() {
            lay.table_of_object.insert(oi, tables.len() as u32);
            tables.push(Table {
                name: name.clone(),
                entries,
            });
        }
    }
    lay.objects = objects.iter().map(|o| (o.0, o.1)).collect();
    for (ni, &(start, end, _)) in funcs.iter().enumerate() {
        let Some(&(base, code)) = img
            .code
            .iter()
            .find(|(b, c)| start >= *b && start < b + c.len() as u64)
        else {
            continue;
        };
        let first = ((start - base) / 4) as usize;
        let last = (((end - base) / 4) as usize).min(code.len() / 4);
        let refs = read_function(img, &lay, ni as u32, (base, code), first, last);
        let nd = &mut nodes[ni];
        nd.calls = refs.calls;
        nd.tables = refs.tables;
        nd.indirect = refs.indirect;
    }
    for &(base, code) in &img.code {
        for at in interrupt_sites(code, base, img.isa).host {
            if let Some(nd) = lay.containing(at) {
                nodes[nd as usize].interrupts.push(at);
            }
        }
    }
    let mut address_taken: Vec<u32> = img
        .data_relocs
        .iter()
        .filter_map(|(_, r)| lay.raw_node(*r))
        .collect();
    address_taken.sort();
    address_taken.dedup();
    let mut by_name = HashMap::new();
    for (i, nd) in nodes.iter().enumerate().take(funcs.len()) {
        by_name.entry(nd.name.clone()).or_insert(i as u32);
    }
    Graph {
        nodes,
        tables,
        address_taken,
        by_name,
    }
}

/// The traces of the given kernels (`(name, symbol)` pairs from the metadata), keyed by name.
/// Empty when the graph cannot be built (see [`Graph::build`]); a kernel the image has no
/// function for is left out.
pub fn trace_kernels(
    data: &[u8],
    e_flags: u32,
    kernels: &[(&str, &str)],
) -> BTreeMap<String, Trace> {
    let Ok(g) = Graph::build(data, e_flags) else {
        return BTreeMap::new();
    };
    kernels
        .iter()
        .filter_map(|(name, symbol)| {
            g.trace(symbol)
                .or_else(|| g.trace(name))
                .map(|t| ((*name).to_owned(), t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_encodings() {
        assert!(is_interrupt_msg(0xBFB6_0001, Isa::Gfx11)); // gfx11 s_sendmsg sendmsg(MSG_INTERRUPT)
        assert!(is_interrupt_msg(0xBF90_0001, Isa::Gfx10)); // gfx9/10
        assert!(is_interrupt_msg(0xBF90_0001, Isa::Unknown));
        assert!(!is_interrupt_msg(0xBF90_0001, Isa::Gfx11)); // gfx11 s_trap 1
        assert!(!is_interrupt_msg(0xBFB6_0003, Isa::Gfx11)); // gfx11 MSG_DEALLOC_VGPRS
        assert!(!is_interrupt_msg(0xBF90_0002, Isa::Unknown)); // gfx11+ s_trap 2
    }

    #[test]
    fn isa_from_flags() {
        assert_eq!(Isa::from_e_flags(0x041), Isa::Gfx11); // gfx1100
        assert_eq!(Isa::from_e_flags(0x048), Isa::Gfx11); // gfx1200
        assert_eq!(Isa::from_e_flags(0x054), Isa::Gfx11); // gfx11-generic
        assert_eq!(Isa::from_e_flags(0x036), Isa::Gfx10); // gfx1030
        assert_eq!(Isa::from_e_flags(0x23f), Isa::Gfx9); // gfx90a:xnack-
        assert_eq!(Isa::from_e_flags(0x02a), Isa::Gfx9); // gfx803
        assert_eq!(Isa::from_e_flags(0x022), Isa::Gfx6); // gfx700
        assert_eq!(Isa::from_e_flags(0x0ff), Isa::Unknown);
    }

    #[test]
    fn inline_constants() {
        assert_eq!(constant(128, None), Some(0));
        assert_eq!(constant(193, None), Some(u32::MAX)); // -1
        assert_eq!(constant(255, Some(7)), Some(7));
        assert_eq!(constant(3, None), None); // s3
    }

    #[test]
    fn long_lists_are_cut() {
        let v: Vec<String> = (0..9).map(|i| format!("f{i}")).collect();
        assert_eq!(list(&v), "f0, f1, f2, f3, f4 and 4 more");
        assert_eq!(list(&v[..2]), "f0, f1");
        assert_eq!(display_name(b"a\x1bb"), "a\\u{1b}b");
    }
}
