//! Prometheus series selectors, pure: `name`, `name{label="value",...}`
//! or `{__name__="name",...}`, with the matchers `=`, `!=`, `=~` and `!~`
//! (regular expressions anchored at both ends, `.` matching a newline
//! too, as Prometheus compiles them), label values in double quotes, single quotes or backticks.
//! A label a series lacks has the value "" (so `{host=""}` selects the
//! series without `host`, as in Prometheus).

use regex::Regex;
use rill_sensor::Series;

/// Why a selector does not parse, in the words Prometheus and
/// VictoriaMetrics use; the texts quoted are as given.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    #[error("a metric name cannot start with {found:?}")]
    NameStart { found: String },
    #[error("unexpected {found:?} in selector {selector:?}")]
    Unexpected { found: String, selector: String },
    #[error("expected ',' or '}}' in selector {selector:?}, found {found:?}")]
    ExpectedComma { selector: String, found: String },
    /// `{}` or `{a=""}` alone would select every series.
    #[error("selector {selector:?} must contain a matcher that does not match the empty string")]
    MatchesEverything { selector: String },
    #[error("expected a label name at {found:?}")]
    ExpectedLabel { found: String },
    #[error("expected =, !=, =~ or !~ after {label:?}")]
    ExpectedOperator { label: String },
    #[error("bad regular expression {pattern:?}: {source}")]
    BadRegex {
        pattern: String,
        source: regex::Error,
    },
    #[error("expected a quoted label value at {found:?}")]
    ExpectedQuote { found: String },
    /// A backslash ends the text.
    #[error("unterminated label value")]
    UnterminatedEscape,
    #[error("unterminated label value {found:?}")]
    Unterminated { found: String },
    #[error("unknown escape \\{escape} in a label value")]
    UnknownEscape { escape: char },
}

#[derive(Clone, Debug)]
pub enum Op {
    Eq(String),
    Ne(String),
    Re(Regex),
    NotRe(Regex),
}

#[derive(Clone, Debug)]
pub struct Matcher {
    pub label: String,
    pub op: Op,
}

impl Matcher {
    pub fn matches(&self, s: &Series) -> bool {
        let v = s.label(&self.label).unwrap_or("");
        match &self.op {
            Op::Eq(x) => v == x,
            Op::Ne(x) => v != x,
            Op::Re(r) => r.is_match(v),
            Op::NotRe(r) => !r.is_match(v),
        }
    }
}

/// Whether `s` passes every matcher.
pub fn matches(matchers: &[Matcher], s: &Series) -> bool {
    matchers.iter().all(|m| m.matches(s))
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    is_name_start(c) || c.is_ascii_digit()
}

/// Parses a selector. A selector must have a matcher that does not match
/// the empty string (Prometheus refuses `{}` and `{a=""}` alone, which
/// would select everything).
pub fn parse(sel: &str) -> Result<Vec<Matcher>, SelectorError> {
    let s = sel.trim();
    let name_end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    let mut out = Vec::new();
    if name_end > 0 {
        if !s.starts_with(is_name_start) {
            return Err(SelectorError::NameStart {
                found: s[..1].to_string(),
            });
        }
        out.push(Matcher {
            label: "__name__".into(),
            op: Op::Eq(s[..name_end].to_string()),
        });
    }
    let rest = s[name_end..].trim_start();
    if !rest.is_empty() {
        let body = rest
            .strip_prefix('{')
            .and_then(|r| r.strip_suffix('}'))
            .ok_or_else(|| SelectorError::Unexpected {
                found: rest.to_string(),
                selector: sel.to_string(),
            })?;
        let mut at = body.trim_start();
        while !at.is_empty() {
            let (m, after) = matcher(at)?;
            out.push(m);
            at = after.trim_start();
            match at.strip_prefix(',') {
                Some(r) => at = r.trim_start(),
                None if at.is_empty() => {}
                None => {
                    return Err(SelectorError::ExpectedComma {
                        selector: sel.to_string(),
                        found: at.to_string(),
                    })
                }
            }
        }
    }
    let empty = Series::new("", Vec::new());
    if out.iter().all(|m| m.matches(&empty)) {
        return Err(SelectorError::MatchesEverything {
            selector: sel.to_string(),
        });
    }
    Ok(out)
}

/// One `label op "value"`; the text after it.
fn matcher(s: &str) -> Result<(Matcher, &str), SelectorError> {
    let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
    if end == 0 || !s.starts_with(is_name_start) {
        return Err(SelectorError::ExpectedLabel {
            found: s.to_string(),
        });
    }
    let label = s[..end].to_string();
    let r = s[end..].trim_start();
    let (op, r) = ["=~", "!~", "!=", "="]
        .iter()
        .find_map(|op| r.strip_prefix(op).map(|rest| (*op, rest)))
        .ok_or_else(|| SelectorError::ExpectedOperator {
            label: label.clone(),
        })?;
    let (value, r) = quoted(r.trim_start())?;
    let anchored = |v: &str| {
        Regex::new(&format!("^(?s:{v})$")).map_err(|source| SelectorError::BadRegex {
            pattern: v.to_string(),
            source,
        })
    };
    let op = match op {
        "=" => Op::Eq(value),
        "!=" => Op::Ne(value),
        "=~" => Op::Re(anchored(&value)?),
        _ => Op::NotRe(anchored(&value)?),
    };
    Ok((Matcher { label, op }, r))
}

/// A quoted string (double or single quotes with Go's escapes, or
/// backticks, raw); the text after it.
fn quoted(s: &str) -> Result<(String, &str), SelectorError> {
    let mut chars = s.char_indices();
    let quote = match chars.next() {
        Some((_, q @ ('"' | '\'' | '`'))) => q,
        _ => {
            return Err(SelectorError::ExpectedQuote {
                found: s.to_string(),
            })
        }
    };
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        if c == quote {
            return Ok((out, &s[i + c.len_utf8()..]));
        }
        if c != '\\' || quote == '`' {
            out.push(c);
            continue;
        }
        let (_, e) = chars.next().ok_or(SelectorError::UnterminatedEscape)?;
        out.push(match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' | '"' | '\'' => e,
            other => return Err(SelectorError::UnknownEscape { escape: other }),
        });
    }
    Err(SelectorError::Unterminated {
        found: s.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, labels: &[(&str, &str)]) -> Series {
        Series::new(
            name,
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn selectors_match_as_prometheus_matches() {
        let a = series("cpu_usage", &[("host", "a"), ("db", "t")]);
        let b = series("cpu_usage", &[("host", "b")]);
        let c = series("mem_used", &[("host", "a")]);
        let sel = |s: &str| parse(s).unwrap();
        let pick = |m: &[Matcher]| {
            [&a, &b, &c]
                .iter()
                .filter(|s| matches(m, s))
                .map(|s| s.key())
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(&sel("cpu_usage")), vec![a.key(), b.key()]);
        assert_eq!(pick(&sel("cpu_usage{host=\"a\"}")), vec![a.key()]);
        assert_eq!(
            pick(&sel("{__name__=~\"cpu.*\", host!='a'}")),
            vec![b.key()]
        );
        assert_eq!(pick(&sel("{host=~`a|b`, db=\"\"}")), vec![b.key(), c.key()]);
        assert_eq!(
            pick(&sel("{__name__!~\"cpu_.*\", host=\"a\"}")),
            vec![c.key()]
        );
        assert_eq!(pick(&sel(" cpu_usage { host = \"b\" , } ")), vec![b.key()]);
        // Anchored: "cpu" does not match "cpu_usage".
        assert!(pick(&sel("{__name__=~\"cpu\"}")).is_empty());
    }

    #[test]
    fn bad_selectors_are_refused_with_the_reason() {
        for (bad, why) in [
            ("{}", "empty string"),
            ("{host=\"\"}", "empty string"),
            ("{host=~\".*\"}", "empty string"),
            ("cpu{host=\"a\"", "unexpected"),
            ("cpu{host}", "expected ="),
            ("cpu{host=a}", "quoted"),
            ("cpu{host=\"a}", "unterminated"),
            ("cpu{host=~\"(\"}", "regular expression"),
            ("cpu{host=\"a\" x=\"b\"}", "expected ','"),
            ("cpu{host=\"\\q\"}", "escape"),
            ("1cpu", "cannot start"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
