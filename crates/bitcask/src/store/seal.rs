//! Rotation and the life of closed files: the active file closed and a
//! new one started, closed files sealed (fsync, hint) now or by the
//! background thread, and data files deleted.

use super::{Inner, Unsealed, WriterState};
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Inner {
    /// Closes the active file now, whatever its size, if it holds any
    /// record; true when it did.
    pub(super) fn close_active(&self) -> Result<bool> {
        let mut w = self.writer();
        w.refuse_if_poisoned()?;
        if w.active.is_empty() {
            return Ok(false);
        }
        self.rotate(&mut w)?;
        Ok(true)
    }

    /// Closes the active file and starts a new one. The closed file is
    /// sealed (fsync, hint) here, or later by the background thread when
    /// sealing is deferred.
    pub(super) fn rotate(&self, w: &mut WriterState) -> Result<()> {
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
        let next = super::new_active_file(o, &self.dir, id)?;
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

    pub(super) fn rotate_deferred(&self, w: &mut WriterState) -> Result<()> {
        if let Err(e) = w.active.close_for_appends() {
            return Err(self.write_failed(w, e));
        }
        let id = w.next_file_id;
        let o = &self.opts;
        self.dir_dirty.store(true, Ordering::Release);
        let next = super::new_active_file(o, &self.dir, id)?;
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
                return Err(self.poison(e));
            }
            sealed += 1;
        }
        if sealed > 0 {
            if let Err(e) = vfs.sync_dir(&self.dir) {
                return Err(self.poison(Error::io(&self.dir, e)));
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
                return Err(self.poison(Error::io(path, e)));
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
                return Err(self.poison(Error::io(&self.dir, e)));
            }
        }
        Ok(())
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
