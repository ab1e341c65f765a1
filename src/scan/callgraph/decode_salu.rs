//! The scalar ALU formats of [`super::decode`]: SOP1, SOP2, SOPC, SOPK and SOPP. What each
//! opcode does to the state no register field names (SCC, exec, the hardware registers, a
//! conditional branch's condition) comes from its row in [`super::salu_table`], which llvm-mc
//! 21's mnemonics decide (`xtask/salu_table.py`; which ones read or set SCC follows llvm
//! `SOPInstructions.td`, `Uses = [SCC]` / `Defs = [SCC]`). An opcode no processor of the
//! generation decodes, or one whose mnemonic the table does not classify, reads SCC, may set it
//! and may write exec, and has an effect beyond its registers ([`Inst::effect`]).

use super::inst::{
    cnt, constant, sgpr, Gen, Inst, Op, Reg, EXEC, HWREG, NO_WAIT, RUNTIME, SCC, VCC,
};
use super::isa::branch_offset;
use super::salu_table as t;

/// The message ID (the SSRC0 field, not an inline constant) of `s_sendmsg_rtn` that returns the
/// real-time counter: a clock, no address (llvm `SIDefines.h`, `ID_RTN_GET_REALTIME = 131`,
/// gfx11 and gfx12).
const MSG_RTN_GET_REALTIME: u32 = 131;

/// The generated tables of format `fmt` ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP"): its flags
/// rows and its operand-width rows (none for SOPP).
fn tables(g: Gen, fmt: &str) -> (&'static [u8], &'static [u8]) {
    match (g, fmt) {
        (Gen::G9, "SOP1") => (&t::SOP1_G9, &t::WIDTH_SOP1_G9),
        (Gen::G9, "SOP2") => (&t::SOP2_G9, &t::WIDTH_SOP2_G9),
        (Gen::G9, "SOPC") => (&t::SOPC_G9, &t::WIDTH_SOPC_G9),
        (Gen::G9, "SOPK") => (&t::SOPK_G9, &t::WIDTH_SOPK_G9),
        (Gen::G9, _) => (&t::SOPP_G9, &[]),
        (Gen::G10, "SOP1") => (&t::SOP1_G10, &t::WIDTH_SOP1_G10),
        (Gen::G10, "SOP2") => (&t::SOP2_G10, &t::WIDTH_SOP2_G10),
        (Gen::G10, "SOPC") => (&t::SOPC_G10, &t::WIDTH_SOPC_G10),
        (Gen::G10, "SOPK") => (&t::SOPK_G10, &t::WIDTH_SOPK_G10),
        (Gen::G10, _) => (&t::SOPP_G10, &[]),
        (Gen::G11, "SOP1") => (&t::SOP1_G11, &t::WIDTH_SOP1_G11),
        (Gen::G11, "SOP2") => (&t::SOP2_G11, &t::WIDTH_SOP2_G11),
        (Gen::G11, "SOPC") => (&t::SOPC_G11, &t::WIDTH_SOPC_G11),
        (Gen::G11, "SOPK") => (&t::SOPK_G11, &t::WIDTH_SOPK_G11),
        (Gen::G11, _) => (&t::SOPP_G11, &[]),
        (Gen::G12, "SOP1") => (&t::SOP1_G12, &t::WIDTH_SOP1_G12),
        (Gen::G12, "SOP2") => (&t::SOP2_G12, &t::WIDTH_SOP2_G12),
        (Gen::G12, "SOPC") => (&t::SOPC_G12, &t::WIDTH_SOPC_G12),
        (Gen::G12, "SOPK") => (&t::SOPK_G12, &t::WIDTH_SOPK_G12),
        (Gen::G12, _) => (&t::SOPP_G12, &[]),
    }
}

/// The register counts of src0, src1 and the destination of opcode `op` of format `fmt` (0 where
/// the field is no register for that opcode, 2 for a pair), and whether it reads its destination.
fn widths(g: Gen, fmt: &str, op: u32) -> (u16, u16, u16, bool) {
    let w = tables(g, fmt)
        .1
        .get(op as usize)
        .copied()
        .unwrap_or(7 | t::RD_D);
    let n = |wide: u8, none: u8| {
        if w & wide != 0 {
            2
        } else if w & none != 0 {
            0
        } else {
            1
        }
    };
    (
        n(t::W_S0, t::NO_S0),
        n(t::W_S1, t::NO_S1),
        n(t::W_D, t::NO_D),
        w & t::RD_D != 0,
    )
}

/// The table row of opcode `op` of format `fmt`.
fn row(g: Gen, fmt: &str, op: u32) -> u8 {
    tables(g, fmt).0.get(op as usize).copied().unwrap_or(0)
}

/// Add what row `f` says about SCC, exec and the hardware registers to `x`.
fn implicit(x: &mut Inst, f: u8) {
    if f & t::READ_SCC != 0 {
        x.reads.push((SCC, 1));
    }
    if f & t::SET_SCC != 0 {
        x.writes.push((SCC, 1));
        x.kills.push((SCC, 1));
    } else if f & t::MAY_SCC != 0 {
        x.writes.push((SCC, 1));
    }
    if f & t::EXEC_W != 0 {
        x.writes.push((EXEC, 2));
    }
    if f & t::GETREG != 0 {
        // `s_getreg_b32` reads the hardware registers, whose exception bits float operations
        // may set, and STATUS, which mirrors SCC, VCCZ and EXECZ.
        x.reads.push((HWREG, 1));
        x.reads.push((RUNTIME, 1));
        x.reads.push((SCC, 1));
        x.reads.push((VCC, 2));
        x.reads.push((EXEC, 2));
    }
    if f & t::FLOAT != 0 {
        x.writes.push((HWREG, 1));
    }
    if f & t::EFFECT != 0 {
        x.effect = true;
    }
}

/// SOP1: `sdst`, `ssrc0` (plus a literal).
pub(super) fn sop1(g: Gen, w: u32) -> Inst {
    let (op, d, s) = ((w >> 8) & 0xff, (w >> 16) & 0x7f, w & 0xff);
    let mut x = Inst::new(if s == 255 { 2 } else { 1 }, Op::Alu);
    let (n0, _, nd, reads_d) = widths(g, "SOP1", op);
    // s_sendmsg_rtn_b32/_b64 write SDST with the message's answer and read no register (the
    // RDNA3 and RDNA4 ISA guides, "S_SENDMSG_RTN_B64"; llvm `SOPInstructions.td`: `outs $sdst`,
    // `ins SendMsg:$src0`), whatever the table's conservative default says.
    let rtn = matches!(g, Gen::G11 | Gen::G12) && matches!(op, 0x4c | 0x4d);
    let reads_d = reads_d && !rtn;
    let f = row(g, "SOP1", op);
    let [mov32, mov64, getpc, setpc, swappc] = g.isa().sop1().expect("known generation");
    let relative = match g {
        Gen::G9 => (0x2A..=0x2D).contains(&op),
        Gen::G10 => (0x2E..=0x31).contains(&op) || op == 0x49,
        Gen::G11 | Gen::G12 => (0x40..=0x44).contains(&op),
    };
    // The target of a jump or call is the first read (the flow looks there).
    x.src(s, n0);
    implicit(&mut x, f);
    if rtn {
        // It answers on `lgkmcnt` (gfx12 `kmcnt`): llvm `SIInsertWaitcnts.cpp`, `SQ_MESSAGE`.
        x.counts = cnt::KM;
    }
    if rtn && s != MSG_RTN_GET_REALTIME {
        // s_sendmsg_rtn_b32/_b64: what it returns is the runtime's (e.g. MSG_RTN_GET_TMA, the
        // trap memory address, which leads to the queue); only the real-time clock is a number.
        x.reads.push((RUNTIME, 1));
    }
    if op == swappc {
        x.op = Op::Call;
        x.sdst(d, 2, 2);
    } else if op == setpc {
        x.op = if s == 30 && d == 0 {
            Op::Return
        } else {
            Op::Jump
        };
    } else if g.isa().computed_jump_sop1(op) {
        x.op = Op::Fork;
    } else if relative {
        x.op = Op::Relative;
        x.sdst(d, nd, 0);
    } else if op == getpc {
        x.sdst(d, 2, 2);
        x.op = Op::GetPc { dst: d as Reg };
    } else if matches!(g, Gen::G11 | Gen::G12) && op == 0x0F && sgpr(s).is_some() {
        // s_sext_i32_i16 (llvm-mc 21: SOP1 0x0F on gfx11 and gfx12).
        x.sdst(d, 1, 1);
        x.op = Op::Sext16 {
            dst: d as Reg,
            src: s as Reg,
        };
    } else if op == mov32 || op == mov64 {
        let n = if op == mov64 { 2 } else { 1 };
        x.sdst(d, n, n);
        // A copy of exec too (how a waterfall loop saves the lanes it serves).
        if let Some(src) = sgpr(s).or((s == u32::from(EXEC)).then_some(EXEC)) {
            x.op = Op::Copy {
                dst: d as Reg,
                src,
                n,
            };
        }
    } else {
        // Some read their destination (`s_bitset*`, `s_cmov*`) or `exec` (the `*_saveexec`
        // family writes the old `exec` there), and may leave it unchanged.
        if reads_d {
            x.src(d, nd);
        }
        if f & t::EXEC_W != 0 {
            x.reads.push((EXEC, 2));
        }
        // One that does not read its destination writes all of it.
        x.sdst(d, nd, if reads_d { 0 } else { nd });
        // s_and_saveexec_b32/b64 (llvm-mc 21: 0x20 gfx9 (b64); 0x3C/0x24 gfx10; 0x20/0x21 gfx11
        // and gfx12): how a waterfall loop narrows exec, for the marks of `flow_marks`;
        // s_or_saveexec_b32/b64 (0x21 gfx9 (b64); 0x3D/0x25 gfx10; 0x22/0x23 gfx11 and gfx12): a
        // prologue's "every lane on", for `flow_exec`; s_andn2_saveexec_b32/b64 (0x23 gfx9
        // (b64); 0x3F/0x27 gfx10; s_and_not1_saveexec 0x30/0x31 gfx11 and gfx12): an `else`;
        // s_xor_saveexec_b32/b64 (0x22 gfx9 (b64); 0x3E/0x26 gfx10; 0x24/0x25 gfx11 and gfx12).
        let dst = d as Reg;
        // ssrc0 193 is the inline constant -1 (the ISA manuals' "SSRC0" operand table).
        let all = s == 193;
        let src = sgpr(s);
        let op = match (g, op) {
            (Gen::G9, 0x20) | (Gen::G10, 0x24) | (Gen::G11 | Gen::G12, 0x21) => {
                Some(Op::AndSaveExec { dst, n: 2 })
            }
            (Gen::G10, 0x3C) | (Gen::G11 | Gen::G12, 0x20) => Some(Op::AndSaveExec { dst, n: 1 }),
            (Gen::G9, 0x21) | (Gen::G10, 0x25) | (Gen::G11 | Gen::G12, 0x23) => {
                Some(Op::OrSaveExec {
                    dst,
                    n: 2,
                    all,
                    src,
                })
            }
            (Gen::G10, 0x3D) | (Gen::G11 | Gen::G12, 0x22) => Some(Op::OrSaveExec {
                dst,
                n: 1,
                all,
                src,
            }),
            (Gen::G9, 0x23) | (Gen::G10, 0x27) | (Gen::G11 | Gen::G12, 0x31) => {
                src.map(|src| Op::AndNotSaveExec { dst, n: 2, src })
            }
            (Gen::G10, 0x3F) | (Gen::G11 | Gen::G12, 0x30) => {
                src.map(|src| Op::AndNotSaveExec { dst, n: 1, src })
            }
            (Gen::G9, 0x22) | (Gen::G10, 0x26) | (Gen::G11 | Gen::G12, 0x25) => {
                Some(Op::XorSaveExec { dst, n: 2 })
            }
            (Gen::G10, 0x3E) | (Gen::G11 | Gen::G12, 0x24) => Some(Op::XorSaveExec { dst, n: 1 }),
            _ => None,
        };
        if let Some(op) = op.filter(|_| d < 106) {
            x.op = op;
        }
    }
    x
}

/// SOP2: `sdst`, `ssrc0`, `ssrc1` (plus a literal).
pub(super) fn sop2(g: Gen, w: u32, literal: Option<u32>) -> Inst {
    let (op, d, s0, s1) = (
        (w >> 23) & 0x7f,
        (w >> 16) & 0x7f,
        w & 0xff,
        (w >> 8) & 0xff,
    );
    let mut x = Inst::new(if s0 == 255 || s1 == 255 { 2 } else { 1 }, Op::Alu);
    let (n0, n1, nd, _) = widths(g, "SOP2", op);
    x.src(s0, n0);
    x.src(s1, n1);
    x.sdst(d, nd, nd);
    implicit(&mut x, row(g, "SOP2", op));
    if g.isa().computed_jump_sop2(op) {
        x.op = Op::Fork;
        return x;
    }
    // s_add_u32 (0), s_sub_u32 (1), s_addc_u32 (4) and s_subb_u32 (5) in every generation
    // (gfx12 names them s_add_co_u32 …, s_sub_co_ci_u32); s_cselect_b32/b64 (0xA/0xB up to gfx10,
    // 0x30/0x31 from gfx11 on); gfx12's s_add_nc_u64 / s_sub_nc_u64 (0x53/0x54). From
    // `xtask/salu_table.py`'s listing.
    let (csel32, csel64) = match g {
        Gen::G9 | Gen::G10 => (0xA, 0xB),
        Gen::G11 | Gen::G12 => (0x30, 0x31),
    };
    let sub = op % 2 == 1;
    let dst = d as Reg;
    let (a, b) = (sgpr(s0), sgpr(s1));
    let (ca, cb) = (constant(s0, literal), constant(s1, literal));
    match op {
        0 | 1 => {
            let sign = if sub { -1 } else { 1 };
            if let (Some(src), Some(c)) = (a, cb) {
                x.op = Op::AddConst {
                    dst,
                    src,
                    c: sign * c,
                    raw: c as u32,
                    sub,
                };
            } else if let (Some(c), Some(src), false) = (ca, b, sub) {
                x.op = Op::AddConst {
                    dst,
                    src,
                    c,
                    raw: c as u32,
                    sub,
                };
            } else if let (Some(a), Some(b), false) = (a, b, sub) {
                x.op = Op::AddRegs {
                    dst,
                    a,
                    b,
                    carry: false,
                };
            }
        }
        4 | 5 => {
            if let (Some(src), Some(k)) = (a, cb) {
                x.op = Op::AddCarry {
                    dst,
                    src,
                    k: k as u32,
                    sub,
                };
            } else if let (Some(k), Some(src), false) = (ca, b, sub) {
                x.op = Op::AddCarry {
                    dst,
                    src,
                    k: k as u32,
                    sub,
                };
            } else if let (Some(a), Some(b), false) = (a, b, sub) {
                x.op = Op::AddRegs {
                    dst,
                    a,
                    b,
                    carry: true,
                };
            }
        }
        0x53 | 0x54 if g == Gen::G12 => {
            // A 64-bit sum: an inline constant is sign-extended; a literal is taken only where
            // sign and zero extension agree.
            // (`constant` sign-extends a literal; the hardware zero-extends it here.)
            let c = cb.filter(|&c| s1 != 255 || (0..0x8000_0000).contains(&c));
            if let (Some(src), Some(c), true) = (a, c, s0 % 2 == 0 && d % 2 == 0) {
                x.op = Op::Add64 {
                    dst,
                    src,
                    c: if op == 0x54 { -c } else { c },
                };
            }
        }
        // s_xor_b32/b64 (llvm-mc 21: 0x10/0x11 gfx9, 0x12/0x13 gfx10, 0x1A/0x1B gfx11 and gfx12).
        _ if matches!(
            (g, op),
            (Gen::G9, 0x10 | 0x11) | (Gen::G10, 0x12 | 0x13) | (Gen::G11 | Gen::G12, 0x1A | 0x1B)
        ) =>
        {
            let reg = |s: u32| sgpr(s).or((s == u32::from(EXEC)).then_some(EXEC));
            if let (Some(a), Some(b)) = (reg(s0), reg(s1)) {
                x.op = Op::Xor { dst, a, b, n: n0 };
            }
        }
        // s_and, s_or, s_andn2 (s_and_not1) b32/b64 (llvm-mc 21: 0x0C/0x0D, 0x0E/0x0F,
        // 0x12/0x13 gfx9; 0x0E/0x0F, 0x10/0x11, 0x14/0x15 gfx10; 0x16/0x17, 0x18/0x19, 0x22/0x23
        // gfx11 and gfx12).
        _ if logic(g, op).is_some() => {
            let reg = |s: u32| sgpr(s).or((s == u32::from(EXEC)).then_some(EXEC));
            if let (Some(a), Some(b), Some(kind)) = (reg(s0), reg(s1), logic(g, op)) {
                x.op = Op::Logic {
                    dst,
                    a,
                    b,
                    n: n0,
                    kind,
                };
            }
        }
        // A select of anything else (vcc, m0, exec, ttmps, src_scc …) is read as an ALU op of
        // everything it reads.
        _ if (op == csel32 || op == csel64)
            && (a.is_some() || ca.is_some())
            && (b.is_some() || cb.is_some()) =>
        {
            let n = if op == csel64 { 2 } else { 1 };
            x.writes.retain(|&(r, _)| r != dst);
            x.kills.retain(|&(r, _)| r == SCC);
            x.sdst(d, n, n);
            x.op = Op::Select { dst, a, b, n };
        }
        _ => {}
    }
    x
}

/// SOPC: two sources, sets SCC; gfx9's `s_set_gpr_idx_on` is relative.
pub(super) fn sopc(g: Gen, w: u32) -> Inst {
    let (s0, s1, op) = (w & 0xff, (w >> 8) & 0xff, (w >> 16) & 0x7f);
    let mut x = Inst::new(if s0 == 255 || s1 == 255 { 2 } else { 1 }, Op::Alu);
    let (n0, n1, _, _) = widths(g, "SOPC", op);
    x.src(s0, n0);
    x.src(s1, n1);
    implicit(&mut x, row(g, "SOPC", op));
    if g == Gen::G9 && op == 0x11 {
        // s_set_gpr_idx_on: the VALU operands that follow are relative until
        // s_set_gpr_idx_off; refused while anything is followed.
        x.op = Op::Opaque;
    }
    x
}

/// SOPK: `sdst` (read and written) and a 16-bit constant; `s_setreg_imm32_b32` has a literal.
pub(super) fn sopk(g: Gen, w: u32) -> Inst {
    let (op, d) = ((w >> 23) & 0x1f, (w >> 16) & 0x7f);
    let setreg_imm32 = match g {
        Gen::G9 => 0x14,
        Gen::G10 => 0x15,
        Gen::G11 | Gen::G12 => 0x13,
    };
    let mut x = Inst::new(if op == setreg_imm32 { 2 } else { 1 }, Op::Alu);
    let (_, _, nd, reads_d) = widths(g, "SOPK", op);
    if reads_d {
        x.src(d, nd);
    }
    x.sdst(d, nd, 0);
    implicit(&mut x, row(g, "SOPK", op));
    x.waits = sopk_waits(g, op, d, w & 0xffff);
    x.left = sopk_left(g, op, d, w & 0xffff);
    let simm = i64::from(w as u16 as i16);
    // s_setreg_b32 (0x12 on gfx9 and gfx11/12, 0x13 on gfx10) and s_setreg_imm32_b32, from
    // `xtask/salu_table.py`'s listing: one that may change more than MODE's rounding, denormal
    // and exception-enable fields (bits 0–22), TRAPSTS (up to gfx11) or gfx10's flat scratch
    // base (FLAT_SCR_LO/HI, ids 20/21, the kernel prologue's) may change how later instructions
    // read their operands (gfx9's MODE.GPR_IDX_EN, VSKIP) and is opaque (llvm `SIDefines.h`,
    // `Hwreg::Id`).
    let setreg = match g {
        Gen::G10 => 0x13,
        _ => 0x12,
    };
    if op == setreg || op == setreg_imm32 {
        let (id, off, size) = (w & 0x3f, (w >> 6) & 0x1f, ((w >> 11) & 0x1f) + 1);
        let benign = (id == 1 && off + size <= 23)
            || (id == 3 && g != Gen::G12)
            || (matches!(id, 20 | 21) && g == Gen::G10);
        if !benign {
            x.op = Op::Opaque;
        }
    }
    match g.isa().sopk_control(op) {
        Some(super::isa::SopkControl::Call) => {
            // The target is a constant (checked by the call graph); only the return address
            // is written.
            x.op = Op::Call;
            x.reads.clear();
            x.kills.push((d as Reg, 2));
        }
        Some(super::isa::SopkControl::Branch) => {
            // `s_subvector_loop_*` branch on `sdst`, which stays the first read.
            x.op = if g == Gen::G9 && op == 0x10 {
                Op::Fork
            } else {
                Op::CBranch(simm)
            }
        }
        None => {}
    }
    x
}

/// Whether SOPP opcode `op` only waits, hints or orders (reads no register, writes none, sends
/// nothing): `s_nop`, `s_waitcnt` (gfx12's `s_wait_*`), `s_barrier` (`s_barrier_wait`),
/// `s_sleep`, `s_setprio`, `s_icache_inv`, `s_clause`, `s_delay_alu`, `s_waitcnt_depctr`
/// (`s_wait_alu`), as llvm-mc 21 encodes them per generation.
fn quiet_sopp(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 => matches!(op, 0x00 | 0x0a | 0x0c | 0x0e | 0x0f | 0x13),
        Gen::G10 => matches!(op, 0x00 | 0x0a | 0x0c | 0x0e | 0x0f | 0x13 | 0x21 | 0x23),
        Gen::G11 => matches!(
            op,
            0x00 | 0x03 | 0x05 | 0x07 | 0x08 | 0x09 | 0x35 | 0x3c | 0x3d
        ),
        Gen::G12 => matches!(
            op,
            0x00 | 0x03 | 0x05 | 0x07 | 0x08 | 0x09 | 0x14 | 0x35 | 0x3c | 0x40..=0x49
        ),
    }
}

/// The counters ([`cnt`]) SOPP opcode `op` with constant `s` waits to reach zero: `s_waitcnt`
/// (0x0C up to gfx10, 0x09 on gfx11; `vmcnt` in bits 3:0 and 15:14, `expcnt` 6:4, `lgkmcnt` 11:8
/// on gfx9 and 13:8 on gfx10; on gfx11 `expcnt` 2:0, `lgkmcnt` 9:4, `vmcnt` 15:10) and gfx12's
/// `s_wait_loadcnt` … `s_wait_kmcnt` (0x40–0x47, the count in the whole constant) and
/// `s_wait_loadcnt_dscnt`, `s_wait_storecnt_dscnt` (0x48, 0x49: the first in bits 15:8, `dscnt`
/// in 7:0). llvm `AMDGPUBaseInfo.cpp` (`encodeWaitcnt`, `getLoadcntStorecntBitShift`), checked
/// against llvm-mc 21's encodings for gfx900, gfx90a, gfx942, gfx1010, gfx1030, gfx1100 and
/// gfx1200. A field is read as zero only where every bit the hardware may read is zero.
fn sopp_waits(g: Gen, op: u32, s: u32) -> u8 {
    let zero = |bits: u32, c: u8| if bits == 0 { c } else { 0 };
    match (g, op) {
        (Gen::G9 | Gen::G10, 0x0C) => {
            let lgkm = if g == Gen::G9 { 0xf00 } else { 0x3f00 };
            zero(s & 0xc00f, cnt::VM) | zero(s & 0x70, cnt::EXP) | zero(s & lgkm, cnt::LGKM)
        }
        (Gen::G11, 0x09) => {
            zero(s & 0xfc00, cnt::VM) | zero(s & 0x3f0, cnt::LGKM) | zero(s & 7, cnt::EXP)
        }
        (Gen::G12, 0x40..=0x47) => {
            let c = [
                cnt::LOAD,
                cnt::STORE,
                cnt::SAMPLE,
                cnt::BVH,
                cnt::EXP,
                0,
                cnt::DS,
                cnt::KM,
            ];
            zero(s, c[(op - 0x40) as usize])
        }
        (Gen::G12, 0x48 | 0x49) => {
            let first = if op == 0x48 { cnt::LOAD } else { cnt::STORE };
            zero(s >> 8, first) | zero(s & 0xff, cnt::DS)
        }
        _ => 0,
    }
}

/// The counts of `vmcnt` and `lgkmcnt` (gfx12: `loadcnt` and `dscnt`) SOPP opcode `op` with
/// constant `s` waits down to (`s_waitcnt`, fields as [`sopp_waits`] reads them; gfx12's
/// `s_wait_loadcnt`, `s_wait_dscnt`, `s_wait_loadcnt_dscnt`, `s_wait_storecnt_dscnt`, read as
/// the whole constant or byte, never below the bits the hardware reads; [`NO_WAIT`] elsewhere).
fn sopp_left(g: Gen, op: u32, s: u32) -> [u8; 2] {
    let n = |x: u32| x.min(u32::from(NO_WAIT) - 1) as u8;
    match (g, op) {
        (Gen::G12, 0x40) => [n(s), NO_WAIT],
        (Gen::G12, 0x46) => [NO_WAIT, n(s)],
        (Gen::G12, 0x48) => [n(s >> 8), n(s & 0xff)],
        (Gen::G12, 0x49) => [NO_WAIT, n(s & 0xff)],
        (Gen::G9 | Gen::G10, 0x0C) => {
            let vm = (s & 0xf) | ((s >> 14) & 3) << 4;
            let lgkm = (s >> 8) & if g == Gen::G9 { 0xf } else { 0x3f };
            [vm as u8, lgkm as u8]
        }
        (Gen::G11, 0x09) => [((s >> 10) & 0x3f) as u8, ((s >> 4) & 0x3f) as u8],
        _ => [NO_WAIT; 2],
    }
}

/// The counters ([`cnt`]) SOPK opcode `op` with destination field `d` and constant `s` waits to
/// reach zero: gfx10's and gfx11's `s_waitcnt_vscnt`, `_vmcnt`, `_expcnt`, `_lgkmcnt` (0x17–0x1A
/// on gfx10, 0x18–0x1B on gfx11, llvm-mc 21), which wait for the counter to reach the SGPR `d`
/// plus `s`: zero only with `null` (0x7D, 0x7C) and 0.
fn sopk_waits(g: Gen, op: u32, d: u32, s: u32) -> u8 {
    let (first, null) = match g {
        Gen::G10 => (0x17, 0x7D),
        Gen::G11 => (0x18, 0x7C),
        Gen::G9 | Gen::G12 => return 0,
    };
    if d != null || s != 0 || !(first..first + 4).contains(&op) {
        return 0;
    }
    [cnt::STORE, cnt::VM, cnt::EXP, cnt::LGKM][(op - first) as usize]
}

/// The counts of `vmcnt` and `lgkmcnt` SOPK opcode `op` waits down to: gfx10's and gfx11's
/// `s_waitcnt_vmcnt` and `s_waitcnt_lgkmcnt` with `null` ([`sopk_waits`]); [`NO_WAIT`] elsewhere.
fn sopk_left(g: Gen, op: u32, d: u32, s: u32) -> [u8; 2] {
    let (first, null) = match g {
        Gen::G10 => (0x17, 0x7D),
        Gen::G11 => (0x18, 0x7C),
        Gen::G9 | Gen::G12 => return [NO_WAIT; 2],
    };
    let n = u8::try_from(s).ok().filter(|&n| n < NO_WAIT && d == null);
    match (op.wrapping_sub(first), n) {
        (1, Some(n)) => [n, NO_WAIT],
        (3, Some(n)) => [NO_WAIT, n],
        _ => [NO_WAIT; 2],
    }
}

/// The sources ([`super::inst::alu`]) gfx12's `s_wait_alu` with constant `s` waits for: a field
/// read as zero only where every bit of it is zero.
fn alu_waits(s: u32) -> u8 {
    use super::inst::alu;
    let zero = |bits: u32, a: u8| if s & bits == 0 { a } else { 0 };
    zero(1, alu::SA_SDST) | zero(2, alu::VA_VCC) | zero(0xe00, alu::VA_SDST)
}

/// SOPP: branches (whose condition is their read: SCC, `vcc` or `exec`), `s_endpgm`,
/// messages (which may read `m0`).
pub(super) fn sopp(g: Gen, w: u32) -> Inst {
    let op = (w >> 16) & 0x7f;
    let (endpgm, branch) = match g {
        Gen::G9 | Gen::G10 => (1, 2),
        Gen::G11 | Gen::G12 => (48, 32),
    };
    let mut x = Inst::new(1, Op::Mem);
    x.reads.push((g.m0(), 1));
    if quiet_sopp(g, op) {
        x.reads.clear();
        x.op = Op::Alu;
        x.waits = sopp_waits(g, op, w & 0xffff);
        x.left = sopp_left(g, op, w & 0xffff);
        if g == Gen::G12 && op == 0x08 {
            x.alu_waits = alu_waits(w & 0xffff);
        }
    } else if op == endpgm {
        x.op = Op::End;
        x.reads.clear();
    } else if let Some(off) = branch_offset(w, g.isa()) {
        x.reads.clear();
        x.op = if op == branch {
            Op::Branch(i64::from(off))
        } else {
            let f = row(g, "SOPP", op);
            // A branch the table does not name reads every condition.
            let f = if f & t::C_BRANCH == 0 {
                t::C_SCC | t::C_VCC | t::C_EXEC
            } else {
                f
            };
            if f & t::C_SCC != 0 {
                x.reads.push((SCC, 1));
            }
            if f & t::C_VCC != 0 {
                x.reads.push((VCC, 2));
                if g == Gen::G9 {
                    x.reads.push((super::inst::VCCZ, 1));
                }
            }
            if f & t::C_EXEC != 0 {
                x.reads.push((EXEC, 2));
            }
            Op::CBranch(i64::from(off))
        };
    }
    x
}

/// The bitwise operation of SOP2 opcode `op`, when it is `s_and`, `s_or` or `s_andn2`
/// (`s_and_not1`) of 32 or 64 bits.
fn logic(g: Gen, op: u32) -> Option<super::inst::Logic> {
    use super::inst::Logic;
    let base = match g {
        Gen::G9 => [0x0C, 0x0E, 0x12],
        Gen::G10 => [0x0E, 0x10, 0x14],
        Gen::G11 | Gen::G12 => [0x16, 0x18, 0x22],
    };
    let kinds = [Logic::And, Logic::Or, Logic::AndNot];
    base.iter()
        .zip(kinds)
        .find(|(&b, _)| op == b || op == b + 1)
        .map(|(_, k)| k)
}
