//! `/rill/tictacaae`: `rill admin tictacaae`'s requests. `GET` answers
//! the node's anti-entropy settings and each vnode's trees (JSON);
//! `POST` with `{"op": "rebuild-now"}` asks every vnode holding data to
//! build its trees again, and `{"op": "set", "name": N, "value": V}`
//! changes a setting while the node runs (`exchangetick`, `rebuildtick`,
//! `maxresults`, `rangeboost`, `repairloops`).

use super::util::{json, text};
use super::{Ctx, Req};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::json;
use std::sync::Arc;

pub(crate) async fn tictacaae(ctx: &Arc<Ctx>, req: &Req) -> Response {
    let node = ctx.node.clone();
    let aae = node.tictacaae();
    let c = aae.config();
    if !c.active {
        return text(
            StatusCode::CONFLICT,
            "tictacaae not active (tictacaae_active = passive)\n",
        );
    }
    if req.method != Method::POST {
        let trees: Vec<_> = aae
            .tree_status()
            .into_iter()
            .map(|t| {
                json!({
                    "partition": t.partition,
                    "status": t.status,
                    "built_at_ms": t.built_at_ms,
                    "built_at": t.built_at_ms.map(|ms| super::util::rfc3339((ms / 1000) as i64)),
                    "trees": t.trees,
                })
            })
            .collect();
        let settings: serde_json::Map<String, serde_json::Value> = [
            "exchangetick",
            "rebuildtick",
            "maxresults",
            "rangeboost",
            "repairloops",
        ]
        .iter()
        .filter_map(|n| Some((format!("tictacaae_{n}"), aae.get(n)?.into())))
        .collect();
        return json(
            StatusCode::OK,
            &json!({ "node": node.nodename(), "settings": settings, "trees": trees }),
        );
    }
    let bad = |m: String| text(StatusCode::BAD_REQUEST, format!("{m}\n"));
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&req.body) else {
        return bad("the body must be JSON: {\"op\": \"rebuild-now\"}".into());
    };
    match v["op"].as_str() {
        Some("rebuild-now") => {
            let n = aae.rebuild_now();
            let t = format!(
                "rebuilding aae trees on {n} partitions on {}",
                node.nodename()
            );
            json(StatusCode::OK, &json!({ "text": t }))
        }
        Some("set") => {
            let (Some(name), Some(value)) = (v["name"].as_str(), v["value"].as_u64()) else {
                return bad("set takes a name and a whole number value".into());
            };
            match aae.set(name, value) {
                Ok(()) => json(
                    StatusCode::OK,
                    &json!({ "text": format!("Set tictacaae_{name} to {value} on {}", node.nodename()) }),
                ),
                Err(e) => bad(e),
            }
        }
        _ => bad("op must be rebuild-now or set".into()),
    }
}
