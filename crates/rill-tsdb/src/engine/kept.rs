//! The slice digests anti-entropy keeps (`digest`), by database and
//! home: a digest for each computed slice that held samples (or was
//! marked when computed), and the runs of slices computed, in which a
//! slice without one held none. A
//! storage period of years is mostly empty slices (a home's data covers
//! the time it was written); keeping them as runs keeps the memory and
//! the walks of a round to the slices that hold something.

use super::digest::SliceDigest;
use std::collections::{BTreeMap, HashMap};

/// Digests kept, by database and home.
#[derive(Default)]
pub(super) struct Kept {
    digests: HashMap<String, HashMap<u32, HomeDigests>>,
}

impl Kept {
    /// The kept digests of one home of `db`, if some were made.
    pub fn get_home(&mut self, db: &str, home: u32) -> Option<&mut HomeDigests> {
        self.digests.get_mut(db)?.get_mut(&home)
    }

    /// The kept digests of one home of `db` (made empty when none are).
    pub fn of_home(&mut self, db: &str, home: u32) -> &mut HomeDigests {
        self.digests
            .entry(db.to_string())
            .or_default()
            .entry(home)
            .or_default()
    }

    /// Forgets a home's.
    pub fn forget(&mut self, db: &str, home: u32) {
        if let Some(of_db) = self.digests.get_mut(db) {
            of_db.remove(&home);
        }
    }
}

/// One home's kept digests.
#[derive(Default)]
pub(super) struct HomeDigests {
    /// By slice start: the slice's write mark and the home's count of
    /// drops when it was computed, and its digest. A slice that held
    /// samples, or that was marked when computed.
    pub slices: BTreeMap<i64, (u64, u64, SliceDigest)>,
    /// Runs of slices computed (first start, end), at the home's count
    /// of drops `runs_drops`: a slice in a run with no entry in `slices`
    /// held no sample, and holds none as long as it has no mark and the
    /// home was not dropped since.
    runs: BTreeMap<i64, i64>,
    runs_drops: u64,
}

impl HomeDigests {
    /// Lets go of what starts before `expired`; a run reaching past it
    /// is cut to start there (not on a slice's start: the walk steps
    /// from the first slice of the range, past the cut).
    pub fn trim(&mut self, expired: i64) {
        if self
            .slices
            .first_key_value()
            .is_some_and(|(s, _)| *s < expired)
        {
            self.slices = self.slices.split_off(&expired);
        }
        if self
            .runs
            .first_key_value()
            .is_some_and(|(s, _)| *s < expired)
        {
            let mut rest = self.runs.split_off(&expired);
            if let Some((_, &end)) = self.runs.last_key_value() {
                if end > expired {
                    rest.insert(expired, end);
                }
            }
            self.runs = rest;
        }
    }

    /// Whether the slice starting at `start` was computed empty and is
    /// still known to be (with no entry in `slices`, no mark now, the
    /// home's count of drops now `drops`): what the walk of
    /// `Engine::slices` passes by, as the tests ask it.
    #[cfg(test)]
    pub fn known_empty(&self, start: i64, drops: u64) -> bool {
        self.runs_drops == drops && !self.slices.contains_key(&start) && self.in_run(start)
    }

    #[cfg(test)]
    fn in_run(&self, start: i64) -> bool {
        self.runs
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &end)| start < end)
    }

    /// The runs that cover some of `from..to`, in order, when they are
    /// of the home's count of drops `drops`.
    pub fn runs_in(&self, from: i64, to: i64, drops: u64) -> Vec<(i64, i64)> {
        if self.runs_drops != drops {
            return Vec::new();
        }
        let before = self
            .runs
            .range(..from)
            .next_back()
            .filter(|(_, &end)| end > from);
        before
            .into_iter()
            .chain(self.runs.range(from..to))
            .map(|(&s, &e)| (s, e))
            .collect()
    }

    /// Keeps the digest of the slice `start..start + slice`, computed at
    /// its mark `mark` and the home's count of drops `drops`; nothing
    /// when the home was dropped since (its runs are of a later count).
    pub fn keep(&mut self, start: i64, slice: i64, mark: u64, drops: u64, d: SliceDigest) {
        if drops < self.runs_drops {
            return;
        }
        if d.samples > 0 || mark != 0 {
            self.slices.insert(start, (mark, drops, d));
        } else {
            self.slices.remove(&start);
        }
        self.cover(start, start.saturating_add(slice), drops);
    }

    /// Adds `start..end` to the runs of `drops`: the runs of an earlier
    /// count are let go first; when the runs are of a later count (the
    /// home was dropped since this was computed), nothing is added.
    fn cover(&mut self, start: i64, end: i64, drops: u64) {
        if drops < self.runs_drops {
            return;
        }
        if drops > self.runs_drops {
            self.runs.clear();
            self.runs_drops = drops;
        }
        let (mut start, mut end) = (start, end);
        if let Some((&s, &e)) = self.runs.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
            }
        }
        let joined: Vec<i64> = self.runs.range(start..=end).map(|(&s, _)| s).collect();
        for s in joined {
            if let Some(e) = self.runs.remove(&s) {
                end = end.max(e);
            }
        }
        self.runs.insert(start, end);
    }

    #[cfg(test)]
    pub fn runs(&self) -> Vec<(i64, i64)> {
        self.runs.iter().map(|(&s, &e)| (s, e)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> SliceDigest {
        SliceDigest::default()
    }

    fn full() -> SliceDigest {
        SliceDigest {
            digest: 9,
            samples: 3,
            busy: false,
        }
    }

    #[test]
    fn slices_computed_empty_join_in_runs_and_full_ones_are_kept_apart() {
        let mut h = HomeDigests::default();
        for s in [0, 10, 30, 20, 50] {
            h.keep(s, 10, 0, 0, if s == 20 { full() } else { empty() });
        }
        assert_eq!(h.runs(), vec![(0, 40), (50, 60)]);
        assert_eq!(h.slices.keys().copied().collect::<Vec<_>>(), vec![20]);
        assert!(h.known_empty(10, 0));
        assert!(!h.known_empty(20, 0), "held samples");
        assert!(!h.known_empty(40, 0), "not computed");
        assert!(!h.known_empty(10, 1), "the home was dropped since");
        h.keep(40, 10, 0, 0, empty());
        assert_eq!(h.runs(), vec![(0, 60)]);
        assert_eq!(h.runs_in(15, 35, 0), vec![(0, 60)]);
        assert_eq!(h.runs_in(15, 35, 1), vec![]);
    }

    #[test]
    fn a_slice_computed_while_marked_is_kept_even_empty() {
        let mut h = HomeDigests::default();
        h.keep(0, 10, 4, 0, empty());
        assert!(!h.known_empty(0, 0));
        assert_eq!(h.slices.get(&0), Some(&(4, 0, empty())));
        // Computed again, unmarked and empty: known empty by its run.
        h.keep(0, 10, 0, 0, empty());
        assert!(h.known_empty(0, 0));
    }

    #[test]
    fn runs_of_an_earlier_drop_are_let_go_and_a_late_one_is_not_taken() {
        let mut h = HomeDigests::default();
        h.keep(0, 10, 0, 0, empty());
        h.keep(100, 10, 0, 1, empty());
        assert_eq!(h.runs(), vec![(100, 110)]);
        h.keep(100, 10, 0, 1, full());
        h.keep(100, 10, 0, 0, empty());
        h.keep(200, 10, 0, 0, empty());
        assert_eq!(h.runs(), vec![(100, 110)], "computed before the drop");
        assert_eq!(h.slices.get(&100), Some(&(0, 1, full())), "not removed");
    }

    #[test]
    fn trimming_cuts_a_run_at_the_storage_periods_start() {
        let mut h = HomeDigests::default();
        for s in [0, 10, 20, 30] {
            h.keep(s, 10, 0, 0, if s == 10 { full() } else { empty() });
        }
        h.keep(60, 10, 0, 0, empty());
        h.trim(20);
        assert_eq!(h.runs(), vec![(20, 40), (60, 70)]);
        assert!(h.slices.is_empty());
        h.trim(65);
        assert_eq!(h.runs(), vec![(65, 70)]);
    }
}
