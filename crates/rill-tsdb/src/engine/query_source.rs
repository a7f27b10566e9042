//! The engine as a query's source: the series the matchers select in
//! every database, each read over the query's range, times in ms.

use super::{Engine, EngineError};
use crate::promql::eval::Points;
use crate::promql::SourceError;
use std::collections::BTreeMap;

/// The engine as a query's source: series of every database, a series
/// written to two databases read as one; times in ms (samples within one
/// millisecond keep the last).
pub struct QuerySource<'a> {
    pub engine: &'a Engine,
    /// Now, ns (what is older than a storage period is not read).
    pub now: i64,
    /// Samples the query's reads may decode, when bounded (a fetch that
    /// would pass it fails, the budget [spent](super::ReadBudget::spent)).
    pub budget: Option<&'a std::sync::Arc<super::ReadBudget>>,
}

impl crate::promql::eval::Source for QuerySource<'_> {
    fn charge(&self, work: usize) -> Result<(), SourceError> {
        match self.budget {
            Some(b) if !b.take(work) => Err(SourceError::Read(EngineError::OverBudget)),
            _ => Ok(()),
        }
    }

    fn fetch(
        &self,
        matchers: &[crate::select::Matcher],
        start: i64,
        end: i64,
    ) -> Result<crate::promql::eval::Fetched, SourceError> {
        let (from, to) = (
            start.saturating_mul(1_000_000),
            end.saturating_mul(1_000_000).saturating_add(999_999),
        );
        // Each database's samples of a key, in ms (the last within a ms
        // kept), merged when a key is in more than one (a later database
        // winning).
        // Per key: the series, its samples (ms), whether from several.
        type Slot = (rill_sensor::Series, Points, bool);
        let mut by_key: BTreeMap<String, Slot> = BTreeMap::new();
        for (db, series) in self.engine.select(matchers) {
            let key = series.key();
            let ms = self
                .engine
                .read_ms_within(&db, &key, from, to, self.now, self.budget)
                .map_err(|e| match e {
                    // Named for the client; a store's own error may name
                    // its files, so it goes to the log only.
                    EngineError::Damaged { .. } | EngineError::OverBudget => SourceError::Read(e),
                    other => {
                        tracing::error!(error = %other, "a sensor read failed");
                        SourceError::Unreadable(other)
                    }
                })?;
            match by_key.get_mut(&key) {
                None => {
                    by_key.insert(key, (series, ms, false));
                }
                Some(slot) => {
                    slot.1.ts.extend(ms.ts);
                    slot.1.v.extend(ms.v);
                    slot.2 = true;
                }
            }
        }
        Ok(by_key
            .into_values()
            .filter(|(_, v, _)| !v.is_empty())
            .map(|(s, v, several)| {
                if several {
                    let merged: BTreeMap<i64, f64> = v.iter().collect();
                    (s, merged.into_iter().collect())
                } else {
                    (s, v)
                }
            })
            .collect())
    }
}
