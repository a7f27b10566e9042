//! A vnode never issues a dot twice after it lost a key: a reaped
//! tombstone followed by an older version of the key merged back.

use super::msg::{VnodeReply, VnodeRequest};
use super::step::CoordinateStep;
use super::*;
use rill_backend::{MemoryBackend, MemoryOptions};
use rill_object::{Content, Dot, Metadata, PutMode};

const NO_PRUNING: PruneRules = PruneRules {
    small: usize::MAX,
    big: usize::MAX,
    young_secs: u64::MAX,
    old_secs: u64::MAX,
};

const LIMITS: Limits = Limits {
    size_warning_bytes: usize::MAX,
    size_max_bytes: usize::MAX,
    siblings_warning: usize::MAX,
    siblings_max: usize::MAX,
};

fn vnode(dir: &std::path::Path) -> Vnode {
    let leases = Arc::new(LeaseFile::create(dir, &lease::LeaseTable::fresh(1, 0, false)).unwrap());
    let backend = MemoryBackend::new(MemoryOptions {
        max_memory_bytes: None,
        ttl: None,
    });
    let epochs = Epochs {
        next: 0,
        lease_end: 0,
        fresh_from: 0,
        leases,
    };
    Vnode::new(Partition(0), [7; 8], epochs, Box::new(backend), None)
}

/// The vnode coordinates `content` over `context`; returns the object it
/// stored and the dot of the new content.
fn coordinate(v: &Vnode, k: &BKey, context: &VClock, content: Content) -> (Object, Dot) {
    let vtag = content.meta.vtag.clone();
    let value = content.value.clone();
    let step = CoordinateStep::Put {
        context: context.clone(),
        content,
        mode: PutMode {
            allow_mult: true,
            last_write_wins: false,
        },
    };
    let request = VnodeRequest::Coordinate {
        key: k.clone(),
        step: Box::new(step),
        prune: NO_PRUNING,
    };
    let VnodeReply::Stored(o) = v.handle(request, &LIMITS) else {
        panic!("the vnode did not store the write");
    };
    let dot = o
        .contents
        .iter()
        .find(|c| c.meta.vtag == vtag && c.value == value)
        .and_then(|c| c.dot.clone())
        .expect("the new content has a dot");
    (o, dot)
}

fn value(v: &str) -> Content {
    Content::new(v.as_bytes().to_vec(), Metadata::default())
}

/// A tombstone reaped, then a version older than it merged back (a
/// client wrote over a context it read before the delete, through
/// another replica): the vnode's next write must not continue its epoch
/// from the older count, which would give it the tombstone's dot (the
/// seeded cluster simulation found it at its seed 17). Only that key
/// takes a new epoch: another key's next write continues its own.
#[test]
fn a_key_reaped_and_merged_back_older_takes_no_dot_twice() {
    let dir = tempfile::tempdir().unwrap();
    let v = vnode(dir.path());
    let other = bkey(b"", b"b", b"other");
    let (before, other_dot) = coordinate(&v, &other, &VClock::new(), value("o1"));
    let k = bkey(b"", b"b", b"k");
    let (read, _) = coordinate(&v, &k, &VClock::new(), value("v1"));
    let (tombstone, deleted) =
        coordinate(&v, &k, &read.clock, Content::tombstone(0, b"t".to_vec()));
    let request = VnodeRequest::Reap {
        key: k.clone(),
        clock: tombstone.clock.clone(),
    };
    assert!(matches!(
        v.handle(request, &LIMITS),
        VnodeReply::Reaped(true)
    ));
    // Another replica's version over the context read before the delete.
    let mut older = read.clone();
    older.clock.increment(b"another replica's actor", 0);
    let request = VnodeRequest::Merge {
        key: k.clone(),
        object: older.clone(),
        allow_mult: true,
        prune: None,
        return_object: false,
    };
    assert!(matches!(v.handle(request, &LIMITS), VnodeReply::Merged));
    let (_, next) = coordinate(&v, &k, &older.clock, value("v3"));
    assert_ne!(next, deleted, "a dot issued twice");
    assert!(
        !tombstone.clock.covers(&next),
        "the new write is one the tombstone's clock has seen"
    );
    let (_, other_next) = coordinate(&v, &other, &before.clock, value("o2"));
    assert_eq!(
        other_next.actor, other_dot.actor,
        "another key's epoch goes on"
    );
    assert_eq!(other_next.counter, other_dot.counter + 1);
}
