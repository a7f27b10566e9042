//! A small HTTP/1.1 client over one kept-alive connection: what the
//! benchmark needs to write line protocol and ask queries of three
//! servers (bodies by Content-Length or chunked).

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Conn {
    addr: SocketAddr,
    stream: Option<BufReader<TcpStream>>,
}

/// Characters kept as they are in a query string value.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')
}

/// `s` percent-encoded for a URL's query.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Conn {
    pub fn new(addr: SocketAddr) -> Conn {
        Conn { addr, stream: None }
    }

    fn connect(&mut self) -> Result<&mut BufReader<TcpStream>> {
        if self.stream.is_none() {
            let s =
                TcpStream::connect(self.addr).with_context(|| format!("connect {}", self.addr))?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_secs(600)))?;
            self.stream = Some(BufReader::with_capacity(256 << 10, s));
        }
        Ok(self.stream.as_mut().expect("connected"))
    }

    /// One request; the connection is kept for the next (and made again
    /// once if the server had closed it).
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
        match self.try_request(method, path, body) {
            Ok(r) => Ok(r),
            Err(_) if self.stream.is_none() => self.try_request(method, path, body),
            Err(e) => Err(e),
        }
    }

    fn try_request(&mut self, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
        let addr = self.addr;
        let r = (|| {
            let s = self.connect()?;
            let head = format!(
                "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n",
                body.len()
            );
            let w = s.get_mut();
            w.write_all(head.as_bytes())?;
            w.write_all(body)?;
            read_response(s)
        })();
        if r.is_err() {
            self.stream = None;
        }
        let (status, body, close) = r?;
        if close {
            self.stream = None;
        }
        Ok((status, body))
    }
}

fn read_response(s: &mut BufReader<TcpStream>) -> Result<(u16, Vec<u8>, bool)> {
    let mut line = String::new();
    if s.read_line(&mut line)? == 0 {
        bail!("the server closed the connection");
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("not an HTTP status line: {line:?}"))?;
    let (mut length, mut chunked, mut close) = (None, false, false);
    loop {
        line.clear();
        s.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => length = v.parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                "connection" => close = v.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            s.read_line(&mut line)?;
            let n = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .with_context(|| format!("a bad chunk size {line:?}"))?;
            if n == 0 {
                line.clear();
                s.read_line(&mut line)?;
                break;
            }
            let at = body.len();
            body.resize(at + n, 0);
            s.read_exact(&mut body[at..])?;
            line.clear();
            s.read_line(&mut line)?;
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        s.read_exact(&mut body)?;
    } else if status != 204 && status != 304 {
        s.read_to_end(&mut body)?;
        close = true;
    }
    Ok((status, body, close))
}
