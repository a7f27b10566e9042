//! Many threads at once: writers (each owning its keys), readers, folds and
//! merges. Readers only ever see values that were written; folds see each
//! key once, with a value no older than the snapshot; at the end every key
//! holds its writer's last value, also after a reopen.

mod common;

use bitcask::{Store, SyncStrategy};
use common::{closed_files, small_options};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const WRITERS: u64 = 4;
const KEYS: u64 = 300;

fn value(writer: u64, key: u64, version: u64) -> Vec<u8> {
    let mut v = format!("{writer}:{key}:{version}|").into_bytes();
    v.resize(64 + (version % 7) as usize * 100, b'.');
    v
}

fn parse(v: &[u8]) -> (u64, u64, u64) {
    let text = std::str::from_utf8(v).unwrap();
    let head = text.split('|').next().unwrap();
    let mut it = head.split(':').map(|x| x.parse::<u64>().unwrap());
    let parsed = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
    assert_eq!(
        v,
        value(parsed.0, parsed.1, parsed.2).as_slice(),
        "torn value"
    );
    parsed
}

fn key(writer: u64, k: u64) -> Vec<u8> {
    format!("w{writer}-k{k}").into_bytes()
}

fn run(sync: SyncStrategy) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = small_options();
    opts.sync = sync;
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let stop = AtomicBool::new(false);
    let versions: Vec<AtomicU64> = (0..WRITERS).map(|_| AtomicU64::new(0)).collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (store, stop, versions) = (&store, &stop, &versions);
            s.spawn(move || {
                let mut version = 0;
                while !stop.load(Ordering::Relaxed) {
                    version += 1;
                    for k in 0..KEYS {
                        store.put(&key(w, k), &value(w, k, version)).unwrap();
                    }
                    versions[w as usize].store(version, Ordering::SeqCst);
                }
            });
        }
        for r in 0..2 {
            let (store, stop) = (&store, &stop);
            s.spawn(move || {
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    let (w, k) = (i % WRITERS, (i / WRITERS) % KEYS);
                    if let Some(v) = store.get(&key(w, k)).unwrap() {
                        let (pw, pk, _) = parse(&v);
                        assert_eq!((pw, pk), (w, k));
                    }
                    i += 13;
                }
            });
        }
        {
            let (store, stop, versions) = (&store, &stop, &versions);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // Every version completed before the fold started must
                    // be visible (or something newer).
                    let floor: Vec<u64> =
                        versions.iter().map(|v| v.load(Ordering::SeqCst)).collect();
                    let mut seen = std::collections::HashSet::new();
                    store
                        .fold(|k, v| {
                            assert!(seen.insert(k.to_vec()), "a key twice in one fold");
                            let (w, _, version) = parse(v);
                            assert!(version >= floor[w as usize]);
                            true
                        })
                        .unwrap();
                }
            });
        }
        {
            let (store, stop) = (&store, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let files = closed_files(store);
                    store.merge(&files).unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        // Run for at least three seconds and until every writer has
        // finished two passes (under o_sync on a loaded machine a pass of
        // fsynced puts can take seconds); a writer starved for two minutes
        // fails the test below.
        let hard_deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < hard_deadline
            && (Instant::now() < deadline || versions.iter().any(|v| v.load(Ordering::SeqCst) < 2))
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let finals: Vec<u64> = versions.iter().map(|v| v.load(Ordering::SeqCst)).collect();
    store.close().unwrap();
    let store = Store::open(dir.path(), opts).unwrap();
    for w in 0..WRITERS {
        assert!(finals[w as usize] > 1, "writer {w} made no progress");
        for k in 0..KEYS {
            let v = store.get(&key(w, k)).unwrap().unwrap();
            let (_, _, version) = parse(&v);
            // A writer may have been stopped in the middle of a pass.
            assert!(version == finals[w as usize] || version == finals[w as usize] + 1);
        }
    }
}

#[test]
fn writers_readers_folds_and_merges_buffered() {
    run(SyncStrategy::None);
}

#[test]
fn writers_readers_folds_and_merges_o_sync() {
    run(SyncStrategy::OSync);
}
