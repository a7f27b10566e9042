use super::*;
use crate::storage::BitcaskStorage;
use bitcask::vfs::SimVfs;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub(super) const SEC: i64 = 1_000_000_000;
/// A start far from zero, in whole windows.
pub(super) const T0: i64 = 1_700_000_000 * SEC;

/// The stores' clock, moved by the test (Unix time, as the engine's
/// `now`).
#[derive(Clone)]
pub(super) struct Clock(Arc<AtomicU64>);

impl bitcask::Clock for Clock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }
}

pub(super) struct Rig {
    pub(super) vfs: SimVfs,
    pub(super) clock: Clock,
    pub(super) opts: EngineOptions,
}

impl Rig {
    pub(super) fn new(window_ns: i64, block_samples: usize) -> Rig {
        let vfs = SimVfs::new();
        let mut opts = EngineOptions::new(WalOptions {
            vfs: Arc::new(vfs.clone()),
            segment_bytes: 4096,
            sync: true,
        });
        opts.window_ns = window_ns;
        opts.block_samples = block_samples;
        opts.grace_ns = 0;
        Rig {
            vfs,
            clock: Clock(Arc::new(AtomicU64::new(T0 as u64))),
            opts,
        }
    }

    fn set_now(&self, now: i64) {
        self.clock.0.store(now as u64, Ordering::SeqCst);
    }

    pub(super) fn open_on(&self, vfs: &SimVfs, now: i64) -> (Engine, OpenReport) {
        self.try_open_on(vfs, now).unwrap()
    }

    pub(super) fn try_open_on(
        &self,
        vfs: &SimVfs,
        now: i64,
    ) -> Result<(Engine, OpenReport), EngineError> {
        let store_opts = bitcask::Options {
            vfs: Arc::new(vfs.clone()),
            clock: Arc::new(self.clock.clone()),
            max_file_size_bytes: 8192,
            ..bitcask::Options::default()
        };
        let storage = BitcaskStorage::new(
            Path::new("/sensor/data"),
            store_opts,
            Box::new(|_| {}),
            Box::new(|_| {}),
        );
        let mut opts = self.opts.clone();
        opts.wal.vfs = Arc::new(vfs.clone());
        Engine::open(Path::new("/sensor/wal"), opts, Arc::new(storage), now)
    }

    pub(super) fn open(&self, now: i64) -> Engine {
        self.open_on(&self.vfs, now).0
    }
}

pub(super) fn s(ts: i64, value: f64) -> Sample {
    Sample { ts, value }
}

/// Every sample of series `key` of `db`, by time.
pub(super) fn all_of(e: &Engine, key: &str) -> BTreeMap<i64, f64> {
    e.read("db", key, i64::MIN, i64::MAX, T0)
        .unwrap()
        .into_iter()
        .map(|x| (x.ts, x.value))
        .collect()
}

pub(super) fn one(key: &str, samples: Vec<Sample>) -> Vec<(String, Vec<Sample>)> {
    vec![(key.to_string(), samples)]
}

/// Series `key` of `db` given `n` samples 3 s apart from `T0` (sample `k`
/// valued `k`), each written and ticked at its time: windows are stored
/// as they close.
pub(super) fn every_3s(e: &Engine, key: &str, n: i64) {
    for k in 0..n {
        let t = T0 + k * 3 * SEC;
        e.write("db", &one(key, vec![s(t, k as f64)]), t).unwrap();
        e.tick(t).unwrap();
    }
}

#[test]
fn samples_are_read_back_from_buffers_queue_and_blocks() {
    let rig = Rig::new(100 * SEC, 4);
    let e = rig.open(T0);
    // Out of order, a repeated time keeping the later value.
    let r = e
        .write(
            "db",
            &one(
                "t{a=\"1\"}",
                vec![s(T0 + 3 * SEC, 3.0), s(T0 + SEC, 1.0), s(T0 + 3 * SEC, 3.5)],
            ),
            T0,
        )
        .unwrap();
    assert_eq!(r.written, 3);
    let all = |e: &Engine, now| e.read("db", "t{a=\"1\"}", i64::MIN, i64::MAX, now).unwrap();
    assert_eq!(all(&e, T0), vec![s(T0 + SEC, 1.0), s(T0 + 3 * SEC, 3.5)]);
    // Two more fill a block of four (cut, not stored until a tick).
    e.write(
        "db",
        &one(
            "t{a=\"1\"}",
            vec![s(T0 + 5 * SEC, 5.0), s(T0 + 7 * SEC, 7.0)],
        ),
        T0,
    )
    .unwrap();
    assert_eq!(e.waiting(), (0, 1));
    assert_eq!(all(&e, T0).len(), 4);
    let t = e.tick(T0).unwrap();
    assert_eq!(t.blocks_stored, 1);
    assert_eq!(t.series_recorded, 1);
    assert_eq!(e.waiting(), (0, 0));
    // A late sample for the same window: a second part, read after the
    // first, its value winning.
    e.write("db", &one("t{a=\"1\"}", vec![s(T0 + 5 * SEC, 50.0)]), T0)
        .unwrap();
    let got = all(&e, T0);
    assert_eq!(got[2], s(T0 + 5 * SEC, 50.0));
    // The window closes at its end; the part is stored once a tick finds
    // the window quiet (the first after the write does not).
    assert_eq!(e.tick(T0 + 99 * SEC).unwrap().blocks_stored, 0);
    let t = e.tick(T0 + 100 * SEC).unwrap();
    assert_eq!(t.blocks_stored, 1);
    assert_eq!(all(&e, T0 + 100 * SEC), got);
    // Range bounds are inclusive.
    let some = e
        .read("db", "t{a=\"1\"}", T0 + 3 * SEC, T0 + 5 * SEC, T0)
        .unwrap();
    assert_eq!(some, vec![s(T0 + 3 * SEC, 3.5), s(T0 + 5 * SEC, 50.0)]);
    assert!(e
        .read("db", "other", i64::MIN, i64::MAX, T0)
        .unwrap()
        .is_empty());
    assert!(e
        .read("nodb", "t{a=\"1\"}", i64::MIN, i64::MAX, T0)
        .unwrap()
        .is_empty());
    assert_eq!(e.series("db"), vec!["t{a=\"1\"}".to_string()]);
    assert_eq!(e.databases(), vec!["db".to_string()]);
}

#[test]
fn samples_outside_the_storage_period_or_too_far_ahead_are_counted_not_kept() {
    let mut rig = Rig::new(100 * SEC, 4);
    rig.opts.retention_ns = 1000 * SEC;
    rig.opts.max_future_ns = 10 * SEC;
    let e = rig.open(T0);
    let r = e
        .write(
            "db",
            &one(
                "k",
                vec![s(T0 - 2000 * SEC, 1.0), s(T0, 2.0), s(T0 + 11 * SEC, 3.0)],
            ),
            T0,
        )
        .unwrap();
    assert_eq!(
        r,
        WriteReport {
            written: 1,
            too_old: 1,
            too_new: 1,
            bad_series: 0,
        }
    );
    assert_eq!(
        e.read("db", "k", i64::MIN, i64::MAX, T0).unwrap(),
        vec![s(T0, 2.0)]
    );
    // A series key too long is refused alone; the others are written.
    let long = "x".repeat(crate::keys::MAX_NAME_BYTES + 1);
    let batch = vec![
        (long, vec![s(T0, 1.0)]),
        ("ok".to_string(), vec![s(T0, 3.0)]),
    ];
    let r = e.write("db", &batch, T0).unwrap();
    assert_eq!((r.written, r.bad_series), (1, 1));
    assert_eq!(
        e.read("db", "ok", i64::MIN, i64::MAX, T0).unwrap(),
        vec![s(T0, 3.0)]
    );
}

#[test]
fn a_restart_replays_the_log_and_a_clean_stop_leaves_it_empty() {
    let rig = Rig::new(100 * SEC, 8);
    let e = rig.open(T0);
    let mut want = BTreeMap::new();
    for i in 0..50i64 {
        let key = format!("k{}", i % 3);
        let ts = T0 + i * 7 * SEC;
        e.write("db", &one(&key, vec![s(ts, i as f64)]), T0)
            .unwrap();
        want.entry(key)
            .or_insert_with(Vec::new)
            .push(s(ts, i as f64));
        if i % 10 == 9 {
            e.tick(T0 + i * 7 * SEC).unwrap();
        }
    }
    let check = |e: &Engine| {
        for (key, samples) in &want {
            let got = e.read("db", key, i64::MIN, i64::MAX, T0).unwrap();
            assert_eq!(&got, samples, "{key}");
        }
    };
    check(&e);
    // Killed: the log brings back what was not yet in blocks.
    drop(e);
    let after = rig.vfs.kill_process();
    let (e, report) = rig.open_on(&after, T0);
    assert_eq!(report.series, 3);
    assert!(report.replayed_samples > 0);
    check(&e);
    // A clean stop stores everything; the log keeps one new, empty
    // segment.
    let segments_before = e.log_segments();
    e.close().unwrap();
    let segments = e.log_segments();
    assert_eq!(segments.len(), 1);
    assert!(
        segments[0] >= *segments_before.last().unwrap(),
        "{segments_before:?} then {segments:?}"
    );
    drop(e);
    let (e, report) = rig.open_on(&after.kill_process(), T0);
    assert_eq!(report.replayed_samples, 0);
    assert_eq!(report.series, 3, "series records in the catalog store");
    check(&e);
}

#[test]
fn windows_expire_with_their_blocks() {
    let mut rig = Rig::new(100 * SEC, 1000);
    rig.opts.retention_ns = 300 * SEC;
    let e = rig.open(T0);
    e.write(
        "db",
        &one("k", vec![s(T0 + SEC, 1.0), s(T0 + 150 * SEC, 2.0)]),
        T0 + 150 * SEC,
    )
    .unwrap();
    // The first tick after the write finds the windows just written.
    e.tick(T0 + 249 * SEC).unwrap();
    e.tick(T0 + 250 * SEC).unwrap();
    let stored = block_keys(e.storage.shard("db", 0).unwrap().as_ref()).unwrap();
    assert_eq!(stored.len(), 2);
    let read = |now| e.read("db", "k", i64::MIN, i64::MAX, now).unwrap();
    assert_eq!(read(T0 + 250 * SEC).len(), 2);
    // The first window ends at T0 + 100 s: gone at T0 + 400 s.
    rig.set_now(T0 + 400 * SEC);
    assert_eq!(read(T0 + 400 * SEC), vec![s(T0 + 150 * SEC, 2.0)]);
    // Read as of an earlier time (the engine's own filter lets the first
    // sample through): the store no longer has its block.
    assert_eq!(read(T0 + 250 * SEC), vec![s(T0 + 150 * SEC, 2.0)]);
    let stored = block_keys(e.storage.shard("db", 0).unwrap().as_ref()).unwrap();
    assert_eq!(
        stored.len(),
        1,
        "the store no longer serves the expired block"
    );
    rig.set_now(T0 + 500 * SEC);
    assert!(read(T0 + 500 * SEC).is_empty());
}

/// Writers on threads and a thread ticking as their samples' time moves
/// on (windows closing, blocks stored, log segments deleted), a power cut
/// at a random moment keeping a random share of what was not synced:
/// every acknowledged sample comes back with its value.
/// `RILL_TSDB_SEEDS=N` runs more seeds.
#[test]
fn every_acknowledged_sample_survives_a_power_cut() {
    // 12 seeds in CI (about 1.5 s each in a debug build); see
    // docs/sensors.md for the long runs.
    let seeds: u64 = std::env::var("RILL_TSDB_SEEDS").map_or(12, |v| v.parse().unwrap());
    let mut deleted_before_cut = 0;
    for seed in 0..seeds {
        let mut rig = Rig::new(20 * SEC, 16);
        rig.opts.wal.segment_bytes = 1024;
        let e = rig.open(T0);
        rig.vfs.arm_crash(40 + seed * 97 % 3000, seed);
        let acked: Mutex<BTreeMap<(String, i64), f64>> = Mutex::new(BTreeMap::new());
        // Each writer's write in flight at the cut (it may or may not be
        // there).
        let unsure: Mutex<BTreeMap<(String, i64), f64>> = Mutex::new(BTreeMap::new());
        let progress = std::sync::atomic::AtomicI64::new(0);
        let writing = std::sync::atomic::AtomicUsize::new(3);
        std::thread::scope(|scope| {
            for w in 0..3i64 {
                let (e, acked, unsure) = (&e, &acked, &unsure);
                let (progress, writing) = (&progress, &writing);
                scope.spawn(move || {
                    for i in 0..400i64 {
                        // Two series per writer, out of order within a
                        // window; every fifth write gives a time written
                        // before a new value (the later value must win).
                        // Two series per writer, fields of one group
                        // (one of them missing every seventh time).
                        let j = if i % 5 == 4 { i - 4 } else { i };
                        let ts = T0 + (j ^ 3) * SEC;
                        let value = (w * 1000 + i) as f64 / 4.0;
                        let fields = if i % 7 == 3 { 1 } else { 2 };
                        let series: Vec<(String, Vec<Sample>)> = (0..fields)
                            .map(|f| (format!("w{w}s{f}"), vec![s(ts, value + f as f64)]))
                            .collect();
                        let group = format!("w{w}");
                        let groups = vec![Some(group.as_str()); fields];
                        let done = e.write_grouped("db", &series, &groups, T0).is_ok();
                        let mut into = if done { acked.lock() } else { unsure.lock() }.unwrap();
                        for (key, v) in series {
                            into.insert((key, ts), v[0].value);
                        }
                        drop(into);
                        if !done {
                            break;
                        }
                        progress.fetch_max(i, Ordering::SeqCst);
                    }
                    writing.fetch_sub(1, Ordering::SeqCst);
                });
            }
            let (e, progress, writing) = (&e, &progress, &writing);
            let deleted = &mut deleted_before_cut;
            scope.spawn(move || {
                while writing.load(Ordering::SeqCst) > 0 {
                    match e.tick(T0 + progress.load(Ordering::SeqCst) * SEC) {
                        Ok(t) => *deleted += t.segments_deleted,
                        Err(_) => return,
                    }
                    std::thread::yield_now();
                }
            });
        });
        if !rig.vfs.crashed() {
            rig.vfs.disarm();
            rig.vfs.crash(seed);
        }
        drop(e);
        let after = rig.vfs.next_boot();
        let (e, _) = rig.open_on(&after, T0);
        let (acked, unsure) = (acked.into_inner().unwrap(), unsure.into_inner().unwrap());
        let mut by_key: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for ((key, ts), value) in &acked {
            by_key.entry(key).or_default().push(s(*ts, *value));
        }
        for (key, want) in by_key {
            let got: BTreeMap<i64, f64> = all_of(&e, key);
            for w in want {
                let maybe = unsure.get(&(key.to_string(), w.ts));
                let v = got.get(&w.ts);
                assert!(
                    v == Some(&w.value) || (maybe.is_some() && v == maybe),
                    "seed {seed}: {key} at {}: {v:?}, acknowledged {}",
                    w.ts,
                    w.value
                );
            }
        }
        // And it goes on: a tick and a clean stop on the next boot.
        e.tick(T0 + 1000 * SEC).unwrap();
        e.close().unwrap();
    }
    assert!(
        deleted_before_cut > 0,
        "the runs deleted log segments before the cut"
    );
}

/// A full disk fails writes or ticks, never an acknowledged sample; once
/// there is room, blocks are stored and writes go on.
#[test]
fn a_full_disk_loses_nothing_acknowledged() {
    let rig = Rig::new(10 * SEC, 8);
    let e = rig.open(T0);
    let mut acked = BTreeMap::new();
    let mut failed = 0;
    for i in 0..600i64 {
        if i == 100 {
            rig.vfs.set_capacity(Some(rig.vfs.used_bytes() + 2000));
        }
        if i == 400 {
            rig.vfs.set_capacity(None);
        }
        let ts = T0 + i * SEC;
        match e.write("db", &one("k", vec![s(ts, i as f64)]), T0) {
            Ok(_) => drop(acked.insert(ts, i as f64)),
            Err(_) => failed += 1,
        }
        let _ = e.tick(ts);
    }
    assert!(failed > 0, "the disk filled");
    e.tick(T0 + 700 * SEC).unwrap();
    assert_eq!(
        e.waiting(),
        (0, 0),
        "every block stored once there was room"
    );
    let got: BTreeMap<i64, f64> = all_of(&e, "k");
    for (ts, v) in &acked {
        assert_eq!(got.get(ts), Some(v));
    }
    drop(e);
    let (e, _) = rig.open_on(&rig.vfs.kill_process(), T0);
    let again: BTreeMap<i64, f64> = all_of(&e, "k");
    assert_eq!(again, got);
}

#[test]
fn a_damaged_block_is_an_error_naming_it() {
    let mut rig = Rig::new(100 * SEC, 2);
    // No block kept in memory: the block is damaged beneath the engine,
    // which would otherwise serve the copy it kept as it wrote it.
    rig.opts.block_cache = crate::cache::BlockCache::new(0);
    let e = rig.open(T0);
    e.write(
        "db",
        &one("press_kpa", vec![s(T0, 1.0), s(T0 + SEC, 2.0)]),
        T0,
    )
    .unwrap();
    e.tick(T0).unwrap();
    let store = e.storage.shard("db", 0).unwrap();
    let key = crate::keys::block_key(0, T0 - T0 % (100 * SEC), 0);
    let mut block = store.get(&key).unwrap().unwrap();
    let at = block.len() / 2;
    block[at] ^= 0x10;
    store.put(&key, &block, None).unwrap();
    let err = e
        .read("db", "press_kpa", i64::MIN, i64::MAX, T0)
        .unwrap_err();
    assert!(matches!(err, EngineError::Damaged { part: 0, .. }), "{err}");
    assert!(err.to_string().contains("press_kpa"), "{err}");
}

/// A window far ahead (a sensor whose clock is a day fast) stays open,
/// but the log does not grow past its budget: the windows holding its
/// oldest segments are cut early, and nothing is lost.
#[test]
fn the_log_stays_within_its_budget() {
    let mut rig = Rig::new(100 * SEC, 1000);
    rig.opts.wal.segment_bytes = 512;
    rig.opts.max_log_segments = 3;
    let e = rig.open(T0);
    let ahead = T0 + DAY_NS;
    e.write("db", &one("fast", vec![s(ahead, 1.0)]), T0)
        .unwrap();
    for i in 0..300i64 {
        e.write("db", &one("k", vec![s(T0 + i * SEC / 10, i as f64)]), T0)
            .unwrap();
        e.tick(T0).unwrap();
    }
    assert!(e.log_segments().len() <= 5, "{:?}", e.log_segments());
    assert_eq!(
        e.read("db", "fast", i64::MIN, i64::MAX, T0).unwrap(),
        vec![s(ahead, 1.0)]
    );
    assert_eq!(
        e.read("db", "k", i64::MIN, i64::MAX, T0).unwrap().len(),
        300
    );
    drop(e);
    let (e, _) = rig.open_on(&rig.vfs.kill_process(), T0);
    assert_eq!(
        e.read("db", "fast", i64::MIN, i64::MAX, T0).unwrap(),
        vec![s(ahead, 1.0)]
    );
    assert_eq!(
        e.read("db", "k", i64::MIN, i64::MAX, T0).unwrap().len(),
        300
    );
}

/// Live ingest, a tick a second: blocks fill to their size (ticks do not
/// start log segments of their own, which would put windows over the
/// log's budget and cut them early).
#[test]
fn live_ingest_fills_whole_blocks() {
    let rig = Rig::new(10_000 * SEC, 64);
    let e = rig.open(T0);
    for i in 0..640i64 {
        let now = T0 + i * SEC;
        e.write("db", &one("live", vec![s(now, i as f64)]), now)
            .unwrap();
        e.tick(now).unwrap();
    }
    let st = e.stats();
    assert_eq!(st.blocks_stored, 10, "{st:?}");
    assert_eq!(st.samples_buffered, 0, "{st:?}");
    assert_eq!(all_of(&e, "live").len(), 640);
}

mod budget;
mod digests;
mod groups;
mod helper_reads;
mod homes;
mod hooked;
mod in_ms;
mod storing;
