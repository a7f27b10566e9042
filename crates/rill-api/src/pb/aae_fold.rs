//! Riak 3's aae_fold requests over PB, answered from the anti-entropy
//! trees (`rill_node::Aae::fold`): merge_root_nval (210),
//! merge_branch_nval (211), fetch_clocks_nval (212) and list_buckets
//! (223). Trees and branches are encoded as riak_kv_pb_aaefold encodes
//! them: a root is the 4,096 branch hashes (u32, big-endian); each
//! branch is its id (u32, big-endian) and its 256 segment hashes,
//! zlib-compressed. A clock is Rill's encoded vclock, the same bytes a
//! get's `vclock` carries.

use crate::blocking;
use bytes::Bytes;
use rill_node::{FoldAnswer, FoldQuery, KvError, Node, TypeStatus};
use rill_pb::pb::rpb_aae_fold_tree_resp::RpbTreeSize;
use rill_pb::pb::*;
use rill_pb::{Request, Response};
use std::io::Write;
use std::sync::Arc;

fn words(b: &[u32]) -> Vec<u8> {
    b.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn zlib(b: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(b).expect("writing to memory");
    z.finish().expect("writing to memory")
}

fn tree(level_one: Option<Vec<u8>>, level_two: Vec<Bytes>) -> Response {
    Response::AaeFoldTree(RpbAaeFoldTreeResp {
        size: RpbTreeSize::Large as i32,
        level_one: level_one.map(Bytes::from),
        level_two,
    })
}

/// Answers one aae_fold request.
pub(super) async fn fold(node: Arc<Node>, req: Request) -> Response {
    let query = match &req {
        Request::AaeFoldMergeRoot(r) => FoldQuery::MergeRoot { n_val: r.n_val },
        Request::AaeFoldMergeBranch(r) => FoldQuery::MergeBranches {
            n_val: r.n_val,
            branches: r.id_filter.clone(),
        },
        Request::AaeFoldFetchClocks(r) if r.modified_range == Some(true) => {
            return Response::error(
                "fetch_clocks_nval with a modified range is not supported by Rill: ask without one",
            )
        }
        Request::AaeFoldFetchClocks(r) => FoldQuery::FetchClocks {
            n_val: r.n_val,
            segments: r.id_filter.clone(),
        },
        Request::AaeFoldListBuckets(_) => return list_buckets(node).await,
        _ => return Response::error("not an aae_fold request"),
    };
    let answer = blocking(move || node.tictacaae().fold(&query)).await;
    match answer {
        Ok(FoldAnswer::Root(root)) => tree(Some(words(&root)), Vec::new()),
        Ok(FoldAnswer::Branches(list)) => tree(
            Some(Vec::new()),
            list.into_iter()
                .map(|(id, segs)| {
                    let mut b = id.to_be_bytes().to_vec();
                    b.extend(zlib(&words(&segs)));
                    Bytes::from(b)
                })
                .collect(),
        ),
        Ok(FoldAnswer::Clocks(list)) => Response::AaeFoldKeyValue(RpbAaeFoldKeyValueResp {
            response_type: Bytes::from_static(b"clock"),
            keys_value: list
                .into_iter()
                .map(|(k, clock)| RpbKeysValue {
                    r#type: (!k.bucket_type.is_empty()).then(|| Bytes::from(k.bucket_type)),
                    bucket: Bytes::from(k.bucket),
                    key: Bytes::from(k.key),
                    value: Bytes::from(rill_object::encode_vclock(&clock)),
                })
                .collect(),
        }),
        Err(e) => Response::error(e.to_string()),
    }
}

/// Every bucket holding a key, of every active type (Riak's n_val only
/// chooses the vnodes its fold covers: every key is in one of them).
async fn list_buckets(node: Arc<Node>) -> Response {
    let found = blocking(move || -> Result<Vec<RpbAaeFoldBucket>, KvError> {
        let mut out = Vec::new();
        for (t, status) in node.buckets().list_types() {
            if status != TypeStatus::Active {
                continue;
            }
            let stored: Vec<u8> = if t == "default" {
                Vec::new()
            } else {
                t.clone().into_bytes()
            };
            for b in node.list_buckets(&stored, None)? {
                out.push(RpbAaeFoldBucket {
                    r#type: (!stored.is_empty()).then(|| Bytes::from(stored.clone())),
                    bucket: Bytes::from(b),
                });
            }
        }
        Ok(out)
    })
    .await;
    match found {
        Ok(bucket_list) => Response::AaeFoldListBuckets(RpbAaeFoldListBucketsResp { bucket_list }),
        Err(e) => Response::error(e.to_string()),
    }
}
