//! Request targets as clients type them. The `http` crate refuses a
//! query string holding `"`, `<` or `>` (answering 400 with no body),
//! while Prometheus and VictoriaMetrics, on Go's server, take them: a
//! query pasted from their documentation, `curl -g
//! 'http://h:8098/api/v1/query?query=up{job="rill"}'`, must work. The
//! bytes a connection brings are rewritten on their way to the parser:
//! in each request line's target those three are percent-encoded; the
//! rest passes unchanged. Requests are followed through their headers
//! and bodies (`Content-Length` or chunked), so only request lines are
//! touched; whatever cannot be followed (a malformed header, an upgrade)
//! passes untouched from there on, for the parser to judge.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Longest header or chunk-size line followed; a longer one ends the
/// rewriting (the parser refuses lines far shorter).
const MAX_LINE: usize = 64 << 10;

#[derive(Debug)]
enum State {
    /// In a request line, after `spaces` spaces.
    Line {
        spaces: u8,
    },
    /// In the headers: the line so far, and what the headers said.
    Headers {
        line: Vec<u8>,
        length: u64,
        chunked: bool,
        upgrade: bool,
    },
    /// Body bytes still to pass.
    Body(u64),
    ChunkSize(Vec<u8>),
    /// A chunk's bytes still to pass, then its line end.
    ChunkData(u64),
    ChunkEnd,
    Trailers(Vec<u8>),
    /// Everything passes unchanged.
    Pass,
}

/// The rewriting of one connection's incoming bytes.
#[derive(Debug)]
pub struct Rewriter {
    state: State,
}

impl Default for Rewriter {
    fn default() -> Rewriter {
        Rewriter {
            state: State::Line { spaces: 0 },
        }
    }
}

/// Adds `b` to the line being read: the line without its `\r` when `b`
/// ends it, `None` while it goes on; a line too long ends the rewriting
/// (`Err`).
fn line_step(line: &mut Vec<u8>, b: u8) -> Result<Option<&[u8]>, ()> {
    if b == b'\n' {
        return Ok(Some(line.strip_suffix(b"\r").unwrap_or(line)));
    }
    line.push(b);
    if line.len() > MAX_LINE {
        return Err(());
    }
    Ok(None)
}

fn header_value<'a>(line: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let colon = line.iter().position(|&b| b == b':')?;
    let (n, v) = line.split_at(colon);
    n.eq_ignore_ascii_case(name.as_bytes())
        .then(|| v[1..].trim_ascii())
}

impl Rewriter {
    /// Appends to `out` what `input` becomes.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match &mut self.state {
                State::Pass => {
                    out.extend_from_slice(&input[i..]);
                    return;
                }
                State::Line { spaces } => {
                    match b {
                        b'"' | b'<' | b'>' if *spaces == 1 => {
                            out.extend_from_slice(match b {
                                b'"' => b"%22",
                                b'<' => b"%3C",
                                _ => b"%3E",
                            });
                        }
                        _ => out.push(b),
                    }
                    match b {
                        b' ' => *spaces = spaces.saturating_add(1),
                        // Empty lines before a request are skipped by
                        // parsers; a request line moves on to headers.
                        b'\n' if *spaces > 0 => {
                            self.state = State::Headers {
                                line: Vec::new(),
                                length: 0,
                                chunked: false,
                                upgrade: false,
                            }
                        }
                        _ => {}
                    }
                }
                State::Headers {
                    line,
                    length,
                    chunked,
                    upgrade,
                } => {
                    out.push(b);
                    let l = match line_step(line, b) {
                        Ok(Some(l)) => l,
                        Ok(None) => {
                            i += 1;
                            continue;
                        }
                        Err(()) => {
                            self.state = State::Pass;
                            i += 1;
                            continue;
                        }
                    };
                    if l.is_empty() {
                        self.state = if *upgrade {
                            State::Pass
                        } else if *chunked {
                            State::ChunkSize(Vec::new())
                        } else if *length > 0 {
                            State::Body(*length)
                        } else {
                            State::Line { spaces: 0 }
                        };
                    } else {
                        if let Some(v) = header_value(l, "content-length") {
                            match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) {
                                Some(n) => *length = n,
                                None => {
                                    self.state = State::Pass;
                                    i += 1;
                                    continue;
                                }
                            }
                        } else if let Some(v) = header_value(l, "transfer-encoding") {
                            *chunked = v.to_ascii_lowercase().windows(7).any(|w| w == b"chunked");
                        } else if header_value(l, "upgrade").is_some() {
                            *upgrade = true;
                        }
                        line.clear();
                    }
                }
                State::Body(n) => {
                    let take = (*n).min((input.len() - i) as u64) as usize;
                    out.extend_from_slice(&input[i..i + take]);
                    *n -= take as u64;
                    if *n == 0 {
                        self.state = State::Line { spaces: 0 };
                    }
                    i += take;
                    continue;
                }
                State::ChunkSize(line) => {
                    out.push(b);
                    let l = match line_step(line, b) {
                        Ok(Some(l)) => l,
                        Ok(None) => {
                            i += 1;
                            continue;
                        }
                        Err(()) => {
                            self.state = State::Pass;
                            i += 1;
                            continue;
                        }
                    };
                    let hex = l.split(|&c| c == b';').next().unwrap_or(b"").trim_ascii();
                    let size = std::str::from_utf8(hex)
                        .ok()
                        .and_then(|s| u64::from_str_radix(s, 16).ok());
                    self.state = match size {
                        Some(0) => State::Trailers(Vec::new()),
                        Some(n) => State::ChunkData(n),
                        None => State::Pass,
                    };
                }
                State::ChunkData(n) => {
                    let take = (*n).min((input.len() - i) as u64) as usize;
                    out.extend_from_slice(&input[i..i + take]);
                    *n -= take as u64;
                    if *n == 0 {
                        self.state = State::ChunkEnd;
                    }
                    i += take;
                    continue;
                }
                State::ChunkEnd => {
                    out.push(b);
                    if b == b'\n' {
                        self.state = State::ChunkSize(Vec::new());
                    }
                }
                State::Trailers(line) => {
                    out.push(b);
                    let empty = match line_step(line, b) {
                        Ok(Some(l)) => l.is_empty(),
                        Ok(None) => {
                            i += 1;
                            continue;
                        }
                        Err(()) => {
                            self.state = State::Pass;
                            i += 1;
                            continue;
                        }
                    };
                    line.clear();
                    if empty {
                        self.state = State::Line { spaces: 0 };
                    }
                }
            }
            i += 1;
        }
    }
}

/// A connection whose incoming bytes pass through a [`Rewriter`].
pub struct Lenient<S> {
    inner: S,
    rewriter: Rewriter,
    /// Bytes as read, and as rewritten (passed on from `at`).
    raw: Vec<u8>,
    out: Vec<u8>,
    at: usize,
}

impl<S> Lenient<S> {
    pub fn new(inner: S) -> Lenient<S> {
        Lenient {
            inner,
            rewriter: Rewriter::default(),
            raw: Vec::new(),
            out: Vec::new(),
            at: 0,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Lenient<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.at == me.out.len() {
            // As much as the parser asks for (a large body in few
            // reads), within bounds.
            let want = buf.remaining().clamp(8 << 10, 256 << 10);
            if me.raw.len() < want {
                me.raw.resize(want, 0);
            }
            let mut rb = ReadBuf::new(&mut me.raw[..want]);
            match Pin::new(&mut me.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
            me.out.clear();
            me.at = 0;
            me.rewriter.feed(&me.raw[..n], &mut me.out);
        }
        let n = (me.out.len() - me.at).min(buf.remaining());
        buf.put_slice(&me.out[me.at..me.at + n]);
        me.at += n;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Lenient<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The node's HTTP listener: each connection [`Lenient`].
pub struct Listener(pub tokio::net::TcpListener);

impl axum::serve::Listener for Listener {
    type Io = Lenient<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((s, a)) => return (Lenient::new(s), a),
                // A connection that failed as it came is the client's
                // problem; anything else (out of descriptors) is waited
                // out.
                Err(e) => {
                    if !matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                    ) {
                        tracing::error!(error = %e, "accepting an HTTP connection failed");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> Vec<u8> {
        let mut r = Rewriter::default();
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c, &mut out);
        }
        out
    }

    #[test]
    fn quotes_in_a_target_are_encoded_and_nothing_else() {
        let req =
            b"GET /api/v1/query?query=up{job=\"x\"}>1 HTTP/1.1\r\nHost: h\r\nX-Q: \"a\"\r\n\r\n";
        assert_eq!(
            run(&[req]),
            b"GET /api/v1/query?query=up{job=%22x%22}%3E1 HTTP/1.1\r\nHost: h\r\nX-Q: \"a\"\r\n\r\n"
        );
    }

    #[test]
    fn bodies_pass_untouched_and_the_next_request_is_rewritten() {
        let a = b"POST /write HTTP/1.1\r\nContent-Length: 12\r\n\r\nGET /\"x\" HTT";
        let b = b"GET /q?\"y\" HTTP/1.1\r\n\r\n";
        let out = run(&[a, b]);
        assert_eq!(
            out,
            b"POST /write HTTP/1.1\r\nContent-Length: 12\r\n\r\nGET /\"x\" HTTGET /q?%22y%22 HTTP/1.1\r\n\r\n"
        );
        // Byte by byte, the same.
        let whole: Vec<u8> = [&a[..], &b[..]].concat();
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(run(&bytes), out);
    }

    #[test]
    fn chunked_bodies_are_followed() {
        let req = b"POST /w HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\"<>\"x\r\n0\r\nT: 1\r\n\r\nGET /?\" HTTP/1.1\r\n\r\n";
        assert_eq!(
            run(&[req]),
            b"POST /w HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\"<>\"x\r\n0\r\nT: 1\r\n\r\nGET /?%22 HTTP/1.1\r\n\r\n"
        );
    }

    #[test]
    fn what_cannot_be_followed_passes_unchanged() {
        let req = b"POST /w HTTP/1.1\r\nContent-Length: x\r\n\r\nGET /?\" HTTP/1.1\r\n\r\n";
        assert_eq!(run(&[req]), req);
        let up = b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET /?\" HTTP/1.1\r\n";
        assert_eq!(run(&[up]), up);
    }
}
