//! Key filters (Riak KV's `riak_kv_mapred_filters`): a chain of
//! transforms and predicates run left to right over each key of a
//! bucket input; a key is kept when the chain ends in exactly `true`.
//!
//! Every name is checked when the job is parsed, nested ones too (Riak
//! finds a bad name inside `and`/`or`/`not` only while folding a vnode).
//! Where Riak's `to_upper`, `to_lower` and `urldecode` return Erlang
//! character lists, which then never equal a string argument, these
//! return binaries, so `[["to_lower"], ["eq", "abc"]]` matches "ABC".

use crate::term::{erlang_cmp, exact_eq, Term};
use serde_json::Value;
use std::cmp::Ordering;

#[derive(Debug)]
pub enum Filter {
    IntToString,
    StringToInt,
    FloatToString,
    StringToFloat,
    ToUpper,
    ToLower,
    Tokenize(Vec<u8>, usize),
    UrlDecode,
    Compare(Ordering, bool, Term),
    Between(Term, Term, bool),
    Matches(regex::bytes::Regex),
    Eq(Term),
    Neq(Term),
    SetMember(Vec<Vec<u8>>),
    SimilarTo(Vec<u8>, usize),
    StartsWith(Vec<u8>),
    EndsWith(Vec<u8>),
    And(Vec<Vec<Filter>>),
    Or(Vec<Vec<Filter>>),
    Not(Vec<Filter>),
}

/// Why a chain of key filters is refused when the job is parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    #[error("key filters must be a list of filters, not {found}")]
    NotAList { found: Value },
    #[error("a job may have at most {} key filters", crate::job::MAX_FILTERS)]
    TooMany,
    #[error("a key filter is a list [name, args...], not {found}")]
    NotAFilter { found: Value },
    #[error("unknown key filter \"{name}\"; the filters are {NAMES}")]
    Unknown { name: String },
    #[error("key filter \"{filter}\" needs {needed} argument(s)")]
    MissingArgument { filter: String, needed: usize },
    #[error("key filter \"{filter}\" takes a string, not {found}")]
    NotAString { filter: String, found: Value },
    #[error("key filter \"{filter}\" needs at least one filter list")]
    NoFilterList { filter: String },
    #[error("key filter \"tokenize\" takes a token number from 1")]
    BadTokenNumber { found: Value },
    #[error("key filter \"between\" takes true or false as its third argument, not {found}")]
    BadInclusive { found: Value },
    #[error("key filter \"matches\" takes a regular expression")]
    NotARegex { found: Value },
    /// The expression does not compile, or would pass the size allowed.
    #[error("key filter \"matches\": {0}")]
    BadRegex(#[source] regex::Error),
    #[error("key filter \"similar_to\" takes a string of at most 1024 bytes")]
    SimilarToTooLong { len_bytes: usize },
    #[error("key filter \"similar_to\" takes a distance as its second argument")]
    NoDistance { found: Value },
}

/// Why a chain failed on a key: Riak fails the job too. Terms are shown
/// as the client sees them (at most 100 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// A transform given a value it cannot take (a key that is not a
    /// number for `string_to_int`); `filter` names it, with what it was
    /// asked where that helps.
    #[error("key filter {filter} cannot apply to {value}")]
    CannotApply { filter: String, value: String },
    #[error("a filter list inside and/or/not must end in a predicate; it gave {gave}")]
    NotAPredicate { gave: String },
}

const NAMES: &str = "int_to_string, string_to_int, float_to_string, string_to_float, \
to_upper, to_lower, tokenize, urldecode, greater_than, less_than, greater_than_eq, \
less_than_eq, between, matches, eq, neq, set_member, similar_to, starts_with, ends_with, \
and, or, not";

/// A chain of filters from its JSON form, `[["tokenize", "-", 1], ["eq", "x"]]`,
/// with at most `MAX_FILTERS` filters in all.
pub fn parse_chain(v: &Value) -> Result<Vec<Filter>, FilterError> {
    let mut budget = crate::job::MAX_FILTERS;
    chain(v, &mut budget)
}

fn chain(v: &Value, budget: &mut usize) -> Result<Vec<Filter>, FilterError> {
    let Some(items) = v.as_array() else {
        return Err(FilterError::NotAList { found: v.clone() });
    };
    items.iter().map(|f| parse_filter(f, budget)).collect()
}

/// What one `matches` expression may take once compiled.
const REGEX_BYTES: usize = 256 << 10;

fn arg<'a>(name: &str, args: &'a [Value], i: usize) -> Result<&'a Value, FilterError> {
    args.get(i).ok_or_else(|| FilterError::MissingArgument {
        filter: name.to_string(),
        needed: i + 1,
    })
}

fn string_arg(name: &str, v: &Value) -> Result<Vec<u8>, FilterError> {
    to_string(&Term::from_json(v)).ok_or_else(|| FilterError::NotAString {
        filter: name.to_string(),
        found: v.clone(),
    })
}

fn parse_filter(v: &Value, budget: &mut usize) -> Result<Filter, FilterError> {
    if *budget == 0 {
        return Err(FilterError::TooMany);
    }
    *budget -= 1;
    let bad = || FilterError::NotAFilter { found: v.clone() };
    let items = v.as_array().ok_or_else(bad)?;
    let name = items.first().and_then(Value::as_str).ok_or_else(bad)?;
    let args = &items[1..];
    let chains = |args: &[Value]| -> Result<Vec<Vec<Filter>>, FilterError> {
        if args.is_empty() {
            return Err(FilterError::NoFilterList {
                filter: name.to_string(),
            });
        }
        args.iter().map(parse_chain).collect()
    };
    let cmp = |o: Ordering, or_equal: bool| -> Result<Filter, FilterError> {
        Ok(Filter::Compare(
            o,
            or_equal,
            Term::from_json(arg(name, args, 0)?),
        ))
    };
    Ok(match name {
        "int_to_string" => Filter::IntToString,
        "string_to_int" => Filter::StringToInt,
        "float_to_string" => Filter::FloatToString,
        "string_to_float" => Filter::StringToFloat,
        "to_upper" => Filter::ToUpper,
        "to_lower" => Filter::ToLower,
        "urldecode" => Filter::UrlDecode,
        "tokenize" => {
            let seps = string_arg(name, arg(name, args, 0)?)?;
            let n = arg(name, args, 1)?;
            let n = n
                .as_u64()
                .filter(|n| *n >= 1)
                .ok_or_else(|| FilterError::BadTokenNumber { found: n.clone() })?;
            Filter::Tokenize(seps, n as usize)
        }
        "greater_than" => cmp(Ordering::Greater, false)?,
        "less_than" => cmp(Ordering::Less, false)?,
        "greater_than_eq" => cmp(Ordering::Greater, true)?,
        "less_than_eq" => cmp(Ordering::Less, true)?,
        "between" => {
            let inclusive = match args.get(2) {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(x) => return Err(FilterError::BadInclusive { found: x.clone() }),
            };
            Filter::Between(
                Term::from_json(arg(name, args, 0)?),
                Term::from_json(arg(name, args, 1)?),
                inclusive,
            )
        }
        "matches" => {
            let re = arg(name, args, 0)?;
            let re = re
                .as_str()
                .ok_or_else(|| FilterError::NotARegex { found: re.clone() })?;
            Filter::Matches(
                regex::bytes::RegexBuilder::new(re)
                    .size_limit(REGEX_BYTES)
                    .dfa_size_limit(REGEX_BYTES)
                    .build()
                    .map_err(FilterError::BadRegex)?,
            )
        }
        "eq" => Filter::Eq(Term::from_json(arg(name, args, 0)?)),
        "neq" => Filter::Neq(Term::from_json(arg(name, args, 0)?)),
        "set_member" => Filter::SetMember(
            args.iter()
                .map(|a| string_arg(name, a))
                .collect::<Result<_, _>>()?,
        ),
        "similar_to" => {
            let s = string_arg(name, arg(name, args, 0)?)?;
            if s.len() > 1024 {
                return Err(FilterError::SimilarToTooLong { len_bytes: s.len() });
            }
            let d = arg(name, args, 1)?;
            let d = d
                .as_u64()
                .ok_or_else(|| FilterError::NoDistance { found: d.clone() })?;
            Filter::SimilarTo(s, d as usize)
        }
        "starts_with" => Filter::StartsWith(string_arg(name, arg(name, args, 0)?)?),
        "ends_with" => Filter::EndsWith(string_arg(name, arg(name, args, 0)?)?),
        "and" => Filter::And(chains(args)?),
        "or" => Filter::Or(chains(args)?),
        "not" => Filter::Not(chains(args)?.swap_remove(0)),
        other => {
            return Err(FilterError::Unknown {
                name: other.to_string(),
            })
        }
    })
}

/// Erlang's `to_string` of a filter value: a binary's bytes, a number's
/// digits.
fn to_string(t: &Term) -> Option<Vec<u8>> {
    match t {
        Term::Bin(b) => Some(b.to_vec()),
        Term::Int(i) => Some(i.to_string().into_bytes()),
        Term::Float(f) => Some(erlang_float_to_list(*f).into_bytes()),
        Term::Atom(a) => Some(a.as_bytes().to_vec()),
        _ => None,
    }
}

/// `float_to_list/1`: 20 decimals in scientific form, `1.50000000000000000000e+00`.
fn erlang_float_to_list(f: f64) -> String {
    let s = format!("{f:.20e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// Runs a chain over a key; `Ok(true)` keeps it. A filter that cannot
/// apply to its value (a key that is not a number for `string_to_int`)
/// is an error naming the filter and the value: Riak fails the job too.
pub fn keeps(chain: &[Filter], key: &[u8]) -> Result<bool, ApplyError> {
    Ok(run(chain, Term::bin(key))?.is_atom("true"))
}

fn run(chain: &[Filter], mut v: Term) -> Result<Term, ApplyError> {
    for f in chain {
        v = apply(f, v)?;
    }
    Ok(v)
}

fn boolean(chain: &[Filter], v: &Term) -> Result<bool, ApplyError> {
    let r = run(chain, v.clone())?;
    match r {
        Term::Atom("true") => Ok(true),
        Term::Atom("false") => Ok(false),
        other => Err(ApplyError::NotAPredicate {
            gave: crate::term::show(&other, 100),
        }),
    }
}

fn truth(b: bool) -> Term {
    Term::Atom(if b { "true" } else { "false" })
}

fn apply(f: &Filter, v: Term) -> Result<Term, ApplyError> {
    let fail = |what: &str| {
        Err(ApplyError::CannotApply {
            filter: what.to_string(),
            value: crate::term::show(&v, 100),
        })
    };
    let text = |v: &Term| to_string(v);
    Ok(match f {
        Filter::IntToString => match v {
            Term::Int(i) => Term::bin(i.to_string()),
            _ => return fail("int_to_string"),
        },
        Filter::StringToInt => match text(&v).as_deref().and_then(parse_int) {
            Some(i) => Term::Int(i),
            None => return fail("string_to_int"),
        },
        Filter::FloatToString => match v {
            Term::Float(x) => Term::bin(erlang_float_to_list(x)),
            _ => return fail("float_to_string"),
        },
        Filter::StringToFloat => match text(&v).as_deref().and_then(parse_float) {
            Some(x) => Term::Float(x),
            None => return fail("string_to_float"),
        },
        Filter::ToUpper | Filter::ToLower => {
            let Some(s) = text(&v) else {
                return fail("to_upper/to_lower");
            };
            let upper = matches!(f, Filter::ToUpper);
            Term::bin(
                s.iter()
                    .map(|&c| latin1_case(c, upper))
                    .collect::<Vec<u8>>(),
            )
        }
        Filter::Tokenize(seps, n) => {
            let Some(s) = text(&v) else {
                return fail("tokenize");
            };
            match s
                .split(|c| seps.contains(c))
                .filter(|t| !t.is_empty())
                .nth(n - 1)
            {
                Some(t) => Term::bin(t),
                None => {
                    return fail(&format!(
                        "tokenize (token {n} of a split on {:?})",
                        String::from_utf8_lossy(seps)
                    ))
                }
            }
        }
        Filter::UrlDecode => match text(&v) {
            Some(s) => Term::bin(url_decode(&s)),
            None => return fail("urldecode"),
        },
        Filter::Compare(o, or_equal, x) => {
            let c = erlang_cmp(&v, x);
            truth(c == *o || (*or_equal && c == Ordering::Equal))
        }
        Filter::Between(lo, hi, inclusive) => {
            let (a, b) = (erlang_cmp(&v, lo), erlang_cmp(&v, hi));
            truth(if *inclusive {
                a != Ordering::Less && b != Ordering::Greater
            } else {
                a == Ordering::Greater && b == Ordering::Less
            })
        }
        Filter::Matches(re) => match &v {
            Term::Bin(b) => truth(re.is_match(b)),
            _ => return fail("matches"),
        },
        Filter::Eq(x) => truth(exact_eq(&v, x)),
        Filter::Neq(x) => truth(!exact_eq(&v, x)),
        Filter::SetMember(set) => match text(&v) {
            Some(s) => truth(set.contains(&s)),
            None => return fail("set_member"),
        },
        Filter::SimilarTo(s, max) => match text(&v) {
            Some(t) => truth(within_distance(&t, s, *max)),
            None => return fail("similar_to"),
        },
        Filter::StartsWith(p) => match text(&v) {
            Some(t) => truth(t.starts_with(p)),
            None => return fail("starts_with"),
        },
        Filter::EndsWith(p) => match text(&v) {
            Some(t) => truth(t.ends_with(p)),
            None => return fail("ends_with"),
        },
        Filter::And(chains) => {
            for c in chains {
                if !boolean(c, &v)? {
                    return Ok(truth(false));
                }
            }
            truth(true)
        }
        Filter::Or(chains) => {
            for c in chains {
                if boolean(c, &v)? {
                    return Ok(truth(true));
                }
            }
            truth(false)
        }
        Filter::Not(chain) => truth(!boolean(chain, &v)?),
    })
}

/// `list_to_integer/1`: an optional sign, then decimal digits.
pub fn parse_int(s: &[u8]) -> Option<i64> {
    let body = match s.first() {
        Some(b'+' | b'-') => &s[1..],
        _ => s,
    };
    if body.is_empty() || !body.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// `list_to_float/1`: digits, a point, digits, an optional exponent.
fn parse_float(s: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(s).ok()?;
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.')?;
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return None;
    }
    if let Some(e) = exp {
        if !digits(e.strip_prefix(['+', '-']).unwrap_or(e)) {
            return None;
        }
    }
    s.parse().ok()
}

fn latin1_case(c: u8, upper: bool) -> u8 {
    if upper {
        match c {
            b'a'..=b'z' | 0xe0..=0xf6 | 0xf8..=0xfe => c - 32,
            _ => c,
        }
    } else {
        match c {
            b'A'..=b'Z' | 0xc0..=0xd6 | 0xd8..=0xde => c + 32,
            _ => c,
        }
    }
}

/// A query-string value's decoding: `+` is a space, `%XX` a byte, and
/// the value ends at the first `&` or `;`.
fn url_decode(s: &[u8]) -> Vec<u8> {
    let end = s
        .iter()
        .position(|c| *c == b'&' || *c == b';')
        .unwrap_or(s.len());
    let s = &s[..end];
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                s.get(i + 1).copied().and_then(hex),
                s.get(i + 2).copied().and_then(hex),
            ) {
                (Some(a), Some(b)) => {
                    out.push((a * 16 + b) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// Whether the edit distance of `a` and `b` is at most `max`: lengths
/// further apart than that answer at once, else two rows of the table.
fn within_distance(a: &[u8], b: &[u8], max: usize) -> bool {
    if a.len().abs_diff(b.len()) > max {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        if cur.iter().min().is_some_and(|m| *m > max) {
            return false;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()] <= max
}

#[cfg(test)]
mod tests;
