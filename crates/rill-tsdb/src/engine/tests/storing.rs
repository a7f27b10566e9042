//! Reads while blocks are being stored: a block leaves memory only once
//! it is in its store.

use super::*;
use crate::storage::{BlockStore, Storage};

/// Storage whose blocks run a hook before each put (a read, here).
struct HookedStorage {
    inner: BitcaskStorage,
    hook: Arc<std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>>,
}

struct HookedStore {
    inner: Arc<dyn BlockStore>,
    hook: Arc<std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>>,
}

impl BlockStore for HookedStore {
    fn put(&self, key: &[u8], value: &[u8], expires_at_s: Option<u64>) -> io::Result<()> {
        if let Some(h) = self.hook.get() {
            h();
        }
        self.inner.put(key, value, expires_at_s)
    }
    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
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

impl Storage for HookedStorage {
    fn catalog(&self) -> io::Result<Arc<dyn BlockStore>> {
        self.inner.catalog()
    }
    fn database(&self, name: &str) -> io::Result<Arc<dyn BlockStore>> {
        Ok(Arc::new(HookedStore {
            inner: self.inner.database(name)?,
            hook: self.hook.clone(),
        }))
    }
    fn databases(&self) -> io::Result<Vec<String>> {
        self.inner.databases()
    }
}

type Hook = Arc<std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>>;

/// An engine whose blocks run a hook (set later) before each put.
fn hooked(rig: &Rig) -> (Arc<Engine>, Hook) {
    let store_opts = bitcask::Options {
        vfs: Arc::new(rig.vfs.clone()),
        clock: Arc::new(rig.clock.clone()),
        max_file_size_bytes: 8192,
        ..bitcask::Options::default()
    };
    let hook: Hook = Arc::new(std::sync::OnceLock::new());
    let storage = HookedStorage {
        inner: BitcaskStorage::new(Path::new("/sensor/data"), store_opts, Box::new(|_| {})),
        hook: hook.clone(),
    };
    let (e, _) = Engine::open(
        Path::new("/sensor/wal"),
        rig.opts.clone(),
        Arc::new(storage),
        T0,
    )
    .unwrap();
    (Arc::new(e), hook)
}

/// Writers that keep cutting blocks while a tick stores do not keep the
/// tick going: it stores what was queued when it began, then syncs and
/// lets the log go.
#[test]
fn a_tick_ends_while_ingest_goes_on() {
    let rig = Rig::new(100 * SEC, 4);
    let (e, hook) = hooked(&rig);
    let key = "t{a=\"1\"}";
    let block =
        |i: i64| -> Vec<Sample> { (0..4).map(|j| s(T0 + (4 * i + j) * SEC, 1.0)).collect() };
    for i in 0..10 {
        e.write("db", &one(key, block(i)), T0).unwrap();
    }
    assert_eq!(e.waiting(), (0, 10));
    // Each put, a writer cuts another block.
    let (weak, next) = (Arc::downgrade(&e), Arc::new(AtomicU64::new(10)));
    let write: Box<dyn Fn() + Send + Sync> = Box::new(move || {
        let e = weak.upgrade().expect("the engine is open");
        // (Bounded, so a tick that kept going would end and be seen.)
        let i = next.fetch_add(1, Ordering::SeqCst) as i64;
        if i < 200 {
            e.write("db", &one(key, block(i)), T0).unwrap();
        }
    });
    assert!(hook.set(write).is_ok());
    let t = e.tick(T0).unwrap();
    assert_eq!(t.blocks_stored, 10);
    assert_eq!(e.waiting(), (0, 10));
}

#[test]
fn a_read_while_a_block_is_stored_sees_every_sample_once() {
    let rig = Rig::new(100 * SEC, 4);
    let (e, hook) = hooked(&rig);
    let key = "t{a=\"1\"}";
    // Blocks queued, the second write overwriting half of the first in
    // later parts of the same windows.
    let round = |n: i64, v: f64| -> Vec<Sample> { (0..n).map(|i| s(T0 + i * SEC, v)).collect() };
    e.write("db", &one(key, round(200, 1.0)), T0).unwrap();
    e.write("db", &one(key, round(100, 2.0)), T0).unwrap();
    let want: Vec<Sample> = (0..200)
        .map(|i| s(T0 + i * SEC, if i < 100 { 2.0 } else { 1.0 }))
        .collect();
    assert_eq!(e.waiting(), (0, 75));
    // Before each block goes into its store, a read: it must see every
    // sample once, the later value winning.
    let reads = Arc::new(AtomicU64::new(0));
    let (weak, n) = (Arc::downgrade(&e), reads.clone());
    let read: Box<dyn Fn() + Send + Sync> = Box::new(move || {
        let e = weak.upgrade().expect("the engine is open");
        let got = e.read("db", key, i64::MIN, i64::MAX, T0).unwrap();
        assert!(
            got == want,
            "a read while storing differs ({} samples)",
            got.len()
        );
        n.fetch_add(1, Ordering::SeqCst);
    });
    assert!(hook.set(read).is_ok());
    let t = e.tick(T0).unwrap();
    assert_eq!(t.blocks_stored, 75);
    assert_eq!(reads.load(Ordering::SeqCst), 75);
    assert_eq!(e.waiting(), (0, 0));
}
