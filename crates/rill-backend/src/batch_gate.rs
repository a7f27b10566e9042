//! Snapshots that see every batch whole.
//!
//! fjall 3.1 applies a batch to its memtables under the journal lock and
//! then makes it visible by raising the database's visible sequence
//! number past it. But a flush or a compaction that installs a new table
//! version raises the same number past a sequence number it takes for
//! itself, without that lock (lsm-tree 3.1's `upgrade_version`). A
//! snapshot opened at that moment sees the part of a batch in flight that
//! is already in the memtables: a secondary index query saw the removal
//! of a key's old term and not the addition of its new one.
//!
//! So every commit holds this gate shared, and a snapshot is opened with
//! it held alone: no batch is half applied when its sequence number is
//! read. A commit waits for a snapshot's opening only (not for its
//! reads); a snapshot waits for the commits in flight, at most one of
//! which is applying (fjall orders them by its journal lock).

use fjall::{Database, OwnedWriteBatch, Snapshot};
use std::sync::RwLock;

#[derive(Default)]
pub(crate) struct BatchGate(RwLock<()>);

impl BatchGate {
    /// Commits `batch`, with the durability set on it.
    pub(crate) fn commit(&self, batch: OwnedWriteBatch) -> fjall::Result<()> {
        let _shared = self.0.read().unwrap_or_else(|e| e.into_inner());
        batch.commit()
    }

    /// A snapshot of `db` that holds each batch whole or not at all.
    pub(crate) fn snapshot(&self, db: &Database) -> Snapshot {
        let _alone = self.0.write().unwrap_or_else(|e| e.into_inner());
        db.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use crate::{BKey, Backend, IndexQuery, IndexRange, LeveldbOptions, LeveldbStore, Term};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Terms per generation: a write's batch removes as many and adds as
    /// many, which keeps a batch in flight a good share of the time. Odd
    /// generations have one set and even ones the other (the same keys
    /// again, so scans do not step over ever more tombstones).
    const TERMS: usize = 64;

    fn terms(g: u64) -> Vec<(Vec<u8>, Term)> {
        let set = if g % 2 == 1 { 'a' } else { 'b' };
        (0..TERMS)
            .map(|j| {
                (
                    b"g_bin".to_vec(),
                    Term::Bin(format!("{set}{j:03}").into_bytes()),
                )
            })
            .collect()
    }

    fn terms_seen(b: &dyn Backend) -> Vec<Term> {
        let q = IndexQuery {
            bucket_type: Vec::new(),
            bucket: b"b".to_vec(),
            field: b"g_bin".to_vec(),
            range: IndexRange::Range(Term::Bin(b"a".to_vec()), Term::Bin(b"c".to_vec())),
            after: None,
        };
        let mut seen = Vec::new();
        b.query_index(&q, &mut |t, _| {
            seen.push(t.clone());
            true
        })
        .unwrap();
        seen
    }

    /// One key whose every write replaces its index terms, while another
    /// thread seals memtables without pause (each flush installs a table
    /// version): every query sees one generation's terms, whole. Without
    /// the gate three runs in five saw a batch in part within three
    /// seconds.
    #[test]
    fn a_query_never_sees_half_a_batch_while_memtables_are_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let store = LeveldbStore::open(dir.path(), LeveldbOptions::default(), 1).unwrap();
        let b = Arc::new(store.partition("0").unwrap());
        let k = BKey::new(b"", b"b", b"k");
        b.put(&k, b"1", &terms(1), &[]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flushes = Arc::new(AtomicU64::new(0));
        let writer = {
            let (b, stop, k) = (b.clone(), stop.clone(), k.clone());
            std::thread::spawn(move || {
                let mut g = 1;
                while !stop.load(Ordering::Relaxed) {
                    g += 1;
                    b.put(&k, b"v", &terms(g), &terms(g - 1)).unwrap();
                }
            })
        };
        let flusher = {
            let (b, stop, flushes) = (b.clone(), stop.clone(), flushes.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if b.ks.rotate_memtable().unwrap() {
                        flushes.fetch_add(1, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let deadline = Instant::now() + Duration::from_secs(6);
        let mut queries = 0u64;
        let mut torn = None;
        while Instant::now() < deadline && torn.is_none() {
            let seen = terms_seen(b.as_ref());
            queries += 1;
            if seen != terms(1).into_iter().map(|t| t.1).collect::<Vec<_>>()
                && seen != terms(2).into_iter().map(|t| t.1).collect::<Vec<_>>()
            {
                torn = Some(seen);
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        flusher.join().unwrap();
        assert_eq!(
            torn,
            None,
            "query {queries} (after {} flushes) saw a batch in part",
            flushes.load(Ordering::Relaxed)
        );
        assert!(
            flushes.load(Ordering::Relaxed) > 0,
            "no memtable was flushed"
        );
    }
}
