//! A [`LinkHook`] that every link of a node shares: a fixed one-way delay
//! and a share of messages lost, drawn from a seeded generator so a run
//! can be repeated. For tests and benchmarks only (`rill`'s
//! `test.link.delay` and `test.link.loss`): this kernel has no `netem`.

use crate::lane::Lane;
use crate::transport::{LinkHook, Verdict};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub struct FixedLink {
    delay: Duration,
    /// Messages lost per million.
    loss_ppm: u64,
    state: AtomicU64,
}

impl FixedLink {
    /// `loss` is a share in 0..=1 of the messages sent.
    pub fn new(delay: Duration, loss: f64, seed: u64) -> FixedLink {
        FixedLink {
            delay,
            loss_ppm: (loss.clamp(0.0, 1.0) * 1e6).round() as u64,
            state: AtomicU64::new(seed),
        }
    }

    /// splitmix64 over a shared counter: each call one draw.
    fn draw(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl LinkHook for FixedLink {
    fn verdict(&self, _to: SocketAddr, _lane: Lane, _bytes: usize) -> Verdict {
        if self.loss_ppm > 0 && self.draw() % 1_000_000 < self.loss_ppm {
            return Verdict::Drop;
        }
        if self.delay.is_zero() {
            Verdict::Deliver
        } else {
            Verdict::Delay(self.delay)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_every_message_and_loses_about_the_share_asked() {
        let to: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let h = FixedLink::new(Duration::from_millis(10), 0.1, 7);
        let verdicts: Vec<Verdict> = (0..10_000).map(|_| h.verdict(to, Lane::Small, 1)).collect();
        let lost = verdicts.iter().filter(|v| **v == Verdict::Drop).count();
        assert!((800..1200).contains(&lost), "{lost} of 10000 lost");
        let ten = Verdict::Delay(Duration::from_millis(10));
        assert!(verdicts.iter().all(|v| *v == Verdict::Drop || *v == ten));
        let none = FixedLink::new(Duration::ZERO, 0.0, 7);
        assert_eq!(none.verdict(to, Lane::Bulk, 1), Verdict::Deliver);
        // The same seed, the same losses.
        let again = FixedLink::new(Duration::from_millis(10), 0.1, 7);
        let replay: Vec<Verdict> = (0..10_000)
            .map(|_| again.verdict(to, Lane::Small, 1))
            .collect();
        assert_eq!(verdicts, replay);
    }
}
