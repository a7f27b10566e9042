//! Malformed input to the real binary gets an error answer and the node
//! lives on: bad PB frames and bodies, unknown codes, oversized frames,
//! bad HTTP paths, headers and bodies.

mod common;

use bytes::BytesMut;
use common::Node;
use rill_client::Client;
use rill_pb::{FrameDecoder, Response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn raw(n: &Node, bytes: &[u8]) -> Vec<Response> {
    let mut s = TcpStream::connect(n.pb).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    s.write_all(bytes).unwrap();
    let mut buf = BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
    let d = FrameDecoder::default();
    let mut out = Vec::new();
    while let Ok(Some(f)) = d.decode(&mut buf) {
        out.push(Response::decode(&f).unwrap());
    }
    out
}

fn error_text(r: &Response) -> String {
    match r {
        Response::Error(e) => String::from_utf8_lossy(&e.errmsg).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn bad_pb_input_is_answered_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = Node::start(dir.path(), "protobuf.max_message_size = 1MB");
    // An unknown code, then a ping on the same connection: both answered.
    let r = raw(&n, &[0, 0, 0, 1, 77, 0, 0, 0, 1, 1]);
    assert_eq!(error_text(&r[0]), "Unknown message code: 77");
    assert_eq!(r[1], Response::Ping);
    // A body that is not protobuf.
    let r = raw(&n, &[0, 0, 0, 4, 9, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1]);
    assert!(error_text(&r[0]).contains("RpbGetReq"), "{:?}", r[0]);
    assert_eq!(r[1], Response::Ping);
    // A ping with a body it should not have.
    let r = raw(&n, &[0, 0, 0, 2, 1, 9]);
    assert!(error_text(&r[0]).contains("no body"), "{:?}", r[0]);
    // An oversized frame: refused, connection closed.
    let r = raw(&n, &[0x10, 0, 0, 0, 11]);
    assert!(
        error_text(&r[0]).contains("larger than the limit"),
        "{:?}",
        r[0]
    );
    // A zero-length frame.
    let r = raw(&n, &[0, 0, 0, 0]);
    assert!(error_text(&r[0]).contains("frame length 0"), "{:?}", r[0]);
    // A MapReduce request with no job in it.
    let r = raw(&n, &[0, 0, 0, 1, 23]);
    assert!(error_text(&r[0]).contains("application/json"), "{:?}", r[0]);
    assert_eq!(r.len(), 1);
    // Garbage, then the node still serves.
    let mut seed = 12345u64;
    for _ in 0..50 {
        let mut g = Vec::new();
        for _ in 0..64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            g.push(seed as u8);
        }
        g[0] = 0;
        raw(&n, &g);
    }
    assert!(n.alive());
    let mut c = Client::connect(n.pb).unwrap();
    c.ping().unwrap();
    // Empty names are refused with Riak's words.
    let e = c.get(b"", b"k").unwrap_err();
    assert!(
        e.to_string().contains("Bucket cannot be zero-length"),
        "{e}"
    );
    c.ping().unwrap();
    n.stop();
}

#[test]
fn bad_http_input_is_answered_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = Node::start(dir.path(), "");
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [u8], u16);
    let cases: &[Case] = &[
        ("GET", "/buckets/b/keys/%zz", &[], b"", 400),
        ("PUT", "/buckets/b/keys/k", &[], b"no content type", 400),
        (
            "PUT",
            "/buckets/b/keys/k",
            &[("Content-Type", "text/plain"), ("Link", "garbage")],
            b"x",
            400,
        ),
        (
            "PUT",
            "/buckets/b/keys/k",
            &[("Content-Type", "text/plain"), ("X-Riak-Vclock", "!!!")],
            b"x",
            400,
        ),
        (
            "PUT",
            "/buckets/b/keys/k",
            &[
                ("Content-Type", "text/plain"),
                ("X-Riak-Index-x_int", "nan"),
            ],
            b"x",
            400,
        ),
        ("GET", "/buckets/b/keys/k?r=lots", &[], b"", 400),
        ("GET", "/buckets/b/keys/k?r=9", &[], b"", 400),
        (
            "PUT",
            "/buckets/b/props",
            &[("Content-Type", "application/json")],
            b"{not json",
            400,
        ),
        (
            "PUT",
            "/buckets/b/props",
            &[("Content-Type", "application/json")],
            b"{\"props\":{\"n_val\":\"x\"}}",
            400,
        ),
        ("GET", "/types/nosuch/buckets/b/keys/k", &[], b"", 404),
        ("GET", "/buckets/b/index/x_int/notanumber", &[], b"", 400),
        ("GET", "/buckets/b/index/bogus/1", &[], b"", 400),
        ("GET", "/nowhere", &[], b"", 404),
    ];
    for (method, path, headers, body, want) in cases {
        let r = n.http(method, path, headers, body).unwrap();
        assert_eq!(
            r.status,
            *want,
            "{method} {path}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    // A request that is not HTTP at all.
    let mut s = TcpStream::connect(n.http).unwrap();
    s.write_all(b"\x00\x01\x02 garbage\r\n\r\n").unwrap();
    let mut sink = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.read_to_end(&mut sink);
    assert!(n.alive());
    assert_eq!(n.http("GET", "/ping", &[], b"").unwrap().status, 200);
    n.stop();
}
