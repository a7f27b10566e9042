//! MQTT payloads as samples, pure. A message is one of:
//!
//! - line protocol (one point a line), named as any line protocol;
//! - a JSON object of readings, `{"temp": 21.5, "on": true, "ts":
//!   1700000000}`: each number or boolean field a series named by the
//!   field, with the label `topic` (the message's topic); `ts`, `time` or
//!   `timestamp` (a number) is its time, in seconds, milliseconds,
//!   microseconds or nanoseconds by its size (as VictoriaMetrics reads
//!   line protocol without a precision); other fields (strings, objects)
//!   are skipped;
//! - a bare number (`21.5`): the series `value{topic="..."}`.
//!
//! Anything else is an error naming the topic.

use crate::block::Sample;
use crate::series::Series;

/// A payload's samples, or why it has none.
pub type Parsed = Result<Vec<(Series, Sample)>, PayloadError>;

/// Why a JSON or bare-number payload gives no sample; each names the
/// message's topic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    #[error("a message on {topic:?} is not UTF-8")]
    NotUtf8 { topic: String },
    #[error("a message on {topic:?} is not a finite number")]
    NotFinite { topic: String },
    #[error("a message on {topic:?} is neither a number, JSON nor line protocol: {source}")]
    Unreadable {
        topic: String,
        source: serde_json::Error,
    },
    #[error("a JSON message on {topic:?} is not an object of readings")]
    NotAnObject { topic: String },
    /// Its time field is not a number of seconds, ms, µs or ns in range.
    #[error("the time {time} of a message on {topic:?} is not a time")]
    BadTime {
        topic: String,
        time: serde_json::Value,
    },
    #[error("a JSON message on {topic:?} holds no numeric reading")]
    NoReading { topic: String },
}

/// The time fields of a JSON payload.
const TIME_FIELDS: [&str; 3] = ["ts", "time", "timestamp"];

/// An integer time of seconds, ms, µs or ns by magnitude, as ns (exact).
fn auto_time_int(t: i64) -> Option<i64> {
    let a = t.unsigned_abs();
    let scale = match a {
        a if a >= 100_000_000_000_000_000 => 1,
        a if a >= 100_000_000_000_000 => 1_000,
        a if a >= 100_000_000_000 => 1_000_000,
        _ => 1_000_000_000,
    };
    t.checked_mul(scale)
}

/// Seconds, ms, µs or ns by magnitude, as ns.
fn auto_time(t: f64) -> Option<i64> {
    let a = t.abs();
    let ns = if a >= 1e17 {
        t
    } else if a >= 1e14 {
        t * 1e3
    } else if a >= 1e11 {
        t * 1e6
    } else {
        t * 1e9
    };
    (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
}

/// The samples of a JSON or bare-number payload on `topic`, at `now`
/// (ns) when it carries no time. Line protocol payloads go to
/// `line::parse` instead ([`is_line_protocol`]).
pub fn json_or_number(topic: &str, payload: &[u8], now: i64) -> Parsed {
    let text = std::str::from_utf8(payload)
        .map_err(|_| PayloadError::NotUtf8 {
            topic: topic.to_string(),
        })?
        .trim();
    let labels = || vec![("topic".to_string(), topic.to_string())];
    if let Ok(v) = text.parse::<f64>() {
        if !v.is_finite() {
            return Err(PayloadError::NotFinite {
                topic: topic.to_string(),
            });
        }
        return Ok(vec![(
            Series::new("value", labels()),
            Sample { ts: now, value: v },
        )]);
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|source| PayloadError::Unreadable {
            topic: topic.to_string(),
            source,
        })?;
    let obj = value.as_object().ok_or_else(|| PayloadError::NotAnObject {
        topic: topic.to_string(),
    })?;
    let mut ts = now;
    for f in TIME_FIELDS {
        if let Some(t) = obj.get(f) {
            ts = t
                .as_i64()
                .and_then(auto_time_int)
                .or_else(|| t.as_f64().and_then(auto_time))
                .ok_or_else(|| PayloadError::BadTime {
                    topic: topic.to_string(),
                    time: t.clone(),
                })?;
            break;
        }
    }
    let mut out = Vec::new();
    for (field, v) in obj {
        if TIME_FIELDS.contains(&field.as_str()) {
            continue;
        }
        let value = match v {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        };
        if let Some(value) = value.filter(|x| x.is_finite()) {
            out.push((Series::new(field.clone(), labels()), Sample { ts, value }));
        }
    }
    if out.is_empty() {
        return Err(PayloadError::NoReading {
            topic: topic.to_string(),
        });
    }
    Ok(out)
}

/// Whether a payload reads as line protocol rather than JSON or a number:
/// it starts with neither `{` nor a number and holds a space.
pub fn is_line_protocol(payload: &[u8]) -> bool {
    let t = payload.trim_ascii_start();
    match t.first() {
        None | Some(b'{') => false,
        Some(c) if c.is_ascii_digit() || *c == b'-' || *c == b'.' || *c == b'+' => false,
        _ => t.contains(&b' '),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_become_samples() {
        let got = json_or_number("plant/press", b" 101.5 ", 7).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.key(), "value{topic=\"plant/press\"}");
        assert_eq!(
            got[0].1,
            Sample {
                ts: 7,
                value: 101.5
            }
        );
        let got = json_or_number(
            "room/1",
            br#"{"temp": 21.5, "on": true, "name": "x", "ts": 1700000000123}"#,
            7,
        )
        .unwrap();
        let keys: Vec<String> = got.iter().map(|(s, _)| s.key()).collect();
        assert_eq!(keys, vec!["on{topic=\"room/1\"}", "temp{topic=\"room/1\"}"]);
        assert!(got.iter().all(|(_, s)| s.ts == 1_700_000_000_123_000_000));
        assert_eq!(auto_time(1_700_000_000.0), Some(1_700_000_000_000_000_000));
        assert_eq!(auto_time(1.7e18), Some(1_700_000_000_000_000_000));
    }

    #[test]
    fn bad_payloads_say_why() {
        for (p, why) in [
            (&b"\xff"[..], "UTF-8"),
            (b"[1,2]", "not an object"),
            (b"{\"a\": \"x\"}", "no numeric reading"),
            (b"{\"a\": 1, \"ts\": \"soon\"}", "not a time"),
            (b"{\"a\": 1, \"ts\": 1e300}", "not a time"),
            (b"nonsense", "neither"),
            (b"inf", "finite"),
        ] {
            let e = json_or_number("t", p, 0).unwrap_err().to_string();
            assert!(e.contains(why), "{}: {e}", String::from_utf8_lossy(p));
        }
        assert!(is_line_protocol(b"cpu,host=a v=1 1"));
        assert!(!is_line_protocol(b"{\"a\":1}"));
        assert!(!is_line_protocol(b"-1.5"));
        assert!(!is_line_protocol(b"nonsense"));
    }
}
