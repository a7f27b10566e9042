//! Gets that move a large value once, as Riak 3 does with HEAD requests:
//! a replica on another node is asked for the object's head, and answers
//! with the whole object only when its values are small; otherwise with
//! its clock and its siblings' fingerprint (each one's dot, vtag, last
//! modified time, deleted flag and value length). A head whose clock and
//! fingerprint equal those of a whole object some replica already sent
//! stands for that object; any other makes the coordinator fetch that
//! replica's object, once per head. In a steady cluster every replica holds one version, so a
//! get moves its value between nodes at most once (not at all when this
//! node holds a replica), however large it is.
//!
//! Pure: replies in, what to feed the get machine and which replicas to
//! fetch from out.

use crate::vnode::msg::VnodeReply;
use rill_object::{Object, VClock};

/// A replica's object is sent whole when its values total at most this
/// (the size above which vnode messages take the bulk lane).
pub const HEAD_WHOLE_BYTES: usize = 64 << 10;

/// The values' bytes of an object.
pub(crate) fn value_bytes(o: &Object) -> usize {
    o.contents.iter().map(|c| c.value.len()).sum()
}

/// What tells two stored versions with one clock apart (their clocks can
/// meet after each replica pruned its own): per sibling, in order, its
/// dot, vtag, last-modified time, deleted flag and value length, hashed
/// (FNV-1a, 64 bits). Cheap: no value is read.
pub(crate) fn fingerprint(o: &Object) -> u64 {
    fingerprint_with(o, o.contents.iter().map(|c| c.value.len() as u64))
}

/// [`fingerprint`] of an object whose values' lengths are given apart
/// (a head read without its values).
pub(crate) fn fingerprint_with(o: &Object, value_lengths: impl Iterator<Item = u64>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for x in b {
            h = (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3);
        }
    };
    for (c, len) in o.contents.iter().zip(value_lengths) {
        if let Some(d) = &c.dot {
            eat(&d.actor);
            eat(&d.counter.to_be_bytes());
            eat(&d.timestamp_secs.to_be_bytes());
        }
        eat(c.meta.vtag.as_deref().unwrap_or_default());
        eat(&c.meta.last_modified_us.to_be_bytes());
        eat(&[u8::from(c.meta.deleted)]);
        eat(&len.to_be_bytes());
    }
    h
}

/// What a head says of a version.
type Stamp = (VClock, u64);

fn stamp(o: &Object) -> Stamp {
    (o.clock.clone(), fingerprint(o))
}

/// What a coordinator does with a reply.
#[derive(Debug, PartialEq)]
pub(crate) enum HeadStep {
    /// Give the get machine this reply as replica `i`'s.
    Feed(usize, VnodeReply),
    /// Ask replica `i` for its whole object (a `Get`); its reply comes
    /// back through [`Heads::reply`].
    Fetch(usize),
}

/// A get's heads and the whole objects that stand for them.
#[derive(Default)]
pub(crate) struct Heads {
    /// One whole object per version seen.
    whole: Vec<(Stamp, Object)>,
    /// Replicas asked for their object, with what their head said.
    fetching: Vec<(usize, Stamp)>,
    /// Replicas whose head waits for a fetch of the same version, or
    /// for a whole object asked of this node's replica.
    parked: Vec<(usize, Stamp)>,
    /// Replicas of this node asked for their whole object and not yet
    /// answered (read on a blocking thread): heads wait for them rather
    /// than fetch a value this node may hold.
    awaited: Vec<usize>,
}

impl Heads {
    /// Replica `i` (this node's) will answer with its whole object later.
    pub fn await_whole(&mut self, i: usize) {
        self.awaited.push(i);
    }

    /// Takes replica `i`'s reply (to a get, a head or a fetch).
    pub fn reply(&mut self, i: usize, reply: VnodeReply) -> Vec<HeadStep> {
        let mut out = Vec::new();
        match reply {
            VnodeReply::Head { clock, fingerprint } => self.head(i, (clock, fingerprint), &mut out),
            other => {
                self.fetching.retain(|(j, _)| *j != i);
                self.awaited.retain(|j| *j != i);
                if let VnodeReply::Found(Some(o)) = &other {
                    let s = stamp(o);
                    if !self.whole.iter().any(|(w, _)| *w == s) {
                        self.whole.push((s, o.clone()));
                    }
                }
                out.push(HeadStep::Feed(i, other));
                // A fetch answered (with that clock or, if the replica
                // changed since, another): parked heads are settled or
                // fetched from their own replica.
                for (j, clock) in std::mem::take(&mut self.parked) {
                    self.head(j, clock, &mut out);
                }
            }
        }
        out
    }

    fn head(&mut self, i: usize, s: Stamp, out: &mut Vec<HeadStep>) {
        if let Some((_, o)) = self.whole.iter().find(|(w, _)| *w == s) {
            out.push(HeadStep::Feed(i, VnodeReply::Found(Some(o.clone()))));
        } else if !self.awaited.is_empty() || self.fetching.iter().any(|(_, f)| *f == s) {
            self.parked.push((i, s));
        } else {
            self.fetching.push((i, s));
            out.push(HeadStep::Fetch(i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KvError;
    use rill_object::{Content, Metadata, PutMode};

    fn version(value: &[u8], actor: &[u8], prev: Option<&Object>) -> Object {
        let mode = PutMode {
            allow_mult: false,
            last_write_wins: false,
        };
        let c = Content::new(value.to_vec(), Metadata::default());
        let ctx = prev.map(|p| p.clock.clone()).unwrap_or_default();
        Object::coordinate_put(prev, &ctx, c, &actor.to_vec(), mode)
    }

    fn found(o: &Object) -> VnodeReply {
        VnodeReply::Found(Some(o.clone()))
    }

    fn head_of(o: &Object) -> VnodeReply {
        VnodeReply::Head {
            clock: o.clock.clone(),
            fingerprint: fingerprint(o),
        }
    }

    #[test]
    fn one_clock_with_other_siblings_is_fetched_not_taken() {
        // Two versions that end with one clock (pruned apart) differ in
        // their fingerprint: the head is not taken for the object here.
        let v = version(b"one", b"a", None);
        let mut w = v.clone();
        w.contents[0].value = bytes::Bytes::from_static(b"other, longer");
        w.contents[0].meta.vtag = Some(b"another".to_vec());
        let mut h = Heads::default();
        h.reply(0, found(&v));
        assert_eq!(h.reply(1, head_of(&w)), vec![HeadStep::Fetch(1)]);
    }

    #[test]
    fn heads_equal_to_a_whole_object_stand_for_it() {
        let v = version(b"big", b"a", None);
        let mut h = Heads::default();
        // The local replica sent it whole; two remote heads match.
        assert_eq!(h.reply(0, found(&v)), vec![HeadStep::Feed(0, found(&v))]);
        assert_eq!(h.reply(2, head_of(&v)), vec![HeadStep::Feed(2, found(&v))]);
        assert_eq!(h.reply(1, head_of(&v)), vec![HeadStep::Feed(1, found(&v))]);
    }

    #[test]
    fn one_fetch_per_clock_and_parked_heads_follow_it() {
        let v = version(b"big", b"a", None);
        let mut h = Heads::default();
        // No replica here: the first head is fetched, the second waits.
        assert_eq!(h.reply(0, head_of(&v)), vec![HeadStep::Fetch(0)]);
        assert_eq!(h.reply(1, head_of(&v)), vec![]);
        assert_eq!(
            h.reply(0, found(&v)),
            vec![HeadStep::Feed(0, found(&v)), HeadStep::Feed(1, found(&v))]
        );
    }

    #[test]
    fn heads_wait_for_this_nodes_whole_object_before_fetching() {
        let v = version(b"big", b"a", None);
        let mut h = Heads::default();
        // This node's replica is read on a blocking thread: heads that
        // arrive first wait for it, and it stands for them.
        h.await_whole(0);
        assert_eq!(h.reply(1, head_of(&v)), vec![]);
        assert_eq!(h.reply(2, head_of(&v)), vec![]);
        assert_eq!(
            h.reply(0, found(&v)),
            vec![
                HeadStep::Feed(0, found(&v)),
                HeadStep::Feed(1, found(&v)),
                HeadStep::Feed(2, found(&v))
            ]
        );
        // Had it found nothing, the first head is fetched, the other
        // waits for that fetch.
        let mut h = Heads::default();
        h.await_whole(0);
        assert_eq!(h.reply(1, head_of(&v)), vec![]);
        assert_eq!(h.reply(2, head_of(&v)), vec![]);
        assert_eq!(
            h.reply(0, VnodeReply::Found(None)),
            vec![
                HeadStep::Feed(0, VnodeReply::Found(None)),
                HeadStep::Fetch(1)
            ]
        );
    }

    #[test]
    fn a_newer_or_concurrent_head_is_fetched_from_its_replica() {
        let old = version(b"old", b"a", None);
        let new = version(b"new", b"b", Some(&old));
        let mut h = Heads::default();
        h.reply(0, found(&old));
        assert_eq!(h.reply(1, head_of(&new)), vec![HeadStep::Fetch(1)]);
        assert_eq!(
            h.reply(1, found(&new)),
            vec![HeadStep::Feed(1, found(&new))]
        );
    }

    #[test]
    fn a_fetch_that_fails_or_changed_sends_parked_heads_to_their_own_replica() {
        let v = version(b"big", b"a", None);
        let w = version(b"newer", b"b", Some(&v));
        let mut h = Heads::default();
        assert_eq!(h.reply(0, head_of(&v)), vec![HeadStep::Fetch(0)]);
        assert_eq!(h.reply(1, head_of(&v)), vec![]);
        assert_eq!(h.reply(2, head_of(&v)), vec![]);
        // Replica 0 changed in between: replica 1 is fetched, 2 waits on it.
        assert_eq!(
            h.reply(0, found(&w)),
            vec![HeadStep::Feed(0, found(&w)), HeadStep::Fetch(1)]
        );
        let failed = VnodeReply::Failed(KvError::Busy("busy".into()));
        assert_eq!(
            h.reply(1, failed.clone()),
            vec![HeadStep::Feed(1, failed), HeadStep::Fetch(2)]
        );
        assert_eq!(h.reply(2, found(&v)), vec![HeadStep::Feed(2, found(&v))]);
    }
}
