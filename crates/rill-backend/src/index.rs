//! Secondary index entries kept in RAM, sorted, per (type, bucket, field).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::{RwLock, RwLockWriteGuard};

/// An index term: bytes for `_bin` fields, a signed integer for `_int`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Term {
    Int(i64),
    Bin(Vec<u8>),
}

impl Term {
    /// The term as Riak sends it: integers in decimal.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Term::Int(i) => i.to_string().into_bytes(),
            Term::Bin(b) => b.clone(),
        }
    }
}

/// Which terms a query wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexRange {
    Eq(Term),
    /// Both ends inclusive, as Riak's range queries are.
    Range(Term, Term),
}

impl IndexRange {
    /// The lowest and highest terms wanted, both included.
    pub fn bounds(&self) -> (&Term, &Term) {
        match self {
            IndexRange::Eq(t) => (t, t),
            IndexRange::Range(lo, hi) => (lo, hi),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexQuery {
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    pub field: Vec<u8>,
    pub range: IndexRange,
    /// Resume strictly after this (term, key): a continuation.
    pub after: Option<(Term, Vec<u8>)>,
}

type FieldKey = (Vec<u8>, Vec<u8>, Vec<u8>);
type Entries = BTreeSet<(Term, Vec<u8>)>;

/// The sorted entries of a backend's indexes.
#[derive(Default)]
pub(crate) struct IndexSet {
    fields: RwLock<BTreeMap<FieldKey, Entries>>,
}

/// The index locked for changes: queries wait until it is dropped, so a
/// backend holding it across the write of an object sees its index change
/// with it.
pub(crate) struct IndexWriter<'a> {
    fields: RwLockWriteGuard<'a, BTreeMap<FieldKey, Entries>>,
}

impl IndexWriter<'_> {
    pub(crate) fn add(&mut self, t: &[u8], b: &[u8], field: &[u8], term: Term, key: &[u8]) {
        self.fields
            .entry((t.to_vec(), b.to_vec(), field.to_vec()))
            .or_default()
            .insert((term, key.to_vec()));
    }

    pub(crate) fn remove(&mut self, t: &[u8], b: &[u8], field: &[u8], term: &Term, key: &[u8]) {
        let fk = (t.to_vec(), b.to_vec(), field.to_vec());
        if let Some(set) = self.fields.get_mut(&fk) {
            set.remove(&(term.clone(), key.to_vec()));
            if set.is_empty() {
                self.fields.remove(&fk);
            }
        }
    }
}

impl IndexSet {
    pub(crate) fn writer(&self) -> IndexWriter<'_> {
        IndexWriter {
            fields: self.fields.write().unwrap_or_else(|e| e.into_inner()),
        }
    }

    pub(crate) fn add(&self, t: &[u8], b: &[u8], field: &[u8], term: Term, key: &[u8]) {
        self.writer().add(t, b, field, term, key);
    }

    pub(crate) fn remove(&self, t: &[u8], b: &[u8], field: &[u8], term: &Term, key: &[u8]) {
        self.writer().remove(t, b, field, term, key);
    }

    pub(crate) fn query(&self, q: &IndexQuery, visit: &mut dyn FnMut(&Term, &[u8]) -> bool) {
        let f = self.fields.read().unwrap_or_else(|e| e.into_inner());
        let Some(set) = f.get(&(q.bucket_type.clone(), q.bucket.clone(), q.field.clone())) else {
            return;
        };
        let (lo, hi) = q.range.bounds();
        let start = match &q.after {
            Some((t, k)) if (t, k) >= (lo, &Vec::new()) => Bound::Excluded((t.clone(), k.clone())),
            _ => Bound::Included((lo.clone(), Vec::new())),
        };
        for (term, key) in set.range((start, Bound::Unbounded)) {
            if term > hi {
                break;
            }
            if !visit(term, key) {
                break;
            }
        }
    }
}
