//! A get, coordinated (riak_kv_get_core and riak_kv_get_fsm's rules).
//!
//! Every replica of the preference list is asked. A reply counts as
//! - ok: an object (a tombstone too), or not found when `notfound_ok`;
//! - not found: when `notfound_ok` is false;
//! - failed: an error.
//!
//! The client is answered as soon as R oks (PR of them from primaries)
//! are in, or when the failures and not-founds reach the threshold past
//! which R cannot be met (N - R + 1; with `basic_quorum`, at most a
//! majority), or when every replica has answered. After all replies (or
//! the final timeout), replicas that missed the merged object or hold an
//! ancestor of it are repaired; a tombstone every replica holds may be
//! reaped.

use crate::error::{CoordError, QuorumError};
use crate::replica::{distinct_nodes, Replica};
use rill_object::{Object, VClock};

/// The quorum rules of one get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetParams {
    /// Replicas asked (set from the preference list's length).
    pub n: u32,
    pub r: u32,
    pub pr: u32,
    /// Distinct physical nodes that must answer (0: no such rule).
    pub node_confirms: u32,
    pub notfound_ok: bool,
    pub basic_quorum: bool,
    pub allow_mult: bool,
    /// Answer a tombstone with its clock instead of not found.
    pub deletedvclock: bool,
    /// Answer only once every replica has replied (or the timeout), from
    /// all the replies: for replicas that answer at once (a node's own
    /// vnodes), where an early answer saves nothing and a full merge is
    /// the better answer.
    pub wait_for_all: bool,
}

impl GetParams {
    /// Not-founds and failures that end the wait: past them R cannot be
    /// met (with `basic_quorum`, a majority of not-founds is an answer).
    pub fn fail_threshold(&self) -> u32 {
        let t = (self.n + 1).saturating_sub(self.r).max(1);
        if self.basic_quorum {
            t.min(self.n / 2 + 1)
        } else {
            t
        }
    }
}

/// A replica's reply.
#[derive(Clone, Debug, PartialEq)]
pub enum GetReply {
    Found(Object),
    NotFound,
    Failed { reason: String, overload: bool },
}

/// The client's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum GetOutcome {
    Found(Object),
    NotFound,
    /// Every sibling is a tombstone (asked with `deletedvclock`).
    Deleted(VClock),
    Err(CoordError),
}

/// Replicas to bring up to the merged object.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadRepair {
    pub targets: Vec<usize>,
    pub object: Object,
}

/// What to do once every reply is in.
#[derive(Clone, Debug, PartialEq)]
pub enum FinalAction {
    Nop,
    Repair(ReadRepair),
    /// Every replica holds the same tombstone: it may be reaped.
    Reap(VClock),
}

/// The counts and replies of one get.
#[derive(Clone, Debug)]
pub struct GetCore {
    params: GetParams,
    replicas: Vec<Replica>,
    results: Vec<Option<GetReply>>,
    num_ok: u32,
    num_pok: u32,
    num_notfound: u32,
    /// Not-founds of fallbacks (with notfound_ok) not counted yet: they
    /// count once every primary has answered.
    fallback_notfounds: u32,
    num_deleted: u32,
    num_fail: u32,
    merged: std::cell::OnceCell<Option<Object>>,
}

impl GetCore {
    /// `replicas[i]`: whether replica `i` is a primary, and its node;
    /// `params.n` is taken as their number.
    pub fn new(mut params: GetParams, replicas: Vec<Replica>) -> GetCore {
        params.n = replicas.len() as u32;
        GetCore {
            params,
            results: vec![None; replicas.len()],
            replicas,
            num_ok: 0,
            num_pok: 0,
            num_notfound: 0,
            fallback_notfounds: 0,
            num_deleted: 0,
            num_fail: 0,
            merged: std::cell::OnceCell::new(),
        }
    }

    /// Adds replica `idx`'s reply; false (and nothing changes) when it
    /// was heard already or is not in the list.
    pub fn add(&mut self, idx: usize, reply: GetReply) -> bool {
        match self.results.get(idx) {
            Some(None) => {}
            _ => return false,
        }
        let primary = self.replicas[idx].primary;
        match &reply {
            GetReply::Found(o) => {
                self.num_ok += 1;
                self.num_pok += u32::from(primary);
                self.num_deleted += u32::from(o.is_tombstone());
            }
            // A fallback stands in for a replica that is down and knows
            // only what was written since: its not-found counts toward R
            // once every primary has answered, so two fallbacks'
            // not-founds never answer for a key a primary holds.
            GetReply::NotFound if self.params.notfound_ok && !primary => {
                self.fallback_notfounds += 1;
            }
            GetReply::NotFound if self.params.notfound_ok => {
                self.num_ok += 1;
                self.num_pok += 1;
            }
            GetReply::NotFound => self.num_notfound += 1,
            GetReply::Failed { .. } => self.num_fail += 1,
        }
        self.results[idx] = Some(reply);
        if self.fallback_notfounds > 0 && self.primaries_pending() == 0 {
            self.num_ok += self.fallback_notfounds;
            self.fallback_notfounds = 0;
        }
        self.merged = std::cell::OnceCell::new();
        true
    }

    fn met(&self) -> bool {
        self.num_ok >= self.params.r
            && self.num_pok >= self.params.pr
            && self.confirmed_nodes() >= self.params.node_confirms
    }

    /// Whether replica `i`'s reply counts toward R (an object, or a not
    /// found with notfound_ok: a fallback's once every primary answered).
    fn counts(&self, i: usize) -> bool {
        match &self.results[i] {
            Some(GetReply::Found(_)) => true,
            Some(GetReply::NotFound) => {
                self.params.notfound_ok
                    && (self.replicas[i].primary || self.primaries_pending() == 0)
            }
            _ => false,
        }
    }

    /// Distinct nodes whose replies count toward R.
    fn confirmed_nodes(&self) -> u32 {
        distinct_nodes(&self.replicas, |i| self.counts(i))
    }

    /// Distinct nodes that counted or may still.
    fn nodes_possible(&self) -> u32 {
        distinct_nodes(&self.replicas, |i| {
            self.results[i].is_none()
                || self.counts(i)
                || matches!(self.results[i], Some(GetReply::NotFound))
        })
    }

    fn heard(&self) -> u32 {
        self.num_ok + self.num_notfound + self.num_fail + self.fallback_notfounds
    }

    /// Primaries not heard yet.
    fn primaries_pending(&self) -> u32 {
        self.replicas
            .iter()
            .zip(&self.results)
            .filter(|(p, r)| p.primary && r.is_none())
            .count() as u32
    }

    /// Enough replies to answer: R and PR met, or R out of reach (the
    /// fail threshold), or PR out of reach (too few primaries left), or
    /// every reply in.
    pub fn enough(&self) -> bool {
        if self.params.wait_for_all {
            return self.has_all();
        }
        self.met()
            || self.num_notfound + self.num_fail >= self.params.fail_threshold()
            || self.num_pok + self.primaries_pending() < self.params.pr
            || self.nodes_possible() < self.params.node_confirms
            || self.heard() >= self.params.n
    }

    pub fn has_all(&self) -> bool {
        self.heard() >= self.params.n
    }

    /// The merge of the objects found so far, made once per set of
    /// replies (the answer and the repairs both need it).
    fn merged(&self) -> Option<&Object> {
        self.merged
            .get_or_init(|| {
                let mut merged: Option<Object> = None;
                for r in self.results.iter().flatten() {
                    if let GetReply::Found(o) = r {
                        merged = Some(match merged {
                            None => o.clone(),
                            Some(m) => m.merge(o),
                        });
                    }
                }
                let mut m = merged?;
                if !self.params.allow_mult {
                    m.keep_newest();
                }
                Some(m)
            })
            .as_ref()
    }

    /// The client's answer from the replies so far (riak_kv_get_core's
    /// `response`).
    pub fn response(&self) -> GetOutcome {
        let p = &self.params;
        // riak_kv_get_core checks the nodes first.
        if self.confirmed_nodes() < p.node_confirms {
            return GetOutcome::Err(CoordError::Quorum(QuorumError::InsufficientNodes {
                need: p.node_confirms,
                got: self.confirmed_nodes(),
            }));
        }
        if self.met() {
            return match self.merged() {
                Some(m) if !m.is_tombstone() => GetOutcome::Found(m.clone()),
                Some(m) if p.deletedvclock => GetOutcome::Deleted(m.clock.clone()),
                _ => GetOutcome::NotFound,
            };
        }
        // Everything heard was a tombstone or not found.
        if self.num_notfound + self.num_deleted > 0
            && self.num_ok == self.num_deleted
            && self.num_fail == 0
        {
            return GetOutcome::NotFound;
        }
        let overload = self
            .results
            .iter()
            .flatten()
            .any(|r| matches!(r, GetReply::Failed { overload: true, .. }));
        if overload {
            return GetOutcome::Err(CoordError::Overload);
        }
        if self.num_ok == 0 && self.num_notfound == 0 {
            if let Some(GetReply::Failed { reason, .. }) = self
                .results
                .iter()
                .flatten()
                .find(|r| matches!(r, GetReply::Failed { .. }))
            {
                return GetOutcome::Err(CoordError::Failed(reason.clone()));
            }
        }
        if (p.pr > 0 && self.num_pok < p.pr && self.num_ok >= p.r) || p.pr >= p.r {
            return GetOutcome::Err(CoordError::Quorum(QuorumError::PrUnsatisfied {
                need: p.pr,
                got: self.num_pok,
            }));
        }
        GetOutcome::Err(CoordError::Quorum(QuorumError::RUnsatisfied {
            need: p.r,
            got: self.num_ok,
        }))
    }

    /// Repairs or a reap, from the replies so far (riak_kv_get_core's
    /// `final_action`): replicas whose object the merge strictly
    /// descends or differs from at the same clock, and those that said not
    /// found, get the merged object; a
    /// tombstone every replica holds, with nothing to repair, may go.
    pub fn final_action(&self) -> FinalAction {
        let Some(m) = self.merged() else {
            return FinalAction::Nop;
        };
        let mut targets = Vec::new();
        let mut found = 0;
        for (i, r) in self.results.iter().enumerate() {
            match r {
                Some(GetReply::Found(o)) => {
                    found += 1;
                    // Behind the merge, or level with it but holding
                    // siblings the merge has seen superseded (a replica
                    // can reach the same clock by another history; merging
                    // drops them). riak_kv repairs only the first and
                    // leaves the second to anti-entropy.
                    if m.clock.dominates(&o.clock) || (o.clock == m.clock && o != m) {
                        targets.push(i);
                    }
                }
                Some(GetReply::NotFound) => targets.push(i),
                _ => {}
            }
        }
        if !targets.is_empty() {
            return FinalAction::Repair(ReadRepair {
                targets,
                object: m.clone(),
            });
        }
        // Only when every replica is a primary (riak_kv's rule): a
        // primary that is down may still hold the value, and would bring
        // it back once the tombstone is gone everywhere else.
        if m.is_tombstone()
            && found == self.replicas.len()
            && self.replicas.iter().all(|r| r.primary)
        {
            return FinalAction::Reap(m.clock.clone());
        }
        FinalAction::Nop
    }
}

/// What the caller must do next.
#[derive(Clone, Debug, PartialEq)]
pub enum GetEffect {
    /// Ask replica `idx` for the key.
    Send(usize),
    /// Answer the client (once).
    Answer(GetOutcome),
    /// Write the merged object to replica `idx`.
    Repair { idx: usize, object: Object },
    /// Reap the tombstone with this clock from every replica.
    Reap(VClock),
    /// Nothing more will come of this get.
    Done,
}

/// A get from start to its last effect.
#[derive(Clone, Debug)]
pub struct GetFsm {
    core: GetCore,
    answered: bool,
    done: bool,
}

impl GetFsm {
    /// A get over `replicas` (primary or fallback each, on their nodes):
    /// ask them all.
    pub fn start(params: GetParams, replicas: Vec<Replica>) -> (GetFsm, Vec<GetEffect>) {
        let n = replicas.len();
        let fsm = GetFsm {
            core: GetCore::new(params, replicas),
            answered: false,
            done: false,
        };
        (fsm, (0..n).map(GetEffect::Send).collect())
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Replica `idx` replied.
    pub fn reply(&mut self, idx: usize, reply: GetReply) -> Vec<GetEffect> {
        if self.done || !self.core.add(idx, reply) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.answered && self.core.enough() {
            self.answered = true;
            out.push(GetEffect::Answer(self.core.response()));
        }
        if self.core.has_all() {
            out.extend(self.finish());
        }
        out
    }

    /// The request's time is up: a client not yet answered gets a
    /// timeout; replicas that did answer are still repaired.
    pub fn timeout(&mut self) -> Vec<GetEffect> {
        if self.done {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.answered {
            self.answered = true;
            out.push(GetEffect::Answer(GetOutcome::Err(CoordError::Timeout)));
        }
        out.extend(self.finish());
        out
    }

    fn finish(&mut self) -> Vec<GetEffect> {
        self.done = true;
        let mut out = Vec::new();
        match self.core.final_action() {
            FinalAction::Nop => {}
            FinalAction::Repair(r) => {
                out.extend(r.targets.into_iter().map(|idx| GetEffect::Repair {
                    idx,
                    object: r.object.clone(),
                }));
            }
            // A reap needs every replica's answer.
            FinalAction::Reap(clock) if self.core.has_all() => out.push(GetEffect::Reap(clock)),
            FinalAction::Reap(_) => {}
        }
        out.push(GetEffect::Done);
        out
    }
}

#[cfg(test)]
mod tests;
