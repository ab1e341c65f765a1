//! The second stage: the machine code of one function read one 32-bit word at a time
//! ([`read_function`]), following callee addresses through registers to tell direct calls from
//! indirect ones. Encodings: the RDNA and CDNA ISA reference guides (SOP1, SOP2, SOPK, VOP1,
//! VOP3 lane moves, SMEM), llvm `SIInstrInfo.cpp` (`SI_PC_ADD_REL_OFFSET`).

use std::collections::HashMap;

use super::image::Image;
use super::isa::{branch_offset, trap_entry, word};
use super::isa::{Isa, SopkControl};
use super::layout::Layout;
use super::{Raw, Ref, R_REL32, R_REL32_LO};

/// Registers tracked: s0–s105 (SGPRs), each holding half (`false` low, `true` high) of a [`Ref`].
type Regs = [Option<(Ref, bool)>; 106];

/// One SALU word decoded as SOP1: (opcode, sdst, ssrc0).
pub(super) fn sop1(w: u32) -> Option<(u32, u32, u32)> {
    (w >> 23 == 0x17D).then_some(((w >> 8) & 0xff, (w >> 16) & 0x7f, w & 0xff))
}

/// One SALU word decoded as SOP2: (opcode, sdst, ssrc0, ssrc1).
pub(super) fn sop2(w: u32) -> Option<(u32, u32, u32, u32)> {
    (w >> 30 == 2 && w >> 28 != 0xB).then_some((
        (w >> 23) & 0x7f,
        (w >> 16) & 0x7f,
        w & 0xff,
        (w >> 8) & 0xff,
    ))
}

/// An inline constant (128..=208) or the literal (255) as a 32-bit value.
pub(super) fn constant(src: u32, literal: Option<u32>) -> Option<u32> {
    match src {
        128..=192 => Some(src - 128),
        193..=208 => Some((-((src - 192) as i32)) as u32),
        255 => literal,
        _ => None,
    }
}

/// `s_getpc_b64 s[P:P+1]`, optional `s_sext_i32_i16 sP+1`, `s_add_u32 sP, sP, lo`,
/// `s_addc_u32 sP+1, sP+1, hi` at word `i` of section `(base, code)`: (P, target, words used).
pub(super) fn pc_rel(
    img: &Image<'_>,
    base: u64,
    code: &[u8],
    i: usize,
) -> Option<(u32, Raw, usize)> {
    let getpc = img.isa.sop1()?[2];
    let n = code.len() / 4;
    let (op, p, _) = sop1(word(code, i))?;
    if op != getpc || p % 2 != 0 || p >= 104 {
        return None;
    }
    // gfx12 puts `s_wait_alu` (and gfx11+ may put `s_delay_alu`) between the steps: SOPP
    // opcodes 8 and 7 (`0xBF88xxxx`, `0xBF87xxxx`), which write no register.
    let gfx11 = img.isa == Isa::Gfx11;
    let skip = |mut j: usize| {
        while gfx11 && j < n && matches!(word(code, j) >> 16, 0xBF87 | 0xBF88) {
            j += 1;
        }
        j
    };
    let mut j = skip(i + 1);
    if j < n {
        if let Some((_, d, s)) = sop1(word(code, j)) {
            if d == p + 1 && s == p + 1 {
                j = skip(j + 1);
            }
        }
    }
    // One add: (value, literal word index if any, next word index).
    let add = |j: usize, want_op: u32, reg: u32| -> Option<(u32, Option<usize>, usize)> {
        if j >= n {
            return None;
        }
        let (op, d, s0, s1) = sop2(word(code, j))?;
        if op != want_op || d != reg {
            return None;
        }
        let other = if s0 == reg {
            s1
        } else if s1 == reg {
            s0
        } else {
            return None;
        };
        if other == 255 {
            let lit = (j + 1 < n).then(|| word(code, j + 1))?;
            Some((lit, Some(j + 1), j + 2))
        } else {
            Some((constant(other, None)?, None, j + 1))
        }
    };
    let (lo, lo_at, j) = add(j, 0, p)?;
    let (hi, _, j) = add(skip(j), 4, p + 1)?;
    let pc_next = base + 4 * (i as u64 + 1);
    if let Some(at) = lo_at {
        let lit_addr = base + 4 * at as u64;
        if let Some(&(ty, raw)) = img.code_relocs.get(&lit_addr) {
            let adj = lit_addr - pc_next;
            let t = match (ty, raw) {
                (R_REL32_LO | R_REL32, Raw::Addr(a, false)) => {
                    Raw::Addr(a.wrapping_sub(adj), false)
                }
                (_, r) => r,
            };
            return Some((p, t, j - i));
        }
    }
    let off = (u64::from(hi) << 32) | u64::from(lo);
    Some((p, Raw::Addr(pc_next.wrapping_add(off), false), j - i))
}

/// Whether an SGPR destination field may reach `s30` or `s31` (a 64-bit write at `s29` is not
/// encodable, but a word-by-word reader cannot tell a literal from an instruction).
fn is_ra(d: u32) -> bool {
    (29..=31).contains(&d)
}

/// What the registers hold while one function is read in address order.
pub(super) struct State {
    pub(super) regs: Regs,
    /// (VGPR, lane) → the SGPR value spilled there by `v_writelane_b32`.
    pub(super) spilled: HashMap<(u32, u32), (Ref, bool)>,
}

impl State {
    pub(super) fn set_pair(&mut self, d: u32, r: Option<Ref>) {
        if (d as usize) + 1 < self.regs.len() {
            self.regs[d as usize] = r.map(|r| (r, false));
            self.regs[d as usize + 1] = r.map(|r| (r, true));
        }
    }

    pub(super) fn set(&mut self, d: u32, v: Option<(Ref, bool)>) {
        if let Some(x) = self.regs.get_mut(d as usize) {
            *x = v;
        }
    }

    pub(super) fn get(&self, s: u32) -> Option<(Ref, bool)> {
        self.regs.get(s as usize).copied().flatten()
    }

    /// The [`Ref`] a register pair holds, when both halves hold the same one.
    pub(super) fn pair(&self, s: u32) -> Option<Ref> {
        match (self.get(s), self.get(s + 1)) {
            (Some((a, false)), Some((b, true))) if a == b => Some(a),
            _ => None,
        }
    }
}

/// What the code of one function refers to.
#[derive(Default)]
pub(super) struct Refs {
    pub(super) calls: Vec<u32>,
    pub(super) tables: Vec<u32>,
    pub(super) indirect: Vec<u64>,
    /// SOPP branches whose target lies outside the function: (branch address, target).
    pub(super) branches_out: Vec<(u64, u64)>,
    /// Whether the function's first two words are `s_trap 2; s_endpgm` ([`trap_entry`]): then
    /// nothing after its entry runs when it is entered there (the rest is read all the same).
    pub(super) trap_entry: bool,
    /// Every place control may go where the code does not spell the target as a constant
    /// (`s_swappc_b64`, `s_setpc_b64` other than a return through `s[30:31]`, `s_rfe_b64`, gfx6–9
    /// `s_cbranch_join` and `s_cbranch_g_fork`) and every `s_call_b64`: a proof follows each of
    /// them to every address-taken function, whatever the register tracking concluded.
    pub(super) call_sites: Vec<u64>,
    /// `s_setpc_b64 s[30:31]` words: returns, if `s[30:31]` still holds the return address.
    pub(super) returns: usize,
    /// Whether any word may write `s30` or `s31` (SALU, SMEM, `v_readlane_b32`,
    /// `v_readfirstlane_b32` destinations; read word by word, so a literal counts too): then a
    /// return may go anywhere.
    pub(super) writes_ra: bool,
    /// Whether any word is `s_trap 2`.
    pub(super) traps: bool,
    /// SMEM instructions: (address, first word, second word holding the offset).
    pub(super) smem_loads: Vec<(u64, u32, u32)>,
    /// FLAT, GLOBAL and SCRATCH instructions (`110111` on gfx9–gfx11; a first byte of
    /// `0xEC`–`0xEE` on gfx12): (address, first word, third word, which holds gfx12's offset).
    pub(super) vmem_loads: Vec<(u64, u32, u32)>,
}

impl Refs {
    pub(super) fn add(&mut self, own: u32, r: Ref) {
        match r {
            Ref::Func(x) | Ref::Slot(x) => {
                if x != own && !self.calls.contains(&x) {
                    self.calls.push(x);
                }
            }
            Ref::Table(t) | Ref::SlotTable(t) => {
                if !self.tables.contains(&t) {
                    self.tables.push(t);
                }
            }
            Ref::Other => {}
        }
    }
}

/// Read words `first..last` of `(base, code)` as the code of function `own`.
pub(super) fn read_function(
    img: &Image<'_>,
    lay: &Layout<'_>,
    own: u32,
    (base, code): (u64, &[u8]),
    first: usize,
    last: usize,
) -> Refs {
    let [mov32, mov64, _getpc, setpc, swappc] = img.isa.sop1().expect("known isa");
    let smem = img.isa.smem();
    let lanes = img.isa.lanes();
    let mut st = State {
        regs: [None; 106],
        spilled: HashMap::new(),
    };
    let mut out = Refs::default();
    let trap = trap_entry(img.isa);
    out.traps = trap.is_some_and(|t| (first..last).any(|j| word(code, j) == t[0]));
    // An entry that traps and ends the program: `s_endpgm` ends the wave whatever the trap
    // handler does, so no later instruction of this function runs when it is entered here.
    if let Some(t) = trap {
        // The rest is still read: code past the entry runs when something enters there.
        out.trap_entry =
            first + 1 < last && word(code, first) == t[0] && word(code, first + 1) == t[1];
    }
    let (lo, hi) = (base + 4 * first as u64, base + 4 * last as u64);
    let mut i = first;
    while i < last {
        let at = base + 4 * i as u64;
        // Relocations on this word (relocatable objects): references.
        if !img.code_relocs.is_empty() {
            if let Some(&(_, raw)) = img.code_relocs.get(&at) {
                out.add(own, lay.resolve(raw));
            }
        }
        if let Some((p, raw, used)) = pc_rel(img, base, code, i) {
            let r = lay.resolve(raw);
            out.add(own, r);
            st.set_pair(p, Some(r));
            i += used;
            continue;
        }
        let w = word(code, i);
        let mut step = 1;
        if w >> 26 == 0x37 || (0xEC..=0xEE).contains(&(w >> 24)) {
            let third = if i + 2 < last { word(code, i + 2) } else { 0 };
            out.vmem_loads.push((at, w, third));
        }
        if let Some((op, d, s)) = sop1(w) {
            if s == 255 {
                step = 2;
            }
            let direct = |st: &State| matches!(st.pair(s), Some(Ref::Func(_)));
            if is_ra(d) && op != setpc {
                out.writes_ra = true;
            }
            if op == swappc {
                out.call_sites.push(at);
                if d != 30 || s % 2 != 0 || s >= 104 || !direct(&st) {
                    out.indirect.push(at);
                }
                // The callee may clobber s0–s29; s[30:31] now holds the return address.
                st.regs[..32].fill(None);
            } else if op == setpc {
                if s == 30 && d == 0 {
                    out.returns += 1;
                } else {
                    out.call_sites.push(at);
                    if d != 0 || s % 2 != 0 || s >= 104 || !direct(&st) {
                        out.indirect.push(at);
                    }
                }
            } else if img.isa.computed_jump_sop1(op) {
                out.call_sites.push(at);
                out.indirect.push(at);
            } else if op == mov64 && d % 2 == 0 && d < 104 {
                let (lo, hi) = if s % 2 == 0 && s < 104 {
                    (st.get(s), st.get(s + 1))
                } else {
                    (None, None)
                };
                st.set(d, lo);
                st.set(d + 1, hi);
            } else if op == mov32 {
                st.set(d, st.get(s));
            } else {
                st.set(d, None);
            }
        } else if let Some(off) = branch_offset(w, img.isa) {
            // A branch out of the function is an edge like a call (word-by-word reading may take
            // a literal for one: an extra edge, never a missing one).
            let target = (at + 4).wrapping_add_signed(4 * i64::from(off));
            if target < lo || target >= hi {
                out.branches_out.push((at, target));
            }
        } else if let Some((op, d, s0, s1)) = sop2(w) {
            st.set(d, None);
            out.writes_ra |= is_ra(d);
            if img.isa.computed_jump_sop2(op) {
                out.call_sites.push(at);
                out.indirect.push(at);
            }
            if s0 == 255 || s1 == 255 {
                step = 2;
            }
        } else if w >> 28 == 0xB && w >> 23 < 0x17D {
            // SOPK: `s_call_b64` and the SOPK branches carry a word offset like a SOPP branch.
            let d = (w >> 16) & 0x7f;
            st.set(d, None);
            out.writes_ra |= is_ra(d);
            if let Some(k) = img.isa.sopk_control((w >> 23) & 0x1f) {
                let target = (at + 4).wrapping_add_signed(4 * i64::from(w as u16 as i16));
                if k == SopkControl::Call {
                    out.call_sites.push(at);
                    st.regs[..32].fill(None);
                }
                if target < lo || target >= hi {
                    out.branches_out.push((at, target));
                }
            }
        } else if w >> 25 == 0x3F {
            // VOP1; v_readfirstlane_b32 (opcode 2) writes an SGPR.
            if (w >> 9) & 0xff == 2 {
                st.set((w >> 17) & 0xff, None);
                out.writes_ra |= is_ra((w >> 17) & 0xff);
            }
            if w & 0x1ff == 255 {
                step = 2;
            }
        } else if let Some((_, rd, wr)) = lanes.filter(|l| w >> 26 == l.0 && i + 1 < last) {
            let op = (w >> 16) & 0x3ff;
            if op == rd || op == wr {
                let w1 = word(code, i + 1);
                let (dst, src0) = (w & 0xff, w1 & 0x1ff);
                let lane = constant((w1 >> 9) & 0x1ff, None).filter(|l| *l < 64);
                if op == rd {
                    out.writes_ra |= is_ra(dst);
                    // v_readlane_b32 sDST, vSRC0, lane
                    let v = match (src0.checked_sub(256), lane) {
                        (Some(v), Some(l)) => st.spilled.get(&(v, l)).copied(),
                        _ => None,
                    };
                    st.set(dst, v);
                } else if let Some(l) = lane {
                    // v_writelane_b32 vDST, sSRC0, lane
                    match st.get(src0) {
                        Some(v) => st.spilled.insert((dst, l), v),
                        None => st.spilled.remove(&(dst, l)),
                    };
                }
                step = 2;
            }
        } else if smem == Some(w >> 26) && i + 1 < last {
            let sdata = (w >> 6) & 0x7f;
            let sbase = (w & 0x3f) << 1;
            out.smem_loads.push((at, w, word(code, i + 1)));
            let zero_offset = word(code, i + 1) & 0x1f_ffff == 0;
            let loaded = match st.pair(sbase) {
                Some(Ref::Slot(x)) if zero_offset => Some(Ref::Func(x)),
                Some(Ref::SlotTable(t)) if zero_offset => Some(Ref::Table(t)),
                _ => None,
            };
            // A load writes up to 16 registers from `sdata` on.
            out.writes_ra |= (15..=31).contains(&sdata);
            if sdata.is_multiple_of(2) && sdata < 104 {
                st.set_pair(sdata, loaded);
            } else {
                st.set(sdata, None);
            }
            step = 2;
        }
        i += step;
    }
    out
}
