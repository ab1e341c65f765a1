//! Where control may go ([`Code`]): a must-analysis beside the flow's may-analysis of followed
//! values ([`super::flow_state::Val`]). A call, jump or return through a register pair is taken
//! only when, on every path that reaches it, the pair certainly holds
//! - a function's start that the code computed exactly: `s_getpc_b64` plus constants, each
//!   carry paired with its sum ([`Code::PcLo`], [`Code::PcHi`]);
//! - an entry of a function table: an 8-byte load through such an address (plus a register
//!   index) from a run of data relocations that all point at function starts
//!   ([`Code::FnLo`], [`Code::FnHi`]);
//! - (a return) the function's own return address, moved only by copies and lane spills
//!   ([`Code::RetEntry`]; the return address of a call the function itself made is no return
//!   address of its own, [`Code::Ret`]; a
//!   return, never a call).
//!
//! A register holds a mark only while every path agrees on it (the join keeps what both sides
//! hold); any instruction that may write a register drops its mark unless the instruction is one
//! of the few that keep or make one; relative register indexing drops them all. What the
//! may-analysis calls `Clean` says nothing about where control goes: a value loaded from memory
//! plus a constant is no function's start.
//!
//! Assumed, not seen:
//! - a table entry is what its relocation put there, a function's start the image names (the
//!   value flow refuses code that could write a table; the host could, through a table's address
//!   it looks up and passes, which no proof over the image sees) and a table index stays inside
//!   the table (C++: undefined behaviour otherwise);
//! - `exec` is not zero at a `v_readfirstlane_b32` that feeds a call (it then reads lane 0).
//!
//! What a call leaves its caller's marks is [`super::flow_call`]'s, from what the callee's own
//! code shows (the calling convention is not assumed).
//!
//! Checked over the whole image ([`forged_code_address`]): no code makes a code address other
//! than a function's start that could be written to a table: no pc-relative address into the
//! middle of a function other than a long branch's own target, no `s_getpc_b64` this reader does
//! not follow, no data relocation into a function. And every function whose start the image's
//! data or any code that runs names is one the proof follows ([`untracked_start`]): code may
//! write any of them into a table (the eighth review's `tabwrite`). Both read an `s_getpc_b64`
//! at every word, not only where a linear decode starts an instruction: a branch may land in an
//! instruction's literal (the ninth review's `tabhide`, `tabhide2`). And once a table call is
//! taken, every kernel of the image is followed, not only the declaring ones
//! ([`super::Graph::slot_flow`]), so code that makes a code address from a return address (the
//! ninth review's `tabcall`, an `s_call_b64` to the next instruction; `tabret`, a callee's
//! `__builtin_return_address` plus an offset) is refused where it leaves the registers, and an
//! `s_call_b64` to no function's start is refused wherever it is.
//!
//! What keeps a table as its relocations made it is the value flow's ([`super::flow`]): once a
//! table call is taken, no code it follows stores into the image or stores a data address of
//! the image, and a load through an address a code address's bits chose gives a code-derived
//! value (the tenth review's `lutret6`, `lutko6` and `tabshift`,
//! `tests/fixtures/patch/findings10/README.md`). A table's address the host passes to the
//! device, and a store through it, are not followed.
//!
//! Sources: llvm `AMDGPUUsage.rst` ("Call Convention": `s[30:31]` holds the return address),
//! llvm `SIInstrInfo::insertIndirectBranch` (the long branch: `s_getpc_b64`, `s_add_u32`,
//! `s_addc_u32`, `s_setpc_b64` of the same pair).

use std::collections::BTreeMap;

use super::code::{pc_rel, sop1};
use super::flow_state::{lane_key, Code, State, LANES};
use super::image::Image;
use super::inst::{Inst, Op, Reg, EXEC, SCC, V};
use super::isa::word;
use super::layout::Layout;
use super::{Graph, Raw};

/// Function tables: runs of consecutive 8-byte data slots that each hold a relocation to one of
/// `starts` (sorted), as [start, end) addresses.
pub(super) fn function_tables(img: &Image<'_>, starts: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &(site, raw) in &img.data_relocs {
        let ok = matches!(raw, Raw::Addr(a, _) if starts.binary_search(&a).is_ok());
        if !ok {
            continue;
        }
        match runs.last_mut() {
            Some(r) if r.1 == site => r.1 = site + 8,
            _ => runs.push((site, site + 8)),
        }
    }
    runs
}

/// Every `s_getpc_b64` sum in the image's code as (its address, the address it makes), read at
/// every word, not only where a linear decode starts an instruction: a branch may land in a
/// literal that holds an `s_getpc_b64` (the ninth review's `tabhide`, `tabhide2`). Read once per
/// image, by the flow, for [`forged_code_address`] and [`untracked_start`].
///
/// Errors (one line): the instruction set has no known `s_getpc_b64`, or a sum [`pc_rel`] does
/// not read to an image address.
pub(super) fn getpc_sums(img: &Image<'_>) -> Result<Vec<(u64, u64)>, String> {
    let Some(ops) = img.isa.sop1() else {
        return Err("its instruction set has no known s_getpc_b64".into());
    };
    let mut sums = Vec::new();
    for &(base, code) in &img.code {
        for i in 0..code.len() / 4 {
            if sop1(word(code, i)).is_some_and(|(op, _, _)| op == ops[2]) {
                match pc_rel(img, base, code, i) {
                    Some((_, Raw::Addr(t, _), _)) => sums.push((base + 4 * i as u64, t)),
                    _ => {
                        return Err(format!(
                            "the code at 0x{:x} computes a code address (s_getpc_b64) in a way this rcclfix does not follow",
                            base + 4 * i as u64
                        ))
                    }
                }
            }
        }
    }
    Ok(sums)
}

/// Why the image may make a code address other than a function's start (one line), or `None`:
/// an `s_getpc_b64` whose sum does not read to an image address ([`getpc_sums`]'s error), or a
/// reference into the middle of a function (a sum of `sums`, or [`Graph`]'s `inner_refs`: a
/// pc-relative sum or a data relocation) that is not a long branch (a sum that goes straight to
/// `s_setpc_b64` of the same pair, in the same function).
pub(super) fn forged_code_address(
    g: &Graph,
    img: &Image<'_>,
    sums: &Result<Vec<(u64, u64)>, String>,
) -> Option<String> {
    let sums = match sums {
        Ok(s) => s,
        Err(why) => return Some(why.clone()),
    };
    let Some(ops) = img.isa.sop1() else {
        return Some("its instruction set has no known s_getpc_b64".into());
    };
    let setpc = ops[3];
    // Defined functions come first among the nodes, in address order.
    let lay = Layout {
        addrs: g.nodes.iter().map_while(|n| n.addr).collect(),
        ends: g
            .nodes
            .iter()
            .take_while(|n| n.addr.is_some())
            .map(|n| n.end)
            .collect(),
        objects: Vec::new(),
        table_of_object: Default::default(),
        data_relocs: &img.data_relocs,
    };
    let code_at = |a: u64| {
        img.code
            .iter()
            .find(|(b, c)| a >= *b && a < b + c.len() as u64)
            .map(|&(b, c)| (b, c, ((a - b) / 4) as usize))
    };
    let refs = g
        .inner_refs
        .iter()
        .copied()
        .chain(sums.iter().copied().filter(|&(_, t)| {
            lay.containing(t)
                .is_some_and(|f| lay.addrs[f as usize] != t)
        }));
    for (site, t) in refs {
        let Some(f) = lay.containing(t) else { continue };
        let branch = code_at(site).is_some_and(|(base, code, i)| {
            let Some((p, _, used)) = pc_rel(img, base, code, i) else {
                return false;
            };
            let mut j = i + used;
            while j < code.len() / 4 && matches!(word(code, j) >> 16, 0xBF87 | 0xBF88) {
                j += 1;
            }
            j < code.len() / 4
                && sop1(word(code, j)) == Some((setpc, 0, p))
                && lay.containing(site) == Some(f)
        });
        if !branch {
            let (what, does) = if code_at(site).is_some() {
                ("code", "computes")
            } else {
                ("data", "points at")
            };
            return Some(format!(
                "the {what} at 0x{site:x} {does} 0x{t:x}, inside {} other than at its start",
                g.nodes[f as usize].name
            ));
        }
    }
    None
}

/// Why a table entry may be a function this proof does not follow (one line), or `None`. Any
/// code that runs (what some kernel of the image reaches, the handlers `sinks` that will trap
/// excepted) may store a function's start it computes into a table, and the image's data names
/// more: each such function must be among `reached` or `sink_starts` (function starts).
pub(super) fn untracked_start(
    g: &Graph,
    img: &Image<'_>,
    sums: &[(u64, u64)],
    sinks: &[u32],
    reached: &std::collections::HashSet<u64>,
    sink_starts: &std::collections::HashSet<u64>,
) -> Option<String> {
    let kernels: Vec<u32> = img
        .objects
        .iter()
        .filter(|(_, _, name)| name.ends_with(".kd"))
        .filter_map(|(_, _, name)| g.node(name))
        .collect();
    let runs = g.reach(&kernels, sinks);
    let running: Vec<u32> = runs
        .order()
        .iter()
        .copied()
        .filter(|f| !sinks.contains(f))
        .collect();
    // The starts code computes at any word of a function that runs, not only at the instructions
    // a linear decode starts at (a branch may land in a literal: the ninth review's `tabhide`).
    let mut extents: Vec<(u64, u64)> = running
        .iter()
        .filter_map(|&f| {
            g.nodes[f as usize]
                .addr
                .map(|a| (a, g.nodes[f as usize].end))
        })
        .collect();
    extents.sort_unstable();
    let runs_at = |site: u64| {
        let i = extents.partition_point(|&(a, _)| a <= site);
        i > 0 && site < extents[i - 1].1
    };
    let node_at: std::collections::HashMap<u64, u32> = g
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(f, n)| n.addr.map(|a| (a, f as u32)))
        .collect();
    let hidden = sums
        .iter()
        .filter(|&&(site, _)| runs_at(site))
        .filter_map(|(_, t)| node_at.get(t).copied());
    running
        .iter()
        .flat_map(|&f| g.nodes[f as usize].calls.iter().copied())
        .chain(hidden)
        .chain(g.address_taken.iter().copied())
        .filter_map(|f| {
            let n = &g.nodes[f as usize];
            n.addr
                .filter(|a| !reached.contains(a) && !sink_starts.contains(a))
                .map(|_| n.name.clone())
        })
        .next()
        .map(|name| {
            format!(
                "the image computes the start of {name}, which no path this proof follows reaches (code that stores it in a table would run it unanalysed)"
            )
        })
}

/// The marks `inst` at `pc` makes, from the state before it (`tables`: [`function_tables`]);
/// applied by [`apply`] after the instruction's other effects.
///
/// `key` names a lane as the flow does (`None` where a lane number may stand for two lanes).
pub(super) fn made(
    inst: &Inst,
    pc: u64,
    next: u64,
    st: &State,
    tables: &[(u64, u64)],
    key: &dyn Fn(u8) -> Option<u8>,
    wave32: Option<bool>,
) -> Vec<(Reg, Option<Code>)> {
    let Some(m) = &st.1 else { return Vec::new() };
    let get = |r: Reg| m.get(&r).copied();
    let lo32 = |a: u64| a & 0xffff_ffff;
    let mut out = Vec::new();
    match inst.op {
        Op::GetPc { dst } => {
            out.push((dst, Some(Code::PcLo(next))));
            out.push((dst + 1, Some(Code::PcHi(next))));
        }
        Op::AddConst {
            dst, src, raw, sub, ..
        } => {
            if let Some(Code::PcLo(y)) = get(src) {
                let d = u64::from(raw);
                let y2 = if sub {
                    y.wrapping_sub(d)
                } else {
                    y.wrapping_add(d)
                };
                out.push((dst, Some(Code::PcLo(y2))));
                out.push((SCC, Some(Code::PcCarry(y, raw, sub))));
            }
        }
        Op::AddCarry { dst, src, k, sub } => {
            if let (Some(Code::PcHi(z)), Some(Code::PcCarry(y, raw, csub))) = (get(src), get(SCC)) {
                if lo32(y) == lo32(z) && sub == csub {
                    let d = u64::from(raw) | u64::from(k) << 32;
                    let z2 = if sub {
                        z.wrapping_sub(d)
                    } else {
                        z.wrapping_add(d)
                    };
                    out.push((dst, Some(Code::PcHi(z2))));
                }
            }
        }
        // A code address's high half is below 2^15 (a canonical address): sign-extending its
        // low 16 bits keeps it (gfx12's s_getpc_b64 sequence).
        Op::Sext16 { dst, src } => {
            if let Some(c @ Code::PcHi(_)) = get(src) {
                out.push((dst, Some(c)));
            }
        }
        Op::Add64 { dst, src, c } => {
            if let (Some(Code::PcLo(y)), Some(Code::PcHi(z))) = (get(src), get(src + 1)) {
                if lo32(y) == lo32(z) {
                    let z2 = z.wrapping_add_signed(c);
                    out.push((dst, Some(Code::PcLo(z2))));
                    out.push((dst + 1, Some(Code::PcHi(z2))));
                }
            }
        }
        Op::AddRegs {
            dst,
            a,
            b,
            carry: false,
        } => {
            let base = match (get(a), get(b)) {
                (Some(Code::PcLo(y)), None) | (None, Some(Code::PcLo(y))) => Some(y),
                _ => None,
            };
            if let Some(y) = base {
                out.push((dst, Some(Code::IdxLo(y))));
                out.push((SCC, Some(Code::IdxCarry(y))));
            }
        }
        Op::AddRegs {
            dst,
            a,
            b,
            carry: true,
        } => {
            let hi = match (get(a), get(b)) {
                (Some(Code::PcHi(z)), None) | (None, Some(Code::PcHi(z))) => Some(z),
                _ => None,
            };
            if let (Some(z), Some(Code::IdxCarry(y))) = (hi, get(SCC)) {
                if lo32(y) == lo32(z) {
                    out.push((dst, Some(Code::IdxHi(z))));
                }
            }
        }
        // A copy of exec, under Disj: exec is that copy.
        Op::Copy { dst, src: EXEC, n } if dst + n <= V => {
            if let Some(Code::Disj(l) | Code::Same(l, _)) = get(EXEC) {
                for k in 0..n {
                    out.push((dst + k, Some(Code::SavedExec(l))));
                }
                out.push((EXEC, Some(Code::Same(l, dst))));
            }
        }
        // s_and_saveexec: the copy is exec as it was; exec only shrinks within it.
        Op::AndSaveExec { dst, n } => {
            if let Some(Code::Disj(l) | Code::Same(l, _)) = get(EXEC) {
                for k in 0..n {
                    out.push((dst + k, Some(Code::SavedExec(l))));
                }
                out.push((EXEC, Some(Code::Serve(l, dst))));
            }
        }
        // v_readfirstlane_b32: the first lane `exec` enables, one the load wrote and nothing
        // touched since when `exec` is within those lanes (and not zero: then it reads lane 0).
        Op::Copy { dst, src, n: 1 } if dst < V && (V..LANES).contains(&src) => {
            if let (
                Some(c @ (Code::FnLo(l, _) | Code::FnHi(l, _))),
                Some(Code::Disj(e) | Code::Same(e, _)),
            ) = (get(src), get(EXEC))
            {
                if l == e {
                    out.push((dst, Some(c)));
                }
            }
        }
        // Only between scalar registers: a vector write may leave some lanes as they were.
        Op::Copy { dst, src, n } if dst + n <= V && src + n <= V => {
            for k in 0..n {
                if let Some(c) = get(src + k) {
                    out.push((dst + k, Some(c)));
                }
            }
        }
        Op::ReadLane {
            dst,
            src,
            lane: Some(l),
        } if (V..LANES).contains(&src) => {
            if let Some(c) = key(l).and_then(|l| get(lane_key(src, l))) {
                out.push((dst, Some(c)));
            }
        }
        Op::Merge {
            dst,
            src,
            lane: Some(l),
        } if (V..LANES).contains(&dst) => {
            if let (Some(c), Some(l)) = (get(src), key(l)) {
                out.push((lane_key(dst, l), Some(c)));
            }
        }
        Op::SLoad {
            base,
            offset,
            soffset,
            bytes,
            dst,
        } if bytes % 8 == 0 && dst % 2 == 0 => {
            let at = table_address(m, base)
                .map(|(a, indexed)| (a.wrapping_add_signed(offset), indexed || soffset.is_some()));
            let in_table = at.is_some_and(|(a, indexed)| {
                tables.iter().any(|&(s, e)| {
                    a >= s && a < e && (indexed || ((a - s) % 8 == 0 && a + u64::from(bytes) <= e))
                })
            });
            // Not a buffer resource (its address is more than the pair).
            if in_table && !inst.reads.contains(&(base, 4)) {
                out.extend(entries(dst, bytes / 8, pc));
            }
        }
        // A plain GLOBAL load through a table's address (an SGPR pair) plus a VGPR index: the
        // lanes that run it hold table entries; `exec` is those lanes.
        Op::Mem
            if inst.kills.len() == 1
                && inst.kills[0].0 >= V
                && inst.kills[0].0 + inst.kills[0].1 <= LANES
                && inst.kills[0].1.is_multiple_of(2) =>
        {
            let (v, n) = inst.kills[0];
            let table = inst
                .addr
                .iter()
                .find(|&&(r, w)| r < V && w == 2)
                .and_then(|&(r, _)| table_address(m, r));
            if table.is_some_and(|(a, _)| tables.iter().any(|&(s, e)| a >= s && a < e)) {
                out.extend(entries(v, u32::from(n / 2), pc));
                out.push((EXEC, Some(Code::Disj(pc))));
            }
        }
        // exec ^ r under Serve(r): r's lanes less exec's; the lanes written since the copy were
        // all in exec, so none of what is left was written (Disj again).
        Op::Xor { dst: EXEC, a, b, n } if a == EXEC || b == EXEC => {
            let r = if a == EXEC { b } else { a };
            let whole = match n {
                1 => wave32 == Some(true),
                _ => wave32 == Some(false),
            };
            if let Some(Code::Serve(l, x)) = get(EXEC) {
                let saved = (r..r + n).all(|k| get(k) == Some(Code::SavedExec(l)));
                if whole && x == r && saved {
                    out.push((EXEC, Some(Code::Disj(l))));
                }
            }
        }
        Op::Call => {
            if let Some(&(r, _)) = inst.kills.first() {
                out.push((r, Some(Code::Ret)));
                out.push((r + 1, Some(Code::Ret)));
            }
        }
        _ => {}
    }
    if inst.vector {
        // A vector instruction writes only the lanes exec enables. One that writes a lane mask
        // to exec (v_cmpx, a VOP3 compare or carry-out into exec) clears the lanes it does not
        // run in: exec only shrinks (Same becomes Serve; Serve says nothing any more).
        let exec_written = inst
            .writes
            .iter()
            .any(|&(r, n)| r <= EXEC + 1 && EXEC < r + n);
        let lanes_only = !matches!(
            inst.op,
            Op::ReadLane { .. } | Op::Merge { .. } | Op::Copy { dst: 0..V, .. }
        );
        let mut exec = get(EXEC);
        if exec_written && lanes_only {
            exec = match exec {
                Some(Code::Same(l, r)) => Some(Code::Serve(l, r)),
                Some(Code::Disj(l)) => Some(Code::Disj(l)),
                _ => None,
            };
            if let Some(c) = exec {
                out.push((EXEC, Some(c)));
            }
        } else if exec_written {
            exec = None;
        }
        // A write to a table load's destination under exec: the lanes written join W. Its
        // entries stay in the other lanes; exec is no longer clear of W unless it serves.
        let hit: Vec<(Reg, Code)> = inst
            .writes
            .iter()
            .flat_map(|&(r, n)| r..r.saturating_add(n))
            .filter(|k| (V..LANES).contains(k))
            .filter_map(|k| match get(k) {
                Some(c @ (Code::FnLo(l, _) | Code::FnHi(l, _))) => Some((k, c, l)),
                _ => None,
            })
            .filter(|_| lanes_only)
            .filter_map(|(k, c, l)| match exec {
                Some(Code::Serve(e, _) | Code::Disj(e) | Code::Same(e, _)) if e == l => {
                    Some((k, c))
                }
                _ => None,
            })
            .collect();
        if !hit.is_empty() && !out.iter().any(|(r, _)| hit.iter().any(|(k, _)| k == r)) {
            if !matches!(exec, Some(Code::Serve(..))) {
                out.retain(|(r, _)| *r != EXEC);
                out.push((EXEC, None));
            }
            out.extend(hit.into_iter().map(|(k, c)| (k, Some(c))));
        }
    }
    out
}

/// The image address the pair at `r` holds, by its marks, and whether an index was added to it:
/// an exact `s_getpc_b64` sum ([`Code::PcLo`]/[`Code::PcHi`]) or one plus a register
/// ([`Code::IdxLo`]/[`Code::IdxHi`]), both halves of the same sum.
fn table_address(m: &BTreeMap<Reg, Code>, r: Reg) -> Option<(u64, bool)> {
    let lo32 = |a: u64| a & 0xffff_ffff;
    match (m.get(&r), m.get(&(r + 1))) {
        (Some(&Code::PcLo(y)), Some(&Code::PcHi(z))) if lo32(y) == lo32(z) => Some((z, false)),
        (Some(&Code::IdxLo(y)), Some(&Code::IdxHi(z))) if lo32(y) == lo32(z) => Some((z, true)),
        _ => None,
    }
}

/// The marks of `n` table entries loaded by the instruction at `pc` into the register pairs
/// from `dst` on ([`Code::FnLo`], [`Code::FnHi`]).
fn entries(dst: Reg, n: u32, pc: u64) -> impl Iterator<Item = (Reg, Option<Code>)> {
    (0..n as u8).flat_map(move |i| {
        let r = dst + 2 * Reg::from(i);
        [
            (r, Some(Code::FnLo(pc, i))),
            (r + 1, Some(Code::FnHi(pc, i))),
        ]
    })
}

/// Drop the marks of every register `inst` may write, then set `made` ([`made`]). Relative
/// register indexing, gfx9's index mode and anything not classified drop every mark.
pub(super) fn apply(
    inst: &Inst,
    st: &mut State,
    made: Vec<(Reg, Option<Code>)>,
    key: &dyn Fn(u8) -> Option<u8>,
) {
    let Some(m) = st.1.as_mut() else { return };
    if matches!(inst.op, Op::Relative | Op::Opaque | Op::Fork) {
        m.clear();
    }
    let one_lane = match inst.op {
        Op::Merge {
            dst, lane: Some(l), ..
        } => Some((dst, l)),
        _ => None,
    };
    for &(r, n) in inst.writes.iter().chain(&inst.kills) {
        for k in r..r.saturating_add(n) {
            match one_lane.and_then(|(d, l)| key(l).filter(|_| d == k)) {
                // A write of one lane: that lane's mark alone.
                Some(l) => {
                    forget(m, k, false);
                    m.remove(&lane_key(k, l));
                    m.remove(&super::flow_state::inside_key(lane_key(k, l)));
                }
                None => forget(m, k, true),
            }
        }
    }
    for (r, c) in made {
        match c {
            Some(c) => m.insert(r, c),
            None => m.remove(&r),
        };
    }
}

/// Drop the marks of register `k`: its own, what it says as a lane mask, exec's where `k` is
/// `exec_hi` (what the mark on exec says of the whole mask), and, with `lanes`, its lanes' (a
/// VGPR's, [`lane_key`]).
pub(super) fn forget(m: &mut BTreeMap<Reg, Code>, k: Reg, lanes: bool) {
    m.remove(&k);
    if k < 128 {
        m.remove(&super::flow_exec::mask_key(k));
    }
    // What `exec` is against its function's entry is [`super::flow_exec::apply`]'s.
    if k < EXEC {
        m.remove(&super::flow_entered::entry_key(k));
    }
    if k == EXEC + 1 {
        m.remove(&EXEC);
    }
    if lanes && (V..LANES).contains(&k) {
        let keys: Vec<Reg> = m
            .range(lane_key(k, 0)..=lane_key(k, 63))
            .map(|(&x, _)| x)
            .collect();
        for x in keys {
            m.remove(&x);
        }
    }
}

/// Whether a call, jump or return through a register pair may be taken (see the module docs):
/// `Ok(true)` when it goes to a sink's start (the call does not come back). `reached` and `sinks`
/// are function starts; `forged` is [`forged_code_address`]'s answer. Errors: why not.
pub(super) fn control(
    inst: &Inst,
    st: &State,
    reached: &std::collections::HashSet<u64>,
    sinks: &std::collections::HashSet<u64>,
    forged: Option<&str>,
) -> Result<bool, String> {
    if !matches!(inst.op, Op::Call | Op::Jump | Op::Return) {
        return Ok(false);
    }
    let (Some(&(r, _)), Some(m)) = (inst.reads.first(), &st.1) else {
        return Ok(false);
    };
    let lo32 = |a: u64| a & 0xffff_ffff;
    match (m.get(&r), m.get(&(r + 1))) {
        (Some(&Code::PcLo(y)), Some(&Code::PcHi(z))) if lo32(y) == lo32(z) => {
            if sinks.contains(&z) {
                Ok(true)
            } else if reached.contains(&z) {
                Ok(false)
            } else {
                Err(format!(
                    "control goes to 0x{z:x}, which is no start of a function the call graph reached"
                ))
            }
        }
        (Some(&Code::FnLo(p, i)), Some(&Code::FnHi(q, j))) if p == q && i == j => match forged {
            Some(why) => Err(format!(
                "control goes to an entry of a function table, and {why}: a table entry may hold that address"
            )),
            None => Ok(false),
        },
        (Some(Code::RetEntry), Some(Code::RetEntry)) if inst.op != Op::Call => Ok(false),
        _ => Err(format!(
            "control goes to s[{r}:{}], which this rcclfix cannot show holds a function's start or a return address on every path",
            r + 1
        )),
    }
}

/// Whether `inst` calls or jumps through a pair that holds a function table's entry
/// ([`Code::FnLo`], [`Code::FnHi`]): what [`control`] takes on trust in the table's contents.
pub(super) fn table_call(inst: &Inst, st: &State) -> bool {
    let (Some(&(r, _)), Some(m)) = (inst.reads.first(), &st.1) else {
        return false;
    };
    matches!(inst.op, Op::Call | Op::Jump)
        && matches!(
            (m.get(&r), m.get(&(r + 1))),
            (Some(Code::FnLo(..)), Some(Code::FnHi(..)))
        )
}

/// The target of a long branch at `inst` (llvm `SIInstrInfo::insertIndirectBranch`: an
/// `s_setpc_b64` through a pair that holds, on every path, the exact `s_getpc_b64` sum
/// [`Code::PcLo`]/[`Code::PcHi`] of an address inside the function `start..end` other than its
/// start): control goes on there, as after a branch. `None` for anything else, which
/// [`control`] judges.
pub(super) fn long_branch(inst: &Inst, st: &State, start: u64, end: u64) -> Option<u64> {
    if inst.op != Op::Jump {
        return None;
    }
    let (&(r, _), m) = (inst.reads.first()?, st.1.as_ref()?);
    match (m.get(&r), m.get(&(r + 1))) {
        (Some(&Code::PcLo(y)), Some(&Code::PcHi(z)))
            if y & 0xffff_ffff == z & 0xffff_ffff && z > start && z < end =>
        {
            Some(z)
        }
        _ => None,
    }
}

/// What a call at `inst` leaves a callee (and a jump the function it enters): the link pair is
/// the callee's own return address ([`Code::RetEntry`]); no other register holds one (the
/// caller's own, kept in a callee-saved register or a lane, is the caller's, and a call's
/// return address of the caller's is no return of the callee's). A jump keeps the function's
/// own return address for the function it enters (a tail call returns for it).
pub(super) fn callee_view(inst: &Inst, st: &State) -> State {
    let mut v = st.clone();
    if let Some(m) = v.1.as_mut() {
        if inst.op == Op::Call {
            m.retain(|_, c| !matches!(c, Code::Ret | Code::RetEntry));
            if let Some(&(r, _)) = inst.kills.first() {
                m.insert(r, Code::RetEntry);
                m.insert(r + 1, Code::RetEntry);
            }
        } else {
            m.retain(|_, c| !matches!(c, Code::Ret));
        }
    }
    v
}

#[cfg(test)]
#[path = "flow_marks_tests.rs"]
mod tests;
