//! Two transports on loopback: messages arrive whole and in order on every
//! lane, a large value holds up no small request, the test hook delays
//! and drops, and a peer that breaks the protocol is dropped without
//! harm to others.

use bytes::Bytes;
use rill_transport::{Incoming, Lane, LinkHook, Transport, TransportConfig, Verdict};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::Receiver;

/// Waits for the next message, at most 60 s.
async fn next(rx: &mut Receiver<Incoming>) -> Incoming {
    tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("a message within 60 s")
        .expect("the transport runs")
}

async fn node(name: &str, hook: Option<Arc<dyn LinkHook>>) -> (Arc<Transport>, Receiver<Incoming>) {
    let mut c = TransportConfig::new(name, "127.0.0.1:0".parse().unwrap());
    c.hook = hook;
    Transport::start(c).await.unwrap()
}

fn numbered(lane: Lane, i: u32) -> Bytes {
    Bytes::from(format!("{lane} {i}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_arrive_whole_and_in_order_on_every_lane() {
    let (a, _) = node("a@127.0.0.1", None).await;
    let (_b, mut rx) = node("b@127.0.0.1", None).await;
    let to = _b.local_addr();
    for i in 0..200 {
        for lane in Lane::ALL {
            a.send(to, lane, numbered(lane, i)).await.unwrap();
        }
    }
    let big: Vec<u8> = (0..(3 << 20) + 17).map(|i| (i % 251) as u8).collect();
    a.send(to, Lane::Bulk, Bytes::from(big.clone()))
        .await
        .unwrap();
    let mut seen = std::collections::HashMap::new();
    let mut got_big = false;
    for _ in 0..(200 * 4 + 1) {
        let m = next(&mut rx).await;
        assert_eq!(m.from, "a@127.0.0.1");
        if m.data.len() > 1000 {
            assert_eq!(&m.data[..], &big[..], "the large value arrives whole");
            got_big = true;
            continue;
        }
        let n: &mut u32 = seen.entry(m.lane).or_default();
        assert_eq!(m.data, numbered(m.lane, *n), "in order on {}", m.lane);
        *n += 1;
    }
    assert!(got_big);
    assert!(seen.values().all(|n| *n == 200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_value_holds_up_no_small_request() {
    let (a, _) = node("a@127.0.0.1", None).await;
    let (b, mut rx) = node("b@127.0.0.1", None).await;
    let to = b.local_addr();
    let large = Bytes::from(vec![7u8; 64 << 20]);
    // On another lane, and on the same lane (chunks taken in turn).
    a.send(to, Lane::Bulk, large.clone()).await.unwrap();
    a.send(to, Lane::Small, Bytes::from_static(b"get k"))
        .await
        .unwrap();
    a.send(to, Lane::Bulk, Bytes::from_static(b"put small"))
        .await
        .unwrap();
    let mut order = Vec::new();
    for _ in 0..3 {
        let m = next(&mut rx).await;
        order.push(if m.data.len() == large.len() {
            "large".to_string()
        } else {
            String::from_utf8_lossy(&m.data).into_owned()
        });
    }
    assert_eq!(order.last().map(String::as_str), Some("large"), "{order:?}");
}

/// Drops every other Small message and delays Control ones.
struct Lossy(AtomicU64);

impl LinkHook for Lossy {
    fn verdict(&self, _to: SocketAddr, lane: Lane, _bytes: usize) -> Verdict {
        match lane {
            Lane::Small if self.0.fetch_add(1, Ordering::Relaxed) % 2 == 1 => Verdict::Drop,
            Lane::Control => Verdict::Delay(Duration::from_millis(20)),
            _ => Verdict::Deliver,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hook_delays_and_drops() {
    let (a, _) = node("a@127.0.0.1", Some(Arc::new(Lossy(AtomicU64::new(0))))).await;
    let (b, mut rx) = node("b@127.0.0.1", None).await;
    let to = b.local_addr();
    for i in 0..10 {
        a.send(to, Lane::Small, numbered(Lane::Small, i))
            .await
            .unwrap();
        a.send(to, Lane::Control, numbered(Lane::Control, i))
            .await
            .unwrap();
    }
    let (mut small, mut control) = (Vec::new(), Vec::new());
    while small.len() + control.len() < 15 {
        let m = next(&mut rx).await;
        match m.lane {
            Lane::Small => small.push(m.data),
            Lane::Control => control.push(m.data),
            other => panic!("{other}"),
        }
    }
    let even: Vec<Bytes> = (0..10)
        .step_by(2)
        .map(|i| numbered(Lane::Small, i))
        .collect();
    assert_eq!(small, even, "the odd ones were lost");
    let all: Vec<Bytes> = (0..10).map(|i| numbered(Lane::Control, i)).collect();
    assert_eq!(control, all, "delayed, all delivered, in order");
}

/// A delayed link is a link with latency, not a narrower one: many more
/// messages than a writer writes at once are on their way together, and
/// arrive in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_link_keeps_many_messages_on_their_way() {
    let hook = rill_transport::FixedLink::new(Duration::from_secs(2), 0.0, 1);
    let (a, _) = node("a@127.0.0.1", Some(Arc::new(hook))).await;
    let (b, mut rx) = node("b@127.0.0.1", None).await;
    let to = b.local_addr();
    // More than the lane's queue and its writer's window together: with a
    // window per delay the sends would wait for the first to arrive.
    for i in 0..500 {
        a.send(to, Lane::Small, numbered(Lane::Small, i))
            .await
            .unwrap();
    }
    assert!(
        rx.try_recv().is_err(),
        "every send returned while all were still delayed"
    );
    for i in 0..500 {
        assert_eq!(next(&mut rx).await.data, numbered(Lane::Small, i));
    }
}

/// Messages of several chunks released together by a delay stay within
/// what a receiver reassembles at once: all arrive, whole and in order
/// (the receiver drops a connection that has more than 16 in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_large_messages_all_arrive() {
    let hook = rill_transport::FixedLink::new(Duration::from_millis(300), 0.0, 1);
    let (a, _) = node("a@127.0.0.1", Some(Arc::new(hook))).await;
    let (b, mut rx) = node("b@127.0.0.1", None).await;
    let to = b.local_addr();
    let big = |i: u32| Bytes::from(vec![i as u8; 200 << 10]);
    for i in 0..40 {
        a.send(to, Lane::Bulk, big(i)).await.unwrap();
    }
    for i in 0..40 {
        let m = next(&mut rx).await;
        assert!(m.data == big(i), "message {i} whole and in order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_breaking_the_protocol_is_dropped_and_others_go_on() {
    let (a, _) = node("a@127.0.0.1", None).await;
    let (b, mut rx) = node("b@127.0.0.1", None).await;
    let to = b.local_addr();
    for garbage in [
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        vec![0xff; 16],
        // A chunk before any hello.
        rill_transport::frame::chunk_header(1, Some(0), true, 0),
        // A hello, then a message longer than it says.
        {
            let mut b = rill_transport::frame::encode_hello(1, "x");
            b.extend(rill_transport::frame::chunk_header(1, Some(1), true, 2));
            b.extend_from_slice(b"ab");
            b
        },
    ] {
        let mut s = tokio::net::TcpStream::connect(to).await.unwrap();
        s.write_all(&garbage).await.unwrap();
        let _ = s.flush().await;
    }
    a.send(to, Lane::Small, Bytes::from_static(b"still here"))
        .await
        .unwrap();
    let m = next(&mut rx).await;
    assert_eq!(&m.data[..], b"still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_over_the_limit_are_refused() {
    let mut c = TransportConfig::new("a@127.0.0.1", "127.0.0.1:0".parse().unwrap());
    c.max_message_bytes = 1000;
    let (a, _) = Transport::start(c).await.unwrap();
    let err = a
        .send(a.local_addr(), Lane::Bulk, Bytes::from(vec![0; 1001]))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("exceeds the limit of 1000"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_cannot_be_reached_fails_sends_fast() {
    let (a, _) = node("a@127.0.0.1", None).await;
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    // The first sends are queued; once the connect has failed, sends say
    // so at once. Bounded wait.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match a.send(closed, Lane::Small, Bytes::from_static(b"x")).await {
            Err(e) => {
                assert!(e.to_string().contains("cannot be reached"), "{e}");
                break;
            }
            Ok(()) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never reported unreachable"
                );
                tokio::task::yield_now().await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_message_after_a_peer_restarts_arrives() {
    use tokio::io::AsyncReadExt;
    let (a, _) = node("a@127.0.0.1", None).await;
    // The peer's first life: takes one message, then stops.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    a.send(addr, Lane::Small, Bytes::from_static(b"before"))
        .await
        .unwrap();
    let (mut s, _) = tokio::time::timeout(Duration::from_secs(60), listener.accept())
        .await
        .expect("a connection within 60 s")
        .unwrap();
    let mut got = Vec::new();
    while !got.windows(6).any(|w| w == b"before") {
        let mut b = [0u8; 256];
        let n = tokio::time::timeout(Duration::from_secs(60), s.read(&mut b))
            .await
            .expect("bytes within 60 s")
            .unwrap();
        assert!(n > 0, "the connection closed before the message");
        got.extend_from_slice(&b[..n]);
    }
    drop(s);
    drop(listener);
    // Its second life, on the same address: the sender's connection to
    // the first is dead, and the next message must not be lost in it.
    let mut c = TransportConfig::new("b@127.0.0.1", addr);
    c.background_threads = 0;
    let (_b, mut rx) = Transport::start(c).await.unwrap();
    a.send(addr, Lane::Small, Bytes::from_static(b"after"))
        .await
        .unwrap();
    let m = next(&mut rx).await;
    assert_eq!(
        (m.from.as_str(), &m.data[..]),
        ("a@127.0.0.1", &b"after"[..])
    );
}

/// Waits, at most 60 s, for `cond`.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "{what} within 60 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A node restarted under the same name connects again before its old
/// connection's end is read: that end is not reported (the node is
/// alive); the end of its last connection is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_end_of_a_nodes_last_connection_is_reported() {
    use rill_transport::LinkEvent;
    let (a, mut rx) = node("a@127.0.0.1", None).await;
    let mut events = a.take_events().unwrap();
    let to = a.local_addr();
    let (old, _) = node("b@127.0.0.1", None).await;
    old.send(to, Lane::Control, numbered(Lane::Control, 0))
        .await
        .unwrap();
    next(&mut rx).await;
    let (new, _) = node("b@127.0.0.1", None).await;
    new.send(to, Lane::Control, numbered(Lane::Control, 1))
        .await
        .unwrap();
    next(&mut rx).await;
    assert_eq!(a.connections_from("b@127.0.0.1"), 2);
    drop(old);
    until("the old connection's end read", || {
        a.connections_from("b@127.0.0.1") == 1
    })
    .await;
    assert!(
        events.try_recv().is_err(),
        "an old connection's end was reported while the node is connected"
    );
    drop(new);
    let e = tokio::time::timeout(Duration::from_secs(60), events.recv())
        .await
        .expect("the last end reported within 60 s");
    assert_eq!(e, Some(LinkEvent::Closed("b@127.0.0.1".into())));
    assert_eq!(a.connections_from("b@127.0.0.1"), 0);
}
