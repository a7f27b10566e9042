//! Prometheus's PromQL test files (`promql/promqltest/testdata/*.test`
//! of the Prometheus Go module): their commands read, and a result
//! compared with what a command expects, as Prometheus's own runner
//! compares (values within a relative 1e-6, `_` for no point).
//!
//! A file is `load <interval>` blocks of series (`name{labels} values`,
//! values such as `1+2x3`, `_x2`, `stale`), `clear`, and evaluations:
//! `eval[_fail|_warn|_info|_ordered] instant at <time> <query>` or
//! `eval[...] range from <t> to <t> step <d> <query>`, each followed by
//! the series it expects (or a number for a scalar).

use crate::lex::parse_duration;

/// The Go module whose test data is the reference: Prometheus 3.5, the
/// long-term support release (`promql/promqltest/testdata` in it).
pub const MODULE: &str = "github.com/prometheus/prometheus@v0.305.0";

/// The reference's files of float evaluations Rill is held to.
pub const FILES: [&str; 10] = [
    "aggregators",
    "at_modifier",
    "functions",
    "literals",
    "operators",
    "range_queries",
    "selectors",
    "staleness",
    "subquery",
    "trig_functions",
];
use crate::value::{Labels, Point, Series, Value, STALE_NAN_BITS};

/// One command of a test file.
#[derive(Clone, Debug)]
pub enum Command {
    /// Series to store, their float samples; `histograms` names those
    /// with native-histogram samples too (left out: Rill stores floats).
    Load {
        series: Vec<Series>,
        histograms: Vec<Labels>,
        line: usize,
    },
    Clear,
    Eval(Eval),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalKind {
    /// Time, ms.
    Instant(i64),
    /// Start, end, step, ms.
    Range(i64, i64, i64),
}

/// An evaluation and what it expects.
#[derive(Clone, Debug)]
pub struct Eval {
    pub kind: EvalKind,
    pub query: String,
    /// `eval_fail` or an `expect fail` line.
    pub fail: bool,
    pub ordered: bool,
    /// `eval_warn`/`eval_info` or `expect warn|info` lines: the
    /// reference also checks an annotation.
    pub annotation: bool,
    /// Expected series: labels and one value per step (`None`: no
    /// point).
    pub expected: Vec<(Labels, Vec<Option<f64>>)>,
    pub scalar: Option<f64>,
    /// Some expected value is a native histogram.
    pub histograms: bool,
    pub line: usize,
}

/// Reads a test file.
pub fn parse_file(text: &str) -> Result<Vec<Command>, String> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let t = l.trim();
            if t.starts_with('#') {
                String::new()
            } else {
                t.to_string()
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        let line = i + 1;
        if l.is_empty() {
            i += 1;
            continue;
        }
        let word = l.split_whitespace().next().unwrap_or("");
        if word == "clear" {
            out.push(Command::Clear);
            i += 1;
        } else if word == "load" || word == "load_with_nhcb" {
            let interval = l
                .split_whitespace()
                .nth(1)
                .and_then(parse_duration)
                .ok_or_else(|| format!("line {line}: bad load interval"))?;
            let mut series = Vec::new();
            let mut histograms = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].is_empty() {
                let s = parse_series(&lines[i]).map_err(|e| format!("line {}: {e}", i + 1))?;
                let points = s
                    .values
                    .iter()
                    .enumerate()
                    .filter_map(|(k, v)| {
                        v.map(|v| Point {
                            t: k as i64 * interval,
                            v,
                        })
                    })
                    .collect();
                if s.histograms {
                    histograms.push(s.labels.clone());
                }
                if word == "load_with_nhcb" {
                    // The classic buckets are also loaded as a native
                    // histogram with custom buckets, named without
                    // `_bucket`.
                    if let Some(base) = s.labels.value("__name__").strip_suffix("_bucket") {
                        let mut l = s.labels.drop(&["le".to_string()]);
                        l.set("__name__", base);
                        histograms.push(l);
                    }
                }
                series.push(Series {
                    labels: s.labels,
                    points,
                });
                i += 1;
            }
            out.push(Command::Load {
                series,
                histograms,
                line,
            });
        } else if word.starts_with("eval") {
            let (eval, next) = parse_eval(&lines, i)?;
            out.push(Command::Eval(eval));
            i = next;
        } else {
            return Err(format!("line {line}: unknown command {word:?}"));
        }
    }
    Ok(out)
}

fn parse_eval(lines: &[String], i: usize) -> Result<(Eval, usize), String> {
    let l = &lines[i];
    let line = i + 1;
    let (head, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
    let modifier = head.strip_prefix("eval").unwrap_or("");
    let rest = rest.trim_start();
    let bad = |what: &str| format!("line {line}: {what}");
    let (kind, query) = if let Some(r) = rest.strip_prefix("instant") {
        let r = r.trim_start();
        let r = r
            .strip_prefix("at")
            .ok_or_else(|| bad("expected 'at'"))?
            .trim_start();
        let (t, q) = r
            .split_once(char::is_whitespace)
            .ok_or_else(|| bad("no query"))?;
        let t = parse_duration(t).ok_or_else(|| bad("bad time"))?;
        (EvalKind::Instant(t), q.trim().to_string())
    } else if let Some(r) = rest.strip_prefix("range") {
        let w: Vec<&str> = r.split_whitespace().collect();
        if w.len() < 7 || w[0] != "from" || w[2] != "to" || w[4] != "step" {
            return Err(bad("bad range"));
        }
        let d = |s: &str| parse_duration(s).ok_or_else(|| bad("bad duration"));
        let query = strip_words(r, 6);
        (EvalKind::Range(d(w[1])?, d(w[3])?, d(w[5])?), query)
    } else {
        return Err(bad("expected 'instant' or 'range'"));
    };
    let mut e = Eval {
        kind,
        query,
        fail: modifier == "_fail",
        ordered: modifier == "_ordered",
        annotation: modifier == "_warn" || modifier == "_info",
        expected: Vec::new(),
        scalar: None,
        histograms: false,
        line,
    };
    let mut j = i + 1;
    while j < lines.len() && !lines[j].is_empty() {
        let d = &lines[j];
        j += 1;
        if d.starts_with("expected_fail_message") || d.starts_with("expected_fail_regexp") {
            continue;
        }
        if let Some(x) = d.strip_prefix("expect ") {
            let what = x.split_whitespace().next().unwrap_or("");
            match what {
                "fail" => e.fail = true,
                "ordered" => e.ordered = true,
                "warn" | "info" => e.annotation = true,
                _ => {}
            }
            continue;
        }
        if let Some(v) = parse_number(d) {
            e.scalar = Some(v);
            continue;
        }
        let s = parse_series(d).map_err(|x| format!("line {j}: {x}"))?;
        e.histograms |= s.histograms;
        e.expected.push((s.labels, s.values));
    }
    Ok((e, j))
}

/// `s` without its first `n` words.
fn strip_words(s: &str, n: usize) -> String {
    let mut rest = s.trim_start();
    for _ in 0..n {
        rest = match rest.split_once(char::is_whitespace) {
            Some((_, r)) => r.trim_start(),
            None => "",
        };
    }
    rest.trim().to_string()
}

/// A number as the test files write one.
fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => {
            if t.starts_with("0x") || t.starts_with("0X") {
                return i64::from_str_radix(&t[2..], 16).ok().map(|v| v as f64);
            }
            t.parse::<f64>().ok()
        }
    }
}

/// A series line read: labels, one value per step (`None`: no
/// sample), and whether some sample is a native histogram (left out).
struct SeriesLine {
    labels: Labels,
    values: Vec<Option<f64>>,
    histograms: bool,
}

/// `name{labels} values`.
fn parse_series(line: &str) -> Result<SeriesLine, String> {
    let (labels, rest) = parse_labels(line)?;
    let mut values = Vec::new();
    let mut histograms = false;
    for item in items(rest.trim()) {
        if item.contains("{{") {
            // A native histogram, or a run of them: as many steps.
            histograms = true;
            let n = item
                .rsplit_once("}}x")
                .and_then(|(_, n)| n.parse::<usize>().ok())
                .map_or(1, |n| n + 1);
            values.extend(std::iter::repeat_n(None, n));
            continue;
        }
        expand(item, &mut values)?;
    }
    Ok(SeriesLine {
        labels,
        values,
        histograms,
    })
}

/// The items of a values list: split at spaces, except inside `{{ }}`.
fn items(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let (mut start, mut depth) = (None, 0);
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'{' => depth += 1,
            b'}' => depth -= 1,
            _ => {}
        }
        if c.is_ascii_whitespace() && depth == 0 {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(&s[st..]);
    }
    out
}

/// One item of a series' values: `v`, `_`, `stale`, `vxN`, `_xN`,
/// `v+dxN`, `v-dxN`.
fn expand(item: &str, out: &mut Vec<Option<f64>>) -> Result<(), String> {
    let bad = || format!("bad series value {item:?}");
    let (base, times) = match item.rfind('x') {
        Some(k) if item[k + 1..].chars().all(|c| c.is_ascii_digit()) && k + 1 < item.len() => (
            &item[..k],
            Some(item[k + 1..].parse::<usize>().map_err(|_| bad())?),
        ),
        _ => (item, None),
    };
    let value = |s: &str| -> Result<Option<f64>, String> {
        match s {
            "_" => Ok(None),
            "stale" => Ok(Some(f64::from_bits(STALE_NAN_BITS))),
            _ => parse_number(s).map(Some).ok_or_else(bad),
        }
    };
    let Some(n) = times else {
        out.push(value(base)?);
        return Ok(());
    };
    if base == "_" {
        out.extend(std::iter::repeat_n(None, n));
        return Ok(());
    }
    // `a+d` or `a-d` (a may start with a sign, d may be signed too).
    let split = base
        .char_indices()
        .skip(1)
        .find(|&(k, c)| (c == '+' || c == '-') && !matches!(base.as_bytes()[k - 1], b'e' | b'E'))
        .map(|(k, _)| k);
    let (a, d) = match split {
        Some(k) => (
            value(&base[..k])?.ok_or_else(bad)?,
            parse_number(&base[k..]).ok_or_else(bad)?,
        ),
        None => (value(base)?.ok_or_else(bad)?, 0.0),
    };
    let mut v = a;
    for _ in 0..=n {
        out.push(Some(v));
        v += d;
    }
    Ok(())
}

/// `name{a="b", ...}` or `{...}`: the labels and what follows.
fn parse_labels(line: &str) -> Result<(Labels, &str), String> {
    let mut pairs = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
        i += 1;
    }
    if i > 0 {
        pairs.push(("__name__".to_string(), line[..i].to_string()));
    }
    let rest = &line[i..];
    let Some(inner) = rest.strip_prefix('{') else {
        return Ok((Labels::new(pairs), rest));
    };
    let mut s = inner;
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(r) = s.strip_prefix('}') {
            return Ok((Labels::new(pairs), r));
        }
        let (name, r) = if s.starts_with('"') {
            let (n, r) = quoted(s)?;
            (n, r)
        } else {
            let k = s
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(s.len());
            (s[..k].to_string(), &s[k..])
        };
        let r = r.trim_start();
        let Some(r) = r.strip_prefix('=') else {
            // A quoted name alone is the metric's.
            pairs.push(("__name__".to_string(), name));
            s = r;
            continue;
        };
        let (value, r) = quoted(r.trim_start())?;
        pairs.push((name, value));
        s = r;
    }
}

/// A double-quoted string with Go's escapes; its value and the rest.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return Err(format!("expected a quoted string at {s:?}"));
    }
    let mut k = 1;
    while k < b.len() && b[k] != b'"' {
        k += if b[k] == b'\\' { 2 } else { 1 };
    }
    if k >= b.len() {
        return Err(format!("unterminated string at {s:?}"));
    }
    let toks = crate::lex::lex(&s[..=k]).map_err(|e| e.to_string())?;
    match toks.first().map(|t| &t.tok) {
        Some(crate::lex::Tok::Str(v)) => Ok((v.clone(), &s[k + 1..])),
        _ => Err(format!("expected a quoted string at {s:?}")),
    }
}

/// Whether `a` and `b` agree as the reference runner compares values
/// (within a relative 1e-6).
pub fn almost_equal(a: f64, b: f64) -> bool {
    crate::value::almost_equal(a, b, 1e-6)
}

/// Compares a result with what `e` expects; the difference, if any.
pub fn compare(e: &Eval, got: &Value) -> Result<(), String> {
    match got {
        Value::Scalar(p) => match e.scalar {
            Some(x) if almost_equal(x, p.v) => Ok(()),
            Some(x) => Err(format!("expected scalar {x}, got {}", p.v)),
            None => Err(format!("expected a vector, got scalar {}", p.v)),
        },
        Value::String(s) => Err(format!("got string {s:?}")),
        Value::Vector(v) => {
            if let Some(x) = e.scalar {
                return Err(format!("expected scalar {x}, got a vector of {}", v.len()));
            }
            for (pos, s) in v.iter().enumerate() {
                let Some(k) = e.expected.iter().position(|(l, _)| *l == s.labels) else {
                    return Err(format!(
                        "unexpected series {} = {:?}",
                        s.labels,
                        s.points.first().map(|p| p.v)
                    ));
                };
                if e.ordered && k != pos {
                    return Err(format!("{} at position {pos}, expected at {k}", s.labels));
                }
                let want = e.expected[k].1.first().copied().flatten();
                let have = s.points.first().map(|p| p.v);
                match (want, have) {
                    (Some(w), Some(h)) if almost_equal(w, h) => {}
                    _ => return Err(format!("{}: expected {want:?}, got {have:?}", s.labels)),
                }
            }
            for (l, _) in &e.expected {
                if !v.iter().any(|s| s.labels == *l) {
                    return Err(format!("expected series {l} missing"));
                }
            }
            Ok(())
        }
        Value::Matrix(m) => {
            let EvalKind::Range(start, _, step) = e.kind else {
                return Err("a matrix for an instant evaluation".into());
            };
            if let Some(x) = e.scalar {
                // A scalar's range: one series without labels.
                let ok = m.len() == 1 && m[0].points.iter().all(|p| almost_equal(p.v, x));
                return if ok {
                    Ok(())
                } else {
                    Err(format!("expected scalar {x}"))
                };
            }
            for s in m {
                let Some((_, want)) = e.expected.iter().find(|(l, _)| *l == s.labels) else {
                    return Err(format!("unexpected series {}", s.labels));
                };
                let want: Vec<Point> = want
                    .iter()
                    .enumerate()
                    .filter_map(|(k, v)| {
                        v.map(|v| Point {
                            t: start + k as i64 * step,
                            v,
                        })
                    })
                    .collect();
                let same = want.len() == s.points.len()
                    && want
                        .iter()
                        .zip(&s.points)
                        .all(|(w, h)| w.t == h.t && almost_equal(w.v, h.v));
                if !same {
                    return Err(format!(
                        "{}: expected {:?}, got {:?}",
                        s.labels,
                        want.iter().map(|p| (p.t, p.v)).collect::<Vec<_>>(),
                        s.points.iter().map(|p| (p.t, p.v)).collect::<Vec<_>>()
                    ));
                }
            }
            for (l, _) in &e.expected {
                if !m.iter().any(|s| s.labels == *l) {
                    return Err(format!("expected series {l} missing"));
                }
            }
            Ok(())
        }
    }
}

/// Whether evaluation `e` reads native-histogram data: its expected
/// answer holds some, or one of its selectors matches a series of
/// `histograms` (out of scope: Rill stores floats).
pub fn over_histograms(e: &Eval, histograms: &[Labels]) -> bool {
    e.histograms
        || crate::parse(&e.query).is_ok_and(|q| {
            q.selectors().iter().any(|vs| {
                histograms
                    .iter()
                    .any(|l| vs.matchers.iter().all(|m| m.matches(l.value(&m.label))))
            })
        })
}

/// Judges what an evaluation gave: an error where `e` expects a
/// failure, else the answer it expects.
pub fn judge(e: &Eval, got: Result<Value, String>) -> Result<(), String> {
    match (got, e.fail) {
        (Err(_), true) => Ok(()),
        (Ok(_), true) => Err("expected a failure".to_string()),
        (Err(x), false) => Err(x),
        (Ok(v), false) => compare(e, &v),
    }
}
