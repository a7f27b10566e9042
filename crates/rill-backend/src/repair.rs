//! Finding and setting aside damaged data in a leveldb database, with
//! the node stopped (`rill admin leveldb verify | repair`), as Basho's
//! leveldb repair sets damaged blocks aside in `lost/`.
//!
//! `verify` reads every entry (key and value) of every partition. A read
//! that meets a damaged block (a checksum that does not match, a block
//! or value that does not decompress) ends the scan's iterator; the scan
//! then finds, by bisection over the key space, the first key after the
//! last one read from which reading works again, records the keys
//! between as a lost range, and goes on from there. Every key in a lost
//! range is given up on this node, those of the damaged block and any
//! other that sorts among them.
//!
//! `repair` copies each damaged partition's readable entries into a new
//! keyspace (`repair-<name>`), drops what no longer matches there (an
//! index entry whose object is gone; a leveled head without its value,
//! or a value without its head), marks the copy complete, makes it
//! durable, and puts it in the partition's place: the partition's
//! keyspace is dropped, made again and filled from the copy, which is
//! then dropped. A partition opened with a copy beside it finishes what
//! a crash interrupted: a complete copy is put in place again, an
//! incomplete one dropped. The lost ranges are appended to
//! `lost/damaged-ranges` in the database's directory (docs/format.md).
//! Replicas on other nodes hold the keys lost here; read repair and
//! anti-entropy bring them back.

use crate::keys::{bucket_prefix, split, split_index_rest, INDEX, OBJECT, VALUE};
use crate::leveldb::{engine, Copier, LeveldbStore};
use crate::leveled::value_key;
use crate::{Error, JournalOptions, Result};
use fjall::{Keyspace, PersistMode};
use std::ops::Bound;

/// The key a complete copy holds (no backend key begins with 0xFF).
const COMPLETE: &[u8] = b"\xff\xffrill-repair-complete";

/// Keys given up between two readable ones (exclusive; `None`: from the
/// start, or to the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRange {
    pub after: Option<Vec<u8>>,
    pub before: Option<Vec<u8>>,
}

/// What a scan of one partition's keyspace found (and a repair did).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionCheck {
    /// The keyspace: `p<partition>` (leveldb) or `lv<partition>` (leveled).
    pub keyspace: String,
    /// Entries read.
    pub entries: u64,
    pub lost: Vec<LostRange>,
    /// Entries a repair dropped as unmatched (index entries without their
    /// object, leveled heads without values or values without heads).
    pub unmatched: u64,
}

/// Whether an engine error is damage (as opposed to a failing disk).
fn damage(e: fjall::Error) -> Result<()> {
    match engine(e) {
        Error::Corrupt(_) => Ok(()),
        other => Err(other),
    }
}

/// The first entry at or after `from`: `Ok(Some(key))`, `Ok(None)` at the
/// end, `Err(())` where reading it meets damage.
fn probe(ks: &Keyspace, from: &[u8]) -> Result<std::result::Result<Option<Vec<u8>>, ()>> {
    match ks
        .range::<&[u8], _>((Bound::Included(from), Bound::Unbounded))
        .next()
    {
        None => Ok(Ok(None)),
        Some(item) => match item.into_inner() {
            Ok((k, _)) => Ok(Ok(Some(k.to_vec()))),
            Err(e) => damage(e).map(|()| Err(())),
        },
    }
}

/// The byte string halfway between `a` and `b` (equal lengths, read as
/// big-endian numbers), rounded down.
fn midpoint(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut sum = vec![0u16; a.len() + 1];
    let mut carry = 0u16;
    for i in (0..a.len()).rev() {
        let s = u16::from(a[i]) + u16::from(b[i]) + carry;
        sum[i + 1] = s & 0xFF;
        carry = s >> 8;
    }
    sum[0] = carry;
    // Halve the (len + 1)-byte number, keeping the low `len` bytes.
    let mut out = vec![0u8; a.len()];
    let mut rem = sum[0];
    for i in 0..a.len() {
        let cur = (rem << 8) | sum[i + 1];
        out[i] = (cur >> 1) as u8;
        rem = cur & 1;
    }
    out
}

/// The first readable key after damage met past `floor` (the last key
/// read, or where the read started); `None` if the damage reaches the end.
fn skip(ks: &Keyspace, floor: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
    let start: Vec<u8> = floor.map_or_else(Vec::new, |f| [f, &[0]].concat());
    if let Ok(found) = probe(ks, &start)? {
        // Readable right after the floor after all: go on from there.
        return Ok(found);
    }
    // Positions 64 bytes longer than the floor, read as numbers: the
    // bisection resolves keys up to that length past the floor.
    let len = start.len() + 64;
    let mut lo = start;
    lo.resize(len, 0);
    let mut hi = vec![0xFFu8; len];
    let Ok(mut found) = probe(ks, &hi)? else {
        return Ok(None);
    };
    if let Ok(f) = probe(ks, &lo)? {
        return Ok(f);
    }
    // Reading from `lo` meets damage, from `hi` it does not.
    loop {
        let mid = midpoint(&lo, &hi);
        if mid == lo {
            return Ok(found);
        }
        match probe(ks, &mid)? {
            Ok(f) => {
                hi = mid;
                found = f;
            }
            Err(()) => lo = mid,
        }
    }
}

/// What a scan hands each readable entry (key, value) to.
type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'a;

/// Reads every entry of `ks` in key order, handing each readable one to
/// `visit`, and returns the entries read and the ranges lost to damage.
pub(crate) fn scan(ks: &Keyspace, visit: &mut Visit) -> Result<(u64, Vec<LostRange>)> {
    let (mut entries, mut lost) = (0u64, Vec::new());
    let mut start: Option<Vec<u8>> = None;
    let mut last: Option<Vec<u8>> = None;
    loop {
        let from = start.clone().map_or(Bound::Unbounded, Bound::Included);
        let mut floor = start.clone();
        let (mut damaged, mut read_any) = (false, false);
        for item in ks.range::<Vec<u8>, _>((from, Bound::Unbounded)) {
            match item.into_inner() {
                Ok((k, v)) => {
                    visit(&k, &v)?;
                    entries += 1;
                    floor = Some(k.to_vec());
                    read_any = true;
                }
                Err(e) => {
                    damage(e)?;
                    damaged = true;
                    break;
                }
            }
        }
        if !damaged {
            return Ok((entries, lost));
        }
        if read_any {
            last = floor.clone();
        }
        let next = skip(ks, floor.as_deref())?;
        // A start that reads as damage is lost with the range.
        lost.push(LostRange {
            after: last.clone(),
            before: next.clone(),
        });
        match next {
            Some(k) => {
                tracing::error!(keyspace = %ks.name().as_ref(), after = ?last.as_deref().map(hex), before = %hex(&k),
                    "a damaged leveldb block: the keys between are lost on this node");
                start = Some(k);
            }
            None => return Ok((entries, lost)),
        }
    }
}

/// `bytes` in hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A backend key as a person reads it: what it is (object, index entry,
/// value) and its bucket type, bucket and key, or hexadecimal.
pub fn describe_key(key: &[u8]) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let Some((kind, t, b, rest)) = split(key) else {
        return hex(key);
    };
    let what = match kind {
        OBJECT => "object",
        VALUE => "value of",
        INDEX => "an index entry of bucket",
        _ => return hex(key),
    };
    let t = if t.is_empty() {
        "default".into()
    } else {
        text(t)
    };
    if kind == INDEX {
        return format!("{what} {t}/{}", text(b));
    }
    format!("{what} {t}/{}/{}", text(b), text(rest))
}

/// The object key an index entry's key names; `None` for other keys.
fn object_of_index(key: &[u8]) -> Option<Vec<u8>> {
    let (kind, t, b, rest) = split(key)?;
    if kind != INDEX {
        return None;
    }
    let (_, _, k) = split_index_rest(rest)?;
    let mut obj = bucket_prefix(OBJECT, t, b).ok()?;
    obj.extend_from_slice(k);
    Some(obj)
}

/// Removes from `ks` what no longer matches after lost ranges: in a
/// leveled keyspace, heads without their value and values without their
/// head; then index entries whose object is gone. How many it removed.
fn drop_unmatched(ks: &Keyspace, leveled: bool) -> Result<u64> {
    let mut removed = 0;
    // Heads and values first, so an index entry of an object whose value
    // was lost finds its head gone too.
    for heads_and_values in [true, false] {
        if heads_and_values && !leveled {
            continue;
        }
        let mut gone = Vec::new();
        for item in ks.iter() {
            let k = item.key().map_err(engine)?;
            let other = match k.first() {
                Some(&OBJECT) if heads_and_values => Some(value_key(k.to_vec())),
                Some(&VALUE) if heads_and_values => Some([&[OBJECT], &k[1..]].concat()),
                Some(&INDEX) if !heads_and_values => object_of_index(&k),
                _ => None,
            };
            if let Some(other) = other {
                if !ks.contains_key(&other).map_err(engine)? {
                    gone.push(k.to_vec());
                }
            }
        }
        for k in &gone {
            ks.remove(k.as_slice()).map_err(engine)?;
        }
        removed += gone.len() as u64;
    }
    Ok(removed)
}

impl LeveldbStore {
    /// The partitions' keyspaces (leveldb's `p<partition>`, leveled's
    /// `lv<partition>`), by name.
    fn partition_keyspaces(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .keyspace_names()
            .into_iter()
            .filter(|n| n.starts_with('p') || n.starts_with("lv"))
            .collect();
        names.sort();
        names
    }

    /// Finishes or undoes every repair a crash interrupted, also of a
    /// partition whose keyspace is gone (`journal`: a leveled keyspace's
    /// settings).
    fn finish_repairs(&self, journal: &JournalOptions) -> Result<()> {
        for copy in self.keyspace_names() {
            if let Some(name) = copy.strip_prefix("repair-") {
                let journal = name.starts_with("lv").then_some(journal);
                self.finish_repair(name, journal)?;
            }
        }
        Ok(())
    }

    /// Reads every entry of every partition: what is damaged (a repair a
    /// crash interrupted is finished first).
    pub fn verify(&self) -> Result<Vec<PartitionCheck>> {
        self.finish_repairs(&JournalOptions::default())?;
        self.scan_partitions()
    }

    /// Reads every entry of every partition.
    fn scan_partitions(&self) -> Result<Vec<PartitionCheck>> {
        self.partition_keyspaces()
            .into_iter()
            .map(|name| {
                let ks = self.keyspace(&name, None)?;
                let (entries, lost) = scan(&ks, &mut |_, _| Ok(()))?;
                Ok(PartitionCheck {
                    keyspace: name,
                    entries,
                    lost,
                    unmatched: 0,
                })
            })
            .collect()
    }

    /// [`LeveldbStore::verify`], then each damaged partition rebuilt
    /// from what is readable (`journal`: a leveled keyspace's settings
    /// when it is made again); the lost ranges appended to
    /// `lost/damaged-ranges`.
    pub fn repair(&self, journal: &JournalOptions) -> Result<Vec<PartitionCheck>> {
        self.finish_repairs(journal)?;
        let mut checks = self.scan_partitions()?;
        for check in checks.iter_mut().filter(|c| !c.lost.is_empty()) {
            let name = check.keyspace.clone();
            let leveled = name.starts_with("lv");
            let journal = leveled.then_some(journal);
            let copy_name = format!("repair-{name}");
            self.drop_keyspace(&copy_name)?;
            let copy = self.keyspace(&copy_name, journal)?;
            let ks = self.keyspace(&name, journal)?;
            let mut batch = Copier::new(self.db(), self.budget(), self.gate(), &copy);
            let (entries, lost) = scan(&ks, &mut |k, v| batch.insert(k, v))?;
            batch.finish()?;
            check.entries = entries;
            check.lost = lost;
            check.unmatched = drop_unmatched(&copy, leveled)?;
            copy.insert(COMPLETE, b"").map_err(engine)?;
            self.db().persist(PersistMode::SyncAll).map_err(engine)?;
            self.record_lost(&name, &check.lost)?;
            drop(ks);
            self.put_copy_in_place(&name, journal)?;
        }
        Ok(checks)
    }

    /// Finishes a repair of keyspace `name` that a crash interrupted: a
    /// complete copy is put in place, an incomplete one dropped.
    pub(crate) fn finish_repair(&self, name: &str, journal: Option<&JournalOptions>) -> Result<()> {
        let copy_name = format!("repair-{name}");
        if !self.keyspace_exists(&copy_name) {
            return Ok(());
        }
        let complete = self
            .keyspace(&copy_name, journal)?
            .contains_key(COMPLETE)
            .map_err(engine)?;
        if complete {
            tracing::warn!(keyspace = name, "finishing an interrupted leveldb repair");
            self.put_copy_in_place(name, journal)
        } else {
            self.drop_keyspace(&copy_name)
        }
    }

    /// Drops keyspace `name`, makes it again, fills it from its complete
    /// copy, makes that durable and drops the copy.
    fn put_copy_in_place(&self, name: &str, journal: Option<&JournalOptions>) -> Result<()> {
        let copy = self.keyspace(&format!("repair-{name}"), journal)?;
        self.drop_keyspace(name)?;
        let ks = self.keyspace(name, journal)?;
        let mut batch = Copier::new(self.db(), self.budget(), self.gate(), &ks);
        for item in copy.iter() {
            let (k, v) = item.into_inner().map_err(engine)?;
            if &*k != COMPLETE {
                batch.insert(&k, &v)?;
            }
        }
        batch.finish()?;
        self.db().persist(PersistMode::SyncAll).map_err(engine)?;
        drop(copy);
        self.drop_keyspace(&format!("repair-{name}"))
    }

    /// Appends `lost` to `lost/damaged-ranges` (one JSON object a line).
    fn record_lost(&self, name: &str, lost: &[LostRange]) -> Result<()> {
        use std::io::Write;
        let dir = self.dir().join("lost");
        let io = |e: std::io::Error| Error::Engine(format!("recording lost ranges: {e}"));
        std::fs::create_dir_all(&dir).map_err(io)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("damaged-ranges"))
            .map_err(io)?;
        let bound = |b: &Option<Vec<u8>>| {
            b.as_deref()
                .map_or("null".into(), |k| format!("\"{}\"", hex(k)))
        };
        for r in lost {
            writeln!(
                f,
                "{{\"time\":{stamp},\"keyspace\":\"{name}\",\"after\":{},\"before\":{}}}",
                bound(&r.after),
                bound(&r.before)
            )
            .map_err(io)?;
        }
        f.sync_all().map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::{midpoint, COMPLETE};
    use crate::{LeveldbOptions, LeveldbStore};

    fn keys(store: &LeveldbStore, name: &str) -> Vec<Vec<u8>> {
        store
            .keyspace(name, None)
            .unwrap()
            .iter()
            .map(|i| i.key().unwrap().to_vec())
            .collect()
    }

    /// A crash during a repair leaves a copy beside the partition: a
    /// complete one (marked) is put in place when the partition opens, an
    /// incomplete one dropped; either way once.
    #[test]
    fn an_interrupted_repair_is_finished_or_undone_when_the_partition_opens() {
        let dir = tempfile::tempdir().unwrap();
        let opts = LeveldbOptions::default();
        {
            let store = LeveldbStore::open(dir.path(), opts.clone(), 2).unwrap();
            for (p, complete) in [("p0", true), ("p1", false)] {
                let ks = store.keyspace(p, None).unwrap();
                ks.insert("old", "x").unwrap();
                let copy = store.keyspace(&format!("repair-{p}"), None).unwrap();
                copy.insert("new", "y").unwrap();
                if complete {
                    copy.insert(COMPLETE, "").unwrap();
                }
            }
            store.sync().unwrap();
        }
        for _ in 0..2 {
            let store = LeveldbStore::open(dir.path(), opts.clone(), 2).unwrap();
            store.partition("0").unwrap();
            store.partition("1").unwrap();
            assert_eq!(keys(&store, "p0"), vec![b"new".to_vec()]);
            assert_eq!(keys(&store, "p1"), vec![b"old".to_vec()]);
            assert!(!store.keyspace_exists("repair-p0"));
            assert!(!store.keyspace_exists("repair-p1"));
        }
    }

    /// A crash after the partition was dropped leaves only the complete
    /// copy: verify (and repair) put it back before reading.
    #[test]
    fn verify_finishes_a_repair_whose_partition_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let opts = LeveldbOptions::default();
        {
            let store = LeveldbStore::open(dir.path(), opts.clone(), 1).unwrap();
            let copy = store.keyspace("repair-p7", None).unwrap();
            copy.insert("new", "y").unwrap();
            copy.insert(COMPLETE, "").unwrap();
            store.sync().unwrap();
        }
        let store = LeveldbStore::open(dir.path(), opts, 1).unwrap();
        let checks = store.verify().unwrap();
        assert_eq!(checks.len(), 1);
        assert_eq!((checks[0].keyspace.as_str(), checks[0].entries), ("p7", 1));
        assert_eq!(keys(&store, "p7"), vec![b"new".to_vec()]);
        assert!(!store.keyspace_exists("repair-p7"));
    }

    #[test]
    fn midpoints_lie_between() {
        assert_eq!(midpoint(&[0, 0], &[0, 2]), vec![0, 1]);
        assert_eq!(midpoint(&[0, 0xFF], &[1, 0]), vec![0, 0xFF]);
        assert_eq!(midpoint(&[0xFF, 0xFF], &[0xFF, 0xFF]), vec![0xFF, 0xFF]);
        assert_eq!(midpoint(&[0x00, 0x00], &[0xFF, 0xFF]), vec![0x7F, 0xFF]);
        assert_eq!(midpoint(&[0x10, 0x80], &[0x20, 0x80]), vec![0x18, 0x80]);
    }
}
