//! A write's coordination: the coordinating vnode makes the new object,
//! the other replicas merge it in, and a put machine answers by W, DW and
//! PW. Runs on a thread that may block (the coordinating write is on
//! this node's disk).

use super::{overloaded, quorum_error, unexpected, WriteKind, COORDINATOR};
use crate::error::{KvError, OUT_OF_SPACE_RETRY_SECS};
use crate::params::WriteQuorum;
use crate::params::{prune_rules, put_mode};
use crate::replicas::{as_replicas, distinct_nodes};
use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnode::step::CoordinateStep;
use rill_backend::BKey;
use rill_bucket::Props;
use rill_coord::{
    AttemptEnd, CoordError, Make, PutAttempts, PutEffect, PutFsm, PutParams, PutReply, QuorumError,
};
use rill_object::Object;
use rill_ring::PreflistEntry;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::mpsc::unbounded_channel;

/// Refuses a write its preference list cannot satisfy before anything
/// is written (riak_kv_put_fsm's checks): too few replicas, too few
/// primaries for PW, too few distinct nodes for node_confirms.
fn check_write_quorum(preflist: &[PreflistEntry], q: WriteQuorum) -> Result<(), KvError> {
    let need = q.w.max(q.dw).max(q.pw).max(1);
    if (preflist.len() as u32) < need {
        return Err(KvError::InsufficientVnodes {
            have: preflist.len() as u32,
            need,
        });
    }
    let primaries = preflist.iter().filter(|e| e.primary).count() as u32;
    if primaries < q.pw {
        return Err(KvError::Quorum(QuorumError::PwUnsatisfied {
            need: q.pw,
            got: primaries,
        }));
    }
    let nodes = distinct_nodes(preflist);
    if nodes < q.node_confirms {
        return Err(KvError::Quorum(QuorumError::NodeConfirmsUnsatisfied {
            need: q.node_confirms,
            got: nodes,
        }));
    }
    Ok(())
}

impl super::Coordinator {
    /// The coordinating vnode (this node's replica if it holds one, else
    /// the first of the preference list) makes the new object from what
    /// it holds (`step`) and stores it; the others merge it in; a put
    /// machine answers by W, DW and PW. Returns the object (with
    /// `return_body`, merged from what the replicas hold once stored;
    /// else the coordinator's) and whether every replica, all primaries,
    /// stored it before the answer.
    ///
    /// A coordinating replica whose request never left this node (its
    /// node known down, or no connection), or whose node went down before
    /// it took the request (Riak's forward acknowledgement), is passed
    /// over: the next replica coordinates, as if that node were down, at
    /// most once per replica. One whose node went down after taking the
    /// request may have made the version: the put fails, as Riak's does,
    /// and the client decides. When other replicas could not be reached and the quorum
    /// fell short, the version this put made goes, as it is, to the
    /// preference list without them (merged, not made again: nothing it
    /// did not cover is covered, and a data-type operation counts once).
    pub(crate) fn write_replicas(
        &self,
        k: &BKey,
        n: u32,
        q: WriteQuorum,
        props: &Props,
        how: WriteKind,
        step: CoordinateStep,
    ) -> Result<(Object, bool), KvError> {
        let mut attempts: PutAttempts<String> = PutAttempts::new(n);
        loop {
            let mut failures = Failures::default();
            let what = match attempts.make() {
                Make::Step => Write::Coordinate(Box::new(step.clone())),
                Make::Merge(made) => Write::Made(made),
            };
            let result =
                self.write_with(k, n, q, props, how, what, attempts.avoid(), &mut failures);
            let end = match &result {
                Ok(_) => return result,
                // The runtime's `sent` is true once the coordinator's node
                // answered that it took the request.
                Err(KvError::Unreachable { node, sent, .. }) => AttemptEnd::CoordinatorLost {
                    node: node.clone(),
                    taken: *sent,
                },
                Err(_) if !failures.unreachable.is_empty() => AttemptEnd::ShortOf {
                    unreachable: std::mem::take(&mut failures.unreachable),
                    made: failures.made.take(),
                },
                Err(_) => AttemptEnd::Failed,
            };
            if !attempts.retry(end) {
                return result;
            }
            tracing::debug!(
                avoid = ?attempts.avoid(),
                "a put's attempt could not reach its replicas; the next one passes over them"
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write_with(
        &self,
        k: &BKey,
        n: u32,
        q: WriteQuorum,
        props: &Props,
        how: WriteKind,
        what: Write,
        avoid: &[String],
        failures: &mut Failures,
    ) -> Result<(Object, bool), KvError> {
        let view = self.replicas.view();
        let mut preflist =
            self.replicas
                .preflist_avoiding(&k.bucket_type, &k.bucket, &k.key, n, avoid);
        check_write_quorum(&preflist, q)?;
        // Coordinate on this node when it holds a replica (no extra hop).
        if let Some(i) = preflist.iter().position(|e| self.replicas.is_local(e)) {
            let e = preflist.remove(i);
            preflist.insert(0, e);
        }
        if how.adds {
            self.vnodes.admit_write()?;
        }
        let allow_mult = put_mode(props).allow_mult;
        let prune = prune_rules(props);
        let params = PutParams {
            n: preflist.len() as u32,
            w: q.w,
            dw: q.dw,
            pw: q.pw,
            node_confirms: q.node_confirms,
            allow_mult,
            return_body: how.return_body,
        };
        let (mut fsm, first) = PutFsm::start(params, as_replicas(&preflist));
        let (tx, mut rx) = unbounded_channel();
        let deadline = Instant::now() + self.request_timeout;
        let mut effects: VecDeque<PutEffect> = first.into();
        let mut what = Some(what);
        let (mut answer, mut everywhere) = (None, false);
        let (mut coordinated, mut coordinator_error) = (None, None);
        loop {
            while let Some(effect) = effects.pop_front() {
                match effect {
                    PutEffect::Coordinate => {
                        let request = match what.take().expect("one coordination") {
                            Write::Coordinate(step) => VnodeRequest::Coordinate {
                                key: k.clone(),
                                step,
                                prune,
                            },
                            // Made before: the first replica merges it and
                            // answers with what it holds, as a coordinator.
                            Write::Made(object) => VnodeRequest::Merge {
                                key: k.clone(),
                                object,
                                allow_mult,
                                prune: Some(prune),
                                return_object: true,
                            },
                        };
                        if !self.replicas.is_local(&preflist[0]) {
                            self.counters.coord_redirs.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(reply) =
                            self.replicas.ask(&preflist[0], request, COORDINATOR, &tx)
                        {
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
                        if let Some(reply) = self.replicas.ask(&preflist[idx], request, idx, &tx) {
                            effects.extend(on_stored(&mut fsm, &preflist, idx, reply, failures));
                        }
                    }
                    PutEffect::Answer(a) => answer = Some(a),
                    PutEffect::Done { everywhere: e } => everywhere = e,
                }
            }
            if answer.is_some() {
                break;
            }
            match self.replicas.wait(&mut rx, deadline) {
                Some((COORDINATOR, reply)) => effects.extend(self.on_coordinated(
                    &mut fsm,
                    reply,
                    &mut coordinated,
                    &mut coordinator_error,
                )),
                Some((idx, reply)) => {
                    effects.extend(on_stored(&mut fsm, &preflist, idx, reply, failures))
                }
                None => effects.extend(fsm.timeout()),
            }
        }
        if let (1, Some(o)) = (preflist.len(), &coordinated) {
            self.to_next_owner(&view, &preflist[0], k, o, allow_mult);
        }
        failures.made = coordinated.clone();
        if failures.out_of_space {
            self.vnodes.disk_full();
        }
        if let Some(e) = coordinator_error {
            return Err(e);
        }
        match answer.expect("a put machine answers before it is done") {
            Ok(body) => {
                let object = body.or(coordinated).expect("a stored put has an object");
                Ok((object, everywhere))
            }
            Err(_) if failures.out_of_space => Err(KvError::OutOfSpace {
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
        view: &crate::replicas::ClusterView,
        e: &PreflistEntry,
        k: &BKey,
        object: &Object,
        allow_mult: bool,
    ) {
        let Some(target) = view.next_owner(e) else {
            return;
        };
        let request = VnodeRequest::Merge {
            key: k.clone(),
            object: object.clone(),
            allow_mult,
            prune: None,
            return_object: false,
        };
        let (tx, _rx) = unbounded_channel();
        if let Some(VnodeReply::Failed(err)) = self.replicas.ask(&target, request, 0, &tx) {
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
                    self.vnodes.disk_full();
                }
                let effects = fsm.coordinated(Err(CoordError::Failed(e.to_string())));
                *coordinator_error = Some(e);
                effects
            }
            other => fsm.coordinated(Err(CoordError::Failed(unexpected(other)))),
        }
    }
}

/// What a put's attempt writes: a version to make at its first replica
/// (the client's step), or one an earlier attempt made, to merge.
#[derive(Clone)]
enum Write {
    Coordinate(Box<CoordinateStep>),
    Made(Object),
}

/// What went wrong at the replicas of one attempt of a put, and the
/// version its coordinator made (if it made one).
#[derive(Default)]
struct Failures {
    out_of_space: bool,
    unreachable: Vec<String>,
    made: Option<Object>,
}

/// A replica's answer to a put's merge.
fn on_stored(
    fsm: &mut PutFsm,
    preflist: &[PreflistEntry],
    idx: usize,
    reply: VnodeReply,
    failures: &mut Failures,
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
            failures.out_of_space |= matches!(err, KvError::OutOfSpace { .. });
            if let KvError::Unreachable { node, .. } = &err {
                if !failures.unreachable.contains(node) {
                    failures.unreachable.push(node.clone());
                }
            }
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
