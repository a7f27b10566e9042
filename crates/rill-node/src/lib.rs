//! A Rill node, network aside: one vnode per partition of the ring, each
//! with its own backend; requests coordinated through preference lists
//! with Riak's quorum rules (R, W, PR, PW, DW, notfound_ok, basic_quorum),
//! so the cluster only adds remote vnodes; bucket types; list buckets and
//! keys; secondary index queries; convergent data types; backend
//! migration (`migrate`: the node's data moved to another storage
//! backend while it serves, not partitions moved between nodes).
//!
//! Invariants:
//! - a put is acknowledged only when W replicas (DW durable) hold it;
//! - writes to one key on one vnode are serialised (read, merge, write
//!   under a striped lock), so concurrent writers never lose a sibling;
//! - bucket types and properties are on disk before a change returns.
//!
//! Its parts, each a struct holding what it needs, none importing the
//! node (`Node` opens them and answers for them):
//! - `vnode`: one partition's replica (its backend, identity and key
//!   epochs, the requests it answers); `vnodes`: this node's vnodes and
//!   what they share (limits, disk space), reached by other nodes and by
//!   handoff;
//! - `replicas`: a key's replicas, here and through the cluster runtime;
//! - `buckets`: bucket types and properties; `params`: a request's
//!   parameters resolved against them;
//! - `coordinate`: clients' gets, puts, deletes and data-type operations
//!   run through `rill-coord`'s machines, and the reaping of tombstones;
//! - `query`: listings and index queries over a covering set of vnodes;
//! - `aae`: active anti-entropy (the vnodes keep the trees; this part
//!   builds them, runs the exchanges and repairs);
//! - `migrate`: a backend migration; `backends`: opening the stores;
//!   `stats`: the counters of `/stats`; `wire`: the messages between
//!   nodes.

mod aae;
mod backends;
mod buckets;
pub mod bulk;
mod config;
mod coordinate;
pub mod error;
mod free_space;
mod ids;
mod meta;
mod migrate;
mod node;
mod open_error;
mod params;
mod query;
pub mod replicas;
mod space;
mod stats;
#[cfg(test)]
mod testing;
pub mod vnode;
mod vnodes;
pub mod wire;

pub use aae::{Aae, FoldAnswer, FoldQuery, TreeStatus};
pub use backends::{check_leveldb, BackendsError, LeveldbCheck};
pub use buckets::Buckets;
pub use config::{
    BackendKind, DeleteMode, MergePolicyKind, NamedBackend, NodeConfig, TictacConfig,
};
pub use coordinate::dt::{DtFetchAnswer, DtFetchRequest, DtUpdateAnswer, DtUpdateRequest};
pub use coordinate::kv::{
    DeleteAnswer, DeleteRequest, GetAnswer, GetRequest, PutAnswer, PutRequest,
};
pub use error::{erl_bin, KvError, StorageFailure};
pub use meta::MetaError;
pub use migrate::{CopyError, MigrateError, MigrationStatus, RecordError};
pub use node::{Node, NodeCalls};
pub use open_error::OpenError;
#[doc(hidden)]
pub use query::index::{decode_continuation, encode_continuation};
pub use query::index::{IndexAnswer, IndexHit, IndexPlan, IndexRequest, IndexSpec, INDEX_BATCH};
pub use query::summaries::{magnitude, KeyFold, KeyFoldAnswer, KeyFoldKind, ObjectStats};
pub use rill_backend::{BKey, Term};
pub use rill_bucket::{Props, Quorum, TypeStatus};
pub use rill_coord::QuorumError;
pub use rill_crdt as crdt;
pub use rill_object::{decode_object, encode_object, Content, Link, Metadata, Object, VClock};
pub use stats::{AaeStats, NodeStats};
pub use vnode::identity::IdentityError;
pub use vnode::standalone::StandaloneVnodes;
pub use vnodes::{SensorHandler, Vnodes};

/// A fresh multipart boundary (base 62, unique).
pub fn ids_boundary() -> String {
    String::from_utf8(ids::vtag()).expect("base62 is ascii")
}
