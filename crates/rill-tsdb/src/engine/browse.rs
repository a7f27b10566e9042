//! What a page drawing sensors asks: series whose key holds some words,
//! and a series over a range cut into buckets (one per pixel), each with
//! its count, sum, minimum, maximum, first and last sample: M4
//! downsampling. A stored block whose samples all fall in one bucket,
//! and that no other block, queued block or buffered sample of its window
//! overlaps in time, is taken from its header (count, sum, min, max,
//! first, last) without decoding its samples.

use super::{Engine, EngineError};
use crate::buffer::window_of;
use crate::keys::block_key;
use rill_sensor::block::Header;
use rill_sensor::Sample;
use std::collections::BTreeMap;

/// One bucket's samples, summed up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    /// (time, value) of the first and the last sample.
    pub first: (i64, f64),
    pub last: (i64, f64),
}

impl Bucket {
    fn of(s: Sample) -> Bucket {
        Bucket {
            count: 1,
            sum: s.value,
            min: s.value,
            max: s.value,
            first: (s.ts, s.value),
            last: (s.ts, s.value),
        }
    }

    fn of_header(h: &Header) -> Bucket {
        Bucket {
            count: u64::from(h.count),
            sum: h.sum,
            min: h.min,
            max: h.max,
            first: (h.first_ts, h.first),
            last: (h.last_ts, h.last),
        }
    }

    fn add(&mut self, o: &Bucket) {
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        if o.first.0 < self.first.0 {
            self.first = o.first;
        }
        if o.last.0 > self.last.0 {
            self.last = o.last;
        }
    }
}

/// A series over `[t0, t0 + step * buckets.len())`, bucket `i` holding
/// the samples of `[t0 + i * step, t0 + (i + 1) * step)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    pub t0: i64,
    pub step: i64,
    pub buckets: Vec<Option<Bucket>>,
    pub samples: u64,
    /// Blocks summed up from their headers alone.
    pub from_headers: u64,
    /// Blocks whose samples were decoded.
    pub decoded: u64,
}

impl Buckets {
    fn new(t0: i64, t1: i64, n: usize) -> Buckets {
        let n = n.max(1);
        let span = (i128::from(t1) - i128::from(t0)).max(1);
        let step = ((span + n as i128 - 1) / n as i128).clamp(1, i128::from(i64::MAX)) as i64;
        let len = ((span + i128::from(step) - 1) / i128::from(step)) as usize;
        Buckets {
            t0,
            step,
            buckets: vec![None; len],
            ..Buckets::default()
        }
    }

    fn index(&self, ts: i64) -> Option<usize> {
        let i = (i128::from(ts) - i128::from(self.t0)).div_euclid(i128::from(self.step));
        (i >= 0 && (i as usize) < self.buckets.len()).then_some(i as usize)
    }

    /// Adds another database's buckets of the same range.
    pub fn merge(&mut self, o: &Buckets) {
        for (i, b) in o.buckets.iter().enumerate() {
            if let Some(b) = b {
                self.add(i, b);
            }
        }
        self.from_headers += o.from_headers;
        self.decoded += o.decoded;
    }

    fn add(&mut self, i: usize, b: &Bucket) {
        self.samples += b.count;
        match &mut self.buckets[i] {
            Some(have) => have.add(b),
            slot => *slot = Some(*b),
        }
    }
}

impl Engine {
    /// The keys of series (of any database, each once) holding every one
    /// of `words`, ignoring case; at most `limit`, sorted.
    pub fn search(&self, words: &[&str], limit: usize) -> Vec<String> {
        let words: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        // Copied under the lock, searched outside it (writers wait for it).
        let keys: Vec<String> = {
            let st = self.lock();
            st.catalog
                .databases()
                .flat_map(|db| st.catalog.keys(db).map(|(k, _)| k.to_string()))
                .collect()
        };
        let mut out: Vec<String> = keys
            .into_iter()
            .filter(|k| {
                let lower = k.to_lowercase();
                words.iter().all(|w| lower.contains(w.as_str()))
            })
            .collect();
        out.sort();
        out.dedup();
        out.truncate(limit);
        out
    }

    /// The databases holding a series of key `key`.
    pub fn databases_with(&self, key: &str) -> Vec<String> {
        let st = self.lock();
        st.catalog
            .databases()
            .filter(|db| st.catalog.lookup(db, key).is_some())
            .map(str::to_string)
            .collect()
    }

    /// Series `key` of `db` from `t0` to `t1` (ns, `t1` excluded) in
    /// `n` buckets (the last may be shorter); nothing older than the
    /// database's storage period at `now`.
    pub fn read_buckets(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        n: usize,
        now: i64,
    ) -> Result<Buckets, EngineError> {
        let mut out = Buckets::new(t0, t1, n);
        let _storing = self.storing.read().unwrap_or_else(|e| e.into_inner());
        let window_ns = self.opts.window_ns;
        let Some(super::read::Sources {
            id,
            store,
            lo,
            hi,
            waiting,
            unstored,
        }) = self.sources(db, key, t0, t1 - 1, now)
        else {
            return Ok(out);
        };
        let damaged = |w: i64, part: u32, error| EngineError::Damaged {
            series: key.to_string(),
            window: w,
            part,
            error,
        };
        let mut w = window_of(lo, window_ns);
        let last = window_of(hi, window_ns);
        loop {
            // The window's sources, in the order a later one wins.
            let mut parts: Vec<(u32, Header, Vec<u8>)> = Vec::new();
            for part in 0u32.. {
                let Some(bytes) = store.get(&block_key(id, w, part))? else {
                    break;
                };
                let h = rill_sensor::block::header(&bytes).map_err(|e| damaged(w, part, e))?;
                parts.push((part, h, bytes));
            }
            let mut loose: Vec<&[Sample]> = Vec::new();
            for c in unstored.iter().filter(|c| c.window == w) {
                loose.push(&c.samples);
            }
            if let Some((_, samples)) = waiting.iter().find(|(ww, _)| *ww == w) {
                loose.push(samples);
            }
            let overlaps = |a: i64, b: i64, skip: u32| {
                parts
                    .iter()
                    .any(|(p, h, _)| *p != skip && h.first_ts <= b && a <= h.last_ts)
                    || loose
                        .iter()
                        .any(|s| s.iter().any(|x| (a..=b).contains(&x.ts)))
            };
            let mut merged: BTreeMap<i64, f64> = BTreeMap::new();
            for (part, h, bytes) in &parts {
                if h.last_ts < lo || h.first_ts > hi {
                    continue; // outside the range: not even decoded
                }
                let one = out
                    .index(h.first_ts)
                    .filter(|&i| Some(i) == out.index(h.last_ts));
                match one {
                    Some(i)
                        if lo <= h.first_ts
                            && h.last_ts <= hi
                            && !overlaps(h.first_ts, h.last_ts, *part) =>
                    {
                        out.add(i, &Bucket::of_header(h));
                        out.from_headers += 1;
                    }
                    _ => {
                        let (_, samples) =
                            rill_sensor::block::decode(bytes).map_err(|e| damaged(w, *part, e))?;
                        out.decoded += 1;
                        merged.extend(samples.into_iter().map(|s| (s.ts, s.value)));
                    }
                }
            }
            for s in loose {
                merged.extend(s.iter().map(|x| (x.ts, x.value)));
            }
            for (&ts, &value) in merged.range(lo..=hi) {
                if let Some(i) = out.index(ts) {
                    out.add(i, &Bucket::of(Sample { ts, value }));
                }
            }
            match w.checked_add(window_ns) {
                Some(next) if w < last => w = next,
                _ => break,
            }
        }
        Ok(out)
    }
}
