//! A vnode's trees: one per preference list it is in ([`IndexN`]), kept
//! current by every write, and rebuilt from the store while writes go on
//! (after an unclean stop, on a schedule, or when asked).
//!
//! A rebuild folds the store key by key into new trees. A key the fold
//! has not reached yet may be written meanwhile; so the rebuild keeps
//! the set of keys it has taken (visited or written), each under the
//! key's lock in the caller, and a write of a key it has not taken puts
//! the key's new state in the new trees and marks it taken, so the fold
//! skips it. When the fold ends the new trees replace the old.

use crate::schedule::IndexN;
use crate::tree::{DecodeError, TictacTree};
use std::collections::{BTreeMap, HashSet};

/// How far a vnode's trees can be trusted (`treestatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Never built (or lost at an unclean stop) and no build running.
    Unbuilt,
    /// Being built for the first time: exchanges wait.
    Building,
    /// Built at this time (ms since the epoch), and kept since.
    Built { at_ms: u64 },
    /// Built, and being built again.
    Rebuilding { at_ms: u64 },
}

impl Status {
    /// Riak's word for it.
    pub fn name(self) -> &'static str {
        match self {
            Status::Unbuilt => "unbuilt",
            Status::Building => "building",
            Status::Built { .. } => "built",
            Status::Rebuilding { .. } => "rebuilding",
        }
    }
}

struct Rebuild {
    trees: BTreeMap<IndexN, TictacTree>,
    taken: HashSet<Vec<u8>>,
}

/// A vnode's trees.
pub struct Trees {
    live: BTreeMap<IndexN, TictacTree>,
    built_at: Option<u64>,
    rebuild: Option<Rebuild>,
}

impl Trees {
    /// Trees of a store known to be empty: built, now.
    pub fn empty(now_ms: u64) -> Trees {
        Trees {
            live: BTreeMap::new(),
            built_at: Some(now_ms),
            rebuild: None,
        }
    }

    /// Trees that must be built before they are compared.
    pub fn unbuilt() -> Trees {
        Trees {
            live: BTreeMap::new(),
            built_at: None,
            rebuild: None,
        }
    }

    pub fn status(&self) -> Status {
        match (self.built_at, self.rebuild.is_some()) {
            (None, false) => Status::Unbuilt,
            (None, true) => Status::Building,
            (Some(at_ms), false) => Status::Built { at_ms },
            (Some(at_ms), true) => Status::Rebuilding { at_ms },
        }
    }

    /// Whether the trees may be compared.
    pub fn is_built(&self) -> bool {
        self.built_at.is_some()
    }

    /// A key (`id`: its identity, for a running rebuild) changed from
    /// clock hash `old` to `new` (`None`: absent). Called under the key's
    /// lock, after the store took the change.
    pub fn write(
        &mut self,
        id: &[u8],
        index_n: IndexN,
        hash: &[u8; 20],
        old: Option<u32>,
        new: Option<u32>,
    ) {
        if old == new {
            return;
        }
        self.live
            .entry(index_n)
            .or_default()
            .replace(hash, old, new);
        if let Some(r) = &mut self.rebuild {
            if r.taken.contains(id) {
                r.trees.entry(index_n).or_default().replace(hash, old, new);
            } else {
                r.taken.insert(id.to_vec());
                if new.is_some() {
                    r.trees.entry(index_n).or_default().replace(hash, None, new);
                }
            }
        }
    }

    /// Starts a rebuild (a running one starts over).
    pub fn start_rebuild(&mut self) {
        self.rebuild = Some(Rebuild {
            trees: BTreeMap::new(),
            taken: HashSet::new(),
        });
    }

    /// Whether a rebuild is running.
    pub fn rebuilding(&self) -> bool {
        self.rebuild.is_some()
    }

    /// The fold reached a key, stored at clock hash `current` (`None`:
    /// gone since it was listed). Called under the key's lock.
    pub fn rebuild_visit(
        &mut self,
        id: &[u8],
        index_n: IndexN,
        hash: &[u8; 20],
        current: Option<u32>,
    ) {
        let Some(r) = &mut self.rebuild else { return };
        if r.taken.insert(id.to_vec()) {
            if let Some(c) = current {
                r.trees
                    .entry(index_n)
                    .or_default()
                    .replace(hash, None, Some(c));
            }
        }
    }

    /// The fold ended: the new trees replace the old.
    pub fn finish_rebuild(&mut self, now_ms: u64) {
        if let Some(r) = self.rebuild.take() {
            self.live = r.trees;
            self.built_at = Some(now_ms);
        }
    }

    /// The rebuild was given up (the store failed): the old trees stay.
    pub fn abandon_rebuild(&mut self) {
        self.rebuild = None;
    }

    /// The root of `index_n`'s tree (all zeros when it covers no key);
    /// `None` while the trees are not built.
    pub fn root(&self, index_n: IndexN) -> Option<Vec<u32>> {
        self.built_at?;
        Some(
            self.live
                .get(&index_n)
                .map_or_else(|| vec![0; crate::tree::BRANCHES], |t| t.root().to_vec()),
        )
    }

    /// The segments of the asked branches of `index_n`'s tree; `None`
    /// while the trees are not built.
    pub fn branches(&self, index_n: IndexN, ids: &[u32]) -> Option<Vec<(u32, Vec<u32>)>> {
        self.built_at?;
        let t = self.live.get(&index_n);
        Some(
            ids.iter()
                .filter(|b| (**b as usize) < crate::tree::BRANCHES)
                .map(|&b| {
                    let segs = t.map_or_else(
                        || vec![0; crate::tree::SEGMENTS_PER_BRANCH],
                        |t| t.branch(b as usize).to_vec(),
                    );
                    (b, segs)
                })
                .collect(),
        )
    }

    /// The lists the trees cover.
    pub fn index_ns(&self) -> Vec<IndexN> {
        self.live.keys().copied().collect()
    }

    /// The persisted form of built trees (docs/format.md, "Tictac tree
    /// set"); `None` when they are not built (nothing worth keeping).
    pub fn encode(&self) -> Option<Vec<u8>> {
        let at = self.built_at?;
        let mut out = Vec::new();
        out.extend_from_slice(SET_MAGIC);
        out.push(SET_VERSION);
        out.extend_from_slice(&at.to_be_bytes());
        out.extend_from_slice(&(self.live.len() as u32).to_be_bytes());
        for (i, t) in &self.live {
            let bytes = t.encode();
            out.extend_from_slice(&i.first.to_be_bytes());
            out.push(i.n);
            out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            out.extend_from_slice(&bytes);
        }
        crate::tree::seal(&mut out);
        Some(out)
    }

    /// Built trees from their persisted form.
    pub fn decode(b: &[u8]) -> Result<Trees, DecodeError> {
        let body = crate::tree::framed_body(b, SET_MAGIC, SET_VERSION, 17)?;
        let at = u64::from_be_bytes(body[5..13].try_into().expect("8"));
        let count = u32::from_be_bytes(body[13..17].try_into().expect("4")) as usize;
        let mut rest = &body[17..];
        let mut live = BTreeMap::new();
        for _ in 0..count {
            if rest.len() < 9 {
                return Err(DecodeError::Length);
            }
            let first = u32::from_be_bytes(rest[..4].try_into().expect("4"));
            let n = rest[4];
            let len = u32::from_be_bytes(rest[5..9].try_into().expect("4")) as usize;
            if rest.len() - 9 < len {
                return Err(DecodeError::Length);
            }
            let tree = TictacTree::decode(&rest[9..9 + len])?;
            if live.insert(IndexN { first, n }, tree).is_some() {
                return Err(DecodeError::Length);
            }
            rest = &rest[9 + len..];
        }
        if !rest.is_empty() {
            return Err(DecodeError::Length);
        }
        Ok(Trees {
            live,
            built_at: Some(at),
            rebuild: None,
        })
    }
}

const SET_MAGIC: &[u8; 4] = b"RTTS";
const SET_VERSION: u8 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::clock_hash;

    fn hash(i: u32) -> [u8; 20] {
        crate::testing::spread_hash(i)
    }

    const L: IndexN = IndexN { first: 4, n: 3 };

    fn c(n: u64) -> Option<u32> {
        Some(clock_hash([(&b"a"[..], n)]))
    }

    #[test]
    fn a_rebuild_while_writes_go_on_ends_equal_to_the_store() {
        // The store: key -> counter (0: absent).
        let mut store: BTreeMap<u32, u64> = (0..500).map(|i| (i, 1)).collect();
        let mut t = Trees::unbuilt();
        assert!(t.root(L).is_none());
        t.start_rebuild();
        assert_eq!(t.status(), Status::Building);
        let listed: Vec<u32> = store.keys().copied().collect();
        for (step, i) in listed.iter().enumerate() {
            // Writes meanwhile: ahead of the fold, behind it, new keys,
            // and removals.
            for w in [step as u32 * 7 % 600, step as u32 * 13 % 600] {
                let old = store.get(&w).copied().and_then(c);
                let next = if step % 5 == 0 {
                    None
                } else {
                    Some(step as u64 + 2)
                };
                match next {
                    Some(n) => store.insert(w, n),
                    None => store.remove(&w),
                };
                t.write(&w.to_be_bytes(), L, &hash(w), old, next.and_then(c));
            }
            let current = store.get(i).copied().and_then(c);
            t.rebuild_visit(&i.to_be_bytes(), L, &hash(*i), current);
        }
        t.finish_rebuild(99);
        assert_eq!(t.status(), Status::Built { at_ms: 99 });
        let mut want = TictacTree::new();
        for (i, n) in &store {
            want.replace(&hash(*i), None, c(*n));
        }
        assert_eq!(t.root(L).unwrap(), want.root().to_vec());
    }

    #[test]
    fn the_persisted_set_round_trips_and_refuses_damage() {
        let mut t = Trees::empty(5);
        for i in 0..100u32 {
            t.write(&i.to_be_bytes(), L, &hash(i), None, c(1));
            let other = IndexN { first: 5, n: 3 };
            t.write(&i.to_be_bytes(), other, &hash(i + 1000), None, c(2));
        }
        let bytes = t.encode().unwrap();
        let back = Trees::decode(&bytes).unwrap();
        assert_eq!(back.status(), Status::Built { at_ms: 5 });
        assert_eq!(back.root(L), t.root(L));
        assert_eq!(back.index_ns(), t.index_ns());
        let mut bad = bytes.clone();
        bad[30] ^= 1;
        assert!(Trees::decode(&bad).is_err());
        for cut in [0, 10, 20, bytes.len() - 1] {
            assert!(Trees::decode(&bytes[..cut]).is_err());
        }
        assert!(Trees::unbuilt().encode().is_none());
    }
}
