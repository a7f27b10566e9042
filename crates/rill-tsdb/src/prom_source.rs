//! The engine as the source of `rill-promql`'s evaluator: the series
//! every database holds that the matchers select, each read over the
//! range asked, times in ms (of samples within one ms, the last).

use crate::engine::{Engine, EngineError, ReadBudget};
use rill_promql::value::{Labels, Point, Series};
use rill_promql::Matcher;
use std::collections::BTreeMap;
use std::sync::Arc;

pub struct PromSource<'a> {
    pub engine: &'a Engine,
    /// Now, ns (what is older than a database's storage period is not
    /// read).
    pub now: i64,
    /// Samples the query's reads may decode, when bounded (a read that
    /// would pass it fails).
    pub budget: Option<&'a Arc<ReadBudget>>,
}

/// A stored series' labels as a query sees them: its name as
/// `__name__`.
pub fn labels_of(s: &rill_sensor::Series) -> Labels {
    let mut pairs: Vec<(String, String)> = s.labels.clone();
    if !s.name.is_empty() {
        pairs.push(("__name__".to_string(), s.name.clone()));
    }
    Labels::new(pairs)
}

/// Whether the stored series passes every matcher.
pub fn selects(matchers: &[Matcher], s: &rill_sensor::Series) -> bool {
    matchers.iter().all(|m| {
        let v = if m.label == "__name__" {
            s.name.as_str()
        } else {
            s.label(&m.label).unwrap_or("")
        };
        m.matches(v)
    })
}

impl rill_promql::eval::Source for PromSource<'_> {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        let (from, to) = (
            mint.saturating_mul(1_000_000),
            maxt.saturating_mul(1_000_000).saturating_add(999_999),
        );
        // A series written to two databases is read as one (the later
        // database's sample winning within a ms).
        let mut by_key: BTreeMap<String, (Labels, Vec<crate::Points>)> = BTreeMap::new();
        for (db, series) in self.engine.select_where(|s| selects(matchers, s)) {
            let key = series.key();
            let got = self
                .engine
                .read_ms_within(&db, &key, from, to, self.now, self.budget)
                .map_err(|e| match e {
                    // Named for the client; a store's own error may name
                    // its files, so it goes to the log only.
                    EngineError::Damaged { .. } | EngineError::OverBudget => e.to_string(),
                    other => {
                        tracing::error!(error = %other, "a sensor read failed");
                        "a sensor read failed: see the node's log".to_string()
                    }
                })?;
            if got.is_empty() {
                continue;
            }
            by_key
                .entry(key)
                .or_insert_with(|| (labels_of(&series), Vec::new()))
                .1
                .push(got);
        }
        Ok(by_key
            .into_values()
            .map(|(labels, mut reads)| {
                let points = if reads.len() == 1 {
                    let p = reads.pop().expect("one");
                    p.iter().map(|(t, v)| Point { t, v }).collect()
                } else {
                    let merged: BTreeMap<i64, f64> = reads.iter().flat_map(|p| p.iter()).collect();
                    merged.into_iter().map(|(t, v)| Point { t, v }).collect()
                };
                Series { labels, points }
            })
            .collect())
    }
}
