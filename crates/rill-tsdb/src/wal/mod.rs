//! The write-ahead log: a sample is acknowledged once its record is on the
//! disk (or, with `sync` off, in the kernel), and writers that arrive
//! while one write is under way share the next one (group commit: the
//! first waiter writes every record appended so far with one write and
//! one fsync, the others wait for it).
//!
//! The log is numbered segment files (`<number, 16 hex digits>.wal`); a
//! new one is started when the current one passes the segment size, and
//! at every open, so a segment is never appended to after a restart.
//! Segments whose samples are all in durable blocks are deleted
//! ([`Wal::retire_below`]).
//!
//! Failures: a write that fails (a full disk) fails the commits of the
//! records it carried, which were not acknowledged; the segment is cut
//! back to its last whole record and later writes go on. A failed fsync
//! leaves the log refusing every commit until it is opened again (what
//! the kernel kept of the failed write cannot be known).

pub mod format;

use bitcask::vfs::{OpenMode, VFile, Vfs};
use format::{Entry, FormatError, FRAME_BYTES, HEADER_BYTES, MAX_RECORD_BYTES};
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Errors of the log.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("write-ahead log I/O: {0}")]
    Io(#[from] io::Error),
    #[error("write-ahead log segment {segment}: {error}")]
    Format { segment: u64, error: FormatError },
    #[error("the write-ahead log failed to sync and refuses writes until the node restarts: {0}")]
    Poisoned(String),
    #[error("write-ahead log record of {0} bytes is larger than allowed")]
    TooLarge(usize),
}

/// How the log writes.
#[derive(Clone)]
pub struct WalOptions {
    pub vfs: Arc<dyn Vfs>,
    /// A new segment is started past this size.
    pub segment_bytes: u64,
    /// Acknowledge only what is on the disk (fsync); otherwise what the
    /// kernel has (safe against a process crash, not a power loss).
    pub sync: bool,
}

/// What [`Wal::append`] gives back: wait for it with [`Wal::commit`],
/// once (a ticket is not `Copy`: a failure is told once).
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    id: u64,
    /// The record lands in this segment or a later one.
    pub segment_at_least: u64,
}

/// What an open found in the log, entries aside.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    pub segments: usize,
    pub records: u64,
    /// Bytes at the end of the last segment that were not a whole record
    /// (a write cut by a crash; never acknowledged), cut off.
    pub torn_bytes: u64,
    /// Segments before the last with a damaged record: what follows it
    /// in that segment is lost (logged).
    pub damaged_segments: Vec<u64>,
    /// Segments deleted before a crash that came back (the unlink was
    /// not durable), found below a gap in the numbers: deleted again, not
    /// replayed.
    pub stale_segments: usize,
}

struct Segment {
    number: u64,
    file: Arc<dyn VFile>,
    /// Bytes of whole records written (and the header).
    len: u64,
}

struct Failed {
    first: u64,
    last: u64,
    error: String,
    untold: u64,
}

struct State {
    /// Records appended and not yet taken by a writer (every ticket
    /// after `durable`).
    pending: Vec<u8>,
    next_ticket: u64,
    /// Every ticket up to this is acknowledged.
    durable: u64,
    /// Ticket ranges whose write failed (a range goes once each of its
    /// tickets has been told).
    failed: VecDeque<Failed>,
    writing: bool,
    poisoned: Option<String>,
    segment: Segment,
    /// Every segment on disk, oldest first (the current one last).
    segments: VecDeque<u64>,
}

pub struct Wal {
    dir: PathBuf,
    opts: WalOptions,
    state: Mutex<State>,
    written: Condvar,
}

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:016x}.wal"))
}

fn segment_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let hex = name.strip_suffix(".wal")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

impl Wal {
    /// Opens the log in `dir` (created if missing): replays every entry of
    /// every segment, oldest first, to `visit` with its segment number,
    /// cuts a torn end off the last one, and starts a new segment.
    pub fn open(
        dir: &Path,
        opts: WalOptions,
        mut visit: impl FnMut(u64, Entry),
    ) -> Result<(Wal, ReplayReport), WalError> {
        let vfs = &opts.vfs;
        bitcask::vfs::create_dir_durably(vfs.as_ref(), dir)?;
        let mut numbers: Vec<u64> = vfs
            .list_dir(dir)?
            .iter()
            .filter_map(|p| segment_number(p))
            .collect();
        numbers.sort_unstable();
        let mut report = ReplayReport::default();
        // Segments are numbered in turn and deleted oldest first, so the
        // log is a run of consecutive numbers. One below a gap was deleted
        // by a retirement whose unlink a crash undid (the directory was
        // not yet synced): everything in it is in stored blocks, and
        // replaying it would put its old values over newer stored ones.
        let run = numbers
            .windows(2)
            .rposition(|w| w[0] + 1 != w[1])
            .map_or(0, |i| i + 1);
        for &n in &numbers[..run] {
            tracing::info!(
                segment = n,
                "a write-ahead log segment retired before a crash came back; it is deleted again"
            );
            vfs.remove_file(&segment_path(dir, n))?;
            report.stale_segments += 1;
        }
        if run > 0 {
            vfs.sync_dir(dir)?;
        }
        let numbers = &numbers[run..];
        let mut kept = VecDeque::new();
        for (i, &n) in numbers.iter().enumerate() {
            let last = i + 1 == numbers.len();
            let path = segment_path(dir, n);
            let bytes = vfs.open(&path, OpenMode::Read)?.read_all()?;
            match format::parse_segment_header(&bytes) {
                Ok(h) if h == n => {}
                // The newest segment, made by a crash before its header
                // was durable (no record is written before it is).
                Err(_) if last && bytes.len() <= HEADER_BYTES => {
                    vfs.remove_file(&path)?;
                    vfs.sync_dir(dir)?;
                    continue;
                }
                Ok(_) => {
                    let error = FormatError::Invalid("segment number differs from its name");
                    return Err(WalError::Format { segment: n, error });
                }
                Err(error) => return Err(WalError::Format { segment: n, error }),
            }
            report.segments += 1;
            kept.push_back(n);
            let mut at = HEADER_BYTES;
            let mut damaged = false;
            while at < bytes.len() {
                match format::read_record(&bytes[at..]) {
                    Ok((payload, used)) => {
                        match format::decode_payload(payload) {
                            Ok(entries) => entries.into_iter().for_each(|e| visit(n, e)),
                            Err(error) => {
                                tracing::error!(segment = n, offset = at, %error, "a write-ahead log record does not decode; it is skipped");
                                damaged = true;
                            }
                        }
                        report.records += 1;
                        at += used;
                    }
                    Err(error) => match next_record(&bytes, at + 1) {
                        // Damage with whole records after it: skipped.
                        Some(next) => {
                            tracing::error!(segment = n, offset = at, skipped = next - at, %error, "a damaged stretch in the write-ahead log; its samples are lost");
                            damaged = true;
                            at = next;
                        }
                        // Nothing whole after it, at the end of the newest
                        // segment: a write cut by a crash, never
                        // acknowledged.
                        None if last => {
                            tracing::warn!(segment = n, offset = at, %error, "the write-ahead log ends in a record cut by a crash; it was never acknowledged and is dropped");
                            let f = vfs.open(&path, OpenMode::ReadWrite)?;
                            f.set_len(at as u64)?;
                            f.sync_data()?;
                            report.torn_bytes = (bytes.len() - at) as u64;
                            break;
                        }
                        None => {
                            tracing::error!(segment = n, offset = at, %error, "a damaged end of a write-ahead log segment; its samples are lost");
                            damaged = true;
                            break;
                        }
                    },
                }
            }
            if damaged {
                report.damaged_segments.push(n);
            }
        }
        // After the last segment kept: a newest one dropped above (its
        // header never durable) gives its number back, so no gap is made
        // (a gap marks what is below it as retired, at the next open).
        let number = match kept.back() {
            Some(n) => n + 1,
            None => numbers.last().copied().unwrap_or(1),
        };
        let segment = Self::create_segment(vfs.as_ref(), dir, number)?;
        kept.push_back(number);
        let state = State {
            pending: Vec::new(),
            next_ticket: 1,
            durable: 0,
            failed: VecDeque::new(),
            writing: false,
            poisoned: None,
            segment,
            segments: kept,
        };
        let wal = Wal {
            dir: dir.to_path_buf(),
            opts,
            state: Mutex::new(state),
            written: Condvar::new(),
        };
        Ok((wal, report))
    }

    fn create_segment(vfs: &dyn Vfs, dir: &Path, number: u64) -> Result<Segment, WalError> {
        let path = segment_path(dir, number);
        let file = vfs.open(&path, OpenMode::CreateNew)?;
        let made = file
            .write_all_at(&format::segment_header(number), 0)
            .and_then(|()| file.sync_data())
            .and_then(|()| vfs.sync_dir(dir));
        if let Err(e) = made {
            let _ = vfs.remove_file(&path);
            return Err(e.into());
        }
        Ok(Segment {
            number,
            file,
            len: HEADER_BYTES as u64,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a record of `payload` (encoded entries) to the next write.
    pub fn append(&self, payload: &[u8]) -> Result<Ticket, WalError> {
        if payload.is_empty() || payload.len() > MAX_RECORD_BYTES {
            return Err(WalError::TooLarge(payload.len()));
        }
        // Checksummed before the lock is taken.
        let frame = format::frame_header(payload);
        let mut st = self.lock();
        if let Some(p) = &st.poisoned {
            return Err(WalError::Poisoned(p.clone()));
        }
        st.pending.extend_from_slice(&frame);
        st.pending.extend_from_slice(payload);
        let id = st.next_ticket;
        st.next_ticket += 1;
        Ok(Ticket {
            id,
            segment_at_least: st.segment.number,
        })
    }

    /// Waits until the record of `t` is acknowledged (written, and synced
    /// where the log syncs), writing it and every record before it itself
    /// if no one else is.
    pub fn commit(&self, t: Ticket) -> Result<(), WalError> {
        let mut st = self.lock();
        loop {
            if t.id <= st.durable {
                let found = st
                    .failed
                    .iter()
                    .position(|f| (f.first..=f.last).contains(&t.id));
                let Some(i) = found else {
                    return Ok(());
                };
                let f = &mut st.failed[i];
                let e = io::Error::other(f.error.clone());
                f.untold -= 1;
                if f.untold == 0 {
                    st.failed.remove(i);
                }
                return Err(WalError::Io(e));
            }
            if let Some(p) = &st.poisoned {
                return Err(WalError::Poisoned(p.clone()));
            }
            if st.writing {
                st = self.written.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st = self.write_pending(st);
        }
    }

    /// Writes what is pending as the one writer, the lock released while
    /// the disk works.
    fn write_pending<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.writing = true;
        let bytes = std::mem::take(&mut st.pending);
        let (first, last) = (st.durable + 1, st.next_ticket - 1);
        let rotate = st.segment.len >= self.opts.segment_bytes;
        let (mut file, mut len, mut number) =
            (st.segment.file.clone(), st.segment.len, st.segment.number);
        drop(st);
        let mut new_segment = None;
        let mut result: Result<(), (io::Error, bool)> = Ok(());
        if rotate {
            match Self::create_segment(self.opts.vfs.as_ref(), &self.dir, number + 1) {
                Ok(s) => {
                    (file, len, number) = (s.file.clone(), s.len, s.number);
                    new_segment = Some(s);
                }
                Err(e) => result = Err((io::Error::other(e.to_string()), false)),
            }
        }
        if result.is_ok() {
            result = file.write_all_at(&bytes, len).map_err(|e| (e, false));
            if result.is_ok() && self.opts.sync {
                result = file.sync_data().map_err(|e| (e, true));
            }
            if let Err((_, false)) = &result {
                // Cut back to the last whole record, so the segment stays
                // a log of whole records; failing that, stop.
                if let Err(e) = file.set_len(len) {
                    result = Err((e, true));
                }
            }
        }
        let mut st = self.lock();
        st.writing = false;
        if let Some(s) = new_segment {
            st.segments.push_back(s.number);
            st.segment = s;
        }
        match result {
            Ok(()) => st.segment.len = len + bytes.len() as u64,
            Err((e, poison)) => {
                tracing::error!(segment = number, error = %e, "a write-ahead log write failed; its samples were not acknowledged");
                if poison {
                    st.poisoned = Some(e.to_string());
                }
                // Failures back to back (a full disk) make one range.
                match st.failed.back_mut() {
                    Some(f) if f.last + 1 == first => {
                        f.last = last;
                        f.untold += last + 1 - first;
                    }
                    _ => st.failed.push_back(Failed {
                        first,
                        last,
                        error: e.to_string(),
                        untold: last + 1 - first,
                    }),
                }
            }
        }
        st.durable = st.durable.max(last);
        self.written.notify_all();
        st
    }

    /// Deletes the segments numbered below `number` (never the current
    /// one): their samples are all in durable blocks.
    pub fn retire_below(&self, number: u64) -> Result<usize, WalError> {
        let doomed: Vec<u64> = {
            let st = self.lock();
            let current = st.segment.number;
            st.segments
                .iter()
                .copied()
                .filter(|&n| n < number && n != current)
                .collect()
        };
        if doomed.is_empty() {
            return Ok(0);
        }
        for &n in &doomed {
            self.opts.vfs.remove_file(&segment_path(&self.dir, n))?;
            self.lock().segments.retain(|&s| s != n);
        }
        self.opts.vfs.sync_dir(&self.dir)?;
        Ok(doomed.len())
    }

    /// Closes the current segment and starts the next, empty one (so a
    /// clean stop can delete every segment whose records are stored);
    /// not while records are being written or wait to be. Whether it did.
    pub fn rotate(&self) -> Result<bool, WalError> {
        let mut st = self.lock();
        if st.writing
            || !st.pending.is_empty()
            || st.poisoned.is_some()
            || st.segment.len <= HEADER_BYTES as u64
        {
            return Ok(false);
        }
        let s = Self::create_segment(self.opts.vfs.as_ref(), &self.dir, st.segment.number + 1)?;
        st.segments.push_back(s.number);
        st.segment = s;
        Ok(true)
    }

    /// Segments on disk, oldest first.
    pub fn segments(&self) -> Vec<u64> {
        self.lock().segments.iter().copied().collect()
    }

    /// The segment records go to now.
    pub fn current_segment(&self) -> u64 {
        self.lock().segment.number
    }
}

/// The offset of the first whole record (framing and checksum right) at
/// or after `from`, if any.
fn next_record(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(FRAME_BYTES))
        .find(|&at| format::read_record(&bytes[at..]).is_ok())
}

#[cfg(test)]
mod tests;
