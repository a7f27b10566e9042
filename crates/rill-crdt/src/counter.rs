//! PN-counter: per actor, increments and decrements.

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PnCounter {
    pub(crate) entries: BTreeMap<Vec<u8>, (u64, u64)>,
}

impl PnCounter {
    pub fn increment(&mut self, actor: &[u8], by: i64) {
        let e = self.entries.entry(actor.to_vec()).or_insert((0, 0));
        if by >= 0 {
            e.0 = e.0.wrapping_add(by as u64);
        } else {
            e.1 = e.1.wrapping_add(by.unsigned_abs());
        }
    }

    /// How many actors have counted (each holds one entry).
    pub fn actors(&self) -> usize {
        self.entries.len()
    }

    pub fn value(&self) -> i64 {
        let (p, n) = self.entries.values().fold((0u64, 0u64), |(p, n), (a, b)| {
            (p.wrapping_add(*a), n.wrapping_add(*b))
        });
        p.wrapping_sub(n) as i64
    }

    pub fn merge(&mut self, other: &PnCounter) {
        for (a, (p, n)) in &other.entries {
            let e = self.entries.entry(a.clone()).or_insert((0, 0));
            e.0 = e.0.max(*p);
            e.1 = e.1.max(*n);
        }
    }
}
