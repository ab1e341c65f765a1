//! What a call leaves its caller, checked rather than assumed. The AMDGPU calling convention
//! (llvm `AMDGPUUsage.rst`, "Call Convention") says a callee keeps `exec`, the lanes `exec`
//! disables in every VGPR, the callee-saved SGPRs and the callee-saved VGPRs; code in the image
//! need not keep it (the fifteenth review's `cssave`: a callee writes `v[40:41]` and never saves
//! them). So the caller keeps what it knew of a register across a call only where the callee's
//! own code shows it:
//! - a callee-saved SGPR: every return of every function the call may reach shows it as that
//!   function entered it ([`Code::Ident`], seeded by [`seed_callee`], moved by copies and lane
//!   spills);
//! - `exec`: every return shows the `exec` the function entered with ([`ENTERED`], followed by
//!   name through `if`/`else` shapes, [`super::flow_entered`]), not widened by a prologue's
//!   `s_or_saveexec` it has not undone; otherwise every lane of every VGPR may hold what any lane
//!   held after the call;
//! - a VGPR, callee-saved or not, with its lanes: no function the call may reach writes it
//!   ([`super::flow::pass`]'s write sets). A prologue's save to scratch and its epilogue's
//!   restore are writes: the flow does not follow the stack, so a callee that saves a callee-saved
//!   VGPR loses the caller's marks of it (a refusal where control needs them, never a proof);
//! - a table load's destinations (a waterfall loop's entries): no function the call may reach
//!   writes them in a lane the call ran without (`Writes::wide`), and `exec` comes back as it
//!   was; what a callee writes in `exec`'s lanes is what [`Code::Serve`] allows.
//!
//! A tail call returns for its function what its target's returns leave; a register the target
//! returns as it entered it is as the function entered it only where the jump shows that too
//! ([`through_tail`]).

use std::collections::BTreeSet;

use super::flow_entered::{self, entry_key, AS_ENTERED, ENTERED};
use super::flow_exec;
use super::flow_state::{base, Code, Marks, State, LANES};
use super::flow_wait;
use super::inst::{Reg, EXEC, V};

/// The callee-saved SGPRs (llvm `SIRegisterInfo`/`SICallingConv.td`, `CSR_AMDGPU_SGPRs`:
/// s30–s105; s30–s31 are the return address and are marked as such).
const SAVED_SGPRS: std::ops::RangeInclusive<Reg> = 32..=105;

/// A function's entry marks from what every call leaves: the callee-saved SGPRs hold
/// [`Code::Ident`], and [`ENTERED`] says `exec` is as entered (so that a return shows what the
/// callee kept for its caller); no other register says what it held in some caller.
pub(super) fn seed_callee(st: &mut State) {
    if let Some(m) = st.1.as_mut() {
        m.retain(|&k, c| !matches!(c, Code::Ident(_)) && !(entry_key(0)..=ENTERED).contains(&k));
        for r in SAVED_SGPRS {
            m.insert(r, Code::Ident(r));
        }
        m.insert(ENTERED, AS_ENTERED);
    }
}

/// The caller's state after a call: `st` is its state before it (the link pair's marks set),
/// `ret` the return state of what the call may reach, `written` tells a register (a VGPR by its
/// own number) some function the call may reach may write, `outside` a VGPR it may write in a
/// lane the call ran without ([`super::flow::pass`]'s `Writes::wide`), `wide` that the call ran
/// with every lane on. A register nothing writes holds what it held; any other what the callee's returns
/// leave there (its entry state joins this call's, to the fixpoint); the lanes `exec` disables
/// hold what they held joined with that; marks as the module docs say.
pub(super) fn returned(
    st: &mut State,
    ret: &State,
    written: &dyn Fn(Reg) -> bool,
    outside: &dyn Fn(Reg) -> bool,
    wide: bool,
) {
    let before = st.clone();
    let exec = flow_entered::as_entered(&ret.1);
    let kept = |r: Reg| r >= V && !written(base(r));
    // A table load's destinations that no callee writes outside the lanes it ran in keep
    // their marks where `exec` is kept: [`Code::Serve`] tolerates writes in `exec`'s lanes.
    let entries = |r: Reg| exec && (V..LANES).contains(&r) && !outside(r);
    st.join_from(ret);
    after_call_marks(st, &before.1, &ret.1, &kept, &entries, exec);
    st.0 = ret.0.clone();
    st.0.retain(|&k, _| written(base(k)));
    for (&k, &v) in &before.0 {
        if !written(base(k)) {
            st.0.insert(k, v);
        }
    }
    flow_exec::after_call(st, &before, wide || !exec, &kept);
    flow_wait::after_call(st);
}

/// The caller's marks after a call (`pre`: before it; `ret`: the return state's marks), once the
/// caller's state has joined the return state; `kept` tells a VGPR key (whole or a lane) no
/// function the call may reach writes, `exec` whether every return leaves `exec` as entered
/// ([`flow_entered::as_entered`]):
/// - a callee-saved SGPR that every return shows as [`Code::Ident`] keeps the caller's mark;
/// - a VGPR of `kept` keeps its marks, whole and lane by lane (a return address spilled to a
///   lane; a table load's destinations); one of `entries` its marks as a table load's
///   destination (what a callee writes in `exec`'s lanes is what [`Code::Serve`] allows);
/// - `exec`'s [`Code::Serve`], its masks and [`ENTERED`] are kept where `exec` is, and a kept
///   callee-saved SGPR's copy of the entry's `exec` ([`entry_key`]);
/// - no [`Code::Ident`] from either side (they name different functions' entries).
fn after_call_marks(
    st: &mut State,
    pre: &Marks,
    ret: &Marks,
    kept: &dyn Fn(Reg) -> bool,
    entries: &dyn Fn(Reg) -> bool,
    exec: bool,
) {
    let (Some(m), Some(pre)) = (st.1.as_mut(), pre) else {
        return;
    };
    // What the join kept is a fact about the values whatever the path (an image address, a table
    // entry in a scalar register, a return address), except what names one function's entry or
    // one table load's lanes and exec: those come from `pre` only, below.
    m.retain(|&r, c| match c {
        _ if (entry_key(0)..=ENTERED).contains(&r) => false,
        Code::Ident(_)
        | Code::RetEntry
        | Code::SavedExec(_)
        | Code::Disj(_)
        | Code::Same(..)
        | Code::Serve(..)
        | Code::Inside => false,
        Code::FnLo(..) | Code::FnHi(..) => !(V..LANES).contains(&r),
        _ => true,
    });
    let mut kept_sgprs = Vec::new();
    for r in SAVED_SGPRS {
        let k = ret
            .as_ref()
            .is_none_or(|ret| ret.get(&r) == Some(&Code::Ident(r)));
        if k {
            kept_sgprs.push(r);
        }
        match pre.get(&r) {
            Some(&c) if k => {
                m.insert(r, c);
            }
            _ => {
                m.remove(&r);
            }
        }
    }
    m.retain(|&r, _| !(vgpr_key(r) && kept(r)));
    for (&r, &c) in pre {
        let keep = if vgpr_key(r) {
            kept(r) || (matches!(c, Code::FnLo(..) | Code::FnHi(..)) && entries(r))
        } else if r == ENTERED {
            exec
        } else if (entry_key(0)..ENTERED).contains(&r) {
            kept_sgprs.contains(&(r - entry_key(0)))
        } else {
            matches!(c, Code::Serve(..)) && r == EXEC && exec
        };
        if keep {
            m.insert(r, c);
        }
    }
    flow_exec::after_call_masks(st, pre, &kept_sgprs, exec);
}

/// Whether a mark's key `r` is a VGPR's, whole or a lane's (not a scalar register's, nor a
/// mask's or [`ENTERED`], [`flow_exec::MASKS`] and up to [`LANES`], nor an
/// [`super::flow_state::inside_key`]: what a lane holds against `exec` never survives a call,
/// which may come back with more lanes on; the twenty-third review's `inscall`).
fn vgpr_key(r: Reg) -> bool {
    (V..flow_exec::MASKS).contains(&r) || (LANES..super::flow_state::INSIDE).contains(&r)
}

/// The keys `k` that hold [`Code::Ident`] of `k` itself in the marks `at` of a jump (and
/// [`ENTERED`] where `exec` is as entered): what the function still holds, each in its own
/// register, as it entered it there. `Ident(j)` in another register `k` says `k` holds what `j`
/// held (the seventeenth review's `tailmv`: a copy of `s[42:43]` into `s[40:41]` before the jump).
pub(super) fn idents(at: &Marks) -> Option<BTreeSet<Reg>> {
    at.as_ref().map(|m| {
        // `exec` as entered, as [`flow_entered::as_entered`] reads it: named so, and not while a
        // widening is under way (the twenty-fifth review's `widetail`).
        let entered = flow_entered::as_entered(at);
        m.iter()
            .filter(|(&k, c)| {
                **c == Code::Ident(k) || (k == ENTERED && **c == AS_ENTERED && entered)
            })
            .map(|(&k, _)| k)
            .collect()
    })
}

/// What a tail call's target's returns `ret` leave for the function that jumped: a register the
/// target returns as it entered it ([`Code::Ident`]) is as the function entered it only if it
/// was so at the jump (`at`, from [`idents`]; `None`: the jump is not reached, vacuously).
pub(super) fn through_tail(ret: &State, at: &Option<BTreeSet<Reg>>) -> State {
    let mut out = ret.clone();
    if let (Some(m), Some(at)) = (out.1.as_mut(), at) {
        m.retain(|k, c| {
            !(matches!(c, Code::Ident(_)) || *k == ENTERED || (entry_key(0)..ENTERED).contains(k))
                || at.contains(k)
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::callgraph::flow_entered::ENTRY;
    use crate::scan::callgraph::flow_state::Val;

    fn marked(marks: &[(Reg, Code)]) -> State {
        State {
            1: Some(marks.iter().copied().collect()),
            ..Default::default()
        }
    }

    /// A return that left exec narrowed, widened, or unknown keeps nothing of the caller's exec.
    #[test]
    fn exec_is_kept_only_where_every_return_shows_it() {
        assert!(flow_entered::as_entered(&None));
        assert!(flow_entered::as_entered(
            &marked(&[(ENTERED, AS_ENTERED)]).1
        ));
        assert!(!flow_entered::as_entered(
            &marked(&[(ENTERED, Code::Since(8, ENTRY))]).1
        ));
        assert!(!flow_entered::as_entered(&marked(&[]).1));
        let wide = [
            (ENTERED, AS_ENTERED),
            (flow_exec::mask_key(EXEC), Code::Wide),
        ];
        assert!(!flow_entered::as_entered(&marked(&wide).1));
    }

    /// The fifteenth review's `cssave`: a callee-saved VGPR a callee writes holds what the
    /// callee's returns leave, marks and values; one nothing writes holds what it held.
    #[test]
    fn a_written_vgpr_is_the_callees_whatever_the_convention() {
        let (v40, v41) = (V + 40, V + 41);
        let mut st = marked(&[(v40, Code::Ret), (v41, Code::Ret), (ENTERED, AS_ENTERED)]);
        st.set(v40, Val::Ret);
        st.set(v41, Val::Ret);
        let mut ret = marked(&[(ENTERED, AS_ENTERED)]);
        ret.set(v40, Val::PcAny);
        ret.set(v41, Val::Ret);
        returned(&mut st, &ret, &|r| r == v40, &|r| r == v40, false);
        let m = st.1.as_ref().unwrap();
        assert_eq!((m.get(&v40), st.get(v40)), (None, Val::PcAny));
        assert_eq!((m.get(&v41), st.get(v41)), (Some(&Code::Ret), Val::Ret));
        assert_eq!(m.get(&ENTERED), Some(&AS_ENTERED));
    }

    /// `tailid`: a register the tail call's target returns as entered is as the jumping
    /// function entered it only where the jump shows that too.
    #[test]
    fn a_tail_call_keeps_only_what_the_jump_kept() {
        let ret = marked(&[(40, Code::Ident(40)), (41, Code::Ident(41))]);
        let at = idents(&marked(&[(41, Code::Ident(41))]).1);
        let m = through_tail(&ret, &at).1.unwrap();
        assert_eq!((m.get(&40), m.get(&41)), (None, Some(&Code::Ident(41))));
        // `tailmv`: s40 holds what s42 held at the jump, not what it held itself.
        let moved = idents(&marked(&[(40, Code::Ident(42)), (41, Code::Ident(41))]).1);
        let m = through_tail(&ret, &moved).1.unwrap();
        assert_eq!((m.get(&40), m.get(&41)), (None, Some(&Code::Ident(41))));
        assert_eq!(through_tail(&ret, &None).1, ret.1);
    }
}
