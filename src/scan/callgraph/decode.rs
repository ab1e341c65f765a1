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
//! Registers are numbered in one space: the scalar operand space 0–127 (`s0`–`s105`, `vcc`,
//! `ttmp*`, `m0`, `exec`: llvm `SIRegisterInfo.td`), [`SCC`] and [`HWREG`] for state no register
//! field names, then VGPRs from [`V`] (`v0` is 256). AGPRs share the VGPRs' numbers (an
//! over-approximation: a write to either may be a write to both). Implicit operands count as
//! reads and writes: SCC ([`super::decode_salu`]), `vcc` (VOP2, VOPC), `exec` (VOPC, the
//! `*_saveexec` family, and every vector instruction, which [`Inst::vector`] marks), the
//! hardware registers (float operations, `s_getreg_b32`), and a conditional branch's condition.

use super::decode_mem::{ds, flat, flat12, mimg, mubuf, smem, vbuffer};
use super::decode_salu::{sop1, sop2, sopc, sopk, sopp};
use super::isa::Isa;

/// A register: 0–127 the scalar operand space, [`V`]`+n` the VGPR (or AGPR) `n`.
pub type Reg = u16;
/// The first VGPR.
pub const V: Reg = 256;
/// `vcc` (its low half; `vcc_hi` is the next).
pub(super) const VCC: Reg = 106;
/// `exec` (its low half).
pub(super) const EXEC: Reg = 126;
/// SCC, the scalar condition code, as a register (253 is its operand code, `src_scc`).
pub const SCC: Reg = 253;
/// The hardware registers (`s_getreg_b32`/`s_setreg_b32`: MODE, its exception bits, …) as one
/// register; no operand names it.
pub const HWREG: Reg = 254;
/// State the runtime sets up and no instruction of the image writes (the trap memory address
/// `s_sendmsg_rtn` and `s_getreg_b32` may return), as one register; no operand names it.
pub const RUNTIME: Reg = 250;

/// The generation, as far as encodings go (gfx12 differs from gfx11 in SMEM and VMEM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gen {
    /// gfx8, gfx9 (incl. gfx90a, gfx94x, gfx950).
    G9,
    /// gfx10.x.
    G10,
    /// gfx11.x.
    G11,
    /// gfx12.x up to gfx1201.
    G12,
}

impl Gen {
    /// The generation of a code object's instruction set ([`Isa`]); `gfx12` tells gfx12 from
    /// gfx11, which [`Isa::Gfx11`] covers both of. `None` for gfx6/7, gfx125x and unknown sets.
    pub fn of(isa: Isa, gfx12: bool) -> Option<Gen> {
        match isa {
            Isa::Gfx9 => Some(Gen::G9),
            Isa::Gfx10 => Some(Gen::G10),
            Isa::Gfx11 if gfx12 => Some(Gen::G12),
            Isa::Gfx11 => Some(Gen::G11),
            Isa::Gfx6 | Isa::Gfx1250 | Isa::Unknown => None,
        }
    }

    pub(super) fn isa(self) -> Isa {
        match self {
            Gen::G9 => Isa::Gfx9,
            Gen::G10 => Isa::Gfx10,
            Gen::G11 | Gen::G12 => Isa::Gfx11,
        }
    }

    /// `m0` in the scalar operand space (124 up to gfx10, 125 from gfx11 on, where 124 is
    /// `null`).
    pub fn m0(self) -> Reg {
        match self {
            Gen::G9 | Gen::G10 => 124,
            Gen::G11 | Gen::G12 => 125,
        }
    }
}

/// What an instruction does, as far as the flow of a pointer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Arithmetic or anything else that only moves values between registers: each register it
    /// may write gets what its reads hold, combined.
    Alu,
    /// `s_getpc_b64`: `dst` and the next register get the address of the next instruction.
    GetPc { dst: Reg },
    /// An exact copy of `n` registers from `src` to `dst` (`s_mov_b32`, `s_mov_b64`,
    /// `v_mov_b32`, `v_readfirstlane_b32`, `v_readlane_b32`).
    Copy { dst: Reg, src: Reg, n: u16 },
    /// `dst` gets `src` in one lane (`lane`, when a constant; else the lane its other reads
    /// name) and keeps the rest (`v_writelane_b32`).
    Merge {
        dst: Reg,
        src: Reg,
        lane: Option<u8>,
    },
    /// `dst` gets lane `lane` (when a constant; else the lane its other reads name) of VGPR
    /// `src` (`v_readlane_b32`).
    ReadLane {
        dst: Reg,
        src: Reg,
        lane: Option<u8>,
    },
    /// `dst` gets `a` or `b` (`n` registers; `None` is a constant), as SCC says:
    /// `s_cselect_b32/b64`.
    Select {
        dst: Reg,
        a: Option<Reg>,
        b: Option<Reg>,
        n: u16,
    },
    /// `dst = src + c` on 32 bits (`s_add_u32`/`s_sub_u32` with a constant operand: the low half
    /// of a 64-bit pointer sum), setting SCC to the carry (borrow when `sub`); `raw` is the
    /// constant's bits.
    AddConst {
        dst: Reg,
        src: Reg,
        c: i64,
        raw: u32,
        sub: bool,
    },
    /// `dst = src + k + SCC` (`s_addc_u32`), or `src - k - SCC` when `sub` (`s_subb_u32`), with
    /// a constant `k`: the high half of a 64-bit pointer sum.
    AddCarry {
        dst: Reg,
        src: Reg,
        k: u32,
        sub: bool,
    },
    /// `dst = a + b` (`s_add_u32` of two registers, setting SCC to the carry), or with `carry`
    /// `a + b + SCC` (`s_addc_u32`): a table's address plus an index, for the marks of
    /// [`super::flow_marks`]; otherwise an ALU operation of what it reads.
    AddRegs {
        dst: Reg,
        a: Reg,
        b: Reg,
        carry: bool,
    },
    /// `dst = a ^ b` (`s_xor_b32`/`s_xor_b64` of two registers): how a waterfall loop takes the
    /// lanes it has served out of `exec`, for [`super::flow_marks`]; otherwise an ALU operation.
    Xor { dst: Reg, a: Reg, b: Reg, n: u16 },
    /// `dst = exec; exec &= src` (`s_and_saveexec_b32/b64`, `n` registers), for
    /// [`super::flow_marks`]; otherwise an ALU operation of what it reads.
    AndSaveExec { dst: Reg, n: u16 },
    /// `dst = sext(src[15:0])` (gfx11/gfx12 `s_sext_i32_i16`): what gfx12 does to the high half
    /// of `s_getpc_b64`'s result, for [`super::flow_marks`]; otherwise an ALU operation.
    Sext16 { dst: Reg, src: Reg },
    /// `dst`, `dst+1` = the pair at `src` plus `c` on 64 bits (gfx12's `s_add_nc_u64`,
    /// `s_sub_nc_u64` with a constant).
    Add64 { dst: Reg, src: Reg, c: i64 },
    /// A scalar load whose address is `base` (the low half of the pair, or the base word of a
    /// buffer resource) plus `offset` bytes plus the register `soffset`, `bytes` wide, into
    /// `dst`…: `s_load_*`, `s_buffer_load_*`.
    SLoad {
        base: Reg,
        offset: i64,
        soffset: Option<Reg>,
        bytes: u32,
        dst: Reg,
    },
    /// Any other memory access, export or message: what it reads may leave the registers.
    Mem,
    /// An image instruction (MIMG, VIMAGE, VSAMPLE), whose address registers are not read here;
    /// gfx9's `s_set_gpr_idx_on`; an `s_setreg` that may change how later instructions read
    /// their operands.
    Opaque,
    /// `s_branch`: to the word offset (from the next instruction).
    Branch(i64),
    /// A conditional branch (`s_cbranch_*`, SOPK branches): to the word offset, or on; its
    /// reads are its condition.
    CBranch(i64),
    /// `s_endpgm`.
    End,
    /// `s_setpc_b64 s[30:31]`: a return.
    Return,
    /// `s_swappc_b64`, `s_call_b64`: a call, then on.
    Call,
    /// `s_setpc_b64` other than a return: a jump to a computed address (a tail call).
    Jump,
    /// Relative indexing (`s_movrels*`, `v_movrels*`, `v_swaprel`, gfx9's
    /// `s_set_gpr_idx_on`): which registers it reads or writes depends on `m0`.
    Relative,
    /// A computed jump that is neither a call nor a return (`s_rfe_b64`, gfx8/9 fork and join).
    Fork,
    /// No format matches, or the instruction runs past the code.
    Unknown,
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inst {
    /// Its length in 32-bit words (1–4).
    pub words: usize,
    /// What it does.
    pub op: Op,
    /// Registers it may read, as (first, count).
    pub reads: Vec<(Reg, u16)>,
    /// Registers it may write, as (first, count).
    pub writes: Vec<(Reg, u16)>,
    /// Registers it certainly writes, as (first, count) (a subset of `writes`).
    pub kills: Vec<(Reg, u16)>,
    /// Of `reads`, those a memory instruction forms its address from (the rest is data).
    pub addr: Vec<(Reg, u16)>,
    /// A vector instruction: which lanes it runs in is `exec`'s (and what `v_readfirstlane_b32`
    /// reads).
    pub vector: bool,
    /// It does more than write its registers (`s_setreg_b32`, `s_sleep_var`, `s_setvskip`, an
    /// opcode not classified): what it reads may act where the flow does not see.
    pub effect: bool,
}

impl Inst {
    pub(super) fn new(words: usize, op: Op) -> Inst {
        Inst {
            words,
            op,
            reads: Vec::new(),
            writes: Vec::new(),
            kills: Vec::new(),
            addr: Vec::new(),
            vector: false,
            effect: false,
        }
    }

    /// A vector ALU instruction: runs under `exec` and may set the exception bits of the
    /// hardware registers ([`HWREG`]). What MODE decides (rounding, denormals) is no channel:
    /// only a refused `s_setreg` of a followed value could make it depend on one.
    pub(super) fn valu(mut self) -> Inst {
        self.vector = true;
        self.writes.push((HWREG, 1));
        self
    }

    /// Mark the reads from index `from` on as address operands.
    pub(super) fn addr_from(&mut self, from: usize) {
        self.addr.extend_from_slice(&self.reads[from..]);
    }

    /// Read a scalar source operand (8 or 9 bits): a register when below 128, else a constant,
    /// the literal or a special value; `n` registers.
    pub(super) fn src(&mut self, s: u32, n: u16) {
        match s {
            _ if n == 0 => {}
            0..128 => {
                // A 64-bit scalar operand is an aligned pair: an odd register is read alone.
                let n = if s % 2 == 1 { 1 } else { n.min(2) };
                self.reads.push((s as Reg, n));
            }
            256..512 => self.reads.push((V + (s - 256) as Reg, n)),
            // src_vccz, src_execz, src_scc: state read as a value.
            251 => self.reads.push((VCC, 2)),
            252 => self.reads.push((EXEC, 2)),
            253 => self.reads.push((SCC, 1)),
            // lds_direct (gfx9/gfx10): LDS at the address in m0 (124 there).
            254 => self.reads.push((124, 1)),
            _ => {}
        }
    }

    pub(super) fn vsrc(&mut self, v: u32, n: u16) {
        self.reads.push((V + (v & 0xff) as Reg, n));
    }

    pub(super) fn sdst(&mut self, d: u32, may: u16, must: u16) {
        if d < 128 && may > 0 {
            // A pair starts at an even register: an odd one is written alone.
            let may = if may == 2 && d % 2 == 1 { 1 } else { may };
            self.writes.push((d as Reg, may));
            if must > 0 {
                self.kills.push((d as Reg, must));
            }
        }
    }

    pub(super) fn vdst(&mut self, d: u32, may: u16, must: u16) {
        self.writes.push((V + (d & 0xff) as Reg, may));
        if must > 0 {
            self.kills.push((V + (d & 0xff) as Reg, must));
        }
    }
}

/// The register of a scalar operand field, when it is one (below 106: `s0`–`s105`).
pub(super) fn sgpr(s: u32) -> Option<Reg> {
    (s < 106).then_some(s as Reg)
}

/// An inline constant (128–208) as a signed value, or the literal (255).
pub(super) fn constant(s: u32, literal: Option<u32>) -> Option<i64> {
    match s {
        128..=192 => Some(i64::from(s) - 128),
        193..=208 => Some(192 - i64::from(s)),
        255 => literal.map(|l| i64::from(l as i32)),
        _ => None,
    }
}

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
            // LDSDIR / VDSDIR: vdst, reads m0.
            let mut x = Inst::new(1, Op::Mem);
            x.vector = true;
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
        (_, 0x36) => ds(word(1)),
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
        for v in [vsrc1, vdst] {
            if v >= 128 {
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
    if w >> 25 == 0x3F {
        // VOP1: op [16:9]. `v_swap_b32` reads its destination too.
        let op = vsrc1;
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
        return x;
    }
    if w >> 25 == 0x3E {
        // VOPC: writes vcc (and exec for v_cmpx, or an opcode whose VOP3 form is not known).
        x.words = 1 + extra;
        x.vsrc(vsrc1, 2);
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
    x.vsrc(vsrc1, 2);
    // Carry-in/out and v_cndmask read vcc; a carry-out (its VOP3 form has one, or that form is
    // not known) writes it; v_fmac/v_mac read their destination.
    x.reads.push((VCC, 2));
    x.reads.push((V + vdst as Reg, 2));
    if short_row(g, w).is_none_or(|e| e & (1 << 9) != 0) {
        x.sdst(u32::from(VCC), 2, 0);
    }
    x.vdst(vdst, 2, 1);
    x
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
    let width = |c: u16| -> u16 {
        match c & 3 {
            0 => 0,
            1 => 1,
            2 => 2,
            _ => 16,
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
    if dpp {
        // The DPP word's low byte is the real first source.
        x.reads.push((V, 256));
    }
    let vdst = w & 0xff;
    let dn = width(e >> 7).max(1);
    if e & (1 << 6) != 0 {
        x.sdst(vdst, dn, 0);
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
    if e & (1 << 9) != 0 {
        x.sdst((w >> 8) & 0x7f, 2, 0);
    }
    if packed {
        return x;
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
        if srcs[0] >= 256 {
            x.vdst(srcs[0] - 256, 1, 0);
        }
        x.reads.push((V + vdst as Reg, 1));
    }
    if words != 2 {
        return x;
    }
    let lane = (128..192).contains(&srcs[1]).then(|| (srcs[1] - 128) as u8);
    if op == readlane && srcs[0] >= 256 {
        x.op = Op::ReadLane {
            dst: vdst as Reg,
            src: V + (srcs[0] - 256) as Reg,
            lane,
        };
    } else if op == writelane && !(106..256).contains(&srcs[0]) {
        let src = if srcs[0] >= 256 {
            V + (srcs[0] - 256) as Reg
        } else {
            srcs[0] as Reg
        };
        x.op = Op::Merge {
            dst: V + vdst as Reg,
            src,
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

/// VOPD (gfx11+, 64 bits, plus a literal): two VALU operations at once.
fn vopd(w: u32, w1: Option<u32>) -> Inst {
    let Some(w1) = w1 else {
        return Inst::new(2, Op::Unknown);
    };
    let (opx, opy) = ((w >> 22) & 0xf, (w >> 17) & 0x1f);
    let (srcx0, srcy0) = (w & 0x1ff, w1 & 0x1ff);
    let literal = srcx0 == 255 || srcy0 == 255 || matches!(opx, 1 | 2) || matches!(opy, 1 | 2);
    let mut x = Inst::new(if literal { 3 } else { 2 }, Op::Alu).valu();
    x.src(srcx0, 1);
    x.src(srcy0, 1);
    x.vsrc(w >> 9, 1);
    x.vsrc(w1 >> 9, 1);
    // vdstY's field (bits [23:17]) holds its register number without the low bit, which is
    // the opposite of vdstX's (llvm `VOPDInstructions.td`): both candidates are counted.
    let (vdstx, vdsty) = (w1 >> 24, ((w1 >> 17) & 0x7f) << 1);
    // v_dual_fmac / cndmask read their destination and vcc.
    x.reads.push((V + vdstx as Reg, 1));
    x.reads.push((V + vdsty as Reg, 2));
    x.reads.push((VCC, 1));
    x.vdst(vdstx, 1, 0);
    x.vdst(vdsty, 2, 0);
    x
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
