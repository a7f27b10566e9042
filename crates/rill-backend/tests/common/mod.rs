//! Helpers shared by the backend tests.

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
