//! Writes that land late. A memory load (an atomic that returns, a message that answers) writes
//! its destination registers when its data comes back, after the instructions that follow it
//! have run; the code must wait for the counter that counts it (`s_waitcnt`, gfx12's
//! `s_wait_*`) before it reads them, and nothing makes it. Until then a read of such a register
//! gives what it held before or what the load returns, and a write to it may be overwritten
//! when the load returns (the thirteenth review's `ldrace`, `tests/fixtures/patch/findings13/`:
//! a table's entry read from a register a load was about to replace).
//!
//! So each register a load writes is pending ([`super::flow_state::Pend`]) from the load until a wait brings every
//! counter that counts the load ([`super::inst::Inst::counts`]) to zero
//! ([`super::inst::Inst::waits`]):
//! - the load itself only joins what it returns into the register ([`super::flow`]'s step
//!   writes it as a possible write, never an exact one);
//! - a write to a pending register joins what the load returns into it, in every lane;
//! - a pending register has no mark ([`super::flow_marks`]): what the marks say of it is not
//!   certain while the load may still land; the marks the load makes wait in [`super::flow_state::Pend::mark`];
//! - the wait replaces the register's value with what the load returned, and sets the load's
//!   marks, only where the load fills the register and nothing wrote it or moved `exec`'s lanes
//!   since, on every path to the wait ([`super::flow_state::Pend::exact`]); otherwise the joined value stays.
//!
//! A wait settles a load when it brings every counter that counts the load to zero, or, for a
//! load of a queue that returns in issue order ([`Queue`]: plain vector memory
//! loads on `vmcnt` or `loadcnt`, LDS loads on `lgkmcnt` or `dscnt`), when it leaves at most as many of its counter
//! outstanding as loads of the same queue issued after it on every path: were the load still
//! out, so would they be, and the counter above the count. Nothing else is followed (FLAT, an
//! image, a scalar load settle only at zero). A load into `exec` is refused, since it would move
//! the lanes at a moment no instruction marks.
//!
//! Sources: the RDNA1–RDNA4 and CDNA1–CDNA3 ISA guides ("Data Dependency Resolution":
//! "the shader must use S_WAITCNT … before using the data", `S_WAITCNT`); llvm
//! `SIInsertWaitcnts.cpp` (which counters count which instruction).

use super::flow_exec::Exec;
use super::flow_state::{base, is_vgpr, join, out_key, Code, Pend, State, Val};
use super::inst::{Inst, Op, Queue, Reg, EXEC, NO_WAIT};

/// What `inst` does to the pending registers of `st`, after its other effects (its values, its
/// marks and [`Exec`] transition `exec`): `issued` are the registers it writes late, each with
/// what it writes and whether it fills it ([`super::flow`]'s step); `marks` the marks its load
/// makes of them, held until it is done. Errors: a late write into `exec`.
pub(super) fn settle(
    inst: &Inst,
    exec: Exec,
    st: &mut State,
    issued: &[(Reg, Val, bool, bool)],
    marks: &[(Reg, Code)],
) -> Result<(), String> {
    if issued.iter().any(|&(r, ..)| r == EXEC || r == EXEC + 1) {
        return Err("a load into exec (it would change the lanes when it returns)".into());
    }
    // A write to a pending register: the load may land after it.
    let hit: Vec<(Reg, Val)> =
        st.2.iter()
            .filter(|(&r, _)| inst.may_write(r))
            .map(|(&r, p)| (r, p.val))
            .collect();
    for (r, v) in hit {
        land(st, r, v);
        if let Some(p) = st.2.get_mut(&r) {
            p.exact = false;
            p.all = false;
            p.mark = None;
        }
    }
    if exec != Exec::Same {
        st.inexact(true);
    }
    // A load of an in-order queue: one more after each pending load of that queue.
    if inst.queue != Queue::None {
        for p in st.2.values_mut().filter(|p| p.queue == inst.queue) {
            p.younger = p.younger.saturating_add(1).min(NO_WAIT - 1);
        }
    }
    let returned = |p: &Pend| {
        let left = match p.queue {
            Queue::VmLoad => inst.left[0],
            Queue::DsLoad => inst.left[1],
            Queue::None => NO_WAIT,
        };
        p.counts & !inst.waits == 0 || (left != NO_WAIT && p.younger >= left)
    };
    if inst.waits != 0 || inst.left != [NO_WAIT; 2] {
        let done: Vec<(Reg, Pend)> =
            st.2.iter()
                .filter(|(_, p)| returned(p))
                .map(|(&r, &p)| (r, p))
                .collect();
        for (r, p) in done {
            st.2.remove(&r);
            if p.all {
                st.write_all(r, p.val);
            } else if p.exact {
                if is_vgpr(r) {
                    st.write_in(r, p.val, true);
                } else {
                    st.write(r, p.val, true);
                }
                if let (Some(m), Some(c)) = (st.1.as_mut(), p.mark) {
                    m.insert(r, c);
                }
            }
        }
    }
    for &(r, v, exact, all) in issued {
        let mark = marks.iter().find(|(k, _)| *k == r).map(|&(_, c)| c);
        let p = match st.2.get(&r) {
            // Two loads in flight to one register: either may land last.
            Some(old) => Pend {
                counts: old.counts | inst.counts,
                val: join(old.val, v),
                exact: false,
                all: false,
                mark: None,
                queue: Queue::None,
                younger: 0,
            },
            None => Pend {
                counts: inst.counts,
                val: v,
                exact,
                all,
                mark,
                queue: inst.queue,
                younger: 0,
            },
        };
        st.2.insert(r, p);
    }
    strip(st);
    Ok(())
}

/// What a late write of `v` may leave in register `r`: `v` in any of its lanes.
fn land(st: &mut State, r: Reg, v: Val) {
    let old = st.get(r);
    st.set(r, join(old, v));
    if is_vgpr(r) {
        let out = st.out(r);
        st.set(out_key(r), join(out, v));
        for (k, x) in st.lanes_of(r) {
            st.set(k, join(x, v));
        }
    }
}

/// How many instructions after a vector memory store of more than 64 bits issues it may still
/// read its data registers: llvm `GCNHazardRecognizer.cpp` (`createsVALUHazard`,
/// `checkVALUHazards`) asks for one wait state between such a store and a VALU write of its
/// data, two on gfx94x; two here, for every generation and any writer.
pub(super) const LATE_READ: u8 = 2;

/// How many instructions after a register is overwritten a vector or scalar memory instruction
/// or a vector ALU instruction may still read what it held: the longest wait-state requirement
/// llvm `GCNHazardRecognizer.cpp` knows between a write and such a read is 18 (an MFMA's
/// result read by a VALU on gfx90a; a VALU write of an SGPR read by a VMEM instruction on gfx9
/// needs 5, a transcendental result read by a VALU on gfx11 up to 5, a DPP read 2). Every
/// instruction counts as one wait state here, an `s_nop` too, which makes the window longer,
/// never shorter.
pub(super) const STALE_READ: u8 = 20;

/// Whether `inst` reads what a register held before its last write, inside the window
/// ([`STALE_READ`]): a memory instruction's SGPR operands (VMEM, FLAT, DS, SMEM: gfx9's VALU
/// write of an SGPR a VMEM instruction reads needs 5 wait states, the fourteenth review's
/// `sgprhaz`; its VGPR operands are interlocked) or any operand of a vector
/// instruction that is not lanewise (DPP, `v_readlane`/`v_writelane` with a lane select, which
/// need 2 and 4 on gfx9); and any vector instruction, where a gfx11 or gfx12 transcendental
/// wrote the register ([`super::inst::Inst::late_result`], the fourteenth review's
/// `transuse`). A lanewise VALU instruction and scalar ALU instructions are taken to wait for
/// their other operands, but for gfx12's SGPR read hazards ([`super::flow_alu`]).
pub(super) fn reads_stale(inst: &Inst) -> bool {
    memory(inst) || (inst.vector && !inst.lanewise)
}

/// A memory instruction that reads registers ([`reads_stale`]), or a scalar message (`s_sendmsg`
/// reads `m0`, which gfx9's scalar write needs a wait state before: llvm
/// `GCNHazardRecognizer::checkReadM0Hazards`).
fn memory(inst: &Inst) -> bool {
    (inst.counts != 0 || !inst.vector) && matches!(inst.op, Op::Mem | Op::SLoad { .. } | Op::Opaque)
}

/// The state `inst` reads, from `st`: each register it reads that was overwritten inside the
/// window holds what it holds now or what it held, and has no mark. Returns that state and the
/// keys so changed, each with what it holds now, for [`unread_stale`].
pub(super) fn read_stale(inst: &Inst, st: &State) -> Option<(State, Vec<(Reg, Val)>)> {
    // gfx12's SGPR hazards ([`super::flow_alu`]): an ALU instruction may read an SGPR stale.
    let alu = super::flow_alu::stale_reads(inst, st);
    let any_vector = inst.vector && st.3.stale.values().any(|e| e.2);
    if alu.is_empty() && (st.3.stale.is_empty() || !(reads_stale(inst) || any_vector)) {
        return None;
    }
    // A memory instruction reads a VGPR a VALU wrote in order, an SGPR not (gfx9); a lane move
    // (`v_readfirstlane`, `v_readlane`, `v_writelane`) reads its lane select register stale, its
    // source and destination in order; any other vector instruction that is not lanewise (DPP)
    // may read any operand stale.
    let in_order: Vec<Reg> = match inst.op {
        Op::Copy { src, dst, .. } => vec![src, dst],
        Op::ReadLane { src, dst, .. } | Op::Merge { src, dst, .. } => vec![src, dst],
        _ => Vec::new(),
    };
    let lane_move = !in_order.is_empty() && inst.vector;
    let lanes = inst.vector && !inst.lanewise && !memory(inst) && !lane_move;
    let read = |b: Reg| {
        (lanes || b < super::inst::V)
            && !(lane_move && in_order.contains(&b))
            && inst
                .reads
                .iter()
                .filter(|&&(r, _)| !(lane_move && in_order.contains(&r)))
                .any(|&(r, n)| (r..r.saturating_add(n)).contains(&b))
    };
    let now = |k: Reg| st.0.get(&k).copied().unwrap_or(Val::Clean);
    let keys: Vec<(Reg, Val, Val)> = st
        .3
        .stale
        .iter()
        .filter(|(&k, e)| {
            (reads_stale(inst) && read(base(k))) || (e.2 && inst.vector && inst.reads_reg(base(k)))
        })
        .map(|(&k, &(v, _, _))| (k, now(k), v))
        .chain(alu.iter().map(|&(k, old)| (k, now(k), old)))
        .collect();
    if keys.is_empty() {
        return None;
    }
    let mut patched = st.clone();
    for &(k, now, old) in &keys {
        patched.set(k, join(now, old));
        if let Some(m) = patched.1.as_mut() {
            // An SGPR read stale: nothing the marks say of what it holds (a lane mask, a copy
            // of the entry's exec) holds either.
            if k < 128 {
                super::flow_marks::forget(m, k, false);
            } else {
                m.remove(&base(k));
            }
        }
    }
    Some((
        patched,
        keys.into_iter().map(|(k, now, _)| (k, now)).collect(),
    ))
}

/// After `inst` ran on the state [`read_stale`] made, from `orig` (the state before it): every
/// key it made read stale and did not write is set back to what it held, with its marks.
pub(super) fn unread_stale(inst: &Inst, st: &mut State, orig: &State, keys: &[(Reg, Val)]) {
    for &(k, now) in keys {
        let b = base(k);
        if !inst.may_write(b) {
            st.set(k, now);
            if let (Some(m), Some(o)) = (st.1.as_mut(), orig.1.as_ref()) {
                // The keys [`read_stale`] dropped: an SGPR's as [`super::flow_marks::forget`]
                // drops them.
                let mut marks = vec![b];
                if b < 128 {
                    marks.push(super::flow_exec::mask_key(b));
                    marks.push(super::flow_entered::entry_key(b));
                }
                for x in marks {
                    match o.get(&x) {
                        Some(&c) => m.insert(x, c),
                        None => m.remove(&x),
                    };
                }
            }
        }
    }
}

/// The windows after `inst`: what a vector ALU instruction overwrote that held a followed value
/// opens a stale window (`before` is the state before it; `m0` is the generation's `m0`, whose
/// scalar writes do too); what it writes into registers an earlier instruction may still read
/// is returned, joined: `.0` into a store's data (the fourteenth review's `stlate`: a store of
/// zeros whose data registers the very next instruction sets to a table's entry sends the
/// entry), `.1` into an MFMA's sources or an address a replayed clause may read again
/// (`mfmawar`, `xnack`). Then the registers `inst` itself reads late open a window (`data`: its
/// data registers when it is a vector memory store of more than 64 bits, for [`LATE_READ`]
/// instructions; `strict`: an MFMA's sources, for [`STALE_READ`]; `clause`: `Some` when `inst`
/// is a vector memory access, its address registers where XNACK may replay the clause, until
/// an instruction that is not one ends it), and every window ages by one instruction.
pub(super) fn windows(
    inst: &Inst,
    st: &mut State,
    before: &State,
    data: &[(Reg, u16)],
    strict: &[(Reg, u16)],
    clause: Option<&[(Reg, u16)]>,
    m0: Reg,
) -> (Val, Val) {
    // An instruction that is no vector memory access ends the clause: a fault no longer
    // replays what came before it.
    if clause.is_none() {
        st.3.clause.clear();
    }
    let hit = |want: bool| {
        st.3.late
            .iter()
            .filter(|(&k, &(_, s))| s == want && inst.may_write(k))
            .fold(Val::Clean, |acc, (&k, _)| join(acc, st.range((k, 1))))
    };
    let in_clause =
        st.3.clause
            .iter()
            .filter(|&&k| inst.may_write(k))
            .fold(Val::Clean, |acc, &k| join(acc, st.range((k, 1))));
    let v = (hit(false), join(hit(true), in_clause));
    for &(r, n) in clause.unwrap_or_default() {
        st.3.clause.extend(r..r.saturating_add(n));
    }
    st.3.late.retain(|_, e| {
        e.0 -= 1;
        e.0 > 0
    });
    st.3.stale.retain(|_, e| {
        e.1 -= 1;
        e.1 > 0
    });
    for (regs, left, s) in [(data, LATE_READ, false), (strict, STALE_READ, true)] {
        for &(r, n) in regs {
            for k in r..r.saturating_add(n) {
                let e = st.3.late.entry(k).or_insert((left, s));
                *e = (e.0.max(left), e.1 || s);
            }
        }
    }
    // A followed value a vector ALU instruction overwrote (or a scalar one in `m0`, which gfx9's
    // LDS and message instructions read a wait state late): a read may still see it. A scalar
    // ALU write is seen at once; a load's late write is [`settle`]'s.
    let changed: Vec<(Reg, Val)> = before
        .0
        .iter()
        .filter(|(&k, _)| (inst.vector && inst.counts == 0) || k == m0)
        .filter(|(&k, &old)| old != Val::Clean && st.0.get(&k) != Some(&old))
        .map(|(&k, &old)| (k, old))
        .collect();
    for (k, old) in changed {
        let all = inst.late_result && base(k) >= super::inst::V;
        let e = st.3.stale.entry(k).or_insert((old, STALE_READ, all));
        *e = (join(e.0, old), STALE_READ, e.2 || all);
    }
    v
}

/// gfx94x's vector ALU SGPR hazard (llvm `GCNHazardRecognizer.cpp`, `hasVDecCoExecHazard`,
/// `VALUWriteSGPRVALUReadWaitstates`: two wait states): each SGPR a vector ALU instruction
/// writes may be read stale by any vector instruction for [`STALE_READ`] instructions, whatever
/// it held (its marks too: a stale read has none; the twenty-first review's `vdecsgpr`).
pub(super) fn coexec(inst: &Inst, st: &mut State, before: &State) {
    if !inst.vector || inst.counts != 0 || matches!(inst.op, Op::Mem | Op::Opaque) {
        return;
    }
    let written: Vec<Reg> = (0..128).filter(|&k| inst.may_write(k)).collect();
    for k in written {
        let old = before.get(k);
        let e = st.3.stale.entry(k).or_insert((old, STALE_READ, true));
        *e = (join(e.0, old), STALE_READ, true);
    }
}

/// The state after a call, from the caller's pending registers and the callee's returns' (both
/// joined into `st` already): none exact (a callee's returns are every caller's), and no marks
/// on any.
pub(super) fn after_call(st: &mut State) {
    st.inexact(false);
    strip(st);
}

/// Drop the marks of every pending register (its lanes', and what it says as a lane mask).
pub(super) fn strip(st: &mut State) {
    let Some(m) = st.1.as_mut() else { return };
    for &r in st.2.keys() {
        super::flow_marks::forget(m, r, true);
    }
}

#[cfg(test)]
#[path = "flow_wait_tests.rs"]
mod tests;
