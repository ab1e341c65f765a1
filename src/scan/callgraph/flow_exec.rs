//! Which lanes a VGPR write replaces. Each VGPR's value is split in two: what the lanes `exec`
//! enables hold (the register's own key) and what the others hold
//! ([`super::flow_state::out_key`]). A lanewise instruction ([`Inst::lanewise`]) reads and writes
//! only the first; one that fills its destination ([`Inst::full`]) replaces it. So a value a
//! register held once (a function table's entry a waterfall loop loaded, which the flow follows
//! as a code address since the twelfth review's `entbase`, `tests/fixtures/patch/findings12/`)
//! is gone from the lanes a later write covers, and stays only in the others.
//!
//! How `exec` moves the split, from what an instruction does to `exec` ([`transition`]):
//! - narrowing it (`s_and_saveexec`, `s_and`/`s_andn2` of `exec` with anything, any vector
//!   instruction that writes a lane mask to `exec`, such as `v_cmpx`, which writes 0 for the lanes
//!   it does not run in): the lanes inside stay inside, those that leave join the others
//!   ([`Exec::Narrow`]);
//! - every lane on while a copy of `exec` is kept (`s_or_saveexec` in a prologue, which saves a
//!   VGPR whole): the split stays where it was ([`Code::Split`] on the copy, [`Code::Wide`] on
//!   `exec`); a lanewise instruction then reads both sides, and writes the inside and may write
//!   the outside; a copy of that saved mask back into `exec` ends it ([`Exec::Restore`]);
//! - anything else (a restore to a wider mask, a waterfall loop's `s_xor`, a mask from memory):
//!   every lane may hold what any lane held ([`Exec::Reset`]), and the split starts again at the
//!   new `exec`.
//!
//! A call leaves its callee the split as it is (the callee's `exec` is the caller's); after it,
//! the lanes inside hold what the callee's returns leave there, and the lanes outside what they
//! held or what the callee's returns leave there (the calling convention says a callee keeps
//! them, llvm `AMDGPUUsage.rst`, "Call Convention", but code in the image need not: the
//! thirteenth review's `callout`). The split itself outlives the call only where every return
//! shows `exec` as its function entered it ([`super::flow_entered`], [`super::flow_call`]);
//! otherwise every lane may hold what any lane held. On gfx9 no write replaces a VGPR's value: an AGPR shares its
//! number here (`agpr2`).
//!
//! Sources: the ISA manuals' `EXEC` ("vector instructions write only the lanes EXEC enables"),
//! `V_CMPX_*`, `S_AND_SAVEEXEC_B32/B64`, `S_OR_SAVEEXEC_B32/B64`.

use super::flow_state::{join, out_key, Code, State, OUT};
use super::inst::{Inst, Logic, Op, Reg, EXEC, V};
use std::collections::BTreeMap;

/// The first [`mask_key`] (the marks' keys below it are registers and VGPR halves, those from
/// [`super::flow_state::LANES`] VGPR lanes).
pub(super) const MASKS: Reg = 768;

/// The key of a mark ([`Code::AllOn`]) that `exec` holds every lane (`s_or_saveexec` of -1, a
/// prologue's or epilogue's, until the next move of `exec`): a write that fills its destination
/// then replaces what every lane held, inside the split and out ([`all_on`]).
pub(super) const ALL_ON: Reg = MASKS + 255;

/// Whether `exec` holds every lane in `st` ([`ALL_ON`]).
pub(super) fn all_on(st: &State) -> bool {
    st.1.as_ref()
        .is_some_and(|m| m.get(&ALL_ON) == Some(&Code::AllOn))
}

/// The key, among the marks, of what is known of scalar register `r` (below 128) as a lane mask
/// ([`Code::Split`], [`Code::Wide`]).
pub(super) fn mask_key(r: Reg) -> Reg {
    MASKS + r
}

fn clear(m: &mut BTreeMap<Reg, Code>) {
    m.retain(|&k, _| !(MASKS..MASKS + 128).contains(&k));
}

/// How lanewise instructions see the VGPRs in `st`: `false` the split is `exec`'s (read and write
/// the inside), `true` `exec` holds every lane of the split's mask and maybe more
/// ([`Code::Wide`]: read both sides, write the inside and maybe the outside).
pub(super) fn wide(st: &State) -> bool {
    st.1.as_ref()
        .is_some_and(|m| m.get(&mask_key(EXEC)) == Some(&Code::Wide))
}

/// What an instruction does to `exec`, as far as the split goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exec {
    /// It does not write `exec`, or writes what was there.
    Same,
    /// `exec` becomes a subset of what it was.
    Narrow,
    /// Every lane on, a copy of the old `exec` kept ([`made`] marks both).
    Widen,
    /// `exec` becomes the split's mask again.
    Restore,
    /// Anything else.
    Reset,
}

/// What `inst` does to `exec`, from the marks of `st` before it. `wave32`: every kernel followed
/// runs wave32 (`exec_hi` means nothing there, so a 32-bit write restores all of `exec`).
pub(super) fn transition(inst: &Inst, st: &State, wave32: bool) -> Exec {
    // Relative indexing (`s_movreld`: m0 picks the register), gfx9's index mode, an image
    // instruction or a computed jump may write exec where no operand says.
    if matches!(inst.op, Op::Relative | Op::Opaque | Op::Fork) {
        return Exec::Reset;
    }
    if !inst.may_write(EXEC) && !inst.may_write(EXEC + 1) {
        return Exec::Same;
    }
    let Some(m) = &st.1 else { return Exec::Reset };
    let wide = m.get(&mask_key(EXEC)) == Some(&Code::Wide);
    // Registers `r`… hold the split's mask, half by half from the low one.
    let split = |r: Reg, n: u16| {
        (0..n).all(|k| r + k < 128 && m.get(&mask_key(r + k)) == Some(&Code::Split(k as u8)))
    };
    let narrow = if wide { Exec::Reset } else { Exec::Narrow };
    let whole = |n: u16| n == 2 || wave32;
    match inst.op {
        Op::AndSaveExec { .. } => narrow,
        Op::Logic {
            dst: EXEC,
            a,
            b,
            kind: Logic::And,
            ..
        } if a == EXEC || b == EXEC => narrow,
        Op::Logic {
            dst: EXEC,
            a: EXEC,
            kind: Logic::AndNot,
            ..
        } => narrow,
        // exec | the split's mask: exec again (it holds the split's mask, wide or not).
        Op::Logic {
            dst: EXEC,
            a,
            b,
            n,
            kind: Logic::Or,
        } if (a == EXEC && split(b, n)) || (b == EXEC && split(a, n)) => Exec::Same,
        Op::Copy { dst: EXEC, src, n } if whole(n) && split(src, n) => {
            if wide {
                Exec::Restore
            } else {
                Exec::Same
            }
        }
        Op::OrSaveExec { dst, n, .. } if whole(n) && dst + n <= 128 && !wide => Exec::Widen,
        Op::OrSaveExec { .. } if wide => Exec::Same,
        // A compare writes 0 for the lanes it does not run in; anything else that writes exec
        // (`v_readfirstlane_b32` of a constant, the thirteenth review's `rfl`; a VOP3b
        // carry-out, whose inactive lanes no ISA guide this rcclfix cites describes) may turn
        // any lane on.
        _ if inst.vector && inst.lanewise && inst.lane_mask => narrow,
        _ => Exec::Reset,
    }
}

/// The [`Code::Split`] and [`Code::Wide`] marks `inst` makes, from the marks before it (applied
/// after the marks of the registers it writes are dropped, [`super::flow_marks::apply`]; `t` is
/// [`transition`]'s answer).
pub(super) fn made(inst: &Inst, st: &State, t: Exec) -> Vec<(Reg, Option<Code>)> {
    let Some(m) = &st.1 else { return Vec::new() };
    let wide = m.get(&mask_key(EXEC)) == Some(&Code::Wide);
    let mut out = Vec::new();
    // Every lane on after `s_or_saveexec` of -1; any other move of exec may turn some off.
    let every = match inst.op {
        Op::OrSaveExec { all, n, .. } => all && (t == Exec::Widen || (t == Exec::Same && n == 2)),
        _ => false,
    };
    if every {
        out.push((ALL_ON, Some(Code::AllOn)));
    } else if t != Exec::Same {
        out.push((ALL_ON, None));
    }
    match inst.op {
        // A copy of exec while the split is exec's is the split's mask; a copy of such a copy too.
        Op::Copy { dst, src, n } if dst + n <= 128 && src + n <= 128 => {
            for k in 0..n {
                let c = if src + k == EXEC || src + k == EXEC + 1 {
                    (!wide).then_some(Code::Split((src + k - EXEC) as u8))
                } else {
                    m.get(&mask_key(src + k))
                        .copied()
                        .filter(|c| matches!(c, Code::Split(_)))
                };
                out.push((mask_key(dst + k), c));
            }
        }
        Op::OrSaveExec { dst, n, .. } if t == Exec::Widen => {
            for k in 0..n {
                out.push((mask_key(dst + k), Some(Code::Split(k as u8))));
            }
            out.push((mask_key(EXEC), Some(Code::Wide)));
        }
        Op::OrSaveExec { .. } if wide && t == Exec::Same => {
            out.push((mask_key(EXEC), Some(Code::Wide)));
        }
        Op::Logic { dst: EXEC, .. } if wide && t == Exec::Same => {
            out.push((mask_key(EXEC), Some(Code::Wide)));
        }
        _ => {}
    }
    out
}

/// The VGPRs `st` holds anything for, inside or outside the split.
fn vgprs(st: &State) -> Vec<Reg> {
    let mut v: Vec<Reg> =
        st.0.range(V..OUT + 256)
            .map(|(&k, _)| if k >= OUT { V + (k - OUT) } else { k })
            .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Every lane may hold what any lane held.
fn mix(st: &mut State) {
    for v in vgprs(st) {
        let all = join(st.get(v), st.out(v));
        st.set(v, all);
        st.set(out_key(v), all);
    }
    // No lane is known to hold the inside's value ([`Code::Inside`]) once every lane may hold
    // what any lane held.
    if let Some(m) = st.1.as_mut() {
        m.retain(|&k, _| k < super::flow_state::INSIDE);
    }
}

/// Apply transition `t` to the values of `st` after the instruction's other effects (and its
/// marks): a narrowing moves what the inside held to the outside too, a reset mixes every lane;
/// both end what the split's masks said.
pub(super) fn apply(t: Exec, st: &mut State) {
    match t {
        Exec::Same | Exec::Widen | Exec::Restore => {}
        Exec::Narrow => {
            for v in vgprs(st) {
                let both = join(st.get(v), st.out(v));
                st.set(out_key(v), both);
            }
        }
        Exec::Reset => mix(st),
    }
    if matches!(t, Exec::Narrow | Exec::Reset) {
        if let Some(m) = st.1.as_mut() {
            clear(m);
            m.remove(&ALL_ON);
        }
    }
}

/// What a call or jump leaves its target, from the caller's `st` (its marks already the
/// callee's, [`super::flow_marks::callee_view`]): the split as it is, no mask known (the callee's
/// own `exec` is its split). `wide`: the call runs with every lane on ([`wide`] before it), so the
/// callee's lanes are any of the caller's.
pub(super) fn to_callee(st: &mut State, wide: bool) {
    if let Some(m) = st.1.as_mut() {
        clear(m);
    }
    if wide {
        mix(st);
        st.inexact(true);
    }
}

/// The caller's VGPRs after a call, from `st` (what the callee's returns leave, the VGPRs no
/// callee writes already set back to `pre`'s) and `pre` (the caller's state before the call):
/// inside, what the callee left; outside, what they held joined with what the callee's returns
/// leave there (the calling convention says a callee keeps them; code in the image need not, the
/// thirteenth review's `callout`: the callee's outside lanes started as the caller's); a VGPR of
/// `kept` (no callee writes it) as it was, in every lane. `wide`: the call ran with every lane
/// on, or `exec` may not be as it was after it: every lane may hold what any lane held.
pub(super) fn after_call(st: &mut State, pre: &State, wide: bool, kept: &dyn Fn(Reg) -> bool) {
    let mut regs = vgprs(st);
    regs.extend(vgprs(pre));
    regs.sort_unstable();
    regs.dedup();
    for v in regs {
        let (i, o) = if kept(v) {
            (pre.get(v), pre.out(v))
        } else {
            (st.get(v), join(pre.out(v), st.out(v)))
        };
        st.set(v, i);
        st.set(out_key(v), o);
    }
    if wide {
        mix(st);
    }
}

/// The caller's masks after a call (`pre`: its marks before the call): where `exec` is as it
/// was (every return shows it so, [`super::flow_entered::as_entered`]), `exec` keeps its mask and
/// each callee-saved SGPR of `kept` (those every return shows as entered) its own; otherwise the
/// split starts again from the callee's `exec` and no register holds its mask (the
/// twenty-fourth review's `splitcall`: a saved copy of the caller's wider `exec` kept `Split`
/// across a callee that came back with one lane on, so restoring it was taken as no change).
pub(super) fn after_call_masks(
    st: &mut State,
    pre: &BTreeMap<Reg, Code>,
    kept: &[Reg],
    exec: bool,
) {
    let Some(m) = st.1.as_mut() else {
        return;
    };
    clear(m);
    if !exec {
        return;
    }
    for &r in [EXEC, EXEC + 1].iter().chain(kept) {
        if let Some(&c) = pre.get(&mask_key(r)) {
            m.insert(mask_key(r), c);
        }
    }
}

#[cfg(test)]
#[path = "flow_exec_tests.rs"]
mod tests;
