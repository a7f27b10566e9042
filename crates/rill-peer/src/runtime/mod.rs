//! The runtime: starts the transport, keeps the cluster state (on disk,
//! merged from gossip, stepped by the claimant's rules), pings the
//! members, tells the node which nodes are up, and dispatches what peers
//! send.
//!
//! The parts: `gossip` (the cluster state after a change, the node's
//! view, gossip and bucket types to and from peers), `send` (messages
//! out, never waited on), `inbox` (what peers send, taken in order) and
//! `ticks` (the periodic loops: pings, gossip, failure detection, the
//! handoff round).

mod backlog;
mod gossip;
mod inbox;
mod send;
mod ticks;

use crate::detector::Detector;
use crate::msg::PeerMsg;
use crate::store::StateFile;
use crate::StartError;
use rill_cluster::gossip::{Gossip, DEFAULT_REFILL_MS, DEFAULT_TOKENS};
use rill_cluster::{ClusterState, Plan, Staged, Status};
use rill_node::replicas::ReplyTx;
use rill_node::Node;
use rill_transport::{LinkHook, Transport, TransportConfig};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{oneshot, Semaphore};

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

/// A request sent to another node's vnode, waiting for its reply.
pub(crate) struct Pending {
    pub tag: usize,
    pub tx: ReplyTx,
    pub node: String,
    pub sent: Instant,
    /// For a `Coordinate` request: whether the replica's node said it
    /// took it (`VnodeReply::Accepted`). `None`: another request.
    pub accepted: Option<bool>,
}

impl Pending {
    /// Whether the request may have been carried out when its node is
    /// lost before answering: a coordination the node never took was
    /// not, and another replica may coordinate in its place.
    pub fn may_have_run(&self) -> bool {
        self.accepted.unwrap_or(true)
    }
}

pub(crate) struct Inner {
    pub state: ClusterState,
    pub staged: Staged,
    pub plan: Option<Plan>,
    gossip: Gossip,
    pub detector: Detector,
    rng: u64,
    pub addrs: HashMap<String, SocketAddr>,
    /// The partitions each node (this one too) last said it holds data of
    /// (`holdings`; which it does not own, this node's ring says).
    pub holdings: std::collections::BTreeMap<String, rill_handoff::holdings::Report>,
    /// The claimant's context at its last step: a change of it (the
    /// claimant silent too long, a member's holdings gone) runs the
    /// step again.
    pub last_cx: rill_cluster::Context,
    /// The owners of the ring as this node last saw them, and when each
    /// node last stopped owning a partition (this node's clock): writes
    /// in flight then may still land on it.
    pub last_owners: Vec<String>,
    pub released_ms: std::collections::BTreeMap<String, u64>,
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
    pub(crate) started: Instant,
    /// Bounds the vnode requests of peers served at once.
    serving: Arc<Semaphore>,
    /// Sends waiting for room in a full lane (`send`, `backlog`).
    pub(crate) backlogs: Arc<Mutex<backlog::Backlogs>>,
    /// How many backlogs exist (`Backlogs::queues`).
    pub(crate) backlog_queues: Arc<std::sync::atomic::AtomicUsize>,
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
    pub async fn start(node: Arc<Node>, cfg: PeerConfig) -> Result<Arc<Peer>, StartError> {
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
                    return Err(StartError::RingSize {
                        kept: s.ring_size(),
                        configured: node.ring_size(),
                    });
                }
                if s.status(&me).is_none() {
                    return Err(StartError::NotNamed { node: me });
                }
                s
            }
            // A cluster of one, named so that another cluster's gossip is
            // never taken for this one's.
            None => ClusterState::new(&format!("{me}/{seed:016x}"), &me, node.ring_size()),
        };
        let mut tcfg = TransportConfig::new(&me, cfg.listen);
        tcfg.hook = cfg.hook.clone();
        let (transport, inbox) =
            Transport::start(tcfg)
                .await
                .map_err(|source| StartError::Listen {
                    addr: cfg.listen,
                    source,
                })?;
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
            holdings: Default::default(),
            last_cx: Default::default(),
            last_owners: Vec::new(),
            released_ms: Default::default(),
        };
        let backlogs = backlog::Backlogs::new(backlog::BACKLOG_BYTES);
        let backlog_queues = backlogs.queues();
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
            backlogs: Arc::new(Mutex::new(backlogs)),
            backlog_queues,
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
        if let Some(events) = transport.take_events() {
            tokio::spawn(Peer::watch_links(Arc::downgrade(&peer), events));
        }
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
}
