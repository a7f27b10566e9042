//! `POST /rill/cluster`: Rill's admin route for cluster commands.

use super::util::text;
use super::{Ctx, Req};
use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use std::sync::Arc;

/// `POST /rill/cluster`: an operator's cluster command (JSON, see
/// `rill_peer::Peer::admin`), answered as JSON `{"ok", "text"}`.
pub(crate) async fn admin_cluster(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let Some(peer) = &ctx.peer else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node runs without its cluster runtime\n",
        );
    };
    let Ok(body) = std::str::from_utf8(&req.body) else {
        return text(StatusCode::BAD_REQUEST, "the command is not UTF-8\n");
    };
    let a = peer.admin(body).await;
    let body = serde_json::json!({"ok": a.ok, "text": a.text}).to_string();
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a valid response")
}
