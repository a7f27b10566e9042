//! The merge executor: given files, copy their live records to new files
//! (with hints), switch each keydir entry that still points at the old
//! place, and delete the old files. Which files to merge, and when, is the
//! policy's business (the next layer up).
//!
//! - A file with no current record (D = 1) is deleted without being read;
//!   so is one whose every current record has expired when no file outside
//!   the merge could hold an older record of its keys (the oldest files of
//!   data kept for a storage period: nothing is read, nothing written).
//! - A sparse file (live share at most `sparse_live_share`) is merged by
//!   reading only its live records, found through its hint (the sensor-data paper, §5.1).
//! - Otherwise the file is read sequentially.
//!
//! Tombstones and expired records are dropped when no file outside the merge
//! could hold an older record of their key (every such file's smallest
//! sequence number is higher) and every input goes; otherwise a tombstone is
//! written, so nothing deleted or expired can come back after a restart. A
//! merge that drops records deletes its inputs all or nothing across a
//! crash (`retire.rs`).
//!
//! Merge runs beside puts and gets: a copied record only takes over if the
//! keydir still points at the original (compare and swap), and only once
//! the copy is durable (its file fsynced, its name in the directory too),
//! so a merge that fails half way leaves every key readable from a durable
//! record, whichever of the two the keydir names.

use crate::append::AppendFile;
use crate::error::{Error, Result};
use crate::files::hint_path;
use crate::format::hint::HintFile;
use crate::format::record::{decode_record, BatchPos, RecordHeader, RecordMeta};
use crate::keydir::Entry;
use crate::options::WriteMode;
use crate::recovery::scan::{ScanEvent, Scanner};
use crate::store::{Inner, Store};
use crate::vfs::OpenMode;
use std::sync::atomic::Ordering;

/// What one merge did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Input files deleted after the merge.
    pub files_deleted: Vec<u32>,
    /// Of those, deleted without reading (no live record).
    pub files_deleted_unread: usize,
    pub files_read_sparse: usize,
    pub files_read_full: usize,
    /// Inputs kept because a live record could not be copied (logged).
    pub files_kept: Vec<u32>,
    pub output_files: Vec<u32>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_copied: u64,
    pub tombstones_dropped: u64,
}

impl Store {
    /// Merges the given files (the active file and unknown ids are ignored).
    pub fn merge(&self, file_ids: &[u32]) -> Result<MergeReport> {
        self.inner.merge(file_ids)
    }
}

struct Output<'a> {
    inner: &'a Inner,
    file: Option<AppendFile>,
    /// Copies waiting for their bytes to reach the descriptor before the
    /// keydir may point at them: (key, original, copy).
    pending: Vec<(Box<[u8]>, Entry, Entry)>,
    pending_bytes: usize,
    report: MergeReport,
    /// Time that decides expiry, fixed for the whole merge.
    now_s: u32,
    /// Smallest sequence number in any file outside the merge.
    min_seq_outside: u64,
    /// Tombstones and expired records that may be dropped, applied only
    /// once the deletion of every input is committed.
    drops: Vec<(Box<[u8]>, Entry)>,
    /// The output file's name is not durable yet.
    name_unsynced: bool,
    /// Inputs with a damaged region or record: they are kept.
    damaged: std::collections::HashSet<u32>,
}

impl Output<'_> {
    /// Drops waiting for their records of file `id`.
    fn drops_in(&self, id: u32) -> usize {
        self.drops.iter().filter(|(_, e)| e.file_id == id).count()
    }

    fn append(
        &mut self,
        key: &[u8],
        original: &Entry,
        meta: &RecordMeta,
        value: &[u8],
    ) -> Result<()> {
        let inner = self.inner;
        let o = &inner.opts;
        let size = (crate::format::RECORD_HEADER_LEN + key.len() + value.len()) as u32;
        if self
            .file
            .as_ref()
            .is_some_and(|f| f.len + u64::from(size) > o.max_file_size_bytes)
        {
            self.finish_file()?;
        }
        if self.file.is_none() {
            let id = {
                let mut w = inner.writer();
                w.next_file_id += 1;
                w.next_file_id - 1
            };
            let f = AppendFile::create(
                o.vfs.as_ref(),
                &inner.dir,
                id,
                o.write_mode == WriteMode::Direct,
                o.write_buffer_bytes.max(1 << 20),
            )?;
            inner.stats.lock().expect("stats").add_file(id);
            inner.files.insert(id, f.path.clone());
            self.report.output_files.push(id);
            self.file = Some(f);
            self.name_unsynced = true;
        }
        let f = self.file.as_mut().expect("created above");
        let offset = f.append(o.vfs.as_ref(), meta, key, value, false)?;
        inner
            .stats
            .lock()
            .expect("stats")
            .record_written(f.id, size, meta.seq);
        self.report.bytes_written += u64::from(size);
        let copy = Entry {
            seq: meta.seq,
            file_id: f.id,
            offset,
            size,
            expiry_s: meta.expiry_s.unwrap_or(0),
            tombstone: meta.tombstone,
        };
        self.pending.push((key.into(), *original, copy));
        self.pending_bytes += size as usize;
        if self.pending_bytes >= SWITCH_BYTES {
            self.switch()?;
        }
        Ok(())
    }

    /// Makes pending copies durable and points the keydir at them.
    fn switch(&mut self) -> Result<()> {
        let inner = self.inner;
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.sync() {
                return Err(match e {
                    Error::DiskFull { .. } => e,
                    other => inner.poison(other),
                });
            }
            if self.name_unsynced {
                if let Err(e) = inner.opts.vfs.sync_dir(&inner.dir) {
                    return Err(inner.poison(Error::io(&inner.dir, e)));
                }
                self.name_unsynced = false;
            }
        }
        for (key, original, copy) in self.pending.drain(..) {
            if inner.keydir.compare_and_swap(&key, &original, Some(copy)) {
                let mut stats = inner.stats.lock().expect("stats");
                stats.became_dead(&original);
                stats.became_live(&copy);
                self.report.records_copied += 1;
            }
        }
        self.pending_bytes = 0;
        Ok(())
    }

    fn finish_file(&mut self) -> Result<()> {
        self.switch()?;
        if let Some(mut f) = self.file.take() {
            f.finish(self.inner.opts.vfs.as_ref())?;
        }
        Ok(())
    }
}

/// Copies wait for this many bytes before one fsync makes them durable and
/// the keydir takes them.
const SWITCH_BYTES: usize = 8 << 20;

impl Inner {
    pub(crate) fn merge(&self, file_ids: &[u32]) -> Result<MergeReport> {
        let _merging = self.merge_lock.lock().expect("merge lock");
        // Read under the writer lock, so no rotation is half done: the file
        // being made active must not be taken for a dead one.
        let active = {
            let w = self.writer();
            w.refuse_if_poisoned()?;
            w.active.id
        };
        let mut inputs: Vec<u32> = file_ids
            .iter()
            .copied()
            .filter(|&id| id != active && self.files.contains(id))
            .collect();
        inputs.sort_unstable();
        // Copies go out in several files, each made durable on its own, so
        // they could keep part of a batch (store::write_batch). An input
        // not yet durable with live records to copy is made durable first,
        // whole: a power cut then keeps every batch of it whole, whichever
        // copies survive. (A wholly dead input is deleted unread.)
        let unsynced: Vec<u32> = self
            .unsealed
            .lock()
            .expect("unsealed")
            .iter()
            .filter(|u| !u.data_synced && inputs.contains(&u.file.id))
            .map(|u| u.file.id)
            .collect();
        let unsynced_input = {
            let stats = self.stats.lock().expect("stats");
            unsynced.iter().any(|&id| stats.current_entries(id) > 0)
        };
        if unsynced_input {
            self.sync_unsealed()?;
        }
        inputs.dedup();
        if inputs.is_empty() {
            return Ok(MergeReport::default());
        }
        let now_s = self.opts.now_s();
        let min_seq_outside = self.stats.lock().expect("stats").min_seq_outside(&inputs);
        let mut out = Output {
            inner: self,
            file: None,
            pending: Vec::new(),
            pending_bytes: 0,
            report: MergeReport::default(),
            now_s,
            min_seq_outside,
            drops: Vec::new(),
            name_unsynced: false,
            damaged: std::collections::HashSet::new(),
        };
        let expired = self.collect_expired_drops(&inputs, &mut out);
        let mut done = Vec::new();
        for &id in &inputs {
            let (current, visible_share) = {
                let stats = self.stats.lock().expect("stats");
                let snap = stats.snapshot(id, now_s, false);
                let share = snap.map_or(0.0, |s| 1.0 - s.dead_share());
                (stats.current_entries(id), share)
            };
            let dropping = || out.drops_in(id) as u64;
            if current == 0 {
                out.report.files_deleted_unread += 1;
                done.push(id);
                continue;
            }
            if expired.contains(&id) && current <= dropping() {
                // Counted once its drops are committed (below).
                done.push(id);
                continue;
            }
            let sparse =
                visible_share <= self.opts.sparse_live_share && self.merge_sparse(id, &mut out)?;
            if sparse {
                out.report.files_read_sparse += 1;
            } else {
                self.merge_full(id, &mut out)?;
                out.report.files_read_full += 1;
            }
            out.switch()?;
            // A file with damage may hold a live record no one could copy;
            // counts alone cannot tell (a concurrent put lowers them), so
            // damage keeps the file.
            let damaged = out.damaged.contains(&id);
            let dropping = out.drops_in(id);
            if !damaged && self.stats.lock().expect("stats").current_entries(id) <= dropping as u64
            {
                done.push(id);
            } else {
                tracing::error!(
                    file_id = id,
                    "merge could not copy every live record of a file; keeping it"
                );
                out.report.files_kept.push(id);
            }
        }
        out.finish_file()?;
        if !out.report.output_files.is_empty() {
            self.opts
                .vfs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io(&self.dir, e))?;
        }
        // An original may be durable (sealed, or fsynced by a `sync()`); the
        // records that replaced its dead ones may not be yet (sync = none).
        // Make them durable before the original goes, so a crash cannot
        // roll a key back past what was on disk.
        if done.iter().any(|&id| self.may_be_durable(id)) {
            let seq = self.writer().seq;
            if self.synced_seq.load(Ordering::Acquire) < seq {
                self.sync_through(seq)?;
            }
        }
        // Drops are safe only when every input goes, at once.
        let drops = std::mem::take(&mut out.drops);
        let mut manifest = None;
        if !drops.is_empty() {
            if out.report.files_kept.is_empty() {
                manifest = Some(self.write_manifest(&done)?);
                for (key, entry) in &drops {
                    if self.keydir.compare_and_swap(key, entry, None) {
                        self.stats.lock().expect("stats").became_dead(entry);
                        out.report.tombstones_dropped += 1;
                    }
                }
            } else {
                // Their tombstones stay current, so their files stay.
                done.retain(|id| !drops.iter().any(|(_, e)| e.file_id == *id));
            }
        }
        out.report.files_deleted_unread += done.iter().filter(|id| expired.contains(id)).count();
        // The copies are durable: the originals can go.
        self.retire(crate::retire::Retired {
            ids: done.clone(),
            manifest,
        })?;
        let mut report = out.report;
        report.files_deleted = done;
        let c = &self.counters;
        c.merges.fetch_add(1, Ordering::Relaxed);
        c.files_deleted_unread
            .fetch_add(report.files_deleted_unread as u64, Ordering::Relaxed);
        c.merge_bytes_read
            .fetch_add(report.bytes_read, Ordering::Relaxed);
        c.merge_bytes_written
            .fetch_add(report.bytes_written, Ordering::Relaxed);
        Ok(report)
    }

    /// The inputs whose every current record has expired, with no file
    /// outside the merge holding an older record of their keys (so none
    /// can come back), in file order: their records join the drops
    /// (applied once every input's deletion is committed) without reading
    /// the file or its hint. One scan of the keydir (memory) finds them.
    fn collect_expired_drops(&self, inputs: &[u32], out: &mut Output<'_>) -> Vec<u32> {
        let expired: Vec<u32> = {
            let stats = self.stats.lock().expect("stats");
            inputs
                .iter()
                .copied()
                .filter(|&id| {
                    stats.snapshot(id, out.now_s, false).is_some_and(|s| {
                        s.live_keys == 0 && s.expired_keys > 0 && s.max_seq < out.min_seq_outside
                    })
                })
                .collect()
        };
        if !expired.is_empty() {
            self.keydir.scan(|key, e| {
                if expired.binary_search(&e.file_id).is_ok() && e.is_expired(out.now_s) {
                    out.drops.push((key.into(), e));
                }
                true
            });
        }
        expired
    }

    /// Copies one record if it is still current; drops or rewrites
    /// tombstones and expired records.
    fn merge_record(
        &self,
        key: &[u8],
        header: &RecordHeader,
        value: &[u8],
        current: Entry,
        out: &mut Output<'_>,
    ) -> Result<()> {
        let gone = header.is_tombstone() || header.expiry().is_some_and(|e| e <= out.now_s);
        if !gone {
            let meta = RecordMeta {
                seq: header.seq,
                timestamp_us: header.timestamp_us,
                expiry_s: header.expiry(),
                tombstone: false,
                batch: BatchPos::Alone,
            };
            return out.append(key, &current, &meta, value);
        }
        if out.min_seq_outside > header.seq {
            // No file outside this merge holds an older record of the key.
            out.drops.push((key.into(), current));
            return Ok(());
        }
        let meta = RecordMeta {
            seq: header.seq,
            timestamp_us: header.timestamp_us,
            expiry_s: None,
            tombstone: true,
            batch: BatchPos::Alone,
        };
        out.append(key, &current, &meta, &[])
    }

    fn merge_full(&self, id: u32, out: &mut Output<'_>) -> Result<()> {
        let path = crate::files::data_path(&self.dir, id);
        let Some(file) = self.files.handle(id)? else {
            return Ok(());
        };
        let len = file.size().map_err(|e| Error::io(&path, e))?;
        out.report.bytes_read += len;
        let mut scanner = Scanner::of_file(file.as_ref(), len);
        while let Some(event) = scanner.try_next().map_err(|e| Error::io(&path, e))? {
            match event {
                ScanEvent::Record {
                    offset,
                    header,
                    key,
                    value,
                } => {
                    let Some(current) = self.keydir.get(key) else {
                        continue;
                    };
                    if current.file_id != id || u64::from(current.offset) != offset {
                        continue;
                    }
                    self.merge_record(key, &header, value, current, out)?;
                }
                ScanEvent::Skipped { offset, len } => {
                    out.damaged.insert(id);
                    tracing::error!(path = %path.display(), offset, len, "merge skipped a damaged region");
                }
                ScanEvent::TornTail { offset } => {
                    out.damaged.insert(id);
                    tracing::error!(path = %path.display(), offset, "merge found a damaged file end");
                }
            }
        }
        Ok(())
    }

    /// Reads only the live records, found through the hint. False when the
    /// hint cannot be used (then nothing was done).
    fn merge_sparse(&self, id: u32, out: &mut Output<'_>) -> Result<bool> {
        let path = hint_path(&self.dir, id);
        let Ok(bytes) = self
            .opts
            .vfs
            .open(&path, OpenMode::Read)
            .and_then(|f| f.read_all())
        else {
            return Ok(false);
        };
        let Ok(hint) = HintFile::parse(&bytes) else {
            return Ok(false);
        };
        if hint.file_id != id {
            return Ok(false);
        }
        out.report.bytes_read += bytes.len() as u64;
        let Some(file) = self.files.handle(id)? else {
            return Ok(true);
        };
        let data_path = crate::files::data_path(&self.dir, id);
        let mut buf = Vec::new();
        for e in hint.iter() {
            let Some(current) = self.keydir.get(e.key) else {
                continue;
            };
            if current.file_id != id || current.offset != e.offset || current.seq != e.seq {
                continue;
            }
            let expired = e.expiry_s.is_some_and(|x| x <= out.now_s);
            if e.tombstone || expired {
                // Its value is not needed: decide from the hint alone.
                let header = RecordHeader {
                    body_crc: 0,
                    flags: crate::format::record::FLAG_TOMBSTONE,
                    key_len: e.key.len() as u16,
                    value_len: 0,
                    seq: e.seq,
                    timestamp_us: self.opts.now_us(),
                    expiry_s: 0,
                };
                self.merge_record(e.key, &header, &[], current, out)?;
                continue;
            }
            buf.resize(e.record_len as usize, 0);
            file.read_exact_at(&mut buf, u64::from(e.offset))
                .map_err(|err| Error::io(&data_path, err))?;
            out.report.bytes_read += u64::from(e.record_len);
            match decode_record(&buf) {
                Ok(rec) if rec.key == e.key && rec.header.seq == e.seq => {
                    let header = rec.header;
                    self.merge_record(e.key, &header, rec.value, current, out)?;
                }
                Ok(_) | Err(_) => {
                    out.damaged.insert(id);
                    tracing::error!(path = %data_path.display(), offset = e.offset,
                        "merge found a damaged live record; its file is kept");
                }
            }
        }
        Ok(true)
    }
}
