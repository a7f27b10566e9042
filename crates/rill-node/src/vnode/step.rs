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
    /// Whether the new version keeps none of the values stored under
    /// `stored` (read as a head): a put whose context has seen the stored
    /// clock, or that replaces whatever is stored (last write wins), keeps
    /// no stored sibling (see `Object::coordinate_put`); a data type's op
    /// reads the stored state.
    pub fn keeps_no_stored_value(&self, stored: &Object) -> bool {
        match self {
            CoordinateStep::Put { context, mode, .. } => {
                mode.last_write_wins || context.descends(&stored.clock)
            }
            CoordinateStep::Dt { .. } => false,
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// An object read as a head: its values empty.
    fn head(o: &Object) -> Object {
        rill_object::decode_head(&rill_object::encode_head(o))
            .unwrap()
            .object
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Versions of one key as three actors write it with contexts of
    /// what they saw, and replicas merge: siblings, dominated and
    /// concurrent clocks.
    fn history(rng: &mut Rng) -> Vec<Object> {
        let actors: [&[u8]; 3] = [b"a", b"b", b"c"];
        let mut seen: Vec<Object> = Vec::new();
        for i in 0..24u64 {
            let stored =
                (!seen.is_empty() && rng.below(4) > 0).then(|| seen[rng.below(seen.len())].clone());
            let next = if let (Some(s), true) = (&stored, rng.below(3) == 0) {
                s.merge(&seen[rng.below(seen.len())])
            } else {
                let context = match rng.below(3) {
                    0 => VClock::new(),
                    _ if seen.is_empty() => VClock::new(),
                    _ => seen[rng.below(seen.len())].clock.clone(),
                };
                let mode = PutMode {
                    allow_mult: rng.below(4) > 0,
                    last_write_wins: rng.below(8) == 0,
                };
                let content = Content::new(
                    format!("value {i}").into_bytes(),
                    Metadata {
                        last_modified_us: 1_000_000 * (1 + rng.below(5) as u64),
                        indexes: vec![(b"f_bin".to_vec(), vec![b'0' + rng.below(3) as u8])],
                        ..Metadata::default()
                    },
                );
                Object::coordinate_put(
                    stored.as_ref(),
                    &context,
                    content,
                    &actors[rng.below(3)].to_vec(),
                    mode,
                )
            };
            seen.push(next);
        }
        seen
    }

    /// Where the predicate lets a put start from the stored head, the
    /// result is the one the whole object gives, values included; and
    /// both kinds of case occur, so the test can fail.
    #[test]
    fn a_put_that_keeps_no_stored_value_is_the_same_from_the_head() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut by_head, mut by_object) = (0, 0);
        for _ in 0..200 {
            let seen = history(&mut rng);
            for _ in 0..20 {
                let stored = &seen[rng.below(seen.len())];
                let context = seen[rng.below(seen.len())].clock.clone();
                let mode = PutMode {
                    allow_mult: rng.below(2) == 0,
                    last_write_wins: rng.below(6) == 0,
                };
                let content = Content::new(b"new".to_vec(), Metadata::default());
                let step = CoordinateStep::Put {
                    context: context.clone(),
                    content: content.clone(),
                    mode,
                };
                let actor = b"a".to_vec();
                let whole = step.apply(Some(stored), &actor).unwrap();
                if step.keeps_no_stored_value(&head(stored)) {
                    by_head += 1;
                    assert_eq!(step.apply(Some(&head(stored)), &actor).unwrap(), whole);
                } else if step.apply(Some(&head(stored)), &actor).unwrap() != whole {
                    // Where it says no, a head would have lost values.
                    by_object += 1;
                }
            }
        }
        assert!(by_head > 100 && by_object > 100, "{by_head} {by_object}");
    }

    /// The same for a replica's merge: when the incoming clock dominates
    /// the stored one, the merge is the incoming object whole.
    #[test]
    fn a_dominating_merge_is_the_same_from_the_head() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut by_head, mut by_object) = (0, 0);
        for _ in 0..200 {
            let seen = history(&mut rng);
            for _ in 0..20 {
                let stored = &seen[rng.below(seen.len())];
                let incoming = &seen[rng.below(seen.len())];
                if incoming.clock.dominates(&head(stored).clock) {
                    by_head += 1;
                    assert_eq!(head(stored).merge(incoming), stored.merge(incoming));
                } else if head(stored).merge(incoming) != stored.merge(incoming) {
                    by_object += 1;
                }
            }
        }
        assert!(by_head > 100 && by_object > 100, "{by_head} {by_object}");
    }

    /// A data type's op reads the stored state: never from a head.
    #[test]
    fn a_data_type_op_reads_the_object() {
        let step = CoordinateStep::Dt {
            datatype: "counter".into(),
            hll_precision: 14,
            op: Op::Counter(1),
            context: None,
        };
        assert!(!step.keeps_no_stored_value(&Object::default()));
    }
}
