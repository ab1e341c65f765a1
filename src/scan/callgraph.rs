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
//!   `s_sext_i32_i16 sN+1`, `s_wait_alu` and `s_delay_alu` in between on gfx12); the target is the `s_getpc_b64` result (the address
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
//!
//! Stages, one file each: `image` reads sections, symbols and relocations; `layout` resolves
//! addresses to functions and tables; `code` reads one function's machine code; `build`
//! assembles the [`Graph`]; `isa` holds the encodings and `trace` the per-kernel result.
//! For a proof, `decode` (with `decode_mem` and the generated `vop3_table`) reads whole
//! instructions, and `flow` (with `flow_entry` and its passes in `flow/pass`) follows the kernarg segment pointer through them
//! ([`Graph::slot_flow`]).

use std::collections::{BTreeMap, HashMap, VecDeque};

mod build;
mod code;
mod decode;
mod decode_mem;
mod decode_salu;
mod flow;
mod flow_alu;
mod flow_call;
mod flow_entered;
mod flow_entry;
mod flow_exec;
mod flow_marks;
mod flow_state;
mod flow_wait;
mod image;
mod inst;
mod isa;
mod layout;
mod reach;
mod salu_table;
mod trace;
mod valu_full;
mod vop3_table;

pub use decode::decode;
pub use flow::FlowStats;
pub use flow_entry::{kernel_descriptors, ArgSegment, FlowRefusal, FlowRoot};
pub use inst::{Gen, Inst, Op};
pub use isa::{branch_offset, interrupt_sites, is_interrupt_msg, trap_entry, InterruptSites, Isa};
pub use reach::{Reach, Reached};
#[cfg(test)]
use trace::{display_name, list};
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
    /// Functions whose code its SOPP branches land in (a branch out of a function is an edge).
    jumps: Vec<u32>,
    /// Whether its entry is `s_trap 2; s_endpgm`: entered there, nothing after it runs (`why`
    /// follows nothing from it; a proof still reads all of it, since code can be entered past
    /// the entry).
    trap_entry: bool,
    /// End of its code (exclusive): its symbol size, the next function or its section's end.
    end: u64,
    /// Its `s_swappc_b64`, `s_call_b64` and computed jumps (see `code::Refs::call_sites`).
    call_sites: Vec<u64>,
    /// Whether a return through `s[30:31]` may go anywhere (it returns and some word may
    /// write `s30`/`s31`).
    wild_return: bool,
    /// Whether a word of its code is `s_trap 2`.
    traps: bool,
    /// Whether its code returns (`s_setpc_b64 s[30:31]`).
    returns: bool,
    /// Functions its code enters other than at their start (pc-relative addresses inside them,
    /// branches into them are in `jumps`).
    inner: Vec<u32>,
    /// Whether it branches into code that no function holds.
    loose: bool,
    /// Its SMEM instructions: (address, first word, second word).
    smem: Vec<(u64, u32, u32)>,
    /// Its FLAT/GLOBAL/SCRATCH instructions: (address, first word, third word).
    vmem: Vec<(u64, u32, u32)>,
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
    /// Nodes whose address is stored in data (relocation targets, also inside a function),
    /// sorted.
    address_taken: Vec<u32>,
    /// Functions whose start some code materialises (a pc-relative address computation, a
    /// relocation in code), outside functions whose entry traps, sorted: with `address_taken`,
    /// what `why` lets an indirect call reach.
    materialized: Vec<u32>,
    by_name: HashMap<String, u32>,
    /// SOPP branches whose target is outside their own function: (branch address, target).
    branches_out: Vec<(u64, u64)>,
    /// References (pc-relative address computations, data relocations) to an address inside a
    /// named function other than its start: (site, target).
    inner_refs: Vec<(u64, u64)>,
    /// `s_sendmsg MSG_INTERRUPT` sites outside the trap sequence that lie in no function.
    loose_interrupts: Vec<u64>,
    /// Whether the code object is gfx12 (its SMEM opcode field sits elsewhere).
    gfx12: bool,
    /// SOPP branches into code that no function holds: (branch address, target).
    loose_branches: Vec<(u64, u64)>,
}

impl Graph {
    /// Build the graph of a code object (a 64-bit little-endian AMDGPU ELF, linked or
    /// relocatable) for the instruction set of `e_flags`.
    ///
    /// Errors: a one-line reason when the ELF's section or symbol tables cannot be read, or the
    /// instruction set is [`Isa::Unknown`].
    pub fn build(data: &[u8], e_flags: u32) -> Result<Graph, String> {
        let img = image::read_image(data, e_flags)?;
        let mut g = build::build_graph(&img);
        g.gfx12 =
            crate::scan::amdgpu::mach_name(e_flags & 0xff).is_some_and(|n| n.starts_with("gfx12"));
        Ok(g)
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

    /// The ways into the code strictly after `start` and before `end` from outside that span:
    /// SOPP branches out of another function, and pc-relative address computations or data
    /// relocations that point there, as (site, target). Empty means that code in the span runs
    /// only after its first instruction (as far as this reader sees: word by word, so a literal
    /// that looks like a branch counts too).
    pub fn entries_into(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let inside = |a: u64| a > start && a < end;
        let outside = |a: u64| a < start || a >= end;
        self.branches_out
            .iter()
            .chain(&self.inner_refs)
            .filter(|(site, target)| inside(*target) && outside(*site))
            .copied()
            .collect()
    }

    /// `s_sendmsg MSG_INTERRUPT` sites outside the trap sequence that no function holds (code
    /// outside every function's extent), by address.
    pub fn loose_interrupts(&self) -> &[u64] {
        &self.loose_interrupts
    }

    /// SOPP branches from a function into executable code that no function holds (its calls are
    /// not read), as (branch address, target).
    pub fn loose_branches(&self) -> &[(u64, u64)] {
        &self.loose_branches
    }

    /// Whether the function named `function` (its first node by that name) begins with
    /// `s_trap 2; s_endpgm`, so that nothing after its entry runs; `None` when there is no such
    /// function.
    pub fn traps_at_entry(&self, function: &str) -> Option<bool> {
        let &i = self.by_name.get(function)?;
        Some(self.nodes[i as usize].trap_entry)
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
                // The tables the reached code references come first (their names say where a
                // target comes from); once they lead nowhere new and to no hostcall user, every
                // other function whose address the image's data holds or some code materialises:
                // a pointer can come from anywhere (another kernel, the host), so an indirect
                // call may reach any of them.
                for &t in &seen_tables {
                    for &e in &self.tables[t as usize].entries {
                        if parent[e as usize].is_none() {
                            parent[e as usize] =
                                Some((from, Via::Table(self.tables[t as usize].name.clone())));
                            order.push(e);
                        }
                    }
                }
                if order.len() == start && self.first_user(&order).is_none() {
                    for &e in self.address_taken.iter().chain(&self.materialized) {
                        if parent[e as usize].is_none() {
                            parent[e as usize] = Some((from, Via::AddressTaken));
                            order.push(e);
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
        // A function whose entry traps is entered at its entry on these paths: it uses nothing.
        let live = |f: &&u32| !self.nodes[**f as usize].trap_entry;
        order
            .iter()
            .filter(live)
            .find(|&&f| self.nodes[f as usize].named_user)
            .map(|&f| (f, User::Named))
            .or_else(|| {
                order.iter().filter(live).find_map(|&f| {
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
        let n = &nodes[f as usize];
        if n.trap_entry {
            // Entered at its entry, it ends the program there.
            continue;
        }
        for &c in n.calls.iter().chain(&n.jumps) {
            if parent[c as usize].is_none() {
                parent[c as usize] = Some((f, Via::Call));
                order.push(c);
                q.push_back(c);
            }
        }
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
    use super::code::constant;
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
    fn only_llvms_trap_sequence_is_exempt() {
        // gfx11 words: s_trap 2, s_mov_b32 ttmp2 m0, s_mov_b32 m0 s0, s_sendmsg MSG_INTERRUPT,
        // s_mov_b32 m0 ttmp2.
        let (trap, save, set, send, restore) = (
            0xBF90_0002u32,
            0xBEEE_007D,
            0xBEFD_0000,
            0xBFB6_0001,
            0xBEFD_006E,
        );
        let bytes = |w: &[u32]| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let llvm = interrupt_sites(&bytes(&[trap, save, set, send, restore]), 0, Isa::Gfx11);
        assert_eq!((llvm.trap, llvm.host.len()), (1, 0));
        // The same save and restore without the trap: a hostcall client's doorbell.
        let hand = interrupt_sites(&bytes(&[save, set, send, restore]), 0, Isa::Gfx11);
        assert_eq!((hand.trap, hand.host), (0, vec![8]));
        // A branch (s_branch with offset 1: over the trap) lands past it.
        let skip = interrupt_sites(
            &bytes(&[0xBFA0_0001, trap, save, set, send, restore]),
            0,
            Isa::Gfx11,
        );
        assert_eq!(skip.host, vec![16]);
        // `s_mov_b32 s0, 0xbf900002`: the trap word is only a literal.
        let lit = interrupt_sites(
            &bytes(&[0xBE80_00FF, trap, save, set, send, restore]),
            0,
            Isa::Gfx11,
        );
        assert_eq!(lit.host, vec![16]);
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
