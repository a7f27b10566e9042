//! One connection's requests: decode what the node needs, run it off the
//! async threads, encode Riak's answer.

use super::convert::{content_from_pb, contents_to_pb, props_from_pb, props_to_pb, quorum};
use super::write;
use crate::RIAK_COMPAT_VERSION;
use crate::{blocking, type_name};
use bytes::Bytes;
use rill_node::{
    DeleteRequest, GetAnswer, GetRequest, IndexHit, IndexRequest, IndexSpec, KvError, Node,
    PutRequest,
};
use rill_pb::pb::*;
use rill_pb::{codes, Request, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

pub struct Session {
    node: Arc<Node>,
    client_id: Bytes,
}

fn err(e: KvError) -> Response {
    Response::error(e.to_string())
}

/// A streaming task's result; a task that panicked ends the stream with an
/// error the client sees (the panic is logged), not a dropped connection.
fn joined<T>(r: Result<Result<T, KvError>, tokio::task::JoinError>) -> Result<T, Response> {
    match r {
        Ok(r) => r.map_err(err),
        Err(e) => {
            tracing::error!(error = %e, "a streaming task failed");
            Err(Response::error(
                "internal error: the stream ended early; retry",
            ))
        }
    }
}

/// The bucket type a request names: absent is the default type; present
/// but empty is refused as Riak refuses it.
fn bucket_type(t: &Option<Bytes>) -> Result<Vec<u8>, Response> {
    match t {
        None => Ok(Vec::new()),
        Some(t) if t.is_empty() => Err(Response::error("Type cannot be zero-length")),
        Some(t) if &t[..] == b"default" => Ok(Vec::new()),
        Some(t) => Ok(t.to_vec()),
    }
}

fn timeout(ms: Option<u32>) -> Option<Duration> {
    ms.filter(|m| *m > 0)
        .map(|m| Duration::from_millis(m.into()))
}

fn unsupported(code: u8) -> Response {
    let what = match code {
        codes::SEARCH_QUERY_REQ | 54..=60 => "Riak Search (Yokozuna)",
        codes::COVERAGE_REQ => "coverage plans",
        codes::AUTH_REQ => "authentication (security is not enabled)",
        codes::START_TLS => "TLS (security is not enabled)",
        90..=104 => "Riak TS",
        200..=231 => "Rill answers the aae_fold operations merge_root_nval, merge_branch_nval, fetch_clocks_nval, find_keys, object_stats and list_buckets; this one",
        _ => "this request",
    };
    Response::error(format!(
        "{} (code {code}) is not supported by Rill: {what} is not available",
        codes::name(code)
    ))
}

impl Session {
    pub fn new(node: Arc<Node>) -> Session {
        Session {
            node,
            client_id: Bytes::from_static(&[0, 0, 0, 0]),
        }
    }

    /// Answers one request on `socket` (several frames for streams).
    pub async fn handle(&mut self, req: Request, socket: &mut TcpStream) -> std::io::Result<()> {
        match req {
            Request::ListKeys(r) => return self.list_keys(r, socket).await,
            Request::MapRed(r) => return super::mapred::mapred(&self.node, r, socket).await,
            Request::Index(r) if r.stream == Some(true) => return self.index(r, socket).await,
            Request::ListBuckets(r) if r.stream == Some(true) => {
                return self.list_buckets_stream(r, socket).await
            }
            _ => {}
        }
        let resp = self.answer(req).await;
        write(socket, &[resp]).await
    }

    async fn answer(&mut self, req: Request) -> Response {
        let node = self.node.clone();
        match req {
            Request::Ping => Response::Ping,
            Request::GetClientId => Response::GetClientId(RpbGetClientIdResp {
                client_id: self.client_id.clone(),
            }),
            Request::SetClientId(r) => {
                self.client_id = r.client_id;
                Response::SetClientId
            }
            Request::GetServerInfo => Response::ServerInfo(RpbGetServerInfoResp {
                node: Some(node.nodename().to_string().into()),
                server_version: Some(RIAK_COMPAT_VERSION.into()),
            }),
            Request::Get(r) => get(node, r).await.unwrap_or_else(|e| e),
            Request::Put(r) => put(node, r).await.unwrap_or_else(|e| e),
            Request::Del(r) => del(node, r).await.unwrap_or_else(|e| e),
            Request::ListBuckets(r) => {
                let t = match bucket_type(&r.r#type) {
                    Ok(t) => t,
                    Err(e) => return e,
                };
                match blocking(move || node.list_buckets(&t, timeout(r.timeout))).await {
                    Ok(b) => Response::ListBuckets(RpbListBucketsResp {
                        buckets: b.into_iter().map(Bytes::from).collect(),
                        done: None,
                    }),
                    Err(e) => err(e),
                }
            }
            Request::GetBucket(r) => {
                let t = match bucket_type(&r.r#type) {
                    Ok(t) => type_name(&t),
                    Err(e) => return e,
                };
                match node.buckets().bucket_props(&t, &r.bucket) {
                    Ok(p) => Response::GetBucket(RpbGetBucketResp {
                        props: props_to_pb(&p),
                    }),
                    Err(e) => err(e),
                }
            }
            Request::SetBucket(r) => {
                let t = match bucket_type(&r.r#type) {
                    Ok(t) => type_name(&t),
                    Err(e) => return e,
                };
                let props = props_from_pb(&r.props);
                match blocking(move || node.buckets().set_bucket_props(&t, &r.bucket, &props)).await
                {
                    Ok(()) => Response::SetBucket,
                    Err(e) => err(e),
                }
            }
            Request::ResetBucket(r) => {
                let t = match bucket_type(&r.r#type) {
                    Ok(t) => type_name(&t),
                    Err(e) => return e,
                };
                match blocking(move || node.buckets().reset_bucket_props(&t, &r.bucket)).await {
                    Ok(()) => Response::ResetBucket,
                    Err(e) => err(e),
                }
            }
            Request::GetBucketType(r) => match node
                .buckets()
                .type_props(&String::from_utf8_lossy(&r.r#type))
            {
                Ok(p) => Response::GetBucket(RpbGetBucketResp {
                    props: props_to_pb(&p),
                }),
                Err(e) => err(e),
            },
            Request::SetBucketType(r) => {
                let name = String::from_utf8_lossy(&r.r#type).into_owned();
                let props = props_from_pb(&r.props);
                match blocking(move || node.buckets().update_type(&name, &props)).await {
                    Ok(()) => Response::SetBucket,
                    Err(e) => err(e),
                }
            }
            Request::GetBucketKeyPreflist(r) => {
                let t = match bucket_type(&r.r#type) {
                    Ok(t) => t,
                    Err(e) => return e,
                };
                if r.bucket.is_empty() {
                    return Response::error("Bucket cannot be zero-length");
                }
                if r.key.is_empty() {
                    return Response::error("Key cannot be zero-length");
                }
                let props = match node.buckets().bucket_props(&type_name(&t), &r.bucket) {
                    Ok(p) => p,
                    Err(_) => return err(KvError::NoType),
                };
                let n = props.get("n_val").and_then(|v| v.as_u64()).unwrap_or(3) as u32;
                let list = node.preflist(&t, &r.bucket, &r.key, n);
                Response::GetBucketKeyPreflist(RpbGetBucketKeyPreflistResp {
                    preflist: list
                        .into_iter()
                        .map(|e| RpbBucketKeyPreflistItem {
                            partition: i64::from(e.partition.0),
                            node: e.node.into(),
                            primary: e.primary,
                        })
                        .collect(),
                })
            }
            Request::Index(r) => match index_request(&r) {
                Err(e) => e,
                Ok(req) => match blocking(move || node.index_query(&req)).await {
                    Err(e) => err(e),
                    Ok(a) => {
                        let mut resp = RpbIndexResp {
                            continuation: a.continuation.map(Bytes::from),
                            ..Default::default()
                        };
                        fill_index(&mut resp, a.results);
                        Response::Index(resp)
                    }
                },
            },
            Request::CsBucket(_) => unsupported(codes::CS_BUCKET_REQ),
            Request::DtFetch(r) => super::dt::fetch(node, r).await,
            Request::DtUpdate(r) => super::dt::update(node, r).await,
            Request::CounterUpdate(r) => super::dt::counter_update(node, r).await,
            Request::CounterGet(r) => super::dt::counter_get(node, r).await,
            Request::AaeFoldMergeRoot(_)
            | Request::AaeFoldMergeBranch(_)
            | Request::AaeFoldFetchClocks(_)
            | Request::AaeFoldListBuckets(_)
            | Request::AaeFoldFindKeys(_)
            | Request::AaeFoldObjectStats(_) => super::aae_fold::fold(node, req).await,
            Request::Unsupported(code) => unsupported(code),
            Request::ListKeys(_) | Request::MapRed(_) => unreachable!("streamed above"),
        }
    }

    async fn list_keys(
        &mut self,
        r: RpbListKeysReq,
        socket: &mut TcpStream,
    ) -> std::io::Result<()> {
        let t = match bucket_type(&r.r#type) {
            Ok(t) => t,
            Err(e) => return write(socket, &[e]).await,
        };
        let node = self.node.clone();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Vec<u8>>>(4);
        let task = tokio::task::spawn_blocking(move || {
            node.list_keys(&t, &r.bucket, timeout(r.timeout), &mut |batch| {
                tx.blocking_send(batch).is_ok()
            })
        });
        while let Some(batch) = rx.recv().await {
            let resp = Response::ListKeys(RpbListKeysResp {
                keys: batch.into_iter().map(Bytes::from).collect(),
                done: None,
            });
            write(socket, &[resp]).await?;
        }
        let last = match joined(task.await) {
            Ok(()) => Response::ListKeys(RpbListKeysResp {
                keys: Vec::new(),
                done: Some(true),
            }),
            Err(e) => e,
        };
        write(socket, &[last]).await
    }

    async fn list_buckets_stream(
        &mut self,
        r: RpbListBucketsReq,
        socket: &mut TcpStream,
    ) -> std::io::Result<()> {
        let t = match bucket_type(&r.r#type) {
            Ok(t) => t,
            Err(e) => return write(socket, &[e]).await,
        };
        let node = self.node.clone();
        let answer = blocking(move || node.list_buckets(&t, timeout(r.timeout))).await;
        let frames: Vec<Response> = match answer {
            Err(e) => vec![err(e)],
            Ok(buckets) => {
                let mut frames: Vec<Response> = buckets
                    .chunks(1000)
                    .map(|c| {
                        Response::ListBuckets(RpbListBucketsResp {
                            buckets: c.iter().cloned().map(Bytes::from).collect(),
                            done: None,
                        })
                    })
                    .collect();
                frames.push(Response::ListBuckets(RpbListBucketsResp {
                    buckets: Vec::new(),
                    done: Some(true),
                }));
                frames
            }
        };
        write(socket, &frames).await
    }

    /// A streamed 2i query: a message per batch as the vnodes are read,
    /// the continuation (if any) and `done` on the last.
    async fn index(&mut self, r: RpbIndexReq, socket: &mut TcpStream) -> std::io::Result<()> {
        let req = match index_request(&r) {
            Ok(q) => q,
            Err(e) => return write(socket, &[e]).await,
        };
        let node = self.node.clone();
        let plan = match node.index_plan(&req) {
            Ok(p) => p,
            Err(e) => return write(socket, &[err(e)]).await,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<IndexHit>>(4);
        let task = tokio::task::spawn_blocking(move || {
            node.index_stream(&plan, &mut |batch| tx.blocking_send(batch).is_ok())
        });
        while let Some(batch) = rx.recv().await {
            let mut resp = RpbIndexResp::default();
            fill_index(&mut resp, batch);
            write(socket, &[Response::Index(resp)]).await?;
        }
        let last = match joined(task.await) {
            Ok(continuation) => Response::Index(RpbIndexResp {
                continuation: continuation.map(Bytes::from),
                done: Some(true),
                ..Default::default()
            }),
            Err(e) => e,
        };
        write(socket, &[last]).await
    }
}

fn fill_index(resp: &mut RpbIndexResp, results: Vec<IndexHit>) {
    for (term, key) in results {
        match term {
            Some(t) => resp.results.push(RpbPair {
                key: t.into(),
                value: Some(key.into()),
            }),
            None => resp.keys.push(key.into()),
        }
    }
}

fn index_request(r: &RpbIndexReq) -> Result<IndexRequest, Response> {
    let t = bucket_type(&r.r#type)?;
    let spec = match rpb_index_req::IndexQueryType::try_from(r.qtype) {
        Ok(rpb_index_req::IndexQueryType::Eq) => match &r.key {
            Some(k) => IndexSpec::Eq(k.to_vec()),
            None => return Err(Response::error("Invalid equality query undefined")),
        },
        Ok(rpb_index_req::IndexQueryType::Range) => match (&r.range_min, &r.range_max) {
            (Some(a), Some(b)) => IndexSpec::Range(a.to_vec(), b.to_vec()),
            (a, b) => {
                let show = |x: &Option<Bytes>| match x {
                    Some(v) => rill_node::erl_bin(v),
                    None => "undefined".into(),
                };
                return Err(Response::error(format!(
                    "Invalid range query: {} -> {}",
                    show(a),
                    show(b)
                )));
            }
        },
        Err(_) => {
            return Err(Response::error(format!(
                "unknown index query type {}",
                r.qtype
            )))
        }
    };
    Ok(IndexRequest {
        bucket_type: t,
        bucket: r.bucket.to_vec(),
        index: r.index.to_vec(),
        spec,
        return_terms: r.return_terms == Some(true),
        max_results: r.max_results,
        continuation: r.continuation.as_ref().map(|c| c.to_vec()),
        term_regex: r.term_regex.as_ref().map(|c| c.to_vec()),
    })
}

async fn get(node: Arc<Node>, r: RpbGetReq) -> Result<Response, Response> {
    let t = bucket_type(&r.r#type)?;
    let head = r.head == Some(true);
    let req = GetRequest {
        bucket_type: t,
        bucket: r.bucket.to_vec(),
        key: r.key.to_vec(),
        r: quorum(r.r),
        pr: quorum(r.pr),
        node_confirms: quorum(r.node_confirms),
        basic_quorum: r.basic_quorum,
        notfound_ok: r.notfound_ok,
        deletedvclock: r.deletedvclock == Some(true),
        if_modified: r.if_modified.as_ref().map(|v| v.to_vec()),
        n_val: r.n_val,
    };
    Ok(match node.get_task(&req).await.map_err(err)? {
        GetAnswer::Found(o) => Response::Get(RpbGetResp {
            content: contents_to_pb(&o, head),
            vclock: Some(rill_object::encode_vclock(&o.clock).into()),
            unchanged: None,
        }),
        GetAnswer::NotFound => Response::Get(RpbGetResp::default()),
        GetAnswer::Deleted(clock) => Response::Get(RpbGetResp {
            content: Vec::new(),
            vclock: Some(rill_object::encode_vclock(&clock).into()),
            unchanged: None,
        }),
        GetAnswer::Unchanged => Response::Get(RpbGetResp {
            unchanged: Some(true),
            ..Default::default()
        }),
    })
}

async fn put(node: Arc<Node>, r: RpbPutReq) -> Result<Response, Response> {
    let t = bucket_type(&r.r#type)?;
    if r.key.as_ref().is_some_and(|k| k.is_empty()) {
        return Err(Response::error("Key cannot be zero-length"));
    }
    let return_body = r.return_body == Some(true);
    let return_head = r.return_head == Some(true);
    let req = PutRequest {
        bucket_type: t,
        bucket: r.bucket.to_vec(),
        key: r.key.as_ref().map(|k| k.to_vec()),
        vclock: r
            .vclock
            .as_ref()
            .filter(|v| !v.is_empty())
            .map(|v| v.to_vec()),
        content: content_from_pb(&r.content),
        w: quorum(r.w),
        dw: quorum(r.dw),
        pw: quorum(r.pw),
        node_confirms: quorum(r.node_confirms),
        return_body,
        if_not_modified: r.if_not_modified == Some(true),
        if_none_match: r.if_none_match == Some(true),
        n_val: r.n_val,
    };
    let size = req.content.value.len();
    let pool = node.clone();
    let a = crate::blocking_write(&pool, size, move || node.put(req))
        .await
        .map_err(err)?;
    let key = a.generated_key.then(|| Bytes::from(a.key.clone()));
    Ok(if return_body || return_head {
        Response::Put(RpbPutResp {
            content: contents_to_pb(&a.object, return_head && !return_body),
            vclock: Some(rill_object::encode_vclock(&a.object.clock).into()),
            key,
        })
    } else {
        Response::Put(RpbPutResp {
            key,
            ..Default::default()
        })
    })
}

async fn del(node: Arc<Node>, r: RpbDelReq) -> Result<Response, Response> {
    let t = bucket_type(&r.r#type)?;
    let req = DeleteRequest {
        bucket_type: t,
        bucket: r.bucket.to_vec(),
        key: r.key.to_vec(),
        vclock: r.vclock.as_ref().map(|v| v.to_vec()),
        rw: quorum(r.rw),
        r: quorum(r.r),
        w: quorum(r.w),
        pr: quorum(r.pr),
        pw: quorum(r.pw),
        dw: quorum(r.dw),
        n_val: r.n_val,
    };
    // A delete whose read found nothing answers success, as Riak's PB
    // API does ("delete succeeds if already deleted").
    blocking(move || node.delete(&req)).await.map_err(err)?;
    Ok(Response::Del)
}
