//! Tombstone removal after a delete (Riak's `delete_mode`): a timer
//! thread takes each tombstone out of every replica once its delay has
//! passed, if it is still the same tombstone and the cluster says no
//! other node holds data of its partitions (else it tries again later,
//! and in the end keeps the tombstone: see `Coordinator::reap_job`).

use rill_backend::BKey;
use rill_object::VClock;
use rill_ring::PreflistEntry;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Pending reaps are bounded; past this, tombstones stay until the next
/// delete of the key (they are harmless, only listed).
const MAX_PENDING: usize = 1_000_000;

pub(crate) struct Job {
    pub due: Instant,
    pub key: BKey,
    pub clock: VClock,
    pub replicas: Vec<PreflistEntry>,
    /// When the reap was asked (after the tombstone was written on every
    /// replica): reports of other nodes' holdings must be newer.
    pub asked: Instant,
    /// Tries so far (a reap the cluster is not ready for waits).
    pub tries: u32,
}

impl PartialEq for Job {
    fn eq(&self, o: &Self) -> bool {
        self.due == o.due
    }
}
impl Eq for Job {}
impl PartialOrd for Job {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Job {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.due.cmp(&o.due)
    }
}

#[derive(Default)]
struct State {
    jobs: BinaryHeap<Reverse<Job>>,
    stop: bool,
}

#[derive(Clone, Default)]
pub(crate) struct Reaper {
    state: Arc<(Mutex<State>, Condvar)>,
}

impl Reaper {
    /// Schedules `job` (again) for its `due` time.
    pub fn schedule_job(&self, job: Job) {
        let (m, cv) = &*self.state;
        let mut s = m.lock().unwrap_or_else(|e| e.into_inner());
        if s.jobs.len() < MAX_PENDING {
            s.jobs.push(Reverse(job));
            cv.notify_one();
        }
    }

    /// Runs jobs as they fall due until `stop`.
    pub fn run(&self, mut reap: impl FnMut(Job)) {
        let (m, cv) = &*self.state;
        let mut s = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if s.stop {
                return;
            }
            let now = Instant::now();
            match s.jobs.peek() {
                Some(Reverse(j)) if j.due <= now => {
                    let Reverse(job) = s.jobs.pop().expect("peeked");
                    drop(s);
                    reap(job);
                    s = m.lock().unwrap_or_else(|e| e.into_inner());
                }
                Some(Reverse(j)) => {
                    let wait = j.due - now;
                    s = cv
                        .wait_timeout(s, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                None => {
                    s = cv.wait(s).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    pub fn stop(&self) {
        let (m, cv) = &*self.state;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
    }
}
