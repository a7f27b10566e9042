//! When a node gossips its state, and to whom (riak_core_gossip's rules):
//! after every change to one peer at once, and periodically to one
//! random peer, within a token bucket (45 sends per 10 s by default) so a
//! storm of changes cannot flood the cluster. Pure: the caller passes the
//! time and a random number.

/// riak_core's `gossip_limit` default: 45 sends per 10 s.
pub const DEFAULT_TOKENS: u32 = 45;
pub const DEFAULT_REFILL_MS: u64 = 10_000;

#[derive(Clone, Debug)]
pub struct Gossip {
    tokens: u32,
    limit: u32,
    refill_ms: u64,
    refilled_at_ms: u64,
    /// A change not yet sent for want of tokens.
    owed: bool,
}

impl Gossip {
    pub fn new(limit: u32, refill_ms: u64, now_ms: u64) -> Gossip {
        Gossip {
            tokens: limit,
            limit,
            refill_ms: refill_ms.max(1),
            refilled_at_ms: now_ms,
            owed: false,
        }
    }

    /// The peer to send to, drawn with `random` from `peers` (the other
    /// members), if a token is left.
    fn spend<'a>(&mut self, peers: &'a [String], random: u64) -> Option<&'a String> {
        if peers.is_empty() || self.tokens == 0 {
            return None;
        }
        self.tokens -= 1;
        peers.get((random % peers.len() as u64) as usize)
    }

    /// The state changed: whom to tell now (none when out of tokens; the
    /// change then goes at the next refill).
    pub fn changed<'a>(&mut self, peers: &'a [String], random: u64) -> Option<&'a String> {
        let to = self.spend(peers, random);
        self.owed = to.is_none() && !peers.is_empty();
        to
    }

    /// Members or ring changed (not only what a node has seen): every
    /// peer is told, as riak_core's recursive gossip of a new ring reaches
    /// every node, as far as the tokens go (the rest is owed).
    pub fn broadcast<'a>(&mut self, peers: &'a [String]) -> Vec<&'a String> {
        let n = peers.len().min(self.tokens as usize);
        self.tokens -= n as u32;
        self.owed = n < peers.len();
        peers[..n].iter().collect()
    }

    /// Time passes: at each refill the tokens come back and one random
    /// peer is told (riak_core's periodic gossip), a change owed first.
    pub fn tick<'a>(
        &mut self,
        now_ms: u64,
        peers: &'a [String],
        random: u64,
    ) -> Option<&'a String> {
        if now_ms.saturating_sub(self.refilled_at_ms) < self.refill_ms {
            return None;
        }
        self.refilled_at_ms = now_ms;
        self.tokens = self.limit;
        self.owed = false;
        self.spend(peers, random)
    }

    pub fn owed(&self) -> bool {
        self.owed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_rate_limited_and_periodic_gossip_goes_at_each_refill() {
        let peers: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut g = Gossip::new(3, 1000, 0);
        let sent: Vec<_> = (0..5).map(|i| g.changed(&peers, i).cloned()).collect();
        assert_eq!(
            sent,
            vec![
                Some("a".into()),
                Some("b".into()),
                Some("c".into()),
                None,
                None
            ]
        );
        assert!(g.owed(), "the last change is owed");
        assert_eq!(g.tick(999, &peers, 0), None, "not yet");
        assert_eq!(g.tick(1000, &peers, 4).cloned(), Some("b".into()));
        assert!(!g.owed());
        assert_eq!(g.changed(&[], 0), None, "no one to tell");
        assert!(!g.owed());
        assert_eq!(g.broadcast(&peers).len(), 2, "a token went to the tick");
        assert!(g.owed(), "the third peer is owed");
        assert_eq!(g.tick(2000, &peers, 0).cloned(), Some("a".into()));
        assert_eq!(
            g.broadcast(&peers),
            peers.iter().take(2).collect::<Vec<_>>()
        );
    }
}
