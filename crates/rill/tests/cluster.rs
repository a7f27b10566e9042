//! The cluster through the real binary, several `rill` processes on
//! loopback: join, plan, commit and transfers; `kill -9` of a node under
//! load with N = 3, W = 2, then hinted handoff after its restart; a leave;
//! the receiver of a transfer killed mid-way and restarted, resuming.
//! Every wait is bounded; every acknowledged write is read back.

mod common;

use common::cluster::{form, get, join_and_commit, put, read_back, settle, Member};
use common::until;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn three_nodes_join_transfer_and_serve_every_key_from_every_node() {
    let a = Member::start(1, "");
    let b = Member::start(2, "");
    let c = Member::start(3, "");
    for k in 0..200 {
        assert!(put(a.node(), &format!("k{k}"), &format!("v{k}"), ""));
    }
    form(&a, &[&b, &c]);
    let (_, status) = c.admin(&["member-status"]);
    assert_eq!(status.matches("valid").count(), 3, "{status}");
    // The last switch of owners is seen by every member a gossip round
    // after the transfers end: the ring is ready then.
    until("the ring is ready", Duration::from_secs(30), || {
        let ring = b.admin(&["ring-status"]).1;
        ring.contains("Ring Ready: true") && ring.contains("All nodes are up")
    });
    let (_, transfers) = a.admin(&["transfers"]);
    assert!(transfers.contains("No transfers active"), "{transfers}");
    // The ring is shared: each node owns about a third, and data moved.
    assert!(b.stat("handoff_items_received_total") > 0);
    assert!(c.stat("handoff_items_received_total") > 0);
    for m in [&a, &b, &c] {
        for k in 0..200 {
            assert_eq!(
                get(m.node(), &format!("k{k}"), "?r=3"),
                Some(format!("v{k}").into_bytes()),
                "k{k} through {}",
                m.name
            );
        }
    }
    // Writes through one node, reads through another.
    for k in 0..50 {
        assert!(put(b.node(), &format!("late{k}"), "x", "?w=3"));
        assert_eq!(get(c.node(), &format!("late{k}"), ""), Some(b"x".to_vec()));
    }
    // A commit with nothing staged is refused with riak-admin's words.
    let (ok, out) = a.admin(&["cluster", "plan"]);
    assert!(!ok && out.contains("There are no staged changes"), "{out}");
}

#[test]
fn a_node_killed_under_load_loses_nothing_and_hinted_handoff_drains_after_restart() {
    let extra = "handoff.timeout = 3s\n";
    let a = Member::start(1, extra);
    let b = Member::start(2, extra);
    let mut c = Member::start(3, extra);
    form(&a, &[&b, &c]);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = [a.node().http, b.node().http]
        .into_iter()
        .enumerate()
        .map(|(w, addr)| {
            let (acked, stop) = (acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("w{w}-{i}");
                    let ok = common::http(
                        addr,
                        "PUT",
                        &format!("/buckets/b/keys/{key}?w=2"),
                        &[("Content-Type", "text/plain")],
                        key.as_bytes(),
                    )
                    .is_some_and(|r| r.status == 204);
                    if ok {
                        acked.lock().unwrap().push(key);
                    }
                    i += 1;
                }
                i
            })
        })
        .collect();
    let count = || acked.lock().unwrap().len();
    until("writes flow", Duration::from_secs(30), || count() >= 200);
    c.node.take().unwrap().kill();
    until(
        "the others see c unreachable",
        Duration::from_secs(30),
        || a.stat("cluster_unreachable_members") == 1 && b.stat("cluster_unreachable_members") == 1,
    );
    // With c gone, writes go on (fallbacks stand in for its partitions).
    let before = count();
    until("writes go on without c", Duration::from_secs(30), || {
        count() >= before + 300
    });
    until(
        "fallbacks hold c's partitions' writes",
        Duration::from_secs(30),
        || a.stat("partitions_held_not_owned") + b.stat("partitions_held_not_owned") > 0,
    );
    c.restart();
    until("c is back", Duration::from_secs(30), || {
        a.stat("cluster_unreachable_members") == 0 && b.stat("cluster_unreachable_members") == 0
    });
    let more = count();
    until("writes with c back", Duration::from_secs(30), || {
        count() >= more + 100
    });
    stop.store(true, Ordering::Relaxed);
    let attempts: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    until("hinted handoff drains", Duration::from_secs(120), || {
        a.stat("partitions_held_not_owned") == 0
            && b.stat("partitions_held_not_owned") == 0
            && c.stat("partitions_held_not_owned") == 0
    });
    assert!(c.stat("handoff_items_received_total") > 0);
    let acked = acked.lock().unwrap().clone();
    eprintln!("{} of {attempts} writes acknowledged", acked.len());
    for m in [&a, &b, &c] {
        for key in acked.iter().step_by(3) {
            read_back(m, key);
        }
    }
}

#[test]
fn a_leave_hands_everything_off_and_loses_nothing() {
    let a = Member::start(1, "");
    let b = Member::start(2, "");
    let c = Member::start(3, "");
    form(&a, &[&b, &c]);
    for k in 0..300 {
        assert!(put(a.node(), &format!("k{k}"), &format!("v{k}"), "?w=3"));
    }
    let (ok, out) = c.admin(&["cluster", "leave"]);
    assert!(
        ok && out.contains("Success: staged leave request for 'dev3@127.0.0.1'"),
        "{out}"
    );
    // A plan waits for the cluster to converge on the staged change.
    until("the leave is planned", Duration::from_secs(30), || {
        let (ok, plan) = a.admin(&["cluster", "plan"]);
        ok && plan.contains("leave")
    });
    let (ok, out) = b.admin(&["cluster", "commit"]);
    assert!(ok, "{out}");
    until("c has left", Duration::from_secs(120), || {
        let s = a.stats();
        s["cluster_members"] == 2
            && s["ring_pending_transfers"] == 0
            && b.stat("cluster_members") == 2
    });
    let (_, status) = a.admin(&["member-status"]);
    assert!(!status.contains("dev3"), "{status}");
    for m in [&a, &b] {
        for k in 0..300 {
            assert_eq!(
                get(m.node(), &format!("k{k}"), "?r=3"),
                Some(format!("v{k}").into_bytes()),
                "k{k} through {}",
                m.name
            );
        }
    }
}

#[test]
fn a_receiver_killed_mid_transfer_resumes_after_its_restart() {
    // Small batches and a short timeout make the transfer long enough to
    // interrupt, and its resumption quick.
    let extra = "handoff.batch_items = 5\nhandoff.timeout = 2s\ntransfer_limit = 1\n";
    let a = Member::start(1, extra);
    let mut b = Member::start(2, extra);
    let value = "x".repeat(2000);
    for k in 0..3000 {
        assert!(put(a.node(), &format!("k{k}"), &value, ""));
    }
    join_and_commit(&a, &[&b]);
    // Kill b while it holds a transfer's cursor (between batches of a
    // partition), restart it, and see the sender resume after the
    // cursor; a kill that raced the transfer's last batch is tried again
    // on the next partition.
    let cursors = b.home.path().join("data").join("meta").join("handoff");
    let mut resumed = false;
    for _ in 0..5 {
        // Watch for a cursor file every 10 ms (a transfer's batches come
        // and go quickly); stop when no transfer is left.
        let mut mid_transfer = false;
        let deadline = Instant::now() + Duration::from_secs(60);
        for i in 0u64.. {
            mid_transfer = std::fs::read_dir(&cursors)
                .map(|d| {
                    d.flatten()
                        .any(|e| !e.file_name().to_string_lossy().ends_with(".tmp"))
                })
                .unwrap_or(false);
            if mid_transfer
                || (i % 50 == 49 && a.stat("ring_pending_transfers") == 0)
                || Instant::now() > deadline
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !mid_transfer {
            break;
        }
        b.node.take().unwrap().kill();
        b.restart();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline && !resumed {
            resumed = b.stat("handoffs_resumed_total") >= 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        if resumed {
            break;
        }
    }
    assert!(resumed, "no transfer resumed after the receiver's restart");
    settle(&[&a, &b], 2);
    for m in [&a, &b] {
        for k in (0..3000).step_by(7) {
            assert_eq!(
                get(m.node(), &format!("k{k}"), "?r=2").map(|v| v.len()),
                Some(2000),
                "k{k} through {}",
                m.name
            );
        }
    }
}
