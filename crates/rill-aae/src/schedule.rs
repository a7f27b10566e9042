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

#[cfg(test)]
mod tests {
    use super::*;

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
