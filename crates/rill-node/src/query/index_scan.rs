//! How a secondary index query reads the vnodes with memory bounded by
//! a page, not by the number of hits.
//!
//! A `_bin`/`_int` query merges the vnodes' sorted entries a page at a
//! time: each vnode gives at most [`PAGE`] matches after the cursor; the
//! smallest last match among the vnodes that filled their page bounds
//! what is known complete (a vnode that did not fill its page gave
//! everything it has), so those results go out in order, duplicates
//! across replicas dropped, and the cursor moves to that bound. A round
//! holds at most `vnodes × PAGE` entries and each round sends at least
//! `PAGE` new ones (or ends the query).
//!
//! `$key` and `$bucket` fold the vnodes' keys, which come in no order.
//! With `max_results` the smallest keys past the continuation are found
//! [`KEY_PAGE`] at a time (a round folds every vnode and keeps the
//! smallest keys past the last one sent), so memory is bounded by the
//! page, not by `max_results`; without it each key goes out as it is
//! found, once, from the first vnode of its preference list that holds
//! it (as Riak's coverage queries filter by partition), so in vnode
//! order.
//!
//! A query is not a snapshot: each vnode's page is read under its index
//! lock, whole, but writes between pages are seen or not.

use crate::error::KvError;
use crate::query::index::IndexPlan;
use rill_backend::{IndexQuery, IndexRange, Term};
use std::collections::BTreeSet;

/// Matches taken from each vnode in one round of a term query.
pub(crate) const PAGE: usize = 1000;

/// Keys held at once by a `$key`/`$bucket` query with `max_results`
/// (each round folds every vnode's keys of the bucket once).
pub(crate) const KEY_PAGE: usize = 10_000;

/// Receives one result; returns false when no more are wanted.
pub(crate) type Take<'a> = dyn FnMut(&Term, &[u8]) -> bool + 'a;

impl super::Queries {
    pub(crate) fn scan_terms(
        &self,
        plan: &IndexPlan,
        field: &[u8],
        range: &IndexRange,
        take: &mut Take<'_>,
    ) -> Result<(), KvError> {
        let mut cursor = plan.after.clone();
        let mut remaining = plan.limit;
        loop {
            let page = remaining.map_or(PAGE, |r| r.min(PAGE)).max(1);
            let q = IndexQuery {
                bucket_type: plan.t.clone(),
                bucket: plan.bucket.clone(),
                field: field.to_vec(),
                range: range.clone(),
                after: cursor.take(),
            };
            let mut round: BTreeSet<(Term, Vec<u8>)> = BTreeSet::new();
            // The smallest last match of a vnode that filled its page.
            let mut bound: Option<(Term, Vec<u8>)> = None;
            let mut bound_by = |last: Option<(Term, Vec<u8>)>| {
                if let Some(l) = last {
                    if bound.as_ref().is_none_or(|b| l < *b) {
                        bound = Some(l);
                    }
                }
            };
            if self.owns_all() {
                for v in self.vnodes.iter() {
                    let mut taken = 0usize;
                    let mut last = None;
                    v.backend().query_index(&q, &mut |term, key| {
                        if !plan.keep(term) {
                            return true;
                        }
                        taken += 1;
                        let entry = (term.clone(), key.to_vec());
                        if taken == page {
                            last = Some(entry.clone());
                        }
                        round.insert(entry);
                        taken < page
                    })?;
                    bound_by(last);
                }
            } else {
                // Owners give pages unfiltered (the regex stays here): a
                // full page still bounds what is complete.
                for e in self.coverage(self.coverage_n(&plan.t, &plan.bucket)?)? {
                    let (entries, filled) = self.cover_index_page(&e, &q, page as u32)?;
                    let last = if filled {
                        entries.last().cloned()
                    } else {
                        None
                    };
                    round.extend(entries.into_iter().filter(|(t, _)| plan.keep(t)));
                    bound_by(last);
                }
            }
            for entry in &round {
                if bound.as_ref().is_some_and(|b| entry > b) {
                    break;
                }
                if let Some(r) = remaining.as_mut() {
                    *r = r.saturating_sub(1);
                }
                if !take(&entry.0, &entry.1) {
                    return Ok(());
                }
            }
            match bound {
                // Every vnode gave all it had.
                None => return Ok(()),
                // Everything up to the bound went out.
                Some(b) => cursor = Some(b),
            }
        }
    }

    pub(crate) fn scan_keys(
        &self,
        plan: &IndexPlan,
        lo: &[u8],
        hi: Option<&[u8]>,
        take: &mut Take<'_>,
    ) -> Result<(), KvError> {
        self.scan_keys_paged(plan, lo, hi, take, KEY_PAGE)
    }

    fn scan_keys_paged(
        &self,
        plan: &IndexPlan,
        lo: &[u8],
        hi: Option<&[u8]>,
        take: &mut Take<'_>,
        key_page: usize,
    ) -> Result<(), KvError> {
        let wanted = |k: &[u8]| {
            k >= lo
                && hi.is_none_or(|h| k <= h)
                && plan.after.as_ref().is_none_or(|(_, ak)| k > ak.as_slice())
                && plan.keep_bytes(k)
        };
        if !self.owns_all() {
            return self.scan_keys_cluster(plan, lo, hi, take, key_page, &wanted);
        }
        if let Some(limit) = plan.limit {
            // The `limit` smallest wanted keys, replicas merged, found a
            // page at a time: each round folds every vnode for the
            // smallest `key_page` keys past the last one sent.
            let mut cursor: Option<Vec<u8>> = None;
            let mut remaining = limit;
            while remaining > 0 {
                let page = remaining.min(key_page).max(1);
                let mut best: BTreeSet<Vec<u8>> = BTreeSet::new();
                for v in self.vnodes.iter() {
                    v.backend().fold_keys(&plan.t, &plan.bucket, &mut |k| {
                        let room =
                            best.len() < page || best.last().is_some_and(|m| k < m.as_slice());
                        let past = cursor.as_ref().is_none_or(|c| k > c.as_slice());
                        if room && past && wanted(k) && best.insert(k.to_vec()) && best.len() > page
                        {
                            best.pop_last();
                        }
                        true
                    })?;
                }
                let full = best.len() == page;
                let last = best.last().cloned();
                for k in &best {
                    remaining -= 1;
                    if !take(&Term::Bin(k.clone()), k) {
                        return Ok(());
                    }
                }
                if !full {
                    break;
                }
                cursor = last;
            }
            return Ok(());
        }
        for v in self.vnodes.iter() {
            let mut more = true;
            v.backend().fold_keys(&plan.t, &plan.bucket, &mut |k| {
                if wanted(k) && self.reports_key(&plan.t, &plan.bucket, k, v.partition) {
                    more = take(&Term::Bin(k.to_vec()), k);
                }
                more
            })?;
            if !more {
                break;
            }
        }
        Ok(())
    }
}

impl super::Queries {
    /// `$key`/`$bucket` across a cluster: with `max_results`, rounds of
    /// the owners' smallest keys past a cursor, complete up to the
    /// smallest last key of an owner that had more; without, each key
    /// once from its coverage vnode.
    fn scan_keys_cluster(
        &self,
        plan: &IndexPlan,
        lo: &[u8],
        hi: Option<&[u8]>,
        take: &mut Take<'_>,
        key_page: usize,
        wanted: &dyn Fn(&[u8]) -> bool,
    ) -> Result<(), KvError> {
        let Some(limit) = plan.limit else {
            let n = self.coverage_n(&plan.t, &plan.bucket)?;
            return self.cover_keys(&plan.t, &plan.bucket, n, lo, hi, None, &mut |k| {
                !wanted(k) || take(&Term::Bin(k.to_vec()), k)
            });
        };
        let mut cursor: Option<Vec<u8>> = plan.after.as_ref().map(|(_, k)| k.clone());
        let mut remaining = limit;
        while remaining > 0 {
            let q = crate::vnode::msg::KeysQuery {
                bucket_type: plan.t.clone(),
                bucket: plan.bucket.clone(),
                lo: lo.to_vec(),
                hi: hi.map(<[u8]>::to_vec),
                after: cursor.take(),
                limit: remaining.min(key_page).max(1) as u32,
                first_of: None,
            };
            let (round, bound) = self.cover_keys_round(&q)?;
            for k in &round {
                if bound.as_ref().is_some_and(|b| k > b) {
                    break;
                }
                if wanted(k) {
                    remaining -= 1;
                    if !take(&Term::Bin(k.clone()), k) || remaining == 0 {
                        return Ok(());
                    }
                }
            }
            match bound {
                None => return Ok(()),
                Some(b) => cursor = Some(b),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Content, IndexRequest, IndexSpec, Metadata, PutRequest};
    use rill_backend::Term;

    #[test]
    fn key_queries_with_max_results_page_through_the_keys_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let n = crate::testing::memory_node(dir.path());
        for i in 0..300 {
            n.put(PutRequest {
                bucket: b"b".to_vec(),
                key: Some(format!("k{:03}", i * 7 % 300).into_bytes()),
                content: Content::new(b"v".to_vec(), Metadata::default()),
                ..PutRequest::default()
            })
            .unwrap();
        }
        for (max, after) in [(250, None), (1000, None), (40, Some("k100"))] {
            let plan = n
                .index_plan(&IndexRequest {
                    bucket_type: b"default".to_vec(),
                    bucket: b"b".to_vec(),
                    index: "$key".into(),
                    spec: IndexSpec::Range(b"k000".to_vec(), b"k999".to_vec()),
                    return_terms: false,
                    max_results: Some(max),
                    continuation: after.map(|a: &str| {
                        crate::encode_continuation(&Term::Bin(a.into()), a.as_bytes())
                    }),
                    term_regex: None,
                })
                .unwrap();
            let from = after.map_or(0, |a| a[1..].parse::<usize>().unwrap() + 1);
            let want: Vec<Vec<u8>> = (from..300)
                .take(max as usize)
                .map(|i| format!("k{i:03}").into_bytes())
                .collect();
            for page in [1, 7, 250, 10_000] {
                let mut got = Vec::new();
                n.queries
                    .scan_keys_paged(
                        &plan,
                        b"",
                        None,
                        &mut |_, k| {
                            got.push(k.to_vec());
                            true
                        },
                        page,
                    )
                    .unwrap();
                assert_eq!(got, want, "max_results {max}, after {after:?}, page {page}");
            }
        }
    }
}
