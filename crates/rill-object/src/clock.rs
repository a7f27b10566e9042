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

/// Riak's vclock pruning thresholds, the bucket properties of the same
/// names (defaults 50, 50, 20 s, 86400 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PruneRules {
    /// `small_vclock`: never prune a clock of this many entries or fewer.
    pub small: usize,
    /// `big_vclock`: prune a clock longer than this...
    pub big: usize,
    /// `young_vclock`: ...but never an entry younger than this...
    pub young_secs: u64,
    /// `old_vclock`: ...and prune entries older than this while longer
    /// than `small`.
    pub old_secs: u64,
}

impl Default for PruneRules {
    fn default() -> Self {
        PruneRules {
            small: 50,
            big: 50,
            young_secs: 20,
            old_secs: 86_400,
        }
    }
}

impl VClock {
    /// Riak's `vclock:prune`: entries are taken oldest first (by
    /// timestamp, then actor, so every replica prunes alike); while the
    /// clock is longer than `small` and the oldest entry is not younger
    /// than `young`, it is dropped if the clock is longer than `big` or
    /// the entry is older than `old`. Entries for which `keep` holds (the
    /// actors of an object's sibling dots) are never dropped, nor counted
    /// out. Returns how many entries went.
    pub fn prune(
        &mut self,
        now_secs: u64,
        rules: &PruneRules,
        keep: impl Fn(&[u8]) -> bool,
    ) -> usize {
        if self.entries.len() <= rules.small {
            return 0;
        }
        let mut candidates: Vec<(u64, Actor)> = self
            .entries
            .iter()
            .filter(|(a, _)| !keep(a))
            .map(|(a, (_, t))| (*t, a.clone()))
            .collect();
        candidates.sort();
        let mut dropped = 0;
        for (t, a) in candidates {
            let len = self.entries.len();
            let age = now_secs.saturating_sub(t);
            if len <= rules.small || age < rules.young_secs {
                break;
            }
            if len > rules.big || age > rules.old_secs {
                self.entries.remove(&a);
                dropped += 1;
            } else {
                break;
            }
        }
        dropped
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

    fn clock(entries: &[(&str, u64)]) -> VClock {
        let mut c = VClock::new();
        for (a, t) in entries {
            c.set(a.as_bytes().to_vec(), 1, *t);
        }
        c
    }

    fn actors(c: &VClock) -> Vec<String> {
        c.entries()
            .map(|(a, _, _)| String::from_utf8(a.clone()).unwrap())
            .collect()
    }

    /// Riak's own cases (riak_core's vclock tests), and the edges.
    #[test]
    fn prune_table() {
        let none = |_: &[u8]| false;
        let r = |small, big, young_secs, old_secs| PruneRules {
            small,
            big,
            young_secs,
            old_secs,
        };
        // (clock, now, rules, left)
        type Case = (Vec<(&'static str, u64)>, u64, PruneRules, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            // small: short clocks are never pruned, however old
            (
                vec![("a", 1), ("b", 2)],
                1_000_000,
                r(4, 4, 0, 0),
                vec!["a", "b"],
            ),
            // young: entries younger than young_vclock stay
            (
                vec![("a", 1), ("b", 2), ("c", 3)],
                10,
                r(1, 1, 100, 1000),
                vec!["a", "b", "c"],
            ),
            // big: longer than big, older than young -> oldest go
            (
                vec![("a", 1), ("b", 2), ("c", 3)],
                1000,
                r(1, 2, 1, 10_000),
                vec!["b", "c"],
            ),
            // old: entries older than old_vclock go while longer than small
            (
                vec![("a", 1), ("b", 2), ("c", 999)],
                1000,
                r(1, 10, 1, 100),
                vec!["c"],
            ),
            // neither big nor old: nothing goes
            (
                vec![("a", 1), ("b", 2), ("c", 3)],
                50,
                r(1, 10, 1, 100),
                vec!["a", "b", "c"],
            ),
            // ties in time break by actor
            (
                vec![("b", 5), ("a", 5), ("c", 5)],
                1000,
                r(1, 2, 1, 10_000),
                vec!["b", "c"],
            ),
        ];
        for (entries, now, rules, left) in cases {
            let mut c = clock(&entries);
            c.prune(now, &rules, none);
            assert_eq!(actors(&c), left, "{entries:?} at {now} with {rules:?}");
        }
    }

    #[test]
    fn prune_keeps_protected_actors() {
        let mut c = clock(&[("a", 1), ("b", 2), ("c", 3)]);
        let rules = PruneRules {
            small: 1,
            big: 1,
            young_secs: 0,
            old_secs: 0,
        };
        assert_eq!(c.prune(1000, &rules, |a| a == b"a"), 2);
        assert_eq!(actors(&c), vec!["a"]);
        assert_eq!(VClock::new().prune(1000, &rules, |_| false), 0);
    }
}
