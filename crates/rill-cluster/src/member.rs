//! A member of the cluster and its status, as riak_core names them.
//!
//! A member's entry is a last-writer-wins register: each write carries a
//! version one above the highest the writer has seen for that member, and
//! the writer's name; of two entries the higher (version, status nearer
//! removal, writer)
//! wins. That is a total order, so the merge is commutative, associative
//! and idempotent, and every node that has seen the same entries agrees.

use std::fmt;

/// A member's status (riak_core's names and lifecycle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Asked to join; owns nothing until a committed plan makes it valid.
    Joining,
    /// A full member: owns partitions and serves them.
    Valid,
    /// Handing its partitions to others before it goes.
    Leaving,
    /// Has handed everything off; the claimant removes it next.
    Exiting,
    /// Marked down by an operator: unreachable for good, so the cluster may
    /// converge and plan without it; it keeps its partitions until removed
    /// or back.
    Down,
    /// Removed from the cluster (left, force-removed, or a join cleared).
    Invalid,
}

impl Status {
    /// Every status, in the order of their codes in the state's bytes.
    pub const ALL: [Status; 6] = [
        Status::Joining,
        Status::Valid,
        Status::Leaving,
        Status::Exiting,
        Status::Down,
        Status::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Joining => "joining",
            Status::Valid => "valid",
            Status::Leaving => "leaving",
            Status::Exiting => "exiting",
            Status::Down => "down",
            Status::Invalid => "invalid",
        }
    }

    /// Counts in `ring_ready` (riak_core: valid, leaving, exiting).
    pub fn must_see_the_ring(self) -> bool {
        matches!(self, Status::Valid | Status::Leaving | Status::Exiting)
    }

    /// Gets partitions in a claim (joining members only once committed).
    pub fn claims(self) -> bool {
        matches!(self, Status::Joining | Status::Valid)
    }

    /// Not removed.
    pub fn is_member(self) -> bool {
        self != Status::Invalid
    }

    /// Whether a member may go from `self` to `to` (riak_core's
    /// transitions; `Down` from a joining or valid member, and back to
    /// `Valid` when the node returns; `Joining` again after removal).
    pub fn may_become(self, to: Status) -> bool {
        use Status::*;
        match (self, to) {
            (a, b) if a == b => false,
            (Joining, Valid | Leaving | Invalid | Down) => true,
            (Valid, Leaving | Invalid | Down) => true,
            // A leaving node that cannot be reached stays leaving (marking
            // it down and its return would undo the operator's leave);
            // force-remove is the way to give up on it. (The claimant alone
            // may undo its own leave, when every member is leaving:
            // `claimant::step`, not a transition anyone may ask for.)
            (Leaving, Exiting | Invalid) => true,
            (Exiting, Invalid) => true,
            (Down, Valid | Leaving | Invalid) => true,
            (Invalid, Joining) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One member's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub status: Status,
    /// One above the highest version the writer had seen for this member.
    pub version: u64,
    /// The node that wrote this entry.
    pub writer: String,
}

impl Member {
    /// The order of the merge: the higher wins; at equal versions the
    /// status nearer removal (invalid, exiting, leaving, down, valid,
    /// joining: a removal or a leave is never undone by a concurrent write;
    /// riak_core ranks down above leaving, which lets a concurrent down
    /// mark and the node's return cancel an operator's leave), then the
    /// writer.
    fn key(&self) -> (u64, u8, &str) {
        let rank = match self.status {
            Status::Joining => 0,
            Status::Valid => 1,
            Status::Down => 2,
            Status::Leaving => 3,
            Status::Exiting => 4,
            Status::Invalid => 5,
        };
        (self.version, rank, &self.writer)
    }

    /// The entry two nodes agree on after exchanging theirs.
    pub fn merge(a: &Member, b: &Member) -> Member {
        if b.key() > a.key() {
            b.clone()
        } else {
            a.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    #[test]
    fn transitions_table() {
        let all = Status::ALL;
        let allowed = [
            (Joining, Valid),
            (Joining, Leaving),
            (Joining, Invalid),
            (Joining, Down),
            (Valid, Leaving),
            (Valid, Invalid),
            (Valid, Down),
            (Leaving, Exiting),
            (Leaving, Invalid),
            (Exiting, Invalid),
            (Down, Valid),
            (Down, Leaving),
            (Down, Invalid),
            (Invalid, Joining),
        ];
        for a in all {
            for b in all {
                assert_eq!(a.may_become(b), allowed.contains(&(a, b)), "{a} -> {b}");
            }
        }
    }

    #[test]
    fn at_equal_versions_a_removal_wins() {
        let m = |status, writer: &str| Member {
            status,
            version: 7,
            writer: writer.into(),
        };
        let removed = m(Invalid, "a");
        let back = m(Valid, "z");
        assert_eq!(Member::merge(&removed, &back), removed);
        assert_eq!(Member::merge(&back, &removed), removed);
    }

    #[test]
    fn the_higher_version_wins_then_the_status() {
        let m = |status, version, writer: &str| Member {
            status,
            version,
            writer: writer.into(),
        };
        let a = m(Valid, 3, "a");
        let b = m(Leaving, 4, "a");
        assert_eq!(Member::merge(&a, &b), b);
        assert_eq!(Member::merge(&b, &a), b);
        // At the same version a leave beats a down mark (a concurrent
        // down mark must not cancel an operator's leave).
        let c = m(Down, 4, "c");
        assert_eq!(Member::merge(&b, &c), b);
        assert_eq!(Member::merge(&c, &b), b);
    }
}
