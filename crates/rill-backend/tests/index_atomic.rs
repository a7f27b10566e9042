//! Secondary indexes change with their objects, at once and durably
//! together: under concurrent writers no query returns a term its object
//! had already replaced (or a key twice), and after a power cut at any
//! point the index rebuilt from disk matches the objects exactly.

mod common;

use bitcask::vfs::SimVfs;
use bitcask::{Options, Store, SyncStrategy};
use rill_backend::{BKey, Backend, BitcaskBackend, IndexQuery, IndexRange, Term};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FIELD: &[u8] = b"gen_bin";

/// The terms of generation `g` of a key: one that moves with every write
/// and one that stays for a while, so puts add and remove terms.
fn terms(g: u64) -> Vec<(Vec<u8>, Term)> {
    vec![
        (FIELD.to_vec(), Term::Bin(format!("g{g:08}").into_bytes())),
        (
            FIELD.to_vec(),
            Term::Bin(format!("s{:08}", g / 4).into_bytes()),
        ),
    ]
}

fn bkey(i: usize) -> BKey {
    BKey::new(b"", b"b", format!("k{i:03}").as_bytes())
}

/// Writes generation `g` of key `i`: the value names the generation, and
/// the index changes from `g - 1`'s terms to `g`'s.
fn write(b: &dyn Backend, i: usize, g: u64) -> Result<(), rill_backend::Error> {
    let new = terms(g);
    let old = if g > 1 { terms(g - 1) } else { Vec::new() };
    let add: Vec<_> = new.iter().filter(|t| !old.contains(t)).cloned().collect();
    let remove: Vec<_> = old.iter().filter(|t| !new.contains(t)).cloned().collect();
    b.put(&bkey(i), format!("{g}").as_bytes(), &add, &remove)
}

fn query_all(b: &dyn Backend) -> Vec<(Term, Vec<u8>)> {
    let range = IndexRange::Range(Term::Bin(b"g".to_vec()), Term::Bin(b"g99999999".to_vec()));
    common::query(b, "b", std::str::from_utf8(FIELD).unwrap(), range)
}

fn gen_of(t: &Term) -> u64 {
    match t {
        Term::Bin(b) => std::str::from_utf8(&b[1..]).unwrap().parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_query_sees_a_replaced_term_under_concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    concurrent_writers_and_queries(
        Arc::new(BitcaskBackend::open(Arc::new(store)).unwrap()),
        200,
    );
    // The LSM backends: an object and its entries are one engine batch.
    let dir = tempfile::tempdir().unwrap();
    // Small write buffers: every write here replaces index entries, whose
    // tombstones a range scan steps over until a flush and compaction
    // drop them.
    let opts = rill_backend::LeveldbOptions {
        max_memory_bytes: 16 << 20,
        ..Default::default()
    };
    let lsm = rill_backend::LeveldbStore::open(dir.path(), opts, 2).unwrap();
    concurrent_writers_and_queries(Arc::new(lsm.partition("0").unwrap()), 20);
    let journal = rill_backend::JournalOptions::default();
    concurrent_writers_and_queries(Arc::new(lsm.leveled_partition("1", &journal).unwrap()), 20);
}

/// Writers replace each key's terms while queries check that none sees
/// two generations of a key; for 3 s and at least `min_queries`.
fn concurrent_writers_and_queries(b: Arc<dyn Backend>, min_queries: u32) {
    const KEYS: usize = 24;
    const WRITERS: usize = 3;
    let done: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (b, done, stop) = (b.clone(), done.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut g = 0;
                while !stop.load(Ordering::Relaxed) {
                    g += 1;
                    for i in (w..KEYS).step_by(WRITERS) {
                        write(b.as_ref(), i, g).unwrap();
                        done[i].store(g, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut queries = 0;
    while Instant::now() < deadline || queries < min_queries {
        let before: Vec<u64> = done.iter().map(|d| d.load(Ordering::SeqCst)).collect();
        let hits = query_all(b.as_ref());
        let mut per_key: BTreeMap<Vec<u8>, Vec<u64>> = BTreeMap::new();
        for (t, k) in &hits {
            per_key.entry(k.clone()).or_default().push(gen_of(t));
        }
        for (i, &low) in before.iter().enumerate() {
            let k = bkey(i).key;
            let gens = per_key.get(&k).cloned().unwrap_or_default();
            if low == 0 {
                assert!(gens.len() <= 1, "k{i}: {gens:?}");
                continue;
            }
            assert_eq!(
                gens.len(),
                1,
                "k{i} must show exactly one generation: {gens:?}"
            );
            assert!(
                gens[0] >= low,
                "k{i}: a query returned generation {} after {low} had replaced it",
                gens[0]
            );
        }
        queries += 1;
        assert!(queries < 1_000_000);
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(
        done.iter().all(|d| d.load(Ordering::SeqCst) > 1),
        "{}: every writer made progress",
        b.name()
    );
}

fn sim_backend(vfs: &SimVfs, sync: SyncStrategy) -> BitcaskBackend {
    let store = Store::open(
        "/disk/vnode",
        Options {
            max_file_size_bytes: 8 << 10,
            write_buffer_bytes: 0,
            sync,
            vfs: Arc::new(vfs.clone()),
            flush_interval_ms: 3_600_000,
            seal_delay_ms: 3_600_000,
            ..Options::default()
        },
    )
    .unwrap();
    BitcaskBackend::open(Arc::new(store)).unwrap()
}

/// Every key's index entries are exactly the terms of the generation its
/// object holds.
fn check_agree(b: &BitcaskBackend, keys: usize, ctx: &str) {
    let q = IndexQuery {
        bucket_type: Vec::new(),
        bucket: b"b".to_vec(),
        field: FIELD.to_vec(),
        range: IndexRange::Range(Term::Bin(Vec::new()), Term::Bin(vec![0xff; 16])),
        after: None,
    };
    let mut index: BTreeMap<Vec<u8>, BTreeSet<Term>> = BTreeMap::new();
    b.query_index(&q, &mut |t, k| {
        index.entry(k.to_vec()).or_default().insert(t.clone());
        true
    })
    .unwrap();
    for i in 0..keys {
        let k = bkey(i);
        let want: BTreeSet<Term> = match b.get(&k).unwrap() {
            Some(v) => {
                let g: u64 = std::str::from_utf8(&v).unwrap().parse().unwrap();
                terms(g).into_iter().map(|(_, t)| t).collect()
            }
            None => BTreeSet::new(),
        };
        let got = index.remove(&k.key).unwrap_or_default();
        assert_eq!(
            got, want,
            "{ctx}: k{i}'s index entries and its object disagree"
        );
    }
    assert!(
        index.is_empty(),
        "{ctx}: entries of keys never written: {index:?}"
    );
}

#[test]
fn after_a_power_cut_the_index_matches_the_objects() {
    const KEYS: usize = 6;
    for seed in 0..48u64 {
        let sync = if seed % 2 == 0 {
            SyncStrategy::None
        } else {
            SyncStrategy::OSync
        };
        let mut vfs = SimVfs::new();
        let mut gens = [0u64; KEYS];
        for round in 0..6u64 {
            let b = sim_backend(&vfs, sync);
            check_agree(&b, KEYS, &format!("seed {seed} round {round}"));
            // Continue each key from what survived.
            for (i, g) in gens.iter_mut().enumerate() {
                *g = b
                    .get(&bkey(i))
                    .unwrap()
                    .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap());
            }
            // The power goes somewhere in the middle of the next writes.
            vfs.arm_crash(seed * 7 % 40 + round * 3, seed * 1000 + round);
            'writes: for n in 0..40u64 {
                let i = ((seed + n * 5) % KEYS as u64) as usize;
                if write(&b, i, gens[i] + 1).is_err() || vfs.crashed() {
                    break 'writes;
                }
                gens[i] += 1;
                if n % 9 == 8 && b.sync().is_err() {
                    break 'writes;
                }
            }
            vfs.disarm();
            drop(b);
            vfs = if vfs.crashed() {
                vfs.next_boot()
            } else {
                vfs.crash(seed * 31 + round)
            };
        }
    }
}
