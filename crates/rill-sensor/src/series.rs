//! Series: what a sample belongs to, named as VictoriaMetrics names
//! line-protocol data so that the same queries work on both: the metric
//! `measurement_field`, the tags as labels, and the request's database as
//! the label `db` unless the line has a tag of that name.

use crate::line::{FieldValue, Point};

/// A series: a metric name and its labels, sorted by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Series {
    pub name: String,
    pub labels: Vec<(String, String)>,
}

impl Series {
    /// Makes a series, sorting its labels; a label given twice keeps its
    /// last value (the line protocol parser refuses a repeated tag, as
    /// InfluxDB does).
    pub fn new(name: impl Into<String>, labels: Vec<(String, String)>) -> Series {
        let mut labels = labels;
        // Stable: equal names keep their order, so the last is the last.
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(labels.len());
        for (k, v) in labels {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        Series {
            name: name.into(),
            labels: out,
        }
    }

    /// The series in Prometheus' text form, `name{a="1",b="2"}`: one
    /// string per series, different for different series, usable as a
    /// key. Label values are escaped as Prometheus escapes them (`\\`,
    /// `\"`, `\n`); in the name and label names (which the line protocol
    /// lets hold anything), a backslash goes before each backslash, double
    /// quote, comma, equals sign and brace, and a newline is `\n`.
    pub fn key(&self) -> String {
        let mut s = String::with_capacity(self.name.len() + 16 * self.labels.len());
        escape_name(&mut s, &self.name);
        s.push_str(&labels_text(&self.labels));
        s
    }

    /// A label's value.
    pub fn label(&self, name: &str) -> Option<&str> {
        if name == "__name__" {
            return Some(&self.name);
        }
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Series {
    /// The series a key ([`Series::key`]) names; `None` if `key` is not
    /// one (keys are read back from the catalog, so this is a decoder).
    pub fn parse_key(key: &str) -> Option<Series> {
        let mut chars = key.chars();
        let (name, stop) = unescape_until(&mut chars, &['{'], true)?;
        if stop != '{' {
            return None;
        }
        let mut labels: Vec<(String, String)> = Vec::new();
        let mut rest = chars.as_str();
        if let Some(after) = rest.strip_prefix('}') {
            return after.is_empty().then_some(Series { name, labels });
        }
        loop {
            let mut chars = rest.chars();
            let (label, stop) = unescape_until(&mut chars, &['='], true)?;
            if stop != '=' || chars.next() != Some('"') {
                return None;
            }
            let (value, _) = unescape_until(&mut chars, &['"'], false)?;
            if labels.last().is_some_and(|(last, _)| *last >= label) {
                return None;
            }
            labels.push((label, value));
            match chars.next()? {
                ',' => rest = chars.as_str(),
                '}' if chars.as_str().is_empty() => return Some(Series { name, labels }),
                _ => return None,
            }
        }
    }
}

/// Text up to the first unescaped stop character, unescaped as
/// [`Series::key`] escapes names (`name`) or label values; the stop.
fn unescape_until(
    chars: &mut std::str::Chars<'_>,
    stops: &[char],
    name: bool,
) -> Option<(String, char)> {
    let mut out = String::new();
    while let Some(c) = chars.next() {
        if stops.contains(&c) {
            return Some((out, c));
        }
        if c != '\\' {
            // Only the escaped form of these is in a key.
            if c == '\n' || (name && matches!(c, '"' | ',' | '=' | '{' | '}')) {
                return None;
            }
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            e @ ('\\' | '"') => out.push(e),
            e @ (',' | '=' | '{' | '}') if name => out.push(e),
            _ => return None,
        }
    }
    None
}

/// The labels part of a series' key ([`Series::key`]), `{a="1",b="2"}`,
/// for labels sorted by name.
pub fn labels_text<K: AsRef<str>, V: AsRef<str>>(labels: &[(K, V)]) -> String {
    let mut s = String::with_capacity(2 + 16 * labels.len());
    s.push('{');
    for (i, (k, v)) in labels.iter().enumerate() {
        let (k, v) = (k.as_ref(), v.as_ref());
        if i > 0 {
            s.push(',');
        }
        escape_name(&mut s, k);
        s.push_str("=\"");
        if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
            s.push_str(v);
            s.push('"');
            continue;
        }
        for c in v.chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '"' => s.push_str("\\\""),
                '\n' => s.push_str("\\n"),
                c => s.push(c),
            }
        }
        s.push('"');
    }
    s.push('}');
    s
}

/// The key of the series named `measurement_field` whose labels part
/// ([`labels_text`]) is `labels`: what [`Series::key`] gives.
pub fn field_key(measurement: &str, field: &str, labels: &str) -> String {
    let mut s = String::with_capacity(measurement.len() + field.len() + labels.len() + 4);
    // Escaping goes character by character, so the parts escape apart.
    escape_name(&mut s, measurement);
    s.push('_');
    escape_name(&mut s, field);
    s.push_str(labels);
    s
}

/// The group of a line protocol point's series (its measurement and
/// labels, `labels` as [`labels_text`] gives them): the fields of one
/// point share their timestamps. Distinct for distinct measurements or
/// labels (the measurement escaped as in a key, so it holds no `{`).
pub fn group_key(measurement: &str, labels: &str) -> String {
    let mut s = String::with_capacity(measurement.len() + labels.len() + 2);
    escape_name(&mut s, measurement);
    s.push_str(labels);
    s
}

fn escape_name(s: &mut String, name: &str) {
    if !name
        .bytes()
        .any(|b| matches!(b, b'\\' | b'"' | b',' | b'=' | b'{' | b'}' | b'\n'))
    {
        s.push_str(name);
        return;
    }
    for c in name.chars() {
        match c {
            '\\' | '"' | ',' | '=' | '{' | '}' => {
                s.push('\\');
                s.push(c);
            }
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
}

/// A field that cannot be stored as a number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field {field:?} is a string; only numbers and booleans are stored")]
pub struct StringField {
    pub field: String,
}

/// The label a request's database goes to.
pub const DB_LABEL: &str = "db";

/// A point's labels, unsorted: its tags, and the label `db` for database
/// `db` unless the point has a tag of that name or `db` is empty.
pub fn labels_of(point: &Point<'_>, db: Option<&str>) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = point
        .tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(db) = db.filter(|d| !d.is_empty()) {
        if !labels.iter().any(|(k, _)| k == DB_LABEL) {
            labels.push((DB_LABEL.to_string(), db.to_string()));
        }
    }
    labels
}

/// A point's samples: one series per field, with its value (integers as
/// doubles, exact up to 2^53; booleans as 1 and 0). A string field makes
/// the whole line an error, naming it (nothing of the line is stored).
pub fn samples_of(point: &Point<'_>, db: Option<&str>) -> Result<Vec<(Series, f64)>, StringField> {
    let base = Series::new(String::new(), labels_of(point, db));
    // A field written twice keeps its last value.
    let mut out: Vec<(Series, f64)> = Vec::with_capacity(point.fields.len());
    for (field, value) in &point.fields {
        let v = match value {
            FieldValue::Float(f) => *f,
            FieldValue::Int(i) => *i as f64,
            FieldValue::UInt(u) => *u as f64,
            FieldValue::Bool(b) => f64::from(u8::from(*b)),
            FieldValue::Str(_) => {
                return Err(StringField {
                    field: field.to_string(),
                })
            }
        };
        let name = format!("{}_{}", point.measurement, field);
        match out.iter_mut().find(|(s, _)| s.name == name) {
            Some(slot) => slot.1 = v,
            None => out.push((
                Series {
                    name,
                    labels: base.labels.clone(),
                },
                v,
            )),
        }
    }
    Ok(out)
}

/// A timestamp precision of the write APIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    Ns,
    Us,
    Ms,
    S,
    M,
    H,
}

/// A precision that is none of the write APIs' names.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("precision {given:?} is not one of ns, us, ms, s, m, h")]
pub struct UnknownPrecision {
    pub given: String,
}

impl Precision {
    /// InfluxDB's names: `n`/`ns`, `u`/`us`/`µ`, `ms`, `s`, and (1.x) `m`
    /// and `h`; none means nanoseconds.
    pub fn parse(s: Option<&str>) -> Result<Precision, UnknownPrecision> {
        Ok(match s.unwrap_or("ns") {
            "" | "n" | "ns" => Precision::Ns,
            "u" | "us" | "µ" => Precision::Us,
            "ms" => Precision::Ms,
            "s" => Precision::S,
            "m" => Precision::M,
            "h" => Precision::H,
            other => {
                return Err(UnknownPrecision {
                    given: other.to_string(),
                })
            }
        })
    }

    fn ns(self) -> i64 {
        match self {
            Precision::Ns => 1,
            Precision::Us => 1_000,
            Precision::Ms => 1_000_000,
            Precision::S => 1_000_000_000,
            Precision::M => 60_000_000_000,
            Precision::H => 3_600_000_000_000,
        }
    }

    /// A timestamp in this precision as nanoseconds since the epoch, or
    /// `None` if that is outside 1677-2262 (i64 nanoseconds).
    pub fn to_ns(self, ts: i64) -> Option<i64> {
        ts.checked_mul(self.ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::parse;

    #[test]
    fn named_as_victoriametrics_names_line_protocol() {
        let (p, _) = parse("cpu,host=a,region=eu usage_user=1.5,idle=3i,up=t 1");
        let s = samples_of(&p[0], Some("telegraf")).unwrap();
        let keys: Vec<String> = s.iter().map(|(s, _)| s.key()).collect();
        assert_eq!(
            keys,
            [
                r#"cpu_usage_user{db="telegraf",host="a",region="eu"}"#,
                r#"cpu_idle{db="telegraf",host="a",region="eu"}"#,
                r#"cpu_up{db="telegraf",host="a",region="eu"}"#,
            ]
        );
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), [1.5, 3.0, 1.0]);
    }

    #[test]
    fn a_db_tag_wins_and_no_db_adds_no_label() {
        let (p, _) = parse("m,db=mine v=1");
        assert_eq!(
            samples_of(&p[0], Some("other")).unwrap()[0].0.key(),
            r#"m_v{db="mine"}"#
        );
        let (p, _) = parse("m v=1");
        assert_eq!(samples_of(&p[0], None).unwrap()[0].0.key(), "m_v{}");
        assert_eq!(samples_of(&p[0], Some("")).unwrap()[0].0.key(), "m_v{}");
    }

    #[test]
    fn repeated_fields_keep_the_last_and_repeated_tags_are_refused() {
        let (p, _) = parse("m,t=1 v=1,v=2");
        let s = samples_of(&p[0], None).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].0.key().as_str(), s[0].1), (r#"m_v{t="1"}"#, 2.0));
        let (p, e) = parse("m,t=1,t=2 v=1");
        assert!(p.is_empty() && e[0].reason.to_string().contains("given twice"));
    }

    #[test]
    fn different_series_have_different_keys() {
        let (a, _) = parse(r#"m,a\="1"\,b=2 v=1"#);
        let (b, _) = parse("m,a=1,b=2 v=1");
        let ka = samples_of(&a[0], None).unwrap()[0].0.key();
        let kb = samples_of(&b[0], None).unwrap()[0].0.key();
        assert_ne!(ka, kb);
        assert_eq!(kb, r#"m_v{a="1",b="2"}"#);
    }

    #[test]
    fn strings_are_refused_by_name() {
        let (p, _) = parse(r#"m v=1,note="hi""#);
        assert_eq!(samples_of(&p[0], None).unwrap_err().field, "note");
    }

    #[test]
    fn keys_escape_label_values() {
        let s = Series::new("m", vec![("a".into(), "x\"y\\z\nw".into())]);
        assert_eq!(s.key(), r#"m{a="x\"y\\z\nw"}"#);
        assert_eq!(s.label("__name__"), Some("m"));
        assert_eq!(s.label("a"), Some("x\"y\\z\nw"));
    }

    #[test]
    fn precisions() {
        assert_eq!(Precision::parse(None), Ok(Precision::Ns));
        assert_eq!(
            Precision::parse(Some("s")).unwrap().to_ns(2),
            Some(2_000_000_000)
        );
        assert_eq!(
            Precision::parse(Some("h")).unwrap().to_ns(i64::MAX / 10),
            None
        );
        assert!(Precision::parse(Some("d"))
            .unwrap_err()
            .to_string()
            .contains("ns, us, ms"));
    }

    proptest::proptest! {
        #[test]
        fn keys_parse_back_to_their_series(
            name in "[a-z_{}=,\"\\\\\n ]{0,12}",
            labels in proptest::collection::vec(("[a-z{}=,\"\\\\\n]{0,6}", "[a-z{}=,\"\\\\\n ]{0,8}"), 0..4),
        ) {
            let s = Series::new(name, labels);
            proptest::prop_assert_eq!(Series::parse_key(&s.key()), Some(s.clone()));
        }

        #[test]
        fn any_text_parses_or_not_without_panic(key in ".{0,40}") {
            if let Some(s) = Series::parse_key(&key) {
                proptest::prop_assert_eq!(s.key(), key);
            }
        }
    }

    #[test]
    fn malformed_keys_are_not_series() {
        for bad in [
            "",
            "cpu",
            "cpu{",
            "cpu{a}",
            "cpu{a=1}",
            "cpu{a=\"1\"",
            "cpu{a=\"1\"}x",
            "cpu{b=\"1\",a=\"2\"}",
            "c\\x{}",
        ] {
            assert_eq!(Series::parse_key(bad), None, "{bad}");
        }
        assert_eq!(Series::parse_key("cpu{}"), Some(Series::new("cpu", vec![])));
    }
}
