//! Helpers shared by the backend tests.

#![allow(dead_code)]

use rill_backend::{Backend, IndexQuery, IndexRange, Term};

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
