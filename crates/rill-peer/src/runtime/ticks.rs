//! The runtime's periodic loops: pings, gossip and bucket types to
//! peers, the failure detector's view (every 250 ms), and the handoff
//! round (every 500 ms); and the watch on the transport's links, which
//! takes a node whose connection closed or refused for down at once.

use super::Peer;
use crate::msg::PeerMsg;
use rill_transport::{Lane, LinkEvent};
use std::time::Duration;
use tokio::sync::mpsc;

impl Peer {
    /// A node whose connection to this one closed, or that refused a
    /// connect, is unreachable now: its replicas go to fallbacks from the
    /// next request, and requests waiting on it fail at once (Riak takes
    /// a node down when its distribution connection closes). It is back
    /// at its next message.
    pub(super) async fn watch_links(
        peer: std::sync::Weak<Peer>,
        mut events: mpsc::Receiver<LinkEvent>,
    ) {
        while let Some(event) = events.recv().await {
            let Some(peer) = peer.upgrade() else { return };
            let mut inner = peer.lock();
            let node = match event {
                LinkEvent::Closed(name) => Some(name),
                LinkEvent::Refused(addr) => inner
                    .addrs
                    .iter()
                    .find(|(_, a)| **a == addr)
                    .map(|(n, _)| n.clone()),
            };
            let Some(node) = node.filter(|n| *n != peer.me && inner.addrs.contains_key(n)) else {
                continue;
            };
            let now = peer.now();
            if inner.detector.liveness(&node, now) == crate::detector::Liveness::Unreachable {
                continue;
            }
            inner.detector.refused(&node, now);
            tracing::warn!(node = %node, "a node's connection closed: its replicas go to fallbacks");
            peer.publish_view(&inner);
            drop(inner);
            peer.fail_pending_of_unreachable();
        }
    }

    pub(super) async fn handoff_loop(peer: std::sync::Weak<Peer>) {
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

    pub(super) async fn ticks(peer: std::sync::Weak<Peer>) {
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
                peer.send_holdings(&inner, &peers);
            }
            let r = inner.random();
            if let Some(to) = inner.gossip.tick(now, &peers, r).cloned() {
                peer.send_gossip(&inner, &to);
                peer.send_metadata(&inner, &[to]);
            }
            // Bucket types and properties changed here: every peer is
            // told (they merge entry by entry).
            let (_, version) = peer.node.buckets().registry_json();
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
            // The claimant silent too long, or a leaving node's holdings
            // gone: the claimant's step runs again.
            if peer.claimant_context(&inner) != inner.last_cx {
                if let Err(e) = peer.changed(&mut inner) {
                    tracing::error!(error = %e, "the cluster state was not kept");
                }
            }
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
