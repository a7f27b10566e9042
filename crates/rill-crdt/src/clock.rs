//! Dots and the version vectors of data types.

use std::collections::BTreeMap;

pub type Actor = Vec<u8>;
pub type Dot = (Actor, u64);

/// For each actor, how many of its events have been seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Clock(pub BTreeMap<Actor, u64>);

impl Clock {
    pub fn get(&self, a: &[u8]) -> u64 {
        self.0.get(a).copied().unwrap_or(0)
    }

    pub fn next_dot(&mut self, a: &[u8]) -> Dot {
        let c = self.0.entry(a.to_vec()).or_insert(0);
        *c += 1;
        (a.to_vec(), *c)
    }

    pub fn covers(&self, d: &Dot) -> bool {
        self.get(&d.0) >= d.1
    }

    pub fn descends(&self, other: &Clock) -> bool {
        other.0.iter().all(|(a, c)| self.get(a) >= *c)
    }

    pub fn merge(&mut self, other: &Clock) {
        for (a, c) in &other.0 {
            let e = self.0.entry(a.clone()).or_insert(0);
            *e = (*e).max(*c);
        }
    }
}
