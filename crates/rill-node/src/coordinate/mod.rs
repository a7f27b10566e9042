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
//! collected afterwards by a task of the runtime. Gets run on a thread
//! that may block or as tasks of the runtime (`get`); writes run on a
//! thread that may block (`put`).

pub(crate) mod dt;
mod get;
pub(crate) mod kv;
mod put;
pub(crate) mod reaper;

use crate::buckets::Buckets;
use crate::config::DeleteMode;
use crate::error::KvError;
use crate::replicas::Replicas;
use crate::stats::Counters;
use crate::vnode::msg::VnodeReply;
use crate::vnodes::Vnodes;
use reaper::Reaper;
use rill_coord::CoordError;
use rill_object::{Object, VClock};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Coordinates clients' gets, puts, deletes and data-type operations
/// over the replicas of their keys.
pub(crate) struct Coordinator {
    pub vnodes: Arc<Vnodes>,
    pub replicas: Arc<Replicas>,
    pub buckets: Arc<Buckets>,
    pub counters: Arc<Counters>,
    /// Tombstones waiting out `delete_mode`.
    pub reaper: Reaper,
    request_timeout: Duration,
    delete_mode: DeleteMode,
    /// Reads after deletes waiting or running (`read_after_delete`).
    reads_after_delete: Arc<std::sync::atomic::AtomicUsize>,
    /// Itself, for work that outlives a request (finishing a get).
    this: Weak<Coordinator>,
}

impl Coordinator {
    pub fn new(
        replicas: Arc<Replicas>,
        buckets: Arc<Buckets>,
        counters: Arc<Counters>,
        request_timeout: Duration,
        delete_mode: DeleteMode,
    ) -> Arc<Coordinator> {
        Arc::new_cyclic(|this| Coordinator {
            vnodes: replicas.vnodes.clone(),
            replicas,
            buckets,
            counters,
            reaper: Reaper::default(),
            request_timeout,
            delete_mode,
            reads_after_delete: Arc::default(),
            this: this.clone(),
        })
    }
}

/// The tag of the coordinating write's reply (replies of replicas are
/// tagged with their index).
pub(super) const COORDINATOR: usize = usize::MAX;

pub(super) use crate::replicas::Replies;

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

pub(super) fn overloaded(e: &KvError) -> bool {
    matches!(e, KvError::Busy(_))
}

/// A reply that does not answer the request sent: a bug between a
/// coordinator and a vnode, never a client's doing; it counts as that
/// replica failing.
pub(super) fn unexpected(reply: VnodeReply) -> String {
    tracing::error!(?reply, "a vnode answered a request with the wrong reply");
    "internal error: a replica answered out of turn".into()
}

pub(super) fn quorum_error(e: CoordError) -> KvError {
    match e {
        CoordError::Quorum(q) => KvError::Quorum(q),
        CoordError::Timeout => KvError::Timeout,
        CoordError::Overload => KvError::Busy("a replica is overloaded; retry".into()),
        CoordError::Failed(reason) => KvError::Backend(reason),
        other => KvError::Backend(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use crate::{GetAnswer, GetRequest};

    #[test]
    fn a_get_repairs_a_replica_that_lost_the_key_and_answers_from_all() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        crate::testing::put_v(&n);
        let pl = n.preflist(b"", b"b", b"k", 3);
        let k = crate::vnode::bkey(b"", b"b", b"k");
        // The first two replicas lose it; R = 1 still finds it on the third.
        for e in &pl[..2] {
            n.vnodes.at(e).backend().delete(&k, &[]).unwrap();
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
                n.vnodes.at(e).get(&k).unwrap().is_some(),
                "{:?} repaired",
                e.partition
            );
        }
        assert_eq!(n.stats().read_repairs, 2);
    }
}
