//! Secondary index queries (Riak's 2i): exact and range queries on
//! `_bin` and `_int` fields, the special `$key` and `$bucket` indexes,
//! return_terms, term_regex, max_results with continuations.

use crate::error::{erl_bin, KvError};
use crate::params::{parse_int_term, BadIntTerm};
use base64::Engine;
use rill_backend::{IndexRange, Term};
use std::sync::atomic::Ordering;

/// Which terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexSpec {
    Eq(Vec<u8>),
    /// Inclusive at both ends.
    Range(Vec<u8>, Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct IndexRequest {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    /// A field ending `_bin` or `_int`, or `$key`, or `$bucket`.
    pub index: Vec<u8>,
    pub spec: IndexSpec,
    pub return_terms: bool,
    pub max_results: Option<u32>,
    pub continuation: Option<Vec<u8>>,
    pub term_regex: Option<Vec<u8>>,
}

/// One result: the term (when terms are shown) and the key.
pub type IndexHit = (Option<Vec<u8>>, Vec<u8>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexAnswer {
    /// (term, key), the term set only when terms are returned.
    pub results: Vec<IndexHit>,
    /// Set when the page is full: pass it back for the next page.
    pub continuation: Option<Vec<u8>>,
}

/// Continuations made now: the position of the page's last result in
/// index order. Version 1 (`kind | term as u32 length + bytes | key`) is
/// still read, for clients holding one across an upgrade.
const CONTINUATION_VERSION: u8 = 2;

/// A continuation as clients hold it: base64 of the version and the
/// position of (term, key) in index order (`rill_backend::index_position`),
/// where a sorted store resumes its scan.
pub fn encode_continuation(term: &Term, key: &[u8]) -> Vec<u8> {
    let mut raw = vec![CONTINUATION_VERSION];
    raw.extend_from_slice(&rill_backend::index_position(term, key));
    base64::engine::general_purpose::STANDARD
        .encode(raw)
        .into_bytes()
}

/// A client's continuation back to (term, key); `None` if it is not one
/// a node made (any bytes may arrive: fuzzed by `object_decoders`).
pub fn decode_continuation(c: &[u8]) -> Option<(Term, Vec<u8>)> {
    let raw = base64::engine::general_purpose::STANDARD.decode(c).ok()?;
    let (&v, rest) = raw.split_first()?;
    match v {
        CONTINUATION_VERSION => {
            let (term, key) = rill_backend::split_position(rest)?;
            Some((term, key.to_vec()))
        }
        1 => decode_continuation_v1(rest),
        _ => None,
    }
}

fn decode_continuation_v1(rest: &[u8]) -> Option<(Term, Vec<u8>)> {
    let (&kind, rest) = rest.split_first()?;
    match kind {
        1 if rest.len() >= 8 => {
            let (i, key) = rest.split_at(8);
            Some((
                Term::Int(i64::from_be_bytes(i.try_into().ok()?)),
                key.to_vec(),
            ))
        }
        2 if rest.len() >= 4 => {
            let len = u32::from_be_bytes(rest[..4].try_into().ok()?) as usize;
            let rest = &rest[4..];
            if rest.len() < len {
                return None;
            }
            Some((Term::Bin(rest[..len].to_vec()), rest[len..].to_vec()))
        }
        _ => None,
    }
}

/// A query's `_int` bound. One outside 64 bits (Riak takes any size) is
/// held at the end of the range it passes, which gives the same answer:
/// no stored term lies beyond.
fn int_term(field: &[u8], t: &[u8]) -> Result<Term, KvError> {
    match parse_int_term(field, t) {
        Ok(i)
        | Err(BadIntTerm {
            clamped: Some(i), ..
        }) => Ok(Term::Int(i)),
        Err(e) => Err(KvError::BadRequest(e.message)),
    }
}

/// A validated query, ready to run: see [`Node::index_plan`].
#[derive(Clone, Debug)]
pub struct IndexPlan {
    /// The bucket type as the backends key it ("" for `default`).
    pub(crate) t: Vec<u8>,
    pub(crate) bucket: Vec<u8>,
    target: Target,
    /// Terms shown with their keys.
    show_terms: bool,
    pub(crate) limit: Option<usize>,
    pub(crate) after: Option<(Term, Vec<u8>)>,
    regex: Option<regex::bytes::Regex>,
}

#[derive(Clone, Debug)]
enum Target {
    /// `$key` (a range of keys, `hi` inclusive) or `$bucket` (every key).
    Keys { lo: Vec<u8>, hi: Option<Vec<u8>> },
    /// A `_bin` or `_int` field.
    Terms { field: Vec<u8>, range: IndexRange },
}

impl IndexPlan {
    /// Whether a term passes the term regex (which only `_bin` queries
    /// may have: [`Node::index_plan`] refuses one on an integer field).
    pub(crate) fn keep(&self, term: &Term) -> bool {
        match term {
            Term::Bin(b) => self.keep_bytes(b),
            Term::Int(_) => true,
        }
    }

    /// Whether a `_bin` term, or a `$key`/`$bucket` key, passes the regex.
    pub(crate) fn keep_bytes(&self, b: &[u8]) -> bool {
        self.regex.as_ref().is_none_or(|re| re.is_match(b))
    }

    fn shown(&self, term: &Term) -> Option<Vec<u8>> {
        self.show_terms.then(|| term.to_bytes())
    }
}

/// Results handed to a stream's consumer at a time, at most.
pub const INDEX_BATCH: usize = 100;

impl super::Queries {
    /// Checks a query (bucket type, field, terms, continuation, regex)
    /// before any result is sent, so a streamed answer can still begin
    /// with a clear error.
    pub fn index_plan(&self, req: &IndexRequest) -> Result<IndexPlan, KvError> {
        self.counters.index_queries.fetch_add(1, Ordering::Relaxed);
        crate::params::check_names(&req.bucket_type, &req.bucket, None)?;
        // The bucket type must exist and be active.
        self.buckets.props_for_kv(&req.bucket_type, &req.bucket)?;
        let field = req.index.to_ascii_lowercase();
        let after = match &req.continuation {
            Some(c) if !c.is_empty() => Some(
                decode_continuation(c)
                    .ok_or_else(|| KvError::BadRequest("Invalid continuation".into()))?,
            ),
            _ => None,
        };
        let regex = match &req.term_regex {
            Some(r) if !r.is_empty() => {
                if field.ends_with(b"_int") {
                    return Err(KvError::BadRequest(
                        "Can not use term regular expression in integer query".into(),
                    ));
                }
                let s = String::from_utf8_lossy(r);
                Some(regex::bytes::Regex::new(&s).map_err(|e| {
                    KvError::BadRequest(format!("Invalid term regular expression {s} : {e}"))
                })?)
            }
            _ => None,
        };
        let target = match (field.as_slice(), &req.spec) {
            (b"$bucket", _) => Target::Keys {
                lo: Vec::new(),
                hi: None,
            },
            (b"$key", IndexSpec::Eq(k)) => Target::Keys {
                lo: k.clone(),
                hi: Some(k.clone()),
            },
            (b"$key", IndexSpec::Range(a, b)) => Target::Keys {
                lo: a.clone(),
                hi: Some(b.clone()),
            },
            (f, spec) if f.ends_with(b"_int") => Target::Terms {
                field: field.clone(),
                range: match spec {
                    IndexSpec::Eq(x) => IndexRange::Eq(int_term(&field, x)?),
                    IndexSpec::Range(a, b) => {
                        IndexRange::Range(int_term(&field, a)?, int_term(&field, b)?)
                    }
                },
            },
            (f, spec) if f.ends_with(b"_bin") => Target::Terms {
                field: field.clone(),
                range: match spec {
                    IndexSpec::Eq(x) => IndexRange::Eq(Term::Bin(x.clone())),
                    IndexSpec::Range(a, b) => {
                        IndexRange::Range(Term::Bin(a.clone()), Term::Bin(b.clone()))
                    }
                },
            },
            _ => {
                return Err(KvError::BadRequest(format!(
                    "{{unknown_field_type,{}}}",
                    erl_bin(&field)
                )))
            }
        };
        let show_terms = req.return_terms
            && matches!(
                target,
                Target::Terms {
                    range: IndexRange::Range(..),
                    ..
                }
            );
        Ok(IndexPlan {
            t: if req.bucket_type == b"default" {
                Vec::new()
            } else {
                req.bucket_type.clone()
            },
            bucket: req.bucket.clone(),
            target,
            show_terms,
            limit: req.max_results.filter(|m| *m > 0).map(|m| m as usize),
            after,
            regex,
        })
    }

    /// Runs a query, handing results to `emit` in batches of at most
    /// [`INDEX_BATCH`] (`emit` returns false to stop); returns the
    /// continuation when `max_results` filled the page. Memory stays
    /// bounded whatever the number of hits: see `index_scan`.
    pub fn index_stream(
        &self,
        plan: &IndexPlan,
        emit: &mut dyn FnMut(Vec<IndexHit>) -> bool,
    ) -> Result<Option<Vec<u8>>, KvError> {
        let mut sent = 0usize;
        let mut last = None;
        let mut batch = Vec::with_capacity(INDEX_BATCH);
        let mut stopped = false;
        let mut take = |term: &Term, key: &[u8]| -> bool {
            batch.push((plan.shown(term), key.to_vec()));
            sent += 1;
            if plan.limit.is_some() {
                last = Some((term.clone(), key.to_vec()));
            }
            if batch.len() == INDEX_BATCH && !emit(std::mem::take(&mut batch)) {
                stopped = true;
            }
            !stopped && plan.limit.is_none_or(|l| sent < l)
        };
        match &plan.target {
            Target::Keys { lo, hi } => self.scan_keys(plan, lo, hi.as_deref(), &mut take)?,
            Target::Terms { field, range } => self.scan_terms(plan, field, range, &mut take)?,
        }
        if stopped {
            return Ok(None);
        }
        if !batch.is_empty() {
            emit(batch);
        }
        Ok(match (plan.limit, last) {
            (Some(l), Some((term, key))) if sent == l => Some(encode_continuation(&term, &key)),
            _ => None,
        })
    }

    /// The whole answer at once (a query that is not streamed).
    pub fn index_query(&self, req: &IndexRequest) -> Result<IndexAnswer, KvError> {
        let plan = self.index_plan(req)?;
        let mut results = Vec::new();
        let continuation = self.index_stream(&plan, &mut |batch| {
            results.extend(batch);
            true
        })?;
        if plan.limit.is_none() && matches!(plan.target, Target::Keys { .. }) {
            // A whole `$key`/`$bucket` answer comes sorted, as it does
            // with max_results; a stream of one comes in vnode order.
            results.sort_by(|a, b| a.1.cmp(&b.1));
        }
        Ok(IndexAnswer {
            results,
            continuation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuations_round_trip() {
        for (t, k) in [
            (Term::Int(-7), b"k".to_vec()),
            (Term::Bin(b"x\x00y".to_vec()), b"".to_vec()),
        ] {
            let c = encode_continuation(&t, &k);
            assert!(c.is_ascii());
            assert_eq!(decode_continuation(&c), Some((t, k)));
        }
        assert_eq!(decode_continuation(b"!!"), None);
        // Continuations made before version 2 still resume where they were.
        let b64 = |raw: &[u8]| base64::engine::general_purpose::STANDARD.encode(raw);
        let v1 = b64(b"\x01\x02\x00\x00\x00\x02aak");
        assert_eq!(
            decode_continuation(v1.as_bytes()),
            Some((Term::Bin(b"aa".to_vec()), b"k".to_vec()))
        );
        let mut v1 = vec![1u8, 1];
        v1.extend_from_slice(&(-3i64).to_be_bytes());
        assert_eq!(
            decode_continuation(b64(&v1).as_bytes()),
            Some((Term::Int(-3), Vec::new()))
        );
        // Every cut of a valid continuation is refused or decodes: never a
        // panic (a client may send anything back).
        let raw = base64::engine::general_purpose::STANDARD
            .decode(encode_continuation(&Term::Bin(b"term".to_vec()), b"key"))
            .unwrap();
        for cut in 0..raw.len() {
            let c = base64::engine::general_purpose::STANDARD.encode(&raw[..cut]);
            if let Some((t, k)) = decode_continuation(c.as_bytes()) {
                assert_eq!(
                    decode_continuation(&encode_continuation(&t, &k)),
                    Some((t, k))
                );
            }
        }
    }
}
