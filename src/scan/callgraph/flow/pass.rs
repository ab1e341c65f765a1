//! The passes of [`super::super::Graph::slot_flow`]: which functions a pass follows
//! ([`Ctx::enter`]: each followable as a whole, and where computed calls may go), and following
//! them from the kernels' entry states to a fixpoint ([`Ctx::follow`]), each function with its own
//! entry and return state, and where a call goes from the marks ([`exact_target`],
//! [`is_return_pair`]).

use super::super::flow_call;
use super::super::flow_entry::FlowRefusal;
use super::super::flow_marks;
use super::super::flow_state::{Code, State};
use super::super::inst::Reg;
use super::Ctx;
use std::collections::HashMap;

impl Ctx<'_> {
    /// The functions `reach` holds but the `sinks`, checked to be followable as wholes (defined,
    /// entered only at their start, branching only inside functions); sets where computed calls
    /// may go, the function tables and [`Ctx::forged`] from them (with `untracked`, from
    /// [`flow_marks::untracked_start`] as well).
    pub(super) fn enter(
        &mut self,
        reach: &super::super::Reach,
        sinks: &[u32],
        img: &super::super::image::Image<'_>,
        sums: &Result<Vec<(u64, u64)>, String>,
        untracked: bool,
    ) -> Result<Vec<u32>, FlowRefusal> {
        let g = self.g;
        let funcs: Vec<u32> = reach
            .order()
            .iter()
            .copied()
            .filter(|f| !sinks.contains(f))
            .collect();
        for &f in &funcs {
            let nd = &g.nodes[f as usize];
            let refuse = |reason: String| FlowRefusal {
                function: nd.name.clone(),
                at: nd.addr.unwrap_or(0),
                reason,
            };
            if nd.addr.is_none() {
                return Err(refuse("it is not defined in the image".into()));
            }
            if let Some(&j) = nd.jumps.iter().chain(&nd.inner).next() {
                return Err(refuse(format!(
                    "its code enters {} other than at its start",
                    g.nodes[j as usize].name
                )));
            }
            if nd.loose {
                return Err(refuse("it branches into code no function holds".into()));
            }
        }
        self.reached_lows = funcs
            .iter()
            .chain(sinks)
            .filter_map(|&f| g.nodes[f as usize].addr)
            .map(|a| a & 0xffff_ffff)
            .collect();
        self.reached = funcs
            .iter()
            .filter_map(|&f| g.nodes[f as usize].addr)
            .collect();
        self.fn_at = funcs
            .iter()
            .filter_map(|&f| g.nodes[f as usize].addr.map(|a| (a, f)))
            .collect();
        let mut all_starts: Vec<u64> = self.reached.iter().chain(&self.sinks).copied().collect();
        all_starts.sort_unstable();
        self.tables = flow_marks::function_tables(img, &all_starts);
        self.forged = self.forged_image.clone();
        if self.forged.is_none() && untracked {
            let sums = sums.as_deref().unwrap_or_default();
            self.forged =
                flow_marks::untracked_start(g, img, sums, sinks, &self.reached, &self.sinks);
        }
        Ok(funcs)
    }

    /// Follow `funcs` to a fixpoint, the kernels among them from their `entries` (see the module
    /// docs). Each function has its own entry state (what every call or jump that goes to its
    /// start leaves, [`Dest::Fn`]) and its own return state; a call or jump through a function
    /// table ([`Dest::Any`]) leaves its state to every function whose start the image names
    /// (what a table entry may hold) and continues with what any of those functions' returns
    /// leave.
    /// Errors: the first refusal.
    pub(super) fn follow(
        &mut self,
        funcs: &[u32],
        entries: &[(u32, State)],
    ) -> Result<(), FlowRefusal> {
        let g = self.g;
        let taken = |f: u32| {
            g.address_taken.binary_search(&f).is_ok() || g.materialized.binary_search(&f).is_ok()
        };
        let mut entry_of: HashMap<u32, State> = HashMap::new();
        let mut any = State::default();
        let mut rets = Rets::default();
        loop {
            let (mut entry2, mut any2, mut rets2) =
                (entry_of.clone(), any.clone(), rets.by_fn.clone());
            let mut writes2 = rets.writes.clone();
            for &f in funcs {
                let mut entry = entry_of.get(&f).cloned().unwrap_or_default();
                if taken(f) {
                    entry.join_from(&any);
                }
                match entries.iter().find(|(n, _)| *n == f) {
                    // A kernel starts with its descriptor's registers, and with what a call
                    // leaves as well when some code may call it.
                    Some((_, s)) => {
                        entry.join_from(s);
                    }
                    None => flow_call::seed_callee(&mut entry),
                }
                // No path reaches it yet (its entry has no marks, not even vacuous ones): it
                // runs nothing, calls nothing and returns nothing. Followed from that bottom
                // state, its code would make values no path has (a refusal of right code: the
                // RCCL control build's `RunWork<…>::run`, issue 37).
                if entry.1.is_none() {
                    continue;
                }
                let out = self.function(f, &entry, &rets)?;
                // What it writes: its own instructions, and what its callees write.
                let w = writes2.entry(f).or_default();
                w.add(&out.writes, false);
                for d in out.calls.keys().chain(out.tails.iter().map(|(d, _)| d)) {
                    w.add(&rets.writes_of(*d), out.outside.contains(d));
                }
                for (d, s) in out.calls {
                    match d {
                        Dest::Fn(t) => entry2.entry(t).or_default().join_from(&s),
                        Dest::Any | Dest::Return => any2.join_from(&s),
                    };
                }
                let r = rets2.entry(f).or_default();
                r.join_from(&out.rets);
                // A tail call returns for this function: what its target's returns leave.
                for (d, at) in &out.tails {
                    r.join_from(&flow_call::through_tail(rets.of(*d), at));
                }
            }
            // A call through a table reaches only a function whose start the image names (the
            // functions entered with `any` above): it continues with what their returns leave,
            // and may write what they write.
            let mut any_ret = rets.any.clone();
            for (_, r) in rets2.iter().filter(|(&f, _)| taken(f)) {
                any_ret.join_from(r);
            }
            let mut writes_any = rets.writes_any.clone();
            for (_, w) in writes2.iter().filter(|(&f, _)| taken(f)) {
                writes_any.add(w, false);
            }
            if entry2 == entry_of
                && any2 == any
                && rets2 == rets.by_fn
                && any_ret == rets.any
                && writes2 == rets.writes
                && writes_any == rets.writes_any
            {
                return Ok(());
            }
            entry_of = entry2;
            any = any2;
            rets = Rets {
                by_fn: rets2,
                any: any_ret,
                none: State::default(),
                writes: writes2,
                writes_any,
            };
        }
    }
}

/// Where a call or jump through a register pair goes, from the marks before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Dest {
    /// The start of this function, computed exactly.
    Fn(u32),
    /// A function table's entry (or a start no function of this pass has): any function whose
    /// start the image names.
    Any,
    /// The function's own return address: a return.
    Return,
}

/// The return states of one pass: each function's, and their join; and the registers each
/// function may write, its callees' included ([`Writes`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Rets {
    pub(super) by_fn: HashMap<u32, State>,
    pub(super) any: State,
    /// No path yet: a function not analysed so far returns nothing.
    none: State,
    pub(super) writes: HashMap<u32, Writes>,
    /// What any function may write (a call through a table).
    pub(super) writes_any: Writes,
}

impl Rets {
    /// What a call to `d` continues with: its function's returns, or any function's.
    pub(super) fn of(&self, d: Dest) -> &State {
        match d {
            Dest::Fn(f) => self.by_fn.get(&f).unwrap_or(&self.none),
            _ => &self.any,
        }
    }

    /// The registers a call to `d` may write: its function's, or any function's. A function not
    /// analysed so far writes nothing yet (it returns nothing either).
    pub(super) fn writes_of(&self, d: Dest) -> Writes {
        match d {
            Dest::Fn(f) => self.writes.get(&f).cloned().unwrap_or_default(),
            _ => self.writes_any.clone(),
        }
    }
}

/// The registers a function's code may write, as numbered in [`super::super::inst`] (a VGPR by its
/// own number: all of its lanes), or every register (`all`: relative indexing, an image
/// instruction, a computed jump, an instruction not classified or one that acts beyond its
/// registers). A register a callee never writes holds, after the call, what it held before it:
/// not what the callee's other callers passed (its entry state is every caller's). `wide`: the
/// VGPRs it may write in a lane its function was not entered with on (a write while `exec` is
/// not known to be within the entry's, [`super::super::flow_exec::ENTERED`]; `v_writelane_b32`;
/// a callee's writes from a call made so): a VGPR outside it keeps the lanes a call ran without.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Writes {
    pub(super) all: bool,
    pub(super) regs: std::collections::BTreeSet<Reg>,
    pub(super) wide: std::collections::BTreeSet<Reg>,
}

impl Writes {
    /// Add `o`'s registers (with `outside`, every one of them as written in any lane: `o` is a
    /// callee's, called while `exec` was not known to be within the entry's); whether anything
    /// changed.
    pub(super) fn add(&mut self, o: &Writes, outside: bool) -> bool {
        let before = (self.all, self.regs.len(), self.wide.len());
        self.all |= o.all;
        if !self.all {
            self.regs.extend(o.regs.iter().copied());
            self.wide.extend(o.wide.iter().copied());
            if outside {
                self.wide.extend(o.regs.iter().copied());
            }
        } else {
            self.regs.clear();
            self.wide.clear();
        }
        (self.all, self.regs.len(), self.wide.len()) != before
    }

    /// Whether register `r` (a VGPR's own number for all of its keys) may be written.
    pub(super) fn may(&self, r: Reg) -> bool {
        self.all || self.regs.contains(&r)
    }

    /// Whether VGPR `r` may be written in a lane the function was not entered with on.
    pub(super) fn may_wide(&self, r: Reg) -> bool {
        self.all || self.wide.contains(&r)
    }
}

/// What one function's analysis leaves: the states its calls and jumps take to where they go,
/// its return states, where its tail calls go, and what its own instructions may write.
#[derive(Debug, Default)]
pub(super) struct Out {
    pub(super) calls: HashMap<Dest, State>,
    pub(super) rets: State,
    pub(super) tails: Vec<(Dest, Option<std::collections::BTreeSet<Reg>>)>,
    pub(super) writes: Writes,
    /// Where a call or jump goes while `exec` is not known to be within the entry's.
    pub(super) outside: std::collections::HashSet<Dest>,
}

/// The function start the pair `s[r:r+1]` holds on every path ([`Code::PcLo`] and
/// [`Code::PcHi`] of one address), or `None`.
pub(super) fn exact_target(st: &State, r: Reg) -> Option<u64> {
    let m = st.1.as_ref()?;
    match (m.get(&r), m.get(&(r + 1))) {
        (Some(&Code::PcLo(y)), Some(&Code::PcHi(z))) if y & 0xffff_ffff == z & 0xffff_ffff => {
            Some(z)
        }
        _ => None,
    }
}

/// Whether the pair `s[r:r+1]` holds the function's own return address on every path
/// ([`Code::RetEntry`]).
pub(super) fn is_return_pair(st: &State, r: Reg) -> bool {
    st.1.as_ref().is_some_and(|m| {
        m.get(&r) == Some(&Code::RetEntry) && m.get(&(r + 1)) == Some(&Code::RetEntry)
    })
}
