//! A data file being written: the active file of puts, or a merge output.
//!
//! Appends are gathered in a buffer and written in large 4096-aligned chunks
//! (the sensor-data paper, §5.2); large records, and every record of a write-through
//! store, skip the buffer (one `pwritev` of the buffered bytes and the
//! record, from the caller's memory). A flush that must put every byte on
//! the descriptor (sync, flush timer) also writes the partial last block, zero-padded under
//! O_DIRECT, and that block is written again when more data arrives. Reads
//! of bytes still in the buffer are served from it. The file's hint is built
//! alongside and written when the file is finished.

use crate::error::{Error, Result};
use crate::files::{data_path, hint_path};
use crate::format::file_header::{encode_file_header, FileKind};
use crate::format::hint::{encode_hint_entry, encode_hint_trailer, HintEntry};
use crate::format::record::{encode_header, RecordMeta, RECORD_HEADER_LEN};
use crate::vfs::{OpenMode, VFile, Vfs, MAX_WRITE_PARTS};
use smallvec::SmallVec;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One record to append: its header fields, key and value.
pub(crate) type NewRecord<'a> = (RecordMeta, &'a [u8], &'a [u8]);

/// Where each record of one append begins (inline for one or two).
pub(crate) type Offsets = SmallVec<[u32; 2]>;

const ALIGN: usize = 4096;
const HINT_SPILL_BYTES: usize = 1 << 20;
/// Records at least this large skip the write buffer (buffered mode).
const WRITE_AROUND_BYTES: u64 = 32 << 10;

/// A byte buffer whose start is 4096-aligned in memory, as O_DIRECT needs.
struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn with_capacity(cap: usize) -> AlignedBuf {
        let raw = vec![0u8; cap + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN);
        AlignedBuf { raw, start, len: 0 }
    }

    fn capacity(&self) -> usize {
        self.raw.len() - ALIGN
    }

    fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }

    /// The first `len` bytes, zero-padded to `padded` (for O_DIRECT).
    fn padded(&mut self, padded: usize) -> &[u8] {
        self.raw[self.start + self.len..self.start + padded].fill(0);
        &self.raw[self.start..self.start + padded]
    }

    fn ensure(&mut self, extra: usize) {
        let need = (self.len + extra).next_multiple_of(ALIGN);
        if need > self.capacity() {
            let mut bigger = AlignedBuf::with_capacity(need.max(self.capacity() * 2));
            bigger.push(self.as_slice());
            *self = bigger;
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.ensure(bytes.len());
        let at = self.start + self.len;
        self.raw[at..at + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Drops the first `n` bytes.
    fn drain_front(&mut self, n: usize) {
        let s = self.start;
        self.raw.copy_within(s + n..s + self.len, s);
        self.len -= n;
    }
}

/// Builds a hint file next to its data file.
pub(crate) struct HintBuilder {
    final_path: PathBuf,
    tmp_path: PathBuf,
    file: Option<Arc<dyn VFile>>,
    pending: Vec<u8>,
    written: u64,
    crc: crc32fast::Hasher,
    count: u64,
    failed: bool,
}

impl HintBuilder {
    pub fn new(dir: &Path, id: u32) -> HintBuilder {
        let final_path = hint_path(dir, id);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&encode_file_header(FileKind::Hint, id));
        HintBuilder {
            tmp_path: final_path.with_extension("hint.tmp"),
            final_path,
            file: None,
            pending: Vec::new(),
            written: 0,
            crc,
            count: 0,
            failed: false,
        }
    }

    pub fn add(&mut self, vfs: &dyn Vfs, entry: &HintEntry<'_>) {
        if self.failed {
            return;
        }
        let before = self.pending.len();
        encode_hint_entry(&mut self.pending, entry);
        self.crc.update(&self.pending[before..]);
        self.count += 1;
        if self.pending.len() >= HINT_SPILL_BYTES {
            if let Err(e) = self.spill(vfs, id_of(&self.final_path)) {
                self.fail(vfs, &e);
            }
        }
    }

    fn spill(&mut self, vfs: &dyn Vfs, id: u32) -> io::Result<()> {
        if self.file.is_none() {
            let _ = vfs.remove_file(&self.tmp_path);
            let f = vfs.open(&self.tmp_path, OpenMode::CreateNew)?;
            f.write_all_at(&encode_file_header(FileKind::Hint, id), 0)?;
            self.written = crate::format::FILE_HEADER_LEN as u64;
            self.file = Some(f);
        }
        let f = self.file.as_ref().expect("opened above");
        f.write_all_at(&self.pending, self.written)?;
        self.written += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    fn fail(&mut self, vfs: &dyn Vfs, e: &io::Error) {
        tracing::warn!(path = %self.tmp_path.display(), error = %e,
            "could not write hint file; a restart will scan the data file instead");
        self.failed = true;
        self.file = None;
        self.pending = Vec::new();
        let _ = vfs.remove_file(&self.tmp_path);
    }

    /// Removes the partial hint of a file that is going away.
    pub fn abandon(self, vfs: &dyn Vfs) {
        drop(self.file);
        let _ = vfs.remove_file(&self.tmp_path);
    }

    /// Writes the trailer, syncs and moves the hint into place. A failure is
    /// logged and leaves no hint: the data file stays the truth.
    pub fn finish(mut self, vfs: &dyn Vfs, id: u32) {
        if self.failed {
            return;
        }
        let trailer = encode_hint_trailer(self.count, self.crc.clone().finalize());
        self.pending.extend_from_slice(&trailer);
        let result = self.spill(vfs, id).and_then(|()| {
            let f = self.file.take().expect("spilled");
            f.sync_data()?;
            vfs.rename(&self.tmp_path, &self.final_path)
        });
        if let Err(e) = result {
            self.fail(vfs, &e);
        }
    }
}

fn id_of(path: &Path) -> u32 {
    crate::files::parse_file_name(path).map_or(0, |(id, _)| id)
}

/// A data file open for appending.
pub(crate) struct AppendFile {
    pub id: u32,
    pub path: PathBuf,
    file: Arc<dyn VFile>,
    direct: bool,
    buffer_bytes: usize,
    buf: AlignedBuf,
    /// File offset of `buf[0]`.
    buf_start: u64,
    /// Logical length: header and every record appended.
    pub len: u64,
    /// Bytes `[0, readable)` are on the descriptor and may be read there.
    readable: u64,
    /// Taken when the file is finished.
    hint: Option<HintBuilder>,
    /// True once data went to the descriptor that was not yet fsynced.
    dirty: bool,
}

impl AppendFile {
    pub fn create(
        vfs: &dyn Vfs,
        dir: &Path,
        id: u32,
        direct: bool,
        buffer_bytes: usize,
    ) -> Result<AppendFile> {
        let path = data_path(dir, id);
        let mode = if direct {
            OpenMode::CreateNewDirect
        } else {
            OpenMode::CreateNew
        };
        let file = vfs.open(&path, mode).map_err(|e| Error::io(&path, e))?;
        let mut buf = AlignedBuf::with_capacity(buffer_bytes.max(ALIGN));
        buf.push(&encode_file_header(FileKind::Data, id));
        Ok(AppendFile {
            id,
            path,
            file,
            direct,
            buffer_bytes,
            buf,
            buf_start: 0,
            len: crate::format::FILE_HEADER_LEN as u64,
            readable: 0,
            hint: Some(HintBuilder::new(dir, id)),
            dirty: false,
        })
    }

    /// Appends a record; returns its offset. On error nothing of it remains
    /// (the file is cut back) and records appended before are kept.
    pub fn append(
        &mut self,
        vfs: &dyn Vfs,
        meta: &RecordMeta,
        key: &[u8],
        value: &[u8],
        flush_now: bool,
    ) -> Result<u32> {
        Ok(self.append_batch(vfs, &[(*meta, key, value)], flush_now)?[0])
    }

    /// Appends records one after another as one write: on failure none of
    /// them is in the file (it is cut back) and nothing changes. Returns
    /// each record's offset.
    pub fn append_batch(
        &mut self,
        vfs: &dyn Vfs,
        records: &[NewRecord<'_>],
        flush_now: bool,
    ) -> Result<Offsets> {
        let start = self.len;
        let mut headers: SmallVec<[[u8; RECORD_HEADER_LEN]; 2]> =
            smallvec::smallvec![[0u8; RECORD_HEADER_LEN]; records.len()];
        let mut offsets: SmallVec<[u64; 2]> = SmallVec::with_capacity(records.len());
        let mut at = start;
        for (h, (meta, key, value)) in headers.iter_mut().zip(records) {
            encode_header(h, meta, key, value);
            offsets.push(at);
            at += (RECORD_HEADER_LEN + key.len() + value.len()) as u64;
        }
        let size = at - start;
        if !self.direct && (self.buffer_bytes == 0 || size >= WRITE_AROUND_BYTES) {
            let mut parts: SmallVec<[&[u8]; 6]> = SmallVec::with_capacity(records.len() * 3);
            for (h, (_, key, value)) in headers.iter().zip(records) {
                parts.extend_from_slice(&[&h[..], key, value]);
            }
            self.write_around(&parts)?;
        } else {
            let buf_len_before = self.buf.len;
            for (h, (_, key, value)) in headers.iter().zip(records) {
                self.buf.push(h);
                self.buf.push(key);
                self.buf.push(value);
            }
            self.len += size;
            if flush_now || self.buf.len >= self.buffer_bytes {
                if let Err(e) = self.flush(flush_now || self.buffer_bytes == 0) {
                    self.buf.truncate(buf_len_before);
                    self.len -= size;
                    return Err(e);
                }
            }
        }
        let hint = self.hint.as_mut().expect("append to a finished file");
        for ((meta, key, value), offset) in records.iter().zip(&offsets) {
            hint.add(
                vfs,
                &HintEntry {
                    key,
                    tombstone: meta.tombstone,
                    expiry_s: meta.expiry_s,
                    offset: *offset as u32,
                    record_len: (RECORD_HEADER_LEN + key.len() + value.len()) as u32,
                    seq: meta.seq,
                },
            );
        }
        Ok(offsets.into_iter().map(|o| o as u32).collect())
    }

    /// Writes the bytes still only in the buffer and then the records'
    /// `parts`, from the caller's memory, in one vectored write: a large
    /// value is not copied into the buffer first (that copy, and reading
    /// the cold buffer again to write it, cost as much as the kernel's own
    /// copy), and a write-through store rewrites nothing. Buffered mode
    /// only: O_DIRECT needs aligned memory. On failure the file is cut back
    /// and nothing changes.
    fn write_around(&mut self, parts: &[&[u8]]) -> Result<()> {
        let pending = &self.buf.as_slice()[(self.readable - self.buf_start) as usize..];
        let at = self.readable;
        // One record is three parts; a batch is copied into one (a vectored
        // write takes at most MAX_WRITE_PARTS slices).
        let joined: Vec<u8>;
        let mut iov: SmallVec<[&[u8]; MAX_WRITE_PARTS]> = SmallVec::new();
        iov.push(pending);
        if parts.len() < MAX_WRITE_PARTS {
            iov.extend_from_slice(parts);
        } else {
            joined = parts.concat();
            iov.push(&joined);
        }
        let written = self.file.write_all_vectored_at(&iov, at);
        drop(iov);
        if let Err(e) = written {
            return Err(self.cut_back(e));
        }
        self.dirty = true;
        self.len += parts.iter().map(|p| p.len() as u64).sum::<u64>();
        self.readable = self.len;
        self.buf.truncate(0);
        self.buf_start = self.len;
        Ok(())
    }

    /// Cuts a failed, perhaps torn, write back to the last byte known good;
    /// returns the write's error.
    fn cut_back(&self, e: io::Error) -> Error {
        if let Err(cut) = self.file.set_len(self.readable) {
            tracing::error!(path = %self.path.display(), error = %cut,
                "could not cut back a failed write");
        }
        Error::io(&self.path, e)
    }

    /// Hands buffered bytes to the kernel. With `pad_tail`, an O_DIRECT file
    /// also writes its partial last block, so every byte is on the
    /// descriptor. A failed write is cut back so the file ends at a record
    /// boundary again; the buffer keeps its bytes for a later retry.
    pub fn flush(&mut self, pad_tail: bool) -> Result<()> {
        if self.buf.len == 0 || self.readable == self.len {
            return Ok(());
        }
        // Writes start at 4096-aligned offsets and, but for the tail of a
        // padded flush, have 4096-multiple lengths: the partial last block
        // stays in the buffer and is written again, whole, later.
        let data = self.buf.len;
        let full = data & !(ALIGN - 1);
        let write_len = match (pad_tail, self.direct) {
            (false, _) => full,
            (true, false) => data,
            (true, true) => data.next_multiple_of(ALIGN),
        };
        let consumed = full;
        if write_len > 0 {
            let bytes = if write_len > data {
                self.buf.padded(write_len)
            } else {
                &self.buf.as_slice()[..write_len]
            };
            if let Err(e) = self.file.write_all_at(bytes, self.buf_start) {
                return Err(self.cut_back(e));
            }
            self.dirty = true;
            self.readable = self.buf_start + write_len.min(data) as u64;
        }
        if consumed > 0 {
            self.buf.drain_front(consumed);
            self.buf_start += consumed as u64;
        }
        Ok(())
    }

    /// Flushes and fsyncs.
    pub fn sync(&mut self) -> Result<()> {
        self.flush(true)?;
        if self.dirty {
            self.file
                .sync_data()
                .map_err(|e| Error::io(&self.path, e))?;
            self.dirty = false;
        }
        Ok(())
    }

    /// True when appended bytes are still only in the write buffer.
    pub fn has_unflushed(&self) -> bool {
        self.readable < self.len
    }

    /// True when no record was appended.
    pub fn is_empty(&self) -> bool {
        self.len == crate::format::FILE_HEADER_LEN as u64
    }

    /// The descriptor, for group commit outside the writer lock.
    pub fn descriptor(&self) -> Arc<dyn VFile> {
        self.file.clone()
    }

    /// Copies into `out` the part of `[offset, offset + out.len())` that is
    /// only in the buffer; returns how many leading bytes must still be read
    /// from the descriptor.
    pub fn read_buffered(&self, offset: u64, out: &mut [u8]) -> usize {
        let end = offset + out.len() as u64;
        let from = offset.max(self.readable);
        if from >= end {
            return out.len();
        }
        let src =
            &self.buf.as_slice()[(from - self.buf_start) as usize..(end - self.buf_start) as usize];
        out[(from - offset) as usize..].copy_from_slice(src);
        (from - offset) as usize
    }

    /// Hands every buffered byte to the kernel and frees the write buffer:
    /// the file takes no more appends and waits to be sealed.
    pub fn close_for_appends(&mut self) -> Result<()> {
        self.flush(true)?;
        self.buf = AlignedBuf::with_capacity(ALIGN);
        self.buf_start = self.readable;
        Ok(())
    }

    /// Drops a file that will never be sealed (merge deleted it): removes
    /// its half-written hint.
    pub fn abandon(mut self, vfs: &dyn Vfs) {
        if let Some(hint) = self.hint.take() {
            hint.abandon(vfs);
        }
    }

    /// Flushes, trims O_DIRECT padding, fsyncs and writes the hint file.
    pub fn finish(&mut self, vfs: &dyn Vfs) -> Result<()> {
        self.flush(true)?;
        if self.direct {
            self.file
                .set_len(self.len)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io(&self.path, e))?;
        if let Some(hint) = self.hint.take() {
            hint.finish(vfs, self.id);
        }
        Ok(())
    }
}
