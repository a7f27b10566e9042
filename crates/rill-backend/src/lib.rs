//! Storage backends: where a vnode keeps its objects.
//!
//! A backend stores opaque object bytes under (bucket type, bucket, key)
//! and, for secondary indexes, (field, term) entries per key. Every
//! backend passes one conformance suite (tests/conformance/) and a model
//! test against a `BTreeMap`.
//!
//! Invariants:
//! - a put replaces the key's value and its index entries together: a
//!   query never sees entries of a value that was replaced;
//! - index queries return (term, key) in term order, then key order,
//!   integer terms in numeric order;
//! - folds see every key stored before they began.

mod batch_gate;
mod bitcask_backend;
mod index;
mod journal_writeback;
mod keys;
mod leveldb;
mod leveldb_vnode;
mod leveled;
mod memory;
mod multi;
mod repair;
mod write_budget;

pub use bitcask_backend::BitcaskBackend;
pub use index::{IndexQuery, IndexRange, Term};
pub use keys::{index_position, split_position, BKey};
pub use leveldb::{LeveldbBackend, LeveldbOptions, LeveldbStore, Pressure};
pub use leveled::{JournalOptions, JournalStats, LeveledBackend};
pub use memory::{MemoryBackend, MemoryOptions};
pub use multi::{MultiBackend, Router};
pub use repair::{describe_key, LostRange, PartitionCheck};

/// Errors a backend reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Bitcask(#[from] bitcask::Error),
    #[error("bucket type of {0} bytes, bucket or field too long (at most 65535 bytes)")]
    NameTooLong(usize),
    #[error("the memory backend is full: {used_bytes} bytes used of {max_bytes}")]
    MemoryFull { used_bytes: u64, max_bytes: u64 },
    #[error("corrupt entry in the backend: {0}")]
    Corrupt(String),
    #[error("leveldb backend: {0}")]
    Engine(String),
    #[error("the disk is full")]
    DiskFull,
    /// The backend cannot take the write now; retrying later may succeed.
    #[error("busy: {0}")]
    Busy(String),
    #[error("key of {0} bytes is too large (at most 65535 bytes with its bucket and type)")]
    KeyTooLarge(usize),
    #[error("value of {0} bytes is too large (at most 268435456 bytes)")]
    ValueTooLarge(usize),
    #[error("the {0} backend keeps no object heads")]
    NoHeads(&'static str),
    #[error("{{undefined_backend,{0}}}: the bucket's backend property names a backend this node does not have")]
    UndefinedBackend(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One index entry: a field (`name_bin` or `name_int`) and a term.
pub type IndexEntry = (Vec<u8>, Term);

/// The largest value [`Backend::try_get`] answers: past it, copying and
/// encoding the value is work for a thread that may take its time.
pub const NOWAIT_MAX_BYTES: usize = 64 << 10;

/// What a vnode needs of its storage.
pub trait Backend: Send + Sync {
    /// Riak's name for this backend in errors and stats.
    fn name(&self) -> &'static str;

    fn get(&self, k: &BKey) -> Result<Option<bytes::Bytes>>;

    /// [`Backend::get`] if it can answer without waiting for a device or a
    /// lock held across I/O (from memory, the page cache); `None` where it
    /// would wait, and then the caller reads with `get` on a thread that
    /// may block. The default never answers.
    fn try_get(&self, _k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        None
    }

    /// True when `k` is readable here; backends answer it without reading
    /// the value where they can.
    fn contains(&self, k: &BKey) -> Result<bool> {
        Ok(self.get(k)?.is_some())
    }

    /// Stores `value` for `k`; index entries in `remove` are dropped and
    /// those in `add` added, together with the value.
    fn put(&self, k: &BKey, value: &[u8], add: &[IndexEntry], remove: &[IndexEntry]) -> Result<()>;

    /// Whether this backend keeps each object's head (its metadata
    /// without values, `rill_object::encode_head`) apart from its value,
    /// as leveled does: writers then pass heads to
    /// [`Backend::put_with_head`].
    fn keeps_heads(&self) -> bool {
        false
    }

    /// [`Backend::put`] with the object's head; a backend that keeps no
    /// heads ignores it.
    fn put_with_head(
        &self,
        k: &BKey,
        value: &[u8],
        _head: &[u8],
        add: &[IndexEntry],
        remove: &[IndexEntry],
    ) -> Result<()> {
        self.put(k, value, add, remove)
    }

    /// The head stored with `k`'s object, read without its value; empty
    /// if the object was written without one (by [`Backend::put`]), and
    /// `None` where the backend keeps no heads: then read the object.
    fn get_head(&self, _k: &BKey) -> Option<Result<Option<bytes::Bytes>>> {
        None
    }

    /// Every key of one bucket with its head, in key order, reading no
    /// value (a head is empty where the object was written without one);
    /// an error where the backend keeps no heads. As [`Backend::fold_keys`],
    /// not a snapshot.
    fn fold_heads(
        &self,
        _bucket_type: &[u8],
        _bucket: &[u8],
        _visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        Err(Error::NoHeads(self.name()))
    }

    /// Removes `k` and the index entries given.
    fn delete(&self, k: &BKey, remove: &[IndexEntry]) -> Result<()>;

    /// Every (bucket type, bucket) holding at least one key; `visit`
    /// returns false to stop.
    fn fold_buckets(&self, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()>;

    /// Whether any object is stored (handoff asks it of partitions a
    /// node does not own, every few seconds: a backend should answer
    /// without reading everything).
    fn holds_objects(&self) -> Result<bool> {
        let mut any = false;
        self.fold_buckets(&mut |_, _| {
            any = true;
            false
        })?;
        Ok(any)
    }

    /// Every key of one bucket. Not a snapshot: a key written or deleted
    /// during the fold may be visited or not; every other key is visited
    /// exactly once, however slow `visit` is and however many writes run
    /// meanwhile.
    fn fold_keys(
        &self,
        bucket_type: &[u8],
        bucket: &[u8],
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<()>;

    /// Index entries matching `q`, in order; `visit` returns false to stop.
    fn query_index(
        &self,
        q: &IndexQuery,
        visit: &mut dyn FnMut(&Term, &[u8]) -> bool,
    ) -> Result<()>;

    /// Makes every acknowledged write durable.
    fn sync(&self) -> Result<()>;

    /// Bytes on disk (or in memory) for stats and capacity checks.
    fn size_bytes(&self) -> u64;
}
