//! Work on large values, apart from the rest: a small request must not
//! wait for the CPU behind copies of megabytes (the lesson of "Partisan:
//! scaling Riak Core", where one channel let an 8 MB value hold up every
//! request behind it; Rill's transport already keeps them on separate
//! lanes, and this keeps them apart on the CPU).
//!
//! A pool's threads run at a lower CPU priority (nice +10: the kernel
//! gives a normal thread about ten times their share when both want the
//! CPU), and there are few of them, so at most that many large requests
//! are worked on at once and the rest wait in the queue without using
//! memory bandwidth. Raising a thread's nice value needs no privilege.
//!
//! Two pools, so no wait can close a circle: `coordinate` runs the puts of
//! large values this node coordinates (they wait for other nodes'
//! replicas); `serve` runs other nodes' large requests to this node's
//! vnodes (which never wait on another node).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// Values larger than this are bulk work (the size above which vnode
/// messages take the transport's bulk lane).
pub const BULK_BYTES: usize = 64 << 10;

/// The nice value of bulk threads.
const BULK_NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

pub struct BulkPool {
    tx: Mutex<Sender<Job>>,
}

impl BulkPool {
    pub fn new(name: &str, threads: usize) -> BulkPool {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || worker(rx));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a bulk thread");
            }
        }
        BulkPool { tx: Mutex::new(tx) }
    }

    /// Runs `job` on one of the pool's threads, after those queued before.
    pub fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        // The workers never stop while the pool lives, so a send fails
        // only if every thread failed to start: run it here instead.
        if let Err(e) = tx.send(Box::new(job)) {
            drop(tx);
            (e.0)();
        }
    }
}

fn worker(rx: Arc<Mutex<Receiver<Job>>>) {
    lower_priority();
    loop {
        let job = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            rx.recv()
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

fn lower_priority() {
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
    fn runs_every_job_on_its_threads() {
        let pool = BulkPool::new("test-bulk", 2);
        let (tx, rx) = channel();
        for i in 0..10 {
            let tx = tx.clone();
            pool.spawn(move || {
                let name = std::thread::current().name().map(str::to_string);
                tx.send((i, name)).unwrap();
            });
        }
        let mut got: Vec<(i32, Option<String>)> = (0..10)
            .map(|_| rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap())
            .collect();
        got.sort();
        assert_eq!(
            got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        assert!(got
            .iter()
            .all(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("test-bulk-"))));
    }
}
