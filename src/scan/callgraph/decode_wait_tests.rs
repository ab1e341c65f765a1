//! Rows for [`super`]: what a load writes late and what a wait settles, on encodings assembled
//! with llvm-mc 21 (the flow's side: `flow_wait_tests.rs`).

use super::tests::words;
use super::*;

/// The counters each wait brings to zero, and those that count each late write (llvm-mc 21's
/// encodings for gfx900/gfx90a, gfx1030, gfx1100 and gfx1200; [`super::super::flow_wait`]).
#[test]
fn waits_and_late_writes() {
    use crate::scan::callgraph::inst::cnt::{ALL, BVH, DS, EXP, KM, LGKM, LOAD, SAMPLE, STORE, VM};
    let waits: &[(Gen, u32, u8)] = &[
        // s_waitcnt vmcnt(0) expcnt(0) lgkmcnt(0); vmcnt(0); lgkmcnt(0); expcnt(0); none;
        // vmcnt(1) expcnt(3) lgkmcnt(2)
        (Gen::G9, 0xbf8c_0000, VM | EXP | LGKM),
        (Gen::G9, 0xbf8c_0f70, VM),
        (Gen::G9, 0xbf8c_c07f, LGKM),
        (Gen::G9, 0xbf8c_cf0f, EXP),
        (Gen::G9, 0xbf8c_cf7f, 0),
        (Gen::G9, 0xbf8c_0231, 0),
        // vmcnt(16): bits 15:14 hold its high bits.
        (Gen::G9, 0xbf8c_4f70, 0),
        (Gen::G10, 0xbf8c_3f70, VM),
        (Gen::G10, 0xbf8c_c07f, LGKM),
        (Gen::G10, 0xbf8c_ff0f, EXP),
        (Gen::G10, 0xbf8c_ff7f, 0),
        // lgkmcnt(16) on gfx10: bits 13:8.
        (Gen::G10, 0xbf8c_d07f, 0),
        // s_waitcnt_vscnt null, 0; s_waitcnt_vscnt s1, 0; s_waitcnt_vmcnt, _lgkmcnt, _expcnt null, 0
        (Gen::G10, 0xbbfd_0000, STORE),
        (Gen::G10, 0xbb81_0000, 0),
        (Gen::G10, 0xbc7d_0000, VM),
        (Gen::G10, 0xbd7d_0000, LGKM),
        (Gen::G10, 0xbcfd_0000, EXP),
        (Gen::G10, 0xbc7d_0001, 0),
        (Gen::G11, 0xbf89_0000, VM | EXP | LGKM),
        (Gen::G11, 0xbf89_03f7, VM),
        (Gen::G11, 0xbf89_fc07, LGKM),
        (Gen::G11, 0xbf89_fff0, EXP),
        (Gen::G11, 0xbf89_fff7, 0),
        (Gen::G11, 0xbc7c_0000, STORE),
        (Gen::G11, 0xbcfc_0000, VM),
        (Gen::G11, 0xbd7c_0000, EXP),
        (Gen::G11, 0xbdfc_0000, LGKM),
        // s_wait_loadcnt … s_wait_kmcnt 0, s_wait_loadcnt_dscnt 0, s_wait_storecnt_dscnt 0,
        // s_wait_loadcnt_dscnt 0x102, s_wait_loadcnt_dscnt 0x2, s_wait_loadcnt 1, s_wait_idle
        (Gen::G12, 0xbfc0_0000, LOAD),
        (Gen::G12, 0xbfc1_0000, STORE),
        (Gen::G12, 0xbfc2_0000, SAMPLE),
        (Gen::G12, 0xbfc3_0000, BVH),
        (Gen::G12, 0xbfc4_0000, EXP),
        (Gen::G12, 0xbfc6_0000, DS),
        (Gen::G12, 0xbfc7_0000, KM),
        (Gen::G12, 0xbfc8_0000, LOAD | DS),
        (Gen::G12, 0xbfc9_0000, STORE | DS),
        (Gen::G12, 0xbfc8_0102, 0),
        (Gen::G12, 0xbfc8_0002, LOAD),
        (Gen::G12, 0xbfc0_0001, 0),
        (Gen::G12, 0xbf8a_0000, 0),
    ];
    for &(g, w, c) in waits {
        let x = decode(g, &[w], 0);
        // A wait on an SGPR's count is an instruction this rcclfix does not follow: it may
        // write its register late, on any counter.
        let counts = if w == 0xbb81_0000 { ALL } else { 0 };
        assert_eq!((x.waits, x.counts), (c, counts), "{g:?} 0x{w:08x}: {x:?}");
    }
    // The counts of vmcnt/loadcnt and lgkmcnt/dscnt a wait leaves: s_waitcnt vmcnt(1) expcnt(3)
    // lgkmcnt(2) (gfx9), vmcnt(1) (gfx11), s_waitcnt_lgkmcnt null, 3 (gfx10), s_wait_loadcnt 1,
    // s_wait_loadcnt_dscnt 0x102 (gfx12), s_waitcnt_vmcnt s1, 0 (gfx10, an SGPR: unknown).
    use crate::scan::callgraph::inst::NO_WAIT;
    let left: &[(Gen, u32, [u8; 2])] = &[
        (Gen::G9, 0xbf8c_0231, [1, 2]),
        (Gen::G11, 0xbf89_07f7, [1, 63]),
        (Gen::G10, 0xbd7d_0003, [NO_WAIT, 3]),
        (Gen::G12, 0xbfc0_0001, [1, NO_WAIT]),
        (Gen::G12, 0xbfc8_0102, [1, 2]),
        (Gen::G10, 0xbc01_0000, [NO_WAIT, NO_WAIT]),
    ];
    for &(g, w, l) in left {
        assert_eq!(decode(g, &[w], 0).left, l, "{g:?} 0x{w:08x}");
    }
    let late: &[(Gen, &[u8], u8)] = &[
        // gfx1100 s_load_b64, ds_load_b32, global_load_b32, flat_load_b32, scratch_load_b32,
        // buffer_load_b32, s_sendmsg_rtn_b32 (`lgkmcnt`: llvm `SIInsertWaitcnts.cpp`,
        // `SQ_MESSAGE`), v_mov_b32, lds_direct_load
        (
            Gen::G11,
            &[0x01, 0x00, 0x04, 0xf4, 0x00, 0x00, 0x00, 0xf8],
            KM,
        ),
        (
            Gen::G11,
            &[0x00, 0x00, 0xd8, 0xd8, 0x02, 0x00, 0x00, 0x01],
            DS,
        ),
        (
            Gen::G11,
            &[0x00, 0x00, 0x52, 0xdc, 0x02, 0x00, 0x04, 0x01],
            LOAD,
        ),
        (
            Gen::G11,
            &[0x00, 0x00, 0x50, 0xdc, 0x02, 0x00, 0x7c, 0x01],
            LOAD | DS,
        ),
        (
            Gen::G11,
            &[0x00, 0x00, 0x51, 0xdc, 0x00, 0x00, 0x03, 0x01],
            LOAD,
        ),
        (
            Gen::G11,
            &[0x00, 0x00, 0x50, 0xe0, 0x02, 0x01, 0x42, 0x03],
            LOAD,
        ),
        (Gen::G11, &[0x83, 0x4c, 0x80, 0xbe], KM),
        // gfx1200 s_get_barrier_state s0, -1: not followed, any counter.
        (Gen::G12, &[0xc1, 0x50, 0x80, 0xbe], ALL),
        (Gen::G11, &[0x02, 0x03, 0x02, 0x7e], 0),
        (Gen::G11, &[0x01, 0x00, 0x10, 0xce], ALL),
        // gfx1200 flat_load_b32, global_load_b32
        (
            Gen::G12,
            &[
                0x7c, 0x00, 0x05, 0xec, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            ],
            LOAD | DS,
        ),
        (
            Gen::G12,
            &[
                0x04, 0x00, 0x05, 0xee, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            ],
            LOAD,
        ),
        // gfx90a flat_load_dword, global_load_dword, s_load_dwordx2
        (
            Gen::G9,
            &[0x00, 0x00, 0x50, 0xdc, 0x02, 0x00, 0x00, 0x01],
            LOAD | DS,
        ),
        (
            Gen::G9,
            &[0x00, 0x80, 0x50, 0xdc, 0x02, 0x00, 0x04, 0x01],
            LOAD,
        ),
        (
            Gen::G9,
            &[0x01, 0x00, 0x06, 0xc0, 0x00, 0x00, 0x00, 0x00],
            KM,
        ),
    ];
    for &(g, b, c) in late {
        let x = decode(g, &words(b), 0);
        assert_eq!((x.counts, x.waits), (c, 0), "{g:?} {b:02x?}: {x:?}");
    }
}

/// gfx12's `s_wait_alu` fields, the lane masks that narrow `exec`, and the gfx11/gfx12
/// instructions that write lanes `exec` disables (llvm-mc 21's encodings for gfx1200; the flow's
/// side: `flow_alu_tests.rs`, `flow_exec_tests.rs`).
#[test]
fn gfx12_alu_waits_lane_masks_and_quad_writes() {
    use crate::scan::callgraph::inst::alu::{SA_SDST, VA_SDST, VA_VCC};
    // s_wait_alu depctr_sa_sdst(0), _va_sdst(0), _va_vcc(0), va_sdst(0) va_vcc(0), va_vdst(0).
    let waits: &[(u32, u8)] = &[
        (0xbf88_ff9e, SA_SDST),
        (0xbf88_f19f, VA_SDST),
        (0xbf88_ff9d, VA_VCC),
        (0xbf88_f19d, VA_SDST | VA_VCC),
        (0xbf88_0f9f, 0),
    ];
    for &(w, a) in waits {
        let x = decode(Gen::G12, &[w], 0);
        assert_eq!((x.alu_waits, x.op.clone()), (a, Op::Alu), "0x{w:08x}");
        // gfx11's s_waitcnt_depctr is no such wait here: its hazards are not gfx12's.
        assert_eq!(decode(Gen::G11, &[w], 0).alu_waits, 0, "0x{w:08x}");
    }
    // v_cmp_eq_u32 vcc_lo, v1, v2; v_cmp_eq_u32_e64 s0, v1, v2; v_cmpx_eq_u32 v1, v2: lane masks.
    // v_add_co_u32 v0, exec_lo, v1, v2: a carry-out, no lane mask.
    // (bytes, a lane mask, writes exec)
    let masks: &[(&[u8], bool, bool)] = &[
        (&[0x01, 0x05, 0x94, 0x7c], true, false),
        (
            &[0x00, 0x00, 0x4a, 0xd4, 0x01, 0x05, 0x02, 0x00],
            true,
            false,
        ),
        (&[0x01, 0x05, 0x94, 0x7d], true, true),
        (
            &[0x00, 0x7e, 0x00, 0xd7, 0x01, 0x05, 0x02, 0x00],
            false,
            true,
        ),
    ];
    for &(b, m, e) in masks {
        let x = decode(Gen::G12, &words(b), 0);
        let exec = x.may_write(crate::scan::callgraph::inst::EXEC);
        assert_eq!((x.lane_mask, exec), (m, e), "{b:02x?}: {x:?}");
    }
    // ds_direct_load v1 (gfx1200; lds_direct_load on gfx1100) writes every lane of a quad with
    // one lane on: opaque. v_permlane16_var_b32 v1, v2, v3 and v_permlanex16_var_b32 read other
    // lanes: not lanewise.
    for g in [Gen::G11, Gen::G12] {
        assert_eq!(decode(g, &[0xce10_0001], 0).op, Op::Opaque);
    }
    for b in [
        [0x01, 0x00, 0x0f, 0xd7, 0x02, 0x07, 0x02, 0x00],
        [0x01, 0x00, 0x10, 0xd7, 0x02, 0x07, 0x02, 0x00],
    ] {
        let x = decode(Gen::G12, &words(&b), 0);
        assert!(x.vector && !x.lanewise && !x.full, "{b:02x?}: {x:?}");
        assert!(x.kills.is_empty() && x.may_write(V + 1), "{b:02x?}: {x:?}");
    }
}

/// How many VGPRs vsrc1 of a VOPC or VOP2 word reads: its VOP3 form's src1 (llvm-mc 21's
/// encodings for gfx1100 and gfx90a). A 32-bit compare reading two would read a return address
/// a neighbouring register's lane holds (the RCCL control build's `v_cmp_lt_i32 … v55`, `v56`).
#[test]
fn a_short_compare_reads_its_operand_width() {
    let v = |n: u16| V + n;
    let rows: &[(Gen, &[u8], (Reg, u16))] = &[
        // v_cmp_lt_i32_e32 vcc_lo, 15, v55; v_cmp_lt_i64_e32 vcc_lo, 15, v[54:55]
        (Gen::G11, &[0x8f, 0x6e, 0x82, 0x7c], (v(55), 1)),
        (Gen::G11, &[0x8f, 0x6c, 0xa2, 0x7c], (v(54), 2)),
        // v_cmp_class_f64_e32 vcc_lo, v[2:3], v4: the class mask is 32 bits.
        (Gen::G11, &[0x02, 0x09, 0xfe, 0x7c], (v(4), 1)),
        // v_add_co_ci_u32_e32 v1, vcc_lo, v2, v3, vcc_lo
        (Gen::G11, &[0x02, 0x07, 0x02, 0x40], (v(3), 1)),
        // gfx90a: v_cmp_lt_i32_e32 vcc, 15, v55; v_cmp_lt_i64_e32 vcc, 15, v[54:55]
        (Gen::G9, &[0x8f, 0x6e, 0x82, 0x7d], (v(55), 1)),
        (Gen::G9, &[0x8f, 0x6c, 0xc2, 0x7d], (v(54), 2)),
    ];
    for &(g, b, read) in rows {
        let x = decode(g, &words(b), 0);
        assert!(x.reads.contains(&read), "{g:?} {b:02x?}: {:?}", x.reads);
        assert!(
            !x.reads_reg(read.0 + read.1),
            "{g:?} {b:02x?}: reads past its operand: {:?}",
            x.reads
        );
    }
}

/// From gfx10 on, a VOP1 opcode that neither swaps nor indexes reads no destination, and writes
/// as many registers as its VOP3 form's destination (llvm-mc 21's gfx1100 encodings).
#[test]
fn a_vop1_reads_no_destination() {
    // v_cvt_f32_f16_e32 v1, v2 (not listed as filling: 16-bit source, 32-bit result)
    let x = decode(Gen::G11, &[0x7e02_1702], 0);
    assert!(!x.reads_reg(V + 1), "{:?}", x.reads);
    assert!(x.may_write(V + 1) && !x.may_write(V + 2), "{:?}", x.writes);
    // v_swap_b32 v1, v2 reads and writes both.
    let x = decode(Gen::G11, &[0x7e02_cb02], 0);
    assert!(x.reads_reg(V + 1) && x.reads_reg(V + 2), "{:?}", x.reads);
    assert!(x.may_write(V + 1) && x.may_write(V + 2), "{:?}", x.writes);
}
