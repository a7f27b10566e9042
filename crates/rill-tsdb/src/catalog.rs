//! Series ids, pure: each series (a database and a series key) gets a u64
//! id the first time it is written, so a block's key and a log record
//! name a series in 8 bytes. An id is known from its series record in the
//! catalog store or from its definition in the log.
//!
//! Each series belongs to a group, whose series share their timestamps
//! and are stored in one block per window (the fields of one line
//! protocol measurement and tag set). A group is named by a group key
//! within its database, and its id is the id of the series that named it
//! first (its leader); a series written without a group key, or the first
//! of its group, is its own group. A series' group never changes.
//!
//! A definition goes into the log with the series' first samples, and
//! again with each later write until one such write is durable, so no
//! durable sample names an id whose definition is not durable too. A
//! durable definition gets its series record in the catalog store before
//! the log segment holding it is deleted.
//!
//! Each series has a home partition, which the [`Placer`] gives from its
//! database and its group's key (its own key when it has no group key):
//! the partition of the cluster's ring it belongs to, whose replicas keep
//! it. It is not stored: the same placer gives it again.

use crate::FastMap;
use std::sync::Arc;

/// Gives a series' home partition from its database and its group's key
/// (or its own key); the default places every series in partition 0.
#[derive(Clone)]
pub struct Placer(Arc<PlaceFn>);

/// Database and placing key to home partition.
type PlaceFn = dyn Fn(&str, &str) -> u32 + Send + Sync;

impl Placer {
    pub fn new(f: impl Fn(&str, &str) -> u32 + Send + Sync + 'static) -> Placer {
        Placer(Arc::new(f))
    }

    pub fn home(&self, db: &str, group_or_key: &str) -> u32 {
        (self.0)(db, group_or_key)
    }
}

impl Default for Placer {
    fn default() -> Placer {
        Placer::new(|_, _| 0)
    }
}

impl std::fmt::Debug for Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Placer")
    }
}

struct Named {
    db: String,
    key: String,
    group: u64,
    /// Its home partition.
    home: u32,
    /// A write carrying its definition is durable.
    durable: bool,
    /// Its record is in the catalog store (and synced).
    stored: bool,
}

/// What a series' definition says (in the log and the catalog store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub id: u64,
    pub db: String,
    pub key: String,
    pub group: u64,
    /// The group's key (empty for a series that is its own group without
    /// one). Every member carries it, so a member's durable definition
    /// keeps the group findable by its key even if its first series'
    /// definition never became durable.
    pub group_key: String,
}

#[derive(Default)]
pub struct Catalog {
    placer: Placer,
    ids: FastMap<String, FastMap<String, u64>>,
    named: FastMap<u64, Named>,
    /// Per database, each group key's group.
    groups: FastMap<String, FastMap<String, u64>>,
    /// The group key of each group that has one, by group id.
    group_keys: FastMap<u64, String>,
    /// Per database, each home partition's series (what handoff and
    /// anti-entropy ask for every round, so not a scan of every series).
    by_home: FastMap<String, std::collections::BTreeMap<u32, std::collections::BTreeSet<u64>>>,
    next: u64,
    /// Counts every series added or removed: what a list of the series
    /// made before is current with.
    generation: u64,
}

impl Catalog {
    /// An empty catalog placing series with `placer`.
    pub fn new(placer: Placer) -> Catalog {
        Catalog {
            placer,
            ..Catalog::default()
        }
    }

    /// The home partition of `id` (and of its group).
    pub fn home(&self, id: u64) -> Option<u32> {
        self.named.get(&id).map(|n| n.home)
    }

    /// The id and group of `key` in `db`, made if new (in the group of
    /// `group_key`, if any); true if a write of it must carry its
    /// definition.
    pub fn id(&mut self, db: &str, key: &str, group_key: Option<&str>) -> (u64, u64, bool) {
        if let Some(&id) = self.ids.get(db).and_then(|keys| keys.get(key)) {
            let n = &self.named[&id];
            return (id, n.group, !n.durable);
        }
        let id = self.next;
        self.next += 1;
        let (group, gk) = match group_key {
            Some(g) => (
                self.groups
                    .get(db)
                    .and_then(|m| m.get(g))
                    .copied()
                    .unwrap_or(id),
                g,
            ),
            None => (id, ""),
        };
        self.insert(id, db, key, group, gk, false, false);
        (id, group, true)
    }

    /// The id and group of `key` in `db`, if it has one.
    pub fn lookup(&self, db: &str, key: &str) -> Option<(u64, u64)> {
        let id = *self.ids.get(db)?.get(key)?;
        Some((id, self.named[&id].group))
    }

    /// The database and key of `id`.
    pub fn name(&self, id: u64) -> Option<(&str, &str)> {
        self.named.get(&id).map(|n| (n.db.as_str(), n.key.as_str()))
    }

    /// The group of `id`.
    pub fn group(&self, id: u64) -> Option<u64> {
        self.named.get(&id).map(|n| n.group)
    }

    /// `id`'s definition.
    pub fn definition(&self, id: u64) -> Option<Definition> {
        let n = self.named.get(&id)?;
        let group_key = self.group_keys.get(&n.group).cloned().unwrap_or_default();
        Some(Definition {
            id,
            db: n.db.clone(),
            key: n.key.clone(),
            group: n.group,
            group_key,
        })
    }

    /// A series found in the catalog store.
    pub fn found_stored(&mut self, d: &Definition) {
        self.insert(d.id, &d.db, &d.key, d.group, &d.group_key, true, true);
    }

    /// A definition found in the log (or made durable by a write).
    pub fn found_durable(&mut self, d: &Definition) {
        match self.named.get_mut(&d.id) {
            Some(n) => n.durable = true,
            None => self.insert(d.id, &d.db, &d.key, d.group, &d.group_key, true, false),
        }
    }

    /// A write carrying `id`'s definition is durable.
    pub fn made_durable(&mut self, id: u64) {
        if let Some(n) = self.named.get_mut(&id) {
            n.durable = true;
        }
    }

    /// Durable series without a record in the catalog store.
    pub fn unstored(&self) -> Vec<Definition> {
        let mut v: Vec<Definition> = self
            .named
            .iter()
            .filter(|(_, n)| n.durable && !n.stored)
            .filter_map(|(&id, _)| self.definition(id))
            .collect();
        v.sort_unstable_by_key(|d| d.id);
        v
    }

    /// The next id to be given.
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// Gives no id below `floor` from now on.
    pub fn raise_next(&mut self, floor: u64) {
        self.next = self.next.max(floor);
    }

    /// Every series of `db` at home in `home`.
    pub fn of_home(&self, db: &str, home: u32) -> Vec<u64> {
        self.by_home
            .get(db)
            .and_then(|h| h.get(&home))
            .map_or_else(Vec::new, |ids| ids.iter().copied().collect())
    }

    /// The home of each group, by any series of it known (a group whose
    /// first series is unknown goes with its members).
    pub fn group_homes(&self) -> std::collections::HashMap<u64, u32> {
        self.named.values().map(|n| (n.group, n.home)).collect()
    }

    /// Each database and home partition that has series, sorted.
    pub fn homes(&self) -> Vec<(String, u32)> {
        let mut v: Vec<(String, u32)> = self
            .by_home
            .iter()
            .flat_map(|(db, homes)| homes.keys().map(move |&h| (db.clone(), h)))
            .collect();
        v.sort();
        v
    }

    fn unindex(&mut self, id: u64, db: &str, home: u32) {
        if let Some(homes) = self.by_home.get_mut(db) {
            if let Some(ids) = homes.get_mut(&home) {
                ids.remove(&id);
                if ids.is_empty() {
                    homes.remove(&home);
                }
            }
            if homes.is_empty() {
                self.by_home.remove(db);
            }
        }
    }

    /// Forgets the series `ids` (their data left the node), and their
    /// groups' keys.
    pub fn remove(&mut self, ids: &[u64]) {
        for id in ids {
            let Some(n) = self.named.remove(id) else {
                continue;
            };
            self.unindex(*id, &n.db, n.home);
            if let Some(keys) = self.ids.get_mut(&n.db) {
                if keys.get(&n.key) == Some(id) {
                    keys.remove(&n.key);
                }
                if keys.is_empty() {
                    self.ids.remove(&n.db);
                }
            }
            if let Some(gk) = self.group_keys.remove(id) {
                if let Some(m) = self.groups.get_mut(&n.db) {
                    if m.get(&gk) == Some(id) {
                        m.remove(&gk);
                    }
                }
            }
            self.generation += 1;
        }
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

    /// Changes with every series added or removed (a count can stay the
    /// same across a drop and as many new series).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_empty(&self) -> bool {
        self.named.is_empty()
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        id: u64,
        db: &str,
        key: &str,
        group: u64,
        group_key: &str,
        durable: bool,
        stored: bool,
    ) {
        self.next = self.next.max(id.saturating_add(1));
        self.generation += 1;
        // Ids only grow (a home dropped raises the floor past its ids), so
        // of two ids for one series or group the larger is the newer, and
        // the one writes and reads use, in whatever order the catalog
        // store and the log name them. Two arise when a home left the
        // node (handoff) and the series was written there again before
        // the log segments naming the old id were deleted: after a
        // restart the old one comes back from the log.
        let keys = self.ids.entry(db.to_string()).or_default();
        let kept = keys.entry(key.to_string()).or_insert(id);
        if *kept != id {
            tracing::debug!(
                db,
                key,
                old = (*kept).min(id),
                id = (*kept).max(id),
                "a series has two ids: the newer is used"
            );
            *kept = (*kept).max(id);
        }
        if !group_key.is_empty() {
            let kept = self
                .groups
                .entry(db.to_string())
                .or_default()
                .entry(group_key.to_string())
                .or_insert(group);
            *kept = (*kept).max(group);
            self.group_keys.insert(group, group_key.to_string());
        }
        // A group's series share their home, that of the group's key.
        let placing = match self.group_keys.get(&group) {
            Some(gk) => gk.as_str(),
            None => key,
        };
        let home = self.placer.home(db, placing);
        self.by_home
            .entry(db.to_string())
            .or_default()
            .entry(home)
            .or_default()
            .insert(id);
        let old = self.named.insert(
            id,
            Named {
                db: db.to_string(),
                key: key.to_string(),
                group,
                home,
                durable,
                stored,
            },
        );
        if let Some(o) = old.filter(|o| o.db != db || o.home != home) {
            self.unindex(id, &o.db, o.home);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(id: u64, db: &str, key: &str, group: u64, group_key: &str) -> Definition {
        Definition {
            id,
            db: db.into(),
            key: key.into(),
            group,
            group_key: group_key.into(),
        }
    }

    #[test]
    fn ids_are_made_once_and_defined_until_durable() {
        let mut c = Catalog::default();
        assert_eq!(c.id("db", "a", None), (0, 0, true));
        assert_eq!(
            c.id("db", "a", None),
            (0, 0, true),
            "not yet durable: defined again"
        );
        assert_eq!(
            c.id("other", "a", None),
            (1, 1, true),
            "a database has its own series"
        );
        c.made_durable(0);
        assert_eq!(c.id("db", "a", None), (0, 0, false));
        assert_eq!(c.unstored(), vec![def(0, "db", "a", 0, "")]);
        c.stored(0);
        assert!(c.unstored().is_empty());
        assert_eq!(c.lookup("db", "a"), Some((0, 0)));
        assert_eq!(c.lookup("db", "b"), None);
        assert_eq!(c.name(1), Some(("other", "a")));
    }

    #[test]
    fn each_home_lists_its_series_as_they_come_and_go() {
        // Homes by the key's last character.
        let mut c = Catalog::new(Placer::new(|_, k| {
            u32::from(*k.as_bytes().last().unwrap_or(&0) - b'0')
        }));
        for k in ["a1", "b1", "c2"] {
            c.id("db", k, None);
        }
        c.id("x", "d1", None);
        assert_eq!(
            c.homes(),
            vec![("db".into(), 1), ("db".into(), 2), ("x".into(), 1)]
        );
        assert_eq!(c.of_home("db", 1), vec![0, 1]);
        assert_eq!(c.of_home("x", 1), vec![3]);
        c.remove(&[0, 1]);
        assert!(c.of_home("db", 1).is_empty());
        assert_eq!(c.homes(), vec![("db".into(), 2), ("x".into(), 1)]);
        c.remove(&[2, 3]);
        assert!(c.homes().is_empty());
    }

    #[test]
    fn the_first_series_of_a_group_leads_it() {
        let mut c = Catalog::default();
        assert_eq!(c.id("db", "m_a{s=1}", Some("m{s=1}")), (0, 0, true));
        assert_eq!(c.id("db", "m_b{s=1}", Some("m{s=1}")), (1, 0, true));
        // Another database, another group of the same key.
        assert_eq!(c.id("x", "m_a{s=1}", Some("m{s=1}")), (2, 2, true));
        // A series keeps its group whatever a later write says.
        assert_eq!(c.id("db", "m_b{s=1}", Some("other")), (1, 0, true));
        assert_eq!(c.definition(0), Some(def(0, "db", "m_a{s=1}", 0, "m{s=1}")));
        assert_eq!(c.definition(1), Some(def(1, "db", "m_b{s=1}", 0, "m{s=1}")));
        assert_eq!(c.group(1), Some(0));
        assert_eq!(c.lookup("db", "m_b{s=1}"), Some((1, 0)));
    }

    #[test]
    fn a_member_alone_keeps_its_group_findable() {
        // The first series' definition never became durable; a member's
        // did: after a restart a new field still joins the group.
        let mut c = Catalog::default();
        c.found_durable(&def(5, "db", "m_b{s=1}", 4, "m{s=1}"));
        assert_eq!(c.id("db", "m_c{s=1}", Some("m{s=1}")), (6, 4, true));
        assert_eq!(c.definition(6), Some(def(6, "db", "m_c{s=1}", 4, "m{s=1}")));
    }

    #[test]
    fn a_series_is_placed_by_its_group_key_or_its_own() {
        let mut c = Catalog::new(Placer::new(|db, k| (db.len() + k.len()) as u32));
        let (a, _, _) = c.id("db", "m_a{s=1}", Some("m{s=1}"));
        let (b, _, _) = c.id("db", "m_bb{s=1}", Some("m{s=1}"));
        let (x, _, _) = c.id("db", "alone", None);
        assert_eq!(c.home(a), Some(2 + 6));
        assert_eq!(c.home(b), Some(2 + 6), "a member has its group's home");
        assert_eq!(c.home(x), Some(2 + 5));
        c.found_durable(&def(20, "db", "late", 20, "m{s=2}"));
        assert_eq!(c.home(20), Some(2 + 6));
        assert_eq!(c.home(99), None);
    }

    #[test]
    fn ids_and_groups_found_at_start_are_not_made_again() {
        let mut c = Catalog::default();
        c.found_stored(&def(7, "db", "a", 7, "g"));
        c.found_durable(&def(9, "db", "b", 7, ""));
        c.found_durable(&def(7, "db", "a", 7, "g"));
        assert_eq!(c.id("db", "c", Some("g")), (10, 7, true));
        assert_eq!(c.id("db", "a", None), (7, 7, false));
        assert_eq!(c.unstored(), vec![def(9, "db", "b", 7, "g")]);
        let mut keys: Vec<_> = c.keys("db").collect();
        keys.sort();
        assert_eq!(keys, vec![("a", 7), ("b", 9), ("c", 10)]);
    }
}
