//! The runtime: starts the transport, keeps the cluster state (on disk,
//! merged from gossip, stepped by the claimant's rules), pings the
//! members, tells the node which nodes are up, and dispatches what peers
//! send.

use crate::detector::Detector;
use crate::msg::PeerMsg;
use crate::store::StateFile;
use futures_util::FutureExt;
use rill_cluster::gossip::{Gossip, DEFAULT_REFILL_MS, DEFAULT_TOKENS};
use rill_cluster::{codec, ClusterState, Plan, Staged, Status};
use rill_node::cluster::{ClusterView, ReplyTx};
use rill_node::Node;
use rill_ring::Ring;
use rill_transport::{Incoming, Lane, LinkHook, SendError, Transport, TransportConfig};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// The runtime's settings (`rill`'s configuration file sets them).
#[derive(Clone)]
pub struct PeerConfig {
    /// `listener.cluster.internal`: where this node listens for peers.
    pub listen: SocketAddr,
    /// The address peers are told to reach this node at (port 0: the
    /// listener's port once bound); `None`: the listener's address.
    pub advertise: Option<SocketAddr>,
    /// Claim keeps this many consecutive partitions on distinct nodes
    /// (riak_core's `target_n_val`, 4).
    pub target_n_val: u32,
    /// Pings to every member at this interval.
    pub ping_interval: Duration,
    /// Silence before a node is suspected, and before it is unreachable.
    pub suspect_after: Duration,
    pub down_after: Duration,
    pub handoff: crate::handoff::HandoffConfig,
    /// Test only: delay and loss per link.
    pub hook: Option<Arc<dyn LinkHook>>,
}

impl PeerConfig {
    pub fn new(listen: SocketAddr) -> PeerConfig {
        PeerConfig {
            listen,
            advertise: None,
            target_n_val: 4,
            ping_interval: Duration::from_secs(1),
            suspect_after: Duration::from_secs(3),
            down_after: Duration::from_secs(6),
            handoff: Default::default(),
            hook: None,
        }
    }
}

/// Messages taken from the inbox before the small vnode requests among
/// them are sent to be served together (`Peer::inbox`).
const READS_TOGETHER: usize = 64;

/// Small vnode requests gathered to be served together, decoded.
type Reads = Vec<(
    String,
    rill_node::wire::Route,
    rill_node::vnode_msg::VnodeRequest,
)>;

/// A request sent to another node's vnode, waiting for its reply.
pub(crate) struct Pending {
    pub tag: usize,
    pub tx: ReplyTx,
    pub node: String,
    pub sent: Instant,
}

pub(crate) struct Inner {
    pub state: ClusterState,
    pub staged: Staged,
    pub plan: Option<Plan>,
    gossip: Gossip,
    pub detector: Detector,
    rng: u64,
    pub addrs: HashMap<String, SocketAddr>,
}

impl Inner {
    pub fn random(&mut self) -> u64 {
        // xorshift64*: the runtime's own randomness (the pure logic takes
        // it as a parameter).
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Members other than `me` that can be reached at an address.
    pub fn peers(&self, me: &str) -> Vec<String> {
        self.state
            .with_status(Status::is_member)
            .into_iter()
            .filter(|n| n != me && self.addrs.contains_key(n))
            .collect()
    }
}

pub struct Peer {
    pub(crate) node: Arc<Node>,
    pub(crate) me: String,
    pub(crate) cfg: PeerConfig,
    pub(crate) transport: Arc<Transport>,
    pub(crate) rt: tokio::runtime::Handle,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) pending: Mutex<HashMap<u64, Pending>>,
    /// Join and admin requests waiting for their answer.
    pub(crate) waiters: Mutex<HashMap<u64, oneshot::Sender<PeerMsg>>>,
    pub(crate) next_id: AtomicU64,
    file: StateFile,
    started: Instant,
    /// Bounds the vnode requests of peers served at once.
    serving: Arc<Semaphore>,
    pub(crate) handoffs: Mutex<crate::handoff::Handoffs>,
    pub(crate) handoff_cfg: crate::handoff::HandoffConfig,
    /// Serialises the storing of received handoff batches.
    pub(crate) handoff_store: Mutex<()>,
    pub handoff_stats: crate::handoff::HandoffStats,
}

fn now_ms(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

impl Peer {
    /// Starts the runtime of `node` on the current tokio runtime.
    pub async fn start(node: Arc<Node>, cfg: PeerConfig) -> Result<Arc<Peer>, String> {
        let me = node.nodename().to_string();
        let file = StateFile::new(&node.config().data_dir);
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32)
            | 1;
        let state = match file.load()? {
            Some(s) => {
                if s.ring_size() != node.ring_size() {
                    return Err(format!(
                        "the cluster's ring has {} partitions but ring_size is {}; set ring_size = {} (a node's ring size cannot change)",
                        s.ring_size(),
                        node.ring_size(),
                        s.ring_size()
                    ));
                }
                if s.status(&me).is_none() {
                    return Err(format!(
                        "the kept cluster state does not name this node ({me}); was nodename changed?"
                    ));
                }
                s
            }
            // A cluster of one, named so that another cluster's gossip is
            // never taken for this one's.
            None => ClusterState::new(&format!("{me}/{seed:016x}"), &me, node.ring_size()),
        };
        let mut tcfg = TransportConfig::new(&me, cfg.listen);
        tcfg.hook = cfg.hook.clone();
        let (transport, inbox) = Transport::start(tcfg)
            .await
            .map_err(|e| format!("cannot listen for peers on {}: {e}", cfg.listen))?;
        let started = Instant::now();
        let cfg_handoff = cfg.handoff.clone();
        let inner = Inner {
            state,
            staged: Staged::default(),
            plan: None,
            gossip: Gossip::new(DEFAULT_TOKENS, DEFAULT_REFILL_MS, 0),
            detector: Detector::new(
                cfg.suspect_after.as_millis() as u64,
                cfg.down_after.as_millis() as u64,
            ),
            rng: seed,
            addrs: HashMap::new(),
        };
        let peer = Arc::new(Peer {
            node: node.clone(),
            me: me.clone(),
            cfg,
            transport: transport.clone(),
            rt: tokio::runtime::Handle::current(),
            inner: Mutex::new(inner),
            pending: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            file,
            started,
            serving: Arc::new(Semaphore::new(64)),
            handoffs: Mutex::new(crate::handoff::Handoffs::new(cfg_handoff.transfer_limit)),
            handoff_cfg: cfg_handoff,
            handoff_store: Mutex::new(()),
            handoff_stats: Default::default(),
        });
        {
            let mut inner = peer.lock();
            let addr = peer.advertised().to_string();
            inner.state.set_address(&me, &addr);
            peer.changed(&mut inner)?;
        }
        node.attach_remote(Arc::new(crate::remote::Link::new(&peer)));
        tokio::spawn(Peer::inbox(Arc::downgrade(&peer), inbox));
        tokio::spawn(Peer::ticks(Arc::downgrade(&peer)));
        tokio::spawn(Peer::handoff_loop(Arc::downgrade(&peer)));
        tracing::info!(node = %me, cluster = %transport.local_addr(), advertised = %peer.advertised(), "cluster listener ready");
        Ok(peer)
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now(&self) -> u64 {
        now_ms(self.started)
    }

    /// Where this node listens for peers.
    pub fn local_addr(&self) -> SocketAddr {
        self.transport.local_addr()
    }

    /// Where peers are told to reach this node (`PeerConfig::advertise`).
    pub fn advertised(&self) -> SocketAddr {
        let bound = self.local_addr();
        match self.cfg.advertise {
            Some(a) if a.port() == 0 => SocketAddr::new(a.ip(), bound.port()),
            Some(a) => a,
            None => bound,
        }
    }

    /// The cluster state as this node knows it.
    pub fn state(&self) -> ClusterState {
        self.lock().state.clone()
    }

    pub(crate) fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The state changed here: the claimant's step, record having seen
    /// it, keep it on disk, tell the node and one peer.
    pub(crate) fn changed(&self, inner: &mut Inner) -> Result<(), String> {
        let before = inner.state.digest();
        for _ in 0..4 {
            let step = rill_cluster::step(&mut inner.state, &self.me, self.cfg.target_n_val);
            let saw = inner.state.see(&self.me);
            if !step.changed() && !saw {
                break;
            }
        }
        self.file
            .save(&inner.state)
            .map_err(|e| format!("cannot keep the cluster state on disk: {e}"))?;
        inner.addrs = inner
            .state
            .seen()
            .keys()
            .filter_map(|n| {
                let a = inner.state.address(n)?.parse().ok()?;
                Some((n.clone(), a))
            })
            .collect();
        // This node does not watch itself (it hears no pings from itself,
        // and is always up to itself).
        let mut members = inner.state.with_status(Status::is_member);
        members.retain(|n| *n != self.me);
        let now = self.now();
        inner.detector.track(&members, now);
        self.publish_view(inner);
        let peers = inner.peers(&self.me);
        let to: Vec<String> = if inner.state.digest() != before || inner.state.ring_ready() {
            // A new ring or membership (or the moment it is seen by all)
            // goes to everyone.
            inner
                .gossip
                .broadcast(&peers)
                .into_iter()
                .cloned()
                .collect()
        } else {
            let r = inner.random();
            inner
                .gossip
                .changed(&peers, r)
                .into_iter()
                .cloned()
                .collect()
        };
        for p in to {
            self.send_gossip(inner, &p);
        }
        Ok(())
    }

    /// Tells the node the ring and which nodes are up.
    pub(crate) fn publish_view(&self, inner: &Inner) {
        let now = self.now();
        let state = &inner.state;
        let Ok(ring) = Ring::new(state.owners().to_vec()) else {
            tracing::error!("the cluster state's ring is not a ring");
            return;
        };
        let reachable: BTreeSet<String> = inner.detector.reachable(now).into_iter().collect();
        let up = state
            .with_status(|s| {
                matches!(
                    s,
                    Status::Valid | Status::Leaving | Status::Exiting | Status::Joining
                )
            })
            .into_iter()
            .filter(|n| n == &self.me || reachable.contains(n))
            .collect();
        let moving: BTreeMap<u32, String> = state
            .ring()
            .next
            .iter()
            .map(|t| (t.partition, t.to.clone()))
            .collect();
        self.node.set_cluster_view(ClusterView {
            me: self.me.clone(),
            ring,
            up,
            moving,
        });
    }

    /// Sends this node's bucket types and properties to `to`.
    pub(crate) fn send_metadata(&self, inner: &Inner, to: &[String]) {
        if to.is_empty() {
            return;
        }
        let (json, _) = self.node.registry_json();
        let body = json.to_string().into_bytes();
        for p in to {
            self.send_to(inner, p, Lane::Control, PeerMsg::Metadata(body.clone()));
        }
    }

    pub(crate) fn send_gossip(&self, inner: &Inner, to: &str) {
        let msg = PeerMsg::Gossip(codec::encode(&inner.state));
        self.send_to(inner, to, Lane::Control, msg);
    }

    /// Sends without waiting (a task does), so no caller ever waits on a
    /// peer's queue while holding the state.
    pub(crate) fn send_to(&self, inner: &Inner, to: &str, lane: Lane, msg: PeerMsg) {
        if let Some(addr) = inner.addrs.get(to) {
            self.send_addr(*addr, lane, msg);
        }
    }

    pub(crate) fn send_addr(&self, addr: SocketAddr, lane: Lane, msg: PeerMsg) {
        self.send_bytes(addr, lane, msg.encode());
    }

    /// Sends a message already encoded: queued at once when the lane has
    /// room, else by a task that waits for it.
    pub(crate) fn send_bytes(&self, addr: SocketAddr, lane: Lane, msg: Vec<u8>) {
        self.send_bytes_or(addr, lane, msg, move |e| {
            tracing::debug!(%addr, error = %e, "a message to a peer was not sent");
        });
    }

    /// [`Peer::send_bytes`], calling `failed` if the message cannot be
    /// sent.
    pub(crate) fn send_bytes_or(
        &self,
        addr: SocketAddr,
        lane: Lane,
        msg: Vec<u8>,
        failed: impl FnOnce(SendError) + Send + 'static,
    ) {
        let msg = {
            let _in_runtime = self.rt.enter();
            match self.transport.try_send(addr, lane, msg.into()) {
                Ok(None) => return,
                Ok(Some(msg)) => msg,
                Err(e) => return failed(e),
            }
        };
        let t = self.transport.clone();
        self.rt.spawn(async move {
            if let Err(e) = t.send(addr, lane, msg).await {
                failed(e);
            }
        });
    }

    /// Takes what peers send, in order. A read a vnode answers without
    /// waiting (from memory or the page cache: `Backend::try_get`) is
    /// answered here at once. Other small vnode requests are gathered
    /// from what has arrived and served together on one blocking thread:
    /// one thread hand-off for many requests (measured on a 3-node devrel
    /// at 1 KiB, docs/benchmarks.md), and a request that must wait for the
    /// disk holds up only those gathered with it, never the inbox. At most
    /// 64 such batches run at once; past that the inbox waits (peers then
    /// wait on their queues: back-pressure), never the reverse.
    async fn inbox(peer: std::sync::Weak<Peer>, mut rx: mpsc::Receiver<Incoming>) {
        while let Some(first) = rx.recv().await {
            let Some(peer) = peer.upgrade() else { return };
            let mut reads = Vec::new();
            let mut next = Some(first);
            // Messages taken, not only requests gathered: reads answered
            // here must not keep a gathered write from its thread.
            let mut taken = 0;
            while let Some(m) = next.take() {
                // A message that makes its handling panic is dropped (its
                // coordinator times out), and the inbox goes on: one bad
                // message must not leave the node deaf to its peers.
                let from = m.from.clone();
                let took = std::panic::AssertUnwindSafe(peer.take(m, &mut reads))
                    .catch_unwind()
                    .await;
                if took.is_err() {
                    tracing::error!(from = %from, "handling a message from a peer panicked; the message was dropped");
                }
                taken += 1;
                if taken < READS_TOGETHER {
                    next = rx.try_recv().ok();
                }
            }
            if !reads.is_empty() {
                let Ok(permit) = peer.serving.clone().acquire_owned().await else {
                    return;
                };
                let p = peer.clone();
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    for (from, route, request) in reads {
                        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            p.serve_decoded(&from, route, request)
                        }));
                        if served.is_err() {
                            tracing::error!(from = %from, "serving a request of a peer panicked; the request was dropped");
                        }
                    }
                });
            }
        }
    }

    /// Takes one message; a small vnode request is left in `reads` to be
    /// served with others.
    async fn take(self: &Arc<Self>, m: Incoming, reads: &mut Reads) {
        // Vnode messages (which may carry large values) are read where
        // they lie, not copied out by `decode`.
        let msg = match crate::msg::vnode_kind(&m.data) {
            Some(false) => PeerMsg::VnodeRequest(Vec::new()),
            Some(true) => PeerMsg::VnodeReply(Vec::new()),
            None => match PeerMsg::decode(&m.data) {
                Ok(msg) => msg,
                Err(e) => {
                    tracing::warn!(from = %m.from, error = %e, "a malformed message from a peer was dropped");
                    return;
                }
            },
        };
        let body = m.data.slice(4.min(m.data.len())..);
        {
            let mut inner = self.lock();
            let now = self.now();
            if inner.detector.heard(&m.from, now) {
                tracing::info!(node = %m.from, "a node is reachable again");
                self.publish_view(&inner);
            }
        }
        match msg {
            PeerMsg::Ping => {}
            PeerMsg::Gossip(b) => self.gossip_in(&m.from, &b),
            PeerMsg::VnodeRequest(_) if body.len() > rill_node::bulk::BULK_BYTES => {
                // A large value: served by the node's bulk pool (lower CPU
                // priority, a few at once), queued there without holding
                // the inbox, so small requests and replies behind it go on.
                let peer = self.clone();
                let from = m.from.clone();
                let expiry = self.node.bulk_serve_expiry();
                let job = body.clone();
                let queued = self.node.bulk_serve().spawn(body.len(), move |waited| {
                    if waited <= expiry {
                        peer.serve(&from, &job);
                    } else {
                        peer.refuse(&from, &job, "a replica write waited too long; retry");
                    }
                });
                if queued.is_err() {
                    self.refuse(&m.from, &body, "the replica is overloaded; retry");
                }
            }
            PeerMsg::VnodeRequest(_) => {
                if let Some((route, request)) = self.try_serve(&m.from, &body) {
                    reads.push((m.from.clone(), route, request));
                }
            }
            PeerMsg::VnodeReply(_) => self.reply_in(&body),
            PeerMsg::Handoff(b) => self.handoff_in(&m.from, &b),
            PeerMsg::Metadata(b) => {
                let node = self.node.clone();
                let from = m.from.clone();
                // Merging writes buckets.json: off the inbox task.
                tokio::task::spawn_blocking(move || {
                    let merged = serde_json::from_slice(&b)
                        .map_err(|e| e.to_string())
                        .and_then(|v| node.merge_registry(&v).map_err(|e| e.to_string()));
                    if let Err(e) = merged {
                        tracing::warn!(from = %from, error = %e, "a peer's bucket types were not taken in");
                    }
                });
            }
            PeerMsg::JoinAsk { id, addr } => {
                let Ok(addr) = addr.parse::<SocketAddr>() else {
                    tracing::warn!(from = %m.from, "a join ask without a usable address");
                    return;
                };
                let state = codec::encode(&self.lock().state);
                self.send_addr(addr, Lane::Control, PeerMsg::JoinState { id, state });
            }
            msg @ (PeerMsg::JoinState { .. } | PeerMsg::AdminReply { .. }) => {
                let id = match &msg {
                    PeerMsg::JoinState { id, .. } | PeerMsg::AdminReply { id, .. } => *id,
                    _ => unreachable!("matched above"),
                };
                let w = self
                    .waiters
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                if let Some(w) = w {
                    let _ = w.send(msg);
                }
            }
            PeerMsg::AdminRequest { id, json } => {
                let answer = self.admin_here(&json);
                let inner = self.lock();
                self.send_to(
                    &inner,
                    &m.from,
                    Lane::Control,
                    PeerMsg::AdminReply { id, json: answer },
                );
            }
        }
    }

    fn gossip_in(&self, from: &str, b: &[u8]) {
        let theirs = match codec::decode(b) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(from, error = %e, "gossip that does not decode was dropped");
                return;
            }
        };
        let mut inner = self.lock();
        match inner.state.merge(&theirs) {
            Ok(true) => {
                if let Err(e) = self.changed(&mut inner) {
                    tracing::error!(error = %e, "the cluster state changed but was not kept");
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(from, error = %e, "gossip from another cluster was refused");
                return;
            }
        }
        // The sender lacks something this node knows: it gets this
        // node's state back at once (riak_core_gossip's reconcile), so
        // a change reaches everyone and is seen in a few round trips.
        if inner.state != theirs {
            self.send_gossip(&inner, from);
        }
    }

    async fn handoff_loop(peer: std::sync::Weak<Peer>) {
        let mut every = tokio::time::interval(Duration::from_millis(500));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(peer) = peer.upgrade() else { return };
            // Listing keys and checking partitions read the disk.
            let p = peer.clone();
            if tokio::task::spawn_blocking(move || p.handoff_round())
                .await
                .is_err()
            {
                tracing::error!("a handoff round panicked");
            }
        }
    }

    async fn ticks(peer: std::sync::Weak<Peer>) {
        let mut every = tokio::time::interval(Duration::from_millis(250));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_ping = 0u64;
        let mut reachable: Vec<String> = Vec::new();
        let mut metadata_sent = 0u64;
        let mut told: std::collections::BTreeSet<String> = Default::default();
        loop {
            every.tick().await;
            let Some(peer) = peer.upgrade() else { return };
            let now = peer.now();
            let mut inner = peer.lock();
            let peers = inner.peers(&peer.me);
            if now.saturating_sub(last_ping) >= peer.cfg.ping_interval.as_millis() as u64 {
                last_ping = now;
                for p in &peers {
                    peer.send_to(&inner, p, Lane::Control, PeerMsg::Ping);
                }
            }
            let r = inner.random();
            if let Some(to) = inner.gossip.tick(now, &peers, r).cloned() {
                peer.send_gossip(&inner, &to);
                peer.send_metadata(&inner, &[to]);
            }
            // Bucket types and properties changed here: every peer is
            // told (they merge entry by entry).
            let (_, version) = peer.node.registry_json();
            if version != metadata_sent {
                metadata_sent = version;
                peer.send_metadata(&inner, &peers);
            } else {
                // A peer seen for the first time gets it at once.
                let new: Vec<String> = peers
                    .iter()
                    .filter(|p| !told.contains(*p))
                    .cloned()
                    .collect();
                peer.send_metadata(&inner, &new);
            }
            told = peers.iter().cloned().collect();
            let now_reachable = inner.detector.reachable(now);
            if now_reachable != reachable {
                for n in reachable.iter().filter(|n| !now_reachable.contains(n)) {
                    tracing::warn!(node = %n, "a node is unreachable: its replicas go to fallbacks");
                }
                reachable = now_reachable;
                peer.publish_view(&inner);
            }
            drop(inner);
            peer.fail_pending_of_unreachable();
        }
    }
}
