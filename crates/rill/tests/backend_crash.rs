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

fn put(n: &std::net::SocketAddr, key: &str) -> bool {
    common::http(
        *n,
        "PUT",
        &format!("/buckets/crash/keys/{key}"),
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
fn indexed(n: &Node) -> BTreeSet<String> {
    common::keys_at(n, "/buckets/crash/index/any_int/7")
}

fn listed(n: &Node) -> BTreeSet<String> {
    common::keys_at(n, "/buckets/crash/keys?keys=true")
}

fn crash_under_load(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let conf = format!(
        "storage_backend = {backend}\nleveldb.maximum_memory = 64MB\nleveled.maximum_memory = 64MB\n"
    );
    let mut n = Node::start(dir.path(), &conf);
    let acked = Arc::new(Mutex::new(Vec::new()));
    for round in 0..2 {
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (acked, stop, addr) = (acked.clone(), stop.clone(), n.http);
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("r{round}-w{w}-{i}");
                        if put(&addr, &key) {
                            acked.lock().unwrap().push(key);
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
        n = Node::start(dir.path(), &conf);
        let acked = acked.lock().unwrap().clone();
        for key in &acked {
            let r = n
                .http("GET", &format!("/buckets/crash/keys/{key}"), &[], b"")
                .unwrap();
            assert_eq!(
                (r.status, String::from_utf8_lossy(&r.body).to_string()),
                (200, key.clone()),
                "{backend}: acknowledged {key} lost after SIGKILL (round {round})"
            );
        }
        // Objects and index entries agree, acknowledged or not.
        let (objects, entries) = (listed(&n), indexed(&n));
        assert_eq!(
            objects, entries,
            "{backend}: objects and index entries differ"
        );
        for key in &acked {
            assert!(
                entries.contains(key),
                "{backend}: {key} lost its index entry"
            );
            let r = n
                .http(
                    "GET",
                    &format!("/buckets/crash/index/t_bin/t-{key}"),
                    &[],
                    b"",
                )
                .unwrap();
            assert!(
                String::from_utf8_lossy(&r.body).contains(key.as_str()),
                "{backend}: {key} not found by its _bin term"
            );
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
