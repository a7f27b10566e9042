//! Walks the records of a data file, through a window of its bytes.
//!
//! A record that fails its checks starts a damaged region; the scanner looks
//! for the next offset where a whole valid record begins and reports the
//! region as skipped. If none is found, the damage runs to the end: a torn
//! tail, which recovery truncates. Every step advances by at least one byte,
//! so the scan ends on any input.

use crate::format::file_header::FILE_HEADER_LEN;
use crate::format::record::{RecordHeader, RECORD_HEADER_LEN};
use crate::vfs::VFile;
use std::io;

const WINDOW_BYTES: usize = 8 << 20;

/// What the scanner found next.
#[derive(Debug)]
pub enum ScanEvent<'a> {
    Record {
        offset: u64,
        header: RecordHeader,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// Bytes `[offset, offset + len)` held no valid record and were skipped;
    /// a valid record follows.
    Skipped { offset: u64, len: u64 },
    /// Nothing valid from `offset` to the end of the file.
    TornTail { offset: u64 },
}

/// Byte source for the scanner: a file, or a slice (fuzzing, tests).
pub enum Source<'a> {
    File(&'a dyn VFile, u64),
    Slice(&'a [u8]),
}

impl Source<'_> {
    fn len(&self) -> u64 {
        match self {
            Source::File(_, len) => *len,
            Source::Slice(s) => s.len() as u64,
        }
    }
}

pub struct Scanner<'a> {
    source: Source<'a>,
    window: Vec<u8>,
    window_start: u64,
    pos: u64,
    done: bool,
}

impl<'a> Scanner<'a> {
    /// Scans `data` as a data file body starting at file offset `start`
    /// (record bytes only; `data[0]` is at `start`).
    pub fn new(data: &'a [u8], start: u64) -> Scanner<'a> {
        Scanner {
            source: Source::Slice(data),
            window: Vec::new(),
            window_start: 0,
            pos: start.min(data.len() as u64),
            done: false,
        }
    }

    /// Scans the records of a data file (after its header).
    pub fn of_file(file: &'a dyn VFile, len: u64) -> Scanner<'a> {
        Scanner {
            source: Source::File(file, len),
            window: Vec::new(),
            window_start: 0,
            pos: (FILE_HEADER_LEN as u64).min(len),
            done: false,
        }
    }

    /// Makes `[off, off + len)` available; false when past the end.
    fn ensure(&mut self, off: u64, len: usize) -> io::Result<bool> {
        let end = off + len as u64;
        if end > self.source.len() {
            return Ok(false);
        }
        if let Source::File(file, file_len) = self.source {
            let have_end = self.window_start + self.window.len() as u64;
            if off < self.window_start || end > have_end {
                let want = (len.max(WINDOW_BYTES) as u64).min(file_len - off) as usize;
                self.window.resize(want, 0);
                if let Err(e) = file.read_exact_at(&mut self.window, off) {
                    self.done = true;
                    self.window.clear();
                    return Err(e);
                }
                self.window_start = off;
            }
        }
        Ok(true)
    }

    fn bytes(&self, off: u64, len: usize) -> &[u8] {
        match self.source {
            Source::Slice(s) => &s[off as usize..off as usize + len],
            Source::File(..) => {
                let at = (off - self.window_start) as usize;
                &self.window[at..at + len]
            }
        }
    }

    /// The whole valid record at `off`, if there is one.
    fn record_at(&mut self, off: u64) -> io::Result<Option<RecordHeader>> {
        if !self.ensure(off, RECORD_HEADER_LEN)? {
            return Ok(None);
        }
        let Ok(header) = RecordHeader::decode(self.bytes(off, RECORD_HEADER_LEN)) else {
            return Ok(None);
        };
        let len = header.record_len() as usize;
        if !self.ensure(off, len)? {
            return Ok(None);
        }
        let body = self.bytes(off + RECORD_HEADER_LEN as u64, len - RECORD_HEADER_LEN);
        let (key, value) = body.split_at(header.key_len as usize);
        Ok(header.check_body(key, value).is_ok().then_some(header))
    }

    /// The next event, or `None` at the end.
    pub fn next_event(&mut self) -> Option<ScanEvent<'_>> {
        // A read error ends the scan (`ensure` marks it done).
        self.try_next().ok().flatten()
    }

    pub fn try_next(&mut self) -> io::Result<Option<ScanEvent<'_>>> {
        let end = self.source.len();
        if self.done || self.pos >= end {
            return Ok(None);
        }
        let start = self.pos;
        if let Some(header) = self.record_at(start)? {
            self.pos = start + header.record_len();
            return Ok(Some(self.record_event(start, header)));
        }
        // Damage at `start`: find the next whole valid record.
        let mut probe = start + 1;
        while probe + RECORD_HEADER_LEN as u64 <= end {
            if self.record_at(probe)?.is_some() {
                self.pos = probe;
                return Ok(Some(ScanEvent::Skipped {
                    offset: start,
                    len: probe - start,
                }));
            }
            probe += 1;
        }
        self.done = true;
        Ok(Some(ScanEvent::TornTail { offset: start }))
    }

    fn record_event(&self, offset: u64, header: RecordHeader) -> ScanEvent<'_> {
        let body = self.bytes(
            offset + RECORD_HEADER_LEN as u64,
            header.record_len() as usize - RECORD_HEADER_LEN,
        );
        let (key, value) = body.split_at(header.key_len as usize);
        ScanEvent::Record {
            offset,
            header,
            key,
            value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::{encode_record, RecordMeta};

    fn file_of(n: u64) -> (Vec<u8>, Vec<u64>) {
        let mut buf = vec![0u8; FILE_HEADER_LEN];
        let mut offsets = Vec::new();
        for i in 0..n {
            offsets.push(buf.len() as u64);
            let meta = RecordMeta {
                seq: i + 1,
                timestamp_us: 0,
                expiry_s: None,
                tombstone: false,
                batch: crate::format::record::BatchPos::Alone,
            };
            encode_record(&mut buf, &meta, format!("k{i}").as_bytes(), &[i as u8; 100]);
        }
        (buf, offsets)
    }

    fn events(data: &[u8]) -> Vec<String> {
        let mut s = Scanner::new(data, FILE_HEADER_LEN as u64);
        let mut out = Vec::new();
        while let Some(ev) = s.next_event() {
            out.push(match ev {
                ScanEvent::Record { offset, .. } => format!("rec@{offset}"),
                ScanEvent::Skipped { offset, len } => format!("skip@{offset}+{len}"),
                ScanEvent::TornTail { offset } => format!("torn@{offset}"),
            });
        }
        out
    }

    #[test]
    fn clean_file() {
        let (buf, offs) = file_of(5);
        let want: Vec<_> = offs.iter().map(|o| format!("rec@{o}")).collect();
        assert_eq!(events(&buf), want);
    }

    #[test]
    fn corrupt_middle_record_is_skipped() {
        let (mut buf, offs) = file_of(5);
        buf[offs[2] as usize + 50] ^= 0xff;
        let ev = events(&buf);
        assert_eq!(ev[2], format!("skip@{}+{}", offs[2], offs[3] - offs[2]));
        assert_eq!(ev.len(), 5);
    }

    #[test]
    fn torn_tail() {
        let (buf, offs) = file_of(5);
        let cut = &buf[..buf.len() - 7];
        let ev = events(cut);
        assert_eq!(ev.last().unwrap(), &format!("torn@{}", offs[4]));
        assert_eq!(ev.len(), 5);
    }
}
