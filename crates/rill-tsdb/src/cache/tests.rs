use super::*;
use std::sync::atomic::AtomicUsize;

/// A store in memory counting the reads that reach it; `blocking` makes
/// its `try_get` say it would wait; `refusing` makes its puts store
/// nothing (as a block past its storage period is not stored);
/// `panicking` makes its next put panic once its value is in.
/// `during_put` runs inside a put, before the new value is in;
/// `after_put` inside it, once the value is in.
type Hook = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Mem {
    map: Mutex<std::collections::HashMap<Vec<u8>, Vec<u8>>>,
    reads: AtomicUsize,
    blocking: std::sync::atomic::AtomicBool,
    refusing: std::sync::atomic::AtomicBool,
    panicking: std::sync::atomic::AtomicBool,
    during_put: Mutex<Option<Hook>>,
    after_put: Mutex<Option<Hook>>,
}

impl BlockStore for Mem {
    fn put(&self, key: &[u8], value: &[u8], _: Option<u64>) -> io::Result<()> {
        let hook = self.during_put.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        if !self.refusing.load(Ordering::SeqCst) {
            self.map
                .lock()
                .unwrap()
                .insert(key.to_vec(), value.to_vec());
        }
        if self.panicking.swap(false, Ordering::SeqCst) {
            panic!("a put that panics");
        }
        let hook = self.after_put.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        Ok(())
    }
    fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.map.lock().unwrap().get(key).cloned())
    }
    fn try_get(&self, key: &[u8]) -> Option<io::Result<Option<Vec<u8>>>> {
        if self.blocking.load(Ordering::SeqCst) {
            return None;
        }
        Some(self.get(key))
    }
    fn contains(&self, key: &[u8]) -> bool {
        self.map.lock().unwrap().contains_key(key)
    }
    fn fold(&self, _: &mut dyn FnMut(&[u8], &[u8])) -> io::Result<()> {
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

fn rig(bytes: usize) -> (Arc<Mem>, Arc<BlockCache>, Arc<dyn BlockStore>) {
    let mem = Arc::new(Mem::default());
    let cache = BlockCache::new(bytes);
    let store = cache.wrap(mem.clone());
    (mem, cache, store)
}

fn key(i: u32) -> Vec<u8> {
    format!("B{i:08}").into_bytes()
}

/// What a hook's read of `key(1)` through `store` found.
type Seen = Arc<Mutex<Option<Vec<u8>>>>;

/// A hook reading `key(1)` through `store` (held weakly: the hook lives
/// in the store beneath it), and what it found.
fn reading(store: &Arc<dyn BlockStore>) -> (Hook, Seen) {
    let reader = Arc::downgrade(store);
    let seen = Seen::default();
    let seen_in = seen.clone();
    let hook: Hook = Box::new(move || {
        let store = reader.upgrade().expect("the store");
        *seen_in.lock().unwrap() = store.get(&key(1)).unwrap();
    });
    (hook, seen)
}

#[test]
fn a_block_read_again_comes_from_memory() {
    let (mem, cache, store) = rig(1 << 20);
    // Written beneath the cache: read from the store once.
    mem.put(&key(1), b"one", None).unwrap();
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(mem.reads.load(Ordering::SeqCst), 1);
    for _ in 0..3 {
        assert_eq!(
            store.get_shared(&key(1)).unwrap().as_deref(),
            Some(&b"one"[..])
        );
        let got = store.try_get_shared(&key(1)).unwrap().unwrap();
        assert_eq!(got.as_deref(), Some(&b"one"[..]));
    }
    assert_eq!(
        mem.reads.load(Ordering::SeqCst),
        1,
        "read once from the store"
    );
    // What the store does not hold is asked of it each time.
    assert_eq!(store.get(&key(2)).unwrap(), None);
    assert_eq!(store.get(&key(2)).unwrap(), None);
    assert_eq!(mem.reads.load(Ordering::SeqCst), 3);
    assert!(cache.bytes() > 0);
}

#[test]
fn a_put_replaces_what_was_kept() {
    let (_, _, store) = rig(1 << 20);
    store.put(&key(1), b"old", None).unwrap();
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"old"[..]));
    store.put(&key(1), b"new", None).unwrap();
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"new"[..]));
}

/// A read that began before a put (it found nothing kept, then read the
/// store's old value) does not keep that value once the put has come.
#[test]
fn a_read_overtaken_by_a_put_keeps_nothing() {
    let (mem, cache, store) = rig(1 << 20);
    mem.put(&key(1), b"old", None).unwrap();
    let Err(puts) = cache.get(0, &key(1)) else {
        panic!("nothing kept yet");
    };
    let old: Arc<[u8]> = mem.get(&key(1)).unwrap().unwrap().into();
    store.put(&key(1), b"new", None).unwrap();
    cache.keep(0, &key(1), &old, puts);
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"new"[..]));
}

#[test]
fn a_read_that_would_wait_keeps_nothing_and_says_so() {
    let (mem, _, store) = rig(1 << 20);
    mem.put(&key(1), b"one", None).unwrap();
    mem.blocking.store(true, Ordering::SeqCst);
    assert!(store.try_get_shared(&key(1)).is_none());
    assert!(store.try_get(&key(1)).is_none());
    mem.blocking.store(false, Ordering::SeqCst);
    assert_eq!(
        store.try_get(&key(1)).unwrap().unwrap().as_deref(),
        Some(&b"one"[..])
    );
    mem.blocking.store(true, Ordering::SeqCst);
    // Kept by the read that could be answered.
    assert_eq!(
        store.try_get(&key(1)).unwrap().unwrap().as_deref(),
        Some(&b"one"[..])
    );
}

/// The memory kept stays within the bound, and a block read again since
/// the clock hand last passed it outlives blocks read once.
#[test]
fn the_memory_kept_is_bounded_and_blocks_read_again_stay() {
    let budget = 64 << 10;
    let (mem, cache, store) = rig(budget);
    let value = vec![7u8; 1000];
    for i in 0..2000 {
        store.put(&key(i), &value, None).unwrap();
    }
    store.get(&key(0)).unwrap();
    for i in 1..2000 {
        // Block 0 read again as others come.
        store.get(&key(0)).unwrap();
        store.get(&key(i)).unwrap();
        assert!(cache.bytes() <= budget, "{} kept", cache.bytes());
    }
    let before = mem.reads.load(Ordering::SeqCst);
    store.get(&key(0)).unwrap();
    assert_eq!(mem.reads.load(Ordering::SeqCst), before, "block 0 kept");
    store.get(&key(5)).unwrap();
    assert_eq!(
        mem.reads.load(Ordering::SeqCst),
        before + 1,
        "block 5 made room"
    );
    // Nothing larger than a shard is kept.
    store.put(&key(9999), &vec![1u8; budget], None).unwrap();
    store.get(&key(9999)).unwrap();
    store.get(&key(9999)).unwrap();
    assert_eq!(mem.reads.load(Ordering::SeqCst), before + 3);
}

#[test]
fn a_cache_of_nothing_is_the_store_itself() {
    let (mem, cache, store) = rig(0);
    store.put(&key(1), b"one", None).unwrap();
    store.get(&key(1)).unwrap();
    store.get(&key(1)).unwrap();
    assert_eq!(mem.reads.load(Ordering::SeqCst), 2);
    assert_eq!(cache.bytes(), 0);
}

/// A block gone from the store (expired with its window) is not served
/// from memory either.
#[test]
fn a_block_the_store_no_longer_holds_is_not_served() {
    let (mem, _, store) = rig(1 << 20);
    store.put(&key(1), b"one", None).unwrap();
    assert!(store.get(&key(1)).unwrap().is_some());
    mem.map.lock().unwrap().remove(&key(1));
    assert_eq!(store.get(&key(1)).unwrap(), None);
    assert_eq!(store.try_get(&key(1)).unwrap().unwrap(), None);
}

/// Keys longer than a block's are read from the store each time.
#[test]
fn long_keys_are_not_kept() {
    let (mem, _, store) = rig(1 << 20);
    let long = vec![b'k'; MAX_KEY + 1];
    store.put(&long, b"v", None).unwrap();
    store.get(&long).unwrap();
    store.get(&long).unwrap();
    assert_eq!(mem.reads.load(Ordering::SeqCst), 2);
}

/// A read in the middle of a put (after what was kept was dropped, before
/// the new value is in) reads the old value: it must not stay kept once
/// the put is done.
#[test]
fn a_read_in_the_middle_of_a_put_is_not_kept_after_it() {
    let (mem, _, store) = rig(1 << 20);
    mem.put(&key(1), b"old", None).unwrap();
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"old"[..]));
    let (hook, seen) = reading(&store);
    *mem.during_put.lock().unwrap() = Some(hook);
    store.put(&key(1), b"new", None).unwrap();
    assert_eq!(
        seen.lock().unwrap().as_deref(),
        Some(&b"old"[..]),
        "read mid-put"
    );
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"new"[..]));
}

/// A block written is served from memory: its first read does not reach
/// the store.
#[test]
fn a_block_written_is_kept() {
    let (mem, cache, store) = rig(1 << 20);
    store.put(&key(1), b"one", None).unwrap();
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"one"[..]));
    let got = store.try_get_shared(&key(1)).unwrap().unwrap();
    assert_eq!(got.as_deref(), Some(&b"one"[..]));
    assert_eq!(mem.reads.load(Ordering::SeqCst), 0);
    assert!(cache.bytes() > 0);
}

/// A put the store did not keep (a block already past its storage
/// period) keeps nothing in memory either.
#[test]
fn a_block_the_store_refused_is_not_kept() {
    let (mem, cache, store) = rig(1 << 20);
    mem.refusing.store(true, Ordering::SeqCst);
    store.put(&key(1), b"one", None).unwrap();
    assert_eq!(cache.bytes(), 0);
    assert_eq!(store.get(&key(1)).unwrap(), None);
    assert_eq!(mem.reads.load(Ordering::SeqCst), 1);
}

/// Two puts of one key overlapping, the later to begin landing first:
/// while the other is still under way, a read gets what the store holds
/// (the other's value), not the first put's value kept once it ended.
#[test]
fn a_put_overlapping_another_keeps_nothing_stale() {
    let (mem, _, store) = rig(1 << 20);
    let (inner, weak_mem) = (Arc::downgrade(&store), Arc::downgrade(&mem));
    let (read, seen) = reading(&store);
    let read = Mutex::new(Some(read));
    // Put "b" begins; inside it, before its value is in, put "a" runs
    // whole; then, once "b" is in and before its put ends, a read.
    *mem.during_put.lock().unwrap() = Some(Box::new(move || {
        let store = inner.upgrade().expect("the store");
        store.put(&key(1), b"a", None).unwrap();
        *weak_mem.upgrade().unwrap().after_put.lock().unwrap() = read.lock().unwrap().take();
    }));
    store.put(&key(1), b"b", None).unwrap();
    assert_eq!(
        seen.lock().unwrap().as_deref(),
        Some(&b"b"[..]),
        "read mid-put"
    );
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"b"[..]));
}

/// A put that begins and ends while another of the same key is under
/// way, after the other's value is in: the other's value is not kept
/// once it ends (the store holds the later one).
#[test]
fn a_put_that_another_overtook_keeps_nothing() {
    let (mem, _, store) = rig(1 << 20);
    let inner = Arc::downgrade(&store);
    *mem.after_put.lock().unwrap() = Some(Box::new(move || {
        let store = inner.upgrade().expect("the store");
        store.put(&key(1), b"x2", None).unwrap();
    }));
    store.put(&key(1), b"x1", None).unwrap();
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"x2"[..]));
}

/// A put that panics after its value is in: what a read in the middle of
/// it kept (the old value) is not served after it, and later puts in the
/// cache are kept again.
#[test]
fn a_put_that_panics_leaves_the_cache_working() {
    let (mem, cache, store) = rig(1 << 20);
    mem.put(&key(1), b"old", None).unwrap();
    let reader = Arc::downgrade(&store);
    *mem.during_put.lock().unwrap() = Some(Box::new(move || {
        let store = reader.upgrade().expect("the store");
        assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"old"[..]));
    }));
    mem.panicking.store(true, Ordering::SeqCst);
    let s = store.clone();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.put(&key(1), b"new", None).unwrap();
    }));
    assert!(panicked.is_err());
    assert_eq!(store.get(&key(1)).unwrap().as_deref(), Some(&b"new"[..]));
    // Every shard keeps what is written again.
    for i in 2..200 {
        store.put(&key(i), b"v", None).unwrap();
    }
    let before = mem.reads.load(Ordering::SeqCst);
    for i in 2..200 {
        store.get(&key(i)).unwrap();
    }
    assert_eq!(mem.reads.load(Ordering::SeqCst), before, "all kept");
    assert!(cache.bytes() > 0);
}
