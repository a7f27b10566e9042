//! ORSWOT: an observed-remove set without tombstones (riak_dt_orswot).
//! Each element carries the dots of the adds that made it; a remove takes
//! away the dots it observed, so an add it did not see survives.

use crate::clock::{Clock, Dot};
use crate::CrdtError;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrSet {
    pub(crate) clock: Clock,
    pub(crate) entries: BTreeMap<Vec<u8>, BTreeSet<Dot>>,
    /// Removes whose context had seen adds this replica has not: applied
    /// when those adds arrive.
    pub(crate) deferred: BTreeMap<Clock, BTreeSet<Vec<u8>>>,
}

pub(crate) fn show(e: &[u8]) -> String {
    if e.iter()
        .all(|c| (0x20..0x7f).contains(c) && *c != b'"' && *c != b'\\')
    {
        format!("<<\"{}\">>", String::from_utf8_lossy(e))
    } else {
        format!(
            "<<{}>>",
            e.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

impl OrSet {
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn contains(&self, e: &[u8]) -> bool {
        self.entries.contains_key(e)
    }

    pub fn value(&self) -> Vec<Vec<u8>> {
        self.entries.keys().cloned().collect()
    }

    pub fn add(&mut self, e: &[u8], actor: &[u8]) {
        let dot = self.clock.next_dot(actor);
        self.entries.insert(e.to_vec(), BTreeSet::from([dot]));
    }

    /// Adds under an event of the enclosing map, so that the map's context
    /// says which adds a remove has seen (riak_dt's embedded sets).
    pub fn add_dot(&mut self, e: &[u8], dot: &Dot) {
        self.clock.add_dot(dot);
        self.entries
            .insert(e.to_vec(), BTreeSet::from([dot.clone()]));
    }

    /// Removes `e`: everything observed without a context (refused when
    /// absent), the dots the context saw with one.
    pub fn remove(&mut self, e: &[u8], context: Option<&Clock>) -> Result<(), CrdtError> {
        match context {
            None => {
                if self.entries.remove(e).is_none() {
                    return Err(CrdtError::NotPresent(show(e)));
                }
            }
            Some(ctx) => {
                if let Some(dots) = self.entries.get_mut(e) {
                    dots.retain(|d| !ctx.covers(d));
                    if dots.is_empty() {
                        self.entries.remove(e);
                    }
                }
                if !self.clock.descends(ctx) {
                    self.deferred
                        .entry(ctx.clone())
                        .or_default()
                        .insert(e.to_vec());
                }
            }
        }
        Ok(())
    }

    /// Riak's set update: adds first, then removes; all or nothing.
    pub fn update(
        &mut self,
        adds: &[Vec<u8>],
        removes: &[Vec<u8>],
        actor: &[u8],
        context: Option<&Clock>,
    ) -> Result<(), CrdtError> {
        for a in adds {
            self.add(a, actor);
        }
        for r in removes {
            self.remove(r, context)?;
        }
        Ok(())
    }

    /// A set update inside a map: adds under the map's event `dot`.
    pub fn update_with_dot(
        &mut self,
        adds: &[Vec<u8>],
        removes: &[Vec<u8>],
        dot: &Dot,
        context: Option<&Clock>,
    ) -> Result<(), CrdtError> {
        for a in adds {
            self.add_dot(a, dot);
        }
        for r in removes {
            self.remove(r, context)?;
        }
        Ok(())
    }

    pub fn merge(&mut self, other: &OrSet) {
        let mut out: BTreeMap<Vec<u8>, BTreeSet<Dot>> = BTreeMap::new();
        let keys: BTreeSet<&Vec<u8>> = self.entries.keys().chain(other.entries.keys()).collect();
        let empty = BTreeSet::new();
        for k in keys {
            let a = self.entries.get(k).unwrap_or(&empty);
            let b = other.entries.get(k).unwrap_or(&empty);
            let dots: BTreeSet<Dot> = a
                .intersection(b)
                .cloned()
                .chain(a.difference(b).filter(|d| !other.clock.covers(d)).cloned())
                .chain(b.difference(a).filter(|d| !self.clock.covers(d)).cloned())
                .collect();
            if !dots.is_empty() {
                out.insert(k.clone(), dots);
            }
        }
        self.entries = out;
        self.clock.merge(&other.clock);
        for (ctx, elems) in &other.deferred {
            self.deferred
                .entry(ctx.clone())
                .or_default()
                .extend(elems.iter().cloned());
        }
        self.apply_deferred();
    }

    fn apply_deferred(&mut self) {
        let pending = std::mem::take(&mut self.deferred);
        for (ctx, elems) in pending {
            for e in elems {
                // Cannot fail with a context.
                let _ = self.remove(&e, Some(&ctx));
            }
        }
    }
}
