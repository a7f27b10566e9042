//! Data types over PB: DtFetch, DtUpdate and Riak 1.4's counters.

use super::convert::quorum;
use crate::blocking;
use bytes::Bytes;
use rill_node::crdt::{Crdt, EmbeddedOp, Field, FieldKind, MapOp, MapValue, Op, Value};
use rill_node::{DtFetchAnswer, DtFetchRequest, DtUpdateRequest, KvError, Node};
use rill_pb::pb::{
    dt_fetch_resp::DataType, map_field::MapFieldType, map_update::FlagOp, DtFetchReq, DtFetchResp,
    DtOp, DtUpdateReq, DtUpdateResp, DtValue, MapEntry, MapField, RpbCounterGetReq,
    RpbCounterGetResp, RpbCounterUpdateReq, RpbCounterUpdateResp,
};
use rill_pb::Response;
use std::sync::Arc;

fn err(e: KvError) -> Response {
    Response::error(e.to_string())
}

fn data_type(name: &str) -> DataType {
    match name {
        "set" => DataType::Set,
        "map" => DataType::Map,
        "hll" => DataType::Hll,
        "gset" => DataType::Gset,
        _ => DataType::Counter,
    }
}

fn kind_of(t: i32) -> Result<FieldKind, Response> {
    Ok(match MapFieldType::try_from(t) {
        Ok(MapFieldType::Counter) => FieldKind::Counter,
        Ok(MapFieldType::Set) => FieldKind::Set,
        Ok(MapFieldType::Register) => FieldKind::Register,
        Ok(MapFieldType::Flag) => FieldKind::Flag,
        Ok(MapFieldType::Map) => FieldKind::Map,
        Err(_) => return Err(Response::error(format!("unknown map field type {t}"))),
    })
}

fn field_of(f: &MapField) -> Result<Field, Response> {
    Ok(Field {
        name: f.name.to_vec(),
        kind: kind_of(f.r#type)?,
    })
}

fn map_op(m: &rill_pb::pb::MapOp) -> Result<MapOp, Response> {
    let removes = m
        .removes
        .iter()
        .map(field_of)
        .collect::<Result<Vec<_>, _>>()?;
    let mut updates = Vec::with_capacity(m.updates.len());
    for u in &m.updates {
        let f = field_of(&u.field)?;
        let op = match f.kind {
            FieldKind::Counter => {
                EmbeddedOp::Counter(u.counter_op.as_ref().and_then(|c| c.increment).unwrap_or(1))
            }
            FieldKind::Set => {
                let s = u.set_op.clone().unwrap_or_default();
                EmbeddedOp::Set {
                    adds: s.adds.iter().map(|b| b.to_vec()).collect(),
                    removes: s.removes.iter().map(|b| b.to_vec()).collect(),
                }
            }
            FieldKind::Register => EmbeddedOp::Register(
                u.register_op
                    .as_ref()
                    .map(|b| b.to_vec())
                    .unwrap_or_default(),
            ),
            FieldKind::Flag => {
                EmbeddedOp::Flag(u.flag_op.map(FlagOp::try_from) != Some(Ok(FlagOp::Disable)))
            }
            FieldKind::Map => EmbeddedOp::Map(map_op(&u.map_op.clone().unwrap_or_default())?),
        };
        updates.push((f, op));
    }
    Ok(MapOp { removes, updates })
}

fn op_of(op: &DtOp) -> Result<Op, Response> {
    if let Some(c) = &op.counter_op {
        return Ok(Op::Counter(c.increment.unwrap_or(1)));
    }
    if let Some(s) = &op.set_op {
        return Ok(Op::Set {
            adds: s.adds.iter().map(|b| b.to_vec()).collect(),
            removes: s.removes.iter().map(|b| b.to_vec()).collect(),
        });
    }
    if let Some(m) = &op.map_op {
        return Ok(Op::Map(map_op(m)?));
    }
    if let Some(h) = &op.hll_op {
        return Ok(Op::Hll {
            adds: h.adds.iter().map(|b| b.to_vec()).collect(),
        });
    }
    if let Some(g) = &op.gset_op {
        return Ok(Op::GSet {
            adds: g.adds.iter().map(|b| b.to_vec()).collect(),
        });
    }
    Err(Response::error("DtUpdateReq carries no operation"))
}

fn bytes_list(v: &[Vec<u8>]) -> Vec<Bytes> {
    v.iter().cloned().map(Bytes::from).collect()
}

fn map_entries(v: &[(Field, MapValue)]) -> Vec<MapEntry> {
    v.iter()
        .map(|(f, val)| {
            let t = match f.kind {
                FieldKind::Counter => MapFieldType::Counter,
                FieldKind::Set => MapFieldType::Set,
                FieldKind::Register => MapFieldType::Register,
                FieldKind::Flag => MapFieldType::Flag,
                FieldKind::Map => MapFieldType::Map,
            };
            let mut e = MapEntry {
                field: MapField {
                    name: f.name.clone().into(),
                    r#type: t as i32,
                },
                ..Default::default()
            };
            match val {
                MapValue::Counter(n) => e.counter_value = Some(*n),
                MapValue::Set(s) => e.set_value = bytes_list(s),
                MapValue::Register(r) => e.register_value = Some(r.clone().into()),
                MapValue::Flag(b) => e.flag_value = Some(*b),
                MapValue::Map(m) => e.map_value = map_entries(m),
            }
            e
        })
        .collect()
}

fn dt_value(v: &Value) -> DtValue {
    let mut out = DtValue::default();
    match v {
        Value::Counter(n) => out.counter_value = Some(*n),
        Value::Set(s) => out.set_value = bytes_list(s),
        Value::Map(m) => out.map_value = map_entries(m),
        Value::Hll(n) => out.hll_value = Some(*n),
        Value::GSet(s) => out.gset_value = bytes_list(s),
    }
    out
}

fn context_of(c: &Crdt, include: bool) -> Option<Bytes> {
    if !include {
        return None;
    }
    c.context().map(|k| Bytes::from(k.encode()))
}

pub async fn fetch(node: Arc<Node>, r: DtFetchReq) -> Response {
    let include = r.include_context != Some(false);
    let req = DtFetchRequest {
        bucket_type: r.r#type.to_vec(),
        bucket: r.bucket.to_vec(),
        key: r.key.to_vec(),
        r: quorum(r.r),
        pr: quorum(r.pr),
        node_confirms: quorum(r.node_confirms),
        notfound_ok: r.notfound_ok,
        n_val: r.n_val,
    };
    match blocking(move || node.dt_fetch(&req)).await {
        Ok(DtFetchAnswer::NotFound { datatype }) => Response::DtFetch(DtFetchResp {
            context: None,
            r#type: data_type(&datatype) as i32,
            value: None,
        }),
        Ok(DtFetchAnswer::Found { value }) => Response::DtFetch(DtFetchResp {
            context: context_of(&value, include),
            r#type: data_type(value.type_name()) as i32,
            value: Some(dt_value(&value.value())),
        }),
        Err(e) => err(e),
    }
}

pub async fn update(node: Arc<Node>, r: DtUpdateReq) -> Response {
    let op = match op_of(&r.op) {
        Ok(op) => op,
        Err(e) => return e,
    };
    let return_body = r.return_body == Some(true);
    let include = r.include_context != Some(false);
    let req = DtUpdateRequest {
        bucket_type: r.r#type.to_vec(),
        bucket: r.bucket.to_vec(),
        key: r.key.as_ref().map(|k| k.to_vec()),
        context: r.context.as_ref().map(|c| c.to_vec()),
        op,
        w: quorum(r.w),
        dw: quorum(r.dw),
        pw: quorum(r.pw),
        node_confirms: quorum(r.node_confirms),
        n_val: r.n_val,
    };
    match blocking(move || node.dt_update(req)).await {
        Ok(a) => {
            let mut resp = DtUpdateResp {
                key: a.generated_key.then(|| Bytes::from(a.key.clone())),
                ..Default::default()
            };
            if return_body {
                resp.context = context_of(&a.value, include);
                match a.value.value() {
                    Value::Counter(n) => resp.counter_value = Some(n),
                    Value::Set(s) => resp.set_value = bytes_list(&s),
                    Value::Map(m) => resp.map_value = map_entries(&m),
                    Value::Hll(n) => resp.hll_value = Some(n),
                    Value::GSet(s) => resp.gset_value = bytes_list(&s),
                }
            }
            Response::DtUpdate(resp)
        }
        Err(e) => err(e),
    }
}

pub async fn counter_update(node: Arc<Node>, r: RpbCounterUpdateReq) -> Response {
    let returnvalue = r.returnvalue == Some(true);
    let req = DtUpdateRequest {
        bucket_type: Vec::new(),
        bucket: r.bucket.to_vec(),
        key: Some(r.key.to_vec()),
        context: None,
        op: Op::Counter(r.amount),
        w: quorum(r.w),
        dw: quorum(r.dw),
        pw: quorum(r.pw),
        node_confirms: quorum(r.node_confirms),
        n_val: None,
    };
    match blocking(move || node.dt_update(req)).await {
        Ok(a) => Response::CounterUpdate(RpbCounterUpdateResp {
            value: returnvalue.then(|| match a.value.value() {
                Value::Counter(n) => n,
                _ => 0,
            }),
        }),
        Err(e) => err(e),
    }
}

pub async fn counter_get(node: Arc<Node>, r: RpbCounterGetReq) -> Response {
    let req = DtFetchRequest {
        bucket_type: Vec::new(),
        bucket: r.bucket.to_vec(),
        key: r.key.to_vec(),
        r: quorum(r.r),
        pr: quorum(r.pr),
        node_confirms: quorum(r.node_confirms),
        notfound_ok: r.notfound_ok,
        n_val: None,
    };
    match blocking(move || node.dt_fetch(&req)).await {
        Ok(DtFetchAnswer::NotFound { .. }) => {
            Response::CounterGet(RpbCounterGetResp { value: None })
        }
        Ok(DtFetchAnswer::Found { value }) => Response::CounterGet(RpbCounterGetResp {
            value: Some(match value.value() {
                Value::Counter(n) => n,
                _ => 0,
            }),
        }),
        Err(e) => err(e),
    }
}
