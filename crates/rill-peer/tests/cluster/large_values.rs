//! Gets of large values move each value between nodes at most once.

use crate::common::{get_from, three_settled, until};
use rill_node::{Content, GetAnswer, GetRequest, Metadata, Node, Object, PutRequest};
use std::time::{Duration, Instant};

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

/// Gets of large values move each value between nodes at most once:
/// replicas elsewhere answer with their clock, and only a clock no reply
/// has brought the object for is fetched; a newer replica is fetched and
/// wins, and the others are repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_values_are_read_by_heads_and_fetched_once() {
    use rill_node::vnode::msg::{VnodeReply, VnodeRequest};
    let (a, b, c) = three_settled().await;
    let big = |k: u32, tag: u8| vec![tag.wrapping_add(k as u8); 300 << 10];
    // n_val 2 on 3 nodes: a third of the keys have no replica on a
    // given node, so gets through it fetch the value.
    let na = a.node.clone();
    tokio::task::spawn_blocking(move || {
        let props = serde_json::json!({"n_val": 2});
        na.buckets()
            .set_bucket_props("default", b"two", props.as_object().unwrap())
            .unwrap();
    })
    .await
    .unwrap();
    until("n_val 2 reaches every node", || {
        [&a, &b, &c]
            .iter()
            .all(|m| m.node.buckets().bucket_props("default", b"two").unwrap()["n_val"] == 2)
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
                n.vnodes()
                    .serve(e.partition.0, VnodeRequest::Get { key: key.clone() }),
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
            other.vnodes().serve(e.partition.0, VnodeRequest::Get { key: key.clone() })
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
            other.vnodes().serve(e.partition.0, merge),
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
                na.vnodes().serve(mine.partition.0, VnodeRequest::Get { key: key.clone() }),
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
