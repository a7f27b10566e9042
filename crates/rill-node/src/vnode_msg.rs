//! A vnode as a message handler: what a coordinator asks of a replica,
//! and what the replica answers. Requests and replies are plain data, so
//! the same ones go to a vnode of this node (a call) or of another node
//! (a message, `wire`); the coordinating write of a put is data too
//! (`CoordinateStep`), so it runs wherever the key's first replica is.

use crate::error::KvError;
use crate::step::CoordinateStep;
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
    /// The coordinating write: make the new version from what is stored
    /// (as this vnode's actor) and store it, pruning the clock by `prune`.
    Coordinate {
        key: BKey,
        step: Box<CoordinateStep>,
        prune: PruneRules,
    },
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
            VnodeRequest::Coordinate { key, step, prune } => self
                .update(&key, limits, Some(&prune), |stored| {
                    step.apply(stored, &self.actor_for(stored)?).map(Some)
                })
                .map(|o| VnodeReply::Stored(o.expect("the coordinator always writes"))),
        };
        result.unwrap_or_else(VnodeReply::Failed)
    }
}
