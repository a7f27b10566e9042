//! Put throttling (the sensor-data paper, §2.3): each put waits
//! T = clamp((U - U_l)/(U_h - U_l), 0, 1) seconds, so writers slow down
//! before the disk fills and merge keeps the room it needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// The delay in force, shared by every store of a node (each waits it
/// before each put). It follows U closely: a put re-measures U when the
/// last measure is older than `refresh`, so the throttle never lags behind
/// a merge that is filling the disk with its output.
pub struct Throttle {
    settings: ThrottleSettings,
    measure: Box<dyn Fn() -> f64 + Send + Sync>,
    refresh: Duration,
    epoch: Instant,
    /// Microseconds since `epoch` of the last measure, and its delay.
    measured_at_us: AtomicU64,
    delay_us: AtomicU64,
    usage_ppm: AtomicU64,
}

impl Throttle {
    pub fn new(
        settings: ThrottleSettings,
        refresh: Duration,
        measure: impl Fn() -> f64 + Send + Sync + 'static,
    ) -> Throttle {
        let t = Throttle {
            settings,
            measure: Box::new(measure),
            refresh,
            epoch: Instant::now(),
            measured_at_us: AtomicU64::new(0),
            delay_us: AtomicU64::new(0),
            usage_ppm: AtomicU64::new(0),
        };
        t.update();
        t
    }

    /// Measures U now and returns it.
    pub fn update(&self) -> f64 {
        let usage = (self.measure)();
        let delay = self.settings.delay(usage);
        self.delay_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
        self.usage_ppm
            .store((usage.clamp(0.0, 10.0) * 1e6) as u64, Ordering::Relaxed);
        self.measured_at_us
            .store(self.epoch.elapsed().as_micros() as u64, Ordering::Relaxed);
        usage
    }

    /// The delay as of the last measure.
    pub fn current(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// The thresholds in force.
    pub fn settings(&self) -> ThrottleSettings {
        self.settings
    }

    /// U, measured anew when the last measure is older than the refresh
    /// period.
    pub fn usage(&self) -> f64 {
        self.refresh_if_stale();
        self.usage_ppm.load(Ordering::Relaxed) as f64 / 1e6
    }

    fn refresh_if_stale(&self) {
        let now_us = self.epoch.elapsed().as_micros() as u64;
        let age_us = now_us.saturating_sub(self.measured_at_us.load(Ordering::Relaxed));
        if age_us >= self.refresh.as_micros() as u64 {
            self.update();
        }
    }
}

impl bitcask::PutGate for Throttle {
    fn delay(&self) -> Duration {
        self.refresh_if_stale();
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
