//! The must-analysis of control targets on hand-made instruction sequences: what makes a mark,
//! what drops it, and what [`control`] accepts.

use std::collections::{BTreeMap, HashSet};

use super::super::flow_state::State;
use super::super::flow_state::{join_marks, Code};
use super::super::inst::{Inst, Op, Reg, EXEC, SCC, V};
use super::{apply, control, long_branch, made};

fn key(l: u8) -> Option<u8> {
    Some(l & 31)
}

/// Run `inst` at `pc` on `st` as the flow does (marks only).
fn step(st: &mut State, inst: &Inst, pc: u64, tables: &[(u64, u64)]) {
    let m = made(
        inst,
        pc,
        pc + 4 * inst.words as u64,
        st,
        tables,
        &key,
        Some(true),
    );
    apply(inst, st, m, &key);
}

fn inst(op: Op, writes: &[(Reg, u16)]) -> Inst {
    let mut x = Inst::new(1, op);
    x.writes = writes.to_vec();
    x
}

fn call(target: Reg) -> Inst {
    let mut x = inst(Op::Call, &[(30, 2)]);
    x.reads = vec![(target, 2)];
    x.kills = vec![(30, 2)];
    x
}

fn get_pc_plus(st: &mut State, c: u32) {
    step(st, &inst(Op::GetPc { dst: 4 }, &[(4, 2)]), 0x100, &[]);
    let add = Op::AddConst {
        dst: 4,
        src: 4,
        c: i64::from(c),
        raw: c,
        sub: false,
    };
    step(st, &inst(add, &[(4, 1), (SCC, 1)]), 0x104, &[]);
    let addc = Op::AddCarry {
        dst: 5,
        src: 5,
        k: 0,
        sub: false,
    };
    step(st, &inst(addc, &[(5, 1), (SCC, 1)]), 0x10c, &[]);
}

fn starts(a: &[u64]) -> HashSet<u64> {
    a.iter().copied().collect()
}

#[test]
fn an_exact_sum_reaches_a_start_and_nothing_else() {
    let mut st = State::reached();
    get_pc_plus(&mut st, 0x100);
    // s_getpc_b64's result is the next instruction's address, 0x104; plus 0x100.
    assert_eq!(st.1.as_ref().unwrap().get(&5), Some(&Code::PcHi(0x204)));
    assert_eq!(
        control(&call(4), &st, &starts(&[0x204]), &starts(&[]), None),
        Ok(false)
    );
    assert_eq!(
        control(&call(4), &st, &starts(&[]), &starts(&[0x204]), None),
        Ok(true)
    );
    let e = control(&call(4), &st, &starts(&[0x200]), &starts(&[]), None).unwrap_err();
    assert!(e.contains("no start of a function"), "{e}");
}

#[test]
fn a_carry_from_another_sum_or_a_constant_after_the_pair_is_no_start() {
    let mut st = State::reached();
    get_pc_plus(&mut st, 0x100);
    // One more add to the low half, with no matching carry into the high half.
    let add = Op::AddConst {
        dst: 4,
        src: 4,
        c: 8,
        raw: 8,
        sub: false,
    };
    step(&mut st, &inst(add, &[(4, 1), (SCC, 1)]), 0x114, &[]);
    let e = control(&call(4), &st, &starts(&[0x204, 0x20c]), &starts(&[]), None).unwrap_err();
    assert!(e.contains("cannot show"), "{e}");
    // A value with no mark at all (loaded, or computed from a load) is no target.
    let st = State::reached();
    assert!(control(&call(4), &st, &starts(&[0x204]), &starts(&[]), None).is_err());
}

#[test]
fn the_join_keeps_only_what_both_paths_hold() {
    let mut a = State::reached();
    get_pc_plus(&mut a, 0x100);
    let b = State::reached();
    let mut j = a.clone();
    assert!(join_marks(&mut j.1, &b.1));
    assert!(control(&call(4), &j, &starts(&[0x204]), &starts(&[]), None).is_err());
    // A path not reached yet holds every mark: joining it changes nothing.
    let mut k = a.clone();
    assert!(!join_marks(&mut k.1, &None));
    assert_eq!(
        control(&call(4), &k, &starts(&[0x204]), &starts(&[]), None),
        Ok(false)
    );
}

#[test]
fn only_the_functions_own_return_address_is_a_return() {
    // What every call into the function wrote in its link pair.
    let mut entry = State::reached();
    let mut m = BTreeMap::new();
    m.insert(30, Code::RetEntry);
    m.insert(31, Code::RetEntry);
    entry.1 = Some(m);
    let mut ret = inst(Op::Return, &[]);
    ret.reads = vec![(30, 2)];
    assert_eq!(
        control(&ret, &entry, &starts(&[]), &starts(&[]), None),
        Ok(false)
    );
    assert!(control(&call(30), &entry, &starts(&[]), &starts(&[]), None).is_err());
    // A call of its own writes the pair: where that call comes back to is no return.
    let mut st = entry.clone();
    step(&mut st, &call(4), 0x100, &[]);
    assert!(control(&ret, &st, &starts(&[]), &starts(&[]), None).is_err());
    // The callee sees the link pair as its own return address, and no other.
    let mut held = entry.clone();
    let mut cp = inst(
        Op::Copy {
            dst: 40,
            src: 30,
            n: 2,
        },
        &[(40, 2)],
    );
    cp.reads = vec![(30, 2)];
    step(&mut held, &cp, 0x100, &[]);
    let c = call(4);
    let v = super::callee_view(&c, &held);
    let vm = v.1.as_ref().unwrap();
    assert_eq!(vm.get(&30), Some(&Code::RetEntry));
    assert_eq!(vm.get(&40), None);
    // Any write to the pair drops it.
    step(&mut entry, &inst(Op::Alu, &[(30, 1)]), 0x104, &[]);
    assert!(control(&ret, &entry, &starts(&[]), &starts(&[]), None).is_err());
}

/// A table at 0x1000–0x1010 addressed pc-relatively, indexed, loaded into v[4:5] by a GLOBAL
/// load; returns the state after the load.
fn waterfall_load() -> State {
    let mut st = State::reached();
    get_pc_plus(&mut st, 0x1000 - 0x104);
    let idx = Op::AddRegs {
        dst: 4,
        a: 8,
        b: 4,
        carry: false,
    };
    step(&mut st, &inst(idx, &[(4, 1), (SCC, 1)]), 0x114, &[]);
    let idxc = Op::AddRegs {
        dst: 5,
        a: 9,
        b: 5,
        carry: true,
    };
    step(&mut st, &inst(idxc, &[(5, 1), (SCC, 1)]), 0x118, &[]);
    let mut load = inst(Op::Mem, &[(V + 4, 2)]);
    load.kills = vec![(V + 4, 2)];
    load.addr = vec![(4, 2), (V + 2, 1)];
    load.vector = true;
    step(&mut st, &load, 0x11c, &[(0x1000, 0x1010)]);
    st
}

fn readfirstlane(st: &mut State, pc: u64) {
    for k in 0..2 {
        let mut x = inst(
            Op::Copy {
                dst: 10 + k,
                src: V + 4 + k,
                n: 1,
            },
            &[(10 + k, 1)],
        );
        x.vector = true;
        step(st, &x, pc + 4 * u64::from(k), &[]);
    }
}

#[test]
fn a_waterfall_loop_calls_table_entries() {
    let mut st = waterfall_load();
    readfirstlane(&mut st, 0x124);
    assert_eq!(
        control(&call(10), &st, &starts(&[]), &starts(&[]), None),
        Ok(false)
    );
    // The image makes a mid-function address: a table entry may hold it.
    let e = control(&call(10), &st, &starts(&[]), &starts(&[]), Some("x")).unwrap_err();
    assert!(e.contains("function table"), "{e}");
    // s_mov_b32 s54, exec_lo; v_cmpx; a write to the loaded VGPRs in exec's lanes; s_xor_b32
    // exec_lo, exec_lo, s54: exec is again clear of the lanes written.
    step(
        &mut st,
        &inst(
            Op::Copy {
                dst: 54,
                src: EXEC,
                n: 1,
            },
            &[(54, 1)],
        ),
        0x12c,
        &[],
    );
    let mut cmpx = inst(Op::Alu, &[(EXEC, 2)]);
    cmpx.vector = true;
    step(&mut st, &cmpx, 0x130, &[]);
    let mut w = inst(Op::Alu, &[(V + 4, 1)]);
    w.vector = true;
    step(&mut st, &w, 0x138, &[]);
    assert!(matches!(
        st.1.as_ref().unwrap().get(&EXEC),
        Some(Code::Serve(..))
    ));
    step(
        &mut st,
        &inst(
            Op::Xor {
                dst: EXEC,
                a: EXEC,
                b: 54,
                n: 1,
            },
            &[(EXEC, 1)],
        ),
        0x13c,
        &[],
    );
    readfirstlane(&mut st, 0x140);
    assert_eq!(
        control(&call(10), &st, &starts(&[]), &starts(&[]), None),
        Ok(false)
    );
}

#[test]
fn a_write_to_the_loaded_lanes_outside_a_served_exec_ends_the_waterfall() {
    let mut st = waterfall_load();
    // A write to v4 with exec as loaded (not served): the lanes exec enables may now hold it.
    let mut w = inst(Op::Alu, &[(V + 4, 1)]);
    w.vector = true;
    step(&mut st, &w, 0x124, &[]);
    readfirstlane(&mut st, 0x128);
    assert!(control(&call(10), &st, &starts(&[]), &starts(&[]), None).is_err());
    // exec widened (s_mov_b32 exec_lo, s0): no longer within the load's lanes.
    let mut st = waterfall_load();
    step(&mut st, &inst(Op::Alu, &[(EXEC, 1)]), 0x124, &[]);
    readfirstlane(&mut st, 0x128);
    assert!(control(&call(10), &st, &starts(&[]), &starts(&[]), None).is_err());
    // v_writelane writes a lane whatever exec says.
    let mut st = waterfall_load();
    let lane = inst(
        Op::Merge {
            dst: V + 4,
            src: 0,
            lane: Some(3),
        },
        &[(V + 4, 1)],
    );
    step(&mut st, &lane, 0x124, &[]);
    readfirstlane(&mut st, 0x128);
    assert!(control(&call(10), &st, &starts(&[]), &starts(&[]), None).is_err());
}

#[test]
fn a_load_outside_every_table_is_no_entry() {
    let mut st = State::reached();
    get_pc_plus(&mut st, 0x2000 - 0x104);
    let sload = Op::SLoad {
        base: 4,
        offset: 0,
        soffset: None,
        bytes: 8,
        dst: 10,
    };
    step(
        &mut st,
        &inst(sload.clone(), &[(10, 2)]),
        0x114,
        &[(0x1000, 0x1010)],
    );
    assert!(control(&call(10), &st, &starts(&[]), &starts(&[]), None).is_err());
    let mut st = State::reached();
    get_pc_plus(&mut st, 0x1008 - 0x104);
    step(
        &mut st,
        &inst(sload, &[(10, 2)]),
        0x114,
        &[(0x1000, 0x1010)],
    );
    assert_eq!(
        control(&call(10), &st, &starts(&[]), &starts(&[]), None),
        Ok(false)
    );
}

/// A long branch (llvm `SIInstrInfo::insertIndirectBranch`): `s_setpc_b64` through the exact
/// getpc sum of an address inside the function, not its start, goes on there; the function's
/// start, an address outside it, a call, or an inexact pair are no long branch.
#[test]
fn a_long_branch_goes_on_inside_the_function() {
    let mut st = State::reached();
    get_pc_plus(&mut st, 0x100);
    let mut jump = inst(Op::Jump, &[]);
    jump.reads = vec![(4, 2)];
    assert_eq!(long_branch(&jump, &st, 0x100, 0x300), Some(0x204));
    assert_eq!(long_branch(&jump, &st, 0x204, 0x300), None, "its own start");
    assert_eq!(long_branch(&jump, &st, 0x100, 0x204), None, "outside it");
    assert_eq!(long_branch(&call(4), &st, 0x100, 0x300), None, "a call");
    st.1.as_mut().unwrap().remove(&4);
    assert_eq!(long_branch(&jump, &st, 0x100, 0x300), None, "half a sum");
}
