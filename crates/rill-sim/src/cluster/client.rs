//! Clients' requests: a get or a put starts a `rill-coord` machine at its
//! coordinator, whose effects become vnode requests; replies and
//! timeouts feed it; answers update the clients' contexts and the record
//! of acknowledged writes. A put's first replica makes the new version
//! (the vnode's `Coordinate` request, with its own actor and epochs), as
//! on a node.

use super::net::Tag;
use super::{bkey, ClusterSim, Target};
use rill_coord::{
    GetEffect, GetFsm, GetOutcome, GetParams, GetReply, PutEffect, PutFsm, PutParams, PutReply,
};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::vnode::step::CoordinateStep;
use rill_object::{Content, Dot, Metadata, PruneRules, PutMode, VClock};
use rill_ring::{Partition, PreflistEntry};
use std::collections::{BTreeMap, BTreeSet};

const MODE: PutMode = PutMode {
    allow_mult: true,
    last_write_wins: false,
};

/// Clocks never pruned: a pruned entry would make the check's "covered
/// by a later context" unsound, and pruning reads the wall clock.
const NO_PRUNING: PruneRules = PruneRules {
    small: usize::MAX,
    big: usize::MAX,
    young_secs: u64::MAX,
    old_secs: u64::MAX,
};

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
    Put {
        fsm: PutFsm,
        write: Write,
        deadline: u64,
        coordinator: usize,
        /// The nodes whose vnodes stored the write so far.
        stored_on: BTreeSet<usize>,
    },
}

/// A client's write: a value (or a delete) with the context it read,
/// and the dot its coordinating vnode gave the value.
#[derive(Clone, Debug)]
pub(super) struct Write {
    pub key: String,
    pub value: Option<String>,
    pub context: VClock,
    pub targets: Vec<Target>,
    pub dot: Option<Dot>,
    /// The tick its coordinating vnode made it.
    pub made: u64,
    /// Distinct nodes that must hold it before it is acknowledged.
    pub node_confirms: u32,
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
    key: String,
    /// `None`: a delete.
    value: Option<String>,
    context: VClock,
}

#[derive(Default)]
pub(super) struct Clients {
    ops: BTreeMap<u64, Op>,
    /// The last clock a client read for each key.
    contexts: BTreeMap<String, VClock>,
    pub acked: Vec<Acked>,
    /// Writes not (yet) acknowledged, by op: sent again after the heal.
    unacked: BTreeMap<u64, Unacked>,
    /// The dot each value was given by the vnode that coordinated it.
    pub dots: BTreeMap<String, Dot>,
    /// Writes acknowledged before `node_confirms` distinct nodes held
    /// them.
    pub unconfirmed: Vec<String>,
}

impl Clients {
    pub fn node_stopped(&mut self, x: usize) {
        self.ops.retain(|_, o| match o {
            Op::Get { coordinator, .. } | Op::Put { coordinator, .. } => *coordinator != x,
        });
    }

    pub fn idle(&self) -> bool {
        self.ops.is_empty()
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

    pub(super) fn start_put(&mut self, c: usize, key: String, delete: bool) {
        let context = self.clients.contexts.get(&key).cloned().unwrap_or_default();
        let op = self.id();
        let value = (!delete).then(|| format!("v{op}"));
        self.put(c, op, key, value, context);
    }

    fn put(&mut self, c: usize, op: u64, key: String, value: Option<String>, context: VClock) {
        let pl = self.preflist(c, &key);
        self.clients.unacked.insert(
            op,
            Unacked {
                key: key.clone(),
                value: value.clone(),
                context: context.clone(),
            },
        );
        if (pl.len() as u32) < self.cfg.w {
            return;
        }
        // The odd keys' bucket has node_confirms = 2 (Riak 3's property):
        // no answer before two distinct nodes hold the write, also when
        // fallbacks share a node.
        let odd = key[1..].parse::<u64>().is_ok_and(|k| k % 2 == 1);
        let node_confirms = if odd { 2 } else { 0 };
        let params = PutParams {
            n: pl.len() as u32,
            w: self.cfg.w,
            dw: self.cfg.w,
            pw: 0,
            node_confirms: if self.cfg.faults.ignore_node_confirms {
                0
            } else {
                node_confirms
            },
            allow_mult: true,
            return_body: true,
        };
        let (fsm, _) = PutFsm::start(params, replicas(&pl));
        // The put goes to the first replica's node, which coordinates.
        let coordinator = pl[0].0;
        if !self.reachable(c, coordinator) {
            return;
        }
        let (node, partition, _) = pl[0];
        let content = match &value {
            Some(v) => Content::new(
                v.clone().into_bytes(),
                Metadata {
                    last_modified_us: self.now * 1000,
                    ..Metadata::default()
                },
            ),
            None => Content::tombstone(self.now * 1000, format!("t{op}").into_bytes()),
        };
        let request = VnodeRequest::Coordinate {
            key: bkey(&key),
            step: Box::new(CoordinateStep::Put {
                context: context.clone(),
                content,
                mode: MODE,
            }),
            prune: NO_PRUNING,
        };
        let made = match self.nodes[node].vnodes().handle(partition, request) {
            VnodeReply::Stored(o) => Ok(o),
            other => Err(rill_coord::CoordError::Failed(format!(
                "the coordinating write failed: {other:?}"
            ))),
        };
        // The dot the new value got: every replica must keep it with the
        // value, and nothing may give the value another. A delete's is
        // its tombstone's: the new one its context had not seen.
        let dot = match (&made, &value) {
            (Ok(o), Some(v)) => o
                .contents
                .iter()
                .find(|c| c.value == v.as_bytes())
                .and_then(|c| c.dot.clone()),
            (Ok(o), None) => {
                let vtag = format!("t{op}").into_bytes();
                o.contents
                    .iter()
                    .find(|c| c.meta.deleted && c.meta.vtag.as_deref() == Some(&vtag[..]))
                    .and_then(|c| c.dot.clone())
            }
            _ => None,
        };
        if let (Some(v), Some(d)) = (&value, &dot) {
            self.clients.dots.insert(v.clone(), d.clone());
        }
        let write = Write {
            key,
            value,
            context,
            targets: pl,
            dot,
            made: self.now,
            node_confirms,
        };
        self.clients.ops.insert(
            op,
            Op::Put {
                fsm,
                write,
                deadline: self.now + self.cfg.timeout_ticks,
                coordinator,
                stored_on: BTreeSet::from([node]),
            },
        );
        let effects = match self.clients.ops.get_mut(&op) {
            Some(Op::Put { fsm, .. }) => fsm.coordinated(made),
            _ => return,
        };
        self.put_effects(op, effects);
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

    pub(super) fn put_replied(&mut self, at: usize, op: u64, idx: usize, reply: VnodeReply) {
        let Some(Op::Put {
            fsm,
            coordinator,
            write,
            stored_on,
            ..
        }) = self.clients.ops.get_mut(&op)
        else {
            return;
        };
        if *coordinator != at {
            return;
        }
        if matches!(reply, VnodeReply::Stored(_) | VnodeReply::Merged) {
            stored_on.insert(write.targets[idx].0);
        }
        let effects = match reply {
            VnodeReply::Stored(o) => {
                let mut e = fsm.reply(idx, PutReply::W);
                e.extend(fsm.reply(idx, PutReply::Dw(Some(o))));
                e
            }
            VnodeReply::Merged => {
                let mut e = fsm.reply(idx, PutReply::W);
                e.extend(fsm.reply(idx, PutReply::Dw(None)));
                e
            }
            other => fsm.reply(
                idx,
                PutReply::Failed {
                    reason: format!("{other:?}"),
                    overload: false,
                },
            ),
        };
        self.put_effects(op, effects);
    }

    fn put_effects(&mut self, op: u64, effects: Vec<PutEffect>) {
        for e in effects {
            let Some(Op::Put {
                write,
                coordinator,
                stored_on,
                ..
            }) = self.clients.ops.get(&op)
            else {
                return;
            };
            let (write, c, confirmed) = (write.clone(), *coordinator, stored_on.len());
            match e {
                PutEffect::Send { idx, object } => {
                    if idx == 1 {
                        // The coordinator's replica is stored: its
                        // partition's next owner gets it too.
                        self.forward_to_next_owner(c, write.targets[0], &write.key, &object);
                    }
                    self.forward_to_next_owner(c, write.targets[idx], &write.key, &object);
                    let request = VnodeRequest::Merge {
                        key: bkey(&write.key),
                        object,
                        allow_mult: true,
                        prune: None,
                        return_object: true,
                    };
                    self.ask(c, write.targets[idx], Tag::Put { op, idx }, request);
                }
                PutEffect::Answer(Ok(_)) => {
                    let dot = write.dot.clone();
                    self.log(format!(
                        "op {op}: {} {:?} acknowledged",
                        write.key, write.value
                    ));
                    self.clients.unacked.remove(&op);
                    self.counts.acked += 1;
                    if (confirmed as u32) < write.node_confirms {
                        self.clients.unconfirmed.push(format!(
                            "{} {:?}: {confirmed} of {} nodes",
                            write.key, write.value, write.node_confirms
                        ));
                    }
                    self.clients.acked.push(Acked {
                        key: write.key,
                        value: write.value,
                        dot,
                        context: write.context,
                        made: write.made,
                    });
                }
                PutEffect::Answer(Err(e)) => self.log(format!("op {op}: put failed: {e}")),
                PutEffect::Done { .. } => {
                    self.clients.ops.remove(&op);
                }
                PutEffect::Coordinate => {}
            }
        }
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
    fn forward_to_next_owner(
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
                Op::Get { deadline, .. } | Op::Put { deadline, .. } => *deadline <= self.now,
            })
            .map(|(k, _)| *k)
            .collect();
        for op in due {
            let effects = match self.clients.ops.get_mut(&op) {
                Some(Op::Get { fsm, .. }) => Ok(fsm.timeout()),
                Some(Op::Put { fsm, .. }) => Err(fsm.timeout()),
                None => continue,
            };
            match effects {
                Ok(e) => self.get_effects(op, e),
                Err(e) => {
                    if e.iter().any(|e| matches!(e, PutEffect::Answer(_))) {
                        self.log(format!("op {op}: put timed out"));
                    }
                    self.put_effects(op, e);
                }
            }
            // A machine that timed out is done.
            self.clients.ops.remove(&op);
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

    /// The dot the vnode that coordinated `value` gave it (`None`: no
    /// client wrote it, or its coordination failed).
    pub(crate) fn dot_of(&self, value: &[u8]) -> Option<&Dot> {
        std::str::from_utf8(value)
            .ok()
            .and_then(|v| self.clients.dots.get(v))
    }
}

/// A preference list as the machines see it.
fn replicas(pl: &[Target]) -> Vec<rill_coord::Replica> {
    pl.iter()
        .map(|&(node, _, primary)| rill_coord::Replica {
            primary,
            node: node as u32,
        })
        .collect()
}
