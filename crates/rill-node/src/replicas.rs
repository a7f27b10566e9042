//! A key's replicas and how to reach them: what the node needs of its
//! cluster, and nothing more: the ring as the cluster state last said,
//! which nodes are reachable, this node's vnodes, and a way to ask a vnode
//! of another node. The cluster runtime (`rill-peer`) keeps the view
//! current and carries the messages; without it the node is a cluster of
//! one and every replica is its own.

use crate::vnode::msg::{VnodeReply, VnodeRequest};
use crate::vnodes::Vnodes;
use rill_ring::{key_hash, PreflistEntry, Ring};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// Where replies of replicas go: each tagged with the index of the
/// replica in the request's preference list.
pub type ReplyTx = UnboundedSender<(usize, VnodeReply)>;

/// Where a coordinator receives its replicas' replies.
pub(crate) type Replies = UnboundedReceiver<(usize, VnodeReply)>;

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

    /// While primary `e`'s partition is being handed to a new owner, the
    /// replica there that takes `e`'s writes too (not counted for W, as
    /// riak_core forwards them), so nothing written during the handoff is
    /// missing there at the switch; `None` when it is not moving, `e` is
    /// a fallback, or the next owner is down (handoff carries it).
    pub fn next_owner(&self, e: &PreflistEntry) -> Option<PreflistEntry> {
        let next = self.moving.get(&e.partition.0)?;
        if !e.primary || next == &e.node || !self.is_up(next) {
            return None;
        }
        Some(PreflistEntry {
            partition: e.partition,
            node: next.clone(),
            primary: false,
        })
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
    /// Whether a tombstone on `partitions` may be reaped now: every
    /// member is reachable, none of the partitions is moving, and no node
    /// but their owners holds data of them, as each member reported since
    /// `asked`.
    fn may_reap(&self, partitions: &[u32], asked: Instant) -> bool;
}

/// The preference list as the coordination machines see it: each
/// replica primary or fallback, on its node (numbered in order of first
/// appearance).
pub(crate) fn as_replicas(preflist: &[PreflistEntry]) -> Vec<rill_coord::Replica> {
    let mut nodes: Vec<&str> = Vec::new();
    preflist
        .iter()
        .map(|e| {
            let node = match nodes.iter().position(|n| *n == e.node) {
                Some(i) => i,
                None => {
                    nodes.push(&e.node);
                    nodes.len() - 1
                }
            };
            rill_coord::Replica {
                primary: e.primary,
                node: node as u32,
            }
        })
        .collect()
}

/// Distinct nodes of a preference list.
pub(crate) fn distinct_nodes(preflist: &[PreflistEntry]) -> u32 {
    let mut nodes: Vec<&str> = preflist.iter().map(|e| e.node.as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len() as u32
}

/// A key's replicas: this node's vnodes and, through the cluster
/// runtime, other nodes' (a cluster of one until the runtime attaches).
pub(crate) struct Replicas {
    me: String,
    pub vnodes: Arc<Vnodes>,
    /// The cluster as the runtime last said.
    view: RwLock<Arc<ClusterView>>,
    remote: OnceLock<Arc<dyn Remote>>,
}

impl Replicas {
    pub fn new(me: &str, vnodes: Arc<Vnodes>, view: ClusterView) -> Replicas {
        Replicas {
            me: me.to_string(),
            vnodes,
            view: RwLock::new(Arc::new(view)),
            remote: OnceLock::new(),
        }
    }

    /// The cluster as last set (a cluster of one until the runtime says
    /// otherwise).
    pub fn view(&self) -> Arc<ClusterView> {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The cluster runtime's new view (ring, reachable nodes, transfers).
    pub fn set_view(&self, view: ClusterView) {
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
    }

    /// Connects to the cluster runtime (once).
    pub fn attach_remote(&self, remote: Arc<dyn Remote>) {
        let _ = self.remote.set(remote);
    }

    pub fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.remote.get()
    }

    pub fn is_local(&self, e: &PreflistEntry) -> bool {
        e.node == self.me
    }

    /// The preference list of a key for `n` replicas: primaries whose
    /// node is up, then fallbacks for those that are not (Riak's sloppy
    /// quorum).
    pub fn preflist(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        key: &[u8],
        n: u32,
    ) -> Vec<PreflistEntry> {
        self.preflist_avoiding(bucket_type, bucket, key, n, &[])
    }

    /// [`Replicas::preflist`] with the nodes of `avoid` taken for down
    /// (they could not be reached by this request).
    pub fn preflist_avoiding(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        key: &[u8],
        n: u32,
        avoid: &[String],
    ) -> Vec<PreflistEntry> {
        let h = key_hash(bucket_type, bucket, key);
        let view = self.view();
        let up = |node: &str| view.is_up(node) && !avoid.iter().any(|a| a == node);
        view.ring.preflist(&h, n, up, true)
    }

    /// Asks replica `e` (tagged `tag`): a vnode of this node answers at
    /// once; another node's answers later on `tx`.
    pub fn ask(
        &self,
        e: &PreflistEntry,
        request: VnodeRequest,
        tag: usize,
        tx: &ReplyTx,
    ) -> Option<VnodeReply> {
        if self.is_local(e) {
            return Some(self.vnodes.handle(e, request));
        }
        match self.remote() {
            Some(r) => {
                r.call(&e.node, e.partition.0, request, tag, tx.clone());
                None
            }
            None => Some(VnodeReply::Failed(crate::KvError::Unreachable {
                node: e.node.clone(),
                why: ": this node has no cluster runtime".into(),
                sent: false,
            })),
        }
    }

    /// Asks each replica its request at once and waits, on a thread that
    /// may block, for every answer, in the order asked; `None` when
    /// `deadline` passes or `keep_going` says to stop first (looked at
    /// every 200 ms).
    pub fn ask_all(
        &self,
        asks: Vec<(PreflistEntry, VnodeRequest)>,
        deadline: Instant,
        keep_going: impl Fn() -> bool,
    ) -> Option<Vec<VnodeReply>> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut got: Vec<Option<VnodeReply>> = asks
            .into_iter()
            .enumerate()
            .map(|(tag, (e, request))| self.ask(&e, request, tag, &tx))
            .collect();
        while got.iter().any(Option::is_none) {
            let now = Instant::now();
            if now >= deadline || !keep_going() {
                return None;
            }
            let slice = deadline.min(now + std::time::Duration::from_millis(200));
            if let Some((tag, r)) = self.wait(&mut rx, slice) {
                if let Some(slot) = got.get_mut(tag) {
                    *slot = Some(r);
                }
            }
        }
        Some(got.into_iter().flatten().collect())
    }

    /// [`Remote::may_reap`]; in a cluster of one, every replica is here.
    pub fn may_reap(&self, partitions: &[u32], asked: Instant) -> bool {
        self.remote().is_none_or(|r| r.may_reap(partitions, asked))
    }

    /// Waits for the reply of one request to another node.
    pub fn wait_one(&self, rx: &mut Replies, deadline: Instant) -> Option<VnodeReply> {
        self.wait(rx, deadline).map(|(_, r)| r)
    }

    /// Waits, on a thread that may block, for the next reply of another
    /// node until `deadline`.
    pub fn wait(&self, rx: &mut Replies, deadline: Instant) -> Option<(usize, VnodeReply)> {
        let remote = self.remote()?;
        let deadline = tokio::time::Instant::from_std(deadline);
        remote
            .runtime()
            .block_on(async { tokio::time::timeout_at(deadline, rx.recv()).await })
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::BackendKind;
    use crate::testing::{node, put_v};
    use crate::vnode::msg::{VnodeReply, VnodeRequest};

    /// A read served without waiting answers as one served on a thread
    /// that may block; other requests are never served that way.
    fn reads_answer_alike(backend: BackendKind) {
        let dir = tempfile::tempdir().unwrap();
        let n = node(dir.path(), backend);
        put_v(&n);
        let pl = n.preflist(b"", b"b", b"k", 3);
        let mut answered = 0;
        for key in [
            crate::vnode::bkey(b"", b"b", b"k"),
            crate::vnode::bkey(b"", b"b", b"none"),
        ] {
            for e in &pl {
                let p = e.partition.0;
                for request in [
                    VnodeRequest::Get { key: key.clone() },
                    VnodeRequest::Head { key: key.clone() },
                ] {
                    let Some(quick) = n.vnodes().try_serve(p, &request) else {
                        continue;
                    };
                    answered += 1;
                    let slow = n.vnodes().serve(p, request);
                    assert_eq!(format!("{quick:?}"), format!("{slow:?}"));
                    assert!(matches!(quick, VnodeReply::Found(_)), "{quick:?}");
                }
            }
        }
        // Just written: memory, the write buffer or the page cache.
        assert!(answered > 0);
        let reap = VnodeRequest::Reap {
            key: crate::vnode::bkey(b"", b"b", b"k"),
            clock: Default::default(),
        };
        assert!(n.vnodes().try_serve(pl[0].partition.0, &reap).is_none());
        assert!(n
            .vnodes()
            .try_serve(
                999,
                &VnodeRequest::Get {
                    key: crate::vnode::bkey(b"", b"b", b"k")
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
