//! Rows for [`super`]: the names `exec`'s masks keep through the `if`/`else` shapes llvm emits,
//! on instructions built by hand (the decoder's side: `decode_tests.rs`, `exec_moves_are_decoded`).

use super::*;
use crate::scan::callgraph::flow_exec::{self, transition};

fn inst(op: Op, writes: &[(Reg, u16)]) -> Inst {
    let mut i = Inst::new(1, op);
    i.writes = writes.to_vec();
    i
}

/// Run `insts` (each at its address) from a function's entry, wave32, as the flow applies marks:
/// drop what each writes, then set what it makes.
fn run(insts: &[(u64, Inst)]) -> State {
    let mut st = State {
        1: Some([(ENTERED, AS_ENTERED)].into_iter().collect()),
        ..Default::default()
    };
    for (pc, i) in insts {
        let t = transition(i, &st, true);
        let mut made = flow_exec::made(i, &st, t);
        made.extend(super::made(i, &st, *pc, t, true));
        let m = st.1.as_mut().unwrap();
        for &(r, n) in &i.writes {
            for k in r..r + n {
                if k < EXEC {
                    m.remove(&entry_key(k));
                }
                if k < 128 {
                    m.remove(&mask_key(k));
                }
            }
        }
        for (k, c) in made {
            match c {
                Some(c) => m.insert(k, c),
                None => m.remove(&k),
            };
        }
        flow_exec::apply(t, &mut st);
    }
    st
}

fn entered(st: &State) -> Option<Code> {
    st.1.as_ref().unwrap().get(&ENTERED).copied()
}

fn copy(dst: Reg, src: Reg) -> Inst {
    inst(Op::Copy { dst, src, n: 1 }, &[(dst, 1)])
}

fn cmpx() -> Inst {
    let mut i = inst(Op::Alu, &[(EXEC, 1)]);
    i.vector = true;
    i.lanewise = true;
    i.lane_mask = true;
    i
}

fn xor(dst: Reg, a: Reg, b: Reg) -> Inst {
    inst(Op::Xor { dst, a, b, n: 1 }, &[(dst, 1)])
}

fn or_exec(b: Reg) -> Inst {
    let op = Op::Logic {
        dst: EXEC,
        a: EXEC,
        b,
        n: 1,
        kind: Logic::Or,
    };
    inst(op, &[(EXEC, 1)])
}

/// The first half of llvm's unoptimized `if`/`else` (gfx9's `SI_IF`/`SI_ELSE`):
/// `s_and_saveexec_b32 s0`, `s_xor_b32 s0, exec_lo, s0`, `s_or_saveexec_b32 s0, s0`.
fn unoptimized_else() -> [Inst; 3] {
    let and = inst(Op::AndSaveExec { dst: 0, n: 1 }, &[(0, 1), (EXEC, 1)]);
    let orsave = inst(
        Op::OrSaveExec {
            dst: 0,
            n: 1,
            all: false,
            src: Some(0),
        },
        &[(0, 1), (EXEC, 1)],
    );
    [and, xor(0, EXEC, 0), orsave]
}

/// gfx11's `if`/`else` after SIOptimizeExecMasking (`_Z10op_checkedii` of our `indirect.hip`):
/// `s_mov_b32 s0, exec_lo`; `v_cmpx`; `s_xor_b32 s0, exec_lo, s0`; `s_and_not1_saveexec_b32 s21,
/// s0`; `s_or_b32 exec_lo, exec_lo, s21`: exec as entered again, within it all along.
#[test]
fn an_if_and_its_else_return_to_the_entry() {
    let andn = inst(
        Op::AndNotSaveExec {
            dst: 21,
            n: 1,
            src: 0,
        },
        &[(21, 1), (EXEC, 1)],
    );
    let steps = [
        (0x10, copy(0, EXEC)),
        (0x14, cmpx()),
        (0x18, xor(0, EXEC, 0)),
        (0x1c, andn),
        (0x20, or_exec(21)),
    ];
    for n in 2..steps.len() {
        let st = run(&steps[..n]);
        assert!(within(&st.1), "after {n}: {:?}", entered(&st));
        assert_ne!(entered(&st), Some(AS_ENTERED), "after {n}");
    }
    assert_eq!(entered(&run(&steps)), Some(AS_ENTERED));
    // The end or'd with the `if`'s saved lanes from before the `else` (not the `else`'s own
    // copy): no name.
    let mut wrong = steps.to_vec();
    wrong[4] = (0x20, or_exec(0));
    assert_eq!(entered(&run(&wrong)), None);
}

/// llvm's unoptimized shape (gfx9's `SI_IF`/`SI_ELSE`/`SI_END_CF`): `s_and_saveexec`, `s_xor`
/// of the copy, `s_or_saveexec` of it, `s_xor` of exec, `s_or` of exec.
#[test]
fn the_unoptimized_else_returns_to_the_entry_too() {
    let [and, x, orsave] = unoptimized_else();
    let steps = [
        (0x10, and),
        (0x14, x),
        (0x18, orsave),
        (0x1c, xor(EXEC, EXEC, 0)),
        (0x20, or_exec(0)),
    ];
    assert_eq!(entered(&run(&steps[..3])), Some(AS_ENTERED));
    assert_eq!(entered(&run(&steps)), Some(AS_ENTERED));
}

/// A narrowing made twice at one address (a loop): a copy from the first time names a mask
/// that is gone; or'ing it back names nothing. Any other write of exec drops the name.
#[test]
fn a_stale_copy_or_an_unknown_mask_names_nothing() {
    let steps = [
        (0x10, copy(0, EXEC)),
        (0x14, cmpx()),
        (0x18, copy(1, EXEC)),
        (0x14, cmpx()),
    ];
    let st = run(&steps);
    assert_eq!(st.1.as_ref().unwrap().get(&entry_key(1)), None);
    assert_eq!(entered(&st), Some(Code::Since(0x14, 0x14)));
    let back = run(&[(0x10, copy(0, EXEC)), (0x14, cmpx()), (0x18, or_exec(0))]);
    assert_eq!(entered(&back), Some(AS_ENTERED));
    let reset = run(&[(0x10, cmpx()), (0x14, xor(EXEC, EXEC, 2))]);
    assert_eq!(entered(&reset), None);
    assert!(!within(&reset.1));
}

/// A prologue's `s_or_saveexec_b32 s0, -1` and `s_mov_b32 exec_lo, s0`: no name with every lane
/// on, the entry's again after the restore.
#[test]
fn a_prologue_widening_drops_the_name_and_its_restore_brings_it_back() {
    let widen = inst(
        Op::OrSaveExec {
            dst: 0,
            n: 1,
            all: true,
            src: None,
        },
        &[(0, 1), (EXEC, 1)],
    );
    let mut restore = copy(EXEC, 0);
    restore.writes = vec![(EXEC, 1)];
    let wide = run(&[(0x10, widen.clone())]);
    assert_eq!(entered(&wide), None);
    assert!(!within(&wide.1));
    assert_eq!(
        entered(&run(&[(0x10, widen), (0x18, restore)])),
        Some(AS_ENTERED)
    );
}

/// The seventeenth review's `exechi`: on wave32 a copy of the entry's mask into `exec_hi` leaves
/// `exec_lo` as it is (here every lane on): no name; into `exec_lo`, the entry's.
#[test]
fn a_copy_into_exec_hi_names_nothing() {
    let mut hi = copy(EXEC + 1, 0);
    hi.writes = vec![(EXEC + 1, 1)];
    let mut lo = copy(EXEC, 0);
    lo.writes = vec![(EXEC, 1)];
    let all = inst(Op::Alu, &[(EXEC, 1)]);
    let st = run(&[(0x10, copy(0, EXEC)), (0x14, all.clone()), (0x18, hi)]);
    assert_eq!(entered(&st), None);
    let st = run(&[(0x10, copy(0, EXEC)), (0x14, all), (0x18, lo)]);
    assert_eq!(entered(&st), Some(AS_ENTERED));
}

/// The twenty-fifth review's `widetail`: the unoptimized `else`'s `s_or_saveexec` of the `if`'s
/// rest names `exec` as entered and widens it (Wide); an `s_or_saveexec` of -1 then, which the
/// split takes as no change, turns every lane on: no name after it, and a tail call from there
/// never counts `exec` as entered.
#[test]
fn a_widening_while_wide_drops_the_name() {
    let [and, x, orsave] = unoptimized_else();
    let all = inst(
        Op::OrSaveExec {
            dst: 4,
            n: 1,
            all: true,
            src: None,
        },
        &[(4, 1), (EXEC, 1)],
    );
    let steps = [(0x10, and), (0x14, x), (0x18, orsave), (0x1c, all)];
    let named = run(&steps[..3]);
    assert_eq!(entered(&named), Some(AS_ENTERED));
    // Named as entered, but Wide: neither a return nor a tail call counts it so.
    assert!(!as_entered(&named.1));
    let ids = crate::scan::callgraph::flow_call::idents(&named.1).unwrap();
    assert!(!ids.contains(&ENTERED));
    assert_eq!(entered(&run(&steps)), None);
}
