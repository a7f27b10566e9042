//! Bucket types and bucket properties as cluster metadata: every entry
//! (a type, a bucket's own properties) carries a stamp, (version, writer),
//! set when a node changes it; two registries merge entry by entry, the
//! higher stamp winning, so nodes that gossip their registries agree
//! whatever the order (riak_core's cluster metadata is last-writer-wins
//! per key too). A bucket reset is kept as a stamp without properties, so
//! it is not undone by an older copy.

use crate::registry::Registry;
use std::collections::{BTreeMap, BTreeSet};

/// An entry of the registry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryKey {
    Type(String),
    Bucket(String, Vec<u8>),
}

/// When and by whom an entry was last written.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp {
    pub version: u64,
    pub writer: String,
}

pub(crate) type Stamps = BTreeMap<EntryKey, Stamp>;

impl Registry {
    fn keys(&self) -> BTreeSet<EntryKey> {
        let mut k: BTreeSet<EntryKey> = self.stamps.keys().cloned().collect();
        k.extend(self.types.keys().map(|n| EntryKey::Type(n.clone())));
        k.extend(
            self.buckets
                .keys()
                .map(|(t, b)| EntryKey::Bucket(t.clone(), b.clone())),
        );
        k
    }

    fn present(&self, k: &EntryKey) -> bool {
        match k {
            EntryKey::Type(n) => self.types.contains_key(n),
            EntryKey::Bucket(t, b) => self.buckets.contains_key(&(t.clone(), b.clone())),
        }
    }

    /// An entry's stamp; one written before stamps existed has the
    /// lowest, and an entry never written has none.
    fn stamp_of(&self, k: &EntryKey) -> Option<Stamp> {
        self.stamps
            .get(k)
            .cloned()
            .or_else(|| self.present(k).then(Stamp::default))
    }

    fn same(&self, other: &Registry, k: &EntryKey) -> bool {
        match k {
            EntryKey::Type(n) => self.types.get(n) == other.types.get(n),
            EntryKey::Bucket(t, b) => {
                let key = (t.clone(), b.clone());
                self.buckets.get(&key) == other.buckets.get(&key)
            }
        }
    }

    fn take(&mut self, other: &Registry, k: &EntryKey) {
        match k {
            EntryKey::Type(n) => match other.types.get(n) {
                Some(t) => {
                    self.types.insert(n.clone(), t.clone());
                }
                None => {
                    self.types.remove(n);
                }
            },
            EntryKey::Bucket(t, b) => {
                let key = (t.clone(), b.clone());
                match other.buckets.get(&key) {
                    Some(p) => {
                        self.buckets.insert(key, p.clone());
                    }
                    None => {
                        self.buckets.remove(&key);
                    }
                }
            }
        }
    }

    /// The highest version of any stamp.
    pub fn stamp_version(&self) -> u64 {
        self.stamps.values().map(|s| s.version).max().unwrap_or(0)
    }

    /// After a change made here (`before` is the registry before it):
    /// each entry that changed gets a new stamp, above every one seen.
    pub fn stamp_changes(&mut self, before: &Registry, writer: &str) {
        let version = self.stamp_version().max(before.stamp_version()) + 1;
        let mut keys = self.keys();
        keys.extend(before.keys());
        for k in keys {
            if !self.same(before, &k) {
                self.stamps.insert(
                    k,
                    Stamp {
                        version,
                        writer: writer.to_string(),
                    },
                );
            }
        }
    }

    /// Takes in another node's registry, entry by entry, the higher
    /// stamp winning. True when this registry changed.
    pub fn merge(&mut self, other: &Registry) -> bool {
        let mut changed = false;
        for k in other.keys() {
            let theirs = other.stamp_of(&k);
            if theirs > self.stamp_of(&k) {
                self.take(other, &k);
                if let Some(s) = theirs {
                    self.stamps.insert(k, s);
                }
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(v: serde_json::Value) -> crate::Props {
        v.as_object().unwrap().clone()
    }

    /// `f` applied at node `me`, stamped as the node does it.
    fn change(r: &mut Registry, me: &str, f: impl FnOnce(&mut Registry)) {
        let before = r.clone();
        f(r);
        r.stamp_changes(&before, me);
    }

    #[test]
    fn registries_merge_to_the_same_whatever_the_order() {
        let mut a = Registry::new();
        let mut b = Registry::new();
        change(&mut a, "a", |r| {
            r.create_type("maps", &props(json!({"datatype": "map"})))
                .unwrap();
            r.activate_type("maps").unwrap();
        });
        change(&mut b, "b", |r| {
            r.set_bucket("default", b"x", &props(json!({"n_val": 2})))
                .unwrap()
        });
        let (mut ab, mut ba) = (a.clone(), b.clone());
        assert!(ab.merge(&b));
        assert!(ba.merge(&a));
        assert_eq!(ab, ba);
        assert!(!ab.merge(&ba), "merging again changes nothing");
        assert!(ab.is_active("maps"));
        assert_eq!(ab.bucket_props("default", b"x").unwrap()["n_val"], json!(2));
        // A later reset at b wins over a's older copy, in either order.
        let mut b2 = ab.clone();
        change(&mut b2, "b", |r| r.reset_bucket("default", b"x").unwrap());
        let mut a2 = ab.clone();
        assert!(a2.merge(&b2));
        assert_eq!(a2.bucket_props("default", b"x").unwrap()["n_val"], json!(3));
        assert!(!b2.merge(&ab), "the older copy does not undo the reset");
        assert_eq!(a2, b2);
    }

    #[test]
    fn concurrent_writes_of_one_entry_resolve_by_stamp_and_survive_json() {
        let base = Registry::new();
        let (mut a, mut b) = (base.clone(), base.clone());
        change(&mut a, "a", |r| {
            r.set_bucket("default", b"k", &props(json!({"allow_mult": true})))
                .unwrap()
        });
        change(&mut b, "b", |r| {
            r.set_bucket("default", b"k", &props(json!({"allow_mult": false})))
                .unwrap()
        });
        let (mut ab, mut ba) = (a.clone(), b.clone());
        ab.merge(&b);
        ba.merge(&a);
        assert_eq!(ab, ba);
        assert_eq!(
            ab.bucket_props("default", b"k").unwrap()["allow_mult"],
            json!(false),
            "equal versions: the writer's name decides"
        );
        let back = Registry::from_json(&ab.to_json()).unwrap();
        assert_eq!(back, ab);
        // A file written before stamps reads with none, and loses to any
        // stamped write.
        let mut old = ab.to_json();
        old.as_object_mut().unwrap().remove("stamps");
        let mut legacy = Registry::from_json(&old).unwrap();
        assert!(!legacy.merge(&Registry::new()));
        assert!(legacy.merge(&ab));
        assert_eq!(legacy, ab);
    }
}
