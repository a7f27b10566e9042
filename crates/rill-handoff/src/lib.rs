//! Handoff: moving one partition's data from the node that has it to the
//! node that should (hinted handoff to a returning primary, ownership
//! handoff after a ring change), as pure state machines. The caller reads
//! the vnode's data, stores what arrives, carries messages over the
//! transport's handoff lane and feeds the time in.
//!
//! Riak's operators know handoffs stalled for days: batches restarted
//! from the start after a timeout, slots never freed. Here:
//! - the receiver stores each batch, records the cursor after it, then
//!   acknowledges; a sender that times out, or reconnects after either
//!   side restarted, opens a new session and the receiver answers with
//!   its recorded cursor, so at most one window of batches is sent again,
//!   never the partition from the start;
//! - a sender with nothing to send for a while sends keepalives, so a
//!   slow read does not look like a dead sender; a receiver that hears
//!   nothing for its idle timeout gives up (the sender will reopen);
//! - a sender gives up after a bounded number of retries, and every slot
//!   of the transfer limit is given back on finish, failure or staleness.
//!
//! Sessions number the (re)starts of one transfer; messages of an older
//! session are ignored, so a late batch cannot be stored twice out of
//! order.

pub mod codec;
pub mod holdings;
pub mod pass;
pub mod plan;
pub mod receiver;
pub mod repair;
pub mod sender;
pub mod slots;

/// A position in a partition's data, after some item (opaque: the reader
/// makes it, e.g. a keydir shard and the last key read in it).
pub type Cursor = Vec<u8>;

/// One object of the partition (opaque to handoff).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Names a transfer: the partition, the ring version that planned it
/// (or 0 for hinted handoff) and the sending node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransferId {
    pub partition: u32,
    pub id: u64,
    pub from: String,
}

/// Sender to receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToReceiver {
    Open {
        transfer: TransferId,
        session: u64,
    },
    Batch {
        session: u64,
        seq: u64,
        items: Vec<Item>,
        cursor: Cursor,
    },
    Keepalive {
        session: u64,
    },
    /// Every batch was sent; `batches` of them in this session.
    Finish {
        session: u64,
        batches: u64,
    },
}

/// Receiver to sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToSender {
    /// Start after this cursor (`None`: from the beginning).
    Resume {
        session: u64,
        after: Option<Cursor>,
    },
    Ack {
        session: u64,
        seq: u64,
    },
    /// Everything is stored: the transfer is done.
    Done {
        session: u64,
    },
}

pub use receiver::{Receiver, ReceiverConfig, ReceiverEffect};
pub use sender::{Sender, SenderConfig, SenderEffect};
pub use slots::Slots;
