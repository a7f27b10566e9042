//! Put throttling (seed 000 §2.3): each put waits
//! T = clamp((U - U_l)/(U_h - U_l), 0, 1) seconds, so writers slow down
//! before the disk fills and merge keeps the room it needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Throttle thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThrottleSettings {
    /// U_l: at or below this usage puts are not delayed.
    pub low_usage: f64,
    /// U_h: at or above this usage each put waits the full second.
    pub high_usage: f64,
}

impl Default for ThrottleSettings {
    fn default() -> Self {
        ThrottleSettings {
            low_usage: 0.95,
            high_usage: 1.0,
        }
    }
}

impl ThrottleSettings {
    /// The delay T for usage U.
    pub fn delay(&self, usage: f64) -> Duration {
        let span = (self.high_usage - self.low_usage).max(f64::EPSILON);
        let t = ((usage - self.low_usage) / span).clamp(0.0, 1.0);
        Duration::from_secs_f64(t)
    }
}

/// The delay currently in force, shared by the scheduler (which sets it
/// from U) and every store (which waits it before each put).
#[derive(Debug, Default)]
pub struct Throttle {
    delay_us: AtomicU64,
}

impl Throttle {
    pub fn set(&self, delay: Duration) {
        self.delay_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn current(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }
}

impl bitcask::PutGate for Throttle {
    fn delay(&self) -> Duration {
        self.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_table() {
        let s = ThrottleSettings::default();
        for (usage, ms) in [
            (0.0, 0),
            (0.90, 0),
            (0.95, 0),
            (0.96, 200),
            (0.975, 500),
            (0.99, 800),
            (1.0, 1000),
            (1.2, 1000),
        ] {
            let got = s.delay(usage).as_millis();
            assert!(got.abs_diff(ms) <= 1, "U = {usage}: {got} ms, want {ms}");
        }
    }
}
