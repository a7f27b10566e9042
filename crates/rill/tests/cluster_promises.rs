//! The cluster's promises through the real binary, one test each (see
//! docs/cluster.md, "What the cluster promises"): quorums that count
//! machines and primaries are refused, not ignored, when the machines
//! are gone; a delete whose read finds nothing says so instead of
//! answering success and writing nothing; a tombstone is not reaped
//! while a fallback that is away holds the value, and is reaped after a
//! delete with no client read; a node killed under load fails only the
//! requests in flight at the kill; a put whose coordinating node died or
//! froze before it took the request is coordinated elsewhere.

mod common;

use common::cluster::{form, Member};
use common::until;
use serde_json::Value;
use std::time::Duration;

fn http(m: &Member, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let r = m
        .node()
        .http(method, path, &[("Content-Type", "text/plain")], body)
        .expect("an answer");
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

fn set_props(m: &Member, bucket: &str, props: Value) {
    let body = serde_json::json!({ "props": props }).to_string();
    let r = m
        .node()
        .http(
            "PUT",
            &format!("/buckets/{bucket}/props"),
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .expect("an answer");
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
}

/// Waits until `m` counts `n` members unreachable.
fn unreachable(m: &Member, n: u64) {
    until(
        &format!("{} sees {n} members unreachable", m.name),
        Duration::from_secs(30),
        || m.stat("cluster_unreachable_members") == n,
    );
}

/// With two of three nodes dead, every replica is on the one machine
/// left: W and DW are met there (as in Riak), but `node_confirms` (as a
/// request option and as a bucket property) and PW are refused with
/// Riak's words before anything is written, and so are PR and
/// node_confirms on a read.
#[test]
fn node_confirms_and_pw_are_refused_with_one_node_alive() {
    let a = Member::start(1, "");
    let mut b = Member::start(2, "");
    let mut c = Member::start(3, "");
    form(&a, &[&b, &c]);
    set_props(&a, "confirmed", serde_json::json!({ "node_confirms": 2 }));
    until(
        "the property reaches every node",
        Duration::from_secs(30),
        || {
            [&b, &c].iter().all(|m| {
                let (_, props) = http(m, "GET", "/buckets/confirmed/props", b"");
                props.contains("\"node_confirms\":2")
            })
        },
    );
    b.node.take().unwrap().kill();
    c.node.take().unwrap().kill();
    unreachable(&a, 2);

    // One machine holds every replica: W = DW = 2 is met on it.
    let (status, body) = http(&a, "PUT", "/buckets/b/keys/w2?w=2&dw=2", b"v");
    assert_eq!(status, 204, "{body}");

    let refused = [
        (
            "/buckets/b/keys/nc?node_confirms=2",
            "node_confirms-value unsatisfied: 1/2",
        ),
        (
            "/buckets/confirmed/keys/nc",
            "node_confirms-value unsatisfied: 1/2",
        ),
        ("/buckets/b/keys/pw?pw=2", "PW-value unsatisfied: 1/2"),
    ];
    for (path, words) in refused {
        let (status, body) = http(&a, "PUT", path, b"v");
        assert_eq!((status, body.trim()), (503, words), "PUT {path}");
        // Refused before any replica took it.
        let key = path.split('?').next().unwrap();
        let (status, body) = http(&a, "GET", &format!("{key}?r=1&node_confirms=0"), b"");
        assert_eq!(status, 404, "{path} was written: {body}");
    }

    let (status, body) = http(&a, "GET", "/buckets/b/keys/w2?pr=2", b"");
    assert_eq!((status, body.trim()), (503, "PR-value unsatisfied: 1/2"));
    let (status, body) = http(&a, "GET", "/buckets/b/keys/w2?node_confirms=2", b"");
    assert_eq!(
        (status, body.trim()),
        (503, "{insufficient_nodes,1,need,2}")
    );
    let (status, _) = http(&a, "GET", "/buckets/b/keys/w2", b"");
    assert_eq!(status, 200);

    // Back to three machines: the same requests succeed.
    b.restart();
    c.restart();
    unreachable(&a, 0);
    for (path, _) in refused {
        let (status, body) = http(&a, "PUT", path, b"v");
        assert_eq!(status, 204, "PUT {path}: {body}");
    }
    let (status, body) = http(&a, "GET", "/buckets/b/keys/w2?pr=2&node_confirms=2", b"");
    assert_eq!(status, 200, "{body}");
}

/// A key whose primaries missed it while a fallback held it: a delete
/// without a vclock reads the primaries, finds nothing, and answers 404
/// (as Riak's HTTP API does), writing nothing. Once the fallback hands
/// the value home it is there, and a delete then removes it.
#[test]
fn a_delete_whose_read_finds_nothing_answers_404() {
    let a = Member::start(1, "");
    let mut b = Member::start(2, "");
    let mut c = Member::start(3, "");
    form(&a, &[&b, &c]);
    set_props(&a, "two", serde_json::json!({ "n_val": 2 }));
    // Keys whose two primaries are b and c.
    let keys: Vec<String> = (0..200)
        .map(|i| format!("k{i}"))
        .filter(|k| {
            let (_, pl) = http(&a, "GET", &format!("/buckets/two/keys/{k}/preflist"), b"");
            let pl: Value = serde_json::from_str(&pl).unwrap();
            let pl = pl["preflist"].as_array().unwrap().clone();
            pl.len() == 2 && pl.iter().all(|e| e["node"] != a.name.as_str())
        })
        .take(5)
        .collect();
    assert!(!keys.is_empty(), "no key with both primaries off dev1");
    until(
        "n_val 2 reaches every node",
        Duration::from_secs(30),
        || {
            [&b, &c].iter().all(|m| {
                let (_, props) = http(m, "GET", "/buckets/two/props", b"");
                props.contains("\"n_val\":2")
            })
        },
    );
    // a keeps what it holds for others until it is restarted below.
    let mut a = a;
    a.extra = "transfer_limit = 0\n".into();
    a.node.take().unwrap().stop();
    a.restart();
    b.node.take().unwrap().kill();
    c.node.take().unwrap().kill();
    unreachable(&a, 2);
    for k in &keys {
        let (status, body) = http(&a, "PUT", &format!("/buckets/two/keys/{k}"), b"held");
        assert_eq!(status, 204, "{k}: {body}");
    }
    b.restart();
    c.restart();
    unreachable(&a, 0);
    for m in [&b, &c] {
        unreachable(m, 0);
    }
    for k in &keys {
        let path = format!("/buckets/two/keys/{k}");
        let (status, body) = http(&b, "GET", &path, b"");
        assert_eq!(
            status, 404,
            "{k}: the primaries have not got it yet: {body}"
        );
        let (status, body) = http(&b, "DELETE", &path, b"");
        assert_eq!(
            (status, body.as_str()),
            (404, "not found\n"),
            "{k}: a delete that found nothing"
        );
    }
    // Handoff from a brings the values home; they were never deleted.
    a.extra = String::new();
    a.node.take().unwrap().stop();
    a.restart();
    for k in &keys {
        let path = format!("/buckets/two/keys/{k}");
        until(&format!("{k} handed home"), Duration::from_secs(60), || {
            http(&b, "GET", &format!("{path}?r=2"), b"").0 == 200
        });
        let (status, body) = http(&b, "DELETE", &path, b"");
        assert_eq!(status, 204, "{k}: {body}");
        let (status, _) = http(&c, "GET", &path, b"");
        assert_eq!(status, 404, "{k} deleted");
    }
}

/// The keys (of `candidates`) whose preference list, all nodes up,
/// includes `with` and not `without`.
fn keys_on(m: &Member, with: &str, without: &str, candidates: usize) -> Vec<String> {
    (0..candidates)
        .map(|i| format!("k{i}"))
        .filter(|k| {
            let (_, pl) = http(m, "GET", &format!("/buckets/b/keys/{k}/preflist"), b"");
            let pl: Value = serde_json::from_str(&pl).unwrap();
            let nodes: Vec<&str> = pl["preflist"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["node"].as_str().unwrap())
                .collect();
            nodes.contains(&with) && !nodes.contains(&without)
        })
        .collect()
}

/// Reads the value at `path` through `m` and deletes it with its vclock.
fn delete_read_value(m: &Member, path: &str) {
    let r = m.node().http("GET", path, &[], b"").expect("an answer");
    assert_eq!(r.status, 200, "{path}");
    let vclock = r.header("x-riak-vclock").expect("a vclock").to_string();
    let r = m
        .node()
        .http("DELETE", path, &[("X-Riak-Vclock", vclock.as_str())], b"")
        .expect("an answer");
    assert_eq!(r.status, 204, "{path}");
}

/// A fallback takes writes for a dead node, then dies itself before
/// handing them home; the keys are deleted (with their vclocks) while it
/// is away. Its holdings were reported before it died, so the tombstones
/// wait for it instead of being reaped after `delete_mode`; when it
/// returns and hands the old values home, the tombstones cover them and
/// nothing comes back. Then the tombstones go.
#[test]
fn a_tombstone_waits_for_a_fallback_that_holds_the_value() {
    let extra = "delete_mode = 200ms\n";
    let a = Member::start(1, extra);
    let b = Member::start(2, extra);
    let mut c = Member::start(3, extra);
    let mut d = Member::start(4, extra);
    form(&a, &[&b, &c, &d]);
    let keys = keys_on(&a, &c.name, &d.name, 60);
    assert!(keys.len() >= 5, "{keys:?}");
    c.node.take().unwrap().kill();
    unreachable(&a, 1);
    for k in &keys {
        let (status, body) = http(&a, "PUT", &format!("/buckets/b/keys/{k}"), b"old");
        assert_eq!(status, 204, "{k}: {body}");
    }
    // d stood in for c (the one machine outside these preference lists).
    until(
        "d reports what it holds for c",
        Duration::from_secs(30),
        || d.stat("partitions_held_not_owned") > 0,
    );
    d.node.take().unwrap().kill();
    c.restart();
    until("c back, d away", Duration::from_secs(30), || {
        let s = a.stats();
        s["cluster_unreachable_members"] == 1 && b.stat("cluster_unreachable_members") == 1
    });
    let reaped_before = a.stat("tombstones_reaped_total") + b.stat("tombstones_reaped_total");
    for k in &keys {
        let path = format!("/buckets/b/keys/{k}");
        delete_read_value(&a, &path);
        // A read that finds the tombstone on every replica asks for its
        // reap (the node's own read after the delete does too).
        let (status, _) = http(&a, "GET", &format!("{path}?r=3"), b"");
        assert_eq!(status, 404, "{k}");
    }
    // Every reap has come due: put off (d may hold the values), or done.
    let reaped = || a.stat("tombstones_reaped_total") + b.stat("tombstones_reaped_total");
    until("the reaps come due", Duration::from_secs(30), || {
        a.stat("reaps_put_off_total") + reaped() - reaped_before >= keys.len() as u64
    });
    d.restart();
    until("d hands its data home", Duration::from_secs(60), || {
        let s = d.stats();
        s["handoffs_completed_total"].as_u64() >= Some(1)
            && s["partitions_held_not_owned"] == 0
            && a.stat("cluster_unreachable_members") == 0
    });
    for k in &keys {
        let path = format!("/buckets/b/keys/{k}?r=3");
        for m in [&a, &b, &c, &d] {
            let (status, body) = http(m, "GET", &path, b"");
            assert_eq!(status, 404, "{k} came back through {}: {body}", m.name);
        }
    }
    // With everyone back and nothing held elsewhere, the tombstones go.
    until("the tombstones are reaped", Duration::from_secs(90), || {
        reaped() >= reaped_before + keys.len() as u64
    });
}

/// Deletes through one node of three, with their vclocks and no read
/// after: each delete is answered once two replicas hold its tombstone,
/// and the node reads the key afterwards (as Riak's delete does), so
/// every tombstone is reaped after `delete_mode` and reads find nothing.
#[test]
fn a_delete_is_reaped_without_a_client_read() {
    let extra = "delete_mode = 200ms\n";
    let a = Member::start(1, extra);
    let b = Member::start(2, extra);
    let c = Member::start(3, extra);
    form(&a, &[&b, &c]);
    let keys: Vec<String> = (0..12).map(|i| format!("d{i}")).collect();
    for k in &keys {
        let (status, body) = http(&a, "PUT", &format!("/buckets/b/keys/{k}"), b"v");
        assert_eq!(status, 204, "{k}: {body}");
    }
    let reaped = || {
        [&a, &b, &c]
            .iter()
            .map(|m| m.stat("tombstones_reaped_total"))
            .sum::<u64>()
    };
    let before = reaped();
    for k in &keys {
        delete_read_value(&a, &format!("/buckets/b/keys/{k}"));
    }
    until("every tombstone is reaped", Duration::from_secs(30), || {
        reaped() >= before + keys.len() as u64
    });
    for k in &keys {
        let (status, body) = http(&b, "GET", &format!("/buckets/b/keys/{k}?r=3"), b"");
        assert_eq!(status, 404, "{k}: {body}");
    }
}

/// One request of the load: when it began, and whether it was answered
/// as it should be.
struct Done {
    began: std::time::Instant,
    ok: bool,
    what: String,
}

/// Puts of new keys (W = 2) and gets of acknowledged ones (R = 2)
/// through `addr` until `stop`.
fn load(
    addr: std::net::SocketAddr,
    tag: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<Done>> {
    std::thread::spawn(move || {
        let mut done = Vec::new();
        let mut acked: Vec<String> = Vec::new();
        let mut i = 0usize;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let began = std::time::Instant::now();
            if i.is_multiple_of(2) || acked.is_empty() {
                let key = format!("l{tag}-{i}");
                let r = common::http(
                    addr,
                    "PUT",
                    &format!("/buckets/b/keys/{key}?w=2"),
                    &[("Content-Type", "text/plain")],
                    key.as_bytes(),
                );
                let ok = r.as_ref().is_some_and(|r| r.status == 204);
                if ok {
                    acked.push(key.clone());
                }
                let got = r.map_or("no answer".into(), |r| {
                    format!("{} {}", r.status, String::from_utf8_lossy(&r.body))
                });
                done.push(Done {
                    began,
                    ok,
                    what: format!("PUT {key}: {got}"),
                });
            } else {
                let key = acked[(i * 7919) % acked.len()].clone();
                let r = common::http(addr, "GET", &format!("/buckets/b/keys/{key}?r=2"), &[], b"");
                let ok = r
                    .as_ref()
                    .is_some_and(|r| r.status == 200 && r.body == key.as_bytes());
                let got = r.map_or("no answer".into(), |r| {
                    format!("{} {}", r.status, String::from_utf8_lossy(&r.body))
                });
                done.push(Done {
                    began,
                    ok,
                    what: format!("GET {key}: {got}"),
                });
            }
            i += 1;
        }
        done
    })
}

/// `kill -9` of one of three nodes under puts (W = 2) and gets (R = 2)
/// through the other two: the node's connections close, the others take
/// it for down at once, a put whose coordinating replica was on it is
/// coordinated by the next replica, and every request that began after
/// the kill is answered as it should be (only those in flight may fail).
#[test]
fn a_node_killed_under_load_fails_only_the_requests_in_flight() {
    let a = Member::start(1, "");
    let b = Member::start(2, "");
    let mut c = Member::start(3, "");
    form(&a, &[&b, &c]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loads: Vec<_> = [a.node().http, a.node().http, b.node().http, b.node().http]
        .into_iter()
        .enumerate()
        .map(|(t, addr)| load(addr, t, stop.clone()))
        .collect();
    until("the load runs", Duration::from_secs(30), || {
        a.stat("node_puts_total") + b.stat("node_puts_total") >= 400
    });
    c.node.take().unwrap().kill();
    // The kill is done when the process is: a request that began before
    // (while it still ran) may have been taken by it and be in flight.
    let killed = std::time::Instant::now();
    until(
        "the load goes on for three seconds",
        Duration::from_secs(30),
        || killed.elapsed() >= Duration::from_secs(3),
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let done: Vec<Done> = loads.into_iter().flat_map(|l| l.join().unwrap()).collect();
    let after: Vec<&Done> = done.iter().filter(|d| d.began > killed).collect();
    let failed_after: Vec<&str> = after
        .iter()
        .filter(|d| !d.ok)
        .map(|d| d.what.as_str())
        .collect();
    let in_flight_failed = done.iter().filter(|d| d.began <= killed && !d.ok).count();
    eprintln!(
        "{} requests, {} after the kill; {in_flight_failed} failed in flight",
        done.len(),
        after.len()
    );
    assert!(after.len() > 100, "too little load after the kill");
    assert!(
        failed_after.is_empty(),
        "{} of {} requests begun after the kill failed: {:?}",
        failed_after.len(),
        after.len(),
        &failed_after[..failed_after.len().min(5)]
    );
}

/// Three members, and a key of bucket "one" (n_val 1) whose one replica
/// is on the third.
fn three_and_a_key_of_the_third() -> (Member, Member, Member, String) {
    let a = Member::start(1, "");
    let b = Member::start(2, "");
    let c = Member::start(3, "");
    form(&a, &[&b, &c]);
    set_props(&a, "one", serde_json::json!({ "n_val": 1 }));
    let key = (0..200)
        .map(|i| format!("k{i}"))
        .find(|k| {
            let (_, pl) = http(&a, "GET", &format!("/buckets/one/keys/{k}/preflist"), b"");
            let pl: Value = serde_json::from_str(&pl).unwrap();
            pl["preflist"][0]["node"] == c.name.as_str()
        })
        .expect("a key whose one replica is on the third node");
    (a, b, c, key)
}

/// A put through a node that holds none of its key's replicas is
/// coordinated by the key's replica on another node. When that node dies
/// after the request left but before it took the request (here: frozen,
/// then killed), the request was never carried out, so the next replica
/// (a fallback) coordinates and the put is acknowledged, instead of
/// failing as a request the dead node may have carried out.
#[test]
fn a_put_whose_coordinator_dies_before_taking_it_is_coordinated_elsewhere() {
    let (a, _b, mut c, key) = three_and_a_key_of_the_third();
    c.node().freeze();
    let redirs = a.stat("coord_redirs_total");
    let addr = a.node().http;
    let path = format!("/buckets/one/keys/{key}");
    let put = std::thread::spawn(move || {
        common::http(addr, "PUT", &path, &[("Content-Type", "text/plain")], b"v")
            .map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned()))
    });
    until(
        "the put is sent to the frozen node to coordinate",
        Duration::from_secs(30),
        || a.stat("coord_redirs_total") > redirs,
    );
    c.node.take().unwrap().kill();
    let answer = put.join().unwrap();
    assert_eq!(answer.as_ref().map(|a| a.0), Some(204), "{answer:?}");
    let r = a
        .node()
        .http("GET", &format!("/buckets/one/keys/{key}"), &[], b"")
        .expect("an answer");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"v"[..]));
}

/// A put through a node that holds none of its key's replicas, whose
/// coordinating replica's node is frozen (SIGSTOP: its connections stay
/// open, it takes nothing), is coordinated by the next replica once that
/// node is taken for down (`cluster.down_after`, 6 s; Riak's forwarded
/// put tries another coordinator after `put_coordinator_failure_timeout`,
/// 3 s), and acknowledged: the frozen node never said it took it.
#[test]
fn a_put_whose_coordinator_is_frozen_is_coordinated_elsewhere() {
    let (a, _b, c, key) = three_and_a_key_of_the_third();
    c.node().freeze();
    let (status, body) = http(&a, "PUT", &format!("/buckets/one/keys/{key}"), b"v");
    assert_eq!(status, 204, "{body}");
    let (status, body) = http(&a, "GET", &format!("/buckets/one/keys/{key}"), b"");
    assert_eq!((status, body.as_str()), (200, "v"));
    c.node().signal(18);
}
