//! Data types (DtFetch, DtUpdate, Riak's 1.4 counters): the coordinating
//! vnode applies the operation to its merged state; replicas merge
//! states. A data type is stored as an object with one sibling holding
//! the encoded state; concurrent states met on a read are merged.

use crate::error::{erl_bin, KvError};
use crate::ids;
use crate::params::{check_names, read_quorum, request_n, write_quorum};
use crate::vnode::step::{crdt_of, CoordinateStep};
use rill_bucket::{Props, Quorum};
use rill_crdt::{Clock, Crdt, Op};
use std::sync::atomic::Ordering;

#[derive(Clone, Debug, Default)]
pub struct DtFetchRequest {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub r: Option<Quorum>,
    pub pr: Option<Quorum>,
    pub node_confirms: Option<Quorum>,
    pub notfound_ok: Option<bool>,
    pub n_val: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DtFetchAnswer {
    /// Nothing stored; the bucket's datatype.
    NotFound {
        datatype: String,
    },
    Found {
        value: Crdt,
    },
}

#[derive(Clone, Debug)]
pub struct DtUpdateRequest {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub key: Option<Vec<u8>>,
    /// The opaque context from an earlier fetch.
    pub context: Option<Vec<u8>>,
    pub op: Op,
    pub w: Option<Quorum>,
    pub dw: Option<Quorum>,
    pub pw: Option<Quorum>,
    pub node_confirms: Option<Quorum>,
    pub n_val: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DtUpdateAnswer {
    pub key: Vec<u8>,
    pub generated_key: bool,
    pub value: Crdt,
}

fn hll_precision(props: &Props) -> u8 {
    props
        .get("hll_precision")
        .and_then(|v| v.as_u64())
        .unwrap_or(14) as u8
}

impl super::Coordinator {
    /// The bucket's datatype, with Riak's refusals.
    fn datatype_of(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        fetch: bool,
    ) -> Result<(Props, String), KvError> {
        let props = self
            .buckets
            .props_for_kv(bucket_type, bucket)
            .map_err(|_| {
                KvError::Datatype(format!("Error no bucket type `{}`", erl_bin(bucket_type)))
            })?;
        if props.get("allow_mult").and_then(|v| v.as_bool()) != Some(true) {
            return Err(KvError::Datatype(
                "\"Bucket must be allow_mult=true\"".into(),
            ));
        }
        match props.get("datatype").and_then(|v| v.as_str()) {
            Some(dt) => {
                let dt = dt.to_string();
                Ok((props, dt))
            }
            None if fetch => Err(KvError::Datatype(
                "`undefined` is not a supported type".into(),
            )),
            None => Err(KvError::Datatype(
                "Bucket datatype `undefined` is not a supported type".into(),
            )),
        }
    }

    pub fn dt_fetch(&self, req: &DtFetchRequest) -> Result<DtFetchAnswer, KvError> {
        self.counters.dt_fetches.fetch_add(1, Ordering::Relaxed);
        check_names(&req.bucket_type, &req.bucket, Some(&req.key))?;
        let (props, dt) = if req.bucket_type.is_empty() || req.bucket_type == b"default" {
            // Riak's 1.4 counters live in default-type buckets.
            (
                self.buckets.props_for_kv(b"", &req.bucket)?,
                "counter".to_string(),
            )
        } else {
            self.datatype_of(&req.bucket_type, &req.bucket, true)?
        };
        let n = request_n(&props, req.n_val)?;
        let q = read_quorum(&props, n, req.r, req.pr, req.node_confirms, req.notfound_ok)?;
        let k = crate::vnode::bkey(&req.bucket_type, &req.bucket, &req.key);
        let preflist = self.replicas.preflist(&k.bucket_type, &k.bucket, &k.key, n);
        let merged = self.read_replicas_merged(&k, &preflist, q)?;
        match crdt_of(merged.as_ref())? {
            Some(value) => Ok(DtFetchAnswer::Found { value }),
            None => Ok(DtFetchAnswer::NotFound { datatype: dt }),
        }
    }

    pub fn dt_update(&self, req: DtUpdateRequest) -> Result<DtUpdateAnswer, KvError> {
        self.counters.dt_updates.fetch_add(1, Ordering::Relaxed);
        check_names(&req.bucket_type, &req.bucket, req.key.as_deref())?;
        let legacy = req.bucket_type.is_empty() || req.bucket_type == b"default";
        let (props, dt) = if legacy {
            let props = self.buckets.props_for_kv(b"", &req.bucket)?;
            if !matches!(req.op, Op::Counter(_)) {
                return Err(KvError::Datatype(
                    "\"non-counter operation on default bucket\"".into(),
                ));
            }
            if props.get("allow_mult").and_then(|v| v.as_bool()) != Some(true) {
                return Err(KvError::Datatype(
                    "\"Counters require bucket property 'allow_mult=true'\"".into(),
                ));
            }
            (props, "counter".to_string())
        } else {
            self.datatype_of(&req.bucket_type, &req.bucket, false)?
        };
        let n = request_n(&props, req.n_val)?;
        // Clients send w = 0 for "the default" (riak-go-client does).
        let wq = write_quorum(
            &props,
            n,
            req.w.filter(|q| *q != Quorum::N(0)),
            req.dw,
            req.pw,
            req.node_confirms,
        )?;
        let context = match &req.context {
            Some(c) if !c.is_empty() => Some(Clock::decode(c).ok_or_else(|| {
                KvError::BadRequest("the data type context does not decode".into())
            })?),
            _ => None,
        };
        let (key, generated_key) = match req.key {
            Some(k) => (k, false),
            None => (ids::generated_key(), true),
        };
        let k = crate::vnode::bkey(&req.bucket_type, &req.bucket, &key);
        let how = crate::coordinate::WriteKind {
            adds: true,
            return_body: false,
        };
        let step = CoordinateStep::Dt {
            datatype: dt,
            hll_precision: hll_precision(&props),
            op: req.op,
            context,
        };
        let (object, _) = self.write_replicas(&k, n, wq, &props, how, step)?;
        // The coordinator's new version holds one state: the result.
        let value = crdt_of(Some(&object))?
            .ok_or_else(|| KvError::Backend("the updated data type holds no state".into()))?;
        Ok(DtUpdateAnswer {
            key,
            generated_key,
            value,
        })
    }
}
