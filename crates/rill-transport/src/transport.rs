//! The transport of one node: a listener for its peers' connections, and
//! one writer per (peer, lane) made on first use.

use crate::lane::Lane;
use crate::send::{self, Outgoing};
use bytes::Bytes;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A message from a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    /// The sender's node name, as its hello said.
    pub from: String,
    pub lane: Lane,
    pub data: Bytes,
}

/// A change in a link seen by the transport, for the failure detector:
/// a node whose connections close or refuse is down now, not after a
/// silence (as Riak notices a dead node when its distribution
/// connection closes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// The last open connection from this node (its hello's name, all
    /// lanes) ended: it stopped, crashed, or dropped its connections.
    Closed(String),
    /// A connect to this address was refused or timed out.
    Refused(SocketAddr),
}

/// Link events waiting for the runtime at most; more are dropped (the
/// detector's silence rule still finds the node).
const EVENTS: usize = 1024;

pub(crate) type Events = mpsc::Sender<LinkEvent>;

/// Bytes this node's transport wrote to its peers and read from them
/// (frames with their headers, every lane), for the stats and for a
/// benchmark's network bytes per sample.
#[derive(Debug, Default)]
pub struct Traffic {
    pub(crate) sent: AtomicU64,
    pub(crate) received: AtomicU64,
}

impl Traffic {
    pub fn sent_bytes(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
    pub fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

/// What the test hook does to a message on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Deliver,
    /// Send it this much later (a link's one-way delay).
    Delay(Duration),
    /// Lose it.
    Drop,
}

/// For tests and benchmarks only (this kernel has no `netem`): decides,
/// per message, whether the link to `to` delivers it, late or at all.
pub trait LinkHook: Send + Sync {
    fn verdict(&self, to: SocketAddr, lane: Lane, bytes: usize) -> Verdict;
}

#[derive(Clone)]
pub struct TransportConfig {
    /// This node's name, sent in every hello.
    pub name: String,
    pub listen: SocketAddr,
    /// Messages waiting per (peer, lane) before a sender waits.
    pub queue_messages: usize,
    /// Messages from all peers waiting for the node before readers stop
    /// reading.
    pub inbox_messages: usize,
    /// The largest message sent or accepted.
    pub max_message_bytes: usize,
    /// Test only: delay and loss per message.
    pub hook: Option<Arc<dyn LinkHook>>,
    /// Threads that move the background lanes (bulk values, handoff) at
    /// a lower CPU priority (nice +10), so the copying of large values in
    /// and out of the kernel yields the CPU to small requests; 0: they run
    /// with the rest.
    pub background_threads: usize,
}

impl TransportConfig {
    pub fn new(name: &str, listen: SocketAddr) -> TransportConfig {
        TransportConfig {
            name: name.to_string(),
            listen,
            queue_messages: 64,
            inbox_messages: 1024,
            max_message_bytes: 256 << 20,
            hook: None,
            background_threads: 2,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    #[error("a message of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("the link to {0} is closed")]
    Closed(SocketAddr),
    #[error("{0} cannot be reached (its last connect failed); try again later")]
    Unreachable(SocketAddr),
    /// The caller's bound on sends waiting for room was reached: the link
    /// to this peer is overloaded.
    #[error("the link to {0} is overloaded; try again later")]
    Overloaded(SocketAddr),
}

type Links = HashMap<(SocketAddr, Lane), mpsc::Sender<Outgoing>>;

pub struct Transport {
    config: TransportConfig,
    local: SocketAddr,
    links: Mutex<Links>,
    unreachable: send::Unreachable,
    events: Events,
    events_rx: Mutex<Option<mpsc::Receiver<LinkEvent>>>,
    /// Connections open from each node, all lanes (`recv`).
    open_from: crate::recv::OpenFrom,
    traffic: Arc<Traffic>,
    background: Option<Background>,
}

/// The runtime of the background lanes, stopped without waiting when the
/// transport goes (it may go inside another runtime's task).
struct Background(Option<tokio::runtime::Runtime>);

impl Background {
    fn start(threads: usize) -> std::io::Result<Option<Background>> {
        if threads == 0 {
            return Ok(None);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("rill-bulk-io")
            .on_thread_start(crate::priority::lower_priority)
            .enable_all()
            .build()?;
        Ok(Some(Background(Some(rt))))
    }

    fn handle(&self) -> Option<tokio::runtime::Handle> {
        self.0.as_ref().map(|rt| rt.handle().clone())
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Transport {
    /// Listens on `config.listen`; what peers send arrives on the
    /// returned receiver.
    pub async fn start(
        config: TransportConfig,
    ) -> std::io::Result<(Arc<Transport>, mpsc::Receiver<Incoming>)> {
        let listener = TcpListener::bind(config.listen).await?;
        let local = listener.local_addr()?;
        let (inbox, rx) = mpsc::channel(config.inbox_messages.max(1));
        let max = config.max_message_bytes;
        let background = Background::start(config.background_threads)?;
        let bg = background.as_ref().and_then(Background::handle);
        let (events, events_rx) = mpsc::channel(EVENTS);
        let closed = events.clone();
        let open_from = crate::recv::OpenFrom::default();
        let open = open_from.clone();
        let traffic = Arc::new(Traffic::default());
        let counted = traffic.clone();
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        let _ = stream.set_nodelay(true);
                        let run = crate::recv::run(
                            stream,
                            peer,
                            inbox.clone(),
                            max,
                            bg.clone(),
                            crate::recv::Watch {
                                events: closed.clone(),
                                open: open.clone(),
                                traffic: counted.clone(),
                            },
                        );
                        tokio::spawn(run);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a peer failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                if inbox.is_closed() {
                    return;
                }
            }
        });
        let t = Transport {
            config,
            local,
            links: Mutex::new(HashMap::new()),
            unreachable: Default::default(),
            events,
            events_rx: Mutex::new(Some(events_rx)),
            open_from,
            traffic,
            background,
        };
        Ok((Arc::new(t), rx))
    }

    /// Connections open from the node named `name` (its hellos), all
    /// lanes.
    pub fn connections_from(&self, name: &str) -> usize {
        self.open_from
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// Bytes sent to and read from peers so far.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// The link events (taken once, by the runtime that watches peers).
    pub fn take_events(&self) -> Option<mpsc::Receiver<LinkEvent>> {
        self.events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// The address peers reach this node on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    fn link(&self, to: SocketAddr, lane: Lane) -> mpsc::Sender<Outgoing> {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = links.get(&(to, lane)) {
            if !tx.is_closed() {
                return tx.clone();
            }
        }
        let (tx, rx) = mpsc::channel(self.config.queue_messages.max(1));
        let writer = send::run(
            to,
            lane,
            self.config.name.clone(),
            rx,
            self.unreachable.clone(),
            self.events.clone(),
            self.traffic.clone(),
        );
        match self.background.as_ref().and_then(Background::handle) {
            Some(h) if lane.is_background() => drop(h.spawn(writer)),
            _ => drop(tokio::spawn(writer)),
        }
        links.insert((to, lane), tx.clone());
        tx
    }

    /// [`Transport::send`] without waiting, for callers outside a task:
    /// queues `data` when the lane's queue has room (`Ok(None)`), else
    /// gives it back (`Ok(Some(data))`) to be sent by a task that may
    /// wait. Must be called within the runtime (it may start a writer).
    pub fn try_send(
        &self,
        to: SocketAddr,
        lane: Lane,
        data: Bytes,
    ) -> Result<Option<Bytes>, SendError> {
        let Some(mut msg) = self.outgoing(to, lane, data)? else {
            return Ok(None);
        };
        // A writer whose connection failed is replaced once.
        for _ in 0..2 {
            match self.link(to, lane).try_send(msg) {
                Ok(()) => return Ok(None),
                Err(mpsc::error::TrySendError::Full(m)) => return Ok(Some(m.data)),
                Err(mpsc::error::TrySendError::Closed(m)) => msg = m,
            }
        }
        Ok(Some(msg.data))
    }

    /// The checks every send makes: the size limit, the test hook, a peer
    /// known unreachable. `None`: the hook lost it.
    fn outgoing(
        &self,
        to: SocketAddr,
        lane: Lane,
        data: Bytes,
    ) -> Result<Option<Outgoing>, SendError> {
        let max = self.config.max_message_bytes;
        if data.len() > max {
            return Err(SendError::TooLarge {
                len: data.len(),
                max,
            });
        }
        let not_before = match self
            .config
            .hook
            .as_ref()
            .map(|h| h.verdict(to, lane, data.len()))
        {
            None | Some(Verdict::Deliver) => None,
            Some(Verdict::Delay(d)) => Some(tokio::time::Instant::now() + d),
            Some(Verdict::Drop) => return Ok(None),
        };
        {
            let mut u = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
            match u.get(&to) {
                Some(until) if *until > tokio::time::Instant::now() => {
                    return Err(SendError::Unreachable(to));
                }
                Some(_) => {
                    u.remove(&to);
                }
                None => {}
            }
        }
        Ok(Some(Outgoing { data, not_before }))
    }

    /// `to` was heard from: sends to it are tried again at once, not only
    /// after the wait that follows a failed connect.
    pub fn reachable_again(&self, to: SocketAddr) {
        self.unreachable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&to);
    }

    /// Queues `data` for `to` on `lane`; waits while that lane's queue is
    /// full. Delivery is not confirmed: a lost connection loses what was
    /// in flight on it (requests above time out).
    pub async fn send(&self, to: SocketAddr, lane: Lane, data: Bytes) -> Result<(), SendError> {
        let Some(mut msg) = self.outgoing(to, lane, data)? else {
            return Ok(());
        };
        // A writer whose connection failed is replaced once.
        for _ in 0..2 {
            match self.link(to, lane).send(msg).await {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(m)) => msg = m,
            }
        }
        // Both writers ended at once: most likely the connect failed.
        let marked = self
            .unreachable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&to);
        Err(if marked {
            SendError::Unreachable(to)
        } else {
            SendError::Closed(to)
        })
    }
}
