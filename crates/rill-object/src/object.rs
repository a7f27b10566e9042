//! Objects, siblings and the rules that combine them.

use crate::clock::{Actor, Dot, VClock};
use bytes::Bytes;

/// A link to another object (Riak's link walking metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Link {
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub tag: Vec<u8>,
}

/// One sibling's metadata, as Riak keeps it per content.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Metadata {
    pub content_type: Option<Vec<u8>>,
    pub charset: Option<Vec<u8>>,
    pub content_encoding: Option<Vec<u8>>,
    pub vtag: Option<Vec<u8>>,
    pub links: Vec<Link>,
    /// Microseconds since the Unix epoch, set by the coordinating put.
    pub last_modified_us: u64,
    pub usermeta: Vec<(Vec<u8>, Vec<u8>)>,
    /// Secondary index entries: (field, term), field ending `_bin` or
    /// `_int`, kept sorted and unique.
    pub indexes: Vec<(Vec<u8>, Vec<u8>)>,
    /// A tombstone: the value is empty and the key reads as not found
    /// once every sibling is one.
    pub deleted: bool,
}

/// One sibling: a value, its metadata and, under dotted version vectors,
/// the write that made it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Content {
    /// Shared, not copied, as the object moves between a client, the
    /// coordinator, replicas and the store: a large value is copied only
    /// where its bytes must change place.
    pub value: Bytes,
    pub meta: Metadata,
    pub dot: Option<Dot>,
}

impl Content {
    pub fn new(value: impl Into<Bytes>, meta: Metadata) -> Content {
        Content {
            value: value.into(),
            meta,
            dot: None,
        }
    }

    pub fn tombstone(last_modified_us: u64, vtag: Vec<u8>) -> Content {
        Content {
            value: Bytes::new(),
            meta: Metadata {
                deleted: true,
                last_modified_us,
                vtag: Some(vtag),
                ..Metadata::default()
            },
            dot: None,
        }
    }
}

/// How a bucket resolves concurrent writes (its properties).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutMode {
    /// Keep concurrent writes as siblings; otherwise keep the newest.
    pub allow_mult: bool,
    /// The incoming write replaces whatever is stored.
    pub last_write_wins: bool,
}

/// A key's stored state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Object {
    pub clock: VClock,
    /// Sorted, unique, never empty in a stored object.
    pub contents: Vec<Content>,
}

impl Object {
    /// Every sibling is a tombstone.
    pub fn is_tombstone(&self) -> bool {
        !self.contents.is_empty() && self.contents.iter().all(|c| c.meta.deleted)
    }

    /// The object a coordinating vnode stores for a put of `new` (which
    /// carries no dot) with the client's causal `context`, given what the
    /// vnode holds. `actor` is the coordinating vnode.
    pub fn coordinate_put(
        stored: Option<&Object>,
        context: &VClock,
        mut new: Content,
        actor: &Actor,
        mode: PutMode,
    ) -> Object {
        let timestamp_secs = new.meta.last_modified_us / 1_000_000;
        let mut clock = match stored {
            Some(s) => s.clock.merge(context),
            None => context.clone(),
        };
        let dot = clock.increment(actor, timestamp_secs);
        new.dot = Some(dot);
        let mut contents = Vec::new();
        if let Some(s) = stored {
            if !mode.last_write_wins && !context.descends(&s.clock) {
                contents.extend(
                    s.contents
                        .iter()
                        .filter(|c| c.dot.as_ref().is_none_or(|d| !context.covers(d)))
                        .cloned(),
                );
            }
        }
        contents.push(new);
        let mut obj = Object { clock, contents };
        obj.normalise();
        if !mode.allow_mult {
            obj.keep_newest();
        }
        obj
    }

    /// Riak's syntactic merge of two replicas of one key: if one has seen
    /// everything the other has, it wins; otherwise the clocks merge and
    /// each side keeps the siblings the other has not seen superseded.
    pub fn merge(&self, other: &Object) -> Object {
        if self.clock.dominates(&other.clock) {
            return self.clone();
        }
        if other.clock.dominates(&self.clock) {
            return other.clone();
        }
        if self == other {
            return self.clone();
        }
        let keep = |c: &&Content, theirs: &Object| {
            theirs.contents.contains(c) || c.dot.as_ref().is_none_or(|d| !theirs.clock.covers(d))
        };
        let mut contents: Vec<Content> = self
            .contents
            .iter()
            .filter(|c| keep(c, other))
            .cloned()
            .collect();
        contents.extend(other.contents.iter().filter(|c| keep(c, self)).cloned());
        if contents.is_empty() {
            // Each side's clock covers the other's dots without holding
            // them: only possible if an actor's counter was issued twice
            // (vnodes avoid that, see rill-node's actor_for). Keep both
            // rather than store nothing.
            contents = self
                .contents
                .iter()
                .chain(&other.contents)
                .cloned()
                .collect();
        }
        let mut obj = Object {
            clock: self.clock.merge(&other.clock),
            contents,
        };
        obj.normalise();
        obj
    }

    /// Prunes the clock by Riak's rules, keeping every actor a sibling's
    /// dot names (so each sibling stays covered by its own clock).
    pub fn prune_clock(&mut self, now_secs: u64, rules: &crate::PruneRules) -> usize {
        let dotted: Vec<&[u8]> = self
            .contents
            .iter()
            .filter_map(|c| c.dot.as_ref().map(|d| d.actor.as_slice()))
            .collect();
        self.clock.prune(now_secs, rules, |a| dotted.contains(&a))
    }

    /// Sorted by value, then metadata; duplicates removed.
    pub fn normalise(&mut self) {
        self.contents.sort();
        self.contents.dedup();
    }

    /// Collapses siblings to the newest by last-modified (allow_mult =
    /// false); on a tie a value beats a tombstone, then the greatest in
    /// sibling order.
    pub fn keep_newest(&mut self) {
        if self.contents.len() <= 1 {
            return;
        }
        let newest = self
            .contents
            .iter()
            .max_by(|a, b| {
                (a.meta.last_modified_us, !a.meta.deleted, *a).cmp(&(
                    b.meta.last_modified_us,
                    !b.meta.deleted,
                    *b,
                ))
            })
            .cloned()
            .expect("non-empty");
        self.contents = vec![newest];
    }

    /// The index entries of the live siblings, sorted and unique.
    pub fn index_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = self
            .contents
            .iter()
            .filter(|c| !c.meta.deleted)
            .flat_map(|c| c.meta.indexes.iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DVV: PutMode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };

    fn content(v: &str, t: u64) -> Content {
        Content::new(
            v.as_bytes().to_vec(),
            Metadata {
                last_modified_us: t,
                ..Metadata::default()
            },
        )
    }

    fn values(o: &Object) -> Vec<&str> {
        o.contents
            .iter()
            .map(|c| std::str::from_utf8(&c.value).unwrap())
            .collect()
    }

    fn put(stored: Option<&Object>, ctx: &VClock, v: &str, t: u64, mode: PutMode) -> Object {
        Object::coordinate_put(stored, ctx, content(v, t), &b"A".to_vec(), mode)
    }

    #[test]
    fn a_put_with_the_current_context_replaces() {
        {
            let mode = DVV;
            let o1 = put(None, &VClock::new(), "one", 1, mode);
            let o2 = put(Some(&o1), &o1.clock, "two", 2, mode);
            assert_eq!(values(&o2), ["two"]);
            assert!(o2.clock.dominates(&o1.clock));
        }
    }

    #[test]
    fn blind_puts_make_siblings() {
        {
            let mode = DVV;
            let o1 = put(None, &VClock::new(), "one", 1, mode);
            let o2 = put(Some(&o1), &VClock::new(), "two", 2, mode);
            assert_eq!(values(&o2), ["one", "two"]);
        }
    }

    // Two clients read {one}; both write. Each write replaces "one" and
    // the two writes are siblings; a third writer with the same old
    // context adds itself, never resurrecting "one" (no sibling
    // explosion, unlike Riak's undotted vector clocks).
    #[test]
    fn dvv_drops_what_the_context_saw() {
        let o1 = put(None, &VClock::new(), "one", 1, DVV);
        let o2 = put(Some(&o1), &o1.clock, "a", 2, DVV);
        let o3 = put(Some(&o2), &o1.clock, "b", 3, DVV);
        assert_eq!(values(&o3), ["a", "b"]);
        let c4 = put(Some(&o3), &o1.clock, "c", 4, DVV);
        assert_eq!(values(&c4), ["a", "b", "c"]);
        // Resolving with the merged context leaves one value.
        let o4 = put(Some(&o3), &o3.clock, "resolved", 5, DVV);
        assert_eq!(values(&o4), ["resolved"]);
    }

    #[test]
    fn allow_mult_false_keeps_the_newest() {
        let mode = PutMode {
            allow_mult: false,
            ..DVV
        };
        let o1 = put(None, &VClock::new(), "zzz", 5, mode);
        let o2 = put(Some(&o1), &VClock::new(), "aaa", 9, mode);
        assert_eq!(values(&o2), ["aaa"]);
    }

    #[test]
    fn last_write_wins_replaces_without_context() {
        let mode = PutMode {
            last_write_wins: true,
            ..DVV
        };
        let o1 = put(None, &VClock::new(), "one", 1, mode);
        let o2 = put(Some(&o1), &VClock::new(), "two", 2, mode);
        assert_eq!(values(&o2), ["two"]);
        assert!(o2.clock.descends(&o1.clock));
    }

    #[test]
    fn replicas_merge_to_the_same_object() {
        let o1 = put(None, &VClock::new(), "one", 1, DVV);
        let a = put(Some(&o1), &o1.clock, "a", 2, DVV);
        let b = Object::coordinate_put(Some(&o1), &o1.clock, content("b", 3), &b"B".to_vec(), DVV);
        let ab = a.merge(&b);
        assert_eq!(ab, b.merge(&a));
        assert_eq!(values(&ab), ["a", "b"]);
        assert_eq!(ab.merge(&o1), ab);
    }

    #[test]
    fn a_reused_counter_never_merges_to_nothing() {
        let a = put(None, &VClock::new(), "v1", 1, DVV);
        let b = put(None, &VClock::new(), "v2", 2, DVV);
        assert_eq!(a.clock, b.clock, "same actor, same counter");
        let m = a.merge(&b);
        assert_eq!(values(&m), ["v1", "v2"]);
    }

    #[test]
    fn tombstones_and_indexes() {
        let mut c = content("v", 1);
        c.meta.indexes = vec![(b"f_bin".to_vec(), b"x".to_vec())];
        let o = Object::coordinate_put(None, &VClock::new(), c, &b"A".to_vec(), DVV);
        assert_eq!(o.index_entries().len(), 1);
        assert!(!o.is_tombstone());
        let t = Object::coordinate_put(
            Some(&o),
            &o.clock,
            Content::tombstone(2, b"t".to_vec()),
            &b"A".to_vec(),
            DVV,
        );
        assert!(t.is_tombstone());
        assert!(t.index_entries().is_empty());
    }
}
