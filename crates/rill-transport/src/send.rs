//! The writer of one connection (one peer, one lane): connects, says
//! hello, then writes the chunks of the messages in flight in turn.

use crate::frame::{chunk_header, encode_hello};
use crate::lane::Lane;
use crate::schedule::Schedule;
use crate::transport::{Events, LinkEvent, Traffic};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A message handed to a writer.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub data: Bytes,
    /// Not sent before this (the test hook's delay).
    pub not_before: Option<Instant>,
}

/// Messages a writer writes at once (their chunks in turn); the rest
/// wait in the bounded queue, so senders feel back-pressure.
const IN_FLIGHT_MESSAGES: usize = 16;
/// Chunks written with one system call at most: their count and bytes.
const BATCH_CHUNKS: usize = 64;
const BATCH_BYTES: usize = 256 << 10;
/// Messages, and their bytes, a writer holds for the test hook's delay:
/// a delayed link keeps this many on their way, as a real link with that
/// latency would (not `IN_FLIGHT_MESSAGES` per delay).
const DELAYED_MESSAGES: usize = 4096;
const DELAYED_BYTES: usize = 256 << 20;

/// Messages waiting for their delay, in order.
#[derive(Default)]
struct Delayed {
    queue: VecDeque<Outgoing>,
    bytes: usize,
}

impl Delayed {
    fn has_room(&self) -> bool {
        self.queue.len() < DELAYED_MESSAGES && self.bytes < DELAYED_BYTES
    }

    /// A message is written at once unless it, or one before it, waits
    /// for its delay.
    fn admit(&mut self, m: Outgoing, schedule: &mut Schedule, now: Instant) {
        if self.queue.is_empty()
            && schedule.len() < IN_FLIGHT_MESSAGES
            && m.not_before.is_none_or(|t| t <= now)
        {
            schedule.push(m.data);
        } else {
            self.bytes += m.data.len();
            self.queue.push_back(m);
        }
    }

    /// Moves the messages whose delay is over to the schedule, as long as
    /// it has room (a receiver reassembles at most `IN_FLIGHT_MESSAGES`
    /// at once per connection, and drops a connection that sends more).
    fn release(&mut self, schedule: &mut Schedule, now: Instant) {
        while schedule.len() < IN_FLIGHT_MESSAGES
            && self
                .queue
                .front()
                .is_some_and(|m| m.not_before.is_none_or(|t| t <= now))
        {
            let m = self.queue.pop_front().expect("checked");
            self.bytes -= m.data.len();
            schedule.push(m.data);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.queue.front().and_then(|m| m.not_before)
    }
}

/// A peer that cannot be reached: sends to it fail at once until then.
pub(crate) type Unreachable = Arc<Mutex<HashMap<SocketAddr, Instant>>>;

/// A connect that takes longer fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A peer that could not be reached is not tried again for this long.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);
/// A write that makes no progress for this long drops the connection (a
/// peer that stopped reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs until the queue closes or the connection fails (what was in
/// flight is lost; the next send makes a new writer).
pub(crate) async fn run(
    to: SocketAddr,
    lane: Lane,
    name: String,
    mut rx: mpsc::Receiver<Outgoing>,
    unreachable: Unreachable,
    events: Events,
    traffic: Arc<Traffic>,
) {
    let unreachable = (unreachable, events);
    let Some(mut stream) = connect(to, lane, &name, &unreachable, &traffic).await else {
        return;
    };
    let mut schedule = Schedule::default();
    let mut delayed = Delayed::default();
    let mut open = true;
    // Whether the writer waited with nothing to write since its last write.
    let mut idle = false;
    loop {
        let now = Instant::now();
        while open && schedule.len() < IN_FLIGHT_MESSAGES && delayed.has_room() {
            match rx.try_recv() {
                Ok(m) => delayed.admit(m, &mut schedule, now),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        delayed.release(&mut schedule, now);
        // A connection that sat idle may have been closed by its peer (it
        // stopped or restarted): a write into it would be taken by the
        // kernel and lost. Nothing is in flight after a wait, so a new
        // connection carries on with what waits.
        if idle && !schedule.is_empty() && peer_closed(&stream) {
            tracing::info!(peer = %to, %lane, "the peer closed the connection; connecting again");
            let Some(s) = connect(to, lane, &name, &unreachable, &traffic).await else {
                return;
            };
            stream = s;
        }
        idle = false;
        // The next chunks in turn, written with one system call: many
        // small messages cost one write, not one each.
        let mut batch: Vec<(Vec<u8>, Bytes)> = Vec::new();
        let mut batch_bytes = 0;
        while batch.len() < BATCH_CHUNKS && batch_bytes < BATCH_BYTES {
            let Some(c) = schedule.next_chunk() else {
                break;
            };
            let header = chunk_header(c.msg_id, c.total, c.last, c.payload.len());
            batch_bytes += header.len() + c.payload.len();
            batch.push((header, c.payload));
        }
        if !batch.is_empty() {
            let mut bufs: Vec<std::io::IoSlice<'_>> = batch
                .iter()
                .flat_map(|(h, p)| [std::io::IoSlice::new(h), std::io::IoSlice::new(p)])
                .collect();
            match tokio::time::timeout(WRITE_TIMEOUT, write_all_vectored(&mut stream, &mut bufs))
                .await
            {
                Ok(Ok(())) => {
                    traffic
                        .sent
                        .fetch_add(batch_bytes as u64, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(Err(e)) => {
                    tracing::warn!(peer = %to, %lane, error = %e, "connection lost");
                    return;
                }
                Err(_) => {
                    tracing::warn!(peer = %to, %lane, "the peer stopped reading; connection dropped");
                    return;
                }
            }
            continue;
        }
        if !open && delayed.queue.is_empty() {
            return;
        }
        let next_due = delayed.next_due();
        idle = true;
        tokio::select! {
            m = rx.recv(), if open && schedule.len() < IN_FLIGHT_MESSAGES && delayed.has_room() => match m {
                Some(m) => delayed.admit(m, &mut schedule, Instant::now()),
                None => open = false,
            },
            _ = tokio::time::sleep_until(next_due.unwrap_or(now)), if next_due.is_some() => {}
        }
    }
}

/// Connects to `to` and says hello; `None` (logged, and `to` marked
/// unreachable for a while, and reported, when the connect failed) if
/// that fails.
async fn connect(
    to: SocketAddr,
    lane: Lane,
    name: &str,
    unreachable: &(Unreachable, Events),
    traffic: &Traffic,
) -> Option<TcpStream> {
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await;
    let mut stream = match connected {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(peer = %to, %lane, error = %e, "cannot connect; sends to it fail for a while");
            mark_unreachable(unreachable, to);
            return None;
        }
        Err(_) => {
            tracing::warn!(peer = %to, %lane, "connecting timed out; sends to it fail for a while");
            mark_unreachable(unreachable, to);
            return None;
        }
    };
    let _ = stream.set_nodelay(true);
    let hello = encode_hello(lane.code(), name);
    if let Err(e) = stream.write_all(&hello).await {
        tracing::warn!(peer = %to, %lane, error = %e, "connection lost");
        return None;
    }
    traffic
        .sent
        .fetch_add(hello.len() as u64, std::sync::atomic::Ordering::Relaxed);
    Some(stream)
}

/// Whether the peer closed `stream` (or it failed): a peek that does not
/// wait. The peer never writes on this connection, so anything readable
/// means closed.
fn peer_closed(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut b = 0u8;
    // SAFETY: a one-byte peek into a local on a socket this writer owns;
    // MSG_DONTWAIT, so it never blocks the runtime.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut b as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n >= 0
        || !matches!(
            std::io::Error::last_os_error().kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        )
}

fn mark_unreachable((unreachable, events): &(Unreachable, Events), to: SocketAddr) {
    unreachable
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(to, Instant::now() + RETRY_AFTER);
    let _ = events.try_send(LinkEvent::Refused(to));
}

async fn write_all_vectored(
    stream: &mut TcpStream,
    bufs: &mut [std::io::IoSlice<'_>],
) -> std::io::Result<()> {
    let mut bufs = &mut bufs[..];
    while !bufs.is_empty() {
        let n = stream.write_vectored(bufs).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}
