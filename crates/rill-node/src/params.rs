//! A request's parameters as its bucket's properties and Riak's rules
//! resolve them: n_val, the quorum values (R, PR, W, DW, PW,
//! node_confirms and notfound_ok), the put mode and vclock pruning, and checks of names and
//! index terms. The rules that judge replies by the quorum values are
//! `rill-coord`'s machines.

use crate::error::{erl_bin, KvError};
use rill_bucket::{Props, Quorum};
use rill_object::{Content, PruneRules, PutMode};

#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadQuorum {
    pub r: u32,
    pub pr: u32,
    /// Distinct physical nodes that must answer.
    pub node_confirms: u32,
    pub notfound_ok: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteQuorum {
    pub w: u32,
    pub dw: u32,
    pub pw: u32,
    /// Distinct physical nodes that must store the write.
    pub node_confirms: u32,
}

pub(crate) fn prop_bool(p: &Props, name: &str) -> bool {
    p.get(name).and_then(|v| v.as_bool()).unwrap_or(false)
}

fn prop_quorum(p: &Props, name: &str) -> Quorum {
    let unset = match name {
        // Off unless asked (Riak's default of 0).
        "node_confirms" => Quorum::N(0),
        _ => Quorum::Quorum,
    };
    p.get(name).and_then(Quorum::from_json).unwrap_or(unset)
}

/// The bucket's vclock pruning rules (Riak's properties and defaults).
pub(crate) fn prune_rules(p: &Props) -> PruneRules {
    let d = PruneRules::default();
    let num = |name: &str, default: u64| p.get(name).and_then(|v| v.as_u64()).unwrap_or(default);
    PruneRules {
        small: num("small_vclock", d.small as u64) as usize,
        big: num("big_vclock", d.big as u64) as usize,
        young_secs: num("young_vclock", d.young_secs),
        old_secs: num("old_vclock", d.old_secs),
    }
}

pub(crate) fn n_val(p: &Props) -> u32 {
    p.get("n_val").and_then(|v| v.as_u64()).unwrap_or(3) as u32
}

/// The request's n (at most the bucket's) and its quorum value resolved.
pub(crate) fn resolve(
    name: &'static str,
    asked: Option<Quorum>,
    props: &Props,
    n: u32,
    zero_ok: bool,
) -> Result<u32, KvError> {
    let bucket = prop_quorum(props, name);
    let v = asked.unwrap_or(Quorum::Default).resolve(n, bucket);
    if v == 0 && !zero_ok {
        return Err(KvError::QuorumViolation { name, value: 0 });
    }
    if v > n {
        return Err(KvError::NValViolation(n));
    }
    Ok(v)
}

/// R, PR, node_confirms and notfound_ok of a read, from the request
/// over the bucket.
pub(crate) fn read_quorum(
    props: &Props,
    n: u32,
    r: Option<Quorum>,
    pr: Option<Quorum>,
    node_confirms: Option<Quorum>,
    notfound_ok: Option<bool>,
) -> Result<ReadQuorum, KvError> {
    Ok(ReadQuorum {
        r: resolve("r", r, props, n, false)?,
        pr: resolve("pr", pr, props, n, true)?,
        node_confirms: resolve("node_confirms", node_confirms, props, n, true)?,
        notfound_ok: notfound_ok.unwrap_or_else(|| {
            props
                .get("notfound_ok")
                .and_then(|v| v.as_bool())
                .unwrap_or(true)
        }),
    })
}

/// W, DW (at least 1, as Riak), PW and node_confirms of a write.
pub(crate) fn write_quorum(
    props: &Props,
    n: u32,
    w: Option<Quorum>,
    dw: Option<Quorum>,
    pw: Option<Quorum>,
    node_confirms: Option<Quorum>,
) -> Result<WriteQuorum, KvError> {
    Ok(WriteQuorum {
        w: resolve("w", w, props, n, false)?,
        dw: resolve("dw", dw, props, n, true)?.max(1).min(n),
        pw: resolve("pw", pw, props, n, true)?,
        node_confirms: resolve("node_confirms", node_confirms, props, n, true)?,
    })
}

pub(crate) fn request_n(props: &Props, asked: Option<u32>) -> Result<u32, KvError> {
    let n = n_val(props);
    match asked {
        None => Ok(n),
        Some(a) if a > 0 && a <= n => Ok(a),
        Some(a) => Err(KvError::NValViolation(a)),
    }
}

pub(crate) fn check_names(
    bucket_type: &[u8],
    bucket: &[u8],
    key: Option<&[u8]>,
) -> Result<(), KvError> {
    if bucket.is_empty() {
        return Err(KvError::BadRequest("Bucket cannot be zero-length".into()));
    }
    if key.is_some_and(|k| k.is_empty()) {
        return Err(KvError::BadRequest("Key cannot be zero-length".into()));
    }
    if key.is_some_and(|k| k.len() > 65535) || bucket.len() > 65535 || bucket_type.len() > 65535 {
        return Err(KvError::BadRequest(
            "key_too_large: bucket types, buckets and keys are at most 65535 bytes".into(),
        ));
    }
    Ok(())
}

/// Lower-cases index fields, checks their suffix and makes `_int` terms
/// canonical integers; sorted and unique, as Riak's precommit hook does.
pub(crate) fn normalise_indexes(c: &mut Content) -> Result<(), KvError> {
    let mut errors = Vec::new();
    let mut out = Vec::with_capacity(c.meta.indexes.len());
    for (field, term) in c.meta.indexes.drain(..) {
        let field = field.to_ascii_lowercase();
        if field.ends_with(b"_int") {
            match parse_int_term(&field, &term) {
                Ok(i) => out.push((field, i.to_string().into_bytes())),
                Err(e) => errors.push(e.message),
            }
        } else if field.ends_with(b"_bin") {
            out.push((field, term));
        } else {
            errors.push(format!("{{unknown_field_type,{}}}", erl_bin(&field)));
        }
    }
    if !errors.is_empty() {
        errors.sort();
        errors.dedup();
        return Err(KvError::PrecommitFail(errors.join(",")));
    }
    out.sort();
    out.dedup();
    c.meta.indexes = out;
    Ok(())
}

pub(crate) fn put_mode(props: &Props) -> PutMode {
    PutMode {
        allow_mult: prop_bool(props, "allow_mult"),
        last_write_wins: prop_bool(props, "last_write_wins"),
    }
}

/// An `_int` term that is not one: Riak's words, and for an integer
/// outside 64 bits the end of the range it passes.
pub(crate) struct BadIntTerm {
    pub message: String,
    pub clamped: Option<i64>,
}

/// An `_int` term as clients send it (decimal, an optional sign, spaces
/// around). Not an integer: Riak's `field_parsing_failed`. An integer
/// outside the signed 64-bit range (Riak takes any size; index keys hold
/// 64 bits): the same words, and why.
pub(crate) fn parse_int_term(field: &[u8], t: &[u8]) -> Result<i64, BadIntTerm> {
    let text = std::str::from_utf8(t).map(str::trim).unwrap_or("");
    let e = match text.parse::<i64>() {
        Ok(i) => return Ok(i),
        Err(e) => e,
    };
    let failed = format!(
        "{{field_parsing_failed,{{{},{}}}}}",
        erl_bin(field),
        erl_bin(t)
    );
    let clamped = match e.kind() {
        std::num::IntErrorKind::PosOverflow => Some(i64::MAX),
        std::num::IntErrorKind::NegOverflow => Some(i64::MIN),
        _ => None,
    };
    let message = match clamped {
        Some(_) => format!(
            "{failed}: integer index terms must lie between {} and {}",
            i64::MIN,
            i64::MAX
        ),
        None => failed,
    };
    Err(BadIntTerm { message, clamped })
}
