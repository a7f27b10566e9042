//! Rill's admin routes for bucket types (Riak does this with
//! riak-admin): `/rill/bucket-types`, `/rill/bucket-types/T` and
//! `/rill/bucket-types/T/activate`.

use super::props::props_body;
use super::util::{empty, json, lossy as s, text};
use super::{Ctx, Req};
use crate::blocking;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use rill_node::{KvError, Props, TypeStatus};
use serde_json::{json, Value};
use std::sync::Arc;

fn status_name(st: TypeStatus) -> &'static str {
    match st {
        TypeStatus::Created => "created",
        TypeStatus::Active => "active",
    }
}

pub(crate) fn admin_list_types(ctx: &Arc<Ctx>) -> Response {
    let types: Vec<Value> = ctx
        .node
        .buckets()
        .list_types()
        .into_iter()
        .map(|(n, st)| json!({"name": n, "status": status_name(st)}))
        .collect();
    json(StatusCode::OK, &json!({ "types": types }))
}

/// GET: a type's status and properties; PUT: create it from
/// `{"props":{...}}`.
pub(crate) async fn admin_type(ctx: &Arc<Ctx>, req: &Req, t: &[u8]) -> Response {
    let name = s(t);
    match req.method {
        Method::GET => match ctx.node.buckets().type_status(&name) {
            Some((props, st)) => json(
                StatusCode::OK,
                &json!({"name": name, "status": status_name(st), "props": props}),
            ),
            None => text(
                StatusCode::NOT_FOUND,
                format!("{name} is not an existing bucket type\n"),
            ),
        },
        Method::PUT | Method::POST => {
            let props = if req.body.is_empty() {
                Props::new()
            } else {
                match props_body(req) {
                    Ok(p) => p,
                    Err(e) => return e,
                }
            };
            let node = ctx.node.clone();
            match blocking(move || node.buckets().create_type(&name, &props)).await {
                Ok(()) => empty(StatusCode::CREATED),
                Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            }
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

pub(crate) async fn admin_activate(ctx: &Arc<Ctx>, req: &Req, t: &[u8]) -> Response {
    if req.method != Method::POST {
        return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    }
    let name = s(t);
    let node = ctx.node.clone();
    match blocking(move || node.buckets().activate_type(&name)).await {
        Ok(()) => empty(StatusCode::NO_CONTENT),
        Err(KvError::NoSuchType(n)) => text(
            StatusCode::NOT_FOUND,
            format!("{n} is not an existing bucket type\n"),
        ),
        Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    }
}
