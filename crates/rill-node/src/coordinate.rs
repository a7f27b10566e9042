//! The node's side of coordination: it runs `rill-coord`'s get and put
//! machines over the vnodes of a preference list, carrying out their
//! effects (ask a vnode, write to it, repair it, reap a tombstone) and
//! keeping the vnodes' typed errors for the answer. The rules are the
//! machines'; this is the wiring.
//!
//! A replica on this node answers at once; one on another node answers
//! through the cluster runtime, and the coordinator waits for it until
//! the request's timeout. The client is answered as soon as the machine
//! has its answer; a get's remaining replies (for read repair) are
//! collected afterwards by a task of the runtime.

use crate::cluster::ReplyTx;
use crate::error::{KvError, OUT_OF_SPACE_RETRY_SECS};
use crate::head::{HeadStep, Heads};
use crate::kv::{prune_rules, put_mode};
use crate::node::Node;
use crate::quorum::{ReadQuorum, WriteQuorum};
use crate::step::CoordinateStep;
use crate::vnode_msg::{VnodeReply, VnodeRequest};
use rill_backend::BKey;
use rill_bucket::Props;
use rill_coord::{
    CoordError, GetEffect, GetFsm, GetOutcome, GetParams, GetReply, PutEffect, PutFsm, PutParams,
    PutReply,
};
use rill_object::{Object, VClock};
use rill_ring::PreflistEntry;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

/// The tag of the coordinating write's reply (replies of replicas are
/// tagged with their index).
const COORDINATOR: usize = usize::MAX;

type Replies = UnboundedReceiver<(usize, VnodeReply)>;

/// What a write is, for `write_replicas`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteKind {
    /// It adds data (not a delete): admitted for disk space first.
    pub adds: bool,
    /// The client wants the object as the replicas hold it after the
    /// write (else the coordinator's is enough).
    pub return_body: bool,
}

/// A read's answer.
#[derive(Debug)]
pub(crate) enum Read {
    Found(Object),
    NotFound,
    /// Every sibling a tombstone (asked with `deletedvclock`).
    Deleted(VClock),
}

/// How a read treats what it finds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadMode {
    pub basic_quorum: bool,
    pub allow_mult: bool,
    pub deletedvclock: bool,
    /// A tombstone every replica holds may be reaped (not when the read
    /// used a smaller n_val than the bucket's: other replicas may hold
    /// the value).
    pub may_reap: bool,
}

fn overloaded(e: &KvError) -> bool {
    matches!(e, KvError::Busy(_))
}

/// A reply that does not answer the request sent: a bug between a
/// coordinator and a vnode, never a client's doing; it counts as that
/// replica failing.
fn unexpected(reply: VnodeReply) -> String {
    tracing::error!(?reply, "a vnode answered a request with the wrong reply");
    "internal error: a replica answered out of turn".into()
}

fn quorum_error(e: CoordError) -> KvError {
    match e {
        CoordError::Quorum(q) => KvError::Quorum(q),
        CoordError::Timeout => KvError::Timeout,
        CoordError::Overload => KvError::Busy("a replica is overloaded; retry".into()),
        CoordError::Failed(reason) => KvError::Backend(reason),
        other => KvError::Backend(other.to_string()),
    }
}

fn get_reply(reply: VnodeReply, last_error: &mut Option<KvError>) -> GetReply {
    match reply {
        VnodeReply::Found(Some(o)) => GetReply::Found(o),
        VnodeReply::Found(None) => GetReply::NotFound,
        VnodeReply::Failed(e) => {
            let r = GetReply::Failed {
                reason: e.to_string(),
                overload: overloaded(&e),
            };
            *last_error = Some(e);
            r
        }
        other => GetReply::Failed {
            reason: unexpected(other),
            overload: false,
        },
    }
}

/// What a get does with its replicas: read the key, repair, reap.
struct GetJob {
    key: BKey,
    preflist: Vec<PreflistEntry>,
    mode: ReadMode,
    tx: ReplyTx,
}

impl Node {
    /// Asks replica `i` for a get: this node's vnode for the object,
    /// another node's for its head (`head`).
    fn ask_get(&self, job: &GetJob, i: usize) -> Option<VnodeReply> {
        let key = job.key.clone();
        let request = if self.is_local(&job.preflist[i]) {
            VnodeRequest::Get { key }
        } else {
            VnodeRequest::Head { key }
        };
        self.ask(&job.preflist[i], request, i, &job.tx)
    }

    /// Takes replica `i`'s reply through the heads (fetching whole
    /// objects where a head alone does not do) into the get machine.
    fn take_get_reply(
        &self,
        fsm: &mut GetFsm,
        heads: &mut Heads,
        job: &GetJob,
        (i, reply): (usize, VnodeReply),
        last_error: &mut Option<KvError>,
    ) -> Vec<GetEffect> {
        let mut effects = Vec::new();
        let mut queue = VecDeque::from([(i, reply)]);
        while let Some((i, reply)) = queue.pop_front() {
            if matches!(reply, VnodeReply::Head { .. }) {
                self.counters
                    .get_head_clocks
                    .fetch_add(1, Ordering::Relaxed);
            }
            for step in heads.reply(i, reply) {
                match step {
                    HeadStep::Feed(i, r) => effects.extend(fsm.reply(i, get_reply(r, last_error))),
                    HeadStep::Fetch(i) => {
                        self.counters.get_fetches.fetch_add(1, Ordering::Relaxed);
                        let request = VnodeRequest::Get {
                            key: job.key.clone(),
                        };
                        if let Some(r) = self.ask(&job.preflist[i], request, i, &job.tx) {
                            queue.push_back((i, r));
                        }
                    }
                }
            }
        }
        effects
    }
}

impl Node {
    /// Reads the key from every replica of `preflist` through a get
    /// machine: answers by Riak's quorum rules, repairs replicas behind
    /// the merge, reaps a tombstone every replica holds.
    pub(crate) fn coordinate_get(
        &self,
        k: &BKey,
        preflist: &[PreflistEntry],
        q: ReadQuorum,
        mode: ReadMode,
    ) -> Result<Read, KvError> {
        let all_local = preflist.iter().all(|e| self.is_local(e));
        let params = GetParams {
            n: preflist.len() as u32,
            r: q.r,
            pr: q.pr,
            notfound_ok: q.notfound_ok,
            basic_quorum: mode.basic_quorum,
            allow_mult: mode.allow_mult,
            deletedvclock: mode.deletedvclock,
            // This node's vnodes reply at once, so the answer merges them
            // all; with other nodes' replicas it comes at R.
            wait_for_all: all_local,
        };
        let (mut fsm, first) = GetFsm::start(params, preflist.iter().map(|e| e.primary).collect());
        let (tx, mut rx) = unbounded_channel();
        let job = GetJob {
            key: k.clone(),
            preflist: preflist.to_vec(),
            mode,
            tx,
        };
        let deadline = Instant::now() + self.config.request_timeout;
        let mut effects: VecDeque<GetEffect> = first.into();
        let mut answer = None;
        let mut last_error = None;
        let mut heads = Heads::default();
        loop {
            while let Some(effect) = effects.pop_front() {
                match effect {
                    GetEffect::Send(i) => {
                        if let Some(reply) = self.ask_get(&job, i) {
                            let got = (i, reply);
                            let more = self.take_get_reply(
                                &mut fsm,
                                &mut heads,
                                &job,
                                got,
                                &mut last_error,
                            );
                            effects.extend(more);
                        }
                    }
                    GetEffect::Answer(a) => answer = Some(a),
                    other => self.get_effect(&job, other),
                }
            }
            if answer.is_some() || fsm.is_done() {
                break;
            }
            match self.wait(&mut rx, deadline) {
                Some(got) => effects.extend(self.take_get_reply(
                    &mut fsm,
                    &mut heads,
                    &job,
                    got,
                    &mut last_error,
                )),
                None => effects.extend(fsm.timeout()),
            }
        }
        if !fsm.is_done() {
            self.finish_get(fsm, heads, job, rx, deadline);
        }
        match answer.expect("a get machine answers before it is done") {
            GetOutcome::Found(o) => Ok(Read::Found(o)),
            GetOutcome::NotFound => Ok(Read::NotFound),
            GetOutcome::Deleted(clock) => Ok(Read::Deleted(clock)),
            // Every replica failed: the client sees why (typed: a full
            // disk, a busy node).
            GetOutcome::Err(CoordError::Failed(_)) if last_error.is_some() => {
                Err(last_error.expect("checked"))
            }
            GetOutcome::Err(e) => Err(quorum_error(e)),
        }
    }

    /// A get's effects after its answer: repairs and reaps.
    fn get_effect(&self, job: &GetJob, effect: GetEffect) {
        match effect {
            GetEffect::Repair { idx, object } => self.repair(
                &job.key,
                &job.preflist[idx],
                object,
                job.mode.allow_mult,
                &job.tx,
            ),
            GetEffect::Reap(clock) if job.mode.may_reap => {
                self.reap_later(&job.key, &clock, &job.preflist)
            }
            GetEffect::Send(_) | GetEffect::Answer(_) | GetEffect::Reap(_) | GetEffect::Done => {}
        }
    }

    /// Waits for the reply of one request to another node.
    pub(crate) fn wait_one(&self, rx: &mut Replies, deadline: Instant) -> Option<VnodeReply> {
        self.wait(rx, deadline).map(|(_, r)| r)
    }

    /// Waits for the next reply of another node until `deadline`.
    fn wait(&self, rx: &mut Replies, deadline: Instant) -> Option<(usize, VnodeReply)> {
        let remote = self.remote()?;
        let deadline = tokio::time::Instant::from_std(deadline);
        remote
            .runtime()
            .block_on(async { tokio::time::timeout_at(deadline, rx.recv()).await })
            .ok()
            .flatten()
    }

    /// Collects a get's remaining replies after its client was answered,
    /// on the runtime, and carries out the repairs and reaps they call
    /// for.
    fn finish_get(
        &self,
        mut fsm: GetFsm,
        mut heads: Heads,
        job: GetJob,
        mut rx: Replies,
        deadline: Instant,
    ) {
        let (Some(remote), Some(node)) = (self.remote(), self.this.upgrade()) else {
            return;
        };
        let deadline = tokio::time::Instant::from_std(deadline);
        remote.runtime().spawn(async move {
            while !fsm.is_done() {
                let effects = match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(got)) => {
                        node.take_get_reply(&mut fsm, &mut heads, &job, got, &mut None)
                    }
                    _ => fsm.timeout(),
                };
                let work: Vec<GetEffect> = effects
                    .into_iter()
                    .filter(|e| matches!(e, GetEffect::Repair { .. } | GetEffect::Reap(_)))
                    .collect();
                if work.is_empty() {
                    continue;
                }
                let (node, job) = (node.clone(), job.clone_parts());
                // Repairs of this node's vnodes write to disk.
                let _ = tokio::task::spawn_blocking(move || {
                    for e in work {
                        node.get_effect(&job, e);
                    }
                })
                .await;
            }
        });
    }

    fn repair(&self, k: &BKey, e: &PreflistEntry, target: Object, allow_mult: bool, tx: &ReplyTx) {
        let request = VnodeRequest::Merge {
            key: k.clone(),
            object: target,
            allow_mult,
            prune: None,
            return_object: false,
        };
        // Another node's repair is sent and not awaited (its reply, if
        // any, is dropped with the request's channel).
        match self.ask(e, request, usize::MAX - 1, tx) {
            Some(VnodeReply::Failed(err)) => {
                tracing::warn!(partition = e.partition.0, error = %err, "read repair failed")
            }
            _ => {
                self.counters.read_repairs.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The coordinating vnode (this node's replica if it holds one, else
    /// the first of the preference list) makes the new object from what
    /// it holds (`step`) and stores it; the others merge it in; a put
    /// machine answers by W, DW and PW. Returns the object (with
    /// `return_body`, merged from what the replicas hold once stored;
    /// else the coordinator's) and whether every replica, all primaries,
    /// stored it before the answer.
    pub(crate) fn write_replicas(
        &self,
        k: &BKey,
        n: u32,
        q: WriteQuorum,
        props: &Props,
        how: WriteKind,
        step: CoordinateStep,
    ) -> Result<(Object, bool), KvError> {
        let view = self.cluster_view();
        let mut preflist = self.preflist(&k.bucket_type, &k.bucket, &k.key, n);
        let need = q.w.max(q.dw).max(q.pw).max(1);
        if (preflist.len() as u32) < need {
            return Err(KvError::InsufficientVnodes {
                have: preflist.len() as u32,
                need,
            });
        }
        // Coordinate on this node when it holds a replica (no extra hop).
        if let Some(i) = preflist.iter().position(|e| self.is_local(e)) {
            let e = preflist.remove(i);
            preflist.insert(0, e);
        }
        if how.adds {
            self.admit_write()?;
        }
        let allow_mult = put_mode(props).allow_mult;
        let prune = prune_rules(props);
        let params = PutParams {
            n: preflist.len() as u32,
            w: q.w,
            dw: q.dw,
            pw: q.pw,
            allow_mult,
            return_body: how.return_body,
        };
        let (mut fsm, first) = PutFsm::start(params, preflist.iter().map(|e| e.primary).collect());
        let (tx, mut rx) = unbounded_channel();
        let deadline = Instant::now() + self.config.request_timeout;
        let mut effects: VecDeque<PutEffect> = first.into();
        let mut step = Some(step);
        let (mut answer, mut everywhere) = (None, false);
        let (mut coordinated, mut coordinator_error) = (None, None);
        let mut out_of_space = false;
        loop {
            while let Some(effect) = effects.pop_front() {
                match effect {
                    PutEffect::Coordinate => {
                        let request = VnodeRequest::Coordinate {
                            key: k.clone(),
                            step: Box::new(step.take().expect("one coordination")),
                            prune,
                        };
                        if let Some(reply) = self.ask(&preflist[0], request, COORDINATOR, &tx) {
                            effects.extend(self.on_coordinated(
                                &mut fsm,
                                reply,
                                &mut coordinated,
                                &mut coordinator_error,
                            ));
                        }
                    }
                    PutEffect::Send { idx, object } => {
                        if idx == 1 {
                            // The coordinator's replica is stored: its
                            // partition's next owner gets it too.
                            self.to_next_owner(&view, &preflist[0], k, &object, allow_mult);
                        }
                        self.to_next_owner(&view, &preflist[idx], k, &object, allow_mult);
                        let request = VnodeRequest::Merge {
                            key: k.clone(),
                            object,
                            allow_mult,
                            prune: Some(prune),
                            return_object: how.return_body,
                        };
                        if let Some(reply) = self.ask(&preflist[idx], request, idx, &tx) {
                            effects.extend(on_stored(
                                &mut fsm,
                                &preflist,
                                idx,
                                reply,
                                &mut out_of_space,
                            ));
                        }
                    }
                    PutEffect::Answer(a) => answer = Some(a),
                    PutEffect::Done { everywhere: e } => everywhere = e,
                }
            }
            if answer.is_some() {
                break;
            }
            match self.wait(&mut rx, deadline) {
                Some((COORDINATOR, reply)) => effects.extend(self.on_coordinated(
                    &mut fsm,
                    reply,
                    &mut coordinated,
                    &mut coordinator_error,
                )),
                Some((idx, reply)) => effects.extend(on_stored(
                    &mut fsm,
                    &preflist,
                    idx,
                    reply,
                    &mut out_of_space,
                )),
                None => effects.extend(fsm.timeout()),
            }
        }
        if let (1, Some(o)) = (preflist.len(), &coordinated) {
            self.to_next_owner(&view, &preflist[0], k, o, allow_mult);
        }
        if out_of_space {
            self.disk_full();
        }
        if let Some(e) = coordinator_error {
            return Err(e);
        }
        match answer.expect("a put machine answers before it is done") {
            Ok(body) => {
                let object = body.or(coordinated).expect("a stored put has an object");
                Ok((object, everywhere))
            }
            Err(_) if out_of_space => Err(KvError::OutOfSpace {
                retry_after_secs: OUT_OF_SPACE_RETRY_SECS,
            }),
            Err(e) => Err(quorum_error(e)),
        }
    }

    /// While a primary's partition is being handed to a new owner, a
    /// write reaches the new owner too (not counted for W), so nothing
    /// written during the handoff is missing there at the switch.
    fn to_next_owner(
        &self,
        view: &crate::cluster::ClusterView,
        e: &PreflistEntry,
        k: &BKey,
        object: &Object,
        allow_mult: bool,
    ) {
        let Some(next) = view.moving.get(&e.partition.0) else {
            return;
        };
        if !e.primary || next == &e.node || !view.is_up(next) {
            return;
        }
        let target = PreflistEntry {
            partition: e.partition,
            node: next.clone(),
            primary: false,
        };
        let request = VnodeRequest::Merge {
            key: k.clone(),
            object: object.clone(),
            allow_mult,
            prune: None,
            return_object: false,
        };
        let (tx, _rx) = unbounded_channel();
        if let Some(VnodeReply::Failed(err)) = self.ask(&target, request, 0, &tx) {
            tracing::debug!(partition = e.partition.0, error = %err, "a write to a partition's next owner failed; handoff carries it");
        }
    }

    fn on_coordinated(
        &self,
        fsm: &mut PutFsm,
        reply: VnodeReply,
        coordinated: &mut Option<Object>,
        coordinator_error: &mut Option<KvError>,
    ) -> Vec<PutEffect> {
        match reply {
            VnodeReply::Stored(o) => {
                *coordinated = Some(o.clone());
                fsm.coordinated(Ok(o))
            }
            VnodeReply::Failed(e) => {
                if matches!(e, KvError::OutOfSpace { .. }) {
                    self.disk_full();
                }
                let effects = fsm.coordinated(Err(CoordError::Failed(e.to_string())));
                *coordinator_error = Some(e);
                effects
            }
            other => fsm.coordinated(Err(CoordError::Failed(unexpected(other)))),
        }
    }
}

impl GetJob {
    fn clone_parts(&self) -> GetJob {
        GetJob {
            key: self.key.clone(),
            preflist: self.preflist.clone(),
            mode: self.mode,
            tx: self.tx.clone(),
        }
    }
}

/// A replica's answer to a put's merge.
fn on_stored(
    fsm: &mut PutFsm,
    preflist: &[PreflistEntry],
    idx: usize,
    reply: VnodeReply,
    out_of_space: &mut bool,
) -> Vec<PutEffect> {
    let reply = match reply {
        VnodeReply::Stored(stored) => {
            let mut effects = fsm.reply(idx, PutReply::W);
            effects.extend(fsm.reply(idx, PutReply::Dw(Some(stored))));
            return effects;
        }
        VnodeReply::Merged => {
            let mut effects = fsm.reply(idx, PutReply::W);
            effects.extend(fsm.reply(idx, PutReply::Dw(None)));
            return effects;
        }
        VnodeReply::Failed(err) => {
            tracing::warn!(partition = preflist[idx].partition.0, node = %preflist[idx].node, error = %err, "replica write failed");
            *out_of_space |= matches!(err, KvError::OutOfSpace { .. });
            PutReply::Failed {
                reason: err.to_string(),
                overload: overloaded(&err),
            }
        }
        other => PutReply::Failed {
            reason: unexpected(other),
            overload: false,
        },
    };
    fsm.reply(idx, reply)
}

#[cfg(test)]
mod tests {
    use crate::{GetAnswer, GetRequest, Node};

    #[test]
    fn a_get_repairs_a_replica_that_lost_the_key_and_answers_from_all() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        crate::testing::put_v(&n);
        let pl = n.preflist(b"", b"b", b"k", 3);
        let k = Node::bkey(b"", b"b", b"k");
        // The first two replicas lose it; R = 1 still finds it on the third.
        for e in &pl[..2] {
            n.vnode(e).backend().delete(&k, &[]).unwrap();
        }
        let got = n
            .get(&GetRequest {
                bucket: b"b".to_vec(),
                key: b"k".to_vec(),
                r: Some(rill_bucket::Quorum::N(1)),
                ..GetRequest::default()
            })
            .unwrap();
        assert!(matches!(got, GetAnswer::Found(o) if o.contents[0].value == b"v"[..]));
        for e in &pl {
            assert!(
                n.vnode(e).get(&k).unwrap().is_some(),
                "{:?} repaired",
                e.partition
            );
        }
        assert_eq!(n.stats().read_repairs, 2);
    }
}
