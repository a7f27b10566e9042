//! The series a query selects: every series of the catalog, parsed
//! once and kept until the catalog changes, matched against selectors.

use super::Engine;
use rill_sensor::Series;
use std::sync::Arc;

/// Every series, parsed: (database, series), sorted.
pub(super) type ParsedSeries = Arc<Vec<(String, Series)>>;

impl Engine {
    /// Every (database, series) for which `keep` holds, sorted by
    /// database and key.
    pub fn select_where(&self, keep: impl Fn(&Series) -> bool) -> Vec<(String, Series)> {
        let all = self.parsed_series();
        all.iter().filter(|(_, s)| keep(s)).cloned().collect()
    }

    /// The series of every database that pass `matchers` (a series
    /// selector's: [`rill_promql::parse_selector`]), with their database,
    /// sorted by database and key.
    pub fn select(&self, matchers: &[rill_promql::Matcher]) -> Vec<(String, Series)> {
        self.select_where(|s| crate::prom_source::selects(matchers, s))
    }

    /// Every series, parsed, sorted by database and key: kept until the
    /// catalog changes (a series added, or a home's series removed when
    /// it left the node), so a query does not parse every key again.
    fn parsed_series(&self) -> ParsedSeries {
        let (generation, keys) = {
            let st = self.lock();
            let generation = st.catalog.generation();
            let cache = self.parsed.lock().unwrap_or_else(|e| e.into_inner());
            if cache.0 == generation {
                return cache.1.clone();
            }
            // Copied under the lock, parsed outside it (writers wait for it).
            let keys: Vec<(String, String)> = st
                .catalog
                .databases()
                .flat_map(|db| {
                    st.catalog
                        .keys(db)
                        .map(move |(k, _)| (db.to_string(), k.to_string()))
                })
                .collect();
            (generation, keys)
        };
        let mut out = Vec::with_capacity(keys.len());
        for (db, key) in keys {
            match Series::parse_key(&key) {
                Some(s) => out.push((db, s)),
                None => tracing::warn!(db, key, "a series key that does not parse is skipped"),
            }
        }
        out.sort_by_cached_key(|(db, s)| (db.clone(), s.key()));
        let out = Arc::new(out);
        *self.parsed.lock().unwrap_or_else(|e| e.into_inner()) = (generation, out.clone());
        out
    }
}
