//! Why the cluster runtime could not start, or a command could not be
//! taken.

use std::net::SocketAddr;

/// Why [`crate::Peer::start`] refused to start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error(
        "the cluster's ring has {kept} partitions but ring_size is {configured}; \
         set ring_size = {kept} (a node's ring size cannot change)"
    )]
    RingSize { kept: u32, configured: u32 },
    #[error("the kept cluster state does not name this node ({node}); was nodename changed?")]
    NotNamed { node: String },
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot listen for peers on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why the kept cluster state (`meta/cluster.state`) could not be read
/// or written.
/// A state that does not decode stops the node: starting afresh would
/// make it a cluster of its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error(
        "the cluster state in meta/cluster.state cannot be read ({0}); restore it from a \
         backup, or remove it to start as a cluster of one"
    )]
    Damaged(#[source] rill_cluster::codec::CodecError),
    #[error("cannot read meta/cluster.state: {0}")]
    Read(#[source] std::io::Error),
    #[error("cannot keep the cluster state on disk: {0}")]
    Write(#[source] std::io::Error),
}

/// `cluster join` was given something that names no address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Failed: cannot find an address in {target:?}; give the member's cluster listener as host:port"
)]
pub struct BadJoinTarget {
    pub target: String,
}
