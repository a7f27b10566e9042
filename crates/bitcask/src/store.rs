//! The store: puts, gets, deletes and folds over one directory.
//!
//! Locks, in the order they may be taken: `merge_lock`, `sync_lock`,
//! `seal_lock`, `writer`, `unsealed`, `folds`, a keydir shard, `stats`. Puts are serialized by
//! `writer` (held for an append to a memory buffer and a keydir update, not
//! for a disk wait: o_sync puts share one fsync outside it). Gets take
//! only a keydir shard briefly, and `writer` only for bytes still buffered.

use crate::append::{AppendFile, NewRecord};
use crate::error::{Error, Result};
use crate::files::{data_path, FileTable};
use crate::format::record::{decode_record, BatchPos, RecordMeta, RECORD_HEADER_LEN};
use crate::format::FILE_HEADER_LEN;
use crate::keydir::{Entry, Keydir};
use crate::options::{Options, SyncStrategy, WriteMode};
use crate::recovery::{Loader, RecoveryReport};
use crate::stats::{FileStats, StatsTable};
use smallvec::SmallVec;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Per-put settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct PutOptions {
    /// Expiry for this record, overriding the store's default TTL.
    pub ttl: Option<Duration>,
}

pub(crate) struct WriterState {
    pub active: AppendFile,
    pub next_file_id: u32,
    pub seq: u64,
    pub poisoned: Option<String>,
    /// When the oldest byte still only in the write buffer was appended
    /// (`None`: every appended byte is on the descriptor).
    pub unflushed_since: Option<Instant>,
}

impl WriterState {
    /// The error every write gets once an I/O failure poisoned the store.
    pub(crate) fn refuse_if_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::PreviousIo {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// A closed data file not yet sealed (sync = none): its records are in the
/// kernel's hands, its fsync and hint wait for the background sealer.
pub(crate) struct Unsealed {
    pub file: AppendFile,
    pub closed_at: Instant,
    /// fsynced by a `sync()` since it was closed (the hint is still due).
    pub data_synced: bool,
    /// Some of its records were made durable while it was active (a
    /// `sync()`, or `o_sync`).
    pub partly_synced: bool,
}

#[derive(Default)]
pub(crate) struct FoldState {
    pub active: usize,
    /// Files merged away while a fold could still read them, each batch
    /// with the manifest that makes its deletion all or nothing.
    pub deferred: Vec<crate::retire::Retired>,
}

pub(crate) struct Inner {
    pub dir: PathBuf,
    pub opts: Options,
    pub keydir: Keydir,
    pub files: FileTable,
    pub stats: Mutex<StatsTable>,
    pub writer: Mutex<WriterState>,
    pub active_id: AtomicU32,
    pub synced_seq: AtomicU64,
    pub sync_lock: Mutex<()>,
    /// Held while unsealed files are sealed, synced or deleted, so none is
    /// half-sealed while another thread counts on it.
    pub seal_lock: Mutex<()>,
    pub unsealed: Mutex<Vec<Unsealed>>,
    /// A file was created since the directory was last fsynced.
    pub dir_dirty: AtomicBool,
    pub merge_lock: Mutex<()>,
    pub folds: Mutex<FoldState>,
    pub counters: Counters,
    closed: AtomicBool,
    /// Wakes the background thread when it has new work.
    wake: Arc<Wake>,
    /// The directory lock ([`crate::vfs::Vfs::lock`]), held while open.
    _lock: Box<dyn std::any::Any + Send + Sync>,
}

/// Running totals an operator can watch.
#[derive(Default)]
pub(crate) struct Counters {
    pub merges: AtomicU64,
    pub files_deleted_unread: AtomicU64,
    pub merge_bytes_read: AtomicU64,
    pub merge_bytes_written: AtomicU64,
}

/// A point-in-time view of the store.
#[derive(Clone, Debug)]
pub struct StoreStats {
    /// Keydir entries, tombstones and expired keys included.
    pub keydir_entries: usize,
    pub keydir_memory_bytes: usize,
    pub keydir_key_bytes: usize,
    pub data_files: usize,
    pub open_read_files: usize,
    pub merges: u64,
    pub files_deleted_unread: u64,
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    /// Keydir changes logged for open folds (bounded: see the keydir).
    pub fold_undo_entries: usize,
}

impl StoreStats {
    /// Keydir bytes per key beyond the key bytes themselves.
    pub fn keydir_overhead_bytes_per_key(&self) -> f64 {
        if self.keydir_entries == 0 {
            return 0.0;
        }
        (self.keydir_memory_bytes - self.keydir_key_bytes) as f64 / self.keydir_entries as f64
    }
}

/// A Bitcask store over one directory.
pub struct Store {
    pub(crate) inner: Arc<Inner>,
    background: Option<JoinHandle<()>>,
    recovery: RecoveryReport,
}

impl Store {
    /// Opens (or creates) the store in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        create_dir_durably(opts.vfs.as_ref(), &dir)?;
        let lock = match opts.vfs.lock(&dir) {
            Ok(guard) => guard,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return Err(Error::Locked {
                    path: dir.clone(),
                    lock: dir.join("LOCK"),
                })
            }
            Err(e) => return Err(Error::io(&dir, e)),
        };
        let keydir = Keydir::new();
        let files = FileTable::new(opts.vfs.clone(), opts.max_open_files);
        let mut stats = StatsTable::default();
        let report = Loader {
            dir: &dir,
            vfs: opts.vfs.as_ref(),
            keydir: &keydir,
            stats: &mut stats,
            files: &files,
        }
        .load()?;
        let active_id = report.max_file_id + 1;
        let active = AppendFile::create(
            opts.vfs.as_ref(),
            &dir,
            active_id,
            opts.write_mode == WriteMode::Direct,
            opts.write_buffer_bytes,
        )?;
        opts.vfs.sync_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        stats.add_file(active_id);
        files.insert(active_id, active.path.clone());
        tracing::info!(dir = %dir.display(), files = report.files, records = report.records,
            from_hints = report.files_from_hints, scanned = report.files_scanned,
            corrupt_regions = report.corrupt_regions, torn_bytes = report.torn_bytes,
            merges_finished = report.merges_finished,
            "bitcask store opened");
        let inner = Arc::new(Inner {
            dir,
            keydir,
            files,
            stats: Mutex::new(stats),
            writer: Mutex::new(WriterState {
                active,
                next_file_id: active_id + 1,
                seq: report.max_seq,
                poisoned: None,
                unflushed_since: None,
            }),
            active_id: AtomicU32::new(active_id),
            synced_seq: AtomicU64::new(report.max_seq),
            sync_lock: Mutex::new(()),
            seal_lock: Mutex::new(()),
            unsealed: Mutex::default(),
            dir_dirty: AtomicBool::new(false),
            merge_lock: Mutex::new(()),
            folds: Mutex::default(),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            wake: Arc::new(Wake::default()),
            opts,
            _lock: lock,
        });
        let background = spawn_background(&inner);
        Ok(Store {
            inner,
            background: Some(background),
            recovery: report,
        })
    }

    /// What recovery found when this store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_with(key, value, PutOptions::default())
    }

    pub fn put_with(&self, key: &[u8], value: &[u8], opts: PutOptions) -> Result<()> {
        let o = &self.inner.opts;
        crate::error::check_key(key, o.max_key_bytes)?;
        if value.len() > o.max_value_bytes {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: o.max_value_bytes,
            });
        }
        let now = o.clock.now();
        let expiry_s = opts
            .ttl
            .or(o.default_ttl)
            .map(|ttl| (now + ttl).as_secs().clamp(1, u64::from(u32::MAX)) as u32);
        self.inner.write(key, value, expiry_s, false)
    }

    /// Deletes a key: writes a tombstone if the key has any record.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        crate::error::check_key(key, self.inner.opts.max_key_bytes)?;
        match self.inner.keydir.get(key) {
            Some(e) if !e.tombstone => self.inner.write(key, &[], None, true),
            // Already deleted (or never written): nothing to append, but the
            // answer must promise what a delete promises. The tombstone may
            // be one whose own write just failed (the store is poisoned) or
            // whose fsync another thread is still waiting for.
            found => {
                self.inner.writer().refuse_if_poisoned()?;
                match found {
                    Some(e) if self.inner.opts.sync == SyncStrategy::OSync => {
                        self.inner.sync_through(e.seq)
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }

    /// [`Store::get`] if it can be answered without waiting: from memory
    /// or the page cache, no lock held by a writer. `None`: it would wait
    /// (for the device or the writer); read with [`Store::get`] on a
    /// thread that may block.
    /// Records over `max_bytes` are left to `get` too.
    pub fn try_get(&self, key: &[u8], max_bytes: usize) -> Option<Result<Option<Vec<u8>>>> {
        self.inner.get_with(key, Some(max_bytes))
    }

    /// True when the key is readable (present, not deleted, not expired).
    pub fn contains(&self, key: &[u8]) -> bool {
        let now = self.inner.opts.now_s();
        self.inner
            .keydir
            .get(key)
            .is_some_and(|e| e.is_visible(now))
    }

    /// Makes every acknowledged put durable now, whatever the strategy.
    pub fn sync(&self) -> Result<()> {
        let seq = self.inner.writer().seq;
        self.inner.sync_through(seq)
    }

    /// Visits every readable key of one consistent snapshot; writes and
    /// merges go on meanwhile. `visit` returns false to stop.
    pub fn fold_keys(&self, mut visit: impl FnMut(&[u8]) -> bool) -> Result<()> {
        self.inner.fold(|key, _| Ok(visit(key)))
    }

    /// Visits every readable key without a snapshot: each part of the
    /// keydir as it is when the scan reaches it, so a key written or
    /// deleted meanwhile may be seen or not, while every key left alone is
    /// seen once. Unlike [`Store::fold_keys`] it never ends with `Busy`
    /// however long `visit` takes or however many writes run meanwhile
    /// (listing keys for a client, which Riak does not promise as a
    /// snapshot either). `visit` returns false to stop.
    pub fn scan_keys(&self, mut visit: impl FnMut(&[u8]) -> bool) {
        let now = self.inner.opts.now_s();
        self.inner
            .keydir
            .scan(|key, entry| !entry.is_visible(now) || visit(key));
    }

    /// Visits every readable key and value of one consistent snapshot.
    pub fn fold(&self, mut visit: impl FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        let inner = &self.inner;
        inner.fold(|key, entry| {
            let value = inner.read_entry(key, &entry)?;
            Ok(visit(key, &value))
        })
    }

    /// Statistics of every data file, the active one included.
    pub fn file_stats(&self) -> Vec<FileStats> {
        let now = self.inner.opts.now_s();
        let active = self.inner.active_id.load(Ordering::Acquire);
        let stats = self.inner.stats.lock().expect("stats");
        let mut out = stats.snapshot_all(now, active);
        out.sort_by_key(|f| f.file_id);
        out
    }

    /// Bytes of all data files (the active one included).
    pub fn disk_bytes(&self) -> u64 {
        self.file_stats()
            .iter()
            .map(|f| f.total_bytes + crate::format::FILE_HEADER_LEN as u64)
            .sum()
    }

    pub fn stats(&self) -> StoreStats {
        let i = &self.inner;
        StoreStats {
            keydir_entries: i.keydir.len(),
            keydir_memory_bytes: i.keydir.memory_bytes(),
            keydir_key_bytes: i.keydir.key_bytes(),
            data_files: i.files.ids().len(),
            open_read_files: i.files.open_count(),
            merges: i.counters.merges.load(Ordering::Relaxed),
            files_deleted_unread: i.counters.files_deleted_unread.load(Ordering::Relaxed),
            merge_bytes_read: i.counters.merge_bytes_read.load(Ordering::Relaxed),
            merge_bytes_written: i.counters.merge_bytes_written.load(Ordering::Relaxed),
            fold_undo_entries: i.keydir.undo_len(),
        }
    }

    /// Flushes, syncs and writes the active file's hint. Dropping a store
    /// does the same, logging instead of returning errors.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.inner.wake.stop();
        if let Some(bg) = self.background.take() {
            let _ = bg.join();
        }
        let inner = &self.inner;
        let sealed = inner.seal_unsealed(true);
        let mut w = inner.writer();
        if let Some(cause) = w.poisoned.clone() {
            // Hand buffered appends to the kernel all the same (a later
            // open may find them), but say the close was not clean.
            let _ = w.active.flush(true);
            return Err(Error::PreviousIo { cause });
        }
        sealed?;
        if w.active.is_empty() {
            // Nothing was written since open: leave no empty file behind.
            let id = w.active.id;
            drop(w);
            inner.files.delete(id, &inner.dir)?;
            inner.stats.lock().expect("stats").remove_file(id);
            return Ok(());
        }
        w.active.finish(inner.opts.vfs.as_ref())?;
        // A file created by a deferred rotation has a name that only a
        // directory fsync makes durable: a clean close promises all of it.
        if inner.dir_dirty.swap(false, Ordering::AcqRel) {
            let vfs = inner.opts.vfs.as_ref();
            vfs.sync_dir(&inner.dir)
                .map_err(|e| Error::io(&inner.dir, e))?;
        }
        Ok(())
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, dir = %self.inner.dir.display(), "closing bitcask store");
        }
    }
}

/// One record of [`Inner::write_records`].
pub(crate) struct Rec<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub expiry_s: Option<u32>,
    pub tombstone: bool,
}

impl Inner {
    pub(crate) fn writer(&self) -> MutexGuard<'_, WriterState> {
        self.writer.lock().expect("writer lock")
    }

    fn write(
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
    fn write_failed(&self, w: &mut WriterState, e: Error) -> Error {
        match e {
            Error::DiskFull { .. } => e,
            other => {
                let cause = other.to_string();
                tracing::error!(error = %cause, "write failed; the store refuses writes until reopened");
                w.poisoned = Some(cause);
                other
            }
        }
    }

    pub(crate) fn poison(&self, cause: String) -> Error {
        tracing::error!(error = %cause, "sync failed; the store refuses writes until reopened");
        let mut w = self.writer();
        if w.poisoned.is_none() {
            w.poisoned = Some(cause.clone());
        }
        Error::PreviousIo { cause }
    }

    /// Closes the active file and starts a new one. The closed file is
    /// sealed (fsync, hint) here, or later by the background thread when
    /// sealing is deferred.
    fn rotate(&self, w: &mut WriterState) -> Result<()> {
        if self.opts.defers_sealing() {
            return self.rotate_deferred(w);
        }
        if let Err(e) = w.active.sync() {
            return Err(match e {
                Error::DiskFull { .. } => e,
                other => self.poison_locked(w, other),
            });
        }
        let id = w.next_file_id;
        let o = &self.opts;
        let next = AppendFile::create(
            o.vfs.as_ref(),
            &self.dir,
            id,
            o.write_mode == WriteMode::Direct,
            o.write_buffer_bytes,
        )?;
        w.next_file_id += 1;
        let mut old = std::mem::replace(&mut w.active, next);
        // The new file is the active one before it is visible to merge
        // (stats, file table): a merge must never take it as an input.
        self.active_id.store(id, Ordering::Release);
        self.stats.lock().expect("stats").add_file(id);
        self.files.insert(id, w.active.path.clone());
        // Everything up to `w.seq` is on disk: the old file was just synced.
        self.synced_seq.fetch_max(w.seq, Ordering::AcqRel);
        if let Err(e) = old.finish(o.vfs.as_ref()) {
            return Err(self.poison_locked(w, e));
        }
        if let Err(e) = o.vfs.sync_dir(&self.dir) {
            return Err(self.poison_locked(w, Error::io(&self.dir, e)));
        }
        Ok(())
    }

    fn rotate_deferred(&self, w: &mut WriterState) -> Result<()> {
        if let Err(e) = w.active.close_for_appends() {
            return Err(self.write_failed(w, e));
        }
        let id = w.next_file_id;
        let o = &self.opts;
        self.dir_dirty.store(true, Ordering::Release);
        let next = AppendFile::create(
            o.vfs.as_ref(),
            &self.dir,
            id,
            o.write_mode == WriteMode::Direct,
            o.write_buffer_bytes,
        )?;
        w.next_file_id += 1;
        let old = std::mem::replace(&mut w.active, next);
        // The new file is the active one before it is visible to merge
        // (stats, file table): a merge must never take it as an input.
        self.active_id.store(id, Ordering::Release);
        let partly_synced = {
            let mut stats = self.stats.lock().expect("stats");
            stats.add_file(id);
            let min_seq = stats
                .snapshot(old.id, 0, false)
                .map_or(u64::MAX, |f| f.min_seq);
            self.synced_seq.load(Ordering::Acquire) >= min_seq
        };
        self.files.insert(id, w.active.path.clone());
        self.unsealed.lock().expect("unsealed").push(Unsealed {
            file: old,
            closed_at: Instant::now(),
            data_synced: false,
            partly_synced,
        });
        self.wake.kick();
        Ok(())
    }

    /// Seals the unsealed files closed at least `seal_delay` ago (all of
    /// them when `all`): fsync, hint into place, one directory fsync.
    pub(crate) fn seal_unsealed(&self, all: bool) -> Result<()> {
        let _sealing = self.seal_lock.lock().expect("seal lock");
        let delay = Duration::from_millis(self.opts.seal_delay_ms);
        let vfs = self.opts.vfs.as_ref();
        let mut sealed = 0;
        loop {
            let next = {
                let mut q = self.unsealed.lock().expect("unsealed");
                match q.first() {
                    Some(u) if all || u.closed_at.elapsed() >= delay => Some(q.remove(0)),
                    _ => None,
                }
            };
            let Some(mut u) = next else { break };
            if let Err(e) = u.file.finish(vfs) {
                return Err(self.poison(e.to_string()));
            }
            sealed += 1;
        }
        if sealed > 0 {
            if let Err(e) = vfs.sync_dir(&self.dir) {
                return Err(self.poison(Error::io(&self.dir, e).to_string()));
            }
        }
        Ok(())
    }

    /// True when records of file `id` may be durable: sealed, or unsealed
    /// but fsynced by a `sync()` since it was closed, or in part while it
    /// was active.
    pub(crate) fn may_be_durable(&self, id: u32) -> bool {
        self.unsealed
            .lock()
            .expect("unsealed")
            .iter()
            .find(|u| u.file.id == id)
            .is_none_or(|u| u.data_synced || u.partly_synced)
    }

    /// fsyncs every unsealed file not synced since it was closed, and the
    /// directory if a file was created since its last fsync.
    pub(crate) fn sync_unsealed(&self) -> Result<()> {
        let _sealing = self.seal_lock.lock().expect("seal lock");
        let pending: Vec<_> = self
            .unsealed
            .lock()
            .expect("unsealed")
            .iter()
            .filter(|u| !u.data_synced)
            .map(|u| (u.file.id, u.file.descriptor(), u.file.path.clone()))
            .collect();
        for (_, descriptor, path) in &pending {
            if let Err(e) = descriptor.sync_data() {
                return Err(self.poison(Error::io(path, e).to_string()));
            }
        }
        for u in self.unsealed.lock().expect("unsealed").iter_mut() {
            if pending.iter().any(|(id, _, _)| *id == u.file.id) {
                u.data_synced = true;
            }
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.opts.vfs.sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(self.poison(Error::io(&self.dir, e).to_string()));
            }
        }
        Ok(())
    }

    fn poison_locked(&self, w: &mut WriterState, e: Error) -> Error {
        let cause = e.to_string();
        tracing::error!(error = %cause, "the store refuses writes until reopened");
        w.poisoned.get_or_insert(cause);
        e
    }

    /// How long until the background thread has a flush or a seal to do
    /// (`Duration::MAX` when nothing is scheduled).
    fn background_due(&self, now: Instant, flush_every: Duration) -> Duration {
        let mut due = Duration::MAX;
        {
            let w = self.writer();
            if w.poisoned.is_none() {
                if let Some(since) = w.unflushed_since {
                    due = (since + flush_every).saturating_duration_since(now);
                }
            }
        }
        if self.opts.defers_sealing() {
            let delay = Duration::from_millis(self.opts.seal_delay_ms);
            if let Some(u) = self.unsealed.lock().expect("unsealed").first() {
                due = due.min((u.closed_at + delay).saturating_duration_since(now));
            }
        }
        due
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
            return Err(self.poison(Error::io(&path, e).to_string()));
        }
        self.synced_seq.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, None).expect("a waiting read answers")
    }

    /// A get; with `nowait` (the largest record it reads), `None` where
    /// it would wait for the device or the writer's lock, or the record is
    /// larger.
    fn get_with(&self, key: &[u8], nowait: Option<usize>) -> Option<Result<Option<Vec<u8>>>> {
        // A merge may move the record between the keydir lookup and the
        // read; then the lookup is repeated. Merges of one key are far apart,
        // so a few tries suffice.
        for _ in 0..8 {
            let Some(entry) = self.keydir.get(key) else {
                return Some(Ok(None));
            };
            if !entry.is_visible(self.opts.now_s()) {
                return Some(Ok(None));
            }
            if nowait.is_some_and(|max| entry.size as usize > max) {
                return None;
            }
            match self.read_entry_with(key, &entry, nowait.is_some()) {
                Err(ReadFail::WouldBlock) => return None,
                Err(ReadFail::Failed(e)) => return Some(Err(e)),
                Ok(Some(v)) => return Some(Ok(Some(v))),
                Ok(None) => continue,
            }
        }
        Some(Err(Error::Busy(
            "a record kept moving while it was read; retry".into(),
        )))
    }

    /// Reads the value of `entry`; fails if its file is gone.
    pub(crate) fn read_entry(&self, key: &[u8], entry: &Entry) -> Result<Vec<u8>> {
        self.read_entry_opt(key, entry)?.ok_or_else(|| {
            Error::Busy(format!(
                "data file {} vanished during a read",
                entry.file_id
            ))
        })
    }

    /// Reads and checks the record `entry` points at; `None` when its file
    /// was deleted meanwhile.
    fn read_entry_opt(&self, key: &[u8], entry: &Entry) -> Result<Option<Vec<u8>>> {
        self.read_entry_with(key, entry, false)
            .map_err(|f| match f {
                ReadFail::Failed(e) => e,
                ReadFail::WouldBlock => unreachable!("a waiting read does not give up"),
            })
    }

    /// [`Inner::read_entry_opt`]; with `nowait` it gives up where it would
    /// wait (the writer's lock taken, bytes not in the page cache).
    fn read_entry_with(
        &self,
        key: &[u8],
        entry: &Entry,
        nowait: bool,
    ) -> std::result::Result<Option<Vec<u8>>, ReadFail> {
        let mut buf = vec![0u8; entry.size as usize];
        let mut from_file = buf.len();
        if entry.file_id == self.active_id.load(Ordering::Acquire) {
            let w = if nowait {
                match self.writer.try_lock() {
                    Ok(w) => w,
                    // Poisoned too: the waiting read reports it, on a
                    // thread where a panic does not stop the caller.
                    Err(_) => return Err(ReadFail::WouldBlock),
                }
            } else {
                self.writer()
            };
            if w.active.id == entry.file_id {
                from_file = w.active.read_buffered(u64::from(entry.offset), &mut buf);
            }
        }
        if from_file > 0 {
            let handle = if nowait {
                self.files
                    .handle_if_open(entry.file_id)
                    .map_err(|()| ReadFail::WouldBlock)?
            } else {
                self.files.handle(entry.file_id)?
            };
            let Some(handle) = handle else {
                return Ok(None);
            };
            let read =
                handle.read_exact_at_with(&mut buf[..from_file], u64::from(entry.offset), nowait);
            match read {
                Ok(()) => {}
                Err(e) if nowait && e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err(ReadFail::WouldBlock)
                }
                Err(e) => return Err(Error::io(data_path(&self.dir, entry.file_id), e).into()),
            }
        }
        let corrupt = |source| Error::Corrupt {
            path: data_path(&self.dir, entry.file_id),
            offset: u64::from(entry.offset),
            source,
        };
        let rec = decode_record(&buf).map_err(corrupt)?;
        if rec.key != key || rec.header.seq != entry.seq {
            return Err(corrupt(crate::error::DecodeError::Invalid(
                "record does not match its keydir entry",
            ))
            .into());
        }
        let value_at = RECORD_HEADER_LEN + key.len();
        buf.drain(..value_at);
        Ok(Some(buf))
    }

    /// Runs `visit` over a consistent snapshot of the visible keys.
    fn fold(&self, mut visit: impl FnMut(&[u8], Entry) -> Result<bool>) -> Result<()> {
        let (snapshot, now) = {
            // Holding the writer makes the snapshot fall between two puts.
            let _w = self.writer();
            self.folds.lock().expect("folds").active += 1;
            (self.keydir.open_snapshot(), self.opts.now_s())
        };
        let mut result = Ok(());
        let folded = self.keydir.fold_snapshot(snapshot, |key, entry| {
            if !entry.is_visible(now) {
                return true;
            }
            match visit(key, entry) {
                Ok(go_on) => go_on,
                Err(e) => {
                    result = Err(e);
                    false
                }
            }
        });
        if folded.is_err() && result.is_ok() {
            result = Err(Error::Busy(format!(
                "writes overran the fold (more than {} changes to one part of the store while it \
                 ran); retry it",
                crate::keydir::MAX_UNDO_PER_SHARD
            )));
        }
        let deferred = {
            let mut f = self.folds.lock().expect("folds");
            f.active -= 1;
            if f.active == 0 {
                std::mem::take(&mut f.deferred)
            } else {
                Vec::new()
            }
        };
        for retired in deferred {
            self.delete_retired(retired)?;
        }
        result
    }

    pub(crate) fn delete_file(&self, id: u32) -> Result<()> {
        // Tests check the invariant merge relies on: no current entry
        // points into a file that goes (a full keydir scan, debug only).
        #[cfg(debug_assertions)]
        if let Some((key, entry)) = self.keydir.any_in_file(id) {
            let stats = self.stats.lock().expect("stats").snapshot(id, 0, false);
            panic!(
                "deleting file {id} while key {key:?} points into it: {entry:?}; stats {stats:?}"
            );
        }
        {
            let _sealing = self.seal_lock.lock().expect("seal lock");
            let mut q = self.unsealed.lock().expect("unsealed");
            if let Some(at) = q.iter().position(|u| u.file.id == id) {
                let u = q.remove(at);
                drop(q);
                u.file.abandon(self.opts.vfs.as_ref());
            }
        }
        self.files.delete(id, &self.dir)?;
        self.stats.lock().expect("stats").remove_file(id);
        Ok(())
    }
}

/// How the background thread is told there is work, or that it must stop.
#[derive(Default)]
struct Wake {
    /// (kicked, stop)
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Wake {
    fn kick(&self) {
        let mut s = self.state.lock().expect("wake");
        if !s.0 {
            s.0 = true;
            self.cv.notify_one();
        }
    }

    fn stop(&self) {
        self.state.lock().expect("wake").1 = true;
        self.cv.notify_one();
    }

    /// Waits until kicked, stopped or `timeout`; true when stopped.
    fn wait(&self, timeout: Duration) -> bool {
        let mut s = self.state.lock().expect("wake");
        if !s.0 && !s.1 {
            s = self.cv.wait_timeout(s, timeout).expect("wake").0;
        }
        s.0 = false;
        s.1
    }
}

/// Longest the background thread sleeps with nothing scheduled (a safety
/// net: every new piece of work kicks it).
const BACKGROUND_IDLE: Duration = Duration::from_secs(1);

/// Background work of one store: hand buffered appends to the kernel at
/// most `flush_interval_ms` after they were made, seal closed files once
/// `seal_delay_ms` has passed, and fsync every `interval_ms` under that
/// strategy. It sleeps until the earliest of these is due or a put gives
/// it new work, so an idle store, or one whose records skip the buffer,
/// costs no wake-ups.
fn spawn_background(inner: &Arc<Inner>) -> JoinHandle<()> {
    let weak = Arc::downgrade(inner);
    let wake = inner.wake.clone();
    let flush_every = Duration::from_millis(inner.opts.flush_interval_ms.max(1));
    let sync_every = match inner.opts.sync {
        SyncStrategy::Interval { interval_ms } => Some(Duration::from_millis(interval_ms)),
        _ => None,
    };
    std::thread::Builder::new()
        .name("bitcask-bg".into())
        .spawn(move || {
            let mut last_sync = Instant::now();
            // After a failure, the earliest time to try again.
            let mut retry_at: Option<Instant> = None;
            loop {
                let wait = {
                    let Some(inner) = weak.upgrade() else { return };
                    let now = Instant::now();
                    let mut due = inner.background_due(now, flush_every);
                    if let Some(every) = sync_every {
                        due = due.min((last_sync + every).saturating_duration_since(now));
                    }
                    if let Some(at) = retry_at {
                        due = due.max(at.saturating_duration_since(now));
                    }
                    due.min(BACKGROUND_IDLE)
                };
                if wake.wait(wait) {
                    return;
                }
                let Some(inner) = weak.upgrade() else { return };
                let mut failed = false;
                {
                    let mut w = inner.writer();
                    let due = w
                        .unflushed_since
                        .is_some_and(|t| t.elapsed() >= flush_every);
                    if w.poisoned.is_none() && due {
                        match w.active.flush(true) {
                            Ok(()) => w.unflushed_since = None,
                            Err(e) => {
                                tracing::warn!(error = %e, "background flush failed; will retry");
                                failed = true;
                            }
                        }
                    }
                }
                if inner.opts.defers_sealing() {
                    if let Err(e) = inner.seal_unsealed(false) {
                        tracing::warn!(error = %e, "sealing closed data files failed");
                        failed = true;
                    }
                }
                if let Some(every) = sync_every {
                    if last_sync.elapsed() >= every {
                        last_sync = Instant::now();
                        let seq = inner.writer().seq;
                        if let Err(e) = inner.sync_through(seq) {
                            tracing::warn!(error = %e, "interval sync failed");
                            failed = true;
                        }
                    }
                }
                retry_at = failed.then(|| Instant::now() + flush_every);
            }
        })
        .expect("spawn bitcask background thread")
}

/// Creates `dir` and any missing ancestors, and makes their names durable
/// (an fsync of each new directory's parent): a store created and written
/// under `o_sync` must not vanish with its directory at a power loss.
fn create_dir_durably(vfs: &dyn crate::vfs::Vfs, dir: &Path) -> Result<()> {
    crate::vfs::create_dir_durably(vfs, dir).map_err(|e| Error::io(dir, e))
}

/// Why a read that may not wait gave up.
enum ReadFail {
    /// It would have waited (the device, the writer's lock).
    WouldBlock,
    Failed(Error),
}

impl From<Error> for ReadFail {
    fn from(e: Error) -> ReadFail {
        ReadFail::Failed(e)
    }
}
