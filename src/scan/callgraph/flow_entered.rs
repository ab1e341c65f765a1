//! What `exec` is against the `exec` its function was entered with, so that a return shows
//! whether the callee left its caller's lanes as they were ([`super::flow_call`]). Compiled code
//! narrows `exec` for an `if`, turns to the `else`, and restores it (llvm `SILowerControlFlow.cpp`:
//! `SI_IF` is `s_and_saveexec` + `s_xor`, `SI_ELSE` is `s_or_saveexec` + `s_xor` or, after
//! `SIOptimizeExecMasking.cpp`, `s_andn2_saveexec`; `SI_END_CF` is `s_or` of `exec` with the
//! saved mask). Each mask `exec` takes is named by the instruction that made it, with the mask
//! it was narrowed from ([`Code::Since`], on [`ENTERED`]); a copy of it in a scalar register
//! says so ([`Code::Part`], on the register's [`entry_key`]), and so does what an `if` leaves
//! for its `else` ([`Code::Rest`]: the mask it narrowed less the `if`'s lanes). Only these moves
//! keep a name:
//! - a narrowing (`s_and_saveexec`, `s_and`/`s_andn2` of `exec`, `v_cmpx`) names a new mask made
//!   here, within the one before (what named an older mask made here is dropped: a loop makes
//!   another one each time round);
//! - `s_xor` of `exec` (mask `x`, narrowed from `p`) with a copy of `p`: `p` less `x`;
//! - the `else`: `s_andn2_saveexec` of that (with `exec` still `x`), or `s_or_saveexec` of it
//!   and then `s_xor` of `exec` with the saved `x`;
//! - the end: `exec` or'd with a copy of the mask it was narrowed from, or the `else`'s lanes
//!   or'd with the `if`'s, or a copy of a named mask moved into `exec`;
//! - a prologue's `s_or_saveexec` (or `s_xor_saveexec`) of -1 drops the name, and its restore
//!   (a copy of the saved mask) brings it back.
//!
//! Any other write of `exec` (a waterfall's `s_xor`, a loop's exit mask) drops the name: `exec`
//! is then not known to be within the entry's. Every name derives from the entry's, so a name
//! held says `exec` is within the entry's lanes; [`Code::Since`] of [`ENTRY`] twice says it is the
//! entry's.

use super::flow_exec::{mask_key, Exec, MASKS};
use super::flow_state::{Code, State};
use super::inst::{Inst, Logic, Op, Reg, EXEC};

/// The name of the mask `exec` held as its function was entered.
pub(super) const ENTRY: u64 = u64::MAX;

/// The key, among the marks, of what is known of scalar register `r` (below `exec`) as a copy of a
/// mask `exec` held ([`Code::Part`], [`Code::Rest`]). Unlike a [`mask_key`]'s, such a mark
/// outlives a narrowing; a write of `r` drops it ([`super::flow_marks::forget`]).
pub(super) fn entry_key(r: Reg) -> Reg {
    MASKS + 128 + r
}

/// The key of the name of the mask `exec` holds ([`Code::Since`], [`Code::RestNow`]).
pub(super) const ENTERED: Reg = MASKS + 128 + EXEC;

/// `exec` as its function entered it.
pub(super) const AS_ENTERED: Code = Code::Since(ENTRY, ENTRY);

/// A mask a register or `exec` holds, by name, without the half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mask {
    /// Made at `.0`, narrowed from `.1`.
    Since(u64, u64),
    /// Made at `.1` (narrowed from `.2`) less the one made at `.0`.
    Rest(u64, u64, u64),
}

impl Mask {
    fn half(self, k: u8) -> Code {
        match self {
            Mask::Since(i, p) => Code::Part(i, p, k),
            Mask::Rest(x, p, q) => Code::Rest(x, p, q, k),
        }
    }

    fn on_exec(self) -> Code {
        match self {
            Mask::Since(i, p) => Code::Since(i, p),
            Mask::Rest(x, p, q) => Code::RestNow(x, p, q),
        }
    }

    fn mentions(c: &Code, pc: u64) -> bool {
        match *c {
            Code::Part(i, p, _) | Code::Since(i, p) => i == pc || p == pc,
            Code::Rest(x, p, q, _) | Code::RestNow(x, p, q) => x == pc || p == pc || q == pc,
            _ => false,
        }
    }
}

/// The marks `inst` at `pc` makes of [`ENTERED`] and of the [`entry_key`]s it writes, from the
/// marks before it; `t` is [`super::flow_exec::transition`]'s answer, `wave32` as there.
pub(super) fn made(
    inst: &Inst,
    st: &State,
    pc: u64,
    t: Exec,
    wave32: bool,
) -> Vec<(Reg, Option<Code>)> {
    let Some(m) = &st.1 else { return Vec::new() };
    let wide = m.get(&mask_key(EXEC)) == Some(&Code::Wide);
    let whole = |n: u16| n == 2 || wave32;
    let cur = match m.get(&ENTERED) {
        Some(&Code::Since(i, p)) => Some(Mask::Since(i, p)),
        Some(&Code::RestNow(x, p, q)) => Some(Mask::Rest(x, p, q)),
        _ => None,
    };
    // The mask registers `r`… hold, every half of it.
    let holds = |r: Reg, n: u16| -> Option<Mask> {
        let base = match m.get(&entry_key(r))? {
            Code::Part(i, p, 0) => Mask::Since(*i, *p),
            Code::Rest(x, p, q, 0) => Mask::Rest(*x, *p, *q),
            _ => return None,
        };
        (0..n)
            .all(|k| r + k < EXEC && m.get(&entry_key(r + k)) == Some(&base.half(k as u8)))
            .then_some(base)
    };
    let mut out = Vec::new();
    // A copy of exec as it is now (not while a prologue has every lane on).
    let copy = |out: &mut Vec<(Reg, Option<Code>)>, dst: Reg, n: u16| {
        for k in 0..n {
            if dst + k < EXEC {
                let c = cur.filter(|_| !wide).map(|c| c.half(k as u8));
                out.push((entry_key(dst + k), c));
            }
        }
    };
    match inst.op {
        Op::Copy { dst, src: EXEC, n } => copy(&mut out, dst, n),
        Op::Copy { dst, src, n } if dst + n <= EXEC && src + n <= EXEC => {
            for k in 0..n {
                out.push((entry_key(dst + k), m.get(&entry_key(src + k)).copied()));
            }
        }
        Op::AndSaveExec { dst, n }
        | Op::OrSaveExec { dst, n, .. }
        | Op::AndNotSaveExec { dst, n, .. }
        | Op::XorSaveExec { dst, n } => copy(&mut out, dst, n),
        // What an `if` leaves for its `else`: the mask it narrowed less its own lanes.
        Op::Xor { dst, a, b, n } if dst + n <= EXEC && (a == EXEC || b == EXEC) && whole(n) => {
            let other = if a == EXEC { b } else { a };
            if let (Some(Mask::Since(x, p)), Some(Mask::Since(p2, q)), false) =
                (cur, holds(other, n), wide)
            {
                if p2 == p && x != ENTRY {
                    for k in 0..n {
                        out.push((entry_key(dst + k), Some(Code::Rest(x, p, q, k as u8))));
                    }
                }
            }
        }
        _ => {}
    }
    if !(inst.may_write(EXEC) || inst.may_write(EXEC + 1)) {
        return out;
    }
    let name: Option<Mask> = match (&inst.op, t) {
        // A prologue's or epilogue's restore of the copy its `s_or_saveexec` of -1 made.
        (&Op::Copy { dst: EXEC, src, n }, Exec::Restore) if whole(n) => holds(src, n),
        // exec as it was (an or with the split's mask, a copy of it). Not while every lane of the
        // split is on and maybe more (`Code::Wide`): there a write that leaves the split as it
        // is may still turn lanes on outside the named mask (the twenty-fifth review's
        // `widetail`: `s_or_saveexec` of -1 after the `else` shape's own widening).
        (_, Exec::Same) if !wide => return out,
        // Every lane on: no name until a copy of a named mask comes back.
        (Op::OrSaveExec { all: true, .. }, _) => None,
        // The `else`, after SIOptimizeExecMasking: exec = (p less x) and not x.
        (&Op::AndNotSaveExec { src, n, .. }, _) if whole(n) => match (cur, holds(src, n)) {
            (Some(Mask::Since(x, p)), Some(r @ Mask::Rest(x2, p2, _))) if x == x2 && p == p2 => {
                Some(r)
            }
            _ => None,
        },
        // The `else`'s first half: exec = x or (p less x) = p.
        (
            &Op::OrSaveExec {
                src: Some(s), n, ..
            },
            _,
        ) if whole(n) => match (cur, holds(s, n)) {
            (Some(Mask::Since(x, p)), Some(Mask::Rest(x2, p2, q))) if x == x2 && p == p2 => {
                Some(Mask::Since(p, q))
            }
            _ => None,
        },
        // Its second half: exec = p xor x = p less x.
        (&Op::Xor { dst: EXEC, a, b, n }, _) if whole(n) && (a == EXEC || b == EXEC) => {
            let other = if a == EXEC { b } else { a };
            match (cur, holds(other, n)) {
                (Some(Mask::Since(p, q)), Some(Mask::Since(x, p2))) if p == p2 && x != ENTRY => {
                    Some(Mask::Rest(x, p, q))
                }
                _ => None,
            }
        }
        // The end: the mask exec was narrowed from, or the `else`'s lanes and the `if`'s.
        (
            &Op::Logic {
                dst: EXEC,
                a,
                b,
                n,
                kind: Logic::Or,
            },
            _,
        ) if whole(n) && (a == EXEC || b == EXEC) => {
            let other = if a == EXEC { b } else { a };
            match (cur, holds(other, n)) {
                (Some(Mask::Since(_, i)), Some(Mask::Since(i2, p))) if i == i2 => {
                    Some(Mask::Since(i, p))
                }
                (Some(Mask::Rest(x, p, q)), Some(Mask::Since(x2, p2)))
                | (Some(Mask::Since(x2, p2)), Some(Mask::Rest(x, p, q)))
                    if x == x2 && p == p2 =>
                {
                    Some(Mask::Since(p, q))
                }
                _ => None,
            }
        }
        // A copy of a named mask into exec (`exec_lo` on wave32; never `exec_hi` alone, which
        // leaves the lanes of `exec_lo` as they are: the seventeenth review's `exechi`).
        (&Op::Copy { dst: EXEC, src, n }, _) if whole(n) => holds(src, n),
        // A narrowing: a new mask made here, within the one before.
        (_, Exec::Narrow) => match cur {
            Some(Mask::Since(i, _)) => {
                for (&k, c) in m.range(entry_key(0)..ENTERED) {
                    if Mask::mentions(c, pc) {
                        out.push((k, None));
                    }
                }
                Some(Mask::Since(pc, i))
            }
            _ => None,
        },
        _ => None,
    };
    out.push((ENTERED, name.map(Mask::on_exec)));
    out
}

/// Whether `exec` is within the entry's lanes in marks `m` (`None`: not reached, vacuously): a
/// name held ([`ENTERED`]) and no prologue's widening under way.
pub(super) fn within(m: &super::flow_state::Marks) -> bool {
    m.as_ref()
        .is_none_or(|m| m.contains_key(&ENTERED) && m.get(&mask_key(EXEC)) != Some(&Code::Wide))
}

/// Whether every return in `ret` (a return state's marks; `None`: no return) leaves `exec` as
/// its function entered it.
pub(super) fn as_entered(ret: &super::flow_state::Marks) -> bool {
    ret.as_ref().is_none_or(|m| {
        m.get(&ENTERED) == Some(&AS_ENTERED) && m.get(&mask_key(EXEC)) != Some(&Code::Wide)
    })
}

#[cfg(test)]
#[path = "flow_entered_tests.rs"]
mod tests;
