//! Three nodes join, plan and commit, and serve each other's keys.

use crate::common::{admin, get, member, put, until};
use rill_cluster::Status;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_join_plan_commit_and_serve_each_others_keys() {
    let a = member("a@127.0.0.1").await;
    let b = member("b@127.0.0.1").await;
    let c = member("c@127.0.0.1").await;
    // Data before the join stays readable through the others.
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || put(&na, "before", "1").unwrap())
        .await
        .unwrap();

    let target = a.peer.local_addr().to_string();
    for m in [&b, &c] {
        let r = admin(&m.peer, &format!(r#"{{"op":"join","target":"{target}"}}"#)).await;
        assert!(r.ok, "{}", r.text);
        assert!(
            r.text.starts_with("Success: staged join request for"),
            "{}",
            r.text
        );
    }
    let r = admin(&b.peer, r#"{"op":"join","target":"127.0.0.1:1"}"#).await;
    assert!(!r.ok && r.text.contains("already a member"), "{}", r.text);
    until("a sees both joining", || {
        a.peer.state().with_status(|s| s == Status::Joining).len() == 2
    })
    .await;
    until("the ring is ready for a plan", || {
        let s = a.peer.state();
        s.ring_ready()
    })
    .await;
    // The plan is asked through a node that is not the claimant.
    let plan = admin(&c.peer, r#"{"op":"plan"}"#).await;
    assert!(plan.ok, "{}", plan.text);
    assert!(plan.text.contains("join"), "{}", plan.text);
    eprintln!("{}", plan.text);
    let commit = admin(&b.peer, r#"{"op":"commit"}"#).await;
    assert!(commit.ok, "{}", commit.text);
    assert_eq!(commit.text, "Cluster changes committed");
    until("every node sees three valid members", || {
        [&a, &b, &c]
            .iter()
            .all(|m| m.peer.state().with_status(|s| s == Status::Valid).len() == 3)
    })
    .await;
    // Bucket types and properties are cluster metadata: made on one node,
    // in force on every node.
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        let props = serde_json::json!({"datatype": "set"});
        na.buckets()
            .create_type("sets", props.as_object().unwrap())
            .unwrap();
        na.buckets().activate_type("sets").unwrap();
    })
    .await
    .unwrap();
    let nb = b.node.clone();
    tokio::task::spawn_blocking(move || {
        let props = serde_json::json!({"n_val": 2});
        nb.buckets()
            .set_bucket_props("default", b"two", props.as_object().unwrap())
            .unwrap();
    })
    .await
    .unwrap();
    until(
        "the type and the bucket's properties reach every node",
        || {
            [&a, &b, &c].iter().all(|m| {
                m.node
                    .buckets()
                    .type_status("sets")
                    .is_some_and(|(_, s)| s == rill_node::TypeStatus::Active)
                    && m.node.buckets().bucket_props("default", b"two").unwrap()["n_val"] == 2
            })
        },
    )
    .await;
    let status = admin(&c.peer, r#"{"op":"member-status"}"#).await;
    eprintln!(
        "{}\n{}",
        status.text,
        admin(&c.peer, r#"{"op":"ring-status"}"#).await.text
    );
    assert!(
        status.text.contains("valid") && status.text.contains("c@127.0.0.1"),
        "{}",
        status.text
    );

    // Writes through each node, reads through every other.
    for (i, m) in [&a, &b, &c].iter().enumerate() {
        let n = m.node.clone();
        tokio::task::spawn_blocking(move || {
            for k in 0..20 {
                put(&n, &format!("k{i}-{k}"), &format!("v{i}-{k}")).unwrap();
            }
        })
        .await
        .unwrap();
    }
    for m in [&a, &b, &c] {
        let n = m.node.clone();
        tokio::task::spawn_blocking(move || {
            assert_eq!(get(&n, "before"), Some(b"1".to_vec()));
            for i in 0..3 {
                for k in 0..20 {
                    assert_eq!(
                        get(&n, &format!("k{i}-{k}")),
                        Some(format!("v{i}-{k}").into_bytes()),
                        "k{i}-{k} through {}",
                        n.nodename()
                    );
                }
            }
        })
        .await
        .unwrap();
    }
}
