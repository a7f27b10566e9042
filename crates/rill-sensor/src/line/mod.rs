//! InfluxDB line protocol: one point a line,
//! `measurement[,tag=value...] field=value[,field=value...] [timestamp]`.
//!
//! As InfluxDB's parser: a measurement escapes commas and spaces with a
//! backslash; tag keys, tag values and field keys escape commas, equals
//! signs and spaces (field keys double quotes too); string field values
//! escape double quotes and backslashes; a backslash before anything else
//! is itself (so `\\` in a tag is two backslashes, and `\\ ` a backslash
//! and an escaped space). Field values
//! are floats (`1`, `-1.5e3`), integers (`1i`), unsigned integers (`1u`),
//! strings (`"..."`) or booleans (`t`, `T`, `true`, `True`, `TRUE` and
//! the same for false). A line starting with `#` is a comment; blank
//! lines and a `\r` before the newline are ignored. The timestamp is an
//! integer in the request's precision; a line without one takes the time
//! the request arrived.

use std::borrow::Cow;

mod fast;

/// A field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldValue<'a> {
    Float(f64),
    Int(i64),
    UInt(u64),
    Bool(bool),
    Str(Cow<'a, str>),
}

/// One parsed line.
#[derive(Clone, Debug, PartialEq)]
pub struct Point<'a> {
    pub measurement: Cow<'a, str>,
    /// In the order written.
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub fields: Vec<(Cow<'a, str>, FieldValue<'a>)>,
    /// In the request's precision; `None`: the time of arrival.
    pub timestamp: Option<i64>,
}

/// Why a line does not parse, in InfluxDB's words; the values quoted
/// are cut to 40 characters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("missing measurement")]
    MissingMeasurement,
    #[error("a tag without '=' (missing tag value)")]
    TagWithoutValue,
    #[error("a tag with an empty key or value")]
    EmptyTag,
    #[error("tag {tag:?} given twice")]
    TagTwice { tag: String },
    #[error("missing fields")]
    MissingFields,
    #[error("a field without '=' (missing field value)")]
    FieldWithoutEquals,
    #[error("a field with an empty key")]
    EmptyFieldKey,
    #[error("a field without a value")]
    MissingFieldValue,
    #[error("an unterminated string")]
    UnterminatedString,
    #[error("bad field value {found:?}")]
    BadFieldValue { found: String },
    #[error("bad integer {found:?} (out of range or not a number)")]
    BadInteger { found: String },
    #[error("bad unsigned integer {found:?}")]
    BadUnsigned { found: String },
    #[error("bad timestamp {found:?}")]
    BadTimestamp { found: String },
}

/// A line that does not parse: its number (from 1), why, and the start
/// of its text (at most 120 characters).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}: '{excerpt}'")]
pub struct LineError {
    pub line: usize,
    pub reason: ParseError,
    pub excerpt: String,
}

/// Parses every line of `body`: the points, and the lines that failed
/// (InfluxDB writes the good points of a request and reports the bad).
pub fn parse(body: &str) -> (Vec<Point<'_>>, Vec<LineError>) {
    let mut points = Vec::new();
    let mut errors = Vec::new();
    for (number, line, text) in lines(body) {
        match parse_line(text) {
            Ok(p) => points.push(p),
            Err(reason) => errors.push(error(number, line, reason)),
        }
    }
    (points, errors)
}

/// The lines of `body` to parse: their numbers (from 1), the lines
/// without a trailing `\r` (for errors), and their text to parse (without
/// leading blanks); blank lines and comments skipped.
pub fn lines(body: &str) -> impl Iterator<Item = (usize, &str, &str)> {
    body.split('\n').enumerate().filter_map(|(i, raw)| {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim_start_matches([' ', '\t']);
        (!trimmed.is_empty() && !trimmed.starts_with('#')).then_some((i + 1, line, trimmed))
    })
}

/// A line that does not parse, for [`parse_line`]'s reason.
pub fn error(number: usize, line: &str, reason: ParseError) -> LineError {
    LineError {
        line: number,
        reason,
        excerpt: cut(line, 120).into_owned(),
    }
}

/// A value for an error message: at most 40 characters of it.
fn short(v: &str) -> String {
    cut(v, 40).into_owned()
}

/// At most `n` characters of `v`, `...` marking a cut.
fn cut(v: &str, n: usize) -> Cow<'_, str> {
    match v.char_indices().nth(n) {
        Some((at, _)) => Cow::Owned(format!("{}...", &v[..at])),
        None => Cow::Borrowed(v),
    }
}

/// Splits at the first unescaped `stop` byte outside quotes (when
/// `quotes`); returns the part before it, the stop, the rest after it,
/// and whether the part held a backslash. A backslash escapes the next
/// byte when that byte is in `esc` (`None`: any byte), or inside quotes.
#[inline(always)]
fn take<'a>(
    s: &'a str,
    stops: &[u8],
    esc: Option<&[u8]>,
    quotes: bool,
) -> (&'a str, Option<u8>, &'a str, bool) {
    // Stops are one or two bytes: compared directly, not searched.
    let (s0, s1) = match stops {
        [a] => (*a, *a),
        [a, b] => (*a, *b),
        _ => unreachable!("one or two stop bytes"),
    };
    let b = s.as_bytes();
    let mut i = 0;
    let mut escaped = false;
    let mut in_quotes = false;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' {
            escaped = true;
            if i + 1 < b.len() && (in_quotes || esc.is_none_or(|e| e.contains(&b[i + 1]))) {
                i += 2;
                continue;
            }
        }
        if quotes && c == b'"' {
            in_quotes = !in_quotes;
        } else if !in_quotes && (c == s0 || c == s1) {
            return (&s[..i], Some(c), &s[i + 1..], escaped);
        }
        i += 1;
    }
    (s, None, "", escaped)
}

/// Removes the backslashes before `chars` (and only those).
fn unescape<'a>(s: &'a str, escaped: bool, chars: &[char]) -> Cow<'a, str> {
    if !escaped {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\\' {
            if let Some(&n) = it.peek() {
                if chars.contains(&n) {
                    out.push(n);
                    it.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    Cow::Owned(out)
}

const KEY_ESCAPES: &[char] = &[',', '=', ' '];
const FIELD_KEY_ESCAPES: &[char] = &[',', '=', ' ', '"'];

/// One line ([`lines`] gives them), or why it does not parse.
pub fn parse_line(line: &str) -> Result<Point<'_>, ParseError> {
    // Measurement: to the first unescaped comma or space.
    let (m, stop, mut rest, esc) = take(line, b", ", Some(b", "), false);
    if m.is_empty() {
        return Err(ParseError::MissingMeasurement);
    }
    let measurement = unescape(m, esc, &[',', ' ']);
    let mut tags = Vec::new();
    let mut stop = stop;
    while stop == Some(b',') {
        let (kv, s, r, esc) = take(rest, b", ", Some(b",= "), false);
        let (k, v) = split_eq(kv, Some(b",= ")).ok_or(ParseError::TagWithoutValue)?;
        if k.is_empty() || v.is_empty() {
            return Err(ParseError::EmptyTag);
        }
        let key = unescape(k, esc, KEY_ESCAPES);
        if tags.iter().any(|(t, _)| *t == key) {
            return Err(ParseError::TagTwice { tag: short(&key) });
        }
        tags.push((key, unescape(v, esc, KEY_ESCAPES)));
        stop = s;
        rest = r;
    }
    if stop != Some(b' ') {
        return Err(ParseError::MissingFields);
    }
    let mut fields = Vec::new();
    let timestamp = parse_fields(rest, &mut fields)?;
    Ok(Point {
        measurement,
        tags,
        fields,
        timestamp,
    })
}

/// A line's measurement and tags as written (to the first space no
/// backslash escapes) and the rest after that space; `None` if the line
/// has no such space. Two lines with the same series text have the same
/// measurement and tags, so a reader can parse that text once and, for
/// the lines after, only their fields ([`parse_fields`]).
pub fn split_series(line: &str) -> Option<(&str, &str)> {
    // Measurements escape `,` and ` `, tags `,`, `=` and ` `: both find
    // the same first unescaped space.
    match take(line, b" ", Some(b",= "), false) {
        (series, Some(_), rest, _) => Some((series, rest)),
        _ => None,
    }
}

/// The fields and timestamp of a line after its series text
/// ([`split_series`]): the fields go to `fields` (cleared first).
pub fn parse_fields<'a>(
    rest: &'a str,
    fields: &mut Vec<(Cow<'a, str>, FieldValue<'a>)>,
) -> Result<Option<i64>, ParseError> {
    fields.clear();
    let rest = rest.trim_start_matches(' ');
    let mut left = rest;
    loop {
        let (k, value, s, r) = match fast::field(left) {
            Some((k, v, s, r)) => (Cow::Borrowed(k), v, s, r),
            None => {
                let (kv, s, r, esc) = take(left, b", ", None, true);
                let (k, v) = split_eq(kv, None).ok_or(ParseError::FieldWithoutEquals)?;
                if k.is_empty() {
                    return Err(ParseError::EmptyFieldKey);
                }
                (unescape(k, esc, FIELD_KEY_ESCAPES), field_value(v)?, s, r)
            }
        };
        fields.push((k, value));
        left = r;
        if s != Some(b',') {
            break;
        }
    }
    let ts = left.trim_matches(' ');
    if let Some(t) = fast::timestamp(ts) {
        return Ok(Some(t));
    }
    if ts.is_empty() {
        Ok(None)
    } else if ts.starts_with('+') {
        Err(bad_timestamp(ts))
    } else {
        ts.parse::<i64>().map(Some).map_err(|_| bad_timestamp(ts))
    }
}

fn bad_timestamp(ts: &str) -> ParseError {
    ParseError::BadTimestamp { found: short(ts) }
}

/// Splits `k=v` at the first unescaped `=`.
fn split_eq<'a>(kv: &'a str, esc: Option<&[u8]>) -> Option<(&'a str, &'a str)> {
    let (k, stop, v, _) = take(kv, b"=", esc, false);
    stop.map(|_| (k, v))
}

/// Powers of ten exact in a double.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// The usual float field, `-?digits[.digits]` with at most 15 digits in
/// all, read in one pass: the digits as an integer below 10^15 (exact in
/// a double) divided by an exact power of ten, which IEEE division
/// rounds correctly, so the double is the one nearest the decimal, as
/// Rust's own parsing gives. `None` for anything else (the full parse).
fn plain_decimal(v: &[u8]) -> Option<f64> {
    let (neg, digits) = match v.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, v),
    };
    let (mut m, mut n, mut frac): (u64, usize, Option<usize>) = (0, 0, None);
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(c - b'0');
                n += 1;
                if n > 15 {
                    return None;
                }
                if let Some(f) = &mut frac {
                    *f += 1;
                }
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => return None,
        }
    }
    if n == 0 {
        return None;
    }
    let f = m as f64 / POW10[frac.unwrap_or(0)];
    Some(if neg { -f } else { f })
}

fn field_value(v: &str) -> Result<FieldValue<'_>, ParseError> {
    if let Some(inner) = v.strip_prefix('"') {
        // Closed by a quote no backslash escapes.
        let inner = inner
            .strip_suffix('"')
            .filter(|i| i.bytes().rev().take_while(|&c| c == b'\\').count() % 2 == 0)
            .ok_or(ParseError::UnterminatedString)?;
        return Ok(FieldValue::Str(unescape(
            inner,
            inner.contains('\\'),
            &['"', '\\'],
        )));
    }
    if let Some(f) = plain_decimal(v.as_bytes()) {
        return Ok(FieldValue::Float(f));
    }
    match v {
        "t" | "T" | "true" | "True" | "TRUE" => return Ok(FieldValue::Bool(true)),
        "f" | "F" | "false" | "False" | "FALSE" => return Ok(FieldValue::Bool(false)),
        "" => return Err(ParseError::MissingFieldValue),
        _ => {}
    }
    if v.starts_with('+') {
        return Err(ParseError::BadFieldValue { found: short(v) });
    }
    if let Some(n) = v.strip_suffix('i') {
        return n
            .parse()
            .map(FieldValue::Int)
            .map_err(|_| ParseError::BadInteger { found: short(v) });
    }
    if let Some(n) = v.strip_suffix('u') {
        return n
            .parse()
            .map(FieldValue::UInt)
            .map_err(|_| ParseError::BadUnsigned { found: short(v) });
    }
    // Rust's float syntax accepts "inf", "NaN" and "infinity": InfluxDB's
    // does not (a leading '+' was refused above).
    let plain = v
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'+' | b'e' | b'E'));
    match v.parse::<f64>() {
        Ok(f) if plain && f.is_finite() => Ok(FieldValue::Float(f)),
        _ => Err(ParseError::BadFieldValue { found: short(v) }),
    }
}

#[cfg(test)]
mod tests;
