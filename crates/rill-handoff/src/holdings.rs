//! Who holds a partition's data besides its owner, and what follows for
//! tombstones and leaving members: a tombstone is reaped only when no
//! other node may hand the value back after it is gone, and a leaving
//! member exits only when it holds nothing it does not own. Each node
//! reports, with every ping, the partitions it holds data of, owned or
//! not; the reader decides which of them a member does not own, by its
//! own ring (a report interpreted by the sender's ring would omit a
//! partition the sender still thinks it owns after the claimant gave it
//! away: the cluster simulation saw a leaving member exit so, with data
//! no one else had). Pure: times are the caller's milliseconds.

use rill_cluster::{ClusterState, Status};
use std::collections::{BTreeMap, BTreeSet};

/// What a node last reported: the partitions it holds data of, and when
/// it looked (the caller's clock).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub partitions: BTreeSet<u32>,
    pub looked_ms: u64,
}

impl Report {
    /// The report of a look by `me` at `looked_ms`: the partitions it owns
    /// in `owners` (its ring), listed without a look (a reader that takes
    /// another node for their owner waits for `me`'s ring to say so too,
    /// and its next look), and those `holds` finds data of. `holds`
    /// answers `None` when it could not look: that counts as holding, so
    /// a reap waits.
    pub fn look(
        me: &str,
        owners: &[String],
        looked_ms: u64,
        mut holds: impl FnMut(u32) -> Option<bool>,
    ) -> Report {
        Report {
            partitions: (0..owners.len() as u32)
                .filter(|&p| owners[p as usize] == me || holds(p).unwrap_or(true))
                .collect(),
            looked_ms,
        }
    }

    /// The partitions of the report that `member` does not own in the
    /// ring `owners` (the reader's: each partition's owner).
    pub fn not_owned<'a>(
        &'a self,
        member: &'a str,
        owners: &'a [String],
    ) -> impl Iterator<Item = u32> + 'a {
        self.partitions
            .iter()
            .copied()
            .filter(move |p| owners.get(*p as usize).is_none_or(|o| o != member))
    }
}

/// A member as the reap rule sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub reachable: bool,
}

/// Whether a tombstone on `partitions`, whose reap was asked at
/// `asked_ms`, may be reaped, by the reader's ring `owners`: every member
/// is reachable (a member that cannot be asked may hold the value), none
/// of the partitions is moving between owners, and every member looked
/// at what it holds after `asked_ms` and holds none of them without
/// owning it. A value a fallback took before the delete is in its
/// holdings from then on, so a look after the delete sees it.
pub fn may_reap(
    members: &[Member],
    reports: &BTreeMap<String, Report>,
    owners: &[String],
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
                r.looked_ms > asked_ms
                    && !r
                        .not_owned(&m.name, owners)
                        .any(|p| partitions.contains(&p))
            })
    })
}

/// [`may_reap`] as node `me` asks it, by its state `state` (members,
/// ring, moves) and `reachable` (its failure detector's word on a peer).
pub fn may_reap_at(
    state: &ClusterState,
    me: &str,
    mut reachable: impl FnMut(&str) -> bool,
    reports: &BTreeMap<String, Report>,
    partitions: &[u32],
    asked_ms: u64,
) -> bool {
    let members: Vec<Member> = state
        .with_status(Status::is_member)
        .into_iter()
        .map(|name| Member {
            reachable: name == me || reachable(&name),
            name,
        })
        .collect();
    let moving: BTreeSet<u32> = state.ring().next.iter().map(|t| t.partition).collect();
    may_reap(
        &members,
        reports,
        state.owners(),
        &moving,
        partitions,
        asked_ms,
    )
}

/// Whether leaving member `name` holds, or may hold, data of partitions
/// it does not own in the claimant's ring `owners`: no report yet, a
/// report that lists some, or one looked at no later than `settled_ms`
/// (before writes in flight when it last gave a partition up could have
/// landed). While it may, it does not exit.
pub fn may_still_hold(
    name: &str,
    report: Option<&Report>,
    owners: &[String],
    settled_ms: u64,
) -> bool {
    report.is_none_or(|r| r.looked_ms <= settled_ms || r.not_owned(name, owners).next().is_some())
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
        // a owns 1, b owns 2, c owns 3 and the rest.
        let owners: Vec<String> = ["c", "a", "b", "c", "c", "c", "c", "c", "c", "c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let none = BTreeSet::new();
        assert!(may_reap(&all_up, &fresh, &owners, &none, &[1, 2, 3], 100));
        // b holds partition 3 (a fallback's hinted data, an old owner's).
        let mut held = fresh.clone();
        held.get_mut("b").unwrap().partitions.insert(3);
        assert!(!may_reap(&all_up, &held, &owners, &none, &[1, 2, 3], 100));
        // b holding its own partition 2 is no reason to wait.
        let mut own = fresh.clone();
        own.get_mut("b").unwrap().partitions.insert(2);
        assert!(may_reap(&all_up, &own, &owners, &none, &[1, 2, 3], 100));
        // A member down may hold it.
        let c_down = members(&[("a", true), ("b", true), ("c", false)]);
        assert!(!may_reap(&c_down, &fresh, &owners, &none, &[1, 2, 3], 100));
        // A report older than the reap's ask may miss a value taken
        // just before the delete.
        assert!(!may_reap(&all_up, &fresh, &owners, &none, &[1, 2, 3], 200));
        // No report at all.
        let mut missing = fresh.clone();
        missing.remove("c");
        assert!(!may_reap(
            &all_up,
            &missing,
            &owners,
            &none,
            &[1, 2, 3],
            100
        ));
        // A partition moving between owners.
        let moving: BTreeSet<u32> = [3].into();
        assert!(!may_reap(
            &all_up,
            &fresh,
            &owners,
            &moving,
            &[1, 2, 3],
            100
        ));
    }

    #[test]
    fn a_look_lists_owned_partitions_and_those_it_could_not_look_at() {
        let owners: Vec<String> = ["a", "b", "b", "b"].iter().map(|s| s.to_string()).collect();
        let mut looked = Vec::new();
        let r = Report::look("a", &owners, 7, |p| {
            looked.push(p);
            match p {
                1 => Some(true),
                2 => None,
                _ => Some(false),
            }
        });
        assert_eq!(r.partitions, [0, 1, 2].into());
        assert_eq!(r.looked_ms, 7);
        // Its own partition is listed without a look.
        assert_eq!(looked, [1, 2, 3]);
    }

    #[test]
    fn a_leaving_member_holds_what_the_claimants_ring_says_it_does_not_own() {
        let owners: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        // b reports holding 0 and 1: by its own stale ring it may still
        // own 0, but the claimant's ring gave 0 to a.
        let r = report(&[0, 1], 500);
        assert!(may_still_hold("b", Some(&r), &owners, 100));
        assert!(!may_still_hold("b", Some(&report(&[1], 500)), &owners, 100));
        assert!(may_still_hold("b", Some(&report(&[1], 100)), &owners, 100));
        assert!(may_still_hold("b", None, &owners, 0));
    }
}
