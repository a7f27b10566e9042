//! The coordinating write of a put, a delete or a data-type update as
//! data: what the coordinating vnode computes from what it holds and its
//! actor. Being data, it runs on the coordinator's own vnode or is sent
//! to a vnode of another node when the coordinating node holds no replica
//! of the key (riak_kv forwards the whole put to a node of the preference
//! list instead; the effect is the same: the first replica makes the new
//! version).

use crate::error::KvError;
use crate::ids;
use rill_crdt::{Clock, Crdt, Op};
use rill_object::{Actor, Content, Metadata, Object, PutMode, VClock};

#[derive(Clone, Debug, PartialEq)]
pub enum CoordinateStep {
    /// A put or a delete (a tombstone `content`) with the client's
    /// context.
    Put {
        context: VClock,
        content: Content,
        mode: PutMode,
    },
    /// A data-type operation, applied to the merged state stored.
    Dt {
        datatype: String,
        hll_precision: u8,
        op: Op,
        context: Option<Clock>,
    },
}

/// The data type held by an object: its live siblings' states merged.
pub(crate) fn crdt_of(o: Option<&Object>) -> Result<Option<Crdt>, KvError> {
    let Some(o) = o else { return Ok(None) };
    let mut acc: Option<Crdt> = None;
    for c in o.contents.iter().filter(|c| !c.meta.deleted) {
        let x = Crdt::decode(&c.value)
            .map_err(|e| KvError::Backend(format!("stored data type does not decode: {e}")))?;
        match &mut acc {
            None => acc = Some(x),
            Some(a) => a.merge(&x),
        }
    }
    Ok(acc)
}

impl CoordinateStep {
    /// The new version of the object, written by `actor`.
    pub fn apply(&self, stored: Option<&Object>, actor: &Actor) -> Result<Object, KvError> {
        match self {
            CoordinateStep::Put {
                context,
                content,
                mode,
            } => Ok(Object::coordinate_put(
                stored,
                context,
                content.clone(),
                actor,
                *mode,
            )),
            CoordinateStep::Dt {
                datatype,
                hll_precision,
                op,
                context,
            } => {
                let mut value = match crdt_of(stored)? {
                    Some(v) => v,
                    None => Crdt::new(datatype, *hll_precision).ok_or_else(|| {
                        KvError::Datatype(format!(
                            "Bucket datatype `{datatype}` is not a supported type"
                        ))
                    })?,
                };
                let now = ids::now_us();
                value
                    .apply(op, actor, context.as_ref(), now)
                    .map_err(|e| KvError::Datatype(e.to_string()))?;
                let content = Content::new(
                    value.encode(),
                    Metadata {
                        content_type: Some(value.content_type().as_bytes().to_vec()),
                        last_modified_us: now,
                        vtag: Some(ids::vtag()),
                        ..Metadata::default()
                    },
                );
                // The op was applied to everything stored: the new state
                // replaces it (the stored clock is the context).
                let ctx = stored.map(|s| s.clock.clone()).unwrap_or_default();
                let mode = PutMode {
                    allow_mult: true,
                    last_write_wins: false,
                };
                Ok(Object::coordinate_put(stored, &ctx, content, actor, mode))
            }
        }
    }
}
