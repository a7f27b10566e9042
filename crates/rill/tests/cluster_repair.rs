//! Repair on real processes: a node whose stored data was wiped gets
//! every key it is a replica of back with `rill admin repair-node`, with
//! anti-entropy off and no client reading anything until it is checked
//! (docs/cluster.md, "Repair").

mod common;

use common::cluster::{form, primary_on, put, read_alone, wipe_and_restart, Member};
use common::until;
use serde_json::Value;
use std::time::Duration;

/// No exchanges: only the repair can bring data back.
const NO_AAE: &str = "tictacaae_active = passive\n";

fn completed(all: &[&Member]) -> u64 {
    all.iter().map(|m| m.stat("handoffs_completed_total")).sum()
}

#[test]
fn a_wiped_node_gets_every_key_back_by_repair_node() {
    let m1 = Member::start(1, NO_AAE);
    let m2 = Member::start(2, NO_AAE);
    let mut m3 = Member::start(3, NO_AAE);
    form(&m1, &[&m2, &m3]);

    let keys: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
    for k in &keys {
        assert!(put(m1.node(), k, &format!("v-{k}"), "?w=3&dw=3"), "{k}");
    }
    let on_m3 = primary_on(&m1, &m3, &keys);
    assert!(on_m3.len() > 200, "{} keys on m3", on_m3.len());

    wipe_and_restart(&mut m3);
    until("m3 sees m1 and m2", Duration::from_secs(60), || {
        m3.stat("cluster_unreachable_members") == 0
    });

    // A repair of a partition another node owns is refused, naming it.
    let r = m1
        .node()
        .http("GET", "/buckets/b/keys/k0/preflist", &[], b"")
        .unwrap();
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let theirs = v["preflist"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["node"] == m1.name.as_str())
        .expect("k0 has a replica on m1")["partition"]
        .as_u64()
        .unwrap();
    let (ok, text) = m3.admin(&["repair-partition", &theirs.to_string()]);
    assert!(!ok && text.contains("is owned by dev1"), "{text}");
    let (ok, text) = m3.admin(&["repair-partition", "64"]);
    assert!(
        !ok && text.contains("not a partition of this ring"),
        "{text}"
    );

    // No slot on the senders at first: the repairs wait, and say so.
    for m in [&m1, &m2] {
        assert!(m.admin(&["transfer-limit", "0"]).0);
    }
    let before = completed(&[&m1, &m2]);
    let (ok, text) = m3.admin(&["repair-node"]);
    assert!(ok, "{text}");
    assert!(!text.contains("Failed"), "{text}");
    let asked = text.matches(" on 'dev").count() as u64;
    // Two neighbours asked for each partition m3 owns (a third of 16).
    let partitions = text.matches("Repair of partition").count() as u64;
    assert!(partitions >= 4 && asked == 2 * partitions, "{text}");
    until(
        "the repairs wait for a slot",
        Duration::from_secs(30),
        || m1.stat("handoff_repairs_waiting") + m2.stat("handoff_repairs_waiting") == asked,
    );
    let (ok, transfers) = m1.admin(&["transfers"]);
    assert!(
        ok && transfers.contains("waiting for a transfer slot"),
        "{transfers}"
    );
    for m in [&m1, &m2] {
        assert!(m.admin(&["transfer-limit", "2"]).0);
    }
    until("every repair sent", Duration::from_secs(120), || {
        completed(&[&m1, &m2]) >= before + asked
    });
    assert_eq!(m1.stat("handoff_repairs_waiting"), 0);

    // Only m3 left: each key it is a replica of reads from its own
    // vnodes.
    drop(m1);
    drop(m2);
    read_alone(&m3, &on_m3);
}
