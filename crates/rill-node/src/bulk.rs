//! Work on large values, apart from the rest: a small request must not
//! wait for the CPU behind copies of megabytes (the lesson of "Partisan:
//! scaling Riak Core", where one channel let an 8 MB value hold up every
//! request behind it; Rill's transport already keeps them on separate
//! lanes, and this keeps them apart on the CPU).
//!
//! A pool's threads run at a lower CPU priority (nice +10: the kernel
//! gives a normal thread about ten times their share when both want the
//! CPU), and there are few of them, so at most that many large requests
//! are worked on at once; the rest wait in the queue. The queue is
//! bounded by the bytes its jobs carry: past that a job is refused at
//! once (the caller answers "overload", as Riak does), so memory stays
//! bounded and a caller is never left waiting on work that cannot start.
//! Raising a thread's nice value needs no privilege.
//!
//! Two pools, so no wait can close a circle: `coordinate` runs the puts of
//! large values this node coordinates (they wait for other nodes'
//! replicas); `serve` runs other nodes' large requests to this node's
//! vnodes (which never wait on another node).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Values larger than this are bulk work (the size above which vnode
/// messages take the transport's bulk lane).
pub const BULK_BYTES: usize = 64 << 10;

/// The nice value of bulk threads.
const BULK_NICE: i32 = 10;

/// A job as the pool runs it: with how long it waited in the queue.
type Job = Box<dyn FnOnce(Duration) + Send>;

/// The pool's queue is full (its jobs carry `queued_bytes` already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overloaded {
    pub queued_bytes: usize,
}

pub struct BulkPool {
    tx: Mutex<Sender<(Job, Instant, usize)>>,
    queued: Arc<AtomicUsize>,
    max_queued_bytes: usize,
}

impl BulkPool {
    pub fn new(name: &str, threads: usize, max_queued_bytes: usize) -> BulkPool {
        let (tx, rx) = channel::<(Job, Instant, usize)>();
        let rx = Arc::new(Mutex::new(rx));
        let queued = Arc::new(AtomicUsize::new(0));
        for i in 0..threads.max(1) {
            let (rx, queued) = (rx.clone(), queued.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || worker(rx, queued));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a bulk thread");
            }
        }
        BulkPool {
            tx: Mutex::new(tx),
            queued,
            max_queued_bytes,
        }
    }

    /// Queues `job`, which carries `bytes`; it runs on one of the pool's
    /// threads after those queued before, and is told how long it waited
    /// (to give up on work its requester no longer waits for). Refused
    /// when the queue already carries its budget of bytes (one job is
    /// always taken, however large).
    pub fn spawn(
        &self,
        bytes: usize,
        job: impl FnOnce(Duration) + Send + 'static,
    ) -> Result<(), Overloaded> {
        let before = self.queued.fetch_add(bytes, Ordering::Relaxed);
        if before > 0 && before + bytes > self.max_queued_bytes {
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Overloaded {
                queued_bytes: before,
            });
        }
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        if tx.send((Box::new(job), Instant::now(), bytes)).is_err() {
            // Every worker failed to start: nothing will run it.
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Overloaded {
                queued_bytes: before,
            });
        }
        Ok(())
    }

    /// Bytes the queued jobs carry.
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

fn worker(rx: Arc<Mutex<Receiver<(Job, Instant, usize)>>>, queued: Arc<AtomicUsize>) {
    lower_priority();
    loop {
        let next = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            rx.recv()
        };
        let Ok((job, queued_at, bytes)) = next else {
            return;
        };
        queued.fetch_sub(bytes, Ordering::Relaxed);
        let waited = queued_at.elapsed();
        // A job that panics is logged; the thread goes on with the next.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(waited))).is_err() {
            tracing::error!("a bulk job panicked; its request fails");
        }
    }
}

/// Lowers the calling thread's CPU priority to that of bulk work.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's own id; no memory involved.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, BULK_NICE) != 0 {
            tracing::debug!("cannot lower a bulk thread's priority; it runs at the normal one");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_every_job_on_its_threads_and_survives_a_panic() {
        let pool = BulkPool::new("test-bulk", 2, 1 << 30);
        let (tx, rx) = channel();
        pool.spawn(1, |_| panic!("a job that panics")).unwrap();
        for i in 0..10 {
            let tx = tx.clone();
            pool.spawn(1, move |_| {
                let name = std::thread::current().name().map(str::to_string);
                tx.send((i, name)).unwrap();
            })
            .unwrap();
        }
        let mut got: Vec<(i32, Option<String>)> = (0..10)
            .map(|_| rx.recv_timeout(Duration::from_secs(30)).unwrap())
            .collect();
        got.sort();
        let order: Vec<i32> = got.iter().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
        assert!(got
            .iter()
            .all(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("test-bulk-"))));
    }

    #[test]
    fn a_full_queue_refuses_at_once_and_takes_again_when_drained() {
        let pool = BulkPool::new("test-full", 1, 100);
        let (hold_tx, hold_rx) = channel::<()>();
        let (done_tx, done_rx) = channel();
        // The one thread is busy until told; the queue then fills.
        pool.spawn(60, move |_| hold_rx.recv().unwrap()).unwrap();
        let d = done_tx.clone();
        // Until the worker takes the first job it counts as queued.
        let taken = Instant::now();
        while pool.queued_bytes() > 0 {
            assert!(
                taken.elapsed() < Duration::from_secs(30),
                "the worker takes it"
            );
            std::thread::yield_now();
        }
        pool.spawn(60, move |_| d.send(1).unwrap()).unwrap();
        let refused = pool.spawn(60, |_| {}).unwrap_err();
        assert_eq!(refused.queued_bytes, 60);
        hold_tx.send(()).unwrap();
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(30)).unwrap(), 1);
        let d = done_tx.clone();
        pool.spawn(60, move |_| d.send(2).unwrap()).unwrap();
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(30)).unwrap(), 2);
    }
}
