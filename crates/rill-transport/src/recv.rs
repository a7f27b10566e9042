//! The reader of one accepted connection: a hello, then chunks,
//! reassembled into messages for the node's inbox.

use crate::frame::{decode, Frame, FrameError, CHUNK_BYTES};
use crate::lane::Lane;
use crate::transport::{Events, Incoming, LinkEvent, Traffic};
use bytes::{Buf, BytesMut};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Messages being reassembled on one connection at most (a writer has at
/// most 16 in flight).
const PARTIAL_MESSAGES: usize = 16;
/// A message up to this size gets its whole buffer once its second chunk
/// comes (larger ones grow as they come, so memory follows what the peer
/// really sent).
const RESERVE_WHOLE_BYTES: usize = 64 << 20;

/// Connections open from each node (by its hello's name), all lanes.
pub(crate) type OpenFrom = Arc<Mutex<HashMap<String, usize>>>;

#[derive(Debug, thiserror::Error)]
enum RecvError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
}

/// What every accepted connection reports to: the link events, the
/// connections open from each node, the bytes read.
#[derive(Clone)]
pub(crate) struct Watch {
    pub events: Events,
    pub open: OpenFrom,
    pub traffic: Arc<Traffic>,
}

/// Reads until the peer closes, the inbox closes, or the peer breaks the
/// protocol (then the connection is dropped, with a log line). A
/// connection of a background lane (bulk values, handoff) is read on
/// `background`'s threads once its hello says so.
pub(crate) async fn run(
    mut stream: TcpStream,
    peer: SocketAddr,
    inbox: mpsc::Sender<Incoming>,
    max_message_bytes: usize,
    background: Option<tokio::runtime::Handle>,
    watch: Watch,
) {
    let Watch {
        events,
        open,
        traffic,
    } = watch;
    let mut buf = BytesMut::with_capacity(128 << 10);
    let (from, lane) = match hello(&mut stream, &mut buf, &traffic).await {
        Ok(h) => h,
        Err(e) => return report(peer, e),
    };
    // However the reading ends, the runtime hears of it when it was the
    // last connection from that node.
    *open
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(from.clone())
        .or_default() += 1;
    let closed = Closed {
        from: from.clone(),
        events,
        open,
    };
    if let (true, Some(h)) = (lane.is_background(), background) {
        match stream.into_std() {
            Ok(std) => {
                h.spawn(async move {
                    let _closed = closed;
                    match TcpStream::from_std(std) {
                        Ok(mut s) => {
                            let r =
                                read(&mut s, buf, from, lane, &inbox, max_message_bytes, &traffic)
                                    .await;
                            if let Err(e) = r {
                                report(peer, e);
                            }
                        }
                        Err(e) => report(peer, e.into()),
                    }
                });
            }
            Err(e) => report(peer, e.into()),
        }
        return;
    }
    if let Err(e) = read(
        &mut stream,
        buf,
        from,
        lane,
        &inbox,
        max_message_bytes,
        &traffic,
    )
    .await
    {
        report(peer, e);
    }
    drop(closed);
}

/// Reports the end of the last connection from a named peer when
/// dropped. While another connection from it is open (another lane, or a
/// restarted node's new connection that came before the old one's end
/// was read), it is not reported: the node is alive, and a report would
/// take it for down until its next message and fail its requests.
struct Closed {
    from: String,
    events: Events,
    open: OpenFrom,
}

impl Drop for Closed {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let last = match open.get_mut(&self.from) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                open.remove(&self.from);
                true
            }
        };
        // Sent under the lock: a connection that opens meanwhile is
        // counted after this end is reported, never before it.
        if last {
            let _ = self
                .events
                .try_send(LinkEvent::Closed(std::mem::take(&mut self.from)));
        }
    }
}

fn report(peer: SocketAddr, e: RecvError) {
    match e {
        RecvError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        e => tracing::warn!(%peer, error = %e, "dropping a connection from a peer"),
    }
}

async fn next_frame(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    traffic: &Traffic,
) -> Result<Frame, RecvError> {
    loop {
        if let Some((frame, used)) = decode(buf)? {
            buf.advance(used);
            traffic
                .received
                .fetch_add(used as u64, std::sync::atomic::Ordering::Relaxed);
            return Ok(frame);
        }
        if stream.read_buf(buf).await? == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
}

/// The connection's hello: the peer's name and the lane.
async fn hello(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    traffic: &Traffic,
) -> Result<(String, Lane), RecvError> {
    match next_frame(stream, buf, traffic).await? {
        Frame::Hello { lane, name } => {
            let lane = Lane::from_code(lane)
                .ok_or_else(|| RecvError::Protocol(format!("unknown lane {lane}")))?;
            Ok((name, lane))
        }
        Frame::Chunk(_) => Err(RecvError::Protocol("a chunk before the hello".into())),
    }
}

async fn read(
    stream: &mut TcpStream,
    mut buf: BytesMut,
    from: String,
    lane: Lane,
    inbox: &mpsc::Sender<Incoming>,
    max_message_bytes: usize,
    traffic: &Traffic,
) -> Result<(), RecvError> {
    // Messages being reassembled: declared length, bytes so far.
    let mut partial: HashMap<u64, (usize, BytesMut)> = HashMap::new();
    let mut partial_bytes = 0usize;
    loop {
        let c = match next_frame(stream, &mut buf, traffic).await? {
            Frame::Chunk(c) => c,
            Frame::Hello { .. } => return Err(RecvError::Protocol("a second hello".into())),
        };
        let (total, mut data) = match (c.total, partial.remove(&c.msg_id)) {
            (Some(total), None) => {
                let total = usize::try_from(total).unwrap_or(usize::MAX);
                if total > max_message_bytes {
                    return Err(RecvError::Protocol(format!(
                        "a message of {total} bytes exceeds the limit of {max_message_bytes}"
                    )));
                }
                if partial.len() >= PARTIAL_MESSAGES {
                    return Err(RecvError::Protocol("too many messages in flight".into()));
                }
                (total, BytesMut::with_capacity(total.min(CHUNK_BYTES)))
            }
            (None, Some(p)) => p,
            (Some(_), Some(_)) => {
                return Err(RecvError::Protocol(format!(
                    "message {} began twice",
                    c.msg_id
                )))
            }
            (None, None) => {
                return Err(RecvError::Protocol(format!(
                    "a chunk of message {} that never began",
                    c.msg_id
                )))
            }
        };
        partial_bytes += c.payload.len();
        if partial_bytes > 2 * max_message_bytes {
            return Err(RecvError::Protocol(
                "more bytes in reassembly than two messages of the limit".into(),
            ));
        }
        if data.len() + c.payload.len() > total {
            return Err(RecvError::Protocol(format!(
                "message {} is longer than it said",
                c.msg_id
            )));
        }
        if data.len() + c.payload.len() > data.capacity() && total <= RESERVE_WHOLE_BYTES {
            // The peer is sending it: room for all of it at once, so a
            // large value is not copied again at each doubling.
            data.reserve(total - data.len());
        }
        data.extend_from_slice(&c.payload);
        if c.last {
            if data.len() != total {
                return Err(RecvError::Protocol(format!(
                    "message {} is shorter than it said",
                    c.msg_id
                )));
            }
            partial_bytes -= data.len();
            let msg = Incoming {
                from: from.clone(),
                lane,
                data: data.freeze(),
            };
            if inbox.send(msg).await.is_err() {
                return Ok(());
            }
        } else {
            partial.insert(c.msg_id, (total, data));
        }
    }
}
