//! Partitions, ownership and preference lists.

use crate::hash::KeyHash;

/// Riak allows ring sizes up to 1024 in practice; Rill allows 2^14.
pub const MAX_RING_SIZE: u32 = 1 << 14;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingError {
    #[error("ring_size must be a power of two between 1 and {MAX_RING_SIZE}, found {0}")]
    BadSize(u32),
    #[error("ring of {size} partitions given {owners} owners")]
    OwnerCount { size: u32, owners: usize },
}

/// A partition by its number, 0..ring_size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition(pub u32);

/// One replica of a key: the partition, the node that serves it, and
/// whether that node is the partition's owner (primary) or stands in for
/// a down owner (fallback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreflistEntry {
    pub partition: Partition,
    pub node: String,
    pub primary: bool,
}

/// Who owns each partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    size: u32,
    bits: u32,
    owners: Vec<String>,
}

impl Ring {
    pub fn new(owners: Vec<String>) -> Result<Ring, RingError> {
        let size = owners.len() as u32;
        if !size.is_power_of_two() || size > MAX_RING_SIZE {
            return Err(RingError::BadSize(size));
        }
        Ok(Ring {
            size,
            bits: size.trailing_zeros(),
            owners,
        })
    }

    /// Every partition owned by one node.
    pub fn single(size: u32, node: &str) -> Result<Ring, RingError> {
        if !size.is_power_of_two() || size > MAX_RING_SIZE {
            return Err(RingError::BadSize(size));
        }
        Ring::new(vec![node.to_string(); size as usize])
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn owner(&self, p: Partition) -> &str {
        &self.owners[p.0 as usize]
    }

    pub fn partitions(&self) -> impl Iterator<Item = Partition> {
        (0..self.size).map(Partition)
    }

    /// The partition a hash falls in (`hash div inc`).
    pub fn containing(&self, hash: &KeyHash) -> Partition {
        if self.bits == 0 {
            return Partition(0);
        }
        let top = u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]);
        Partition(top >> (32 - self.bits))
    }

    /// The key's first replica: the partition after the one its hash is
    /// in (Riak's `chashbin:responsible_index`).
    pub fn responsible(&self, hash: &KeyHash) -> Partition {
        Partition((self.containing(hash).0 + 1) % self.size)
    }

    /// [`Ring::responsible`] for a ring of `size` partitions (a power of
    /// two), without the ring.
    pub fn responsible_in(size: u32, hash: &KeyHash) -> Partition {
        if size <= 1 {
            return Partition(0);
        }
        let bits = size.trailing_zeros();
        let top = u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]);
        Partition(((top >> (32 - bits)) + 1) % size)
    }

    /// The first `n` partitions clockwise from the responsible one.
    pub fn primaries(&self, hash: &KeyHash, n: u32) -> Vec<Partition> {
        let first = self.responsible(hash).0;
        (0..n.min(self.size))
            .map(|i| Partition((first + i) % self.size))
            .collect()
    }

    /// The preference list of Riak's `get_apl_ann`: the first `n`
    /// partitions whose owner is up, as primaries, then for each primary
    /// whose owner is down a fallback standing in for it: the owner of the
    /// next partition past the first `n` whose owner is up and serves no
    /// replica of the list yet, or, where every such node does (a cluster
    /// with fewer nodes up than `n`), the next whose owner is up. So
    /// replicas land on distinct machines wherever the cluster allows
    /// (Riak takes the next partition alone, and may put two replicas on
    /// one machine while another is idle). With `sloppy_quorum` false no
    /// fallbacks are taken.
    pub fn preflist(
        &self,
        hash: &KeyHash,
        n: u32,
        is_up: impl Fn(&str) -> bool,
        sloppy_quorum: bool,
    ) -> Vec<PreflistEntry> {
        let n = n.min(self.size);
        let first = self.responsible(hash).0;
        let mut out = Vec::with_capacity(n as usize);
        let mut down = Vec::new();
        for i in 0..n {
            let p = Partition((first + i) % self.size);
            let node = self.owner(p);
            if is_up(node) {
                out.push(PreflistEntry {
                    partition: p,
                    node: node.to_string(),
                    primary: true,
                });
            } else {
                down.push(p);
            }
        }
        if sloppy_quorum {
            let mut next = n;
            // Partitions passed over because their owner serves the list.
            let mut passed: std::collections::VecDeque<Partition> = Default::default();
            for p in down {
                let mut found = None;
                while next < self.size {
                    let q = Partition((first + next) % self.size);
                    next += 1;
                    let owner = self.owner(q);
                    if !is_up(owner) {
                        continue;
                    }
                    if out.iter().any(|e| e.node == owner) {
                        passed.push_back(q);
                    } else {
                        found = Some(q);
                        break;
                    }
                }
                if let Some(q) = found.or_else(|| passed.pop_front()) {
                    out.push(PreflistEntry {
                        partition: p,
                        node: self.owner(q).to_string(),
                        primary: false,
                    });
                }
            }
        }
        out
    }

    /// The nodes that keep one copy each of data placed at partition
    /// `first` with `n` copies on distinct machines (the sensor service's
    /// placement): its *owners*, the first `n` distinct nodes met walking
    /// clockwise from `first` (all of them when the ring has fewer), in
    /// the order met. Unlike [`Ring::preflist`]'s `n` partitions, a node
    /// owning two of them does not take two of the copies: on a ring
    /// whose size the node count does not divide, the lists that wrap
    /// around would otherwise keep some data on fewer than `n` machines.
    pub fn distinct_owners(&self, first: Partition, n: u32) -> Vec<&str> {
        self.distinct_from(first).take(n as usize).collect()
    }

    /// [`Ring::distinct_owners`] with Riak's sloppy quorum: the owners
    /// that are up, in order, then for each owner that is down a fallback
    /// standing in for it: the next node met further clockwise that is up
    /// and not an owner. Fewer nodes when too few are up.
    pub fn distinct_preflist(
        &self,
        first: Partition,
        n: u32,
        is_up: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut walk = self.distinct_from(first);
        let mut out: Vec<String> = Vec::with_capacity(n as usize);
        let mut down = 0usize;
        for node in walk.by_ref().take(n as usize) {
            if is_up(node) {
                out.push(node.to_string());
            } else {
                down += 1;
            }
        }
        out.extend(
            walk.filter(|node| is_up(node))
                .take(down)
                .map(str::to_string),
        );
        out
    }

    /// Each node once, in the order met walking clockwise from `first`.
    fn distinct_from(&self, first: Partition) -> impl Iterator<Item = &str> + '_ {
        let mut seen: Vec<&str> = Vec::new();
        (0..self.size).filter_map(move |i| {
            let node = self.owner(Partition((first.0 + i) % self.size));
            (!seen.contains(&node)).then(|| {
                seen.push(node);
                node
            })
        })
    }

    /// A partition's index on the ring as Riak writes it: the decimal
    /// integer `p * 2^160 / ring_size` (vnode directory names, preflists).
    pub fn index_decimal(&self, p: Partition) -> String {
        // p << (160 - bits), as 20 big-endian bytes.
        let mut n = [0u8; 20];
        let shift = 160 - self.bits;
        let v = u64::from(p.0) as u128;
        // Place v at bit offset `shift`: byte offset from the right.
        let byte_shift = (shift / 8) as usize;
        let bit_shift = shift % 8;
        let wide = v << bit_shift;
        for i in 0..16 {
            let byte = ((wide >> (8 * i)) & 0xff) as u8;
            let pos = byte_shift + i;
            if byte != 0 && pos < 20 {
                n[19 - pos] = byte;
            }
        }
        decimal(n)
    }
}

fn decimal(mut n: [u8; 20]) -> String {
    let mut digits = Vec::new();
    loop {
        let mut rem = 0u32;
        let mut all_zero = true;
        for b in n.iter_mut() {
            let cur = (rem << 8) | u32::from(*b);
            *b = (cur / 10) as u8;
            rem = cur % 10;
            if *b != 0 {
                all_zero = false;
            }
        }
        digits.push(b'0' + rem as u8);
        if all_zero {
            break;
        }
    }
    digits.reverse();
    String::from_utf8(digits).expect("ascii digits")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::key_hash;

    // riak_core_apl six_node_test: {<<"foo">>,<<"bar">>} on a 64-partition
    // ring has primaries at indices 4338..696, 4567..680, 4795..664.
    #[test]
    fn foo_bar_lands_where_riak_puts_it() {
        let ring = Ring::single(64, "n").unwrap();
        let h = key_hash(b"default", b"foo", b"bar");
        assert_eq!(ring.containing(&h), Partition(18));
        let p = ring.primaries(&h, 3);
        assert_eq!(p, vec![Partition(19), Partition(20), Partition(21)]);
        assert_eq!(
            ring.index_decimal(Partition(19)),
            "433883298582611803841718934712646521460354973696"
        );
        assert_eq!(
            ring.index_decimal(Partition(1)),
            "22835963083295358096932575511191922182123945984"
        );
        assert_eq!(ring.index_decimal(Partition(0)), "0");
    }

    // riak_core_apl six_node_bucket_key_ann_test: favorite/jethrotull on
    // partitions 34, 35, 36.
    #[test]
    fn favorite_jethrotull() {
        let ring = Ring::single(64, "n").unwrap();
        let h = key_hash(b"default", b"favorite", b"jethrotull");
        assert_eq!(
            ring.primaries(&h, 3),
            vec![Partition(34), Partition(35), Partition(36)]
        );
    }

    #[test]
    fn the_last_slice_wraps_to_partition_zero() {
        let ring = Ring::single(8, "n").unwrap();
        assert_eq!(ring.responsible(&[0xff; 20]), Partition(0));
        assert_eq!(ring.responsible(&[0; 20]), Partition(1));
        for size in [1u32, 2, 8, 64, 1024] {
            let r = Ring::single(size, "n").unwrap();
            for i in 0..50u8 {
                let h = key_hash(b"", b"b", &[i]);
                assert_eq!(
                    Ring::responsible_in(size, &h),
                    r.responsible(&h),
                    "size {size}"
                );
            }
        }
        let ring = Ring::single(1, "n").unwrap();
        assert_eq!(ring.primaries(&[0x80; 20], 3), vec![Partition(0)]);
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert_eq!(Ring::single(48, "n"), Err(RingError::BadSize(48)));
        assert_eq!(Ring::single(0, "n"), Err(RingError::BadSize(0)));
    }

    // Three nodes on eight partitions: the lists from partitions 6 and 7
    // wrap around to a node they already named.
    #[test]
    fn distinct_owners_are_n_machines_where_the_ring_has_them() {
        let ring = |names: &[&str], size: usize| {
            Ring::new((0..size).map(|i| names[i % names.len()].into()).collect()).unwrap()
        };
        let r = ring(&["a", "b", "c"], 8);
        let h = |p: u32| r.preflist(&[(p * 32) as u8; 20], 3, |_| true, false);
        assert_eq!(
            h(5).iter().map(|e| e.node.as_str()).collect::<Vec<_>>(),
            ["a", "b", "a"],
            "the partitions' list names a twice"
        );
        for p in 0..8 {
            let mut o = r.distinct_owners(Partition(p), 3);
            assert_eq!(o.len(), 3, "from {p}");
            o.sort_unstable();
            assert_eq!(o, ["a", "b", "c"], "from {p}");
        }
        assert_eq!(r.distinct_owners(Partition(6), 3), ["a", "b", "c"]);
        assert_eq!(r.distinct_owners(Partition(6), 2), ["a", "b"]);
        assert_eq!(r.distinct_owners(Partition(6), 5), ["a", "b", "c"]);
        let all = |_: &str| true;
        assert_eq!(r.distinct_preflist(Partition(7), 3, all), ["b", "a", "c"]);
        assert_eq!(
            r.distinct_preflist(Partition(7), 3, |x| x != "a"),
            ["b", "c"],
            "no fourth node to stand in"
        );
        let r = ring(&["a", "b", "c", "d"], 8);
        assert_eq!(r.distinct_preflist(Partition(1), 3, all), ["b", "c", "d"]);
        assert_eq!(
            r.distinct_preflist(Partition(1), 3, |x| x != "c"),
            ["b", "d", "a"],
            "a stands in for c"
        );
        assert_eq!(
            r.distinct_preflist(Partition(1), 3, |x| x == "d" || x == "a"),
            ["d", "a"],
            "one fallback left for two owners down"
        );
        assert_eq!(r.distinct_preflist(Partition(1), 3, |x| x == "d"), ["d"]);
        let one = Ring::single(8, "a").unwrap();
        assert_eq!(one.distinct_owners(Partition(3), 3), ["a"]);
    }

    // Preference lists from a table: owners a,b,c,d repeating; which are
    // primaries and which fallbacks stand in, given the nodes that are up.
    #[test]
    fn preflists_from_a_table() {
        let owners: Vec<String> = (0..8).map(|i| ["a", "b", "c", "d"][i % 4].into()).collect();
        let ring = Ring::new(owners).unwrap();
        let h = [0u8; 20]; // responsible partition 1 (owner b)
        type Expected<'a> = &'a [(u32, &'a str, bool)];
        let table: &[(&[&str], bool, Expected)] = &[
            (
                &["a", "b", "c", "d"],
                true,
                &[(1, "b", true), (2, "c", true), (3, "d", true)],
            ),
            (
                &["a", "b", "d"],
                true,
                &[(1, "b", true), (3, "d", true), (2, "a", false)],
            ),
            (&["a", "b", "d"], false, &[(1, "b", true), (3, "d", true)]),
            // Only partitions 4 and 0 past the first three are a's.
            (&["a"], true, &[(1, "a", false), (2, "a", false)]),
            (&[], true, &[]),
        ];
        for (up, sloppy, want) in table {
            let got = ring.preflist(&h, 3, |n| up.contains(&n), *sloppy);
            let got: Vec<(u32, &str, bool)> = got
                .iter()
                .map(|e| (e.partition.0, e.node.as_str(), e.primary))
                .collect();
            assert_eq!(&got, want, "up {up:?} sloppy {sloppy}");
        }
    }

    // A fallback goes to a machine that serves no replica of the list
    // when there is one, though the next partition's owner is up.
    #[test]
    fn fallbacks_go_to_machines_the_list_does_not_use() {
        let owners: Vec<String> = ["a", "b", "c", "d", "b", "e", "a", "c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let ring = Ring::new(owners).unwrap();
        let h = [0u8; 20]; // responsible partition 1 (owner b)
        let pl = |up: &[&str]| -> Vec<(u32, String, bool)> {
            ring.preflist(&h, 3, |n| up.contains(&n), true)
                .into_iter()
                .map(|e| (e.partition.0, e.node, e.primary))
                .collect()
        };
        let s = |p: u32, n: &str, primary: bool| (p, n.to_string(), primary);
        // d down: partition 4 (b) is next, but b holds a primary; e
        // stands in.
        assert_eq!(
            pl(&["a", "b", "c", "e"]),
            vec![s(1, "b", true), s(2, "c", true), s(3, "e", false)]
        );
        // c and d down: the fallbacks are e and a, not b twice.
        assert_eq!(
            pl(&["a", "b", "e"]),
            vec![s(1, "b", true), s(2, "e", false), s(3, "a", false)]
        );
        // Only b up: every replica on b, as before.
        assert_eq!(pl(&["b"]), vec![s(1, "b", true), s(2, "b", false)]);
    }
}
