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
const SELECT_DIGESTS: u8 = 8;
const SELECT_RANGES: u8 = 9;
const WRITTEN: u8 = 16;
const SERIES: u8 = 17;
const FAILED: u8 = 18;
const KEY_LIST: u8 = 19;
const SLICE_DIGESTS: u8 = 20;
const SAMPLES: u8 = 21;
const SERIES_DIGESTS: u8 = 22;

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
    /// As `Select`, but each series' digest instead of its samples (a
    /// digest read: the asker fetches samples only where its own
    /// differ).
    SelectDigests {
        matchers: Vec<MatcherSpec>,
        mint: i64,
        maxt: i64,
        now: i64,
    },
    /// As `Select`, for each item the series of its key from its first
    /// to its last ms (what a digest read fetches).
    SelectRanges {
        items: Vec<(String, i64, i64)>,
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

/// A series a digest read found: its key; the homes (indices into the
/// answer's [`HomeKept`]s: its database and home partition, one per
/// database holding it) whose kept slices stand for its points before
/// `from`; and how many points it has from `from` (ms) to the range's
/// end, with their digest (`crate::digest_read::points_digest`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundDigest {
    pub key: String,
    pub homes: Vec<u32>,
    pub from: i64,
    pub points: u64,
    pub digest: u64,
}

/// A home partition's kept slice digests as a digest read offers them:
/// from the slice holding the range's start on, as long as they are
/// kept; each (start ns, digest, samples) as anti-entropy computes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeKept {
    pub db: String,
    pub home: u32,
    /// The slice length (ns).
    pub slice: i64,
    pub slices: Vec<(i64, u64, u64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Written(Written),
    /// Sorted by key.
    Series(Vec<Found>),
    /// A digest read's answer: series sorted by key.
    SeriesDigests {
        homes: Vec<HomeKept>,
        series: Vec<FoundDigest>,
    },
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
            Reply::SeriesDigests { series, .. } => format!("digests of {} series", series.len()),
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
        }
        | Request::SelectDigests {
            matchers,
            mint,
            maxt,
            now,
        } => {
            b.push(if matches!(r, Request::Select { .. }) {
                SELECT
            } else {
                SELECT_DIGESTS
            });
            put_matchers(&mut b, matchers);
            for t in [mint, maxt, now] {
                put_var(&mut b, zigzag(*t));
            }
        }
        Request::SelectRanges { items, now } => {
            b.push(SELECT_RANGES);
            put_var(&mut b, items.len() as u64);
            for (key, mint, maxt) in items {
                put_text(&mut b, key);
                put_var(&mut b, zigzag(*mint));
                put_var(&mut b, zigzag(*maxt));
            }
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
        Reply::SeriesDigests { homes, series } => {
            b.push(SERIES_DIGESTS);
            put_var(&mut b, homes.len() as u64);
            for h in homes {
                put_text(&mut b, &h.db);
                put_var(&mut b, u64::from(h.home));
                put_var(&mut b, zigzag(h.slice));
                put_var(&mut b, h.slices.len() as u64);
                for (start, digest, samples) in &h.slices {
                    put_var(&mut b, zigzag(*start));
                    b.extend_from_slice(&digest.to_le_bytes());
                    put_var(&mut b, *samples);
                }
            }
            put_var(&mut b, series.len() as u64);
            for f in series {
                put_text(&mut b, &f.key);
                put_var(&mut b, f.homes.len() as u64);
                for h in &f.homes {
                    put_var(&mut b, u64::from(*h));
                }
                put_var(&mut b, zigzag(f.from));
                put_var(&mut b, f.points);
                b.extend_from_slice(&f.digest.to_le_bytes());
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

mod decode;
pub use decode::{decode_reply, decode_request};

#[cfg(test)]
mod tests;
