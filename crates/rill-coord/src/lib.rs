//! Coordination of a get, put or delete over a key's preference list, as
//! pure state machines in the manner of riak_kv's `riak_kv_get_core` and
//! `riak_kv_put_core` and of raft-rs: the caller feeds events in (a
//! vnode's reply, a timeout) and carries out the effects that come out
//! (send a request to a replica, answer the client, repair a replica,
//! reap a tombstone). The same machines run over local vnodes, over the
//! network, and inside a seeded simulation.
//!
//! Invariants:
//! - a client gets exactly one answer, and only once the quorum rules
//!   allow it (or a timeout ends the wait);
//! - replicas are identified by their index in the preference list, each
//!   marked primary or fallback and with the physical node that holds it
//!   (for `node_confirms`); a reply for an index already heard, or
//!   outside the list, is ignored;
//! - no clock, randomness or I/O: timeouts are events.

pub mod error;
pub mod get;
pub mod put;
mod replica;

pub use error::{CoordError, QuorumError};
pub use get::{GetCore, GetEffect, GetFsm, GetOutcome, GetParams, GetReply, ReadRepair};
pub use put::{AttemptEnd, Make, PutAttempts, PutCore, PutEffect, PutFsm, PutParams, PutReply};
pub use replica::Replica;
