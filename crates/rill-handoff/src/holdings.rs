//! Who holds a partition's data besides its owner, and what follows for
//! tombstones: a tombstone is reaped only when no other node may hand the
//! value back after it is gone. Each node reports, with every ping, the
//! partitions it holds data of without owning them (a fallback's hinted
//! data, an old owner's data not yet dropped, a next owner's data taken
//! in); this rule reads those reports. Pure: times are the caller's
//! milliseconds.

use std::collections::{BTreeMap, BTreeSet};

/// What a node last reported: the partitions it holds without owning
/// them, and when it looked (the caller's clock).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub partitions: BTreeSet<u32>,
    pub looked_ms: u64,
}

/// A member as the reap rule sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub reachable: bool,
}

/// Whether a tombstone on `partitions`, whose reap was asked at
/// `asked_ms`, may be reaped: every member is reachable (a member that
/// cannot be asked may hold the value), none of the partitions is moving
/// between owners, and every member looked at what it holds after
/// `asked_ms` and holds none of them. A value a fallback took before the
/// delete is in its holdings from then on, so a look after the delete
/// sees it.
pub fn may_reap(
    members: &[Member],
    reports: &BTreeMap<String, Report>,
    moving: &BTreeSet<u32>,
    partitions: &[u32],
    asked_ms: u64,
) -> bool {
    if partitions.iter().any(|p| moving.contains(p)) {
        return false;
    }
    members.iter().all(|m| {
        m.reachable
            && reports.get(&m.name).is_some_and(|r| {
                r.looked_ms > asked_ms && !partitions.iter().any(|p| r.partitions.contains(p))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(up: &[(&str, bool)]) -> Vec<Member> {
        up.iter()
            .map(|(n, r)| Member {
                name: n.to_string(),
                reachable: *r,
            })
            .collect()
    }

    fn report(partitions: &[u32], looked_ms: u64) -> Report {
        Report {
            partitions: partitions.iter().copied().collect(),
            looked_ms,
        }
    }

    #[test]
    fn a_tombstone_is_reaped_only_when_no_one_else_may_hold_its_value() {
        let all_up = members(&[("a", true), ("b", true), ("c", true)]);
        let fresh: BTreeMap<String, Report> = [
            ("a".to_string(), report(&[], 200)),
            ("b".to_string(), report(&[9], 200)),
            ("c".to_string(), report(&[], 200)),
        ]
        .into();
        let none = BTreeSet::new();
        assert!(may_reap(&all_up, &fresh, &none, &[1, 2, 3], 100));
        // b holds partition 2 (a fallback's hinted data, an old owner's).
        let mut held = fresh.clone();
        held.get_mut("b").unwrap().partitions.insert(2);
        assert!(!may_reap(&all_up, &held, &none, &[1, 2, 3], 100));
        // A member down may hold it.
        let c_down = members(&[("a", true), ("b", true), ("c", false)]);
        assert!(!may_reap(&c_down, &fresh, &none, &[1, 2, 3], 100));
        // A report older than the reap's ask may miss a value taken
        // just before the delete.
        assert!(!may_reap(&all_up, &fresh, &none, &[1, 2, 3], 200));
        // No report at all.
        let mut missing = fresh.clone();
        missing.remove("c");
        assert!(!may_reap(&all_up, &missing, &none, &[1, 2, 3], 100));
        // A partition moving between owners.
        let moving: BTreeSet<u32> = [3].into();
        assert!(!may_reap(&all_up, &fresh, &moving, &[1, 2, 3], 100));
    }
}
