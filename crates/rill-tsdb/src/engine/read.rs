//! Reading a series over a range: its stored blocks of the windows in
//! the range, the blocks cut and not yet stored, and the samples still
//! waiting in buffers, merged in that order (a later one winning on a
//! repeated time).

use super::{Engine, EngineError};
use crate::buffer::{window_of, Cut};
use crate::keys::block_key;
use rill_sensor::Sample;
use std::collections::BTreeMap;

/// What a read of one series over a range takes from memory: its id,
/// store, the range cut to what is kept, and its buffered and queued
/// samples of the range's windows.
pub(super) struct Sources {
    pub id: u64,
    pub store: std::sync::Arc<dyn crate::storage::BlockStore>,
    pub lo: i64,
    pub hi: i64,
    pub waiting: Vec<(i64, Vec<Sample>)>,
    pub unstored: Vec<Cut>,
}

impl Engine {
    /// The [`Sources`] of series `key` of `db` over `t0..=t1` at `now`;
    /// `None` when there is nothing to read. Call under `storing`.
    pub(super) fn sources(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
    ) -> Option<Sources> {
        let window_ns = self.opts.window_ns;
        let st = self.lock();
        let (Some(id), Some(d)) = (st.catalog.lookup(db, key), st.dbs.get(db)) else {
            return None;
        };
        let lo = t0.max(now.saturating_sub(d.retention_ns));
        let hi = t1.min(now.saturating_add(self.opts.max_future_ns));
        if lo > hi {
            return None;
        }
        let (w0, w1) = (window_of(lo, window_ns), window_of(hi, window_ns));
        let waiting = d.buffers.waiting_in(id, w0, w1);
        let unstored: Vec<Cut> = st
            .unstored
            .iter()
            .filter(|(name, c)| name == db && c.series == id && (w0..=w1).contains(&c.window))
            .map(|(_, c)| c.clone())
            .collect();
        Some(Sources {
            id,
            store: d.store.clone(),
            lo,
            hi,
            waiting,
            unstored,
        })
    }

    /// The samples of series `key` of `db` from `t0` to `t1` (both
    /// included), in time order; nothing older than the database's
    /// storage period at `now`.
    pub fn read(
        &self,
        db: &str,
        key: &str,
        t0: i64,
        t1: i64,
        now: i64,
    ) -> Result<Vec<Sample>, EngineError> {
        // No tick changes the stores while this reads them, so what it
        // takes from memory below and the stores agree.
        let _storing = self.storing.read().unwrap_or_else(|e| e.into_inner());
        let window_ns = self.opts.window_ns;
        let Some(Sources {
            id,
            store,
            lo,
            hi,
            waiting,
            unstored,
        }) = self.sources(db, key, t0, t1, now)
        else {
            return Ok(Vec::new());
        };
        let mut merged = BTreeMap::new();
        let mut w = window_of(lo, window_ns);
        let last = window_of(hi, window_ns);
        loop {
            for part in 0u32.. {
                let Some(bytes) = store.get(&block_key(id, w, part))? else {
                    break;
                };
                let damaged = |error| EngineError::Damaged {
                    series: key.to_string(),
                    window: w,
                    part,
                    error,
                };
                // A part wholly outside the range is not decoded (its
                // header says where it lies).
                let h = rill_sensor::block::header(&bytes).map_err(damaged)?;
                if h.last_ts < lo || h.first_ts > hi {
                    continue;
                }
                let (_, samples) = rill_sensor::block::decode(&bytes).map_err(damaged)?;
                merged.extend(samples.into_iter().map(|s| (s.ts, s.value)));
            }
            for c in unstored.iter().filter(|c| c.window == w) {
                merged.extend(c.samples.iter().map(|s| (s.ts, s.value)));
            }
            if let Some((_, samples)) = waiting.iter().find(|(ww, _)| *ww == w) {
                merged.extend(samples.iter().map(|s| (s.ts, s.value)));
            }
            match w.checked_add(window_ns) {
                Some(next) if w < last => w = next,
                _ => break,
            }
        }
        Ok(merged
            .range(lo..=hi)
            .map(|(&ts, &value)| Sample { ts, value })
            .collect())
    }
}

/// The engine as a query's source: series of every database, a series
/// written to two databases read as one; times in ms (samples within one
/// millisecond keep the last).
pub struct QuerySource<'a> {
    pub engine: &'a Engine,
    /// Now, ns (what is older than a storage period is not read).
    pub now: i64,
}

impl crate::promql::eval::Source for QuerySource<'_> {
    fn fetch(
        &self,
        matchers: &[crate::select::Matcher],
        start: i64,
        end: i64,
    ) -> Result<crate::promql::eval::Fetched, String> {
        let (from, to) = (
            start.saturating_mul(1_000_000),
            end.saturating_mul(1_000_000).saturating_add(999_999),
        );
        let mut by_key: BTreeMap<String, (rill_sensor::Series, BTreeMap<i64, f64>)> =
            BTreeMap::new();
        for (db, series) in self.engine.select(matchers) {
            let key = series.key();
            let samples = self
                .engine
                .read(&db, &key, from, to, self.now)
                .map_err(|e| e.to_string())?;
            let slot = by_key
                .entry(key)
                .or_insert_with(|| (series, BTreeMap::new()));
            slot.1.extend(
                samples
                    .into_iter()
                    .map(|s| (s.ts.div_euclid(1_000_000), s.value)),
            );
        }
        Ok(by_key
            .into_values()
            .filter(|(_, v)| !v.is_empty())
            .map(|(s, v)| (s, v.into_iter().collect()))
            .collect())
    }
}
