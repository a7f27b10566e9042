//! Clients' puts and deletes, coordinated as a node coordinates them:
//! the put runs at the node the client asked, over its preference list
//! with fallbacks, the node's own replica first when it holds one. The
//! first replica makes the new version (the vnode's `Coordinate`
//! request, with its own actor and epochs): a call on the same node,
//! else a message, which the replica's node answers at once with
//! `Accepted` (Riak's forward acknowledgement) before it carries it out.
//! `rill-coord`'s `PutFsm` counts the replicas' answers and
//! `PutAttempts` decides, as in `rill-node`, when the put starts again:
//! on the next replica when the coordinator's node was lost before it
//! took the request, with the version made when other replicas could not
//! be reached. A version made by a coordinator whose `Accepted` was lost
//! and then made again by the next is one write made twice, as Riak's
//! forwarded puts can make it; the check allows exactly that case.

use super::net::Tag;
use super::{bkey, ClusterSim, Target};
use rill_coord::{AttemptEnd, Make, PutAttempts, PutEffect, PutFsm, PutParams, PutReply};
use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
use rill_node::vnode::step::CoordinateStep;
use rill_node::KvError;
use rill_object::{Content, Dot, Metadata, Object, PruneRules, PutMode, VClock};
use std::collections::BTreeSet;

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

/// A client's write: a value (or a delete) with the context it read.
#[derive(Clone, Debug)]
pub(super) struct Write {
    pub key: String,
    pub value: Option<String>,
    pub context: VClock,
    /// The tick its put started.
    pub made: u64,
    /// Distinct nodes that must hold it before it is acknowledged.
    pub node_confirms: u32,
}

/// A put on its way.
pub(super) struct PutOp {
    pub write: Write,
    step: CoordinateStep,
    attempts: PutAttempts<usize>,
    fsm: PutFsm,
    /// The current attempt's preference list.
    targets: Vec<Target>,
    pub deadline: u64,
    /// The node the client asked: the put runs there.
    pub at: usize,
    /// The nodes whose vnodes stored the write in this attempt.
    stored_on: BTreeSet<usize>,
    /// The node asked to coordinate the current attempt while its answer
    /// is awaited, and whether it said it took the request.
    asked: Option<(usize, bool)>,
    /// Replicas of the current attempt that could not be reached.
    unreachable: Vec<usize>,
    /// What the current attempt's first replica answered with.
    made: Option<Object>,
    /// The dot of the version this put made (its first replica's).
    dot: Option<Dot>,
}

impl PutOp {
    pub(super) fn attempt(&self) -> u32 {
        self.attempts.attempt()
    }

    /// The current attempt's time is up.
    pub(super) fn timeout(&mut self) -> Vec<PutEffect> {
        self.asked = None;
        self.fsm.timeout()
    }
}

impl ClusterSim {
    pub(super) fn start_put(&mut self, c: usize, key: String, delete: bool) {
        let context = self.clients.contexts.get(&key).cloned().unwrap_or_default();
        let op = self.id();
        let value = (!delete).then(|| format!("v{op}"));
        self.put(c, op, key, value, context);
    }

    pub(super) fn put(
        &mut self,
        c: usize,
        op: u64,
        key: String,
        value: Option<String>,
        context: VClock,
    ) {
        self.clients.unacked.insert(
            op,
            super::client::Unacked {
                key: key.clone(),
                value: value.clone(),
                context: context.clone(),
            },
        );
        // The odd keys' bucket has node_confirms = 2 (Riak 3's property)
        // where the key's preference list, as `c` sees it, spans two
        // nodes or more (else no put of it could succeed and the clients'
        // retries after the heal would never end): no answer before two
        // distinct nodes hold the write, also when some replicas share a
        // node.
        let spans: BTreeSet<usize> = self.preflist(c, &key).iter().map(|t| t.0).collect();
        let odd = key[1..].parse::<u64>().is_ok_and(|k| k % 2 == 1) && spans.len() >= 2;
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
        let step = CoordinateStep::Put {
            context: context.clone(),
            content,
            mode: MODE,
        };
        let write = Write {
            key,
            value,
            context,
            made: self.now,
            node_confirms: if odd { 2 } else { 0 },
        };
        let (fsm, _) = PutFsm::start(self.put_params(&write, 0), Vec::new());
        self.clients.puts.insert(
            op,
            PutOp {
                write,
                step,
                attempts: PutAttempts::new(self.cfg.n),
                fsm,
                targets: Vec::new(),
                deadline: 0,
                at: c,
                stored_on: BTreeSet::new(),
                asked: None,
                unreachable: Vec::new(),
                made: None,
                dot: None,
            },
        );
        self.start_attempt(op);
    }

    fn put_params(&self, write: &Write, n: usize) -> PutParams {
        PutParams {
            n: n as u32,
            w: self.cfg.w,
            dw: self.cfg.w,
            pw: 0,
            node_confirms: if self.cfg.faults.ignore_node_confirms {
                0
            } else {
                write.node_confirms
            },
            allow_mult: true,
            return_body: true,
        }
    }

    /// Starts put `op`'s current attempt: its preference list passes over
    /// the nodes the attempts decided, the node's own replica first.
    fn start_attempt(&mut self, op: u64) {
        let Some(p) = self.clients.puts.get(&op) else {
            return;
        };
        let (c, key, avoid) = (p.at, p.write.key.clone(), p.attempts.avoid().to_vec());
        let mut pl = self.preflist_avoiding(c, &key, &avoid);
        if let Some(i) = pl.iter().position(|t| t.0 == c) {
            let t = pl.remove(i);
            pl.insert(0, t);
        }
        if (pl.len() as u32) < self.cfg.w {
            self.log(format!("op {op}: put failed: too few replicas"));
            self.clients.puts.remove(&op);
            return;
        }
        let params = self.put_params(&self.clients.puts[&op].write, pl.len());
        let (fsm, _) = PutFsm::start(params, super::client::replicas(&pl));
        let deadline = self.now + self.cfg.timeout_ticks;
        let p = self.clients.puts.get_mut(&op).expect("looked up");
        p.fsm = fsm;
        p.targets = pl.clone();
        p.deadline = deadline;
        p.stored_on.clear();
        p.unreachable.clear();
        p.made = None;
        let attempt = p.attempts.attempt();
        let request = match p.attempts.make() {
            Make::Step => VnodeRequest::Coordinate {
                key: bkey(&key),
                step: Box::new(p.step.clone()),
                prune: NO_PRUNING,
            },
            Make::Merge(object) => VnodeRequest::Merge {
                key: bkey(&key),
                object,
                allow_mult: true,
                prune: None,
                return_object: true,
            },
        };
        let tag = Tag::Put {
            op,
            attempt,
            idx: 0,
        };
        let (node, partition, _) = pl[0];
        if node == c {
            let reply = self.execute(node, partition, tag, request);
            self.coordinated(op, attempt, reply);
        } else {
            p.asked = Some((node, false));
            self.ask(c, pl[0], tag, request);
            if !self.reachable(c, node) {
                // It cannot leave: the runtime answers at once.
                self.coordinators_lost();
            }
        }
    }

    /// A vnode carries out a request; a version a put's coordinator
    /// makes is recorded with its dot at once (its answer may never
    /// arrive).
    pub(super) fn execute(
        &mut self,
        node: usize,
        partition: u32,
        tag: Tag,
        request: VnodeRequest,
    ) -> VnodeReply {
        let made = match (&request, tag) {
            (VnodeRequest::Coordinate { step, .. }, Tag::Put { op, attempt, .. }) => {
                match &**step {
                    CoordinateStep::Put { content, .. } => Some((op, attempt, content.clone())),
                    _ => None,
                }
            }
            _ => None,
        };
        let reply = self.nodes[node].vnodes().handle(partition, request);
        if let (Some((op, attempt, content)), VnodeReply::Stored(o)) = (made, &reply) {
            let dot = o
                .contents
                .iter()
                .filter(|c| {
                    if content.meta.deleted {
                        c.meta.deleted && c.meta.vtag == content.meta.vtag
                    } else {
                        !c.meta.deleted && c.value == content.value
                    }
                })
                .filter_map(|c| c.dot.clone())
                .find(|d| !self.clients.made.values().any(|m| m == d));
            if let Some(d) = dot {
                if !content.meta.deleted {
                    let v = String::from_utf8_lossy(&content.value).into_owned();
                    self.clients.dots.entry(v).or_default().push(d.clone());
                }
                self.clients.made.insert((op, attempt), d);
            }
        }
        reply
    }

    /// The current attempt's first replica answered.
    fn coordinated(&mut self, op: u64, attempt: u32, reply: VnodeReply) {
        let fault = self.cfg.faults.retry_after_accepted;
        let Some(p) = self.clients.puts.get_mut(&op) else {
            return;
        };
        if p.attempts.attempt() != attempt {
            return;
        }
        if let VnodeReply::Accepted = reply {
            if let Some((_, taken)) = &mut p.asked {
                *taken = true;
                if !fault {
                    p.attempts.accepted();
                }
            }
            return;
        }
        p.asked = None;
        let made = match reply {
            VnodeReply::Stored(o) => {
                if p.dot.is_none() {
                    p.dot = self.clients.made.get(&(op, attempt)).cloned();
                }
                p.stored_on.insert(p.targets[0].0);
                p.made = Some(o.clone());
                Ok(o)
            }
            other => Err(rill_coord::CoordError::Failed(format!(
                "the coordinating write failed: {other:?}"
            ))),
        };
        let effects = p.fsm.coordinated(made);
        self.put_effects(op, effects);
    }

    /// Puts whose coordinator's node can no longer be reached from the
    /// node running them: lost before it took the request, the next
    /// replica coordinates; after, the put fails (as a node's runtime
    /// fails the requests of a node it lost).
    pub(super) fn coordinators_lost(&mut self) {
        let lost: Vec<(u64, usize, bool)> = self
            .clients
            .puts
            .iter()
            .filter_map(|(op, p)| {
                let (x, taken) = p.asked?;
                (!self.reachable(p.at, x)).then_some((*op, x, taken))
            })
            .collect();
        let fault = self.cfg.faults.retry_after_accepted;
        for (op, x, taken) in lost {
            let p = self.clients.puts.get_mut(&op).expect("listed");
            p.asked = None;
            let stepping = p.attempts.make() == Make::Step;
            let end = AttemptEnd::CoordinatorLost {
                node: x,
                taken: taken && !fault,
            };
            if p.attempts.retry(end) {
                if !taken && stepping {
                    // It may have made the version, or make it yet (a
                    // request in flight across a partition is carried out
                    // when it arrives), as the next replica does too: one
                    // more version of this value is allowed.
                    if let Some(v) = &p.write.value {
                        *self
                            .clients
                            .made_twice_allowed
                            .entry(v.clone())
                            .or_default() += 1;
                    }
                }
                self.log(format!(
                    "op {op}: {} lost; the next replica coordinates",
                    super::node_name(x)
                ));
                self.start_attempt(op);
            } else {
                let effects = p.fsm.timeout();
                self.log(format!("op {op}: put failed: its coordinator was lost"));
                self.put_effects(op, effects);
                self.clients.puts.remove(&op);
            }
        }
    }

    pub(super) fn put_replied(
        &mut self,
        at: usize,
        op: u64,
        attempt: u32,
        idx: usize,
        reply: VnodeReply,
    ) {
        let Some(p) = self.clients.puts.get_mut(&op) else {
            return;
        };
        if p.at != at || p.attempts.attempt() != attempt {
            return;
        }
        if idx == 0 {
            self.coordinated(op, attempt, reply);
            return;
        }
        if matches!(reply, VnodeReply::Stored(_) | VnodeReply::Merged) {
            p.stored_on.insert(p.targets[idx].0);
        }
        let effects = match reply {
            VnodeReply::Stored(o) => {
                let mut e = p.fsm.reply(idx, PutReply::W);
                e.extend(p.fsm.reply(idx, PutReply::Dw(Some(o))));
                e
            }
            VnodeReply::Merged => {
                let mut e = p.fsm.reply(idx, PutReply::W);
                e.extend(p.fsm.reply(idx, PutReply::Dw(None)));
                e
            }
            other => {
                if let VnodeReply::Failed(KvError::Unreachable { .. }) = other {
                    let node = p.targets[idx].0;
                    p.unreachable.push(node);
                }
                p.fsm.reply(
                    idx,
                    PutReply::Failed {
                        reason: format!("{other:?}"),
                        overload: false,
                    },
                )
            }
        };
        self.put_effects(op, effects);
    }

    pub(super) fn put_effects(&mut self, op: u64, effects: Vec<PutEffect>) {
        let Some(attempt) = self.clients.puts.get(&op).map(PutOp::attempt) else {
            return;
        };
        for e in effects {
            // A failure handled meanwhile (a replica that could not be
            // reached is answered at once) may have started the next
            // attempt: what is left of this one's effects is void.
            let Some(p) = self
                .clients
                .puts
                .get(&op)
                .filter(|p| p.attempt() == attempt)
            else {
                return;
            };
            let c = p.at;
            match e {
                PutEffect::Send { idx, object } => {
                    let (targets, key) = (p.targets.clone(), p.write.key.clone());
                    if idx == 1 {
                        // The coordinator's replica is stored: its
                        // partition's next owner gets it too.
                        self.forward_to_next_owner(c, targets[0], &key, &object);
                    }
                    self.forward_to_next_owner(c, targets[idx], &key, &object);
                    if !self.reachable(c, targets[idx].0) {
                        // It cannot leave: the runtime answers at once.
                        let reply = VnodeReply::Failed(KvError::Unreachable {
                            node: super::node_name(targets[idx].0),
                            sent: false,
                            why: String::new(),
                        });
                        self.put_replied(c, op, attempt, idx, reply);
                        continue;
                    }
                    let request = VnodeRequest::Merge {
                        key: bkey(&key),
                        object,
                        allow_mult: true,
                        prune: None,
                        return_object: true,
                    };
                    self.ask(c, targets[idx], Tag::Put { op, attempt, idx }, request);
                }
                PutEffect::Answer(Ok(_)) => {
                    let p = &self.clients.puts[&op];
                    let (write, dot, confirmed) =
                        (p.write.clone(), p.dot.clone(), p.stored_on.len());
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
                    self.clients.acked.push(super::client::Acked {
                        key: write.key,
                        value: write.value,
                        dot,
                        context: write.context,
                        made: write.made,
                    });
                }
                PutEffect::Answer(Err(e)) => {
                    let p = self.clients.puts.get_mut(&op).expect("looked up");
                    let end = if p.unreachable.is_empty() {
                        AttemptEnd::Failed
                    } else {
                        AttemptEnd::ShortOf {
                            unreachable: std::mem::take(&mut p.unreachable),
                            made: p.made.take(),
                        }
                    };
                    if p.attempts.retry(end) {
                        self.log(format!(
                            "op {op}: replicas unreachable; the put starts again without them"
                        ));
                        self.start_attempt(op);
                        return;
                    }
                    self.log(format!("op {op}: put failed: {e}"));
                }
                PutEffect::Done { everywhere } => {
                    let p = self.clients.puts.remove(&op).expect("looked up");
                    // A tombstone every replica, all primaries, stored is
                    // reaped later (a node learns it by its read after
                    // the delete, or from the delete when every replica
                    // answered before the client was).
                    if let Some(made) = p.made.filter(|m| everywhere && m.is_tombstone()) {
                        self.reap(p.at, &p.write.key, made.clock, &p.targets);
                    }
                }
                PutEffect::Coordinate => {}
            }
        }
    }
}
