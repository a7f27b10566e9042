//! Coverage queries (2i, listing) see every key once across nodes.

use crate::common::{put, three_settled};
use rill_node::{Content, Metadata, Node, PutRequest};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coverage_queries_see_every_key_once_across_nodes() {
    use rill_node::IndexSpec;
    let (a, b, c) = three_settled().await;
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        for k in 0..250u32 {
            let meta = Metadata {
                indexes: vec![
                    (b"n_int".to_vec(), k.to_string().into_bytes()),
                    (
                        b"even_bin".to_vec(),
                        if k % 2 == 0 {
                            b"yes".to_vec()
                        } else {
                            b"no".to_vec()
                        },
                    ),
                ],
                ..Metadata::default()
            };
            na.put(PutRequest {
                bucket: b"b".to_vec(),
                key: Some(format!("k{k:03}").into_bytes()),
                content: Content::new(b"v".to_vec(), meta),
                ..PutRequest::default()
            })
            .unwrap();
        }
        put(&na, "other", "x").ok();
    })
    .await
    .unwrap();
    for m in [&a, &b, &c] {
        let n = m.node.clone();
        tokio::task::spawn_blocking(move || {
            let mut keys = Vec::new();
            n.list_keys(b"default", b"b", None, &mut |batch| {
                keys.extend(batch);
                true
            })
            .unwrap();
            let total = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(
                total,
                keys.len(),
                "a key listed twice through {}",
                n.nodename()
            );
            assert_eq!(keys.len(), 251, "through {}", n.nodename());
            assert_eq!(
                n.list_buckets(b"default", None).unwrap(),
                vec![b"b".to_vec()]
            );
            // aae_fold's object_stats covers every key once too.
            let stats = n
                .key_fold(&rill_node::KeyFold {
                    bucket_type: Vec::new(),
                    bucket: b"b".to_vec(),
                    key_range: None,
                    modified: None,
                    what: rill_node::KeyFoldKind::ObjectStats,
                })
                .unwrap();
            match stats {
                rill_node::KeyFoldAnswer::Stats(s) => {
                    assert_eq!(s.total_count, 251, "through {}", n.nodename());
                    assert_eq!(s.siblings.get(&1), Some(&251));
                }
                other => panic!("{other:?}"),
            }
            // A range query, paged by max_results: every match once, in order.
            let mut got = Vec::new();
            let mut continuation = None;
            loop {
                let ans = query(
                    &n,
                    b"n_int".to_vec(),
                    IndexSpec::Range(b"10".to_vec(), b"199".to_vec()),
                    Some(37),
                    continuation.take(),
                );
                got.extend(ans.results.into_iter().map(|(_, k)| k));
                match ans.continuation {
                    Some(c) => continuation = Some(c),
                    None => break,
                }
            }
            let want: Vec<Vec<u8>> = (10..200u32)
                .map(|k| format!("k{k:03}").into_bytes())
                .collect();
            assert_eq!(got, want, "through {}", n.nodename());
            let evens = query(
                &n,
                b"even_bin".to_vec(),
                IndexSpec::Eq(b"yes".to_vec()),
                None,
                None,
            );
            assert_eq!(evens.results.len(), 125);
            // $key with max_results pages through sorted keys.
            let keys = query(
                &n,
                b"$key".to_vec(),
                IndexSpec::Range(b"k100".to_vec(), b"k149".to_vec()),
                Some(20),
                None,
            );
            let want: Vec<Vec<u8>> = (100..120u32)
                .map(|k| format!("k{k:03}").into_bytes())
                .collect();
            assert_eq!(
                keys.results.into_iter().map(|(_, k)| k).collect::<Vec<_>>(),
                want
            );
            let all = query(
                &n,
                b"$bucket".to_vec(),
                IndexSpec::Eq(b"b".to_vec()),
                None,
                None,
            );
            assert_eq!(all.results.len(), 251);
        })
        .await
        .unwrap();
    }
}

/// A secondary-index query on bucket `b`, through `n`.
fn query(
    n: &Arc<Node>,
    index: Vec<u8>,
    spec: rill_node::IndexSpec,
    max_results: Option<u32>,
    continuation: Option<Vec<u8>>,
) -> rill_node::IndexAnswer {
    n.index_query(&rill_node::IndexRequest {
        bucket_type: b"default".to_vec(),
        bucket: b"b".to_vec(),
        index,
        spec,
        return_terms: false,
        max_results,
        continuation,
        term_regex: None,
    })
    .unwrap()
}
