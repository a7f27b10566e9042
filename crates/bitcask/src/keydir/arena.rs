//! Byte arena holding keydir entries: each entry is a fixed 27-byte part
//! followed by its key, addressed by a 32-bit handle. This layout is what
//! keeps the per-key overhead near 36 bytes: no pointer, no allocation
//! header and no padding per key.
//!
//! Handles are `chunk << 20 | offset`; chunks grow from 4 KiB to 1 MiB so a
//! small store stays small. Entries never straddle chunks.

use super::Entry;

pub(super) const ENTRY_FIXED_LEN: usize = 27;
const CHUNK_MAX_BYTES: usize = 1 << 20;
const CHUNK_MIN_BYTES: usize = 4 << 10;
const OFFSET_BITS: u32 = 20;
const MAX_CHUNKS: usize = 1 << (32 - OFFSET_BITS);

const FLAG_TOMBSTONE: u8 = 1;

#[derive(Default)]
pub(super) struct Arena {
    chunks: Vec<Box<[u8]>>,
    /// Bytes used in the last chunk.
    tail_used: usize,
    /// Bytes of entries no longer referenced (deleted keys).
    pub garbage_bytes: usize,
    /// Bytes of referenced entries.
    pub live_bytes: usize,
}

impl Arena {
    /// Stores a new entry and returns its handle.
    pub fn alloc(&mut self, key: &[u8], entry: &Entry) -> u32 {
        let need = ENTRY_FIXED_LEN + key.len();
        debug_assert!(need <= CHUNK_MAX_BYTES);
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.len() - self.tail_used >= need);
        if !fits {
            let next = (self.chunks.last().map_or(CHUNK_MIN_BYTES, |c| c.len() * 2))
                .clamp(CHUNK_MIN_BYTES, CHUNK_MAX_BYTES)
                .max(need.next_power_of_two());
            assert!(self.chunks.len() < MAX_CHUNKS, "keydir shard arena is full");
            // Whatever the old tail chunk did not use is lost to this arena
            // until it is compacted.
            if let Some(last) = self.chunks.last() {
                self.garbage_bytes += last.len() - self.tail_used;
            }
            self.chunks.push(vec![0u8; next].into_boxed_slice());
            self.tail_used = 0;
        }
        let chunk = self.chunks.len() - 1;
        let offset = self.tail_used;
        let slot = &mut self.chunks[chunk][offset..offset + need];
        write_fixed(slot, entry);
        slot[23..25].copy_from_slice(&(key.len() as u16).to_le_bytes());
        slot[ENTRY_FIXED_LEN..].copy_from_slice(key);
        self.tail_used += need;
        self.live_bytes += need;
        ((chunk as u32) << OFFSET_BITS) | offset as u32
    }

    pub fn free(&mut self, handle: u32) {
        let len = ENTRY_FIXED_LEN + self.key(handle).len();
        self.live_bytes -= len;
        self.garbage_bytes += len;
    }

    fn slot(&self, handle: u32) -> &[u8] {
        let chunk = (handle >> OFFSET_BITS) as usize;
        let offset = (handle & ((1 << OFFSET_BITS) - 1)) as usize;
        &self.chunks[chunk][offset..]
    }

    pub fn key(&self, handle: u32) -> &[u8] {
        let s = self.slot(handle);
        let len = u16::from_le_bytes([s[23], s[24]]) as usize;
        &s[ENTRY_FIXED_LEN..ENTRY_FIXED_LEN + len]
    }

    pub fn entry(&self, handle: u32) -> Entry {
        let s = self.slot(handle);
        Entry {
            seq: u64::from_le_bytes(s[0..8].try_into().expect("8")),
            file_id: u32::from_le_bytes(s[8..12].try_into().expect("4")),
            offset: u32::from_le_bytes(s[12..16].try_into().expect("4")),
            size: u32::from_le_bytes(s[16..20].try_into().expect("4")),
            expiry_s: u32::from_le_bytes([s[20], s[21], s[22], 0]) | (u32::from(s[26]) << 24),
            tombstone: s[25] & FLAG_TOMBSTONE != 0,
        }
    }

    pub fn set_entry(&mut self, handle: u32, entry: &Entry) {
        let chunk = (handle >> OFFSET_BITS) as usize;
        let offset = (handle & ((1 << OFFSET_BITS) - 1)) as usize;
        write_fixed(&mut self.chunks[chunk][offset..], entry);
    }

    /// Bytes this arena holds from the allocator.
    pub fn allocated_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Box<[u8]>>()
    }

    /// True when enough space is wasted that copying the live entries into a
    /// fresh arena pays off.
    pub fn wants_compaction(&self) -> bool {
        self.garbage_bytes > 64 << 10 && self.garbage_bytes > self.live_bytes / 2
    }
}

// Layout of the fixed part: seq u64 | file_id u32 | offset u32 | size u32 |
// expiry low 24 bits | key_len u16 | flags u8 | expiry high 8 bits.
fn write_fixed(slot: &mut [u8], e: &Entry) {
    slot[0..8].copy_from_slice(&e.seq.to_le_bytes());
    slot[8..12].copy_from_slice(&e.file_id.to_le_bytes());
    slot[12..16].copy_from_slice(&e.offset.to_le_bytes());
    slot[16..20].copy_from_slice(&e.size.to_le_bytes());
    let exp = e.expiry_s.to_le_bytes();
    slot[20..23].copy_from_slice(&exp[..3]);
    slot[25] = if e.tombstone { FLAG_TOMBSTONE } else { 0 };
    slot[26] = exp[3];
}
