//! Repair, pure (Riak's partition repair, `riak_kv_vnode:repair`): a
//! partition whose data was lost (a wiped disk, a damaged backend) gets
//! its keys back from the partitions beside it on the ring. The owner of
//! the partition asks the owners of two neighbours; each sends, as a
//! transfer of kind [`crate::plan::Kind::Repair`], what its vnode holds of
//! the keys the partition is a replica of, and keeps it.
//!
//! A key whose preference list starts at partition `f` with `n` replicas
//! is on partitions `f .. f+n-1`. A neighbour `a` places before the
//! target holds the keys with `f <= target - a`; one `b` places after it
//! those with `f >= target + b - n + 1`. Together they hold every key of
//! the target when `a + b <= n`. Riak takes `a = b = 1`; here the nearest
//! neighbour on each side whose owner is another node that is up, as
//! long as the rule holds for the smallest n_val in use above 1.

/// A repair's transfer id has this bit set, and its source partition in
/// the low 32 bits (an ownership transfer's id is a ring version, a
/// hinted one's 0).
pub const REPAIR_ID: u64 = 1 << 63;

/// The source partition of a repair's transfer id, or `None` when the
/// id is not a repair's.
pub fn source_of(id: u64) -> Option<u32> {
    (id & REPAIR_ID != 0 && id & !REPAIR_ID <= u64::from(u32::MAX)).then_some(id as u32)
}

/// A partition that sends in a repair, and its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub partition: u32,
    pub node: String,
}

/// Why a partition cannot be repaired now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RepairError {
    #[error("partition {partition} is not on this ring of {size} partitions")]
    NoSuchPartition { partition: u32, size: u32 },
    #[error("partition {partition} is owned by {owner}: run the repair there")]
    NotOwner { partition: u32, owner: String },
    #[error("every bucket has n_val 1: partition {partition} has no other replica to repair from")]
    NoReplica { partition: u32 },
    #[error(
        "partition {partition} cannot be repaired now: no partition within {reach} before \
         and after it is owned by another node that is up"
    )]
    NoNeighbours { partition: u32, reach: u32 },
}

/// The partitions that send `target`'s keys to `me`, its owner, in a
/// repair: the nearest before and the nearest after it whose owners are
/// other nodes that `up` says are up, within the reach of the smallest
/// n_val in use above 1 (module doc). `owners` is the ring, partition by
/// partition.
pub fn sources(
    owners: &[String],
    me: &str,
    target: u32,
    n_vals: &[u32],
    up: impl Fn(&str) -> bool,
) -> Result<Vec<Source>, RepairError> {
    let size = owners.len() as u32;
    let Some(owner) = owners.get(target as usize) else {
        return Err(RepairError::NoSuchPartition {
            partition: target,
            size,
        });
    };
    if owner != me {
        return Err(RepairError::NotOwner {
            partition: target,
            owner: owner.clone(),
        });
    }
    let Some(n) = n_vals.iter().copied().filter(|n| *n > 1).min() else {
        return Err(RepairError::NoReplica { partition: target });
    };
    let n = n.min(size);
    let usable = |p: u32| {
        let o = &owners[p as usize];
        o != me && up(o)
    };
    let before = (1..n).find(|a| usable((target + size - a) % size));
    let after = (1..n).find(|b| usable((target + b) % size));
    match (before, after) {
        (Some(a), Some(b)) if a + b <= n => {
            let mut out = Vec::new();
            for p in [(target + size - a) % size, (target + b) % size] {
                if out.iter().all(|s: &Source| s.partition != p) {
                    out.push(Source {
                        partition: p,
                        node: owners[p as usize].clone(),
                    });
                }
            }
            Ok(out)
        }
        _ => Err(RepairError::NoNeighbours {
            partition: target,
            reach: n - 1,
        }),
    }
}

/// Whether a key whose preference list starts at partition `first` with
/// `n` replicas has one at `target`, on a ring of `size` partitions.
pub fn replica_of(first: u32, n: u32, target: u32, size: u32) -> bool {
    size > 0 && (target + size - first % size) % size < n.min(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(owners: &[&str]) -> Vec<String> {
        owners.iter().map(|o| o.to_string()).collect()
    }

    #[test]
    fn a_repair_takes_the_neighbours_on_both_sides() {
        let r = ring(&["a", "b", "c", "a", "b", "c", "a", "b"]);
        let s = sources(&r, "a", 3, &[3], |_| true).unwrap();
        assert_eq!(
            s,
            vec![
                Source {
                    partition: 2,
                    node: "c".into()
                },
                Source {
                    partition: 4,
                    node: "b".into()
                },
            ]
        );
        // Wrapping round the ring.
        let s = sources(&r, "a", 0, &[3], |_| true).unwrap();
        assert_eq!(
            s.iter().map(|s| s.partition).collect::<Vec<_>>(),
            vec![7, 1]
        );
    }

    #[test]
    fn a_neighbour_down_or_on_this_node_is_passed_over_within_reach() {
        let r = ring(&["a", "b", "c", "a", "d", "c", "a", "b"]);
        // 2's owner c is down: 1 (b) is two places before, 4 (d) one after.
        let s = sources(&r, "a", 3, &[3], |n| n != "c").unwrap();
        assert_eq!(
            s.iter().map(|s| s.partition).collect::<Vec<_>>(),
            vec![1, 4]
        );
        // With n_val 2 that is out of reach (2 + 1 > 2).
        assert_eq!(
            sources(&r, "a", 3, &[2, 3], |n| n != "c"),
            Err(RepairError::NoNeighbours {
                partition: 3,
                reach: 1
            })
        );
        // Everything else on this node.
        let alone = ring(&["a", "a", "a", "a"]);
        assert!(matches!(
            sources(&alone, "a", 1, &[3], |_| true),
            Err(RepairError::NoNeighbours { .. })
        ));
    }

    #[test]
    fn a_repair_is_refused_where_it_cannot_run() {
        let r = ring(&["a", "b", "c", "a"]);
        assert_eq!(
            sources(&r, "a", 1, &[3], |_| true),
            Err(RepairError::NotOwner {
                partition: 1,
                owner: "b".into()
            })
        );
        assert_eq!(
            sources(&r, "a", 4, &[3], |_| true),
            Err(RepairError::NoSuchPartition {
                partition: 4,
                size: 4
            })
        );
        assert_eq!(
            sources(&r, "a", 0, &[1], |_| true),
            Err(RepairError::NoReplica { partition: 0 })
        );
        // Keys of n_val 1 are left out; the others are repaired.
        assert!(sources(&r, "a", 0, &[1, 3], |_| true).is_ok());
    }

    /// Every key the target is a replica of is held by one of the sources
    /// chosen, for every ring of four owners, target, n_val and set of
    /// nodes down.
    #[test]
    fn the_sources_chosen_hold_every_key_of_the_target() {
        let names = ["a", "b", "c", "d"];
        for code in 0..4u32.pow(6) {
            let r: Vec<String> = (0..6)
                .map(|i| names[(code / 4u32.pow(i) % 4) as usize].to_string())
                .collect();
            for down in 0..16u32 {
                let up = |n: &str| {
                    let i = names.iter().position(|x| *x == n).unwrap();
                    down & (1 << i) == 0
                };
                for target in 0..6 {
                    for n in 2..=4 {
                        let me = r[target as usize].clone();
                        let Ok(s) = sources(&r, &me, target, &[n], up) else {
                            continue;
                        };
                        for first in 0..6 {
                            if !replica_of(first, n, target, 6) {
                                continue;
                            }
                            assert!(
                                s.iter().any(|s| replica_of(first, n, s.partition, 6)
                                    && s.node != me
                                    && up(&s.node)),
                                "ring {r:?} target {target} n {n} first {first}: {s:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_repair_id_names_its_source() {
        let id = crate::plan::Kind::Repair { source: 17 }.id();
        assert_eq!(source_of(id), Some(17));
        assert_eq!(source_of(0), None);
        assert_eq!(source_of(42), None);
        assert_eq!(source_of(REPAIR_ID | (1 << 40)), None);
        assert!(replica_of(6, 3, 0, 8));
        assert!(!replica_of(6, 3, 1, 8));
        assert!(replica_of(0, 3, 0, 8));
    }
}
