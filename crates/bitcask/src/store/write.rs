//! The writer: appends under the writer lock, group-committed fsyncs,
//! and the poisoned state a failed write or fsync leaves.

use super::{Inner, Rec, WriterState};
use crate::append::NewRecord;
use crate::error::{Error, Result};
use crate::format::record::{BatchPos, RecordMeta, RECORD_HEADER_LEN};
use crate::format::FILE_HEADER_LEN;
use crate::keydir::Entry;
use crate::options::SyncStrategy;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

impl Inner {
    pub(crate) fn writer(&self) -> MutexGuard<'_, WriterState> {
        self.writer.lock().expect("writer lock")
    }

    pub(super) fn write(
        &self,
        key: &[u8],
        value: &[u8],
        expiry_s: Option<u32>,
        tombstone: bool,
    ) -> Result<()> {
        self.write_records(&[Rec {
            key,
            value,
            expiry_s,
            tombstone,
        }])
    }

    /// Appends records as one write, with consecutive sequence numbers in
    /// one file; more than one are flagged as a batch, which recovery
    /// serves whole or not at all. On failure none is written.
    pub(crate) fn write_records(&self, recs: &[Rec<'_>]) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let o = &self.opts;
        if let Some(gate) = &o.put_gate {
            let delay = gate.delay();
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
        }
        let sizes: SmallVec<[u32; 2]> = recs
            .iter()
            .map(|r| (RECORD_HEADER_LEN + r.key.len() + r.value.len()) as u32)
            .collect();
        let total: u64 = sizes.iter().map(|s| u64::from(*s)).sum();
        // Built before the writer lock is taken (it is the store's one
        // point of contention); the sequence numbers are set under it.
        let timestamp_us = o.now_us();
        let n = recs.len();
        let mut records: SmallVec<[NewRecord<'_>; 2]> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let batch = match (n, i) {
                    (1, _) => BatchPos::Alone,
                    (_, 0) => BatchPos::First,
                    (_, i) if i + 1 == n => BatchPos::Last,
                    _ => BatchPos::Middle,
                };
                let meta = RecordMeta {
                    seq: 0,
                    timestamp_us,
                    expiry_s: r.expiry_s,
                    tombstone: r.tombstone,
                    batch,
                };
                (meta, r.key, r.value)
            })
            .collect();
        let mut w = self.writer();
        w.refuse_if_poisoned()?;
        if w.active.len + total > o.max_file_size_bytes && w.active.len > FILE_HEADER_LEN as u64 {
            self.rotate(&mut w)?;
        }
        let first = w.seq + 1;
        for (i, (meta, _, _)) in records.iter_mut().enumerate() {
            meta.seq = first + i as u64;
        }
        let vfs = o.vfs.as_ref();
        let o_sync = o.sync == SyncStrategy::OSync;
        let offsets = match w.active.append_batch(vfs, &records, o_sync) {
            Ok(off) => off,
            Err(e) => return Err(self.write_failed(&mut w, e)),
        };
        let last = first + n as u64 - 1;
        w.seq = last;
        if !w.active.has_unflushed() {
            w.unflushed_since = None;
        } else if w.unflushed_since.is_none() {
            // The buffer was clean: the background thread flushes it
            // within flush_interval_ms from now.
            w.unflushed_since = Some(Instant::now());
            self.wake.kick();
        }
        for (((meta, key, _), offset), size) in records.iter().zip(offsets).zip(sizes) {
            let entry = Entry {
                seq: meta.seq,
                file_id: w.active.id,
                offset,
                size,
                expiry_s: meta.expiry_s.unwrap_or(0),
                tombstone: meta.tombstone,
            };
            let replaced = self.keydir.put(key, entry);
            let mut stats = self.stats.lock().expect("stats");
            stats.record_written(entry.file_id, size, meta.seq);
            stats.became_live(&entry);
            if let Some(old) = replaced {
                stats.became_dead(&old);
            }
        }
        if o_sync {
            drop(w);
            self.sync_through(last)?;
        }
        Ok(())
    }

    /// Decides what a failed append means: a full disk is reported and the
    /// store stays usable (the file was cut back); anything else stops
    /// writes until reopen.
    pub(super) fn write_failed(&self, w: &mut WriterState, e: Error) -> Error {
        match e {
            Error::DiskFull { .. } => e,
            other => {
                tracing::error!(error = %other, "write failed; the store refuses writes until reopened");
                w.poisoned
                    .get_or_insert_with(|| Arc::new(other.duplicate()));
                other
            }
        }
    }

    /// A sync, seal or merge step failed: writes are refused until reopen,
    /// and this call's answer is the refusal every later write gets.
    pub(crate) fn poison(&self, e: Error) -> Error {
        tracing::error!(error = %e, "sync failed; the store refuses writes until reopened");
        let mut w = self.writer();
        let cause = w.poisoned.get_or_insert_with(|| Arc::new(e)).clone();
        Error::PreviousIo { cause }
    }

    /// [`Inner::poison`] with the writer already held; answers `e` itself.
    pub(super) fn poison_locked(&self, w: &mut WriterState, e: Error) -> Error {
        tracing::error!(error = %e, "the store refuses writes until reopened");
        w.poisoned.get_or_insert_with(|| Arc::new(e.duplicate()));
        e
    }

    /// Makes every record up to `seq` durable; concurrent callers share one
    /// fsync (group commit).
    pub(crate) fn sync_through(&self, seq: u64) -> Result<()> {
        let _sync = self.sync_lock.lock().expect("sync lock");
        if self.synced_seq.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        let (descriptor, target, path) = {
            let mut w = self.writer();
            w.refuse_if_poisoned()?;
            if let Err(e) = w.active.flush(true) {
                return Err(self.write_failed(&mut w, e));
            }
            (w.active.descriptor(), w.seq, w.active.path.clone())
        };
        self.sync_unsealed()?;
        if let Err(e) = descriptor.sync_data() {
            return Err(self.poison(Error::io(&path, e)));
        }
        self.synced_seq.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }
}
