//! Where the kernarg segment pointer goes ([`Graph::slot_flow`]): the proof that no kernel whose
//! `hidden_hostcall_buffer` is dropped reads its hostcall slot, by following every value derived
//! from its kernarg segment pointer (and from the dispatch packet and queue pointers, through
//! which the kernarg segment can be found again) through every instruction of every function
//! it reaches. An over-approximation that fails closed:
//! - a value is [`Val::Clean`], a pointer into the kernarg segment at a known offset from the
//!   slot ([`Val::Kernarg`]), a dispatch packet or queue pointer ([`Val::Gate`]), a code address
//!   the code computed from `s_getpc_b64` ([`Val::Pc`]), or anything derived from those in a way
//!   not followed ([`Val::Any`]);
//! - a load through a kernarg pointer is checked against the slot (8 bytes) and the kernarg
//!   segment's bounds; one through `Any`, through a register offset, or a kernarg pointer in a
//!   buffer resource, FLAT, GLOBAL, SCRATCH or image address is refused;
//! - any tracked value that leaves the registers (a store, an atomic, LDS, an export, a message)
//!   is refused; so is relative register indexing while anything is tracked, an instruction no
//!   format matches, and a jump to a computed code address that is not a function's start;
//! - a function other than a kernel starts with what every call, jump and return of the
//!   analysed code may leave in the registers (one state for all, to a fixpoint); after a call
//!   the caller continues with what it had or what any return leaves.
//!
//! Not seen, by construction: a code address the host computes into the middle of a function
//! (no proof over the image can follow the host); an indirect call lands on a function's start.
//!
//! Sources: llvm `AMDGPUUsage.rst` ("Kernel Descriptor", "Initial Kernel Execution State",
//! "Call Convention", "Code Object V5 Metadata" for the hidden-argument layout), HSA runtime
//! `hsa.h` (`hsa_kernel_dispatch_packet_t`: `kernarg_address` at byte 40, `completion_signal` at
//! 56), ROCR `amd_hsa_queue.h` (`amd_queue_t`, which leads to the packet ring).

use std::collections::BTreeMap;

use super::decode::{decode, Gen, Inst, Op, Reg, V};
use super::flow_entry::{kernel_entry, load_value};
use super::{Graph, Isa};

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
    /// Derived from code addresses only, in a way not followed (e.g. a table entry's address):
    /// loads through it read the image, but it may not be jumped to or leave the registers.
    PcAny,
    /// Derived from the kernarg segment pointer (or anything above) in a way not followed.
    Any,
}

/// A runtime structure that leads to the kernarg segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The AQL dispatch packet (`kernarg_address` at byte 40).
    Dispatch,
    /// The queue (`amd_queue_t`: its ring holds the packets).
    Queue,
}

fn join(a: Val, b: Val) -> Val {
    match (a, b) {
        (Val::Clean, x) | (x, Val::Clean) => x,
        (x, y) if x == y => x,
        (Val::Pc(_) | Val::PcAny | Val::Ret, Val::Pc(_) | Val::PcAny | Val::Ret) => Val::PcAny,
        _ => Val::Any,
    }
}

/// What an operation not followed makes of `v`: a code address stays one (of unknown value),
/// anything else becomes [`Val::Any`].
fn degrade(v: Val) -> Val {
    match v {
        Val::Clean => Val::Clean,
        Val::Pc(_) | Val::PcAny | Val::Ret => Val::PcAny,
        _ => Val::Any,
    }
}

/// Registers that hold anything but [`Val::Clean`]; VGPR lanes a `v_writelane_b32` set with a
/// constant lane are kept apart ([`lane_key`]), so that a value spilled to one lane and read back
/// from it is not mixed with the other lanes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct State(BTreeMap<Reg, Val>);

/// The key of lane `l` of VGPR `v` (`v` ≥ [`V`]) in a [`State`].
fn lane_key(v: Reg, l: u8) -> Reg {
    LANES + (v - V) * 64 + Reg::from(l)
}

/// The first lane key.
const LANES: Reg = 1024;

impl State {
    fn get(&self, r: Reg) -> Val {
        self.0.get(&r).copied().unwrap_or(Val::Clean)
    }

    pub(super) fn set(&mut self, r: Reg, v: Val) {
        if v == Val::Clean {
            self.0.remove(&r);
        } else {
            self.0.insert(r, v);
        }
    }

    /// Lane `l` of VGPR `v`: its own value when one was set, else the whole register's.
    fn lane(&self, v: Reg, l: u8) -> Val {
        self.0
            .get(&lane_key(v, l))
            .copied()
            .unwrap_or_else(|| self.get(v))
    }

    fn lanes_of(&self, v: Reg) -> Vec<(Reg, Val)> {
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
    fn write(&mut self, r: Reg, v: Val, exact: bool) {
        // A vector register is written only in the lanes `exec` enables (and DPP's row and bank
        // masks): never certainly overwritten. AGPRs share the VGPRs' numbers, so a write to
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
        }
    }

    /// Join `other` in; whether anything changed.
    fn join_from(&mut self, other: &State) -> bool {
        let before = self.clone();
        // A lane set on one side only holds, on the other, that side's whole register.
        let mut keys: Vec<Reg> = self.0.keys().chain(other.0.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        let whole = |st: &State, k: Reg| {
            if k >= LANES {
                st.0.get(&k)
                    .copied()
                    .unwrap_or_else(|| st.get(V + (k - LANES) / 64))
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
        *self != before
    }

    fn range(&self, (first, n): (Reg, u16)) -> Val {
        (first..first.saturating_add(n).min(LANES)).fold(Val::Clean, |acc, r| {
            let whole = join(acc, self.get(r));
            self.lanes_of(r)
                .into_iter()
                .fold(whole, |a, (_, x)| join(a, x))
        })
    }

    /// Whether anything is tracked (a clean lane entry is not).
    fn tracked(&self) -> bool {
        self.0.values().any(|&v| v != Val::Clean)
    }
}

/// Whether control comes back after an instruction (a call to a sink does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    On,
    Stops,
}

/// One kernel whose declaration a proof drops: where its code starts and what its kernel
/// descriptor says the registers hold there.
#[derive(Debug, Clone)]
pub struct FlowRoot {
    /// The kernel's name (for messages).
    pub name: String,
    /// Its function node.
    pub node: u32,
    /// Its kernel descriptor (64 bytes, llvm `AMDGPUUsage.rst`, "Kernel Descriptor").
    pub kd: [u8; 64],
    /// The address of its kernel descriptor.
    pub kd_addr: u64,
    /// Its `hidden_hostcall_buffer` `.offset` in the kernarg segment (bytes).
    pub slot: u64,
    /// Its `.kernarg_segment_size` (bytes).
    pub kernarg_size: u64,
}

/// What the flow established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    /// Functions analysed (kernels included).
    pub functions: usize,
    /// Instructions decoded along every path, counted once per address.
    pub instructions: usize,
    /// Loads through a kernarg pointer, each checked against the slot.
    pub kernarg_loads: usize,
}

/// Why the flow refuses: the function, the instruction's address and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRefusal {
    pub function: String,
    pub at: u64,
    pub reason: String,
}

struct Ctx<'a> {
    g: &'a Graph,
    gen: Gen,
    code: Vec<(u64, Vec<u32>)>,
    /// Loads through a kernarg pointer must stay within [lo, hi) of the slot.
    bounds: (i64, i64),
    cov: u32,
    start_lows: std::collections::HashSet<u64>,
    /// The low halves of the analysed functions' and the sinks' starts: where a call to a
    /// computed code address may go.
    reached_lows: std::collections::HashSet<u64>,
    /// The low halves of the sinks' starts: a call there does not come back (they trap).
    sink_lows: std::collections::HashSet<u64>,
    kernarg_loads: usize,
    seen: std::collections::HashSet<u64>,
    budget: usize,
}

impl Graph {
    /// Follow the kernarg segment pointer of every kernel in `roots` through every function they
    /// reach (without entering `sinks`: the handlers `--asserts` makes trap), for the code object
    /// `data` (its executable sections are read again) of instruction set `e_flags` and code
    /// object version `cov`. See the module docs for what is refused.
    ///
    /// Errors: the first [`FlowRefusal`].
    pub fn slot_flow(
        &self,
        data: &[u8],
        e_flags: u32,
        cov: u32,
        roots: &[FlowRoot],
        sinks: &[u32],
    ) -> Result<FlowStats, FlowRefusal> {
        let refuse = |function: &str, at: u64, reason: String| FlowRefusal {
            function: function.to_string(),
            at,
            reason,
        };
        let first = roots.first().map_or("", |r| r.name.as_str());
        let gen = Gen::of(Isa::from_e_flags(e_flags), self.gfx12).ok_or_else(|| {
            refuse(
                first,
                0,
                "its instruction set is not decoded whole by this rcclfix".into(),
            )
        })?;
        let img = super::image::read_image(data, e_flags).map_err(|e| refuse(first, 0, e))?;
        let code = img
            .code
            .iter()
            .map(|(b, c)| {
                (
                    *b,
                    c.chunks_exact(4)
                        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                        .collect(),
                )
            })
            .collect();
        let reach = self.reach(&roots.iter().map(|r| r.node).collect::<Vec<_>>(), sinks);
        let lo = roots.iter().map(|r| -(r.slot as i64)).min().unwrap_or(0);
        let hi = roots
            .iter()
            .map(|r| r.kernarg_size as i64 - r.slot as i64)
            .max()
            .unwrap_or(0);
        let mut starts: Vec<u64> = self.nodes.iter().filter_map(|n| n.addr).collect();
        starts.sort_unstable();
        let mut cx = Ctx {
            g: self,
            gen,
            code,
            bounds: (lo, hi),
            cov,
            start_lows: starts.iter().map(|s| s & 0xffff_ffff).collect(),
            reached_lows: Default::default(),
            sink_lows: sinks
                .iter()
                .filter_map(|&k| self.nodes[k as usize].addr)
                .map(|a| a & 0xffff_ffff)
                .collect(),
            kernarg_loads: 0,
            seen: Default::default(),
            budget: 200_000_000,
        };
        let funcs: Vec<u32> = reach
            .order()
            .iter()
            .copied()
            .filter(|f| !sinks.contains(f))
            .collect();
        for &f in &funcs {
            let nd = &self.nodes[f as usize];
            if nd.addr.is_none() {
                return Err(refuse(&nd.name, 0, "it is not defined in the image".into()));
            }
            if let Some(&j) = nd.jumps.iter().chain(&nd.inner).next() {
                return Err(refuse(
                    &nd.name,
                    nd.addr.unwrap_or(0),
                    format!(
                        "its code enters {} other than at its start",
                        self.nodes[j as usize].name
                    ),
                ));
            }
            if nd.loose {
                return Err(refuse(
                    &nd.name,
                    nd.addr.unwrap_or(0),
                    "it branches into code no function holds".into(),
                ));
            }
        }
        cx.reached_lows = funcs
            .iter()
            .chain(sinks)
            .filter_map(|&f| self.nodes[f as usize].addr)
            .map(|a| a & 0xffff_ffff)
            .collect();
        let mut entries = Vec::new();
        for r in roots {
            entries.push((r.node, kernel_entry(r, self)?));
        }
        let taken = |f: u32| {
            self.address_taken.binary_search(&f).is_ok()
                || self.materialized.binary_search(&f).is_ok()
        };
        // Callee entry (every call, jump and return's state) and return state, to a fixpoint.
        let (mut callee, mut ret) = (State::default(), State::default());
        loop {
            let (mut c2, mut r2) = (callee.clone(), ret.clone());
            for &f in &funcs {
                // A kernel starts with its descriptor's registers, and with what a call leaves
                // as well when some code may call it (its address is taken).
                let entry = match entries.iter().find(|(n, _)| *n == f) {
                    Some((_, s)) if taken(f) => {
                        let mut s = s.clone();
                        s.join_from(&callee);
                        s
                    }
                    Some((_, s)) => s.clone(),
                    None => callee.clone(),
                };
                let (c, r) = cx.function(f, &entry, &ret)?;
                c2.join_from(&c);
                r2.join_from(&r);
            }
            c2.join_from(&r2.clone());
            if c2 == callee && r2 == ret {
                break;
            }
            callee = c2;
            ret = r2;
        }
        Ok(FlowStats {
            functions: funcs.len(),
            instructions: cx.seen.len(),
            kernarg_loads: cx.kernarg_loads,
        })
    }
}

impl Ctx<'_> {
    fn words_at(&self, addr: u64) -> Option<(&[u32], usize)> {
        self.code.iter().find_map(|(b, c)| {
            let end = b + 4 * c.len() as u64;
            (addr >= *b && addr < end && (addr - b).is_multiple_of(4))
                .then(|| (c.as_slice(), ((addr - b) / 4) as usize))
        })
    }

    /// Analyse function `f` from `entry`; returns the join of its call/jump states and of its
    /// return states.
    fn function(
        &mut self,
        f: u32,
        entry: &State,
        ret: &State,
    ) -> Result<(State, State), FlowRefusal> {
        let nd = &self.g.nodes[f as usize];
        let (start, end, name) = (nd.addr.unwrap_or(0), nd.end, nd.name.clone());
        let refuse = |at: u64, reason: String| FlowRefusal {
            function: name.clone(),
            at,
            reason,
        };
        let mut at_leader: BTreeMap<u64, State> = BTreeMap::new();
        at_leader.insert(start, entry.clone());
        let mut work = vec![start];
        let (mut calls, mut rets) = (State::default(), State::default());
        while let Some(leader) = work.pop() {
            let mut st = at_leader[&leader].clone();
            let mut pc = leader;
            loop {
                if pc < start || pc >= end {
                    return Err(refuse(pc, format!("control runs out of {name}")));
                }
                let Some(inst) = self.words_at(pc).map(|(w, i)| decode(self.gen, w, i)) else {
                    return Err(refuse(pc, "control reaches an address outside code".into()));
                };
                if self.budget == 0 {
                    return Err(refuse(pc, "the code is too large to follow".into()));
                }
                self.budget -= 1;
                self.seen.insert(pc);
                let next = pc + 4 * inst.words as u64;
                let flow = self
                    .step(&inst, pc, next, &mut st)
                    .map_err(|r| refuse(pc, r))?;
                let mut succ: Vec<u64> = Vec::new();
                let mut goes_on = true;
                match inst.op {
                    Op::Branch(off) => {
                        succ.push(next.wrapping_add_signed(4 * off));
                        goes_on = false;
                    }
                    Op::CBranch(off) => succ.push(next.wrapping_add_signed(4 * off)),
                    Op::End => goes_on = false,
                    Op::Return => {
                        rets.join_from(&st);
                        goes_on = false;
                    }
                    Op::Jump => {
                        calls.join_from(&st);
                        goes_on = false;
                    }
                    Op::Call if flow == Flow::Stops => {
                        calls.join_from(&st);
                        goes_on = false;
                    }
                    Op::Call => {
                        calls.join_from(&st);
                        st.join_from(ret);
                    }
                    _ => {}
                }
                for t in succ {
                    if t < start || t >= end {
                        return Err(refuse(pc, format!("a branch leaves {name} for 0x{t:x}")));
                    }
                    let changed = match at_leader.get_mut(&t) {
                        Some(s) => s.join_from(&st),
                        None => {
                            at_leader.insert(t, st.clone());
                            true
                        }
                    };
                    if changed {
                        work.push(t);
                    }
                }
                if !goes_on {
                    break;
                }
                if let Some(s) = at_leader.get_mut(&next) {
                    if s.join_from(&st) {
                        work.push(next);
                    }
                    break;
                }
                pc = next;
            }
        }
        Ok((calls, rets))
    }

    /// Apply one instruction to `st`. Errors: why it is refused.
    fn step(&mut self, inst: &Inst, pc: u64, next: u64, st: &mut State) -> Result<Flow, String> {
        let tracked = |st: &State| st.tracked();

        let read = inst
            .reads
            .iter()
            .fold(Val::Clean, |acc, &r| join(acc, st.range(r)));
        let generic = |st: &mut State, v: Val| {
            if v == Val::Clean {
                for &(r, n) in &inst.kills {
                    for k in r..r.saturating_add(n) {
                        st.write(k, Val::Clean, true);
                    }
                }
            } else {
                for &(r, n) in &inst.writes {
                    for k in r..r.saturating_add(n) {
                        st.write(k, degrade(v), false);
                    }
                }
            }
        };
        let describe = |v: Val| match v {
            Val::Kernarg(d) => format!("a pointer to the kernarg segment (slot {d:+})"),
            Val::Gate(Gate::Dispatch, _) => "the dispatch packet pointer".into(),
            Val::Gate(Gate::Queue, _) => "the queue pointer".into(),
            Val::Pc(a) => format!("a computed code address (0x{a:x})"),
            Val::PcAny => "an address computed from a code address".into(),
            Val::Ret => "a return address".into(),
            Val::Any | Val::Clean => "a value derived from the kernarg segment pointer".into(),
        };
        match inst.op {
            Op::Unknown => {
                return Err(format!(
                    "an instruction this rcclfix does not decode (word 0x{:08x})",
                    self.words_at(pc).map_or(0, |(w, i)| w[i])
                ))
            }
            Op::Fork => return Err("a computed jump (s_rfe_b64, fork or join)".into()),
            Op::Opaque if tracked(st) => {
                return Err("an image instruction or gfx9's s_set_gpr_idx_on while a followed value is in a register (its operands are not read here)".into())
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
                    .fold(Val::Clean, |acc, &r| join(acc, st.range(r)));
                if !matches!(addr, Val::Clean | Val::Pc(_) | Val::PcAny | Val::Ret) {
                    return Err(format!(
                        "{} addresses memory this rcclfix does not follow (a buffer, FLAT, GLOBAL, SCRATCH or LDS access)",
                        describe(addr)
                    ));
                }
                let data = inst
                    .reads
                    .iter()
                    .filter(|r| !inst.addr.contains(r))
                    .fold(Val::Clean, |acc, &r| join(acc, st.range(r)));
                let read = data;
                if self.sensitive(read) {
                    return Err(format!(
                        "{} leaves the registers (a store, an atomic, LDS, an export or a message)",
                        describe(read)
                    ));
                }
                generic(st, Val::Clean);
            }
            Op::Copy { dst, src, n } => {
                let vals: Vec<Val> = (0..n).map(|k| st.range((src + k, 1))).collect();
                for (k, v) in vals.into_iter().enumerate() {
                    st.write(dst + k as Reg, v, true);
                }
                // SOP1 may write exec besides: nothing tracked goes there from a copy.
            }
            Op::ReadLane { dst, src, lane } => {
                let v = match lane {
                    Some(l) => st.lane(src, l),
                    None => st.range((src, 1)),
                };
                st.write(dst, v, true);
            }
            Op::Merge { dst, src, lane } => {
                let v = st.get(src);
                match lane {
                    Some(l) => {
                        let whole = join(st.get(dst), v);
                        st.set(dst, whole);
                        st.0.insert(lane_key(dst, l), v);
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
                for (k, v) in vals.into_iter().enumerate() {
                    st.write(dst + k as Reg, v, true);
                }
            }
            Op::AddConst { dst, src, c } => {
                let wrap = |x: i64| i64::from(x as i32);
                let v = match st.get(src) {
                    Val::Kernarg(d) => Val::Kernarg(wrap(d + c)),
                    Val::Gate(k, d) => Val::Gate(k, wrap(d + c)),
                    Val::Pc(a) => Val::Pc(u64::from((a as u32).wrapping_add(c as u32))),
                    // A return address plus anything is no return address.
                    Val::Ret => Val::PcAny,
                    v => v,
                };
                st.set(dst, v);
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
                let v = self.load(st.get(base), offset, soffset.is_some(), bytes)?;
                let regs = bytes.div_ceil(4) as Reg;
                for k in dst..dst + regs {
                    st.set(k, v);
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
                    match target {
                        Val::Clean => {}
                        Val::Ret if inst.op != Op::Call => {}
                        Val::Pc(a) if self.sink_lows.contains(&a) && inst.op == Op::Call => {
                            return Ok(Flow::Stops);
                        }
                        Val::Pc(a) if self.reached_lows.contains(&a) => {}
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
            _ => generic(st, read),
        }
        Ok(Flow::On)
    }

    fn is_start_lo(&self, lo: u64) -> bool {
        self.start_lows.contains(&lo)
    }

    /// Whether a value may not leave the registers: anything but nothing followed and an exact
    /// code address of a function's start or of data (what a vtable or table store writes).
    fn sensitive(&self, v: Val) -> bool {
        match v {
            Val::Clean => false,
            Val::Pc(a) => !self.is_start_lo(a) && self.in_code_lo(a),
            // A return address spilled with the callee-saved registers.
            Val::Ret => false,
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
        load_value(base, offset, soffset, bytes, self.bounds, self.cov)
    }
}
