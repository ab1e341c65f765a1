//! Where the kernarg segment pointer goes ([`Graph::slot_flow`]): the proof that no kernel whose
//! `hidden_hostcall_buffer` is dropped reads its hostcall slot, by following every value derived
//! from its kernarg segment pointer (and from the dispatch packet and queue pointers, through
//! which the kernarg segment can be found again) through every instruction of every function
//! it reaches. An over-approximation that fails closed:
//! - a value is [`Val::Clean`], the low half of a pointer into the kernarg segment at a known
//!   offset from the slot ([`Val::Kernarg`]) or of a dispatch packet or queue pointer
//!   ([`Val::Gate`]), the high half of one of those sums ([`Val::Hi`]), the carry out of the
//!   low half's sum ([`Val::Carry`]), a code address the code computed from `s_getpc_b64`
//!   ([`Val::Pc`]), a return address ([`Val::Ret`]), an image address plus an offset nothing
//!   code-derived chose ([`Val::Idx`], with its carry and high half, [`Val::ImgCarry`],
//!   [`Val::ImgHi`]), an address a relocation put in the image ([`Val::Entry`]), anything
//!   else derived from code addresses ([`Val::PcAny`]) or from the followed pointers
//!   ([`Val::Any`]);
//! - what a value decides is derived from it as well (implicit flows): SCC, `vcc`, `exec` and the
//!   hardware registers are registers here ([`super::inst`]); a conditional branch on a
//!   followed condition, a vector instruction under a followed `exec`, a followed value into an
//!   instruction that acts beyond its registers (`s_setreg_b32`, `s_sleep_var`, …), are refused;
//!   `s_cselect`, a lane a register chooses and a load's high half add what they depend on;
//! - a VGPR's value is split into what the lanes `exec` enables hold and what the others hold,
//!   and a write replaces the first only where the instruction fills its destination in every
//!   lane it runs in ([`super::flow_exec`]): anything else joins what the register held;
//! - a load's destinations hold what they held or what it returns until a wait settles it, and
//!   a write to them meanwhile may be overwritten when it lands ([`super::flow_wait`]);
//! - a load through a kernarg pointer is checked against the slot (8 bytes) and the kernarg
//!   segment's bounds; one through `Any`, through a register offset, or a kernarg pointer in a
//!   buffer resource, FLAT, GLOBAL, SCRATCH or image address is refused;
//! - any tracked value that leaves the registers (a store, an atomic, LDS, an export, a message)
//!   is refused, but for an exact code or data address, a return address and [`Val::Entry`];
//!   so is relative register indexing while anything is tracked, an instruction no format
//!   matches;
//! - a load through a code-derived address reads the image's own bytes when the offset is one
//!   nothing code-derived chose (nothing followed, or [`Val::Entry`] where a relocation may have
//!   put a data address), and a code-derived value otherwise (an identity table indexed by a
//!   code address's bits launders nothing: the tenth review's `lutret6`, `lutko6`); a store at
//!   an address a code address's bits chose is refused ([`place`]);
//! - where a call, jump or return goes is a must-analysis beside this one
//!   ([`super::flow_marks`]): a function's start computed exactly, a function table's entry, or
//!   (a return) the return address, on every path; anything else is refused;
//! - once a call or jump goes through a function table's entry, which is trusted to hold a
//!   function's start the image names, every other kernel of the image (what may write the
//!   table) is followed as well, from its descriptor's registers, its kernarg segment pointer
//!   as [`super::flow_state::Gate::Args`] (a load of an argument that may hold a runtime
//!   pointer, or outside the segment, gives a followed value: `hidden_queue_ptr` leads to the
//!   packet's `kernel_object`, the twelfth review's `queuekd`): what it makes of a code address is refused where it leaves the registers,
//!   and any store into the image (at an image address: where a table lies) or of any code or
//!   data address (read back, it is a value nothing follows, from which a table's address or
//!   an address inside a function can be computed: the eleventh review's `retspill`, `fnspill`)
//!   is refused, so that no code the proof follows writes a table (the tenth review's
//!   `tabshift`, an entry plus a constant stored over another);
//! - each function has its own entry state (what every call or jump to its exact start leaves,
//!   and, where its address is taken, what every call through a table leaves) and its own return
//!   state, to a fixpoint ([`pass`]); after a call the caller continues with what its callee's
//!   returns leave (any function's, through a table), where the callee's own code does not show
//!   that it keeps a register ([`super::flow_call`]: the calling convention is not assumed); a
//!   tail call returns for its function what its target's returns leave.
//!
//! Not seen, by construction: a code address the host computes into the middle of a function
//! (no proof over the image can follow the host), or a table's address it hands the device (a
//! store through a pointer the host passes is not followed: a table holds what its relocations
//! and the host put there); what [`super::flow_marks`] assumes of tables; memory reached
//! through pointers the flow does not follow is not the kernarg segment (a program that searches
//! memory for it is not followed); timing is no channel.
//!
//! Sources: llvm `AMDGPUUsage.rst` ("Kernel Descriptor", "Initial Kernel Execution State",
//! "Call Convention", "Code Object V5 Metadata" for the hidden-argument layout), HSA runtime
//! `hsa.h` (`hsa_kernel_dispatch_packet_t`: `kernarg_address` at byte 40, `completion_signal` at
//! 56), ROCR `amd_hsa_queue.h` (`amd_queue_t`, which leads to the packet ring).

use std::collections::BTreeMap;

use super::decode::decode;
use super::flow_call;
use super::flow_entered;
use super::flow_entry::{kernel_entry, ArgSegment, FlowRefusal, FlowRoot};
use super::flow_exec;
use super::flow_marks;
use super::flow_state::{join, State, Val};
use super::flow_wait;
use super::inst::{Gen, Inst, Op, Reg, V};
use super::{Graph, Isa};

mod pass;
mod place;
mod step;
use pass::{Dest, Out, Rets};

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
    /// The analysed functions by start.
    fn_at: std::collections::HashMap<u64, u32>,
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
    /// The low halves of the slots (8 bytes each) of the image's data relocations that may put
    /// an address other than a function's start there, sorted: where a load from the image may
    /// read a data address ([`Val::Entry`]).
    relocs: Vec<u64>,
    /// The first store into the image (at an image address): it may write a function table.
    image_store: Option<u64>,
    /// The first store of a code or data address (an exact one, a return address,
    /// [`Val::Entry`]): memory may then hold the low half of an image address, which a load
    /// reads back as nothing followed (the eleventh review's `retspill`, `fnspill`).
    stored_code: Option<u64>,
    /// Each kernel followed only because a table call is taken ([`super::flow_state::Gate::Args`]
    /// indexes it): its kernarg segment.
    args: Vec<ArgSegment>,
    /// The registers the last instruction stepped writes late, with what it writes and whether
    /// it fills them ([`super::flow_wait::settle`]).
    issued: Vec<(Reg, Val, bool, bool)>,
    /// XNACK may be on (the code object's `e_flags` say on or any, or, before code object v4,
    /// on): a faulting clause of vector memory instructions is replayed.
    xnack: bool,
    /// gfx940, gfx941, gfx942, gfx950 (llvm `hasVDecCoExecHazard`): a vector ALU read of an SGPR a
    /// vector ALU instruction wrote needs wait states ([`flow_wait::coexec`]).
    coexec: bool,
}

/// Why the hazards of code object `e_flags`' processor, with kernels of `lanes`, are not followed
/// by this rcclfix, if they are not: gfx10.1's (llvm `AMDGPU.td`, `FeatureGFX10_1_Bugs`: a VMEM
/// or SMEM instruction reads its SGPRs after a later write, `v_cmpx` writes `exec` before an
/// earlier read, and more; the twenty-first review's `vmemwar`, `smemwar`) and gfx11 wave64's
/// (llvm `GCNHazardRecognizer.cpp`, `fixVALUMaskWriteHazard`, `fixVALUPartialForwardingHazard`;
/// its `vmask`). gfx12's are [`super::flow_alu`]'s, gfx94x's SGPR one [`flow_wait::coexec`]'s.
fn hazards_unfollowed(e_flags: u32, gen: Gen, lanes: Lanes) -> Option<String> {
    let name = crate::scan::amdgpu::mach_name(e_flags & 0xff).unwrap_or("");
    if matches!(
        name,
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic"
    ) {
        return Some(format!(
            "{name}'s hardware hazards (gfx10.1's: an SGPR a memory instruction reads late, exec a v_cmpx writes early) are not followed by this rcclfix"
        ));
    }
    if gen == Gen::G11 && lanes != Lanes::Wave32 {
        return Some(
            "gfx11 wave64's hazards (an SGPR a VALU read as a lane mask written by an SALU, partial forwarding) are not followed by this rcclfix".into(),
        );
    }
    None
}

/// Whether code object `e_flags`' processor is one of gfx94x (`coexec` of [`Ctx`]).
fn coexec(e_flags: u32) -> bool {
    matches!(
        crate::scan::amdgpu::mach_name(e_flags & 0xff),
        Some("gfx940" | "gfx941" | "gfx942" | "gfx950" | "gfx9-4-generic")
    )
}

impl Graph {
    /// Follow the kernarg segment pointer of every kernel in `roots` through every function they
    /// reach (without entering `sinks`: the handlers `--asserts` makes trap), for the code object
    /// `data` (its executable sections are read again) of instruction set `e_flags` and code
    /// object version `cov`. See the module docs for what is refused. `args` describes each
    /// kernel's kernarg segment by its kernel descriptor's symbol ([`ArgSegment`]): what a load
    /// through the segment pointer of a kernel followed only because a table call is taken reads
    /// (a kernel not described there reads a followed value everywhere).
    ///
    /// Errors: the first [`FlowRefusal`].
    pub fn slot_flow(
        &self,
        data: &[u8],
        e_flags: u32,
        cov: u32,
        roots: &[FlowRoot],
        sinks: &[u32],
        args: &[ArgSegment],
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
        if let Some(why) = hazards_unfollowed(e_flags, gen, lanes) {
            return Err(refuse(first, 0, why));
        }
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
            fn_at: Default::default(),
            sinks: sinks
                .iter()
                .filter_map(|&k| self.nodes[k as usize].addr)
                .collect(),
            tables: Vec::new(),
            forged: None,
            forged_image: flow_marks::forged_code_address(self, &img, &sums),
            table_call: None,
            relocs: place::data_address_slots(&img),
            image_store: None,
            stored_code: None,
            args: Vec::new(),
            issued: Vec::new(),
            // EF_AMDGPU_FEATURE_XNACK_V3 (on), _ANY_V4 and _ON_V4 all set 0x100 (llvm
            // `AMDGPUUsage.rst`, "ELF Header").
            xnack: e_flags & 0x100 != 0,
            coexec: coexec(e_flags),
        };
        let funcs = cx.enter(&reach, sinks, &img, &sums, false)?;
        // Processors with architected SGPRs (gfx94x, gfx95x, gfx12) find their workgroup IDs
        // in ttmp7–ttmp9 (llvm `AMDGPUUsage.rst`, "Initial Kernel Execution State").
        let architected = gen == Gen::G12
            || crate::scan::amdgpu::mach_name(e_flags & 0xff)
                .is_some_and(|n| n.starts_with("gfx94") || n.starts_with("gfx95"));
        let mut entries = Vec::new();
        for r in roots {
            entries.push((r.node, kernel_entry(r, self, architected, None)?));
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
        // Each kernel descriptor symbol's segment, the first one `args` lists for it.
        let mut segments: std::collections::HashMap<&str, &ArgSegment> = Default::default();
        for a in args {
            segments.entry(a.kd.as_str()).or_insert(a);
        }
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
            let Ok(k) = u16::try_from(cx.args.len()) else {
                return Err(refuse(
                    name,
                    *kd_addr,
                    "a function table's entry is called, and the image has more kernels than this rcclfix follows".into(),
                ));
            };
            let segment = segments.get(name.as_str()).copied().cloned();
            cx.args.push(segment.unwrap_or_default());
            entries.push((node, kernel_entry(&r, self, architected, Some(k))?));
            lanes.push(wave32(&kd));
            all.push(node);
        }
        let more = all.len() > roots.len();
        cx.lanes = Lanes::of(&lanes);
        if let Some(why) = hazards_unfollowed(e_flags, gen, cx.lanes) {
            return Err(refuse(first, 0, why));
        }
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
        let owner = |pc: u64| {
            self.nodes
                .iter()
                .find(|n| n.addr.is_some_and(|a| a <= pc && pc < n.end))
                .map_or(String::new(), |n| n.name.clone())
        };
        if let Some(pc) = cx.image_store {
            return Err(refuse(
                &function,
                at,
                format!("control goes to an entry of a function table, and code stores into the image at 0x{pc:x} in {}: it may write the table", owner(pc)),
            ));
        }
        if let Some(pc) = cx.stored_code {
            return Err(refuse(
                &function,
                at,
                format!("control goes to an entry of a function table, and a code or data address leaves the registers at 0x{pc:x} in {}: read back from memory it is a value nothing follows, from which code may compute a table's address or an address inside a function", owner(pc)),
            ));
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

    /// Where a call or jump `inst` at `pc` goes, from the state `st` before it: the start of a
    /// function of this pass computed exactly (or `s_call_b64`'s constant target), the
    /// function's own return address, or anything else (a table entry: [`Dest::Any`]).
    fn dest(&self, inst: &Inst, pc: u64, next: u64, st: &State) -> Dest {
        let at = |t: u64| self.fn_at.get(&t).map_or(Dest::Any, |&f| Dest::Fn(f));
        let Some(&(r, _)) = inst.reads.first() else {
            let w = self.words_at(pc).map_or(0, |(w, i)| w[i]);
            return at(next.wrapping_add_signed(4 * i64::from(w as u16 as i16)));
        };
        match pass::exact_target(st, r) {
            Some(z) => at(z),
            None if inst.op != Op::Call && pass::is_return_pair(st, r) => Dest::Return,
            None => Dest::Any,
        }
    }

    /// Analyse function `f` from `entry`, a call continuing with what its callee's returns leave
    /// (`rets`); returns where its calls and jumps go with which state, and its return states.
    fn function(&mut self, f: u32, entry: &State, rets: &Rets) -> Result<Out, FlowRefusal> {
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
        let mut out = Out::default();
        let call = |out: &mut Out, d: Dest, s: State| {
            out.calls.entry(d).or_default().join_from(&s);
        };
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
                // A read inside a hazard window may see what a register held before its last
                // write ([`flow_wait::read_stale`]): the instruction's marks and values come from
                // that, and so does where it sends control (the twentieth review's
                // `setpcstale`: an `s_setpc_b64` through a pair a scalar write has not landed
                // in).
                let before = st.clone();
                let stale = flow_wait::read_stale(&inst, &st);
                if let Some((patched, _)) = &stale {
                    st = patched.clone();
                }
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
                let dest = match inst.op {
                    Op::Call | Op::Jump | Op::Return => self.dest(&inst, pc, next, &st),
                    _ => Dest::Any,
                };
                let mut made = flow_marks::made(&inst, pc, next, &st, &self.tables, &key, wave32);
                // What the instruction does to exec, and the lanes as it runs (a call's callee
                // is entered with them).
                let exec = flow_exec::transition(&inst, &st, wave32 == Some(true));
                made.extend(flow_exec::made(&inst, &st, exec));
                made.extend(flow_entered::made(
                    &inst,
                    &st,
                    pc,
                    exec,
                    wave32 == Some(true),
                ));
                let wide = flow_exec::wide(&st);
                let callee = |st: &State| {
                    let mut s = flow_marks::callee_view(&inst, st);
                    flow_exec::to_callee(&mut s, wide);
                    s
                };
                // What this function may write, for its callers ([`pass::Writes`]): what the
                // decoder lists, by format for an opcode it does not know; anything where
                // the registers written are not in the encoding.
                let within = flow_entered::within(&st.1);
                if matches!(inst.op, Op::Relative | Op::Opaque | Op::Fork | Op::Unknown) {
                    out.writes.all = true;
                } else {
                    // A VGPR written where `exec` may hold a lane the function was not entered
                    // with, or by a lane write (which ignores `exec`), may change such a lane.
                    let lane = matches!(inst.op, Op::Merge { .. });
                    let within = !lane && within;
                    for &(r, n) in inst.writes.iter().chain(&inst.kills) {
                        out.writes.regs.extend(r..r.saturating_add(n));
                        if r < 108 && r.saturating_add(n) > 106 {
                            out.writes.regs.insert(super::inst::VCCZ);
                        }
                        if !within {
                            out.writes.wide.extend(
                                (r..r.saturating_add(n)).filter(|&k| (V..V + 256).contains(&k)),
                            );
                        }
                    }
                }
                if matches!(inst.op, Op::Call | Op::Jump) && !within {
                    out.outside.insert(dest);
                }
                self.issued.clear();
                let mut flow = self
                    .step(&inst, pc, next, &mut st)
                    .map_err(|r| refuse(pc, r))?;
                if let Some((_, keys)) = &stale {
                    flow_wait::unread_stale(&inst, &mut st, &before, keys);
                }
                // The marks a load makes of its destinations wait until it is done.
                let mut held = Vec::new();
                made.retain(|&(r, c)| {
                    if !self.issued.iter().any(|&(k, ..)| k == r) {
                        return true;
                    }
                    held.extend(c.map(|c| (r, c)));
                    false
                });
                flow_marks::apply(&inst, &mut st, made, &key);
                flow_exec::apply(exec, &mut st);
                flow_wait::settle(&inst, exec, &mut st, &self.issued, &held)
                    .map_err(|r| refuse(pc, r))?;
                // gfx9's vccz keeps what a write of half of vcc leaves out: it may hold what
                // any write of vcc left ([`super::inst::VCCZ`]).
                if self.gen == Gen::G9 && (inst.may_write(106) || inst.may_write(107)) {
                    let z = super::inst::VCCZ;
                    let v = join(st.get(z), join(st.get(106), st.get(107)));
                    st.set(z, v);
                }
                // What an earlier store may still read as data: the same as a store of it. A
                // vector memory store of more than 64 bits reads its data late (llvm
                // `GCNHazardRecognizer::createsVALUHazard`: FLAT, MUBUF/MTBUF, MIMG; not DS or
                // exports); an operand whose width the decoder does not know counts as wide.
                let vmem = inst.counts & super::inst::cnt::LOAD != 0;
                let data: Vec<(Reg, u16)> = if inst.vector && inst.op == Op::Mem && vmem {
                    inst.reads
                        .iter()
                        .filter(|r| !inst.addr.contains(r) && r.0 >= super::inst::V && r.1 > 2)
                        .copied()
                        .collect()
                } else {
                    Vec::new()
                };
                // An MFMA reads its sources late; with XNACK on, a faulting clause of vector
                // memory instructions is replayed and reads its addresses again (llvm
                // `GCNHazardRecognizer::checkSoftClauseHazards`).
                let strict: Vec<(Reg, u16)> = if inst.reads_late {
                    inst.reads.clone()
                } else {
                    Vec::new()
                };
                let addr = if self.xnack {
                    inst.addr.clone()
                } else {
                    Vec::new()
                };
                let clause = (inst.vector && inst.op == Op::Mem && vmem).then_some(addr.as_slice());
                let (late, strict_late) = flow_wait::windows(
                    &inst,
                    &mut st,
                    &before,
                    &data,
                    &strict,
                    clause,
                    self.gen.m0(),
                );
                if self.gen == Gen::G12 {
                    super::flow_alu::after(&inst, &mut st, &before);
                }
                if self.coexec {
                    flow_wait::coexec(&inst, &mut st, &before);
                }
                if self.sensitive(late) {
                    return Err(refuse(
                        pc,
                        "a value that may leave the registers is written where an earlier store of more than 64 bits may still read its data".into(),
                    ));
                }
                if late.code() {
                    self.stored_code.get_or_insert(pc);
                }
                if strict_late != Val::Clean {
                    return Err(refuse(
                        pc,
                        "a followed value is written where an earlier MFMA may still read its sources, or a replayed clause its address (XNACK)".into(),
                    ));
                }
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
                    // A return (through the function's own return address, in any pair),
                    // or a tail call, which returns for this function.
                    Op::Return | Op::Jump => {
                        if dest == Dest::Return {
                            out.rets.join_from(&st);
                        } else {
                            call(&mut out, dest, callee(&st));
                            out.tails.push((dest, flow_call::idents(&st.1)));
                        }
                        goes_on = false;
                    }
                    Op::Call if flow == Flow::Stops => {
                        goes_on = false;
                    }
                    Op::Call => {
                        call(&mut out, dest, callee(&st));
                        let w = rets.writes_of(dest);
                        flow_call::returned(
                            &mut st,
                            rets.of(dest),
                            &|r| w.may(r),
                            &|r| w.may_wide(r),
                            wide,
                        );
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
        Ok(out)
    }
}
