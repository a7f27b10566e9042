//! Members on loopback, clusters formed from them, and reads and writes
//! through a node.

use rill_cluster::Status;
use rill_node::{
    BackendKind, Content, GetAnswer, GetRequest, Metadata, Node, NodeConfig, PutRequest,
};
use rill_peer::{Peer, PeerConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Member {
    pub node: Arc<Node>,
    pub peer: Arc<Peer>,
    _dir: tempfile::TempDir,
}

pub async fn member(name: &str) -> Member {
    member_at(name, "127.0.0.1:0", None).await
}

/// A member listening on `listen`, telling peers to reach it at
/// `advertise` (port 0: its listener's).
pub async fn member_at(name: &str, listen: &str, advertise: Option<&str>) -> Member {
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

pub async fn admin(p: &Arc<Peer>, json: &str) -> rill_peer::AdminAnswer {
    p.admin(json).await
}

/// Waits, within a bound, for `cond`.
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
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
pub async fn form(first: &Member, joiners: &[&Member]) {
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
pub async fn three_settled() -> (Member, Member, Member) {
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

pub fn put(node: &Arc<Node>, key: &str, value: &str) -> Result<(), rill_node::KvError> {
    node.put(PutRequest {
        bucket: b"b".to_vec(),
        key: Some(key.as_bytes().to_vec()),
        content: Content::new(value.as_bytes().to_vec(), Metadata::default()),
        ..PutRequest::default()
    })
    .map(|_| ())
}

pub fn get(node: &Arc<Node>, key: &str) -> Option<Vec<u8>> {
    get_from(node, "b", key)
}

pub fn get_from(node: &Arc<Node>, bucket: &str, key: &str) -> Option<Vec<u8>> {
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
