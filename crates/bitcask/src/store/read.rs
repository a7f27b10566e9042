//! Reads and folds: a key's record found through the keydir, read from
//! its file or the writer's buffer and checked, and consistent snapshots
//! of the keys for folds.

use super::Inner;
use crate::error::{Error, Result};
use crate::files::data_path;
use crate::format::record::{decode_record, RECORD_HEADER_LEN};
use crate::keydir::Entry;
use std::sync::atomic::Ordering;

impl Inner {
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, None).expect("a waiting read answers")
    }

    /// A get; with `nowait` (the largest record it reads), `None` where
    /// it would wait for the device or the writer's lock, or the record is
    /// larger.
    pub(super) fn get_with(
        &self,
        key: &[u8],
        nowait: Option<usize>,
    ) -> Option<Result<Option<Vec<u8>>>> {
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
    pub(super) fn read_entry_opt(&self, key: &[u8], entry: &Entry) -> Result<Option<Vec<u8>>> {
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
    pub(super) fn fold(&self, mut visit: impl FnMut(&[u8], Entry) -> Result<bool>) -> Result<()> {
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
