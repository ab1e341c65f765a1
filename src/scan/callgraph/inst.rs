//! One decoded instruction ([`Inst`]: its length, what it does as an [`Op`], the registers it
//! reads and may write), the register space it names them in, and the generations ([`Gen`]) the
//! decoders tell apart: what [`mod@super::decode`] and its format decoders produce and the flow
//! reads.
//!
//! Registers are numbered in one space: the scalar operand space 0–127 (`s0`–`s105`, `vcc`,
//! `ttmp*`, `m0`, `exec`: llvm `SIRegisterInfo.td`), [`SCC`] and [`HWREG`] for state no register
//! field names, then VGPRs from [`V`] (`v0` is 256). AGPRs share the VGPRs' numbers (an
//! over-approximation: a write to either may be a write to both).

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
/// gfx8/gfx9's VCCZ, as a register: what `s_cbranch_vccz`/`_vccnz` and `src_vccz` read there. A
/// write of half of `vcc` does not update it (llvm `SIInsertWaitcnts.cpp`: "up to gfx9, writes
/// to vcc_lo and vcc_hi don't update vccz"; the fifteenth review's `vccz`), so it holds what any
/// write of `vcc` since the function was entered may have left ([`super::flow`]).
pub const VCCZ: Reg = 249;
/// State the runtime sets up and no instruction of the image writes (the trap memory address
/// `s_sendmsg_rtn` and `s_getreg_b32` may return), as one register; no operand names it.
pub const RUNTIME: Reg = 250;
/// No register: what an instruction reads where its operand is an inline constant or a literal
/// ([`Op::Merge`]'s source); no instruction writes it, so it holds nothing followed.
pub const CONSTANT: Reg = 128;

/// The counters a wave's outstanding memory operations are counted on, as bits of
/// [`Inst::counts`] and [`Inst::waits`] (the ISA guides' "Data Dependency Resolution" and
/// `S_WAITCNT`; llvm `SIInsertWaitcnts.cpp`, `AMDGPUBaseInfo.cpp` for the encodings). Up to gfx11
/// `vmcnt` counts what gfx12 splits into [`cnt::LOAD`], [`cnt::SAMPLE`] and [`cnt::BVH`], and
/// `lgkmcnt` what gfx12 splits into [`cnt::KM`] and [`cnt::DS`].
pub mod cnt {
    /// Vector memory loads and atomics that return (`vmcnt`; gfx12 `loadcnt`).
    pub const LOAD: u8 = 1;
    /// Image samples (`vmcnt`; gfx12 `samplecnt`).
    pub const SAMPLE: u8 = 2;
    /// Ray-tracing BVH loads (`vmcnt`; gfx12 `bvhcnt`).
    pub const BVH: u8 = 4;
    /// Scalar memory and messages that answer (`lgkmcnt`; gfx12 `kmcnt`).
    pub const KM: u8 = 8;
    /// LDS and GDS (`lgkmcnt`; gfx12 `dscnt`).
    pub const DS: u8 = 16;
    /// Exports and LDS parameter loads (`expcnt`).
    pub const EXP: u8 = 32;
    /// Vector memory stores (gfx10+ `vscnt`; gfx12 `storecnt`).
    pub const STORE: u8 = 64;
    /// `vmcnt` up to gfx11.
    pub const VM: u8 = LOAD | SAMPLE | BVH;
    /// `lgkmcnt` up to gfx12.
    pub const LGKM: u8 = KM | DS;
    /// Every counter: what only a wait for all of them resolves.
    pub const ALL: u8 = 127;
}

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
    /// `dst = exec; exec |= src` (`s_or_saveexec_b32/b64`, `n` registers: how a function's
    /// prologue turns on every lane to save a VGPR whole), for [`super::flow_exec`]; otherwise an
    /// ALU operation of what it reads. `all`: `src` is the inline constant -1 (every lane on);
    /// `src`: the scalar register it reads, if one.
    OrSaveExec {
        dst: Reg,
        n: u16,
        all: bool,
        src: Option<Reg>,
    },
    /// `dst = exec; exec = src & !exec` (`s_andn2_saveexec_b32/b64`, `s_and_not1_saveexec_*`:
    /// how an `if` turns to its `else`), for [`super::flow_entered`]; otherwise an ALU
    /// operation of what it reads.
    AndNotSaveExec { dst: Reg, n: u16, src: Reg },
    /// `dst = exec; exec ^= src` (`s_xor_saveexec_b32/b64`: with -1, how a prologue turns to the
    /// lanes `exec` disables to save a VGPR's), for [`super::flow_entered`]; otherwise an ALU
    /// operation of what it reads.
    XorSaveExec { dst: Reg, n: u16 },
    /// `dst = a & b`, `a | b` or `a & !b` of two registers (`s_and_b32/b64`, `s_or_b32/b64`,
    /// `s_andn2_b32/b64` / `s_and_not1_*`): how code narrows and restores `exec`, for
    /// [`super::flow_exec`]; otherwise an ALU operation of what it reads.
    Logic {
        dst: Reg,
        a: Reg,
        b: Reg,
        n: u16,
        kind: Logic,
    },
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
    /// VOPD (gfx11+): two VALU operations that read their sources before either writes; each
    /// half's destination gets what that half reads (`reads` and `writes` hold both halves').
    Dual([Half; 2]),
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

/// Which bitwise operation an [`Op::Logic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logic {
    /// `a & b`.
    And,
    /// `a | b`.
    Or,
    /// `a & !b`.
    AndNot,
}

/// One half of a VOPD instruction ([`Op::Dual`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Half {
    /// The VGPR it may write (`.1` registers from `.0`).
    pub dst: (Reg, u16),
    /// What it reads (sources, and its destination and `vcc` where the operation does).
    pub reads: Vec<(Reg, u16)>,
    /// `v_dual_mov_b32`: the destination gets the source as it is.
    pub mov: bool,
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
    /// It reads and writes VGPRs only in the lanes `exec` enables, each lane its own (no DPP,
    /// no lane-crossing operation): under an `exec` within the function's entry `exec` it
    /// touches none of the lanes outside that ([`super::flow_exec`]).
    pub lanewise: bool,
    /// Lanewise, and every VGPR of `kills` gets all 32 bits in every lane `exec` enables (a
    /// 32-bit or 64-bit result, no 16-bit half, `d16` load, SDWA or DPP row mask): what the
    /// register held in those lanes is gone ([`super::valu_full`]).
    pub full: bool,
    /// An integer equality compare (`v_cmp_eq`/`v_cmp_ne`, `v_cmpx_eq`/`v_cmpx_ne` of `i32`,
    /// `u32`, `i64`, `u64`; [`eq_compare`]): what it writes says only whether its two sources
    /// are equal.
    pub eq_cmp: bool,
    /// The counters ([`cnt`]) that count it where it writes its registers when its data
    /// returns, after later instructions have run (a memory load, an atomic that returns, a
    /// message that answers): until a wait ([`Inst::waits`]) brings every one of them to zero,
    /// its destinations hold what they held or what it returns, and a write to them may be
    /// overwritten when it returns. 0: it writes as it runs.
    pub counts: u8,
    /// The counters ([`cnt`]) it waits to reach zero (`s_waitcnt` with a zero field,
    /// `s_waitcnt_vscnt null, 0`, gfx12's `s_wait_loadcnt 0` …).
    pub waits: u8,
    /// The counts of `vmcnt` and `lgkmcnt` (gfx12: `loadcnt` and `dscnt`) it waits down to
    /// ([`NO_WAIT`]: it does not wait for that counter).
    pub left: [u8; 2],
    /// The queue whose loads return in the order they issue that it is one of ([`Queue`]).
    pub queue: Queue,
    /// A vector memory instruction that may copy what it reads into LDS rather than into its
    /// registers (gfx9/gfx10's LDS bit on MUBUF and FLAT, gfx94x's `global_load_lds_*`), or one
    /// this rcclfix does not know to be a plain load or store: what it reads may leave the
    /// registers ([`super::flow`]).
    pub lds_dma: bool,
    /// It reads its sources after it issues (gfx90a's and gfx94x's MFMA: llvm
    /// `GCNHazardRecognizer::checkMAIVALUHazards`, a VALU write of an MFMA's source needs wait
    /// states after it, up to 18).
    pub reads_late: bool,
    /// Its VGPR result lands after the next vector instructions may read the register (gfx11's
    /// and gfx12's transcendental opcodes, [`trans`]: llvm
    /// `GCNHazardRecognizer::fixVALUTransUseHazard`).
    pub late_result: bool,
    /// gfx12's `s_wait_alu` (`s_waitcnt_depctr`): the [`alu`] sources whose SGPR writes it
    /// waits to land (a zero field).
    pub alu_waits: u8,
    /// It writes a compare's lane mask (VOPC, a VOP3 compare, `v_cmpx`'s `exec`): 0 in every
    /// lane it does not run in (the ISA guides, "VOPC"), so a write of `exec` narrows it. A
    /// VOP3b carry-out is not one.
    pub lane_mask: bool,
}

/// The sources of SGPR writes gfx12's `s_wait_alu` waits for, as bits of [`Inst::alu_waits`]:
/// the fields of `s_waitcnt_depctr` a zero in which waits (llvm `AMDGPUBaseInfo.cpp`,
/// `DepCtr`: `sa_sdst` bit 0, `va_vcc` bit 1, `va_sdst` bits 11:9; checked against llvm-mc 21's
/// encodings for gfx1200 in `decode_tests.rs`).
pub mod alu {
    /// Scalar ALU writes of an SGPR (`sa_sdst`).
    pub const SA_SDST: u8 = 1;
    /// Vector ALU writes of an SGPR other than `vcc` (`va_sdst`).
    pub const VA_SDST: u8 = 2;
    /// Vector ALU writes of `vcc` (`va_vcc`).
    pub const VA_VCC: u8 = 4;
}

/// Whether VOP1 opcode `op` (its VOP3 form's opcode less 0x180) is a transcendental of gfx11
/// and gfx12: `v_exp`, `v_log`, `v_rcp`, `v_rcp_iflag`, `v_rsq`, `v_sqrt`, `v_sin`, `v_cos` of
/// f32, f64 and f16, as llvm-mc 21 encodes them for gfx1100 and gfx1200.
pub(super) fn trans(op: u32) -> bool {
    matches!(
        op,
        0x25 | 0x27 | 0x2a | 0x2b | 0x2e | 0x2f | 0x31 | 0x33..=0x36 | 0x54..=0x58 | 0x60 | 0x61
    )
}

/// [`Inst::left`] of a counter an instruction does not wait for.
pub const NO_WAIT: u8 = 0xff;

/// Loads that return in the order they issue (the GCN3, Vega, CDNA and RDNA1–RDNA4 ISA guides,
/// `S_WAITCNT`, `S_WAIT_LOADCNT`: vector memory reads of one kind return in the order they were
/// issued; LDS instructions return in order; scalar memory may return out of order; llvm
/// `SIInsertWaitcnts.cpp` waits for a count above zero on these alone): a wait that leaves `n`
/// of its counter outstanding has seen a load of the queue return when `n` more of the same
/// queue issued after it ([`super::flow_wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// None of these.
    None,
    /// A plain GLOBAL, SCRATCH or (up to gfx11) buffer load into registers (`vmcnt`, gfx12
    /// `loadcnt`): no FLAT, image, LDS-bit load, atomic or store.
    VmLoad,
    /// A DS load into registers, not GDS (`lgkmcnt`, gfx12 `dscnt`).
    DsLoad,
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
            lanewise: false,
            full: false,
            eq_cmp: false,
            counts: 0,
            waits: 0,
            left: [NO_WAIT; 2],
            queue: Queue::None,
            lds_dma: false,
            reads_late: false,
            late_result: false,
            alu_waits: 0,
            lane_mask: false,
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

    /// Whether it may write register `k`: one of `writes` or `kills`, or any register for
    /// relative indexing (`m0` picks it), an image instruction (its registers are not read
    /// here) and a computed jump.
    pub(super) fn may_write(&self, k: Reg) -> bool {
        matches!(self.op, Op::Relative | Op::Opaque | Op::Fork)
            || self
                .writes
                .iter()
                .chain(&self.kills)
                .any(|&(r, n)| (r..r.saturating_add(n)).contains(&k))
    }

    /// Whether register `k` is one of `reads`.
    pub(super) fn reads_reg(&self, k: Reg) -> bool {
        self.reads
            .iter()
            .any(|&(r, n)| (r..r.saturating_add(n)).contains(&k))
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
            // (gfx9's vccz may hold an older vcc: [`VCCZ`].)
            251 => {
                self.reads.push((VCC, 2));
                self.reads.push((VCCZ, 1));
            }
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

/// Whether VOPC opcode `op` (its VOP3 form's opcode too, 0–255) is an integer equality compare:
/// `v_cmp_eq`/`v_cmp_ne` (and `v_cmpx_*`) of `i32`, `u32`, `i64`, `u64`. Each type's eight
/// compares start at a multiple of 8 (`f`, `lt`, `eq`, `le`, `gt`, `ne`/`lg`, `ge`, `t`): llvm
/// `VOPCInstructions.td` (gfx8/gfx9 `0xc0`–`0xff`, gfx10 `0x80`–`0xff`, gfx11/gfx12 `0x40`–`0x5f`
/// and `0xc0`–`0xdf`).
pub(super) fn eq_compare(g: Gen, op: u32) -> bool {
    let int = match g {
        Gen::G9 => (0xc0..0x100).contains(&op),
        Gen::G10 => (0x80..0x100).contains(&op),
        Gen::G11 | Gen::G12 => (0x40..0x60).contains(&op) || (0xc0..0xe0).contains(&op),
    };
    int && matches!(op & 7, 2 | 5)
}
