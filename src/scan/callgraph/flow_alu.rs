//! gfx12's SGPR read hazards. On gfx12 an ALU write of an SGPR that a vector ALU instruction has
//! read lands late: until the code waits with `s_wait_alu` (`s_waitcnt_depctr`), a scalar ALU
//! write may be read stale by any ALU instruction, and a vector ALU write by a vector ALU
//! instruction (llvm `AMDGPUWaitSGPRHazards.cpp`, which inserts those waits; its model is the
//! one followed here). A stale read sees what the register held before the write, so a read
//! there holds what it holds now or what it held, with no mark
//! ([`super::flow_wait::read_stale`]).
//!
//! As that pass models it:
//! - only SGPRs up to `s127` count, `vcc` included; `m0`, `null` and `exec` never;
//! - a register is exposed only once a vector ALU instruction has read its pair (`s[2k:2k+1]`)
//!   ([`Windows::tracked`], from the kernel's start: the flow enters every function from its
//!   callers' states, so a callee sees what its callers tracked);
//! - `s_wait_alu` with `sa_sdst(0)` lands the scalar writes, `va_sdst(0)` the vector writes of
//!   registers other than `vcc`, `va_vcc(0)` the vector writes of `vcc`
//!   ([`super::inst::alu`]);
//! - a scalar memory instruction lands every write;
//! - a call, jump or return writes its link pair with no hazard (the pass adds no wait for it in
//!   the callee), and reads its target pair as any scalar instruction does: stale, where the
//!   flow then cannot tell where control goes (the twentieth review's `setpcstale`,
//!   `tests/fixtures/patch/findings20/`; [`super::flow`] reads stale before it decides).
//!
//! - a scalar ALU read of a tracked SGPR lands the vector writes of every SGPR but `vcc`, one of
//!   `vcc` those of `vcc` (not a call's, jump's or return's read: the pass waits before those
//!   instead).
//!
//! Not taken from the pass, each refusing more, never less: a buffer or image instruction
//! landing every write (this rcclfix does not tell them from FLAT), a scalar read of `vcc`
//! landing its scalar writes too, and `ds_nop` forgetting the tracked pairs.
//!
//! [`Windows::tracked`]: super::flow_state::Windows::tracked

use super::flow_state::{join, State, Val};
use super::inst::{alu, Inst, Op, Reg, EXEC, VCC};

/// Whether `k` is an SGPR the hazard covers (`s0`–`s127` but `null` (124), `m0` (125) and
/// `exec`; gfx12's numbering).
fn covered(k: Reg) -> bool {
    k < 124 || (k > EXEC + 1 && k < 128)
}

/// `Some(true)` for a vector ALU instruction, `Some(false)` for any scalar instruction but a
/// scalar load (control, messages and `s_setreg` included, whatever counter the decoder says
/// they may answer on: the twentieth review's `setpcstale`, an `s_setpc_b64` the decoder counts
/// on every counter), `None` for a scalar load and a vector memory access, export or image
/// instruction.
fn kind(inst: &Inst) -> Option<bool> {
    match inst.op {
        Op::SLoad { .. } => None,
        _ if !inst.vector => Some(false),
        Op::Mem | Op::Opaque => None,
        _ if inst.counts != 0 => None,
        _ => Some(true),
    }
}

/// The SGPRs `inst` may read stale from `st`, each with what it held before the writes that may
/// not have landed.
pub(super) fn stale_reads(inst: &Inst, st: &State) -> Vec<(Reg, Val)> {
    let Some(vector) = kind(inst) else {
        return Vec::new();
    };
    st.3.alu
        .iter()
        .filter(|(&k, &(_, src))| (vector || src & alu::SA_SDST != 0) && inst.reads_reg(k))
        .map(|(&k, &(old, _))| (k, old))
        .collect()
}

/// The hazards after `inst` ran (`before`: the state before it, `st` after): the writes its
/// `s_wait_alu` lands are gone, the pairs a vector ALU instruction reads are tracked, and each
/// tracked SGPR it writes may be read stale.
pub(super) fn after(inst: &Inst, st: &mut State, before: &State) {
    let w = &mut st.3;
    if inst.alu_waits != 0 {
        w.alu.retain(|_, e| {
            e.1 &= !inst.alu_waits;
            e.1 != 0
        });
    }
    if matches!(inst.op, Op::SLoad { .. }) {
        w.alu.clear();
        return;
    }
    let Some(vector) = kind(inst) else { return };
    let read: Vec<Reg> = inst
        .reads
        .iter()
        .flat_map(|&(r, n)| r..r.saturating_add(n))
        .filter(|&k| covered(k))
        .collect();
    if vector {
        for &k in &read {
            w.tracked |= 1 << (k / 2);
        }
    } else if !matches!(inst.op, Op::Call | Op::Jump | Op::Return) {
        // A scalar ALU read of a tracked SGPR lands the vector writes: of `vcc` where it reads
        // `vcc`, of every other SGPR where it reads another (the pass's "SALU reading SGPR
        // clears VALU hazards").
        let tracked = |k: Reg| w.tracked & (1 << (k / 2)) != 0;
        let vcc = |k: Reg| k == VCC || k == VCC + 1;
        let mut lands = 0;
        for &k in read.iter().filter(|&&k| tracked(k)) {
            lands |= if vcc(k) { alu::VA_VCC } else { alu::VA_SDST };
        }
        w.alu.retain(|&k, e| {
            let own = if vcc(k) { alu::VA_VCC } else { alu::VA_SDST };
            if lands & own != 0 {
                e.1 &= !own;
            }
            e.1 != 0
        });
    }
    if matches!(inst.op, Op::Call | Op::Jump | Op::Return) {
        return;
    }
    for k in (0..128).filter(|&k| covered(k) && inst.may_write(k)) {
        if w.tracked & (1 << (k / 2)) == 0 {
            continue;
        }
        let src = match (vector, k == VCC || k == VCC + 1) {
            (false, _) => alu::SA_SDST,
            (true, true) => alu::VA_VCC,
            (true, false) => alu::VA_SDST,
        };
        let old = before.get(k);
        let e = w.alu.entry(k).or_insert((old, 0));
        *e = (join(e.0, old), e.1 | src);
    }
}

#[cfg(test)]
#[path = "flow_alu_tests.rs"]
mod tests;
