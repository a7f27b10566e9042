//! A node end to end without its network: KV semantics, bucket types,
//! listing, 2i, deletes, restarts.

use rill_node::{
    BackendKind, Content, DeleteAnswer, DeleteMode, DeleteRequest, GetAnswer, GetRequest,
    IndexRequest, IndexSpec, KvError, Metadata, Node, NodeConfig, PutRequest, Quorum,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn config(dir: &std::path::Path, backend: BackendKind) -> NodeConfig {
    let mut c = NodeConfig::new(dir);
    c.ring_size = 16;
    c.backend = backend;
    c.delete_mode = DeleteMode::Immediate;
    c
}

fn node(dir: &std::path::Path) -> Arc<Node> {
    Node::open(config(dir, BackendKind::Bitcask)).unwrap()
}

fn put(
    n: &Node,
    t: &str,
    b: &str,
    k: &str,
    v: &str,
    vclock: Option<Vec<u8>>,
) -> rill_node::PutAnswer {
    n.put(PutRequest {
        bucket_type: t.into(),
        bucket: b.into(),
        key: Some(k.into()),
        vclock,
        content: Content::new(
            v.to_string(),
            Metadata {
                content_type: Some(b"text/plain".to_vec()),
                ..Metadata::default()
            },
        ),
        ..PutRequest::default()
    })
    .unwrap()
}

fn get(n: &Node, t: &str, b: &str, k: &str) -> GetAnswer {
    n.get(&GetRequest {
        bucket_type: t.into(),
        bucket: b.into(),
        key: k.into(),
        deletedvclock: true,
        ..GetRequest::default()
    })
    .unwrap()
}

fn values(a: &GetAnswer) -> Vec<String> {
    match a {
        GetAnswer::Found(o) => o
            .contents
            .iter()
            .map(|c| String::from_utf8(c.value.to_vec()).unwrap())
            .collect(),
        other => panic!("expected an object, got {other:?}"),
    }
}

fn props(v: serde_json::Value) -> rill_node::Props {
    v.as_object().unwrap().clone()
}

#[test]
fn put_get_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let n = node(dir.path());
        put(&n, "", "b", "k", "v1", None);
        assert_eq!(values(&get(&n, "", "b", "k")), ["v1"]);
        assert_eq!(get(&n, "", "b", "missing"), GetAnswer::NotFound);
    }
    let n = node(dir.path());
    assert_eq!(values(&get(&n, "default", "b", "k")), ["v1"]);
}

#[test]
fn default_bucket_keeps_the_newest_and_allow_mult_keeps_siblings() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    put(&n, "", "b", "k", "one", None);
    put(&n, "", "b", "k", "two", None);
    assert_eq!(values(&get(&n, "", "b", "k")), ["two"]);
    n.buckets()
        .set_bucket_props("default", b"sibs", &props(json!({"allow_mult": true})))
        .unwrap();
    let first = put(&n, "", "sibs", "k", "one", None);
    put(&n, "", "sibs", "k", "two", None);
    assert_eq!(values(&get(&n, "", "sibs", "k")), ["one", "two"]);
    // A write with the merged context resolves them.
    let GetAnswer::Found(o) = get(&n, "", "sibs", "k") else {
        panic!()
    };
    put(
        &n,
        "",
        "sibs",
        "k",
        "resolved",
        Some(rill_object::encode_vclock(&o.clock)),
    );
    assert_eq!(values(&get(&n, "", "sibs", "k")), ["resolved"]);
    // Three writers with the first, stale context: three siblings.
    let stale = rill_object::encode_vclock(&first.object.clock);
    for v in ["a", "b", "c"] {
        put(&n, "", "sibs", "k", v, Some(stale.clone()));
    }
    assert_eq!(
        values(&get(&n, "", "sibs", "k")),
        ["a", "b", "c", "resolved"]
    );
}

#[test]
fn typed_buckets_need_an_active_type() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let e = n
        .put(PutRequest {
            bucket_type: b"nope".to_vec(),
            bucket: b"b".to_vec(),
            key: Some(b"k".to_vec()),
            ..PutRequest::default()
        })
        .unwrap_err();
    assert_eq!(e, KvError::NoType);
    n.buckets().create_type("plain", &props(json!({}))).unwrap();
    n.buckets().activate_type("plain").unwrap();
    put(&n, "plain", "b", "k", "x", None);
    put(&n, "plain", "b", "k", "y", None);
    assert_eq!(
        values(&get(&n, "plain", "b", "k")),
        ["x", "y"],
        "typed buckets allow_mult"
    );
    assert_eq!(n.list_buckets(b"plain", None).unwrap(), vec![b"b".to_vec()]);
    assert!(n.list_buckets(b"default", None).unwrap().is_empty());
    drop(n);
    let n = node(dir.path());
    assert_eq!(n.buckets().type_props("plain").unwrap()["allow_mult"], true);
}

#[test]
fn quorum_values_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let e = n
        .get(&GetRequest {
            bucket: b"b".to_vec(),
            key: b"k".to_vec(),
            r: Some(Quorum::N(4)),
            ..GetRequest::default()
        })
        .unwrap_err();
    assert_eq!(e.to_string(), "{n_val_violation,3}");
    let e = n
        .get(&GetRequest {
            bucket: b"".to_vec(),
            key: b"k".to_vec(),
            ..GetRequest::default()
        })
        .unwrap_err();
    assert_eq!(e.to_string(), "Bucket cannot be zero-length");
}

#[test]
fn conditional_puts() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let mut req = PutRequest {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        if_none_match: true,
        ..PutRequest::default()
    };
    n.put(req.clone()).unwrap();
    assert_eq!(n.put(req.clone()).unwrap_err(), KvError::MatchFound);
    req.if_none_match = false;
    req.if_not_modified = true;
    req.vclock = Some(rill_object::encode_vclock(&rill_node::VClock::new()));
    assert_eq!(n.put(req.clone()).unwrap_err(), KvError::Modified);
    let GetAnswer::Found(o) = get(&n, "", "b", "k") else {
        panic!()
    };
    req.vclock = Some(rill_object::encode_vclock(&o.clock));
    n.put(req.clone()).unwrap();
    req.key = Some(b"other".to_vec());
    assert_eq!(n.put(req).unwrap_err(), KvError::NotFound);
}

#[test]
fn deletes_leave_nothing_behind_in_immediate_mode() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    put(&n, "", "b", "k", "v", None);
    n.delete(&DeleteRequest {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        ..DeleteRequest::default()
    })
    .unwrap();
    assert_eq!(get(&n, "", "b", "k"), GetAnswer::NotFound);
    let mut keys = Vec::new();
    n.list_keys(b"default", b"b", None, &mut |batch| {
        keys.extend(batch);
        true
    })
    .unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    // Deleting what is not there writes nothing and says so.
    let answer = n
        .delete(&DeleteRequest {
            bucket: b"b".to_vec(),
            key: b"never".to_vec(),
            ..DeleteRequest::default()
        })
        .unwrap();
    assert_eq!(answer, DeleteAnswer::NotFound);
    assert_eq!(get(&n, "", "b", "never"), GetAnswer::NotFound);
}

#[test]
fn delayed_reaping_keeps_the_tombstone_for_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), BackendKind::Memory);
    c.delete_mode = DeleteMode::After(Duration::from_millis(200));
    let n = Node::open(c).unwrap();
    put(&n, "", "b", "k", "v", None);
    n.delete(&DeleteRequest {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        ..DeleteRequest::default()
    })
    .unwrap();
    assert!(matches!(get(&n, "", "b", "k"), GetAnswer::Deleted(_)));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while get(&n, "", "b", "k") != GetAnswer::NotFound {
        assert!(
            std::time::Instant::now() < deadline,
            "tombstone never reaped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn list_keys_sees_each_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    for i in 0..250 {
        put(&n, "", "many", &format!("k{i}"), "v", None);
    }
    let mut keys = Vec::new();
    let mut batches = 0;
    n.list_keys(b"", b"many", None, &mut |batch| {
        assert!(!batch.is_empty() && batch.len() <= 100);
        batches += 1;
        keys.extend(batch);
        true
    })
    .unwrap();
    // Every key is stored on n_val vnodes and reported exactly once.
    assert_eq!(keys.len(), 250);
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 250);
    assert!(batches >= 3);
}

#[test]
fn secondary_indexes_with_pages() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    for i in 0..10i64 {
        let mut c = Content::new(b"v".to_vec(), Metadata::default());
        c.meta.indexes = vec![
            (b"Age_INT".to_vec(), i.to_string().into_bytes()),
            (b"name_bin".to_vec(), format!("n{}", i % 3).into_bytes()),
        ];
        n.put(PutRequest {
            bucket: b"people".to_vec(),
            key: Some(format!("p{i}").into_bytes()),
            content: c,
            ..PutRequest::default()
        })
        .unwrap();
    }
    let mut req = IndexRequest {
        bucket_type: vec![],
        bucket: b"people".to_vec(),
        index: b"age_int".to_vec(),
        spec: IndexSpec::Range(b"2".to_vec(), b"7".to_vec()),
        return_terms: true,
        max_results: Some(4),
        continuation: None,
        term_regex: None,
    };
    let page1 = n.index_query(&req).unwrap();
    assert_eq!(page1.results.len(), 4);
    assert_eq!(page1.results[0], (Some(b"2".to_vec()), b"p2".to_vec()));
    req.continuation = page1.continuation.clone();
    let page2 = n.index_query(&req).unwrap();
    assert_eq!(
        page2.results,
        vec![
            (Some(b"6".to_vec()), b"p6".to_vec()),
            (Some(b"7".to_vec()), b"p7".to_vec())
        ]
    );
    assert_eq!(page2.continuation, None);
    let eq = n
        .index_query(&IndexRequest {
            index: b"name_bin".to_vec(),
            spec: IndexSpec::Eq(b"n0".to_vec()),
            max_results: None,
            continuation: None,
            ..req.clone()
        })
        .unwrap();
    let keys: Vec<_> = eq
        .results
        .iter()
        .map(|(t, k)| (t.clone(), k.clone()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (None, b"p0".to_vec()),
            (None, b"p3".to_vec()),
            (None, b"p6".to_vec()),
            (None, b"p9".to_vec())
        ]
    );
    let all = n
        .index_query(&IndexRequest {
            index: b"$bucket".to_vec(),
            spec: IndexSpec::Eq(b"people".to_vec()),
            max_results: None,
            continuation: None,
            ..req.clone()
        })
        .unwrap();
    assert_eq!(all.results.len(), 10);
    let bad = n.put(PutRequest {
        bucket: b"people".to_vec(),
        key: Some(b"x".to_vec()),
        content: Content {
            meta: Metadata {
                indexes: vec![(b"foo".to_vec(), b"1".to_vec())],
                ..Metadata::default()
            },
            ..Content::default()
        },
        ..PutRequest::default()
    });
    assert_eq!(
        bad.unwrap_err().to_string(),
        "{precommit_fail,[{unknown_field_type,<<\"foo\">>}]}"
    );
}

#[test]
fn limits_are_enforced_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), BackendKind::Memory);
    c.object_size_max_bytes = 10_000;
    c.siblings_max = 3;
    let n = Node::open(c).unwrap();
    let e = n
        .put(PutRequest {
            bucket: b"b".to_vec(),
            key: Some(b"big".to_vec()),
            content: Content::new(vec![0u8; 20_000], Metadata::default()),
            ..PutRequest::default()
        })
        .unwrap_err();
    assert!(matches!(e, KvError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("object.size.maximum"), "{e}");
    n.buckets()
        .set_bucket_props("default", b"sibs", &props(json!({"allow_mult": true})))
        .unwrap();
    for v in ["a", "b", "c"] {
        put(&n, "", "sibs", "k", v, None);
    }
    let e = n
        .put(PutRequest {
            bucket: b"sibs".to_vec(),
            key: Some(b"k".to_vec()),
            content: Content::new(b"d".to_vec(), Metadata::default()),
            ..PutRequest::default()
        })
        .unwrap_err();
    assert_eq!(e, KvError::TooManySiblings(4));
    // Nothing of the refused write is stored.
    assert_eq!(values(&get(&n, "", "sibs", "k")), ["a", "b", "c"]);
    let long_key = vec![b'k'; 70_000];
    let e = n
        .get(&GetRequest {
            bucket: b"b".to_vec(),
            key: long_key,
            ..GetRequest::default()
        })
        .unwrap_err();
    assert!(e.to_string().contains("65535"), "{e}");
}
