//! Clients' requests: a get starts a `rill-coord` machine at its
//! coordinator, whose effects become vnode requests; replies and
//! timeouts feed it; answers update the clients' contexts. Puts are in
//! `put`; here is what both keep: the record of acknowledged writes and
//! of the dots coordinators gave.

use super::net::Tag;
use super::put::PutOp;
use super::{bkey, ClusterSim, Target};
use rill_coord::{GetEffect, GetFsm, GetOutcome, GetParams, GetReply, PutEffect};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_object::{Dot, VClock};
use rill_ring::{Partition, PreflistEntry};
use std::collections::BTreeMap;

/// Why a get runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A client's read: its answer becomes the client's context.
    Client,
    /// Anti-entropy's repair of a key it found: its read repairs (and
    /// reaps), not its answer, count.
    Repair,
}

pub(super) enum Op {
    Get {
        fsm: GetFsm,
        key: String,
        targets: Vec<Target>,
        deadline: u64,
        coordinator: usize,
        purpose: Purpose,
    },
}

/// An acknowledged write.
#[derive(Clone, Debug)]
pub(crate) struct Acked {
    pub key: String,
    pub value: Option<String>,
    pub dot: Option<Dot>,
    pub context: VClock,
    /// The tick its coordinating vnode made it.
    pub made: u64,
}

/// A write not acknowledged yet, to be sent again after the heal.
#[derive(Clone, Debug)]
pub(super) struct Unacked {
    pub key: String,
    /// `None`: a delete.
    pub value: Option<String>,
    pub context: VClock,
}

#[derive(Default)]
pub(super) struct Clients {
    ops: BTreeMap<u64, Op>,
    pub puts: BTreeMap<u64, PutOp>,
    /// The last clock a client read for each key.
    pub contexts: BTreeMap<String, VClock>,
    pub acked: Vec<Acked>,
    /// Writes not (yet) acknowledged, by op: sent again after the heal.
    pub unacked: BTreeMap<u64, Unacked>,
    /// The dots each value was given by the vnodes that made it (two
    /// when a write was made twice).
    pub dots: BTreeMap<String, Vec<Dot>>,
    /// The dot of the version each put's attempt made, by (op, attempt).
    pub made: BTreeMap<(u64, u32), Dot>,
    /// Versions beyond the first a value may have, made in the one way
    /// a put may make a write twice: a coordinator passed over before
    /// its `Accepted` arrived may make it still, as the next one does.
    pub made_twice_allowed: BTreeMap<String, usize>,
    /// Writes acknowledged before `node_confirms` distinct nodes held
    /// them.
    pub unconfirmed: Vec<String>,
}

impl Clients {
    pub fn node_stopped(&mut self, x: usize) {
        self.ops.retain(|_, o| match o {
            Op::Get { coordinator, .. } => *coordinator != x,
        });
        self.puts.retain(|_, p| p.at != x);
    }

    pub fn idle(&self) -> bool {
        self.ops.is_empty() && self.puts.is_empty()
    }
}

impl ClusterSim {
    pub(super) fn start_get(&mut self, c: usize, key: String) {
        self.start_get_for(c, key, Purpose::Client, self.cfg.r);
    }

    pub(super) fn start_get_for(&mut self, c: usize, key: String, purpose: Purpose, r: u32) {
        let pl = self.preflist(c, &key);
        if (pl.len() as u32) < r {
            return;
        }
        let params = GetParams {
            n: pl.len() as u32,
            r,
            pr: 0,
            node_confirms: 0,
            notfound_ok: true,
            basic_quorum: false,
            allow_mult: true,
            deletedvclock: true,
            wait_for_all: false,
        };
        let (fsm, effects) = GetFsm::start(params, replicas(&pl));
        let op = self.id();
        self.clients.ops.insert(
            op,
            Op::Get {
                fsm,
                key,
                targets: pl,
                deadline: self.now + self.cfg.timeout_ticks,
                coordinator: c,
                purpose,
            },
        );
        self.get_effects(op, effects);
    }

    /// After the heal, every write not acknowledged is sent again with
    /// the context it had, until acknowledged (as a client retries): then
    /// a write that reached some replicas without an answer is covered
    /// by an acknowledged one, and the check need forgive nothing else.
    pub(super) fn retry_unacknowledged(&mut self) {
        for _ in 0..5 {
            let todo: Vec<(u64, Unacked)> = std::mem::take(&mut self.clients.unacked)
                .into_iter()
                .collect();
            if todo.is_empty() {
                return;
            }
            for (
                op,
                Unacked {
                    key,
                    value,
                    context,
                },
            ) in todo
            {
                self.log(format!("op {op}: sent again"));
                let again = self.id();
                let value = value.map(|v| format!("{v}+"));
                let c = self.reference();
                self.put(c, again, key, value, context);
                self.quiesce();
            }
        }
        assert!(
            self.clients.unacked.is_empty(),
            "writes still unacknowledged on a healed cluster"
        );
    }

    pub(super) fn get_replied(&mut self, at: usize, op: u64, idx: usize, reply: VnodeReply) {
        let reply = match reply {
            VnodeReply::Found(Some(o)) => GetReply::Found(o),
            VnodeReply::Found(None) => GetReply::NotFound,
            other => GetReply::Failed {
                reason: format!("{other:?}"),
                overload: false,
            },
        };
        let effects = match self.clients.ops.get_mut(&op) {
            Some(Op::Get {
                fsm, coordinator, ..
            }) if *coordinator == at => fsm.reply(idx, reply),
            _ => return,
        };
        self.get_effects(op, effects);
    }

    fn get_effects(&mut self, op: u64, effects: Vec<GetEffect>) {
        for e in effects {
            let Some(Op::Get {
                key,
                targets,
                coordinator,
                purpose,
                ..
            }) = self.clients.ops.get(&op)
            else {
                return;
            };
            let (key, targets, c, purpose) = (key.clone(), targets.clone(), *coordinator, *purpose);
            match e {
                GetEffect::Send(idx) => {
                    let request = VnodeRequest::Get { key: bkey(&key) };
                    self.ask(c, targets[idx], Tag::Get { op, idx }, request);
                }
                GetEffect::Answer(GetOutcome::Found(o)) if purpose == Purpose::Client => {
                    self.clients.contexts.insert(key, o.clock);
                }
                GetEffect::Answer(GetOutcome::Deleted(clock)) if purpose == Purpose::Client => {
                    self.clients.contexts.insert(key, clock);
                }
                GetEffect::Repair { idx, object } => {
                    // Sent and not awaited, as read repair is.
                    let request = VnodeRequest::Merge {
                        key: bkey(&key),
                        object,
                        allow_mult: true,
                        prune: None,
                        return_object: false,
                    };
                    self.ask(c, targets[idx], Tag::None, request);
                }
                GetEffect::Done => {
                    self.clients.ops.remove(&op);
                }
                GetEffect::Reap(clock) => self.reap(c, &key, clock, &targets),
                GetEffect::Answer(_) => {}
            }
        }
    }

    /// While a replica's partition moves to a new owner, coordinator `c`
    /// sends the new owner the replica's write too (`ClusterView::
    /// next_owner`, as a node does), not waited for.
    pub(super) fn forward_to_next_owner(
        &mut self,
        c: usize,
        t: Target,
        key: &str,
        object: &rill_object::Object,
    ) {
        let e = PreflistEntry {
            partition: Partition(t.1),
            node: super::node_name(t.0),
            primary: t.2,
        };
        let Some(next) = self.view_of(c).next_owner(&e) else {
            return;
        };
        let request = VnodeRequest::Merge {
            key: bkey(key),
            object: object.clone(),
            allow_mult: true,
            prune: None,
            return_object: false,
        };
        let to = (self.index_of(&next.node), t.1, false);
        self.ask(c, to, Tag::None, request);
    }

    pub(super) fn timeouts(&mut self) {
        let due: Vec<u64> = self
            .clients
            .ops
            .iter()
            .filter(|(_, o)| match o {
                Op::Get { deadline, .. } => *deadline <= self.now,
            })
            .map(|(k, _)| *k)
            .collect();
        for op in due {
            let effects = match self.clients.ops.get_mut(&op) {
                Some(Op::Get { fsm, .. }) => fsm.timeout(),
                None => continue,
            };
            self.get_effects(op, effects);
            // A machine that timed out is done.
            self.clients.ops.remove(&op);
        }
        let due: Vec<u64> = self
            .clients
            .puts
            .iter()
            .filter(|(_, p)| p.deadline <= self.now)
            .map(|(k, _)| *k)
            .collect();
        for op in due {
            let Some(p) = self.clients.puts.get_mut(&op) else {
                continue;
            };
            let attempt = p.attempt();
            let effects = p.timeout();
            if effects.iter().any(|e| matches!(e, PutEffect::Answer(_))) {
                self.log(format!("op {op}: put timed out"));
            }
            self.put_effects(op, effects);
            // A machine that timed out is done, unless its put started
            // again.
            if self
                .clients
                .puts
                .get(&op)
                .is_some_and(|p| p.attempt() == attempt)
            {
                self.clients.puts.remove(&op);
            }
        }
    }

    pub(crate) fn acked(&self) -> &[Acked] {
        &self.clients.acked
    }

    /// Writes acknowledged before `node_confirms` distinct nodes held
    /// them.
    pub(crate) fn unconfirmed(&self) -> &[String] {
        &self.clients.unconfirmed
    }

    /// The dots the vnodes that made `value` gave it (none: no client
    /// wrote it, or its coordination failed).
    pub(crate) fn dots_of(&self, value: &[u8]) -> &[Dot] {
        std::str::from_utf8(value)
            .ok()
            .and_then(|v| self.clients.dots.get(v))
            .map_or(&[], |d| d.as_slice())
    }

    /// A value made more often than its put may have made it (see
    /// `Clients::made_twice_allowed`), if any.
    pub(crate) fn made_too_often(&self) -> Option<(&str, usize)> {
        self.clients.dots.iter().find_map(|(v, dots)| {
            let allowed = 1 + self.clients.made_twice_allowed.get(v).copied().unwrap_or(0);
            (dots.len() > allowed).then_some((v.as_str(), dots.len()))
        })
    }
}

/// A preference list as the machines see it.
pub(super) fn replicas(pl: &[Target]) -> Vec<rill_coord::Replica> {
    pl.iter()
        .map(|&(node, _, primary)| rill_coord::Replica {
            primary,
            node: node as u32,
        })
        .collect()
}
