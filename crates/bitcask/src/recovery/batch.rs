//! Batches at recovery: the records of a batch (docs/format.md, "Data
//! record", flags 0x04-0x10) are served all together or not at all.
//!
//! A batch is complete when its first record, every middle record and its
//! last record follow one another in the file, with consecutive sequence
//! numbers and nothing skipped between them. Anything else (a batch cut
//! by the end of the file or by a damaged region, a member whose batch
//! start was lost) is dropped whole.

use crate::format::record::{BatchPos, RecordHeader};

/// Groups scanned records into what recovery may serve.
#[derive(Debug)]
pub struct BatchGate<T> {
    open: Vec<T>,
    /// Offset of the open batch's first record.
    open_at: u64,
    /// Offset just past the open batch's last record so far.
    open_end: u64,
    last_seq: u64,
    dropped_records: u64,
}

impl<T> Default for BatchGate<T> {
    fn default() -> Self {
        BatchGate {
            open: Vec::new(),
            open_at: 0,
            open_end: 0,
            last_seq: 0,
            dropped_records: 0,
        }
    }
}

impl<T> BatchGate<T> {
    /// A record at `offset`; returns the records that may be served now,
    /// in file order.
    pub fn record(&mut self, offset: u64, header: &RecordHeader, item: T) -> Vec<T> {
        let end = offset + header.record_len();
        match header.batch() {
            BatchPos::Alone => {
                self.drop_open();
                vec![item]
            }
            BatchPos::First => {
                self.drop_open();
                self.open.push(item);
                self.open_at = offset;
                self.open_end = end;
                self.last_seq = header.seq;
                Vec::new()
            }
            pos @ (BatchPos::Middle | BatchPos::Last) => {
                let follows = !self.open.is_empty()
                    && offset == self.open_end
                    && header.seq == self.last_seq.wrapping_add(1);
                if !follows {
                    // A member whose batch is already broken.
                    self.drop_open();
                    self.dropped_records += 1;
                    return Vec::new();
                }
                self.open.push(item);
                self.open_end = end;
                self.last_seq = header.seq;
                if pos == BatchPos::Last {
                    std::mem::take(&mut self.open)
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// A damaged region: an open batch cannot be complete.
    pub fn skipped(&mut self) {
        self.drop_open();
    }

    /// The end of the file (or a torn tail). Returns the offset where an
    /// unfinished batch began, if one was open: nothing after it is
    /// served, so the file can be cut back there.
    pub fn end(&mut self) -> Option<u64> {
        let cut = (!self.open.is_empty()).then_some(self.open_at);
        self.drop_open();
        cut
    }

    /// Records dropped because their batch was not whole.
    pub fn dropped_records(&self) -> u64 {
        self.dropped_records
    }

    fn drop_open(&mut self) {
        self.dropped_records += self.open.len() as u64;
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(seq: u64, batch: BatchPos) -> RecordHeader {
        use crate::format::record::*;
        let flags = match batch {
            BatchPos::Alone => 0,
            BatchPos::First => FLAG_BATCH | FLAG_BATCH_FIRST,
            BatchPos::Middle => FLAG_BATCH,
            BatchPos::Last => FLAG_BATCH | FLAG_BATCH_LAST,
        };
        RecordHeader {
            body_crc: 0,
            flags,
            key_len: 4,
            value_len: 0,
            seq,
            timestamp_us: 0,
            expiry_s: 0,
        }
    }

    /// Feeds (offset, seq, pos) records, `None` for a skipped region;
    /// returns the seqs served and the cut offset at the end.
    fn run(events: &[Option<(u64, u64, BatchPos)>]) -> (Vec<u64>, Option<u64>) {
        let mut g = BatchGate::default();
        let mut served = Vec::new();
        for e in events {
            match e {
                Some((off, seq, pos)) => served.extend(g.record(*off, &header(*seq, *pos), *seq)),
                None => g.skipped(),
            }
        }
        (served, g.end())
    }

    #[test]
    fn batch_table() {
        use BatchPos::*;
        // Records are 40 bytes (36-byte header, 4-byte key).
        let r = |i: u64, seq: u64, pos| Some((16 + 40 * i, seq, pos));
        type Event = Option<(u64, u64, BatchPos)>;
        let cases: &[(&[Event], &[u64], Option<u64>)] = &[
            // alone records pass
            (&[r(0, 1, Alone), r(1, 2, Alone)], &[1, 2], None),
            // a whole batch passes, in order
            (
                &[r(0, 1, First), r(1, 2, Middle), r(2, 3, Last)],
                &[1, 2, 3],
                None,
            ),
            (
                &[r(0, 1, First), r(1, 2, Last), r(2, 3, Alone)],
                &[1, 2, 3],
                None,
            ),
            // cut by the end of the file: dropped, cut where it began
            (
                &[r(0, 1, Alone), r(1, 2, First), r(2, 3, Middle)],
                &[1],
                Some(56),
            ),
            // cut by damage: dropped, later records pass
            (
                &[r(0, 1, First), None, r(2, 3, Last), r(3, 4, Alone)],
                &[4],
                None,
            ),
            // a member without its start: dropped
            (
                &[r(0, 5, Middle), r(1, 6, Last), r(2, 7, Alone)],
                &[7],
                None,
            ),
            // seqs not consecutive: not the same batch
            (&[r(0, 1, First), r(1, 3, Last)], &[], None),
            // a gap in the file: not the same batch
            (&[r(0, 1, First), r(2, 2, Last)], &[], None),
            // a new batch starts before the open one ended
            (
                &[r(0, 1, First), r(1, 2, First), r(2, 3, Last)],
                &[2, 3],
                None,
            ),
            // an alone record inside an open batch breaks it
            (&[r(0, 1, First), r(1, 2, Alone), r(2, 3, Last)], &[2], None),
        ];
        for (events, served, cut) in cases {
            assert_eq!(run(events), (served.to_vec(), *cut), "{events:?}");
        }
    }
}
