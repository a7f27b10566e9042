//! Data types over HTTP (`/types/T/buckets/B/datatypes/K`) and Riak 1.4's
//! counters (`/buckets/B/counters/K`), in Riak's JSON.

use super::util::{empty, encode_segment, json, kv_error, lossy as s, quorum_params, text};
use super::{Ctx, Req};
use crate::blocking;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use rill_node::crdt::{Crdt, EmbeddedOp, Field, FieldKind, MapOp, MapValue, Op, Value};
use rill_node::{DtFetchAnswer, DtFetchRequest, DtUpdateRequest, KvError};
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn bad(msg: impl Into<String>) -> Response {
    text(StatusCode::BAD_REQUEST, format!("{}\n", msg.into()))
}

fn kind_suffix(k: FieldKind) -> &'static str {
    match k {
        FieldKind::Counter => "counter",
        FieldKind::Set => "set",
        FieldKind::Register => "register",
        FieldKind::Flag => "flag",
        FieldKind::Map => "map",
    }
}

/// `name_type` → field (the type after the last `_`).
fn field_of(key: &str) -> Result<Field, Response> {
    let (name, kind) = key.rsplit_once('_').ok_or_else(|| {
        bad(format!(
            "map field {key:?} must end in _counter, _set, _register, _flag or _map"
        ))
    })?;
    let kind = match kind {
        "counter" => FieldKind::Counter,
        "set" => FieldKind::Set,
        "register" => FieldKind::Register,
        "flag" => FieldKind::Flag,
        "map" => FieldKind::Map,
        _ => {
            return Err(bad(format!(
                "map field {key:?} must end in _counter, _set, _register, _flag or _map"
            )))
        }
    };
    Ok(Field {
        name: name.as_bytes().to_vec(),
        kind,
    })
}

fn strings(v: Option<&Json>) -> Result<Vec<Vec<u8>>, Response> {
    match v {
        None => Ok(Vec::new()),
        Some(Json::String(x)) => Ok(vec![x.as_bytes().to_vec()]),
        Some(Json::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(|x| x.as_bytes().to_vec())
                    .ok_or_else(|| bad("set elements must be strings"))
            })
            .collect(),
        Some(_) => Err(bad("set elements must be strings")),
    }
}

fn counter_op(v: &Json) -> Result<i64, Response> {
    match v {
        Json::Number(n) => n
            .as_i64()
            .ok_or_else(|| bad("a counter changes by an integer")),
        Json::Object(o) => match (o.get("increment"), o.get("decrement")) {
            (Some(i), _) => i.as_i64().ok_or_else(|| bad("increment takes an integer")),
            (None, Some(d)) => d
                .as_i64()
                .map(|d| -d)
                .ok_or_else(|| bad("decrement takes an integer")),
            _ => Ok(1),
        },
        Json::String(x) if x == "increment" => Ok(1),
        Json::String(x) if x == "decrement" => Ok(-1),
        _ => Err(bad("expected {\"increment\": N}")),
    }
}

type AddsRemoves = (Vec<Vec<u8>>, Vec<Vec<u8>>);

fn set_parts(v: &Json) -> Result<AddsRemoves, Response> {
    let o = v
        .as_object()
        .ok_or_else(|| bad("expected a set operation object"))?;
    let mut adds = strings(o.get("add_all"))?;
    adds.extend(strings(o.get("add"))?);
    let mut removes = strings(o.get("remove_all"))?;
    removes.extend(strings(o.get("remove"))?);
    Ok((adds, removes))
}

fn map_op(v: &Json) -> Result<MapOp, Response> {
    let o = v
        .as_object()
        .ok_or_else(|| bad("expected a map operation object"))?;
    let mut op = MapOp::default();
    match o.get("remove") {
        None => {}
        Some(Json::String(f)) => op.removes.push(field_of(f)?),
        Some(Json::Array(a)) => {
            for f in a {
                op.removes.push(field_of(
                    f.as_str().ok_or_else(|| bad("remove takes field names"))?,
                )?);
            }
        }
        Some(_) => return Err(bad("remove takes field names")),
    }
    if let Some(u) = o.get("update") {
        let u = u
            .as_object()
            .ok_or_else(|| bad("update takes an object of fields"))?;
        for (name, fop) in u {
            let f = field_of(name)?;
            let e = match f.kind {
                FieldKind::Counter => EmbeddedOp::Counter(counter_op(fop)?),
                FieldKind::Set => {
                    let (adds, removes) = set_parts(fop)?;
                    EmbeddedOp::Set { adds, removes }
                }
                FieldKind::Register => match fop {
                    Json::String(x) => EmbeddedOp::Register(x.as_bytes().to_vec()),
                    Json::Object(r) => EmbeddedOp::Register(
                        r.get("assign")
                            .and_then(Json::as_str)
                            .ok_or_else(|| bad("a register takes {\"assign\": \"value\"}"))?
                            .as_bytes()
                            .to_vec(),
                    ),
                    _ => return Err(bad("a register takes {\"assign\": \"value\"}")),
                },
                FieldKind::Flag => match fop.as_str() {
                    Some("enable") => EmbeddedOp::Flag(true),
                    Some("disable") => EmbeddedOp::Flag(false),
                    _ => return Err(bad("a flag takes \"enable\" or \"disable\"")),
                },
                FieldKind::Map => EmbeddedOp::Map(map_op(fop)?),
            };
            op.updates.push((f, e));
        }
    }
    Ok(op)
}

fn op_for(datatype: &str, v: &Json) -> Result<Op, Response> {
    Ok(match datatype {
        "counter" => Op::Counter(counter_op(v)?),
        "set" => {
            let (adds, removes) = set_parts(v)?;
            Op::Set { adds, removes }
        }
        "hll" => Op::Hll {
            adds: set_parts(v)?.0,
        },
        "gset" => Op::GSet {
            adds: set_parts(v)?.0,
        },
        "map" => Op::Map(map_op(v)?),
        other => {
            return Err(bad(format!(
                "Bucket datatype `{other}` is not a supported type"
            )))
        }
    })
}

fn map_json(m: &[(Field, MapValue)]) -> Json {
    let mut out = Map::new();
    for (f, v) in m {
        let key = format!("{}_{}", s(&f.name), kind_suffix(f.kind));
        let val = match v {
            MapValue::Counter(n) => json!(n),
            MapValue::Set(x) => json!(x.iter().map(|e| s(e)).collect::<Vec<_>>()),
            MapValue::Register(r) => json!(s(r)),
            MapValue::Flag(b) => json!(b),
            MapValue::Map(m) => map_json(m),
        };
        out.insert(key, val);
    }
    Json::Object(out)
}

fn value_json(c: &Crdt, include_context: bool) -> Json {
    let value = match c.value() {
        Value::Counter(n) => json!(n),
        Value::Set(x) | Value::GSet(x) => json!(x.iter().map(|e| s(e)).collect::<Vec<_>>()),
        Value::Hll(n) => json!(n),
        Value::Map(m) => map_json(&m),
    };
    let mut out = json!({"type": c.type_name(), "value": value});
    if include_context {
        if let Some(ctx) = c.context() {
            out["context"] = json!(B64.encode(ctx.encode()));
        }
    }
    out
}

fn datatype_of(ctx: &Ctx, t: &[u8], b: &[u8]) -> Result<String, Response> {
    let name = if t.is_empty() {
        "default".to_string()
    } else {
        s(t)
    };
    let props = ctx.node.buckets().bucket_props(&name, b).map_err(|_| {
        text(
            StatusCode::NOT_FOUND,
            format!("Unknown bucket type: {name}\n"),
        )
    })?;
    Ok(props
        .get("datatype")
        .and_then(Json::as_str)
        .unwrap_or(if t.is_empty() { "counter" } else { "undefined" })
        .to_string())
}

/// `/types/T/buckets/B/datatypes[/K]`.
pub(crate) async fn datatype(
    ctx: &Arc<Ctx>,
    req: &Req,
    t: &[u8],
    b: &[u8],
    k: Option<&[u8]>,
) -> Response {
    let include_context = req.query.get("include_context").map(String::as_str) != Some("false");
    match (&req.method, k) {
        (&Method::GET, Some(k)) => {
            let dt = match datatype_of(ctx, t, b) {
                Ok(d) => d,
                Err(e) => return e,
            };
            let mut fr = DtFetchRequest {
                bucket_type: t.to_vec(),
                bucket: b.to_vec(),
                key: k.to_vec(),
                ..Default::default()
            };
            if let Err(e) = quorum_params(
                &req.query,
                &mut [
                    ("r", &mut fr.r),
                    ("pr", &mut fr.pr),
                    ("node_confirms", &mut fr.node_confirms),
                ],
            ) {
                return e;
            }
            let node = ctx.node.clone();
            match blocking(move || node.dt_fetch(&fr)).await {
                Ok(DtFetchAnswer::Found { value }) => {
                    json(StatusCode::OK, &value_json(&value, include_context))
                }
                Ok(DtFetchAnswer::NotFound { .. }) => json(
                    StatusCode::NOT_FOUND,
                    &json!({"type": dt, "error": "notfound"}),
                ),
                Err(e) => kv_error(e),
            }
        }
        (&Method::POST | &Method::PUT, k) => update(ctx, req, t, b, k, include_context).await,
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

async fn update(
    ctx: &Arc<Ctx>,
    req: &Req,
    t: &[u8],
    b: &[u8],
    k: Option<&[u8]>,
    include_context: bool,
) -> Response {
    let dt = match datatype_of(ctx, t, b) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let body: Json = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => return bad(format!("invalid JSON: {e}")),
    };
    let op = match op_for(&dt, &body) {
        Ok(op) => op,
        Err(e) => return e,
    };
    let context = match body.get("context").and_then(Json::as_str) {
        Some(c) => match B64.decode(c) {
            Ok(v) => Some(v),
            Err(_) => return bad("context is not valid base64"),
        },
        None => None,
    };
    let mut ur = DtUpdateRequest {
        bucket_type: t.to_vec(),
        bucket: b.to_vec(),
        key: k.map(|k| k.to_vec()),
        context,
        op,
        w: None,
        dw: None,
        pw: None,
        node_confirms: None,
        n_val: None,
    };
    if let Err(e) = quorum_params(
        &req.query,
        &mut [
            ("w", &mut ur.w),
            ("dw", &mut ur.dw),
            ("pw", &mut ur.pw),
            ("node_confirms", &mut ur.node_confirms),
        ],
    ) {
        return e;
    }
    let returnbody = req.query.get("returnbody").map(String::as_str) == Some("true");
    let node = ctx.node.clone();
    match blocking(move || node.dt_update(ur)).await {
        Ok(a) => {
            let mut r = if returnbody {
                json(StatusCode::OK, &value_json(&a.value, include_context))
            } else if a.generated_key {
                empty(StatusCode::CREATED)
            } else {
                empty(StatusCode::NO_CONTENT)
            };
            if a.generated_key {
                let loc = format!(
                    "/types/{}/buckets/{}/datatypes/{}",
                    encode_segment(t),
                    encode_segment(b),
                    encode_segment(&a.key)
                );
                if let Ok(v) = HeaderValue::from_str(&loc) {
                    r.headers_mut().insert("location", v);
                }
            }
            r
        }
        Err(KvError::Datatype(m)) => bad(m),
        Err(e) => kv_error(e),
    }
}

/// `/buckets/B/counters/K`: GET the value, POST an integer change.
pub(crate) async fn counter(ctx: &Arc<Ctx>, req: &Req, b: &[u8], k: &[u8]) -> Response {
    let node = ctx.node.clone();
    match req.method {
        Method::GET => {
            let fr = DtFetchRequest {
                bucket: b.to_vec(),
                key: k.to_vec(),
                ..Default::default()
            };
            match blocking(move || node.dt_fetch(&fr)).await {
                Ok(DtFetchAnswer::Found { value }) => match value.value() {
                    Value::Counter(n) => text(StatusCode::OK, n.to_string()),
                    _ => text(StatusCode::CONFLICT, "not a counter\n"),
                },
                Ok(DtFetchAnswer::NotFound { .. }) => text(StatusCode::NOT_FOUND, "not found\n"),
                Err(e) => kv_error(e),
            }
        }
        Method::POST => {
            let Some(amount) = std::str::from_utf8(&req.body)
                .ok()
                .and_then(|x| x.trim().parse::<i64>().ok())
            else {
                return bad("the body must be an integer");
            };
            let ur = DtUpdateRequest {
                bucket_type: Vec::new(),
                bucket: b.to_vec(),
                key: Some(k.to_vec()),
                context: None,
                op: Op::Counter(amount),
                w: None,
                dw: None,
                pw: None,
                node_confirms: None,
                n_val: None,
            };
            let returnvalue = req.query.get("returnvalue").map(String::as_str) == Some("true");
            match blocking(move || node.dt_update(ur)).await {
                Ok(a) if returnvalue => match a.value.value() {
                    Value::Counter(n) => text(StatusCode::OK, n.to_string()),
                    _ => empty(StatusCode::NO_CONTENT),
                },
                Ok(_) => empty(StatusCode::NO_CONTENT),
                Err(KvError::Datatype(m)) => text(StatusCode::CONFLICT, format!("{m}\n")),
                Err(e) => kv_error(e),
            }
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}
