//! RocksDB for comparison benchmarks, loaded at run time.
//!
//! `rill-bench` compares Rill's backends with what a user would pick
//! instead: RocksDB with its default leveled compaction. Building RocksDB
//! from source costs many minutes on a small machine, so this crate opens
//! the system's shared library (Debian: `apt-get install librocksdb7.8`)
//! with `dlopen` and calls the few functions of its stable C API it needs.
//! Nothing in Rill's engine depends on it.
//!
//! The library is looked up as `$RILL_ROCKSDB_LIB` when set, else as
//! `librocksdb.so` and the versioned names Debian and others ship.

mod api;
mod batch;

use api::{api, take_error, Api, Opaque};
pub use batch::{Iter, WriteBatch};
use std::ffi::{c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot load RocksDB's shared library (tried {tried}): {reason}; \
         install it (Debian: apt-get install librocksdb7.8) or set RILL_ROCKSDB_LIB"
    )]
    Load { tried: String, reason: String },
    #[error("RocksDB: {0}")]
    Rocks(String),
    #[error("path {0:?} contains a NUL byte")]
    BadPath(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Whether the shared library can be loaded here.
pub fn available() -> Result<()> {
    api().map(|_| ())
}

/// `rocksdb_lz4_compression` in RocksDB's C API.
const LZ4: c_int = 4;

/// How the database is opened: RocksDB's defaults (leveled compaction,
/// 64 MiB memtables, the WAL on, no fsync per write), as a user would
/// start, with background threads for the machine's cores; the table
/// settings a comparison may match to the engine it is compared with.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// `Options::IncreaseParallelism` (RocksDB's own getting-started
    /// advice); 0 leaves RocksDB's default.
    pub parallelism: u32,
    /// fsync the WAL on every put.
    pub sync: bool,
    /// An LRU block cache of this many bytes (`None`: RocksDB's default).
    pub block_cache_bytes: Option<usize>,
    /// A bloom filter with this many bits per key in every table
    /// (`None`: none, RocksDB's default).
    pub bloom_bits_per_key: Option<f64>,
    /// LZ4 for every level (`false`: RocksDB's default, Snappy where
    /// the library has it).
    pub lz4: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            parallelism: std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
            sync: false,
            block_cache_bytes: None,
            bloom_bits_per_key: None,
            lz4: false,
        }
    }
}

/// One open RocksDB database.
pub struct RocksDb {
    api: &'static Api,
    db: Opaque,
    options: Opaque,
    cache: Opaque,
    write: Opaque,
    read: Opaque,
}

// SAFETY: RocksDB's DB object is safe for concurrent use from many
// threads; the option objects are only read after open.
unsafe impl Send for RocksDb {}
unsafe impl Sync for RocksDb {}

impl RocksDb {
    /// Opens (creating when missing) the database in `path`.
    pub fn open(path: &Path, tuning: &Tuning) -> Result<RocksDb> {
        let api = api()?;
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::BadPath(path.display().to_string()))?;
        // SAFETY: calls into RocksDB's C API with objects it created; every
        // object is destroyed exactly once (on failure here, else in Drop).
        // The table options are copied into the table factory, the filter
        // policy is owned by the table options, and the cache is shared
        // (its handle is destroyed in Drop).
        unsafe {
            let options = (api.options_create)();
            (api.options_set_create_if_missing)(options, 1);
            if tuning.parallelism > 0 {
                (api.options_increase_parallelism)(options, tuning.parallelism as c_int);
            }
            if tuning.lz4 {
                (api.options_set_compression)(options, LZ4);
            }
            let mut cache = std::ptr::null_mut();
            if tuning.block_cache_bytes.is_some() || tuning.bloom_bits_per_key.is_some() {
                let table = (api.block_based_options_create)();
                if let Some(bytes) = tuning.block_cache_bytes {
                    cache = (api.cache_create_lru)(bytes);
                    (api.block_based_options_set_block_cache)(table, cache);
                }
                if let Some(bits) = tuning.bloom_bits_per_key {
                    let policy = (api.filterpolicy_create_bloom)(bits);
                    (api.block_based_options_set_filter_policy)(table, policy);
                }
                (api.options_set_block_based_table_factory)(options, table);
                (api.block_based_options_destroy)(table);
            }
            let mut err = std::ptr::null_mut();
            let db = (api.open)(options, c_path.as_ptr(), &mut err);
            let failed = match take_error(api, err) {
                Err(e) => Some(e),
                Ok(()) if db.is_null() => {
                    Some(Error::Rocks(format!("open {} failed", path.display())))
                }
                Ok(()) => None,
            };
            if let Some(e) = failed {
                (api.options_destroy)(options);
                if !cache.is_null() {
                    (api.cache_destroy)(cache);
                }
                return Err(e);
            }
            let write = (api.writeoptions_create)();
            (api.writeoptions_set_sync)(write, u8::from(tuning.sync));
            let read = (api.readoptions_create)();
            Ok(RocksDb {
                api,
                db,
                options,
                cache,
                write,
                read,
            })
        }
    }

    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the slices outlive the call; RocksDB copies them.
        unsafe {
            (self.api.put)(
                self.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        take_error(self.api, err)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut err = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: RocksDB returns a malloc'd copy of the value (or null),
        // which is copied and freed here.
        unsafe {
            let v = (self.api.get)(
                self.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            take_error(self.api, err)?;
            if v.is_null() {
                return Ok(None);
            }
            let out = std::slice::from_raw_parts(v.cast::<u8>(), len).to_vec();
            (self.api.free)(v.cast());
            Ok(Some(out))
        }
    }

    /// Applies every put and delete of `batch` atomically.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the batch is a live RocksDB write batch.
        unsafe { (self.api.write)(self.db, self.write, batch.raw(), &mut err) };
        take_error(self.api, err)
    }

    /// An iterator over the database as it is now, unpositioned.
    pub fn iter(&self) -> Iter<'_> {
        // SAFETY: the iterator borrows the database, which outlives it.
        let raw = unsafe { (self.api.create_iterator)(self.db, self.read) };
        Iter::new(self.api, raw)
    }

    /// Writes the memtables out to tables and waits for it.
    pub fn flush(&self) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: the flush options are created and destroyed here.
        unsafe {
            let opts = (self.api.flushoptions_create)();
            (self.api.flushoptions_set_wait)(opts, 1);
            (self.api.flush)(self.db, opts, &mut err);
            (self.api.flushoptions_destroy)(opts);
        }
        take_error(self.api, err)
    }

    /// A property such as `rocksdb.total-sst-files-size`, if RocksDB
    /// knows it.
    pub fn property(&self, name: &str) -> Option<String> {
        let c = CString::new(name).ok()?;
        // SAFETY: RocksDB returns a malloc'd C string or null.
        unsafe {
            let v = (self.api.property_value)(self.db, c.as_ptr());
            if v.is_null() {
                return None;
            }
            let s = CStr::from_ptr(v).to_string_lossy().into_owned();
            (self.api.free)(v.cast());
            Some(s)
        }
    }

    /// Bytes in the database's tables (`rocksdb.total-sst-files-size`;
    /// the write-ahead log not counted).
    pub fn table_bytes(&self) -> Option<u64> {
        self.property("rocksdb.total-sst-files-size")?.parse().ok()
    }
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        // SAFETY: each object was created in open and is destroyed once.
        unsafe {
            (self.api.close)(self.db);
            (self.api.writeoptions_destroy)(self.write);
            (self.api.readoptions_destroy)(self.read);
            (self.api.options_destroy)(self.options);
            if !self.cache.is_null() {
                (self.api.cache_destroy)(self.cache);
            }
        }
    }
}
