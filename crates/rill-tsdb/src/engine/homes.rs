//! A node's sensor data by home partition: what it holds of each, and a
//! partition's data leaving the node whole once other nodes have it
//! (hinted and ownership handoff, `rill-sensor-cluster`): its series
//! forgotten, their records deleted, its shard deleted with no merge.
//! And the receiving side: a write of only the samples a replica lacks.
//!
//! A dropped series may still be named by the log's older segments:
//! after a restart their samples come back, as data of a partition the
//! node does not hold, and are handed off again (the receiver takes
//! only what it lacks). Ids are never given twice: the catalog store's
//! id floor is raised past every id dropped, so the log's entries never
//! name another series. A series written to the node again after its
//! home left gets a new id; after a restart the old one comes back from
//! the log too, and the newer is the series' (`Catalog`): reads, writes,
//! digests and handoff use it, and the old id's samples (handed off
//! already) stay under it unread until the home leaves again.

use super::{Engine, EngineError, WriteReport};
use crate::keys::{record_of, NEXT_ID};
use rill_sensor::Sample;
use std::collections::{BTreeMap, BTreeSet};

impl Engine {
    /// Each database and home partition this node has series of, sorted.
    pub fn homes(&self) -> Vec<(String, u32)> {
        self.lock().catalog.homes()
    }

    /// The home partition of series `key` of `db`, if the node has it.
    pub fn home_of(&self, db: &str, key: &str) -> Option<u32> {
        let st = self.lock();
        let (id, _) = st.catalog.lookup(db, key)?;
        st.catalog.home(id)
    }

    /// The series of `db` at home in `home`: key and group key, sorted by
    /// key.
    pub fn series_of_home(&self, db: &str, home: u32) -> Vec<(String, Option<String>)> {
        let st = self.lock();
        let mut v: Vec<(String, Option<String>)> = st
            .catalog
            .of_home(db, home)
            .into_iter()
            .filter_map(|id| st.catalog.definition(id))
            // A series with two ids (see `Catalog`) is its newer one's.
            .filter(|d| st.catalog.lookup(db, &d.key).map(|(id, _)| id) == Some(d.id))
            .map(|d| (d.key, Some(d.group_key).filter(|g| !g.is_empty())))
            .collect();
        v.sort();
        v
    }

    /// How many writes to `home` of `db` were applied so far.
    pub fn home_writes(&self, db: &str, home: u32) -> u64 {
        let st = self.lock();
        st.dbs
            .get(db)
            .and_then(|d| d.writes.get(&home).copied())
            .unwrap_or(0)
    }

    /// Forgets every series of `db` at home in `home` and deletes its
    /// shard, if no write to it was applied since [`Engine::home_writes`]
    /// said `writes_seen` (else nothing is done: false).
    pub fn drop_home(&self, db: &str, home: u32, writes_seen: u64) -> Result<bool, EngineError> {
        let storing = self.storing.lock().unwrap_or_else(|e| e.into_inner());
        let (records, floor) = {
            let mut st = self.lock();
            let now_seen = st
                .dbs
                .get(db)
                .and_then(|d| d.writes.get(&home).copied())
                .unwrap_or(0);
            if now_seen != writes_seen {
                return Ok(false);
            }
            let ids = st.catalog.of_home(db, home);
            // A write logged and not yet applied (its commit in flight)
            // names the home: it would be acknowledged after the drop.
            let in_flight = st.logged.iter().any(|l| {
                l.db == db
                    && l.series
                        .iter()
                        .any(|(id, _, _)| ids.binary_search(id).is_ok())
            });
            if in_flight {
                return Ok(false);
            }
            let groups: BTreeSet<u64> = ids.iter().filter_map(|&id| st.catalog.group(id)).collect();
            let records: Vec<Vec<u8>> = ids
                .iter()
                .filter_map(|&id| st.catalog.definition(id))
                .filter_map(|d| record_of(&d).ok().map(|(k, _)| k))
                .collect();
            st.catalog.remove(&ids);
            let floor = st.catalog.next_id();
            st.unstored.forget(db, |g| groups.contains(&g));
            if let Some(d) = st.dbs.get_mut(db) {
                d.buffers.forget(|g| groups.contains(&g));
                d.stores.remove(&home);
                d.dirty.remove(&home);
                d.writes.remove(&home);
                d.late.remove(&home);
                d.stored_windows.remove(&home);
                *d.drops.entry(home).or_default() += 1;
            }
            (records, floor)
        };
        self.catalog_store
            .put(NEXT_ID, &floor.to_be_bytes(), None)?;
        for k in &records {
            self.catalog_store.delete(k)?;
        }
        self.catalog_store.sync()?;
        // Still storing: no tick puts blocks into the shard as it goes.
        self.storage.remove_shard(db, home)?;
        drop(storing);
        self.forget_digests(db, home);
        self.counters
            .homes_dropped
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(true)
    }

    /// Writes of `series` only the samples this node lacks: a time it
    /// does not hold, or a larger value (IEEE total order) than the one it
    /// holds, so replicas exchanging what they hold agree whatever the
    /// order. What a handoff or a repair brings.
    pub fn write_missing(
        &self,
        db: &str,
        series: &[(String, Vec<Sample>)],
        groups: &[Option<&str>],
        now: i64,
    ) -> Result<WriteReport, EngineError> {
        let mut keep: Vec<(String, Vec<Sample>)> = Vec::with_capacity(series.len());
        let mut keep_groups: Vec<Option<&str>> = Vec::with_capacity(series.len());
        for (i, (key, samples)) in series.iter().enumerate() {
            let (Some(lo), Some(hi)) = (
                samples.iter().map(|s| s.ts).min(),
                samples.iter().map(|s| s.ts).max(),
            ) else {
                continue;
            };
            let held: BTreeMap<i64, f64> = if self.lock().catalog.lookup(db, key).is_some() {
                self.read(db, key, lo, hi, now)?
                    .into_iter()
                    .map(|s| (s.ts, s.value))
                    .collect()
            } else {
                BTreeMap::new()
            };
            let lacking: Vec<Sample> = samples
                .iter()
                .filter(|s| held.get(&s.ts).is_none_or(|v| s.value.total_cmp(v).is_gt()))
                .copied()
                .collect();
            if !lacking.is_empty() {
                keep.push((key.clone(), lacking));
                keep_groups.push(groups.get(i).copied().flatten());
            }
        }
        if keep.is_empty() {
            return Ok(WriteReport::default());
        }
        self.write_grouped(db, &keep, &keep_groups, now)
    }
}
