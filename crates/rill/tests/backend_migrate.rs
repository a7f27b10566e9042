//! Live backend migration through the real binary (`rill admin
//! backend-migrate`): a node's data moves to another backend while
//! writers overwrite, re-index and delete; the node is killed (SIGKILL)
//! in the middle, restarts with its config unchanged, and the move
//! resumes by itself. Afterwards every acknowledged write reads back,
//! every acknowledged delete stays deleted, objects and index entries
//! agree, the old backend's files are gone, and a further restart serves
//! the same from the new backend.

mod common;

use common::Node;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const KEYS_PER_WRITER: usize = 150;

/// What the writers were told: key -> the acknowledged value, or `None`
/// for an acknowledged delete. A key whose last request went unanswered
/// is dropped from `known` (either outcome is right).
#[derive(Default)]
struct Acked {
    known: BTreeMap<String, Option<String>>,
}

fn put(addr: SocketAddr, key: &str, value: &str) -> bool {
    common::http(
        addr,
        "PUT",
        &format!("/buckets/m/keys/{key}"),
        &[
            ("Content-Type", "text/plain"),
            ("x-riak-index-v_bin", value),
            ("x-riak-index-all_int", "1"),
        ],
        value.as_bytes(),
    )
    .is_some_and(|r| r.status == 204)
}

fn delete(addr: SocketAddr, key: &str) -> bool {
    common::http(addr, "DELETE", &format!("/buckets/m/keys/{key}"), &[], b"")
        .is_some_and(|r| r.status == 204 || r.status == 404)
}

/// Writers on disjoint keys: each op writes a key never written before
/// (which the copy may have passed, so only the write reaching both
/// backends keeps it), overwrites one of a cycle of keys (a new value and
/// so a new `v_bin` term), or deletes one of them.
fn writers(
    addr: SocketAddr,
    acked: &Arc<Mutex<Acked>>,
    stop: &Arc<AtomicBool>,
    round: u32,
    max_ops: usize,
) -> Vec<JoinHandle<()>> {
    (0..3)
        .map(|w| {
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut op = 0usize;
                while !stop.load(Ordering::Relaxed) && op < max_ops {
                    let (key, state) = match op % 5 {
                        0 | 2 => {
                            let key = format!("r{round}-w{w}-new{op}");
                            (key.clone(), Some(key))
                        }
                        4 => (format!("w{w}-{}", op % KEYS_PER_WRITER), None),
                        _ => {
                            let key = format!("w{w}-{}", op % KEYS_PER_WRITER);
                            let value = format!("r{round}-{key}-{op}");
                            (key, Some(value))
                        }
                    };
                    let ok = match &state {
                        Some(v) => put(addr, &key, v),
                        None => delete(addr, &key),
                    };
                    let mut a = acked.lock().unwrap();
                    if ok {
                        a.known.insert(key, state);
                    } else {
                        a.known.remove(&key);
                    }
                    op += 1;
                }
            })
        })
        .collect()
}

fn status(n: &Node) -> serde_json::Value {
    let r = n.http("GET", "/rill/backend-migration", &[], b"").unwrap();
    assert_eq!(r.status, 200);
    serde_json::from_slice(&r.body).unwrap()
}

/// Waits (bounded) until the migration's status meets `cond`; a failed
/// migration fails the test.
fn until_status(n: &Node, what: &str, cond: impl Fn(&serde_json::Value) -> bool) {
    common::until(what, Duration::from_secs(300), || {
        let s = status(n);
        assert_ne!(s["state"], "failed", "{s}");
        cond(&s)
    });
}

fn start_migration(n: &Node, to: &str, keys_per_second: u64) -> common::HttpReply {
    let body = serde_json::json!({"to": to, "keys_per_second": keys_per_second}).to_string();
    n.http("POST", "/rill/backend-migration", &[], body.as_bytes())
        .unwrap()
}

/// Every acknowledged write and delete holds; objects and index entries
/// agree.
fn check(n: &Node, acked: &Acked, what: &str) {
    for (key, state) in &acked.known {
        let r = n
            .http("GET", &format!("/buckets/m/keys/{key}"), &[], b"")
            .unwrap();
        match state {
            Some(v) => {
                assert_eq!(
                    (r.status, String::from_utf8_lossy(&r.body).to_string()),
                    (200, v.clone()),
                    "{what}: acknowledged write of {key} lost"
                );
                assert!(
                    common::keys_at(n, &format!("/buckets/m/index/v_bin/{v}")).contains(key),
                    "{what}: {key} not found by its term {v}"
                );
            }
            None => assert_eq!(r.status, 404, "{what}: deleted {key} came back"),
        }
    }
    let objects = common::keys_at(n, "/buckets/m/keys?keys=true");
    let entries = common::keys_at(n, "/buckets/m/index/all_int/1");
    // A listing may show a deleted key (its tombstone) until reaped:
    // such a key reads as not found; every other listed key is indexed.
    let only_objects: Vec<_> = objects
        .difference(&entries)
        .filter(|k| {
            n.http("GET", &format!("/buckets/m/keys/{k}"), &[], b"")
                .unwrap()
                .status
                != 404
        })
        .collect();
    let only_entries: Vec<_> = entries.difference(&objects).collect();
    assert!(
        only_objects.is_empty() && only_entries.is_empty(),
        "{what}: objects without index entries {only_objects:?}, entries without objects {only_entries:?}"
    );
}

/// One replica per key, so a write a vnode loses is seen (with three,
/// the other replicas would answer for it and read repair restore it).
fn one_replica(n: &Node) {
    let r = n
        .http(
            "PUT",
            "/buckets/m/props",
            &[("Content-Type", "application/json")],
            br#"{"props":{"n_val":1}}"#,
        )
        .unwrap();
    assert_eq!(r.status, 204);
}

fn bitcask_partitions(data: &std::path::Path) -> usize {
    std::fs::read_dir(data.join("bitcask"))
        .map(|d| d.filter(|e| e.as_ref().unwrap().path().is_dir()).count())
        .unwrap_or(0)
}

#[test]
fn bitcask_moves_to_leveled_while_serving_and_through_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let conf = "storage_backend = bitcask\nleveled.maximum_memory = 64MB\n";
    let n = Node::start(dir.path(), conf);
    let data = dir.path().join("data");
    one_replica(&n);
    let acked = Arc::new(Mutex::new(Acked::default()));
    // Some data first, then writers throughout.
    for i in 0..600 {
        assert!(put(n.http, &format!("pre-{i}"), &format!("pre-{i}")));
        acked
            .lock()
            .unwrap()
            .known
            .insert(format!("pre-{i}"), Some(format!("pre-{i}")));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let w = writers(n.http, &acked, &stop, 0, usize::MAX);

    // Refusals a client can act on.
    for (to, why) in [
        ("bitcask", "already on bitcask"),
        ("memory", "keeps nothing"),
        ("rocks", "no backend"),
    ] {
        let r = start_migration(&n, to, 0);
        assert_eq!(r.status, 400, "{to}");
        let body = String::from_utf8_lossy(&r.body);
        assert!(body.contains(why), "{to}: {body}");
    }
    assert_eq!(status(&n)["state"], "none");

    // Paced so that the kill lands in the middle.
    let r = start_migration(&n, "leveled", 200);
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    let again = start_migration(&n, "leveled", 200);
    assert_eq!(again.status, 400, "a second start while one runs");
    common::until("some partitions move", Duration::from_secs(120), || {
        status(&n)["partitions_moved"].as_u64().unwrap() >= 3
    });
    let s = status(&n);
    eprintln!(
        "before the kill: {s}, {} keys known",
        acked.lock().unwrap().known.len()
    );
    assert_eq!(s["state"], "running", "{s}");
    assert!(s["partitions_moved"].as_u64().unwrap() < 16, "{s}");
    n.kill();
    stop.store(true, Ordering::Relaxed);
    for t in w {
        t.join().unwrap();
    }

    // The config still says bitcask: moved partitions open on leveled,
    // the rest on Bitcask, and the move resumes by itself.
    let mut n = Node::start(dir.path(), conf);
    check(&n, &acked.lock().unwrap(), "after the kill");
    let stop = Arc::new(AtomicBool::new(false));
    let w = writers(n.http, &acked, &stop, 1, 800);
    // Writers while the rest moves (a bounded number of writes: they add
    // keys about as fast as the paced copy takes them).
    until_status(&n, "the move resumes", |s| {
        s["state"] == "done" || s["partitions_moved"].as_u64().unwrap() >= 10
    });
    eprintln!("writers stop at {}", status(&n));
    stop.store(true, Ordering::Relaxed);
    for t in w {
        t.join().unwrap();
    }
    until_status(&n, "the move ends", |s| s["state"] == "done");
    eprintln!(
        "after the move: {}, {} keys known",
        status(&n),
        acked.lock().unwrap().known.len()
    );
    check(&n, &acked.lock().unwrap(), "after the move");
    assert_eq!(bitcask_partitions(&data), 0, "Bitcask partitions left");
    assert!(data.join("leveled").is_dir());

    // The admin tool says where it stands.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rill"))
        .args(["-c", dir.path().join("rill.conf").to_str().unwrap()])
        .args(["admin", "backend-migrate", "status"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("done: bitcask -> leveled, 16 of 16 partitions moved"),
        "{said}"
    );

    // Stopped cleanly and started with the config unchanged: served from
    // leveled, with a warning to change the config.
    n.stop();
    n = Node::start(dir.path(), conf);
    check(&n, &acked.lock().unwrap(), "after a restart");
    assert!(
        n.log().contains("set storage_backend = leveled"),
        "no warning about the config"
    );
    assert_eq!(bitcask_partitions(&data), 0);
    let r = start_migration(&n, "leveled", 0);
    assert_eq!(r.status, 400, "already on leveled");
}

#[test]
fn leveldb_moves_to_bitcask() {
    let dir = tempfile::tempdir().unwrap();
    let conf = "storage_backend = leveldb\nleveldb.maximum_memory = 64MB\n";
    let n = Node::start(dir.path(), conf);
    one_replica(&n);
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let w = writers(n.http, &acked, &stop, 0, 1000);
    common::until("writes flow", Duration::from_secs(60), || {
        acked.lock().unwrap().known.len() >= 200
    });
    let r = start_migration(&n, "bitcask", 200);
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    until_status(&n, "the move passes half", |s| {
        s["state"] == "done" || s["partitions_moved"].as_u64().unwrap() >= 8
    });
    stop.store(true, Ordering::Relaxed);
    for t in w {
        t.join().unwrap();
    }
    until_status(&n, "the move ends", |s| s["state"] == "done");
    check(&n, &acked.lock().unwrap(), "leveldb to bitcask");
    assert_eq!(bitcask_partitions(&dir.path().join("data")), 16);
    let s = status(&n);
    assert!(s["keys_copied"].as_u64().unwrap() > 0, "{s}");
}

/// A target whose files would lie where the node's backends keep theirs
/// is refused (here Bitcask's, under multi): the move would drop them.
#[test]
fn a_target_sharing_the_sources_directories_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let conf = "storage_backend = multi\nmulti_backend.default = bc\n\
                multi_backend.bc.storage_backend = bitcask\n\
                multi_backend.mem.storage_backend = memory\n";
    let n = Node::start(dir.path(), conf);
    let r = start_migration(&n, "bitcask", 0);
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status, 400, "{body}");
    assert!(body.contains("would keep its data where"), "{body}");
    assert!(!body.contains(&dir.path().display().to_string()), "{body}");
    assert_eq!(status(&n)["state"], "none");
    // Elsewhere is fine.
    let r = start_migration(&n, "leveldb", 0);
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    until_status(&n, "the move ends", |s| s["state"] == "done");
}
