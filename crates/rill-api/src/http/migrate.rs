//! `/rill/backend-migration`: `rill admin backend-migrate`'s requests.
//! `GET` answers where a backend migration of the node stands (JSON);
//! `POST` with `{"to": BACKEND, "keys_per_second": N}` starts one (or
//! resumes a stopped one) and answers `202` with the same JSON, or `400`
//! with why not.

use super::util::{json, kv_error};
use super::{Ctx, Req};
use crate::blocking;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use std::sync::Arc;

pub(crate) async fn backend_migration(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let node = ctx.node.clone();
    if req.method != Method::POST {
        return json(StatusCode::OK, &node.backend_migration_status().to_json());
    }
    let bad = |m: &str| super::util::text(StatusCode::BAD_REQUEST, format!("{m}\n"));
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&req.body) else {
        return bad("the body must be JSON: {\"to\": \"leveled\"}");
    };
    let Some(to) = v["to"].as_str().map(str::to_string) else {
        return bad("the body names no backend: {\"to\": \"leveled\"}");
    };
    let rate = match &v["keys_per_second"] {
        serde_json::Value::Null => 0,
        r => match r.as_u64() {
            Some(r) => r,
            None => return bad("keys_per_second must be a whole number"),
        },
    };
    // Opening the target's databases may read from the disk.
    match blocking(move || node.start_backend_migration(&to, rate)).await {
        Ok(status) => json(StatusCode::ACCEPTED, &status.to_json()),
        Err(e) => kv_error(e),
    }
}
