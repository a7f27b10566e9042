//! Handoff at run time, over `rill-handoff`'s planner and machines: the
//! planner (`rill_handoff::plan`) says which partitions this node hands
//! off, to whom, and when what it handed off may go; here they are read
//! in batches by `rill_handoff::pass` (a chunk of keys at a time, and a
//! record of what was sent), stored where they arrive, and removed.
//!
//! - **Ownership**: a transfer of the ring from this node. When the
//!   receiver has everything, the transfer is marked done in the cluster
//!   state (the claimant then changes the owner); the handed-off keys
//!   stay here until this node sees the new owner, then those still as
//!   they were sent are removed (the node served them until the switch).
//! - **Hinted**: a partition this node does not own holds data (it stood
//!   in for a down owner, or kept writes after an ownership switch):
//!   once the owner is reachable, the data goes to it and what was sent
//!   unchanged is removed. A hinted transfer's id is 0, so it is named by
//!   its partition and sender alone and resumes after the receiver's
//!   cursor when either side restarted (keys before the cursor that this
//!   run did not send stay here, and go in the next pass).
//!
//! - **Repair**: an operator's `repair-partition` or `repair-node` on the
//!   owner of a partition asks the owners of its neighbours to send what
//!   they hold of its keys (`rill_handoff::repair`); each such transfer
//!   waits here for a slot, reads the neighbour's vnode, and keeps the
//!   data. A repair is not resumed after its sender restarts (run it
//!   again), as Riak's is not.
//!
//! Before anything is removed the vnode retires its epochs (durably), so
//! it never continues an old count. At most `transfer_limit` transfers
//! leave this node at once, repairs included.
//!
//! The parts: `round` (each round of the handoff loop: what starts, what
//! a switch made safe to remove), `send` (a sender: reading batches,
//! top-up passes, completion), `receive` (messages from peers, and a
//! receiver storing batches), `cursor` (where a receiver keeps its
//! place, and the removal of cursors no transfer will use), `repair`
//! (asking for a repair, and taking asks) and `admin` (what an operator
//! reads and sets).

mod admin;
mod cursor;
mod receive;
mod repair;
mod round;
mod send;

use crate::msg::PeerMsg;
use crate::runtime::Peer;
use rill_cluster::Transfer;
use rill_handoff::codec::HandoffMsg;
use rill_handoff::pass::{Pass, SentRecord};
use rill_handoff::plan::Kind;
use rill_handoff::{Receiver, ReceiverConfig, Sender, SenderConfig, Slots, TransferId};
use rill_transport::Lane;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Key = rill_node::BKey;

struct Out {
    sender: Sender,
    to: String,
    kind: Kind,
    /// The partition read: the transfer's, or a repair's source.
    source: u32,
    /// The pass reading it: a chunk of its keys, and what was sent.
    pass: Arc<Mutex<Pass>>,
    /// Keys in the partition when the pass last listed it.
    total: usize,
    /// Which sender this is: a read that completes after the transfer was
    /// restarted belongs to the old one and is dropped.
    gen: u64,
    /// Passes that sent keys the first pass's snapshot did not have.
    topups: u32,
}

impl Out {
    fn is_repair(&self) -> bool {
        matches!(self.kind, Kind::Repair { .. })
    }
}

struct In {
    receiver: Receiver,
    /// Which receiver this is (an Open replaces it): a store that
    /// completes for an older one acknowledges nothing.
    gen: u64,
}

/// Progress an operator reads (`rill admin transfers`, `/stats`).
#[derive(Default)]
pub struct HandoffStats {
    pub items_sent: AtomicU64,
    pub items_received: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    /// Receivers that resumed after a cursor they had kept.
    pub resumed: AtomicU64,
    /// Partitions this node does not own that held data at the last
    /// check (hinted handoff still to do).
    pub hinted_partitions: AtomicU64,
}

pub(crate) struct Handoffs {
    slots: Slots<TransferId>,
    out: HashMap<TransferId, Out>,
    incoming: HashMap<TransferId, In>,
    /// Ownership transfers done, with the record of what they sent: what
    /// to remove once the owner changed.
    retained: BTreeMap<u32, (Transfer, SentRecord)>,
    /// Repairs other nodes asked of this one, waiting for a slot, with
    /// the node each goes to (at most [`MAX_REPAIRS_WAITING`]).
    repairs: BTreeMap<TransferId, String>,
    /// Partitions whose ownership transfer is counting the keys written
    /// during it (a top-up may follow): they count as being sent.
    counting: BTreeSet<u32>,
    last_hinted_scan: u64,
    next_gen: u64,
}

impl Handoffs {
    pub fn new(limit: usize) -> Handoffs {
        Handoffs {
            slots: Slots::new(limit),
            out: HashMap::new(),
            incoming: HashMap::new(),
            retained: BTreeMap::new(),
            repairs: BTreeMap::new(),
            counting: BTreeSet::new(),
            last_hinted_scan: 0,
            next_gen: 1,
        }
    }
}

/// Repairs asked of a node and waiting for a slot, at most: a repair of
/// every partition of the largest ring, from both sides. Asks beyond it
/// are refused (logged); the operator asks again.
const MAX_REPAIRS_WAITING: usize = 2 * rill_ring::MAX_RING_SIZE as usize;

/// Handoff settings.
#[derive(Clone, Debug)]
pub struct HandoffConfig {
    /// Riak's `transfer_limit`: transfers leaving a node at once.
    pub transfer_limit: usize,
    pub sender: SenderConfig,
    pub receiver: ReceiverConfig,
    /// How often partitions this node does not own are checked for data.
    pub hinted_scan: Duration,
}

impl Default for HandoffConfig {
    fn default() -> HandoffConfig {
        HandoffConfig {
            transfer_limit: 2,
            sender: SenderConfig {
                ack_timeout_ms: 15_000,
                keepalive_ms: 5_000,
                ..SenderConfig::default()
            },
            receiver: ReceiverConfig {
                idle_timeout_ms: 30_000,
            },
            hinted_scan: Duration::from_secs(5),
        }
    }
}

impl Peer {
    pub(crate) fn handoffs(&self) -> std::sync::MutexGuard<'_, Handoffs> {
        self.handoffs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send_handoff(&self, to: &str, msg: HandoffMsg) {
        let inner = self.lock();
        self.send_to(&inner, to, Lane::Handoff, PeerMsg::Handoff(msg.encode()));
    }
}
