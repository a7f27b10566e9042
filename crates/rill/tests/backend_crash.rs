//! SIGKILL of the real binary under a load of indexed writes, per disk
//! backend: after the restart every acknowledged write is there with its
//! value, and objects and index entries agree (no object without its
//! entries, no entry without its object), as the backend writes them in
//! one batch. Bitcask is also tested against simulated power loss at its
//! `Vfs` boundary (crates/bitcask); the leveldb and leveled backends' I/O
//! is fjall's own, so they are tested here, by crashing the process.

mod common;

use common::Node;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn put(n: &std::net::SocketAddr, bucket: &str, key: &str) -> bool {
    common::http(
        *n,
        "PUT",
        &format!("/buckets/{bucket}/keys/{key}"),
        &[
            ("Content-Type", "text/plain"),
            ("x-riak-index-t_bin", &format!("t-{key}")),
            ("x-riak-index-any_int", "7"),
        ],
        key.as_bytes(),
    )
    .is_some_and(|r| r.status == 204)
}

/// Every key of a 2i query over the whole `any_int` index (term 7).
fn indexed(n: &Node, bucket: &str) -> BTreeSet<String> {
    common::keys_at(n, &format!("/buckets/{bucket}/index/any_int/7"))
}

fn listed(n: &Node, bucket: &str) -> BTreeSet<String> {
    common::keys_at(n, &format!("/buckets/{bucket}/keys?keys=true"))
}

fn crash_under_load(backend: &str) {
    let conf = format!(
        "storage_backend = {backend}\nleveldb.maximum_memory = 64MB\nleveled.maximum_memory = 64MB\n"
    );
    crash_under_load_with(backend, &conf, &["crash"], |_| {});
}

/// Writers spread over `buckets` (after `setup` on the fresh node), two
/// SIGKILLs, every acknowledged write and its index entries back.
fn crash_under_load_with(backend: &str, conf: &str, buckets: &[&str], setup: impl Fn(&Node)) {
    let dir = tempfile::tempdir().unwrap();
    let mut n = Node::start(dir.path(), conf);
    setup(&n);
    let buckets: Vec<String> = buckets.iter().map(|b| b.to_string()).collect();
    let acked = Arc::new(Mutex::new(Vec::new()));
    for round in 0..2 {
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (acked, stop, addr) = (acked.clone(), stop.clone(), n.http);
                let buckets = buckets.clone();
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("r{round}-w{w}-{i}");
                        let bucket = buckets[i % buckets.len()].clone();
                        if put(&addr, &bucket, &key) {
                            acked.lock().unwrap().push((bucket, key));
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let before = acked.lock().unwrap().len();
        common::until("writes flow", Duration::from_secs(60), || {
            acked.lock().unwrap().len() >= before + 400
        });
        // Killed while the writers are in full flow.
        n.kill();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        n = Node::start(dir.path(), conf);
        let acked = acked.lock().unwrap().clone();
        for (bucket, key) in &acked {
            let r = n
                .http("GET", &format!("/buckets/{bucket}/keys/{key}"), &[], b"")
                .unwrap();
            assert_eq!(
                (r.status, String::from_utf8_lossy(&r.body).to_string()),
                (200, key.clone()),
                "{backend}: acknowledged {bucket}/{key} lost after SIGKILL (round {round})"
            );
        }
        // Objects and index entries agree, acknowledged or not.
        for bucket in &buckets {
            let (objects, entries) = (listed(&n, bucket), indexed(&n, bucket));
            assert_eq!(
                objects, entries,
                "{backend}: objects and index entries of {bucket} differ"
            );
            for (_, key) in acked.iter().filter(|(b, _)| b == bucket) {
                assert!(
                    entries.contains(key),
                    "{backend}: {bucket}/{key} lost its index entry"
                );
                let r = n
                    .http(
                        "GET",
                        &format!("/buckets/{bucket}/index/t_bin/t-{key}"),
                        &[],
                        b"",
                    )
                    .unwrap();
                assert!(
                    String::from_utf8_lossy(&r.body).contains(key.as_str()),
                    "{backend}: {bucket}/{key} not found by its _bin term"
                );
            }
        }
    }
}

#[test]
fn leveldb_loses_nothing_acknowledged_when_killed_under_load() {
    crash_under_load("leveldb");
}

#[test]
fn leveled_loses_nothing_acknowledged_when_killed_under_load() {
    crash_under_load("leveled");
}

#[test]
fn bitcask_loses_nothing_acknowledged_when_killed_under_load() {
    crash_under_load("bitcask");
}

/// Multi: one bucket in each of three named backends (Bitcask by the
/// bucket's `backend` property, leveldb likewise, the rest in the
/// default, leveled), all written at once and killed.
#[test]
fn multi_loses_nothing_acknowledged_when_killed_under_load() {
    let conf = "storage_backend = multi\n\
        multi_backend.default = lv\n\
        multi_backend.lv.storage_backend = leveled\n\
        multi_backend.lv.leveled.maximum_memory = 32MB\n\
        multi_backend.bc.storage_backend = bitcask\n\
        multi_backend.lsm.storage_backend = leveldb\n\
        multi_backend.lsm.leveldb.maximum_memory = 32MB\n";
    crash_under_load_with("multi", conf, &["inbc", "inlsm", "inlv"], |n| {
        for (bucket, backend) in [("inbc", "bc"), ("inlsm", "lsm")] {
            let r = n
                .http(
                    "PUT",
                    &format!("/buckets/{bucket}/props"),
                    &[("Content-Type", "application/json")],
                    format!("{{\"props\":{{\"backend\":\"{backend}\"}}}}").as_bytes(),
                )
                .unwrap();
            assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
        }
    });
}
