//! An idle store's background thread sleeps: no wake-ups every flush
//! interval (a node runs one store per vnode, 64 and more). Its own test
//! binary, so the one `bitcask-bg` thread found is this store's.

use bitcask::{Options, Store};
use std::time::Duration;

/// Context switches of the one thread named `bitcask-bg` in this process.
fn background_switches() -> u64 {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if comm.trim() != "bitcask-bg" {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let n: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum();
        found.push(n);
    }
    assert_eq!(found.len(), 1, "one background thread expected");
    found[0]
}

#[test]
fn an_idle_store_does_not_wake_every_flush_interval() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(
        dir.path(),
        Options {
            flush_interval_ms: 5,
            ..Options::default()
        },
    )
    .unwrap();
    s.put(b"k", b"buffered, then flushed in the background")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let before = background_switches();
    std::thread::sleep(Duration::from_millis(600));
    let woke = background_switches() - before;
    // Waking every flush interval would be about 120 times.
    assert!(woke <= 3, "the idle background thread woke {woke} times");
    drop(s);
}
