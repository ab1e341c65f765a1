//! Rows for [`super::super::decode_mem`]: FLAT, GLOBAL and SCRATCH loads that write half a
//! register, on encodings assembled with llvm-mc 21.

use super::tests::words;
use super::*;
use crate::scan::callgraph::inst::Queue;

/// A `_d16` load writes one VGPR, keeps its other half (no certain write, not full), reads no
/// data and copies nothing into LDS. It was once taken for an atomic that may write four
/// registers and read four as data: RCCL's `flat_load_d16_u8 v38` then killed what `v41` held.
#[test]
fn d16_loads_write_half_of_one_register() {
    // (generation, encoding, what it reads in order, its queue)
    type Row<'a> = (Gen, &'a [u8], &'a [(Reg, u16)], Queue);
    let rows: &[Row] = &[
        // gfx90a global_load_short_d16_hi v1, v[2:3], off
        (
            Gen::G9,
            &[0x00, 0x80, 0x94, 0xdc, 0x02, 0x00, 0x7f, 0x01],
            &[(V + 2, 2)],
            Queue::VmLoad,
        ),
        // gfx1030 scratch_load_ubyte_d16 v1, v2, off
        (
            Gen::G10,
            &[0x00, 0x40, 0x80, 0xdc, 0x02, 0x00, 0x7d, 0x01],
            &[(V + 2, 1)],
            Queue::VmLoad,
        ),
        // gfx1100 flat_load_d16_u8 v38, v[4:5] offset:352 slc dlc (RCCL 2.21.5's runRing):
        // FLAT may reach LDS, so it is in no in-order queue
        (
            Gen::G11,
            &[0x60, 0xa1, 0x78, 0xdc, 0x04, 0x00, 0x7c, 0x26],
            &[(V + 4, 2)],
            Queue::None,
        ),
        // gfx1100 scratch_load_d16_hi_b16 v1, off, s33 offset:8
        (
            Gen::G11,
            &[0x08, 0x00, 0x8d, 0xdc, 0x00, 0x00, 0x21, 0x01],
            &[(33, 1)],
            Queue::VmLoad,
        ),
        // gfx1200 global_load_d16_hi_b16 v1, v[2:3], off
        (
            Gen::G12,
            &[
                0x7c, 0xc0, 0x08, 0xee, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
            ],
            &[(V + 2, 2)],
            Queue::VmLoad,
        ),
    ];
    for (g, bytes, reads, queue) in rows {
        let w = words(bytes);
        let x = decode(*g, &w, 0);
        let dst = if w[1] >> 24 == 0x26 { V + 38 } else { V + 1 };
        assert_eq!(x.words * 4, bytes.len(), "{g:?} {bytes:x?}");
        assert_eq!(x.op, Op::Mem, "{g:?} {bytes:x?}");
        assert_eq!(x.writes, vec![(dst, 1)], "{g:?} {bytes:x?}");
        assert!(
            x.kills.is_empty(),
            "{g:?} {bytes:x?}: a half write kills nothing"
        );
        assert!(!x.full, "{g:?} {bytes:x?}");
        assert_eq!(x.reads, *reads, "{g:?} {bytes:x?}: only the address");
        assert_eq!(x.addr, *reads, "{g:?} {bytes:x?}");
        assert!(!x.lds_dma, "{g:?} {bytes:x?}");
        assert_eq!(x.queue, *queue, "{g:?} {bytes:x?}");
        assert!(x.lanewise && x.vector && x.counts != 0, "{g:?} {bytes:x?}");
    }
}

/// The opcodes beside the `_d16` loads keep their reading: a plain load writes its width with
/// certainty, a plain store writes nothing and reads its data.
#[test]
fn neighbours_of_the_d16_loads_are_unchanged() {
    // gfx1100 global_load_u16 v1, v[2:3], off (0x12)
    let x = decode(
        Gen::G11,
        &words(&[0x00, 0x00, 0x4a, 0xdc, 0x02, 0x00, 0x7c, 0x01]),
        0,
    );
    assert_eq!(
        (x.writes.clone(), x.kills.clone()),
        (vec![(V + 1, 1)], vec![(V + 1, 1)])
    );
    assert!(x.full && !x.lds_dma);
    // gfx1100 global_store_d16_hi_b16 v[2:3], v1, off (0x25)
    let x = decode(
        Gen::G11,
        &words(&[0x00, 0x00, 0x96, 0xdc, 0x02, 0x01, 0x7c, 0x00]),
        0,
    );
    assert!(x.writes.is_empty() && !x.lds_dma);
    assert!(x.reads.contains(&(V + 1, 1)));
}
