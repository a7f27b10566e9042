//! The ring of Riak Core ("Partisan: scaling Riak Core"; riak_core's
//! chash): the 160-bit SHA-1 space cut
//! into `ring_size` equal partitions, each served by one vnode.
//!
//! Invariants:
//! - a key's position is the SHA-1 of Erlang's `term_to_binary({B, K})`
//!   for the default bucket type and of `{{T, B}, K}` for any other type,
//!   byte for byte as Riak computes it, so Rill places keys where Riak
//!   does;
//! - a key's first replica is the partition *after* the one its hash falls
//!   in (`((h div inc) + 1) mod ring_size`), the next N-1 follow clockwise;
//! - this crate does no I/O: ownership is passed in.

pub mod claim;
mod hash;
mod ring;

pub use claim::{balance, claim, pairs_by_distance, violations, Claim, ClaimError};
pub use hash::{key_hash, term_to_binary_bucket_key, KeyHash};
pub use ring::{Partition, PreflistEntry, Ring, RingError, MAX_RING_SIZE};
