//! A node's whole cluster runtime, not one peer as the name suggests:
//! gossip and membership, the claimant, failure detection, driving
//! handoffs, and every use of `rill-transport` (docs/cluster.md).
//!
//! After Riak Core's membership, gossip and claimant: it keeps the cluster
//! state on disk and gossips it over `rill-transport`, runs the claimant's
//! rules, detects unreachable nodes, drives ownership and hinted handoffs
//! over `rill-handoff`'s machines, carries vnode requests and replies
//! between nodes, and answers the operator's cluster commands. The rules
//! are pure and live in `rill-cluster` and `rill-handoff`; this crate is
//! their I/O.
//!
//! Invariants:
//! - the cluster state is on disk before it is gossiped;
//! - the task that drains the inbox never awaits a send (sends are
//!   spawned), so two nodes cannot wait on each other;
//! - a request to a node that becomes unreachable fails at once, so its
//!   coordinator answers by the replies it has.

mod admin;
pub mod detector;
mod error;
pub mod handoff;
mod holdings;
pub mod msg;
mod remote;
mod runtime;
mod store;

pub use admin::{join_address, AdminAnswer};
pub use error::{BadJoinTarget, StartError, StateError};
pub use rill_transport::FixedLink;
pub use runtime::{Peer, PeerConfig};
