//! Sends waiting for room in a full lane: one queue per peer and lane,
//! in the order they were sent, bounded by bytes, drained by one task per
//! queue (never a task per message). A send that finds its queue at the
//! bound fails at once as overload, which a request's coordinator reports
//! to its client as Riak's overload. While a queue exists every send to
//! that peer and lane joins it, so a message never overtakes one sent
//! before it.

use bytes::Bytes;
use rill_transport::{Lane, SendError};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of messages waiting in one peer's lane, at most (a single
/// message of any size is taken into an empty queue).
pub(crate) const BACKLOG_BYTES: usize = 32 << 20;

/// What to do when a waiting message cannot be sent.
pub(crate) type Failed = Box<dyn FnOnce(SendError) + Send>;

type Key = (SocketAddr, Lane);

struct Queue {
    items: VecDeque<(Bytes, Failed)>,
    bytes: usize,
}

/// Every waiting queue of a node.
pub(crate) struct Backlogs {
    queues: HashMap<Key, Queue>,
    /// How many queues exist, readable without the lock: with none, a
    /// send tries its lane without taking it (the common case).
    count: Arc<AtomicUsize>,
    limit: usize,
    /// Sends refused at the bound, ever.
    pub refused: u64,
}

/// What became of a message given to [`Backlogs::push`].
pub(crate) enum Admit {
    /// Queued behind others; the queue's drainer sends it.
    Queued,
    /// The queue is new: start its drainer.
    StartDrainer,
    /// The queue is at its bound: the message was not taken.
    Refused(Failed),
}

impl Backlogs {
    pub fn new(limit: usize) -> Backlogs {
        Backlogs {
            queues: HashMap::new(),
            count: Arc::new(AtomicUsize::new(0)),
            limit,
            refused: 0,
        }
    }

    /// Whether messages to this peer and lane wait (or one is being
    /// sent by the drainer): a new one must go behind them.
    pub fn waiting(&self, to: SocketAddr, lane: Lane) -> bool {
        self.queues.contains_key(&(to, lane))
    }

    pub fn push(&mut self, to: SocketAddr, lane: Lane, msg: Bytes, failed: Failed) -> Admit {
        let limit = self.limit;
        match self.queues.get_mut(&(to, lane)) {
            None => {
                let bytes = msg.len();
                self.count.fetch_add(1, Ordering::SeqCst);
                self.queues.insert(
                    (to, lane),
                    Queue {
                        items: VecDeque::from([(msg, failed)]),
                        bytes,
                    },
                );
                Admit::StartDrainer
            }
            Some(q) if q.items.is_empty() || q.bytes + msg.len() <= limit => {
                q.bytes += msg.len();
                q.items.push_back((msg, failed));
                Admit::Queued
            }
            Some(_) => {
                self.refused += 1;
                Admit::Refused(failed)
            }
        }
    }

    /// The next message for the drainer. `None`: nothing waits, and the
    /// queue is gone (the drainer ends; the next send tries the lane
    /// itself).
    pub fn pop(&mut self, to: SocketAddr, lane: Lane) -> Option<(Bytes, Failed)> {
        let q = self.queues.get_mut(&(to, lane))?;
        match q.items.pop_front() {
            Some((msg, failed)) => {
                q.bytes -= msg.len();
                Some((msg, failed))
            }
            None => {
                self.queues.remove(&(to, lane));
                self.count.fetch_sub(1, Ordering::SeqCst);
                None
            }
        }
    }

    /// Removes a queue whose drainer is gone, and gives its messages
    /// back to be failed.
    fn abandon(&mut self, to: SocketAddr, lane: Lane) -> Vec<Failed> {
        let Some(q) = self.queues.remove(&(to, lane)) else {
            return Vec::new();
        };
        self.count.fetch_sub(1, Ordering::SeqCst);
        q.items.into_iter().map(|(_, f)| f).collect()
    }

    /// The count of queues, to read without the lock.
    pub fn queues(&self) -> Arc<AtomicUsize> {
        self.count.clone()
    }

    /// Bytes waiting, all queues.
    pub fn bytes(&self) -> usize {
        self.queues.values().map(|q| q.bytes).sum()
    }
}

/// A drainer that ends before its queue is empty (its task cancelled as
/// the runtime stops, or a panic) takes the queue with it and fails what
/// waited: otherwise the queue would stay, and every later send to that
/// peer and lane would join it and never go.
struct Draining {
    backlogs: Arc<Mutex<Backlogs>>,
    to: SocketAddr,
    lane: Lane,
    /// The message being sent's answer to a failure.
    sending: Option<Failed>,
    finished: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some(failed) = self.sending.take() {
            failed(SendError::Closed(self.to));
        }
        let left = self
            .backlogs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abandon(self.to, self.lane);
        for failed in left {
            failed(SendError::Closed(self.to));
        }
    }
}

/// The drainer of one queue: sends its messages one after another with
/// `send` (which waits for room), until the queue is empty. Its guard is
/// made before the future is, so a future dropped unpolled (spawned on a
/// runtime that is stopping) gives the queue up too.
pub(crate) fn drain<F, Fut>(
    backlogs: Arc<Mutex<Backlogs>>,
    to: SocketAddr,
    lane: Lane,
    send: F,
) -> impl Future<Output = ()>
where
    F: Fn(Bytes) -> Fut,
    Fut: Future<Output = Result<(), SendError>>,
{
    let guard = Draining {
        backlogs,
        to,
        lane,
        sending: None,
        finished: false,
    };
    drain_with(guard, send)
}

async fn drain_with<F, Fut>(mut guard: Draining, send: F)
where
    F: Fn(Bytes) -> Fut,
    Fut: Future<Output = Result<(), SendError>>,
{
    let (to, lane) = (guard.to, guard.lane);
    loop {
        let next = guard
            .backlogs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop(to, lane);
        let Some((msg, failed)) = next else {
            guard.finished = true;
            return;
        };
        guard.sending = Some(failed);
        let sent = send(msg).await;
        let failed = guard.sending.take().expect("set before the send");
        if let Err(e) = sent {
            failed(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    fn msg(i: u8, len: usize) -> Bytes {
        Bytes::from(vec![i; len])
    }

    fn counting(n: &Arc<AtomicUsize>) -> Failed {
        let n = n.clone();
        Box::new(move |e| {
            assert!(matches!(e, SendError::Closed(_)), "{e}");
            n.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn a_queue_takes_messages_to_its_bound_in_order_and_refuses_beyond() {
        let failed = Arc::new(AtomicUsize::new(0));
        let mut b = Backlogs::new(100);
        assert!(!b.waiting(addr(), Lane::Bulk));
        assert!(matches!(
            b.push(addr(), Lane::Bulk, msg(1, 60), counting(&failed)),
            Admit::StartDrainer
        ));
        assert!(matches!(
            b.push(addr(), Lane::Bulk, msg(2, 40), counting(&failed)),
            Admit::Queued
        ));
        assert!(matches!(
            b.push(addr(), Lane::Bulk, msg(3, 1), counting(&failed)),
            Admit::Refused(_)
        ));
        // Another lane has its own queue.
        assert!(matches!(
            b.push(addr(), Lane::Control, msg(9, 1), counting(&failed)),
            Admit::StartDrainer
        ));
        assert_eq!(b.bytes(), 101);
        assert_eq!(b.refused, 1);
        let queues = b.queues();
        assert_eq!(queues.load(Ordering::SeqCst), 2);
        assert_eq!(b.pop(addr(), Lane::Bulk).unwrap().0, msg(1, 60));
        // Popped, not sent yet: a new message still goes behind it.
        assert!(b.waiting(addr(), Lane::Bulk));
        assert_eq!(b.pop(addr(), Lane::Bulk).unwrap().0, msg(2, 40));
        // One message larger than the bound goes into an empty queue.
        assert!(matches!(
            b.push(addr(), Lane::Bulk, msg(4, 500), counting(&failed)),
            Admit::Queued
        ));
        assert_eq!(b.pop(addr(), Lane::Bulk).unwrap().0, msg(4, 500));
        assert!(b.pop(addr(), Lane::Bulk).is_none());
        assert!(!b.waiting(addr(), Lane::Bulk));
        // Sends without a backlog may skip the lock again for this lane.
        assert_eq!(queues.load(Ordering::SeqCst), 1);
    }

    /// One drainer sends a queue's messages in order, each after the
    /// previous one was taken, and reports each failure to its sender;
    /// messages that arrive while it runs go behind.
    #[tokio::test]
    async fn a_drainer_sends_in_order_and_reports_failures() {
        let failed = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(Mutex::new(Backlogs::new(1 << 20)));
        for i in 0..5u8 {
            let admit = b
                .lock()
                .unwrap()
                .push(addr(), Lane::Small, msg(i, 10), counting(&failed));
            assert_eq!(matches!(admit, Admit::StartDrainer), i == 0);
        }
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let rx = Arc::new(tokio::sync::Mutex::new(Some(rx)));
        let drainer = {
            let (b, sent) = (b.clone(), sent.clone());
            tokio::spawn(drain(b, addr(), Lane::Small, move |m: Bytes| {
                let (sent, rx) = (sent.clone(), rx.clone());
                async move {
                    // The first send waits for the lane to have room.
                    if let Some(rx) = rx.lock().await.take() {
                        rx.await.unwrap();
                    }
                    sent.lock().unwrap().push(m[0]);
                    if m[0] == 3 {
                        Err(SendError::Closed(addr()))
                    } else {
                        Ok(())
                    }
                }
            }))
        };
        // Sent while the drainer waits: behind the others.
        assert!(matches!(
            b.lock()
                .unwrap()
                .push(addr(), Lane::Small, msg(5, 10), counting(&failed)),
            Admit::Queued
        ));
        tx.send(()).unwrap();
        drainer.await.unwrap();
        assert_eq!(*sent.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(failed.load(Ordering::SeqCst), 1);
        assert!(!b.lock().unwrap().waiting(addr(), Lane::Small));
    }

    /// A drainer dropped before it ever ran (spawned on a runtime that
    /// is stopping) gives its queue up too.
    #[test]
    fn a_drainer_never_run_gives_its_queue_up() {
        let failed = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(Mutex::new(Backlogs::new(1 << 20)));
        let _ = b
            .lock()
            .unwrap()
            .push(addr(), Lane::Small, msg(1, 10), counting(&failed));
        let never = drain(b.clone(), addr(), Lane::Small, |_m: Bytes| async {
            Ok::<(), SendError>(())
        });
        drop(never);
        assert!(!b.lock().unwrap().waiting(addr(), Lane::Small));
        assert_eq!(b.lock().unwrap().queues().load(Ordering::SeqCst), 0);
        assert_eq!(failed.load(Ordering::SeqCst), 1);
    }

    /// A drainer cancelled midway (its runtime stopping) leaves no queue
    /// behind, and fails what waited in it.
    #[tokio::test]
    async fn a_drainer_cancelled_midway_takes_its_queue_with_it() {
        let failed = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(Mutex::new(Backlogs::new(1 << 20)));
        for i in 0..3u8 {
            let _ = b
                .lock()
                .unwrap()
                .push(addr(), Lane::Bulk, msg(i, 10), counting(&failed));
        }
        let task = tokio::spawn(drain(b.clone(), addr(), Lane::Bulk, |_m: Bytes| {
            std::future::pending::<Result<(), SendError>>()
        }));
        // The first message is being sent (for ever); two wait.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        while b.lock().unwrap().bytes() != 20 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the drainer started"
            );
            tokio::task::yield_now().await;
        }
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        assert!(!b.lock().unwrap().waiting(addr(), Lane::Bulk));
        // The one being sent and the two waiting.
        assert_eq!(failed.load(Ordering::SeqCst), 3);
    }
}
