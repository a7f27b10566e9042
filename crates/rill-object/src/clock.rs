//! Version vectors and dots.

use std::collections::BTreeMap;

/// The identity of a writer: a vnode's id. Opaque bytes (at most 255).
pub type Actor = Vec<u8>;

/// One event: the `counter`-th write coordinated by `actor`, at
/// `timestamp_secs` (Unix seconds; used only for pruning and display).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dot {
    pub actor: Actor,
    pub counter: u64,
    pub timestamp_secs: u64,
}

/// A version vector: for each actor, the number of its writes seen, and
/// when the last was made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct VClock {
    entries: BTreeMap<Actor, (u64, u64)>,
}

impl VClock {
    pub fn new() -> VClock {
        VClock::default()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn counter(&self, actor: &[u8]) -> u64 {
        self.entries.get(actor).map_or(0, |e| e.0)
    }

    pub fn entries(&self) -> impl Iterator<Item = (&Actor, u64, u64)> {
        self.entries.iter().map(|(a, (c, t))| (a, *c, *t))
    }

    pub(crate) fn set(&mut self, actor: Actor, counter: u64, timestamp_secs: u64) {
        self.entries.insert(actor, (counter, timestamp_secs));
    }

    /// Every write `other` has seen, `self` has seen too.
    pub fn descends(&self, other: &VClock) -> bool {
        other
            .entries
            .iter()
            .all(|(a, (c, _))| self.counter(a) >= *c)
    }

    pub fn dominates(&self, other: &VClock) -> bool {
        self.descends(other) && !other.descends(self)
    }

    /// Whether this clock has seen the write `dot`.
    pub fn covers(&self, dot: &Dot) -> bool {
        self.counter(&dot.actor) >= dot.counter
    }

    /// The least clock that descends both.
    pub fn merge(&self, other: &VClock) -> VClock {
        let mut out = self.clone();
        for (a, &(c, t)) in &other.entries {
            let e = out.entries.entry(a.clone()).or_insert((0, 0));
            if c > e.0 || (c == e.0 && t > e.1) {
                *e = (c, t);
            }
        }
        out
    }

    /// Counts one more write by `actor` and returns its dot.
    pub fn increment(&mut self, actor: &[u8], timestamp_secs: u64) -> Dot {
        let e = self.entries.entry(actor.to_vec()).or_insert((0, 0));
        e.0 += 1;
        e.1 = timestamp_secs;
        Dot {
            actor: actor.to_vec(),
            counter: e.0,
            timestamp_secs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descent_and_merge() {
        let mut a = VClock::new();
        a.increment(b"x", 1);
        let mut b = a.clone();
        b.increment(b"y", 2);
        assert!(b.descends(&a) && !a.descends(&b) && b.dominates(&a));
        let mut c = a.clone();
        c.increment(b"x", 3);
        assert!(!c.descends(&b) && !b.descends(&c));
        let m = b.merge(&c);
        assert!(m.descends(&b) && m.descends(&c));
        assert_eq!((m.counter(b"x"), m.counter(b"y")), (2, 1));
        assert!(VClock::new().descends(&VClock::new()));
        assert!(a.descends(&VClock::new()));
    }
}
