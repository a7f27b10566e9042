//! Helpers shared by the backend tests.

#![allow(dead_code)]

use rill_backend::{
    BKey, Backend, IndexEntry, IndexQuery, IndexRange, JournalOptions, LeveldbOptions,
    LeveldbStore, Term,
};

/// Every (term, key) a backend's index gives for `field` of a bucket in
/// the default type, in the order it gives them.
pub fn query(
    b: &dyn Backend,
    bucket: &str,
    field: &str,
    range: IndexRange,
) -> Vec<(Term, Vec<u8>)> {
    let q = IndexQuery {
        bucket_type: Vec::new(),
        bucket: bucket.as_bytes().to_vec(),
        field: field.as_bytes().to_vec(),
        range,
        after: None,
    };
    let mut out = Vec::new();
    b.query_index(&q, &mut |t, k| {
        out.push((t.clone(), k.to_vec()));
        true
    })
    .unwrap();
    out
}

/// Flips the byte at `at` (a share of its length) of the largest file
/// under `dir` in a directory named `kind` (fjall's "tables" or
/// "blobs"), which must be longer than `min` bytes; returns the file.
pub fn flip_in_largest(
    dir: &std::path::Path,
    kind: &str,
    at: f64,
    min: usize,
) -> std::path::PathBuf {
    let all = testkit::files_under(dir);
    let file = all
        .iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with(kind)))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap_or_else(|| panic!("no {kind} file among {all:?}"))
        .clone();
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(
        bytes.len() > min,
        "{} is {} bytes",
        file.display(),
        bytes.len()
    );
    let i = (bytes.len() as f64 * at) as usize;
    bytes[i] ^= 0x5a;
    std::fs::write(&file, &bytes).unwrap();
    file
}

/// A leveled journal that stores values as written (no compression), so
/// a flipped byte lands in a value.
pub fn plain_journal() -> JournalOptions {
    JournalOptions {
        compression: false,
        ..JournalOptions::default()
    }
}

/// `v` filled up to 8 KiB with a byte of `i`: a value the journal keeps.
pub fn journal_value(mut v: Vec<u8>, i: u32) -> Vec<u8> {
    v.resize(8192, (i % 251) as u8);
    v
}

/// Puts objects `0..n` (key, value, index entries of `object(i)`, the
/// head `head`) into leveled partition 0 of a new store in `dir`, then
/// writes them out to files and syncs.
pub fn load_leveled(
    dir: &std::path::Path,
    journal: &JournalOptions,
    n: u32,
    object: impl Fn(u32) -> (BKey, Vec<u8>, Vec<IndexEntry>),
) {
    let store = LeveldbStore::open(dir, LeveldbOptions::default(), 1).unwrap();
    let b = store.leveled_partition("0", journal).unwrap();
    for i in 0..n {
        let (k, v, terms) = object(i);
        b.put_with_head(&k, &v, b"head", &terms, &[]).unwrap();
    }
    store.flush().unwrap();
    store.sync().unwrap();
}
