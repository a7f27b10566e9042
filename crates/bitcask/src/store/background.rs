//! The background thread of a store: flushes of the write buffer, seals
//! of closed files, and interval fsyncs, each when it is due.

use super::Inner;
use crate::options::SyncStrategy;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

impl Inner {
    /// How long until the background thread has a flush or a seal to do
    /// (`Duration::MAX` when nothing is scheduled).
    pub(super) fn background_due(&self, now: Instant, flush_every: Duration) -> Duration {
        let mut due = Duration::MAX;
        {
            let w = self.writer();
            if w.poisoned.is_none() {
                if let Some(since) = w.unflushed_since {
                    due = (since + flush_every).saturating_duration_since(now);
                }
            }
        }
        if self.opts.defers_sealing() {
            let delay = Duration::from_millis(self.opts.seal_delay_ms);
            if let Some(u) = self.unsealed.lock().expect("unsealed").first() {
                due = due.min((u.closed_at + delay).saturating_duration_since(now));
            }
        }
        due
    }
}

/// How the background thread is told there is work, or that it must stop.
#[derive(Default)]
pub(super) struct Wake {
    /// (kicked, stop)
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Wake {
    pub(super) fn kick(&self) {
        let mut s = self.state.lock().expect("wake");
        if !s.0 {
            s.0 = true;
            self.cv.notify_one();
        }
    }

    pub(super) fn stop(&self) {
        self.state.lock().expect("wake").1 = true;
        self.cv.notify_one();
    }

    /// Waits until kicked, stopped or `timeout`; true when stopped.
    fn wait(&self, timeout: Duration) -> bool {
        let mut s = self.state.lock().expect("wake");
        if !s.0 && !s.1 {
            s = self.cv.wait_timeout(s, timeout).expect("wake").0;
        }
        s.0 = false;
        s.1
    }
}

/// Longest the background thread sleeps with nothing scheduled (a safety
/// net: every new piece of work kicks it).
const BACKGROUND_IDLE: Duration = Duration::from_secs(1);

/// Background work of one store: hand buffered appends to the kernel at
/// most `flush_interval_ms` after they were made, seal closed files once
/// `seal_delay_ms` has passed, and fsync every `interval_ms` under that
/// strategy. It sleeps until the earliest of these is due or a put gives
/// it new work, so an idle store, or one whose records skip the buffer,
/// costs no wake-ups.
pub(super) fn spawn_background(inner: &Arc<Inner>) -> JoinHandle<()> {
    let weak = Arc::downgrade(inner);
    let wake = inner.wake.clone();
    let flush_every = Duration::from_millis(inner.opts.flush_interval_ms.max(1));
    let sync_every = match inner.opts.sync {
        SyncStrategy::Interval { interval_ms } => Some(Duration::from_millis(interval_ms)),
        _ => None,
    };
    std::thread::Builder::new()
        .name("bitcask-bg".into())
        .spawn(move || {
            let mut last_sync = Instant::now();
            // After a failure, the earliest time to try again.
            let mut retry_at: Option<Instant> = None;
            loop {
                let wait = {
                    let Some(inner) = weak.upgrade() else { return };
                    let now = Instant::now();
                    let mut due = inner.background_due(now, flush_every);
                    if let Some(every) = sync_every {
                        due = due.min((last_sync + every).saturating_duration_since(now));
                    }
                    if let Some(at) = retry_at {
                        due = due.max(at.saturating_duration_since(now));
                    }
                    due.min(BACKGROUND_IDLE)
                };
                if wake.wait(wait) {
                    return;
                }
                let Some(inner) = weak.upgrade() else { return };
                let mut failed = false;
                {
                    let mut w = inner.writer();
                    let due = w
                        .unflushed_since
                        .is_some_and(|t| t.elapsed() >= flush_every);
                    if w.poisoned.is_none() && due {
                        match w.active.flush(true) {
                            Ok(()) => w.unflushed_since = None,
                            Err(e) => {
                                tracing::warn!(error = %e, "background flush failed; will retry");
                                failed = true;
                            }
                        }
                    }
                }
                if inner.opts.defers_sealing() {
                    if let Err(e) = inner.seal_unsealed(false) {
                        tracing::warn!(error = %e, "sealing closed data files failed");
                        failed = true;
                    }
                }
                if let Some(every) = sync_every {
                    if last_sync.elapsed() >= every {
                        last_sync = Instant::now();
                        let seq = inner.writer().seq;
                        if let Err(e) = inner.sync_through(seq) {
                            tracing::warn!(error = %e, "interval sync failed");
                            failed = true;
                        }
                    }
                }
                retry_at = failed.then(|| Instant::now() + flush_every);
            }
        })
        .expect("spawn bitcask background thread")
}

#[cfg(test)]
mod tests {
    use crate::{Options, Store};
    use std::time::{Duration, Instant};

    /// An idle store's background thread has nothing scheduled, so it
    /// sleeps until kicked (or the idle safety net): a node runs a store
    /// per vnode, 64 and more, and none may wake every flush interval.
    #[test]
    fn an_idle_store_schedules_no_background_work() {
        let dir = tempfile::tempdir().unwrap();
        let every = Duration::from_millis(5);
        let s = Store::open(
            dir.path(),
            Options {
                flush_interval_ms: 5,
                ..Options::default()
            },
        )
        .unwrap();
        let due = || s.inner.background_due(Instant::now(), every);
        assert_eq!(due(), Duration::MAX, "nothing scheduled after open");
        s.put(b"k", b"buffered, then flushed in the background")
            .unwrap();
        assert!(due() <= every, "a flush is due within the interval");
        let deadline = Instant::now() + Duration::from_secs(10);
        while due() != Duration::MAX {
            assert!(
                Instant::now() < deadline,
                "the buffer was not flushed within 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            super::BACKGROUND_IDLE >= Duration::from_secs(1),
            "the idle safety net wakes at most once a second"
        );
    }
}
