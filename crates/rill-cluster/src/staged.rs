//! Staged membership changes (riak-admin's `cluster join | leave |
//! force-remove | replace | force-replace | plan | commit | clear`): an
//! operator stages changes, sees the plan (the rings it leads to and the
//! transfers each causes), and commits it; a commit is refused when the
//! cluster changed since the plan.
//!
//! Staged changes live with the claimant, not in the gossiped state (as in
//! riak_core): they are the operator's draft. Joins are not staged here: a
//! node asked to join becomes `joining` in the state, and every joining
//! member is part of the next plan.

use crate::claimant::Context;
use crate::claimant::{self, Step};
use crate::digest::Digest;
use crate::member::Status;
use crate::state::{ClusterState, Transfer};
use std::collections::BTreeMap;

/// One staged change of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The node joins (it is `joining`).
    Join,
    /// The node hands its partitions to the others, then goes.
    Leave,
    /// The node is removed at once; its partitions go to the others
    /// without a handoff (their replicas on it are lost).
    Remove,
    /// The node hands all its partitions to a joining node, then goes.
    Replace(String),
    /// A joining node takes over the node's partitions at once, without a
    /// handoff.
    ForceReplace(String),
}

impl Change {
    /// The plan's words for it (riak-admin's).
    pub fn describe(&self, node: &str) -> (String, String) {
        match self {
            Change::Join => ("join".into(), format!("'{node}'")),
            Change::Leave => ("leave".into(), format!("'{node}'")),
            Change::Remove => ("force-remove".into(), format!("'{node}'")),
            Change::Replace(new) => ("replace".into(), format!("'{node}' with '{new}'")),
            Change::ForceReplace(new) => ("force-replace".into(), format!("'{node}' with '{new}'")),
        }
    }
}

/// Why a change cannot be staged, planned or committed. The texts are
/// riak-admin's where it has one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum StageError {
    #[error("{0} is not a member of the cluster")]
    NotMember(String),
    #[error("{0} is the only member of the cluster")]
    OnlyMember(String),
    #[error("{0} cannot go: no other member would stay to own the ring")]
    LastMember(String),
    #[error("{0} is already leaving the cluster")]
    AlreadyLeaving(String),
    #[error("{0} is the claimant; make another node the claimant first, or use leave")]
    IsClaimant(String),
    #[error("{0} is already the replacement of another node")]
    AlreadyReplacement(String),
    #[error("{0} cannot be a replacement: it must be joining, with nothing staged for it")]
    InvalidReplacement(String),
    #[error("There are no staged changes")]
    NoChanges,
    #[error("Cannot plan until cluster state has converged.\nCheck 'Ring Ready' in 'rill admin ring-status'")]
    NotReadyToPlan,
    #[error("Cannot commit until cluster state has converged.\nCheck 'Ring Ready' in 'rill admin ring-status'")]
    NotReadyToCommit,
    #[error("You must verify the plan with 'rill admin cluster plan' before committing")]
    NothingPlanned,
    #[error("The plan has changed. Verify with 'rill admin cluster plan' before committing")]
    PlanChanged,
}

/// One ring the plan passes through: the members after it, the ring it
/// sets, and what moves.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub statuses: BTreeMap<String, Status>,
    /// Owners once this transition's transfers are done.
    pub owners_after: Vec<String>,
    pub owners_before: Vec<String>,
    /// (from, to) -> partitions handed off.
    pub transfers: BTreeMap<(String, String), usize>,
    /// (from, to) -> partitions given away at once (no handoff).
    pub reassigned: BTreeMap<(String, String), usize>,
    pub violations: usize,
}

/// What a commit would do, and the state it was computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub changes: Vec<(String, Change)>,
    pub transitions: Vec<Transition>,
    /// Nodes whose replicas are lost (force-remove, force-replace).
    pub lost: Vec<String>,
    pub fingerprint: u64,
}

/// The claimant's staged changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Staged {
    changes: BTreeMap<String, Change>,
}

/// Refuses changes after which no member would own the ring: a leave
/// staged while others stayed, who have left since (the cluster
/// simulation's seed 62: a claimant committed the last member's leave,
/// and the ring was left to no one).
fn no_one_left(state: &ClusterState, changes: &[(String, Change)]) -> Result<(), StageError> {
    let going = |n: &str| {
        changes
            .iter()
            .any(|(m, c)| m == n && !matches!(c, Change::Join))
    };
    let stays = state
        .with_status(|s| matches!(s, Status::Valid | Status::Joining | Status::Down))
        .into_iter()
        .any(|m| !going(&m));
    match changes
        .iter()
        .find(|(_, c)| matches!(c, Change::Leave | Change::Remove))
    {
        Some((n, _)) if !stays => Err(StageError::LastMember(n.clone())),
        _ => Ok(()),
    }
}

impl Staged {
    /// Stages `change` for `node`, replacing what was staged for it.
    pub fn stage(
        &mut self,
        state: &ClusterState,
        node: &str,
        change: Change,
    ) -> Result<(), StageError> {
        let status = state.status(node).filter(|s| *s != Status::Invalid);
        let Some(status) = status else {
            return Err(StageError::NotMember(node.into()));
        };
        let members = state.with_status(Status::is_member);
        let only = members.len() == 1;
        if matches!(change, Change::Leave | Change::Remove) {
            // Some member must stay to own the ring, whatever else goes.
            let stays = state
                .with_status(|s| matches!(s, Status::Valid | Status::Joining))
                .into_iter()
                .filter(|m| m != node)
                .any(|m| !matches!(self.changes.get(&m), Some(Change::Leave | Change::Remove)));
            if !stays && !only {
                return Err(StageError::LastMember(node.into()));
            }
        }
        match &change {
            Change::Join => {
                if status != Status::Joining {
                    return Err(StageError::NotMember(node.into()));
                }
            }
            Change::Leave => {
                if only {
                    return Err(StageError::OnlyMember(node.into()));
                }
                if !matches!(status, Status::Valid | Status::Joining) {
                    return Err(StageError::AlreadyLeaving(node.into()));
                }
            }
            Change::Remove => {
                if only {
                    return Err(StageError::OnlyMember(node.into()));
                }
                if state.claimant() == node {
                    return Err(StageError::IsClaimant(node.into()));
                }
            }
            Change::Replace(new) | Change::ForceReplace(new) => {
                if matches!(change, Change::ForceReplace(_)) && state.claimant() == node {
                    return Err(StageError::IsClaimant(node.into()));
                }
                if matches!(change, Change::Replace(_))
                    && !matches!(status, Status::Valid | Status::Joining)
                {
                    return Err(StageError::AlreadyLeaving(node.into()));
                }
                let replacing = self.changes.iter().any(|(n, c)| {
                    n != node
                        && matches!(c, Change::Replace(x) | Change::ForceReplace(x) if x == new)
                });
                if replacing {
                    return Err(StageError::AlreadyReplacement(new.clone()));
                }
                if state.status(new) != Some(Status::Joining) || self.changes.contains_key(new) {
                    return Err(StageError::InvalidReplacement(new.clone()));
                }
            }
        }
        self.changes.insert(node.to_string(), change);
        Ok(())
    }

    /// Forgets the staged changes; joining members are turned away
    /// (riak-admin's `cluster clear`).
    pub fn clear(&mut self, state: &mut ClusterState, me: &str) {
        self.changes.clear();
        for n in state.with_status(|s| s == Status::Joining) {
            let _ = state.set_status(me, &n, Status::Invalid);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The changes a plan applies now: those still possible, and a join
    /// for every joining member (a replacement joins with its change).
    pub fn effective(&self, state: &ClusterState) -> Vec<(String, Change)> {
        let mut out: Vec<(String, Change)> = self
            .changes
            .iter()
            .filter(|(n, c)| {
                let member = state.status(n).is_some_and(|s| s != Status::Invalid);
                let target_ok = match c {
                    Change::Replace(new) | Change::ForceReplace(new) => {
                        state.status(new) == Some(Status::Joining)
                    }
                    _ => true,
                };
                member && target_ok && **c != Change::Join
            })
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        for n in state.with_status(|s| s == Status::Joining) {
            if !out.iter().any(|(m, _)| *m == n) {
                out.push((n, Change::Join));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The plan of the staged changes, as the claimant `me` would commit
    /// them now.
    pub fn plan(
        &self,
        state: &ClusterState,
        me: &str,
        target_n_val: u32,
        cx: &Context,
    ) -> Result<Plan, StageError> {
        if !state.ring_ready_without(&cx.unreachable) {
            return Err(StageError::NotReadyToPlan);
        }
        let changes = self.effective(state);
        if changes.is_empty() {
            return Err(StageError::NoChanges);
        }
        no_one_left(state, &changes)?;
        let mut s = state.clone();
        // The preview lets every transfer finish and every hinted
        // partition go home.
        let preview = Context {
            holding: Default::default(),
            ..cx.clone()
        };
        let (step, reassigned) = apply(&mut s, me, &changes, target_n_val, &preview);
        let mut transitions = vec![transition(state, &s, &step, reassigned)];
        // Let every transfer finish, and see whether the claimant moves
        // more (a leave is followed by a rebalance, say). Bounded: each
        // round either plans transfers or ends.
        for _ in 0..MAX_TRANSITIONS {
            let before = s.clone();
            let pending: Vec<Transfer> = s.ring().next.clone();
            for t in &pending {
                s.mark_done(t);
            }
            let step = claimant::advance(&mut s, me, target_n_val, &preview, Step::default());
            // A second pass applies the exits and removals the first made.
            let step2 = claimant::advance(&mut s, me, target_n_val, &preview, Step::default());
            if step.planned == 0 && step2.planned == 0 {
                break;
            }
            let planned = if step.planned > 0 { step } else { step2 };
            transitions.push(transition(&before, &s, &planned, BTreeMap::new()));
        }
        let lost = changes
            .iter()
            .filter(|(_, c)| matches!(c, Change::Remove | Change::ForceReplace(_)))
            .map(|(n, _)| n.clone())
            .collect();
        Ok(Plan {
            fingerprint: fingerprint(state, &changes),
            changes,
            transitions,
            lost,
        })
    }

    /// Commits `planned` as the claimant `me`, if the cluster and the
    /// changes are still what it was computed from.
    pub fn commit(
        &mut self,
        state: &mut ClusterState,
        me: &str,
        planned: Option<&Plan>,
        target_n_val: u32,
        cx: &Context,
    ) -> Result<Step, StageError> {
        let Some(planned) = planned else {
            return Err(StageError::NothingPlanned);
        };
        if !state.ring_ready_without(&cx.unreachable) {
            return Err(StageError::NotReadyToCommit);
        }
        let changes = self.effective(state);
        no_one_left(state, &changes)?;
        if fingerprint(state, &changes) != planned.fingerprint {
            return Err(StageError::PlanChanged);
        }
        let (step, _) = apply(state, me, &changes, target_n_val, cx);
        self.changes.clear();
        Ok(step)
    }
}

/// Transitions a plan shows at most.
const MAX_TRANSITIONS: usize = 8;

fn fingerprint(state: &ClusterState, changes: &[(String, Change)]) -> u64 {
    let mut d = Digest::new();
    d.u64(state.digest());
    for (n, c) in changes {
        let (what, details) = c.describe(n);
        d.str(&what).str(&details);
    }
    d.finish()
}

/// Applies the changes to `s` as `me` and runs the claimant's step at
/// once. Returns the step and what force changes reassigned.
fn apply(
    s: &mut ClusterState,
    me: &str,
    changes: &[(String, Change)],
    target_n_val: u32,
    cx: &Context,
) -> (Step, BTreeMap<(String, String), usize>) {
    let mut reassigned: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut owners = s.owners().to_vec();
    let mut next = s.ring().next.clone();
    let id = s.ring().version + 1;
    for (n, c) in changes {
        match c {
            Change::Join => {
                let _ = s.set_status(me, n, Status::Valid);
            }
            Change::Leave => {
                let _ = s.set_status(me, n, Status::Leaving);
            }
            Change::Remove => {
                let _ = s.set_status(me, n, Status::Invalid);
            }
            Change::Replace(new) => {
                let _ = s.set_status(me, new, Status::Valid);
                let _ = s.set_status(me, n, Status::Leaving);
                next.retain(|t| t.from != *n);
                for (p, o) in owners.iter().enumerate() {
                    if o == n {
                        next.push(Transfer {
                            partition: p as u32,
                            from: n.clone(),
                            to: new.clone(),
                            id,
                        });
                    }
                }
            }
            Change::ForceReplace(new) => {
                let _ = s.set_status(me, new, Status::Valid);
                let _ = s.set_status(me, n, Status::Invalid);
                for o in owners.iter_mut().filter(|o| *o == n) {
                    *o = new.clone();
                    *reassigned.entry((n.clone(), new.clone())).or_default() += 1;
                }
                for t in next.iter_mut() {
                    if t.from == *n {
                        t.from = new.clone();
                    }
                }
            }
        }
    }
    // Removed members' partitions go at once: count them before the step.
    let before_owners = owners.clone();
    if owners != *s.owners() || next != s.ring().next {
        s.write_ring(me, |r| {
            r.owners = owners;
            r.next = next;
        });
    }
    let step = claimant::advance(s, me, target_n_val, cx, Step::default());
    for (p, o) in before_owners.iter().enumerate() {
        if s.status(o) == Some(Status::Invalid) {
            *reassigned
                .entry((o.clone(), s.owners()[p].clone()))
                .or_default() += 1;
        }
    }
    (step, reassigned)
}

fn transition(
    before: &ClusterState,
    after: &ClusterState,
    step: &Step,
    reassigned: BTreeMap<(String, String), usize>,
) -> Transition {
    let mut transfers: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut owners_after = after.owners().to_vec();
    for t in &after.ring().next {
        *transfers.entry((t.from.clone(), t.to.clone())).or_default() += 1;
        owners_after[t.partition as usize] = t.to.clone();
    }
    Transition {
        statuses: after
            .members()
            .iter()
            .filter(|(_, m)| m.status != Status::Invalid)
            .map(|(n, m)| (n.clone(), m.status))
            .collect(),
        owners_before: before.owners().to_vec(),
        owners_after,
        transfers,
        reassigned,
        violations: step.violations,
    }
}
