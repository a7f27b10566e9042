//! This node's answers to other nodes' sensor requests: writes into its
//! engine, its share of selects and key listings.

use crate::msg::{self, FailKind, Found, MatcherSpec, Reply, Request};
use crate::service::{failure, written};
use rill_node::{KvError, SensorHandler};
use rill_promql::Matcher;
use rill_tsdb::prom_source::{selects, PromSource};
use rill_tsdb::Engine;
use std::sync::Arc;

/// The most samples a page of a home's samples holds, whatever is
/// asked (16 bytes each at most on the wire: 16 MiB).
const MAX_PAGE: u64 = 1 << 20;

/// This node's answers to other nodes' sensor requests.
pub struct Replica {
    pub engine: Arc<Engine>,
}

impl Replica {
    pub fn answer(&self, request: Request) -> Reply {
        match request {
            Request::Write { db, now, parts } => {
                let mut series = Vec::new();
                let mut groups = Vec::new();
                for s in parts.into_iter().flat_map(|p| p.series) {
                    series.push((s.key, s.samples));
                    groups.push(s.group);
                }
                let groups: Vec<Option<&str>> = groups.iter().map(Option::as_deref).collect();
                match self.engine.write_grouped(&db, &series, &groups, now) {
                    Ok(r) => Reply::Written(written(r)),
                    Err(e) => {
                        let (kind, text) = failure(&e);
                        Reply::Failed { kind, text }
                    }
                }
            }
            Request::Handoff { db, now, series } => {
                match keep_missing(&self.engine, &db, series, now) {
                    Ok(r) => Reply::Written(written(r)),
                    Err(e) => {
                        let (kind, text) = failure(&e);
                        Reply::Failed { kind, text }
                    }
                }
            }
            Request::Databases => Reply::Keys(self.engine.databases()),
            Request::Digests { slice, .. } if slice != self.engine.slice_ns() => Reply::Failed {
                kind: FailKind::Invalid,
                text: format!(
                    "anti-entropy slices of {slice} ns asked, this node's are {} ns: \
                     sensor.window must be the same on every node",
                    self.engine.slice_ns()
                ),
            },
            Request::Digests {
                db,
                home,
                now,
                from,
                to,
                slice: _,
            } => match self
                .engine
                .slice_digests(&db, home, from, to, now.min(local_now()))
            {
                // Those holding samples or busy; a busy slice goes as 0
                // samples: not to be compared.
                Ok(d) => Reply::Digests(
                    d.into_iter()
                        .map(|(s, d)| (s, d.digest, d.samples))
                        .collect(),
                ),
                Err(e) => {
                    let (kind, text) = failure(&e);
                    Reply::Failed { kind, text }
                }
            },
            Request::HomeSamples {
                db,
                home,
                now,
                from,
                to,
                after,
                limit,
            } => {
                let limit = usize::try_from(limit.min(MAX_PAGE)).unwrap_or(1).max(1);
                let after = after.as_ref().map(|(k, t)| (k.as_str(), *t));
                match self.engine.home_samples(
                    &db,
                    home,
                    from,
                    to,
                    now.min(local_now()),
                    after,
                    limit,
                ) {
                    Ok((series, more)) => Reply::Samples {
                        series: series
                            .into_iter()
                            .map(crate::msg::SeriesSamples::from)
                            .collect(),
                        more,
                    },
                    Err(e) => {
                        let (kind, text) = failure(&e);
                        Reply::Failed { kind, text }
                    }
                }
            }
            Request::Keys { sets } => {
                let mut parsed = Vec::with_capacity(sets.len());
                for set in &sets {
                    match matchers_of(set) {
                        Ok(ms) => parsed.push(ms),
                        Err(r) => return r,
                    }
                }
                let mut keys = local_keys(&self.engine, &parsed);
                keys.sort();
                keys.dedup();
                Reply::Keys(keys)
            }
            Request::Select {
                matchers,
                mint,
                maxt,
                now,
            } => match matchers_of(&matchers) {
                Ok(ms) => self.select(&|s| selects(&ms, s), mint, maxt, now),
                Err(r) => r,
            },
            Request::SelectDigests {
                matchers,
                mint,
                maxt,
                now,
            } => match matchers_of(&matchers) {
                Ok(ms) => crate::digest_read::answer(
                    &self.source(now),
                    &|s| selects(&ms, s),
                    mint,
                    maxt,
                    local_now(),
                )
                .unwrap_or_else(|text| Reply::Failed {
                    kind: FailKind::Failed,
                    text,
                }),
                Err(r) => r,
            },
            Request::SelectRanges { items, now } => {
                let mut found = Vec::with_capacity(items.len());
                let r = self.source(now).select_ranges(&items, &mut |key, points| {
                    found.push(Found {
                        key: key.to_string(),
                        points: points.iter().map(|p| (p.t, p.v)).collect(),
                    });
                    true
                });
                series_or_failed(r, found)
            }
        }
    }

    /// This node's sensor data as a query reads it at `now`, on one
    /// core: a node answering another's select reads beside the asker
    /// and the other replicas.
    fn source(&self, now: i64) -> PromSource<'_> {
        PromSource {
            engine: &self.engine,
            now,
            budget: None,
            one_core: true,
        }
    }

    /// The series `keep` takes with their points from `mint` to `maxt`
    /// ms.
    fn select(
        &self,
        keep: &dyn Fn(&rill_sensor::Series) -> bool,
        mint: i64,
        maxt: i64,
        now: i64,
    ) -> Reply {
        let mut found = Vec::new();
        let r = self
            .source(now)
            .select_where_each(keep, mint, maxt, &mut |s| {
                found.push(Found {
                    key: crate::merge::key_of(&s.labels),
                    points: s.points.iter().map(|p| (p.t, p.v)).collect(),
                });
                true
            });
        series_or_failed(r, found)
    }
}

/// The series a select found, or why it failed.
fn series_or_failed(read: Result<(), String>, found: Vec<Found>) -> Reply {
    match read {
        Ok(()) => Reply::Series(found),
        Err(text) => Reply::Failed {
            kind: FailKind::Failed,
            text,
        },
    }
}

/// This node's clock (ns since the Unix epoch): a peer's `now` ahead of
/// it is not taken (anti-entropy's settled slices and storage period are
/// judged by the earlier of the two).
fn local_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Writes of `series` what this node lacks (`Engine::write_missing`):
/// what a handoff or an exchange brings.
pub fn keep_missing(
    engine: &Engine,
    db: &str,
    series: Vec<crate::msg::SeriesSamples>,
    now: i64,
) -> Result<rill_tsdb::WriteReport, rill_tsdb::EngineError> {
    let groups: Vec<Option<String>> = series.iter().map(|s| s.group.clone()).collect();
    let groups: Vec<Option<&str>> = groups.iter().map(Option::as_deref).collect();
    let series: Vec<(String, Vec<rill_sensor::Sample>)> =
        series.into_iter().map(|s| (s.key, s.samples)).collect();
    engine.write_missing(db, &series, &groups, now)
}

/// Matchers from a message, or the answer refusing them.
fn matchers_of(specs: &[MatcherSpec]) -> Result<Vec<Matcher>, Reply> {
    specs
        .iter()
        .map(|m| match Matcher::new(&m.label, &m.op, &m.value) {
            Ok(x) if ["=", "!=", "=~", "!~"].contains(&m.op.as_str()) => Ok(x),
            _ => Err(Reply::Failed {
                kind: FailKind::Invalid,
                text: format!("not a matcher: {}{}{:?}", m.label, m.op, m.value),
            }),
        })
        .collect()
}

impl SensorHandler for Replica {
    fn serve(&self, request: &[u8]) -> Result<Vec<u8>, KvError> {
        let request = msg::decode_request(request)
            .map_err(|e| KvError::Backend(format!("a sensor request: {e}")))?;
        Ok(msg::encode_reply(&self.answer(request)))
    }
}

/// Keys of this node's series that one of `sets` selects.
pub(crate) fn local_keys(engine: &Engine, sets: &[Vec<Matcher>]) -> Vec<String> {
    engine
        .select_where(|s| sets.iter().any(|m| rill_tsdb::prom_source::selects(m, s)))
        .into_iter()
        .map(|(_, s)| s.key())
        .collect()
}
