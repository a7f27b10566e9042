//! Reading a long range on more than one core: the calling thread takes
//! the range's windows from the front, helper threads (one fewer than
//! the machine's cores, at most three, started at the first long read)
//! take them from the back. A helper that is busy, or slow to wake,
//! takes nothing: the caller takes every window it has not claimed, and
//! never waits for one a helper is still reading (it reads that one too),
//! so a read is never slower than reading alone by more than the cost of
//! posting the job and one window. What the caller reads goes straight
//! into the answer; what a helper read is appended after it, in window
//! order.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Indices `0..n`, claimed from either end: the front and the back, one
/// word, so that no index is claimed twice.
pub(super) struct Claims(AtomicU64);

impl Claims {
    pub fn new(n: u32) -> Claims {
        Claims(AtomicU64::new(u64::from(n)))
    }

    fn take(&self, from_front: bool) -> Option<usize> {
        let mut s = self.0.load(Ordering::Acquire);
        loop {
            let (f, b) = (s >> 32, s & 0xffff_ffff);
            if f >= b {
                return None;
            }
            let (next, got) = if from_front {
                (((f + 1) << 32) | b, f)
            } else {
                ((f << 32) | (b - 1), b - 1)
            };
            match self
                .0
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(got as usize),
                Err(now) => s = now,
            }
        }
    }

    /// The next index from the front.
    pub fn front(&self) -> Option<usize> {
        self.take(true)
    }

    /// The next index from the back.
    pub fn back(&self) -> Option<usize> {
        self.take(false)
    }

    /// Claims every index left (for the front): nothing more is taken
    /// from either end. The first index not taken from the front.
    pub fn close(&self) -> usize {
        let mut s = self.0.load(Ordering::Acquire);
        loop {
            let (f, b) = (s >> 32, s & 0xffff_ffff);
            let next = (f << 32) | f.min(b);
            match self
                .0
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return f.min(b) as usize,
                Err(now) => s = now,
            }
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// A read is given one helper for each this many windows (a helper
/// descheduled in the middle of a window costs that window twice).
pub(super) const WINDOWS_PER_HELPER: usize = 8;

/// The helper threads' queues (empty on a one-core machine or when no
/// thread could be started).
fn helpers() -> &'static [Sender<Job>] {
    static HELPERS: OnceLock<Vec<Sender<Job>>> = OnceLock::new();
    HELPERS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        (1..cores.min(4))
            .filter_map(|i| {
                let (tx, rx) = channel::<Job>();
                std::thread::Builder::new()
                    .name(format!("rill-sensor-read-{i}"))
                    .spawn(move || {
                        while let Some(job) = next_job(&rx) {
                            // A job that panics ends without its results: the
                            // caller reads what it misses itself.
                            let _ = catch_unwind(AssertUnwindSafe(job));
                        }
                    })
                    .ok()
                    .map(|_| tx)
            })
            .collect()
    })
}

/// How long a helper that has finished a job looks for the next before
/// it sleeps. Queries come in runs (a dashboard's panels, a client's
/// next request a round trip later): a helper that slept at once was
/// woken too late to share the next read on this machine's virtual CPUs
/// (an idle one is halted), and waking it cost the caller a system call.
/// While it looks it gives way to any other thread of its core.
const LINGER: Duration = Duration::from_micros(1000);

/// The next job (`None` when the engine's side is gone): looked for a
/// while after the last one, then waited for.
fn next_job(rx: &Receiver<Job>) -> Option<Job> {
    let until = Instant::now() + LINGER;
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) if Instant::now() < until => std::thread::yield_now(),
            Err(TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

/// An index for the caller to do, or a helper's result.
pub(super) enum Turn<T> {
    Mine(usize),
    Theirs(T),
}

/// Calls `take(Mine(i))` on the calling thread for indices from the
/// front while helpers run `work(i)` for indices from the back, then
/// `take(Theirs(..))` with the helpers' results in index order: together
/// each index once, in order (a prefix of `0..n` as `Mine`, the rest as
/// `Theirs`). The first error the caller meets stops the claiming and is
/// returned; a helper's error is returned when its index is reached.
pub(super) fn split<T, E>(
    n: usize,
    work: Arc<dyn Fn(usize) -> T + Send + Sync>,
    mut take: impl FnMut(Turn<T>) -> Result<(), E>,
) -> Result<(), E>
where
    T: Send + 'static,
{
    let wanted = helpers().len().min(n / WINDOWS_PER_HELPER);
    let (Ok(n32), 1..) = (u32::try_from(n), wanted) else {
        return (0..n).try_for_each(|i| take(Turn::Mine(i)));
    };
    let claims = Arc::new(Claims::new(n32));
    let (tx, rx) = channel::<(usize, T)>();
    for h in &helpers()[..wanted] {
        let (claims, work, tx) = (claims.clone(), work.clone(), tx.clone());
        let _ = h.send(Box::new(move || {
            while let Some(i) = claims.back() {
                if tx.send((i, work(i))).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    while let Some(i) = claims.front() {
        if let Err(e) = take(Turn::Mine(i)) {
            claims.close();
            return Err(e);
        }
    }
    let split = claims.close();
    // A helper holds at most one index it has claimed and not given: the
    // caller does not wait for it (a helper whose core the host has taken
    // away for a while would hold the whole answer up) but reads that
    // window itself; the helper's copy, if it comes, is dropped.
    let mut slots: Vec<Option<T>> = (split..n).map(|_| None).collect();
    for k in 0..slots.len() {
        while let Ok((i, r)) = rx.try_recv() {
            // A copy of a window already taken is dropped.
            if let Some(slot) = i
                .checked_sub(split)
                .filter(|&j| j >= k)
                .and_then(|j| slots.get_mut(j))
            {
                slot.get_or_insert(r);
            }
        }
        let r = slots[k].take().unwrap_or_else(|| work(split + k));
        take(Turn::Theirs(r))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn claims_from_both_ends_take_each_index_once() {
        let c = Arc::new(Claims::new(10_000));
        let got = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (c, got) = (c.clone(), got.clone());
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    while let Some(i) = if t % 2 == 0 { c.front() } else { c.back() } {
                        mine.push(i);
                    }
                    got.lock().unwrap().extend(mine);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut got = got.lock().unwrap().clone();
        got.sort_unstable();
        assert_eq!(got, (0..10_000).collect::<Vec<_>>());
        assert_eq!(c.close(), c.close());
    }

    #[test]
    fn split_gives_every_index_once_in_order() {
        for n in [0usize, 1, 2, 3, 17, 300] {
            let work: Arc<dyn Fn(usize) -> usize + Send + Sync> = Arc::new(|i| i);
            let mut all = Vec::new();
            let mut theirs_began = false;
            split::<usize, ()>(n, work, |t| {
                match t {
                    Turn::Mine(i) => {
                        assert!(!theirs_began, "a helper's result before the caller's");
                        all.push(i);
                    }
                    Turn::Theirs(i) => {
                        theirs_began = true;
                        all.push(i);
                    }
                }
                Ok(())
            })
            .unwrap();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    /// A helper takes a job sent while it lingers and one sent after it
    /// has gone to sleep, and stops when the engine's side is gone.
    #[test]
    fn a_helper_takes_jobs_while_it_lingers_and_after() {
        let (tx, rx) = channel::<Job>();
        let (done_tx, done_rx) = channel::<u32>();
        let helper = std::thread::spawn(move || {
            let mut ran = 0;
            while let Some(job) = next_job(&rx) {
                job();
                ran += 1;
            }
            ran
        });
        for k in 0..3u32 {
            let d = done_tx.clone();
            tx.send(Box::new(move || d.send(k).unwrap())).unwrap();
            assert_eq!(done_rx.recv_timeout(Duration::from_secs(30)), Ok(k));
            if k == 1 {
                // Past the linger: the next job finds it asleep.
                let slept = Instant::now() + 4 * LINGER;
                while Instant::now() < slept {
                    std::thread::yield_now();
                }
            }
        }
        drop(tx);
        assert_eq!(helper.join().unwrap(), 3);
    }

    #[test]
    fn a_failing_index_stops_the_claiming() {
        let work: Arc<dyn Fn(usize) -> Result<usize, usize> + Send + Sync> =
            Arc::new(|i| if i == 5 { Err(i) } else { Ok(i) });
        let w = work.clone();
        let r = split::<Result<usize, usize>, usize>(40, work, |t| match t {
            Turn::Mine(i) => w(i).map(drop),
            Turn::Theirs(r) => r.map(drop),
        });
        assert_eq!(r, Err(5));
    }
}
