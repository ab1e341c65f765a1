//! The memory formats of [`super::decode`]: SMEM, DS, FLAT/GLOBAL/SCRATCH (and gfx12's VFLAT),
//! MUBUF/MTBUF (and gfx12's VBUFFER), image instructions. Sources as there (llvm
//! `SMInstructions.td`, `DSInstructions.td`, `FLATInstructions.td`, `BUFInstructions.td`).

use super::inst::{cnt, Gen, Inst, Op, Queue, Reg};

/// SMEM (64 bits): loads understood, everything else [`Op::Mem`].
pub(super) fn smem(g: Gen, w: u32, w1: Option<u32>) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let sbase = ((w & 0x3f) << 1) as Reg;
    let sdata = (w >> 6) & 0x7f;
    let (op, offset, soffset) = match g {
        Gen::G9 => {
            let (soe, imm) = ((w >> 14) & 1 != 0, (w >> 17) & 1 != 0);
            let op = (w >> 18) & 0xff;
            let off = i64::from(((w1 & 0x1f_ffff) << 11) as i32 >> 11);
            match (imm, soe) {
                (true, false) => (op, off, None),
                (true, true) => (op, off, Some((w1 >> 25) & 0x7f)),
                (false, true) => (op, 0, Some((w1 >> 25) & 0x7f)),
                (false, false) => (op, 0, Some(w1 & 0x7f)),
            }
        }
        Gen::G10 | Gen::G11 => {
            let null = if g == Gen::G10 { 0x7D } else { 0x7C };
            let so = (w1 >> 25) & 0x7f;
            let off = i64::from(((w1 & 0x1f_ffff) << 11) as i32 >> 11);
            ((w >> 18) & 0xff, off, (so != null).then_some(so))
        }
        Gen::G12 => {
            let so = (w1 >> 25) & 0x7f;
            let off = i64::from(((w1 & 0xff_ffff) << 8) as i32 >> 8);
            ((w >> 13) & 0x3f, off, (so != 0x7C).then_some(so))
        }
    };
    // Loads: (bytes, whether the base is a 4-register buffer resource).
    let load: Option<(u32, bool)> = match g {
        Gen::G9 | Gen::G10 | Gen::G11 => match op {
            0..=4 => Some((4 << op, false)),
            8..=12 => Some((4 << (op - 8), true)),
            _ => None,
        },
        Gen::G12 => match op {
            0..=4 => Some((4 << op, false)),
            5 => Some((12, false)),
            8..=11 => Some((4, false)),
            16..=20 => Some((4 << (op - 16), true)),
            21 => Some((12, true)),
            24..=27 => Some((4, true)),
            _ => None,
        },
    };
    let mut x = Inst::new(2, Op::Mem);
    // What it writes comes back on `lgkmcnt` (gfx12 `kmcnt`).
    x.counts = cnt::KM;
    if let Some(so) = soffset {
        x.src(so, 1);
    }
    match load {
        Some((bytes, buffer)) => {
            x.reads.push((sbase, if buffer { 4 } else { 2 }));
            let regs = bytes.div_ceil(4) as u16;
            x.sdst(sdata, regs, regs);
            x.op = Op::SLoad {
                base: sbase,
                offset,
                soffset: soffset.map(|s| s as Reg),
                bytes,
                dst: sdata as Reg,
            };
        }
        None => {
            x.reads.push((sbase, 4));
            if sdata < 128 {
                x.reads.push((sdata as Reg, 16));
            }
            x.sdst(sdata, 16, 0);
        }
    }
    x
}

/// DS (64 bits): address, two data operands, a destination.
pub(super) fn ds(g: Gen, w: u32, w1: Option<u32>) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let mut x = Inst::new(2, Op::Mem);
    x.vector = true;
    x.counts = cnt::DS;
    x.vsrc(w1, 1);
    x.addr_from(0);
    if !ds_load(g, w) {
        x.vsrc(w1 >> 8, 4);
        x.vsrc(w1 >> 16, 4);
    }
    // An LDS load returns in order with the others (GDS, up to gfx11: bit 16 on gfx9, 17 on
    // gfx10 and gfx11, llvm-mc 21's encodings of `ds_read_b32 v1, v2 gds`, is another unit).
    let gds = g != Gen::G12 && (w >> if g == Gen::G9 { 16 } else { 17 }) & 1 != 0;
    if ds_load(g, w) && !gds {
        x.queue = Queue::DsLoad;
    }
    // A plain load whose result fills its registers (`ds_read_b32`/`_b64`/`_b96`/`_b128`, the
    // `2addr` forms, the 8- and 16-bit loads that extend to 32 bits; not `_d16`), from gfx10 on
    // (gfx90a's ACC bit would make the destination an AGPR): it writes those registers whole in
    // the lanes `exec` enables.
    let whole = match (w >> 18) & 0xff {
        0x36 | 0x39..=0x3c => 1,
        0x37 | 0x38 | 0x76 => 2,
        0xfe => 3,
        0x77 | 0x78 | 0xff => 4,
        _ => 0,
    };
    if g != Gen::G9 && whole > 0 {
        x.vdst(w1 >> 24, 4, whole);
        x.full = true;
        x.lanewise = true;
    } else {
        x.vdst(w1 >> 24, 4, 0);
    }
    x
}

/// Whether DS word `w` is a plain load (`ds_read*`, `ds_load*`, their `_d16`, `2addr` and
/// `addtid` forms), which reads no data field: the opcodes llvm-mc 21 disassembles so, per
/// generation (op at bits [24:17] on gfx9, [25:18] from gfx10 on).
fn ds_load(g: Gen, w: u32) -> bool {
    match g {
        Gen::G9 => matches!(
            (w >> 17) & 0xff,
            0x36..=0x3c | 0x56..=0x5b | 0x76..=0x78 | 0xb6 | 0xfe | 0xff
        ),
        Gen::G10 | Gen::G11 | Gen::G12 => matches!(
            (w >> 18) & 0xff,
            0x36..=0x3c | 0x76..=0x78 | 0xa2..=0xa7 | 0xb1 | 0xfe | 0xff
        ),
    }
}

/// FLAT, GLOBAL, SCRATCH up to gfx11 (64 bits).
pub(super) fn flat(g: Gen, w: u32, w1: Option<u32>) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let seg = if matches!(g, Gen::G11) {
        (w >> 16) & 3
    } else {
        (w >> 14) & 3
    };
    let mut x = Inst::new(2, Op::Mem);
    x.vector = true;
    // FLAT may reach LDS as well (`vmcnt` and `lgkmcnt`), GLOBAL and SCRATCH only memory.
    x.counts = if seg == 0 {
        cnt::LOAD | cnt::DS
    } else {
        cnt::LOAD
    };
    // GLOBAL's saddr is a 64-bit base, SCRATCH's a 32-bit offset.
    let saddr = (w1 >> 16) & 0x7f;
    // The VGPR address: FLAT's is 64 bits; GLOBAL's is a 32-bit offset beside an SGPR base and
    // 64 bits without one; SCRATCH reads one on gfx10 only without an SGPR offset, on gfx11
    // where its SVE bit (bit 23 of the second word) says so (llvm-mc 21's encodings of
    // `scratch_store_b32 off, v40, s32` and `v1, v40, off`), and always on gfx9 (gfx940 may
    // use both).
    let sgpr = saddr < 106;
    let vaddr = match seg {
        0 => 2,
        1 if g == Gen::G11 => u16::from((w1 >> 23) & 1 != 0),
        1 if g == Gen::G10 => u16::from(!sgpr),
        1 => 1,
        _ if sgpr => 1,
        _ => 2,
    };
    if vaddr > 0 {
        x.vsrc(w1, vaddr);
    }
    if seg != 0 && saddr < 106 {
        x.reads.push((saddr as Reg, if seg == 1 { 1 } else { 2 }));
    }
    x.addr_from(0);
    // Plain loads read no data and write exactly their width (a gfx90a AGPR destination, bit
    // 23 of the second word, aliases a VGPR here and is not counted as a certain write).
    let load = flat_load_width(g, (w >> 18) & 0x7f);
    let d16 = flat_d16_load(g, (w >> 18) & 0x7f);
    if load == 0 && !d16 {
        let op = (w >> 18) & 0x7f;
        let n = if flat_store(g, op) {
            store_width(g, op)
        } else {
            4
        };
        x.vsrc(w1 >> 8, n);
    }
    let acc = g == Gen::G9 && (w1 >> 23) & 1 != 0;
    // gfx9/gfx10's LDS bit (13): the load goes to LDS, not to its destination.
    let lds = g != Gen::G11 && (w >> 13) & 1 != 0;
    // A plain load writes its width and no more (FLAT has no TFE), a `_d16` load half of one
    // register (the other half kept: no certain write); a store writes no register; anything
    // else (an atomic that may return) up to four.
    if !flat_store(g, (w >> 18) & 0x7f) {
        x.vdst(
            w1 >> 24,
            may_write(load, d16),
            if acc || lds { 0 } else { load },
        );
    }
    // FLAT, GLOBAL and SCRATCH read and write registers only in the lanes exec enables; a plain
    // load (8 and 16 bits extended to 32, never `_d16`) fills what it writes.
    x.lanewise = true;
    x.full = load > 0 && !acc && !lds;
    // The LDS bit, or an opcode neither a plain load nor a plain store (an atomic, gfx94x's
    // `global_load_lds_dword`, 0x2A, llvm-mc 21): what it reads may go to LDS.
    x.lds_dma = lds || (load == 0 && !d16 && !flat_store(g, (w >> 18) & 0x7f));
    if seg != 0 && (load > 0 || d16) && !lds {
        x.queue = Queue::VmLoad;
    }
    x
}

/// Whether a FLAT/GLOBAL/SCRATCH opcode up to gfx11 is a plain store, which writes no register
/// (llvm-mc 21 disassembles `*_store_*` for these opcodes in all three segments).
pub(super) fn flat_store(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 | Gen::G10 => (0x18..=0x1F).contains(&op),
        Gen::G11 => (0x18..=0x1D).contains(&op) || matches!(op, 0x24 | 0x25),
        Gen::G12 => false,
    }
}

/// Whether a MUBUF opcode up to gfx11 is a plain store (`buffer_store_*`, formats included), as
/// llvm-mc 21 disassembles it.
pub(super) fn mubuf_store(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 => matches!(op, 0x04..=0x07 | 0x0C..=0x0F | 0x18..=0x1F | 0x27),
        Gen::G10 => matches!(op, 0x04..=0x07 | 0x18..=0x1F | 0x27),
        Gen::G11 => matches!(op, 0x04..=0x07 | 0x0C..=0x0F | 0x18..=0x1D | 0x24 | 0x25 | 0x27),
        Gen::G12 => false,
    }
}

/// The registers a plain store opcode of FLAT/GLOBAL/SCRATCH or MUBUF (which share the
/// numbers) up to gfx11 reads as data, 4 for any other opcode (llvm-mc 21's encodings of
/// `*_store_dword` … `*_store_dwordx4`, gfx10's x3/x4 swapped, `*_store_b32` … `*_store_b128`).
pub(super) fn store_width(g: Gen, op: u32) -> u16 {
    match (g, op) {
        (Gen::G9 | Gen::G10, 0x18..=0x1C) | (Gen::G11, 0x18..=0x1A | 0x24 | 0x25) => 1,
        (Gen::G9 | Gen::G10, 0x1D) | (Gen::G11, 0x1B) => 2,
        (Gen::G9, 0x1E) | (Gen::G10, 0x1F) | (Gen::G11, 0x1C) => 3,
        _ => 4,
    }
}

/// The registers a FLAT/GLOBAL/SCRATCH load opcode writes, 0 for any other opcode (llvm
/// `FLATInstructions.td`: `*_load_ubyte` … `*_load_dwordx4`, `*_load_u8` … `*_load_b128`).
pub(super) fn flat_load_width(g: Gen, op: u32) -> u16 {
    match (g, op) {
        (Gen::G10, 0x08..=0x0C) | (Gen::G9 | Gen::G11 | Gen::G12, 0x10..=0x14) => 1,
        (Gen::G10, 0x0D) | (Gen::G9 | Gen::G11 | Gen::G12, 0x15) => 2,
        (Gen::G10, 0x0F) | (Gen::G9 | Gen::G11 | Gen::G12, 0x16) => 3,
        (Gen::G10, 0x0E) | (Gen::G9 | Gen::G11 | Gen::G12, 0x17) => 4,
        _ => 0,
    }
}

/// Whether a FLAT/GLOBAL/SCRATCH opcode is a `_d16` load, which writes the low or high half of
/// one register and keeps the other (llvm `FLATInstructions.td`; llvm-mc 21's encodings:
/// `*_load_ubyte_d16` … `*_load_short_d16_hi` are 0x20–0x25 on gfx9 and gfx10,
/// `*_load_d16_u8` … `*_load_d16_hi_b16` 0x1E–0x23 on gfx11 and gfx12).
pub(super) fn flat_d16_load(g: Gen, op: u32) -> bool {
    match g {
        Gen::G9 | Gen::G10 => (0x20..=0x25).contains(&op),
        Gen::G11 | Gen::G12 => (0x1E..=0x23).contains(&op),
    }
}

/// The registers a FLAT/GLOBAL/SCRATCH opcode that is no plain store may write: a plain load
/// its width ([`flat_load_width`], `load`), a `_d16` load ([`flat_d16_load`]) one, anything
/// else (an atomic that may return) up to four.
fn may_write(load: u16, d16: bool) -> u16 {
    match (load, d16) {
        (0, true) => 1,
        (0, false) => 4,
        (n, _) => n,
    }
}

/// VFLAT, VGLOBAL, VSCRATCH on gfx12 (96 bits).
pub(super) fn flat12(w: u32, w1: Option<u32>, w2: Option<u32>) -> Inst {
    let (Some(w1), Some(w2)) = (w1, w2) else {
        return Inst::new(3, Op::Unknown);
    };
    let mut x = Inst::new(3, Op::Mem);
    x.vector = true;
    // VFLAT (segment 0) may reach LDS as well (`loadcnt` and `dscnt`).
    x.counts = if (w >> 24) & 3 == 0 {
        cnt::LOAD | cnt::DS
    } else {
        cnt::LOAD
    };
    let saddr = w & 0x7f;
    if saddr < 106 {
        let scratch = (w >> 24) & 3 == 1;
        x.reads.push((saddr as Reg, if scratch { 1 } else { 2 }));
    }
    x.vsrc(w2, 2);
    x.addr_from(0);
    let op = (w >> 14) & 0xff;
    let load = flat_load_width(Gen::G12, op);
    let d16 = flat_d16_load(Gen::G12, op);
    // gfx12 numbers its plain stores as gfx11 does (llvm-mc 21: `global_store_b8` 0x18 …
    // `_b128` 0x1D, `_d16_hi_b8`/`_b16` 0x24/0x25, in all three segments); a store writes no
    // register.
    let store = flat_store(Gen::G11, op);
    if load == 0 && !d16 {
        let n = if store { store_width(Gen::G11, op) } else { 4 };
        x.vsrc(w1 >> 23, n);
    }
    if !store {
        x.vdst(w1, may_write(load, d16), load);
    }
    x.lanewise = true;
    x.full = load > 0;
    x.lds_dma = load == 0 && !d16 && !store;
    if (w >> 24) & 3 != 0 && (load > 0 || d16) {
        x.queue = Queue::VmLoad;
    }
    x
}

/// MUBUF and MTBUF up to gfx11 (64 bits).
pub(super) fn mubuf(g: Gen, w: u32, w1: Option<u32>) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let mut x = Inst::new(2, Op::Mem);
    x.vector = true;
    x.counts = cnt::LOAD;
    x.vsrc(w1, 2);
    x.reads.push(((((w1 >> 16) & 0x1f) * 4) as Reg, 4));
    x.src(w1 >> 24, 1);
    x.addr_from(0);
    // MUBUF's plain loads (`buffer_load_ubyte` … `_dwordx4`, `_u8` … `_b128`) share FLAT's
    // opcode numbers (llvm `BUFInstructions.td`); MTBUF (`111010`) is never one.
    let op = if g == Gen::G11 {
        (w >> 18) & 0xff
    } else {
        (w >> 18) & 0x7f
    };
    let load = if w >> 26 == 0x38 {
        flat_load_width(g, op)
    } else {
        0
    };
    if load == 0 {
        let plain = w >> 26 == 0x38 && mubuf_store(g, op);
        x.vsrc(w1 >> 8, if plain { store_width(g, op) } else { 4 });
    }
    let acc = g == Gen::G9 && (w1 >> 23) & 1 != 0;
    // TFE (one more register) is bit 23 of the second word up to gfx10 (gfx90a's ACC there), bit
    // 21 on gfx11 (llvm-mc 21's encodings): a plain load without it writes its width only.
    let tfe = match g {
        Gen::G11 => (w1 >> 21) & 1 != 0,
        _ => (w1 >> 23) & 1 != 0,
    };
    let may = if load > 0 && !tfe { load } else { 4 };
    // gfx9/gfx10's LDS bit (16: llvm-mc 21's `buffer_load_dword off, s[8:11], s3 lds`), or an
    // opcode neither a plain load nor a plain store: what it reads may go to LDS.
    let plain_store = w >> 26 == 0x38 && mubuf_store(g, op);
    x.lds_dma = (g != Gen::G11 && (w >> 16) & 1 != 0) || (load == 0 && !plain_store);
    // A plain MUBUF load into registers (bit 16, LDS, clear: llvm-mc 21's encodings of
    // `buffer_load_dword off, s[8:11], s3 lds` for gfx900 and gfx1030) returns in order.
    if load > 0 && (w >> 16) & 1 == 0 {
        x.queue = Queue::VmLoad;
    }
    if !(w >> 26 == 0x38 && mubuf_store(g, op)) {
        x.vdst(w1 >> 8, may, if acc { 0 } else { load });
    }
    // A buffer instruction reads and writes VGPRs only in the lanes exec enables, as FLAT does;
    // a plain load into registers (no TFE, no LDS, not gfx90a's AGPRs) fills what it writes (a
    // prologue's save of a VGPR and its epilogue's restore, gfx9 and gfx10).
    x.lanewise = true;
    x.full = load > 0 && !tfe && !acc && !x.lds_dma;
    x
}

/// VBUFFER on gfx12 (96 bits).
pub(super) fn vbuffer(w: u32, w1: Option<u32>, w2: Option<u32>) -> Inst {
    let (Some(w1), Some(_)) = (w1, w2) else {
        return Inst::new(3, Op::Unknown);
    };
    let mut x = Inst::new(3, Op::Mem);
    x.vector = true;
    x.counts = cnt::LOAD;
    x.src(w & 0xff, 1);
    x.reads.push((((w1 >> 9) & 0x7f) as Reg, 4));
    if let Some(w2) = w2 {
        x.vsrc(w2, 2);
    }
    x.addr_from(0);
    x.vsrc(w1, 4);
    x.vdst(w1, 4, 0);
    // Loads and stores are not told apart here: what it reads may go anywhere.
    x.lds_dma = true;
    x
}

/// An image instruction of `words + 1` words: its registers are not read ([`Op::Opaque`]).
pub(super) fn mimg(extra: usize) -> Inst {
    let mut x = Inst::new(1 + extra, Op::Opaque);
    x.vector = true;
    x.counts = cnt::VM;
    x
}
