//! The reachability a proof rests on ([`Graph::reach`]): an over-approximation by construction.
//!
//! From the roots (every kernel of the image), a function reaches:
//! - every function its code materialises an address of (a pc-relative address computation or
//!   a relocation in code), whether or not a call uses it;
//! - every function a branch of it lands in, and every function it enters other than at the
//!   start (an address inside it);
//! - once any reached function has a call or a computed jump (`s_swappc_b64`, `s_call_b64`,
//!   `s_setpc_b64` other than a return, `s_rfe_b64`, gfx6–9 forks and joins; or a return whose
//!   `s[30:31]` some word may overwrite), every address-taken function: those the image's data
//!   points at (relocations, vtables, function tables) and those whose address any reached code
//!   materialises, to a fixpoint. No call is taken to be direct here, whatever the register
//!   tracking that `why` uses concluded, since a word-by-word reader cannot rule out a literal
//!   that looks like a register copy.
//!
//! Sinks (the handlers a proof will make trap over their whole extent) are reached but not
//! followed. What the image does not define (undefined symbols) and code that no function holds
//! are reported, never followed.

use super::{Graph, Hop, User, Via};

/// The functions reached from a set of roots ([`Graph::reach`]).
#[derive(Debug, Clone)]
pub struct Reach {
    /// For every reached node, (predecessor, how); a root is its own predecessor.
    parent: Vec<Option<(u32, Via)>>,
    /// Reached nodes, in the order they were reached.
    order: Vec<u32>,
    /// The first reached function with a call or computed jump, and where (`None`: no
    /// address-taken function was added).
    pub opened_by: Option<(String, u64)>,
}

/// One reached function, as a proof reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// Its name (`code at 0x…` for unnamed code a reference lands on).
    pub name: String,
    /// Its start, `None` for an undefined symbol.
    pub addr: Option<u64>,
    /// Its end (exclusive; equal to the start for an undefined symbol).
    pub end: u64,
    /// How it uses hostcall, if it does: a known name, or code that signals the host.
    pub user: Option<User>,
    /// Whether it branches into code no function holds.
    pub loose: bool,
}

impl Graph {
    /// The node of the function named `name` (its first by that name; a kernel descriptor name
    /// `k.kd` is accepted too).
    pub fn node(&self, name: &str) -> Option<u32> {
        self.by_name
            .get(name.strip_suffix(".kd").unwrap_or(name))
            .copied()
    }

    /// Everything reachable from `roots` without passing through `sinks` (see the module docs).
    pub fn reach(&self, roots: &[u32], sinks: &[u32]) -> Reach {
        let n = self.nodes.len();
        let mut parent: Vec<Option<(u32, Via)>> = vec![None; n];
        let mut order: Vec<u32> = Vec::new();
        for &r in roots {
            if (r as usize) < n && parent[r as usize].is_none() {
                parent[r as usize] = Some((r, Via::Call));
                order.push(r);
            }
        }
        // The address-taken pool: data's targets from the start, code's as code is reached.
        let mut pool: Vec<u32> = self.address_taken.clone();
        let mut opened_by: Option<(u32, u64)> = None;
        let mut next = 0;
        loop {
            while next < order.len() {
                let f = order[next];
                next += 1;
                if sinks.contains(&f) {
                    continue;
                }
                let nd = &self.nodes[f as usize];
                for &c in nd.calls.iter().chain(&nd.jumps).chain(&nd.inner) {
                    if parent[c as usize].is_none() {
                        parent[c as usize] = Some((f, Via::Call));
                        order.push(c);
                    }
                }
                pool.extend(nd.calls.iter().copied());
                if opened_by.is_none() {
                    if let Some(&at) = nd.call_sites.first() {
                        opened_by = Some((f, at));
                    } else if nd.wild_return {
                        opened_by = Some((f, nd.addr.unwrap_or(0)));
                    }
                }
            }
            let Some((from, _)) = opened_by else { break };
            let before = order.len();
            for &e in &pool {
                if parent[e as usize].is_none() {
                    parent[e as usize] = Some((from, Via::AddressTaken));
                    order.push(e);
                }
            }
            if order.len() == before {
                break;
            }
        }
        Reach {
            parent,
            order,
            opened_by: opened_by.map(|(f, at)| (self.nodes[f as usize].name.clone(), at)),
        }
    }

    /// What a proof needs to know of node `i`.
    pub fn reached(&self, i: u32) -> Reached {
        let nd = &self.nodes[i as usize];
        let user = if nd.named_user {
            Some(User::Named)
        } else {
            nd.interrupts.first().map(|&a| User::Interrupt(a))
        };
        Reached {
            name: nd.name.clone(),
            addr: nd.addr,
            end: nd.end,
            user,
            loose: nd.loose,
        }
    }

    /// Every function (defined ones and undefined symbols), as node indices.
    pub fn nodes(&self) -> std::ops::Range<u32> {
        0..self.nodes.len() as u32
    }

    /// Whether function `i`'s own code shows it is a device-assert handler that prints and never
    /// returns: it has no `s_setpc_b64` (no return, no jump to a computed address), contains
    /// `s_trap 2`, branches out of itself nowhere, and every function its code materialises an
    /// address of belongs to the ROCm device libraries (`__ockl_*`: the printf primitives HIP's
    /// `__assert_fail` calls, ROCm/clr `hip_assert.h`). `Err` says which part fails.
    pub fn handler_shape(&self, i: u32) -> Result<(), String> {
        let nd = &self.nodes[i as usize];
        if nd.addr.is_none() {
            return Err("it is not defined in the image".into());
        }
        if nd.returns || nd.call_sites.len() > nd.indirect.len() + nd.calls.len() {
            return Err("its code returns or jumps to a computed address (s_setpc_b64)".into());
        }
        if !nd.traps {
            return Err("its code has no s_trap 2".into());
        }
        if !nd.jumps.is_empty() || !nd.inner.is_empty() || nd.loose {
            return Err("it branches into other code".into());
        }
        if let Some(&c) = nd
            .calls
            .iter()
            .find(|&&c| !self.nodes[c as usize].name.starts_with("__ockl_"))
        {
            return Err(format!(
                "it calls {}, which is not one of the device libraries' printf primitives",
                self.nodes[c as usize].name
            ));
        }
        Ok(())
    }
}

impl Graph {
    /// The first SMEM load in code `r` reached from `kernel` that may read that kernel's hostcall
    /// slot (8 bytes): in the kernel's own code, any load whose bytes cover `kernarg_slot` (its
    /// `hidden_hostcall_buffer` `.offset` in the kernarg segment); in any other function, a load
    /// based on `s[8:9]` (the implicit-argument pointer of the AMDGPU calling convention, llvm
    /// `AMDGPUUsage.rst`, "Call Convention") whose bytes cover `implicit_slot` (80 in code object
    /// v5 and v6, 24 in v4). The offset is read as the gfx9–gfx11 (21 bits) and the gfx12 (24
    /// bits) field alike, the width from the opcode's low three bits (1, 2, 4, 8 or 16 dwords,
    /// the `s_load` and `s_buffer_load` numbering of every generation; anything else 16); and in
    /// the kernel's own code a FLAT or GLOBAL load at the kernarg offset as well: a net
    /// for the loads the compiler writes, not a proof (a pointer offset by a register before the
    /// load is not followed). Hostcall users (named, or signalling the host) are left out: they
    /// read the slot to use it, and are judged as users. `(function, address)`.
    pub fn slot_load(
        &self,
        r: &Reach,
        kernel: u32,
        kernarg_slot: u64,
        implicit_slot: u64,
    ) -> Option<(String, u64)> {
        let covers = |w0: u32, w1: u32, slot: u64| {
            let op = if self.gfx12 {
                (w0 >> 13) & 0xff
            } else {
                (w0 >> 18) & 0xff
            };
            let bytes = match op & 7 {
                n @ 0..=4 => 4u64 << n,
                _ => 64,
            };
            [u64::from(w1 & 0x1f_ffff), u64::from(w1 & 0xff_ffff)]
                .iter()
                .any(|&off| slot < off.saturating_add(bytes) && off < slot.saturating_add(8))
        };
        // A FLAT/GLOBAL load in the kernel itself (a volatile read through a copy of the
        // kernarg pointer): its immediate offset, 12 or 13 bits in the first word on gfx9–gfx11,
        // 24 bits in the third word's top on gfx12; at most 16 bytes wide.
        let vmem_covers = |w0: u32, w2: u32, slot: u64| {
            let offs = if self.gfx12 {
                vec![u64::from(w2 >> 8)]
            } else {
                vec![u64::from(w0 & 0xfff), u64::from(w0 & 0x1fff)]
            };
            offs.iter()
                .any(|&off| slot < off.saturating_add(16) && off < slot.saturating_add(8))
        };
        let k = &self.nodes[kernel as usize];
        let k_user = k.named_user || !k.interrupts.is_empty();
        if let Some(&(at, _, _)) = k
            .vmem
            .iter()
            .find(|&&(_, w0, w2)| !k_user && vmem_covers(w0, w2, kernarg_slot))
        {
            return Some((k.name.clone(), at));
        }
        r.order.iter().find_map(|&f| {
            let nd = &self.nodes[f as usize];
            // A hostcall user reads the slot to use it: it is judged as a user, not here.
            if nd.named_user || !nd.interrupts.is_empty() {
                return None;
            }
            nd.smem
                .iter()
                .find(|&&(_, w0, w1)| {
                    if f == kernel {
                        covers(w0, w1, kernarg_slot)
                    } else {
                        (w0 & 0x3f) << 1 == 8 && covers(w0, w1, implicit_slot)
                    }
                })
                .map(|&(at, _, _)| (nd.name.clone(), at))
        })
    }
}

impl Reach {
    /// Whether node `i` was reached.
    pub fn has(&self, i: u32) -> bool {
        self.parent.get(i as usize).is_some_and(Option::is_some)
    }

    /// The reached nodes, in the order they were reached.
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    /// The path from a root to reached node `i`, root first (empty when `i` was not reached).
    pub fn path(&self, g: &Graph, i: u32) -> Vec<Hop> {
        let mut hops = Vec::new();
        let mut at = i;
        while let Some(Some((p, via))) = self.parent.get(at as usize) {
            hops.push(Hop {
                function: g.nodes[at as usize].name.clone(),
                via: via.clone(),
            });
            if *p == at || hops.len() > g.nodes.len() {
                break;
            }
            at = *p;
        }
        hops.reverse();
        hops
    }
}
