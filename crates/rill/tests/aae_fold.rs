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
    let e = c.call(&Request::Unsupported(215)).unwrap_err().to_string();
    assert!(
        e.contains("RpbAaeFoldFindKeysReq") && e.contains("merge_root_nval"),
        "{e}"
    );
}
