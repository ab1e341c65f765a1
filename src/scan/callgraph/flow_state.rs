//! The abstract domain of [`super::flow`]: what a register may hold ([`Val`]), how two
//! values join, and the registers' state ([`State`]), VGPR lanes kept apart where a
//! `v_writelane_b32` with a constant lane set them.

use std::collections::BTreeMap;

use super::inst::{Queue, Reg, V};

/// An abstract value: what a register may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Val {
    /// Nothing derived from the pointers followed here.
    Clean,
    /// The low half of a pointer to the kernel's hostcall slot plus this many bytes (modulo 2³²).
    Kernarg(i64),
    /// The low half of a pointer into a runtime structure from which the kernarg segment can be
    /// found, plus this many bytes.
    Gate(Gate, i64),
    /// The low half of a code address the code computed (`s_getpc_b64` plus constants).
    Pc(u64),
    /// The return address a call wrote (`s_swappc_b64`, `s_call_b64`), as the callee sees it:
    /// a return through it is a return; anything computed from it is [`Val::PcAny`].
    Ret,
    /// Derived from code addresses only, in a way not followed (bits of one, a sum of two): a
    /// load through it gives [`Val::PcAny`] (the address chose what it reads), a store at it is
    /// refused, and it may not be jumped to or leave the registers.
    PcAny,
    /// The low half of an image address ([`Val::Pc`], [`Val::Entry`]) plus an offset that nothing
    /// followed chose (`s_add_u32` of a [`Val::Pc`] and a clean register): a load there reads
    /// the image's bytes at an offset from `.0`, the same wherever the image is loaded. Anything
    /// else computed from it is [`Val::PcAny`]; it may not leave the registers.
    Idx,
    /// SCC after adding (`true`: subtracting) a constant or a clean register to the low half of
    /// an image address ([`Val::Pc`], [`Val::Idx`], [`Val::Entry`]): what the high half's
    /// `s_addc_u32` (`s_subb_u32`) takes in.
    ImgCarry(bool),
    /// The high half of an image address: `s_getpc_b64`'s, plus clean values and the
    /// [`Val::ImgCarry`] of its own low half's sum.
    ImgHi,
    /// A value loaded from the image through an image address ([`Val::Pc`], [`Val::Idx`]) where
    /// a data relocation may have put an address (a pointer to a table, or a function table's
    /// entry: a function's start, which the marks follow as a call target): it may be copied,
    /// loaded through, called through (where the marks show an entry) and compared for equality
    /// with another entry; stored, it makes memory hold an image address; plus an offset it is
    /// [`Val::Idx`], anything else computed from it [`Val::PcAny`] (the twelfth review's
    /// `entbase`).
    Entry,
    /// The high half of the followed pointer `Base` plus this many bytes (on 64 bits): what a
    /// load needs beside the low half ([`Val::Kernarg`], [`Val::Gate`]) to be the access it
    /// looks like.
    Hi(Base, i64),
    /// SCC after `s_add_u32`/`s_sub_u32` (when the `bool`) of the constant bits `u32` to the low
    /// half of `Base` plus the `i64` bytes: the carry an `s_addc_u32`/`s_subb_u32` of the high
    /// half takes in.
    Carry(Base, i64, u32, bool),
    /// Derived from the kernarg segment pointer (or anything above) in a way not followed.
    Any,
}

/// A followed pointer, as the high half of a value names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The kernarg segment pointer (offsets from the slot).
    Kernarg,
    /// A runtime structure's pointer.
    Gate(Gate),
}

impl Val {
    /// The pointer and offset a low half stands for.
    pub(super) fn low(self) -> Option<(Base, i64)> {
        match self {
            Val::Kernarg(d) => Some((Base::Kernarg, d)),
            Val::Gate(g, d) => Some((Base::Gate(g), d)),
            _ => None,
        }
    }

    /// The low half of pointer `b` plus `d` bytes.
    pub(super) fn of_low(b: Base, d: i64) -> Val {
        match b {
            Base::Kernarg => Val::Kernarg(d),
            Base::Gate(g) => Val::Gate(g, d),
        }
    }

    /// Whether this is nothing followed or derived from code addresses only.
    pub(super) fn codeish(self) -> bool {
        self == Val::Clean || self.code()
    }

    /// Whether this is derived from code addresses only (and is not [`Val::Clean`]).
    pub(super) fn code(self) -> bool {
        matches!(
            self,
            Val::Pc(_)
                | Val::PcAny
                | Val::Ret
                | Val::Idx
                | Val::ImgCarry(_)
                | Val::ImgHi
                | Val::Entry
        )
    }
}

/// Whether a load through the low half `lo` and the high half `hi` reads what `lo` alone says:
/// the high half of the same sum of the same pointer (`Hi(b, d)` beside the low half of `b`
/// plus `d`), or a code-derived (or clean) high half beside a code-derived (or clean) low half.
pub(super) fn pair_holds(lo: Val, hi: Val) -> bool {
    match lo.low() {
        Some((b, d)) => hi == Val::Hi(b, d),
        None => lo.codeish() && hi.codeish(),
    }
}

/// A 32-bit sum's offset as the low half keeps it (modulo 2³², signed).
pub(super) fn wrap(x: i64) -> i64 {
    i64::from(x as i32)
}

/// A runtime structure that leads to the kernarg segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The AQL dispatch packet (`kernarg_address` at byte 40).
    Dispatch,
    /// The queue (`amd_queue_t`: its ring holds the packets).
    Queue,
    /// The kernarg segment of kernel `.0` of those followed only because a table call is taken
    /// (it declares no slot this proof drops): a load inside the segment and clear of every
    /// argument that may hold a runtime pointer (such as `hidden_queue_ptr`, which leads to the
    /// dispatch packet's `kernel_object`) gives nothing followed, anything else a followed value
    /// ([`super::flow_entry::ArgSegment`], [`super::flow_entry::load_value`]).
    Args(u16),
}

pub(super) fn join(a: Val, b: Val) -> Val {
    match (a, b) {
        (Val::Clean, x) | (x, Val::Clean) => x,
        (x, y) if x == y => x,
        // One of two image addresses, as control flow chose (a branch on anything code-derived
        // is refused): an image address plus an offset nothing code-derived chose.
        (Val::Pc(_) | Val::Idx | Val::Entry, Val::Pc(_) | Val::Idx | Val::Entry) => Val::Idx,
        (x, y) if x.code() && y.code() => Val::PcAny,
        _ => Val::Any,
    }
}

/// What an operation not followed makes of `v`: a code address stays one (of unknown value),
/// anything else becomes [`Val::Any`].
pub(super) fn degrade(v: Val) -> Val {
    match v {
        Val::Clean => Val::Clean,
        v if v.code() => Val::PcAny,
        _ => Val::Any,
    }
}

/// Registers that hold anything but [`Val::Clean`]; VGPR lanes a `v_writelane_b32` set with a
/// constant lane are kept apart ([`lane_key`]), so that a value spilled to one lane and read back
/// from it is not mixed with the other lanes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct State(
    pub(super) BTreeMap<Reg, Val>,
    /// Where control may go ([`super::flow_marks`]): `None` until a path reaches the state.
    pub(super) Marks,
    /// The registers a load (or a message that answers) may still write ([`Pend`]).
    pub(super) Pending,
    /// Hazard windows: what an instruction may still read, or read stale ([`Windows`]).
    pub(super) Windows,
);

/// The key of lane `l` of VGPR `v` (`v` ≥ [`V`]) in a [`State`].
pub(super) fn lane_key(v: Reg, l: u8) -> Reg {
    LANES + (v - V) * 64 + Reg::from(l)
}

/// The first lane key.
pub(super) const LANES: Reg = 1024;

/// The key, in a [`State`]'s marks, that says of lane key `k` ([`lane_key`]) that the lane, were
/// it inside the split, holds what the register's own key holds ([`Code::Inside`]).
pub(super) fn inside_key(k: Reg) -> Reg {
    INSIDE + (k - LANES)
}

/// The first [`inside_key`] (after the 256 × 64 lane keys).
pub(super) const INSIDE: Reg = LANES + 256 * 64;

/// The key of what VGPR `v` (`v` ≥ [`V`]) holds in the lanes outside the split's mask (`exec`, but
/// where a prologue turned every lane on: [`super::flow_exec`]); the register's own key holds the
/// lanes inside it. Absent: nothing followed there.
pub(super) fn out_key(v: Reg) -> Reg {
    OUT + (v - V)
}

/// The first [`out_key`].
pub(super) const OUT: Reg = 512;

/// The register a [`State`] key belongs to: a VGPR's own number for its [`out_key`] and its
/// lanes' keys ([`lane_key`]), the key itself otherwise.
pub(super) fn base(k: Reg) -> Reg {
    if k >= INSIDE {
        V + (k - INSIDE) / 64
    } else if k >= LANES {
        V + (k - LANES) / 64
    } else if (OUT..OUT + 256).contains(&k) {
        V + (k - OUT)
    } else {
        k
    }
}

/// Whether `r` is a VGPR's own key (not an [`out_key`] or a lane's).
pub(super) fn is_vgpr(r: Reg) -> bool {
    (V..OUT).contains(&r)
}

impl State {
    /// A state some path reaches with nothing followed in any register and no mark: where a
    /// kernel starts ([`super::flow_entry`]) before its descriptor's registers are set.
    pub(super) fn reached() -> State {
        State(
            Default::default(),
            Some(Default::default()),
            Default::default(),
            Default::default(),
        )
    }

    pub(super) fn get(&self, r: Reg) -> Val {
        self.0.get(&r).copied().unwrap_or(Val::Clean)
    }

    pub(super) fn set(&mut self, r: Reg, v: Val) {
        if v == Val::Clean {
            self.0.remove(&r);
        } else {
            self.0.insert(r, v);
        }
    }

    /// Lane `l` of VGPR `v`: its own value when one was set, else the whole register's (inside
    /// or outside `exec`: which one lane `l` is, is not known).
    pub(super) fn lane(&self, v: Reg, l: u8) -> Val {
        self.0
            .get(&lane_key(v, l))
            .copied()
            .unwrap_or_else(|| join(self.get(v), self.out(v)))
    }

    /// What VGPR `v` holds in the lanes outside `exec` (outside the split's mask).
    pub(super) fn out(&self, v: Reg) -> Val {
        if is_vgpr(v) {
            self.get(out_key(v))
        } else {
            Val::Clean
        }
    }

    /// A write of VGPR `r` in the lanes inside `exec` (the split's mask) only: `exact` when it
    /// replaces what every one of them held (a [`super::inst::Inst::full`] write,
    /// [`super::flow_exec`]). The lanes set one by one may be either, so they only join `v`.
    pub(super) fn write_in(&mut self, r: Reg, v: Val, exact: bool) {
        if !is_vgpr(r) {
            self.write(r, v, exact);
            return;
        }
        for (k, x) in self.lanes_of(r) {
            self.set(k, join(x, v));
            // Each lane set one by one holds `v` if it is inside, what it held if not: a
            // lanewise read (inside) sees `v` there, any other read both.
            if exact {
                if let Some(m) = self.1.as_mut() {
                    m.insert(inside_key(k), Code::Inside);
                }
            }
        }
        if exact {
            self.set(r, v);
        } else {
            let old = self.get(r);
            self.set(r, join(old, v));
        }
    }

    /// A write of VGPR `r` that replaces every lane (with every lane on,
    /// [`super::flow_exec::ALL_ON`]): inside the split, outside, and each lane set one by one.
    pub(super) fn write_all(&mut self, r: Reg, v: Val) {
        if !is_vgpr(r) {
            self.write(r, v, true);
            return;
        }
        for (k, _) in self.lanes_of(r) {
            self.0.remove(&k);
        }
        self.set(r, v);
        self.set(out_key(r), v);
    }

    pub(super) fn lanes_of(&self, v: Reg) -> Vec<(Reg, Val)> {
        if !(V..LANES).contains(&v) {
            return Vec::new();
        }
        self.0
            .range(lane_key(v, 0)..=lane_key(v, 63))
            .map(|(&k, &x)| (k, x))
            .collect()
    }

    /// A write of the whole register `r`: exact (its lanes are gone) or possible (they may
    /// hold `v` as well).
    pub(super) fn write(&mut self, r: Reg, v: Val, exact: bool) {
        // A vector register is written only in the lanes `exec` enables (and DPP's row and bank
        // masks): here never certainly overwritten, in any lane (a write that replaces the lanes
        // exec enables is [`State::write_in`]). AGPRs share the VGPRs' numbers, so a write to
        // one never clears the other either.
        let exact = exact && r < V;
        let lanes = self.lanes_of(r);
        if exact {
            for (k, _) in lanes {
                self.0.remove(&k);
            }
            self.set(r, v);
        } else {
            for (k, x) in lanes {
                self.set(k, join(x, v));
            }
            let old = self.get(r);
            self.set(r, join(old, v));
            if is_vgpr(r) {
                // Any lane: those outside exec too.
                let out = self.out(r);
                self.set(out_key(r), join(out, v));
            }
        }
    }

    /// Join `other` in; whether anything changed.
    pub(super) fn join_from(&mut self, other: &State) -> bool {
        let before = self.clone();
        // A lane set on one side only holds, on the other, that side's whole register.
        let mut keys: Vec<Reg> = self.0.keys().chain(other.0.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        let whole = |st: &State, k: Reg| {
            if k >= LANES {
                st.0.get(&k).copied().unwrap_or_else(|| {
                    let v = V + (k - LANES) / 64;
                    join(st.get(v), st.out(v))
                })
            } else {
                st.get(k)
            }
        };
        let vals: Vec<(Reg, Val)> = keys
            .iter()
            .map(|&k| (k, join(whole(&before, k), whole(other, k))))
            .collect();
        for (k, v) in vals {
            if k >= LANES && v == Val::Clean {
                // Clean lane over a tracked register: keep the entry (it says the lane is clean).
                self.0.insert(k, v);
            } else {
                self.set(k, v);
            }
        }
        join_pending(&mut self.2, &other.2, self.1.is_none(), other.1.is_none());
        self.3.join_from(&other.3);
        join_marks(&mut self.1, &other.1);
        *self != before
    }

    /// What registers `first`… hold, joined: every lane of a VGPR, inside and outside `exec`.
    pub(super) fn range(&self, (first, n): (Reg, u16)) -> Val {
        (first..first.saturating_add(n).min(LANES))
            .fold(self.lanes_in((first, n), false), |acc, r| {
                join(acc, self.out(r))
            })
    }

    /// What registers `first`… hold in the lanes inside `exec` (and the lanes set one by one,
    /// which may be there, but those that would hold the register's own value there,
    /// [`Code::Inside`]), joined: what a lanewise instruction reads ([`super::flow_exec`]).
    pub(super) fn range_in(&self, r: (Reg, u16)) -> Val {
        self.lanes_in(r, true)
    }

    /// [`State::range_in`], with every lane set one by one when `!inside`.
    fn lanes_in(&self, (first, n): (Reg, u16), inside: bool) -> Val {
        let shadowed = |k: Reg| {
            inside
                && self
                    .1
                    .as_ref()
                    .is_some_and(|m| m.get(&inside_key(k)) == Some(&Code::Inside))
        };
        (first..first.saturating_add(n).min(LANES)).fold(Val::Clean, |acc, r| {
            let whole = join(acc, self.get(r));
            self.lanes_of(r)
                .into_iter()
                .filter(|&(k, _)| !shadowed(k))
                .fold(whole, |a, (_, x)| join(a, x))
        })
    }

    /// No pending VGPR (`vgprs_only`) or register is exact any more ([`Pend::exact`]): its lanes
    /// moved, or a call ran.
    pub(super) fn inexact(&mut self, vgprs_only: bool) {
        for (&r, p) in self.2.iter_mut() {
            if !vgprs_only || is_vgpr(r) {
                p.exact = false;
                p.mark = None;
            }
            if !vgprs_only {
                p.all = false;
            }
        }
    }

    /// Whether anything is tracked (a clean lane entry is not).
    pub(super) fn tracked(&self) -> bool {
        self.0.values().any(|&v| v != Val::Clean)
    }
}

/// A register a load may still write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pend {
    /// The counters ([`super::inst::cnt`]) that must all reach zero before the load is done.
    pub(super) counts: u8,
    /// What the load writes there.
    pub(super) val: Val,
    /// Whether the register holds `val` alone once the load is done (in a VGPR's lanes inside
    /// the split): the load fills it, and on every path since, nothing wrote it and `exec`'s
    /// lanes did not move.
    pub(super) exact: bool,
    /// Whether the register holds `val` alone in every lane once the load is done: it fills it,
    /// issued with every lane on ([`super::flow_exec::ALL_ON`]), and on every path since,
    /// nothing wrote it and no call ran (a move of `exec` since changes nothing: the lanes it
    /// writes were set when it issued).
    pub(super) all: bool,
    /// The mark the load makes of the register ([`Code::FnLo`], [`Code::FnHi`]), set when it is
    /// done where [`Pend::exact`].
    pub(super) mark: Option<Code>,
    /// The in-order queue of the load ([`super::inst::Queue::None`] where two loads or paths differ).
    pub(super) queue: Queue,
    /// How many loads of that queue issued after it, on every path (at most 254): a wait that
    /// leaves no more of its counter outstanding has seen it return.
    pub(super) younger: u8,
}

/// The pending registers of a state, by register (a VGPR by its own number).
pub(super) type Pending = BTreeMap<Reg, Pend>;

/// Join `other`'s pending registers into `mine` (the two states' `unreached`: no path has
/// reached it yet, so it holds nothing). A register pending on one path only is not exact: the
/// other path's value must stay when the load is done.
pub(super) fn join_pending(
    mine: &mut Pending,
    other: &Pending,
    mine_unreached: bool,
    other_unreached: bool,
) {
    if other_unreached {
        return;
    }
    if mine_unreached {
        mine.clone_from(other);
        return;
    }
    for (r, p) in mine.iter_mut() {
        match other.get(r) {
            Some(o) => {
                p.counts |= o.counts;
                p.val = join(p.val, o.val);
                p.exact &= o.exact;
                p.all &= o.all;
                if p.mark != o.mark {
                    p.mark = None;
                }
                if p.queue != o.queue {
                    p.queue = Queue::None;
                }
                p.younger = p.younger.min(o.younger);
            }
            None => {
                p.exact = false;
                p.all = false;
                p.mark = None;
            }
        }
    }
    for (&r, o) in other {
        mine.entry(r).or_insert(Pend {
            exact: false,
            all: false,
            mark: None,
            ..*o
        });
    }
}

/// The hazard windows of a state: registers a memory instruction may still read as data
/// (`late`: instructions left, [`super::flow_wait::windows`]), and what registers held before they were overwritten, which a
/// read may still see (`stale`: by [`State`] key, the old value and instructions left). Joined
/// by union: the later end and what either side held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Windows {
    /// By register: instructions left, and whether any followed value written there is refused
    /// (`true`: an MFMA's source, an address a replayed clause may read again) or only one that
    /// may not leave the registers (`false`: a store's data).
    pub(super) late: BTreeMap<Reg, (u8, bool)>,
    /// The address registers of the vector memory instructions of the clause now issuing
    /// (with XNACK a faulting clause is replayed and reads them again): any followed value
    /// written there is refused, until an instruction that is no vector memory access ends the
    /// clause.
    pub(super) clause: std::collections::BTreeSet<Reg>,
    /// `.2`: any vector instruction may read it stale, not only the readers
    /// [`super::flow_wait::reads_stale`] names (a transcendental's destination on gfx11 and
    /// gfx12).
    pub(super) stale: BTreeMap<Reg, (Val, u8, bool)>,
    /// gfx12's SGPR hazards ([`super::flow_alu`]): by SGPR, what it held before the ALU writes
    /// that may not have landed, and their sources ([`super::inst::alu`] bits).
    pub(super) alu: BTreeMap<Reg, (Val, u8)>,
    /// The SGPR pairs (bit `k`: `s[2k:2k+1]`) a vector ALU instruction has read: where an ALU
    /// write lands late on gfx12.
    pub(super) tracked: u64,
}

impl Windows {
    /// Join `o` in.
    pub(super) fn join_from(&mut self, o: &Windows) {
        self.clause.extend(o.clause.iter().copied());
        for (&r, &(n, strict)) in &o.late {
            let m = self.late.entry(r).or_insert((n, strict));
            *m = (m.0.max(n), m.1 || strict);
        }
        for (&k, &(v, n, all)) in &o.stale {
            let m = self.stale.entry(k).or_insert((v, n, all));
            *m = (join(m.0, v), m.1.max(n), m.2 || all);
        }
        for (&k, &(v, src)) in &o.alu {
            let m = self.alu.entry(k).or_insert((v, src));
            *m = (join(m.0, v), m.1 | src);
        }
        self.tracked |= o.tracked;
    }
}

/// What a register certainly holds, as far as where control may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The low half of image address `.0` (only its low 32 bits are this register's): an
    /// `s_getpc_b64` result plus constants.
    PcLo(u64),
    /// The high half of image address `.0`, every carry into it paired with its sum.
    PcHi(u64),
    /// SCC after adding (`.2`: subtracting) the constant bits `.1` to the low half of `.0`.
    PcCarry(u64, u32, bool),
    /// The low half of image address `.0` plus a register (`s_add_u32` of two registers).
    IdxLo(u64),
    /// The high half of image address `.0` plus a register's carry.
    IdxHi(u64),
    /// SCC after adding a register to the low half of `.0`.
    IdxCarry(u64),
    /// The low half of entry `.1` of the function-table load at `.0`.
    FnLo(u64, u8),
    /// The high half of entry `.1` of the function-table load at `.0`.
    FnHi(u64, u8),
    /// Half of a return address a call of this function wrote: where that call comes back to,
    /// no return (a jump through it is refused).
    Ret,
    /// Half of this function's own return address, as every call into it wrote it
    /// ([`super::flow_marks::callee_view`]): a return through it is a return.
    RetEntry,
    /// `exec`: within the lanes that ran the vector table load at `.0` and that no write to its
    /// destinations has touched since (`W`, the lanes written; see [`super::flow_marks::made`]).
    Disj(u64),
    /// `exec` as [`Code::Disj`], and equal to the register `.1` (a copy of it).
    Same(u64, Reg),
    /// `exec` within the register `.1`, itself within the load's lanes, and every lane of `.1` that
    /// a write touched since the copy is in `exec` (a waterfall loop serving `exec`'s lanes).
    Serve(u64, Reg),
    /// A copy of `exec` made under [`Code::Disj`] of the load at `.0`.
    SavedExec(u64),
    /// On the [`super::flow_exec::mask_key`] of a scalar register: it holds half `.0` (0: the
    /// low 32 lanes, 1: the high) of the lane mask the VGPRs' split into lanes inside and
    /// outside is made by ([`super::flow_exec`]).
    Split(u8),
    /// On the [`super::flow_exec::mask_key`] of `exec`: `exec` holds every lane of the split's
    /// mask and maybe more (a prologue's `s_or_saveexec` with every lane on).
    Wide,
    /// On [`super::flow_exec::ALL_ON`]: `exec` holds every lane, on every path (unlike
    /// [`Code::Wide`], which a join keeps from either side; the sixteenth review's `joinall`).
    AllOn,
    /// On [`super::flow_entered::ENTERED`]: `exec` is the mask made at instruction `.0`, made by
    /// narrowing the mask made at `.1` ([`super::flow_entered::ENTRY`]: as the function entered).
    Since(u64, u64),
    /// On [`super::flow_entered::ENTERED`]: `exec` is the mask made at `.1` (within the one made at
    /// `.2`) less the one made at `.0` (within the one made at `.1`): an `else`.
    RestNow(u64, u64, u64),
    /// On an [`super::flow_entered::entry_key`]: the register holds half `.2` of the mask made at
    /// `.0` (within the one made at `.1`), a copy of `exec` when it was that mask.
    Part(u64, u64, u8),
    /// On an [`super::flow_entered::entry_key`]: the register holds half `.3` of the mask made at
    /// `.1` (within `.2`) less the one made at `.0`: what an `if` leaves for its `else`.
    Rest(u64, u64, u64, u8),
    /// What register `.0` held when the function was entered (a callee-saved SGPR, seeded by
    /// [`super::flow_call::seed_callee`]): at a return, the caller's own mark of `.0` still holds.
    Ident(Reg),
    /// On an [`inside_key`]: the lane, were it inside the split, holds what its register's own
    /// key holds (an exact lanewise write replaced it since it was set one by one). Dropped
    /// where `exec` may take in lanes from outside the split, and across calls.
    Inside,
}

/// The marks of a state: `None` where no path has reached it yet (every mark holds vacuously).
pub type Marks = Option<BTreeMap<Reg, Code>>;

/// Join `other` into `mine` (what both hold); whether `mine` changed.
pub(super) fn join_marks(mine: &mut Marks, other: &Marks) -> bool {
    match (mine.as_mut(), other) {
        (_, None) => false,
        (None, Some(o)) => {
            *mine = Some(o.clone());
            true
        }
        (Some(m), Some(o)) => {
            let n = m.len();
            // Every mark is what both sides hold, but [`Code::Wide`]: it says `exec` may hold more
            // than the split's mask, which the side without it holds too (its `exec` is that
            // mask), so either side's stays ([`super::flow_exec`]).
            let wide: Vec<Reg> = o
                .iter()
                .filter(|(k, c)| **c == Code::Wide && m.get(k) != Some(&Code::Wide))
                .map(|(&k, _)| k)
                .collect();
            m.retain(|k, v| o.get(k) == Some(v) || *v == Code::Wide);
            for k in &wide {
                m.insert(*k, Code::Wide);
            }
            m.len() != n || !wide.is_empty()
        }
    }
}
