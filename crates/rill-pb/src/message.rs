//! Typed requests and responses: a frame's code chooses the message, its
//! body is decoded with prost. The server decodes [`Request`]s and encodes
//! [`Response`]s; the client does the opposite.

use crate::codes as c;
use crate::frame::{encode_frame, RawFrame};
use crate::pb::*;
use bytes::BytesMut;
use prost::Message;

#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("unknown message code {0}")]
    UnknownCode(u8),
    #[error("{message} (code {code}) has no body, but {len_bytes} bytes came with it")]
    UnexpectedBody {
        code: u8,
        message: &'static str,
        len_bytes: usize,
    },
    #[error("malformed {message} (code {code}): {reason}")]
    Malformed {
        code: u8,
        message: &'static str,
        reason: String,
    },
}

fn body<M: Message + Default>(frame: &RawFrame) -> Result<M, DecodeError> {
    M::decode(frame.body.clone()).map_err(|e| DecodeError::Malformed {
        code: frame.code,
        message: c::name(frame.code),
        reason: e.to_string(),
    })
}

fn empty(frame: &RawFrame) -> Result<(), DecodeError> {
    if frame.body.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::UnexpectedBody {
            code: frame.code,
            message: c::name(frame.code),
            len_bytes: frame.body.len(),
        })
    }
}

/// What a client may ask.
// Messages live for one request; boxing the big ones buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Ping,
    GetClientId,
    SetClientId(RpbSetClientIdReq),
    GetServerInfo,
    Get(RpbGetReq),
    Put(RpbPutReq),
    Del(RpbDelReq),
    ListBuckets(RpbListBucketsReq),
    ListKeys(RpbListKeysReq),
    GetBucket(RpbGetBucketReq),
    SetBucket(RpbSetBucketReq),
    ResetBucket(RpbResetBucketReq),
    GetBucketType(RpbGetBucketTypeReq),
    SetBucketType(RpbSetBucketTypeReq),
    Index(RpbIndexReq),
    CsBucket(RpbCsBucketReq),
    CounterUpdate(RpbCounterUpdateReq),
    CounterGet(RpbCounterGetReq),
    GetBucketKeyPreflist(RpbGetBucketKeyPreflistReq),
    DtFetch(DtFetchReq),
    DtUpdate(DtUpdateReq),
    MapRed(RpbMapRedReq),
    AaeFoldMergeRoot(RpbAaeFoldMergeRootNValReq),
    AaeFoldMergeBranch(RpbAaeFoldMergeBranchNValReq),
    AaeFoldFetchClocks(RpbAaeFoldFetchClocksNValReq),
    AaeFoldListBuckets(RpbAaeFoldListBucketsReq),
    AaeFoldFindKeys(RpbAaeFoldFindKeysReq),
    AaeFoldObjectStats(RpbAaeFoldObjectStatsReq),
    /// A message Riak knows that Rill does not serve (search,
    /// TS, AAE folds, TLS, ...): answered with an error naming it.
    Unsupported(u8),
}

impl Request {
    pub fn decode(frame: &RawFrame) -> Result<Request, DecodeError> {
        let f = frame;
        Ok(match f.code {
            c::PING_REQ => empty(f).map(|_| Request::Ping)?,
            c::GET_CLIENT_ID_REQ => empty(f).map(|_| Request::GetClientId)?,
            c::SET_CLIENT_ID_REQ => Request::SetClientId(body(f)?),
            c::GET_SERVER_INFO_REQ => empty(f).map(|_| Request::GetServerInfo)?,
            c::GET_REQ => Request::Get(body(f)?),
            c::PUT_REQ => Request::Put(body(f)?),
            c::DEL_REQ => Request::Del(body(f)?),
            c::LIST_BUCKETS_REQ => Request::ListBuckets(body(f)?),
            c::LIST_KEYS_REQ => Request::ListKeys(body(f)?),
            c::GET_BUCKET_REQ => Request::GetBucket(body(f)?),
            c::SET_BUCKET_REQ => Request::SetBucket(body(f)?),
            c::RESET_BUCKET_REQ => Request::ResetBucket(body(f)?),
            c::GET_BUCKET_TYPE_REQ => Request::GetBucketType(body(f)?),
            c::SET_BUCKET_TYPE_REQ => Request::SetBucketType(body(f)?),
            c::INDEX_REQ => Request::Index(body(f)?),
            c::CS_BUCKET_REQ => Request::CsBucket(body(f)?),
            c::COUNTER_UPDATE_REQ => Request::CounterUpdate(body(f)?),
            c::COUNTER_GET_REQ => Request::CounterGet(body(f)?),
            c::GET_BUCKET_KEY_PREFLIST_REQ => Request::GetBucketKeyPreflist(body(f)?),
            c::DT_FETCH_REQ => Request::DtFetch(body(f)?),
            c::DT_UPDATE_REQ => Request::DtUpdate(body(f)?),
            c::MAP_RED_REQ => Request::MapRed(body(f)?),
            c::AAE_FOLD_MERGE_ROOT_NVAL_REQ => Request::AaeFoldMergeRoot(body(f)?),
            c::AAE_FOLD_MERGE_BRANCH_NVAL_REQ => Request::AaeFoldMergeBranch(body(f)?),
            c::AAE_FOLD_FETCH_CLOCKS_NVAL_REQ => Request::AaeFoldFetchClocks(body(f)?),
            c::AAE_FOLD_LIST_BUCKETS_REQ => Request::AaeFoldListBuckets(body(f)?),
            c::AAE_FOLD_FIND_KEYS_REQ => Request::AaeFoldFindKeys(body(f)?),
            c::AAE_FOLD_OBJECT_STATS_REQ => Request::AaeFoldObjectStats(body(f)?),
            c::SEARCH_QUERY_REQ
            | c::YZ_INDEX_GET_REQ
            | c::YZ_INDEX_PUT_REQ
            | c::YZ_INDEX_DELETE_REQ
            | c::YZ_SCHEMA_GET_REQ
            | c::YZ_SCHEMA_PUT_REQ
            | c::COVERAGE_REQ
            | c::AUTH_REQ
            | c::START_TLS
            | 90..=104
            | 128..=129
            | 200..=231 => Request::Unsupported(f.code),
            other => return Err(DecodeError::UnknownCode(other)),
        })
    }

    /// Appends this request as one frame.
    pub fn encode(&self, out: &mut BytesMut) {
        let (code, bytes) = match self {
            Request::Ping => (c::PING_REQ, Vec::new()),
            Request::GetClientId => (c::GET_CLIENT_ID_REQ, Vec::new()),
            Request::SetClientId(m) => (c::SET_CLIENT_ID_REQ, m.encode_to_vec()),
            Request::GetServerInfo => (c::GET_SERVER_INFO_REQ, Vec::new()),
            Request::Get(m) => (c::GET_REQ, m.encode_to_vec()),
            Request::Put(m) => (c::PUT_REQ, m.encode_to_vec()),
            Request::Del(m) => (c::DEL_REQ, m.encode_to_vec()),
            Request::ListBuckets(m) => (c::LIST_BUCKETS_REQ, m.encode_to_vec()),
            Request::ListKeys(m) => (c::LIST_KEYS_REQ, m.encode_to_vec()),
            Request::GetBucket(m) => (c::GET_BUCKET_REQ, m.encode_to_vec()),
            Request::SetBucket(m) => (c::SET_BUCKET_REQ, m.encode_to_vec()),
            Request::ResetBucket(m) => (c::RESET_BUCKET_REQ, m.encode_to_vec()),
            Request::GetBucketType(m) => (c::GET_BUCKET_TYPE_REQ, m.encode_to_vec()),
            Request::SetBucketType(m) => (c::SET_BUCKET_TYPE_REQ, m.encode_to_vec()),
            Request::Index(m) => (c::INDEX_REQ, m.encode_to_vec()),
            Request::CsBucket(m) => (c::CS_BUCKET_REQ, m.encode_to_vec()),
            Request::CounterUpdate(m) => (c::COUNTER_UPDATE_REQ, m.encode_to_vec()),
            Request::CounterGet(m) => (c::COUNTER_GET_REQ, m.encode_to_vec()),
            Request::GetBucketKeyPreflist(m) => (c::GET_BUCKET_KEY_PREFLIST_REQ, m.encode_to_vec()),
            Request::DtFetch(m) => (c::DT_FETCH_REQ, m.encode_to_vec()),
            Request::DtUpdate(m) => (c::DT_UPDATE_REQ, m.encode_to_vec()),
            Request::MapRed(m) => (c::MAP_RED_REQ, m.encode_to_vec()),
            Request::AaeFoldMergeRoot(m) => (c::AAE_FOLD_MERGE_ROOT_NVAL_REQ, m.encode_to_vec()),
            Request::AaeFoldMergeBranch(m) => {
                (c::AAE_FOLD_MERGE_BRANCH_NVAL_REQ, m.encode_to_vec())
            }
            Request::AaeFoldFetchClocks(m) => {
                (c::AAE_FOLD_FETCH_CLOCKS_NVAL_REQ, m.encode_to_vec())
            }
            Request::AaeFoldListBuckets(m) => (c::AAE_FOLD_LIST_BUCKETS_REQ, m.encode_to_vec()),
            Request::AaeFoldFindKeys(m) => (c::AAE_FOLD_FIND_KEYS_REQ, m.encode_to_vec()),
            Request::AaeFoldObjectStats(m) => (c::AAE_FOLD_OBJECT_STATS_REQ, m.encode_to_vec()),
            Request::Unsupported(code) => (*code, Vec::new()),
        };
        encode_frame(code, &bytes, out);
    }
}

/// What a server may answer. Streamed answers (list keys, list buckets
/// with `stream`, 2i with `stream`) are several responses of one kind, the
/// last with `done` set.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    Error(RpbErrorResp),
    Ping,
    GetClientId(RpbGetClientIdResp),
    SetClientId,
    ServerInfo(RpbGetServerInfoResp),
    Get(RpbGetResp),
    Put(RpbPutResp),
    Del,
    ListBuckets(RpbListBucketsResp),
    ListKeys(RpbListKeysResp),
    /// Also the answer to RpbGetBucketTypeReq.
    GetBucket(RpbGetBucketResp),
    /// Also the answer to RpbSetBucketTypeReq.
    SetBucket,
    ResetBucket,
    Index(RpbIndexResp),
    CsBucket(RpbCsBucketResp),
    CounterUpdate(RpbCounterUpdateResp),
    CounterGet(RpbCounterGetResp),
    GetBucketKeyPreflist(RpbGetBucketKeyPreflistResp),
    DtFetch(DtFetchResp),
    DtUpdate(DtUpdateResp),
    /// A part of a MapReduce job's results; the last has `done` set.
    MapRed(RpbMapRedResp),
    AaeFoldTree(RpbAaeFoldTreeResp),
    AaeFoldKeyValue(RpbAaeFoldKeyValueResp),
    AaeFoldListBuckets(RpbAaeFoldListBucketsResp),
    AaeFoldKeyCount(RpbAaeFoldKeyCountResp),
}

impl Response {
    /// An RpbErrorResp with Riak's errcode 0.
    pub fn error(message: impl Into<String>) -> Response {
        Response::Error(RpbErrorResp {
            errmsg: message.into().into_bytes().into(),
            errcode: 0,
        })
    }

    pub fn decode(frame: &RawFrame) -> Result<Response, DecodeError> {
        let f = frame;
        Ok(match f.code {
            c::ERROR_RESP => Response::Error(body(f)?),
            c::PING_RESP => empty(f).map(|_| Response::Ping)?,
            c::GET_CLIENT_ID_RESP => Response::GetClientId(body(f)?),
            c::SET_CLIENT_ID_RESP => empty(f).map(|_| Response::SetClientId)?,
            c::GET_SERVER_INFO_RESP => Response::ServerInfo(body(f)?),
            c::GET_RESP => Response::Get(body(f)?),
            c::PUT_RESP => Response::Put(body(f)?),
            c::DEL_RESP => empty(f).map(|_| Response::Del)?,
            c::LIST_BUCKETS_RESP => Response::ListBuckets(body(f)?),
            c::LIST_KEYS_RESP => Response::ListKeys(body(f)?),
            c::GET_BUCKET_RESP => Response::GetBucket(body(f)?),
            c::SET_BUCKET_RESP => empty(f).map(|_| Response::SetBucket)?,
            c::RESET_BUCKET_RESP => empty(f).map(|_| Response::ResetBucket)?,
            c::INDEX_RESP => Response::Index(body(f)?),
            c::CS_BUCKET_RESP => Response::CsBucket(body(f)?),
            c::COUNTER_UPDATE_RESP => Response::CounterUpdate(body(f)?),
            c::COUNTER_GET_RESP => Response::CounterGet(body(f)?),
            c::GET_BUCKET_KEY_PREFLIST_RESP => Response::GetBucketKeyPreflist(body(f)?),
            c::DT_FETCH_RESP => Response::DtFetch(body(f)?),
            c::DT_UPDATE_RESP => Response::DtUpdate(body(f)?),
            c::MAP_RED_RESP => Response::MapRed(body(f)?),
            c::AAE_FOLD_TREE_RESP => Response::AaeFoldTree(body(f)?),
            c::AAE_FOLD_KEY_VALUE_RESP => Response::AaeFoldKeyValue(body(f)?),
            c::AAE_FOLD_LIST_BUCKETS_RESP => Response::AaeFoldListBuckets(body(f)?),
            c::AAE_FOLD_KEY_COUNT_RESP => Response::AaeFoldKeyCount(body(f)?),
            other => return Err(DecodeError::UnknownCode(other)),
        })
    }

    /// Appends this response as one frame.
    pub fn encode(&self, out: &mut BytesMut) {
        let (code, bytes) = match self {
            Response::Error(m) => (c::ERROR_RESP, m.encode_to_vec()),
            Response::Ping => (c::PING_RESP, Vec::new()),
            Response::GetClientId(m) => (c::GET_CLIENT_ID_RESP, m.encode_to_vec()),
            Response::SetClientId => (c::SET_CLIENT_ID_RESP, Vec::new()),
            Response::ServerInfo(m) => (c::GET_SERVER_INFO_RESP, m.encode_to_vec()),
            Response::Get(m) => (c::GET_RESP, m.encode_to_vec()),
            Response::Put(m) => (c::PUT_RESP, m.encode_to_vec()),
            Response::Del => (c::DEL_RESP, Vec::new()),
            Response::ListBuckets(m) => (c::LIST_BUCKETS_RESP, m.encode_to_vec()),
            Response::ListKeys(m) => (c::LIST_KEYS_RESP, m.encode_to_vec()),
            Response::GetBucket(m) => (c::GET_BUCKET_RESP, m.encode_to_vec()),
            Response::SetBucket => (c::SET_BUCKET_RESP, Vec::new()),
            Response::ResetBucket => (c::RESET_BUCKET_RESP, Vec::new()),
            Response::Index(m) => (c::INDEX_RESP, m.encode_to_vec()),
            Response::CsBucket(m) => (c::CS_BUCKET_RESP, m.encode_to_vec()),
            Response::CounterUpdate(m) => (c::COUNTER_UPDATE_RESP, m.encode_to_vec()),
            Response::CounterGet(m) => (c::COUNTER_GET_RESP, m.encode_to_vec()),
            Response::GetBucketKeyPreflist(m) => {
                (c::GET_BUCKET_KEY_PREFLIST_RESP, m.encode_to_vec())
            }
            Response::DtFetch(m) => (c::DT_FETCH_RESP, m.encode_to_vec()),
            Response::DtUpdate(m) => (c::DT_UPDATE_RESP, m.encode_to_vec()),
            Response::MapRed(m) => (c::MAP_RED_RESP, m.encode_to_vec()),
            Response::AaeFoldTree(m) => (c::AAE_FOLD_TREE_RESP, m.encode_to_vec()),
            Response::AaeFoldKeyValue(m) => (c::AAE_FOLD_KEY_VALUE_RESP, m.encode_to_vec()),
            Response::AaeFoldListBuckets(m) => (c::AAE_FOLD_LIST_BUCKETS_RESP, m.encode_to_vec()),
            Response::AaeFoldKeyCount(m) => (c::AAE_FOLD_KEY_COUNT_RESP, m.encode_to_vec()),
        };
        encode_frame(code, &bytes, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameDecoder;

    fn roundtrip_request(r: Request) {
        let mut buf = BytesMut::new();
        r.encode(&mut buf);
        let f = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(Request::decode(&f).unwrap(), r);
    }

    #[test]
    fn requests_round_trip() {
        roundtrip_request(Request::Ping);
        roundtrip_request(Request::GetServerInfo);
        roundtrip_request(Request::Get(RpbGetReq {
            bucket: "b".into(),
            key: "k".into(),
            r: Some(2),
            r#type: Some("maps".into()),
            ..Default::default()
        }));
        roundtrip_request(Request::Put(RpbPutReq {
            bucket: "b".into(),
            content: RpbContent {
                value: "v".into(),
                ..Default::default()
            },
            return_body: Some(true),
            ..Default::default()
        }));
    }

    #[test]
    fn ping_is_five_bytes() {
        let mut buf = BytesMut::new();
        Request::Ping.encode(&mut buf);
        assert_eq!(&buf[..], &[0, 0, 0, 1, 1]);
    }

    #[test]
    fn malformed_bodies_are_named() {
        let f = RawFrame {
            code: c::GET_REQ,
            body: vec![0xff, 0xff, 0xff].into(),
        };
        let e = Request::decode(&f).unwrap_err();
        assert!(e.to_string().contains("RpbGetReq"), "{e}");
        let f = RawFrame {
            code: c::PING_REQ,
            body: vec![1].into(),
        };
        assert!(matches!(
            Request::decode(&f),
            Err(DecodeError::UnexpectedBody { .. })
        ));
        let f = RawFrame {
            code: 77,
            body: Default::default(),
        };
        assert_eq!(Request::decode(&f), Err(DecodeError::UnknownCode(77)));
    }

    #[test]
    fn a_get_without_its_required_key_decodes_to_an_empty_key() {
        let m = RpbGetReq {
            bucket: "b".into(),
            ..Default::default()
        };
        // prost writes required bytes fields even when empty, so drop the
        // key field by hand: field 1 only.
        let mut bytes = m.encode_to_vec();
        bytes.truncate(3);
        let f = RawFrame {
            code: c::GET_REQ,
            body: bytes.into(),
        };
        // prost treats missing proto2 required fields as defaults: an
        // empty key, which the node refuses with its own error.
        match Request::decode(&f).unwrap() {
            Request::Get(g) => assert!(g.key.is_empty() && &g.bucket[..] == b"b"),
            other => panic!("expected a get, found {other:?}"),
        }
    }
}
