//! The transfer limit (riak-admin's `transfer-limit`): at most `limit`
//! transfers run on a node at once. A slot is given back when its
//! transfer finishes or fails, and taken back from a transfer that made
//! no progress for too long, so a stuck transfer never holds a slot for
//! ever (a failure Riak's operators met).

use std::collections::BTreeMap;

#[derive(Debug)]
pub struct Slots<K: Ord + Clone> {
    limit: usize,
    /// Running transfers and when each last made progress.
    held: BTreeMap<K, u64>,
}

impl<K: Ord + Clone> Slots<K> {
    pub fn new(limit: usize) -> Slots<K> {
        Slots {
            limit,
            held: BTreeMap::new(),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Changes the limit; running transfers keep their slots.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    pub fn running(&self) -> impl Iterator<Item = &K> {
        self.held.keys()
    }

    /// Takes a slot for `k` (true also when it holds one already).
    pub fn try_acquire(&mut self, k: &K, now_ms: u64) -> bool {
        if self.held.contains_key(k) {
            return true;
        }
        if self.held.len() >= self.limit {
            return false;
        }
        self.held.insert(k.clone(), now_ms);
        true
    }

    /// `k` made progress.
    pub fn touch(&mut self, k: &K, now_ms: u64) {
        if let Some(t) = self.held.get_mut(k) {
            *t = now_ms;
        }
    }

    pub fn release(&mut self, k: &K) {
        self.held.remove(k);
    }

    /// Takes back the slots of transfers without progress for `stale_ms`;
    /// returns them (their senders are to be stopped).
    pub fn reap(&mut self, now_ms: u64, stale_ms: u64) -> Vec<K> {
        let stale: Vec<K> = self
            .held
            .iter()
            .filter(|(_, t)| now_ms.saturating_sub(**t) >= stale_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &stale {
            self.held.remove(k);
        }
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_limited_given_back_and_taken_back_when_stale() {
        let mut s: Slots<u32> = Slots::new(2);
        assert!(s.try_acquire(&1, 0));
        assert!(s.try_acquire(&2, 0));
        assert!(!s.try_acquire(&3, 0), "the limit holds");
        assert!(s.try_acquire(&1, 5), "a holder asks again");
        s.release(&1);
        assert!(s.try_acquire(&3, 10));
        s.touch(&3, 100);
        assert_eq!(s.reap(120, 100), vec![2], "2 made no progress for 120 ms");
        assert!(s.try_acquire(&4, 120));
        assert_eq!(s.running().copied().collect::<Vec<_>>(), vec![3, 4]);
        s.set_limit(1);
        assert!(!s.try_acquire(&5, 120));
    }
}
