//! The node's side of coordination: it runs `rill-coord`'s get and put
//! machines over the vnodes of a preference list, carrying out their
//! effects (ask a vnode, write to it, repair it, reap a tombstone) and
//! keeping the vnodes' typed errors for the answer. The rules are the
//! machines'; this is the wiring.

use crate::error::{KvError, OUT_OF_SPACE_RETRY_SECS};
use crate::kv::{prune_rules, put_mode};
use crate::node::Node;
use crate::quorum::{ReadQuorum, WriteQuorum};
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
        let params = GetParams {
            n: preflist.len() as u32,
            r: q.r,
            pr: q.pr,
            notfound_ok: q.notfound_ok,
            basic_quorum: mode.basic_quorum,
            allow_mult: mode.allow_mult,
            deletedvclock: mode.deletedvclock,
            // The replicas are this node's vnodes: every reply is in at
            // once, so the answer merges them all.
            wait_for_all: true,
        };
        let (mut fsm, first) = GetFsm::start(params, preflist.iter().map(|e| e.primary).collect());
        let mut effects: VecDeque<GetEffect> = first.into();
        let mut answer = None;
        let mut last_error = None;
        while let Some(effect) = effects.pop_front() {
            match effect {
                GetEffect::Send(i) => {
                    let request = VnodeRequest::Get { key: k.clone() };
                    let reply = match self.vnode(&preflist[i]).handle(request, &self.limits) {
                        VnodeReply::Found(Some(o)) => GetReply::Found(o),
                        VnodeReply::Found(None) => GetReply::NotFound,
                        VnodeReply::Failed(e) => {
                            let r = GetReply::Failed {
                                reason: e.to_string(),
                                overload: overloaded(&e),
                            };
                            last_error = Some(e);
                            r
                        }
                        other => GetReply::Failed {
                            reason: unexpected(other),
                            overload: false,
                        },
                    };
                    effects.extend(fsm.reply(i, reply));
                }
                GetEffect::Answer(a) => answer = Some(a),
                GetEffect::Repair { idx, object } => {
                    self.repair(k, &preflist[idx], object, mode.allow_mult)
                }
                GetEffect::Reap(clock) if mode.may_reap => self.reap_later(k, &clock, preflist),
                GetEffect::Reap(_) | GetEffect::Done => {}
            }
        }
        match answer.expect("a get machine answers once every replica has") {
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

    fn repair(&self, k: &BKey, e: &PreflistEntry, target: Object, allow_mult: bool) {
        let request = VnodeRequest::Merge {
            key: k.clone(),
            object: target,
            allow_mult,
            prune: None,
        };
        match self.vnode(e).handle(request, &self.limits) {
            VnodeReply::Failed(err) => {
                tracing::warn!(partition = e.partition.0, error = %err, "read repair failed")
            }
            _ => {
                self.counters.read_repairs.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The coordinating vnode (first in the preference list) computes the
    /// new object from what it holds and stores it; the others merge it
    /// in; a put machine answers by W, DW and PW. Returns the object (with
    /// `return_body`, merged from what the replicas hold once stored;
    /// else the coordinator's) and whether every replica, all primaries,
    /// stored it.
    pub(crate) fn write_replicas(
        &self,
        k: &BKey,
        n: u32,
        q: WriteQuorum,
        props: &Props,
        how: WriteKind,
        coordinate: impl FnOnce(Option<&Object>, &Vec<u8>) -> Result<Object, KvError>,
    ) -> Result<(Object, bool), KvError> {
        let preflist = self.preflist(&k.bucket_type, &k.bucket, &k.key, n);
        let need = q.w.max(q.dw).max(q.pw).max(1);
        if (preflist.len() as u32) < need {
            return Err(KvError::InsufficientVnodes {
                have: preflist.len() as u32,
                need,
            });
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
        let mut effects: VecDeque<PutEffect> = first.into();
        let mut coordinate = Some(coordinate);
        let (mut answer, mut everywhere) = (None, false);
        let (mut coordinated, mut coordinator_error) = (None, None);
        let mut out_of_space = false;
        while let Some(effect) = effects.pop_front() {
            match effect {
                PutEffect::Coordinate => {
                    let vnode = self.vnode(&preflist[0]).clone();
                    let f = coordinate.take().expect("one coordination");
                    let r = vnode
                        .update(k, &self.limits, Some(&prune), |stored| {
                            f(stored, &vnode.actor_for(stored)?).map(Some)
                        })
                        .map(|o| o.expect("the coordinator always writes"));
                    match r {
                        Ok(o) => {
                            coordinated = Some(o.clone());
                            effects.extend(fsm.coordinated(Ok(o)));
                        }
                        Err(e) => {
                            if matches!(e, KvError::OutOfSpace { .. }) {
                                self.disk_full();
                            }
                            effects.extend(fsm.coordinated(Err(CoordError::Failed(e.to_string()))));
                            coordinator_error = Some(e);
                        }
                    }
                }
                PutEffect::Send { idx, object } => {
                    let e = &preflist[idx];
                    let request = VnodeRequest::Merge {
                        key: k.clone(),
                        object,
                        allow_mult,
                        prune: Some(prune),
                    };
                    let reply = match self.vnode(e).handle(request, &self.limits) {
                        VnodeReply::Stored(stored) => {
                            effects.extend(fsm.reply(idx, PutReply::W));
                            PutReply::Dw(Some(stored))
                        }
                        VnodeReply::Failed(err) => {
                            tracing::warn!(partition = e.partition.0, error = %err, "replica write failed");
                            out_of_space |= matches!(err, KvError::OutOfSpace { .. });
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
                    effects.extend(fsm.reply(idx, reply));
                }
                PutEffect::Answer(a) => answer = Some(a),
                PutEffect::Done { everywhere: e } => everywhere = e,
            }
        }
        if out_of_space {
            self.disk_full();
        }
        if let Some(e) = coordinator_error {
            return Err(e);
        }
        match answer.expect("a put machine answers once every replica has") {
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
}

#[cfg(test)]
mod tests {
    use crate::{Content, GetAnswer, GetRequest, Metadata, Node, PutRequest};

    #[test]
    fn a_get_repairs_a_replica_that_lost_the_key_and_answers_from_all() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        n.put(PutRequest {
            bucket: b"b".to_vec(),
            key: Some(b"k".to_vec()),
            content: Content::new(b"v".to_vec(), Metadata::default()),
            ..PutRequest::default()
        })
        .unwrap();
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
        assert!(matches!(got, GetAnswer::Found(o) if o.contents[0].value == b"v"));
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
