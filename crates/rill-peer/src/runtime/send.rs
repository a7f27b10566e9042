//! Messages to peers, sent without waiting: queued at once when the
//! lane has room, else into the peer's and lane's backlog (`backlog`:
//! in order, bounded by bytes, one task draining it; beyond the bound
//! the send fails as overload), so no caller waits on a peer's queue
//! while holding the state and memory stays bounded.

use super::backlog::{drain, Admit};
use super::{Inner, Peer};
use crate::msg::PeerMsg;
use bytes::Bytes;
use rill_transport::{Lane, SendError};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

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
        let mut msg: Bytes = msg.into();
        // Whether the lane was tried already (each try asks the test
        // hook for a verdict: once here, once more by the drainer).
        let mut tried = false;
        if self.backlog_queues.load(Ordering::SeqCst) == 0 {
            tried = true;
            // No backlog anywhere (the common case): the lane itself,
            // without the backlogs' lock. A send that finds the lane full
            // goes on below; one from another thread racing it is not
            // ordered with it either way.
            let _in_runtime = self.rt.enter();
            match self.transport.try_send(addr, lane, msg) {
                Ok(None) => return,
                Ok(Some(m)) => msg = m,
                Err(e) => return failed(e),
            }
        }
        let admit = {
            let mut b = self.backlogs.lock().unwrap_or_else(|e| e.into_inner());
            if !tried && !b.waiting(addr, lane) {
                // Nothing waits for this lane: straight into its queue
                // when it has room.
                let _in_runtime = self.rt.enter();
                match self.transport.try_send(addr, lane, msg) {
                    Ok(None) => return,
                    Ok(Some(m)) => msg = m,
                    Err(e) => {
                        drop(b);
                        return failed(e);
                    }
                }
            }
            b.push(addr, lane, msg, Box::new(failed))
        };
        match admit {
            Admit::Queued => {}
            Admit::Refused(failed) => failed(SendError::Overloaded(addr)),
            Admit::StartDrainer => {
                let t = self.transport.clone();
                self.rt
                    .spawn(drain(self.backlogs.clone(), addr, lane, move |m| {
                        let t = t.clone();
                        async move { t.send(addr, lane, m).await }
                    }));
            }
        }
    }
}
