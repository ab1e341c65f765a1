//! One instruction's effect on the followed values ([`Ctx::step`]): what it writes, what it
//! refuses (see [`super`]'s module docs for the rules), and the loads it checks against the slot.

use super::super::flow_entry::load_value;
use super::super::flow_exec;
use super::super::flow_state::Code;
use super::super::flow_state::{
    degrade, is_vgpr, join, lane_key, out_key, pair_holds, wrap, Gate, State, Val,
};
use super::super::inst::{Gen, Inst, Op, Reg, EXEC, HWREG, SCC, V};
use super::{place, Ctx, Flow};

impl Ctx<'_> {
    /// Apply one instruction to `st`. Errors: why it is refused.
    pub(super) fn step(
        &mut self,
        inst: &Inst,
        pc: u64,
        next: u64,
        st: &mut State,
    ) -> Result<Flow, String> {
        let tracked = |st: &State| st.tracked();
        // A lanewise instruction reads and writes only the VGPR lanes exec enables; one that
        // fills its destination replaces what they held; with every lane on (a prologue's
        // s_or_saveexec) it reads the others too and may write them
        // ([`super::super::flow_exec`]).
        let lanewise = inst.vector && inst.lanewise;
        // gfx9's AGPRs share the VGPRs' numbers here (`a4` is `v4`): a write to one replaces
        // nothing of the other, so no write there replaces a register's value (the thirteenth
        // review's `agpr2`).
        let fills = inst.full && self.gen != Gen::G9;
        let wide = flow_exec::wide(st);
        let killed = |k: Reg| {
            inst.kills
                .iter()
                .any(|&(r, n)| (r..r.saturating_add(n)).contains(&k))
        };
        let rd = |st: &State, r: (Reg, u16)| {
            if lanewise && !wide {
                st.range_in(r)
            } else {
                st.range(r)
            }
        };
        // A write of register `k`, exact when the instruction certainly writes it (a VGPR: only
        // when it fills it, and then only the lanes exec enables). One that lands late (a load)
        // only joins `v` in; it is pending until a wait ([`super::super::flow_wait`]), which
        // `issued` tells with whether it would have been exact.
        let late = inst.counts != 0;
        let issued = std::cell::RefCell::new(Vec::new());
        // With every lane on ([`flow_exec::ALL_ON`]), a write that fills its destination
        // replaces every lane: inside the split, outside, and each lane set one by one.
        let every = flow_exec::all_on(st);
        let put = |st: &mut State, k: Reg, v: Val, exact: bool| {
            if is_vgpr(k) && lanewise {
                let all = exact && fills && every;
                if late {
                    issued
                        .borrow_mut()
                        .push((k, v, exact && fills && !wide, all));
                } else if all {
                    st.write_all(k, v);
                    return;
                }
                st.write_in(k, v, exact && fills && !late);
                if wide {
                    let o = st.out(k);
                    st.set(out_key(k), join(o, v));
                }
            } else {
                if late {
                    issued.borrow_mut().push((k, v, exact && k < V, false));
                }
                st.write(k, v, exact && !late);
            }
        };

        let read = inst
            .reads
            .iter()
            .fold(Val::Clean, |acc, &r| join(acc, rd(st, r)));
        let generic = |st: &mut State, v: Val| {
            if v == Val::Clean {
                for &(r, n) in &inst.kills {
                    for k in r..r.saturating_add(n) {
                        put(st, k, Val::Clean, true);
                    }
                }
            } else {
                for &(r, n) in &inst.writes {
                    for k in r..r.saturating_add(n) {
                        // A VGPR it fills gets the value alone; anything else may keep what
                        // it held.
                        put(st, k, degrade(v), is_vgpr(k) && killed(k));
                    }
                }
            }
        };
        let describe = |v: Val| match v {
            Val::Kernarg(d) => format!("a pointer to the kernarg segment (slot {d:+})"),
            Val::Gate(Gate::Dispatch, _) => "the dispatch packet pointer".into(),
            Val::Gate(Gate::Queue, _) => "the queue pointer".into(),
            Val::Gate(Gate::Args(_), _) => {
                "the kernarg segment pointer of a kernel followed because a table call is taken"
                    .into()
            }
            Val::Pc(a) => format!("a computed code address (0x{a:x})"),
            Val::PcAny | Val::ImgCarry(_) | Val::ImgHi => {
                "an address computed from a code address".into()
            }
            Val::Idx => "an image address plus an offset".into(),
            Val::Entry => {
                "a value loaded from the image where a relocation may put an address".into()
            }
            Val::Ret => "a return address".into(),
            Val::Hi(..) => "the high half of a followed pointer".into(),
            Val::Carry(..) => "the carry out of a followed pointer's sum (SCC)".into(),
            Val::Any | Val::Clean => "a value derived from the kernarg segment pointer".into(),
        };
        if inst.vector && st.range((EXEC, 2)) != Val::Clean {
            return Err(format!(
                "a vector instruction runs under an exec mask that is {}",
                describe(st.range((EXEC, 2)))
            ));
        }
        match inst.op {
            Op::Unknown => {
                return Err(format!(
                    "an instruction this rcclfix does not decode (word 0x{:08x})",
                    self.words_at(pc).map_or(0, |(w, i)| w[i])
                ))
            }
            Op::Fork => return Err("a computed jump (s_rfe_b64, fork or join)".into()),
            Op::Opaque if tracked(st) => {
                return Err("an image instruction, gfx9's s_set_gpr_idx_on, or an s_setreg that may change how later operands are read, while a followed value is in a register".into())
            }
            Op::Opaque => generic(st, Val::Clean),
            Op::Relative => {
                // Which register it reads or writes depends on m0: a followed value written
                // somewhere unknown is refused; what it reads is anything in the registers.
                if read != Val::Clean {
                    return Err(format!(
                        "{} moved by relative register indexing",
                        describe(read)
                    ));
                }
                let all = st.0.values().fold(Val::Clean, |a, &v| join(a, v));
                generic(st, degrade(all));
            }
            Op::Mem => {
                // An address from the image's own code or data is fine; one from the kernarg
                // segment pointer is not followed here. Data may not be anything followed.
                let addr = inst
                    .addr
                    .iter()
                    .fold(Val::Clean, |acc, &r| join(acc, rd(st, r)));
                if !addr.codeish() {
                    return Err(format!(
                        "{} addresses memory this rcclfix does not follow (a buffer, FLAT, GLOBAL, SCRATCH or LDS access)",
                        describe(addr)
                    ));
                }
                let data_regs: Vec<(Reg, u16)> = inst
                    .reads
                    .iter()
                    .filter(|r| !inst.addr.contains(r))
                    .copied()
                    .collect();
                let read = data_regs
                    .iter()
                    .fold(Val::Clean, |acc, &r| join(acc, rd(st, r)));
                if self.sensitive(read) {
                    return Err(format!(
                        "{} leaves the registers (a store, an atomic, LDS, an export or a message)",
                        describe(read)
                    ));
                }
                let at = self.mem_place(inst, st, &rd);
                if !data_regs.is_empty() {
                    match at {
                        place::Place::Code => return Err(
                            "a store, an atomic or LDS access at an address computed from a code address (where it writes would tell that address)".into(),
                        ),
                        place::Place::Image(_) => {
                            self.image_store.get_or_insert(pc);
                        }
                        place::Place::Clean => {}
                    }
                }
                // A code or data address the flow allows out of the registers (an exact one, a
                // return address, an address a relocation put in the image): memory then holds
                // the low half of an image address, which a load reads back as nothing followed.
                if read.code() {
                    self.stored_code.get_or_insert(pc);
                }
                let v = self.read_at(at, 16);
                // An LDS DMA load copies what it reads into LDS, where a load reads it back as a
                // value nothing follows (the fourteenth review's `lddma`): the same as a store of
                // it.
                if inst.lds_dma && v != Val::Clean {
                    if self.sensitive(v) {
                        return Err(format!(
                            "{} may be copied into LDS (an LDS DMA load, or a memory instruction this rcclfix does not know to be a plain load)",
                            describe(v)
                        ));
                    }
                    if v.code() {
                        self.stored_code.get_or_insert(pc);
                    }
                }
                for &(r, n) in &inst.writes {
                    for k in r..r.saturating_add(n) {
                        put(st, k, v, killed(k));
                    }
                }
            }
            Op::Copy { dst, src, n } => {
                let vals: Vec<Val> = (0..n).map(|k| rd(st, (src + k, 1))).collect();
                for (k, v) in vals.into_iter().enumerate() {
                    put(st, dst + k as Reg, v, true);
                }
                // SOP1 may write exec besides: nothing tracked goes there from a copy.
            }
            Op::ReadLane { dst, src, lane } => {
                let v = match lane {
                    Some(l) => st.lane(src, self.lanes.key(l)),
                    None => st.range((src, 1)),
                };
                // Whatever else it reads chooses the lane (an SGPR, m0, src_scc …): a lane a
                // followed value chooses tells that value.
                let v = join(v, degrade(self.others(inst, st, &[src])));
                st.write(dst, v, true);
            }
            Op::Merge { dst, src, lane } => {
                let v = join(st.get(src), degrade(self.others(inst, st, &[src, dst])));
                match lane {
                    Some(l) => {
                        let whole = join(st.get(dst), v);
                        st.set(dst, whole);
                        let k = self.lanes.key(l);
                        let lv = if self.lanes.exact() {
                            v
                        } else {
                            join(st.lane(dst, k), v)
                        };
                        st.0.insert(lane_key(dst, k), lv);
                    }
                    None => st.write(dst, v, false),
                }
            }
            Op::Select { dst, a, b, n } => {
                let vals: Vec<Val> = (0..n)
                    .map(|k| {
                        join(
                            a.map_or(Val::Clean, |r| st.get(r + k)),
                            b.map_or(Val::Clean, |r| st.get(r + k)),
                        )
                    })
                    .collect();
                // Which one SCC says: a followed SCC is in the result.
                let cond = degrade(st.get(SCC));
                for (k, v) in vals.into_iter().enumerate() {
                    st.write(dst + k as Reg, join(v, cond), true);
                }
            }
            Op::AddConst {
                dst,
                src,
                c,
                raw,
                sub,
            } => {
                let s = st.get(src);
                let v = match s {
                    Val::Kernarg(d) => Val::Kernarg(wrap(d + c)),
                    Val::Gate(k, d) => Val::Gate(k, wrap(d + c)),
                    Val::Pc(a) => Val::Pc(u64::from((a as u32).wrapping_add(c as u32))),
                    // An address the image's relocations put there, plus a constant: an image
                    // address to load from, no address to store or call.
                    Val::Idx | Val::Entry => Val::Idx,
                    // A return address plus anything is no return address.
                    Val::Ret => Val::PcAny,
                    v => degrade(v),
                };
                // SCC is the carry: of a followed low half, what the high half's sum takes in.
                let carry = match (s.low(), s) {
                    (Some((b, d)), _) => Val::Carry(b, d, raw, sub),
                    (None, Val::Pc(_) | Val::Idx | Val::Entry) => Val::ImgCarry(sub),
                    (None, s) => degrade(s),
                };
                st.set(dst, v);
                st.set(SCC, carry);
            }
            Op::AddCarry { dst, src, k, sub } => match (st.get(src), st.get(SCC)) {
                (Val::Hi(b, hd), Val::Carry(cb, d, raw, csub))
                    if b == cb && wrap(hd) == d && sub == csub =>
                {
                    // The high half of the same 64-bit sum: its offset moves by the constant
                    // whose halves are `raw` and `k`.
                    let delta = (u64::from(raw) | u64::from(k) << 32) as i64;
                    let hd = if sub {
                        hd.wrapping_sub(delta)
                    } else {
                        hd.wrapping_add(delta)
                    };
                    st.set(dst, Val::Hi(b, hd));
                    st.set(SCC, Val::Any);
                }
                // The high half of an image address's sum with a constant.
                (Val::Clean | Val::ImgHi | Val::Entry, Val::ImgCarry(csub)) if csub == sub => {
                    st.set(dst, Val::ImgHi);
                    st.set(SCC, Val::PcAny);
                }
                _ => generic(st, read),
            },
            Op::Add64 { dst, src, c } => {
                let (lo, hi) = (st.get(src), st.get(src + 1));
                match (lo.low(), hi) {
                    (Some((b, d)), Val::Hi(hb, hd)) if hb == b && wrap(hd) == d => {
                        st.set(dst, Val::of_low(b, wrap(d + c)));
                        st.set(dst + 1, Val::Hi(b, hd.wrapping_add(c)));
                    }
                    (None, Val::Clean | Val::ImgHi | Val::Entry)
                        if matches!(lo, Val::Pc(_) | Val::Idx | Val::Entry) =>
                    {
                        let v = match lo {
                            Val::Pc(a) => Val::Pc((a as i64 + c) as u64 & 0xffff_ffff),
                            _ => Val::Idx,
                        };
                        st.set(dst, v);
                        st.set(dst + 1, Val::ImgHi);
                    }
                    _ => generic(st, read),
                }
            }
            Op::SLoad {
                base,
                offset,
                soffset,
                bytes,
                dst,
            } => {
                if let Some(so) = soffset {
                    if st.range((so, 1)) != Val::Clean {
                        return Err(format!("{} used as a load offset", describe(st.get(so))));
                    }
                }
                let (lo, hi) = (st.get(base), st.get(base + 1));
                // The address is both halves (and a buffer resource's size and flags): a load
                // whose high half is not that of the same sum, or whose resource words are
                // followed, reads memory at a followed address.
                let buffer = inst.reads.contains(&(base, 4));
                let rest = if buffer {
                    st.range((base + 2, 2))
                } else {
                    Val::Clean
                };
                let v = if (lo.code() || hi.code()) && lo.codeish() && hi.codeish() {
                    // Through an image address, or one a code address chose.
                    let off = soffset.is_none().then_some(offset);
                    match rest {
                        Val::Clean => self.read_at(place::place(lo, hi, off), bytes),
                        _ => Val::PcAny,
                    }
                } else {
                    let v = self.load(lo, offset, soffset.is_some(), bytes)?;
                    if pair_holds(lo, hi) && rest == Val::Clean {
                        v
                    } else {
                        join(v, Val::Any)
                    }
                };
                let regs = bytes.div_ceil(4) as Reg;
                for k in dst..dst + regs {
                    put(st, k, v, true);
                }
            }
            Op::Call if inst.reads.is_empty() => {
                // s_call_b64: a constant target, which must be a function's start.
                let w = self.words_at(pc).map_or(0, |(w, i)| w[i]);
                let t = next.wrapping_add_signed(4 * i64::from(w as u16 as i16));
                if !self.reached_lows.contains(&(t & 0xffff_ffff)) {
                    return Err(format!(
                        "s_call_b64 to 0x{t:x}, which is no function's start the call graph reached"
                    ));
                }
                for &(r, n) in &inst.kills {
                    for k in r..r + n {
                        st.set(k, Val::Clean);
                    }
                }
                if let Some(&(r, _)) = inst.kills.first() {
                    st.set(r, Val::Ret);
                }
            }
            Op::Call | Op::Jump | Op::Return => {
                let target = inst.reads.first().map_or(Val::Clean, |&(r, _)| st.get(r));
                if let Some(&(r, _)) = inst.reads.first() {
                    let hi = st.get(r + 1);
                    if !hi.codeish() {
                        return Err(format!(
                            "control goes to an address whose high half is {} (s{})",
                            describe(hi),
                            r + 1
                        ));
                    }
                    // Where it goes is the marks' to show ([`flow_marks::control`]); here only
                    // that nothing followed decides it.
                    match target {
                        v if v.codeish() => {}
                        v => {
                            return Err(format!(
                                "control goes to {} (s{r})",
                                describe(v)
                            ))
                        }
                    }
                }
                // s_swappc_b64 / s_call_b64 write the return address.
                for &(r, n) in &inst.kills {
                    for k in r..r + n {
                        st.set(k, Val::Clean);
                    }
                }
                if let (Op::Call, Some(&(r, _))) = (&inst.op, inst.kills.first()) {
                    // The return address, as the callee sees it: a return through it is one,
                    // anything computed from it a computed code address.
                    st.set(r, Val::Ret);
                }
            }
            Op::GetPc { dst } => {
                // A code address the code computed: the next instruction's.
                st.set(dst, Val::Pc(next & 0xffff_ffff));
                st.set(dst + 1, Val::Clean);
            }
            Op::Dual(ref halves) => {
                // Both halves read before either writes.
                let vals: Vec<Val> = halves
                    .iter()
                    .map(|h| {
                        let v = h.reads.iter().fold(Val::Clean, |acc, &r| join(acc, rd(st, r)));
                        if h.mov {
                            v
                        } else {
                            degrade(v)
                        }
                    })
                    .collect();
                // A move raises no exception: the hardware registers get the others' reads.
                let mut raised = Val::Clean;
                for (h, v) in halves.iter().zip(vals) {
                    for k in h.dst.0..h.dst.0 + h.dst.1 {
                        put(st, k, v, killed(k));
                    }
                    if !h.mov {
                        raised = join(raised, v);
                    }
                }
                st.write(HWREG, raised, false);
            }
            Op::AddRegs { .. } if self.image_sum(inst, st) => {}
            // Two function tables' entries compared for equality (a waterfall loop's compare of
            // the first lane's entry with every lane's): which lanes call the same function,
            // nothing of where it lies. Both must certainly be entries, by the marks: an entry
            // compared with anything else could be guessed a value at a time.
            _ if inst.eq_cmp
                && inst.reads.len() == 2
                && inst.reads.iter().all(|&(r, n)| n == 2 && entry_pair(st, r)) =>
            {
                generic(st, Val::Clean)
            }
            Op::CBranch(_) if read != Val::Clean => {
                return Err(format!("a branch decided by {}", describe(read)));
            }
            _ if inst.effect && read != Val::Clean => {
                return Err(format!(
                    "{} goes to an instruction that acts beyond its registers (s_setreg_b32, s_sleep_var, s_setvskip or one this rcclfix does not classify)",
                    describe(read)
                ));
            }
            _ => generic(st, read),
        }
        self.issued = issued.into_inner();
        Ok(Flow::On)
    }

    /// What `inst` reads other than the registers `but` (their first register): joined.
    fn others(&self, inst: &Inst, st: &State, but: &[Reg]) -> Val {
        inst.reads
            .iter()
            .filter(|(r, _)| !but.contains(r))
            .fold(Val::Clean, |acc, &r| join(acc, st.range(r)))
    }

    fn is_start_lo(&self, lo: u64) -> bool {
        self.start_lows.contains(&lo)
    }

    /// Whether a value may not leave the registers: anything but nothing followed and an exact
    /// code address of a function's start or of data (what a vtable or table store writes).
    pub(super) fn sensitive(&self, v: Val) -> bool {
        match v {
            Val::Clean => false,
            Val::Pc(a) => !self.is_start_lo(a) && self.in_code_lo(a),
            // A return address spilled with the callee-saved registers; a data address the
            // image's relocations put there ([`Ctx::stored_code`]).
            Val::Ret | Val::Entry => false,
            _ => true,
        }
    }

    fn in_code_lo(&self, lo: u64) -> bool {
        self.code
            .iter()
            .any(|(b, c)| (b & 0xffff_ffff..(b & 0xffff_ffff) + 4 * c.len() as u64).contains(&lo))
    }

    /// The value a load through `base` at `offset` (plus a register offset when `soffset`) of
    /// `bytes` gives ([`load_value`]), counting loads through a kernarg pointer.
    fn load(&mut self, base: Val, offset: i64, soffset: bool, bytes: u32) -> Result<Val, String> {
        if matches!(base, Val::Kernarg(_)) && !soffset {
            self.kernarg_loads += 1;
        }
        load_value(
            base,
            offset,
            soffset,
            bytes,
            self.bounds,
            self.cov,
            &self.args,
        )
    }
}

/// Whether the pair at `r` certainly holds a function table's entry in every lane that runs: an
/// SGPR pair marked so ([`Code::FnLo`], [`Code::FnHi`] of one entry), or a VGPR pair marked so
/// under an `exec` within the lanes its load wrote and nothing touched since ([`Code::Disj`],
/// [`Code::Same`], [`Code::Serve`] of that load).
fn entry_pair(st: &State, r: Reg) -> bool {
    let Some(m) = &st.1 else { return false };
    let (Some(&Code::FnLo(p, i)), Some(&Code::FnHi(q, j))) = (m.get(&r), m.get(&(r + 1))) else {
        return false;
    };
    if p != q || i != j {
        return false;
    }
    if r < V {
        return true;
    }
    matches!(
        m.get(&EXEC),
        Some(&(Code::Disj(l) | Code::Same(l, _) | Code::Serve(l, _))) if l == p
    )
}
