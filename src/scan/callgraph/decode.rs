//! Whole instructions, for the kernarg-pointer flow of a proof ([`super::flow`]): the length of
//! each instruction and, over-approximated, the registers it reads and may write, classified by
//! encoding (format) rather than by opcode, so that an opcode this rcclfix never saw is still
//! read right. Gfx8–gfx9 (incl. gfx90a, gfx94x, gfx950), gfx10, gfx11 and gfx12 up to gfx1201;
//! anything else, or a word no format matches, is [`Op::Unknown`] and a proof fails there.
//!
//! Sources: the RDNA1–RDNA4 and CDNA1–CDNA3 ISA reference guides ("Microcode Formats"), llvm
//! `SIInstrFormats.td`, `SOPInstructions.td`, `VOP*Instructions.td`, `SMInstructions.td`,
//! `FLATInstructions.td`, `BUFInstructions.td`, `DSInstructions.td`, `MIMGInstructions.td`;
//! every opcode named below was assembled with llvm-mc 21 for gfx90a, gfx942, gfx1010, gfx1030,
//! gfx1100 and gfx1200, and the lengths are checked against `llvm-objdump -d` by
//! `tests/it/patch_sweep.rs`.
//!
//! What it decodes into, [`Inst`] with its [`Op`] and the one register space, is
//! [`super::inst`]'s; the scalar ALU and memory formats are [`super::decode_salu`] and
//! [`super::decode_mem`], which decode into it and import nothing of this dispatcher. Implicit
//! operands count as reads and writes: SCC ([`super::decode_salu`]), `vcc` (VOP2, VOPC), `exec`
//! (VOPC, the `*_saveexec` family, and every vector instruction, which [`Inst::vector`] marks),
//! the hardware registers (float operations, `s_getreg_b32`), and a conditional branch's
//! condition.

use super::decode_mem::{ds, flat, flat12, mimg, mubuf, smem, vbuffer};
use super::decode_salu::{sop1, sop2, sopc, sopk, sopp};
use super::inst::{cnt, Gen, Half, Inst, Op, Reg, EXEC, NO_WAIT, V, VCC};

/// The instruction at word `i` of `code`, for generation `g`. Over-approximations: every
/// scalar source is read as two registers and every destination may be two (a 64-bit operand
/// hides its width in the opcode), vector operands of memory instructions as up to 16.
pub fn decode(g: Gen, code: &[u32], i: usize) -> Inst {
    let n = code.len();
    let w = code[i];
    let word = |k: usize| code.get(i + k).copied();
    let mut inst = decode_word(g, w, word);
    if i + inst.words > n {
        inst = Inst::new(1, Op::Unknown);
    }
    // A scalar instruction that acts beyond its registers (`s_sendmsg_rtn`, gfx12's
    // `s_get_barrier_state`, an opcode not classified) may answer later, on any counter; a wait
    // (`s_waitcnt_vscnt null, 0`) does not.
    let waits = inst.waits != 0 || inst.left != [NO_WAIT; 2];
    if inst.effect && !inst.vector && inst.counts == 0 && !waits {
        inst.counts = cnt::ALL;
    }
    inst
}

fn decode_word(g: Gen, w: u32, word: impl Fn(usize) -> Option<u32>) -> Inst {
    let top9 = w >> 23;
    if w >> 31 == 0 {
        return vop_short(g, w, &word);
    }
    if top9 == 0x17D {
        return sop1(g, w);
    }
    if top9 == 0x17E {
        return sopc(g, w);
    }
    if top9 == 0x17F {
        return sopp(g, w);
    }
    if w >> 28 == 0xB {
        return sopk(g, w);
    }
    if w >> 30 == 2 {
        return sop2(g, w, word(1));
    }
    let top6 = w >> 26;
    let top8 = w >> 24;
    match (g, top6) {
        (Gen::G9, 0x30) | (Gen::G10 | Gen::G11 | Gen::G12, 0x3D) => smem(g, w, word(1)),
        (Gen::G9, 0x34) => vop3(g, w, word(1), top9 == 0x1A7),
        (Gen::G10 | Gen::G11 | Gen::G12, 0x35) => vop3(g, w, word(1), false),
        (Gen::G10 | Gen::G11 | Gen::G12, 0x33) if top8 == 0xCC => vop3(g, w, word(1), true),
        (Gen::G11 | Gen::G12, 0x33) if top8 == 0xCD => vinterp(word(1), w),
        (Gen::G11 | Gen::G12, 0x33) if top8 == 0xCE => {
            // LDSDIR / VDSDIR: vdst, reads m0; what it writes comes back on a counter this
            // rcclfix does not tell (`expcnt` by llvm `SIInsertWaitcnts.cpp`): only a wait
            // for every counter settles it. It writes every lane of a quad that has one lane
            // on (`lds_param_load`, `lds_direct_load`: the RDNA3 ISA guide, "Parameter
            // Interpolation"), lanes `exec` disables included: opaque, refused while anything
            // is followed (no compute kernel has one).
            let mut x = Inst::new(1, Op::Opaque);
            x.vector = true;
            x.counts = cnt::ALL;
            x.reads.push((g.m0(), 1));
            x.vdst(w, 1, 0);
            x
        }
        (Gen::G9, 0x35) | (Gen::G10, 0x32) => {
            // VINTRP: vdst [25:18], vsrc [7:0], reads m0.
            let mut x = Inst::new(1, Op::Alu).valu();
            x.vsrc(w, 1);
            x.reads.push((g.m0(), 1));
            x.vdst(w >> 18, 1, 0);
            x
        }
        (Gen::G11 | Gen::G12, 0x32) => vopd(w, word(1)),
        (_, 0x36) => ds(g, w, word(1)),
        (Gen::G9 | Gen::G10 | Gen::G11, 0x37) => flat(g, w, word(1)),
        (Gen::G12, 0x3B) => flat12(w, word(1), word(2)),
        (Gen::G9 | Gen::G10 | Gen::G11, 0x38 | 0x3A) => mubuf(g, w, word(1)),
        (Gen::G12, 0x31) => vbuffer(w, word(1), word(2)),
        (Gen::G9, 0x3C) => mimg(1),
        (Gen::G10 | Gen::G11, 0x3C) => match g {
            // NSA: extra address words, counted in the first word (gfx10) or by the opcode
            // (gfx11); not read here.
            Gen::G10 if (w >> 1) & 3 != 0 => Inst::new(1, Op::Unknown),
            Gen::G11 if w & 1 != 0 => Inst::new(1, Op::Unknown),
            _ => mimg(1),
        },
        (Gen::G12, 0x34 | 0x39) => mimg(2),
        (Gen::G9, 0x31) | (Gen::G10 | Gen::G11 | Gen::G12, 0x3E) => {
            // EXP: four VGPRs in the second word.
            let mut x = Inst::new(2, Op::Mem);
            x.vector = true;
            if let Some(w1) = word(1) {
                for k in 0..4 {
                    x.vsrc(w1 >> (8 * k), 1);
                }
            }
            x
        }
        _ => Inst::new(1, Op::Unknown),
    }
}

/// The [`super::vop3_table`] row of a VOP1, VOP2 or VOPC word's VOP3 form (VOPC at VOP3 opcode
/// `op`, VOP2 at `0x100 + op`, VOP1 at `0x140 + op` on gfx8/9 and `0x180 + op` from gfx10 on,
/// llvm `VOPInstructions.td`), when llvm decodes that form.
fn short_row(g: Gen, w: u32) -> Option<u16> {
    use super::vop3_table as t;
    let vop3 = match w >> 25 {
        0x3F => (if g == Gen::G9 { 0x140 } else { 0x180 }) + ((w >> 9) & 0xff),
        0x3E => (w >> 17) & 0xff,
        op => 0x100 + op,
    } as usize;
    let table: &[u16] = match g {
        Gen::G9 => &t::VOP3_G9,
        Gen::G10 => &t::VOP3_G10,
        Gen::G11 => &t::VOP3_G11,
        Gen::G12 => &t::VOP3_G12,
    };
    table.get(vop3).copied().filter(|e| e & (1 << 10) != 0)
}

/// How many registers src0 of a VOP1, VOP2 or VOPC word reads: what its VOP3 form reads there,
/// two where that form is not known.
fn short_src0_width(g: Gen, w: u32) -> u16 {
    match short_row(g, w) {
        Some(e) if e & 3 == 1 => 1,
        _ => 2,
    }
}

/// How many registers vsrc1 of a VOP2 or VOPC word reads: what its VOP3 form reads as src1
/// (a 32-bit compare one register, a 64-bit one two: the RCCL control build's `v_cmp_lt_i32`
/// read `v56`, which held a return address, beside `v55`), two where that form is not known.
fn short_src1_width(g: Gen, w: u32) -> u16 {
    match short_row(g, w) {
        Some(e) if (e >> 2) & 3 == 1 => 1,
        _ => 2,
    }
}

/// VOP1, VOP2, VOPC (32 bits, plus a literal, DPP or SDWA word).
fn vop_short(g: Gen, w: u32, word: &impl Fn(usize) -> Option<u32>) -> Inst {
    let src0 = w & 0x1ff;
    let vsrc1 = (w >> 9) & 0xff;
    let vdst = (w >> 17) & 0xff;
    let mut extra = 0;
    let mut x = Inst::new(1, Op::Alu).valu();
    // DPP16 (0xFA), DPP8 (0xE9/0xEA, gfx10+) and SDWA (0xF9, gfx9/10): a second word whose low
    // byte is the real source VGPR (an SGPR too under gfx9's SDWA `s0` bit).
    let dpp = src0 == 0xFA || (g != Gen::G9 && matches!(src0, 0xE9 | 0xEA));
    let sdwa = src0 == 0xF9 && matches!(g, Gen::G9 | Gen::G10);
    if dpp || sdwa {
        extra = 1;
        if let Some(w1) = word(1) {
            x.vsrc(w1, 2);
            if sdwa {
                // gfx9's SDWA word has `s0` and `s1` bits: either source field may name an SGPR.
                x.src(w1 & 0xff, 2);
                x.src(vsrc1, 2);
                // SDWA VOPC may write an SGPR pair named in the extra word.
                x.sdst((w1 >> 8) & 0x7f, 2, 0);
            }
        }
    } else {
        x.src(src0, short_src0_width(g, w));
        if src0 == 255 {
            extra = 1;
        }
    }
    // True16 (gfx11+): in the 32-bit encodings a VGPR field's bit 7 may select the high half
    // of VGPR `field & 0x7f` (llvm `VOPInstructions.td`, `VOP_*_t16`): both are counted.
    if matches!(g, Gen::G11 | Gen::G12) {
        let mut half = Vec::new();
        for &(r, n) in &x.reads {
            if r >= V + 128 && n <= 2 {
                half.push((r - 128, n));
            }
        }
        // VOPC's bits [24:17] and VOP1's [16:9] are its opcode, no register.
        let (vopc, vop1) = (w >> 25 == 0x3E, w >> 25 == 0x3F);
        for (v, register) in [(vsrc1, !vop1), (vdst, !vopc)] {
            if register && v >= 128 {
                half.push((V + (v - 128) as Reg, 1));
            }
        }
        x.reads.extend(half.iter().copied());
        x.writes.extend(half.iter().copied());
        if vdst >= 128 {
            // Which register a 16-bit operation writes is not certain here.
            x.kills.retain(|&(r, _)| r != V + vdst as Reg);
        }
    }
    // No DPP or SDWA word, and (gfx11+) a destination field no true16 half may hide in: what
    // [`Inst::full`] and [`Inst::lanewise`] need.
    let t16 = matches!(g, Gen::G11 | Gen::G12) && vdst >= 128;
    let plain = !(dpp || sdwa || t16);
    if w >> 25 == 0x3F {
        // VOP1: op [16:9]. `v_swap_b32` reads its destination too.
        let op = vsrc1;
        x.late_result = matches!(g, Gen::G11 | Gen::G12) && super::inst::trans(op);
        x.reads.push((V + vdst as Reg, 1));
        x.words = 1 + extra;
        let (readfirstlane, mov) = (2, 1);
        let relative = match g {
            Gen::G9 => (0x36..=0x38).contains(&op),
            _ => matches!(op, 0x42..=0x44 | 0x48 | 0x68),
        };
        if relative {
            x.op = Op::Relative;
        }
        // v_swap_b32 (and gfx11's v_swap_b16, 0x66) writes its source too; a true16 source
        // may name either half of its register.
        if matches!(
            (g, op),
            (Gen::G9, 0x51) | (Gen::G10 | Gen::G11 | Gen::G12, 0x65 | 0x66)
        ) && src0 >= 256
        {
            x.vdst(src0 - 256, 1, 0);
            if matches!(g, Gen::G11 | Gen::G12) {
                x.vdst((src0 - 256) & 0x7f, 1, 0);
            }
        }
        if op == readfirstlane {
            x.sdst(vdst, 1, 1);
            if src0 >= 256 && extra == 0 {
                x.op = Op::Copy {
                    dst: vdst as Reg,
                    src: V + (src0 - 256) as Reg,
                    n: 1,
                };
            }
        } else {
            x.vdst(vdst, 2, if relative { 0 } else { 1 });
            x.full = plain && !relative && super::valu_full::vop1(g, op);
            // From gfx10 on, a VOP1 opcode reads its destination only where it swaps
            // (`v_swap_b32`, `v_swap_b16`) or indexes (`v_movrel*`, `v_swaprel_b32`): any other
            // writes what its VOP3 form's destination holds, and where it writes part of the
            // register (a 16-bit result) the rest stays, which a write that does not fill it
            // keeps anyway ([`Inst::full`]). The RCCL control build's `v_clz_i32_u32 v47, v8`
            // read `v47`, whose lanes the caller had set to its return address.
            let swap = matches!(op, 0x65 | 0x66);
            if g != Gen::G9 && plain && !relative && !swap {
                if let Some(e) = short_row(g, w) {
                    let nd = match (e >> 7) & 3 {
                        1 => 1,
                        _ => 2,
                    };
                    let d = V + vdst as Reg;
                    x.reads.retain(|&r| r != (d, 1));
                    x.writes.retain(|&(r, _)| r != d);
                    x.kills.retain(|&(r, _)| r != d);
                    x.vdst(vdst, nd, 1);
                }
            }
            if op == mov && extra == 0 && !(106..256).contains(&src0) {
                x.op = Op::Copy {
                    dst: V + vdst as Reg,
                    src: if src0 >= 256 {
                        V + (src0 - 256) as Reg
                    } else {
                        src0 as Reg
                    },
                    n: 1,
                };
            }
        }
        if x.full {
            exact_operands(&mut x, g, w, None, false);
        }
        x.lanewise = x.full;
        return x;
    }
    if w >> 25 == 0x3E {
        // VOPC: writes vcc (and exec for v_cmpx, or an opcode whose VOP3 form is not known).
        x.words = 1 + extra;
        x.vsrc(vsrc1, short_src1_width(g, w));
        x.lanewise = !dpp && !sdwa;
        x.lane_mask = true;
        x.eq_cmp = extra == 0 && super::inst::eq_compare(g, (w >> 17) & 0xff);
        x.sdst(u32::from(VCC), 2, 0);
        if short_row(g, w).is_none_or(|e| e & (1 << 11) != 0) {
            x.sdst(u32::from(EXEC), 2, 0);
        }
        return x;
    }
    // VOP2: op [30:25].
    let op = w >> 25;
    let always_literal = match g {
        Gen::G9 => matches!(op, 0x17 | 0x18 | 0x24 | 0x25),
        Gen::G10 => matches!(op, 0x20 | 0x21 | 0x2C | 0x2D | 0x37 | 0x38),
        Gen::G11 | Gen::G12 => matches!(op, 0x2C | 0x2D | 0x37 | 0x38),
    };
    if always_literal && src0 != 255 {
        extra += 1;
    }
    x.words = 1 + extra;
    x.vsrc(vsrc1, short_src1_width(g, w));
    // Carry-in/out and v_cndmask read vcc; a carry-out (its VOP3 form has one, or that form is
    // not known) writes it; v_fmac/v_mac read their destination.
    x.reads.push((VCC, 2));
    x.reads.push((V + vdst as Reg, 2));
    if short_row(g, w).is_none_or(|e| e & (1 << 9) != 0) {
        x.sdst(u32::from(VCC), 2, 0);
    }
    x.vdst(vdst, 2, 1);
    x.full = plain && super::valu_full::vop2(g, op);
    if x.full {
        let mac = super::valu_full::adds_to_destination(g, op);
        exact_operands(&mut x, g, w, Some(vsrc1), mac);
    }
    x.lanewise = x.full;
    x
}

/// The operands of a VOP1 or VOP2 word whose opcode [`super::valu_full`] lists, as its VOP3
/// form's row says (the widths the general decode over-approximates as two registers): src0,
/// `vsrc1` (VOP2), `vcc` (the carry-in and `v_cndmask_b32` read it), the destination when the
/// operation adds to it (`mac`); the destination written whole at the row's width. Left as decoded
/// where the row is not known (then [`Inst::full`] is cleared).
fn exact_operands(x: &mut Inst, g: Gen, w: u32, vsrc1: Option<u32>, mac: bool) {
    let Some(e) = short_row(g, w) else {
        x.full = false;
        return;
    };
    let width = |c: u16| match c & 3 {
        1 => 1,
        2 => 2,
        _ => 0,
    };
    let (n0, n1, nd) = (width(e), width(e >> 2), width(e >> 7).max(1));
    let vdst = (w >> 17) & 0xff;
    x.reads.clear();
    x.src(w & 0x1ff, n0.max(1));
    if let Some(v) = vsrc1 {
        x.vsrc(v, n1.max(1));
        x.reads.push((VCC, 2));
    }
    if mac {
        x.reads.push((V + vdst as Reg, nd));
    }
    x.writes.retain(|&(r, _)| r < V);
    x.kills.retain(|&(r, _)| r < V);
    x.vdst(vdst, nd, nd);
}

/// VOP3 and VOP3P (64 bits, plus a literal or a DPP word from gfx10/gfx11 on): which sources
/// it reads and what it writes come from the opcode's row in [`super::vop3_table`]; an opcode llvm
/// does not decode is [`Op::Unknown`].
fn vop3(g: Gen, w: u32, w1: Option<u32>, packed: bool) -> Inst {
    use super::vop3_table as t;
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let op = if packed {
        (w >> 16) & 0x7f
    } else {
        (w >> 16) & 0x3ff
    } as usize;
    let e = match (g, packed) {
        (Gen::G9, false) => t::VOP3_G9[op],
        (Gen::G9, true) => t::VOP3P_G9[op],
        (Gen::G10, false) => t::VOP3_G10[op],
        (Gen::G10, true) => t::VOP3P_G10[op],
        (Gen::G11, false) => t::VOP3_G11[op],
        (Gen::G11, true) => t::VOP3P_G11[op],
        (Gen::G12, false) => t::VOP3_G12[op],
        (Gen::G12, true) => t::VOP3P_G12[op],
    };
    if e & (1 << 10) == 0 {
        return Inst::new(2, Op::Unknown);
    }
    // Width code 3: up to 16 registers; gfx90a's and gfx94x's 32x32 MFMAs read and write 32
    // (llvm-mc 21: `v_mfma_i32_32x32x4i8 a[0:31], v0, v1, a[32:63]`, the fifteenth review's
    // `mfma32`), so a VOP3P operand there counts as 32.
    let wide = if packed && g == Gen::G9 { 32 } else { 16 };
    let width = |c: u16| -> u16 {
        match c & 3 {
            0 => 0,
            1 => 1,
            2 => 2,
            _ => wide,
        }
    };
    let srcs = [w1 & 0x1ff, (w1 >> 9) & 0x1ff, (w1 >> 18) & 0x1ff];
    let used: Vec<(u32, u16)> = srcs
        .iter()
        .enumerate()
        .filter_map(|(k, &s)| {
            let n = width(e >> (2 * k));
            (n > 0).then_some((s, n))
        })
        .collect();
    let mut words = 2;
    if g != Gen::G9 && used.iter().any(|&(s, _)| s == 255) {
        words += 1;
    }
    let dpp = matches!(g, Gen::G11 | Gen::G12) && matches!(srcs[0], 0xFA | 0xE9 | 0xEA);
    if dpp {
        words += 1;
    }
    let mut x = Inst::new(words, Op::Alu).valu();
    for &(s, n) in &used {
        x.src(s, n);
    }
    x.late_result = !packed
        && matches!(g, Gen::G11 | Gen::G12)
        && (0x180..0x280).contains(&op)
        && super::inst::trans(op as u32 - 0x180);
    // gfx9's VOP3P opcodes from 0x40 on (`v_mfma_*`, `v_smfmac_*`, `v_accvgpr_*`, llvm
    // `VOP3PInstructions.td`): the matrix ones read their sources late.
    x.reads_late = packed && g == Gen::G9 && op >= 0x40;
    if dpp {
        // The DPP word's low byte is the real first source.
        x.reads.push((V, 256));
    }
    let vdst = w & 0xff;
    let dn = width(e >> 7).max(1);
    if e & (1 << 6) != 0 {
        // A compare's lane mask: every bit of its low register (the whole mask in wave32, the
        // low half in wave64), 0 for the lanes it does not run in (the ISA guides, "VOPC":
        // inactive lanes' bits are written with zero).
        let compare = !packed && op < 0x100 && !dpp;
        x.sdst(vdst, dn, u16::from(compare));
    } else {
        x.vdst(vdst, dn, 0);
    }
    if e & (1 << 11) != 0 {
        // v_cmpx writes exec (with or without a scalar destination).
        x.sdst(u32::from(EXEC), 2, 0);
    }
    if e & (1 << 12) != 0 {
        // v_div_fmas reads vcc without naming it.
        x.reads.push((VCC, 2));
    }
    // A carry-out to `null` writes nothing (gfx10: 125, gfx11 on: 124, where m0 is the other).
    let null = match g {
        Gen::G9 => None,
        Gen::G10 => Some(125),
        Gen::G11 | Gen::G12 => Some(124),
    };
    if e & (1 << 9) != 0 && Some((w >> 8) & 0x7f) != null {
        x.sdst((w >> 8) & 0x7f, 2, 0);
    }
    if packed {
        return x;
    }
    // op_sel (bits [14:11]) picks 16-bit halves; a VOP3b's scalar carry-out sits there instead.
    let halves = e & (1 << 9) == 0 && (w >> 11) & 0xf != 0;
    if !dpp && op < 0x100 {
        // A compare: a lane mask of what each enabled lane compares.
        x.lanewise = true;
        x.lane_mask = true;
        x.eq_cmp = super::inst::eq_compare(g, op as u32);
    } else if !dpp && !halves && e & (1 << 6) == 0 && super::valu_full::vop3(g, op as u32) {
        x.full = true;
        x.lanewise = true;
        x.kills.push((V + vdst as Reg, dn));
        // v_mac_f32/v_fmac_f32 in VOP3 form (a VOP2 opcode plus 0x100).
        let mac = op
            .checked_sub(0x100)
            .is_some_and(|o| super::valu_full::adds_to_destination(g, o as u32));
        if mac {
            x.reads.push((V + vdst as Reg, dn));
        }
    }
    let (vop1_base, readlane, writelane) = match g {
        Gen::G9 => (0x140, 0x289, 0x28a),
        _ => (0x180, 0x360, 0x361),
    };
    let op = op as u32;
    if (vop1_base..vop1_base + 0x80).contains(&op) {
        // A VOP1 opcode (v_swap, v_movrel*) in VOP3 form.
        let op1 = op - vop1_base;
        let relative = match g {
            Gen::G9 => (0x36..=0x38).contains(&op1),
            _ => matches!(op1, 0x42..=0x44 | 0x48 | 0x68),
        };
        if relative {
            x.op = Op::Relative;
        }
        if !x.full {
            if srcs[0] >= 256 {
                x.vdst(srcs[0] - 256, 1, 0);
            }
            x.reads.push((V + vdst as Reg, 1));
        }
    }
    let lane = (128..192).contains(&srcs[1]).then(|| (srcs[1] - 128) as u8);
    // v_writelane_b32 writes its lane whatever exec says, from any source: an SGPR, vcc, m0,
    // exec, an inline constant or a literal (the ISA guides' V_WRITELANE_B32: "ignores exec
    // mask"; the eighteenth review's `wlsrc`, `wlcaller`, `wlvcc`: a source of m0 or vcc_lo
    // was taken as a write under exec).
    if op == writelane {
        let src = match srcs[0] {
            s if s >= 256 => V + (s - 256) as Reg,
            s if s < 128 => s as Reg,
            _ => super::inst::CONSTANT,
        };
        x.op = Op::Merge {
            dst: V + vdst as Reg,
            src,
            lane,
        };
        x.lanewise = false;
        x.full = false;
        return x;
    }
    if words != 2 {
        return x;
    }
    if op == readlane && srcs[0] >= 256 {
        x.op = Op::ReadLane {
            dst: vdst as Reg,
            src: V + (srcs[0] - 256) as Reg,
            lane,
        };
    }
    x
}

/// VINTERP (gfx11+, 64 bits): three sources, a VGPR destination.
fn vinterp(w1: Option<u32>, w: u32) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let mut x = Inst::new(2, Op::Alu).valu();
    for s in [w1 & 0x1ff, (w1 >> 9) & 0x1ff, (w1 >> 18) & 0x1ff] {
        x.src(s, 1);
    }
    x.vdst(w, 1, 0);
    x
}

/// VOPD (gfx11+, 64 bits, plus a literal): two VALU operations at once ([`Op::Dual`]). The
/// operations (llvm `VOPDInstructions.td`, `VOPD_X`/`VOPD_Y` opcodes): 0 `fmac` (reads its
/// destination), 1 `fmaak`, 2 `fmamk`, 3–7 and 10, 11 two-source float operations, 8 `mov`
/// (src0 only), 9 `cndmask` (reads `vcc`), 12, 13 `dot2acc` (reads its destination); Y also 16
/// `add_nc_u32`, 17 `lshlrev_b32`, 18 `and_b32`. Any other opcode reads everything the
/// instruction names.
fn vopd(w: u32, w1: Option<u32>) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let (opx, opy) = ((w >> 22) & 0xf, (w >> 17) & 0x1f);
    let (srcx0, srcy0) = (w & 0x1ff, w1 & 0x1ff);
    let literal = srcx0 == 255 || srcy0 == 255 || matches!(opx, 1 | 2) || matches!(opy, 1 | 2);
    let mut x = Inst::new(if literal { 3 } else { 2 }, Op::Alu).valu();
    // vdstY's field (bits [23:17]) holds its register number without the low bit, which is
    // the opposite of vdstX's (llvm `VOPDInstructions.td`; llvm-mc 21 encodes `v2 :: v3`,
    // `v31 :: v0` and `v1 :: v4` so).
    let vdstx = w1 >> 24;
    let vdsty = ((w1 >> 17) & 0x7f) << 1 | ((vdstx & 1) ^ 1);
    let half = |op: u32, src0: u32, vsrc1: u32, dst: (Reg, u16)| {
        let mut h = Inst::new(1, Op::Alu);
        h.src(src0, 1);
        let known = op <= 13 || matches!(op, 16..=18);
        if op != 8 || !known {
            h.vsrc(vsrc1, 1);
        }
        if matches!(op, 0 | 12 | 13) || !known {
            h.reads.push(dst);
        }
        if op == 9 || !known {
            h.reads.push((VCC, 1));
        }
        Half {
            dst,
            reads: h.reads,
            mov: op == 8,
        }
    };
    let hx = half(opx, srcx0, w >> 9, (V + vdstx as Reg, 1));
    let hy = half(opy, srcy0, w1 >> 9, (V + vdsty as Reg, 1));
    x.reads.extend(hx.reads.iter().chain(&hy.reads).copied());
    // Every VOPD operation has a 32-bit result (llvm `VOPDInstructions.td`).
    let known = |op: u32| op <= 13 || matches!(op, 16..=18);
    let full = known(opx) && known(opy);
    x.vdst(vdstx, 1, u16::from(full));
    x.vdst(vdsty, 1, u16::from(full));
    x.full = full;
    x.lanewise = full;
    x.op = Op::Dual([hx, hy]);
    x
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "decode_wait_tests.rs"]
mod wait_tests;

#[cfg(test)]
#[path = "decode_mem_tests.rs"]
mod mem_tests;
