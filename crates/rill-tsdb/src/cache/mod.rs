//! Blocks written or read lately, kept in memory: a dashboard asks for
//! the same recent windows at every refresh, and a block read from memory
//! skips the store's lookup, the system call, the record's checksum and
//! the first touch of the memory it is read into (a month of one sensor
//! is some thirty blocks: about a third of the query's work when none is
//! kept). Blocks are kept as they are written, as RocksDB's
//! `prepopulate_block_cache` keeps a flush's blocks: the windows just cut
//! are the ones dashboards read next; a block kept this way makes room in
//! its turn like one kept by a read, unless read again before the clock
//! hand comes to it. Blocks are written once under
//! their key (a later part of a window is a new key), so a block kept is
//! the block stored; a put under a key drops what is kept of it all the
//! same, keeps its own value only when no other put in its shard overlapped
//! it, and a read that began before a put does not keep what it read.
//!
//! The memory is bounded (`sensor.block_cache`): shards, each a map and
//! a clock hand over its keys in the order they came; a block read again
//! since the hand last passed is spared once, others make room.

use crate::storage::BlockStore;
use crate::FastMap;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

const SHARDS: usize = 16;

/// What a kept block costs beyond its bytes (map entry, key, queue slot).
const ENTRY_COST: usize = 128;

/// Keys up to this long are kept (a block's key is 21 bytes), in place:
/// a look-up allocates nothing.
const MAX_KEY: usize = 24;

/// A store's id and a key (its length, its bytes padded with zeros).
type Key = (u64, u8, [u8; MAX_KEY]);

fn key_of(id: u64, key: &[u8]) -> Option<Key> {
    let mut k = [0u8; MAX_KEY];
    k.get_mut(..key.len())?.copy_from_slice(key);
    Some((id, key.len() as u8, k))
}

struct Kept {
    value: Arc<[u8]>,
    read_again: bool,
}

#[derive(Default)]
struct Shard {
    map: FastMap<Key, Kept>,
    /// The keys in the order they came, the clock hand at the front.
    hand: VecDeque<Key>,
    bytes: usize,
    /// Puts seen: a read that saw another count does not keep its value.
    puts: u64,
    /// Puts begun and not yet ended.
    putting: u32,
}

/// Blocks written or read lately, shared by every database's store.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    shard_bytes: usize,
    next_store: AtomicU64,
}

impl BlockCache {
    /// A cache of at most about `bytes` (0: nothing is kept).
    pub fn new(bytes: usize) -> Arc<BlockCache> {
        Arc::new(BlockCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_bytes: bytes / SHARDS,
            next_store: AtomicU64::new(0),
        })
    }

    /// `inner` with its reads kept here.
    pub fn wrap(self: &Arc<Self>, inner: Arc<dyn BlockStore>) -> Arc<dyn BlockStore> {
        if self.shard_bytes == 0 {
            return inner;
        }
        Arc::new(CachedStore {
            inner,
            cache: self.clone(),
            id: self.next_store.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Bytes kept now (blocks and their entries).
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| lock(s).bytes).sum()
    }

    fn shard(&self, id: u64, key: &[u8]) -> &Mutex<Shard> {
        // FNV-1a over the store and the key: spreads a group's windows.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ id;
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        &self.shards[(h % SHARDS as u64) as usize]
    }

    fn get(&self, id: u64, key: &[u8]) -> Result<Arc<[u8]>, u64> {
        let mut s = lock(self.shard(id, key));
        let Some(k) = key_of(id, key) else {
            return Err(s.puts);
        };
        match s.map.get_mut(&k) {
            Some(kept) => {
                kept.read_again = true;
                Ok(kept.value.clone())
            }
            None => Err(s.puts),
        }
    }

    /// Keeps `value`, read when the shard had seen `puts` puts.
    fn keep(&self, id: u64, key: &[u8], value: &Arc<[u8]>, puts: u64) {
        let Some(k) = key_of(id, key) else {
            return;
        };
        let mut s = lock(self.shard(id, key));
        if s.puts != puts || s.map.contains_key(&k) {
            return;
        }
        self.insert(&mut s, k, value);
    }

    /// Adds `value` under `k` (not kept yet), making room.
    fn insert(&self, s: &mut Shard, k: Key, value: &Arc<[u8]>) {
        let cost = value.len() + ENTRY_COST;
        if cost > self.shard_bytes {
            return;
        }
        while s.bytes + cost > self.shard_bytes {
            let Some(old) = s.hand.pop_front() else {
                break;
            };
            let spared = match s.map.get_mut(&old) {
                Some(kept) if kept.read_again => {
                    kept.read_again = false;
                    true
                }
                _ => false,
            };
            if spared {
                s.hand.push_back(old);
            } else if let Some(kept) = s.map.remove(&old) {
                s.bytes -= kept.value.len() + ENTRY_COST;
            }
        }
        s.bytes += cost;
        s.hand.push_back(k);
        s.map.insert(
            k,
            Kept {
                value: value.clone(),
                read_again: false,
            },
        );
    }

    /// Drops what is kept of `key` from `s`, counting a put.
    fn drop_key(s: &mut Shard, id: u64, key: &[u8]) {
        s.puts += 1;
        if let Some(k) = key_of(id, key) {
            if let Some(kept) = s.map.remove(&k) {
                s.bytes -= kept.value.len() + ENTRY_COST;
                s.hand.retain(|x| *x != k);
            }
        }
    }

    /// Drops what is kept of `key` (its block is gone); the puts counted
    /// since.
    fn forget(&self, id: u64, key: &[u8]) -> u64 {
        let mut s = lock(self.shard(id, key));
        Self::drop_key(&mut s, id, key);
        s.puts
    }

    /// A put of `key` begins: what is kept of it is dropped; the puts
    /// counted since.
    fn begin_put(&self, id: u64, key: &[u8]) -> u64 {
        let mut s = lock(self.shard(id, key));
        Self::drop_key(&mut s, id, key);
        s.putting += 1;
        s.puts
    }

    /// The put begun when the shard had counted `puts` ended, having
    /// stored `value` (`None`: it failed, or the block was not kept by
    /// the store): what is kept of the key is dropped again (a read in
    /// the middle kept the old value), and `value` kept when no other put
    /// of the shard began or ended meanwhile nor is under way (so that a
    /// put of the same key that lands later cannot be hidden).
    fn end_put(&self, id: u64, key: &[u8], value: Option<&[u8]>, puts: u64) {
        let mut s = lock(self.shard(id, key));
        Self::drop_key(&mut s, id, key);
        s.putting -= 1;
        let fits = |v: &[u8]| v.len() + ENTRY_COST <= self.shard_bytes;
        if let (Some(v), Some(k)) = (value.filter(|v| fits(v)), key_of(id, key)) {
            if s.puts == puts + 1 && s.putting == 0 {
                self.insert(&mut s, k, &Arc::from(v));
            }
        }
    }
}

fn lock(m: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A put under way: ended with its value, or, if the store's put
/// panicked, with none (the shard's count of puts under way comes down,
/// and what a read kept in the middle is dropped).
struct Putting<'a> {
    cache: &'a BlockCache,
    id: u64,
    key: &'a [u8],
    puts: u64,
    ended: bool,
}

impl Putting<'_> {
    fn end(&mut self, value: Option<&[u8]>) {
        self.ended = true;
        self.cache.end_put(self.id, self.key, value, self.puts);
    }
}

impl Drop for Putting<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.cache.end_put(self.id, self.key, None, self.puts);
        }
    }
}

/// A store whose reads are kept in a [`BlockCache`].
struct CachedStore {
    inner: Arc<dyn BlockStore>,
    cache: Arc<BlockCache>,
    id: u64,
}

impl CachedStore {
    /// What is kept of `key` while the store still holds it (a block
    /// past its expiry is not served from memory either: its key is
    /// looked up, the record not read); else the puts counted.
    fn kept(&self, key: &[u8]) -> Result<Arc<[u8]>, u64> {
        match self.cache.get(self.id, key) {
            Ok(v) if self.inner.contains(key) => Ok(v),
            Ok(_) => Err(self.cache.forget(self.id, key)),
            Err(puts) => Err(puts),
        }
    }
}

impl BlockStore for CachedStore {
    fn put(&self, key: &[u8], value: &[u8], expires_at_s: Option<u64>) -> io::Result<()> {
        // Dropped before and after: a read between the two does not keep
        // what it read (the put's count moved on). The block written is
        // kept if the store holds it (a block already past its storage
        // period is not stored).
        let mut put = Putting {
            cache: &self.cache,
            id: self.id,
            key,
            puts: self.cache.begin_put(self.id, key),
            ended: false,
        };
        let done = self.inner.put(key, value, expires_at_s);
        let keep = done.is_ok() && key.len() <= MAX_KEY && self.inner.contains(key);
        put.end(keep.then_some(value));
        done
    }

    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        Ok(self.get_shared(key)?.map(|v| v.to_vec()))
    }

    fn get_shared(&self, key: &[u8]) -> io::Result<Option<Arc<[u8]>>> {
        let puts = match self.kept(key) {
            Ok(v) => return Ok(Some(v)),
            Err(puts) => puts,
        };
        let got = self.inner.get_shared(key)?;
        if let Some(v) = &got {
            self.cache.keep(self.id, key, v, puts);
        }
        Ok(got)
    }

    fn try_get(&self, key: &[u8]) -> Option<io::Result<Option<Vec<u8>>>> {
        self.try_get_shared(key)
            .map(|r| r.map(|v| v.map(|v| v.to_vec())))
    }

    fn try_get_shared(&self, key: &[u8]) -> Option<io::Result<Option<Arc<[u8]>>>> {
        let puts = match self.kept(key) {
            Ok(v) => return Some(Ok(Some(v))),
            Err(puts) => puts,
        };
        let got = self.inner.try_get_shared(key)?;
        if let Ok(Some(v)) = &got {
            self.cache.keep(self.id, key, v, puts);
        }
        Some(got)
    }

    fn contains(&self, key: &[u8]) -> bool {
        self.inner.contains(key)
    }

    fn fold(&self, visit: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()> {
        self.inner.fold(visit)
    }

    fn fold_keys(&self, visit: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.inner.fold_keys(visit)
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn seal(&self) -> io::Result<()> {
        self.inner.seal()
    }
}

#[cfg(test)]
mod tests;
