//! Where a load or store through a code-derived address goes ([`Place`]), and what such a load
//! gives: the image's own bytes at an offset nothing code-derived chose (the same wherever the
//! image is loaded: nothing followed, or a table entry where a data relocation may have put an
//! address), or bytes a code address chose (a code-derived value: an identity table read with
//! the bits of a code address as its offset launders nothing, the tenth review's `lutret6` and
//! `lutko6`). Also the sums that make an image address plus an offset ([`Ctx::image_sum`]).
//!
//! Sources: llvm `AMDGPUUsage.rst` ("Code Object", "Dynamic Relocations": a data relocation
//! writes an address into the loaded image), the instruction set manuals' `s_add_u32` and
//! `s_addc_u32` (SCC is the carry of the low half's sum, which the high half's sum takes in).

use super::super::flow_state::{State, Val};
use super::super::inst::{Inst, Op, Reg, SCC};
use super::Ctx;

/// Where an address made of code-derived values points, as far as what a load there reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Nothing code-derived: memory the host handed over (not the image as far as this proof
    /// goes; a table's address the host passes is not followed).
    Clean,
    /// The image at an offset nothing code-derived chose: the low half of the exact address
    /// when known.
    Image(Option<u64>),
    /// An address the bits of a code address chose.
    Code,
}

/// The place of an address whose low half holds `lo` and high half `hi` (both
/// [`Val::codeish`]); `off` is the constant offset added when no register offset is (a load
/// through an exact `s_getpc_b64` sum reads a known address).
pub(super) fn place(lo: Val, hi: Val, off: Option<i64>) -> Place {
    let hi_ok = matches!(hi, Val::Clean | Val::ImgHi | Val::Entry);
    match (lo, hi) {
        (Val::Clean, Val::Clean) => Place::Clean,
        (Val::Pc(a), _) if hi_ok => Place::Image(off.map(|o| (a as i64 + o) as u64 & 0xffff_ffff)),
        (Val::Idx | Val::Entry, _) if hi_ok => Place::Image(None),
        _ => Place::Code,
    }
}

/// The low halves of the data relocation slots of `img`: where a relocation may put an address
/// in the image (a data address, an external symbol's, a function's start in a function table:
/// each a code or data address, which a load gives as [`Val::Entry`], the twelfth review's
/// `entbase`). Sorted, deduplicated.
pub(super) fn data_address_slots(img: &super::super::image::Image<'_>) -> Vec<u64> {
    let mut r: Vec<u64> = img
        .data_relocs
        .iter()
        .map(|(at, _)| at & 0xffff_ffff)
        .collect();
    r.sort_unstable();
    r.dedup();
    r
}

impl Ctx<'_> {
    /// What a load of `bytes` at `p` gives: [`Val::Entry`] where the 8 bytes of a data
    /// relocation slot ([`data_address_slots`]) may overlap it (anywhere, when the offset is not
    /// known and the image has any), else nothing followed; [`Val::PcAny`] at a place a code
    /// address chose.
    pub(super) fn read_at(&self, p: Place, bytes: u32) -> Val {
        let any = !self.relocs.is_empty();
        match p {
            Place::Clean => Val::Clean,
            Place::Code => Val::PcAny,
            Place::Image(None) if any => Val::Entry,
            Place::Image(None) => Val::Clean,
            Place::Image(Some(a)) => {
                let end = a + u64::from(bytes);
                let hit = self.relocs.iter().any(|&r| r < end && r + 8 > a);
                if hit {
                    Val::Entry
                } else {
                    Val::Clean
                }
            }
        }
    }

    /// The place of a memory instruction's address registers (`inst.addr`, each code-ish, read
    /// as `rd` reads them: the VGPRs' lanes `exec` enables, for a lanewise access): a run of two
    /// or more registers is a pair (low, high) and what follows it (a buffer resource's size and
    /// flags), a single register an offset; two image addresses in one address, or any
    /// code-derived offset, are [`Place::Code`].
    pub(super) fn mem_place(
        &self,
        inst: &Inst,
        st: &State,
        rd: &dyn Fn(&State, (Reg, u16)) -> Val,
    ) -> Place {
        let mut out = Place::Clean;
        for &(r, n) in &inst.addr {
            let p = if n >= 2 {
                let rest = rd(st, (r + 2, n - 2));
                if rest != Val::Clean {
                    Place::Code
                } else {
                    place(rd(st, (r, 1)), rd(st, (r + 1, 1)), None)
                }
            } else if rd(st, (r, n)) == Val::Clean {
                Place::Clean
            } else {
                Place::Code
            };
            out = match (out, p) {
                (Place::Clean, p) | (p, Place::Clean) => p,
                _ => Place::Code,
            };
        }
        out
    }

    /// Apply a sum that keeps an image address one (`s_add_u32` of an image address and a clean
    /// register, `s_addc_u32` of the high halves with that sum's carry): `true` when `inst` is
    /// one and `st` was updated, `false` to treat it as any other instruction.
    pub(super) fn image_sum(&self, inst: &Inst, st: &mut State) -> bool {
        let Op::AddRegs { dst, a, b, carry } = inst.op else {
            return false;
        };
        let (x, y) = (st.get(a), st.get(b));
        let low = |v: Val| matches!(v, Val::Pc(_) | Val::Idx | Val::Entry);
        let high = |v: Val| matches!(v, Val::ImgHi | Val::Entry);
        let one = |p: &dyn Fn(Val) -> bool| {
            (p(x) && y == Val::Clean)
                || (x == Val::Clean && p(y))
                || (x, y) == (Val::Clean, Val::Clean)
        };
        let set = |st: &mut State, d: Reg, v: Val, scc: Val| {
            st.set(d, v);
            st.set(SCC, scc);
        };
        if !carry && (low(x) || low(y)) && one(&low) {
            set(st, dst, Val::Idx, Val::ImgCarry(false));
            true
        } else if carry && st.get(SCC) == Val::ImgCarry(false) && one(&high) {
            set(st, dst, Val::ImgHi, Val::PcAny);
            true
        } else {
            false
        }
    }
}
