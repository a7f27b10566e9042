//! The PB server: one task per connection, requests answered in order.

// Handlers return `Result<Response, Response>`: the error is the answer.
#![allow(clippy::result_large_err)]

mod aae_fold;
mod convert;
mod dt;
mod handler;
mod mapred;

use bytes::BytesMut;
use rill_node::Node;
use rill_pb::{DecodeError, FrameDecoder, Request, Response};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub use handler::Session;

/// PB server settings.
#[derive(Clone, Debug)]
pub struct PbConfig {
    pub max_frame_bytes: usize,
    /// Connections beyond this are answered with an error and closed.
    pub max_connections: u64,
    /// Where a connection moves once it sends a frame larger than
    /// `rill_node::bulk::BULK_BYTES` (a large value): a runtime whose
    /// threads run at a lower CPU priority, so the copying of its values
    /// yields the CPU to connections of small requests. `None`: every
    /// connection stays where it was accepted.
    pub bulk: Option<tokio::runtime::Handle>,
}

impl Default for PbConfig {
    fn default() -> Self {
        PbConfig {
            max_frame_bytes: rill_pb::DEFAULT_MAX_FRAME_BYTES,
            max_connections: 4096,
            bulk: None,
        }
    }
}

/// Counters for `/stats`.
#[derive(Default, Debug)]
pub struct PbStats {
    pub connects: AtomicU64,
    pub active: AtomicU64,
}

struct ActiveGuard(Arc<PbStats>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accepts connections until the listener fails.
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    config: PbConfig,
    stats: Arc<PbStats>,
) -> std::io::Result<()> {
    loop {
        let (socket, peer) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        stats.connects.fetch_add(1, Ordering::Relaxed);
        let active = stats.active.fetch_add(1, Ordering::Relaxed) + 1;
        let (node, config, stats) = (node.clone(), config.clone(), stats.clone());
        tokio::spawn(async move {
            // Counted out however the connection ends, a panic included.
            let _active = ActiveGuard(stats.clone());
            if active > config.max_connections {
                let mut socket = socket;
                let mut out = BytesMut::new();
                Response::error(format!(
                    "too many connections ({active} open, at most {}): try again later",
                    config.max_connections
                ))
                .encode(&mut out);
                let _ = socket.write_all(&out).await;
            } else {
                let session = Session::new(node);
                let input = BytesMut::with_capacity(8192);
                connection(socket, peer, session, config, input, false).await;
            }
        });
    }
}

/// Serves one connection until it ends; moves it to the bulk runtime
/// (once) after a frame carrying a large value.
async fn connection(
    socket: TcpStream,
    peer: SocketAddr,
    session: Session,
    config: PbConfig,
    input: BytesMut,
    on_bulk: bool,
) {
    match requests(socket, peer, session, &config, input, on_bulk).await {
        Ok(None) => {}
        Ok(Some((socket, session, input))) => {
            let Some(bulk) = config.bulk.clone() else {
                return;
            };
            match socket.into_std() {
                Ok(std) => {
                    bulk.spawn(async move {
                        let ended = match TcpStream::from_std(std) {
                            Ok(s) => requests(s, peer, session, &config, input, true).await,
                            Err(e) => Err(e),
                        };
                        if let Err(e) = ended {
                            tracing::debug!(%peer, error = %e, "PB connection ended");
                        }
                    });
                }
                Err(e) => tracing::debug!(%peer, error = %e, "PB connection ended"),
            }
        }
        Err(e) => tracing::debug!(%peer, error = %e, "PB connection ended"),
    }
}

/// Answers requests in order until the client goes (`None`), or returns
/// the connection to be moved to the bulk runtime.
async fn requests(
    mut socket: TcpStream,
    peer: SocketAddr,
    mut session: Session,
    config: &PbConfig,
    mut input: BytesMut,
    on_bulk: bool,
) -> std::io::Result<Option<(TcpStream, Session, BytesMut)>> {
    let decoder = FrameDecoder::new(config.max_frame_bytes);
    loop {
        let frame = loop {
            match decoder.decode(&mut input) {
                Ok(Some(f)) => break f,
                Ok(None) => {}
                Err(e) => {
                    let mut out = BytesMut::new();
                    Response::error(format!("{e}; closing the connection")).encode(&mut out);
                    socket.write_all(&out).await?;
                    tracing::warn!(%peer, error = %e, "bad PB frame");
                    return Ok(None);
                }
            }
            if socket.read_buf(&mut input).await? == 0 {
                return Ok(None);
            }
        };
        let large = frame.body.len() > rill_node::bulk::BULK_BYTES;
        let request = match Request::decode(&frame) {
            Ok(r) => r,
            Err(DecodeError::UnknownCode(code)) => {
                write(
                    &mut socket,
                    &[Response::error(format!("Unknown message code: {code}"))],
                )
                .await?;
                continue;
            }
            Err(e) => {
                write(
                    &mut socket,
                    &[Response::error(format!("Message decoding error: {e}"))],
                )
                .await?;
                continue;
            }
        };
        session.handle(request, &mut socket).await?;
        if large && !on_bulk && config.bulk.is_some() {
            tracing::debug!(%peer, "a connection carrying large values moves to the bulk threads");
            return Ok(Some((socket, session, input)));
        }
    }
}

pub(crate) async fn write(socket: &mut TcpStream, responses: &[Response]) -> std::io::Result<()> {
    let mut out = BytesMut::new();
    for r in responses {
        r.encode(&mut out);
    }
    socket.write_all(&out).await
}
