//! Line protocol bodies as the engine takes them, pure: each point's
//! fields become samples of their series (named as VictoriaMetrics names
//! line protocol), grouped by series; bad lines become InfluxDB-worded
//! errors ("unable to parse ..."), which the protocols report.

use crate::FastMap;
use rill_sensor::line::{self, FieldValue, Point};
use rill_sensor::series::{field_key, group_key, labels_text, StringField, DB_LABEL};
use rill_sensor::{mqtt, Precision, Sample, Series};
use std::borrow::Cow;

/// A body's samples and errors.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    /// Series keys and their samples, in the order first met.
    pub series: Vec<(String, Vec<Sample>)>,
    /// Each series' group, by position in `group_keys` (`None`: a group
    /// of its own): the fields of one line protocol measurement and tag
    /// set share a group.
    pub group_of: Vec<Option<u32>>,
    pub group_keys: Vec<String>,
    /// One per line that does not parse, in line order.
    pub errors: Vec<String>,
    /// Points that parse but cannot be stored (a string field, a time
    /// out of range): InfluxDB 2.x writes the rest and reports them.
    pub rejected: Vec<String>,
    /// Points whose samples are in `series`.
    pub points: usize,
}

impl Batch {
    pub fn samples(&self) -> usize {
        self.series.iter().map(|(_, v)| v.len()).sum()
    }

    /// Each series' group key, by position (as [`crate::Engine::write_grouped`] takes them).
    pub fn groups(&self) -> Vec<Option<&str>> {
        self.group_of
            .iter()
            .map(|g| g.map(|i| self.group_keys[i as usize].as_str()))
            .collect()
    }
}

/// Samples gathered by series key from several bodies or messages.
#[derive(Debug, Default)]
pub struct Builder {
    batch: Batch,
    index: FastMap<String, usize>,
    /// Group keys' places in `batch.group_keys`.
    groups: FastMap<String, u32>,
    /// Samples a new series is given room for.
    room: usize,
}

/// A line's measurement and tags seen before in a body: its labels and
/// the places of its fields' series in the batch.
struct Known<'a> {
    measurement: Cow<'a, str>,
    /// The labels part of its series keys.
    labels: String,
    /// Its group in the batch (made with its first field's series).
    group: Option<u32>,
    fields: Vec<(Cow<'a, str>, usize)>,
}

impl<'a> Known<'a> {
    /// As `samples_of` labels a point: its tags, `tag` unless it has a
    /// tag of that name, `db` unless it has a `db` tag; sorted by name.
    fn new(p: Point<'a>, db: &str, tag: Option<(&str, &str)>) -> Known<'a> {
        let mut labels: Vec<(&str, &str)> = p.tags.iter().map(|(k, v)| (&**k, &**v)).collect();
        for (k, v) in tag
            .into_iter()
            .chain((!db.is_empty()).then_some((DB_LABEL, db)))
        {
            if !labels.iter().any(|(t, _)| *t == k) {
                labels.push((k, v));
            }
        }
        // Tags are not repeated (the parser refuses that), so a sort
        // leaves one of each.
        labels.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Known {
            labels: labels_text(&labels),
            measurement: p.measurement,
            group: None,
            fields: Vec::new(),
        }
    }
}

impl Builder {
    /// The place of series `key` in the batch, made if new.
    fn slot(&mut self, key: String) -> usize {
        match self.index.get(&key) {
            Some(&at) => at,
            None => {
                self.index.insert(key.clone(), self.batch.series.len());
                self.batch.series.push((key, Vec::with_capacity(self.room)));
                self.batch.group_of.push(None);
                self.batch.series.len() - 1
            }
        }
    }

    /// The place of series `key` in the batch, made if new in the group
    /// of `measurement` and `labels` (made if new, its place kept in
    /// `group`).
    fn slot_in_group(
        &mut self,
        key: String,
        measurement: &str,
        labels: &str,
        group: &mut Option<u32>,
    ) -> usize {
        let at = self.slot(key);
        if self.batch.group_of[at].is_none() {
            let g = *group.get_or_insert_with(|| {
                let gk = group_key(measurement, labels);
                match self.groups.get(&gk) {
                    Some(&g) => g,
                    None => {
                        let g = self.batch.group_keys.len() as u32;
                        self.groups.insert(gk.clone(), g);
                        self.batch.group_keys.push(gk);
                        g
                    }
                }
            });
            self.batch.group_of[at] = Some(g);
        }
        at
    }

    fn push(&mut self, key: String, sample: Sample) {
        let at = self.slot(key);
        self.batch.series[at].1.push(sample);
    }

    /// Adds a line protocol `body` written to database `db`, the
    /// timestamps in `precision`; a point without one is at `now` (ns)
    /// truncated to the precision, as InfluxDB stamps it. `tag` is added
    /// to every point that does not carry that tag itself; errors are
    /// prefixed with `context`.
    ///
    /// A line's measurement and tags are parsed and made into series keys
    /// once per body: later lines with the same text before their fields
    /// (a sensor's next readings) only parse their fields.
    pub fn line_protocol(
        &mut self,
        body: &str,
        db: &str,
        precision: Precision,
        now: i64,
        tag: Option<(&str, &str)>,
        context: &str,
    ) {
        let unit = precision.to_ns(1).unwrap_or(1);
        let now = now - now.rem_euclid(unit);
        // Sized once for the body's lines (at most one new series text
        // each), not grown by rehashing.
        let lines = body.bytes().filter(|&b| b == b'\n').count().min(1 << 16) + 1;
        let mut known: FastMap<&str, Known<'_>> =
            FastMap::with_capacity_and_hasher(lines, Default::default());
        self.index.reserve(lines);
        self.batch.series.reserve(lines);
        let mut fields = Vec::new();
        for (number, line, text) in line::lines(body) {
            let parsed = match line::split_series(text) {
                Some((series, rest)) if known.contains_key(series) => {
                    line::parse_fields(rest, &mut fields).map(|ts| (series, ts))
                }
                Some((series, rest)) => line::parse_line(text).and_then(|p| {
                    known.insert(series, Known::new(p, db, tag));
                    line::parse_fields(rest, &mut fields).map(|ts| (series, ts))
                }),
                // parse_line fails too: no space ends the tags.
                None => Err(line::parse_line(text)
                    .err()
                    .unwrap_or(line::ParseError::MissingFields)),
            };
            let (series_text, ts) = match parsed {
                Ok(p) => p,
                Err(reason) => {
                    let e = line::error(number, line, reason);
                    self.batch
                        .errors
                        .push(format!("{context}unable to parse {e}"));
                    continue;
                }
            };
            let known_count = known.len();
            let series = known.get_mut(series_text).expect("known above");
            let ts = match ts {
                None => now,
                Some(t) => match precision.to_ns(t) {
                    Some(ns) => ns,
                    None => {
                        self.batch.rejected.push(format!(
                            "{context}a point of {:?}: timestamp {t} is out of range (1677-2262)",
                            series.measurement
                        ));
                        continue;
                    }
                },
            };
            if let Some((field, _)) = fields.iter().find(|(_, v)| matches!(v, FieldValue::Str(_))) {
                let e = StringField {
                    field: field.to_string(),
                };
                self.batch
                    .rejected
                    .push(format!("{context}a point of {:?}: {e}", series.measurement));
                continue;
            }
            self.batch.points += 1;
            // The usual line: the same fields in the same order as this
            // series' first line in the body (so none repeated), each
            // sample going to the place found then.
            let same = fields.len() == series.fields.len()
                && fields
                    .iter()
                    .zip(&series.fields)
                    .all(|((f, _), (g, _))| f == g);
            if same {
                for ((_, v), &(_, at)) in fields.iter().zip(&series.fields) {
                    let value = value_of(v);
                    self.batch.series[at].1.push(Sample { ts, value });
                }
                continue;
            }
            for (i, (field, _)) in fields.iter().enumerate() {
                // A field written twice keeps its place and its last value.
                if fields[..i].iter().any(|(f, _)| f == field) {
                    continue;
                }
                let last = fields[i..].iter().rev().find(|(f, _)| f == field);
                let value = value_of(&last.expect("the field itself at least").1);
                let at = match series.fields.iter().find(|(f, _)| f == field) {
                    Some(&(_, at)) => at,
                    None => {
                        // Room for as many samples as the body has lines
                        // per series met so far (a sensor's readings
                        // usually come in turn): grown once, if at all.
                        self.room = (lines / known_count).clamp(1, 16);
                        let key = field_key(&series.measurement, field, &series.labels);
                        let at = self.slot_in_group(
                            key,
                            &series.measurement,
                            &series.labels,
                            &mut series.group,
                        );
                        series.fields.push((field.clone(), at));
                        at
                    }
                };
                self.batch.series[at].1.push(Sample { ts, value });
            }
        }
        self.room = 0;
    }

    /// Adds one MQTT message on `topic` (rill_sensor::mqtt): line
    /// protocol (in `precision`) tagged with its topic, a JSON object of
    /// readings, or a bare number; its series carry the label `db` as
    /// line protocol's do.
    pub fn mqtt(&mut self, topic: &str, payload: &[u8], db: &str, precision: Precision, now: i64) {
        let context = format!("a message on {topic:?}: ");
        if mqtt::is_line_protocol(payload) {
            match std::str::from_utf8(payload) {
                Ok(text) => {
                    self.line_protocol(text, db, precision, now, Some(("topic", topic)), &context)
                }
                Err(_) => self.batch.errors.push(format!("{context}not UTF-8")),
            }
            return;
        }
        match mqtt::json_or_number(topic, payload, now) {
            Ok(samples) => {
                self.batch.points += 1;
                for (series, sample) in samples {
                    let series = if db.is_empty() || series.label(DB_LABEL).is_some() {
                        series
                    } else {
                        let mut labels = series.labels;
                        labels.push((DB_LABEL.to_string(), db.to_string()));
                        Series::new(series.name, labels)
                    };
                    self.push(series.key(), sample);
                }
            }
            Err(e) => self.batch.errors.push(e.to_string()),
        }
    }

    pub fn finish(self) -> Batch {
        self.batch
    }
}

/// A field's value as a sample's (string fields are refused before).
fn value_of(v: &FieldValue) -> f64 {
    match v {
        FieldValue::Float(f) => *f,
        FieldValue::Int(i) => *i as f64,
        FieldValue::UInt(u) => *u as f64,
        FieldValue::Bool(b) => f64::from(u8::from(*b)),
        FieldValue::Str(_) => unreachable!("string fields are refused before"),
    }
}

/// The samples of a line protocol `body` written to database `db`, the
/// timestamps in `precision`; a point without one is at `now` (ns)
/// truncated to the precision, as InfluxDB stamps it.
pub fn line_protocol(body: &str, db: &str, precision: Precision, now: i64) -> Batch {
    let mut b = Builder::default();
    b.line_protocol(body, db, precision, now, None, "");
    b.finish()
}

/// What a body gives point by point, without the cache of series texts
/// ([`Builder::line_protocol`]): `parse`, then `samples_of` for each
/// point. The reference the fast path is tested and fuzzed against.
#[doc(hidden)]
pub fn line_protocol_point_by_point(body: &str, db: &str, precision: Precision, now: i64) -> Batch {
    let unit = precision.to_ns(1).unwrap_or(1);
    let now = now - now.rem_euclid(unit);
    let mut b = Builder::default();
    let (points, errors) = line::parse(body);
    b.batch.errors = errors
        .iter()
        .map(|e| format!("unable to parse {e}"))
        .collect();
    for p in &points {
        let ts = match p.timestamp.map(|t| precision.to_ns(t)) {
            None => now,
            Some(Some(ns)) => ns,
            Some(None) => {
                b.batch.rejected.push(format!(
                    "a point of {:?}: timestamp {} is out of range (1677-2262)",
                    p.measurement,
                    p.timestamp.unwrap_or_default()
                ));
                continue;
            }
        };
        match rill_sensor::samples_of(p, Some(db)) {
            Ok(samples) => {
                b.batch.points += 1;
                for (series, value) in samples {
                    let labels = labels_text(&series.labels);
                    let mut group = None;
                    let at = b.slot_in_group(series.key(), &p.measurement, &labels, &mut group);
                    b.batch.series[at].1.push(Sample { ts, value });
                }
            }
            Err(e) => b
                .batch
                .rejected
                .push(format!("a point of {:?}: {e}", p.measurement)),
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Lines from a few parts, so series texts repeat, with escapes,
    /// repeated fields and tags, strings, bad values and comments.
    fn body() -> impl Strategy<Value = String> {
        let series = prop::sample::select(vec![
            "m",
            "m,a=1",
            "m,b=2,a=1",
            "m,a=1,b=2",
            r"m\ x,a\,=\=1",
            "m,db=own",
            "m,a=1,a=2",
            "m,a=",
            r"m,a=1\ ",
            "cpu,host=h",
        ]);
        let field = prop::sample::select(vec![
            "v=1", "v=2.5", "w=3i", "x=t", "v=-4", "s=\"hi\"", "u=5u", "v=", "y=1e3", "z=inf",
        ]);
        let ts = prop::sample::select(vec!["", " 1", " 99", " -5", " 9223372036854775807", " x"]);
        let line = (series, prop::collection::vec(field, 0..4), ts).prop_map(|(s, f, t)| {
            if f.is_empty() {
                format!("{s}{t}")
            } else {
                format!("{s} {}{t}", f.join(","))
            }
        });
        let line =
            prop_oneof![8 => line, 1 => Just("# note".to_string()), 1 => Just(String::new())];
        prop::collection::vec(line, 0..24).prop_map(|v| v.join("\n"))
    }

    proptest! {
        #[test]
        fn bodies_give_what_points_give_one_by_one(body in body()) {
            let got = line_protocol(&body, "d", Precision::S, 7_500_000_000);
            prop_assert_eq!(got, line_protocol_point_by_point(&body, "d", Precision::S, 7_500_000_000));
        }
    }

    #[test]
    fn points_become_series_and_bad_lines_errors() {
        let body = "cpu,host=a usage=1.5,idle=2i 10\nbad line\ncpu,host=a usage=2 20\nm s=\"x\" 5\nm v=1\n";
        let b = line_protocol(body, "telegraf", Precision::S, 99_500_000_000);
        assert_eq!(b.points, 3);
        assert_eq!(
            b.series,
            vec![
                (
                    "cpu_usage{db=\"telegraf\",host=\"a\"}".to_string(),
                    vec![
                        Sample {
                            ts: 10_000_000_000,
                            value: 1.5
                        },
                        Sample {
                            ts: 20_000_000_000,
                            value: 2.0
                        }
                    ]
                ),
                (
                    "cpu_idle{db=\"telegraf\",host=\"a\"}".to_string(),
                    vec![Sample {
                        ts: 10_000_000_000,
                        value: 2.0
                    }]
                ),
                (
                    "m_v{db=\"telegraf\"}".to_string(),
                    vec![Sample {
                        ts: 99_000_000_000,
                        value: 1.0
                    }]
                ),
            ]
        );
        assert_eq!(b.errors.len(), 1, "{:?}", b.errors);
        assert_eq!(b.rejected.len(), 1, "{:?}", b.rejected);
        assert!(b.rejected[0].contains("string"), "{}", b.rejected[0]);
        assert!(
            b.errors[0].starts_with("unable to parse line 2: "),
            "{}",
            b.errors[0]
        );
        assert_eq!(b.samples(), 4);
        let far = line_protocol("m v=1 9223372036854775807", "d", Precision::S, 0);
        assert_eq!(far.points, 0);
        assert!(
            far.rejected[0].contains("out of range"),
            "{:?}",
            far.rejected
        );
        // A point without a time takes now, truncated to the precision.
        let now = line_protocol("m v=1", "d", Precision::S, 12_345_678_901);
        assert_eq!(now.series[0].1[0].ts, 12_000_000_000);
    }

    #[test]
    fn mqtt_messages_gather_by_series() {
        let mut b = Builder::default();
        let now = 5_000_000_000;
        b.mqtt("plant/1", b"21.5", "s", Precision::Ns, now);
        b.mqtt(
            "plant/1",
            b"{\"temp\": 3, \"ts\": 7}",
            "s",
            Precision::Ns,
            now,
        );
        b.mqtt("plant/2", b"press,topic=own v=2 9", "s", Precision::S, now);
        b.mqtt("plant/2", b"press v=1 8", "s", Precision::S, now);
        b.mqtt("plant/3", b"{\"name\": \"x\"}", "s", Precision::S, now);
        b.mqtt("plant/3", b"press v=", "s", Precision::S, now);
        let b = b.finish();
        let keys: Vec<&str> = b.series.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            vec![
                "value{db=\"s\",topic=\"plant/1\"}",
                "temp{db=\"s\",topic=\"plant/1\"}",
                "press_v{db=\"s\",topic=\"own\"}",
                "press_v{db=\"s\",topic=\"plant/2\"}",
            ]
        );
        assert_eq!(
            b.series[0].1[0],
            Sample {
                ts: now,
                value: 21.5
            }
        );
        assert_eq!(b.series[1].1[0].ts, 7_000_000_000);
        assert_eq!(b.series[3].1[0].ts, 8_000_000_000);
        assert_eq!(b.points, 4);
        assert_eq!(b.errors.len(), 2, "{:?}", b.errors);
        assert!(
            b.errors.iter().all(|e| e.contains("plant/3")),
            "{:?}",
            b.errors
        );
    }
}
