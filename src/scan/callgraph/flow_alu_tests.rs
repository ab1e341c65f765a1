//! Rows for [`super`]: gfx12's SGPR read hazards on instructions built by hand (the decoder's
//! `s_wait_alu` fields are `decode_wait_tests.rs`'s `gfx12_alu_waits`).

use super::*;
use crate::scan::callgraph::flow_state::Code;
use crate::scan::callgraph::flow_wait::{read_stale, unread_stale};
use crate::scan::callgraph::inst::V;

/// A scalar (`vector` false) or vector ALU instruction reading `reads` and writing `writes`.
fn alu_inst(vector: bool, reads: &[Reg], writes: &[Reg]) -> Inst {
    let mut i = Inst::new(1, Op::Alu);
    i.vector = vector;
    i.lanewise = vector;
    for &r in reads {
        i.reads.push((r, 1));
    }
    for &r in writes {
        i.writes.push((r, 1));
        i.kills.push((r, 1));
    }
    i
}

/// Run `inst` on `st` as the flow does: its stale reads, its writes (each gets `v`), then the
/// hazards it leaves.
fn run(inst: &Inst, st: &mut State, v: Val) {
    let before = st.clone();
    for &(r, _) in &inst.writes {
        st.set(r, v);
    }
    after(inst, st, &before);
}

fn wait_alu(waits: u8) -> Inst {
    let mut i = Inst::new(1, Op::Alu);
    i.alu_waits = waits;
    i
}

#[test]
fn a_scalar_write_of_a_pair_a_valu_read_is_read_stale_until_sa_sdst() {
    let s = 4;
    let mut st = State::reached();
    st.set(s, Val::Entry);
    st.1.as_mut().unwrap().insert(s, Code::PcLo(0x100));
    // Not tracked yet: a scalar write lands at once.
    run(&alu_inst(false, &[], &[s]), &mut st, Val::Clean);
    assert!(st.3.alu.is_empty());
    st.set(s, Val::Entry);
    // v_cmp_eq_u32 s8, s4, v0: the pair s[4:5] is tracked from now on.
    run(&alu_inst(true, &[s, V], &[8]), &mut st, Val::Clean);
    assert_eq!(st.3.tracked, 1 << 2);
    // s_mov_b32 s4, 0: the old entry may still be read, by a scalar or a vector instruction.
    run(&alu_inst(false, &[], &[s]), &mut st, Val::Clean);
    assert_eq!(st.3.alu.get(&s), Some(&(Val::Entry, alu::SA_SDST)));
    for vector in [false, true] {
        let reader = alu_inst(vector, &[s], &[V + 1]);
        let (patched, keys) = read_stale(&reader, &st).expect("a stale read");
        assert_eq!(patched.get(s), Val::Entry);
        assert_eq!(keys, vec![(s, Val::Clean)]);
    }
    // A GLOBAL load's scalar address is not an ALU read (llvm: FLAT is neither VALU nor SALU).
    let mut gload = Inst::new(2, Op::Mem);
    gload.vector = true;
    gload.counts = crate::scan::callgraph::inst::cnt::LOAD;
    gload.reads.push((s, 1));
    assert!(read_stale(&gload, &st).is_none());
    // va_sdst(0) does not land a scalar write; sa_sdst(0) does.
    run(&wait_alu(alu::VA_SDST | alu::VA_VCC), &mut st, Val::Clean);
    assert!(st.3.alu.contains_key(&s));
    run(&wait_alu(alu::SA_SDST), &mut st, Val::Clean);
    assert!(st.3.alu.is_empty());
    assert!(read_stale(&alu_inst(false, &[s], &[]), &st).is_none());
}

#[test]
fn a_vector_write_is_read_stale_by_vector_instructions_only() {
    let (s, vcc) = (10, VCC);
    let mut st = State::reached();
    st.set(s, Val::Idx);
    st.set(vcc, Val::Idx);
    st.3.tracked = !0;
    // v_readfirstlane_b32 s10, v0; v_cmp_eq_u32 vcc_lo, v1, v2.
    run(&alu_inst(true, &[V], &[s]), &mut st, Val::Clean);
    run(
        &alu_inst(true, &[V + 1, V + 2], &[vcc]),
        &mut st,
        Val::Clean,
    );
    assert_eq!(st.3.alu.get(&s), Some(&(Val::Idx, alu::VA_SDST)));
    assert_eq!(st.3.alu.get(&vcc), Some(&(Val::Idx, alu::VA_VCC)));
    assert!(read_stale(&alu_inst(false, &[s, vcc], &[]), &st).is_none());
    let (patched, _) = read_stale(&alu_inst(true, &[s, vcc], &[V + 3]), &st).expect("stale");
    assert_eq!((patched.get(s), patched.get(vcc)), (Val::Idx, Val::Idx));
    // va_sdst(0) lands s10 but not vcc; va_vcc(0) lands vcc.
    run(&wait_alu(alu::VA_SDST), &mut st, Val::Clean);
    assert_eq!(st.3.alu.keys().copied().collect::<Vec<_>>(), vec![vcc]);
    run(&wait_alu(alu::VA_VCC), &mut st, Val::Clean);
    assert!(st.3.alu.is_empty());
}

#[test]
fn a_stale_read_drops_every_mark_of_the_register_and_unreads_it() {
    let s = 6;
    let mut st = State::reached();
    st.3.tracked = !0;
    run(&alu_inst(false, &[], &[s]), &mut st, Val::Clean);
    // What the marks say of s6 now: half of the split's mask, and of the entry's exec.
    let m = st.1.as_mut().unwrap();
    let (mk, ek) = (
        crate::scan::callgraph::flow_exec::mask_key(s),
        crate::scan::callgraph::flow_entered::entry_key(s),
    );
    m.insert(s, Code::Ident(s));
    m.insert(mk, Code::Split(0));
    m.insert(ek, Code::Part(1, 0, 0));
    // s_mov_b32 exec_lo, s6 reads it stale: none of them holds for what it reads.
    let copy = alu_inst(false, &[s], &[EXEC]);
    let (patched, keys) = read_stale(&copy, &st).expect("a stale read");
    let pm = patched.1.as_ref().unwrap();
    assert!(pm.get(&s).is_none() && pm.get(&mk).is_none() && pm.get(&ek).is_none());
    // The instruction did not write s6: after it, its marks are as they were.
    let mut after_it = patched.clone();
    unread_stale(&copy, &mut after_it, &st, &keys);
    let am = after_it.1.as_ref().unwrap();
    assert_eq!(
        (am.get(&s), am.get(&mk), am.get(&ek)),
        (
            Some(&Code::Ident(s)),
            Some(&Code::Split(0)),
            Some(&Code::Part(1, 0, 0))
        )
    );
}

#[test]
fn what_a_call_writes_and_what_a_scalar_load_lands() {
    let mut st = State::reached();
    st.3.tracked = !0;
    // s_swappc_b64 s[30:31], s[4:5]: its link pair is no hazard (the pass adds no wait in the
    // callee).
    let mut call = alu_inst(false, &[4, 5], &[30, 31]);
    call.op = Op::Call;
    run(&call, &mut st, Val::Ret);
    assert!(st.3.alu.is_empty());
    // m0, null and exec are never hazards.
    run(
        &alu_inst(false, &[], &[124, 125, EXEC, EXEC + 1]),
        &mut st,
        Val::Clean,
    );
    assert!(st.3.alu.is_empty());
    run(&alu_inst(false, &[], &[7]), &mut st, Val::Clean);
    assert!(st.3.alu.contains_key(&7));
    let sload = Inst::new(
        2,
        Op::SLoad {
            base: 0,
            offset: 0,
            soffset: None,
            bytes: 4,
            dst: 40,
        },
    );
    run(&sload, &mut st, Val::Clean);
    assert!(st.3.alu.is_empty());
}

#[test]
fn a_scalar_read_of_a_tracked_sgpr_lands_the_vector_writes() {
    let (s, t, u) = (10, 12, 40);
    let mut st = State::reached();
    st.3.tracked = 1 << (s / 2) | 1 << (t / 2) | 1 << (VCC / 2);
    run(&alu_inst(true, &[V], &[s]), &mut st, Val::Clean);
    run(&alu_inst(true, &[V], &[VCC]), &mut st, Val::Clean);
    // s_mov_b32 s41, s40: s40's pair is not tracked, so nothing lands.
    run(&alu_inst(false, &[u], &[u + 1]), &mut st, Val::Clean);
    assert_eq!(st.3.alu.len(), 2);
    // s_mov_b32 s13, s12 (tracked, not vcc): s10 lands, vcc does not.
    run(&alu_inst(false, &[t], &[]), &mut st, Val::Clean);
    assert_eq!(st.3.alu.keys().copied().collect::<Vec<_>>(), vec![VCC]);
    // A call's read of a tracked pair lands nothing (the pass waits before it instead).
    let mut call = alu_inst(false, &[VCC], &[]);
    call.op = Op::Call;
    run(&call, &mut st, Val::Clean);
    assert!(st.3.alu.contains_key(&VCC));
    // s_cbranch_vccz reads vcc: its vector write lands.
    run(&alu_inst(false, &[VCC], &[]), &mut st, Val::Clean);
    assert!(st.3.alu.is_empty());
}

#[test]
fn every_scalar_instruction_but_a_scalar_load_reads_stale() {
    let mut st = State::reached();
    st.3.tracked = !0;
    run(&alu_inst(false, &[], &[20, 21]), &mut st, Val::Clean);
    // s_setpc_b64 s[20:21]: the decoder counts it on every counter (it acts beyond its
    // registers); it reads the pair stale all the same (the twentieth review's `setpcstale`).
    let mut jump = alu_inst(false, &[20, 21], &[]);
    jump.op = Op::Jump;
    jump.counts = crate::scan::callgraph::inst::cnt::ALL;
    let (_, keys) = read_stale(&jump, &st).expect("a stale read");
    assert_eq!(keys.len(), 2);
    // A vector memory access is no ALU reader (llvm: FLAT is neither VALU nor SALU).
    let mut vmem = alu_inst(true, &[20, 21], &[]);
    vmem.op = Op::Mem;
    vmem.counts = crate::scan::callgraph::inst::cnt::LOAD;
    assert!(read_stale(&vmem, &st).is_none());
}
