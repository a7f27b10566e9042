//! A blocking client for Riak's Protocol Buffers API: one connection,
//! one request at a time, as the protocol is. Works with Rill and Riak.
//!
//! ```no_run
//! let mut c = rill_client::Client::connect("127.0.0.1:8087")?;
//! c.put(b"sensors", b"s-17", b"block", "application/octet-stream")?;
//! assert_eq!(c.get(b"sensors", b"s-17")?.unwrap().values[0], b"block");
//! # Ok::<(), rill_client::Error>(())
//! ```

use bytes::{Bytes, BytesMut};
use rill_pb::pb::*;
use rill_pb::{FrameDecoder, Request, Response};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("I/O error talking to the server: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered RpbErrorResp.
    #[error("the server refused the request: {0}")]
    Riak(String),
    #[error("protocol error: {0}")]
    Protocol(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// An object as read: its siblings' values and content types, and the
/// opaque causal context to send back with the next write.
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched {
    pub values: Vec<Vec<u8>>,
    pub content_types: Vec<Option<Vec<u8>>>,
    pub vclock: Vec<u8>,
    pub contents: Vec<RpbContent>,
}

pub struct Client {
    stream: TcpStream,
    input: BytesMut,
    decoder: FrameDecoder,
}

impl Client {
    pub fn connect(addr: impl ToSocketAddrs) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Client {
            stream,
            input: BytesMut::with_capacity(64 << 10),
            decoder: FrameDecoder::new(1 << 30),
        })
    }

    /// Like [`Client::connect`], but gives up on connecting, and on every
    /// later read or write, after `timeout` (a liveness probe must not wait
    /// two minutes on a listener that never answers).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> Result<Client> {
        let stream = TcpStream::connect_timeout(addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Client {
            stream,
            input: BytesMut::with_capacity(64 << 10),
            decoder: FrameDecoder::new(1 << 30),
        })
    }

    /// Sends one request and reads one response (an RpbErrorResp becomes
    /// `Error::Riak`).
    pub fn call(&mut self, req: &Request) -> Result<Response> {
        self.send(req)?;
        self.receive()
    }

    pub fn send(&mut self, req: &Request) -> Result<()> {
        let mut out = BytesMut::new();
        req.encode(&mut out);
        self.stream.write_all(&out)?;
        Ok(())
    }

    pub fn receive(&mut self) -> Result<Response> {
        loop {
            if let Some(f) = self
                .decoder
                .decode(&mut self.input)
                .map_err(|e| Error::Protocol(e.to_string()))?
            {
                return match Response::decode(&f).map_err(|e| Error::Protocol(e.to_string()))? {
                    Response::Error(e) => {
                        Err(Error::Riak(String::from_utf8_lossy(&e.errmsg).into_owned()))
                    }
                    r => Ok(r),
                };
            }
            let mut chunk = [0u8; 64 << 10];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(Error::Protocol("the server closed the connection".into()));
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn ping(&mut self) -> Result<()> {
        match self.call(&Request::Ping)? {
            Response::Ping => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// (node, server_version).
    pub fn server_info(&mut self) -> Result<(String, String)> {
        match self.call(&Request::GetServerInfo)? {
            Response::ServerInfo(i) => Ok((
                String::from_utf8_lossy(&i.node.unwrap_or_default()).into_owned(),
                String::from_utf8_lossy(&i.server_version.unwrap_or_default()).into_owned(),
            )),
            other => Err(unexpected(other)),
        }
    }

    pub fn get(&mut self, bucket: &[u8], key: &[u8]) -> Result<Option<Fetched>> {
        self.get_with(RpbGetReq {
            bucket: Bytes::copy_from_slice(bucket),
            key: Bytes::copy_from_slice(key),
            ..Default::default()
        })
    }

    /// The bytes of the values a get finds (`None`: not found), without
    /// copying them out: for load generators.
    pub fn get_len(&mut self, bucket: &[u8], key: &[u8]) -> Result<Option<usize>> {
        let req = RpbGetReq {
            bucket: Bytes::copy_from_slice(bucket),
            key: Bytes::copy_from_slice(key),
            ..Default::default()
        };
        match self.call(&Request::Get(req))? {
            Response::Get(g) if g.content.is_empty() => Ok(None),
            Response::Get(g) => Ok(Some(g.content.iter().map(|c| c.value.len()).sum())),
            other => Err(unexpected(other)),
        }
    }

    pub fn get_with(&mut self, req: RpbGetReq) -> Result<Option<Fetched>> {
        match self.call(&Request::Get(req))? {
            Response::Get(g) if g.content.is_empty() => Ok(None),
            Response::Get(g) => Ok(Some(Fetched {
                values: g.content.iter().map(|c| c.value.to_vec()).collect(),
                content_types: g
                    .content
                    .iter()
                    .map(|c| c.content_type.as_ref().map(|b| b.to_vec()))
                    .collect(),
                vclock: g.vclock.map(|v| v.to_vec()).unwrap_or_default(),
                contents: g.content,
            })),
            other => Err(unexpected(other)),
        }
    }

    pub fn put(
        &mut self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        content_type: &str,
    ) -> Result<()> {
        self.put_with(RpbPutReq {
            bucket: Bytes::copy_from_slice(bucket),
            key: Some(Bytes::copy_from_slice(key)),
            content: RpbContent {
                value: Bytes::copy_from_slice(value),
                content_type: Some(content_type.to_string().into()),
                ..Default::default()
            },
            ..Default::default()
        })
        .map(|_| ())
    }

    pub fn put_with(&mut self, req: RpbPutReq) -> Result<RpbPutResp> {
        match self.call(&Request::Put(req))? {
            Response::Put(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    pub fn delete(&mut self, bucket: &[u8], key: &[u8]) -> Result<()> {
        let req = RpbDelReq {
            bucket: Bytes::copy_from_slice(bucket),
            key: Bytes::copy_from_slice(key),
            ..Default::default()
        };
        match self.call(&Request::Del(req))? {
            Response::Del => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Every key of a bucket (the streamed answer collected).
    pub fn list_keys(&mut self, bucket: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.send(&Request::ListKeys(RpbListKeysReq {
            bucket: Bytes::copy_from_slice(bucket),
            ..Default::default()
        }))?;
        let mut keys = Vec::new();
        loop {
            match self.receive()? {
                Response::ListKeys(k) => {
                    keys.extend(k.keys.iter().map(|k| k.to_vec()));
                    if k.done == Some(true) {
                        return Ok(keys);
                    }
                }
                other => return Err(unexpected(other)),
            }
        }
    }
}

fn unexpected(r: Response) -> Error {
    Error::Protocol(format!("unexpected answer {r:?}"))
}
