//! The values that flow between phases: Erlang terms as Riak's phases see
//! them (binaries, numbers, atoms, lists, tuples, decoded JSON objects and
//! fetched objects), with Erlang's term order and exact equality.

use bytes::Bytes;
use rill_object::Object;
use std::cmp::Ordering;
use std::sync::Arc;

/// An object a map phase fetched, with the name it was fetched by.
#[derive(Debug, PartialEq)]
pub struct Fetched {
    pub bucket_type: Option<Vec<u8>>,
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub object: Object,
}

#[derive(Clone, Debug)]
pub enum Term {
    Int(i64),
    Float(f64),
    /// `true`, `false`, `null`, `undefined`, `none`, `error`, ...
    Atom(&'static str),
    Bin(Bytes),
    List(Vec<Term>),
    Tuple(Vec<Term>),
    /// A JSON object as mochijson2 decodes it (`{struct, [{Key, Value}]}`).
    Struct(Vec<(Bytes, Term)>),
    Object(Arc<Fetched>),
}

impl Term {
    pub fn bin(b: impl AsRef<[u8]>) -> Term {
        Term::Bin(Bytes::copy_from_slice(b.as_ref()))
    }

    pub fn pair(a: Term, b: Term) -> Term {
        Term::Tuple(vec![a, b])
    }

    /// `{error, notfound}`, what a map phase sees for a missing object.
    pub fn notfound() -> Term {
        Term::pair(Term::Atom("error"), Term::Atom("notfound"))
    }

    pub fn is_atom(&self, name: &str) -> bool {
        matches!(self, Term::Atom(a) if *a == name)
    }

    pub fn as_bin(&self) -> Option<&[u8]> {
        match self {
            Term::Bin(b) => Some(b),
            _ => None,
        }
    }

    /// A JSON value as mochijson2 decodes it: strings to binaries,
    /// objects to `{struct, ...}`, `true`/`false`/`null` to atoms.
    pub fn from_json(v: &serde_json::Value) -> Term {
        use serde_json::Value;
        match v {
            Value::Null => Term::Atom("null"),
            Value::Bool(true) => Term::Atom("true"),
            Value::Bool(false) => Term::Atom("false"),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Term::Int(i),
                None => Term::Float(n.as_f64().unwrap_or(f64::MAX)),
            },
            Value::String(s) => Term::bin(s),
            Value::Array(a) => Term::List(a.iter().map(Term::from_json).collect()),
            Value::Object(m) => Term::Struct(
                m.iter()
                    .map(|(k, v)| (Bytes::copy_from_slice(k.as_bytes()), Term::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Erlang's order of types.
    fn rank(&self) -> u8 {
        match self {
            Term::Int(_) | Term::Float(_) => 0,
            Term::Atom(_) => 1,
            Term::Tuple(_) | Term::Struct(_) | Term::Object(_) => 5,
            Term::List(_) => 7,
            Term::Bin(_) => 8,
        }
    }

    fn tuple_size(&self) -> usize {
        match self {
            Term::Tuple(t) => t.len(),
            Term::Struct(_) => 2,
            // {r_object, Bucket, Key, Contents, VClock, UpdateMeta, UpdateValue}
            Term::Object(_) => 7,
            _ => 0,
        }
    }
}

fn as_f64(t: &Term) -> f64 {
    match t {
        Term::Int(i) => *i as f64,
        Term::Float(f) => *f,
        _ => 0.0,
    }
}

/// Erlang's term order (`<`, `=<`, `lists:sort`): number < atom < tuple <
/// list < binary; numbers by value (1 == 1.0), tuples by size first,
/// lists and binaries element by element, a prefix first.
pub fn erlang_cmp(a: &Term, b: &Term) -> Ordering {
    compare(a, b, false)
}

/// Erlang's term order made total for exact equality (`=:=`): where the
/// order ties an integer with a float of the same value, the integer
/// comes first. Equal under this order means `=:=`.
pub fn exact_cmp(a: &Term, b: &Term) -> Ordering {
    compare(a, b, true)
}

pub fn exact_eq(a: &Term, b: &Term) -> bool {
    exact_cmp(a, b) == Ordering::Equal
}

fn compare(a: &Term, b: &Term, exact: bool) -> Ordering {
    let (ra, rb) = (a.rank(), b.rank());
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Term::Int(x), Term::Int(y)) => x.cmp(y),
        (Term::Int(_) | Term::Float(_), Term::Int(_) | Term::Float(_)) => {
            let o = as_f64(a).total_cmp(&as_f64(b));
            if o != Ordering::Equal || !exact {
                return o;
            }
            let float = |t: &Term| matches!(t, Term::Float(_));
            float(a).cmp(&float(b))
        }
        (Term::Atom(x), Term::Atom(y)) => x.cmp(y),
        (Term::Bin(x), Term::Bin(y)) => x.cmp(y),
        (Term::List(x), Term::List(y)) => seq(x.iter(), y.iter(), exact),
        (Term::Tuple(x), Term::Tuple(y)) => x
            .len()
            .cmp(&y.len())
            .then_with(|| seq(x.iter(), y.iter(), exact)),
        _ => {
            // Tuples of other kinds (decoded JSON objects, fetched
            // objects), compared as the Erlang tuples they are.
            let (sa, sb) = (a.tuple_size(), b.tuple_size());
            if sa != sb {
                return sa.cmp(&sb);
            }
            let (ea, eb) = (elements(a), elements(b));
            seq(ea.iter(), eb.iter(), exact)
        }
    }
}

fn seq<'a>(
    mut a: impl Iterator<Item = &'a Term>,
    mut b: impl Iterator<Item = &'a Term>,
    exact: bool,
) -> Ordering {
    loop {
        match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let o = compare(x, y, exact);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// A tuple's elements as Erlang holds them.
fn elements(t: &Term) -> Vec<Term> {
    match t {
        Term::Tuple(v) => v.clone(),
        Term::Struct(props) => vec![
            Term::Atom("struct"),
            Term::List(
                props
                    .iter()
                    .map(|(k, v)| Term::pair(Term::Bin(k.clone()), v.clone()))
                    .collect(),
            ),
        ],
        Term::Object(o) => vec![
            Term::Atom("r_object"),
            match &o.bucket_type {
                Some(t) => Term::pair(Term::bin(t), Term::bin(&o.bucket)),
                None => Term::bin(&o.bucket),
            },
            Term::bin(&o.key),
        ],
        _ => Vec::new(),
    }
}

/// The term as Erlang's `~p` would show it, cut at `limit` characters:
/// for error reports.
pub fn show(t: &Term, limit: usize) -> String {
    let mut s = String::new();
    write_term(t, &mut s, limit);
    if s.len() > limit {
        let mut cut = limit;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn write_term(t: &Term, s: &mut String, limit: usize) {
    if s.len() > limit {
        return;
    }
    let list = |s: &mut String, items: &[Term], open: char, close: char| {
        s.push(open);
        for (i, x) in items.iter().enumerate() {
            if s.len() > limit {
                break;
            }
            if i > 0 {
                s.push(',');
            }
            write_term(x, s, limit);
        }
        s.push(close);
    };
    match t {
        Term::Int(i) => s.push_str(&i.to_string()),
        Term::Float(f) => s.push_str(&crate::json::float_digits(*f)),
        Term::Atom(a) => s.push_str(a),
        Term::Bin(b) => {
            s.push_str("<<");
            // No more of a long binary than the limit can show.
            let b = &b[..b.len().min(limit + 1)];
            if !b.is_empty() && b.iter().all(|c| (0x20..0x7f).contains(c)) {
                s.push('"');
                for &c in b.iter() {
                    if c == b'"' || c == b'\\' {
                        s.push('\\');
                    }
                    s.push(c as char);
                }
                s.push('"');
            } else {
                for (i, c) in b.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&c.to_string());
                }
            }
            s.push_str(">>");
        }
        Term::List(items) => list(s, items, '[', ']'),
        Term::Tuple(items) => list(s, items, '{', '}'),
        Term::Struct(_) | Term::Object(_) => {
            let mut e = elements(t);
            if let Term::Object(_) = t {
                e.push(Term::Atom("..."));
            }
            list(s, &e, '{', '}')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_order_follows_erlang() {
        let ordered = [
            Term::Int(-5),
            Term::Float(1.5),
            Term::Int(2),
            Term::Atom("false"),
            Term::Atom("true"),
            Term::pair(Term::Int(9), Term::Int(9)),
            Term::Tuple(vec![Term::Int(1), Term::Int(1), Term::Int(1)]),
            Term::List(vec![]),
            Term::List(vec![Term::Int(1)]),
            Term::List(vec![Term::Int(1), Term::Int(0)]),
            Term::bin(""),
            Term::bin("a"),
            Term::bin("ab"),
            Term::bin("b"),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(erlang_cmp(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn one_equals_one_point_zero_but_not_exactly() {
        assert_eq!(
            erlang_cmp(&Term::Int(1), &Term::Float(1.0)),
            Ordering::Equal
        );
        assert!(!exact_eq(&Term::Int(1), &Term::Float(1.0)));
        assert!(exact_eq(
            &Term::List(vec![Term::bin("x")]),
            &Term::List(vec![Term::bin("x")])
        ));
    }

    #[test]
    fn show_is_erlang_like_and_bounded() {
        let t = Term::Tuple(vec![
            Term::notfound(),
            Term::pair(Term::bin("b"), Term::bin("k")),
        ]);
        assert_eq!(show(&t, 500), r#"{{error,notfound},{<<"b">>,<<"k">>}}"#);
        assert_eq!(show(&Term::bin([0, 1]), 500), "<<0,1>>");
        let long = Term::bin("x".repeat(1000));
        assert!(show(&long, 50).len() <= 53);
    }
}
