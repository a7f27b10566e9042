//! Cut blocks waiting to be stored, in the order they were cut, with
//! their samples counted as they come and go (a write checks the count).
//! A block stays queued until it is in its store, so a read finds it in
//! one place or the other (or, for a moment, in both: the same samples).

use crate::buffer::Cut;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct Queue {
    cuts: VecDeque<(String, Arc<Cut>)>,
    samples: usize,
}

impl Queue {
    /// Queues `cuts` of database `db`.
    pub fn extend(&mut self, db: &str, cuts: Vec<Cut>) {
        for c in cuts {
            self.samples += c.samples();
            self.cuts.push_back((db.to_string(), Arc::new(c)));
        }
    }

    /// Samples of the queued blocks.
    pub fn samples(&self) -> usize {
        self.samples
    }

    pub fn len(&self) -> usize {
        self.cuts.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Cut>)> {
        self.cuts.iter().map(|(db, c)| (db.as_str(), c))
    }

    /// Takes out every block of database `db` whose group `gone` keeps
    /// (their data left the node).
    pub fn forget(&mut self, db: &str, gone: impl Fn(u64) -> bool) {
        let mut dropped = 0;
        self.cuts.retain(|(d, c)| {
            let keep = d != db || !gone(c.group);
            if !keep {
                dropped += c.samples();
            }
            keep
        });
        self.samples -= dropped;
    }

    /// The `at`-th queued block from the front.
    pub fn get(&self, at: usize) -> Option<(&str, &Arc<Cut>)> {
        self.cuts.get(at).map(|(db, c)| (db.as_str(), c))
    }

    /// Takes out the `at`-th block, which must be `cut` (only the one
    /// storing takes blocks out; others only append).
    pub fn remove(&mut self, at: usize, cut: &Arc<Cut>) {
        let (_, c) = self.cuts.remove(at).expect("a queued block");
        assert!(Arc::ptr_eq(&c, cut), "the block stored is the one queued");
        self.samples -= c.samples();
    }
}
