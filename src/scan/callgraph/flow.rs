//! Where the kernarg segment pointer goes ([`Graph::slot_flow`]): the proof that no kernel whose
//! `hidden_hostcall_buffer` is dropped reads its hostcall slot, by following every value derived
//! from its kernarg segment pointer (and from the dispatch packet and queue pointers, through
//! which the kernarg segment can be found again) through every instruction of every function
//! it reaches. An over-approximation that fails closed:
//! - a value is [`Val::Clean`], the low half of a pointer into the kernarg segment at a known
//!   offset from the slot ([`Val::Kernarg`]) or of a dispatch packet or queue pointer
//!   ([`Val::Gate`]), the high half of one of those sums ([`Val::Hi`]), the carry out of the
//!   low half's sum ([`Val::Carry`]), a code address the code computed from `s_getpc_b64`
//!   ([`Val::Pc`]), or anything derived from those in a way not followed ([`Val::Any`]);
//! - what a value decides is derived from it as well (implicit flows): SCC, `vcc`, `exec` and the
//!   hardware registers are registers here ([`super::inst`]); a conditional branch on a
//!   followed condition, a vector instruction under a followed `exec`, a followed value into an
//!   instruction that acts beyond its registers (`s_setreg_b32`, `s_sleep_var`, …), are refused;
//!   `s_cselect`, a lane a register chooses and a load's high half add what they depend on;
//! - a load through a kernarg pointer is checked against the slot (8 bytes) and the kernarg
//!   segment's bounds; one through `Any`, through a register offset, or a kernarg pointer in a
//!   buffer resource, FLAT, GLOBAL, SCRATCH or image address is refused;
//! - any tracked value that leaves the registers (a store, an atomic, LDS, an export, a message)
//!   is refused; so is relative register indexing while anything is tracked, an instruction no
//!   format matches;
//! - where a call, jump or return goes is a must-analysis beside this one
//!   ([`super::flow_marks`]): a function's start computed exactly, a function table's entry, or
//!   (a return) the return address, on every path; anything else is refused;
//! - once a call or jump goes through a function table's entry, which is trusted to hold a
//!   function's start the image names, every other kernel of the image (what may write the
//!   table) is followed as well, from its descriptor's registers with nothing followed in its
//!   kernarg segment: what it makes of a code address is refused where it leaves the registers;
//! - a function other than a kernel starts with what every call, jump and return of the
//!   analysed code may leave in the registers (one state for all, to a fixpoint); after a call
//!   the caller continues with what it had or what any return leaves; a jump's state goes to
//!   both (a return through another pair, a tail call).
//!
//! Not seen, by construction: a code address the host computes into the middle of a function
//! (no proof over the image can follow the host); what [`super::flow_marks`] assumes (a table
//! holds what its relocations put there, a callee keeps the calling convention); memory reached
//! through pointers the flow does not follow is not the kernarg segment (a program that searches
//! memory for it is not followed); timing is no channel.
//!
//! Sources: llvm `AMDGPUUsage.rst` ("Kernel Descriptor", "Initial Kernel Execution State",
//! "Call Convention", "Code Object V5 Metadata" for the hidden-argument layout), HSA runtime
//! `hsa.h` (`hsa_kernel_dispatch_packet_t`: `kernarg_address` at byte 40, `completion_signal` at
//! 56), ROCR `amd_hsa_queue.h` (`amd_queue_t`, which leads to the packet ring).

use std::collections::BTreeMap;

use super::decode::decode;
use super::flow_entry::{kernel_entry, load_value, FlowRefusal, FlowRoot};
use super::flow_marks;
use super::flow_state::{degrade, join, lane_key, pair_holds, wrap, Gate, State, Val};
use super::inst::{Gen, Inst, Op, Reg, EXEC, SCC};
use super::{Graph, Isa};

mod pass;

/// Whether control comes back after an instruction (a call to a sink does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    On,
    Stops,
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

/// How a constant lane number names a lane, from the wave size of the kernels followed (llvm
/// `AMDGPUUsage.rst`, "Kernel Descriptor", `ENABLE_WAVEFRONT_SIZE32`; gfx9 is wave64 only): in
/// wave32 lane `l` is lane `l mod 32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lanes {
    /// Every kernel runs wave64: lanes 0–63, each its own.
    Wave64,
    /// Every kernel runs wave32: lane `l mod 32`.
    Wave32,
    /// Both: lane `l mod 32` stands for lanes `l mod 32` and `l mod 32 + 32`, written by a join.
    Mixed,
}

impl Lanes {
    /// The lanes of kernels whose wave sizes are `wave32` (true: wave32).
    fn of(wave32: &[bool]) -> Lanes {
        if wave32.iter().all(|&w| w) {
            Lanes::Wave32
        } else if wave32.iter().any(|&w| w) {
            Lanes::Mixed
        } else {
            Lanes::Wave64
        }
    }

    fn key(self, l: u8) -> u8 {
        match self {
            Lanes::Wave64 => l & 63,
            Lanes::Wave32 | Lanes::Mixed => l & 31,
        }
    }

    /// Whether a write to a lane replaces what its key held.
    fn exact(self) -> bool {
        self != Lanes::Mixed
    }
}

struct Ctx<'a> {
    g: &'a Graph,
    gen: Gen,
    lanes: Lanes,
    code: Vec<(u64, Vec<u32>)>,
    /// Loads through a kernarg pointer must stay within [lo, hi) of the slot.
    bounds: (i64, i64),
    cov: u32,
    start_lows: std::collections::HashSet<u64>,
    /// The low halves of the analysed functions' and the sinks' starts: where a call to a
    /// computed code address may go.
    reached_lows: std::collections::HashSet<u64>,
    kernarg_loads: usize,
    seen: std::collections::HashSet<u64>,
    budget: usize,
    /// The analysed functions' starts: where a computed call or jump may go.
    reached: std::collections::HashSet<u64>,
    /// The sinks' starts: a call there does not come back.
    sinks: std::collections::HashSet<u64>,
    /// The image's function tables ([`flow_marks::function_tables`]).
    tables: Vec<(u64, u64)>,
    /// Why the image may make a code address other than a function's start
    /// ([`flow_marks::forged_code_address`]).
    forged: Option<String>,
    /// [`flow_marks::forged_code_address`]'s answer, which [`Ctx::forged`] starts from.
    forged_image: Option<String>,
    /// The first call or jump taken through a function table's entry: its function and address.
    table_call: Option<(String, u64)>,
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
        let wave32 = |kd: &[u8; 64]| gen != Gen::G9 && kd[57] & (1 << 2) != 0;
        let lanes = Lanes::of(&roots.iter().map(|r| wave32(&r.kd)).collect::<Vec<_>>());
        let sums = flow_marks::getpc_sums(&img);
        let mut cx = Ctx {
            g: self,
            gen,
            lanes,
            code,
            bounds: (lo, hi),
            cov,
            start_lows: starts.iter().map(|s| s & 0xffff_ffff).collect(),
            reached_lows: Default::default(),
            kernarg_loads: 0,
            seen: Default::default(),
            budget: 200_000_000,
            reached: Default::default(),
            sinks: sinks
                .iter()
                .filter_map(|&k| self.nodes[k as usize].addr)
                .collect(),
            tables: Vec::new(),
            forged: None,
            forged_image: flow_marks::forged_code_address(self, &img, &sums),
            table_call: None,
        };
        let funcs = cx.enter(&reach, sinks, &img, &sums, false)?;
        // Processors with architected SGPRs (gfx94x, gfx95x, gfx12) find their workgroup IDs
        // in ttmp7–ttmp9 (llvm `AMDGPUUsage.rst`, "Initial Kernel Execution State").
        let architected = gen == Gen::G12
            || crate::scan::amdgpu::mach_name(e_flags & 0xff)
                .is_some_and(|n| n.starts_with("gfx94") || n.starts_with("gfx95"));
        let mut entries = Vec::new();
        for r in roots {
            entries.push((r.node, kernel_entry(r, self, architected, true)?));
        }
        cx.follow(&funcs, &entries)?;
        let Some((function, at)) = cx.table_call.clone() else {
            return Ok(FlowStats {
                functions: funcs.len(),
                instructions: cx.seen.len(),
                kernarg_loads: cx.kernarg_loads,
            });
        };
        // A table entry is trusted to be a function's start the image names: every code that
        // may write a table must be followed, so that a code address it makes other than
        // exactly (a return address plus a constant, the ninth review's `tabcall`) is refused
        // where it leaves the registers. Every other kernel of the image is followed as well,
        // from its descriptor's registers with nothing followed in its kernarg segment.
        let mut all: Vec<u32> = roots.iter().map(|r| r.node).collect();
        let mut followed: std::collections::HashSet<u32> = all.iter().copied().collect();
        let mut lanes = roots.iter().map(|r| wave32(&r.kd)).collect::<Vec<_>>();
        let kds = super::flow_entry::kernel_descriptors(data);
        for (kd_addr, _, name) in &img.objects {
            let Some(node) = name.strip_suffix(".kd").and_then(|_| self.node(name)) else {
                continue;
            };
            if sinks.contains(&node) || !followed.insert(node) {
                continue;
            }
            let kd = kds
                .get(name)
                .copied()
                .flatten()
                .filter(|(a, _)| a == kd_addr)
                .map(|(_, kd)| kd)
                .ok_or_else(|| {
                    refuse(
                        name,
                        *kd_addr,
                        "a function table's entry is called, and this kernel descriptor, which may start code that writes the table, cannot be read".into(),
                    )
                })?;
            let r = FlowRoot {
                name: name.strip_suffix(".kd").unwrap_or(name).to_string(),
                node,
                kd,
                kd_addr: *kd_addr,
                slot: 0,
                kernarg_size: 0,
            };
            entries.push((node, kernel_entry(&r, self, architected, false)?));
            lanes.push(wave32(&kd));
            all.push(node);
        }
        let more = all.len() > roots.len();
        cx.lanes = Lanes::of(&lanes);
        let reach = self.reach(&all, sinks);
        let in_context = |r: FlowRefusal| {
            FlowRefusal {
            reason: format!(
                "{} (a function table's entry is called at 0x{at:x} in {function}, so every kernel that may write the table is followed)",
                r.reason
            ),
            ..r
        }
        };
        let funcs = cx
            .enter(&reach, sinks, &img, &sums, true)
            .map_err(in_context)?;
        if let Some(why) = &cx.forged {
            return Err(refuse(
                &function,
                at,
                format!("control goes to an entry of a function table, and {why}: a table entry may hold that address"),
            ));
        }
        if more {
            cx.follow(&funcs, &entries).map_err(in_context)?;
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
        // How the marks name lanes and read exec's width, from the kernels' wave size.
        let lanes = self.lanes;
        let key = move |l: u8| lanes.exact().then(|| lanes.key(l));
        let wave32 = match lanes {
            Lanes::Wave32 => Some(true),
            Lanes::Wave64 => Some(false),
            Lanes::Mixed => None,
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
                let long_branch = flow_marks::long_branch(&inst, &st, start, end);
                if self.table_call.is_none()
                    && long_branch.is_none()
                    && flow_marks::table_call(&inst, &st)
                {
                    self.table_call = Some((name.clone(), pc));
                }
                let stops = match long_branch {
                    Some(_) => false,
                    None => flow_marks::control(
                        &inst,
                        &st,
                        &self.reached,
                        &self.sinks,
                        self.forged.as_deref(),
                    )
                    .map_err(|r| refuse(pc, r))?,
                };
                let made = flow_marks::made(&inst, pc, next, &st, &self.tables, &key, wave32);
                let mut flow = self
                    .step(&inst, pc, next, &mut st)
                    .map_err(|r| refuse(pc, r))?;
                flow_marks::apply(&inst, &mut st, made, &key);
                if stops {
                    flow = Flow::Stops;
                }
                let mut succ: Vec<u64> = Vec::new();
                let mut goes_on = true;
                match inst.op {
                    Op::Branch(off) => {
                        succ.push(next.wrapping_add_signed(4 * off));
                        goes_on = false;
                    }
                    Op::CBranch(off) => succ.push(next.wrapping_add_signed(4 * off)),
                    Op::End => goes_on = false,
                    // A return through another pair, or a tail call through s[30:31]: the
                    // state goes where either goes.
                    Op::Jump if long_branch.is_some() => {
                        succ.extend(long_branch);
                        goes_on = false;
                    }
                    Op::Return | Op::Jump => {
                        rets.join_from(&st);
                        calls.join_from(&flow_marks::callee_view(&inst, &st));
                        goes_on = false;
                    }
                    Op::Call if flow == Flow::Stops => {
                        calls.join_from(&flow_marks::callee_view(&inst, &st));
                        goes_on = false;
                    }
                    Op::Call => {
                        calls.join_from(&flow_marks::callee_view(&inst, &st));
                        let pre = st.1.clone();
                        st.join_from(ret);
                        flow_marks::after_call(&mut st, &pre, &ret.1);
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
                    // A return address plus anything is no return address.
                    Val::Ret => Val::PcAny,
                    v => degrade(v),
                };
                // SCC is the carry: of a followed low half, what the high half's sum takes in.
                let carry = match s.low() {
                    Some((b, d)) => Val::Carry(b, d, raw, sub),
                    None => degrade(s),
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
                _ => generic(st, read),
            },
            Op::Add64 { dst, src, c } => {
                let (lo, hi) = (st.get(src), st.get(src + 1));
                match (lo.low(), hi) {
                    (Some((b, d)), Val::Hi(hb, hd)) if hb == b && wrap(hd) == d => {
                        st.set(dst, Val::of_low(b, wrap(d + c)));
                        st.set(dst + 1, Val::Hi(b, hd.wrapping_add(c)));
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
                let lo = st.get(base);
                let v = self.load(lo, offset, soffset.is_some(), bytes)?;
                // The address is both halves (and a buffer resource's size and flags): a load
                // whose high half is not that of the same sum, or whose resource words are
                // followed, reads memory at a followed address.
                let buffer = inst.reads.contains(&(base, 4));
                let rest = if buffer {
                    st.range((base + 2, 2))
                } else {
                    Val::Clean
                };
                let v = if pair_holds(lo, st.get(base + 1)) && rest == Val::Clean {
                    v
                } else {
                    join(v, Val::Any)
                };
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
