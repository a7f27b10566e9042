//! What the sensor simulation holds to: a query's answer against what
//! was written and acknowledged, and the owners' replicas after the heal.

use super::{key, name, SensorSim, DB};
use rill_sensor_cluster::handoff::owners;
use rill_sensor_cluster::{merge, route};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SensorViolation {
    #[error("a query through {node} at tick {tick}, not partial, lacks {series} at {ts}")]
    Missing {
        node: String,
        tick: u64,
        series: String,
        ts: i64,
    },
    #[error("a query through {node} answers {series} at {ts} = {value}, never written so")]
    Invented {
        node: String,
        series: String,
        ts: i64,
        value: f64,
    },
    #[error("owner {node} of home {home} lacks {series} at {ts} after anti-entropy")]
    OwnerLacks {
        node: String,
        home: u32,
        series: String,
        ts: i64,
    },
    #[error("{series} at {ts} is on {copies} node(s) after anti-entropy, not {want}")]
    TooFewCopies {
        series: String,
        ts: i64,
        copies: usize,
        want: usize,
    },
    #[error("anti-entropy still found differences after {0} loops")]
    NotQuiet(usize),
}

impl SensorSim {
    /// The samples of a merged answer through `c`, each checked against
    /// what was written; every acknowledged sample must be there unless
    /// the answer says it may be partial.
    pub(super) fn judge(
        &self,
        c: usize,
        merged: merge::Merged,
        partial: bool,
    ) -> Result<BTreeMap<(String, i64), f64>, SensorViolation> {
        let mut got: BTreeMap<(String, i64), f64> = BTreeMap::new();
        for s in merged.into_series() {
            let k = merge::key_of(&s.labels);
            for p in s.points {
                got.insert((k.clone(), p.t * 1_000_000), p.v);
            }
        }
        for ((series, ts), value) in &got {
            if self.written.get(&(series.clone(), *ts)) != Some(value) {
                return Err(SensorViolation::Invented {
                    node: name(c),
                    series: series.clone(),
                    ts: *ts,
                    value: *value,
                });
            }
        }
        if !partial {
            if let Some((series, ts)) = self.acked.keys().find(|k| !got.contains_key(*k)) {
                return Err(SensorViolation::Missing {
                    node: name(c),
                    tick: self.tick,
                    series: series.clone(),
                    ts: *ts,
                });
            }
        }
        Ok(got)
    }

    /// Every owner of a series' home holds every acknowledged sample of
    /// it, read from its own engine; and, whatever the owners are, every
    /// acknowledged sample is on `min(n, nodes)` distinct nodes.
    pub(super) fn check_owners(&self) -> Result<(), SensorViolation> {
        let placer = route::placer(self.cfg.ring_size);
        let want = (self.cfg.n as usize).min(self.cfg.nodes);
        for s in 0..self.cfg.series {
            let k = key(s);
            let home = placer.home(DB, &k);
            let held: Vec<BTreeSet<i64>> = (0..self.cfg.nodes)
                .map(|x| {
                    self.engine(x)
                        .read(DB, &k, i64::MIN, i64::MAX, self.now())
                        .expect("a simulated engine reads")
                        .into_iter()
                        .map(|s| s.ts)
                        .collect()
                })
                .collect();
            let acked = || self.acked.keys().filter(|(series, _)| *series == k);
            for owner in owners(&self.ring, home, self.cfg.n) {
                let x = self.index(&owner);
                if let Some((series, ts)) = acked().find(|(_, ts)| !held[x].contains(ts)) {
                    return Err(SensorViolation::OwnerLacks {
                        node: owner,
                        home,
                        series: series.clone(),
                        ts: *ts,
                    });
                }
            }
            for (series, ts) in acked() {
                let copies = held.iter().filter(|h| h.contains(ts)).count();
                if copies < want {
                    return Err(SensorViolation::TooFewCopies {
                        series: series.clone(),
                        ts: *ts,
                        copies,
                        want,
                    });
                }
            }
        }
        Ok(())
    }
}
