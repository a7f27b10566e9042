//! Riak 3's aae_fold requests over PB, answered from the anti-entropy
//! trees (`rill_node::Aae::fold`): merge_root_nval (210),
//! merge_branch_nval (211), fetch_clocks_nval (212) and list_buckets
//! (223); and by a coverage fold over a bucket's objects
//! (`rill_node::Node::key_fold`): find_keys (215) and object_stats (216),
//! answered as riak_kv_clusteraae_fsm encodes them (`find_keys`: each key
//! with its count; `stats`: total_count, total_size, then `sizes` and
//! `siblings` by order, ascending; a count past 2^32 - 1 is given as
//! 2^32 - 1, where Riak's would wrap). Trees and branches are encoded as riak_kv_pb_aaefold encodes
//! them: a root is the 4,096 branch hashes (u32, big-endian); each
//! branch is its id (u32, big-endian) and its 256 segment hashes,
//! zlib-compressed. A clock is Rill's encoded vclock, the same bytes a
//! get's `vclock` carries.

use crate::blocking;
use bytes::Bytes;
use rill_node::{
    FoldAnswer, FoldQuery, KeyFold, KeyFoldAnswer, KeyFoldKind, KvError, Node, TypeStatus,
};
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
        Request::AaeFoldFindKeys(_) | Request::AaeFoldObjectStats(_) => {
            return key_fold(node, req).await
        }
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

/// Riak's bucket type for a fold: none, or `default`, is the default
/// type.
fn fold_type(t: &Option<Bytes>) -> Vec<u8> {
    match t.as_deref() {
        None | Some(b"default") => Vec::new(),
        Some(t) => t.to_vec(),
    }
}

fn range<T: Clone>(
    on: bool,
    lo: &Option<T>,
    hi: &Option<T>,
    what: &str,
) -> Result<Option<(T, T)>, String> {
    if !on {
        return Ok(None);
    }
    match (lo, hi) {
        (Some(lo), Some(hi)) => Ok(Some((lo.clone(), hi.clone()))),
        _ => Err(format!("a {what} range needs its start and its end")),
    }
}

fn count(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The fields find_keys and object_stats share, as a fold over a bucket.
macro_rules! key_fold_of {
    ($r:expr, $what:expr) => {
        range($r.key_range, &$r.start_key, &$r.end_key, "key").and_then(|keys| {
            let modified = range(
                $r.modified_range,
                &$r.last_mod_start,
                &$r.last_mod_end,
                "modified",
            )?;
            Ok(KeyFold {
                bucket_type: fold_type(&$r.r#type),
                bucket: $r.bucket.to_vec(),
                key_range: keys.map(|(lo, hi)| (lo.to_vec(), hi.to_vec())),
                modified: modified.map(|(lo, hi)| (u64::from(lo), u64::from(hi))),
                what: $what,
            })
        })
    };
}

/// find_keys (215) and object_stats (216).
async fn key_fold(node: Arc<Node>, req: Request) -> Response {
    let fold = match &req {
        Request::AaeFoldFindKeys(r) => {
            use rill_pb::pb::rpb_aae_fold_find_keys_req::FindType;
            let what = match FindType::try_from(r.finder) {
                Ok(FindType::SiblingCount) => KeyFoldKind::SiblingsOver(r.find_limit.into()),
                Ok(FindType::ObjectSize) => KeyFoldKind::BytesOver(r.find_limit.into()),
                Err(_) => {
                    return Response::error(format!("find_keys: unknown finder {}", r.finder))
                }
            };
            key_fold_of!(r, what)
        }
        Request::AaeFoldObjectStats(r) => key_fold_of!(r, KeyFoldKind::ObjectStats),
        _ => return Response::error("not an aae_fold request"),
    };
    let f = match fold {
        Ok(f) => f,
        Err(e) => return Response::error(e),
    };
    match blocking(move || node.key_fold(&f)).await {
        Ok(KeyFoldAnswer::Keys(keys)) => Response::AaeFoldKeyCount(RpbAaeFoldKeyCountResp {
            response_type: Bytes::from_static(b"find_keys"),
            keys_count: keys
                .into_iter()
                .map(|(k, n)| RpbKeysCount {
                    tag: Bytes::from(k),
                    order: None,
                    count: count(n),
                })
                .collect(),
        }),
        Ok(KeyFoldAnswer::Stats(s)) => {
            let tagged = |tag: &'static str, n: u64, order: Option<u32>| RpbKeysCount {
                tag: Bytes::from_static(tag.as_bytes()),
                order,
                count: count(n),
            };
            let mut keys_count = vec![
                tagged("total_count", s.total_count, None),
                tagged("total_size", s.total_size, None),
            ];
            keys_count.extend(s.sizes.iter().map(|(o, n)| tagged("sizes", *n, Some(*o))));
            keys_count.extend(
                s.siblings
                    .iter()
                    .map(|(o, n)| tagged("siblings", *n, Some(*o))),
            );
            Response::AaeFoldKeyCount(RpbAaeFoldKeyCountResp {
                response_type: Bytes::from_static(b"stats"),
                keys_count,
            })
        }
        Err(e) => Response::error(e.to_string()),
    }
}
