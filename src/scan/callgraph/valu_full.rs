//! The VALU opcodes whose result fills every bit of its destination ([`super::inst::Inst::full`]):
//! 32-bit and 64-bit integer and float operations, which write all 32 bits of each destination
//! register in every lane `exec` enables. A 16-bit operation may keep the other half (gfx9's
//! SDWA and `op_sel`, gfx11's true16), so none is listed; an opcode not listed is taken to keep
//! part of what its destination held. Only what a register write certainly replaces depends on
//! these lists: leaving an opcode out refuses more, never less.
//!
//! Source: llvm-mc 21 `-show-encoding` of each named instruction for gfx90a, gfx1030, gfx1100
//! and gfx1200 (the VOP1 opcode at bits [16:9], VOP2 at [30:25], VOP3 at [25:16]); a VOP1 or
//! VOP2 opcode's VOP3 form is at `0x140 + op` (gfx8/9) or `0x180 + op` (gfx10 on) and
//! `0x100 + op` (llvm `VOPInstructions.td`).

use super::inst::Gen;

/// VOP1: `v_mov_b32`, `v_not_b32`, `v_bfrev_b32`, `v_cvt_f32_{i32,u32}`, `v_cvt_{i32,u32}_f32`,
/// `v_cvt_u32_f64`, `v_cvt_f64_u32` (gfx10 on), `v_rcp_f32`, `v_rcp_iflag_f32`; from gfx10 on
/// also `v_cvt_f32_ubyte0`…`3`, `v_fract_f32`, `v_trunc_f32`, `v_ceil_f32`, `v_rndne_f32`,
/// `v_floor_f32`, `v_exp_f32`, `v_log_f32`, `v_rsq_f32`, `v_sqrt_f32`, `v_clz_i32_u32`
/// (`v_ffbh_u32`), `v_ctz_i32_b32` (`v_ffbl_b32`), `v_cls_i32` (`v_ffbh_i32`),
/// `v_frexp_exp_i32_f32`, `v_frexp_mant_f32` (the same opcodes for gfx1030, gfx1100 and
/// gfx1200).
pub(super) fn vop1(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 => matches!(op, 0x01 | 0x05..=0x08 | 0x15 | 0x22 | 0x23 | 0x2b | 0x2c),
        Gen::G10 | Gen::G11 | Gen::G12 => {
            matches!(
                op,
                0x01 | 0x05..=0x08
                    | 0x11..=0x16
                    | 0x20..=0x25
                    | 0x27
                    | 0x2a
                    | 0x2b
                    | 0x2e
                    | 0x33
                    | 0x37..=0x3b
                    | 0x3f
                    | 0x40
            )
        }
    }
}

/// VOP2: `v_cndmask_b32`, the f32 `add`/`sub`/`subrev`/`mul`/`min`/`max`, the 24-bit multiplies,
/// `v_{min,max}_{i32,u32}`, the 32-bit shifts, `and`/`or`/`xor`, the 32-bit adds and subtracts
/// with and without carry, `v_fmac_f32` (`v_mac_f32` on gfx9), and on gfx12 `v_add_f64`,
/// `v_mul_f64`, `v_lshlrev_b64`.
pub(super) fn vop2(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 => matches!(
            op,
            0x00..=0x03 | 0x05..=0x16 | 0x19..=0x1c | 0x34..=0x36 | 0x3b
        ),
        Gen::G10 => matches!(
            op,
            0x01 | 0x03..=0x05 | 0x08..=0x0c | 0x0f..=0x14 | 0x16 | 0x18 | 0x1a..=0x1d | 0x25..=0x2b
        ),
        Gen::G11 => matches!(
            op,
            0x01 | 0x03..=0x05
                | 0x08..=0x0c
                | 0x0f..=0x14
                | 0x18..=0x1d
                | 0x20..=0x22
                | 0x25..=0x27
                | 0x2b
        ),
        Gen::G12 => matches!(
            op,
            0x01..=0x06
                | 0x08..=0x0c
                | 0x11..=0x16
                | 0x18..=0x1d
                | 0x1f..=0x22
                | 0x25..=0x27
                | 0x2b
        ),
    }
}

/// Whether listed VOP2 opcode `op` adds to its destination, which it then reads as well:
/// `v_mac_f32` (gfx9) and `v_fmac_f32`.
pub(super) fn adds_to_destination(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 => matches!(op, 0x16 | 0x3b),
        Gen::G10 | Gen::G11 | Gen::G12 => op == 0x2b,
    }
}

/// VOP3 (not VOP3P): the listed VOP1 and VOP2 opcodes in VOP3 form, and `v_mad_u32_u24`,
/// `v_bfe_{u32,i32}`, `v_bfi_b32`, `v_fma_f32`, `v_fma_f64`, `v_alignbit_b32`,
/// `v_alignbyte_b32`, `v_{min3,max3,med3}_{i32,u32}`, `v_perm_b32`, `v_xad_u32`,
/// `v_lshl_add_u32`, `v_add_lshl_u32`, `v_add3_u32`, `v_lshl_or_b32`, `v_and_or_b32`,
/// `v_or3_b32`, `v_mul_lo_u32`, `v_mul_hi_{u32,i32}`, `v_mad_{u64_u32,i64_i32}`, the 64-bit
/// shifts, `v_add_f64`, `v_mul_f64`, `v_add_co_u32`/`v_sub_co_u32` (gfx10 on).
pub(super) fn vop3(g: Gen, op: u32) -> bool {
    let vop1_base = if g == Gen::G9 { 0x140 } else { 0x180 };
    if (0x100..0x140).contains(&op) && vop2(g, op - 0x100) {
        return true;
    }
    if (vop1_base..vop1_base + 0x80).contains(&op) && vop1(g, op - vop1_base) {
        return true;
    }
    match g {
        Gen::G9 => matches!(
            op,
            0x1c3
                | 0x1c8..=0x1cc
                | 0x1ce
                | 0x1cf
                | 0x1d1
                | 0x1d2
                | 0x1d4
                | 0x1d5
                | 0x1d7
                | 0x1d8
                | 0x1e8
                | 0x1e9
                | 0x1ed
                | 0x1f3
                | 0x1fd..=0x202
                | 0x280
                | 0x281
                | 0x285..=0x287
                | 0x28f..=0x291
        ),
        Gen::G10 => matches!(
            op,
            0x143
                | 0x148..=0x14c
                | 0x14e
                | 0x14f
                | 0x152
                | 0x153
                | 0x155
                | 0x156
                | 0x158
                | 0x159
                | 0x164
                | 0x165
                | 0x169
                | 0x16a
                | 0x16c
                | 0x176
                | 0x177
                | 0x2ff..=0x301
                | 0x30f
                | 0x310
                | 0x344..=0x347
                | 0x36d
                | 0x36f
                | 0x371
                | 0x372
        ),
        Gen::G11 | Gen::G12 => {
            matches!(
                op,
                0x20b
                    | 0x210..=0x214
                    | 0x216
                    | 0x217
                    | 0x21a
                    | 0x21b
                    | 0x21d
                    | 0x21e
                    | 0x220
                    | 0x221
                    | 0x244..=0x247
                    | 0x255..=0x258
                    | 0x2fe..=0x301
                    | 0x32c..=0x32e
                    | 0x33d
                    | 0x33e
            ) || (g == Gen::G11 && matches!(op, 0x327 | 0x328 | 0x33c))
        }
    }
}
