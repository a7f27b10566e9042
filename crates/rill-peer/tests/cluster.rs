//! Nodes in one process on loopback, each with its runtime: joins, the
//! plan and its commit at the claimant, gossip converging, and keys
//! written through one node read through another.

use rill_cluster::Status;
use rill_node::{
    BackendKind, Content, GetAnswer, GetRequest, Metadata, Node, NodeConfig, Object, PutRequest,
};
use rill_peer::{Peer, PeerConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Member {
    node: Arc<Node>,
    peer: Arc<Peer>,
    _dir: tempfile::TempDir,
}

async fn member(name: &str) -> Member {
    member_at(name, "127.0.0.1:0", None).await
}

/// A member listening on `listen`, telling peers to reach it at
/// `advertise` (port 0: its listener's).
async fn member_at(name: &str, listen: &str, advertise: Option<&str>) -> Member {
    let dir = tempfile::tempdir().unwrap();
    let mut c = NodeConfig::new(dir.path());
    c.nodename = name.into();
    c.ring_size = 16;
    c.backend = BackendKind::Memory;
    c.request_timeout = Duration::from_secs(5);
    let node = tokio::task::spawn_blocking(move || Node::open(c).unwrap())
        .await
        .unwrap();
    let mut pc = PeerConfig::new(listen.parse().unwrap());
    pc.advertise = advertise.map(|a| a.parse().unwrap());
    pc.ping_interval = Duration::from_millis(200);
    pc.suspect_after = Duration::from_millis(600);
    pc.down_after = Duration::from_millis(1200);
    let peer = Peer::start(node.clone(), pc).await.unwrap();
    Member {
        node,
        peer,
        _dir: dir,
    }
}

async fn admin(p: &Arc<Peer>, json: &str) -> rill_peer::AdminAnswer {
    p.admin(json).await
}

/// Waits, within a bound, for `cond`.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let t0 = Instant::now();
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("{what}: {:?}", t0.elapsed());
}

/// `joiners` join `first`; `first` (the claimant) plans and commits once
/// it sees them all and the ring is ready.
async fn form(first: &Member, joiners: &[&Member]) {
    let target = first.peer.local_addr().to_string();
    for m in joiners {
        let r = admin(&m.peer, &format!(r#"{{"op":"join","target":"{target}"}}"#)).await;
        assert!(r.ok, "{}", r.text);
    }
    until("the joins are seen", || {
        first
            .peer
            .state()
            .with_status(|s| s == Status::Joining)
            .len()
            == joiners.len()
    })
    .await;
    until("the ring is ready", || first.peer.state().ring_ready()).await;
    let plan = admin(&first.peer, r#"{"op":"plan"}"#).await;
    assert!(plan.ok, "{}", plan.text);
    let commit = admin(&first.peer, r#"{"op":"commit"}"#).await;
    assert!(commit.ok, "{}", commit.text);
}

/// Three nodes formed into a cluster, with no transfer left.
async fn three_settled() -> (Member, Member, Member) {
    let a = member("a@127.0.0.1").await;
    let b = member("b@127.0.0.1").await;
    let c = member("c@127.0.0.1").await;
    form(&a, &[&b, &c]).await;
    until("settled", || {
        [&a, &b, &c].iter().all(|m| {
            let s = m.peer.state();
            s.ring().next.is_empty() && s.owners().iter().any(|o| o == "c@127.0.0.1")
        })
    })
    .await;
    (a, b, c)
}

fn put(node: &Arc<Node>, key: &str, value: &str) -> Result<(), rill_node::KvError> {
    node.put(PutRequest {
        bucket: b"b".to_vec(),
        key: Some(key.as_bytes().to_vec()),
        content: Content::new(value.as_bytes().to_vec(), Metadata::default()),
        ..PutRequest::default()
    })
    .map(|_| ())
}

fn get(node: &Arc<Node>, key: &str) -> Option<Vec<u8>> {
    get_from(node, "b", key)
}

fn get_from(node: &Arc<Node>, bucket: &str, key: &str) -> Option<Vec<u8>> {
    match node
        .get(&GetRequest {
            bucket: bucket.as_bytes().to_vec(),
            key: key.as_bytes().to_vec(),
            ..GetRequest::default()
        })
        .unwrap()
    {
        GetAnswer::Found(o) => Some(o.contents[0].value.to_vec()),
        _ => None,
    }
}

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
        na.create_type("sets", props.as_object().unwrap()).unwrap();
        na.activate_type("sets").unwrap();
    })
    .await
    .unwrap();
    let nb = b.node.clone();
    tokio::task::spawn_blocking(move || {
        let props = serde_json::json!({"n_val": 2});
        nb.set_bucket_props("default", b"two", props.as_object().unwrap())
            .unwrap();
    })
    .await
    .unwrap();
    until(
        "the type and the bucket's properties reach every node",
        || {
            [&a, &b, &c].iter().all(|m| {
                m.node
                    .type_status("sets")
                    .is_some_and(|(_, s)| s == rill_node::TypeStatus::Active)
                    && m.node.bucket_props("default", b"two").unwrap()["n_val"] == 2
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

fn count_local(node: &Arc<Node>) -> usize {
    (0..node.ring_size())
        .map(|p| node.handoff_keys(p).unwrap().len())
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
                || na.handoff_keys(p).unwrap().is_empty()
        })
    })
    .await;
    assert!(count_local(&nb) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coverage_queries_see_every_key_once_across_nodes() {
    use rill_node::IndexSpec;
    let (a, b, c) = three_settled().await;
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        for k in 0..250u32 {
            let meta = Metadata {
                indexes: vec![
                    (b"n_int".to_vec(), k.to_string().into_bytes()),
                    (
                        b"even_bin".to_vec(),
                        if k % 2 == 0 {
                            b"yes".to_vec()
                        } else {
                            b"no".to_vec()
                        },
                    ),
                ],
                ..Metadata::default()
            };
            na.put(PutRequest {
                bucket: b"b".to_vec(),
                key: Some(format!("k{k:03}").into_bytes()),
                content: Content::new(b"v".to_vec(), meta),
                ..PutRequest::default()
            })
            .unwrap();
        }
        put(&na, "other", "x").ok();
    })
    .await
    .unwrap();
    for m in [&a, &b, &c] {
        let n = m.node.clone();
        tokio::task::spawn_blocking(move || {
            let mut keys = Vec::new();
            n.list_keys(b"default", b"b", None, &mut |batch| {
                keys.extend(batch);
                true
            })
            .unwrap();
            let total = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(
                total,
                keys.len(),
                "a key listed twice through {}",
                n.nodename()
            );
            assert_eq!(keys.len(), 251, "through {}", n.nodename());
            assert_eq!(
                n.list_buckets(b"default", None).unwrap(),
                vec![b"b".to_vec()]
            );
            // A range query, paged by max_results: every match once, in order.
            let mut got = Vec::new();
            let mut continuation = None;
            loop {
                let ans = query(
                    &n,
                    b"n_int".to_vec(),
                    IndexSpec::Range(b"10".to_vec(), b"199".to_vec()),
                    Some(37),
                    continuation.take(),
                );
                got.extend(ans.results.into_iter().map(|(_, k)| k));
                match ans.continuation {
                    Some(c) => continuation = Some(c),
                    None => break,
                }
            }
            let want: Vec<Vec<u8>> = (10..200u32)
                .map(|k| format!("k{k:03}").into_bytes())
                .collect();
            assert_eq!(got, want, "through {}", n.nodename());
            let evens = query(
                &n,
                b"even_bin".to_vec(),
                IndexSpec::Eq(b"yes".to_vec()),
                None,
                None,
            );
            assert_eq!(evens.results.len(), 125);
            // $key with max_results pages through sorted keys.
            let keys = query(
                &n,
                b"$key".to_vec(),
                IndexSpec::Range(b"k100".to_vec(), b"k149".to_vec()),
                Some(20),
                None,
            );
            let want: Vec<Vec<u8>> = (100..120u32)
                .map(|k| format!("k{k:03}").into_bytes())
                .collect();
            assert_eq!(
                keys.results.into_iter().map(|(_, k)| k).collect::<Vec<_>>(),
                want
            );
            let all = query(
                &n,
                b"$bucket".to_vec(),
                IndexSpec::Eq(b"b".to_vec()),
                None,
                None,
            );
            assert_eq!(all.results.len(), 251);
        })
        .await
        .unwrap();
    }
}

/// A secondary-index query on bucket `b`, through `n`.
fn query(
    n: &Arc<Node>,
    index: Vec<u8>,
    spec: rill_node::IndexSpec,
    max_results: Option<u32>,
    continuation: Option<Vec<u8>>,
) -> rill_node::IndexAnswer {
    n.index_query(&rill_node::IndexRequest {
        bucket_type: b"default".to_vec(),
        bucket: b"b".to_vec(),
        index,
        spec,
        return_terms: false,
        max_results,
        continuation,
        term_regex: None,
    })
    .unwrap()
}

/// Gets of large values move each value between nodes at most once:
/// replicas elsewhere answer with their clock, and only a clock no reply
/// has brought the object for is fetched; a newer replica is fetched and
/// wins, and the others are repaired.
/// How many of the keys `big0`..`big23` of bucket `two` (n_val 2) have
/// no replica on `n`: gets of those through `n` fetch their value.
fn big_keys_without_local_replica(n: &Node) -> u64 {
    (0..24u32)
        .filter(|k| {
            let key = format!("big{k}");
            let pl = n.preflist(b"", b"two", key.as_bytes(), 2);
            !pl.iter().any(|e| e.node == n.nodename())
        })
        .count() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_values_are_read_by_heads_and_fetched_once() {
    use rill_node::vnode_msg::{VnodeReply, VnodeRequest};
    let (a, b, c) = three_settled().await;
    let big = |k: u32, tag: u8| vec![tag.wrapping_add(k as u8); 300 << 10];
    // n_val 2 on 3 nodes: a third of the keys have no replica on a
    // given node, so gets through it fetch the value.
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        let props = serde_json::json!({"n_val": 2});
        na.set_bucket_props("default", b"two", props.as_object().unwrap())
            .unwrap();
    })
    .await
    .unwrap();
    until("n_val 2 reaches every node", || {
        [&a, &b, &c]
            .iter()
            .all(|m| m.node.bucket_props("default", b"two").unwrap()["n_val"] == 2)
    })
    .await;
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        for k in 0..24u32 {
            na.put(PutRequest {
                bucket: b"two".to_vec(),
                key: Some(format!("big{k}").into_bytes()),
                content: Content::new(big(k, 1), Metadata::default()),
                ..PutRequest::default()
            })
            .unwrap();
        }
    })
    .await
    .unwrap();
    // Every replica holds each key (the third write may trail W = 2).
    let members = [&a, &b, &c].map(|m| m.node.clone());
    let held = move |k: u32| {
        let key = rill_node::BKey::new(b"", b"two", format!("big{k}").as_bytes());
        let pl = members[0].preflist(b"", b"two", key.key.as_slice(), 2);
        pl.iter().all(|e| {
            let n = members.iter().find(|n| n.nodename() == e.node).unwrap();
            matches!(
                n.serve(e.partition.0, VnodeRequest::Get { key: key.clone() }),
                VnodeReply::Found(Some(_))
            )
        })
    };
    let h = held.clone();
    until("every replica holds every key", move || (0..24).all(&h)).await;
    for m in [&a, &b, &c] {
        let n = m.node.clone();
        tokio::task::spawn_blocking(move || {
            let before = n.stats();
            let without_local = big_keys_without_local_replica(&n);
            for k in 0..24u32 {
                let key = format!("big{k}");
                assert!(
                    get_from(&n, "two", &key) == Some(big(k, 1)),
                    "{key} through {}",
                    n.nodename()
                );
            }
            assert!(
                without_local > 0,
                "some key has no replica on {}",
                n.nodename()
            );
            let after = n.stats();
            assert!(
                after.get_head_clocks > before.get_head_clocks,
                "no replica answered with a clock through {}",
                n.nodename()
            );
            assert_eq!(
                after.get_fetches - before.get_fetches,
                without_local,
                "one fetch per get without a local replica, through {}",
                n.nodename()
            );
        })
        .await
        .unwrap();
    }

    // The same through gets run as tasks, as the PB and HTTP gets are:
    // this node's replica, too large to be read in place, is read on a
    // blocking thread, and the other nodes' heads wait for it rather than
    // fetch the value again.
    for m in [&a, &b, &c] {
        let n = &m.node;
        let before = n.stats();
        let without_local = big_keys_without_local_replica(n);
        for k in 0..24u32 {
            let key = format!("big{k}");
            let got = n
                .get_task(&GetRequest {
                    bucket: b"two".to_vec(),
                    key: key.clone().into_bytes(),
                    ..GetRequest::default()
                })
                .await
                .unwrap();
            assert!(
                matches!(&got, GetAnswer::Found(o) if o.contents[0].value[..] == big(k, 1)[..]),
                "{key} through {}",
                n.nodename()
            );
        }
        let after = n.stats();
        assert!(after.get_local_waits > before.get_local_waits);
        assert_eq!(
            after.get_fetches - before.get_fetches,
            without_local,
            "one fetch per get without a local replica, as a task, through {}",
            n.nodename()
        );
    }

    // A replica on another node gets a newer version behind the
    // coordinators' backs: a get through `a` fetches it, answers it, and
    // repairs the rest.
    let (na, nb, nc) = (a.node.clone(), b.node.clone(), c.node.clone());
    tokio::task::spawn_blocking(move || {
        let nodes = [na.clone(), nb, nc];
        let k = (0..24u32)
            .find(|k| {
                let pl = na.preflist(b"", b"two", format!("big{k}").as_bytes(), 2);
                pl.iter().any(|e| e.node == na.nodename())
                    && pl.iter().any(|e| e.node != na.nodename())
            })
            .expect("a key with replicas here and elsewhere");
        let name = format!("big{k}");
        let key = rill_node::BKey::new(b"", b"two", name.as_bytes());
        let pl = na.preflist(b"", b"two", name.as_bytes(), 2);
        let e = pl.iter().find(|e| e.node != na.nodename()).unwrap();
        let other = nodes.iter().find(|n| n.nodename() == e.node).unwrap();
        let VnodeReply::Found(Some(old)) =
            other.serve(e.partition.0, VnodeRequest::Get { key: key.clone() })
        else {
            panic!("the replica holds the key");
        };
        let mode = rill_object::PutMode {
            allow_mult: false,
            last_write_wins: false,
        };
        let newer = Object::coordinate_put(
            Some(&old),
            &old.clock,
            Content::new(big(k, 2), Metadata::default()),
            &b"elsewhere".to_vec(),
            mode,
        );
        let merge = VnodeRequest::Merge {
            key: key.clone(),
            object: newer,
            allow_mult: false,
            prune: None,
            return_object: true,
        };
        assert!(matches!(
            other.serve(e.partition.0, merge),
            VnodeReply::Stored(_)
        ));
        let before = na.stats().get_fetches;
        // R = 2: both replicas answer (with R = 1 the older one may be first).
        let got = na
            .get(&GetRequest {
                bucket: b"two".to_vec(),
                key: name.as_bytes().to_vec(),
                r: Some(rill_node::Quorum::N(2)),
                ..GetRequest::default()
            })
            .unwrap();
        assert!(
            matches!(&got, GetAnswer::Found(o) if o.contents.len() == 1 && o.contents[0].value == big(k, 2)),
            "the newer version is answered"
        );
        assert!(
            na.stats().get_fetches > before,
            "the newer replica was fetched"
        );
        let mine = pl.iter().find(|e| e.node == na.nodename()).unwrap();
        let start = Instant::now();
        loop {
            let repaired = matches!(
                na.serve(mine.partition.0, VnodeRequest::Get { key: key.clone() }),
                VnodeReply::Found(Some(o)) if o.contents[0].value == big(k, 2)
            );
            if repaired {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "local replica repaired"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
}

/// A node listening on every interface is reached at the address it
/// advertises (`listener.cluster.advertise`), never at 0.0.0.0: it joins,
/// takes partitions, and serves its replicas to the other node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_listening_on_every_interface_is_reached_where_it_advertises() {
    let a = member("a@127.0.0.1").await;
    let b = member_at("b@127.0.0.1", "0.0.0.0:0", Some("127.0.0.1:0")).await;
    assert!(b.peer.local_addr().ip().is_unspecified());
    let advertised = b.peer.advertised();
    assert_eq!(advertised.ip().to_string(), "127.0.0.1");
    assert_eq!(advertised.port(), b.peer.local_addr().port());
    form(&a, &[&b]).await;
    until("settled", || {
        [&a, &b].iter().all(|m| {
            let s = m.peer.state();
            s.ring().next.is_empty() && s.owners().iter().any(|o| o == "b@127.0.0.1")
        })
    })
    .await;
    assert_eq!(
        a.peer.state().address("b@127.0.0.1"),
        Some(advertised.to_string().as_str())
    );
    // Every replica answers: a write through a with W = 3 needs b's.
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        na.put(PutRequest {
            bucket: b"b".to_vec(),
            key: Some(b"k".to_vec()),
            content: Content::new(b"v".to_vec(), Metadata::default()),
            w: Some(rill_node::Quorum::N(3)),
            ..PutRequest::default()
        })
        .unwrap()
    })
    .await
    .unwrap();
    let nb = b.node.clone();
    let got = tokio::task::spawn_blocking(move || get(&nb, "k"))
        .await
        .unwrap();
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
}
