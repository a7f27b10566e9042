//! The store: puts, gets, deletes and folds over one directory.
//!
//! Locks, in the order they may be taken: `merge_lock`, `sync_lock`,
//! `seal_lock`, `writer`, `unsealed`, `folds`, a keydir shard, `stats`. Puts are serialized by
//! `writer` (held for an append to a memory buffer and a keydir update, not
//! for a disk wait: o_sync puts share one fsync outside it). Gets take
//! only a keydir shard briefly, and `writer` only for bytes still buffered.

mod background;
mod read;
mod seal;
mod write;

use crate::append::AppendFile;
use crate::error::{Error, Result};
use crate::files::FileTable;
use crate::keydir::Keydir;
use crate::options::{Options, SyncStrategy, WriteMode};
use crate::recovery::{Loader, RecoveryReport};
use crate::stats::{FileStats, StatsTable};
use background::{spawn_background, Wake};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The failure that stopped writes until reopen, if any.
    pub poisoned: Option<Arc<Error>>,
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
        let active = new_active_file(&opts, &dir, active_id)?;
        opts.vfs.sync_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        stats.add_file(active_id);
        files.insert(active_id, active.path.clone());
        tracing::debug!(dir = %dir.display(), files = report.files, records = report.records,
            from_hints = report.files_from_hints, scanned = report.files_scanned,
            corrupt_regions = report.corrupt_regions, torn_bytes = report.torn_bytes,
            merges_finished = report.merges_finished,
            "bitcask store opened");
        if report.corrupt_regions > 0 || report.torn_bytes > 0 {
            tracing::warn!(dir = %dir.display(), corrupt_regions = report.corrupt_regions,
                corrupt_bytes = report.corrupt_bytes, torn_bytes = report.torn_bytes,
                "bitcask store opened with damaged records set aside");
        }
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

    /// Whether some readable key satisfies `pred`, a quick test run under
    /// the keydir's locks (it must not block); stops at the first match.
    pub fn any_key(&self, mut pred: impl FnMut(&[u8]) -> bool) -> bool {
        let now = self.inner.opts.now_s();
        self.inner
            .keydir
            .any(|key, entry| entry.is_visible(now) && pred(key))
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

    /// Closes the active file now, whatever its size, and starts a new
    /// one, so that merge may take the closed file (it never takes the
    /// active one). A node short of space does this to an active file
    /// holding dead bytes, which a merge could give back only so. False
    /// when the active file holds no record (nothing is done).
    pub fn close_active_file(&self) -> Result<bool> {
        self.inner.close_active()
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

/// A new data file `id` in `dir` for puts to append to, written as the
/// options say (buffered or O_DIRECT, through a buffer of their size).
pub(crate) fn new_active_file(opts: &Options, dir: &Path, id: u32) -> Result<AppendFile> {
    AppendFile::create(
        opts.vfs.as_ref(),
        dir,
        id,
        opts.write_mode == WriteMode::Direct,
        opts.write_buffer_bytes,
    )
}

/// Creates `dir` and any missing ancestors, and makes their names durable
/// (an fsync of each new directory's parent): a store created and written
/// under `o_sync` must not vanish with its directory at a power loss.
fn create_dir_durably(vfs: &dyn crate::vfs::Vfs, dir: &Path) -> Result<()> {
    crate::vfs::create_dir_durably(vfs, dir).map_err(|e| Error::io(dir, e))
}
