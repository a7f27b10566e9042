//! The transport between Rill nodes, after Partisan's lesson ("Partisan:
//! scaling Riak Core"): distributed Erlang's single channel per peer lets
//! one 8 MB value hold up every request behind it. Here each peer is
//! reached over one TCP connection per [`Lane`] (control, small requests,
//! bulk values, handoff), so a large value never delays a small request;
//! within a lane, messages are cut into chunks of at most
//! [`frame::CHUNK_BYTES`] and the chunks of messages in flight are sent in
//! turn, so two large values share the link instead of queueing, and a
//! receiver reassembles them as they come.
//!
//! Invariants:
//! - every frame carries the protocol version; a peer speaking another
//!   version, or sending a malformed frame, is disconnected with a log
//!   line, never a panic (`frame` is fuzzed);
//! - every queue is bounded: a sender waits when its lane's queue is full
//!   (back-pressure), a receiver stops reading when the node's inbox is
//!   full, a message larger than the limit is refused;
//! - messages on one lane to one peer arrive in the order they were
//!   completed, whole or not at all; a broken connection loses what was in
//!   flight on it (the coordination above times out and retries), and the
//!   next send reconnects.
//!
//! [`LinkHook`] adds delay or loss per message for tests and benchmarks
//! (this kernel has no `netem`; [`FixedLink`] is the one `rill`'s
//! test-only `test.link.*` settings make); production runs without one.
//! Delayed messages wait apart from those being written, so a delay
//! models a link's latency, not a smaller window.

pub mod frame;
mod hook;
pub mod lane;
mod priority;
mod recv;
pub mod schedule;
mod send;
mod transport;

pub use hook::FixedLink;
pub use lane::Lane;
pub use transport::{
    Incoming, LinkEvent, LinkHook, SendError, Traffic, Transport, TransportConfig, Verdict,
};
