//! RocksDB for comparison benchmarks, loaded at run time.
//!
//! `rill-bench sensor` compares Rill's Bitcask with what a user would pick
//! instead: RocksDB with its default leveled compaction. Building RocksDB
//! from source costs many minutes on a small machine, so this crate opens
//! the system's shared library (Debian: `apt-get install librocksdb7.8`)
//! with `dlopen` and calls the few functions of its stable C API it needs.
//! Nothing in Rill's engine depends on it.
//!
//! The library is looked up as `$RILL_ROCKSDB_LIB` when set, else as
//! `librocksdb.so` and the versioned names Debian and others ship.

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

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

/// Library names tried in order when `RILL_ROCKSDB_LIB` is not set.
const CANDIDATES: &[&str] = &[
    "librocksdb.so",
    "librocksdb.so.9",
    "librocksdb.so.8",
    "librocksdb.so.7.8",
    "librocksdb.so.7",
    "librocksdb.so.6",
];

type Opaque = *mut c_void;

/// The C API functions used, resolved once.
struct Api {
    options_create: unsafe extern "C" fn() -> Opaque,
    options_destroy: unsafe extern "C" fn(Opaque),
    options_set_create_if_missing: unsafe extern "C" fn(Opaque, c_uchar),
    options_increase_parallelism: unsafe extern "C" fn(Opaque, c_int),
    open: unsafe extern "C" fn(Opaque, *const c_char, *mut *mut c_char) -> Opaque,
    close: unsafe extern "C" fn(Opaque),
    writeoptions_create: unsafe extern "C" fn() -> Opaque,
    writeoptions_destroy: unsafe extern "C" fn(Opaque),
    writeoptions_set_sync: unsafe extern "C" fn(Opaque, c_uchar),
    readoptions_create: unsafe extern "C" fn() -> Opaque,
    readoptions_destroy: unsafe extern "C" fn(Opaque),
    put: unsafe extern "C" fn(
        Opaque,
        Opaque,
        *const c_char,
        usize,
        *const c_char,
        usize,
        *mut *mut c_char,
    ),
    get: unsafe extern "C" fn(
        Opaque,
        Opaque,
        *const c_char,
        usize,
        *mut usize,
        *mut *mut c_char,
    ) -> *mut c_char,
    property_value: unsafe extern "C" fn(Opaque, *const c_char) -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: the struct holds only function pointers into a library that is
// never unloaded.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, Error>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|e| match e {
        Error::Load { tried, reason } => Error::Load {
            tried: tried.clone(),
            reason: reason.clone(),
        },
        other => Error::Rocks(other.to_string()),
    })
}

fn dlerror() -> String {
    // SAFETY: dlerror returns a thread-local C string or null.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

// Each field's type states the C signature the transmute produces.
#[allow(clippy::missing_transmute_annotations)]
fn load() -> std::result::Result<Api, Error> {
    let names: Vec<String> = match std::env::var("RILL_ROCKSDB_LIB") {
        Ok(n) if !n.is_empty() => vec![n],
        _ => CANDIDATES.iter().map(|s| s.to_string()).collect(),
    };
    let mut handle = std::ptr::null_mut();
    let mut reason = String::new();
    for name in &names {
        let c = CString::new(name.as_str()).map_err(|_| Error::BadPath(name.clone()))?;
        // SAFETY: a valid C string; the handle is kept for the process's life.
        handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            break;
        }
        reason = dlerror();
    }
    if handle.is_null() {
        return Err(Error::Load {
            tried: names.join(", "),
            reason,
        });
    }
    let sym = |name: &str| -> std::result::Result<*mut c_void, Error> {
        let c = CString::new(name).expect("symbol names have no NUL");
        // SAFETY: handle is a live library handle, c a valid C string.
        let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
        if p.is_null() {
            Err(Error::Load {
                tried: names.join(", "),
                reason: format!("symbol {name} missing: {}", dlerror()),
            })
        } else {
            Ok(p)
        }
    };
    macro_rules! f {
        ($name:literal) => {
            // SAFETY: the symbol comes from RocksDB's C API (c.h), whose
            // signature the field's type repeats.
            unsafe { std::mem::transmute::<*mut c_void, _>(sym($name)?) }
        };
    }
    Ok(Api {
        options_create: f!("rocksdb_options_create"),
        options_destroy: f!("rocksdb_options_destroy"),
        options_set_create_if_missing: f!("rocksdb_options_set_create_if_missing"),
        options_increase_parallelism: f!("rocksdb_options_increase_parallelism"),
        open: f!("rocksdb_open"),
        close: f!("rocksdb_close"),
        writeoptions_create: f!("rocksdb_writeoptions_create"),
        writeoptions_destroy: f!("rocksdb_writeoptions_destroy"),
        writeoptions_set_sync: f!("rocksdb_writeoptions_set_sync"),
        readoptions_create: f!("rocksdb_readoptions_create"),
        readoptions_destroy: f!("rocksdb_readoptions_destroy"),
        put: f!("rocksdb_put"),
        get: f!("rocksdb_get"),
        property_value: f!("rocksdb_property_value"),
        free: f!("rocksdb_free"),
    })
}

/// Takes ownership of an error string RocksDB allocated, if any.
fn take_error(api: &Api, err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: RocksDB hands out a malloc'd NUL-terminated string; it is
    // copied, then freed with RocksDB's own free.
    let msg = unsafe {
        let m = CStr::from_ptr(err).to_string_lossy().into_owned();
        (api.free)(err.cast());
        m
    };
    Err(Error::Rocks(msg))
}

/// Whether the shared library can be loaded here.
pub fn available() -> Result<()> {
    api().map(|_| ())
}

/// How the database is opened: RocksDB's defaults (leveled compaction,
/// 64 MiB memtables, the WAL on, no fsync per write), as a user would
/// start, with background threads for the machine's cores.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// `Options::IncreaseParallelism` (RocksDB's own getting-started
    /// advice); 0 leaves RocksDB's default.
    pub parallelism: u32,
    /// fsync the WAL on every put.
    pub sync: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            parallelism: std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
            sync: false,
        }
    }
}

/// One open RocksDB database.
pub struct RocksDb {
    api: &'static Api,
    db: Opaque,
    options: Opaque,
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
        unsafe {
            let options = (api.options_create)();
            (api.options_set_create_if_missing)(options, 1);
            if tuning.parallelism > 0 {
                (api.options_increase_parallelism)(options, tuning.parallelism as c_int);
            }
            let mut err = std::ptr::null_mut();
            let db = (api.open)(options, c_path.as_ptr(), &mut err);
            if let Err(e) = take_error(api, err) {
                (api.options_destroy)(options);
                return Err(e);
            }
            if db.is_null() {
                (api.options_destroy)(options);
                return Err(Error::Rocks(format!("open {} failed", path.display())));
            }
            let write = (api.writeoptions_create)();
            (api.writeoptions_set_sync)(write, u8::from(tuning.sync));
            let read = (api.readoptions_create)();
            Ok(RocksDb {
                api,
                db,
                options,
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
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        // SAFETY: each object was created in open and is destroyed once.
        unsafe {
            (self.api.close)(self.db);
            (self.api.writeoptions_destroy)(self.write);
            (self.api.readoptions_destroy)(self.read);
            (self.api.options_destroy)(self.options);
        }
    }
}
