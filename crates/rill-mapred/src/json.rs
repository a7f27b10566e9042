//! Results to JSON as Riak's encoder (mochijson2) writes them: binaries
//! as strings, atoms other than `true`/`false`/`null` as strings, a list
//! whose first element is a `{Key, Value}` pair as an object (so
//! `reduce_plist_sum` answers `{"a":3}`), floats in their shortest
//! round-trip digits. Terms JSON cannot carry (whole objects, other
//! tuples, bytes that are not UTF-8) are an error naming the term.

use crate::term::{show, Term};

/// A term with no JSON form: what it is, and the term as shown to the
/// client (at most 200 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} has no JSON form: {term}")]
pub struct EncodeError {
    pub what: &'static str,
    pub term: String,
}

fn bad(what: &'static str, t: &Term) -> EncodeError {
    EncodeError {
        what,
        term: show(t, 200),
    }
}

/// One batch of a phase's results as a JSON array (or object, by the
/// pair rule above).
pub fn encode(items: &[Term]) -> Result<String, EncodeError> {
    let mut out = String::new();
    list(items, &mut out)?;
    Ok(out)
}

pub fn encode_term(t: &Term) -> Result<String, EncodeError> {
    let mut out = String::new();
    term(t, &mut out)?;
    Ok(out)
}

fn string(b: &[u8], t: &Term, out: &mut String) -> Result<(), EncodeError> {
    let s = std::str::from_utf8(b).map_err(|_| bad("a value that is not UTF-8 text", t))?;
    out.push_str(&serde_json::Value::from(s).to_string());
    Ok(())
}

fn key_of(t: &Term) -> Option<&Term> {
    match t {
        Term::Tuple(p) if p.len() == 2 => match &p[0] {
            Term::Atom(a) if matches!(*a, "struct" | "array" | "json") => None,
            k => Some(k),
        },
        _ => None,
    }
}

fn list(items: &[Term], out: &mut String) -> Result<(), EncodeError> {
    if items.first().and_then(key_of).is_some() {
        out.push('{');
        for (i, p) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let Term::Tuple(kv) = p else {
                return Err(bad("an element among {Key, Value} pairs", p));
            };
            if kv.len() != 2 {
                return Err(bad("an element among {Key, Value} pairs", p));
            }
            match &kv[0] {
                Term::Bin(b) => string(b, &kv[0], out)?,
                Term::Atom(a) => string(a.as_bytes(), &kv[0], out)?,
                Term::Int(n) => out.push_str(&format!("\"{n}\"")),
                k => return Err(bad("an object key", k)),
            }
            out.push(':');
            term(&kv[1], out)?;
        }
        out.push('}');
        return Ok(());
    }
    out.push('[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        term(x, out)?;
    }
    out.push(']');
    Ok(())
}

fn term(t: &Term, out: &mut String) -> Result<(), EncodeError> {
    match t {
        Term::Int(n) => out.push_str(&n.to_string()),
        Term::Float(f) => out.push_str(&float_digits(*f)),
        Term::Atom(a) if matches!(*a, "true" | "false" | "null") => out.push_str(a),
        Term::Atom(a) => string(a.as_bytes(), t, out)?,
        Term::Bin(b) => string(b, t, out)?,
        Term::List(items) => list(items, out)?,
        Term::Struct(props) => {
            out.push('{');
            for (i, (k, v)) in props.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, t, out)?;
                out.push(':');
                term(v, out)?;
            }
            out.push('}');
        }
        Term::Tuple(_) => return Err(bad("a tuple", t)),
        Term::Object(_) => {
            return Err(bad(
                "a whole object (as map_identity returns; map_object_value gives its value)",
                t,
            ))
        }
    }
    Ok(())
}

/// A float as mochinum writes it: the shortest digits that read back
/// as the same float, fixed-point when the exponent is small
/// (`100000.0`, `0.001`), `1.0e+6` / `1.0e-7` otherwise.
pub fn float_digits(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    if !f.is_finite() {
        // JSON has no form for these; Erlang floats never hold them.
        return "null".into();
    }
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let place = exp.parse::<i64>().unwrap_or(0) + 1;
    let l = digits.len() as i64;
    let body = if place > 0 {
        let n = place - l;
        if n == 0 {
            format!("{digits}.0")
        } else if n < 0 {
            let (a, b) = digits.split_at((l + n) as usize);
            format!("{a}.{b}")
        } else if n < 6 {
            format!("{digits}{}.0", "0".repeat(n as usize))
        } else {
            exp_form(place, &digits)
        }
    } else if place == 0 {
        format!("0.{digits}")
    } else if place > -6 {
        format!("0.{}{digits}", "0".repeat(place.unsigned_abs() as usize))
    } else {
        exp_form(place, &digits)
    };
    if f < 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

fn exp_form(place: i64, digits: &str) -> String {
    let (first, rest) = digits.split_at(1);
    let rest = if rest.is_empty() { "0" } else { rest };
    let sign = if place < 0 { '-' } else { '+' };
    format!("{first}.{rest}e{sign}{}", (place - 1).abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_mochinum() {
        for (f, s) in [
            (0.0, "0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (100000.0, "100000.0"),
            (1.0e6, "1.0e+6"),
            (0.001, "0.001"),
            (1.0e-7, "1.0e-7"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (123.456, "123.456"),
            (1.25e20, "1.25e+20"),
        ] {
            assert_eq!(float_digits(f), s, "{f}");
            assert_eq!(s.parse::<f64>().unwrap(), f);
        }
    }

    #[test]
    fn encodes_as_mochijson2() {
        let t = vec![
            Term::bin("v"),
            Term::Int(3),
            Term::Atom("undefined"),
            Term::Atom("null"),
            Term::List(vec![]),
        ];
        assert_eq!(encode(&t).unwrap(), r#"["v",3,"undefined",null,[]]"#);
        let pairs = vec![
            Term::pair(Term::bin("a"), Term::Int(3)),
            Term::pair(Term::Atom("b"), Term::Float(0.5)),
        ];
        assert_eq!(encode(&pairs).unwrap(), r#"{"a":3,"b":0.5}"#);
        assert!(encode(&[Term::bin("x"), Term::notfound()]).is_err());
        assert!(encode(&[Term::bin([0xff])]).is_err());
        assert_eq!(encode(&[Term::bin("é\"\n")]).unwrap(), "[\"é\\\"\\n\"]");
    }
}
