//! Riak 3's aae_fold requests over PB against a real node: the merged
//! root, branches and clocks describe exactly the keys written, a new
//! write shows in one branch, and the folds Rill does not answer say so.

mod common;

use bytes::Bytes;
use common::Node;
use rill_client::Client;
use rill_pb::pb::*;
use rill_pb::{Request, Response};
use std::collections::BTreeSet;
use std::io::Read;

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|w| u32::from_be_bytes(w.try_into().unwrap()))
        .collect()
}

fn root(c: &mut Client, n_val: u32) -> Vec<u32> {
    match c
        .call(&Request::AaeFoldMergeRoot(RpbAaeFoldMergeRootNValReq {
            n_val,
        }))
        .unwrap()
    {
        Response::AaeFoldTree(t) => {
            assert!(t.level_two.is_empty());
            words(&t.level_one.unwrap())
        }
        other => panic!("{other:?}"),
    }
}

fn branches(c: &mut Client, ids: &[u32]) -> Vec<(u32, Vec<u32>)> {
    let req = RpbAaeFoldMergeBranchNValReq {
        n_val: 3,
        id_filter: ids.to_vec(),
    };
    match c.call(&Request::AaeFoldMergeBranch(req)).unwrap() {
        Response::AaeFoldTree(t) => t
            .level_two
            .iter()
            .map(|b| {
                let id = u32::from_be_bytes(b[..4].try_into().unwrap());
                let mut raw = Vec::new();
                flate2::read::ZlibDecoder::new(&b[4..])
                    .read_to_end(&mut raw)
                    .unwrap();
                (id, words(&raw))
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

fn nonzero(v: &[u32]) -> Vec<u32> {
    (0..v.len() as u32)
        .filter(|i| v[*i as usize] != 0)
        .collect()
}

#[test]
fn folds_over_the_trees_describe_the_keys_written() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let mut c = Client::connect(n.pb).unwrap();
    let written: BTreeSet<Vec<u8>> = (0..200).map(|i| format!("k{i}").into_bytes()).collect();
    for k in &written {
        c.put(b"fold", k, b"v", "text/plain").unwrap();
    }

    let r = root(&mut c, 3);
    assert_eq!(r.len(), 4096);
    let dirty = nonzero(&r);
    assert!(!dirty.is_empty());
    // No key has n_val 5: its trees are empty.
    assert!(nonzero(&root(&mut c, 5)).is_empty());

    // Each branch's segments XOR to its root entry.
    let bs = branches(&mut c, &dirty);
    assert_eq!(bs.len(), dirty.len());
    let mut segments = Vec::new();
    for (id, segs) in &bs {
        assert_eq!(segs.len(), 256);
        assert_eq!(
            segs.iter().fold(0, |a, s| a ^ s),
            r[*id as usize],
            "branch {id}"
        );
        segments.extend(nonzero(segs).into_iter().map(|s| id * 256 + s));
    }

    // The keys of the segments that hold anything are the keys written.
    let req = RpbAaeFoldFetchClocksNValReq {
        n_val: 3,
        id_filter: segments,
        ..Default::default()
    };
    let found: BTreeSet<Vec<u8>> = match c.call(&Request::AaeFoldFetchClocks(req)).unwrap() {
        Response::AaeFoldKeyValue(kv) => {
            assert_eq!(kv.response_type, Bytes::from_static(b"clock"));
            kv.keys_value
                .iter()
                .map(|k| {
                    assert_eq!(k.bucket, Bytes::from_static(b"fold"));
                    assert!(!k.value.is_empty());
                    k.key.to_vec()
                })
                .collect()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(found, written);

    // One more write changes one branch of the root.
    c.put(b"fold", b"one more", b"v", "text/plain").unwrap();
    let after = root(&mut c, 3);
    let changed: Vec<usize> = (0..4096).filter(|i| after[*i] != r[*i]).collect();
    assert_eq!(changed.len(), 1, "{changed:?}");

    match c
        .call(&Request::AaeFoldListBuckets(RpbAaeFoldListBucketsReq {
            n_val: Some(3),
        }))
        .unwrap()
    {
        Response::AaeFoldListBuckets(l) => {
            let names: Vec<&[u8]> = l.bucket_list.iter().map(|b| &b.bucket[..]).collect();
            assert_eq!(names, vec![&b"fold"[..]]);
        }
        other => panic!("{other:?}"),
    }

    // Clear errors: a bad n_val, and a fold Rill does not answer.
    let e = c
        .call(&Request::AaeFoldMergeRoot(RpbAaeFoldMergeRootNValReq {
            n_val: 0,
        }))
        .unwrap_err()
        .to_string();
    assert!(e.contains("n_val 0 is not between 1"), "{e}");
    let e = c.call(&Request::Unsupported(217)).unwrap_err().to_string();
    assert!(
        e.contains("RpbAaeFoldReplKeysReq") && e.contains("find_keys"),
        "{e}"
    );
}

fn find_keys(c: &mut Client, req: RpbAaeFoldFindKeysReq) -> Vec<(String, u32)> {
    match c.call(&Request::AaeFoldFindKeys(req)).unwrap() {
        Response::AaeFoldKeyCount(r) => {
            assert_eq!(r.response_type, Bytes::from_static(b"find_keys"));
            r.keys_count
                .iter()
                .map(|k| (String::from_utf8(k.tag.to_vec()).unwrap(), k.count))
                .collect()
        }
        other => panic!("{other:?}"),
    }
}

fn finder(find: i32, limit: u32) -> RpbAaeFoldFindKeysReq {
    RpbAaeFoldFindKeysReq {
        bucket: Bytes::from_static(b"stats"),
        finder: find,
        find_limit: limit,
        ..Default::default()
    }
}

/// find_keys and object_stats (Riak 3's operational folds) count what
/// was written: keys with siblings, a large object, sizes by order of
/// magnitude, within key and modified ranges.
#[test]
fn find_keys_and_object_stats_count_what_was_written() {
    use rpb_aae_fold_find_keys_req::FindType;
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let props = n.http(
        "PUT",
        "/buckets/stats/props",
        &[("Content-Type", "application/json")],
        br#"{"props":{"allow_mult":true}}"#,
    );
    assert_eq!(props.unwrap().status, 204);
    let mut c = Client::connect(n.pb).unwrap();
    for i in 0..10 {
        c.put(b"stats", format!("k{i}").as_bytes(), b"v", "text/plain")
            .unwrap();
    }
    // Two writes without a context: two siblings.
    for k in ["s0", "s1", "s2"] {
        c.put(b"stats", k.as_bytes(), b"one", "text/plain").unwrap();
        c.put(b"stats", k.as_bytes(), b"two", "text/plain").unwrap();
    }
    c.put(b"stats", b"big", &[7u8; 5000], "application/octet-stream")
        .unwrap();
    // Another bucket is not counted.
    c.put(b"other", b"s9", b"x", "text/plain").unwrap();

    let siblings = find_keys(&mut c, finder(FindType::SiblingCount as i32, 1));
    assert_eq!(
        siblings,
        vec![("s0".into(), 2), ("s1".into(), 2), ("s2".into(), 2)]
    );
    let large = find_keys(&mut c, finder(FindType::ObjectSize as i32, 4000));
    assert_eq!(large.len(), 1, "{large:?}");
    assert_eq!(large[0].0, "big");
    assert!(large[0].1 > 5000, "{large:?}");

    // A key range, both ends included.
    let mut ranged = finder(FindType::SiblingCount as i32, 1);
    ranged.key_range = true;
    ranged.start_key = Some(Bytes::from_static(b"s0"));
    ranged.end_key = Some(Bytes::from_static(b"s1"));
    let got: Vec<String> = find_keys(&mut c, ranged).into_iter().map(|k| k.0).collect();
    assert_eq!(got, vec!["s0", "s1"]);

    // A modified range: long ago finds nothing; up to the end of u32 all.
    let mut old = finder(FindType::SiblingCount as i32, 0);
    old.modified_range = true;
    old.last_mod_start = Some(0);
    old.last_mod_end = Some(1_000_000);
    assert!(find_keys(&mut c, old.clone()).is_empty());
    old.last_mod_end = Some(u32::MAX);
    assert_eq!(find_keys(&mut c, old).len(), 14);

    let stats = RpbAaeFoldObjectStatsReq {
        bucket: Bytes::from_static(b"stats"),
        ..Default::default()
    };
    let counts = match c.call(&Request::AaeFoldObjectStats(stats)).unwrap() {
        Response::AaeFoldKeyCount(r) => {
            assert_eq!(r.response_type, Bytes::from_static(b"stats"));
            r.keys_count
        }
        other => panic!("{other:?}"),
    };
    let tag = |t: &str| -> Vec<(Option<u32>, u32)> {
        counts
            .iter()
            .filter(|k| k.tag == t.as_bytes())
            .map(|k| (k.order, k.count))
            .collect()
    };
    assert_eq!(tag("total_count"), vec![(None, 14)]);
    assert_eq!(tag("siblings"), vec![(Some(1), 11), (Some(2), 3)]);
    let sizes = tag("sizes");
    assert_eq!(sizes.iter().map(|s| s.1).sum::<u32>(), 14, "{sizes:?}");
    assert!(sizes.windows(2).all(|w| w[0].0 < w[1].0), "{sizes:?}");
    // The large object alone has four digits of size (1,000 to 9,999).
    assert_eq!(sizes.last(), Some(&(Some(3), 1)), "{sizes:?}");
    let total = tag("total_size")[0].1;
    assert!(total > 5000, "{total}");

    // Clear errors.
    let mut bad = finder(FindType::SiblingCount as i32, 1);
    bad.key_range = true;
    bad.start_key = Some(Bytes::from_static(b"z"));
    bad.end_key = Some(Bytes::from_static(b"a"));
    let e = c
        .call(&Request::AaeFoldFindKeys(bad))
        .unwrap_err()
        .to_string();
    assert!(e.contains("key range ends before it starts"), "{e}");
    let mut no_type = finder(FindType::SiblingCount as i32, 1);
    no_type.r#type = Some(Bytes::from_static(b"nosuch"));
    let e = c
        .call(&Request::AaeFoldFindKeys(no_type))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nosuch"), "{e}");
}
