//! Ring changes in the simulation, by `rill-cluster`'s real parts: every
//! node keeps its own cluster state and gossips it (as the bytes of
//! `rill-cluster`'s codec) over the simulated network, merges what
//! arrives, and runs the claimant's step; an operator at the claimant
//! stages a join or a leave, plans and commits (`Staged`); nodes route
//! requests by the ring they know, stale or not. The partitions a commit
//! moves are handed over by the handoff planner (`handoff`), marked done
//! in the sender's state, and switch owner at the claimant's next step. A
//! node removed from the cluster serves no client and takes no part in
//! changes, but goes on handing off what it holds, as `rill-peer` does.
//!
//! What the node's runtime learns from its failure detector (which
//! members it cannot reach) the simulation knows at once; the holdings
//! reports (which members still hold data they do not own) come late,
//! as the runtime's do (`holdings`).

use super::net::Body;
use super::{node_index, node_name, ClusterSim};
use rill_cluster::{codec, step, Change, ClusterState, Context, Staged, Status};
use rill_node::replicas::ClusterView;
use rill_ring::Ring;
use std::collections::BTreeMap;

/// The cluster the members start in: `members` nodes joined and claimed,
/// nothing moving.
pub(super) fn formed(members: usize, ring_size: u32, n_val: u32) -> ClusterState {
    let founder = node_name(0);
    let mut s = ClusterState::new("sim", &founder, ring_size);
    let mut staged = Staged::default();
    for i in 1..members {
        s.set_status(&founder, &node_name(i), Status::Joining)
            .expect("a new node joins");
    }
    for i in 0..members {
        s.see(&node_name(i));
    }
    let cx = Context::default();
    if members > 1 {
        let plan = staged.plan(&s, &founder, n_val, &cx).expect("a plan");
        staged
            .commit(&mut s, &founder, Some(&plan), n_val, &cx)
            .expect("a commit");
    }
    // The empty cluster's transfers are done at once.
    for _ in 0..4 {
        for t in s.ring().next.clone() {
            s.mark_done(&t);
        }
        for i in 0..members {
            s.see(&node_name(i));
        }
        step(&mut s, &founder, n_val, &cx);
    }
    assert!(s.ring().next.is_empty(), "the first claim settles");
    s
}

impl ClusterSim {
    /// The ring node `x` routes by.
    pub(super) fn ring_of(&self, x: usize) -> &Ring {
        &self.nodes[x].ring
    }

    /// Node `x`'s owner of `partition`.
    pub(super) fn owner_in(&self, x: usize, partition: u32) -> usize {
        self.index_of(self.ring_of(x).owner(rill_ring::Partition(partition)))
    }

    /// Whether node `c` takes node `n` for up: a member serving requests
    /// in `c`'s state that `c` reaches (as the runtime's view counts it:
    /// not an exiting one, which is about to stop).
    pub(super) fn up_in_view(&self, c: usize, n: usize) -> bool {
        let serves = |s: Status| matches!(s, Status::Valid | Status::Leaving | Status::Joining);
        n == c
            || (self.reachable(c, n)
                && self.nodes[c]
                    .state
                    .status(&node_name(n))
                    .is_some_and(serves))
    }

    /// Node `c`'s view of the cluster as its runtime gives it to the node.
    pub(super) fn view_of(&self, c: usize) -> ClusterView {
        let s = &self.nodes[c].state;
        ClusterView {
            me: node_name(c),
            ring: self.ring_of(c).clone(),
            up: (0..self.nodes.len())
                .filter(|&n| self.up_in_view(c, n))
                .map(node_name)
                .collect(),
            moving: s
                .ring()
                .next
                .iter()
                .map(|t| (t.partition, t.to.clone()))
                .collect(),
        }
    }

    /// Nodes that take part in the cluster now: joined, not removed.
    pub(super) fn in_cluster(&self, x: usize) -> bool {
        self.nodes[x].joined && !self.nodes[x].removed
    }

    /// What node `x`'s claimant step knows beyond its state.
    pub(super) fn context(&self, x: usize) -> Context {
        let s = &self.nodes[x].state;
        let index = |n: &str| node_index(n, self.nodes.len());
        Context {
            unreachable: s
                .with_status(Status::is_member)
                .into_iter()
                .filter(|m| index(m).is_some_and(|i| i != x && !self.reachable(x, i)))
                .collect(),
            holding: self.may_still_hold(x),
        }
    }

    /// Node `x`'s state changed: its ring is read again, and a node that
    /// finds itself removed stops for good.
    pub(super) fn state_changed(&mut self, x: usize) {
        self.note_released(x);
        let owners = self.nodes[x].state.owners().to_vec();
        self.nodes[x].ring = Ring::new(owners).expect("a ring");
        if self.nodes[x].state.status(&node_name(x)) == Some(Status::Invalid)
            && !self.nodes[x].removed
        {
            // As `rill-peer` does: it serves no client and takes part in no
            // change, but goes on handing off what it holds.
            self.nodes[x].removed = true;
            self.log(format!(
                "{} removed from the cluster; it hands off what it holds",
                node_name(x)
            ));
            self.clients.node_stopped(x);
            self.exchanges.retain(|_, e| e.node != x);
            self.nodes[x].memory.reaps.clear();
        }
    }

    /// Node `x` records that it saw its state and runs the claimant's
    /// step; true when the state changed.
    pub(super) fn claimant_step(&mut self, x: usize) -> bool {
        let cx = self.context(x);
        let me = node_name(x);
        let n_val = self.cfg.n;
        let before = self.nodes[x].state.digest();
        let s = &mut self.nodes[x].state;
        s.see(&me);
        let st = step(s, &me, n_val, &cx);
        s.see(&me);
        if st.applied > 0 || st.planned > 0 || !st.exited.is_empty() || !st.removed.is_empty() {
            self.log(format!(
                "{me}: claimant step: {} switched, {} planned, exited {:?}, removed {:?}",
                st.applied, st.planned, st.exited, st.removed
            ));
        }
        let changed = self.nodes[x].state.digest() != before;
        if changed {
            self.state_changed(x);
        }
        changed
    }

    /// Node `x` gossips its state to `to`.
    pub(super) fn gossip_to(&mut self, x: usize, to: usize) {
        let bytes = codec::encode(&self.nodes[x].state);
        self.send(x, to, Body::Gossip(bytes));
    }

    /// The nodes other than `x` that its state names.
    pub(super) fn peers(&self, x: usize) -> Vec<usize> {
        self.nodes[x]
            .state
            .with_status(|s| s != Status::Invalid)
            .into_iter()
            .filter_map(|m| node_index(&m, self.nodes.len()))
            .filter(|&i| i != x)
            .collect()
    }

    /// Node `x` gossips to one peer of its state, at random.
    pub(super) fn gossip(&mut self, x: usize) {
        self.claimant_step(x);
        let peers = self.peers(x);
        if let Some(&to) = self.rng.pick(&peers) {
            self.gossip_to(x, to);
        }
    }

    /// A state arrives at node `at` from `from`: merged, seen, stepped;
    /// a sender that lacks something gets this node's state back (a node
    /// removed from the cluster, which goes on gossiping to the members
    /// it knows, learns the ring its data goes to so).
    pub(super) fn gossip_in(&mut self, at: usize, from: usize, bytes: &[u8]) {
        if !self.nodes[at].joined || self.deaf.contains(&at) {
            return;
        }
        let theirs = codec::decode(bytes).expect("the codec reads what it wrote");
        if let Ok(true) = self.nodes[at].state.merge(&theirs) {
            self.state_changed(at);
        }
        self.claimant_step(at);
        if self.nodes[at].state != theirs {
            self.gossip_to(at, from);
        }
    }

    /// A node not in the cluster asks member `a` to join: it takes `a`'s
    /// state as its own, joining.
    pub(super) fn join(&mut self, a: usize) {
        let Some(new) = (0..self.nodes.len())
            .find(|&i| !self.nodes[i].joined && !self.nodes[i].removed && self.nodes[i].up)
        else {
            return;
        };
        if !self.reachable(new, a) {
            return;
        }
        let name = node_name(new);
        let mut state = self.nodes[a].state.clone();
        if state.set_status(&name, &name, Status::Joining).is_err() {
            return;
        }
        state.see(&name);
        self.nodes[new].state = state;
        self.nodes[new].joined = true;
        self.state_changed(new);
        self.log(format!("{name} joins through {}", node_name(a)));
        self.gossip_to(new, a);
    }

    /// An operator at the claimant node `a` knows of stages a leave now
    /// and then, plans the staged changes (and every join asked for), and
    /// commits.
    pub(super) fn operate(&mut self, a: usize, may_stage_leave: bool) {
        let claimant = self.nodes[a].state.claimant().to_string();
        let Some(c) = node_index(&claimant, self.nodes.len()) else {
            return;
        };
        if !self.in_cluster(c) || !self.reachable(a, c) {
            return;
        }
        let n_val = self.cfg.n;
        let cx = self.context(c);
        let me = node_name(c);
        if may_stage_leave && self.rng.chance(400) {
            let valid = self.nodes[c].state.with_status(|s| s == Status::Valid);
            if valid.len() > 2 {
                let who = valid[self.rng.below(valid.len() as u64) as usize].clone();
                let node = &mut self.nodes[c];
                if node.staged.stage(&node.state, &who, Change::Leave).is_ok() {
                    self.log(format!("{me}: leave of {who} staged"));
                }
            }
        }
        let node = &mut self.nodes[c];
        let Ok(plan) = node.staged.plan(&node.state, &me, n_val, &cx) else {
            return;
        };
        match node
            .staged
            .commit(&mut node.state, &me, Some(&plan), n_val, &cx)
        {
            Ok(st) => {
                node.state.see(&me);
                if !st.exited.is_empty() || !st.removed.is_empty() {
                    self.log(format!(
                        "{me}: the commit exited {:?}, removed {:?}",
                        st.exited, st.removed
                    ));
                }
                let moves: usize = plan
                    .transitions
                    .first()
                    .map_or(0, |t| t.transfers.values().sum());
                let changes: BTreeMap<String, String> = plan
                    .changes
                    .iter()
                    .map(|(n, c)| (n.clone(), format!("{c:?}")))
                    .collect();
                self.log(format!("{me}: committed {changes:?}, {moves} transfers"));
                self.state_changed(c);
                self.gossip(c);
            }
            Err(e) => self.log(format!("{me}: commit refused: {e}")),
        }
    }

    /// Whether every node in the cluster knows the same state, with
    /// nothing moving and every change seen.
    pub(super) fn ring_settled(&self) -> bool {
        let members: Vec<usize> = (0..self.nodes.len())
            .filter(|&x| self.in_cluster(x))
            .collect();
        let Some(&first) = members.first() else {
            return true;
        };
        let s = &self.nodes[first].state;
        s.ring().next.is_empty()
            && s.ring_ready()
            && s.with_status(|st| matches!(st, Status::Leaving | Status::Exiting | Status::Joining))
                .is_empty()
            && members.iter().all(|&x| self.nodes[x].state == *s)
    }

    /// After the heal: every member gossips to every other, runs its
    /// step and a handoff round, until the ring settles (bounded); false
    /// when it did not.
    pub(super) fn settle_ring(&mut self) -> bool {
        for round in 0..60 {
            if self.ring_settled() && self.hinted_left() == 0 {
                self.log(format!("ring settled after {round} rounds"));
                return true;
            }
            let members: Vec<usize> = (0..self.nodes.len())
                .filter(|&x| self.in_cluster(x))
                .collect();
            let joined: Vec<usize> = (0..self.nodes.len())
                .filter(|&x| self.nodes[x].joined)
                .collect();
            for &x in &joined {
                self.claimant_step(x);
                for &y in &members {
                    if x != y && self.nodes[x].joined {
                        self.gossip_to(x, y);
                    }
                }
                self.quiesce();
            }
            for x in 0..self.nodes.len() {
                self.hand_off(x);
            }
            self.quiesce();
            // Joins asked for are committed (an operator's plan and
            // commit at the claimant).
            if let Some(&x) = members.iter().find(|&&x| self.in_cluster(x)) {
                self.operate(x, false);
            }
        }
        let r = self.reference();
        let held: Vec<(usize, u32, usize)> = (0..self.nodes.len())
            .flat_map(|x| (0..self.cfg.ring_size).map(move |p| (x, p)))
            .filter(|&(x, p)| self.owner_in(r, p) != x)
            .map(|(x, p)| (x, p, self.nodes[x].vnodes().keys(p).map_or(0, |k| k.len())))
            .filter(|h| h.2 > 0)
            .collect();
        let states: Vec<String> = (0..self.nodes.len())
            .filter(|&x| self.in_cluster(x))
            .map(|x| {
                let s = &self.nodes[x].state;
                format!(
                    "{}: claimant {}, members {:?}, moving {:?}, ready {}",
                    node_name(x),
                    s.claimant(),
                    s.members()
                        .iter()
                        .map(|(n, m)| (n.clone(), m.status))
                        .collect::<Vec<_>>(),
                    s.ring()
                        .next
                        .iter()
                        .map(|t| (t.partition, t.to.clone()))
                        .collect::<Vec<_>>(),
                    s.ring_ready()
                )
            })
            .collect();
        self.log(format!(
            "the ring did not settle: held not owned (node, partition, keys) {held:?}; {states:?}"
        ));
        false
    }
}
