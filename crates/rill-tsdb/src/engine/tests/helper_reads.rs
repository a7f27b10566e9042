//! A long read's helper threads and the engine's stores: a helper still
//! reading a window of a read already answered must not keep a store (and
//! its directory's lock) alive after the engine is gone.

use super::*;
use crate::storage::{BlockStore, Storage};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex as StdMutex;

type Events = Arc<StdMutex<Vec<&'static str>>>;

/// Where a helper thread's first get of the store waits, and what the
/// request's thread waits for before its own gets.
struct Gate {
    arrived: StdMutex<Option<Sender<()>>>,
    helper_here: StdMutex<Option<Receiver<()>>>,
    release: StdMutex<Option<Receiver<()>>>,
    seen: std::sync::atomic::AtomicBool,
}

struct GatedStore {
    inner: Arc<dyn BlockStore>,
    gate: Arc<Gate>,
    events: Events,
}

impl Drop for GatedStore {
    fn drop(&mut self) {
        self.events.lock().unwrap().push("store dropped");
    }
}

fn is_helper() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("rill-sensor-read"))
}

impl BlockStore for GatedStore {
    fn put(&self, key: &[u8], value: &[u8], expires_at_s: Option<u64>) -> io::Result<()> {
        self.inner.put(key, value, expires_at_s)
    }
    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        if is_helper() {
            if !self.gate.seen.swap(true, Ordering::SeqCst) {
                // The first helper get: say so, then wait to be let go.
                if let Some(tx) = self.gate.arrived.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                let rx = self.gate.release.lock().unwrap().take();
                if let Some(rx) = rx {
                    let _ = rx.recv_timeout(Duration::from_secs(30));
                }
            }
        } else if let Some(rx) = self.gate.helper_here.lock().unwrap().take() {
            // The request's first get waits (bounded) for a helper to be
            // inside a window, so that the read ends while it is.
            let _ = rx.recv_timeout(Duration::from_secs(10));
        }
        self.inner.get(key)
    }
    fn contains(&self, key: &[u8]) -> bool {
        self.inner.contains(key)
    }
    fn fold(&self, visit: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()> {
        self.inner.fold(visit)
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }
}

struct GatedStorage {
    inner: BitcaskStorage,
    gate: Arc<Gate>,
    events: Events,
}

impl Storage for GatedStorage {
    fn catalog(&self) -> io::Result<Arc<dyn BlockStore>> {
        self.inner.catalog()
    }
    fn database(&self, name: &str) -> io::Result<Arc<dyn BlockStore>> {
        Ok(Arc::new(GatedStore {
            inner: self.inner.database(name)?,
            gate: self.gate.clone(),
            events: self.events.clone(),
        }))
    }
    fn databases(&self) -> io::Result<Vec<String>> {
        self.inner.databases()
    }
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
    let (release_tx, release_rx) = channel();
    let (here_tx, here_rx) = channel();
    let gate = Arc::new(Gate {
        arrived: StdMutex::new(Some(arrived_tx)),
        helper_here: StdMutex::new(Some(here_rx)),
        release: StdMutex::new(Some(release_rx)),
        seen: std::sync::atomic::AtomicBool::new(false),
    });
    let events: Events = Arc::default();
    let store_opts = bitcask::Options {
        vfs: Arc::new(rig.vfs.clone()),
        clock: Arc::new(rig.clock.clone()),
        ..bitcask::Options::default()
    };
    let storage = GatedStorage {
        inner: BitcaskStorage::new(Path::new("/sensor/data"), store_opts, Box::new(|_| {})),
        gate: gate.clone(),
        events: events.clone(),
    };
    let (e, _) = Engine::open(
        Path::new("/sensor/wal"),
        rig.opts.clone(),
        Arc::new(storage),
        T0,
    )
    .unwrap();
    let key = "m{a=\"1\"}";
    for k in 0..100i64 {
        let t = T0 + k * 3 * SEC;
        e.write("db", &one(key, vec![s(t, k as f64)]), t).unwrap();
        e.tick(t).unwrap();
    }
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
    assert!(gate.seen.load(Ordering::SeqCst), "no helper read a window");
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
