//! A join hands partitions off, and the old owner keeps only its own.

use crate::common::{admin, form, get, member, put, until};
use rill_node::Node;
use std::sync::Arc;

fn count_local(node: &Arc<Node>) -> usize {
    (0..node.ring_size())
        .map(|p| node.vnodes().handoff_keys(p).unwrap().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_join_hands_partitions_off_and_the_old_owner_keeps_only_its_own() {
    let a = member("a@127.0.0.1").await;
    let b = member("b@127.0.0.1").await;
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        for k in 0..300 {
            put(&na, &format!("k{k}"), &format!("v{k}")).unwrap();
        }
    })
    .await
    .unwrap();
    form(&a, &[&b]).await;
    // Writes go on during the transfers, through both nodes.
    let (na, nb) = (a.node.clone(), b.node.clone());
    let writer = tokio::task::spawn_blocking(move || {
        for k in 0..200 {
            let n = if k % 2 == 0 { &na } else { &nb };
            put(n, &format!("during{k}"), "d").unwrap();
        }
    });
    until("every transfer is done and applied", || {
        let s = a.peer.state();
        s.ring().next.is_empty()
            && s.owners()
                .iter()
                .filter(|o| o.as_str() == "b@127.0.0.1")
                .count()
                == 8
            && b.peer.state().owners() == s.owners()
    })
    .await;
    writer.await.unwrap();
    let t = admin(&a.peer, r#"{"op":"transfers"}"#).await;
    assert!(t.text.contains("No transfers"), "{}", t.text);
    // Every key readable through both nodes.
    for m in [&a, &b] {
        let n = m.node.clone();
        tokio::task::spawn_blocking(move || {
            for k in 0..300 {
                assert_eq!(
                    get(&n, &format!("k{k}")),
                    Some(format!("v{k}").into_bytes()),
                    "k{k}"
                );
            }
            for k in 0..200 {
                assert_eq!(
                    get(&n, &format!("during{k}")),
                    Some(b"d".to_vec()),
                    "during{k}"
                );
            }
        })
        .await
        .unwrap();
    }
    // With two nodes and N = 3 each key has replicas on both; what a
    // holds of b's partitions goes once a sees the switch.
    let (na, nb) = (a.node.clone(), b.node.clone());
    until("a keeps only its own partitions' data", || {
        let view = na.cluster_view();
        (0..16u32).all(|p| {
            view.ring.owner(rill_ring::Partition(p)) == "a@127.0.0.1"
                || na.vnodes().handoff_keys(p).unwrap().is_empty()
        })
    })
    .await;
    assert!(count_local(&nb) > 0);
}
