//! The reading side of a sender, shared by the node's runtime and the
//! cluster simulation: a partition's keys in the byte order of their
//! encoding (the order cursors follow), listed a chunk at a time, so a
//! transfer holds one chunk of keys and never the partition's; and a
//! record of what was sent, 16 bytes a key (a hash of the key and one of
//! the clock it was sent with), so that top-up passes find the keys not
//! sent yet and the drop after a transfer removes only keys still as
//! sent.
//!
//! A listing folds the vnode's keys once and keeps the smallest after
//! the cursor. A chunk holds at least `chunk_min` keys and at least
//! 1/[`CHUNKS_PER_PASS`] of the partition (as the last fold counted it),
//! so a pass folds the keys at most about that many times whatever the
//! partition's size, and holds at most that share of its keys.
//!
//! Hashes are 64-bit, and a clock's is taken with its key
//! ([`clock_hash`]): two keys of one partition with one key hash (about
//! one chance in 2^65 / n² for n keys) make the second count as sent. A
//! top-up then leaves it to hinted handoff after the switch, and a drop
//! keeps it: the recorded hash is of the other key with its clock, which
//! the second key's does not match even when the clocks are equal (keys
//! written once by one vnode in one second have equal clocks). So
//! nothing is lost unless a key hash and a 64-bit clock hash both
//! collide.

use crate::{Cursor, Item};

/// Keys a chunk holds at least, on a node.
pub const CHUNK_MIN: usize = 65_536;

/// A chunk holds at least this share of a partition's keys.
pub const CHUNKS_PER_PASS: usize = 64;

/// Keys listed after a cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyChunk {
    /// Sorted, each after the cursor.
    pub keys: Vec<Vec<u8>>,
    /// Keys after the last of `keys` were left out.
    pub more: bool,
    /// Every key the fold saw (the partition's size).
    pub total: usize,
}

/// A key's stored object, as handoff sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub value: Vec<u8>,
    /// [`clock_hash`] of its key and clock (64 bits, so equal hashes are
    /// taken for an unchanged clock).
    pub clock: u64,
}

/// A partition's data, as a sender reads and drops it (a vnode).
pub trait PartitionData {
    /// The first `max` keys after `after` (from the first when `None`) in
    /// the byte order of their encoding.
    fn keys_after(&self, after: Option<&[u8]>, max: usize) -> Result<KeyChunk, String>;
    /// The stored object of `key` (`None`: gone since it was listed).
    fn read(&self, key: &[u8]) -> Result<Option<Stored>, String>;
    /// Removes each key whose stored clock still has the hash given
    /// (retiring the vnode's epochs durably first); how many went.
    fn drop_unchanged(&self, keys: &[(Vec<u8>, u64)]) -> Result<usize, String>;
}

/// The hash handoff records of a key's clock: of the clock's encoding,
/// seeded by the key's, so that another key with an equal clock does not
/// match it.
pub fn clock_hash(key: &[u8], encoded_clock: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(encoded_clock, key_hash(key) ^ 1)
}

fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// What a transfer sent: (hash of the key, hash of its clock), the last
/// send of a key counting. Entries before `sealed` are sorted by key
/// hash with no repeats and answer [`SentRecord::clock_of`]; later ones
/// wait for the next [`SentRecord::seal`].
#[derive(Clone, Debug, Default)]
pub struct SentRecord {
    entries: Vec<(u64, u64)>,
    sealed: usize,
}

impl SentRecord {
    pub fn insert(&mut self, key: &[u8], clock: u64) {
        self.entries.push((key_hash(key), clock));
    }

    /// Sorts what was inserted into what answers lookups.
    pub fn seal(&mut self) {
        if self.sealed == self.entries.len() {
            return;
        }
        // Stable: of a key's entries the last inserted stays last.
        self.entries.sort_by_key(|e| e.0);
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.entries.len());
        for e in self.entries.drain(..) {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        self.entries = out;
        self.sealed = self.entries.len();
    }

    /// The clock hash `key` was last sent with, as of the last seal.
    pub fn clock_of(&self, key: &[u8]) -> Option<u64> {
        let h = key_hash(key);
        let sealed = &self.entries[..self.sealed];
        sealed
            .binary_search_by_key(&h, |e| e.0)
            .ok()
            .map(|i| sealed[i].1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A batch read for the sender.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub items: Vec<Item>,
    /// Each item's clock hash, in order.
    pub clocks: Vec<u64>,
    /// The last key looked at (read, or passed over as sent or gone).
    pub cursor: Option<Cursor>,
    /// Keys follow the cursor.
    pub more: bool,
}

/// One pass of a sender over a partition: the chunk of keys listed, and
/// what the transfer sent so far.
#[derive(Debug)]
pub struct Pass {
    chunk_min: usize,
    chunk: Vec<Vec<u8>>,
    /// The chunk holds every key after this one (`None`: from the
    /// first), up to its last key when `chunk_more`, else all.
    chunk_after: Option<Vec<u8>>,
    chunk_more: bool,
    listed: bool,
    /// Keys in the partition at the last listing.
    pub total: usize,
    /// A top-up pass: keys in the record (sent by earlier passes) are
    /// passed over.
    only_unsent: bool,
    /// Record the keys sent (not for a repair, which removes nothing).
    recording: bool,
    pub sent: SentRecord,
}

impl Pass {
    /// A pass carrying what earlier passes of the transfer sent; a
    /// top-up (`only_unsent`) sends only the keys they did not.
    pub fn new(chunk_min: usize, mut sent: SentRecord, only_unsent: bool, recording: bool) -> Pass {
        sent.seal();
        Pass {
            chunk_min: chunk_min.max(1),
            chunk: Vec::new(),
            chunk_after: None,
            chunk_more: false,
            listed: false,
            total: 0,
            only_unsent,
            recording,
            sent,
        }
    }

    /// Whether the chunk holds every key just after `cursor`.
    fn covers(&self, cursor: Option<&[u8]>) -> bool {
        if !self.listed {
            return false;
        }
        let from_ok = match (&self.chunk_after, cursor) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(c)) => a.as_slice() <= c,
        };
        let to_ok = !self.chunk_more
            || match (self.chunk.last(), cursor) {
                (Some(last), Some(c)) => c < last.as_slice(),
                (Some(_), None) => true,
                (None, _) => false,
            };
        from_ok && to_ok
    }

    fn list(&mut self, data: &dyn PartitionData, after: Option<&[u8]>) -> Result<(), String> {
        let max = self.chunk_min.max(self.total / CHUNKS_PER_PASS);
        let c = data.keys_after(after, max)?;
        self.chunk = c.keys;
        self.chunk_more = c.more;
        self.total = c.total;
        self.chunk_after = after.map(<[u8]>::to_vec);
        self.listed = true;
        Ok(())
    }

    /// Reads the keys after `after`, at most `max_items` and about
    /// `max_bytes` (a single larger item goes alone), as the sender's
    /// `Read` effect asks.
    pub fn read(
        &mut self,
        data: &dyn PartitionData,
        after: Option<&[u8]>,
        max_items: usize,
        max_bytes: usize,
    ) -> Result<Batch, String> {
        let mut items = Vec::new();
        let mut clocks = Vec::new();
        let mut bytes = 0usize;
        let mut cursor: Option<Vec<u8>> = after.map(<[u8]>::to_vec);
        loop {
            if !self.covers(cursor.as_deref()) {
                self.list(data, cursor.as_deref())?;
            }
            let start = match &cursor {
                Some(c) => self.chunk.partition_point(|k| k.as_slice() <= c.as_slice()),
                None => 0,
            };
            for i in start..self.chunk.len() {
                if items.len() >= max_items.max(1) || (bytes >= max_bytes && !items.is_empty()) {
                    return Ok(Batch {
                        items,
                        clocks,
                        cursor,
                        more: true,
                    });
                }
                let key = &self.chunk[i];
                cursor = Some(key.clone());
                if self.only_unsent && self.sent.clock_of(key).is_some() {
                    continue;
                }
                if let Some(s) = data.read(key)? {
                    bytes += key.len() + s.value.len();
                    clocks.push(s.clock);
                    items.push(Item {
                        key: key.clone(),
                        value: s.value,
                    });
                }
            }
            if !self.chunk_more {
                return Ok(Batch {
                    items,
                    clocks,
                    cursor,
                    more: false,
                });
            }
            cursor = self.chunk.last().cloned();
        }
    }

    /// Records a batch the sender took (one its current session sent: a
    /// read that ends after a new session began is not recorded, or the
    /// record could hold a clock newer than the one the receiver got).
    pub fn record(&mut self, batch: &Batch) {
        if self.recording {
            for (i, c) in batch.items.iter().zip(&batch.clocks) {
                self.sent.insert(&i.key, *c);
            }
        }
    }

    /// Everything the transfer sent, sealed.
    pub fn into_sent(mut self) -> SentRecord {
        self.sent.seal();
        self.sent
    }
}

/// Folds `data`'s keys a chunk at a time, from the first.
fn each_chunk(
    data: &dyn PartitionData,
    chunk_min: usize,
    mut visit: impl FnMut(&[Vec<u8>]) -> Result<(), String>,
) -> Result<(), String> {
    let mut after: Option<Vec<u8>> = None;
    let mut max = chunk_min.max(1);
    loop {
        let c = data.keys_after(after.as_deref(), max)?;
        visit(&c.keys)?;
        if !c.more || c.keys.is_empty() {
            return Ok(());
        }
        max = max.max(c.total / CHUNKS_PER_PASS);
        after = c.keys.last().cloned();
    }
}

/// Keys of `data` that `sent` does not have (written since the pass
/// that listed it): whether a top-up pass is due.
pub fn count_unsent(
    data: &dyn PartitionData,
    sent: &SentRecord,
    chunk_min: usize,
) -> Result<usize, String> {
    let mut n = 0;
    each_chunk(data, chunk_min, |keys| {
        n += keys.iter().filter(|k| sent.clock_of(k).is_none()).count();
        Ok(())
    })?;
    Ok(n)
}

/// Removes what `sent` records that is still stored as it was sent; how
/// many keys went.
pub fn drop_sent(
    data: &dyn PartitionData,
    sent: &SentRecord,
    chunk_min: usize,
) -> Result<usize, String> {
    let mut dropped = 0;
    each_chunk(data, chunk_min, |keys| {
        let recorded: Vec<(Vec<u8>, u64)> = keys
            .iter()
            .filter_map(|k| sent.clock_of(k).map(|c| (k.clone(), c)))
            .collect();
        if !recorded.is_empty() {
            dropped += data.drop_unchanged(&recorded)?;
        }
        Ok(())
    })?;
    Ok(dropped)
}

#[cfg(test)]
mod tests;
