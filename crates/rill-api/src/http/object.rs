//! Objects over HTTP: fetch (with siblings as 300 Multiple Choices),
//! store (PUT with a key, POST without), delete.

use super::util::{
    bool_param, empty, encode_segment, http_date, kv_error, quorum_param, quorum_params, text,
};
use super::{Ctx, Req};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use rill_node::{
    Content, DeleteAnswer, DeleteRequest, GetAnswer, GetRequest, KvError, Link, Metadata, Object,
    PutRequest,
};
use std::sync::Arc;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

pub(crate) async fn object(ctx: &Arc<Ctx>, req: &Req, t: &[u8], b: &[u8], k: &[u8]) -> Response {
    match req.method {
        Method::GET | Method::HEAD => fetch(ctx, req, t, b, k).await,
        Method::PUT | Method::POST => store(ctx, req, t, b, Some(k)).await,
        Method::DELETE => delete(ctx, req, t, b, k).await,
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

fn header(h: &mut HeaderMap, name: &str, value: &[u8]) {
    if let (Ok(n), Ok(v)) = (
        axum::http::HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_bytes(value),
    ) {
        h.append(n, v);
    }
}

fn link_value(links: &[Link], bucket: &[u8]) -> String {
    let mut parts: Vec<String> = links
        .iter()
        .map(|l| {
            format!(
                "</buckets/{}/keys/{}>; riaktag=\"{}\"",
                encode_segment(&l.bucket),
                encode_segment(&l.key),
                encode_segment(&l.tag)
            )
        })
        .collect();
    parts.push(format!("</buckets/{}>; rel=\"up\"", encode_segment(bucket)));
    parts.join(", ")
}

/// The headers of one sibling (for a 200 answer or a multipart part).
fn content_headers(h: &mut HeaderMap, c: &Content, bucket: &[u8], quoted_etag: bool) {
    let m = &c.meta;
    let mut ct = m
        .content_type
        .clone()
        .unwrap_or_else(|| b"application/octet-stream".to_vec());
    if let Some(cs) = &m.charset {
        ct.extend_from_slice(b"; charset=");
        ct.extend_from_slice(cs);
    }
    header(h, "content-type", &ct);
    if let Some(enc) = &m.content_encoding {
        header(h, "content-encoding", enc);
    }
    if let Some(v) = &m.vtag {
        let tag = if quoted_etag {
            format!("\"{}\"", String::from_utf8_lossy(v))
        } else {
            String::from_utf8_lossy(v).into_owned()
        };
        header(h, "etag", tag.as_bytes());
    }
    header(
        h,
        "last-modified",
        http_date(m.last_modified_us / 1_000_000).as_bytes(),
    );
    header(h, "link", link_value(&m.links, bucket).as_bytes());
    for (k, v) in &m.usermeta {
        let mut name = b"x-riak-meta-".to_vec();
        name.extend_from_slice(k);
        if let Ok(n) = std::str::from_utf8(&name) {
            header(h, n, v);
        }
    }
    let mut fields: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
    for (f, v) in &m.indexes {
        match fields.iter_mut().find(|(x, _)| *x == f.as_slice()) {
            Some((_, vals)) => vals.push(v),
            None => fields.push((f, vec![v])),
        }
    }
    for (f, vals) in fields {
        let name = format!("x-riak-index-{}", String::from_utf8_lossy(f));
        header(h, &name, vals.join(&b", "[..]).as_slice());
    }
    if m.deleted {
        header(h, "x-riak-deleted", b"true");
    }
}

fn vclock_header(h: &mut HeaderMap, o: &Object) {
    header(
        h,
        "x-riak-vclock",
        B64.encode(rill_object::encode_vclock(&o.clock)).as_bytes(),
    );
}

fn wants_multipart(req: &Req) -> bool {
    req.headers
        .get_all("accept")
        .iter()
        .any(|v| v.to_str().is_ok_and(|s| s.contains("multipart/mixed")))
}

/// 200 with the value, or 300 with the siblings.
pub(crate) fn answer_object(
    req: &Req,
    o: &Object,
    bucket: &[u8],
    status_one: StatusCode,
) -> Response {
    let chosen: Option<&Content> = match req.query.get("vtag") {
        Some(v) => match o
            .contents
            .iter()
            .find(|c| c.meta.vtag.as_deref() == Some(v.as_bytes()))
        {
            Some(c) => Some(c),
            None => return text(StatusCode::NOT_FOUND, "not found\n"),
        },
        None if o.contents.len() == 1 => o.contents.first(),
        None => None,
    };
    let mut h = HeaderMap::new();
    vclock_header(&mut h, o);
    let mut r = match chosen {
        Some(c) => {
            content_headers(&mut h, c, bucket, true);
            let body = if req.method == Method::HEAD {
                bytes::Bytes::new()
            } else {
                c.value.clone()
            };
            let mut r = Response::new(Body::from(body));
            *r.status_mut() = status_one;
            r
        }
        None if wants_multipart(req) => {
            let boundary = rill_node::ids_boundary();
            let mut body = Vec::new();
            for c in &o.contents {
                body.extend_from_slice(format!("\r\n--{boundary}\r\n").as_bytes());
                let mut ph = HeaderMap::new();
                content_headers(&mut ph, c, bucket, false);
                for (name, value) in &ph {
                    body.extend_from_slice(display_name(name.as_str()).as_bytes());
                    body.extend_from_slice(b": ");
                    body.extend_from_slice(value.as_bytes());
                    body.extend_from_slice(b"\r\n");
                }
                body.extend_from_slice(b"\r\n");
                body.extend_from_slice(&c.value);
            }
            body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
            header(
                &mut h,
                "content-type",
                format!("multipart/mixed; boundary={boundary}").as_bytes(),
            );
            let mut r = Response::new(Body::from(body));
            *r.status_mut() = StatusCode::MULTIPLE_CHOICES;
            r
        }
        None => {
            let mut body = String::from("Siblings:\n");
            for c in &o.contents {
                body.push_str(&String::from_utf8_lossy(
                    c.meta.vtag.as_deref().unwrap_or(b""),
                ));
                body.push('\n');
            }
            header(&mut h, "content-type", b"text/plain");
            let mut r = Response::new(Body::from(body));
            *r.status_mut() = StatusCode::MULTIPLE_CHOICES;
            r
        }
    };
    r.headers_mut().extend(h);
    r
}

/// Header names as Riak writes them in multipart parts.
fn display_name(n: &str) -> String {
    match n {
        "content-type" => "Content-Type".into(),
        "content-encoding" => "Content-Encoding".into(),
        "etag" => "Etag".into(),
        "last-modified" => "Last-Modified".into(),
        "link" => "Link".into(),
        "x-riak-deleted" => "X-Riak-Deleted".into(),
        n if n.starts_with("x-riak-meta-") => format!("X-Riak-Meta-{}", &n["x-riak-meta-".len()..]),
        n if n.starts_with("x-riak-index-") => {
            format!("X-Riak-Index-{}", &n["x-riak-index-".len()..])
        }
        n => n.to_string(),
    }
}

async fn fetch(ctx: &Arc<Ctx>, req: &Req, t: &[u8], b: &[u8], k: &[u8]) -> Response {
    let q = &req.query;
    let get = GetRequest {
        bucket_type: t.to_vec(),
        bucket: b.to_vec(),
        key: k.to_vec(),
        r: match quorum_param(q, "r") {
            Ok(v) => v,
            Err(e) => return e,
        },
        pr: match quorum_param(q, "pr") {
            Ok(v) => v,
            Err(e) => return e,
        },
        node_confirms: match quorum_param(q, "node_confirms") {
            Ok(v) => v,
            Err(e) => return e,
        },
        basic_quorum: match bool_param(q, "basic_quorum") {
            Ok(v) => v,
            Err(e) => return e,
        },
        notfound_ok: match bool_param(q, "notfound_ok") {
            Ok(v) => v,
            Err(e) => return e,
        },
        deletedvclock: true,
        if_modified: None,
        n_val: None,
    };
    match ctx.node.get_task(&get).await {
        Ok(GetAnswer::Found(o)) => {
            if let Some(inm) = req
                .headers
                .get("if-none-match")
                .and_then(|v| v.to_str().ok())
            {
                if o.contents.len() == 1
                    && o.contents[0]
                        .meta
                        .vtag
                        .as_deref()
                        .is_some_and(|v| inm.trim_matches('"').as_bytes() == v)
                {
                    return empty(StatusCode::NOT_MODIFIED);
                }
            }
            answer_object(req, &o, b, StatusCode::OK)
        }
        Ok(GetAnswer::Deleted(clock)) => {
            let mut r = text(StatusCode::NOT_FOUND, "not found\n");
            header(
                r.headers_mut(),
                "x-riak-vclock",
                B64.encode(rill_object::encode_vclock(&clock)).as_bytes(),
            );
            header(r.headers_mut(), "x-riak-deleted", b"true");
            r
        }
        Ok(GetAnswer::NotFound | GetAnswer::Unchanged) => {
            text(StatusCode::NOT_FOUND, "not found\n")
        }
        Err(KvError::NoType) => text(
            StatusCode::NOT_FOUND,
            format!("Unknown bucket type: {}\n", String::from_utf8_lossy(t)),
        ),
        Err(e) => kv_error(e),
    }
}

/// Parses `Link` request headers: `</buckets/B/keys/K>; riaktag="T"`
/// (or `</riak/B/K>; ...`), several per header, several headers.
fn parse_links(h: &HeaderMap) -> Result<Vec<Link>, Response> {
    let bad = || {
        text(
            StatusCode::BAD_REQUEST,
            "Invalid Link header. Links must be of the form\n</buckets/BUCKET/keys/KEY>; riaktag=\"TAG\"\n",
        )
    };
    let mut out = Vec::new();
    for v in h.get_all("link") {
        let s = v.to_str().map_err(|_| bad())?;
        for entry in split_links(s) {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let (target, params) = entry.split_once('>').ok_or_else(bad)?;
            let target = target.trim().strip_prefix('<').ok_or_else(bad)?;
            if params.contains("rel=\"up\"") {
                continue;
            }
            let tag = params
                .split(';')
                .filter_map(|p| p.trim().strip_prefix("riaktag="))
                .next()
                .map(|t| t.trim_matches('"'))
                .ok_or_else(bad)?;
            let segs: Vec<&str> = target.split('/').filter(|s| !s.is_empty()).collect();
            let (bucket, key) = match segs.as_slice() {
                ["buckets", b, "keys", k] => (*b, *k),
                ["riak", b, k] => (*b, *k),
                _ => return Err(bad()),
            };
            let d = super::util::percent_decode_lenient;
            out.push(Link {
                bucket: d(bucket),
                key: d(key),
                tag: d(tag),
            });
        }
    }
    Ok(out)
}

/// Splits on the commas between links, not inside quotes.
fn split_links(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn content_from_request(req: &Req) -> Result<Content, Response> {
    let h = &req.headers;
    let ct = h.get("content-type").ok_or_else(|| {
        text(
            StatusCode::BAD_REQUEST,
            "Missing Content-Type request header\n",
        )
    })?;
    let ct = ct.as_bytes();
    let mut parts = ct.split(|c| *c == b';');
    let content_type = parts.next().unwrap_or_default().trim_ascii().to_vec();
    let mut charset = None;
    for p in parts {
        let p = p.trim_ascii();
        if let Some(cs) = p.strip_prefix(b"charset=") {
            let cs: Vec<u8> = cs.iter().copied().filter(|c| *c != b'"').collect();
            charset = Some(cs);
        }
    }
    let mut usermeta = Vec::new();
    let mut indexes = Vec::new();
    for (name, value) in h {
        let n = name.as_str();
        if let Some(k) = n.strip_prefix("x-riak-meta-") {
            usermeta.push((k.as_bytes().to_vec(), value.as_bytes().to_vec()));
        } else if let Some(field) = n.strip_prefix("x-riak-index-") {
            for v in value.as_bytes().split(|c| *c == b',') {
                indexes.push((field.as_bytes().to_vec(), v.trim_ascii().to_vec()));
            }
        }
    }
    Ok(Content::new(
        req.body.to_vec(),
        Metadata {
            content_type: Some(content_type),
            charset,
            content_encoding: h.get("content-encoding").map(|v| v.as_bytes().to_vec()),
            links: parse_links(h)?,
            usermeta,
            indexes,
            ..Metadata::default()
        },
    ))
}

fn vclock_from(h: &HeaderMap) -> Result<Option<Vec<u8>>, Response> {
    match h.get("x-riak-vclock") {
        None => Ok(None),
        Some(v) => B64.decode(v.as_bytes()).map(Some).map_err(|_| {
            text(
                StatusCode::BAD_REQUEST,
                "X-Riak-Vclock is not valid base64\n",
            )
        }),
    }
}

pub(crate) async fn store(
    ctx: &Arc<Ctx>,
    req: &Req,
    t: &[u8],
    b: &[u8],
    k: Option<&[u8]>,
) -> Response {
    let q = &req.query;
    let content = match content_from_request(req) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let vclock = match vclock_from(&req.headers) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let returnbody = matches!(q.get("returnbody").map(String::as_str), Some("true"));
    let mut put = PutRequest {
        bucket_type: t.to_vec(),
        bucket: b.to_vec(),
        key: k.map(|k| k.to_vec()),
        vclock,
        content,
        return_body: returnbody,
        if_none_match: req
            .headers
            .get("if-none-match")
            .is_some_and(|v| v.as_bytes() == b"*"),
        ..PutRequest::default()
    };
    if let Err(e) = quorum_params(
        q,
        &mut [
            ("w", &mut put.w),
            ("dw", &mut put.dw),
            ("pw", &mut put.pw),
            ("node_confirms", &mut put.node_confirms),
        ],
    ) {
        return e;
    }
    // X-Riak-If-Not-Modified: the write goes ahead only if the stored
    // clock is this one (409 otherwise, as Riak answers).
    let mut conflict_status = StatusCode::PRECONDITION_FAILED;
    if let Some(v) = req.headers.get("x-riak-if-not-modified") {
        match B64.decode(v.as_bytes()) {
            Ok(clock) => {
                put.if_not_modified = true;
                if put.vclock.is_none() {
                    put.vclock = Some(clock);
                }
                conflict_status = StatusCode::CONFLICT;
            }
            Err(_) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "X-Riak-If-Not-Modified is not valid base64\n",
                )
            }
        }
    }
    // If-Match / If-None-Match with entity tags: compared with the vtags of
    // what is stored now.
    let if_match = req
        .headers
        .get("if-match")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let if_none_match_tag = req
        .headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .filter(|v| *v != "*")
        .map(str::to_string);
    if (if_match.is_some() || if_none_match_tag.is_some()) && k.is_some() {
        let get = GetRequest {
            bucket_type: t.to_vec(),
            bucket: b.to_vec(),
            key: k.unwrap_or_default().to_vec(),
            ..GetRequest::default()
        };
        let current = ctx.node.get_task(&get).await;
        let tags: Vec<Vec<u8>> = match &current {
            Ok(GetAnswer::Found(o)) => o
                .contents
                .iter()
                .filter_map(|c| c.meta.vtag.clone())
                .collect(),
            _ => Vec::new(),
        };
        let listed = |header: &str| -> bool {
            header
                .split(',')
                .map(|t| t.trim().trim_start_matches("W/").trim_matches('"'))
                .any(|t| {
                    (t == "*" && !tags.is_empty())
                        || tags.iter().any(|v| v.as_slice() == t.as_bytes())
                })
        };
        if if_match.as_deref().is_some_and(|h| !listed(h))
            || if_none_match_tag.as_deref().is_some_and(listed)
        {
            return text(StatusCode::PRECONDITION_FAILED, "precondition failed\n");
        }
    }
    let node = ctx.node.clone();
    let size = put.content.value.len();
    match crate::blocking_write(&ctx.node, size, move || node.put(put)).await {
        Ok(a) => {
            let location = format!(
                "/buckets/{}/keys/{}",
                encode_segment(b),
                encode_segment(&a.key)
            );
            let location = if t.is_empty() {
                location
            } else {
                format!("/types/{}{}", encode_segment(t), location)
            };
            let mut r = if returnbody {
                answer_object(
                    req,
                    &a.object,
                    b,
                    if k.is_none() {
                        StatusCode::CREATED
                    } else {
                        StatusCode::OK
                    },
                )
            } else if k.is_none() {
                empty(StatusCode::CREATED)
            } else {
                empty(StatusCode::NO_CONTENT)
            };
            if a.generated_key {
                header(r.headers_mut(), "location", location.as_bytes());
            }
            r
        }
        Err(KvError::NoType) => text(
            StatusCode::NOT_FOUND,
            format!("Unknown bucket type: {}\n", String::from_utf8_lossy(t)),
        ),
        Err(e @ (KvError::Modified | KvError::NotFound)) => {
            let mut r = kv_error(e);
            *r.status_mut() = conflict_status;
            r
        }
        Err(e) => kv_error(e),
    }
}

async fn delete(ctx: &Arc<Ctx>, req: &Req, t: &[u8], b: &[u8], k: &[u8]) -> Response {
    let q = &req.query;
    let vclock = match vclock_from(&req.headers) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut d = DeleteRequest {
        bucket_type: t.to_vec(),
        bucket: b.to_vec(),
        key: k.to_vec(),
        vclock,
        ..DeleteRequest::default()
    };
    if let Err(e) = quorum_params(
        q,
        &mut [
            ("rw", &mut d.rw),
            ("r", &mut d.r),
            ("w", &mut d.w),
            ("pr", &mut d.pr),
            ("pw", &mut d.pw),
            ("dw", &mut d.dw),
        ],
    ) {
        return e;
    }
    let node = ctx.node.clone();
    match crate::blocking(move || node.delete(&d)).await {
        Ok(DeleteAnswer::Deleted) => empty(StatusCode::NO_CONTENT),
        // riak_kv_wm_object: the delete's read found nothing.
        Ok(DeleteAnswer::NotFound) => text(StatusCode::NOT_FOUND, "not found\n"),
        Err(KvError::NoType) => text(
            StatusCode::NOT_FOUND,
            format!("Unknown bucket type: {}\n", String::from_utf8_lossy(t)),
        ),
        Err(e) => kv_error(e),
    }
}

pub(crate) fn fuzz(h: &HeaderMap, body: &[u8]) {
    let req = Req {
        method: Method::PUT,
        headers: h.clone(),
        query: Default::default(),
        raw_query: String::new(),
        body: axum::body::Bytes::copy_from_slice(body),
    };
    let _ = content_from_request(&req);
    let _ = vclock_from(h);
}
