//! A vnode as a message handler: what a coordinator asks of a replica,
//! and what the replica answers. Requests and replies are plain data, so
//! the same ones go to a vnode of this node (a call) or, once the cluster
//! carries them, of another node (a message); the coordinating write of a
//! put, which needs the client's request, stays with the coordinating
//! node's own vnode (as in riak_kv, where a put is forwarded to a node of
//! its preference list to be coordinated there).

use crate::error::KvError;
use crate::vnode::{Limits, Vnode};
use rill_backend::BKey;
use rill_object::{Object, PruneRules, VClock};

/// What a coordinator asks of a replica.
#[derive(Clone, Debug, PartialEq)]
pub enum VnodeRequest {
    /// The stored object, if any.
    Get { key: BKey },
    /// Merge `object` into what is stored (a replica's part of a put, or
    /// a read repair), keeping only the newest sibling unless
    /// `allow_mult`; a put's replica prunes the clock by `prune`.
    Merge {
        key: BKey,
        object: Object,
        allow_mult: bool,
        prune: Option<PruneRules>,
    },
    /// Remove the tombstone stored for the key if its clock is still
    /// `clock`.
    Reap { key: BKey, clock: VClock },
}

/// A replica's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum VnodeReply {
    Found(Option<Object>),
    /// The object the replica holds after the merge.
    Stored(Object),
    Reaped(bool),
    Failed(KvError),
}

impl Vnode {
    pub fn handle(&self, request: VnodeRequest, limits: &Limits) -> VnodeReply {
        let result = match request {
            VnodeRequest::Get { key } => self.get(&key).map(VnodeReply::Found),
            VnodeRequest::Merge {
                key,
                object,
                allow_mult,
                prune,
            } => self
                .update(&key, limits, prune.as_ref(), |stored| {
                    let mut next = match stored {
                        Some(s) => s.merge(&object),
                        None => object,
                    };
                    if !allow_mult {
                        next.keep_newest();
                    }
                    Ok(Some(next))
                })
                .map(|o| VnodeReply::Stored(o.expect("a merge always writes"))),
            VnodeRequest::Reap { key, clock } => self.reap(&key, &clock).map(VnodeReply::Reaped),
        };
        result.unwrap_or_else(VnodeReply::Failed)
    }
}
