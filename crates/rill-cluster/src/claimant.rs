//! The claimant's step (riak_core_claimant's `do_claimant`), pure: run by
//! every node after each change of the state it sees (and after it has
//! recorded that it saw it); only the claimant, and only once the ring is
//! ready, changes ownership.
//!
//! One step, in order:
//! 1. when the claimant is no longer valid or leaving, or this node has
//!    not reached it for longer than the claimant's grace, the first
//!    valid or leaving member by name that this node reaches takes over
//!    (it alone writes; should two nodes on two sides of a partition both
//!    take over, the ring register resolves them the same way
//!    everywhere);
//! 2. when every member is leaving (two claimants on two sides of a
//!    partition each committed leaves), the claimant stays (valid);
//!    transfers to or from a member that is gone (invalid) or down are
//!    dropped: they cannot finish;
//! 3. transfers done (the data is at the new owner) change the owner;
//! 4. partitions still owned by a removed member go to the others at once
//!    (force-remove: no one holds their data to hand off);
//! 5. leaving members that own nothing, hand nothing off and hold no
//!    data of partitions they do not own (a fallback's hinted data, an
//!    old owner's writes) become exiting, and exiting members that still
//!    hold none are removed (invalid);
//! 6. when nothing is moving, the ring is claimed for the members that
//!    claim (valid ones, and down ones, which keep what they own until
//!    removed); every partition whose owner changes becomes a transfer.

use crate::member::Status;
use crate::state::{ClusterState, Transfer};
use rill_ring::claim;
use std::collections::BTreeSet;

/// What one step did, for logs and the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    pub became_claimant: bool,
    pub dropped: usize,
    pub applied: usize,
    pub reassigned: usize,
    pub exited: Vec<String>,
    pub removed: Vec<String>,
    pub planned: usize,
    /// The claimant undid its own leave: every member was leaving.
    pub stayed: bool,
    /// Pairs of partitions closer than target_n_val on one node after a
    /// claim (0 unless the cluster is too small to avoid them).
    pub violations: usize,
}

impl Step {
    /// Whether the step changed the state.
    pub fn changed(&self) -> bool {
        Step {
            violations: 0,
            ..self.clone()
        } != Step::default()
    }
}

/// The members whose partitions a claim spreads: valid and down ones.
pub fn claiming_members(state: &ClusterState) -> Vec<String> {
    state.with_status(|s| matches!(s, Status::Valid | Status::Down))
}

/// What the step knows beyond the state, from this node's runtime.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Members this node has not reached for longer than the claimant's
    /// grace.
    pub unreachable: BTreeSet<String>,
    /// Nodes that hold, or may hold, data of partitions they do not own
    /// (a node that has not said otherwise may): a leaving one does not
    /// exit while it does.
    pub holding: BTreeSet<String>,
}

/// Runs the claimant's step as `me`.
pub fn step(state: &mut ClusterState, me: &str, target_n_val: u32, cx: &Context) -> Step {
    let mut out = Step::default();
    let claimant = state.claimant();
    let claimant_ok = state
        .status(claimant)
        .is_some_and(|s| matches!(s, Status::Valid | Status::Leaving))
        && !cx.unreachable.contains(claimant);
    if !claimant_ok {
        let next = state
            .with_status(|s| matches!(s, Status::Valid | Status::Leaving))
            .into_iter()
            .find(|n| !cx.unreachable.contains(n));
        if next.as_deref() != Some(me) {
            return out;
        }
        state.write_ring(me, |r| r.claimant = me.to_string());
        out.became_claimant = true;
    }
    if state.claimant() != me || !state.ring_ready_without(&cx.unreachable) {
        return out;
    }
    advance(state, me, target_n_val, cx, out)
}

/// Steps 2-6, without the checks: a commit runs them at once.
pub(crate) fn advance(
    state: &mut ClusterState,
    me: &str,
    target_n_val: u32,
    cx: &Context,
    mut out: Step,
) -> Step {
    // Commits on two sides of a partition (two claimants) may each have
    // made members leave until every member is leaving, which neither
    // could stage alone (`StageError::LastMember`): then no one would own
    // the ring. The claimant stays instead. (A down member counts as
    // staying: it keeps what it owns until it returns or is removed.)
    let stays = !state
        .with_status(|s| matches!(s, Status::Valid | Status::Joining | Status::Down))
        .is_empty();
    if !stays && state.status(me) == Some(Status::Leaving) {
        state.stay(me);
        out.stayed = true;
    }
    let mut ring = state.ring().clone();
    let gone = |n: &str| {
        state
            .status(n)
            .is_none_or(|s| matches!(s, Status::Invalid | Status::Down))
    };
    let before = ring.next.len();
    ring.next.retain(|t| !gone(&t.from) && !gone(&t.to));
    out.dropped = before - ring.next.len();
    let mut done = Vec::new();
    ring.next.retain(|t| {
        if state.is_done(t) {
            done.push(t.clone());
            false
        } else {
            true
        }
    });
    for t in &done {
        ring.owners[t.partition as usize] = t.to.clone();
    }
    out.applied = done.len();
    let claiming = claiming_members(state);
    let removed_owner = |o: &str| state.status(o).is_none_or(|s| s == Status::Invalid);
    if claiming.is_empty() {
        // Nothing can own the ring (every member leaving): wait.
        return commit(state, me, ring, out);
    }
    if ring.owners.iter().any(|o| removed_owner(o)) {
        let c = claim(&ring.owners, &claiming, target_n_val).expect("members and partitions");
        // Down members take nothing new: no one could hand it to them.
        let down = |n: &str| state.status(n) == Some(Status::Down);
        for (p, o) in ring.owners.iter_mut().enumerate() {
            if removed_owner(o) {
                let to = if down(&c.owners[p]) {
                    claiming.iter().find(|m| !down(m)).unwrap_or(&c.owners[p])
                } else {
                    &c.owners[p]
                };
                *o = to.clone();
                out.reassigned += 1;
            }
        }
    }
    // A leaving member goes once it owns nothing, nothing moves from or
    // to it (a transfer to it would make it an owner again), and it holds
    // no data it would take with it.
    let pending = |n: &str, next: &[Transfer]| next.iter().any(|t| t.from == n || t.to == n);
    for n in state.with_status(|s| s == Status::Leaving) {
        // Not in the step that takes its last partition away: writes sent
        // to it as the owner may still land, and its holdings report must
        // come after that (the runtime notes the release).
        let owned_before = state.ring().owners.contains(&n);
        if !ring.owners.contains(&n)
            && !owned_before
            && !pending(&n, &ring.next)
            && !cx.holding.contains(&n)
        {
            out.exited.push(n);
        }
    }
    // An exiting member is removed (and stops) once it holds no data of
    // partitions it does not own: a write that took it for a fallback
    // before every node knew it was exiting goes home first (the cluster
    // simulation's seed 19 saw such a write stranded on a removed node).
    // One that cannot be reached (stopped by its operator) is removed
    // anyway: waiting would keep it a member, and every reap waiting,
    // for ever.
    for n in state.with_status(|s| s == Status::Exiting) {
        if n != me && (!cx.holding.contains(&n) || cx.unreachable.contains(&n)) {
            out.removed.push(n);
        }
    }
    if ring.next.is_empty() {
        let c = claim(&ring.owners, &claiming, target_n_val).expect("members and partitions");
        out.violations = c.violations;
        let id = state.ring().version + 1;
        let down = |n: &str| state.status(n) == Some(Status::Down);
        // Nothing moves from or to a down member: it could not hand off
        // or take over, and the transfer would be dropped and planned
        // again at every step. It keeps what it owns; what the claim gives
        // it from a member that must let go (a leaving one) goes to the
        // least loaded member that is up instead.
        let mut target = c.owners.clone();
        let mut load: std::collections::BTreeMap<&str, usize> = claiming
            .iter()
            .filter(|m| !down(m))
            .map(|m| (m.as_str(), 0))
            .collect();
        for o in &target {
            if let Some(n) = load.get_mut(o.as_str()) {
                *n += 1;
            }
        }
        for (p, t) in target.iter_mut().enumerate() {
            let old = &ring.owners[p];
            if down(t) && old != t && !down(old) && !claiming.contains(old) {
                if let Some((&m, _)) = load.iter().min_by_key(|(m, n)| (**n, **m)) {
                    *t = m.to_string();
                    *load.get_mut(m).expect("a member") += 1;
                }
            }
        }
        for (p, (old, new)) in ring.owners.iter().zip(&target).enumerate() {
            if old != new && !down(old) && !down(new) {
                ring.next.push(Transfer {
                    partition: p as u32,
                    from: old.clone(),
                    to: new.clone(),
                    id,
                });
            }
        }
        out.planned = ring.next.len();
    }
    commit(state, me, ring, out)
}

fn commit(state: &mut ClusterState, me: &str, ring: crate::state::RingRegister, out: Step) -> Step {
    for n in &out.exited {
        let _ = state.set_status(me, n, Status::Exiting);
    }
    for n in &out.removed {
        let _ = state.set_status(me, n, Status::Invalid);
    }
    if ring.owners != state.ring().owners || ring.next != state.ring().next {
        state.write_ring(me, |r| {
            r.owners = ring.owners;
            r.next = ring.next;
        });
    }
    out
}
