//! One suite, every backend: the same operations must give the same
//! answers from Bitcask and from memory, including after a reopen where
//! the backend persists; and a random model test against a BTreeMap.
//!
//! One scenario family per file; the backends under test and the small
//! helpers are here.

#[path = "../common/mod.rs"]
mod common;

mod basics;
mod index_paging;
mod indexes;
mod leveldb;
mod memory;
mod model;
mod multi;

use bitcask::{Options, Store};
use rill_backend::{
    BKey, Backend, BitcaskBackend, IndexRange, LeveldbOptions, LeveldbStore, MemoryBackend,
    MemoryOptions, Term,
};
use std::path::Path;
use std::sync::Arc;

pub fn bitcask(dir: &Path) -> BitcaskBackend {
    let store = Store::open(dir, Options::default()).unwrap();
    BitcaskBackend::open(Arc::new(store)).unwrap()
}

/// A leveldb database in `dir` and one partition's backend of it.
pub fn leveldb(dir: &Path) -> (LeveldbStore, rill_backend::LeveldbBackend) {
    let store = LeveldbStore::open(dir, LeveldbOptions::default(), 4).unwrap();
    let b = store.partition("0").unwrap();
    (store, b)
}

/// A leveled partition of a database in `dir`.
pub fn leveled(dir: &Path) -> (LeveldbStore, rill_backend::LeveledBackend) {
    let store = LeveldbStore::open(dir, LeveldbOptions::default(), 4).unwrap();
    let b = store
        .leveled_partition("0", &rill_backend::JournalOptions::default())
        .unwrap();
    (store, b)
}

/// Runs `check` on a memory backend, a Bitcask backend, a leveldb
/// backend, a leveled backend and a multi backend.
pub fn each(check: impl Fn(&dyn Backend)) {
    check(&MemoryBackend::new(MemoryOptions::default()));
    let dir = tempfile::tempdir().unwrap();
    check(&bitcask(dir.path()));
    let dir = tempfile::tempdir().unwrap();
    let (_store, b) = leveldb(dir.path());
    check(&b);
    let dir = tempfile::tempdir().unwrap();
    let (_store, b) = leveled(dir.path());
    check(&b);
    // Multi, every bucket in a leveldb backend beside a memory one.
    let dir = tempfile::tempdir().unwrap();
    let (_store, b) = leveldb(dir.path());
    let m = rill_backend::MultiBackend::new(
        vec![
            (
                "mem".into(),
                Box::new(MemoryBackend::new(MemoryOptions::default())) as Box<dyn Backend>,
            ),
            ("lsm".into(), Box::new(b)),
        ],
        "lsm",
        Arc::new(|_: &[u8], _: &[u8]| None),
    )
    .unwrap();
    check(&m);
}

pub fn k(t: &str, b: &str, key: &str) -> BKey {
    BKey::new(t.as_bytes(), b.as_bytes(), key.as_bytes())
}

pub fn bin(f: &str, t: &str) -> (Vec<u8>, Term) {
    (f.as_bytes().to_vec(), Term::Bin(t.as_bytes().to_vec()))
}

pub fn int(f: &str, t: i64) -> (Vec<u8>, Term) {
    (f.as_bytes().to_vec(), Term::Int(t))
}

pub fn query(b: &dyn Backend, bucket: &str, field: &str, range: IndexRange) -> Vec<(Term, String)> {
    common::query(b, bucket, field, range)
        .into_iter()
        .map(|(t, k)| (t, String::from_utf8(k).unwrap()))
        .collect()
}
