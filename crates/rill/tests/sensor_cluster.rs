//! The sensor-data service on a cluster of real `rill` processes
//! (docs/sensors.md, "On a cluster"): line protocol written into every
//! node is answered by every node, as a single node holding the same
//! samples answers; a write waits for W distinct nodes; an answer that
//! may lack samples says so.

mod common;

use common::cluster::{form, Member};
use common::sensor::{enc, export, now_s};
use common::{until, Node};
use std::time::Duration;

/// Lines of node `k`'s sensors: 12 rooms of its own with two fields
/// each, and one series every node writes at times of its own, every 10
/// s over 20 minutes ending at `end` (s).
fn lines(k: u32, end: i64) -> String {
    let mut out = String::new();
    for step in 0..120i64 {
        let t = end - 1200 + step * 10;
        for room in 0..12 {
            out.push_str(&format!(
                "room,host=n{k},name=r{room} temp={},hum={} {t}\n",
                20.0 + f64::from(room) + step as f64 / 100.0,
                40 + room + k,
            ));
        }
        out.push_str(&format!(
            "shared,site=x v={} {}\n",
            step + i64::from(k),
            t + i64::from(k)
        ));
    }
    out
}

fn write(n: &Node, body: &str) -> u16 {
    n.http(
        "POST",
        "/write?db=telegraf&precision=s",
        &[("Content-Type", "text/plain")],
        body.as_bytes(),
    )
    .map_or(0, |r| r.status)
}

/// The `data` of a Prometheus API answer, and the whole answer.
fn query(n: &Node, path: &str) -> (serde_json::Value, serde_json::Value) {
    let r = n.http("GET", path, &[], b"").expect("an answer");
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    (v["data"].clone(), v)
}

fn queries(end: i64) -> Vec<String> {
    let at = end + 30;
    let range = |q: &str| {
        format!(
            "/api/v1/query_range?query={}&start={}&end={at}&step=30",
            enc(q),
            end - 1200
        )
    };
    let instant = |q: &str| format!("/api/v1/query?query={}&time={at}", enc(q));
    vec![
        instant("room_temp[30m]"),
        instant("shared_v[30m]"),
        instant("count(room_hum)"),
        instant("sum by (host) (room_hum)"),
        instant("topk(3, room_temp)"),
        range("sum by (host) (rate(room_temp[2m]))"),
        range("avg(room_hum)"),
        range("shared_v"),
        "/api/v1/series?match[]=room_temp".to_string(),
    ]
}

#[test]
fn line_protocol_into_every_node_is_answered_by_every_node_as_one_node_answers() {
    let a = Member::start(1, "");
    let b = Member::start(2, "");
    let c = Member::start(3, "");
    form(&a, &[&b, &c]);
    let single_dir = tempfile::tempdir().unwrap();
    let single = Node::start(single_dir.path(), "");
    let end = now_s() / 60 * 60 - 600;
    for (k, m) in [&a, &b, &c].into_iter().enumerate() {
        let body = lines(k as u32 + 1, end);
        assert_eq!(write(m.node(), &body), 204, "through {}", m.name);
        assert_eq!(write(&single, &body), 204);
    }
    // Each series is on its home's first three distinct nodes: on three
    // nodes every series on every node, also those whose partitions
    // wrap around the ring to a node named already (64 partitions do
    // not share evenly among three nodes).
    let all = 3 * 12 * 2 + 1;
    until("the replicas' writes", Duration::from_secs(30), || {
        [&a, &b, &c].iter().all(|m| m.stat("sensor_series") == all)
    });
    for path in queries(end) {
        let (want, _) = query(&single, &path);
        assert_ne!(want, serde_json::json!(null), "{path}");
        for m in [&a, &b, &c] {
            let (got, whole) = query(m.node(), &path);
            assert_eq!(got, want, "{path} through {}", m.name);
            assert!(whole.get("warnings").is_none(), "{path}: {whole}");
        }
    }
    // A database made through one node is listed through every node.
    let made = a
        .node()
        .http("POST", "/query?q=CREATE%20DATABASE%20made_on_a", &[], b"")
        .unwrap();
    assert_eq!(made.status, 200);
    for m in [&a, &b, &c] {
        let r = m
            .node()
            .http("GET", "/query?q=SHOW%20DATABASES", &[], b"")
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            v["results"][0]["series"][0]["values"],
            serde_json::json!([["made_on_a"], ["telegraf"]]),
            "through {}",
            m.name
        );
    }
    // Export (VictoriaMetrics' JSON lines) through every node: every
    // sample of every series, as the single node exports them.
    let selector = "{__name__=~\"room_.*|shared_v\"}";
    let want = export(&single, selector);
    assert_eq!(want.len(), 3 * 12 * 2 + 1);
    for m in [&a, &b, &c] {
        assert_eq!(
            export(m.node(), selector),
            want,
            "export through {}",
            m.name
        );
    }
}

#[test]
fn a_write_waits_for_w_nodes_and_an_answer_without_them_says_so() {
    let a = Member::start(1, "handoff.timeout = 3s\n");
    let b = Member::start(2, "handoff.timeout = 3s\n");
    let c = Member::start(3, "handoff.timeout = 3s\n");
    form(&a, &[&b, &c]);
    let end = now_s() / 60 * 60 - 600;
    assert_eq!(write(a.node(), &lines(1, end)), 204);
    // One node down: W = 2 of the two left, the answer still whole.
    let mut c = c;
    c.node.take().unwrap().kill();
    let later = lines(2, end);
    until(
        "a write with one node down",
        Duration::from_secs(30),
        || write(a.node(), &later) == 204,
    );
    let (data, whole) = query(
        b.node(),
        &format!("/api/v1/query?query=count(room_temp)&time={}", end + 30),
    );
    assert_eq!(data["result"][0]["value"][1], "24", "{whole}");
    assert!(whole.get("warnings").is_none(), "{whole}");
    // Two down: a write cannot reach W; an answer may lack samples.
    let mut b = b;
    b.node.take().unwrap().kill();
    let refused = (0..50)
        .map(|_| write(a.node(), &lines(3, end)))
        .find(|&s| s != 204);
    assert_eq!(refused, Some(503), "a write with W = 2 and one node up");
    // The acknowledged series are all here (a's share of the refused
    // writes may be too: nothing of them was acknowledged).
    let (data, whole) = query(
        a.node(),
        &format!("/api/v1/query?query=count(room_temp)&time={}", end + 30),
    );
    let count: u32 = data["result"][0]["value"][1]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((24..=36).contains(&count), "{whole}");
    assert_eq!(whole["isPartial"], true, "{whole}");
    assert!(
        whole["warnings"][0]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{whole}"
    );
    b.restart();
    c.restart();
}

#[test]
fn samples_written_before_a_join_reach_their_owners_and_leave_who_does_not_own_them() {
    let a = Member::start(1, "");
    let single_dir = tempfile::tempdir().unwrap();
    let single = Node::start(single_dir.path(), "");
    let end = now_s() / 60 * 60 - 600;
    for k in 1..=3 {
        let body = lines(k, end);
        assert_eq!(write(a.node(), &body), 204);
        assert_eq!(write(&single, &body), 204);
    }
    let all = 3 * 12 * 2 + 1;
    assert_eq!(a.stat("sensor_series"), all);
    let b = Member::start(2, "");
    let c = Member::start(3, "");
    form(&a, &[&b, &c]);
    // Each series ends on its home's three nodes, every node here, sent
    // there by a.
    until(
        "the samples reach their owners",
        Duration::from_secs(60),
        || [&a, &b, &c].iter().all(|m| m.stat("sensor_series") == all),
    );
    for path in queries(end) {
        let (want, _) = query(&single, &path);
        for m in [&a, &b, &c] {
            let (got, _) = query(m.node(), &path);
            assert_eq!(got, want, "{path} through {}", m.name);
        }
    }
    // Through b alone (a and c stopped, answers partial): every series
    // b owns has every sample, as the single node has it.
    let mut a = a;
    let mut c = c;
    a.node.take().unwrap().stop();
    c.node.take().unwrap().stop();
    let at = end + 30;
    let (got, whole) = query(
        b.node(),
        &format!(
            "/api/v1/query?query={}&time={at}",
            enc("count_over_time(room_temp[30m])")
        ),
    );
    assert_eq!(whole["isPartial"], true);
    let (want, _) = query(
        &single,
        &format!(
            "/api/v1/query?query={}&time={at}",
            enc("count_over_time(room_temp[30m])")
        ),
    );
    let counts = |v: &serde_json::Value| -> std::collections::BTreeMap<String, String> {
        v["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["metric"].to_string(),
                    r["value"][1].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (got, want) = (counts(&got), counts(&want));
    assert!(
        got.len() * 10 >= want.len() * 8,
        "{} of {} series on b",
        got.len(),
        want.len()
    );
    for (series, n) in &got {
        assert_eq!(Some(n), want.get(series), "{series}: samples on b");
    }
    a.restart();
    c.restart();
}

#[test]
fn a_fallback_hands_its_samples_home_when_the_owner_returns() {
    let extra = "handoff.timeout = 3s\n";
    let a = Member::start(1, extra);
    let b = Member::start(2, extra);
    let c = Member::start(3, extra);
    let mut d = Member::start(4, extra);
    form(&a, &[&b, &c, &d]);
    let end = now_s() / 60 * 60 - 600;
    // d down under writes: its replicas go to fallbacks on the others.
    d.node.take().unwrap().kill();
    let body = lines(1, end) + &lines(2, end);
    until("writes with d down", Duration::from_secs(30), || {
        write(a.node(), &body) == 204
    });
    d.restart();
    // The fallbacks send d what they held for it, then drop it.
    until(
        "the fallbacks' samples are home",
        Duration::from_secs(60),
        || {
            [&a, &b, &c]
                .iter()
                .map(|m| m.stat("sensor_homes_handed_off_total"))
                .sum::<u64>()
                > 0
                && d.stat("sensor_series") > 0
        },
    );
    // d alone answers for what it owns as the others do: stop them and
    // compare the samples of each series d has with a's answer before.
    let at = end + 30;
    let q = format!(
        "/api/v1/query?query={}&time={at}",
        enc("{__name__=~\"room_.*|shared_v\"}[30m]")
    );
    let counts = |v: &serde_json::Value| -> std::collections::BTreeMap<String, usize> {
        v["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["metric"].to_string(),
                    r["values"].as_array().unwrap().len(),
                )
            })
            .collect()
    };
    let (all, _) = query(a.node(), &q);
    let all = counts(&all);
    assert_eq!(all.len(), 2 * 12 * 2 + 1);
    let (mut a, mut b, mut c) = (a, b, c);
    for m in [&mut a, &mut b, &mut c] {
        m.node.take().unwrap().stop();
    }
    let (on_d, whole) = query(d.node(), &q);
    assert_eq!(whole["isPartial"], true);
    let on_d = counts(&on_d);
    assert!(!on_d.is_empty());
    for (series, n) in &on_d {
        assert_eq!(Some(n), all.get(series), "{series}: samples on d");
    }
    for m in [&mut a, &mut b, &mut c] {
        m.restart();
    }
}

/// Writes batches of `load,writer=W v=I` through `addr` until `stop`,
/// sample I at `base` + I ms, W = 2 (the default); returns the batches
/// acknowledged (first I of each, 10 samples a batch) and the statuses
/// other than 204 met.
fn load(
    addr: std::net::SocketAddr,
    writer: usize,
    base_ms: i64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (Vec<i64>, Vec<u16>) {
    let (mut acked, mut other) = (Vec::new(), Vec::new());
    let mut i = 0i64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let body: String = (i..i + 10)
            .map(|k| format!("load,writer=w{writer} v={k} {}\n", base_ms + k))
            .collect();
        let status = common::http(
            addr,
            "POST",
            "/write?db=telegraf&precision=ms",
            &[("Content-Type", "text/plain")],
            body.as_bytes(),
        )
        .map_or(0, |r| r.status);
        match status {
            204 => acked.push(i),
            s => other.push(s),
        }
        i += 10;
    }
    (acked, other)
}

#[test]
fn a_node_killed_under_ingest_loses_no_acknowledged_sample() {
    // Minute slices, settled at once (the samples are an hour old) and
    // compared once quiet for the grace period: anti-entropy gives c
    // what it missed while down.
    let extra = "handoff.timeout = 3s\nsensor.window = 1m\nsensor.grace = 5s\n\
                 sensor.retention = 1d\nsensor.anti_entropy.interval = 1s\n";
    let a = Member::start(1, extra);
    let b = Member::start(2, extra);
    let mut c = Member::start(3, extra);
    form(&a, &[&b, &c]);
    let base_ms = (now_s() - 3600) * 1000;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = [a.node().http, b.node().http]
        .into_iter()
        .enumerate()
        .map(|(w, addr)| {
            let stop = stop.clone();
            std::thread::spawn(move || load(addr, w, base_ms, stop))
        })
        .collect();
    let written = || a.stat("sensor_samples_written_total");
    until("writes flow", Duration::from_secs(30), || written() >= 500);
    c.node.take().unwrap().kill();
    let before = written();
    until("writes go on without c", Duration::from_secs(30), || {
        written() >= before + 1000
    });
    c.restart();
    until(
        "c is back, and sees the others",
        Duration::from_secs(30),
        || {
            [&a, &b, &c]
                .iter()
                .all(|m| m.stat("cluster_unreachable_members") == 0)
        },
    );
    let more = written();
    until("writes with c back", Duration::from_secs(30), || {
        written() >= more + 500
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let at = base_ms / 1000 + 3000;
    let mut all_acked = Vec::new();
    for (w, t) in writers.into_iter().enumerate() {
        let (acked, other) = t.join().unwrap();
        // No errors but the documented retry (503) while c was seen
        // down (a connection cut by the kill: status 0, sent again).
        assert!(
            other.iter().all(|s| *s == 503 || *s == 0),
            "writer {w}: {other:?}"
        );
        assert!(acked.len() > 50, "writer {w}: {} batches", acked.len());
        for m in [&a, &b, &c] {
            every_batch_answered(m, w, base_ms, at, &acked, true);
        }
        all_acked.push(acked);
    }
    // c missed the writes made while it was down (no fallback holds
    // them: every node is an owner); anti-entropy gives them to it, so
    // c alone answers every acknowledged sample of the series it owns.
    until_replicas_alike(&[&a, &b, &c], 6);
    let (mut a, mut b) = (a, b);
    a.node.take().unwrap().stop();
    b.node.take().unwrap().stop();
    let mut owned = 0;
    for (w, acked) in all_acked.iter().enumerate() {
        if owns(&c, w, at) {
            owned += 1;
            every_batch_answered(&c, w, base_ms, at, acked, false);
        }
    }
    assert!(owned > 0, "c owns a writer's series");
    a.restart();
    b.restart();
}

/// Whether `m` (alone) answers writer `w`'s series.
fn owns(m: &Member, w: usize, at: i64) -> bool {
    let (data, _) = query(
        m.node(),
        &format!(
            "/api/v1/query?query={}&time={at}",
            enc(&format!("load_v{{writer=\"w{w}\"}}[2h]"))
        ),
    );
    !data["result"].as_array().unwrap().is_empty()
}

#[test]
fn a_join_and_a_leave_under_ingest_lose_nothing_and_queries_answer_throughout() {
    use common::cluster::{plan_and_commit, settle};
    let a = Member::start(1, "");
    let b = Member::start(2, "");
    let c = Member::start(3, "");
    form(&a, &[&b, &c]);
    let base_ms = (now_s() - 3600) * 1000;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = [a.node().http, b.node().http]
        .into_iter()
        .enumerate()
        .map(|(w, addr)| {
            let stop = stop.clone();
            std::thread::spawn(move || load(addr, w, base_ms, stop))
        })
        .collect();
    let written = || a.stat("sensor_samples_written_total");
    // Every poll also asks a query, which must be answered.
    let answers = |m: &Member| {
        let r = m
            .node()
            .http(
                "GET",
                &format!("/api/v1/query?query={}", enc("count(load_v)")),
                &[],
                b"",
            )
            .expect("an answer");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    };
    until("writes flow", Duration::from_secs(30), || written() >= 500);
    let d = Member::start(4, "");
    let (ok, out) = d.admin(&["cluster", "join", &a.cluster_addr()]);
    assert!(ok, "{out}");
    until("the join is seen", Duration::from_secs(30), || {
        a.stat("cluster_members") == 4
    });
    plan_and_commit(&a, "join");
    until("d joined, transfers done", Duration::from_secs(120), || {
        answers(&c);
        [&a, &b, &c, &d].iter().all(|m| {
            let s = m.stats();
            s["cluster_members"] == 4 && s["ring_pending_transfers"] == 0
        })
    });
    let before = written();
    until("writes go on", Duration::from_secs(30), || {
        answers(&d);
        written() >= before + 500
    });
    let (ok, out) = d.admin(&["cluster", "leave"]);
    assert!(ok, "{out}");
    plan_and_commit(&a, "leave");
    until("d left, transfers done", Duration::from_secs(120), || {
        answers(&a);
        [&a, &b, &c].iter().all(|m| {
            let s = m.stats();
            s["cluster_members"] == 3 && s["ring_pending_transfers"] == 0
        })
    });
    settle(&[&a, &b, &c], 3);
    let more = written();
    until("writes after the leave", Duration::from_secs(30), || {
        written() >= more + 500
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let at = base_ms / 1000 + 3000;
    for (w, t) in writers.into_iter().enumerate() {
        let (acked, other) = t.join().unwrap();
        assert!(other.iter().all(|s| *s == 503), "writer {w}: {other:?}");
        for m in [&a, &b, &c] {
            every_batch_answered(m, w, base_ms, at, &acked, true);
        }
    }
    drop(d);
}

/// Every sample of writer `w`'s acknowledged batches (first I of each,
/// 10 samples from `base_ms` + I ms) answered through `m` at `at` s, with
/// its value; `whole`: the answer must not say it may lack samples.
fn every_batch_answered(m: &Member, w: usize, base_ms: i64, at: i64, acked: &[i64], whole: bool) {
    let (data, answer) = query(
        m.node(),
        &format!(
            "/api/v1/query?query={}&time={at}",
            enc(&format!("load_v{{writer=\"w{w}\"}}[2h]"))
        ),
    );
    let values: std::collections::BTreeMap<i64, String> = data["result"][0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                (p[0].as_f64().unwrap() * 1000.0).round() as i64,
                p[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    if whole {
        assert!(
            answer.get("warnings").is_none(),
            "through {}: {answer}",
            m.name
        );
    }
    for first in acked {
        for k in *first..first + 10 {
            assert_eq!(
                values.get(&(base_ms + k)),
                Some(&k.to_string()),
                "writer {w} sample {k} through {}",
                m.name
            );
        }
    }
}

/// Anti-entropy's figures of every member: slices found different and
/// slices left busy (the sums), and each member's exchanges.
fn exchange_figures(all: &[&Member]) -> ((u64, u64), Vec<u64>) {
    (
        (
            all.iter()
                .map(|m| m.stat("sensor_aae_slices_differing_total"))
                .sum(),
            all.iter()
                .map(|m| m.stat("sensor_aae_slices_busy_total"))
                .sum(),
        ),
        all.iter()
            .map(|m| m.stat("sensor_aae_exchanges_total"))
            .collect(),
    )
}

/// Waits until every member has done `exchanges` more exchanges that
/// found no slice different and left none busy: every slice compared,
/// and alike (a fallback's hand-off may have repaired a node before
/// anti-entropy saw a difference).
fn until_replicas_alike(all: &[&Member], exchanges: u64) {
    let mut since = exchange_figures(all);
    until(
        "anti-entropy repairs, then finds every replica alike",
        Duration::from_secs(120),
        || {
            let now = exchange_figures(all);
            if now.0 != since.0 {
                since = now;
                return false;
            }
            now.1.iter().zip(&since.1).all(|(n, s)| *n >= s + exchanges)
        },
    );
}

#[test]
fn a_wiped_node_gets_its_sensor_data_back_by_anti_entropy() {
    // Minute slices that settle 5 s after they end, two hours of them;
    // a round a second.
    let extra = "sensor.window = 1m\nsensor.grace = 5s\nsensor.retention = 2h\n\
                 sensor.anti_entropy.interval = 1s\n";
    let a = Member::start(1, extra);
    let b = Member::start(2, extra);
    let mut c = Member::start(3, extra);
    form(&a, &[&b, &c]);
    let end = now_s() / 60 * 60 - 600;
    let body = lines(1, end) + &lines(2, end) + &lines(3, end);
    until("the writes", Duration::from_secs(30), || {
        write(a.node(), &body) == 204
    });
    let at = end + 30;
    let q = format!(
        "/api/v1/query?query={}&time={at}",
        enc("{__name__=~\"room_.*|shared_v\"}[30m]")
    );
    let (want, _) = query(a.node(), &q);
    assert_eq!(want["result"].as_array().unwrap().len(), 3 * 12 * 2 + 1);

    // c owns every series (every home's three nodes, also where ring
    // size 16 over 3 nodes wraps a home's partitions to a node twice).
    let held = c.stat("sensor_series");
    assert_eq!(held, 3 * 12 * 2 + 1);

    // c loses its sensor data (a disk replaced) while stopped; its ring
    // and its other data stay.
    c.node.take().unwrap().stop();
    std::fs::remove_dir_all(c.home.path().join("data").join("sensor")).unwrap();
    c.restart();
    assert_eq!(c.stat("sensor_series"), 0);

    // No client reads: exchanges find what c lacks and send it, until
    // every member has done many exchanges since the last difference.
    let all = [&a, &b, &c];
    until_replicas_alike(&all, 100);
    assert!(
        all.iter()
            .map(|m| m.stat("sensor_aae_repaired_samples_total"))
            .sum::<u64>()
            > 0
    );
    assert_eq!(c.stat("sensor_series"), held);

    // c alone answers for what it owns with every sample the cluster
    // had.
    let (mut a, mut b) = (a, b);
    a.node.take().unwrap().stop();
    b.node.take().unwrap().stop();
    let (got, whole) = query(c.node(), &q);
    assert_eq!(whole["isPartial"], true);
    let got = got["result"].as_array().unwrap();
    assert_eq!(got.len() as u64, held);
    for series in got {
        let whole = want["result"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["metric"] == series["metric"]);
        assert_eq!(Some(series), whole, "{}", series["metric"]);
    }
    a.restart();
    b.restart();
}
