//! Messages to peers, sent without waiting: queued at once when the
//! lane has room, else by a task (at most `WAITING_SENDS` at once, then
//! the send fails as overload), so no caller waits on a peer's queue
//! while holding the state and memory stays bounded.

use super::{Inner, Peer};
use crate::msg::PeerMsg;
use rill_transport::{Lane, SendError};
use std::net::SocketAddr;

impl Peer {
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
        // The lane's queue is full: a task waits for room, within the
        // bound on waiting sends; beyond it the send fails at once as
        // overload (a request's coordinator answers its client so, as
        // Riak does), never a task per message without end.
        let Ok(permit) = self.waiting_sends.clone().try_acquire_owned() else {
            return failed(SendError::Overloaded(addr));
        };
        let t = self.transport.clone();
        self.rt.spawn(async move {
            let _permit = permit;
            if let Err(e) = t.send(addr, lane, msg).await {
                failed(e);
            }
        });
    }
}
