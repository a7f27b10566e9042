//! Where blocks and series records are kept: a store per database and
//! home partition, a shard (its blocks, each expiring with its window, so
//! a database's files die whole under its own storage period, and a
//! partition's data leaves a node whole when another takes it) and one
//! catalog store (series records, which never expire, kept apart so they
//! never keep a block file alive).
//!
//! [`BitcaskStorage`] keeps each in a Bitcask store on the `Vfs`: the
//! catalog in `catalog/`, a shard in `shards/<database in hex>/<home>/`.
//! Stores of the layout before home partitions, one per database in
//! `db/<name in hex>/`, are found as legacy stores, for the engine to
//! move into shards when it opens.

use bitcask::vfs::{create_dir_durably, remove_dir_durably, Vfs};
use bitcask::PutOptions;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One store of keys and values.
pub trait BlockStore: Send + Sync {
    /// Stores `value` under `key`, to be gone after `expires_at_s` (Unix
    /// seconds; `None`: never). A value already past its expiry is not
    /// stored (Ok).
    fn put(&self, key: &[u8], value: &[u8], expires_at_s: Option<u64>) -> io::Result<()>;
    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>>;
    /// [`get`](Self::get) if it can be answered without waiting (from
    /// memory or the page cache); `None`: it would wait for the device,
    /// read it with `get` on a thread that may block (what a store that
    /// cannot tell says).
    fn try_get(&self, _key: &[u8]) -> Option<io::Result<Option<Vec<u8>>>> {
        None
    }
    /// [`get`](Self::get), the value shareable (a cache hands out what it
    /// keeps without a copy).
    fn get_shared(&self, key: &[u8]) -> io::Result<Option<Arc<[u8]>>> {
        Ok(self.get(key)?.map(Arc::from))
    }
    /// [`try_get`](Self::try_get), the value shareable.
    fn try_get_shared(&self, key: &[u8]) -> Option<io::Result<Option<Arc<[u8]>>>> {
        self.try_get(key).map(|r| r.map(|v| v.map(Arc::from)))
    }
    /// Whether `key` is readable (stored, not expired).
    fn contains(&self, key: &[u8]) -> bool;
    /// Every readable key and value.
    fn fold(&self, visit: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()>;
    /// Every readable key (a store that keeps its keys in memory reads
    /// no value); one put or deleted meanwhile may be seen or not.
    fn fold_keys(&self, visit: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.fold(&mut |k, _| visit(k))
    }
    /// What was put so far is on the disk.
    fn sync(&self) -> io::Result<()>;
    /// Closes the file being written and starts another (a store that
    /// keeps files), so that what was written so far can expire as a
    /// whole file.
    fn seal(&self) -> io::Result<()> {
        Ok(())
    }
    /// Deletes `key` (the catalog store's records of series that left
    /// the node); durable with the next sync.
    fn delete(&self, _key: &[u8]) -> io::Result<()> {
        Err(io::Error::other("this store does not delete keys"))
    }
}

/// The stores of a node's sensor data.
pub trait Storage: Send + Sync {
    /// The catalog store.
    fn catalog(&self) -> io::Result<Arc<dyn BlockStore>>;
    /// The store of database `db`'s series whose home partition is
    /// `home`, made if new.
    fn shard(&self, db: &str, home: u32) -> io::Result<Arc<dyn BlockStore>>;
    /// The shards there are: database and home partition, sorted.
    fn shards(&self) -> io::Result<Vec<(String, u32)>>;
    /// Makes database `db` known before it has a shard.
    fn create(&self, db: &str) -> io::Result<()>;
    /// The databases made, with shards or not, sorted.
    fn databases(&self) -> io::Result<Vec<String>>;
    /// Databases with a store of the layout before home partitions.
    fn legacy_databases(&self) -> io::Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// Database `db`'s legacy store.
    fn legacy(&self, db: &str) -> io::Result<Arc<dyn BlockStore>> {
        Err(io::Error::other(format!("no legacy store of {db}")))
    }
    /// Closes and deletes database `db`'s legacy store (its blocks are
    /// in shards, synced).
    fn remove_legacy(&self, _db: &str) -> io::Result<()> {
        Ok(())
    }
    /// Closes and deletes the shard of `db` and `home` (its data left the
    /// node).
    fn remove_shard(&self, db: &str, home: u32) -> io::Result<()>;
    /// Totals of the stores open now (zero where a store keeps none).
    fn stats(&self) -> StorageStats {
        StorageStats::default()
    }
}

/// A store holding nothing (a shard not made yet).
pub(crate) struct NoBlocks;

impl BlockStore for NoBlocks {
    fn put(&self, _: &[u8], _: &[u8], _: Option<u64>) -> io::Result<()> {
        Err(io::Error::other("a shard not made cannot be written"))
    }
    fn get(&self, _: &[u8]) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn try_get(&self, _: &[u8]) -> Option<io::Result<Option<Vec<u8>>>> {
        Some(Ok(None))
    }
    fn contains(&self, _: &[u8]) -> bool {
        false
    }
    fn fold(&self, _: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()> {
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Merge totals of the sensor stores: under retention, whole files are
/// deleted unread, so `merge_bytes_read` stays near zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    pub merges: u64,
    pub files_deleted_unread: u64,
    pub merge_bytes_read: u64,
    pub merge_bytes_written: u64,
    pub data_files: u64,
}

struct BitcaskBlocks(Arc<bitcask::Store>);

fn io_err(e: bitcask::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl BlockStore for BitcaskBlocks {
    fn put(&self, key: &[u8], value: &[u8], expires_at_s: Option<u64>) -> io::Result<()> {
        let ttl = match expires_at_s {
            None => None,
            Some(at) => {
                let now = self.0.options().clock.now();
                match Duration::from_secs(at).checked_sub(now) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(()),
                }
            }
        };
        self.0
            .put_with(key, value, PutOptions { ttl })
            .map_err(io_err)
    }

    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.0.get(key).map_err(io_err)
    }

    fn try_get(&self, key: &[u8]) -> Option<io::Result<Option<Vec<u8>>>> {
        // A block is far below this; a larger record waits for `get`.
        const MAX_NOWAIT_BYTES: usize = 16 << 20;
        self.0
            .try_get(key, MAX_NOWAIT_BYTES)
            .map(|r| r.map_err(io_err))
    }

    fn contains(&self, key: &[u8]) -> bool {
        self.0.contains(key)
    }

    fn fold(&self, visit: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()> {
        self.0
            .fold(|k, v| {
                visit(k, v);
                true
            })
            .map_err(io_err)
    }

    fn fold_keys(&self, visit: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        self.0.scan_keys(|k| {
            visit(k);
            true
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.0.sync().map_err(io_err)
    }

    fn delete(&self, key: &[u8]) -> io::Result<()> {
        self.0.delete(key).map_err(io_err)
    }

    fn seal(&self) -> io::Result<()> {
        self.0.close_active_file().map(drop).map_err(io_err)
    }
}

/// Told of every store opened (the node registers it for merging).
pub type OnOpen = Box<dyn Fn(&Arc<bitcask::Store>) + Send + Sync>;
/// Told of a store about to be deleted, by its directory (the node stops
/// merging it and lets go of it).
pub type OnClose = Box<dyn Fn(&Path) + Send + Sync>;

/// Bitcask stores under one directory.
pub struct BitcaskStorage {
    dir: PathBuf,
    opts: bitcask::Options,
    on_open: OnOpen,
    on_close: OnClose,
    open: Mutex<HashMap<String, Arc<BitcaskBlocks>>>,
}

const CATALOG: &str = "catalog";
const LEGACY: &str = "db";
const SHARDS: &str = "shards";

fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

impl BitcaskStorage {
    /// Stores under `dir`, each opened with `opts` (its `vfs` included).
    pub fn new(
        dir: &Path,
        opts: bitcask::Options,
        on_open: OnOpen,
        on_close: OnClose,
    ) -> BitcaskStorage {
        BitcaskStorage {
            dir: dir.to_path_buf(),
            opts,
            on_open,
            on_close,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Closes the store opened as `name` (the merge scheduler lets go of
    /// it, and every reader), then deletes its directory.
    fn close_and_remove(&self, name: &str, dir: &Path) -> io::Result<()> {
        let held = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        (self.on_close)(dir);
        if let Some(held) = held {
            // The store closes (its lock and files let go) before its
            // directory goes; a read still holding it has a minute.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while Arc::strong_count(&held) > 1 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            drop(held);
        }
        remove_dir_durably(self.vfs(), dir)
    }

    /// Names of the directories under `dir` (made of hex, or of a
    /// number), each parsed; what does not parse is logged and left.
    fn names<T>(&self, dir: &Path, parse: impl Fn(&str) -> Option<T>) -> io::Result<Vec<T>> {
        if !self.vfs().exists(dir) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for path in self.vfs().list_dir(dir)? {
            match path.file_name().and_then(|n| n.to_str()).and_then(&parse) {
                Some(x) => out.push(x),
                None => {
                    tracing::warn!(path = %path.display(), "not a sensor store's directory: left alone")
                }
            }
        }
        Ok(out)
    }

    fn vfs(&self) -> &dyn Vfs {
        self.opts.vfs.as_ref()
    }

    fn store(&self, name: &str, dir: PathBuf) -> io::Result<Arc<dyn BlockStore>> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = open.get(name) {
            return Ok(s.clone());
        }
        create_dir_durably(self.vfs(), &dir)?;
        let store = Arc::new(bitcask::Store::open(&dir, self.opts.clone()).map_err(io_err)?);
        (self.on_open)(&store);
        let s = Arc::new(BitcaskBlocks(store));
        open.insert(name.to_string(), s.clone());
        Ok(s)
    }
}

impl Storage for BitcaskStorage {
    fn catalog(&self) -> io::Result<Arc<dyn BlockStore>> {
        // Database stores are named "db/...", so no database is "catalog".
        self.store(CATALOG, self.dir.join(CATALOG))
    }

    fn shard(&self, db: &str, home: u32) -> io::Result<Arc<dyn BlockStore>> {
        let dir = self.dir.join(SHARDS).join(hex(db)).join(home.to_string());
        self.store(&format!("{SHARDS}/{db}/{home}"), dir)
    }

    fn shards(&self) -> io::Result<Vec<(String, u32)>> {
        let mut out = Vec::new();
        let root = self.dir.join(SHARDS);
        for db in self.names(&root, unhex)? {
            let homes = self.names(&root.join(hex(&db)), |n| n.parse::<u32>().ok())?;
            out.extend(homes.into_iter().map(|h| (db.clone(), h)));
        }
        out.sort();
        Ok(out)
    }

    fn create(&self, db: &str) -> io::Result<()> {
        create_dir_durably(self.vfs(), &self.dir.join(SHARDS).join(hex(db)))
    }

    fn databases(&self) -> io::Result<Vec<String>> {
        let mut names = self.names(&self.dir.join(SHARDS), unhex)?;
        names.sort();
        Ok(names)
    }

    fn remove_shard(&self, db: &str, home: u32) -> io::Result<()> {
        let dir = self.dir.join(SHARDS).join(hex(db)).join(home.to_string());
        self.close_and_remove(&format!("{SHARDS}/{db}/{home}"), &dir)
    }

    fn legacy_databases(&self) -> io::Result<Vec<String>> {
        let mut names = self.names(&self.dir.join(LEGACY), unhex)?;
        names.sort();
        Ok(names)
    }

    fn legacy(&self, db: &str) -> io::Result<Arc<dyn BlockStore>> {
        let dir = self.dir.join(LEGACY).join(hex(db));
        self.store(&format!("{LEGACY}/{db}"), dir)
    }

    fn remove_legacy(&self, db: &str) -> io::Result<()> {
        let dir = self.dir.join(LEGACY).join(hex(db));
        self.close_and_remove(&format!("{LEGACY}/{db}"), &dir)?;
        let root = self.dir.join(LEGACY);
        if self.vfs().list_dir(&root)?.is_empty() {
            self.vfs().remove_dir(&root)?;
            self.vfs().sync_dir(&self.dir)?;
        }
        Ok(())
    }

    fn stats(&self) -> StorageStats {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut t = StorageStats::default();
        for b in open.values() {
            let s = b.0.stats();
            t.merges += s.merges;
            t.files_deleted_unread += s.files_deleted_unread;
            t.merge_bytes_read += s.merge_bytes_read;
            t.merge_bytes_written += s.merge_bytes_written;
            t.data_files += s.data_files as u64;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_hex() {
        for name in ["", "telegraf", "a/b", "ünï", "..", "catalog"] {
            assert_eq!(unhex(&hex(name)).as_deref(), Some(name));
        }
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("ff"), None, "not UTF-8");
    }
}
