//! Streamed secondary index queries through the real binary: PB sends a
//! message per batch and `done` last, HTTP a multipart body; both carry
//! the whole answer in order, a continuation when max_results is set,
//! and a clear error for a bad query before anything else.

mod common;

use bytes::Bytes;
use common::Node;
use rill_client::Client;
use rill_pb::pb::{rpb_index_req::IndexQueryType, RpbContent, RpbIndexReq, RpbPair, RpbPutReq};
use rill_pb::{Request, Response};

const KEYS: usize = 2500;

fn fill(c: &mut Client) {
    for i in 0..KEYS {
        c.put_with(RpbPutReq {
            bucket: Bytes::from_static(b"idx"),
            key: Some(Bytes::from(format!("k{i:05}"))),
            content: RpbContent {
                value: Bytes::from_static(b"v"),
                indexes: vec![RpbPair {
                    key: Bytes::from_static(b"n_int"),
                    value: Some(Bytes::from((i % 50).to_string())),
                }],
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
    }
}

/// (term, key) in the order a range query over every term must give.
fn expected() -> Vec<(String, String)> {
    let mut v: Vec<(u32, String)> = (0..KEYS)
        .map(|i| ((i % 50) as u32, format!("k{i:05}")))
        .collect();
    v.sort();
    v.into_iter().map(|(t, k)| (t.to_string(), k)).collect()
}

fn range(max_results: Option<u32>, continuation: Option<Bytes>) -> RpbIndexReq {
    RpbIndexReq {
        bucket: Bytes::from_static(b"idx"),
        index: Bytes::from_static(b"n_int"),
        qtype: IndexQueryType::Range as i32,
        range_min: Some(Bytes::from_static(b"0")),
        range_max: Some(Bytes::from_static(b"49")),
        return_terms: Some(true),
        stream: Some(true),
        max_results,
        continuation,
        ..Default::default()
    }
}

/// One streamed PB query: its results and the final continuation.
fn pb_stream(c: &mut Client, req: RpbIndexReq) -> (Vec<(String, String)>, Option<Bytes>) {
    c.send(&Request::Index(req)).unwrap();
    let mut out = Vec::new();
    loop {
        let Response::Index(r) = c.receive().unwrap() else {
            panic!("not an index response")
        };
        assert!(r.results.len() <= 100, "{}", r.results.len());
        for p in r.results {
            out.push((
                String::from_utf8(p.key.to_vec()).unwrap(),
                String::from_utf8(p.value.unwrap().to_vec()).unwrap(),
            ));
        }
        if r.done == Some(true) {
            return (out, r.continuation);
        }
    }
}

#[test]
fn streamed_index_queries_carry_the_whole_answer() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let mut c = Client::connect(n.pb).unwrap();
    fill(&mut c);
    let want = expected();

    // PB, whole.
    let (all, cont) = pb_stream(&mut c, range(None, None));
    assert_eq!(cont, None);
    assert_eq!(all, want);
    // PB, paged through continuations.
    let mut joined = Vec::new();
    let mut cont = None;
    loop {
        let (page, next) = pb_stream(&mut c, range(Some(700), cont));
        assert!(page.len() <= 700);
        joined.extend(page);
        match next {
            Some(n) => cont = Some(n),
            None => break,
        }
    }
    assert_eq!(joined, want);
    // PB, a bad query: an error, nothing before it.
    let mut bad = range(None, None);
    bad.range_min = Some(Bytes::from_static(b"x"));
    c.send(&Request::Index(bad)).unwrap();
    let e = c.receive().unwrap_err().to_string();
    assert!(e.contains("field_parsing_failed"), "{e}");

    // HTTP, whole: a multipart body whose parts hold every result.
    let r = n
        .http(
            "GET",
            "/buckets/idx/index/n_int/0/49?stream=true&return_terms=true",
            &[],
            b"",
        )
        .unwrap();
    assert_eq!(r.status, 200);
    let ct = r.header("content-type").unwrap().to_string();
    let boundary = ct.strip_prefix("multipart/mixed; boundary=").expect(&ct);
    let body = String::from_utf8(r.body).unwrap();
    assert!(
        body.ends_with(&format!("\r\n--{boundary}--\r\n")),
        "{body:.200}"
    );
    let mut got = Vec::new();
    for part in body.split(&format!("\r\n--{boundary}")).skip(1) {
        let Some((_, json)) = part.split_once("\r\n\r\n") else {
            assert_eq!(part, "--\r\n");
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        for pair in v["results"].as_array().unwrap() {
            let (t, k) = pair.as_object().unwrap().iter().next().unwrap();
            got.push((t.clone(), k.as_str().unwrap().to_string()));
        }
    }
    assert_eq!(got, want);
    // HTTP, paged: the continuation travels in a part of its own.
    let r = n
        .http(
            "GET",
            "/buckets/idx/index/n_int/0/49?stream=true&max_results=10",
            &[],
            b"",
        )
        .unwrap();
    let body = String::from_utf8(r.body).unwrap();
    assert!(body.contains("\"continuation\""), "{body}");
    // HTTP, a bad query: a plain 400 before any part.
    let r = n
        .http("GET", "/buckets/idx/index/n_int/x/49?stream=true", &[], b"")
        .unwrap();
    assert_eq!(r.status, 400);
    assert!(String::from_utf8_lossy(&r.body).contains("field_parsing_failed"));
}
