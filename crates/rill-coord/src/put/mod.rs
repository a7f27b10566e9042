//! A put (or a delete's tombstone), coordinated (riak_kv_put_core and
//! riak_kv_put_fsm's rules).
//!
//! The first replica of the preference list coordinates: it makes the new
//! object from what it holds and the client's context, and stores it;
//! the object then goes to the other replicas, which merge it into what
//! they hold. Each replica acknowledges twice: `W` when it has the
//! request, `DW` when it has stored it (as durably as its backend's sync
//! strategy makes it); a primary's `DW` counts for PW too, and the node
//! of a replica's `DW` for `node_confirms` (distinct physical nodes).
//!
//! The client is answered as soon as W, DW, PW and node_confirms are
//! met; or when so many replicas failed that one of them can no longer be
//! met (N - X + 1 failures, or too few primaries or nodes left to store);
//! or when every replica has stored or failed while PW or node_confirms
//! is still short. The error names the quorum that was missed.

use crate::error::{CoordError, QuorumError};
use crate::replica::{distinct_nodes, Replica};
use rill_object::Object;

mod attempts;
pub use attempts::{AttemptEnd, Make, PutAttempts};

/// The quorum rules of one put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutParams {
    /// Replicas written (set from the preference list's length).
    pub n: u32,
    pub w: u32,
    pub dw: u32,
    pub pw: u32,
    /// Distinct physical nodes that must store it (0: no such rule).
    pub node_confirms: u32,
    pub allow_mult: bool,
    pub return_body: bool,
}

/// A replica's acknowledgement.
#[derive(Clone, Debug, PartialEq)]
pub enum PutReply {
    /// The replica has the request.
    W,
    /// The replica has stored it; with the object it now holds, when the
    /// client asked for the body.
    Dw(Option<Object>),
    Failed {
        reason: String,
        overload: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Heard {
    Nothing,
    W,
    Dw,
    Failed,
}

/// The counts of one put.
#[derive(Clone, Debug)]
pub struct PutCore {
    params: PutParams,
    replicas: Vec<Replica>,
    heard: Vec<Heard>,
    objects: Vec<Object>,
    num_w: u32,
    num_dw: u32,
    num_pw: u32,
    num_fail: u32,
    overload: bool,
    last_failure: Option<String>,
}

impl PutCore {
    pub fn new(mut params: PutParams, replicas: Vec<Replica>) -> PutCore {
        params.n = replicas.len() as u32;
        PutCore {
            params,
            heard: vec![Heard::Nothing; replicas.len()],
            replicas,
            objects: Vec::new(),
            num_w: 0,
            num_dw: 0,
            num_pw: 0,
            num_fail: 0,
            overload: false,
            last_failure: None,
        }
    }

    /// Adds replica `idx`'s acknowledgement; false when it says nothing
    /// new (a repeat, a `W` after `DW`, anything after a failure, an index
    /// outside the list). A `DW` without a `W` counts as both.
    pub fn add(&mut self, idx: usize, reply: PutReply) -> bool {
        let Some(&was) = self.heard.get(idx) else {
            return false;
        };
        match (was, reply) {
            (Heard::Nothing, PutReply::W) => {
                self.num_w += 1;
                self.heard[idx] = Heard::W;
            }
            (Heard::Nothing | Heard::W, PutReply::Dw(obj)) => {
                if was == Heard::Nothing {
                    self.num_w += 1;
                }
                self.num_dw += 1;
                self.num_pw += u32::from(self.replicas[idx].primary);
                self.objects.extend(obj);
                self.heard[idx] = Heard::Dw;
            }
            (Heard::Nothing | Heard::W, PutReply::Failed { reason, overload }) => {
                self.num_fail += 1;
                self.overload |= overload;
                self.last_failure = Some(reason);
                self.heard[idx] = Heard::Failed;
            }
            _ => return false,
        }
        true
    }

    fn met(&self) -> bool {
        let p = &self.params;
        self.num_w >= p.w
            && self.num_dw >= p.dw
            && self.num_pw >= p.pw
            && self.num_nc() >= p.node_confirms
    }

    /// Distinct nodes that stored it.
    fn num_nc(&self) -> u32 {
        distinct_nodes(&self.replicas, |i| self.heard[i] == Heard::Dw)
    }

    /// Distinct nodes that stored it or still may.
    fn nodes_possible(&self) -> u32 {
        distinct_nodes(&self.replicas, |i| {
            matches!(self.heard[i], Heard::Nothing | Heard::W | Heard::Dw)
        })
    }

    /// PW can no longer be met: too few primaries left that may store.
    fn pw_out_of_reach(&self) -> bool {
        self.num_pw + self.primaries_pending() < self.params.pw
    }

    /// node_confirms can no longer be met: too few nodes left.
    fn nc_out_of_reach(&self) -> bool {
        self.nodes_possible() < self.params.node_confirms
    }

    fn pw_fail_threshold(&self) -> u32 {
        (self.params.n + 1).saturating_sub(self.params.pw)
    }

    fn dw_fail_threshold(&self) -> u32 {
        (self.params.n + 1).saturating_sub(self.params.dw)
    }

    /// Failures past which W cannot be met. riak_kv_put_core has none
    /// (a W above DW then fails only by timeout); answering at once is
    /// the same answer, sooner.
    fn w_fail_threshold(&self) -> u32 {
        (self.params.n + 1).saturating_sub(self.params.w)
    }

    pub fn enough(&self) -> bool {
        self.met()
            || self.num_fail >= self.pw_fail_threshold()
            || self.num_fail >= self.dw_fail_threshold()
            || self.num_fail >= self.w_fail_threshold()
            || self.pw_out_of_reach()
            || self.nc_out_of_reach()
            || self.has_all()
    }

    /// Primaries that may still store (PW cannot be met once those and
    /// the primaries that stored are too few).
    fn primaries_pending(&self) -> u32 {
        self.replicas
            .iter()
            .zip(&self.heard)
            .filter(|(r, h)| r.primary && matches!(h, Heard::Nothing | Heard::W))
            .count() as u32
    }

    /// Every replica has stored or failed.
    pub fn has_all(&self) -> bool {
        self.num_dw + self.num_fail >= self.params.n
    }

    /// Every replica stored it, primaries all.
    pub fn everywhere(&self) -> bool {
        self.num_dw == self.params.n && self.replicas.iter().all(|r| r.primary)
    }

    /// The client's answer (riak_kv_put_core's `response`): the object
    /// when the body was asked for.
    pub fn response(&self) -> Result<Option<Object>, CoordError> {
        let p = &self.params;
        if self.met() {
            if !p.return_body {
                return Ok(None);
            }
            let mut merged: Option<Object> = None;
            for o in &self.objects {
                merged = Some(match merged {
                    None => o.clone(),
                    Some(m) => m.merge(o),
                });
            }
            if let (Some(m), false) = (merged.as_mut(), p.allow_mult) {
                m.keep_newest();
            }
            return Ok(merged);
        }
        if self.overload {
            return Err(CoordError::Overload);
        }
        let pw = Err(CoordError::Quorum(QuorumError::PwUnsatisfied {
            need: p.pw,
            got: self.num_pw,
        }));
        let nc = Err(CoordError::Quorum(QuorumError::NodeConfirmsUnsatisfied {
            need: p.node_confirms,
            got: self.num_nc(),
        }));
        // W and DW met: what is short is PW or node_confirms (in
        // riak_kv_put_core's order).
        if self.num_w >= p.w && self.num_dw >= p.dw {
            return if self.num_pw < p.pw { pw } else { nc };
        }
        if (self.num_fail > p.n.saturating_sub(p.pw) && p.pw >= p.dw) || self.pw_out_of_reach() {
            return pw;
        }
        if (self.num_fail > p.n.saturating_sub(p.node_confirms) && p.node_confirms >= p.dw)
            || self.nc_out_of_reach()
        {
            return nc;
        }
        if self.num_dw == 0 && self.num_fail >= p.n {
            if let Some(reason) = &self.last_failure {
                return Err(CoordError::Failed(reason.clone()));
            }
        }
        // The quorum the failures put out of reach (DW first, as
        // riak_kv_put_core); otherwise the one still short.
        let dw_out = self.num_fail >= self.dw_fail_threshold();
        let w_out = self.num_fail >= self.w_fail_threshold();
        if dw_out || (!w_out && self.num_dw < p.dw) {
            return Err(CoordError::Quorum(QuorumError::DwUnsatisfied {
                need: p.dw,
                got: self.num_dw,
            }));
        }
        Err(CoordError::Quorum(QuorumError::WUnsatisfied {
            need: p.w,
            got: self.num_w,
        }))
    }
}

/// What the caller must do next.
#[derive(Clone, Debug, PartialEq)]
pub enum PutEffect {
    /// Replica 0 makes and stores the new object, then reports
    /// [`PutFsm::coordinated`].
    Coordinate,
    /// Send the coordinated object to replica `idx`, to merge in.
    Send { idx: usize, object: Object },
    /// Answer the client (once).
    Answer(Result<Option<Object>, CoordError>),
    /// Nothing more will come of this put. `everywhere`: every replica, all
    /// primaries, stored it (a delete may then reap its tombstone).
    Done { everywhere: bool },
}

/// A put from start to its last effect.
#[derive(Clone, Debug)]
pub struct PutFsm {
    core: PutCore,
    answered: bool,
    done: bool,
}

impl PutFsm {
    pub fn start(params: PutParams, replicas: Vec<Replica>) -> (PutFsm, Vec<PutEffect>) {
        let fsm = PutFsm {
            core: PutCore::new(params, replicas),
            answered: false,
            done: false,
        };
        (fsm, vec![PutEffect::Coordinate])
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The coordinator stored `object` (or failed): the other replicas
    /// get it.
    pub fn coordinated(&mut self, result: Result<Object, CoordError>) -> Vec<PutEffect> {
        if self.done || self.core.heard.first() != Some(&Heard::Nothing) {
            return Vec::new();
        }
        match result {
            Ok(object) => {
                let body = self.core.params.return_body.then(|| object.clone());
                self.core.add(0, PutReply::Dw(body));
                let mut out: Vec<PutEffect> = (1..self.core.heard.len())
                    .map(|idx| PutEffect::Send {
                        idx,
                        object: object.clone(),
                    })
                    .collect();
                out.extend(self.progress());
                out
            }
            Err(e) => {
                // Nothing was written anywhere: the coordinator's error is
                // the answer.
                self.done = true;
                self.answered = true;
                vec![
                    PutEffect::Answer(Err(e)),
                    PutEffect::Done { everywhere: false },
                ]
            }
        }
    }

    /// Replica `idx` acknowledged.
    pub fn reply(&mut self, idx: usize, reply: PutReply) -> Vec<PutEffect> {
        if self.done || idx == 0 || !self.core.add(idx, reply) {
            return Vec::new();
        }
        self.progress()
    }

    fn progress(&mut self) -> Vec<PutEffect> {
        let mut out = Vec::new();
        if !self.answered && self.core.enough() {
            self.answered = true;
            out.push(PutEffect::Answer(self.core.response()));
        }
        if self.core.has_all() {
            self.done = true;
            out.push(PutEffect::Done {
                everywhere: self.core.everywhere(),
            });
        }
        out
    }

    /// The request's time is up.
    pub fn timeout(&mut self) -> Vec<PutEffect> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut out = Vec::new();
        if !self.answered {
            self.answered = true;
            out.push(PutEffect::Answer(Err(CoordError::Timeout)));
        }
        out.push(PutEffect::Done { everywhere: false });
        out
    }
}

#[cfg(test)]
mod tests;
