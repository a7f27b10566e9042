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
//! With `max_results` the smallest keys past the continuation are kept
//! in a set of at most `max_results`; without it each key goes out as it
//! is found, once, from the first vnode of its preference list (as
//! Riak's coverage queries filter by partition), so in vnode order.
//!
//! A query is not a snapshot: each vnode's page is read under its index
//! lock, whole, but writes between pages are seen or not.

use crate::error::KvError;
use crate::index::IndexPlan;
use crate::node::Node;
use rill_backend::{IndexQuery, IndexRange, Term};
use std::collections::BTreeSet;

/// Matches taken from each vnode in one round of a term query.
pub(crate) const PAGE: usize = 1000;

/// Receives one result; returns false when no more are wanted.
pub(crate) type Take<'a> = dyn FnMut(&Term, &[u8]) -> bool + 'a;

impl Node {
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
            for v in &self.vnodes {
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
                if let Some(l) = last {
                    if bound.as_ref().is_none_or(|b| l < *b) {
                        bound = Some(l);
                    }
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
        let wanted = |k: &[u8]| {
            k >= lo
                && hi.is_none_or(|h| k <= h)
                && plan.after.as_ref().is_none_or(|(_, ak)| k > ak.as_slice())
                && plan.keep_bytes(k)
        };
        if let Some(limit) = plan.limit {
            // The `limit` smallest wanted keys, replicas merged.
            let mut best: BTreeSet<Vec<u8>> = BTreeSet::new();
            for v in &self.vnodes {
                v.backend().fold_keys(&plan.t, &plan.bucket, &mut |k| {
                    let room = best.len() < limit || best.last().is_some_and(|m| k < m.as_slice());
                    if room && wanted(k) && best.insert(k.to_vec()) && best.len() > limit {
                        best.pop_last();
                    }
                    true
                })?;
            }
            for k in &best {
                if !take(&Term::Bin(k.clone()), k) {
                    break;
                }
            }
            return Ok(());
        }
        for v in &self.vnodes {
            let mut more = true;
            v.backend().fold_keys(&plan.t, &plan.bucket, &mut |k| {
                if wanted(k) && self.first_owner(&plan.t, &plan.bucket, k) == Some(v.partition) {
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
