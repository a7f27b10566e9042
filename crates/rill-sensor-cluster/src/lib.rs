//! The sensor-data service on the ring (docs/sensors.md, "On a
//! cluster"): the sensor-data paper's "collection port at every Riak
//! node" (section 6), where every node takes samples and answers
//! queries for the whole cluster.
//!
//! - [`route`]: a write placed on the ring, pure: each series' home
//!   partition (by its group's key), the nodes of each home's
//!   preference list (Riak's sloppy quorum), and when the write is
//!   acknowledged (W distinct nodes for every home).
//! - [`msg`]: what nodes send each other (inside the vnode message's
//!   `Sensor` payload), fuzzed.
//! - [`merge`]: several replicas' answers made one, pure, and whether
//!   an answer may lack samples;
//! - [`digest_read`]: a select as a digest read: a replica's digests of
//!   what it holds (kept anti-entropy digests where it has them) and
//!   what the asker fetches, pure;
//! - [`service`]: [`SensorCluster`], the I/O: writes sent and
//!   acknowledged;
//! - `read`: selects (digest reads), key and database listings asked
//!   of every node and merged;
//! - [`replica`]: this node's answers to the others;
//! - [`handoff`]: what this node holds but does not own, sent to the
//!   owners and dropped;
//! - [`exchange`]: anti-entropy, the replicas of a home partition
//!   comparing digests of its slices of time and sending each other
//!   what differs.
//!
//! Invariants:
//! - a write is acknowledged only once, for every home partition it
//!   touches, `min(w, distinct nodes of the list)` nodes have its
//!   samples in their write-ahead logs (as durable as
//!   `sensor.sync_on_write` makes them);
//! - a node holds a series' samples once however many replicas of its
//!   partition it serves;
//! - an answer that may lack acknowledged samples says so (`partial`).

pub mod digest_read;
pub mod exchange;
pub mod handoff;
pub mod merge;
pub mod msg;
mod read;
pub mod replica;
pub mod route;
pub mod service;
mod source;

pub use replica::Replica;
pub use service::{Replication, Selected, SensorCluster, WriteError};
pub use source::ClusterSource;
