//! An object written through PB reads back identically through HTTP, and
//! the other way round: value, content type, charset, user metadata,
//! indexes, links, vtag, vclock.

mod common;

use bytes::Bytes;
use common::Node;
use rill_client::Client;
use rill_pb::pb::{RpbContent, RpbGetReq, RpbLink, RpbPair, RpbPutReq};

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

#[test]
fn pb_writes_read_through_http_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let mut c = Client::connect(n.pb).unwrap();
    let value = "température: 21.5 °C".as_bytes();
    c.put_with(RpbPutReq {
        bucket: b("agree"),
        key: Some(b("from pb")),
        content: RpbContent {
            value: Bytes::from(value.to_vec()),
            content_type: Some(b("text/plain")),
            charset: Some(b("utf-8")),
            usermeta: vec![RpbPair {
                key: b("sensor"),
                value: Some(b("s-17")),
            }],
            indexes: vec![
                RpbPair {
                    key: b("room_bin"),
                    value: Some(b("kitchen")),
                },
                RpbPair {
                    key: b("floor_int"),
                    value: Some(b("2")),
                },
            ],
            links: vec![RpbLink {
                bucket: Some(b("rooms")),
                key: Some(b("kitchen")),
                tag: Some(b("in")),
            }],
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let pb = c.get(b"agree", b"from pb").unwrap().unwrap();
    let r = n
        .http("GET", "/buckets/agree/keys/from%20pb", &[], b"")
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, value);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-riak-meta-sensor"), Some("s-17"));
    assert_eq!(r.header("x-riak-index-room_bin"), Some("kitchen"));
    assert_eq!(r.header("x-riak-index-floor_int"), Some("2"));
    assert_eq!(
        r.header("link"),
        Some("</buckets/rooms/keys/kitchen>; riaktag=\"in\", </buckets/agree>; rel=\"up\"")
    );
    let vtag = String::from_utf8(pb.contents[0].vtag.clone().unwrap().to_vec()).unwrap();
    assert_eq!(r.header("etag"), Some(format!("\"{vtag}\"").as_str()));
    use base64::Engine;
    let vclock = base64::engine::general_purpose::STANDARD
        .decode(r.header("x-riak-vclock").unwrap())
        .unwrap();
    assert_eq!(vclock, pb.vclock);

    // And back: written over HTTP, read over PB.
    let r = n
        .http(
            "PUT",
            "/buckets/agree/keys/from%20http",
            &[
                ("Content-Type", "application/json; charset=\"UTF-8\""),
                ("X-Riak-Meta-Sensor", "s-18"),
                ("X-Riak-Index-room_bin", "hall, attic"),
                ("Link", "</buckets/rooms/keys/hall>; riaktag=\"in\""),
            ],
            b"{\"t\":19}",
        )
        .unwrap();
    assert_eq!(r.status, 204);
    let got = c
        .get_with(RpbGetReq {
            bucket: b("agree"),
            key: b("from http"),
            ..Default::default()
        })
        .unwrap()
        .unwrap();
    let content = &got.contents[0];
    assert_eq!(&content.value[..], b"{\"t\":19}");
    assert_eq!(
        content.content_type.as_deref(),
        Some(&b"application/json"[..])
    );
    assert_eq!(content.charset.as_deref(), Some(&b"UTF-8"[..]));
    assert_eq!(
        content.usermeta,
        vec![RpbPair {
            key: b("sensor"),
            value: Some(b("s-18"))
        }]
    );
    let idx: Vec<(Bytes, Bytes)> = content
        .indexes
        .iter()
        .map(|p| (p.key.clone(), p.value.clone().unwrap()))
        .collect();
    assert_eq!(
        idx,
        vec![(b("room_bin"), b("attic")), (b("room_bin"), b("hall"))]
    );
    assert_eq!(content.links[0].key.as_deref(), Some(&b"hall"[..]));
    // The HTTP read of the HTTP write agrees with the PB read.
    let r = n
        .http("GET", "/buckets/agree/keys/from%20http", &[], b"")
        .unwrap();
    assert_eq!(r.body, b"{\"t\":19}");
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=UTF-8")
    );

    // Conditional writes over HTTP.
    let path = "/buckets/agree/keys/cond";
    let ct = ("Content-Type", "text/plain");
    assert_eq!(n.http("PUT", path, &[ct], b"one").unwrap().status, 204);
    let cur = n.http("GET", path, &[], b"").unwrap();
    let etag = cur.header("etag").unwrap().to_string();
    let vclock = cur.header("x-riak-vclock").unwrap().to_string();
    assert_eq!(
        n.http("PUT", path, &[ct, ("If-Match", "\"nope\"")], b"two")
            .unwrap()
            .status,
        412
    );
    assert_eq!(
        n.http("PUT", path, &[ct, ("If-None-Match", &etag)], b"two")
            .unwrap()
            .status,
        412
    );
    assert_eq!(
        n.http("PUT", path, &[ct, ("If-None-Match", "*")], b"two")
            .unwrap()
            .status,
        412
    );
    assert_eq!(
        n.http("PUT", path, &[ct, ("If-Match", &etag)], b"two")
            .unwrap()
            .status,
        204
    );
    // The clock moved on: a write conditional on the old one conflicts.
    assert_eq!(
        n.http(
            "PUT",
            path,
            &[ct, ("X-Riak-If-Not-Modified", &vclock)],
            b"three"
        )
        .unwrap()
        .status,
        409
    );
    assert_eq!(n.http("GET", path, &[], b"").unwrap().body, b"two");

    // What an operator watches.
    let v = n.stats();
    assert_eq!(v["riak_kv_version"], "3.2.1");
    assert!(v["node_puts_total"].as_u64().unwrap() >= 2);
    for k in [
        "disk_usage",
        "bitcask_merges_total",
        "bitcask_files_deleted_unread_total",
        "bitcask_merge_bytes_read_total",
        "bitcask_merge_take_threshold",
        "bitcask_throttle_delay_ms",
        "out_of_space_refusals_total",
        "space_reserve_released",
    ] {
        assert!(v.get(k).is_some(), "/stats lacks {k}");
    }
    let metrics = n.http("GET", "/metrics", &[], b"").unwrap();
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("# TYPE rill_node_puts_total counter"),
        "{text}"
    );
    // A figure in milliseconds is given in seconds, as Prometheus names
    // units.
    assert!(
        text.contains("# TYPE rill_bitcask_throttle_delay_seconds gauge"),
        "{text}"
    );
    // Prometheus's own linter: a HELP and a TYPE on every metric, names
    // in base units.
    let lint = promtool_check_metrics(&text);
    assert!(lint.is_empty(), "{lint}");
    n.stop();
}

/// What `promtool check metrics` (of Debian's `prometheus` package, which
/// scripts/test-all installs) finds wrong in an exposition: empty when
/// nothing.
fn promtool_check_metrics(text: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let bin = "/usr/bin/promtool";
    assert!(
        std::path::Path::new(bin).exists(),
        "promtool is not installed: run scripts/test-all, or apt-get install prometheus"
    );
    let mut child = Command::new(bin)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        return String::new();
    }
    format!(
        "promtool check metrics ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
