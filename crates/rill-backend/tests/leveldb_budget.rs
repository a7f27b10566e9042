//! The leveldb write buffers stay within the node's budget: many vnodes
//! written at once hold no more memtable bytes than the write-buffer
//! share of `leveldb.maximum_memory` (and a batch per writer), and every
//! write is kept.

use rill_backend::{BKey, Backend, LeveldbOptions, LeveldbStore};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const VNODES: usize = 16;
const WRITERS: usize = 4;
const PUTS_PER_WRITER: usize = 6000;
const VALUE_BYTES: usize = 2000;

fn key(w: usize, i: usize) -> BKey {
    BKey::new(b"", b"b", format!("w{w}-k{i:06}").as_bytes())
}

#[test]
fn many_vnodes_written_at_once_keep_the_write_buffers_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LeveldbOptions {
        // A quarter for write buffers: 2 MiB over 16 vnodes, where each
        // memtable alone may grow to 256 KiB (their sum alone passes it).
        max_memory_bytes: 8 << 20,
        ..LeveldbOptions::default()
    };
    let limit = opts.max_memory_bytes / 4;
    let store = Arc::new(LeveldbStore::open(dir.path(), opts, VNODES).unwrap());
    let parts: Arc<Vec<_>> = Arc::new(
        (0..VNODES)
            .map(|p| store.partition(&p.to_string()).unwrap())
            .collect(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (store, done, most) = (store.clone(), done.clone(), most.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(store.write_buffer_bytes(), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let parts = parts.clone();
            std::thread::spawn(move || {
                let value = vec![b'v'; VALUE_BYTES];
                for i in 0..PUTS_PER_WRITER {
                    parts[i % VNODES].put(&key(w, i), &value, &[], &[]).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();

    let most = most.load(Ordering::Relaxed);
    // Each writer may pass the gate just before the count reaches the
    // limit; fjall counts about 80 bytes of its own per entry.
    let slack = (WRITERS * (VALUE_BYTES + 200)) as u64;
    assert!(
        most <= limit + slack,
        "write buffers reached {most} bytes, the budget's share is {limit}"
    );
    assert!(
        store.held_writes() > 0,
        "the writers never had to wait: the test did not reach the budget"
    );
    for w in 0..WRITERS {
        for i in 0..PUTS_PER_WRITER {
            let got = parts[i % VNODES].get(&key(w, i)).unwrap();
            assert_eq!(got.as_deref().map(<[u8]>::len), Some(VALUE_BYTES));
        }
    }
}
