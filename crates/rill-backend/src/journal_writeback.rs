//! Writes the leveldb journal back to disk in the background, as RocksDB's
//! `wal_bytes_per_sync` does.
//!
//! fjall 3.1 syncs its journal before every memtable flush while it holds
//! the journal's lock (fjall-rs/fjall#329), so with `sync_on_write = off`
//! writers wait for the kernel to write out what the node journaled since
//! the previous flush. Starting the writeback of the newest journal file
//! every 50 ms, from a thread of its own and without the lock, leaves that
//! sync less to wait for: in `rill-bench ingest` (10 million puts, two
//! runs each way) 178-184 thousand puts/s with the slowest put 214-262 ms,
//! against 164-165 thousand and 272-384 ms without. It writes what the
//! sync would have written, but for the partly filled last page, which
//! may go again each time (and where the device wants pages stable while
//! written, such as btrfs, the next append into that page waits); and
//! no durability promise rests on it: durability still comes from fjall's
//! syncs (and from `sync_on_write = on`, where this thread is not
//! started). Linux only (`sync_file_range`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the newest journal's dirty pages are sent to the disk.
const EVERY: Duration = Duration::from_millis(50);

/// The background thread; stopped and joined when dropped.
pub(crate) struct JournalWriteback {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl JournalWriteback {
    /// Starts writing back the journals of the database in `dir`.
    pub(crate) fn start(dir: &Path) -> std::io::Result<JournalWriteback> {
        let (tx, rx) = mpsc::channel::<()>();
        let dir = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("leveldb-journal-writeback".into())
            .spawn(move || {
                let mut open: Option<(u64, File)> = None;
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(EVERY) {
                    let Some((id, path)) = newest_journal(&dir) else {
                        continue;
                    };
                    if open.as_ref().is_none_or(|(have, _)| *have != id) {
                        open = File::open(&path).ok().map(|f| (id, f));
                    }
                    if let Some((_, f)) = &open {
                        if let Err(e) = start_writeback(f) {
                            tracing::debug!(error = %e, "journal writeback");
                        }
                    }
                }
            })?;
        Ok(JournalWriteback {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for JournalWriteback {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The journal file with the highest number (`N.jnl`): the one being
/// written.
fn newest_journal(dir: &Path) -> Option<(u64, PathBuf)> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let path = e.ok()?.path();
            let id = path
                .file_name()?
                .to_str()?
                .strip_suffix(".jnl")?
                .parse()
                .ok()?;
            Some((id, path))
        })
        .max_by_key(|(id, _)| *id)
}

/// Starts writing the file's dirty pages without waiting for them.
#[cfg(target_os = "linux")]
fn start_writeback(f: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; offset 0 and length 0 mean the
    // whole file; SYNC_FILE_RANGE_WRITE only starts writeback.
    let r = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Elsewhere nothing: a sync twenty times a second would cost more than
/// it saves (on macOS it empties the drive's cache).
#[cfg(not(target_os = "linux"))]
fn start_writeback(_f: &File) -> std::io::Result<()> {
    Ok(())
}
