//! Riak objects: a key's value as one or more siblings, each with its own
//! metadata, under one causal context.
//!
//! Causality is Riak KV's with `dvv_enabled`: a version vector per object
//! and on every sibling the dot of the write that made it, so a put whose
//! context has seen a sibling replaces it and only truly concurrent
//! writes stay siblings. Rill uses dots for every bucket: Riak's undotted
//! mode (its default type's `dvv_enabled = false`) keeps siblings a
//! client had already seen ("sibling explosion") and lets replicas merged
//! in different orders disagree; the property is still reported as set.
//!
//! Invariants:
//! - siblings are kept sorted by value bytes, then metadata, and never
//!   repeat (Riak's `lists:usort`), so replicas that merged the same
//!   writes hold identical bytes;
//! - `merge` is commutative, associative and idempotent (tested with
//!   proptest), so replicas converge whatever order writes arrive in;
//! - decoding never panics and names what is wrong with the bytes.

mod clock;
mod codec;
mod head;
mod object;

pub use clock::{Actor, Dot, PruneRules, VClock};
pub use codec::{
    decode_object, decode_object_shared, decode_vclock, encode_object, encode_object_into,
    encode_vclock, DecodeError, OBJECT_FORMAT_VERSION,
};
pub use head::{decode_head, encode_head, Head, HEAD_FORMAT_VERSION};
pub use object::{Content, Link, Metadata, Object, PutMode};
