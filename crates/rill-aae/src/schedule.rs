//! Which replicas a vnode exchanges with: for each n_val in use, every
//! preference list the vnode's partition is in, and in each of those
//! lists every other partition (riak_kv_entropy_manager's
//! `all_pairwise_exchanges`). With n_val 3 a partition is in 3 lists and
//! meets 2 others in each: 6 exchanges, `(n - 1) * n`, make a loop; both
//! partitions of a pair schedule their exchange, so each pair is
//! compared from either side once a loop.

/// A preference list by its first partition and its length: the keys a
/// tree covers (Riak's IndexN). A key's IndexN is the partition its ring
/// hash falls in and its bucket's n_val.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexN {
    pub first: u32,
    pub n: u8,
}

impl IndexN {
    /// The partitions of this list on a ring of `ring_size` partitions.
    pub fn partitions(self, ring_size: u32) -> impl Iterator<Item = u32> {
        (0..u32::from(self.n).min(ring_size)).map(move |i| (self.first + i) % ring_size)
    }

    /// Whether `partition` is in this list.
    pub fn contains(self, partition: u32, ring_size: u32) -> bool {
        self.partitions(ring_size).any(|p| p == partition)
    }

    /// Every list `partition` is in for `n` on a ring of `ring_size`.
    pub fn of_partition(partition: u32, n: u8, ring_size: u32) -> Vec<IndexN> {
        let n = u32::from(n).min(ring_size);
        (0..n)
            .map(|back| IndexN {
                first: (partition + ring_size - back) % ring_size,
                n: n as u8,
            })
            .collect()
    }
}

/// One exchange of a vnode's loop: with `remote`'s vnode, over the keys
/// of `index_n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pair {
    pub remote: u32,
    pub index_n: IndexN,
}

/// Every exchange of `partition`'s loop for the n_vals in use, in a
/// stable order (the caller shuffles).
pub fn pairwise(partition: u32, n_vals: &[u8], ring_size: u32) -> Vec<Pair> {
    let mut out = Vec::new();
    let mut ns: Vec<u8> = n_vals.iter().copied().filter(|n| *n > 1).collect();
    ns.sort_unstable();
    ns.dedup();
    for n in ns {
        for index_n in IndexN::of_partition(partition, n, ring_size) {
            for remote in index_n.partitions(ring_size) {
                if remote != partition {
                    out.push(Pair { remote, index_n });
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// How far `tictacaae_rangeboost` may grow for replicas far apart: 64
/// times `tictacaae_maxresults` (4,096 branches and segments at the
/// default).
pub const MAX_BOOST: u32 = 64;

/// The exchanges that follow one that found differences, between the
/// same replicas, after the pause instead of the tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowUps {
    /// Follow-ups left, this one included.
    pub left: u32,
    /// Times `tictacaae_maxresults` each takes.
    pub boost: u32,
}

impl FollowUps {
    /// What follows an exchange that capped its ids at `asked` and found
    /// `found` keys different; `was`: the follow-ups it was one of, if
    /// any. As Riak's repair loops: after an exchange that found keys, up
    /// to `repair_loops` more, each taking `range_boost` times as many
    /// ids. Beyond Riak, for replicas far apart (a node replaced or
    /// wiped): an exchange that found keys for half the ids it could
    /// take or more is followed again whatever the count, and its
    /// follow-up takes twice as many, up to [`MAX_BOOST`] times; so a
    /// replica that lost everything catches up at a rate bounded by one
    /// exchange at a time per vnode, not by the tick. `repair_loops = 0`
    /// turns follow-ups off.
    pub fn after(
        was: Option<FollowUps>,
        asked: usize,
        found: usize,
        repair_loops: u32,
        range_boost: u32,
    ) -> Option<FollowUps> {
        if found == 0 || repair_loops == 0 {
            return None;
        }
        let saturated = found.saturating_mul(2) >= asked;
        let (mut left, mut boost) = match was {
            None => (repair_loops, range_boost.max(1)),
            Some(w) => (w.left.saturating_sub(1), w.boost),
        };
        if saturated {
            left = left.max(1);
            if was.is_some() {
                boost = boost.saturating_mul(2);
            }
        }
        (left > 0).then_some(FollowUps {
            left,
            boost: boost.clamp(1, MAX_BOOST),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_ups_are_riaks_repair_loops_unless_replicas_are_far_apart() {
        // A few keys found: four follow-ups at twice the ids, then none.
        let mut f = FollowUps::after(None, 64, 3, 4, 2);
        assert_eq!(f, Some(FollowUps { left: 4, boost: 2 }));
        for left in [3, 2, 1] {
            f = FollowUps::after(f, 128, 3, 4, 2);
            assert_eq!(f, Some(FollowUps { left, boost: 2 }));
        }
        assert_eq!(FollowUps::after(f, 128, 3, 4, 2), None);
        // Nothing found ends them; repair_loops = 0 turns them off.
        assert_eq!(
            FollowUps::after(Some(FollowUps { left: 3, boost: 2 }), 128, 0, 4, 2),
            None
        );
        assert_eq!(FollowUps::after(None, 64, 64, 0, 2), None);
        // Saturated: they go on and take twice as many, up to the cap.
        let mut f = FollowUps::after(None, 64, 64, 4, 2);
        let mut boosts = vec![];
        for _ in 0..10 {
            let asked = 64 * f.unwrap().boost as usize;
            f = FollowUps::after(f, asked, asked, 4, 2);
            boosts.push(f.unwrap().boost);
        }
        assert_eq!(boosts, vec![4, 8, 16, 32, 64, 64, 64, 64, 64, 64]);
        assert!(f.unwrap().left >= 1);
    }

    #[test]
    fn n_val_three_makes_six_exchanges_with_four_neighbours() {
        let pairs = pairwise(10, &[3], 64);
        assert_eq!(pairs.len(), 6);
        let mut remotes: Vec<u32> = pairs.iter().map(|p| p.remote).collect();
        remotes.dedup();
        assert_eq!(remotes, vec![8, 9, 11, 12]);
        // Neighbours one away share two lists, two away one.
        assert_eq!(pairs.iter().filter(|p| p.remote == 11).count(), 2);
        assert_eq!(pairs.iter().filter(|p| p.remote == 12).count(), 1);
        for p in &pairs {
            assert!(p.index_n.contains(10, 64) && p.index_n.contains(p.remote, 64));
        }
    }

    #[test]
    fn lists_wrap_around_the_ring() {
        let lists = IndexN::of_partition(1, 3, 8);
        assert_eq!(
            lists.iter().map(|l| l.first).collect::<Vec<_>>(),
            vec![1, 0, 7]
        );
        assert_eq!(
            IndexN { first: 7, n: 3 }.partitions(8).collect::<Vec<_>>(),
            vec![7, 0, 1]
        );
        let pairs = pairwise(0, &[3, 2], 8);
        assert_eq!(pairs.len(), 6 + 2);
    }

    #[test]
    fn an_n_val_of_one_exchanges_with_nobody() {
        assert!(pairwise(3, &[1], 16).is_empty());
    }
}
