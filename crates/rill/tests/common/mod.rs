//! Runs the real `rill` binary on loopback for end-to-end tests.

#![allow(dead_code)]

pub mod cluster;
pub mod sensor;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Node {
    pub dir: PathBuf,
    pub pb: SocketAddr,
    pub http: SocketAddr,
    child: Option<Child>,
}

/// Two distinct free loopback ports (both held while the second is
/// chosen, so they differ).
pub fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

impl Node {
    /// Starts a node with its data in `dir`, on fresh loopback ports,
    /// with `extra` config lines. A port chosen free can be taken by
    /// another process before the node binds it; then the node is started
    /// again on other ports.
    pub fn start(dir: &Path, extra: &str) -> Node {
        for _ in 0..4 {
            let (pb, http) = free_ports();
            if let Some(n) = Node::try_start_on(dir, extra, pb, http) {
                return n;
            }
        }
        let (pb, http) = free_ports();
        Node::start_on(dir, extra, pb, http)
    }

    pub fn start_on(dir: &Path, extra: &str, pb: u16, http: u16) -> Node {
        Node::try_start_on(dir, extra, pb, http).unwrap_or_else(|| {
            panic!(
                "rill could not listen on 127.0.0.1:{pb}/{http}: {}",
                std::fs::read_to_string(dir.join("console.log")).unwrap_or_default()
            )
        })
    }

    /// `None` when the node exited because one of its ports was taken.
    fn try_start_on(dir: &Path, extra: &str, pb: u16, http: u16) -> Option<Node> {
        let conf = write_config(dir, extra, pb, http);
        let log = std::fs::File::create(dir.join("console.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_rill"))
            .args(["-c", conf.to_str().unwrap(), "console"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut node = Node {
            dir: dir.to_path_buf(),
            pb: format!("127.0.0.1:{pb}").parse().unwrap(),
            http: format!("127.0.0.1:{http}").parse().unwrap(),
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if node
                .http("GET", "/ping", &[], b"")
                .is_some_and(|r| r.status == 200)
            {
                return Some(node);
            }
            if let Some(st) = node.child.as_mut().unwrap().try_wait().unwrap() {
                node.child = None;
                if node.log().contains("cannot listen") {
                    return None;
                }
                panic!("rill exited ({st}): {}", node.log());
            }
            assert!(
                Instant::now() < deadline,
                "rill did not start: {}",
                node.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("console.log")).unwrap_or_default()
    }

    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// SIGTERM and wait: a clean stop.
    pub fn stop(mut self) {
        let mut c = self.child.take().unwrap();
        unsafe { libc_kill(c.id() as i32, 15) };
        let status = c.wait().unwrap();
        assert!(
            status.success(),
            "rill stopped with {status}: {}",
            self.log()
        );
    }

    /// Freezes the process (SIGSTOP: its connections stay open, it takes
    /// nothing from them) and waits until the kernel says every thread
    /// of it stopped: `kill` returns before they have.
    pub fn freeze(&self) {
        self.signal(19);
        let pid = self.child.as_ref().expect("running").id();
        let stat = format!("/proc/{pid}/task");
        until("the process is stopped", Duration::from_secs(10), || {
            std::fs::read_dir(&stat).unwrap().all(|t| {
                let s = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default();
                // The state follows the command's closing parenthesis.
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('T'))
            })
        });
    }

    /// Sends signal `sig` to the process (SIGSTOP 19 freezes it, SIGCONT
    /// 18 lets it go on).
    pub fn signal(&self, sig: i32) {
        let c = self.child.as_ref().expect("running");
        unsafe { libc_kill(c.id() as i32, sig) };
    }

    /// SIGTERM, then waits for the process to exit, at most `within`;
    /// false when it did not (it is then killed).
    pub fn stop_within(mut self, within: Duration) -> bool {
        let mut c = self.child.take().unwrap();
        unsafe { libc_kill(c.id() as i32, 15) };
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if c.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    /// SIGKILL: a crash.
    pub fn kill(mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    pub fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Option<HttpReply> {
        http(self.http, method, path, headers, body)
    }

    /// PUTs `body` as `application/octet-stream` at `bucket`/`key`
    /// over HTTP; the node must answer.
    pub fn put_octets(&self, bucket: &str, key: &str, body: &[u8]) -> HttpReply {
        self.http(
            "PUT",
            &format!("/buckets/{bucket}/keys/{key}"),
            &[("Content-Type", "application/octet-stream")],
            body,
        )
        .expect("the node answers")
    }

    /// The node's `/stats`, parsed.
    pub fn stats(&self) -> serde_json::Value {
        let r = self.http("GET", "/stats", &[], b"").expect("stats");
        serde_json::from_slice(&r.body).expect("stats as JSON")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Writes `<dir>/rill.conf`: a small ring, data in `<dir>/data`, the
/// given loopback ports, then `extra` lines. Returns its path.
pub fn write_config(dir: &Path, extra: &str, pb: u16, http: u16) -> PathBuf {
    let conf = dir.join("rill.conf");
    std::fs::write(
        &conf,
        format!(
            "ring_size = 16\nplatform_data_dir = {}\nlistener.protobuf.internal = 127.0.0.1:{pb}\n\
             listener.http.internal = 127.0.0.1:{http}\nlistener.cluster.internal = 127.0.0.1:0\n{extra}\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    conf
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub struct HttpReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request with `Connection: close`; `None` if the node
/// cannot be reached.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<HttpReply> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    if headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Some(HttpReply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(p) = b.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(std::str::from_utf8(&b[..p]).unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if n == 0 || b.len() < p + 2 + n {
            break;
        }
        out.extend_from_slice(&b[p + 2..p + 2 + n]);
        b = &b[(p + 4 + n).min(b.len())..];
    }
    out
}

/// Waits, within `within`, until `cond` holds; fails the test naming
/// `what` otherwise.
pub fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `keys` of a JSON answer to `path` (a key listing or a 2i query).
pub fn keys_at(n: &Node, path: &str) -> std::collections::BTreeSet<String> {
    let r = n.http("GET", path, &[], b"").unwrap();
    assert_eq!(r.status, 200, "{path}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect()
}

/// Fills what is left of the filesystem with a file of its own, to the
/// last byte, as another program could.
/// Value `i` of `bytes` bytes: its number, then a letter of its own.
pub fn numbered_value(i: usize, bytes: usize) -> Vec<u8> {
    let mut v = format!("value {i} ").into_bytes();
    v.resize(bytes, b'a' + (i % 26) as u8);
    v
}

pub fn fill_up(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0x5au8; 64 << 10];
    let mut written = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(libc_enospc()) => break,
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
    // Smaller writes for the last partial block.
    loop {
        match f.write(&block[..512]) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    let _ = f.sync_all();
    written
}

fn libc_enospc() -> i32 {
    28
}
