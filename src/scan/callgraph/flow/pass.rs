//! The passes of [`super::super::Graph::slot_flow`]: which functions a pass follows
//! ([`Ctx::enter`]: each followable as a whole, and where computed calls may go), and following
//! them from the kernels' entry states to a fixpoint ([`Ctx::follow`]).

use super::super::flow_entry::FlowRefusal;
use super::super::flow_marks;
use super::super::flow_state::State;
use super::Ctx;

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
    /// docs). Errors: the first refusal.
    pub(super) fn follow(
        &mut self,
        funcs: &[u32],
        entries: &[(u32, State)],
    ) -> Result<(), FlowRefusal> {
        let g = self.g;
        let taken = |f: u32| {
            g.address_taken.binary_search(&f).is_ok() || g.materialized.binary_search(&f).is_ok()
        };
        // Callee entry (every call, jump and return's state) and return state, to a fixpoint.
        let (mut callee, mut ret) = (State::default(), State::default());
        loop {
            let (mut c2, mut r2) = (callee.clone(), ret.clone());
            for &f in funcs {
                // A kernel starts with its descriptor's registers, and with what a call leaves
                // as well when some code may call it (its address is taken).
                let entry = match entries.iter().find(|(n, _)| *n == f) {
                    Some((_, s)) if taken(f) => {
                        let mut s = s.clone();
                        s.join_from(&callee);
                        s
                    }
                    Some((_, s)) => s.clone(),
                    None => {
                        let mut e = callee.clone();
                        flow_marks::seed_callee(&mut e);
                        e
                    }
                };
                let (c, r) = self.function(f, &entry, &ret)?;
                c2.join_from(&c);
                r2.join_from(&r);
            }
            c2.join_from(&r2.clone());
            if c2 == callee && r2 == ret {
                return Ok(());
            }
            callee = c2;
            ret = r2;
        }
    }
}
