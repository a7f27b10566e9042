//! The C API functions used, resolved once from the shared library.

use crate::Error;
use std::ffi::{c_char, c_double, c_int, c_uchar, c_void, CStr, CString};
use std::sync::OnceLock;

/// Library names tried in order when `RILL_ROCKSDB_LIB` is not set.
const CANDIDATES: &[&str] = &[
    "librocksdb.so",
    "librocksdb.so.9",
    "librocksdb.so.8",
    "librocksdb.so.7.8",
    "librocksdb.so.7",
    "librocksdb.so.6",
];

pub(crate) type Opaque = *mut c_void;

/// The C API functions used, resolved once.
pub(crate) struct Api {
    pub(crate) options_create: unsafe extern "C" fn() -> Opaque,
    pub(crate) options_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) options_set_create_if_missing: unsafe extern "C" fn(Opaque, c_uchar),
    pub(crate) options_increase_parallelism: unsafe extern "C" fn(Opaque, c_int),
    pub(crate) open: unsafe extern "C" fn(Opaque, *const c_char, *mut *mut c_char) -> Opaque,
    pub(crate) close: unsafe extern "C" fn(Opaque),
    pub(crate) writeoptions_create: unsafe extern "C" fn() -> Opaque,
    pub(crate) writeoptions_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) writeoptions_set_sync: unsafe extern "C" fn(Opaque, c_uchar),
    pub(crate) readoptions_create: unsafe extern "C" fn() -> Opaque,
    pub(crate) readoptions_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) put: unsafe extern "C" fn(
        Opaque,
        Opaque,
        *const c_char,
        usize,
        *const c_char,
        usize,
        *mut *mut c_char,
    ),
    pub(crate) get: unsafe extern "C" fn(
        Opaque,
        Opaque,
        *const c_char,
        usize,
        *mut usize,
        *mut *mut c_char,
    ) -> *mut c_char,
    pub(crate) property_value: unsafe extern "C" fn(Opaque, *const c_char) -> *mut c_char,
    pub(crate) free: unsafe extern "C" fn(*mut c_void),
    pub(crate) write: unsafe extern "C" fn(Opaque, Opaque, Opaque, *mut *mut c_char),
    pub(crate) writebatch_create: unsafe extern "C" fn() -> Opaque,
    pub(crate) writebatch_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) writebatch_put:
        unsafe extern "C" fn(Opaque, *const c_char, usize, *const c_char, usize),
    pub(crate) writebatch_delete: unsafe extern "C" fn(Opaque, *const c_char, usize),
    pub(crate) create_iterator: unsafe extern "C" fn(Opaque, Opaque) -> Opaque,
    pub(crate) iter_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) iter_seek: unsafe extern "C" fn(Opaque, *const c_char, usize),
    pub(crate) iter_valid: unsafe extern "C" fn(Opaque) -> c_uchar,
    pub(crate) iter_next: unsafe extern "C" fn(Opaque),
    pub(crate) iter_key: unsafe extern "C" fn(Opaque, *mut usize) -> *const c_char,
    pub(crate) iter_value: unsafe extern "C" fn(Opaque, *mut usize) -> *const c_char,
    pub(crate) iter_get_error: unsafe extern "C" fn(Opaque, *mut *mut c_char),
    pub(crate) flushoptions_create: unsafe extern "C" fn() -> Opaque,
    pub(crate) flushoptions_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) flushoptions_set_wait: unsafe extern "C" fn(Opaque, c_uchar),
    pub(crate) flush: unsafe extern "C" fn(Opaque, Opaque, *mut *mut c_char),
    pub(crate) block_based_options_create: unsafe extern "C" fn() -> Opaque,
    pub(crate) block_based_options_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) block_based_options_set_block_cache: unsafe extern "C" fn(Opaque, Opaque),
    pub(crate) block_based_options_set_filter_policy: unsafe extern "C" fn(Opaque, Opaque),
    pub(crate) options_set_block_based_table_factory: unsafe extern "C" fn(Opaque, Opaque),
    pub(crate) options_set_compression: unsafe extern "C" fn(Opaque, c_int),
    pub(crate) cache_create_lru: unsafe extern "C" fn(usize) -> Opaque,
    pub(crate) cache_destroy: unsafe extern "C" fn(Opaque),
    pub(crate) filterpolicy_create_bloom: unsafe extern "C" fn(c_double) -> Opaque,
}

// SAFETY: the struct holds only function pointers into a library that is
// never unloaded.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

pub(crate) fn api() -> crate::Result<&'static Api> {
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
        write: f!("rocksdb_write"),
        writebatch_create: f!("rocksdb_writebatch_create"),
        writebatch_destroy: f!("rocksdb_writebatch_destroy"),
        writebatch_put: f!("rocksdb_writebatch_put"),
        writebatch_delete: f!("rocksdb_writebatch_delete"),
        create_iterator: f!("rocksdb_create_iterator"),
        iter_destroy: f!("rocksdb_iter_destroy"),
        iter_seek: f!("rocksdb_iter_seek"),
        iter_valid: f!("rocksdb_iter_valid"),
        iter_next: f!("rocksdb_iter_next"),
        iter_key: f!("rocksdb_iter_key"),
        iter_value: f!("rocksdb_iter_value"),
        iter_get_error: f!("rocksdb_iter_get_error"),
        flushoptions_create: f!("rocksdb_flushoptions_create"),
        flushoptions_destroy: f!("rocksdb_flushoptions_destroy"),
        flushoptions_set_wait: f!("rocksdb_flushoptions_set_wait"),
        flush: f!("rocksdb_flush"),
        block_based_options_create: f!("rocksdb_block_based_options_create"),
        block_based_options_destroy: f!("rocksdb_block_based_options_destroy"),
        block_based_options_set_block_cache: f!("rocksdb_block_based_options_set_block_cache"),
        block_based_options_set_filter_policy: f!("rocksdb_block_based_options_set_filter_policy"),
        options_set_block_based_table_factory: f!("rocksdb_options_set_block_based_table_factory"),
        options_set_compression: f!("rocksdb_options_set_compression"),
        cache_create_lru: f!("rocksdb_cache_create_lru"),
        cache_destroy: f!("rocksdb_cache_destroy"),
        filterpolicy_create_bloom: f!("rocksdb_filterpolicy_create_bloom"),
    })
}

/// Takes ownership of an error string RocksDB allocated, if any.
pub(crate) fn take_error(api: &Api, err: *mut c_char) -> crate::Result<()> {
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
