//! Rill's cluster state, after riak_core's ring and claimant ("Riak Core"
//! and its `riak_core_ring`, `riak_core_claimant`): who the members are
//! and their status, who owns each partition, which partitions are moving,
//! which node coordinates changes (the claimant), and the staged changes
//! an operator plans and commits (`rill admin cluster ...`).
//!
//! Invariants:
//! - the state merges as a join semilattice (commutative, associative,
//!   idempotent), so gossip converges in any order;
//! - only the claimant changes ownership, and only once every member that
//!   must has seen the current ring (`ring_ready`);
//! - this crate does no I/O and reads no clock or randomness: the node
//!   passes in what it needs, so a simulation replays it exactly.

pub mod claimant;
pub mod codec;
mod digest;
pub mod gossip;
pub mod member;
pub mod render;
pub mod staged;
pub mod state;

pub use claimant::{claiming_members, step, Context};
pub use member::{Member, Status};
pub use staged::{Change, Plan, StageError, Staged, Transition};
pub use state::{ClusterState, RingRegister, Seen, StateError, Transfer, TransferKey};
