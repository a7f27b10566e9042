//! A MapReduce job as Riak KV's JSON describes it (`{"inputs": ...,
//! "query": [...], "timeout": ms}`), checked whole before anything runs.

use crate::builtins::{MapFun, ReduceFun};
use crate::filters::{parse_chain, Filter, FilterError};
use crate::term::Term;
use serde_json::Value;
use std::time::Duration;

/// Riak's default for a job's whole run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(60_000);

/// The longest a job may run, whatever it asks: an hour.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// The most phases a job may have (each phase hands its output to the
/// next, a call deeper; Riak sets no limit, jobs use a handful).
pub const MAX_PHASES: usize = 100;

/// The most key filters a job may have, nested ones included.
pub const MAX_FILTERS: usize = 1000;

#[derive(Debug)]
pub struct Job {
    pub inputs: Inputs,
    pub phases: Vec<Phase>,
    pub timeout: Duration,
}

#[derive(Debug)]
pub enum Inputs {
    /// Every key of a bucket, through key filters if any.
    Bucket {
        bucket_type: Option<Vec<u8>>,
        bucket: Vec<u8>,
        filters: Vec<Filter>,
    },
    /// Listed keys, each as the pipe carries it: `{B, K}`, `{{B, K}, KeyData}`
    /// or `{{{T, B}, K}, KeyData}`.
    Keys(Vec<Term>),
    /// The keys a secondary index query finds.
    Index {
        bucket_type: Option<Vec<u8>>,
        bucket: Vec<u8>,
        index: Vec<u8>,
        query: IndexQuery,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexQuery {
    Eq(Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
}

#[derive(Debug)]
pub struct Phase {
    pub kind: PhaseKind,
    /// Its results go to the client (by default only the last phase's).
    pub keep: bool,
}

#[derive(Debug)]
pub enum PhaseKind {
    Map(MapFun, Term),
    Reduce(ReduceFun, Term),
    /// Follows an object's links; `None` matches any bucket or tag.
    Link {
        bucket: Option<Vec<u8>>,
        tag: Option<Vec<u8>>,
    },
}

/// Why a job was refused before it ran.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The request is not a job (HTTP 400, plain text).
    #[error("{0}")]
    Parse(String),
    /// The input's key filters are refused (HTTP 400, plain text, a line).
    #[error("{0}\n")]
    KeyFilters(#[source] FilterError),
    /// A phase names something Rill does not run (HTTP 400 with
    /// `{"phase": N, "error": ...}`).
    #[error("Phase {0}: {1}")]
    Phase(usize, String),
}

fn parse_err(m: impl Into<String>) -> JobError {
    JobError::Parse(m.into())
}

const INPUT_FORMS: &str = "Valid formats are:\n\
  - a bucket: {\"inputs\":\"mybucket\"} or, in a bucket type, {\"inputs\":[\"mytype\",\"mybucket\"]}\n\
  - keys: {\"inputs\":[[\"mybucket\",\"mykey1\"], [\"mybucket\",\"mykey2\",\"keydata\"], [\"mybucket\",\"mykey3\",null,\"mytype\"]]}\n\
  - a bucket through key filters: {\"inputs\":{\"bucket\":\"mybucket\", \"key_filters\":[[\"matches\", \"foo.*\"]]}}\n\
  - an index, exact match: {\"inputs\":{\"bucket\":\"mybucket\", \"index\":\"myindex_bin\", \"key\":\"mykey\"}}\n\
  - an index range: {\"inputs\":{\"bucket\":\"mybucket\", \"index\":\"myindex_int\", \"start\":1, \"end\":9}}\n";

/// A job from the body of a request.
pub fn parse_job(body: &[u8]) -> Result<Job, JobError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| parse_err(format!("The request is not valid JSON: {e}\n")))?;
    let Value::Object(m) = &v else {
        return Err(parse_err(
            "The request must be a JSON object with \"inputs\" and \"query\"\n",
        ));
    };
    let (Some(inputs), Some(query)) = (m.get("inputs"), m.get("query")) else {
        return Err(parse_err(
            "The request must have both an \"inputs\" and a \"query\" field\n",
        ));
    };
    let timeout = match m.get("timeout").and_then(Value::as_f64) {
        Some(ms) if ms >= 1.0 => Duration::from_millis(ms.min(u32::MAX as f64) as u64),
        _ => DEFAULT_TIMEOUT,
    }
    .min(MAX_TIMEOUT);
    Ok(Job {
        inputs: parse_inputs(inputs)?,
        phases: parse_query(query)?,
        timeout,
    })
}

fn invalid_inputs(v: &Value) -> JobError {
    parse_err(format!(
        "Unrecognized format of \"inputs\" field:   {v}\n\n{INPUT_FORMS}"
    ))
}

fn bytes(v: &Value) -> Option<Vec<u8>> {
    v.as_str().map(|s| s.as_bytes().to_vec())
}

/// A struct input's `"bucket"`: a name, or `[type, name]`.
fn bucket_of(v: &Value) -> Option<(Option<Vec<u8>>, Vec<u8>)> {
    match v {
        Value::String(b) => Some((None, b.as_bytes().to_vec())),
        Value::Array(a) if a.len() == 2 => Some((Some(bytes(&a[0])?), bytes(&a[1])?)),
        _ => None,
    }
}

fn parse_inputs(v: &Value) -> Result<Inputs, JobError> {
    match v {
        Value::String(b) => Ok(Inputs::Bucket {
            bucket_type: None,
            bucket: b.as_bytes().to_vec(),
            filters: Vec::new(),
        }),
        // Two strings are a typed bucket, never one key.
        Value::Array(a) if a.len() == 2 && a.iter().all(Value::is_string) => Ok(Inputs::Bucket {
            bucket_type: bytes(&a[0]),
            bucket: bytes(&a[1]).unwrap_or_default(),
            filters: Vec::new(),
        }),
        Value::Array(a) if a.is_empty() => Err(parse_err("No inputs were given.\n")),
        Value::Array(a) => a
            .iter()
            .map(|x| key_input(x).ok_or_else(|| invalid_inputs(x)))
            .collect::<Result<_, _>>()
            .map(Inputs::Keys),
        Value::Object(m) => {
            let has = |k: &str| m.contains_key(k);
            if has("module") && has("function") && has("arg") {
                return Err(parse_err(
                    "Inputs from an Erlang module and function are not supported: \
                     give a bucket, keys, key filters or an index query\n",
                ));
            }
            if (has("bucket") || has("index")) && has("query") {
                return Err(parse_err("search not enabled: Rill has no Riak Search\n"));
            }
            let (bucket_type, bucket) = m
                .get("bucket")
                .and_then(bucket_of)
                .ok_or_else(|| invalid_inputs(v))?;
            if let Some(index) = m.get("index") {
                let index = bytes(index).ok_or_else(|| invalid_inputs(v))?;
                let query = index_query(&index, m.get("key"), m.get("start"), m.get("end"))
                    .ok_or_else(|| invalid_inputs(v))??;
                return Ok(Inputs::Index {
                    bucket_type,
                    bucket,
                    index,
                    query,
                });
            }
            match m.get("key_filters") {
                Some(f) if f.as_array().is_some_and(|a| !a.is_empty()) => Ok(Inputs::Bucket {
                    bucket_type,
                    bucket,
                    filters: parse_chain(f).map_err(JobError::KeyFilters)?,
                }),
                _ => Err(invalid_inputs(v)),
            }
        }
        _ => Err(invalid_inputs(v)),
    }
}

/// `[B, K]`, `[B, K, KeyData]` or `[B, K, KeyData, Type]`.
fn key_input(v: &Value) -> Option<Term> {
    let a = v.as_array()?;
    let (b, k) = (
        Term::bin(a.first()?.as_str()?),
        Term::bin(a.get(1)?.as_str()?),
    );
    Some(match a.len() {
        2 => Term::pair(b, k),
        3 => Term::pair(Term::pair(b, k), Term::from_json(&a[2])),
        4 => Term::pair(
            Term::pair(Term::pair(Term::bin(a[3].as_str()?), b), k),
            Term::from_json(&a[2]),
        ),
        _ => return None,
    })
}

/// An index input's terms, checked as Riak's `parse_fields` checks them:
/// `_int` terms are integers or their decimal text, `_bin` terms strings;
/// a range whose ends are equal is an exact match, one given backwards is
/// turned round.
fn index_query(
    index: &[u8],
    key: Option<&Value>,
    start: Option<&Value>,
    end: Option<&Value>,
) -> Option<Result<IndexQuery, JobError>> {
    let field = String::from_utf8_lossy(index).to_ascii_lowercase();
    let int = field.ends_with("_int");
    if !int && !field.ends_with("_bin") && field != "$key" && field != "$bucket" {
        return Some(Err(parse_err(format!(
            "{{unknown_field_type,{field}}}: an index name ends in _bin or _int, or is $key or $bucket\n"
        ))));
    }
    let term = |v: &Value| -> Result<Vec<u8>, JobError> {
        let bad = || {
            parse_err(format!(
                "{{field_parsing_failed,{{{field},{v}}}}}: {} index terms must be {}\n",
                field,
                if int { "integers" } else { "strings" }
            ))
        };
        match v {
            Value::Number(n) if int && n.is_i64() => Ok(n.to_string().into_bytes()),
            Value::String(s) if int => crate::filters::parse_int(s.as_bytes())
                .map(|i| i.to_string().into_bytes())
                .ok_or_else(bad),
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            _ => Err(bad()),
        }
    };
    if let Some(k) = key {
        return Some(term(k).map(IndexQuery::Eq));
    }
    let (s, e) = (start?, end?);
    Some((|| {
        let (a, b) = (term(s)?, term(e)?);
        let ordered = if int {
            let n = |x: &[u8]| crate::filters::parse_int(x).unwrap_or(0);
            n(&a) <= n(&b)
        } else {
            a <= b
        };
        Ok(match (a == b, ordered) {
            (true, _) => IndexQuery::Eq(a),
            (false, true) => IndexQuery::Range(a, b),
            (false, false) => IndexQuery::Range(b, a),
        })
    })())
}

fn parse_query(v: &Value) -> Result<Vec<Phase>, JobError> {
    let Value::Array(steps) = v else {
        return Err(parse_err(format!(
            "The value of the \"query\" field was not a list:\n   {v}\n"
        )));
    };
    if steps.len() > MAX_PHASES {
        return Err(parse_err(format!(
            "A job may have at most {MAX_PHASES} phases; this one has {}\n",
            steps.len()
        )));
    }
    let last = steps.len().saturating_sub(1);
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| parse_phase(i, s, i == last))
        .collect()
}

fn unrecognized_phase(v: &Value) -> JobError {
    parse_err(format!(
        "Unrecognized format of query phase:\n   {v}\n\nValid formats are:\n   \
         {{\"map\":{{...spec...}}}}\n   {{\"reduce\":{{...spec...}}}}\n   {{\"link\":{{...spec...}}}}\n"
    ))
}

fn parse_phase(i: usize, v: &Value, last: bool) -> Result<Phase, JobError> {
    let Some(m) = v.as_object().filter(|m| m.len() == 1) else {
        return Err(unrecognized_phase(v));
    };
    let (kind, spec) = m.iter().next().expect("one entry");
    let Some(spec) = spec.as_object() else {
        return Err(unrecognized_phase(v));
    };
    let keep = match spec.get("keep") {
        None => last,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(parse_err(format!(
                "The \"keep\" field was not a boolean value in:\n   {v}\n"
            )))
        }
    };
    let arg = spec.get("arg").map_or(Term::Atom("none"), Term::from_json);
    let kind = match kind.as_str() {
        "link" => {
            let field = |name: &str| -> Result<Option<Vec<u8>>, JobError> {
                match spec.get(name) {
                    None => Ok(None),
                    Some(Value::String(s)) if s == "_" => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.as_bytes().to_vec())),
                    Some(_) => Err(parse_err(format!(
                        "Invalid link step specification:\n   {v}\n\n \"bucket\" and \"tag\" fields must have string values.\n"
                    ))),
                }
            };
            PhaseKind::Link {
                bucket: field("bucket")?,
                tag: field("tag")?,
            }
        }
        "map" | "reduce" => {
            let f = function(i, v, spec)?;
            if kind == "map" {
                PhaseKind::Map(
                    MapFun::named(&f).ok_or_else(|| not_exported(i, &f, 3))?,
                    arg,
                )
            } else {
                PhaseKind::Reduce(
                    ReduceFun::named(&f).ok_or_else(|| not_exported(i, &f, 2))?,
                    arg,
                )
            }
        }
        _ => return Err(unrecognized_phase(v)),
    };
    Ok(Phase { kind, keep })
}

fn not_exported(i: usize, f: &str, arity: u8) -> JobError {
    JobError::Phase(
        i,
        format!(
            "riak_kv_mapreduce:{f}/{arity} is not exported; the built-in phases are \
             map_identity, map_object_value and map_object_value_list (map), \
             reduce_identity, reduce_set_union, reduce_sort, reduce_string_to_integer, \
             reduce_sum, reduce_plist_sum and reduce_count_inputs (reduce)"
        ),
    )
}

/// The function an Erlang phase names (only `riak_kv_mapreduce`'s).
fn function(
    i: usize,
    v: &Value,
    spec: &serde_json::Map<String, Value>,
) -> Result<String, JobError> {
    let language = match spec.get("language") {
        None => {
            return Err(parse_err(format!(
                "No \"language\" was specified for the phase:\n   {v}\n"
            )))
        }
        Some(l) => l.as_str().unwrap_or(""),
    };
    match language {
        "erlang" => {}
        "javascript" => {
            return Err(JobError::Phase(
                i,
                "JavaScript phases are not supported: Riak KV 3 removed JavaScript \
                 MapReduce. Use the Erlang functions of riak_kv_mapreduce \
                 (\"language\":\"erlang\",\"module\":\"riak_kv_mapreduce\",\"function\":...)"
                    .into(),
            ))
        }
        _ => {
            return Err(parse_err(format!(
                "Unknown language {} in phase:\n   {v}\n",
                spec["language"]
            )))
        }
    }
    if spec.contains_key("source") || (spec.contains_key("bucket") && spec.contains_key("key")) {
        return Err(JobError::Phase(
            i,
            "[worker_startup_failed]: Erlang source phases are not allowed \
             (as in Riak with allow_strfun off); use the functions of riak_kv_mapreduce"
                .into(),
        ));
    }
    let (Some(module), Some(function)) = (
        spec.get("module").and_then(Value::as_str),
        spec.get("function").and_then(Value::as_str),
    ) else {
        return Err(parse_err(format!(
            "No function specified in Erlang phase:\n   {v}\n\nFunctions may be specified by \
             \"module\" and \"function\" fields, naming a function of riak_kv_mapreduce\n"
        )));
    };
    if module != "riak_kv_mapreduce" {
        return Err(JobError::Phase(
            i,
            format!(
                "invalid module named in PhaseSpec function: {module} is not available; \
                 Rill runs the functions of riak_kv_mapreduce"
            ),
        ));
    }
    Ok(function.to_string())
}

#[cfg(test)]
mod tests;
