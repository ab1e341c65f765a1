//! Rows for [`super`]: a load's registers hold the old value or the loaded one until a wait, on
//! instructions built by hand (the decoder's side is `decode_wait_tests.rs`, `waits_and_late_writes`;
//! the whole flow's, row 4q of `tests/it/patch_soundness.rs`, the thirteenth review's `ldrace`).

use super::*;
use crate::scan::callgraph::inst::{cnt, V};

/// A state in which SGPR `s` held [`Val::Idx`] until an instruction just wrote nothing followed
/// there, and the state before that write: `(after, before)`.
fn overwritten(s: Reg) -> (State, State) {
    let mut st = State::reached();
    st.set(s, Val::Idx);
    let before = st.clone();
    st.set(s, Val::Clean);
    (st, before)
}

fn wait(c: u8) -> Inst {
    let mut i = Inst::new(1, Op::Alu);
    i.waits = c;
    i
}

fn write(r: Reg) -> Inst {
    let mut i = Inst::new(1, Op::Alu);
    i.writes.push((r, 1));
    i.kills.push((r, 1));
    i
}

fn load(c: u8) -> Inst {
    let mut i = Inst::new(2, Op::Mem);
    i.counts = c;
    i
}

#[test]
fn a_wait_for_every_counter_settles_the_load() {
    let v = V + 3;
    let mut st = State::reached();
    // What the step leaves: the entry the register held, joined with what the load returns.
    st.set(v, Val::Entry);
    let mark = Code::FnLo(0x100, 0);
    settle(
        &load(cnt::LOAD | cnt::DS),
        Exec::Same,
        &mut st,
        &[(v, Val::Clean, true, false)],
        &[(v, mark)],
    )
    .unwrap();
    assert_eq!(st.get(v), Val::Entry);
    assert!(
        st.1.as_ref().unwrap().get(&v).is_none(),
        "no mark while pending"
    );
    // A wait for one of the two counters settles nothing.
    settle(&wait(cnt::LOAD), Exec::Same, &mut st, &[], &[]).unwrap();
    assert_eq!(st.get(v), Val::Entry);
    assert!(st.2.contains_key(&v));
    settle(&wait(cnt::LOAD | cnt::DS), Exec::Same, &mut st, &[], &[]).unwrap();
    assert_eq!(st.get(v), Val::Clean);
    assert!(st.2.is_empty());
    assert_eq!(st.1.as_ref().unwrap().get(&v), Some(&mark));
}

#[test]
fn a_write_before_the_wait_may_be_overwritten() {
    let s = 4;
    let mut st = State::reached();
    settle(
        &load(cnt::KM),
        Exec::Same,
        &mut st,
        &[(s, Val::Entry, true, false)],
        &[],
    )
    .unwrap();
    // An exact write of a clean value: the load may land after it.
    st.write(s, Val::Clean, true);
    settle(&write(s), Exec::Same, &mut st, &[], &[]).unwrap();
    assert_eq!(st.get(s), Val::Entry);
    settle(&wait(cnt::LGKM), Exec::Same, &mut st, &[], &[]).unwrap();
    assert_eq!(
        st.get(s),
        Val::Entry,
        "the later write may have landed first"
    );
    assert!(st.2.is_empty());
}

#[test]
fn moved_lanes_and_one_sided_joins_are_not_exact() {
    let v = V + 7;
    let mut st = State::reached();
    st.set(v, Val::Entry);
    settle(
        &load(cnt::LOAD),
        Exec::Same,
        &mut st,
        &[(v, Val::Clean, true, false)],
        &[],
    )
    .unwrap();
    let mut narrowed = st.clone();
    settle(
        &Inst::new(1, Op::Alu),
        Exec::Narrow,
        &mut narrowed,
        &[],
        &[],
    )
    .unwrap();
    settle(&wait(cnt::VM), Exec::Same, &mut narrowed, &[], &[]).unwrap();
    assert_eq!(narrowed.get(v), Val::Entry);
    // Joined with a path where nothing is pending: that path's value stays.
    let mut other = State::reached();
    other.set(v, Val::Entry);
    let mut joined = st.clone();
    joined.join_from(&other);
    settle(&wait(cnt::VM), Exec::Same, &mut joined, &[], &[]).unwrap();
    assert_eq!(joined.get(v), Val::Entry);
    // Both paths pending and exact: the wait settles it.
    let mut both = st.clone();
    both.join_from(&st);
    settle(&wait(cnt::VM), Exec::Same, &mut both, &[], &[]).unwrap();
    assert_eq!(both.get(v), Val::Clean);
}

#[test]
fn a_load_into_exec_is_refused() {
    let mut st = State::reached();
    let err = settle(
        &load(cnt::KM),
        Exec::Reset,
        &mut st,
        &[(EXEC, Val::Clean, true, false)],
        &[],
    );
    assert!(err.unwrap_err().contains("exec"));
}

#[test]
fn in_order_loads_settle_when_enough_younger_ones_may_be_out() {
    use crate::scan::callgraph::inst::{Queue, NO_WAIT};
    let (a, b) = (V + 4, V + 2);
    let mut vm = load(cnt::LOAD);
    vm.queue = Queue::VmLoad;
    let mut st = State::reached();
    settle(
        &vm,
        Exec::Same,
        &mut st,
        &[(a, Val::Clean, true, false)],
        &[],
    )
    .unwrap();
    st.set(b, Val::Entry);
    // A FLAT load may return out of order: it counts for nothing.
    settle(&load(cnt::LOAD | cnt::DS), Exec::Same, &mut st, &[], &[]).unwrap();
    let mut left1 = wait(0);
    left1.left = [1, NO_WAIT];
    let mut early = st.clone();
    settle(&left1, Exec::Same, &mut early, &[], &[]).unwrap();
    assert!(
        early.2.contains_key(&a),
        "one load may be out: it may be this one"
    );
    settle(
        &vm,
        Exec::Same,
        &mut st,
        &[(b, Val::Clean, true, false)],
        &[],
    )
    .unwrap();
    settle(&left1, Exec::Same, &mut st, &[], &[]).unwrap();
    assert!(
        !st.2.contains_key(&a),
        "the younger load is the one that may be out"
    );
    assert_eq!(st.get(b), Val::Entry);
    assert!(st.2.contains_key(&b));
    // lgkmcnt says nothing of vmcnt's queue.
    let mut lgkm0 = wait(cnt::LGKM);
    lgkm0.left = [NO_WAIT, 0];
    settle(&lgkm0, Exec::Same, &mut st, &[], &[]).unwrap();
    assert!(st.2.contains_key(&b));
}

fn valu_write(r: Reg) -> Inst {
    let mut i = write(r);
    i.vector = true;
    i.lanewise = true;
    i
}

#[test]
fn a_wide_store_reads_its_data_late_and_an_mfma_its_sources() {
    let (d, c) = (V + 22, V + 24);
    let mut st = State::reached();
    let store = Inst::new(2, Op::Mem);
    windows(
        &store,
        &mut st,
        &State::reached(),
        &[(d, 2)],
        &[(c, 4)],
        None,
        124,
    );
    // The next instruction writes a table's entry into both.
    let mut next = valu_write(d);
    next.writes.push((c, 1));
    let before = st.clone();
    st.set(d, Val::Entry);
    st.set(c, Val::Entry);
    let (data, strict) = windows(&next, &mut st, &before, &[], &[], None, 124);
    assert_eq!((data, strict), (Val::Entry, Val::Entry));
    // Two instructions on, the store has read its data; the MFMA may still read its sources.
    let before = st.clone();
    windows(
        &Inst::new(1, Op::Alu),
        &mut st,
        &before,
        &[],
        &[],
        None,
        124,
    );
    let w = valu_write(d);
    let before = st.clone();
    assert_eq!(
        windows(&w, &mut st, &before, &[], &[], None, 124).0,
        Val::Clean
    );
    let mut c_again = valu_write(c);
    c_again.writes.push((c, 1));
    let before = st.clone();
    assert_eq!(
        windows(&c_again, &mut st, &before, &[], &[], None, 124).1,
        Val::Entry
    );
}

#[test]
fn a_memory_instruction_may_read_an_sgpr_a_valu_overwrote() {
    let s = 20;
    let (mut st, before) = overwritten(s);
    windows(&valu_write(s), &mut st, &before, &[], &[], None, 124);
    let mut vmem = load(cnt::LOAD);
    vmem.reads.push((s, 2));
    let (patched, keys) = read_stale(&vmem, &st).expect("a stale read");
    assert_eq!(patched.get(s), Val::Idx);
    assert_eq!(keys, vec![(s, Val::Clean)]);
    // A lanewise VALU waits for its operand; a scalar write opens no window.
    let mut valu = valu_write(V + 1);
    valu.reads.push((s, 1));
    assert!(read_stale(&valu, &st).is_none());
    let (mut st2, before) = overwritten(s);
    windows(&write(s), &mut st2, &before, &[], &[], None, 124);
    assert!(read_stale(&vmem, &st2).is_none());
}

/// gfx94x (`coexec`): an SGPR a VALU wrote may be read stale by any vector instruction, whatever
/// it held, and none of its marks hold for that read (the twenty-first review's `vdecsgpr`).
#[test]
fn on_gfx94x_a_valu_reads_an_sgpr_a_valu_wrote_stale() {
    let s = 20;
    let (mut st, before) = overwritten(s);
    let w = valu_write(s);
    coexec(&w, &mut st, &before);
    let mut mov = valu_write(V + 10);
    mov.reads.push((s, 1));
    let (patched, _) = read_stale(&mov, &st).expect("a stale read");
    assert_eq!(patched.get(s), Val::Idx);
    // What held nothing followed but a mark: the stale read has no mark.
    let t = 22;
    let mut st = State::reached();
    st.1.as_mut().unwrap().insert(t, Code::PcLo(0x100));
    let before = st.clone();
    coexec(&valu_write(t), &mut st, &before);
    let mut cmp = valu_write(V + 11);
    cmp.reads.push((t, 1));
    let (patched, _) = read_stale(&cmp, &st).expect("a stale read");
    assert!(patched.1.as_ref().unwrap().get(&t).is_none());
    // A scalar write opens nothing here.
    let mut st = State::reached();
    st.set(s, Val::Idx);
    let before = st.clone();
    coexec(&write(s), &mut st, &before);
    assert!(st.3.stale.is_empty());
}

/// gfx9's `s_sendmsg` reads `m0` a wait state late (llvm `checkReadM0Hazards`): what a scalar
/// write of `m0` replaced may still be what the message sends.
#[test]
fn a_message_reads_m0_stale() {
    let m0 = 124;
    let (mut st, before) = overwritten(m0);
    windows(&write(m0), &mut st, &before, &[], &[], None, m0);
    let mut msg = Inst::new(1, Op::Mem);
    msg.reads.push((m0, 1));
    let (patched, _) = read_stale(&msg, &st).expect("a stale read");
    assert_eq!(patched.get(m0), Val::Idx);
}
