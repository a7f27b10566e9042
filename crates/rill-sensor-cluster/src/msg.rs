//! The messages of the sensor-data service between nodes, as bytes
//! (docs/format.md, "Sensor-service messages", version 1), pure. They
//! travel inside a vnode message's `Sensor` payload. Every decoder
//! refuses what it cannot read whole, and is fuzzed.
//!
//! A message starts with its version (1) and its kind. Integers are
//! LEB128 varints unless said otherwise; a text is its length (varint)
//! and its UTF-8 bytes; timestamps go as the zigzag difference from the
//! one before (the first from 0), values as 8 bytes (f64 bits, LE).

use rill_sensor::{unzigzag, zigzag, Sample};

pub const VERSION: u8 = 1;

/// Items made room for at once when a message gives a count (a forged
/// count never takes more than its bytes, but each item is larger in
/// memory than on the wire).
const PREALLOCATE: usize = 1024;

const WRITE: u8 = 1;
const SELECT: u8 = 2;
const KEYS: u8 = 3;
const HANDOFF: u8 = 4;
const DATABASES: u8 = 5;
const DIGESTS: u8 = 6;
const HOME_SAMPLES: u8 = 7;
const WRITTEN: u8 = 16;
const SERIES: u8 = 17;
const FAILED: u8 = 18;
const KEY_LIST: u8 = 19;
const SLICE_DIGESTS: u8 = 20;
const SAMPLES: u8 = 21;

/// A series and its samples as a write carries them.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesSamples {
    pub key: String,
    /// The group it belongs to when new (the fields of one line protocol
    /// measurement and tag set).
    pub group: Option<String>,
    pub samples: Vec<Sample>,
}

impl From<rill_tsdb::engine::HomeSeries> for SeriesSamples {
    /// A series of a home partition as an engine reads it.
    fn from((key, group, samples): rill_tsdb::engine::HomeSeries) -> SeriesSamples {
        SeriesSamples {
            key,
            group,
            samples,
        }
    }
}

/// The series of one home partition (the partition their group hashes
/// to).
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub home: u32,
    pub series: Vec<SeriesSamples>,
}

/// A label matcher: label, operator, value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatcherSpec {
    pub label: String,
    /// `=`, `!=`, `=~` or `!~`.
    pub op: String,
    pub value: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Store these samples of database `db`, judged at `now` (ns; what
    /// is past its storage period or too far ahead is counted, not
    /// written, the same on every replica).
    Write {
        db: String,
        now: i64,
        parts: Vec<Part>,
    },
    /// The series the matchers select (every database) with their
    /// samples from `mint` to `maxt` ms, judged at `now` (ns).
    Select {
        matchers: Vec<MatcherSpec>,
        mint: i64,
        maxt: i64,
        now: i64,
    },
    /// The keys of every series (every database) that one of the sets
    /// of matchers selects, whatever their samples' times.
    Keys { sets: Vec<Vec<MatcherSpec>> },
    /// The databases the node has (answered by `Keys`).
    Databases,
    /// Samples of a home partition another node held (a fallback's, or
    /// a former owner's): the replica keeps those it lacks.
    Handoff {
        db: String,
        now: i64,
        series: Vec<SeriesSamples>,
    },
    /// The digests of home partition `home` of `db` for the slices
    /// (`slice` ns long, as the asker cuts them) from `from` to `to` (ns),
    /// judged at `now` (anti-entropy).
    Digests {
        db: String,
        home: u32,
        now: i64,
        from: i64,
        to: i64,
        slice: i64,
    },
    /// The samples of home partition `home` of `db` from `from` to `to`
    /// (ns, both included), judged at `now`: a page of at most about
    /// `limit` samples, from after `after` (a series key and the last
    /// time the page before held of it) on.
    HomeSamples {
        db: String,
        home: u32,
        now: i64,
        from: i64,
        to: i64,
        after: Option<(String, i64)>,
        limit: u64,
    },
}

/// Why a replica did not do what was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// The request is wrong: every replica would say so.
    Invalid,
    /// Try again later (stores behind, a full disk).
    Busy,
    /// Anything else (the replica's log has the detail).
    Failed,
}

/// What a replica wrote: as `rill_tsdb::WriteReport`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub written: u64,
    pub too_old: u64,
    pub too_new: u64,
    pub bad_series: u64,
}

/// A series a select found: its key and points (ms, value).
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub key: String,
    pub points: Vec<(i64, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Written(Written),
    /// Sorted by key.
    Series(Vec<Found>),
    /// Series keys, sorted, each once.
    Keys(Vec<String>),
    Failed {
        kind: FailKind,
        text: String,
    },
    /// Each slice asked for that holds samples: its start (ns), digest
    /// and samples.
    Digests(Vec<(i64, u64, u64)>),
    /// A page of a home partition's samples, by key, and whether more
    /// are left.
    Samples {
        series: Vec<SeriesSamples>,
        more: bool,
    },
}

impl Reply {
    /// What the reply is, in a few words (for a log line: never its
    /// samples, which may be millions).
    pub fn describe(&self) -> String {
        match self {
            Reply::Written(_) => "written".into(),
            Reply::Series(found) => format!("{} series", found.len()),
            Reply::Keys(k) => format!("{} keys", k.len()),
            Reply::Failed { kind, text } => format!("failed ({kind:?}): {text}"),
            Reply::Digests(d) => format!("{} slice digests", d.len()),
            Reply::Samples { series, .. } => format!("samples of {} series", series.len()),
        }
    }
}

/// Why bytes are not a sensor-service message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MsgError {
    #[error("sensor-service message version {0}; this node reads 1")]
    Version(u8),
    #[error("unknown sensor-service message kind {0}")]
    Kind(u8),
    #[error("the sensor-service message ends early")]
    Short,
    #[error("the sensor-service message is malformed: {0}")]
    Malformed(&'static str),
}

fn put_var(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_text(b: &mut Vec<u8>, s: &str) {
    put_var(b, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
}

/// Times as zigzag differences, then the values.
fn put_points(b: &mut Vec<u8>, n: usize, at: impl Fn(usize) -> (i64, f64)) {
    put_var(b, n as u64);
    let mut last = 0i64;
    for i in 0..n {
        let t = at(i).0;
        put_var(b, zigzag(t.wrapping_sub(last)));
        last = t;
    }
    for i in 0..n {
        b.extend_from_slice(&at(i).1.to_bits().to_le_bytes());
    }
}

pub fn encode_request(r: &Request) -> Vec<u8> {
    let mut b = vec![VERSION];
    match r {
        Request::Write { db, now, parts } => {
            let samples: usize = parts
                .iter()
                .flat_map(|p| &p.series)
                .map(|s| s.samples.len())
                .sum();
            b.reserve(16 + db.len() + samples * 10);
            b.push(WRITE);
            put_text(&mut b, db);
            put_var(&mut b, zigzag(*now));
            put_var(&mut b, parts.len() as u64);
            for p in parts {
                put_var(&mut b, u64::from(p.home));
                put_series(&mut b, &p.series);
            }
        }
        Request::Select {
            matchers,
            mint,
            maxt,
            now,
        } => {
            b.push(SELECT);
            put_matchers(&mut b, matchers);
            put_var(&mut b, zigzag(*mint));
            put_var(&mut b, zigzag(*maxt));
            put_var(&mut b, zigzag(*now));
        }
        Request::Databases => b.push(DATABASES),
        Request::Handoff { db, now, series } => {
            b.push(HANDOFF);
            put_text(&mut b, db);
            put_var(&mut b, zigzag(*now));
            put_series(&mut b, series);
        }
        Request::Digests {
            db,
            home,
            now,
            from,
            to,
            slice,
        } => {
            b.push(DIGESTS);
            put_text(&mut b, db);
            put_var(&mut b, u64::from(*home));
            for t in [now, from, to, slice] {
                put_var(&mut b, zigzag(*t));
            }
        }
        Request::HomeSamples {
            db,
            home,
            now,
            from,
            to,
            after,
            limit,
        } => {
            b.push(HOME_SAMPLES);
            put_text(&mut b, db);
            put_var(&mut b, u64::from(*home));
            for t in [now, from, to] {
                put_var(&mut b, zigzag(*t));
            }
            match after {
                Some((k, t)) => {
                    b.push(1);
                    put_text(&mut b, k);
                    put_var(&mut b, zigzag(*t));
                }
                None => b.push(0),
            }
            put_var(&mut b, *limit);
        }
        Request::Keys { sets } => {
            b.push(KEYS);
            put_var(&mut b, sets.len() as u64);
            for set in sets {
                put_matchers(&mut b, set);
            }
        }
    }
    b
}

fn put_series(b: &mut Vec<u8>, series: &[SeriesSamples]) {
    put_var(b, series.len() as u64);
    for s in series {
        put_text(b, &s.key);
        match &s.group {
            Some(g) => {
                b.push(1);
                put_text(b, g);
            }
            None => b.push(0),
        }
        put_points(b, s.samples.len(), |i| {
            (s.samples[i].ts, s.samples[i].value)
        });
    }
}

fn put_matchers(b: &mut Vec<u8>, matchers: &[MatcherSpec]) {
    put_var(b, matchers.len() as u64);
    for m in matchers {
        put_text(b, &m.label);
        put_text(b, &m.op);
        put_text(b, &m.value);
    }
}

pub fn encode_reply(r: &Reply) -> Vec<u8> {
    let mut b = vec![VERSION];
    match r {
        Reply::Written(w) => {
            b.push(WRITTEN);
            for n in [w.written, w.too_old, w.too_new, w.bad_series] {
                put_var(&mut b, n);
            }
        }
        Reply::Series(found) => {
            b.push(SERIES);
            put_var(&mut b, found.len() as u64);
            for f in found {
                put_text(&mut b, &f.key);
                put_points(&mut b, f.points.len(), |i| f.points[i]);
            }
        }
        Reply::Keys(keys) => {
            b.push(KEY_LIST);
            put_var(&mut b, keys.len() as u64);
            for k in keys {
                put_text(&mut b, k);
            }
        }
        Reply::Digests(slices) => {
            b.push(SLICE_DIGESTS);
            put_var(&mut b, slices.len() as u64);
            for (start, digest, samples) in slices {
                put_var(&mut b, zigzag(*start));
                b.extend_from_slice(&digest.to_le_bytes());
                put_var(&mut b, *samples);
            }
        }
        Reply::Samples { series, more } => {
            b.push(SAMPLES);
            put_series(&mut b, series);
            b.push(u8::from(*more));
        }
        Reply::Failed { kind, text } => {
            b.push(FAILED);
            b.push(match kind {
                FailKind::Invalid => 0,
                FailKind::Busy => 1,
                FailKind::Failed => 2,
            });
            put_text(&mut b, text);
        }
    }
    b
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, MsgError> {
        let (&x, rest) = self.0.split_first().ok_or(MsgError::Short)?;
        self.0 = rest;
        Ok(x)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], MsgError> {
        if self.0.len() < n {
            return Err(MsgError::Short);
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn var(&mut self) -> Result<u64, MsgError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let x = self.u8()?;
            let bits = u64::from(x & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(MsgError::Malformed("varint past 64 bits"));
            }
            v |= bits << shift;
            if x & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(MsgError::Malformed("varint past 64 bits"))
    }
    fn home(&mut self) -> Result<u32, MsgError> {
        u32::try_from(self.var()?).map_err(|_| MsgError::Malformed("partition"))
    }
    fn i64(&mut self) -> Result<i64, MsgError> {
        Ok(unzigzag(self.var()?))
    }
    /// A count of items each at least `min_bytes` long: never more than
    /// the bytes left could hold (so a forged count allocates nothing).
    fn count(&mut self, min_bytes: usize) -> Result<usize, MsgError> {
        let n = usize::try_from(self.var()?).map_err(|_| MsgError::Short)?;
        if n.saturating_mul(min_bytes.max(1)) > self.0.len() {
            return Err(MsgError::Short);
        }
        Ok(n)
    }
    fn text(&mut self) -> Result<String, MsgError> {
        let n = self.count(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| MsgError::Malformed("not UTF-8"))
    }
    fn points(&mut self) -> Result<Vec<(i64, f64)>, MsgError> {
        let n = self.count(9)?;
        let mut times = Vec::with_capacity(n.min(PREALLOCATE));
        let mut last = 0i64;
        for _ in 0..n {
            last = last.wrapping_add(self.i64()?);
            times.push(last);
        }
        let values = self.take(n * 8)?;
        Ok(times
            .into_iter()
            .zip(values.chunks_exact(8))
            .map(|(t, v)| {
                (
                    t,
                    f64::from_bits(u64::from_le_bytes(v.try_into().expect("8"))),
                )
            })
            .collect())
    }
    fn series(&mut self) -> Result<Vec<SeriesSamples>, MsgError> {
        let m = self.count(3)?;
        let mut series = Vec::with_capacity(m.min(PREALLOCATE));
        for _ in 0..m {
            let key = self.text()?;
            let group = match self.u8()? {
                0 => None,
                1 => Some(self.text()?),
                _ => return Err(MsgError::Malformed("group flag")),
            };
            let samples = self
                .points()?
                .into_iter()
                .map(|(ts, value)| Sample { ts, value })
                .collect();
            series.push(SeriesSamples {
                key,
                group,
                samples,
            });
        }
        Ok(series)
    }

    fn matchers(&mut self) -> Result<Vec<MatcherSpec>, MsgError> {
        let n = self.count(3)?;
        let mut matchers = Vec::with_capacity(n.min(PREALLOCATE));
        for _ in 0..n {
            matchers.push(MatcherSpec {
                label: self.text()?,
                op: self.text()?,
                value: self.text()?,
            });
        }
        Ok(matchers)
    }
    fn end(&self) -> Result<(), MsgError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(MsgError::Malformed("bytes after the message"))
        }
    }
}

fn open(b: &[u8]) -> Result<(u8, Reader<'_>), MsgError> {
    let mut r = Reader(b);
    let v = r.u8()?;
    if v != VERSION {
        return Err(MsgError::Version(v));
    }
    let kind = r.u8()?;
    Ok((kind, r))
}

pub fn decode_request(b: &[u8]) -> Result<Request, MsgError> {
    let (kind, mut r) = open(b)?;
    let req = match kind {
        WRITE => {
            let db = r.text()?;
            let now = r.i64()?;
            let n = r.count(2)?;
            let mut parts = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let home = r.home()?;
                let series = r.series()?;
                parts.push(Part { home, series });
            }
            Request::Write { db, now, parts }
        }
        SELECT => {
            let matchers = r.matchers()?;
            Request::Select {
                matchers,
                mint: r.i64()?,
                maxt: r.i64()?,
                now: r.i64()?,
            }
        }
        DATABASES => Request::Databases,
        HANDOFF => Request::Handoff {
            db: r.text()?,
            now: r.i64()?,
            series: r.series()?,
        },
        DIGESTS => Request::Digests {
            db: r.text()?,
            home: r.home()?,
            now: r.i64()?,
            from: r.i64()?,
            to: r.i64()?,
            slice: r.i64()?,
        },
        HOME_SAMPLES => Request::HomeSamples {
            db: r.text()?,
            home: r.home()?,
            now: r.i64()?,
            from: r.i64()?,
            to: r.i64()?,
            after: match r.u8()? {
                0 => None,
                1 => Some((r.text()?, r.i64()?)),
                _ => return Err(MsgError::Malformed("cursor flag")),
            },
            limit: r.var()?,
        },
        KEYS => {
            let n = r.count(1)?;
            let mut sets = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                sets.push(r.matchers()?);
            }
            Request::Keys { sets }
        }
        other => return Err(MsgError::Kind(other)),
    };
    r.end()?;
    Ok(req)
}

pub fn decode_reply(b: &[u8]) -> Result<Reply, MsgError> {
    let (kind, mut r) = open(b)?;
    let reply = match kind {
        WRITTEN => Reply::Written(Written {
            written: r.var()?,
            too_old: r.var()?,
            too_new: r.var()?,
            bad_series: r.var()?,
        }),
        SERIES => {
            let n = r.count(2)?;
            let mut found = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                found.push(Found {
                    key: r.text()?,
                    points: r.points()?,
                });
            }
            Reply::Series(found)
        }
        KEY_LIST => {
            let n = r.count(1)?;
            let mut keys = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                keys.push(r.text()?);
            }
            Reply::Keys(keys)
        }
        SLICE_DIGESTS => {
            let n = r.count(10)?;
            let mut slices = Vec::with_capacity(n.min(PREALLOCATE));
            for _ in 0..n {
                let start = r.i64()?;
                let digest = u64::from_le_bytes(r.take(8)?.try_into().expect("8"));
                slices.push((start, digest, r.var()?));
            }
            Reply::Digests(slices)
        }
        SAMPLES => Reply::Samples {
            series: r.series()?,
            more: match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(MsgError::Malformed("more flag")),
            },
        },
        FAILED => {
            let kind = match r.u8()? {
                0 => FailKind::Invalid,
                1 => FailKind::Busy,
                2 => FailKind::Failed,
                _ => return Err(MsgError::Malformed("failure kind")),
            };
            Reply::Failed {
                kind,
                text: r.text()?,
            }
        }
        other => return Err(MsgError::Kind(other)),
    };
    r.end()?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write() -> Request {
        Request::Write {
            db: "telegraf".into(),
            now: 1_700_000_000_000_000_000,
            parts: vec![
                Part {
                    home: 17,
                    series: vec![
                        SeriesSamples {
                            key: "cpu{host=\"a\"}".into(),
                            group: Some("cpu,host=a".into()),
                            samples: vec![
                                Sample { ts: 5, value: 1.5 },
                                Sample {
                                    ts: -3,
                                    value: f64::NAN,
                                },
                                Sample {
                                    ts: i64::MAX,
                                    value: -0.0,
                                },
                            ],
                        },
                        SeriesSamples {
                            key: "up".into(),
                            group: None,
                            samples: vec![],
                        },
                    ],
                },
                Part {
                    home: 0,
                    series: vec![],
                },
            ],
        }
    }

    #[test]
    fn requests_and_replies_round_trip() {
        let w = write();
        let back = decode_request(&encode_request(&w)).unwrap();
        // NaN is not equal to itself: compare the bytes again.
        assert_eq!(encode_request(&back), encode_request(&w));
        let s = Request::Select {
            matchers: vec![MatcherSpec {
                label: "__name__".into(),
                op: "=~".into(),
                value: "cpu.*".into(),
            }],
            mint: -5,
            maxt: 99,
            now: 7,
        };
        assert_eq!(decode_request(&encode_request(&s)).unwrap(), s);
        let k = Request::Keys {
            sets: vec![
                vec![],
                vec![MatcherSpec {
                    label: "db".into(),
                    op: "!=".into(),
                    value: "".into(),
                }],
            ],
        };
        assert_eq!(decode_request(&encode_request(&k)).unwrap(), k);
        let h = Request::Handoff {
            db: "d".into(),
            now: -1,
            series: vec![SeriesSamples {
                key: "k".into(),
                group: None,
                samples: vec![Sample { ts: 3, value: 0.5 }],
            }],
        };
        assert_eq!(decode_request(&encode_request(&h)).unwrap(), h);
        let d = Request::Databases;
        assert_eq!(decode_request(&encode_request(&d)).unwrap(), d);
        let g = Request::Digests {
            db: "d".into(),
            home: u32::MAX,
            now: 9,
            from: i64::MIN,
            to: i64::MAX,
            slice: 3_600_000_000_000,
        };
        assert_eq!(decode_request(&encode_request(&g)).unwrap(), g);
        for after in [None, Some(("k{a=\"1\"}".to_string(), -7))] {
            let p = Request::HomeSamples {
                db: "d".into(),
                home: 3,
                now: 9,
                from: -1,
                to: 1 << 60,
                after,
                limit: 250_000,
            };
            assert_eq!(decode_request(&encode_request(&p)).unwrap(), p);
        }
        for r in [
            Reply::Keys(vec!["a{}".into(), "ü".into()]),
            Reply::Written(Written {
                written: 3,
                too_old: 1,
                too_new: 0,
                bad_series: u64::MAX,
            }),
            Reply::Series(vec![Found {
                key: "x".into(),
                points: vec![(1, 2.0), (i64::MIN, 3.0)],
            }]),
            Reply::Failed {
                kind: FailKind::Busy,
                text: "later".into(),
            },
            Reply::Digests(vec![(i64::MIN, u64::MAX, 0), (5, 1, 3)]),
            Reply::Samples {
                series: vec![SeriesSamples {
                    key: "k".into(),
                    group: Some("g".into()),
                    samples: vec![Sample { ts: 3, value: 0.5 }],
                }],
                more: true,
            },
        ] {
            assert_eq!(decode_reply(&encode_reply(&r)).unwrap(), r);
        }
    }

    #[test]
    fn every_cut_of_a_message_is_refused() {
        let b = encode_request(&write());
        for n in 0..b.len() {
            assert!(decode_request(&b[..n]).is_err(), "{n}");
        }
        let mut more = b.clone();
        more.push(0);
        assert!(decode_request(&more).is_err());
        let mut other = b;
        other[0] = 2;
        assert_eq!(decode_request(&other), Err(MsgError::Version(2)));
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_are_refused(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_request(&b);
            let _ = decode_reply(&b);
        }
    }
}
