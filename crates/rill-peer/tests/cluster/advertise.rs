//! A node listening on every interface is reached where it advertises.

use crate::common::{form, get, member, member_at, until};
use rill_node::{Content, Metadata, PutRequest};

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
