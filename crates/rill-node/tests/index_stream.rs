//! Secondary index queries streamed with bounded memory: whole answers
//! in order and once, pages through continuations that add up to the
//! whole, `$key`/`$bucket` without a set of every key, early stops.

use rill_node::{
    BackendKind, Content, DeleteMode, IndexRequest, IndexSpec, Metadata, Node, NodeConfig,
    PutRequest, INDEX_BATCH,
};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Enough keys that every vnode holds more than a page (1000) of
/// entries, so a query takes several rounds.
const KEYS: usize = 4000;

fn node(dir: &std::path::Path) -> Arc<Node> {
    let mut c = NodeConfig::new(dir);
    c.ring_size = 8;
    c.backend = BackendKind::Memory;
    c.delete_mode = DeleteMode::Immediate;
    let n = Node::open(c).unwrap();
    for i in 0..KEYS {
        let mut c = Content::new(b"v".to_vec(), Metadata::default());
        c.meta.indexes = vec![
            (b"n_int".to_vec(), (i % 97).to_string().into_bytes()),
            (
                b"s_bin".to_vec(),
                format!("s{:x}", i * 7919 % 4093).into_bytes(),
            ),
        ];
        n.put(PutRequest {
            bucket: b"b".to_vec(),
            key: Some(key(i).into_bytes()),
            content: c,
            ..PutRequest::default()
        })
        .unwrap();
    }
    n
}

fn key(i: usize) -> String {
    format!("k{:05}", i * 31 % KEYS)
}

fn req(index: &str, spec: IndexSpec) -> IndexRequest {
    IndexRequest {
        bucket_type: b"default".to_vec(),
        bucket: b"b".to_vec(),
        index: index.into(),
        spec,
        return_terms: true,
        max_results: None,
        continuation: None,
        term_regex: None,
    }
}

type Hit = (Option<Vec<u8>>, Vec<u8>);

/// Streams a query whole, checking the batches.
fn stream(n: &Node, r: &IndexRequest) -> (Vec<Hit>, Option<Vec<u8>>) {
    let plan = n.index_plan(r).unwrap();
    let mut all = Vec::new();
    let c = n
        .index_stream(&plan, &mut |batch| {
            assert!(!batch.is_empty() && batch.len() <= INDEX_BATCH);
            all.extend(batch);
            true
        })
        .unwrap();
    (all, c)
}

/// What a query must answer, from the data as written.
fn model(index: &str, lo: i64, hi: i64) -> Vec<Hit> {
    let mut m = BTreeSet::new();
    for i in 0..KEYS {
        let k = key(i).into_bytes();
        match index {
            "n_int" => {
                let t = (i % 97) as i64;
                if (lo..=hi).contains(&t) {
                    m.insert((t, Vec::new(), k));
                }
            }
            _ => {
                m.insert((0, format!("s{:x}", i * 7919 % 4093).into_bytes(), k));
            }
        }
    }
    m.into_iter()
        .map(|(i, s, k)| {
            let term = if index == "n_int" {
                i.to_string().into_bytes()
            } else {
                s
            };
            (Some(term), k)
        })
        .collect()
}

#[test]
fn whole_answers_stream_in_order_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let (ints, c) = stream(
        &n,
        &req("n_int", IndexSpec::Range(b"10".into(), b"60".into())),
    );
    assert_eq!(c, None);
    assert_eq!(ints, model("n_int", 10, 60));
    let (bins, _) = stream(
        &n,
        &req("s_bin", IndexSpec::Range(b"s".into(), b"t".into())),
    );
    assert_eq!(bins.len(), KEYS);
    assert_eq!(bins, model("s_bin", 0, 0));
    // An equality query shows no terms.
    let (eq, _) = stream(&n, &req("n_int", IndexSpec::Eq(b"5".into())));
    let want: Vec<Hit> = model("n_int", 5, 5)
        .into_iter()
        .map(|(_, k)| (None, k))
        .collect();
    assert_eq!(eq, want);
    // The collected answer is the stream's.
    let whole = n
        .index_query(&req("n_int", IndexSpec::Range(b"10".into(), b"60".into())))
        .unwrap();
    assert_eq!(whole.results, ints);
}

#[test]
fn pages_add_up_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let queries = [
        req("n_int", IndexSpec::Range(b"0".into(), b"96".into())),
        req("s_bin", IndexSpec::Range(b"s1".into(), b"s9".into())),
        req("$key", IndexSpec::Range(b"k00100".into(), b"k03000".into())),
        req("$bucket", IndexSpec::Eq(b"b".into())),
    ];
    for q in queries {
        let whole = n.index_query(&q).unwrap().results;
        assert!(whole.len() > 1000, "{}", whole.len());
        for size in [1u32, 7, 999, 1500] {
            // Pages of one go through the first 300 results only: each
            // page reads a batch from every vnode, so the whole answer a
            // result at a time takes minutes in a debug build.
            let upto = if size == 1 { 300 } else { whole.len() };
            let mut r = q.clone();
            r.max_results = Some(size);
            let mut joined = Vec::new();
            let mut pages = 0;
            while joined.len() < upto {
                let (page, c) = stream(&n, &r);
                assert!(page.len() <= size as usize);
                joined.extend(page);
                pages += 1;
                match c {
                    Some(c) => r.continuation = Some(c),
                    None => break,
                }
                // Continuations are exact and a huge page count means
                // one is not moving on.
                assert!(pages <= KEYS + 1);
            }
            assert_eq!(
                joined,
                whole[..upto],
                "{:?} by {size}",
                String::from_utf8_lossy(&q.index)
            );
        }
    }
}

#[test]
fn key_queries_stream_each_key_once_without_pages() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    let (all, _) = stream(&n, &req("$bucket", IndexSpec::Eq(b"b".into())));
    // Replicas are not repeated: each key once, from its first vnode.
    assert_eq!(all.len(), KEYS);
    let keys: BTreeSet<Vec<u8>> = all
        .iter()
        .map(|(t, k)| {
            assert_eq!(*t, None);
            k.clone()
        })
        .collect();
    assert_eq!(keys.len(), KEYS);
    let mut r = req("$key", IndexSpec::Range(b"k01000".into(), b"k01999".into()));
    r.term_regex = Some(b"5$".to_vec());
    let (some, _) = stream(&n, &r);
    let got: BTreeSet<Vec<u8>> = some.into_iter().map(|(_, k)| k).collect();
    let want: BTreeSet<Vec<u8>> = (1000..2000)
        .filter(|i| i % 10 == 5)
        .map(|i| format!("k{i:05}").into_bytes())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_stream_stops_when_its_reader_does() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    for index in ["n_int", "$bucket"] {
        let r = req(index, IndexSpec::Range(b"0".into(), b"999".into()));
        let r = if index == "$bucket" {
            req(index, IndexSpec::Eq(b"b".into()))
        } else {
            r
        };
        let plan = n.index_plan(&r).unwrap();
        let mut calls = 0;
        let c = n
            .index_stream(&plan, &mut |_| {
                calls += 1;
                false
            })
            .unwrap();
        assert_eq!((calls, c), (1, None), "{index}");
    }
}

#[test]
fn a_bad_query_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let n = node(dir.path());
    for (r, msg) in [
        (
            req("n_int", IndexSpec::Eq(b"x".into())),
            "field_parsing_failed",
        ),
        (req("foo", IndexSpec::Eq(b"x".into())), "unknown_field_type"),
        (
            IndexRequest {
                continuation: Some(b"!!".to_vec()),
                ..req("n_int", IndexSpec::Eq(b"1".into()))
            },
            "Invalid continuation",
        ),
    ] {
        let e = n.index_plan(&r).unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
    }
}
