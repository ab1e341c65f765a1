//! Rows for [`super`]: encodings assembled with llvm-mc 21.

use super::*;
use crate::scan::callgraph::inst::RUNTIME;

pub(super) fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Encodings assembled with llvm-mc 21 (`-show-encoding`).
#[test]
fn lengths_and_classes_of_assembled_instructions() {
    let cases: &[(Gen, &[u8], usize)] = &[
        // gfx1200 global_load_b32 v1, v2, s[4:5] offset:16
        (
            Gen::G12,
            &[
                0x04, 0x00, 0x05, 0xee, 0x01, 0x00, 0x00, 0x00, 0x02, 0x10, 0x00, 0x00,
            ],
            3,
        ),
        // gfx1200 buffer_load_b32 v1, v2, s[8:11], s3 offen offset:4
        (
            Gen::G12,
            &[
                0x03, 0x00, 0x05, 0xc4, 0x01, 0x10, 0x80, 0x40, 0x02, 0x04, 0x00, 0x00,
            ],
            3,
        ),
        // gfx1200 image_load v1, v2, s[8:15] dmask:0x1 dim:SQ_RSRC_IMG_1D
        (
            Gen::G12,
            &[
                0x00, 0x00, 0x40, 0xd0, 0x01, 0x10, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            ],
            3,
        ),
        // gfx1200 v_dual_fmaak_f32 v1, v2, v3, 0x1234 :: v_dual_mov_b32 v4, v5
        (
            Gen::G12,
            &[
                0x02, 0x07, 0x50, 0xc8, 0x05, 0x01, 0x04, 0x01, 0x34, 0x12, 0x00, 0x00,
            ],
            3,
        ),
        // gfx1200 export mrt0 v1, v2, v3, v4
        (
            Gen::G12,
            &[0x0f, 0x00, 0x00, 0xf8, 0x01, 0x02, 0x03, 0x04],
            2,
        ),
        // gfx1100 v_fmamk_f16 v1, v2, 0x1234, v3
        (
            Gen::G11,
            &[0x02, 0x07, 0x02, 0x6e, 0x34, 0x12, 0x00, 0x00],
            2,
        ),
        // gfx1100 s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0x1234
        (
            Gen::G11,
            &[0x01, 0xf8, 0x80, 0xb9, 0x34, 0x12, 0x00, 0x00],
            2,
        ),
        // gfx90a v_madak_f16 v1, v2, v3, 0x1234
        (
            Gen::G9,
            &[0x02, 0x07, 0x02, 0x4a, 0x34, 0x12, 0x00, 0x00],
            2,
        ),
        // gfx942 v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]
        (
            Gen::G9,
            &[0x00, 0x80, 0xcc, 0xd3, 0x00, 0x05, 0x02, 0x04],
            2,
        ),
        // gfx1010 v_madmk_f32 v1, v2, 0x1234, v3
        (
            Gen::G10,
            &[0x02, 0x07, 0x02, 0x40, 0x34, 0x12, 0x00, 0x00],
            2,
        ),
    ];
    for (g, bytes, n) in cases {
        let w = words(bytes);
        let inst = decode(*g, &w, 0);
        assert_eq!(inst.words, *n, "{g:?} {bytes:02x?}: {inst:?}");
        assert_ne!(inst.op, Op::Unknown, "{g:?} {bytes:02x?}");
    }
}

#[test]
fn scalar_loads_and_pointer_moves() {
    // gfx1200 s_load_b32 s1, s[4:5], 0x10 / with s6
    let i = decode(Gen::G12, &words(&[0x42, 0, 0, 0xf4, 0x10, 0, 0, 0xf8]), 0);
    assert_eq!(
        i.op,
        Op::SLoad {
            base: 4,
            offset: 16,
            soffset: None,
            bytes: 4,
            dst: 1
        }
    );
    let i = decode(Gen::G12, &words(&[0x42, 0, 0, 0xf4, 0x10, 0, 0, 0x0c]), 0);
    assert!(matches!(
        i.op,
        Op::SLoad {
            soffset: Some(6),
            ..
        }
    ));
    // gfx90a s_load_dword s1, s[4:5], s6 (register offset)
    let i = decode(Gen::G9, &words(&[0x42, 0, 0, 0xc0, 0x06, 0, 0, 0]), 0);
    assert!(matches!(
        i.op,
        Op::SLoad {
            soffset: Some(6),
            ..
        }
    ));
    // s_add_u32 s8, s4, 0x70 / s_mov_b64 s[2:3], s[4:5]
    let i = decode(
        Gen::G11,
        &words(&[0x04, 0xff, 0x08, 0x80, 0x70, 0, 0, 0]),
        0,
    );
    assert_eq!(
        (i.words, &i.op),
        (
            2,
            &Op::AddConst {
                dst: 8,
                src: 4,
                c: 0x70,
                raw: 0x70,
                sub: false
            }
        )
    );
    let i = decode(Gen::G11, &words(&[0x04, 0x01, 0x82, 0xbe]), 0);
    assert_eq!(
        i.op,
        Op::Copy {
            dst: 2,
            src: 4,
            n: 2
        }
    );
    // gfx1100 v_readlane_b32 s1, v2, 3 / v_writelane_b32 v1, s2, 3 (gfx1200 encodings)
    let i = decode(
        Gen::G12,
        &words(&[0x01, 0, 0x60, 0xd7, 0x02, 0x07, 0x01, 0]),
        0,
    );
    assert_eq!(
        i.op,
        Op::ReadLane {
            dst: 1,
            src: V + 2,
            lane: Some(3)
        }
    );
    let i = decode(
        Gen::G12,
        &words(&[0x01, 0, 0x61, 0xd7, 0x02, 0x06, 0x01, 0]),
        0,
    );
    assert_eq!(
        i.op,
        Op::Merge {
            dst: V + 1,
            src: 2,
            lane: Some(3)
        }
    );
    // v_writelane_b32 from any source writes its lane whatever exec says (llvm-mc 21): gfx1100
    // `v2, m0, 1`, `v2, vcc_lo, 1`, `v2, 0x12345678, 1` (a literal: three words), `v2, 5, s1`;
    // gfx90a `v2, m0, 1`.
    // (generation, bytes, words, source, lane)
    type Row<'a> = (Gen, &'a [u8], usize, Reg, Option<u8>);
    let cases: &[Row] = &[
        (
            Gen::G11,
            &[0x02, 0x00, 0x61, 0xd7, 0x7d, 0x02, 0x01, 0x00],
            2,
            125,
            Some(1),
        ),
        (
            Gen::G11,
            &[0x02, 0x00, 0x61, 0xd7, 0x6a, 0x02, 0x01, 0x00],
            2,
            106,
            Some(1),
        ),
        (
            Gen::G11,
            &[
                0x02, 0x00, 0x61, 0xd7, 0xff, 0x02, 0x01, 0x00, 0x78, 0x56, 0x34, 0x12,
            ],
            3,
            crate::scan::callgraph::inst::CONSTANT,
            Some(1),
        ),
        (
            Gen::G11,
            &[0x02, 0x00, 0x61, 0xd7, 0x85, 0x02, 0x00, 0x00],
            2,
            crate::scan::callgraph::inst::CONSTANT,
            None,
        ),
        (
            Gen::G9,
            &[0x02, 0x00, 0x8a, 0xd2, 0x7c, 0x02, 0x01, 0x00],
            2,
            124,
            Some(1),
        ),
    ];
    for &(g, b, n, src, lane) in cases {
        let i = decode(g, &words(b), 0);
        assert_eq!(
            (i.op.clone(), i.words, i.lanewise),
            (
                Op::Merge {
                    dst: V + 2,
                    src,
                    lane
                },
                n,
                false
            ),
            "{b:x?}"
        );
        assert!(i.writes.contains(&(V + 2, 1)), "{b:x?}: {:?}", i.writes);
    }
    // v_movrels_b32_e32 v1, v2
    let i = decode(Gen::G11, &words(&[0x02, 0x87, 0x02, 0x7e]), 0);
    assert_eq!(i.op, Op::Relative);
}

/// `s_sendmsg_rtn_b64 s[0:1], sendmsg(MSG_RTN_GET_REALTIME)` (gfx1100 `0xBE804D83`) writes
/// `s[0:1]` and reads no register (a clock); with `MSG_RTN_GET_TMA` (`0xBE804D82`) it reads what
/// the runtime gives ([`RUNTIME`]), which leads to the queue.
#[test]
fn sendmsg_rtn_reads_the_runtime_unless_it_asks_for_the_clock() {
    let clock = decode(Gen::G11, &[0xBE80_4D83], 0);
    assert!(clock.reads.is_empty(), "{clock:?}");
    assert!(clock.writes.contains(&(0, 2)), "{clock:?}");
    let tma = decode(Gen::G11, &[0xBE80_4D82], 0);
    assert!(tma.reads.contains(&(RUNTIME, 1)), "{tma:?}");
    assert!(!tma.reads.iter().any(|&(r, _)| r == 0), "{tma:?}");
}

/// A compare reads its two sources and nothing else, as llvm-mc 21 encodes it (`-show-encoding`):
/// VOPC's opcode bits are no true16 register (gfx11's `v_cmpx_eq_u64_e32` once read v90).
#[test]
fn compares_read_their_two_sources() {
    let cases: &[(Gen, &[u8])] = &[
        // gfx90a v_cmp_eq_u64_e32 vcc, v[0:1], v[2:3]
        (Gen::G9, &[0x00, 0x05, 0xd4, 0x7d]),
        // gfx90a v_cmp_ne_i32_e32 vcc, v0, v1
        (Gen::G9, &[0x00, 0x03, 0x8a, 0x7d]),
        // gfx90a v_cmp_lt_u32_e32 vcc, v0, v1
        (Gen::G9, &[0x00, 0x03, 0x92, 0x7d]),
        // gfx90a v_cmpx_eq_u64_e32 vcc, v[0:1], v[2:3]
        (Gen::G9, &[0x00, 0x05, 0xf4, 0x7d]),
        // gfx90a v_cmp_eq_f32_e32 vcc, v0, v1
        (Gen::G9, &[0x00, 0x03, 0x84, 0x7c]),
        // gfx90a v_cmp_eq_u64_e64 s[0:1], s[2:3], v[0:1]
        (Gen::G9, &[0x00, 0x00, 0xea, 0xd0, 0x02, 0x00, 0x02, 0x00]),
        // gfx90a v_cmp_gt_i64_e64 s[0:1], s[2:3], v[0:1]
        (Gen::G9, &[0x00, 0x00, 0xe4, 0xd0, 0x02, 0x00, 0x02, 0x00]),
        // gfx1030 v_cmpx_eq_u64_e32 v[0:1], v[2:3]
        (Gen::G10, &[0x00, 0x05, 0xe4, 0x7d]),
        // gfx1030 v_cmpx_eq_u64_e64 s[0:1], v[0:1]
        (Gen::G10, &[0x7e, 0x00, 0xf2, 0xd4, 0x00, 0x00, 0x02, 0x00]),
        // gfx1030 v_cmp_le_u32_e64 s0, s1, v0
        (Gen::G10, &[0x00, 0x00, 0xc3, 0xd4, 0x01, 0x00, 0x02, 0x00]),
        // gfx1100 v_cmpx_eq_u64_e32 v[0:1], v[2:3]
        (Gen::G11, &[0x00, 0x05, 0xb4, 0x7d]),
        // gfx1100 v_cmpx_eq_u64_e64 s[0:1], v[0:1]
        (Gen::G11, &[0x7e, 0x00, 0xda, 0xd4, 0x00, 0x00, 0x02, 0x00]),
        // gfx1100 v_cmp_eq_u32_e64 s0, s1, v0
        (Gen::G11, &[0x00, 0x00, 0x4a, 0xd4, 0x01, 0x00, 0x02, 0x00]),
        // gfx1100 v_cmp_le_u32_e64 s0, s1, v0
        (Gen::G11, &[0x00, 0x00, 0x4b, 0xd4, 0x01, 0x00, 0x02, 0x00]),
        // gfx1200 v_cmpx_eq_u64_e64 s[0:1], v[0:1]
        (Gen::G12, &[0x7e, 0x00, 0xda, 0xd4, 0x00, 0x00, 0x02, 0x00]),
    ];
    for (k, &(g, bytes)) in cases.iter().enumerate() {
        let i = decode(g, &words(bytes), 0);
        assert_eq!(i.reads.len(), 2, "case {k}: {i:?}");
    }
}

/// A VOPD instruction is two halves, each read on its own: `v_dual_mov_b32 v31, v40 ::
/// v_dual_mov_b32 v0, s52` (gfx1100) moves v40 and s52 and reads nothing else; in
/// `v_dual_add_f32 v1, v2, v3 :: v_dual_mov_b32 v4, v5` only the add reads two sources.
#[test]
fn vopd_halves_read_only_their_own_sources() {
    let i = decode(
        Gen::G11,
        &words(&[0x28, 0x01, 0x10, 0xca, 0x34, 0x00, 0x00, 0x1f]),
        0,
    );
    let Op::Dual([x, y]) = &i.op else {
        panic!("{i:?}");
    };
    assert!(x.mov && y.mov, "{i:?}");
    assert_eq!(x.reads, vec![(V + 40, 1)]);
    assert_eq!(y.reads, vec![(52, 1)]);
    assert_eq!(x.dst, (V + 31, 1));
    assert_eq!(y.dst, (V, 1));
    let i = decode(
        Gen::G11,
        &words(&[0x02, 0x07, 0x10, 0xc9, 0x05, 0x01, 0x04, 0x01]),
        0,
    );
    let Op::Dual([x, y]) = &i.op else {
        panic!("{i:?}");
    };
    assert!(!x.mov && y.mov, "{i:?}");
    assert_eq!(x.reads, vec![(V + 2, 1), (V + 3, 1)]);
    assert_eq!(y.reads, vec![(V + 5, 1)]);
    assert_eq!((x.dst, y.dst), ((V + 1, 1), (V + 4, 1)));
    // v_dual_mov_b32 v2, s2 :: v_dual_mov_b32 v3, s3: vdstY is vdstX's opposite parity.
    let i = decode(
        Gen::G11,
        &words(&[0x02, 0x00, 0x10, 0xca, 0x03, 0x00, 0x02, 0x02]),
        0,
    );
    let Op::Dual([x, y]) = &i.op else {
        panic!("{i:?}");
    };
    assert_eq!((x.dst, y.dst), ((V + 2, 1), (V + 3, 1)));
    assert_eq!(
        (x.reads.clone(), y.reads.clone()),
        (vec![(2, 1)], vec![(3, 1)])
    );
}

/// The SOPPs that only wait or hint read no register (as llvm-mc 21 encodes them: gfx90a
/// `s_waitcnt 0` `0xBF8C0000`, gfx1100 `s_waitcnt` `0xBF890000`, `s_delay_alu` `0xBF870000`,
/// gfx1200 `s_wait_loadcnt` `0xBFC00000`); `s_sendmsg` (gfx1100 `0xBFB60001`) may read m0.
#[test]
fn waits_read_no_register_but_messages_read_m0() {
    for (g, w) in [
        (Gen::G9, 0xBF8C_0000),
        (Gen::G11, 0xBF89_0000),
        (Gen::G11, 0xBF87_0000),
        (Gen::G12, 0xBFC0_0000),
    ] {
        let i = decode(g, &[w], 0);
        assert!(i.reads.is_empty() && i.writes.is_empty(), "{w:#x}: {i:?}");
    }
    let msg = decode(Gen::G11, &[0xBFB6_0001], 0);
    assert_eq!(msg.reads, vec![(125, 1)], "{msg:?}");
}

/// A VOP3b carry-out to `null` writes no register (gfx1100 `v_add_co_ci_u32_e64 v1, null, v1,
/// v3, vcc_lo`: m0 is s125, `null` s124); to `vcc_lo` it writes vcc.
#[test]
fn a_carry_out_to_null_writes_nothing() {
    let i = decode(
        Gen::G11,
        &words(&[0x01, 0x7c, 0x20, 0xd5, 0x01, 0x07, 0xaa, 0x01]),
        0,
    );
    assert!(
        !i.writes
            .iter()
            .any(|&(r, n)| (r..r + n).contains(&125) || r == 124),
        "{i:?}"
    );
    // v_add_co_u32 v0, vcc_lo, v0, v2
    let i = decode(
        Gen::G11,
        &words(&[0x00, 0x6a, 0x00, 0xd7, 0x00, 0x05, 0x02, 0x00]),
        0,
    );
    assert!(i.writes.iter().any(|&(r, _)| r == 106), "{i:?}");
}

/// The VGPR address a FLAT-family instruction reads (llvm-mc 21 encodings, gfx1100): none for
/// `scratch_store_b32 off, v40, s32 offset:4` (SVE clear), one for `scratch_store_b32 v1, v40,
/// s32 offset:4`, one beside an SGPR base for `global_store_b32 v1, v2, s[4:5]`, two for
/// `global_store_b32 v[1:2], v2, off`.
#[test]
fn flat_reads_the_vgpr_address_it_uses() {
    let addr = |b: &[u8]| decode(Gen::G11, &words(b), 0).addr;
    assert_eq!(
        addr(&[0x04, 0x00, 0x69, 0xdc, 0x00, 0x28, 0x20, 0x00]),
        vec![(32, 1)]
    );
    assert_eq!(
        addr(&[0x04, 0x00, 0x69, 0xdc, 0x01, 0x28, 0xa0, 0x00]),
        vec![(V + 1, 1), (32, 1)]
    );
    assert_eq!(
        addr(&[0x00, 0x00, 0x6a, 0xdc, 0x01, 0x02, 0x04, 0x00]),
        vec![(V + 1, 1), (4, 2)]
    );
    assert_eq!(
        addr(&[0x00, 0x00, 0x6a, 0xdc, 0x01, 0x02, 0x7c, 0x00]),
        vec![(V + 1, 2)]
    );
}

/// A DS load reads its address and no data field (gfx1100 `ds_load_u8 v0, v162 offset:3703`,
/// `0xD8E80E77 0x000000A2`); `ds_store_b32 v1, v2` (`0xD8340000 0x00000201`) reads its data.
#[test]
fn ds_loads_read_no_data() {
    let load = decode(Gen::G11, &[0xD8E8_0E77, 0x0000_00A2], 0);
    assert_eq!(load.reads, vec![(V + 162, 1)], "{load:?}");
    let store = decode(Gen::G11, &[0xD834_0000, 0x0000_0201], 0);
    assert!(store.reads.contains(&(V + 2, 4)), "{store:?}");
}

/// A plain store reads its data width (llvm-mc 21 encodings): gfx1030 `buffer_store_dword v40,
/// off, s[0:3], s33` reads v40 only; gfx1030 `global_store_dwordx3 v[0:1], v[2:4], off` (opcode
/// 0x1f, x3 and x4 swapped on gfx10) reads three.
#[test]
fn stores_read_their_data_width() {
    let st = decode(Gen::G10, &[0xE070_0000, 0x2100_2800], 0);
    assert!(st.reads.contains(&(V + 40, 1)), "{st:?}");
    assert!(
        !st.reads.iter().any(|&(r, n)| r == V + 40 && n > 1),
        "{st:?}"
    );
    let x3 = decode(Gen::G10, &[0xDC7C_8000, 0x007D_0200], 0);
    assert!(x3.reads.contains(&(V + 2, 3)), "{x3:?}");
}

/// Which writes fill their VGPR destination in every lane `exec` enables ([`Inst::full`]), which
/// read and write only those lanes ([`Inst::lanewise`]), and the operands of a listed opcode read
/// exactly (llvm-mc 21 `-show-encoding`): what [`super::super::flow_exec`] replaces a VGPR's
/// value on.
#[test]
fn full_and_lanewise_writes() {
    // (generation, bytes, full, lanewise, VGPRs it certainly writes)
    type Row<'a> = (Gen, &'a [u8], bool, bool, &'a [(Reg, u16)]);
    let cases: &[Row] = &[
        // gfx1030 buffer_load_dword v40, off, s[0:3], s33 (a prologue's save restored); gfx1100
        // buffer_load_b32 the same; gfx1030 buffer_store_dword: lanewise, writes nothing
        (
            Gen::G10,
            &[0x00, 0x00, 0x30, 0xe0, 0x00, 0x28, 0x00, 0x21],
            true,
            true,
            &[(V + 40, 1)],
        ),
        (
            Gen::G11,
            &[0x00, 0x00, 0x50, 0xe0, 0x00, 0x28, 0x00, 0x21],
            true,
            true,
            &[(V + 40, 1)],
        ),
        (
            Gen::G10,
            &[0x00, 0x00, 0x70, 0xe0, 0x00, 0x28, 0x00, 0x21],
            false,
            true,
            &[],
        ),
        // gfx1100 v_clz_i32_u32_e32 v47, v8 (the RCCL control build's): fills v47
        (
            Gen::G11,
            &[0x08, 0x73, 0x5e, 0x7e],
            true,
            true,
            &[(V + 47, 1)],
        ),
        // gfx1100 v_sub_nc_u32_e32 v5, 0, v0
        (
            Gen::G11,
            &[0x80, 0x00, 0x0a, 0x4c],
            true,
            true,
            &[(V + 5, 1)],
        ),
        // gfx1100 v_add_f16_e32 v5, v0, v1: 16 bits, the other half kept
        (Gen::G11, &[0x00, 0x03, 0x0a, 0x64], false, false, &[]),
        // gfx1100 v_mov_b32_dpp v1, v2 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
        (
            Gen::G11,
            &[0xfa, 0x02, 0x02, 0x7e, 0x02, 0xe4, 0x00, 0xff],
            false,
            false,
            &[],
        ),
        // gfx1100 v_add_co_u32 v0, vcc_lo, v0, v2 (VOP3b: the carry-out field is no op_sel)
        (
            Gen::G11,
            &[0x00, 0x6a, 0x00, 0xd7, 0x00, 0x05, 0x02, 0x00],
            true,
            true,
            &[(V, 1)],
        ),
        // gfx1100 v_add_nc_u16 v0, v1, v2 op_sel:[0,0,1]
        (
            Gen::G11,
            &[0x00, 0x40, 0x03, 0xd7, 0x01, 0x05, 0x02, 0x00],
            false,
            false,
            &[],
        ),
        // gfx1100 v_mad_u64_u32 v[1:2], null, s5, s0, v[3:4]
        (
            Gen::G11,
            &[0x01, 0x7c, 0xfe, 0xd6, 0x05, 0x00, 0x0c, 0x04],
            true,
            true,
            &[(V + 1, 2)],
        ),
        // gfx1100 global_load_b32 v1, v[2:3], off
        (
            Gen::G11,
            &[0x00, 0x00, 0x52, 0xdc, 0x02, 0x00, 0x7c, 0x01],
            true,
            true,
            &[(V + 1, 1)],
        ),
        // gfx1100 global_load_d16_b16 v1, v[2:3], off
        (
            Gen::G11,
            &[0x00, 0x00, 0x82, 0xdc, 0x02, 0x00, 0x7c, 0x01],
            false,
            true,
            &[],
        ),
        // gfx1100 ds_load_b32 v1, v2
        (
            Gen::G11,
            &[0x00, 0x00, 0xd8, 0xd8, 0x02, 0x00, 0x00, 0x01],
            true,
            true,
            &[(V + 1, 1)],
        ),
        // gfx1100 ds_load_u16_d16 v1, v2
        (
            Gen::G11,
            &[0x00, 0x00, 0x98, 0xda, 0x02, 0x00, 0x00, 0x01],
            false,
            false,
            &[],
        ),
        // gfx1100 v_readfirstlane_b32 s0, v4: reads the first lane exec enables, or lane 0
        (Gen::G11, &[0x04, 0x05, 0x00, 0x7e], false, false, &[]),
        // gfx90a v_add_u32_e32 v1, v2, v3
        (
            Gen::G9,
            &[0x02, 0x07, 0x02, 0x68],
            true,
            true,
            &[(V + 1, 1)],
        ),
        // gfx90a v_add_u16_e32 v1, v2, v3
        (Gen::G9, &[0x02, 0x07, 0x02, 0x4c], false, false, &[]),
        // gfx90a ds_read_b32 v1, v2 (gfx90a's ACC bit could name an AGPR: not counted)
        (
            Gen::G9,
            &[0x00, 0x00, 0x6c, 0xd8, 0x02, 0x00, 0x00, 0x01],
            false,
            false,
            &[],
        ),
    ];
    for (k, &(g, bytes, full, lanewise, kills)) in cases.iter().enumerate() {
        let i = decode(g, &words(bytes), 0);
        assert_eq!((i.full, i.lanewise), (full, lanewise), "case {k}: {i:?}");
        let vk: Vec<(Reg, u16)> = i.kills.iter().copied().filter(|&(r, _)| r >= V).collect();
        if full {
            assert_eq!(vk, kills, "case {k}: {i:?}");
        }
    }
    // gfx1100 v_sub_nc_u32_e32 v5, 0, v0 reads v0 alone (not v1, not its destination).
    let sub = decode(Gen::G11, &words(&[0x80, 0x00, 0x0a, 0x4c]), 0);
    let vr: Vec<(Reg, u16)> = sub.reads.iter().copied().filter(|&(r, _)| r >= V).collect();
    assert_eq!(vr, [(V, 1)], "{sub:?}");
    // v_fmac_f32 adds to its destination, in both forms.
    for b in [
        &[0x02, 0x07, 0x02, 0x56][..],
        &[0x01, 0x00, 0x2b, 0xd5, 0x02, 0x07, 0x02, 0x00][..],
    ] {
        let i = decode(Gen::G11, &words(b), 0);
        assert!(i.full && i.reads.contains(&(V + 1, 1)), "{i:?}");
    }
    // gfx1100 v_cmpx_eq_u64_e64 s[0:1], v[4:5]: an equality compare, lanewise.
    let cmp = decode(
        Gen::G11,
        &words(&[0x7e, 0x00, 0xda, 0xd4, 0x00, 0x08, 0x02, 0x00]),
        0,
    );
    assert!(cmp.eq_cmp && cmp.lanewise && !cmp.full, "{cmp:?}");
}

/// gfx12's plain stores read their data's width and write no register (llvm-mc 21).
#[test]
fn gfx12_stores_read_their_width() {
    // global_store_b32 v[0:1], v2, off; global_store_b128 v[0:1], v[2:5], off
    for (bytes, n) in [
        (
            &[
                0x7c, 0x80, 0x06, 0xee, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
            ],
            1,
        ),
        (
            &[
                0x7c, 0x40, 0x07, 0xee, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
            ],
            4,
        ),
    ] {
        let i = decode(Gen::G12, &words(bytes), 0);
        assert!(i.reads.contains(&(V + 2, n)), "{i:?}");
        assert!(!i.writes.iter().any(|&(r, _)| r >= V), "{i:?}");
    }
}

/// The exec moves the lane split follows (llvm-mc 21): `s_or_saveexec` with every lane on, and
/// `s_and`, `s_or`, `s_andn2` (`s_and_not1`) of `exec` with a register.
#[test]
fn exec_moves_are_decoded() {
    use crate::scan::callgraph::inst::Logic;
    let cases: &[(Gen, &[u8], Op)] = &[
        // gfx1100 s_or_saveexec_b32 s0, -1
        (
            Gen::G11,
            &[0xc1, 0x22, 0x80, 0xbe],
            Op::OrSaveExec {
                dst: 0,
                n: 1,
                all: true,
                src: None,
            },
        ),
        // gfx90a s_or_saveexec_b64 s[0:1], -1
        (
            Gen::G9,
            &[0xc1, 0x21, 0x80, 0xbe],
            Op::OrSaveExec {
                dst: 0,
                n: 2,
                all: true,
                src: None,
            },
        ),
        // gfx1100 s_and_not1_saveexec_b32 s21, s0; gfx1030 s_andn2_saveexec_b32 s21, s0; gfx90a
        // s_andn2_saveexec_b64 s[20:21], s[0:1]; gfx1100 s_or_saveexec_b32 s2, s4
        (
            Gen::G11,
            &[0x00, 0x30, 0x95, 0xbe],
            Op::AndNotSaveExec {
                dst: 21,
                n: 1,
                src: 0,
            },
        ),
        (
            Gen::G10,
            &[0x00, 0x3f, 0x95, 0xbe],
            Op::AndNotSaveExec {
                dst: 21,
                n: 1,
                src: 0,
            },
        ),
        (
            Gen::G9,
            &[0x00, 0x23, 0x94, 0xbe],
            Op::AndNotSaveExec {
                dst: 20,
                n: 2,
                src: 0,
            },
        ),
        (
            Gen::G11,
            &[0x04, 0x22, 0x82, 0xbe],
            Op::OrSaveExec {
                dst: 2,
                n: 1,
                all: false,
                src: Some(4),
            },
        ),
        // gfx1100 s_xor_saveexec_b32 s0, -1; gfx90a s_xor_saveexec_b64 s[0:1], -1
        (
            Gen::G11,
            &[0xc1, 0x24, 0x80, 0xbe],
            Op::XorSaveExec { dst: 0, n: 1 },
        ),
        (
            Gen::G9,
            &[0xc1, 0x22, 0x80, 0xbe],
            Op::XorSaveExec { dst: 0, n: 2 },
        ),
        // gfx1100 s_and_b32 exec_lo, exec_lo, s0
        (
            Gen::G11,
            &[0x7e, 0x00, 0x7e, 0x8b],
            Op::Logic {
                dst: EXEC,
                a: EXEC,
                b: 0,
                n: 1,
                kind: Logic::And,
            },
        ),
        // gfx1100 s_or_b32 exec_lo, exec_lo, s21
        (
            Gen::G11,
            &[0x7e, 0x15, 0x7e, 0x8c],
            Op::Logic {
                dst: EXEC,
                a: EXEC,
                b: 21,
                n: 1,
                kind: Logic::Or,
            },
        ),
        // gfx1100 s_and_not1_b32 exec_lo, exec_lo, s0
        (
            Gen::G11,
            &[0x7e, 0x00, 0x7e, 0x91],
            Op::Logic {
                dst: EXEC,
                a: EXEC,
                b: 0,
                n: 1,
                kind: Logic::AndNot,
            },
        ),
        // gfx90a s_andn2_b64 exec, exec, s[0:1]
        (
            Gen::G9,
            &[0x7e, 0x00, 0xfe, 0x89],
            Op::Logic {
                dst: EXEC,
                a: EXEC,
                b: 0,
                n: 2,
                kind: Logic::AndNot,
            },
        ),
    ];
    for (k, (g, bytes, op)) in cases.iter().enumerate() {
        let i = decode(*g, &words(bytes), 0);
        assert_eq!(&i.op, op, "case {k}: {i:?}");
        assert!(
            i.writes.iter().any(|&(r, n)| (r..r + n).contains(&EXEC)),
            "case {k}: {i:?}"
        );
    }
}

/// A VOP3 compare writes every bit of its scalar destination's low register (inactive lanes
/// write 0): gfx1100 `v_cmp_lt_i32_e64 s0, v53, v65`; a packed (VOP3P) opcode below 0x100 is no
/// compare.
#[test]
fn a_compare_writes_its_low_mask_register_whole() {
    let x = decode(Gen::G11, &[0xd441_0000, 0x0002_8335], 0);
    assert!(x.kills.contains(&(0, 1)), "{x:?}");
    assert!(x.writes.iter().any(|&(r, _)| r == 0), "{x:?}");
}

/// gfx11's and gfx12's transcendentals write their result late, in both encodings: gfx1100
/// `v_rcp_f32_e32 v1, v2`, `v_exp_f32_e64 v1, v2`; `v_mov_b32` does not.
#[test]
fn transcendentals_write_late() {
    assert!(decode(Gen::G11, &[0x7e02_5502], 0).late_result);
    assert!(decode(Gen::G12, &[0xd5a5_0001, 0x0000_0102], 0).late_result);
    assert!(!decode(Gen::G11, &[0x7e02_0302], 0).late_result);
    assert!(!decode(Gen::G9, &[0x7e02_5502], 0).late_result);
}

/// gfx9's `s_cbranch_vccz` (0xbf86…) reads vccz apart from vcc (a half write of vcc leaves it);
/// gfx10's does not need to.
#[test]
fn gfx9_vccz_is_its_own_register() {
    use crate::scan::callgraph::inst::VCCZ;
    assert!(decode(Gen::G9, &[0xbf86_0001], 0)
        .reads
        .contains(&(VCCZ, 1)));
    assert!(!decode(Gen::G10, &[0xbf86_0001], 0)
        .reads
        .contains(&(VCCZ, 1)));
}
