//! Regression (found by merge-control's planing test under load): a merge
//! that looked for fully dead files while a put was rotating could take
//! the file about to become active (already in the stats and the file
//! table, with no live record yet) and delete it; every put into it was
//! then lost. Here writers rotate constantly while another thread keeps
//! merging whatever looks fully dead; debug builds check at every file
//! deletion that no key points into the file, and every key must read
//! back at the end.

mod common;

use bitcask::{Options, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn merging_dead_files_never_takes_the_file_being_rotated_in() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        Options {
            // A rotation every few puts.
            max_file_size_bytes: 8 << 10,
            write_buffer_bytes: 0,
            ..Options::default()
        },
    )
    .unwrap();
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(3);
    let keys_per_writer = 50u32;
    std::thread::scope(|s| {
        for w in 0..2u32 {
            let (store, stop) = (&store, &stop);
            s.spawn(move || {
                let mut round = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    for k in 0..keys_per_writer {
                        let value = format!("{w}:{k}:{round}").into_bytes();
                        let mut v = value.clone();
                        v.resize(1000, b'.');
                        store.put(format!("w{w}k{k}").as_bytes(), &v).unwrap();
                    }
                }
            });
        }
        {
            let (store, stop) = (&store, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let dead: Vec<u32> = store
                        .file_stats()
                        .into_iter()
                        .filter(|f| !f.active && f.live_bytes == 0)
                        .map(|f| f.file_id)
                        .collect();
                    if !dead.is_empty() {
                        store.merge(&dead).unwrap();
                    }
                }
            });
        }
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        stop.store(true, Ordering::Relaxed);
    });
    for w in 0..2u32 {
        for k in 0..keys_per_writer {
            let v = store.get(format!("w{w}k{k}").as_bytes()).unwrap();
            assert!(v.is_some(), "w{w}k{k} lost");
        }
    }
}
