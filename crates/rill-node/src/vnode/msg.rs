//! A vnode as a message handler: what a coordinator asks of a replica,
//! and what the replica answers. Requests and replies are plain data, so
//! the same ones go to a vnode of this node (a call) or of another node
//! (a message, `wire`); the coordinating write of a put is data too
//! (`CoordinateStep`), so it runs wherever the key's first replica is.

use crate::error::KvError;
use crate::vnode::step::CoordinateStep;
use crate::vnode::{Limits, Vnode};
use rill_backend::{BKey, IndexQuery, Term};
use rill_object::{Object, PruneRules, VClock};

/// What a coordinator asks of a replica.
#[derive(Clone, Debug, PartialEq)]
pub enum VnodeRequest {
    /// The stored object, if any.
    Get { key: BKey },
    /// The stored object if its values are small (`Found`), else only
    /// its clock (`Head`): a get's replica on another node.
    Head { key: BKey },
    /// Merge `object` into what is stored (a replica's part of a put, or
    /// a read repair), keeping only the newest sibling unless
    /// `allow_mult`; a put's replica prunes the clock by `prune`. The
    /// answer carries the object stored (`Stored`) with `return_object`,
    /// else only says it is stored (`Merged`): a put without
    /// `return_body` does not move the value back.
    Merge {
        key: BKey,
        object: Object,
        allow_mult: bool,
        prune: Option<PruneRules>,
        return_object: bool,
    },
    /// Remove the tombstone stored for the key if its clock is still
    /// `clock`.
    Reap { key: BKey, clock: VClock },
    /// The buckets of a bucket type holding a key (a coverage query).
    Buckets { bucket_type: Vec<u8> },
    /// The smallest `limit` keys of a bucket in `lo..=hi` (no upper end
    /// when `hi` is `None`) after `after`, and, with `first_of`, only
    /// keys whose preference list starts at one of its partitions (a
    /// coverage plan's share of this vnode).
    Keys(Box<KeysQuery>),
    /// At most `page` index entries matching `query`, in order.
    IndexPage { query: IndexQuery, page: u32 },
    /// The coordinating write: make the new version from what is stored
    /// (as this vnode's actor) and store it, pruning the clock by `prune`.
    Coordinate {
        key: BKey,
        step: Box<CoordinateStep>,
        prune: PruneRules,
    },
    /// An anti-entropy exchange's question about the tree of the
    /// preference list `index_n`.
    Aae {
        index_n: rill_aae::IndexN,
        ask: rill_aae::Ask,
    },
    /// The keys of the tree of `index_n` in these segments, with their
    /// clocks (an aae_fold's fetch_clocks).
    AaeClocks {
        index_n: rill_aae::IndexN,
        segments: Vec<u32>,
    },
    /// The summaries of the keys `Keys` would answer (an aae_fold's
    /// find_keys and object_stats).
    Summaries(Box<KeysQuery>),
    /// A request of the sensor-data service, for the node rather than
    /// one vnode (its bytes are that service's to read: the node's
    /// [`crate::SensorHandler`] answers it).
    Sensor(Vec<u8>),
}

/// What a `Keys` request asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeysQuery {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub lo: Vec<u8>,
    pub hi: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
    pub limit: u32,
    /// (ring size, partitions): keys whose first partition is listed.
    pub first_of: Option<(u32, Vec<u32>)>,
}

/// A replica's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum VnodeReply {
    Found(Option<Object>),
    /// The clock of a stored object whose values are too large to send
    /// for a head, and its siblings' fingerprint (`head::fingerprint`).
    Head {
        clock: VClock,
        fingerprint: u64,
    },
    /// The object the replica holds after the merge.
    Stored(Object),
    /// Merged and stored (the object was not asked for).
    Merged,
    Reaped(bool),
    Failed(KvError),
    Buckets(Vec<Vec<u8>>),
    /// Sorted keys; `more`: keys past the last were left out.
    Keys {
        keys: Vec<Vec<u8>>,
        more: bool,
    },
    /// Entries in order; `filled`: the page is full (more may follow).
    Entries {
        entries: Vec<(Term, Vec<u8>)>,
        filled: bool,
    },
    /// An exchange's answer; `None`: anti-entropy is not active here or
    /// the trees are not built yet (Riak's `not_supported`).
    Aae(Option<rill_aae::Answer>),
    /// Keys with their clocks, sorted.
    Clocks(Vec<(BKey, VClock)>),
    /// Keys' summaries, sorted by key; `next`: keys past this one (the
    /// last listed, summarised or not) were left out.
    Summaries {
        rows: Vec<crate::vnode::summary::KeySummary>,
        next: Option<Vec<u8>>,
    },
    /// Not an answer: a replica took a `Coordinate` request from the
    /// queue and is carrying it out (Riak's forward acknowledgement,
    /// `now_executing`). A coordinator that loses the replica's node
    /// before this came has a request that was never carried out, and
    /// may ask another replica to coordinate.
    Accepted,
    /// The sensor-data service's answer (its bytes).
    Sensor(Vec<u8>),
}

impl Vnode {
    pub fn handle(&self, request: VnodeRequest, limits: &Limits) -> VnodeReply {
        let result = match request {
            VnodeRequest::Get { key } => self.get(&key).map(VnodeReply::Found),
            VnodeRequest::Head { key } => self.head(&key),
            VnodeRequest::Merge {
                key,
                object,
                allow_mult,
                prune,
                return_object,
            } => {
                let clock = object.clock.clone();
                self.update(
                    &key,
                    limits,
                    prune.as_ref(),
                    // Riak's merge: the incoming object wins whole when
                    // its clock dominates the stored one.
                    Some(|head: &Object| clock.dominates(&head.clock)),
                    |stored| {
                        let lost = self.lost_own_count(stored, &object);
                        let mut next = match stored {
                            Some(s) => s.merge(&object),
                            None => object,
                        };
                        if !allow_mult {
                            next.keep_newest();
                        }
                        if lost {
                            self.renew_epoch(&mut next)?;
                        }
                        Ok(Some(next))
                    },
                )
                .map(|o| match o {
                    Some(o) if return_object => VnodeReply::Stored(o),
                    _ => VnodeReply::Merged,
                })
            }
            VnodeRequest::Reap { key, clock } => self.reap(&key, &clock).map(VnodeReply::Reaped),
            VnodeRequest::Buckets { bucket_type } => {
                let mut out = std::collections::BTreeSet::new();
                self.backend()
                    .fold_buckets(&mut |t, b| {
                        if t == bucket_type.as_slice() {
                            out.insert(b.to_vec());
                        }
                        true
                    })
                    .map(|()| VnodeReply::Buckets(out.into_iter().collect()))
                    .map_err(KvError::from)
            }
            VnodeRequest::Keys(q) => self
                .keys(&q)
                .map(|(keys, more)| VnodeReply::Keys { keys, more }),
            VnodeRequest::Summaries(q) => self.summaries(&q),
            // `Vnodes` gives these to the node's sensor handler.
            VnodeRequest::Sensor(_) => Err(KvError::Backend(
                "a sensor-data request reached a vnode".into(),
            )),
            VnodeRequest::IndexPage { query, page } => {
                let mut entries = Vec::new();
                let page = page.max(1) as usize;
                self.backend()
                    .query_index(&query, &mut |term, key| {
                        entries.push((term.clone(), key.to_vec()));
                        entries.len() < page
                    })
                    .map(|()| VnodeReply::Entries {
                        filled: entries.len() == page,
                        entries,
                    })
                    .map_err(KvError::from)
            }
            VnodeRequest::Coordinate { key, step, prune } => self
                .update(
                    &key,
                    limits,
                    Some(&prune),
                    // A data type's op reads the stored state whatever it is.
                    (!matches!(*step, CoordinateStep::Dt { .. }))
                        .then_some(|head: &Object| step.keeps_no_stored_value(head)),
                    |stored| step.apply(stored, &self.actor_for(stored)?).map(Some),
                )
                .map(|o| VnodeReply::Stored(o.expect("the coordinator always writes"))),
            VnodeRequest::Aae { index_n, ask } => {
                self.aae_answer(index_n, &ask).map(VnodeReply::Aae)
            }
            VnodeRequest::AaeClocks { index_n, segments } => self
                .segment_clocks(index_n, &segments)
                .map(|c| c.map_or(VnodeReply::Aae(None), VnodeReply::Clocks)),
        };
        result.unwrap_or_else(VnodeReply::Failed)
    }
}

impl Vnode {
    /// A head's answer: from the backend's head where it keeps one (no
    /// value read when the values are large), else from the object.
    fn head(&self, k: &rill_backend::BKey) -> Result<VnodeReply, KvError> {
        if let Some(read) = self.backend().get_head(k) {
            match read? {
                None => return Ok(VnodeReply::Found(None)),
                // Written without a head: read the object.
                Some(b) if b.is_empty() => {}
                Some(b) => {
                    let h = rill_object::decode_head(&b).map_err(|e| {
                        tracing::error!(partition = self.partition.0, error = %e, "stored object head does not decode");
                        KvError::Backend(format!("stored object head does not decode: {e}"))
                    })?;
                    if h.value_bytes() > crate::vnode::head::HEAD_WHOLE_BYTES as u64 {
                        return Ok(VnodeReply::Head {
                            fingerprint: crate::vnode::head::fingerprint_with(
                                &h.object,
                                h.value_lengths.iter().copied(),
                            ),
                            clock: h.object.clock,
                        });
                    }
                }
            }
        }
        self.get(k).map(head_reply)
    }
}

/// A head's answer: the whole object while its values are small, else
/// its clock and fingerprint.
fn head_reply(o: Option<Object>) -> VnodeReply {
    match o {
        Some(o) if crate::vnode::head::value_bytes(&o) > crate::vnode::head::HEAD_WHOLE_BYTES => {
            VnodeReply::Head {
                fingerprint: crate::vnode::head::fingerprint(&o),
                clock: o.clock,
            }
        }
        o => VnodeReply::Found(o),
    }
}

impl Vnode {
    /// Answers a read (`Get`, `Head`) if the backend can without waiting
    /// (`Backend::try_get`), so it can be served where blocking is not
    /// allowed; `None` for any other request or a read that would wait.
    pub fn try_handle(&self, request: &VnodeRequest) -> Option<VnodeReply> {
        let (key, head) = match request {
            VnodeRequest::Get { key } => (key, false),
            VnodeRequest::Head { key } => (key, true),
            // A tree's levels are in memory; clocks read the store.
            VnodeRequest::Aae { index_n, ask } if !matches!(ask, rill_aae::Ask::Clocks(_)) => {
                return Some(match self.aae_answer(*index_n, ask) {
                    Ok(a) => VnodeReply::Aae(a),
                    Err(e) => VnodeReply::Failed(e),
                });
            }
            _ => return None,
        };
        let read = self.try_get(key)?;
        Some(match read {
            Ok(o) if head => head_reply(o),
            Ok(o) => VnodeReply::Found(o),
            Err(e) => VnodeReply::Failed(e),
        })
    }

    /// The keys a `Keys` request answers, sorted, and whether keys past
    /// the last were left out.
    pub(crate) fn keys(&self, q: &KeysQuery) -> Result<(Vec<Vec<u8>>, bool), KvError> {
        let limit = q.limit.max(1) as usize;
        let mut best: std::collections::BTreeSet<Vec<u8>> = Default::default();
        let mut more = false;
        self.backend()
            .fold_keys(&q.bucket_type, &q.bucket, &mut |k| {
                let wanted = k >= q.lo.as_slice()
                    && q.hi.as_ref().is_none_or(|h| k <= h.as_slice())
                    && q.after.as_ref().is_none_or(|a| k > a.as_slice())
                    && q.first_of.as_ref().is_none_or(|(size, parts)| {
                        let h = rill_ring::key_hash(&q.bucket_type, &q.bucket, k);
                        parts.contains(&rill_ring::Ring::responsible_in(*size, &h).0)
                    });
                if wanted && best.insert(k.to_vec()) && best.len() > limit {
                    best.pop_last();
                    more = true;
                }
                true
            })?;
        Ok((best.into_iter().collect(), more))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackendKind;

    /// A leveled vnode answers a head from its ledger: the same reply the
    /// whole object gives (a large value's clock and fingerprint, a small
    /// object whole), and a missing key as missing.
    #[test]
    fn a_leveled_head_answers_as_the_object_does() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::node(dir.path(), BackendKind::Leveled);
        let large = vec![7u8; crate::vnode::head::HEAD_WHOLE_BYTES + 1];
        crate::testing::put_kv(&n, b"large", &large);
        crate::testing::put_kv(&n, b"small", b"v");
        let limits = n.vnodes.limits;
        for key in [&b"large"[..], b"small", b"none"] {
            let e = &n.preflist(b"", b"b", key, 1)[0];
            let vnode = n.vnodes.at(e);
            let k = crate::vnode::bkey(b"", b"b", key);
            assert!(vnode.backend().keeps_heads());
            let from_head = vnode.handle(VnodeRequest::Head { key: k.clone() }, &limits);
            let from_object = vnode.get(&k).map(head_reply).unwrap();
            assert_eq!(from_head, from_object, "{key:?}");
            if key == b"large" {
                assert!(matches!(from_head, VnodeReply::Head { .. }));
            }
        }
    }

    /// A write whose new version keeps none of the stored values reads only
    /// the leveled head, never the value: with the stored value made
    /// unreadable, such a merge or coordinated put still succeeds (and
    /// moves the index entries), while one that keeps a stored sibling
    /// reads the object and fails.
    #[test]
    fn a_write_that_replaces_the_stored_version_reads_only_its_head() {
        use crate::vnode::step::CoordinateStep;
        use rill_object::{Content, Metadata, Object, PutMode, VClock};
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::node(dir.path(), BackendKind::Leveled);
        let limits = n.vnodes.limits;
        let e = &n.preflist(b"", b"b", b"k", 1)[0];
        let vnode = n.vnodes.at(e);
        let k = crate::vnode::bkey(b"", b"b", b"k");
        let mode = PutMode {
            allow_mult: true,
            last_write_wins: false,
        };
        let content = |v: &[u8], term: &[u8]| {
            Content::new(
                v.to_vec(),
                Metadata {
                    last_modified_us: 5_000_000,
                    indexes: vec![(b"f_bin".to_vec(), term.to_vec())],
                    ..Metadata::default()
                },
            )
        };
        let stored = Object::coordinate_put(
            None,
            &VClock::new(),
            content(b"old", b"t1"),
            &b"x".to_vec(),
            mode,
        );
        // The stored version with a value that does not decode.
        let spoil = || {
            let head = rill_object::encode_head(&stored);
            let terms = crate::vnode::index_terms(&stored);
            vnode
                .backend()
                .put_with_head(&k, b"not an object", &head, &terms, &[])
                .unwrap();
        };
        let terms_now = || {
            let q = rill_backend::IndexQuery {
                bucket_type: Vec::new(),
                bucket: b"b".to_vec(),
                field: b"f_bin".to_vec(),
                range: rill_backend::IndexRange::Range(
                    rill_backend::Term::Bin(Vec::new()),
                    rill_backend::Term::Bin(vec![0xff]),
                ),
                after: None,
            };
            let mut out = Vec::new();
            vnode
                .backend()
                .query_index(&q, &mut |t, _| {
                    out.push(format!("{t:?}"));
                    true
                })
                .unwrap();
            out
        };
        let merge = |object: Object| VnodeRequest::Merge {
            key: k.clone(),
            object,
            allow_mult: true,
            prune: None,
            return_object: false,
        };

        // A replica's merge of a version that has seen the stored one.
        spoil();
        let newer = Object::coordinate_put(
            Some(&stored),
            &stored.clock,
            content(b"new", b"t2"),
            &b"y".to_vec(),
            mode,
        );
        assert_eq!(
            vnode.handle(merge(newer.clone()), &limits),
            VnodeReply::Merged
        );
        assert_eq!(vnode.get(&k).unwrap(), Some(newer));
        assert_eq!(
            terms_now(),
            vec![format!("{:?}", rill_backend::Term::Bin(b"t2".to_vec()))]
        );

        // A concurrent version keeps the stored sibling: the object is read.
        spoil();
        let concurrent = Object::coordinate_put(
            None,
            &VClock::new(),
            content(b"other", b"t3"),
            &b"z".to_vec(),
            mode,
        );
        assert!(matches!(
            vnode.handle(merge(concurrent), &limits),
            VnodeReply::Failed(_)
        ));

        // A coordinated put with the stored clock as its context.
        let put = |context: VClock| VnodeRequest::Coordinate {
            key: k.clone(),
            step: Box::new(CoordinateStep::Put {
                context,
                content: content(b"put", b"t4"),
                mode,
            }),
            prune: rill_object::PruneRules::default(),
        };
        spoil();
        let VnodeReply::Stored(o) = vnode.handle(put(stored.clock.clone()), &limits) else {
            panic!("the put failed");
        };
        assert_eq!(o.contents.len(), 1);
        assert_eq!(vnode.get(&k).unwrap(), Some(o));
        // Without a context the stored value stays a sibling: read.
        spoil();
        assert!(matches!(
            vnode.handle(put(VClock::new()), &limits),
            VnodeReply::Failed(_)
        ));
    }
}
