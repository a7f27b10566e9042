//! What the node needs of its cluster, and nothing more: the ring as the
//! cluster state last said, which nodes are reachable, and a way to ask a
//! vnode of another node. The cluster runtime (`rill-peer`) keeps the view
//! current and carries the messages; without it the node is a cluster of
//! one and every replica is its own.

use crate::node::Node;
use crate::vnode_msg::{VnodeReply, VnodeRequest};
use rill_ring::{PreflistEntry, Ring};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// Where replies of replicas go: each tagged with the index of the
/// replica in the request's preference list.
pub type ReplyTx = UnboundedSender<(usize, VnodeReply)>;

/// The cluster as the node sees it.
#[derive(Clone, Debug)]
pub struct ClusterView {
    /// This node's name.
    pub me: String,
    pub ring: Ring,
    /// Nodes believed reachable (this one always).
    pub up: BTreeSet<String>,
    /// Partitions being handed to a new owner: partition to the next
    /// owner. Writes reach both until the owner changes.
    pub moving: BTreeMap<u32, String>,
}

impl ClusterView {
    /// A cluster of one: `me` owns every partition.
    pub fn single(me: &str, ring_size: u32) -> Result<ClusterView, rill_ring::RingError> {
        Ok(ClusterView {
            me: me.to_string(),
            ring: Ring::single(ring_size, me)?,
            up: BTreeSet::from([me.to_string()]),
            moving: BTreeMap::new(),
        })
    }

    pub fn is_up(&self, node: &str) -> bool {
        node == self.me || self.up.contains(node)
    }
}

/// Carries vnode requests to other nodes (implemented by the cluster
/// runtime over the transport).
pub trait Remote: Send + Sync {
    /// Sends `request` to `partition`'s vnode on `node`; its reply, or a
    /// `Failed` when it cannot be sent, arrives on `tx` tagged `tag`.
    /// Never blocks.
    fn call(&self, node: &str, partition: u32, request: VnodeRequest, tag: usize, tx: ReplyTx);
    /// The runtime on which a coordinator waits for replies and finishes
    /// the work left after answering its client.
    fn runtime(&self) -> &tokio::runtime::Handle;
}

impl Node {
    /// The cluster as last set (a cluster of one until the runtime says
    /// otherwise).
    pub fn cluster_view(&self) -> Arc<ClusterView> {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The cluster runtime's new view (ring, reachable nodes, transfers).
    pub fn set_cluster_view(&self, view: ClusterView) {
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
    }

    /// Connects the node to its cluster runtime (once).
    pub fn attach_remote(&self, remote: Arc<dyn Remote>) {
        let _ = self.remote.set(remote);
    }

    pub(crate) fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.remote.get()
    }

    pub(crate) fn is_local(&self, e: &PreflistEntry) -> bool {
        e.node == self.config.nodename
    }

    /// A request of another node's coordinator for one of this node's
    /// vnodes.
    pub fn serve(&self, partition: u32, request: VnodeRequest) -> VnodeReply {
        let Some(vnode) = self.vnodes.get(partition as usize) else {
            return VnodeReply::Failed(crate::KvError::Backend(format!(
                "no partition {partition} on this node's ring"
            )));
        };
        let reply = vnode.handle(request, &self.limits);
        if let VnodeReply::Failed(crate::KvError::OutOfSpace { .. }) = &reply {
            self.disk_full();
        }
        reply
    }

    /// [`Node::serve`] for a read the vnode can answer without waiting
    /// (from memory or the page cache); `None` when it would wait or is
    /// not a read: then `serve` it on a thread that may block.
    pub fn try_serve(&self, partition: u32, request: &VnodeRequest) -> Option<VnodeReply> {
        if !self.quick_reads.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.vnodes.get(partition as usize)?.try_handle(request)
    }

    /// Asks replica `e` (tagged `tag`): a vnode of this node answers at
    /// once; another node's answers later on `tx`.
    pub(crate) fn ask(
        &self,
        e: &PreflistEntry,
        request: VnodeRequest,
        tag: usize,
        tx: &ReplyTx,
    ) -> Option<VnodeReply> {
        if self.is_local(e) {
            return Some(self.vnode(e).handle(request, &self.limits));
        }
        match self.remote() {
            Some(r) => {
                r.call(&e.node, e.partition.0, request, tag, tx.clone());
                None
            }
            None => Some(VnodeReply::Failed(crate::KvError::Backend(format!(
                "{} is not reachable from this node",
                e.node
            )))),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::BackendKind;
    use crate::testing::{node, put_v};
    use crate::vnode_msg::{VnodeReply, VnodeRequest};
    use crate::Node;

    /// A read served without waiting answers as one served on a thread
    /// that may block; other requests are never served that way.
    fn reads_answer_alike(backend: BackendKind) {
        let dir = tempfile::tempdir().unwrap();
        let n = node(dir.path(), backend);
        put_v(&n);
        let pl = n.preflist(b"", b"b", b"k", 3);
        let mut answered = 0;
        for key in [Node::bkey(b"", b"b", b"k"), Node::bkey(b"", b"b", b"none")] {
            for e in &pl {
                let p = e.partition.0;
                for request in [
                    VnodeRequest::Get { key: key.clone() },
                    VnodeRequest::Head { key: key.clone() },
                ] {
                    let Some(quick) = n.try_serve(p, &request) else {
                        continue;
                    };
                    answered += 1;
                    let slow = n.serve(p, request);
                    assert_eq!(format!("{quick:?}"), format!("{slow:?}"));
                    assert!(matches!(quick, VnodeReply::Found(_)), "{quick:?}");
                }
            }
        }
        // Just written: memory, the write buffer or the page cache.
        assert!(answered > 0);
        let reap = VnodeRequest::Reap {
            key: Node::bkey(b"", b"b", b"k"),
            clock: Default::default(),
        };
        assert!(n.try_serve(pl[0].partition.0, &reap).is_none());
        assert!(n
            .try_serve(
                999,
                &VnodeRequest::Get {
                    key: Node::bkey(b"", b"b", b"k")
                }
            )
            .is_none());
    }

    #[test]
    fn reads_served_without_waiting_answer_as_served_reads() {
        reads_answer_alike(BackendKind::Memory);
        reads_answer_alike(BackendKind::Bitcask);
    }
}
