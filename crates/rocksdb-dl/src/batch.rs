//! Write batches and iterators.

use crate::api::{api, take_error, Api, Opaque};
use crate::Result;
use std::marker::PhantomData;

/// Puts and deletes applied together by [`crate::RocksDb::write`].
pub struct WriteBatch {
    api: &'static Api,
    raw: Opaque,
}

// SAFETY: a write batch is plain data owned by this value.
unsafe impl Send for WriteBatch {}

impl WriteBatch {
    pub fn new() -> Result<WriteBatch> {
        let api = api()?;
        // SAFETY: a fresh batch, destroyed in Drop.
        let raw = unsafe { (api.writebatch_create)() };
        Ok(WriteBatch { api, raw })
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        // SAFETY: RocksDB copies the slices into the batch.
        unsafe {
            (self.api.writebatch_put)(
                self.raw,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        }
    }

    pub fn delete(&mut self, key: &[u8]) {
        // SAFETY: RocksDB copies the key into the batch.
        unsafe { (self.api.writebatch_delete)(self.raw, key.as_ptr().cast(), key.len()) }
    }

    pub(crate) fn raw(&self) -> Opaque {
        self.raw
    }
}

impl Drop for WriteBatch {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe { (self.api.writebatch_destroy)(self.raw) }
    }
}

/// An iterator over a database's keys in order, valid while the
/// database is open.
pub struct Iter<'db> {
    api: &'static Api,
    raw: Opaque,
    _db: PhantomData<&'db ()>,
}

impl<'db> Iter<'db> {
    pub(crate) fn new(api: &'static Api, raw: Opaque) -> Iter<'db> {
        Iter {
            api,
            raw,
            _db: PhantomData,
        }
    }

    /// Positions at the first key at or after `key`.
    pub fn seek(&mut self, key: &[u8]) {
        // SAFETY: RocksDB copies what it needs of the key.
        unsafe { (self.api.iter_seek)(self.raw, key.as_ptr().cast(), key.len()) }
    }

    /// The entry at the position, or `None` past the end; an error the
    /// iteration met is returned rather than taken for the end.
    pub fn current(&self) -> Result<Option<(&[u8], &[u8])>> {
        // SAFETY: the key and value point into the iterator's current
        // entry, valid until it moves; `&self` borrows keep it still.
        unsafe {
            if (self.api.iter_valid)(self.raw) == 0 {
                let mut err = std::ptr::null_mut();
                (self.api.iter_get_error)(self.raw, &mut err);
                take_error(self.api, err)?;
                return Ok(None);
            }
            let (mut kl, mut vl) = (0usize, 0usize);
            let k = (self.api.iter_key)(self.raw, &mut kl);
            let v = (self.api.iter_value)(self.raw, &mut vl);
            Ok(Some((
                std::slice::from_raw_parts(k.cast::<u8>(), kl),
                std::slice::from_raw_parts(v.cast::<u8>(), vl),
            )))
        }
    }

    /// Moves to the next entry (only while positioned on one).
    pub fn advance(&mut self) {
        // SAFETY: RocksDB requires a valid position, checked here.
        unsafe {
            if (self.api.iter_valid)(self.raw) != 0 {
                (self.api.iter_next)(self.raw)
            }
        }
    }
}

impl Drop for Iter<'_> {
    fn drop(&mut self) {
        // SAFETY: created by create_iterator, destroyed once, before the
        // database (the borrow says so).
        unsafe { (self.api.iter_destroy)(self.raw) }
    }
}
