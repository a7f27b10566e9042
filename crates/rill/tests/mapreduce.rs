//! MapReduce through the real binary, over PB (RpbMapRedReq streamed
//! back as RpbMapRedResp) and HTTP (`/mapred`, whole or chunked): the
//! built-in Erlang phases over key lists, buckets, key filters, 2i and
//! links; a deleted key never comes back; JavaScript and broken jobs are
//! refused with errors that name the phase, and the connection serves on.

mod common;

use common::Node;
use rill_client::Client;
use rill_pb::pb::{RpbMapRedReq, RpbMapRedResp};
use rill_pb::{Request, Response};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn put(n: &Node, path: &str, value: &str, headers: &[(&str, &str)]) {
    let mut h = vec![("Content-Type", "text/plain")];
    h.extend_from_slice(headers);
    let r = n.http("PUT", path, &h, value.as_bytes()).unwrap();
    assert!(r.status < 300, "{path}: {}", r.status);
}

/// Runs a job over PB: each phase's results joined, or the error text.
fn pb(c: &mut Client, job: &Value) -> Result<BTreeMap<u32, Vec<Value>>, String> {
    c.send(&Request::MapRed(RpbMapRedReq {
        request: job.to_string().into(),
        content_type: "application/json".into(),
    }))
    .unwrap();
    let mut out: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
    loop {
        match c.receive() {
            Ok(Response::MapRed(RpbMapRedResp {
                done: Some(true), ..
            })) => return Ok(out),
            Ok(Response::MapRed(RpbMapRedResp {
                phase: Some(p),
                response: Some(r),
                ..
            })) => {
                let v: Value = serde_json::from_slice(&r).unwrap();
                out.entry(p)
                    .or_default()
                    .extend(v.as_array().unwrap().clone());
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|x| x.to_string());
    v
}

fn erl(phase: &str, f: &str) -> Value {
    json!({phase: {"language": "erlang", "module": "riak_kv_mapreduce", "function": f}})
}

#[test]
fn mapreduce_over_pb_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "delete_mode = keep");
    for (k, v) in [("foo", "2"), ("bar", "3"), ("baz", "4")] {
        put(
            &n,
            &format!("/buckets/nums/keys/{k}"),
            v,
            &[("x-riak-index-n_int", v)],
        );
    }
    put(&n, "/buckets/nums/keys/gone", "99", &[]);
    assert_eq!(
        n.http("DELETE", "/buckets/nums/keys/gone", &[], b"")
            .unwrap()
            .status,
        204
    );
    put(
        &n,
        "/buckets/people/keys/alice",
        "a",
        &[("Link", "</buckets/people/keys/bob>; riaktag=\"friend\", </buckets/people/keys/carol>; riaktag=\"boss\", </buckets/people/keys/dave>; riaktag=\"tag2!@#%^&*)\"")],
    );
    put(&n, "/buckets/people/keys/bob", "b", &[]);
    put(&n, "/buckets/people/keys/carol", "c", &[]);
    let mut c = Client::connect(n.pb).unwrap();

    // Map then reduce over listed keys (the Python suite's job).
    let job = json!({"inputs": [["nums", "foo", null], ["nums", "bar", null], ["nums", "baz", null]],
                     "query": [erl("map", "map_object_value"), erl("reduce", "reduce_set_union")]});
    let r = pb(&mut c, &job).unwrap();
    assert_eq!(sorted(r[&1].clone()), [json!("2"), json!("3"), json!("4")]);
    // Over a whole bucket: the deleted key is not an input's value.
    let mut map = erl("map", "map_object_value");
    map["map"]["arg"] = json!("filter_notfound");
    let job = json!({"inputs": "nums", "query": [map, erl("reduce", "reduce_string_to_integer"), erl("reduce", "reduce_sum")]});
    assert_eq!(pb(&mut c, &job).unwrap()[&2], [json!(9)]);
    // Through key filters, and a 2i range with no phases (inputs back).
    let job = json!({"inputs": {"bucket": "nums", "key_filters": [["starts_with", "ba"]]},
                     "query": [erl("reduce", "reduce_count_inputs")]});
    assert_eq!(pb(&mut c, &job).unwrap()[&0], [json!(2)]);
    let job =
        json!({"inputs": {"bucket": "nums", "index": "n_int", "start": 3, "end": 10}, "query": []});
    assert_eq!(
        sorted(pb(&mut c, &job).unwrap()[&0].clone()),
        [json!(["nums", "bar"]), json!(["nums", "baz"])]
    );
    // Links, then the values they lead to.
    let job = json!({"inputs": [["people", "alice"]],
                     "query": [{"link": {"bucket": "people", "tag": "friend", "keep": true}}, erl("map", "map_object_value")]});
    let r = pb(&mut c, &job).unwrap();
    assert_eq!(r[&0], [json!(["people", "bob", "friend"])]);
    assert_eq!(r[&1], [json!("b")]);
    // Any tag, one of them with a stray `%` (kept as it came, as Riak's
    // mochiweb does).
    let job = json!({"inputs": [["people", "alice"]], "query": [{"link": {}}]});
    let tags: Vec<Value> = pb(&mut c, &job).unwrap()[&0]
        .iter()
        .map(|l| l[2].clone())
        .collect();
    assert_eq!(
        sorted(tags),
        [json!("boss"), json!("friend"), json!("tag2!@#%^&*)")]
    );

    // Refusals name the phase; the connection serves on.
    let js = json!({"inputs": "nums", "query": [{"map": {"language": "javascript", "name": "Riak.mapValuesJson"}}]});
    let e = pb(&mut c, &js).unwrap_err();
    assert!(e.contains("Phase 0") && e.contains("JavaScript"), "{e}");
    let job = json!({"inputs": [["nums", "foo"], ["nums", "nope"]], "query": [erl("map", "map_object_value")]});
    let e = pb(&mut c, &job).unwrap_err();
    let v: Value = serde_json::from_str(&e[e.find('{').unwrap()..]).unwrap();
    assert_eq!(v["phase"], json!(0), "{e}");
    assert!(e.contains("filter_notfound") && e.contains("nope"), "{e}");
    let job = json!({"inputs": [["nums", "foo"]], "query": [erl("map", "map_object_value"), erl("reduce", "reduce_sum")]});
    let e = pb(&mut c, &job).unwrap_err();
    assert!(e.contains("reduce_string_to_integer"), "{e}");
    assert!(pb(&mut c, &json!({"inputs": "nums"}))
        .unwrap_err()
        .contains("\"query\""));
    // A result JSON cannot carry (a whole object) fails the job mid-stream.
    let mut ident = erl("map", "map_identity");
    ident["map"]["keep"] = json!(true);
    let job = json!({"inputs": [["nums", "foo"]], "query": [ident, erl("reduce", "reduce_count_inputs")]});
    let e = pb(&mut c, &job).unwrap_err();
    assert!(e.contains("no JSON form"), "{e}");
    c.ping().unwrap();

    // HTTP: two kept phases are a list of lists.
    let mut map = erl("map", "map_object_value");
    map["map"]["keep"] = json!(true);
    let job = json!({"inputs": [["nums", "foo"], ["nums", "baz"]],
                     "query": [map, erl("reduce", "reduce_string_to_integer"), erl("reduce", "reduce_sum")]});
    let post = |path: &str, ct: &str, body: &[u8]| {
        n.http("POST", path, &[("Content-Type", ct)], body).unwrap()
    };
    let r = post("/mapred", "application/json", job.to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        sorted(v[0].as_array().unwrap().clone()),
        [json!("2"), json!("4")]
    );
    assert_eq!(v[1], json!([6]));
    // Chunked: a part per batch, {"phase": N, "data": [...]}.
    let r = post(
        "/mapred?chunked=true",
        "application/json",
        job.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200);
    let ct = r.header("content-type").unwrap().to_string();
    let boundary = ct.split("boundary=").nth(1).unwrap();
    let body = String::from_utf8(r.body).unwrap();
    assert!(body.ends_with(&format!("--{boundary}--\r\n")), "{body}");
    let mut phases: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for part in body.split(&format!("--{boundary}")) {
        if let Some((_, payload)) = part.split_once("\r\n\r\n") {
            let v: Value = serde_json::from_str(payload.trim()).unwrap();
            phases
                .entry(v["phase"].as_u64().unwrap())
                .or_default()
                .extend(v["data"].as_array().unwrap().clone());
        }
    }
    assert_eq!(phases[&2], [json!(6)]);
    assert_eq!(phases[&0].len(), 2);
    // A failure while chunked: a last part holding the error, then the end.
    let bad = json!({"inputs": [["nums", "foo"], ["nums", "nope"]], "query": [erl("map", "map_object_value")]});
    let r = post(
        "/mapred?chunked=true",
        "application/json",
        bad.to_string().as_bytes(),
    );
    let body = String::from_utf8(r.body).unwrap();
    assert!(
        body.contains("\"error\"") && body.contains("filter_notfound"),
        "{body}"
    );
    assert!(body.trim_end().ends_with("--"), "{body}");
    // Refusals: the wrong type, a body that is no job, a JavaScript
    // phase, a job that fails while it runs.
    assert_eq!(post("/mapred", "text/plain", b"{}").status, 415);
    let r = post("/mapred", "application/json", b"{\"inputs\":[]");
    assert_eq!(r.status, 400);
    assert!(String::from_utf8_lossy(&r.body).contains("not valid JSON"));
    let r = post("/mapred", "application/json", js.to_string().as_bytes());
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap()["phase"],
        json!(0)
    );
    let job = json!({"inputs": [["nums", "nope"]], "query": [erl("map", "map_object_value")]});
    let r = post("/mapred", "application/json", job.to_string().as_bytes());
    assert_eq!(r.status, 500);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["phase"], json!(0));
    assert!(v["error"].as_str().unwrap().contains("filter_notfound"));
    assert_eq!(n.http("GET", "/mapred", &[], b"").unwrap().status, 405);
    n.stop();
}
