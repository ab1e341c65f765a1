//! The last stage: the graph itself ([`build_graph`]): the functions of an image (named ones
//! and unnamed code a call lands on), the function tables in its data, each function's calls
//! read by [`super::code::read_function`], and the interrupt sites
//! ([`super::isa::interrupt_sites`]) placed in the functions that hold them.

use std::collections::HashMap;

use super::code::{pc_rel, read_function};
use super::image::Image;
use super::isa::interrupt_sites;
use super::layout::Layout;
use super::{Graph, Node, Raw, Table};
use crate::scan::amdgpu::is_hostcall_user;

/// A function's (start, end, name).
pub(super) type Span = (u64, u64, String);

/// The functions of the image: named ones (deduplicated by address, a global name winning over a
/// local alias) and unnamed code that a call or a data pointer lands on, as (start, end, name),
/// sorted by start; and the references (pc-relative address computations and data relocations:
/// (site, target)) that point inside a named function rather than at its start.
pub(super) fn functions_of(img: &Image<'_>) -> (Vec<Span>, Vec<(u64, u64)>) {
    let mut funcs = img.funcs.clone();
    funcs.sort_by(|a, b| a.0.cmp(&b.0).then(b.3.cmp(&a.3)));
    funcs.dedup_by_key(|f| f.0);
    let inside_named = |a: u64| {
        let i = funcs.partition_point(|f| f.0 <= a);
        i > 0 && {
            let f = &funcs[i - 1];
            f.0 == a || a < f.0.saturating_add(f.1)
        }
    };
    let mut unnamed: Vec<u64> = Vec::new();
    let mut inner: Vec<(u64, u64)> = Vec::new();
    for &(base, code) in &img.code {
        let n = code.len() / 4;
        let mut i = 0;
        while i < n {
            if let Some((_, Raw::Addr(a, _), used)) = pc_rel(img, base, code, i) {
                if img.in_code(a) && !inside_named(a) {
                    unnamed.push(a);
                } else if img.in_code(a) {
                    inner.push((base + 4 * i as u64, a));
                }
                i += used;
            } else {
                i += 1;
            }
        }
    }
    for (site, r) in &img.data_relocs {
        if let Raw::Addr(a, _) = *r {
            if img.in_code(a) && !inside_named(a) {
                unnamed.push(a);
            } else if img.in_code(a) {
                inner.push((*site, a));
            }
        }
    }
    unnamed.sort();
    unnamed.dedup();
    let mut starts: Vec<(u64, u64, String)> = funcs
        .into_iter()
        .map(|f| (f.0, f.1, f.2))
        .chain(unnamed.iter().map(|&a| (a, 0, format!("code at 0x{a:x}"))))
        .collect();
    starts.sort_by_key(|s| s.0);
    // A function ends at its symbol size, the next function, or the end of its section.
    let next: Vec<u64> = starts.iter().skip(1).map(|s| s.0).collect();
    for (i, s) in starts.iter_mut().enumerate() {
        let section_end = img
            .code
            .iter()
            .find(|(b, c)| s.0 >= *b && s.0 < b + c.len() as u64)
            .map_or(s.0, |(b, c)| b + c.len() as u64);
        let mut end = section_end.min(next.get(i).copied().unwrap_or(u64::MAX).max(s.0));
        if s.1 > 0 {
            end = end.min(s.0.saturating_add(s.1));
        }
        s.1 = end;
    }
    inner.retain(|(_, a)| starts.binary_search_by_key(a, |s| s.0).is_err());
    (starts, inner)
}

pub(super) fn build_graph(img: &Image<'_>) -> Graph {
    let (funcs, inner_refs) = functions_of(img);
    let node = |name: &str, addr: Option<u64>| Node {
        named_user: is_hostcall_user(name),
        name: name.to_owned(),
        addr,
        calls: Vec::new(),
        tables: Vec::new(),
        indirect: Vec::new(),
        interrupts: Vec::new(),
        jumps: Vec::new(),
        trap_entry: false,
        end: addr.unwrap_or(0),
        call_sites: Vec::new(),
        wild_return: false,
        traps: false,
        returns: false,
        inner: Vec::new(),
        loose: false,
        smem: Vec::new(),
        vmem: Vec::new(),
    };
    let mut nodes: Vec<Node> = funcs
        .iter()
        .map(|(a, end, name)| Node {
            end: *end,
            ..node(name, Some(*a))
        })
        .chain(img.externs.iter().map(|name| node(name, None)))
        .collect();
    let mut lay = Layout {
        addrs: funcs.iter().map(|f| f.0).collect(),
        ends: funcs.iter().map(|f| f.1).collect(),
        objects: Vec::new(),
        table_of_object: HashMap::new(),
        data_relocs: &img.data_relocs,
    };
    // Function tables: data objects with relocations pointing at functions.
    let mut objects = img.objects.clone();
    objects.sort_by_key(|o| o.0);
    let mut tables: Vec<Table> = Vec::new();
    for (oi, (a, size, name)) in objects.iter().enumerate() {
        let lo = img.data_relocs.partition_point(|(r, _)| *r < *a);
        let hi = img
            .data_relocs
            .partition_point(|(r, _)| *r < a.saturating_add(*size));
        let mut entries: Vec<u32> = Vec::new();
        for (_, r) in &img.data_relocs[lo..hi] {
            if let Some(nd) = lay.raw_node(*r) {
                if !entries.contains(&nd) {
                    entries.push(nd);
                }
            }
        }
        if !entries.is_empty() {
            lay.table_of_object.insert(oi, tables.len() as u32);
            tables.push(Table {
                name: name.clone(),
                entries,
            });
        }
    }
    lay.objects = objects.iter().map(|o| (o.0, o.1)).collect();
    let mut branches_out: Vec<(u64, u64)> = Vec::new();
    let mut loose_branches: Vec<(u64, u64)> = Vec::new();
    for (ni, &(start, end, _)) in funcs.iter().enumerate() {
        let Some(&(base, code)) = img
            .code
            .iter()
            .find(|(b, c)| start >= *b && start < b + c.len() as u64)
        else {
            continue;
        };
        let first = ((start - base) / 4) as usize;
        let last = (((end - base) / 4) as usize).min(code.len() / 4);
        let refs = read_function(img, &lay, ni as u32, (base, code), first, last);
        let nd = &mut nodes[ni];
        nd.calls = refs.calls;
        nd.tables = refs.tables;
        nd.indirect = refs.indirect;
        nd.call_sites = refs.call_sites;
        nd.returns = refs.returns > 0;
        nd.wild_return = refs.returns > 0 && refs.writes_ra;
        nd.traps = refs.traps;
        nd.smem = refs.smem_loads;
        nd.vmem = refs.vmem_loads;
        nd.trap_entry = refs.trap_entry;
        for (at, target) in refs.branches_out {
            branches_out.push((at, target));
            match lay.containing(target) {
                Some(t) if t != ni as u32 && !nodes[ni].jumps.contains(&t) => {
                    nodes[ni].jumps.push(t);
                }
                Some(_) => {}
                // Into code that no function holds: what runs there is not read.
                None if img.in_code(target) => {
                    loose_branches.push((at, target));
                    nodes[ni].loose = true;
                }
                None => {}
            }
        }
    }
    let mut loose_interrupts = Vec::new();
    for &(base, code) in &img.code {
        for at in interrupt_sites(code, base, img.isa).host {
            match lay.containing(at) {
                Some(nd) => nodes[nd as usize].interrupts.push(at),
                None => loose_interrupts.push(at),
            }
        }
    }
    // A reference into a function other than at its start enters it there: from code, an edge
    // of the function holding the reference; from data, an address-taken function.
    let mut data_inner = Vec::new();
    for &(site, target) in &inner_refs {
        let Some(t) = lay.containing(target) else {
            continue;
        };
        match lay.containing(site) {
            Some(f) if f != t && !nodes[f as usize].inner.contains(&t) => {
                nodes[f as usize].inner.push(t);
            }
            Some(_) => {}
            None if !img.in_code(site) => data_inner.push(t),
            None => {}
        }
    }
    let mut address_taken: Vec<u32> = img
        .data_relocs
        .iter()
        .filter_map(|(_, r)| lay.raw_node(*r))
        .chain(data_inner)
        .collect();
    address_taken.sort();
    address_taken.dedup();
    let mut materialized: Vec<u32> = nodes
        .iter()
        .filter(|n| !n.trap_entry)
        .flat_map(|n| n.calls.iter().copied())
        .collect();
    materialized.sort();
    materialized.dedup();
    let mut by_name = HashMap::new();
    for (i, nd) in nodes.iter().enumerate().take(funcs.len()) {
        by_name.entry(nd.name.clone()).or_insert(i as u32);
    }
    Graph {
        nodes,
        tables,
        address_taken,
        materialized,
        by_name,
        branches_out,
        inner_refs,
        loose_interrupts,
        loose_branches,
        gfx12: false,
    }
}
