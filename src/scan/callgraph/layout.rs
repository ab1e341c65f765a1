//! Where functions and tables lie in an [`super::image::Image`]: [`Layout`] resolves addresses
//! (and undefined symbols) to the [`Ref`]s the code reader tracks in registers.

use std::collections::HashMap;

use super::{Raw, Ref};

/// Where functions and tables are: resolves addresses (and undefined symbols) to [`Ref`]s.
pub(super) struct Layout<'i> {
    /// Start and end of each defined function (node), sorted by start.
    pub(super) addrs: Vec<u64>,
    pub(super) ends: Vec<u64>,
    /// Data objects (address, size), sorted, and the table each one is, if any.
    pub(super) objects: Vec<(u64, u64)>,
    pub(super) table_of_object: HashMap<usize, u32>,
    pub(super) data_relocs: &'i [(u64, Raw)],
}

impl Layout<'_> {
    pub(super) fn defined(&self) -> u32 {
        self.addrs.len() as u32
    }

    pub(super) fn node_at(&self, a: u64) -> Option<u32> {
        let i = self.addrs.partition_point(|&x| x < a);
        (self.addrs.get(i) == Some(&a)).then_some(i as u32)
    }

    pub(super) fn containing(&self, a: u64) -> Option<u32> {
        let i = self.addrs.partition_point(|&x| x <= a);
        (i > 0 && a < self.ends[i - 1]).then(|| (i - 1) as u32)
    }

    pub(super) fn raw_node(&self, r: Raw) -> Option<u32> {
        match r {
            Raw::Addr(a, _) => self.node_at(a),
            Raw::Ext(i, _) => Some(self.defined() + i),
        }
    }

    pub(super) fn table_at(&self, a: u64) -> Option<u32> {
        let i = self.objects.partition_point(|o| o.0 <= a);
        if i == 0
            || a >= self.objects[i - 1]
                .0
                .saturating_add(self.objects[i - 1].1.max(1))
        {
            return None;
        }
        self.table_of_object.get(&(i - 1)).copied()
    }

    pub(super) fn resolve(&self, r: Raw) -> Ref {
        let (a, got) = match r {
            Raw::Ext(i, false) => return Ref::Func(self.defined() + i),
            Raw::Ext(i, true) => return Ref::Slot(self.defined() + i),
            Raw::Addr(a, got) => (a, got),
        };
        if let Some(nd) = self.node_at(a) {
            return if got { Ref::Slot(nd) } else { Ref::Func(nd) };
        }
        if let Some(t) = self.table_at(a) {
            return if got {
                Ref::SlotTable(t)
            } else {
                Ref::Table(t)
            };
        }
        if got {
            return Ref::Other;
        }
        // A pointer slot outside any named object (a GOT entry).
        let i = self.data_relocs.partition_point(|(x, _)| *x < a);
        match self.data_relocs.get(i) {
            Some(&(x, Raw::Addr(t, _))) if x == a => {
                if let Some(nd) = self.node_at(t) {
                    Ref::Slot(nd)
                } else if let Some(tb) = self.table_at(t) {
                    Ref::SlotTable(tb)
                } else {
                    Ref::Other
                }
            }
            Some(&(x, Raw::Ext(e, _))) if x == a => Ref::Slot(self.defined() + e),
            _ => Ref::Other,
        }
    }
}
