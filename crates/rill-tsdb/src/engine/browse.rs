//! What a page drawing sensors asks: series whose key holds some words,
//! and a series over a range cut into buckets (one per pixel), each with
//! its count, sum, minimum, maximum, first and last sample: M4
//! downsampling. A stored block whose samples all fall in one bucket,
//! and that no other block, queued block or buffered sample of its window
//! overlaps in time, is taken from its header (count, sum, min, max,
//! first, last) without decoding its samples.

use super::{Engine, EngineError};
use rill_sensor::block::Header;
use rill_sensor::Sample;

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
    /// of `words` (every series for none), ignoring case, sorted: at most
    /// `limit` from the `offset`-th, and how many there are in all.
    pub fn search(&self, words: &[&str], offset: usize, limit: usize) -> (Vec<String>, usize) {
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
        let total = out.len();
        let page = out.into_iter().skip(offset).take(limit).collect();
        (page, total)
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
        let Some(src) = self.sources(db, key, t0, t1 - 1, now) else {
            return Ok(out);
        };
        let (lo, hi) = (src.lo, src.hi);
        for w in src.windows(self.opts.window_ns) {
            let parts = src.parts(key, w)?;
            let loose: Vec<&[Sample]> = src.loose(w).collect();
            // Whether anything of the window but part `skip` has a sample
            // in `a..=b`.
            let overlaps = |a: i64, b: i64, skip: u32| {
                parts
                    .iter()
                    .any(|p| p.number != skip && p.header.first_ts <= b && a <= p.header.last_ts)
                    || loose
                        .iter()
                        .any(|s| s.iter().any(|x| (a..=b).contains(&x.ts)))
            };
            // What is not summed from a header, in the order a later run
            // wins.
            let mut runs: Vec<Vec<Sample>> = Vec::new();
            for p in &parts {
                if p.outside(lo, hi) {
                    continue; // not even decoded
                }
                let h = &p.header;
                let one = out
                    .index(h.first_ts)
                    .filter(|&i| Some(i) == out.index(h.last_ts));
                match one {
                    Some(i)
                        if lo <= h.first_ts
                            && h.last_ts <= hi
                            && !overlaps(h.first_ts, h.last_ts, p.number) =>
                    {
                        out.add(i, &Bucket::of_header(h));
                        out.from_headers += 1;
                    }
                    _ => {
                        runs.push(p.decode(src.id, key, w)?);
                        out.decoded += 1;
                    }
                }
            }
            runs.extend(loose.iter().map(|s| s.to_vec()));
            let mut merged = Vec::new();
            super::merge::merge_runs(runs, &mut merged);
            for s in merged.into_iter().filter(|s| (lo..=hi).contains(&s.ts)) {
                if let Some(i) = out.index(s.ts) {
                    out.add(i, &Bucket::of(s));
                }
            }
        }
        Ok(out)
    }
}
