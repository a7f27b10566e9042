//! Reads while blocks are being stored: a block leaves memory only once
//! it is in its store.

use super::hooked::hooked;
use super::*;

/// Writers that keep cutting blocks while a tick stores do not keep the
/// tick going: it stores what was queued when it began, then syncs and
/// lets the log go.
#[test]
fn a_tick_ends_while_ingest_goes_on() {
    let rig = Rig::new(100 * SEC, 4);
    let (e, hooks) = hooked(&rig);
    let e = Arc::new(e);
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
    assert!(hooks.before_put.set(write).is_ok());
    let t = e.tick(T0).unwrap();
    assert_eq!(t.blocks_stored, 10);
    assert_eq!(e.waiting(), (0, 10));
}

#[test]
fn a_read_while_a_block_is_stored_sees_every_sample_once() {
    let rig = Rig::new(100 * SEC, 4);
    let (e, hooks) = hooked(&rig);
    let e = Arc::new(e);
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
    assert!(hooks.before_put.set(read).is_ok());
    let t = e.tick(T0).unwrap();
    assert_eq!(t.blocks_stored, 75);
    assert_eq!(reads.load(Ordering::SeqCst), 75);
    assert_eq!(e.waiting(), (0, 0));
}

/// A read over more windows than are held at once (stored parts, a late
/// part overlapping its window's first, buffered samples at the end)
/// gives every sample once, in order, and cuts a range inside windows.
#[test]
fn a_read_over_many_windows_gives_every_sample_in_order() {
    let rig = Rig::new(10 * SEC, 8);
    let e = rig.open(T0);
    let key = "m{a=\"1\"}";
    let mut want = BTreeMap::new();
    // 75 windows of 10 s, a sample every 3 s; stored as windows close.
    for k in 0..250i64 {
        let t = T0 + k * 3 * SEC;
        e.write("db", &one(key, vec![s(t, k as f64)]), t).unwrap();
        want.insert(t, k as f64);
        e.tick(t).unwrap();
    }
    // Late samples of window 40: a second part, over the first's times.
    let w40 = T0 + 400 * SEC;
    let late = vec![s(w40 + 3 * SEC, -1.0), s(w40 + 4 * SEC, -2.0)];
    let now = T0 + 750 * SEC;
    e.write("db", &one(key, late.clone()), now).unwrap();
    e.tick(now).unwrap();
    for x in late {
        want.insert(x.ts, x.value);
    }
    let pairs = |v: Vec<Sample>| v.into_iter().map(|x| (x.ts, x.value)).collect::<Vec<_>>();
    let got = pairs(e.read("db", key, i64::MIN, i64::MAX, now).unwrap());
    assert_eq!(got, want.clone().into_iter().collect::<Vec<_>>());
    // Cut inside the first and the last window of the range.
    let (a, b) = (T0 + 14 * SEC, T0 + 701 * SEC);
    let got = pairs(e.read("db", key, a, b, now).unwrap());
    let cut: Vec<(i64, f64)> = want.range(a..=b).map(|(&t, &v)| (t, v)).collect();
    assert_eq!(got, cut);
    let p = e.read_points("db", key, a, b, now).unwrap();
    assert_eq!(
        p.iter().collect::<Vec<_>>(),
        cut.iter().map(|&(t, v)| (t, v)).collect::<Vec<_>>()
    );
}

/// A damaged block anywhere in a long read (read by the caller or by a
/// helper thread) fails the read with an error naming its window; the
/// same read over the windows after it still gives their samples.
#[test]
fn a_damaged_block_in_a_long_read_is_named_wherever_it_is() {
    let mut rig = Rig::new(10 * SEC, 8);
    // The blocks are damaged in the store under the engine: none kept in
    // memory, every read goes to the store.
    rig.opts.block_cache = crate::cache::BlockCache::new(0);
    let e = rig.open(T0);
    let key = "m{a=\"1\"}";
    every_3s(&e, key, 100);
    let now = T0 + 400 * SEC;
    e.tick(now).unwrap();
    let store = e.storage.shard("db", 0).unwrap();
    for w in [0i64, 1, 14, 28] {
        let window = T0 - T0 % (10 * SEC) + w * 10 * SEC;
        let bkey = crate::keys::block_key(0, window, 0);
        let good = store.get(&bkey).unwrap().expect("stored");
        let mut bad = good.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x10;
        store.put(&bkey, &bad, None).unwrap();
        let err = e.read("db", key, i64::MIN, i64::MAX, now).unwrap_err();
        match &err {
            EngineError::Damaged { window: got, .. } => assert_eq!(*got, window, "{err}"),
            other => panic!("window {w}: {other}"),
        }
        let after = e.read("db", key, window + 10 * SEC, i64::MAX, now).unwrap();
        // Samples every 3 s from the next window's start.
        assert_eq!(
            after.len() as i64,
            100 - ((w + 1) * 10 + 2) / 3,
            "window {w}"
        );
        store.put(&bkey, &good, None).unwrap();
    }
    assert_eq!(
        e.read("db", key, i64::MIN, i64::MAX, now).unwrap().len(),
        100
    );
}

/// Blocks are found by their window: a node opened with another window
/// length than its data was written with is refused, naming both (it
/// would not find the blocks); with the same length, everything reads
/// back.
#[test]
fn another_window_length_is_refused_naming_both() {
    let mut rig = Rig::new(10 * SEC, 8);
    let e = rig.open(T0);
    let key = "m{a=\"1\"}";
    every_3s(&e, key, 40);
    let now = T0 + 200 * SEC;
    e.tick(now).unwrap();
    let before = e.read("db", key, i64::MIN, i64::MAX, now).unwrap();
    assert_eq!(before.len(), 40);
    drop(e);
    rig.opts.window_ns = 60 * SEC;
    let err = match rig.try_open_on(&rig.vfs.clone(), now) {
        Ok(_) => panic!("opened with another window"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("sensor.window = 10s, not 1m"), "{err}");
    rig.opts.window_ns = 10 * SEC;
    let e = rig.open(now);
    assert_eq!(e.read("db", key, i64::MIN, i64::MAX, now).unwrap(), before);
}
