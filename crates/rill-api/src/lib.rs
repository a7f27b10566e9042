//! Rill's client APIs over a node: Riak's Protocol Buffers API (port
//! 8087) and HTTP API (port 8098).
//!
//! Invariants: a malformed or unsupported request gets an error answer
//! naming the problem and the connection stays usable (a frame whose
//! length cannot be trusted ends the connection, after an error answer);
//! no request can make the server allocate beyond its frame limit.

/// Now, ns since the Unix epoch (what the sensor service's writes and
/// queries take as their time).
pub fn unix_now_ns() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

pub mod http;
pub mod line_port;
mod mapred;
pub mod mqtt;
pub mod pb;
pub mod sensor_write;

/// Runs node work (which blocks on disk) off the async threads.
/// Runs a write of `bytes` on the node's pool for large values (lower
/// CPU priority, a few at once: `rill_node::bulk`) when above the bulk
/// size, else as other blocking work. Answers "overload" when that pool's
/// queue is full, and a timeout when the write waited in it for longer
/// than the request timeout.
pub(crate) async fn blocking_write<T: Send + 'static>(
    node: &std::sync::Arc<rill_node::Node>,
    bytes: usize,
    f: impl FnOnce() -> Result<T, rill_node::KvError> + Send + 'static,
) -> Result<T, rill_node::KvError> {
    if bytes <= rill_node::bulk::BULK_BYTES {
        return blocking(f).await;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let timeout = node.request_timeout();
    let queued = node.bulk_coordinate().spawn(bytes, move |waited| {
        let r = if waited < timeout {
            f()
        } else {
            Err(rill_node::KvError::Timeout)
        };
        let _ = tx.send(r);
    });
    if queued.is_err() {
        return Err(rill_node::KvError::Busy(
            "overload: too many large writes are waiting on this node; retry".into(),
        ));
    }
    rx.await.unwrap_or_else(|_| {
        Err(rill_node::KvError::Backend(
            "internal error: a large write ended without an answer".into(),
        ))
    })
}

pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("request task panicked")
}

/// A bucket type as the node's property calls name it: `default` for
/// the empty (default) type.
pub(crate) fn type_name(t: &[u8]) -> String {
    if t.is_empty() {
        "default".into()
    } else {
        String::from_utf8_lossy(t).into_owned()
    }
}

/// The Riak release whose API Rill speaks, as `RpbGetServerInfoResp`
/// reports it (clients parse three integers and gate features on them).
pub const RIAK_COMPAT_VERSION: &str = "3.2.1";

/// Entry points for the fuzz targets (fuzz/): every parser of bytes from
/// an HTTP request, on arbitrary input. Not part of the API.
#[doc(hidden)]
pub mod fuzzing {
    use axum::http::{HeaderMap, HeaderName, HeaderValue};

    pub fn http_parsers(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let _ = crate::http::util::percent_decode(&text);
        let _ = crate::http::util::parse_query(&text);
        // Header lines `name: value` from the input, then the object
        // parsers over them.
        let mut h = HeaderMap::new();
        for line in data.split(|c| *c == b'\n') {
            let Some(p) = line.iter().position(|c| *c == b':') else {
                continue;
            };
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(&line[..p]),
                HeaderValue::from_bytes(&line[p + 1..]),
            ) {
                h.append(n, v);
            }
        }
        crate::http::fuzz_object_headers(&h, data);
        // The connection's rewriter: whole, and split at every third
        // byte, the same bytes out; only `"`, `<`, `>` become escapes.
        let mut whole = Vec::new();
        crate::http::lenient::Rewriter::default().feed(data, &mut whole);
        let mut parts = Vec::new();
        let mut r = crate::http::lenient::Rewriter::default();
        for c in data.chunks(3) {
            r.feed(c, &mut parts);
        }
        assert_eq!(whole, parts);
        let unescaped = String::from_utf8_lossy(&whole)
            .replace("%22", "\"")
            .replace("%3C", "<")
            .replace("%3E", ">");
        let original = String::from_utf8_lossy(data)
            .replace("%22", "\"")
            .replace("%3C", "<")
            .replace("%3E", ">");
        assert_eq!(unescaped, original);
    }
}
