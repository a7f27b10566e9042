//! Secondary index order through the real binary: `_bin` terms come back
//! in byte order of the terms ("a b" < "aa" < "ab" < "b"), pages joined
//! through continuations give the whole answer, `_int` terms outside 64
//! bits are refused on write with a clear error (a query bound beyond is
//! held at the end of the range), and a store whose index entries
//! an earlier build wrote (index keys version 1) is migrated when the
//! node starts, answering the same.

mod common;

use common::Node;
use std::path::Path;

const TERMS: [&str; 8] = ["b", "aa", "a", "ab", "a b", "~", "A", "ba"];

fn put(n: &Node, key: &str, term: &str, int: &str) -> common::HttpReply {
    n.http(
        "PUT",
        &format!("/buckets/o/keys/{key}"),
        &[
            ("Content-Type", "text/plain"),
            ("x-riak-index-t_bin", term),
            ("x-riak-index-n_int", int),
        ],
        key.as_bytes(),
    )
    .unwrap()
}

/// (term, key) pairs of a query, joined across pages of `page` results.
fn query(n: &Node, path: &str, page: Option<u32>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cont: Option<String> = None;
    loop {
        let (got, next) = query_page(n, path, page, cont.as_deref());
        out.extend(got);
        match next {
            Some(c) => cont = Some(c),
            None => return out,
        }
    }
}

fn check(n: &Node) {
    let mut want: Vec<(String, String)> = TERMS
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), format!("k{i}")))
        .filter(|(t, _)| t.as_str() >= "a" && t.as_str() <= "b")
        .collect();
    want.sort();
    assert_eq!(
        want.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
        ["a", "a b", "aa", "ab", "b"]
    );
    let path = "/buckets/o/index/t_bin/a/b";
    assert_eq!(query(n, path, None), want);
    assert_eq!(query(n, path, Some(2)), want);
    // Integers in numeric order, negatives first.
    let ints = query(n, "/buckets/o/index/n_int/-1000/1000", Some(3));
    let got: Vec<i64> = ints.iter().map(|(t, _)| t.parse().unwrap()).collect();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert_eq!(got.len(), TERMS.len());
}

/// Rewrites every index entry of the node's stores as builds before
/// index keys version 2 wrote them: the term behind a u32 length, under
/// `'i'`. Returns how many.
fn downgrade_index_keys(data: &Path) -> usize {
    let mut n = 0;
    for dir in std::fs::read_dir(data.join("bitcask")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let store = bitcask::Store::open(&dir, bitcask::Options::default()).unwrap();
        let mut keys = Vec::new();
        store.scan_keys(|k| {
            if k.first() == Some(&b'j') {
                keys.push(k.to_vec());
            }
            true
        });
        for k in keys {
            // 'j' | t | b | field (each u16 length + bytes) | position
            let mut at = 1;
            for _ in 0..3 {
                at += 2 + u16::from_be_bytes([k[at], k[at + 1]]) as usize;
            }
            let (term, key) = rill_backend::split_position(&k[at..]).unwrap();
            let (kind, t) = match term {
                rill_backend::Term::Int(i) => {
                    (1u8, ((i as u64) ^ (1 << 63)).to_be_bytes().to_vec())
                }
                rill_backend::Term::Bin(b) => (2u8, b),
            };
            let mut old = vec![b'i'];
            old.extend_from_slice(&k[1..at]);
            old.push(kind);
            old.extend_from_slice(&(t.len() as u32).to_be_bytes());
            old.extend_from_slice(&t);
            old.extend_from_slice(key);
            store.put(&old, b"").unwrap();
            store.delete(&k).unwrap();
            n += 1;
        }
        store.sync().unwrap();
    }
    n
}

#[test]
fn index_terms_come_back_in_order_and_old_index_keys_are_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    for (i, t) in TERMS.iter().enumerate() {
        let int = (i as i64 * 37 - 150).to_string();
        assert_eq!(put(&n, &format!("k{i}"), t, &int).status, 204);
    }
    check(&n);
    // 2^63 does not fit: refused on write, saying why.
    let r = put(&n, "big", "x", "9223372036854775808");
    let body = String::from_utf8_lossy(&r.body).to_string();
    assert_eq!(r.status, 400, "{body}");
    assert!(
        body.contains("field_parsing_failed") && body.contains("must lie between"),
        "{body}"
    );
    // A query bound beyond 64 bits is answered, as Riak answers it: no
    // stored term lies beyond.
    let beyond = query(&n, "/buckets/o/index/n_int/0/99999999999999999999", None);
    let within = query(&n, "/buckets/o/index/n_int/0/9223372036854775807", None);
    assert_eq!(beyond, within);
    assert!(!beyond.is_empty());
    // The edges of the range are kept.
    assert_eq!(put(&n, "max", "x", "9223372036854775807").status, 204);
    assert_eq!(put(&n, "min", "x", "-9223372036854775808").status, 204);
    let edges = query(
        &n,
        "/buckets/o/index/n_int/-9223372036854775808/-9223372036854775807",
        None,
    );
    assert_eq!(
        edges,
        [("-9223372036854775808".to_string(), "min".to_string())]
    );
    n.stop();

    // The same data as an earlier build left it.
    let migrated = downgrade_index_keys(&dir.path().join("data"));
    // Two entries per object, on each of its three replicas (n_val 3).
    assert_eq!(migrated, 3 * (2 * TERMS.len() + 2 * 2));
    let n = Node::start(dir.path(), "");
    check(&n);
    assert!(
        n.log()
            .contains("rewritten in the order-preserving encoding"),
        "{}",
        n.log()
    );
    n.stop();
    // Nothing is left to rewrite.
    let n = Node::start(dir.path(), "");
    check(&n);
    assert!(!n.log().contains("rewritten"), "{}", n.log());
}

/// `storage_backend = leveldb` through the real binary: the same order
/// and paging, listing, and every acknowledged write (object and index
/// entries) back after SIGKILL.
#[test]
fn the_leveldb_backend_serves_and_keeps_everything_across_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let conf = "storage_backend = leveldb\nleveldb.maximum_memory = 64MB\n";
    let mut n = Node::start(dir.path(), conf);
    let stats = n.stats();
    assert_eq!(stats["storage_backend"], "riak_kv_eleveldb_backend");
    for (i, t) in TERMS.iter().enumerate() {
        let int = (i as i64 * 37 - 150).to_string();
        assert_eq!(put(&n, &format!("k{i}"), t, &int).status, 204);
    }
    check(&n);
    // An overwrite moves the object's entry; no stale one stays.
    assert_eq!(put(&n, "k0", "zz", "-150").status, 204);
    assert!(query(&n, "/buckets/o/index/t_bin/b/b", None).is_empty());
    assert_eq!(put(&n, "k0", "b", "-150").status, 204);
    let keys = n
        .http("GET", "/buckets/o/keys?keys=true", &[], b"")
        .unwrap();
    let keys: serde_json::Value = serde_json::from_slice(&keys.body).unwrap();
    assert_eq!(keys["keys"].as_array().unwrap().len(), TERMS.len());
    for round in 0..2 {
        n.kill();
        n = Node::start(dir.path(), conf);
        check(&n);
        for i in 0..TERMS.len() {
            let r = n
                .http("GET", &format!("/buckets/o/keys/k{i}"), &[], b"")
                .unwrap();
            assert_eq!(
                (r.status, r.body),
                (200, format!("k{i}").into_bytes()),
                "round {round}"
            );
        }
    }
}

/// Through the binary, on each disk backend: pages of every size from 1
/// up, joined through continuations, give every entry present throughout
/// exactly once and in order, while keys are written into and deleted
/// from the paged range between pages (the query covers every vnode).
#[test]
fn pages_of_every_size_join_while_writes_go_on() {
    let terms = ["a", "a b", "aa", "ab", "b", "a!", "ab~", "aZ"];
    for backend in ["leveldb", "leveled", "bitcask"] {
        let dir = tempfile::tempdir().unwrap();
        let conf = format!("storage_backend = {backend}\nleveldb.maximum_memory = 64MB\n");
        let n = Node::start(dir.path(), &conf);
        for (i, t) in terms.iter().enumerate() {
            for key in [format!("k{i}"), format!("k{i}x")] {
                assert_eq!(put(&n, &key, t, "1").status, 204);
            }
        }
        let mut want: Vec<(String, String)> = terms
            .iter()
            .enumerate()
            .flat_map(|(i, t)| {
                [
                    (t.to_string(), format!("k{i}")),
                    (t.to_string(), format!("k{i}x")),
                ]
            })
            .collect();
        want.sort();
        let path = "/buckets/o/index/t_bin/a/b";
        // Entries written meanwhile that the pages met.
        let mut met = 0;
        for size in 1..=want.len() as u32 + 1 {
            let mut joined: Vec<(String, String)> = Vec::new();
            let mut written: Vec<(String, String)> = Vec::new();
            let mut cont: Option<String> = None;
            let mut round = 0usize;
            loop {
                round += 1;
                // A new key in the range (its term cycling, so before,
                // at and after the cursor) and the delete of an earlier.
                let t = terms[(size as usize + round) % terms.len()];
                let key = format!("c{size}-{round}");
                assert_eq!(put(&n, &key, t, "1").status, 204);
                written.push((t.to_string(), key));
                if round.is_multiple_of(3) {
                    let (_, old) = &written[round - 3];
                    let r = n
                        .http("DELETE", &format!("/buckets/o/keys/{old}"), &[], b"")
                        .unwrap();
                    assert_eq!(r.status, 204);
                }
                let (page, next) = query_page(&n, path, Some(size), cont.as_deref());
                joined.extend(page);
                match next {
                    Some(c) => cont = Some(c),
                    None => break,
                }
            }
            assert!(
                joined.windows(2).all(|w| w[0] < w[1]),
                "{backend}, pages of {size}: out of order or repeated: {joined:?}"
            );
            let kept: Vec<_> = joined
                .iter()
                .filter(|e| want.contains(e))
                .cloned()
                .collect();
            assert_eq!(kept, want, "{backend}, pages of {size}");
            assert!(
                joined
                    .iter()
                    .all(|e| want.contains(e) || written.contains(e)),
                "{backend}, pages of {size}: an entry never written: {joined:?}"
            );
            met += joined.iter().filter(|e| written.contains(e)).count();
            for (i, (_, key)) in written.iter().enumerate() {
                let r = n
                    .http("DELETE", &format!("/buckets/o/keys/{key}"), &[], b"")
                    .unwrap();
                // Every third round deleted the key three rounds back
                // already: its second delete finds nothing (Riak's 404).
                let deleted_already = i.is_multiple_of(3) && i + 3 <= written.len();
                assert_eq!(r.status, if deleted_already { 404 } else { 204 }, "{key}");
            }
        }
        assert!(met > 0, "{backend}: no write met by a page");
        n.stop();
    }
}

/// One page of `size` (term, key) pairs (all without) from `cont` on, and the
/// continuation of the next page if the answer goes on.
fn query_page(
    n: &Node,
    path: &str,
    size: Option<u32>,
    cont: Option<&str>,
) -> (Vec<(String, String)>, Option<String>) {
    let mut q = format!("{path}?return_terms=true");
    if let Some(size) = size {
        q.push_str(&format!("&max_results={size}"));
    }
    if let Some(c) = cont {
        q.push_str(&format!(
            "&continuation={}",
            c.replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D")
        ));
    }
    let r = n.http("GET", &q, &[], b"").unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    // An empty answer may come as `{"keys":[]}`.
    let results = v["results"].as_array().or(v["keys"].as_array());
    let page = results
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|pair| {
            let (t, k) = pair.as_object().unwrap().iter().next().unwrap();
            (t.clone(), k.as_str().unwrap().to_string())
        })
        .collect();
    (page, v["continuation"].as_str().map(str::to_string))
}
