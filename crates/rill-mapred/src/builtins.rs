//! The built-in Erlang phases of Riak KV's `riak_kv_mapreduce`, with
//! Riak's semantics where a client can see them: a map returns a list of
//! results; a missing object is handled as the phase's `arg` asks
//! (`"filter_notfound"`, `"include_notfound"`, `"include_keydata"`,
//! `{"sub": [...]}`) and is otherwise an error; a reduce is called again
//! on its own earlier output together with new inputs (re-reduce).
//!
//! Where Rill differs, on purpose:
//! - a deleted object (a tombstone) is a missing object, never a value
//!   `""` (Riak's map phases see tombstones);
//! - `reduce_set_union` answers in term order and `reduce_plist_sum` in
//!   key order (Riak's order is a hash table's);
//! - `reduce_plist_sum` flattens nested lists of pairs on every call, so
//!   re-reduce works (Riak's fails, riak_kv issue 687), and takes JSON
//!   objects as lists of pairs;
//! - `reduce_identity` gives a key in a bucket type as `[B, K, null, T]`,
//!   the form phaseless jobs use (Riak cannot encode it);
//! - integer sums that overflow 64 bits are an error, not bignums.

use crate::term::{erlang_cmp, exact_cmp, show, Fetched, Term};
use std::cmp::Ordering;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapFun {
    Identity,
    ObjectValue,
    ObjectValueList,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceFun {
    Identity,
    SetUnion,
    Sort,
    StringToInteger,
    Sum,
    PlistSum,
    CountInputs,
}

impl MapFun {
    pub fn named(f: &str) -> Option<MapFun> {
        Some(match f {
            "map_identity" => MapFun::Identity,
            "map_object_value" => MapFun::ObjectValue,
            "map_object_value_list" => MapFun::ObjectValueList,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            MapFun::Identity => "map_identity",
            MapFun::ObjectValue => "map_object_value",
            MapFun::ObjectValueList => "map_object_value_list",
        }
    }
}

impl ReduceFun {
    pub fn named(f: &str) -> Option<ReduceFun> {
        Some(match f {
            "reduce_identity" => ReduceFun::Identity,
            "reduce_set_union" => ReduceFun::SetUnion,
            "reduce_sort" => ReduceFun::Sort,
            "reduce_string_to_integer" => ReduceFun::StringToInteger,
            "reduce_sum" => ReduceFun::Sum,
            "reduce_plist_sum" => ReduceFun::PlistSum,
            "reduce_count_inputs" => ReduceFun::CountInputs,
            _ => return None,
        })
    }
}

/// Why a built-in phase failed on its input, in words a client can act
/// on; `function` names the built-in, terms are shown as the client sees
/// them (at most 200 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuiltinError {
    #[error(
        "{function} needs an object with one value; {key} has {siblings} siblings \
         (resolve them with a put, or read them with a get)"
    )]
    Siblings {
        function: &'static str,
        key: String,
        siblings: usize,
    },
    /// No object, and the phase's `arg` does not say what to do then.
    #[error(
        "{function} found no object for {key}; to go on past missing keys give the phase \
         \"arg\":\"filter_notfound\" (skip them), \"include_notfound\", \
         \"include_keydata\" or {{\"sub\":[...]}}"
    )]
    NotFound { function: &'static str, key: String },
    #[error("reduce_identity takes bucket/key inputs, not {input}")]
    NotBucketKey { input: String },
    #[error("reduce_string_to_integer: {input} is not an integer or its decimal text")]
    NotAnInteger { input: String },
    /// Not a number, or a sum past 64 bits; `text` when the input was a
    /// string (map_object_value's values are).
    #[error("{function}: {input} is not a number{}", text_hint(*.text))]
    NotANumber {
        function: &'static str,
        input: String,
        text: bool,
    },
    #[error("reduce_plist_sum takes {{Key, Number}} pairs, not {input}")]
    NotAPair { input: String },
}

fn text_hint(text: bool) -> &'static str {
    if text {
        " (map_object_value gives values as strings: put reduce_string_to_integer before it)"
    } else {
        ""
    }
}

/// What a map phase is given for one input.
pub enum MapInput {
    Found(Arc<Fetched>),
    /// No live object under the key; `bkey` is the input as it came.
    NotFound(Term),
}

/// Runs a map function on one input; the error says what went wrong in
/// words a client can act on.
pub fn map(
    f: MapFun,
    input: &MapInput,
    keydata: &Term,
    arg: &Term,
) -> Result<Vec<Term>, BuiltinError> {
    let o = match input {
        MapInput::NotFound(bkey) => {
            if f == MapFun::Identity {
                return Ok(vec![Term::notfound()]);
            }
            return notfound_action(f, bkey, keydata, arg);
        }
        MapInput::Found(o) => o,
    };
    match f {
        MapFun::Identity => Ok(vec![Term::Object(o.clone())]),
        MapFun::ObjectValue | MapFun::ObjectValueList => {
            let live: Vec<_> = o
                .object
                .contents
                .iter()
                .filter(|c| !c.meta.deleted)
                .collect();
            if live.len() != 1 || o.object.contents.len() != 1 {
                return Err(BuiltinError::Siblings {
                    function: f.name(),
                    key: show(&bkey_of(o), 200),
                    siblings: o.object.contents.len(),
                });
            }
            Ok(match f {
                MapFun::ObjectValue => vec![Term::Bin(o.object.contents[0].value.clone())],
                // A stored value is bytes, never an Erlang list: as in
                // Riak, there is nothing to emit.
                _ => Vec::new(),
            })
        }
    }
}

fn bkey_of(o: &Fetched) -> Term {
    let b = match &o.bucket_type {
        Some(t) => Term::pair(Term::bin(t), Term::bin(&o.bucket)),
        None => Term::bin(&o.bucket),
    };
    Term::pair(b, Term::bin(&o.key))
}

fn notfound_action(
    f: MapFun,
    bkey: &Term,
    keydata: &Term,
    arg: &Term,
) -> Result<Vec<Term>, BuiltinError> {
    match arg {
        Term::Bin(a) if &a[..] == b"filter_notfound" => Ok(Vec::new()),
        Term::Bin(a) if &a[..] == b"include_notfound" => Ok(vec![Term::notfound()]),
        Term::Bin(a) if &a[..] == b"include_keydata" => Ok(vec![keydata.clone()]),
        Term::Struct(p) if p.len() == 1 && &p[0].0[..] == b"sub" => Ok(match &p[0].1 {
            Term::List(v) => v.clone(),
            _ => Vec::new(),
        }),
        _ => Err(BuiltinError::NotFound {
            function: f.name(),
            key: show(bkey, 200),
        }),
    }
}

/// The links of an object that match a link phase (`None` matches all),
/// as `[Bucket, Key, Tag]`.
pub fn links(o: &Fetched, bucket: Option<&[u8]>, tag: Option<&[u8]>) -> Vec<Term> {
    let mut out: Vec<Term> = o
        .object
        .contents
        .iter()
        .filter(|c| !c.meta.deleted)
        .flat_map(|c| &c.meta.links)
        .filter(|l| {
            bucket.is_none_or(|b| b == l.bucket.as_slice())
                && tag.is_none_or(|t| t == l.tag.as_slice())
        })
        .map(|l| {
            Term::List(vec![
                Term::bin(&l.bucket),
                Term::bin(&l.key),
                Term::bin(&l.tag),
            ])
        })
        .collect();
    // Sorted and merged across siblings, as Riak's link walker does.
    out.sort_by(exact_cmp);
    out.dedup_by(|a, b| exact_cmp(a, b) == Ordering::Equal);
    out
}

/// Runs a reduce function on a batch (its earlier output first, then new
/// inputs).
pub fn reduce(f: ReduceFun, inputs: &[Term]) -> Result<Vec<Term>, BuiltinError> {
    match f {
        ReduceFun::Identity => {
            let mut out = Vec::with_capacity(inputs.len());
            for t in inputs {
                out.push(identity_bkey(t).ok_or_else(|| BuiltinError::NotBucketKey {
                    input: show(t, 200),
                })?);
            }
            // Riak folds onto the front of a list: the order turns round.
            out.reverse();
            Ok(out)
        }
        ReduceFun::SetUnion => {
            let mut v = inputs.to_vec();
            v.sort_by(exact_cmp);
            v.dedup_by(|a, b| exact_cmp(a, b) == Ordering::Equal);
            Ok(v)
        }
        ReduceFun::Sort => {
            let mut v = inputs.to_vec();
            v.sort_by(erlang_cmp);
            Ok(v)
        }
        ReduceFun::StringToInteger => inputs
            .iter()
            .map(|t| {
                let n = match t {
                    Term::Int(i) => Some(*i),
                    Term::Bin(b) => crate::filters::parse_int(b),
                    _ => None,
                };
                n.map(Term::Int).ok_or_else(|| BuiltinError::NotAnInteger {
                    input: show(t, 200),
                })
            })
            .collect(),
        ReduceFun::Sum => {
            let mut acc = Term::Int(0);
            for t in inputs {
                acc = add(&acc, t).ok_or_else(|| not_a_number("reduce_sum", t))?;
            }
            Ok(vec![acc])
        }
        ReduceFun::PlistSum => plist_sum(inputs.to_vec()),
        ReduceFun::CountInputs => {
            let mut n: i64 = 0;
            for t in inputs {
                n = n.saturating_add(match t {
                    Term::Int(i) => *i,
                    _ => 1,
                });
            }
            Ok(vec![Term::Int(n)])
        }
    }
}

fn not_a_number(function: &'static str, t: &Term) -> BuiltinError {
    BuiltinError::NotANumber {
        function,
        input: show(t, 200),
        text: matches!(t, Term::Bin(_)),
    }
}

/// Erlang's `+` on numbers; `None` for anything else or an overflow.
fn add(a: &Term, b: &Term) -> Option<Term> {
    Some(match (a, b) {
        (Term::Int(x), Term::Int(y)) => Term::Int(x.checked_add(*y)?),
        (Term::Int(x), Term::Float(y)) | (Term::Float(y), Term::Int(x)) => {
            Term::Float(Some(*x as f64 + y).filter(|f| f.is_finite())?)
        }
        (Term::Float(x), Term::Float(y)) => Term::Float(Some(x + y).filter(|f| f.is_finite())?),
        _ => return None,
    })
}

fn identity_bkey(t: &Term) -> Option<Term> {
    let (b, k) = match t {
        Term::Tuple(v) if v.len() == 2 => match &v[0] {
            Term::Tuple(bk) if bk.len() == 2 => (&bk[0], &bk[1]),
            _ => (&v[0], &v[1]),
        },
        Term::List(v) if v.len() == 2 || v.len() == 4 => return Some(t.clone()),
        _ => return None,
    };
    Some(match b {
        Term::Tuple(tb) if tb.len() == 2 => Term::List(vec![
            tb[1].clone(),
            k.clone(),
            Term::Atom("null"),
            tb[0].clone(),
        ]),
        _ => Term::List(vec![b.clone(), k.clone()]),
    })
}

fn plist_sum(inputs: Vec<Term>) -> Result<Vec<Term>, BuiltinError> {
    fn flatten(t: Term, out: &mut Vec<(Term, Term)>) -> Result<(), BuiltinError> {
        match t {
            Term::List(v) => v.into_iter().try_for_each(|x| flatten(x, out)),
            Term::Struct(p) => {
                out.extend(p.into_iter().map(|(k, v)| (Term::Bin(k), v)));
                Ok(())
            }
            Term::Tuple(mut v) if v.len() == 2 => {
                let val = v.pop().expect("two");
                out.push((v.pop().expect("two"), val));
                Ok(())
            }
            other => Err(BuiltinError::NotAPair {
                input: show(&other, 200),
            }),
        }
    }
    let mut pairs = Vec::new();
    for t in inputs {
        flatten(t, &mut pairs)?;
    }
    pairs.sort_by(|a, b| exact_cmp(&a.0, &b.0));
    let mut out: Vec<(Term, Term)> = Vec::new();
    for (k, v) in pairs {
        match out.last_mut() {
            Some((lk, lv)) if exact_cmp(lk, &k) == Ordering::Equal => {
                *lv = add(lv, &v).ok_or_else(|| not_a_number("reduce_plist_sum", &v))?;
            }
            _ => {
                if !matches!(v, Term::Int(_) | Term::Float(_)) {
                    return Err(not_a_number("reduce_plist_sum", &v));
                }
                out.push((k, v))
            }
        }
    }
    Ok(out.into_iter().map(|(k, v)| Term::pair(k, v)).collect())
}

/// How many inputs a reduce takes before calling its function again:
/// Riak's 20, or the phase arg's `reduce_phase_batch_size`; `None` for
/// `reduce_phase_only_1` (one call over everything).
pub fn reduce_batch(arg: &Term) -> Option<usize> {
    let Term::Struct(props) = arg else {
        return Some(20);
    };
    let get = |name: &[u8]| props.iter().find(|(k, _)| &k[..] == name).map(|(_, v)| v);
    if get(b"reduce_phase_only_1").is_some_and(|v| v.is_atom("true")) {
        return None;
    }
    match get(b"reduce_phase_batch_size") {
        None => Some(20),
        Some(Term::Int(n)) => Some((*n).max(1) as usize),
        // Not a number: larger than any, as in Erlang's term order.
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests;
