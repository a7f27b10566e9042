//! The engine as a query's source: the series the matchers select in
//! every database, each read over the query's range, times in ms.

use super::{Engine, EngineError};
use crate::promql::eval::Points;
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
    fn charge(&self, work: usize) -> Result<(), String> {
        match self.budget {
            Some(b) if !b.take(work) => Err(EngineError::OverBudget.to_string()),
            _ => Ok(()),
        }
    }

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
        // Each database's samples of a key, in ms (the last within a ms
        // kept), merged when a key is in more than one (a later database
        // winning).
        // Per key: the series, its samples (ms), whether from several.
        type Slot = (rill_sensor::Series, Points, bool);
        let mut by_key: BTreeMap<String, Slot> = BTreeMap::new();
        for (db, series) in self.engine.select(matchers) {
            let key = series.key();
            let samples = self
                .engine
                .read_points_within(&db, &key, from, to, self.now, self.budget)
                .map_err(|e| match e {
                    // Named for the client; a store's own error may name
                    // its files, so it goes to the log only.
                    EngineError::Damaged { .. } | EngineError::OverBudget => e.to_string(),
                    other => {
                        tracing::error!(error = %other, "a sensor read failed");
                        "a sensor series could not be read (the node's log says why)".into()
                    }
                })?;
            let ms = to_ms(samples);
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

/// Points in ns (rising) as points in ms, the last within a ms kept.
fn to_ms(mut ms: Points) -> Points {
    // One pass: each time floored to its ms (after 1970, an unsigned
    // division: cheaper), and whether they still rise.
    let mut rising = true;
    let mut prev = i64::MIN;
    for t in &mut ms.ts {
        let m = match u64::try_from(*t) {
            Ok(u) => (u / 1_000_000) as i64,
            Err(_) => t.div_euclid(1_000_000),
        };
        rising &= m > prev;
        prev = m;
        *t = m;
    }
    // Samples a ms apart at least (the usual case) need nothing more.
    if rising {
        return ms;
    }
    let mut kept = 0;
    for i in 0..ms.ts.len() {
        if kept > 0 && ms.ts[kept - 1] == ms.ts[i] {
            ms.v[kept - 1] = ms.v[i];
        } else {
            ms.ts[kept] = ms.ts[i];
            ms.v[kept] = ms.v[i];
            kept += 1;
        }
    }
    ms.ts.truncate(kept);
    ms.v.truncate(kept);
    ms
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_sensor::Sample;

    proptest::proptest! {
        /// Points in ms are the samples' times floored to a ms, the last
        /// sample within a ms winning.
        #[test]
        fn points_in_ms_keep_the_last_within_a_ms(
            steps in proptest::collection::vec((1i64..3_000_000, -5i32..5), 0..40),
            start in -10_000_000i64..10_000_000,
        ) {
            let mut t = start;
            let samples: Vec<Sample> = steps
                .iter()
                .map(|&(d, v)| {
                    t += d;
                    Sample { ts: t, value: f64::from(v) }
                })
                .collect();
            let mut want: BTreeMap<i64, f64> = BTreeMap::new();
            for s in &samples {
                want.insert(s.ts.div_euclid(1_000_000), s.value);
            }
            let got = to_ms(samples.iter().map(|s| (s.ts, s.value)).collect());
            proptest::prop_assert_eq!(got.iter().collect::<Vec<_>>(), want.into_iter().collect::<Vec<_>>());
        }

    }
}
