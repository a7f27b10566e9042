//! Which partitions this node holds data of, reported to every peer with
//! each ping, the peers' reports kept, and the rules of
//! `rill_handoff::holdings` asked with them (by this node's ring) for the
//! node's reaper and the claimant.

use crate::msg::PeerMsg;
use crate::runtime::{Inner, Peer};
use rill_handoff::holdings::{may_reap_at, Report};
use rill_transport::Lane;
use std::collections::BTreeSet;
use std::time::Instant;

impl Peer {
    /// Looks at which partitions this node holds data of, and keeps it as
    /// this node's report; returns those it does not own in `owners` (the
    /// handoff round, on a thread that may block: a vnode not found empty
    /// is looked at). The partitions it owns are listed without a look:
    /// a reader that takes another node for their owner waits for this
    /// node's ring to say so too, and its next look.
    pub(crate) fn look_at_holdings(&self, owners: &[String]) -> BTreeSet<u32> {
        // A failed look counts as holding: a reap waits.
        let report = Report::look(&self.me, owners, self.now(), |p| {
            self.node.vnodes().holds_data(p).ok()
        });
        let not_owned = report.not_owned(&self.me, owners).collect();
        self.lock().holdings.insert(self.me.clone(), report);
        not_owned
    }

    /// Sends this node's last report to `peers` (with the ping).
    pub(crate) fn send_holdings(&self, inner: &Inner, peers: &[String]) {
        let Some(own) = inner.holdings.get(&self.me) else {
            return;
        };
        let msg = PeerMsg::Holdings {
            age_ms: self.now().saturating_sub(own.looked_ms),
            partitions: own.partitions.iter().copied().collect(),
        };
        for p in peers {
            self.send_to(inner, p, Lane::Control, msg.clone());
        }
    }

    /// A peer's report. Its look is dated by this node's clock as
    /// arrival minus age, later than the truth by the message's transit:
    /// a look dated after a reap was asked may precede it by that much,
    /// but a value a fallback took before a delete was stored several
    /// round trips before the delete's tombstone (the client read it
    /// first), so the look still sees it.
    pub(crate) fn holdings_in(&self, from: &str, age_ms: u64, partitions: Vec<u32>) {
        let looked_ms = self.now().saturating_sub(age_ms);
        let mut inner = self.lock();
        let newer = inner
            .holdings
            .get(from)
            .is_none_or(|r| r.looked_ms <= looked_ms);
        if newer {
            inner.holdings.insert(
                from.to_string(),
                Report {
                    partitions: partitions.into_iter().collect(),
                    looked_ms,
                },
            );
        }
    }

    /// Whether a tombstone on `partitions`, its reap asked at `asked`,
    /// may be reaped now (`rill_handoff::holdings::may_reap`).
    pub(crate) fn may_reap(&self, partitions: &[u32], asked: Instant) -> bool {
        let asked_ms = asked.saturating_duration_since(self.started).as_millis() as u64;
        let now = self.now();
        let inner = self.lock();
        may_reap_at(
            &inner.state,
            &self.me,
            |name| inner.detector.liveness(name, now) != crate::detector::Liveness::Unreachable,
            &inner.holdings,
            partitions,
            asked_ms,
        )
    }
}
