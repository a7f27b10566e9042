//! Between PB messages and the node's types.

use bytes::Bytes;
use rill_node::{Content, Link, Metadata, Object, Props, Quorum};
use rill_pb::pb::{
    rpb_bucket_props::RpbReplMode, RpbBucketProps, RpbCommitHook, RpbContent, RpbLink, RpbModFun,
    RpbPair,
};
use serde_json::{json, Value};

pub fn quorum(v: Option<u32>) -> Option<Quorum> {
    v.map(Quorum::from_pb).filter(|q| *q != Quorum::Default)
}

fn b(v: &Option<Bytes>) -> Option<Vec<u8>> {
    v.as_ref().map(|x| x.to_vec())
}

/// A client's content. Only `deleted = true` marks a tombstone (Riak
/// takes any `deleted` field present as one; a client sending
/// `deleted = false` means a value).
pub fn content_from_pb(c: &RpbContent) -> Content {
    Content::new(
        c.value.to_vec(),
        Metadata {
            content_type: b(&c.content_type),
            charset: b(&c.charset),
            content_encoding: b(&c.content_encoding),
            vtag: None,
            links: c
                .links
                .iter()
                .map(|l| Link {
                    bucket: b(&l.bucket).unwrap_or_default(),
                    key: b(&l.key).unwrap_or_default(),
                    tag: b(&l.tag).unwrap_or_default(),
                })
                .collect(),
            last_modified_us: 0,
            usermeta: c
                .usermeta
                .iter()
                .map(|p| (p.key.to_vec(), b(&p.value).unwrap_or_default()))
                .collect(),
            indexes: c
                .indexes
                .iter()
                .map(|p| (p.key.to_vec(), b(&p.value).unwrap_or_default()))
                .collect(),
            deleted: c.deleted == Some(true),
        },
    )
}

pub fn content_to_pb(c: &Content, head: bool) -> RpbContent {
    let m = &c.meta;
    let secs = m.last_modified_us / 1_000_000;
    RpbContent {
        value: if head { Bytes::new() } else { c.value.clone() },
        content_type: m.content_type.clone().map(Bytes::from),
        charset: m.charset.clone().map(Bytes::from),
        content_encoding: m.content_encoding.clone().map(Bytes::from),
        vtag: m.vtag.clone().map(Bytes::from),
        links: m
            .links
            .iter()
            .map(|l| RpbLink {
                bucket: Some(l.bucket.clone().into()),
                key: Some(l.key.clone().into()),
                tag: Some(l.tag.clone().into()),
            })
            .collect(),
        last_mod: Some(secs as u32),
        last_mod_usecs: Some((m.last_modified_us % 1_000_000) as u32),
        usermeta: m
            .usermeta
            .iter()
            .map(|(k, v)| RpbPair {
                key: k.clone().into(),
                value: Some(v.clone().into()),
            })
            .collect(),
        indexes: m
            .indexes
            .iter()
            .map(|(k, v)| RpbPair {
                key: k.clone().into(),
                value: Some(v.clone().into()),
            })
            .collect(),
        deleted: m.deleted.then_some(true),
    }
}

pub fn contents_to_pb(o: &Object, head: bool) -> Vec<RpbContent> {
    o.contents.iter().map(|c| content_to_pb(c, head)).collect()
}

fn modfun(v: &Value) -> Option<RpbModFun> {
    Some(RpbModFun {
        module: v.get("mod")?.as_str()?.to_string().into(),
        function: v.get("fun")?.as_str()?.to_string().into(),
    })
}

fn hooks(v: Option<&Value>) -> Vec<RpbCommitHook> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|h| RpbCommitHook {
                    modfun: modfun(h),
                    name: h
                        .get("name")
                        .and_then(Value::as_str)
                        .map(|s| s.to_string().into()),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn u32_of(p: &Props, k: &str) -> Option<u32> {
    p.get(k).and_then(Value::as_u64).map(|n| n as u32)
}

fn bool_of(p: &Props, k: &str) -> Option<bool> {
    p.get(k).and_then(Value::as_bool)
}

fn quorum_of(p: &Props, k: &str) -> Option<u32> {
    p.get(k).and_then(Quorum::from_json).map(Quorum::to_pb)
}

fn bytes_of(p: &Props, k: &str) -> Option<Bytes> {
    p.get(k)
        .and_then(Value::as_str)
        .map(|s| Bytes::from(s.to_string()))
}

pub fn props_to_pb(p: &Props) -> RpbBucketProps {
    let repl =
        p.get("repl").map(|v| match v
            .as_str()
            .or(v.as_bool().map(|b| if b { "true" } else { "false" }))
        {
            Some("realtime") => RpbReplMode::Realtime,
            Some("fullsync") => RpbReplMode::Fullsync,
            Some("true" | "both") => RpbReplMode::True,
            _ => RpbReplMode::False,
        } as i32);
    RpbBucketProps {
        n_val: u32_of(p, "n_val"),
        allow_mult: bool_of(p, "allow_mult"),
        last_write_wins: bool_of(p, "last_write_wins"),
        precommit: hooks(p.get("precommit")),
        has_precommit: p.contains_key("precommit").then_some(true),
        postcommit: hooks(p.get("postcommit")),
        has_postcommit: p.contains_key("postcommit").then_some(true),
        chash_keyfun: p.get("chash_keyfun").and_then(modfun),
        linkfun: p.get("linkfun").and_then(modfun),
        old_vclock: u32_of(p, "old_vclock"),
        young_vclock: u32_of(p, "young_vclock"),
        big_vclock: u32_of(p, "big_vclock"),
        small_vclock: u32_of(p, "small_vclock"),
        pr: quorum_of(p, "pr"),
        r: quorum_of(p, "r"),
        w: quorum_of(p, "w"),
        pw: quorum_of(p, "pw"),
        dw: quorum_of(p, "dw"),
        rw: quorum_of(p, "rw"),
        basic_quorum: bool_of(p, "basic_quorum"),
        notfound_ok: bool_of(p, "notfound_ok"),
        backend: bytes_of(p, "backend"),
        search: bool_of(p, "search"),
        repl,
        search_index: bytes_of(p, "search_index"),
        datatype: bytes_of(p, "datatype"),
        consistent: bool_of(p, "consistent"),
        write_once: bool_of(p, "write_once"),
        hll_precision: u32_of(p, "hll_precision"),
    }
}

fn q_json(v: u32) -> Value {
    Quorum::from_pb(v).to_json()
}

fn hooks_json(h: &[RpbCommitHook]) -> Value {
    Value::Array(
        h.iter()
            .map(|h| match (&h.modfun, &h.name) {
                (Some(mf), _) => json!({"mod": String::from_utf8_lossy(&mf.module), "fun": String::from_utf8_lossy(&mf.function)}),
                (None, Some(n)) => json!({"name": String::from_utf8_lossy(n)}),
                (None, None) => json!({}),
            })
            .collect(),
    )
}

/// The properties a client set, as a property update.
pub fn props_from_pb(p: &RpbBucketProps) -> Props {
    let mut out = Props::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(k.to_string(), v);
        }
    };
    put("n_val", p.n_val.map(Value::from));
    put("allow_mult", p.allow_mult.map(Value::from));
    put("last_write_wins", p.last_write_wins.map(Value::from));
    if p.has_precommit == Some(true) {
        put("precommit", Some(hooks_json(&p.precommit)));
    }
    if p.has_postcommit == Some(true) {
        put("postcommit", Some(hooks_json(&p.postcommit)));
    }
    let mf = |m: &RpbModFun| json!({"mod": String::from_utf8_lossy(&m.module), "fun": String::from_utf8_lossy(&m.function)});
    put("chash_keyfun", p.chash_keyfun.as_ref().map(mf));
    put("linkfun", p.linkfun.as_ref().map(mf));
    put("old_vclock", p.old_vclock.map(Value::from));
    put("young_vclock", p.young_vclock.map(Value::from));
    put("big_vclock", p.big_vclock.map(Value::from));
    put("small_vclock", p.small_vclock.map(Value::from));
    put("pr", p.pr.map(q_json));
    put("r", p.r.map(q_json));
    put("w", p.w.map(q_json));
    put("pw", p.pw.map(q_json));
    put("dw", p.dw.map(q_json));
    put("rw", p.rw.map(q_json));
    put("basic_quorum", p.basic_quorum.map(Value::from));
    put("notfound_ok", p.notfound_ok.map(Value::from));
    put(
        "backend",
        p.backend
            .as_ref()
            .map(|b| Value::from(String::from_utf8_lossy(b).into_owned())),
    );
    put("search", p.search.map(Value::from));
    put(
        "repl",
        p.repl.map(|r| {
            Value::from(match RpbReplMode::try_from(r) {
                Ok(RpbReplMode::Realtime) => "realtime",
                Ok(RpbReplMode::Fullsync) => "fullsync",
                Ok(RpbReplMode::True) => "true",
                _ => "false",
            })
        }),
    );
    put(
        "search_index",
        p.search_index
            .as_ref()
            .map(|b| Value::from(String::from_utf8_lossy(b).into_owned())),
    );
    put(
        "datatype",
        p.datatype
            .as_ref()
            .map(|b| Value::from(String::from_utf8_lossy(b).into_owned())),
    );
    put("consistent", p.consistent.map(Value::from));
    put("write_once", p.write_once.map(Value::from));
    put("hll_precision", p.hll_precision.map(Value::from));
    out
}
