//! A long read's helper threads and the engine's stores: a helper still
//! reading a window of a read already answered must not keep a store (and
//! its directory's lock) alive after the engine is gone.

use super::hooked::hooked;
use super::*;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::Mutex as StdMutex;

type Events = Arc<StdMutex<Vec<&'static str>>>;

fn is_helper() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("rill-sensor-read"))
}

/// The engine waits, when it is dropped, for a helper still reading a
/// window of an answered read: the store goes before the engine is gone
/// (without the wait the helper held it after, and a restart found the
/// store's directory still locked).
#[test]
fn an_engine_dropped_after_a_long_read_lets_its_stores_go_first() {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return; // no helper threads on one core: nothing to wait for
    }
    let rig = Rig::new(10 * SEC, 8);
    let (arrived_tx, arrived_rx) = channel();
    let (release_tx, release_rx) = channel::<()>();
    let (here_tx, here_rx) = channel::<()>();
    let seen = Arc::new(AtomicBool::new(false));
    let events: Events = Arc::default();
    let (e, hooks) = hooked(&rig);
    let gate: Box<dyn Fn() + Send + Sync> = {
        let (arrived, here, release) = (
            StdMutex::new(Some(arrived_tx)),
            StdMutex::new(Some(here_rx)),
            StdMutex::new(Some(release_rx)),
        );
        let seen = seen.clone();
        Box::new(move || {
            if is_helper() {
                if !seen.swap(true, Ordering::SeqCst) {
                    // The first helper get: say so, then wait to be let go.
                    if let Some(tx) = arrived.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    let rx = release.lock().unwrap().take();
                    if let Some(rx) = rx {
                        let _ = rx.recv_timeout(Duration::from_secs(30));
                    }
                }
            } else if let Some(rx) = here.lock().unwrap().take() {
                // The request's first get waits (bounded) for a helper to
                // be inside a window, so that the read ends while it is.
                let _ = rx.recv_timeout(Duration::from_secs(10));
            }
        })
    };
    assert!(hooks.before_get.set(gate).is_ok());
    let dropped = events.clone();
    let on_drop: Box<dyn Fn() + Send + Sync> =
        Box::new(move || dropped.lock().unwrap().push("store dropped"));
    assert!(hooks.on_drop.set(on_drop).is_ok());
    let key = "m{a=\"1\"}";
    every_3s(&e, key, 100);
    let now = T0 + 400 * SEC;
    e.tick(now).unwrap();
    // The helper's first get tells the request's thread to go on.
    let relay = std::thread::spawn(move || {
        if arrived_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
            let _ = here_tx.send(());
        }
    });
    let got = e.read("db", key, i64::MIN, i64::MAX, now).unwrap();
    assert_eq!(got.len(), 100);
    relay.join().unwrap();
    assert!(seen.load(Ordering::SeqCst), "no helper read a window");
    // The read is answered; a helper waits inside a window's get.
    let dropped = events.clone();
    let (done_tx, done_rx) = channel();
    let dropper = std::thread::spawn(move || {
        drop(e);
        dropped.lock().unwrap().push("engine dropped");
        let _ = done_tx.send(());
    });
    // Without the wait, the engine is gone at once; with it, not while the
    // helper holds the store (bounded: a second, then let it go).
    let early = done_rx.recv_timeout(Duration::from_secs(1)).is_ok();
    release_tx.send(()).unwrap();
    dropper.join().unwrap();
    let order = events.lock().unwrap().clone();
    assert!(
        !early,
        "the engine was gone while a helper held its store: {order:?}"
    );
    assert_eq!(order, vec!["store dropped", "engine dropped"]);
}
