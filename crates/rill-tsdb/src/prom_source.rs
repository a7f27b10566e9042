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
    /// Read on the calling thread only (`Engine::read_ms_within`).
    pub one_core: bool,
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

impl PromSource<'_> {
    /// Series `key`'s samples in database `db` from `from` to `to` ns,
    /// with a reason a client may read when the read fails.
    fn read(&self, db: &str, key: &str, from: i64, to: i64) -> Result<crate::Points, String> {
        self.engine
            .read_ms_within(db, key, from, to, self.now, self.budget, self.one_core)
            .map_err(|e| match e {
                // Named for the client; a store's own error may name its
                // files, so it goes to the log only.
                EngineError::Damaged { .. } | EngineError::OverBudget => e.to_string(),
                other => {
                    tracing::error!(error = %other, "a sensor read failed");
                    "a sensor read failed: see the node's log".to_string()
                }
            })
    }
}

impl rill_promql::eval::Source for PromSource<'_> {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        let mut out = Vec::new();
        self.select_each(matchers, mint, maxt, &mut |s| {
            out.push(s);
            true
        })?;
        Ok(out)
    }

    /// Series by series in key order, each read when it is its turn: a
    /// query over many series holds one series' samples at a time.
    fn select_each(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        each: &mut dyn FnMut(Series) -> bool,
    ) -> Result<(), String> {
        self.select_where_each(&|s| selects(matchers, s), mint, maxt, each)
    }
}

impl PromSource<'_> {
    /// [`select_each`](rill_promql::eval::Source::select_each) of the
    /// series `keep` takes.
    pub fn select_where_each(
        &self,
        keep: &dyn Fn(&rill_sensor::Series) -> bool,
        mint: i64,
        maxt: i64,
        each: &mut dyn FnMut(Series) -> bool,
    ) -> Result<(), String> {
        let (from, to) = (
            mint.saturating_mul(1_000_000),
            maxt.saturating_mul(1_000_000).saturating_add(999_999),
        );
        // A series written to two databases is read as one (the later
        // database's sample winning within a ms).
        let mut by_key: BTreeMap<String, (Labels, Vec<String>)> = BTreeMap::new();
        for (db, series) in self.engine.select_where(keep) {
            by_key
                .entry(series.key())
                .or_insert_with(|| (labels_of(&series), Vec::new()))
                .1
                .push(db);
        }
        for (key, (labels, dbs)) in by_key {
            let points = self.points_of(&key, &dbs, from, to)?;
            if points.is_empty() {
                continue;
            }
            if !each(Series { labels, points }) {
                break;
            }
        }
        Ok(())
    }

    /// Each item's series (by key, every database) from its first to its
    /// last ms, in the order given, with its points (none, if it has
    /// none there). Keys are looked up, not searched for.
    pub fn select_ranges(
        &self,
        items: &[(String, i64, i64)],
        each: &mut dyn FnMut(&str, Vec<Point>) -> bool,
    ) -> Result<(), String> {
        let mut dbs: std::collections::HashMap<&str, Vec<String>> =
            std::collections::HashMap::new();
        for (key, mint, maxt) in items {
            let (from, to) = (
                mint.saturating_mul(1_000_000),
                maxt.saturating_mul(1_000_000).saturating_add(999_999),
            );
            let d = dbs.entry(key.as_str()).or_insert_with(|| {
                // In order, as a select reads them (the later
                // database's sample wins within a ms).
                let mut d = self.engine.databases_with(key);
                d.sort();
                d
            });
            let points = if d.is_empty() {
                Vec::new()
            } else {
                self.points_of(key, d, from, to)?
            };
            if !each(key, points) {
                break;
            }
        }
        Ok(())
    }

    /// Series `key`'s points from `from` to `to` ns in the databases
    /// `dbs` (a series written to two is read as one, the later
    /// database's sample winning within a ms).
    fn points_of(
        &self,
        key: &str,
        dbs: &[String],
        from: i64,
        to: i64,
    ) -> Result<Vec<Point>, String> {
        Ok(if let [db] = dbs {
            let got = self.read(db, key, from, to)?;
            got.iter().map(|(t, v)| Point { t, v }).collect()
        } else {
            let mut merged: BTreeMap<i64, f64> = BTreeMap::new();
            for db in dbs {
                merged.extend(self.read(db, key, from, to)?.iter());
            }
            merged.into_iter().map(|(t, v)| Point { t, v }).collect()
        })
    }
}
