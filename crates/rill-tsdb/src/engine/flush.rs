//! A tick: windows that have ended are cut, cut blocks stored, series
//! records written, the stores synced, and the log's segments whose every
//! sample is in a synced block deleted.

use super::{Engine, EngineError, State};
use crate::keys::{block_key, record_of};
use crate::storage::BlockStore;
use std::sync::Arc;

/// What a tick did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    pub blocks_stored: usize,
    /// Blocks whose window had passed its storage period before they
    /// could be stored: dropped.
    pub blocks_expired: usize,
    pub series_recorded: usize,
    pub segments_deleted: usize,
}

/// A window's end plus its database's storage period, in whole seconds
/// rounded up (a block never goes before its time).
pub(super) fn expiry_s(window: i64, window_ns: i64, retention_ns: i64) -> u64 {
    let end = i128::from(window) + i128::from(window_ns) + i128::from(retention_ns);
    let s = (end + 999_999_999).div_euclid(1_000_000_000);
    s.clamp(0, i128::from(u64::MAX)) as u64
}

/// The first part of `group`'s window `window` not in `store`: parts are
/// stored in the order they were cut, so the next is after the last.
fn next_part(store: &dyn BlockStore, group: u64, window: i64) -> u32 {
    let mut part = 0u32;
    while store.contains(&block_key(group, window, part)) {
        part += 1;
    }
    part
}

/// A cut's blocks: the samples of one series that is its own group as a
/// version 1 block, else group blocks, as many as it takes for each to
/// hold at most a block's most of columns and of samples (a group with
/// very many fields, or fields written at different times, can pass
/// them; each block is stored as a part of the window).
fn encode_cut(
    cut: &crate::buffer::Cut,
    choice: rill_sensor::Choice,
) -> Result<Vec<Vec<u8>>, EngineError> {
    use rill_sensor::block::{group, MAX_SAMPLES};
    let made = |e: rill_sensor::EncodeError| {
        EngineError::Invalid(format!("a block could not be made: {e}"))
    };
    let mut out = Vec::new();
    let mut rest = cut.columns.as_slice();
    while !rest.is_empty() {
        // As many columns as fit, at least one (each holds at most a
        // block's samples).
        let mut samples = 0;
        let take = rest
            .iter()
            .take(group::MAX_COLUMNS)
            .take_while(|(_, v)| {
                samples += v.len();
                samples <= MAX_SAMPLES
            })
            .count()
            .max(1);
        let (chunk, more) = rest.split_at(take);
        rest = more;
        out.push(match chunk {
            [(series, samples)] if *series == cut.group => {
                rill_sensor::block::encode(samples, choice).map_err(made)?
            }
            columns => {
                let borrowed: Vec<(u64, &[rill_sensor::Sample])> =
                    columns.iter().map(|(s, v)| (*s, v.as_slice())).collect();
                group::encode(&borrowed, choice).map_err(made)?
            }
        });
    }
    Ok(out)
}

impl Engine {
    /// Cuts the windows that ended more than the grace period before
    /// `now`, stores the cut blocks, and deletes what the log no longer
    /// needs. A node calls this every second or so. On a failed store
    /// (a full disk) the blocks wait for the next tick, and the log keeps
    /// their samples.
    pub fn tick(&self, now: i64) -> Result<TickReport, EngineError> {
        // Past the log's budget, the windows holding its oldest segments
        // are cut before they end (a later sample of theirs starts a later
        // part), so a window far ahead (a sensor with a wrong clock) or a
        // long window cannot keep the log growing.
        let segments = self.wal.segments();
        let keep_from = segments
            .len()
            .checked_sub(self.opts.max_log_segments)
            .map(|over| segments[over]);
        {
            let mut st = self.lock();
            let State { dbs, unstored, .. } = &mut *st;
            let closed = now.saturating_sub(self.opts.grace_ns);
            for (name, d) in dbs.iter_mut() {
                let mut cuts = Vec::new();
                d.buffers.close(closed, &mut cuts);
                if let Some(seg) = keep_from {
                    d.buffers.cut_from_segments_below(seg, &mut cuts);
                }
                unstored.extend(name, cuts);
            }
        }
        let report = self.store_and_retire()?;
        self.seal_at_window_change(now);
        Ok(report)
    }

    /// Once a window: every shard's file being written is closed, so a
    /// file holds about a window's blocks and expires whole with them
    /// (a shard taking few blocks would otherwise keep one file open
    /// across windows, its expired blocks never deleted unread).
    fn seal_at_window_change(&self, now: i64) {
        use std::sync::atomic::Ordering::Relaxed;
        let window = crate::buffer::window_of(now, self.opts.window_ns);
        if self.sealed_window.swap(window, Relaxed) >= window {
            return;
        }
        let stores: Vec<Arc<dyn BlockStore>> = {
            let st = self.lock();
            st.dbs
                .values()
                .flat_map(|d| d.stores.values().cloned())
                .collect()
        };
        for s in stores {
            if let Err(e) = s.seal() {
                tracing::warn!(error = %e, "a sensor store's file could not be closed at the window's end");
            }
        }
    }

    /// Cuts every buffer and stores everything, leaving the log empty but
    /// for its current segment (a clean stop).
    pub fn close(&self) -> Result<TickReport, EngineError> {
        {
            let mut st = self.lock();
            let State { dbs, unstored, .. } = &mut *st;
            for (name, d) in dbs.iter_mut() {
                let mut cuts = Vec::new();
                d.buffers.cut_all(&mut cuts);
                unstored.extend(name, cuts);
            }
        }
        let mut report = self.store_and_retire()?;
        // Everything is stored: a fresh segment, and the old ones go (a
        // write that came meanwhile keeps its segment, as ever).
        if self.wal.rotate()? {
            report.segments_deleted += self.store_and_retire()?.segments_deleted;
        }
        Ok(report)
    }

    fn store_and_retire(&self) -> Result<TickReport, EngineError> {
        let mut report = TickReport::default();
        let storing = self.storing.lock().unwrap_or_else(|e| e.into_inner());
        let stored = self.store_unstored(&mut report);
        let recorded = self.record_series(&mut report);
        // Everything stored so far is synced before the log lets go of it.
        let (dirty, unstored_series) = {
            let mut st = self.lock();
            let dirty: Vec<Arc<dyn BlockStore>> = st
                .dbs
                .values_mut()
                .flat_map(|d| {
                    let homes = std::mem::take(&mut d.dirty);
                    let stores = &d.stores;
                    homes
                        .into_iter()
                        .filter_map(move |h| stores.get(&h).cloned())
                })
                .collect();
            (dirty, recorded.as_ref().map_or(0, |v| v.len()))
        };
        let mut synced = dirty.iter().try_for_each(|s| s.sync());
        if synced.is_ok() && unstored_series > 0 {
            synced = self.catalog_store.sync();
        }
        if let Err(e) = synced {
            // Not synced: marked dirty again, nothing retired.
            let mut st = self.lock();
            st.dbs
                .values_mut()
                .for_each(|d| d.dirty = d.stores.keys().copied().collect());
            drop(st);
            drop(storing);
            return Err(e.into());
        }
        let bound = {
            let mut st = self.lock();
            if let Ok(ids) = &recorded {
                ids.iter().for_each(|&id| st.catalog.stored(id));
            }
            let buffers = st.dbs.values().filter_map(|d| d.buffers.oldest_segment());
            let logged = st.logged.iter().map(|l| l.segment);
            let unstored = st.unstored.iter().map(|(_, c)| c.segment);
            buffers
                .chain(logged)
                .chain(unstored)
                .chain(std::iter::once(self.wal.current_segment()))
                .min()
                .expect("the current segment at least")
        };
        drop(storing);
        if recorded.is_ok() {
            report.segments_deleted = self.wal.retire_below(bound)?;
        }
        stored?;
        recorded?;
        Ok(report)
    }

    /// Stores the cut blocks in the order they were cut, each leaving
    /// the queue once it is in its store (reads go on meanwhile). A block
    /// that fails to be stored waits, and so does every later block of
    /// its database (a window's parts keep their order); other databases
    /// go on. Only the blocks queued when it began (later ones wait for
    /// the next tick). Under `storing`. The first failure is returned once
    /// the rest are done.
    fn store_unstored(&self, report: &mut TickReport) -> Result<(), EngineError> {
        let mut failed: Vec<String> = Vec::new();
        let mut first_err = None;
        // Queue position of the next block to store: the blocks before it
        // are of databases that failed.
        let mut at = 0;
        // The blocks queued when this began, no more: under endless ingest
        // a tick still ends, and syncs, and lets the log go.
        let mut budget = self.lock().unstored.len();
        while budget > 0 {
            budget -= 1;
            let (db, cut) = {
                let st = self.lock();
                match st.unstored.get(at) {
                    Some((db, _)) if failed.iter().any(|f| f == db) => {
                        at += 1;
                        continue;
                    }
                    Some((db, cut)) => (db.to_string(), cut.clone()),
                    None => break,
                }
            };
            match self.store_cut(&db, &cut) {
                Ok(stored) => {
                    if stored > 0 {
                        report.blocks_stored += stored;
                    } else {
                        report.blocks_expired += 1;
                        self.counters
                            .blocks_expired_unstored
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    self.lock().unstored.remove(at, &cut);
                }
                Err(e) => {
                    tracing::error!(db, error = %e, "a sensor block could not be stored; it and the database's later blocks wait");
                    first_err.get_or_insert(e);
                    failed.push(db);
                    at += 1;
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Stores one cut's blocks as its window's next parts; how many (0 if
    /// it had expired).
    fn store_cut(&self, db: &str, cut: &crate::buffer::Cut) -> Result<usize, EngineError> {
        let (home, retention_ns) = {
            let st = self.lock();
            // The group's home; a group whose first series is unknown
            // (damage) goes with the first series it has.
            let home = st
                .catalog
                .home(cut.group)
                .or_else(|| cut.columns.first().and_then(|(id, _)| st.catalog.home(*id)))
                .unwrap_or(0);
            (home, st.dbs[db].retention_ns)
        };
        let store = self.shard(db, home)?;
        let expires = expiry_s(cut.window, self.opts.window_ns, retention_ns);
        let mut stored = 0;
        // Each block the window's next part (a cut stored again after a
        // crash between them repeats the same samples in later parts).
        for block in encode_cut(cut, self.opts.codec)? {
            let part = next_part(store.as_ref(), cut.group, cut.window);
            let key = block_key(cut.group, cut.window, part);
            store.put(&key, &block, Some(expires))?;
            if !store.contains(&key) {
                break;
            }
            stored += 1;
            {
                let mut st = self.lock();
                let d = st.dbs.get_mut(db).expect("open");
                d.dirty.insert(home);
                if let Some((_, w)) = d.stored_windows.get_mut(&home) {
                    w.insert(cut.window);
                }
            }
            use std::sync::atomic::Ordering::Relaxed;
            self.counters.blocks_stored.fetch_add(1, Relaxed);
            let bytes = (key.len() + block.len()) as u64;
            self.counters.block_bytes_stored.fetch_add(bytes, Relaxed);
        }
        Ok(stored)
    }

    /// Writes the records of durable series not yet in the catalog store;
    /// returns their ids (stored once the store is synced).
    fn record_series(&self, report: &mut TickReport) -> Result<Vec<u64>, EngineError> {
        let todo = self.lock().catalog.unstored();
        let mut done = Vec::with_capacity(todo.len());
        for d in todo {
            let (k, v) = record_of(&d).map_err(|e| EngineError::Invalid(e.to_string()))?;
            self.catalog_store.put(&k, &v, None)?;
            done.push(d.id);
        }
        report.series_recorded = done.len();
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_expires_after_its_window_and_the_storage_period() {
        assert_eq!(expiry_s(0, 10, 5), 1);
        assert_eq!(expiry_s(0, 1_000_000_000, 1_000_000_000), 2);
        assert_eq!(expiry_s(-4_000_000_000, 1_000_000_000, 1_000_000_000), 0);
        assert_eq!(expiry_s(i64::MAX, i64::MAX, i64::MAX), 27_670_116_111);
        assert_eq!(expiry_s(i64::MIN, 1, 1), 0);
    }
}
