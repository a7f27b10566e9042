//! The PB server: one task per connection, requests answered in order.

// Handlers return `Result<Response, Response>`: the error is the answer.
#![allow(clippy::result_large_err)]

mod convert;
mod dt;
mod handler;

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
}

impl Default for PbConfig {
    fn default() -> Self {
        PbConfig {
            max_frame_bytes: rill_pb::DEFAULT_MAX_FRAME_BYTES,
            max_connections: 4096,
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
            } else if let Err(e) = connection(socket, peer, node, &config).await {
                tracing::debug!(%peer, error = %e, "PB connection ended");
            }
        });
    }
}

async fn connection(
    mut socket: TcpStream,
    peer: SocketAddr,
    node: Arc<Node>,
    config: &PbConfig,
) -> std::io::Result<()> {
    let decoder = FrameDecoder::new(config.max_frame_bytes);
    let mut input = BytesMut::with_capacity(8192);
    let mut session = Session::new(node);
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
                    return Ok(());
                }
            }
            if socket.read_buf(&mut input).await? == 0 {
                return Ok(());
            }
        };
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
    }
}

pub(crate) async fn write(socket: &mut TcpStream, responses: &[Response]) -> std::io::Result<()> {
    let mut out = BytesMut::new();
    for r in responses {
        r.encode(&mut out);
    }
    socket.write_all(&out).await
}
