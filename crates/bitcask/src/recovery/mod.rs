//! Opening a store: rebuild the keydir and per-file statistics from hint
//! files, or from the data files where a hint is missing or damaged.
//!
//! A torn tail is truncated; a damaged record in the middle of a file is
//! skipped, counted and logged with its file and offset. Recovery never
//! loops and never panics on file contents.

pub mod batch;
pub mod scan;

use crate::append::HintBuilder;
use crate::error::{Error, Result};
use crate::files::{data_path, hint_path, parse_file_name, FileTable};
use crate::format::file_header::{decode_file_header, FileKind, FILE_HEADER_LEN};
use crate::format::hint::{HintEntry, HintFile};
use crate::keydir::{Entry, Keydir};
use crate::stats::StatsTable;
use crate::vfs::{OpenMode, Vfs};
use batch::BatchGate;
use scan::{ScanEvent, Scanner};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub files: usize,
    pub files_from_hints: usize,
    pub files_scanned: usize,
    pub records: u64,
    /// Damaged regions skipped in the middle of files.
    pub corrupt_regions: u64,
    pub corrupt_bytes: u64,
    /// Bytes cut off torn file ends.
    pub torn_bytes: u64,
    pub max_seq: u64,
    pub max_file_id: u32,
    /// Merges whose deletions a crash interrupted, finished at open.
    pub merges_finished: usize,
    /// Records of batches that were not whole on disk (a crash during
    /// their write), not served.
    pub unfinished_batch_records: u64,
}

/// Hint entries one loader thread takes at a time.
const HINT_CHUNK_ENTRIES: usize = 1 << 16;
const MAX_LOAD_THREADS: usize = 8;

pub(crate) struct Loader<'a> {
    pub dir: &'a Path,
    pub vfs: &'a dyn Vfs,
    pub keydir: &'a Keydir,
    pub stats: &'a mut StatsTable,
    pub files: &'a FileTable,
}

impl Loader<'_> {
    pub fn load(&mut self) -> Result<RecoveryReport> {
        let mut report = RecoveryReport::default();
        let mut data_ids = Vec::new();
        let mut hint_ids = Vec::new();
        let listing = self
            .vfs
            .list_dir(self.dir)
            .map_err(|e| Error::io(self.dir, e))?;
        let (manifest_max, manifests) =
            crate::retire::finish_manifests(self.vfs, self.dir, &listing)?;
        report.max_file_id = manifest_max;
        report.merges_finished = manifests;
        let listing = if manifests > 0 {
            self.vfs
                .list_dir(self.dir)
                .map_err(|e| Error::io(self.dir, e))?
        } else {
            listing
        };
        for path in listing {
            match parse_file_name(&path) {
                Some((id, "data")) => data_ids.push(id),
                Some((id, "hint")) => hint_ids.push(id),
                Some((_, "hint.tmp")) => {
                    // An unfinished hint from a crash; its data file is the truth.
                    let _ = self.vfs.remove_file(&path);
                }
                _ => {}
            }
        }
        data_ids.sort_unstable();
        for id in hint_ids {
            // Ids are never reused, hints' included; a hint whose data file
            // is gone is the leftover of a deletion a crash cut short.
            report.max_file_id = report.max_file_id.max(id);
            if data_ids.binary_search(&id).is_err() {
                let _ = self.vfs.remove_file(&hint_path(self.dir, id));
            }
        }
        let mut present = Vec::with_capacity(data_ids.len());
        for id in data_ids {
            report.max_file_id = report.max_file_id.max(id);
            if let Some(len) = self.check_file(id)? {
                present.push((id, len));
            }
        }
        report.files = present.len();
        // Files whose hint is unusable are scanned afterwards.
        let mut to_scan = Vec::new();
        for &(id, len) in &present {
            let mut stats = StatsTable::delta();
            if self.load_hint(id, len, &mut stats, &mut report) {
                self.stats.absorb(stats);
            } else {
                to_scan.push((id, len));
            }
        }
        for (id, len) in to_scan {
            report.files_scanned += 1;
            let mut stats = StatsTable::delta();
            self.scan_file(id, len, &mut stats, &mut report)?;
            self.stats.absorb(stats);
        }
        report.files_from_hints = report.files - report.files_scanned;
        Ok(report)
    }

    /// Checks a data file's header and registers it; `None` when the file
    /// was an empty leftover and has been removed.
    fn check_file(&mut self, id: u32) -> Result<Option<u64>> {
        let path = data_path(self.dir, id);
        let file = self
            .vfs
            .open(&path, OpenMode::Read)
            .map_err(|e| Error::io(&path, e))?;
        let len = file.size().map_err(|e| Error::io(&path, e))?;
        if len < FILE_HEADER_LEN as u64 {
            // Created, then the process died before the header was written.
            tracing::warn!(path = %path.display(), len, "removing a data file with no header");
            drop(file);
            return self.remove_leftover(id);
        }
        let mut header = [0u8; FILE_HEADER_LEN];
        file.read_exact_at(&mut header, 0)
            .map_err(|e| Error::io(&path, e))?;
        if header.iter().all(|&b| b == 0) {
            drop(file);
            return self.torn_header(id, len);
        }
        let corrupt = |source| Error::Corrupt {
            path: path.clone(),
            offset: 0,
            source,
        };
        match decode_file_header(FileKind::Data, &header) {
            Ok(stored) if stored == id => {}
            Ok(_) => {
                return Err(corrupt(crate::error::DecodeError::Invalid(
                    "file id in header does not match the file name",
                )))
            }
            Err(source) => return Err(corrupt(source)),
        }
        self.register(id, path);
        Ok(Some(len))
    }

    fn register(&mut self, id: u32, path: std::path::PathBuf) {
        self.stats.add_file(id);
        self.files.insert(id, path);
    }

    /// Removes a data file that holds nothing, and its hint if any.
    fn remove_leftover(&self, id: u32) -> Result<Option<u64>> {
        let path = data_path(self.dir, id);
        self.vfs
            .remove_file(&path)
            .map_err(|e| Error::io(&path, e))?;
        let _ = self.vfs.remove_file(&hint_path(self.dir, id));
        Ok(None)
    }

    /// A data file whose first sector never reached the disk (a power cut
    /// soon after it was created): what did reach it is scanned as usual
    /// once the header is written again; a file of zeros only is removed.
    /// Nothing in it was ever fsynced, since an fsync would have made the
    /// header durable too.
    fn torn_header(&mut self, id: u32, len: u64) -> Result<Option<u64>> {
        let path = data_path(self.dir, id);
        let file = self
            .vfs
            .open(&path, OpenMode::ReadWrite)
            .map_err(|e| Error::io(&path, e))?;
        if only_zeros(file.as_ref(), len).map_err(|e| Error::io(&path, e))? {
            tracing::warn!(path = %path.display(), len,
                "removing a data file of zeros only (created just before a crash)");
            drop(file);
            return self.remove_leftover(id);
        }
        tracing::warn!(path = %path.display(), len,
            "a data file's header never reached the disk; writing it again and scanning the file");
        let header = crate::format::file_header::encode_file_header(FileKind::Data, id);
        file.write_all_at(&header, 0)
            .and_then(|()| file.sync_data())
            .map_err(|e| Error::io(&path, e))?;
        // Its hint, if any, cannot be trusted to describe this file.
        let _ = self.vfs.remove_file(&hint_path(self.dir, id));
        self.register(id, path);
        Ok(Some(len))
    }

    /// Scans a data file whose hint is unusable, truncates a torn tail and
    /// writes a fresh hint.
    fn scan_file(
        &self,
        id: u32,
        len: u64,
        stats: &mut StatsTable,
        report: &mut RecoveryReport,
    ) -> Result<()> {
        let path = data_path(self.dir, id);
        let file = self
            .vfs
            .open(&path, OpenMode::ReadWrite)
            .map_err(|e| Error::io(&path, e))?;
        let mut hint = HintBuilder::new(self.dir, id);
        let mut truncate_at = None;
        let mut gate = BatchGate::default();
        {
            let mut scanner = Scanner::of_file(file.as_ref(), len);
            while let Some(event) = scanner.try_next().map_err(|e| Error::io(&path, e))? {
                match event {
                    ScanEvent::Record {
                        offset,
                        header,
                        key,
                        ..
                    } => {
                        for (offset, header, key) in
                            gate.record(offset, &header, (offset, header, key.to_vec()))
                        {
                            let entry = HintEntry {
                                key: &key,
                                tombstone: header.is_tombstone(),
                                expiry_s: header.expiry(),
                                offset: offset as u32,
                                record_len: header.record_len() as u32,
                                seq: header.seq,
                            };
                            self.add(id, &entry, stats, report);
                            hint.add(self.vfs, &entry);
                        }
                    }
                    ScanEvent::Skipped { offset, len } => {
                        tracing::error!(path = %path.display(), offset, len,
                            "skipping a damaged region of a data file");
                        report.corrupt_regions += 1;
                        report.corrupt_bytes += len;
                        gate.skipped();
                    }
                    ScanEvent::TornTail { offset } => truncate_at = Some(offset),
                }
            }
        }
        // A batch the file ends inside was never whole: it goes with the
        // torn tail, if any.
        if let Some(cut) = gate.end() {
            truncate_at = Some(truncate_at.map_or(cut, |t: u64| t.min(cut)));
        }
        if gate.dropped_records() > 0 {
            tracing::warn!(path = %path.display(), records = gate.dropped_records(),
                "records of unfinished batches dropped");
            report.unfinished_batch_records += gate.dropped_records();
        }
        if let Some(offset) = truncate_at {
            tracing::warn!(path = %path.display(), offset, cut = len - offset,
                "truncating a torn tail");
            report.torn_bytes += len - offset;
            file.set_len(offset).map_err(|e| Error::io(&path, e))?;
        }
        // A file without a usable hint was not sealed: the previous run may
        // have died with its pages unwritten. What the store serves from now
        // on must be durable, or a later power cut could take back what a
        // `sync()` after this open promised (a delete among them).
        file.sync_data().map_err(|e| Error::io(&path, e))?;
        drop(file);
        hint.finish(self.vfs, id);
        Ok(())
    }

    /// Loads a file from its hint; false when the hint is missing or damaged
    /// (nothing was loaded then).
    fn load_hint(
        &self,
        id: u32,
        data_len: u64,
        stats: &mut StatsTable,
        report: &mut RecoveryReport,
    ) -> bool {
        let path = hint_path(self.dir, id);
        let bytes = match self
            .vfs
            .open(&path, OpenMode::Read)
            .and_then(|f| f.read_all())
        {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read hint file");
                return false;
            }
        };
        let hint = match HintFile::parse(&bytes) {
            Ok(h) if h.file_id == id => h,
            Ok(_) => {
                tracing::warn!(path = %path.display(), "hint names another file; scanning data");
                return false;
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "damaged hint file; scanning data");
                return false;
            }
        };
        // The records a hint names must lie in order inside the data file and
        // end where it ends (gaps are regions skipped as damaged): otherwise
        // the hint is for another version of the file.
        let mut end = FILE_HEADER_LEN as u64;
        for e in hint.iter() {
            if u64::from(e.offset) < end {
                tracing::warn!(path = %path.display(), "hint does not match its data file; scanning data");
                return false;
            }
            end = u64::from(e.offset) + u64::from(e.record_len);
        }
        if end != data_len {
            tracing::warn!(path = %path.display(), end, data_len,
                "hint does not cover its data file; scanning data");
            return false;
        }
        self.keydir.reserve(hint.len() as usize);
        // Several threads share the entries: the keydir is sharded, and the
        // outcome does not depend on order (the highest sequence number
        // wins), so each thread keeps its own statistics delta.
        let chunks = hint.chunks(HINT_CHUNK_ENTRIES);
        // A hint of one chunk loads on this thread without asking how many
        // cores there are (a question that reads /proc and cgroup files).
        let workers = if chunks.len() <= 1 {
            1
        } else {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, MAX_LOAD_THREADS)
                .min(chunks.len())
        };
        if workers <= 1 {
            for e in hint.iter() {
                self.add(id, &e, stats, report);
            }
            return true;
        }
        let next = AtomicUsize::new(0);
        let parts: Vec<(StatsTable, RecoveryReport)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let (next, chunks) = (&next, &chunks);
                    s.spawn(move || {
                        let mut stats = StatsTable::delta();
                        let mut part = RecoveryReport::default();
                        while let Some(chunk) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                            for e in chunk.clone() {
                                self.add(id, &e, &mut stats, &mut part);
                            }
                        }
                        (stats, part)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("hint loader thread"))
                .collect()
        });
        for (part_stats, part) in parts {
            stats.absorb(part_stats);
            report.records += part.records;
            report.max_seq = report.max_seq.max(part.max_seq);
        }
        true
    }

    fn add(
        &self,
        file_id: u32,
        e: &HintEntry<'_>,
        stats: &mut StatsTable,
        report: &mut RecoveryReport,
    ) {
        report.records += 1;
        report.max_seq = report.max_seq.max(e.seq);
        stats.record_written(file_id, e.record_len, e.seq);
        let entry = Entry {
            seq: e.seq,
            file_id,
            offset: e.offset,
            size: e.record_len,
            expiry_s: e.expiry_s.unwrap_or(0),
            tombstone: e.tombstone,
        };
        if let Ok(replaced) = self.keydir.put_if_newer(e.key, entry) {
            stats.became_live(&entry);
            if let Some(old) = replaced {
                stats.became_dead(&old);
            }
        }
    }
}

/// True when the first `len` bytes of `file` are all zero (read in chunks:
/// a file may be as large as the rotation size).
fn only_zeros(file: &dyn crate::vfs::VFile, len: u64) -> std::io::Result<bool> {
    const CHUNK: u64 = 1 << 20;
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    let mut at = 0;
    while at < len {
        let n = CHUNK.min(len - at) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}
