//! Series ids, pure: each series (a database and a series key) gets a u64
//! id the first time it is written, so a block's key and a log record
//! name a series in 8 bytes. An id is known from its series record in the
//! catalog store or from its definition in the log.
//!
//! A definition goes into the log with the series' first samples, and
//! again with each later write until one such write is durable, so no
//! durable sample names an id whose definition is not durable too. A
//! durable definition gets its series record in the catalog store before
//! the log segment holding it is deleted.

use crate::FastMap;

struct Named {
    db: String,
    key: String,
    /// A write carrying its definition is durable.
    durable: bool,
    /// Its record is in the catalog store (and synced).
    stored: bool,
}

#[derive(Default)]
pub struct Catalog {
    ids: FastMap<String, FastMap<String, u64>>,
    named: FastMap<u64, Named>,
    next: u64,
}

impl Catalog {
    /// The id of `key` in `db`, made if new; true if a write of it must
    /// carry its definition.
    pub fn id(&mut self, db: &str, key: &str) -> (u64, bool) {
        if let Some(&id) = self.ids.get(db).and_then(|keys| keys.get(key)) {
            return (id, !self.named[&id].durable);
        }
        let id = self.next;
        self.next += 1;
        self.insert(id, db, key, false, false);
        (id, true)
    }

    /// The id of `key` in `db`, if it has one.
    pub fn lookup(&self, db: &str, key: &str) -> Option<u64> {
        self.ids.get(db)?.get(key).copied()
    }

    /// The database and key of `id`.
    pub fn name(&self, id: u64) -> Option<(&str, &str)> {
        self.named.get(&id).map(|n| (n.db.as_str(), n.key.as_str()))
    }

    /// A series found in the catalog store.
    pub fn found_stored(&mut self, id: u64, db: &str, key: &str) {
        self.insert(id, db, key, true, true);
    }

    /// A definition found in the log (or made durable by a write).
    pub fn found_durable(&mut self, id: u64, db: &str, key: &str) {
        match self.named.get_mut(&id) {
            Some(n) => n.durable = true,
            None => self.insert(id, db, key, true, false),
        }
    }

    /// A write carrying `id`'s definition is durable.
    pub fn made_durable(&mut self, id: u64) {
        if let Some(n) = self.named.get_mut(&id) {
            n.durable = true;
        }
    }

    /// Durable series without a record in the catalog store.
    pub fn unstored(&self) -> Vec<(u64, String, String)> {
        let mut v: Vec<_> = self
            .named
            .iter()
            .filter(|(_, n)| n.durable && !n.stored)
            .map(|(&id, n)| (id, n.db.clone(), n.key.clone()))
            .collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    /// `id`'s record is in the catalog store.
    pub fn stored(&mut self, id: u64) {
        if let Some(n) = self.named.get_mut(&id) {
            n.stored = true;
        }
    }

    /// Series keys of `db`.
    pub fn keys(&self, db: &str) -> impl Iterator<Item = (&str, u64)> {
        self.ids
            .get(db)
            .into_iter()
            .flat_map(|keys| keys.iter().map(|(k, &id)| (k.as_str(), id)))
    }

    /// Databases with series.
    pub fn databases(&self) -> impl Iterator<Item = &str> {
        self.ids.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.named.len()
    }

    pub fn is_empty(&self) -> bool {
        self.named.is_empty()
    }

    fn insert(&mut self, id: u64, db: &str, key: &str, durable: bool, stored: bool) {
        self.next = self.next.max(id.saturating_add(1));
        let keys = self.ids.entry(db.to_string()).or_default();
        if let Some(old) = keys.insert(key.to_string(), id) {
            if old != id {
                // Two ids for one series (only after damage): the newer
                // wins for writes; the older's samples stay readable by id.
                tracing::warn!(db, key, old, id, "a series has two ids: the later is used");
            }
        }
        self.named.insert(
            id,
            Named {
                db: db.to_string(),
                key: key.to_string(),
                durable,
                stored,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_made_once_and_defined_until_durable() {
        let mut c = Catalog::default();
        assert_eq!(c.id("db", "a"), (0, true));
        assert_eq!(c.id("db", "a"), (0, true), "not yet durable: defined again");
        assert_eq!(
            c.id("other", "a"),
            (1, true),
            "a database has its own series"
        );
        c.made_durable(0);
        assert_eq!(c.id("db", "a"), (0, false));
        assert_eq!(c.unstored(), vec![(0, "db".into(), "a".into())]);
        c.stored(0);
        assert!(c.unstored().is_empty());
        assert_eq!(c.lookup("db", "a"), Some(0));
        assert_eq!(c.lookup("db", "b"), None);
        assert_eq!(c.name(1), Some(("other", "a")));
    }

    #[test]
    fn ids_found_at_start_are_not_made_again() {
        let mut c = Catalog::default();
        c.found_stored(7, "db", "a");
        c.found_durable(9, "db", "b");
        c.found_durable(7, "db", "a");
        assert_eq!(c.id("db", "c"), (10, true));
        assert_eq!(c.id("db", "a"), (7, false));
        assert_eq!(c.unstored(), vec![(9, "db".into(), "b".into())]);
        let mut keys: Vec<_> = c.keys("db").collect();
        keys.sort();
        assert_eq!(keys, vec![("a", 7), ("b", 9), ("c", 10)]);
    }
}
