//! Small pieces of HTTP: percent-decoding, query strings, dates,
//! responses, quorum parameters.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use rill_node::{KvError, Quorum, QuorumError};
use std::collections::HashMap;

pub type Query = HashMap<String, String>;

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A `%` not followed by two hex digits, in `text`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad percent-encoding in {text:?}")]
pub struct BadPercentEncoding {
    pub text: String,
}

/// `%XX` decoded and `+` as a space (mochiweb's unquote).
pub fn percent_decode(s: &str) -> Result<Vec<u8>, BadPercentEncoding> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (Some(h), Some(l)) = (
                    b.get(i + 1).and_then(|c| hex(*c)),
                    b.get(i + 2).and_then(|c| hex(*c)),
                ) else {
                    return Err(BadPercentEncoding {
                        text: s.to_string(),
                    });
                };
                out.push(h * 16 + l);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// mochiweb's `unquote` as Riak applies it to `Link` headers: `%XX`
/// decoded, `+` as a space, and a `%` not followed by two hex digits
/// kept as it is (a tag such as `tag2!@#%^&*)`).
pub fn percent_decode_lenient(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
            (b'+', ..) => out.push(b' '),
            (c, ..) => out.push(c),
        }
        i += 1;
    }
    out
}

pub fn decode_segment(s: &str) -> Result<Vec<u8>, BadPercentEncoding> {
    percent_decode(s)
}

/// Percent-encodes a name for a URL path (Location, Link).
pub fn encode_segment(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        if c.is_ascii_alphanumeric() || b"-_.~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

pub fn parse_query(q: &str) -> Query {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let d = |x: &str| {
                String::from_utf8_lossy(
                    &percent_decode(x).unwrap_or_else(|_| x.as_bytes().to_vec()),
                )
                .into_owned()
            };
            (d(k), d(v))
        })
        .collect()
}

/// Bytes as text for a JSON answer or an error (invalid UTF-8 replaced).
pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut r = Response::new(Body::from(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("text/plain"));
    r
}

pub fn json(status: StatusCode, v: &serde_json::Value) -> Response {
    json_text(status, v.to_string())
}

/// A JSON answer already written as text.
pub fn json_text(status: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

pub fn empty(status: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}

/// A quorum parameter (`r`, `w`, ...): an integer or one, quorum, all,
/// default.
pub fn quorum_param(q: &Query, name: &str) -> Result<Option<Quorum>, Response> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => match Quorum::parse(v) {
            Some(Quorum::Default) => Ok(None),
            Some(x) => Ok(Some(x)),
            None => Err(text(
                StatusCode::BAD_REQUEST,
                format!("{name} query parameter must be an integer or one of the following words: 'one', 'quorum' or 'all'\n"),
            )),
        },
    }
}

/// Several quorum parameters at once, into their slots.
pub fn quorum_params(q: &Query, slots: &mut [(&str, &mut Option<Quorum>)]) -> Result<(), Response> {
    for (name, slot) in slots.iter_mut() {
        **slot = quorum_param(q, name)?;
    }
    Ok(())
}

pub fn bool_param(q: &Query, name: &str) -> Result<Option<bool>, Response> {
    match q.get(name).map(String::as_str) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(text(
            StatusCode::BAD_REQUEST,
            format!("{name} query parameter must be true or false\n"),
        )),
    }
}

/// The HTTP status Riak gives a failed request, with its text.
pub fn kv_error(e: KvError) -> Response {
    let status = match &e {
        KvError::BadRequest(_)
        | KvError::NValViolation(_)
        | KvError::QuorumViolation { .. }
        | KvError::PrecommitFail(_)
        | KvError::Props(_)
        | KvError::BadVclock(_)
        | KvError::Datatype(_) => StatusCode::BAD_REQUEST,
        KvError::NoType | KvError::NoSuchType(_) | KvError::InvalidType(_) => StatusCode::NOT_FOUND,
        KvError::MatchFound | KvError::Modified | KvError::NotFound => {
            StatusCode::PRECONDITION_FAILED
        }
        KvError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        KvError::Quorum(_)
        | KvError::Unreachable { .. }
        | KvError::InsufficientVnodes { .. }
        | KvError::NoCoverage
        | KvError::Timeout
        | KvError::Busy(_)
        | KvError::OutOfSpace { .. } => StatusCode::SERVICE_UNAVAILABLE,
        KvError::TooManySiblings(_) | KvError::Backend(_) | KvError::Storage(_) => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let msg = match &e {
        KvError::Quorum(QuorumError::RUnsatisfied { need, got }) => {
            format!("R-value unsatisfied: {got}/{need}\n")
        }
        KvError::Quorum(QuorumError::PrUnsatisfied { need, got }) => {
            format!("PR-value unsatisfied: {got}/{need}\n")
        }
        KvError::Quorum(QuorumError::DwUnsatisfied { need, got }) => {
            format!("DW-value unsatisfied: {got}/{need}\n")
        }
        KvError::Quorum(QuorumError::PwUnsatisfied { need, got }) => {
            format!("PW-value unsatisfied: {got}/{need}\n")
        }
        KvError::Quorum(QuorumError::NodeConfirmsUnsatisfied { need, got }) => {
            format!("node_confirms-value unsatisfied: {got}/{need}\n")
        }
        KvError::Timeout => "request timed out\n".into(),
        KvError::NoType => "Unknown bucket type\n".into(),
        other => format!("{other}\n"),
    };
    let mut r = text(status, msg);
    if let KvError::OutOfSpace { retry_after_secs } = e {
        r.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            HeaderValue::from(retry_after_secs),
        );
    }
    r
}

/// The UTC calendar of Unix seconds: (year, month, day, hour, minute,
/// second, weekday with 0 for Thursday).
fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64, usize) {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, d, h, m, s, days.rem_euclid(7) as usize)
}

/// RFC 1123 date of Unix seconds: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(secs: u64) -> String {
    let (year, month, d, h, m, s, wd) = civil(secs.min(i64::MAX as u64) as i64);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][wd];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1) as usize];
    format!("{weekday}, {d:02} {mon} {year} {h:02}:{m:02}:{s:02} GMT")
}

/// RFC 3339 in UTC, whole seconds: `2026-11-27T18:47:53Z`.
pub fn rfc3339(secs: i64) -> String {
    let (year, month, d, h, m, s, _) = civil(secs);
    format!("{year:04}-{month:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_decoding_keeps_a_stray_percent() {
        assert_eq!(percent_decode_lenient("tag2!@#%^&*)"), b"tag2!@#%^&*)");
        assert_eq!(percent_decode_lenient("a%2Fb+c%"), b"a/b c%");
    }

    #[test]
    fn dates() {
        assert_eq!(http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(rfc3339(1795805273), "2026-11-27T18:47:53Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn decoding() {
        assert_eq!(
            percent_decode("f%C3%B8%C3%B8+bar").unwrap(),
            "føø bar".as_bytes()
        );
        assert!(percent_decode("%zz").is_err());
        assert!(percent_decode("%4").is_err());
        assert_eq!(encode_segment(b"a b/c"), "a%20b%2Fc");
        let q = parse_query("returnbody=true&r=quorum&term_regex=.%2Al2");
        assert_eq!(q["term_regex"], ".*l2");
    }
}
