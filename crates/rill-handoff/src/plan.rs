//! The handoff planner, pure: what a node hands off in one round of its
//! handoff loop, what it does when a sender is done, and when data it
//! handed off may go. The node's runtime and the cluster simulation both
//! drive their senders and receivers by it; the I/O (listing keys,
//! reading, storing, dropping) stays with them.
//!
//! - **Ownership**: a transfer of the ring from this node (`ring.next`,
//!   not yet done) starts while its new owner is reachable. When the
//!   sender is done, keys written during it that the first pass's
//!   snapshot did not have go in top-up passes (at most [`MAX_TOPUPS`];
//!   what is left goes by hinted handoff after the switch, and writes
//!   during the move reach the new owner anyway); then the transfer is
//!   marked done, and what was sent is *retained*: it stays here, and the
//!   node serves it, until its ring names the new owner; only then are
//!   the keys still as they were sent removed. A done mark lost to a
//!   newer ring the claimant wrote before the mark reached it is made
//!   again from the retained record, not by sending the partition again.
//! - **Hinted**: a partition this node holds data of without owning it
//!   (a fallback's writes, an old owner's late writes) goes to its owner
//!   once the owner is reachable, unless the partition is moving (its
//!   ring transfer carries it), is arriving here, is retained here, or
//!   is being sent already; what was sent unchanged is removed when the
//!   sender is done.

use rill_cluster::{ClusterState, Transfer};
use std::collections::{BTreeMap, BTreeSet};

/// Top-up passes of an ownership transfer at most, before it is marked
/// done anyway.
pub const MAX_TOPUPS: u32 = 3;

/// Why a partition is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The ring moves it to a new owner.
    Ownership(Transfer),
    /// Held here without being owned; it goes to its owner.
    Hinted,
    /// An operator's repair: this node's copies of the keys that partition
    /// `target` (the transfer's partition) is a replica of, read from its
    /// vnode of partition `source`, go to the owner of `target`
    /// ([`crate::repair`]). Nothing is removed afterwards.
    Repair { source: u32 },
}

impl Kind {
    /// The transfer's id for `rill_handoff::TransferId` (0: hinted, so a
    /// hinted transfer is named by partition and sender alone and resumes
    /// after a restart of either side).
    pub fn id(&self) -> u64 {
        match self {
            Kind::Ownership(t) => t.id,
            Kind::Hinted => 0,
            Kind::Repair { source } => crate::repair::REPAIR_ID | u64::from(*source),
        }
    }
}

/// A transfer to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    pub partition: u32,
    pub to: String,
    pub kind: Kind,
}

/// What the node is doing now, besides its cluster state.
#[derive(Clone, Debug, Default)]
pub struct Local {
    /// Partitions it holds data of without owning them, when it looked
    /// this round (`None`: hinted handoff is not due this round).
    pub holding: Option<BTreeSet<u32>>,
    /// Partitions with a sender of this node running.
    pub sending: BTreeSet<u32>,
    /// Partitions with a receiver on this node.
    pub receiving: BTreeSet<u32>,
    /// Partitions whose ownership transfer from this node is done, with
    /// that transfer; their sent keys are kept until the switch.
    pub retained: BTreeMap<u32, Transfer>,
}

/// One round's plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Retained partitions whose owner is no longer this node: the keys
    /// sent, still as they were sent, may be removed now.
    pub release: Vec<u32>,
    /// Transfers to start, in order (a caller may be out of slots).
    pub start: Vec<Start>,
    /// Transfers done here whose mark the node's state lost (a newer ring
    /// came without it): mark them done again.
    pub mark_again: Vec<Transfer>,
}

/// Plans one round of node `me` from its cluster state; `up` says which
/// nodes it reaches now.
pub fn plan_round(
    state: &ClusterState,
    me: &str,
    up: impl Fn(&str) -> bool,
    local: &Local,
) -> Round {
    let owners = state.owners();
    let release = local
        .retained
        .keys()
        .copied()
        .filter(|p| owners.get(*p as usize).is_some_and(|o| o != me))
        .collect();
    let reachable = |n: &str| n == me || up(n);
    let mine: Vec<&Transfer> = state
        .ring()
        .next
        .iter()
        .filter(|t| !state.is_done(t) && t.from == me)
        .collect();
    let done_here = |t: &Transfer| local.retained.get(&t.partition) == Some(t);
    let mark_again = mine
        .iter()
        .filter(|t| done_here(t))
        .map(|t| (*t).clone())
        .collect();
    let mut start: Vec<Start> = mine
        .into_iter()
        .filter(|t| !done_here(t) && reachable(&t.to))
        .filter(|t| !local.sending.contains(&t.partition))
        .map(|t| Start {
            partition: t.partition,
            to: t.to.clone(),
            kind: Kind::Ownership(t.clone()),
        })
        .collect();
    // Every partition the ring is moving, its transfer done or not: until
    // the owner switches, neither side hands it anywhere else.
    let moving: BTreeSet<u32> = state.ring().next.iter().map(|t| t.partition).collect();
    for &p in local.holding.iter().flatten() {
        let Some(owner) = owners.get(p as usize) else {
            continue;
        };
        let busy = moving.contains(&p)
            || local.receiving.contains(&p)
            || local.retained.contains_key(&p)
            || local.sending.contains(&p)
            || start.iter().any(|s| s.partition == p);
        if owner != me && !busy && reachable(owner) {
            start.push(Start {
                partition: p,
                to: owner.clone(),
                kind: Kind::Hinted,
            });
        }
    }
    Round {
        release,
        start,
        mark_again,
    }
}

/// Whether a hinted transfer of `partition` that is done may remove
/// what it sent, by node `me`'s state now. Not when the partition is
/// this node's now or is moving: a node whose ring was behind may have
/// started handing off a partition that the ring is moving to it, and
/// what the ring's transfer brought is in the same store, unchanged
/// since this node sent it when the data it held was newer (a receiver
/// takes an ownership transfer only once its ring knows of it:
/// [`may_receive`], so a node holding such data knows the partition is
/// moving, or is its own). What stays is sent again by a later round if
/// it is still not this node's.
pub fn may_drop_hinted(state: &ClusterState, me: &str, partition: u32) -> bool {
    let owned = state
        .owners()
        .get(partition as usize)
        .is_some_and(|o| o == me);
    let moving = state.ring().next.iter().any(|t| t.partition == partition);
    !owned && !moving
}

/// Whether node `me` takes the transfer `tid` now: hinted handoff and
/// repairs always; an ownership transfer only once its state's ring has
/// it (moving the partition to this node) or has switched the partition
/// to it. A node whose ring is behind would otherwise store a partition
/// it does not know it is getting, and may hand it off and drop it as
/// hinted data ([`may_drop_hinted`]). The sender retries after its
/// timeout; gossip brings the ring meanwhile.
pub fn may_receive(state: &ClusterState, me: &str, tid: &crate::TransferId) -> bool {
    if tid.id == 0 || tid.id & crate::repair::REPAIR_ID != 0 {
        return true;
    }
    let owned = state
        .owners()
        .get(tid.partition as usize)
        .is_some_and(|o| o == me);
    owned
        || state
            .ring()
            .next
            .iter()
            .any(|t| t.partition == tid.partition && t.to == me && t.from == tid.from)
}

/// What follows a sender's `Done`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterSent {
    /// List the partition's keys now: those not sent go in a top-up pass
    /// of the transfer ([`after_listing`]).
    ListUnsent(Transfer),
    /// Mark the ring's transfer done and retain what was sent.
    MarkDone(Transfer),
    /// Remove what was sent and is unchanged (hinted handoff).
    DropSent,
    /// Keep everything (a repair copies).
    Keep,
}

/// What follows a sender's `Done` for a transfer of `kind` after
/// `topups` top-up passes.
pub fn after_sent(kind: Kind, topups: u32) -> AfterSent {
    match kind {
        Kind::Ownership(t) if topups < MAX_TOPUPS => AfterSent::ListUnsent(t),
        Kind::Ownership(t) => AfterSent::MarkDone(t),
        Kind::Hinted => AfterSent::DropSent,
        Kind::Repair { .. } => AfterSent::Keep,
    }
}

/// After [`AfterSent::ListUnsent`]: `unsent` keys were written during the
/// transfer. `true`: send them in a top-up pass; `false`: mark the
/// transfer done.
pub fn after_listing(unsent: usize) -> bool {
    unsent > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_cluster::Status;

    /// A cluster of `a` and `b` whose ring moves partition 1 from `a` to
    /// `b`.
    fn moving_one() -> ClusterState {
        let mut s = ClusterState::new("c", "a", 4);
        s.set_status("a", "b", Status::Joining).unwrap();
        s.set_status("a", "b", Status::Valid).unwrap();
        s.write_ring("a", |r| {
            r.next.push(Transfer {
                partition: 1,
                from: "a".into(),
                to: "b".into(),
                id: 7,
            })
        });
        s
    }

    #[test]
    fn an_ownership_transfer_starts_while_its_new_owner_is_reachable() {
        let s = moving_one();
        let r = plan_round(&s, "a", |_| true, &Local::default());
        assert_eq!(r.start.len(), 1);
        assert_eq!((r.start[0].partition, r.start[0].to.as_str()), (1, "b"));
        assert_eq!(r.start[0].kind.id(), 7);
        assert!(plan_round(&s, "a", |_| false, &Local::default())
            .start
            .is_empty());
        assert!(plan_round(&s, "b", |_| true, &Local::default())
            .start
            .is_empty());
        let sending = Local {
            sending: [1].into(),
            ..Local::default()
        };
        assert!(plan_round(&s, "a", |_| true, &sending).start.is_empty());
    }

    #[test]
    fn held_data_goes_home_unless_the_partition_is_busy() {
        let s = moving_one();
        // b holds data of 0, 1 and 2, all owned by a; 1 is moving to b.
        let mut local = Local {
            holding: Some([0, 1, 2].into()),
            ..Local::default()
        };
        let r = plan_round(&s, "b", |_| true, &local);
        let to: Vec<(u32, &str)> = r
            .start
            .iter()
            .map(|s| (s.partition, s.to.as_str()))
            .collect();
        assert_eq!(to, vec![(0, "a"), (2, "a")]);
        assert!(r.start.iter().all(|s| s.kind == Kind::Hinted));
        local.receiving = [0].into();
        local.retained = [(2, moving_one().ring().next[0].clone())].into();
        assert!(plan_round(&s, "b", |_| true, &local).start.is_empty());
        local.retained.clear();
        assert!(plan_round(&s, "b", |_| false, &local).start.is_empty());
        local.holding = None;
        assert!(plan_round(&s, "b", |_| true, &local).start.is_empty());
    }

    #[test]
    fn retained_data_is_released_only_when_the_owner_changed() {
        let mut s = moving_one();
        let t = s.ring().next[0].clone();
        let local = Local {
            retained: [(1, t.clone())].into(),
            ..Local::default()
        };
        // The transfer is done here but the state lost its mark: it is
        // marked again, not sent again.
        let r = plan_round(&s, "a", |_| true, &local);
        assert!(r.release.is_empty());
        assert!(r.start.is_empty());
        assert_eq!(r.mark_again, vec![t.clone()]);
        s.mark_done(&t);
        assert!(plan_round(&s, "a", |_| true, &local).mark_again.is_empty());
        s.write_ring("a", |r| {
            r.owners[1] = "b".into();
            r.next.clear();
        });
        assert_eq!(plan_round(&s, "a", |_| true, &local).release, vec![1]);
    }

    #[test]
    fn a_done_sender_tops_up_a_bounded_number_of_times() {
        let t = Transfer {
            partition: 1,
            from: "a".into(),
            to: "b".into(),
            id: 1,
        };
        let k = Kind::Ownership(t.clone());
        assert_eq!(after_sent(k.clone(), 0), AfterSent::ListUnsent(t.clone()));
        assert_eq!(after_sent(k, MAX_TOPUPS), AfterSent::MarkDone(t));
        assert_eq!(after_sent(Kind::Hinted, 0), AfterSent::DropSent);
        assert!(after_listing(3));
        assert!(!after_listing(0));
    }

    #[test]
    fn a_hinted_drop_keeps_a_partition_that_is_moving_or_owned() {
        let s = moving_one();
        let t = s.ring().next[0].clone();
        assert!(!may_drop_hinted(&s, &t.to, t.partition), "moving to it");
        assert!(!may_drop_hinted(&s, "c", t.partition), "moving at all");
        let owner = s.owners()[0].clone();
        assert!(!may_drop_hinted(&s, &owner, 0), "its own");
        let other = (0..s.ring_size())
            .find(|&p| p != t.partition && s.owners()[p as usize] != "c")
            .expect("a partition");
        assert!(may_drop_hinted(&s, "c", other));
    }

    #[test]
    fn a_move_is_received_only_once_the_ring_knows_it() {
        let s = moving_one();
        let t = s.ring().next[0].clone();
        let tid = |id: u64, from: &str| crate::TransferId {
            partition: t.partition,
            id,
            from: from.into(),
        };
        assert!(may_receive(&s, &t.to, &tid(t.id, &t.from)));
        assert!(
            !may_receive(&s, "c", &tid(t.id, &t.from)),
            "not moving to c"
        );
        assert!(!may_receive(&s, &t.to, &tid(t.id, "c")), "not from c");
        assert!(may_receive(&s, "c", &tid(0, &t.from)), "hinted: always");
        let repair = crate::repair::REPAIR_ID | 3;
        assert!(
            may_receive(&s, "c", &tid(repair, &t.from)),
            "repairs: always"
        );
    }
}
