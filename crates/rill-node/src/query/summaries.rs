//! Riak 3's aae_fold `find_keys` and `object_stats` over one bucket:
//! each vnode of the coverage plan summarises its share of the bucket's
//! keys in a key range (`vnode::summary`: siblings, bytes as stored,
//! last modified), a page at a time, and the summaries are filtered by
//! the modified range and reduced here. Riak reads the same figures from
//! its AAE key store; Rill reads the objects.

use super::coverage::KEYS_PAGE;
use crate::error::KvError;
use crate::vnode::msg::{KeysQuery, VnodeReply, VnodeRequest};
use crate::vnode::summary::KeySummary;
use std::collections::BTreeMap;

/// A fold over a bucket's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFold {
    /// As a client names it (`default` or empty for the default type).
    pub bucket_type: Vec<u8>,
    pub bucket: Vec<u8>,
    /// Keys from the first to the second, both included.
    pub key_range: Option<(Vec<u8>, Vec<u8>)>,
    /// Last modified (seconds) from the first to the second, both
    /// included.
    pub modified: Option<(u64, u64)>,
    pub what: KeyFoldKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFoldKind {
    /// Keys with more siblings than this.
    SiblingsOver(u64),
    /// Keys larger than this many bytes.
    BytesOver(u64),
    ObjectStats,
}

/// `object_stats`' answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectStats {
    pub total_count: u64,
    pub total_size: u64,
    /// Objects by the order of magnitude of their size
    /// ([`magnitude`]), ascending.
    pub sizes: BTreeMap<u32, u64>,
    /// Objects by their count of siblings, ascending.
    pub siblings: BTreeMap<u32, u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyFoldAnswer {
    /// Each key found with its count of siblings or its size, by key.
    Keys(Vec<(Vec<u8>, u64)>),
    Stats(ObjectStats),
}

/// The order of magnitude of a size: its decimal digits less one (0 for
/// 0 to 9 bytes, 1 for 10 to 99, ...), as riak_kv counts it.
pub fn magnitude(bytes: u64) -> u32 {
    bytes.checked_ilog10().unwrap_or(0)
}

impl super::Queries {
    pub fn key_fold(&self, f: &KeyFold) -> Result<KeyFoldAnswer, KvError> {
        if f.bucket.is_empty() {
            return Err(KvError::BadRequest("Bucket cannot be zero-length".into()));
        }
        if let Some((lo, hi)) = &f.key_range {
            if hi < lo {
                return Err(KvError::BadRequest(
                    "the key range ends before it starts".into(),
                ));
            }
        }
        if let Some((lo, hi)) = f.modified {
            if hi < lo {
                return Err(KvError::BadRequest(
                    "the modified range ends before it starts".into(),
                ));
            }
        }
        let named: &[u8] = if f.bucket_type.is_empty() {
            b"default"
        } else {
            &f.bucket_type
        };
        let t = self.check_type(named)?;
        let n = crate::params::n_val(&self.buckets.props_for_kv(named, &f.bucket)?);
        let mut keys = Vec::new();
        let mut stats = ObjectStats::default();
        self.summaries(&t, f, n, &mut |s| {
            if f.modified
                .is_some_and(|(lo, hi)| s.modified_s < lo || s.modified_s > hi)
            {
                return;
            }
            match f.what {
                KeyFoldKind::SiblingsOver(n) if u64::from(s.siblings) > n => {
                    keys.push((s.key.clone(), u64::from(s.siblings)));
                }
                KeyFoldKind::BytesOver(n) if s.bytes > n => keys.push((s.key.clone(), s.bytes)),
                KeyFoldKind::ObjectStats => {
                    stats.total_count += 1;
                    stats.total_size += s.bytes;
                    *stats.sizes.entry(magnitude(s.bytes)).or_default() += 1;
                    *stats.siblings.entry(s.siblings).or_default() += 1;
                }
                _ => {}
            }
        })?;
        Ok(match f.what {
            KeyFoldKind::ObjectStats => KeyFoldAnswer::Stats(stats),
            _ => {
                keys.sort();
                KeyFoldAnswer::Keys(keys)
            }
        })
    }

    /// Every summary of the bucket's keys in range, each key once (the
    /// coverage plan's filter on its first partition), in pages.
    fn summaries(
        &self,
        t: &[u8],
        f: &KeyFold,
        n_val: u32,
        take: &mut dyn FnMut(&KeySummary),
    ) -> Result<(), KvError> {
        let size = self.replicas.view().ring.size();
        let (lo, hi) = match &f.key_range {
            Some((lo, hi)) => (lo.clone(), Some(hi.clone())),
            None => (Vec::new(), None),
        };
        for (e, firsts) in self.key_plan(n_val)? {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let q = KeysQuery {
                    bucket_type: t.to_vec(),
                    bucket: f.bucket.clone(),
                    lo: lo.clone(),
                    hi: hi.clone(),
                    after: after.take(),
                    limit: KEYS_PAGE,
                    first_of: Some((size, firsts.clone())),
                };
                let (rows, next) = match self.ask_one(&e, VnodeRequest::Summaries(Box::new(q)))? {
                    VnodeReply::Summaries { rows, next } => (rows, next),
                    VnodeReply::Failed(e) => return Err(e),
                    other => {
                        return Err(KvError::Backend(format!(
                            "internal error: a replica answered a key fold with {other:?}"
                        )))
                    }
                };
                rows.iter().for_each(&mut *take);
                match next {
                    Some(last) => after = Some(last),
                    None => break,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::magnitude;

    #[test]
    fn a_size_counts_by_its_decimal_digits_less_one() {
        for (bytes, m) in [
            (0, 0),
            (9, 0),
            (10, 1),
            (99, 1),
            (100, 2),
            (1023, 3),
            (1 << 40, 12),
        ] {
            assert_eq!(magnitude(bytes), m, "{bytes}");
        }
    }
}
