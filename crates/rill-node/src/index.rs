//! Secondary index queries (Riak's 2i): exact and range queries on
//! `_bin` and `_int` fields, the special `$key` and `$bucket` indexes,
//! return_terms, term_regex, max_results with continuations.

use crate::error::{erl_bin, KvError};
use crate::node::Node;
use base64::Engine;
use rill_backend::{IndexQuery, IndexRange, Term};
use std::collections::BTreeSet;
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexAnswer {
    /// (term, key), the term set only when terms are returned.
    pub results: Vec<(Option<Vec<u8>>, Vec<u8>)>,
    /// Set when the page is full: pass it back for the next page.
    pub continuation: Option<Vec<u8>>,
}

const CONTINUATION_VERSION: u8 = 1;

fn encode_continuation(term: &Term, key: &[u8]) -> Vec<u8> {
    let mut raw = vec![CONTINUATION_VERSION];
    match term {
        Term::Int(i) => {
            raw.push(1);
            raw.extend_from_slice(&i.to_be_bytes());
        }
        Term::Bin(b) => {
            raw.push(2);
            raw.extend_from_slice(&(b.len() as u32).to_be_bytes());
            raw.extend_from_slice(b);
        }
    }
    raw.extend_from_slice(key);
    base64::engine::general_purpose::STANDARD
        .encode(raw)
        .into_bytes()
}

fn decode_continuation(c: &[u8]) -> Option<(Term, Vec<u8>)> {
    let raw = base64::engine::general_purpose::STANDARD.decode(c).ok()?;
    let (&v, rest) = raw.split_first()?;
    if v != CONTINUATION_VERSION {
        return None;
    }
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

fn int_term(field: &[u8], t: &[u8]) -> Result<Term, KvError> {
    std::str::from_utf8(t)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map(Term::Int)
        .ok_or_else(|| {
            KvError::BadRequest(format!(
                "{{field_parsing_failed,{{{},{}}}}}",
                erl_bin(field),
                erl_bin(t)
            ))
        })
}

impl Node {
    pub fn index_query(&self, req: &IndexRequest) -> Result<IndexAnswer, KvError> {
        self.counters.index_queries.fetch_add(1, Ordering::Relaxed);
        crate::kv::check_names(&req.bucket_type, &req.bucket, None)?;
        // The bucket type must exist and be active.
        self.props_for_kv(&req.bucket_type, &req.bucket)?;
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
        let limit = req.max_results.filter(|m| *m > 0).map(|m| m as usize);
        let t = if req.bucket_type == b"default" {
            Vec::new()
        } else {
            req.bucket_type.clone()
        };
        // (term, key) pairs, deduplicated across the replicas.
        let mut hits: BTreeSet<(Term, Vec<u8>)> = BTreeSet::new();
        let keep = |term: &Term, key: &[u8]| match &regex {
            None => true,
            Some(re) => match term {
                Term::Bin(b) => re.is_match(b),
                Term::Int(_) => re.is_match(key),
            },
        };
        let special = field == b"$key" || field == b"$bucket";
        if special {
            let (lo, hi) = match (&req.spec, field.as_slice()) {
                (_, b"$bucket") => (Vec::new(), None),
                (IndexSpec::Eq(k), _) => (k.clone(), Some(k.clone())),
                (IndexSpec::Range(a, b), _) => (a.clone(), Some(b.clone())),
            };
            for v in &self.vnodes {
                v.backend().fold_keys(&t, &req.bucket, &mut |k| {
                    let in_range =
                        k >= lo.as_slice() && hi.as_ref().is_none_or(|h| k <= h.as_slice());
                    let past = after.as_ref().is_none_or(|(_, ak)| k > ak.as_slice());
                    let term = Term::Bin(k.to_vec());
                    if in_range && past && (regex.is_none() || keep(&term, k)) {
                        hits.insert((term, k.to_vec()));
                    }
                    true
                })?;
            }
        } else {
            let range = if field.ends_with(b"_int") {
                match &req.spec {
                    IndexSpec::Eq(x) => IndexRange::Eq(int_term(&field, x)?),
                    IndexSpec::Range(a, b) => {
                        IndexRange::Range(int_term(&field, a)?, int_term(&field, b)?)
                    }
                }
            } else if field.ends_with(b"_bin") {
                match &req.spec {
                    IndexSpec::Eq(x) => IndexRange::Eq(Term::Bin(x.clone())),
                    IndexSpec::Range(a, b) => {
                        IndexRange::Range(Term::Bin(a.clone()), Term::Bin(b.clone()))
                    }
                }
            } else {
                return Err(KvError::BadRequest(format!(
                    "{{unknown_field_type,{}}}",
                    erl_bin(&field)
                )));
            };
            let q = IndexQuery {
                bucket_type: t.clone(),
                bucket: req.bucket.clone(),
                field: field.clone(),
                range,
                after: after.clone(),
            };
            for v in &self.vnodes {
                let mut taken = 0usize;
                v.backend().query_index(&q, &mut |term, key| {
                    if keep(term, key) {
                        hits.insert((term.clone(), key.to_vec()));
                        taken += 1;
                    }
                    limit.is_none_or(|l| taken < l)
                })?;
            }
        }
        let ranged = matches!(req.spec, IndexSpec::Range(..)) && !special;
        let mut results = Vec::new();
        let mut last = None;
        for (term, key) in hits {
            if limit.is_some_and(|l| results.len() >= l) {
                break;
            }
            let shown = (req.return_terms && ranged).then(|| term.to_bytes());
            last = Some((term, key.clone()));
            results.push((shown, key));
        }
        let continuation = match (limit, last) {
            (Some(l), Some((term, key))) if results.len() == l => {
                Some(encode_continuation(&term, &key))
            }
            _ => None,
        };
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
    }
}
