//! Failure detection, pure: a node is alive while heard from, suspected
//! after `suspect_ms` of silence, and unreachable after `down_ms` (then
//! preference lists take fallbacks instead of it). Every node pings every
//! member each second on the control lane, and any message counts, so a
//! busy link never looks silent. Suspicion comes before unreachability so
//! that one slow second does not move replicas; a node is back at its
//! first message. (A SWIM library such as foca adds indirect probes for
//! clusters of hundreds; Riak's clusters are of 3 to a few dozen nodes,
//! where direct pings cost little and are easy to reason about.)

use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// Silent for a while; still used.
    Suspect,
    /// Silent too long: replaced by fallbacks.
    Unreachable,
}

#[derive(Clone, Debug)]
pub struct Detector {
    suspect_ms: u64,
    down_ms: u64,
    /// When each member was last heard from, and whether a connect to it
    /// was refused (or its connection closed) since.
    last_heard: BTreeMap<String, Heard>,
}

#[derive(Clone, Copy, Debug)]
struct Heard {
    at: u64,
    refused: bool,
}

impl Detector {
    pub fn new(suspect_ms: u64, down_ms: u64) -> Detector {
        Detector {
            suspect_ms,
            down_ms: down_ms.max(suspect_ms),
            last_heard: BTreeMap::new(),
        }
    }

    /// Follows the members: a new one starts as heard now (it gets its
    /// grace period), one that left is forgotten.
    pub fn track(&mut self, members: &[String], now_ms: u64) {
        self.last_heard.retain(|n, _| members.contains(n));
        for m in members {
            self.last_heard.entry(m.clone()).or_insert(Heard {
                at: now_ms,
                refused: false,
            });
        }
    }

    /// A message came from `node`. True when it was unreachable until now
    /// (a node not tracked, not a member, stays as it is).
    pub fn heard(&mut self, node: &str, now_ms: u64) -> bool {
        if !self.last_heard.contains_key(node) {
            return false;
        }
        let was = self.liveness(node, now_ms);
        if let Some(h) = self.last_heard.get_mut(node) {
            if now_ms >= h.at {
                *h = Heard {
                    at: now_ms,
                    refused: false,
                };
            }
        }
        was == Liveness::Unreachable
    }

    /// A connect to `node` was refused, or its connection closed: it is
    /// unreachable now, without waiting for the silence to pass, until
    /// it is heard from again.
    pub fn refused(&mut self, node: &str, now_ms: u64) {
        if let Some(h) = self.last_heard.get_mut(node) {
            h.refused = true;
            h.at = h.at.min(now_ms);
        }
    }

    pub fn liveness(&self, node: &str, now_ms: u64) -> Liveness {
        let Some(h) = self.last_heard.get(node) else {
            return Liveness::Unreachable;
        };
        let silent = now_ms.saturating_sub(h.at);
        if h.refused || silent >= self.down_ms {
            Liveness::Unreachable
        } else if silent >= self.suspect_ms {
            Liveness::Suspect
        } else {
            Liveness::Alive
        }
    }

    /// How long `node` has been silent (since its last message, or since
    /// it was first tracked); `None` when it is not tracked.
    pub fn silent_ms(&self, node: &str, now_ms: u64) -> Option<u64> {
        self.last_heard
            .get(node)
            .map(|h| now_ms.saturating_sub(h.at))
    }

    /// The tracked nodes not unreachable.
    pub fn reachable(&self, now_ms: u64) -> Vec<String> {
        self.last_heard
            .keys()
            .filter(|n| self.liveness(n, now_ms) != Liveness::Unreachable)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn silence_brings_suspicion_then_unreachability_and_a_message_ends_both() {
        let mut d = Detector::new(3_000, 6_000);
        d.track(&names(&["a", "b"]), 1_000);
        assert_eq!(d.liveness("a", 3_999), Liveness::Alive);
        assert_eq!(d.liveness("a", 4_000), Liveness::Suspect);
        assert_eq!(d.liveness("a", 7_000), Liveness::Unreachable);
        assert!(!d.heard("b", 6_000), "b was suspect, not unreachable");
        assert_eq!(d.reachable(7_000), names(&["b"]));
        assert!(d.heard("a", 7_500), "a comes back");
        assert_eq!(d.liveness("a", 7_500), Liveness::Alive);
        assert!(!d.heard("a", 7_000), "an older time does not go back");
        assert_eq!(d.liveness("a", 9_000), Liveness::Alive);
    }

    #[test]
    fn a_refused_connect_is_unreachable_at_once_and_unknown_nodes_are_unreachable() {
        let mut d = Detector::new(3_000, 6_000);
        d.track(&names(&["a"]), 10_000);
        d.refused("a", 10_500);
        assert_eq!(d.liveness("a", 10_500), Liveness::Unreachable);
        assert!(d.heard("a", 10_600), "back at its next message");
        assert_eq!(d.liveness("a", 10_600), Liveness::Alive);
        // Refused in the first moments of this node's run (the clock
        // below the silence that would take it down): still at once.
        let mut d = Detector::new(3_000, 6_000);
        d.track(&names(&["a"]), 0);
        d.refused("a", 100);
        assert_eq!(d.liveness("a", 100), Liveness::Unreachable);
        assert_eq!(d.liveness("zz", 10_500), Liveness::Unreachable);
        d.heard("zz", 10_600);
        assert_eq!(
            d.liveness("zz", 10_600),
            Liveness::Unreachable,
            "not tracked"
        );
        d.track(&names(&[]), 11_000);
        assert!(
            d.reachable(11_000).is_empty(),
            "a node that left is forgotten"
        );
    }
}
