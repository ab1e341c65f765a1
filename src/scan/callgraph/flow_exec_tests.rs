//! Rows for [`super`]: what `exec` moves do to the split, on instructions built by hand (the
//! decoder's side is `decode_tests.rs`; the whole flow's, the waterfall fixtures of
//! `tests/it/patch_asserts.rs` and row 4p of `tests/it/patch_soundness.rs`).

use super::*;
use crate::scan::callgraph::flow_state::Val;

fn inst(op: Op, writes: &[(Reg, u16)]) -> Inst {
    let mut i = Inst::new(1, op);
    i.writes = writes.to_vec();
    i
}

fn marked(marks: &[(Reg, Code)]) -> State {
    let mut st = State::reached();
    for &(r, c) in marks {
        st.1.as_mut().unwrap().insert(mask_key(r), c);
    }
    st
}

#[test]
fn exec_moves_are_classified() {
    let and = inst(Op::AndSaveExec { dst: 0, n: 1 }, &[(0, 1), (EXEC, 1)]);
    assert_eq!(transition(&and, &marked(&[]), true), Exec::Narrow);
    // With every lane on, a narrowing may keep lanes outside the split.
    let wide = marked(&[(EXEC, Code::Wide), (0, Code::Split(0))]);
    assert_eq!(transition(&and, &wide, true), Exec::Reset);
    // The saved mask copied back: the split's exec again (wave32: one register is all of it).
    let back = inst(
        Op::Copy {
            dst: EXEC,
            src: 0,
            n: 1,
        },
        &[(EXEC, 1)],
    );
    assert_eq!(transition(&back, &wide, true), Exec::Restore);
    assert_eq!(transition(&back, &wide, false), Exec::Reset);
    // Two copies of exec's low half are no copy of exec.
    let lo_lo = marked(&[(EXEC, Code::Wide), (0, Code::Split(0)), (1, Code::Split(0))]);
    let back64 = inst(
        Op::Copy {
            dst: EXEC,
            src: 0,
            n: 2,
        },
        &[(EXEC, 2)],
    );
    assert_eq!(transition(&back64, &lo_lo, false), Exec::Reset);
    let lo_hi = marked(&[(EXEC, Code::Wide), (0, Code::Split(0)), (1, Code::Split(1))]);
    assert_eq!(transition(&back64, &lo_hi, false), Exec::Restore);
    // A waterfall's s_xor of exec with a copy: not a subset of exec.
    let xor = inst(
        Op::Xor {
            dst: EXEC,
            a: EXEC,
            b: 53,
            n: 1,
        },
        &[(EXEC, 1), (crate::scan::callgraph::inst::SCC, 1)],
    );
    assert_eq!(transition(&xor, &marked(&[]), true), Exec::Reset);
    // v_cmpx: a lanewise vector instruction that writes exec.
    let mut cmpx = inst(Op::Alu, &[(EXEC, 2)]);
    cmpx.vector = true;
    cmpx.lanewise = true;
    cmpx.lane_mask = true;
    assert_eq!(transition(&cmpx, &marked(&[]), true), Exec::Narrow);
    // v_add_co_u32 v0, exec_lo, v1, v2: a lanewise carry-out into exec, no compare: what it
    // leaves in the lanes it does not run in is not known.
    let mut carry = cmpx.clone();
    carry.lane_mask = false;
    assert_eq!(transition(&carry, &marked(&[]), true), Exec::Reset);
    // v_readfirstlane_b32 exec_lo, -1 (the thirteenth review's `rfl`): not lanewise.
    let mut rfl = inst(Op::Alu, &[(EXEC, 1)]);
    rfl.vector = true;
    assert_eq!(transition(&rfl, &marked(&[]), true), Exec::Reset);
    // s_movreld: m0 may point it at exec, which no operand names.
    let rel = inst(Op::Relative, &[(0, 1)]);
    assert_eq!(transition(&rel, &marked(&[]), true), Exec::Reset);
    // s_or_saveexec with every lane on, then the marks it makes.
    let or = inst(
        Op::OrSaveExec {
            dst: 0,
            n: 1,
            all: true,
            src: None,
        },
        &[(0, 1), (EXEC, 1)],
    );
    let st = marked(&[]);
    assert_eq!(transition(&or, &st, true), Exec::Widen);
    let made = made(&or, &st, Exec::Widen);
    assert!(
        made.contains(&(mask_key(0), Some(Code::Split(0)))),
        "{made:?}"
    );
    assert!(
        made.contains(&(mask_key(EXEC), Some(Code::Wide))),
        "{made:?}"
    );
}

#[test]
fn narrowing_moves_the_inside_out_and_a_reset_mixes() {
    let v4 = V + 4;
    let mut st = marked(&[(0, Code::Split(0))]);
    st.set(v4, Val::Entry);
    apply(Exec::Narrow, &mut st);
    assert_eq!((st.get(v4), st.out(v4)), (Val::Entry, Val::Entry));
    // The lanes exec enables written whole: what they held is gone; the others keep it.
    st.write_in(v4, Val::Clean, true);
    assert_eq!((st.get(v4), st.out(v4)), (Val::Clean, Val::Entry));
    assert_eq!(st.range_in((v4, 1)), Val::Clean);
    assert_eq!(st.range((v4, 1)), Val::Entry);
    // A narrowing ends what the masks said.
    assert_eq!(st.1.as_ref().unwrap().get(&mask_key(0)), None);
    apply(Exec::Reset, &mut st);
    assert_eq!((st.get(v4), st.out(v4)), (Val::Entry, Val::Entry));
}

#[test]
fn a_call_joins_the_lanes_it_does_not_run() {
    let (v0, v40) = (V, V + 40);
    let mut pre = marked(&[]);
    pre.set(v0, Val::Entry);
    pre.set(out_key(v0), Val::Idx);
    pre.set(v40, Val::Ret);
    // The callee's returns: v0 written, v40 (callee-saved) clobbered, an outside lane too.
    let mut st = marked(&[]);
    st.set(v0, Val::Clean);
    st.set(out_key(v0), Val::PcAny);
    st.set(v40, Val::PcAny);
    let saved = |r: Reg| r == V + 40;
    after_call(&mut st, &pre, false, &saved);
    // Outside: what it held, or what the callee left there (code need not keep the convention).
    assert_eq!((st.get(v0), st.out(v0)), (Val::Clean, Val::PcAny));
    assert_eq!(st.get(v40), Val::Ret);
    // With every lane on at the call, any lane may be any.
    let mut st2 = marked(&[]);
    st2.set(v0, Val::Clean);
    after_call(&mut st2, &pre, true, &saved);
    assert_eq!(st2.get(v0), Val::Idx);
}

/// Where one path has every lane on and the other the split's exec, the join may have every lane
/// on: lanewise reads there read both sides (a must-mark would drop it and read the inside only).
#[test]
fn a_join_keeps_every_lane_on_from_either_side() {
    let mut a = marked(&[(0, Code::Split(0))]);
    let b = marked(&[(EXEC, Code::Wide), (0, Code::Split(0))]);
    a.join_from(&b);
    assert!(wide(&a));
    let mut c = marked(&[(EXEC, Code::Wide)]);
    c.join_from(&marked(&[]));
    assert!(wide(&c));
}

/// A lane set one by one (`v_writelane_b32 v47, s30, 0`: the return address) and then a write
/// that fills the register under `exec`: a lanewise read sees what that write put inside (the
/// lane, were it inside, was overwritten), any other read the lane's value too; once `exec` may
/// take lanes in from outside, or on a path where the write did not happen, the lane is read
/// again (the RCCL control build's `v_min_u32 v47, 32, v47` after `v_clz_i32_u32 v47, v8`).
#[test]
fn a_lane_a_filling_write_covers_is_not_read_inside() {
    use crate::scan::callgraph::flow_state::lane_key;
    let v = crate::scan::callgraph::inst::V + 47;
    let mut st = marked(&[]);
    st.0.insert(lane_key(v, 0), Val::Ret);
    st.set(v, Val::Ret);
    assert_eq!(st.range_in((v, 1)), Val::Ret);
    let before = st.clone();
    st.write_in(v, Val::Clean, true);
    assert_eq!(st.range_in((v, 1)), Val::Clean);
    assert_eq!(st.range((v, 1)), Val::Ret);
    assert_eq!(st.lane(v, 0), Val::Ret);
    // A join with the path where the write did not happen: the lane is read again.
    let mut joined = st.clone();
    joined.join_from(&before);
    assert_eq!(joined.range_in((v, 1)), Val::Ret);
    // A write that does not fill it: still covered (it joins into the inside too).
    let mut partial = st.clone();
    partial.write_in(v, Val::Clean, false);
    assert_eq!(partial.range_in((v, 1)), Val::Clean);
    // exec may take in lanes from outside: the lane is read again.
    let mut reset = st.clone();
    apply(Exec::Reset, &mut reset);
    assert_ne!(reset.range_in((v, 1)), Val::Clean);
    // A call with every lane on: the callee's split holds the lane too.
    let mut callee = st.clone();
    to_callee(&mut callee, true);
    assert_ne!(callee.range_in((v, 1)), Val::Clean);
    // A callee that comes back with more lanes on (the twenty-third review's `inscall`).
    let mut back = st.clone();
    after_call(&mut back, &st, true, &|_| true);
    assert_ne!(back.range_in((v, 1)), Val::Clean);
    // Narrowing keeps it: the lanes left inside were inside.
    let mut narrow = st.clone();
    apply(Exec::Narrow, &mut narrow);
    assert_eq!(narrow.range_in((v, 1)), Val::Clean);
}

/// A kept callee-saved SGPR keeps its mask across a call only where `exec` comes back as
/// entered (the twenty-fourth review's `splitcall`: `s44`, a copy of the caller's `exec`, named
/// the split's mask after a callee that left one lane on).
#[test]
fn a_saved_mask_survives_a_call_only_with_exec_as_entered() {
    let pre = marked(&[(44, Code::Split(0)), (EXEC, Code::Wide)]);
    let pre_marks = pre.1.clone().unwrap();
    for (exec, kept) in [(true, true), (false, false)] {
        let mut st = marked(&[]);
        after_call_masks(&mut st, &pre_marks, &[44], exec);
        let m = st.1.as_ref().unwrap();
        assert_eq!(m.get(&mask_key(44)) == Some(&Code::Split(0)), kept);
        assert_eq!(m.get(&mask_key(EXEC)) == Some(&Code::Wide), kept);
    }
}
