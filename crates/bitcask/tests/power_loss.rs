//! Power-loss model test: random puts, deletes, expiries, rotations,
//! merges (full and sparse reads, folds open across them), syncs, failed
//! fsyncs, a full disk, clean reopens and power cuts, between operations
//! and in the middle of them, on the simulated disk (`SimVfs`). After
//! each reopen every key is checked against a model of what may survive:
//! - a put or delete acknowledged as durable (o_sync, or followed by a
//!   completed `sync()` or clean close) is there;
//! - nothing older than that comes back (no deleted key returns);
//! - nothing never written appears;
//! - a batch (`write_batch`) survives whole or not at all;
//! - per-file statistics kept op by op equal the ones a reopen rebuilds.
//!
//! `BITCASK_POWER_SEEDS=N` runs N seeds (CI runs a bounded number; the
//! long run is in docs/durability.md); `BITCASK_POWER_SEED=S` replays one.

mod common;

use bitcask::vfs::{SimVfs, Vfs};
use bitcask::{BatchOp, Error, Options, PutOptions, Store, SyncStrategy, WriteMode};
use common::{file_counts, ManualClock, Rng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DIR: &str = "/disk/store";

/// A key's state: its value and expiry second, or `None` when absent.
type State = Option<(Vec<u8>, Option<u64>)>;

/// A key of a batch: the states it could have before, and the batch's.
type BatchItem = (Vec<u8>, Vec<State>, State);

fn visible(s: &State, now_s: u64) -> Option<&[u8]> {
    s.as_ref()
        .filter(|(_, exp)| exp.is_none_or(|e| e > now_s))
        .map(|(v, _)| v.as_slice())
}

/// What each key may hold now, and what it may hold after a power cut.
#[derive(Default)]
struct Model {
    /// States a read may return now (one, unless a write failed).
    now: BTreeMap<Vec<u8>, Vec<State>>,
    /// States a power cut may leave: the last durable one and every later
    /// attempt.
    after_crash: BTreeMap<Vec<u8>, Vec<State>>,
    /// Batches not known durable: each key with the states it could have
    /// before the batch and the state the batch gave it, while no later
    /// write touched the key.
    batches: Vec<Vec<BatchItem>>,
}

impl Model {
    fn exact(&self, key: &[u8]) -> Option<&State> {
        match self.now.get(key).map(Vec::as_slice) {
            None => Some(&None),
            Some([one]) => Some(one),
            Some(_) => None,
        }
    }

    /// A later write takes the key out of the batches it was in.
    fn touched(&mut self, key: &[u8]) {
        for b in &mut self.batches {
            b.retain(|(k, _, _)| k != key);
        }
    }

    /// A batch is about to be written: what its keys may hold before it.
    fn before_batch(&self, items: &[(Vec<u8>, State)]) -> Vec<BatchItem> {
        items
            .iter()
            .map(|(k, st)| {
                let before = self.after_crash.get(k).cloned().unwrap_or(vec![None]);
                (k.clone(), before, st.clone())
            })
            .collect()
    }

    /// A batch was written (or attempted): all of it or nothing survives.
    fn batch(&mut self, items: Vec<BatchItem>, durable: bool) {
        if !durable {
            self.batches.push(items);
        }
    }

    /// A write was acknowledged (`durable`: under o_sync).
    fn written(&mut self, key: &[u8], state: State, durable: bool) {
        self.touched(key);
        self.now.insert(key.to_vec(), vec![state.clone()]);
        let c = self.after_crash.entry(key.to_vec()).or_insert(vec![None]);
        if durable {
            *c = vec![state];
        } else {
            c.push(state);
        }
    }

    /// A write failed: it may or may not have happened.
    fn attempted(&mut self, key: &[u8], state: State) {
        self.touched(key);
        self.now
            .entry(key.to_vec())
            .or_insert(vec![None])
            .push(state.clone());
        self.after_crash
            .entry(key.to_vec())
            .or_insert(vec![None])
            .push(state);
    }

    /// Everything acknowledged so far is durable.
    fn synced(&mut self) {
        self.after_crash = self.now.clone();
        self.batches.clear();
    }

    /// After a reopen: every key must read as one of `allowed`'s states;
    /// what it reads becomes the one state, durable (it is what the disk
    /// holds).
    fn check_reopened(&mut self, s: &Store, crashed: bool, now_s: u64, ctx: &str) {
        if crashed {
            self.check_batches(s, now_s, ctx);
        }
        self.batches.clear();
        let keys: Vec<Vec<u8>> = self.after_crash.keys().cloned().collect();
        for key in keys {
            let allowed = if crashed {
                &self.after_crash[&key]
            } else {
                &self.now[&key]
            };
            let got = s
                .get(&key)
                .unwrap_or_else(|e| panic!("get after reopen, {ctx}: {e}"));
            // Several states may read alike (an empty value with and without
            // an expiry): all of them stay possible.
            let matching: Vec<State> = if got.is_none() {
                vec![None]
            } else {
                allowed
                    .iter()
                    .filter(|st| visible(st, now_s) == got.as_deref())
                    .cloned()
                    .collect()
            };
            if got.is_none() && !allowed.iter().any(|st| visible(st, now_s).is_none())
                || matching.is_empty()
            {
                panic!(
                    "{ctx}: key {} reads {:?} after a {}; allowed: {:?}",
                    String::from_utf8_lossy(&key),
                    got.as_ref().map(|v| v.len()),
                    if crashed { "power cut" } else { "clean reopen" },
                    allowed
                        .iter()
                        .map(|st| visible(st, now_s).map(<[u8]>::len))
                        .collect::<Vec<_>>()
                );
            }
            self.now.insert(key.clone(), matching.clone());
            self.after_crash.insert(key, matching);
        }
    }
}

impl Model {
    /// Each batch not known durable reads all new or all old: a key whose
    /// new state reads like another allowed state tells nothing.
    fn check_batches(&self, s: &Store, now_s: u64, ctx: &str) {
        for b in &self.batches {
            let mut seen: Vec<(String, bool)> = Vec::new();
            for (key, before, new) in b {
                let new_reads = visible(new, now_s);
                let ambiguous = before.iter().any(|st| visible(st, now_s) == new_reads);
                if ambiguous {
                    continue;
                }
                let got = s.get(key).unwrap_or_else(|e| panic!("get, {ctx}: {e}"));
                seen.push((
                    String::from_utf8_lossy(key).into_owned(),
                    got.as_deref() == new_reads,
                ));
            }
            assert!(
                seen.iter().all(|(_, n)| *n) || seen.iter().all(|(_, n)| !*n),
                "{ctx}: a batch survived in part (key, has the batch's state): {seen:?}"
            );
        }
    }
}

fn options(seed: u64, vfs: &SimVfs, clock: &Arc<ManualClock>) -> Options {
    let mut o = Options {
        max_file_size_bytes: 16 << 10,
        write_buffer_bytes: 4 << 10,
        vfs: Arc::new(vfs.clone()),
        clock: clock.clone(),
        // The background thread must not race the test's power cuts, so a
        // seed replays exactly: nothing of it is due during a run.
        flush_interval_ms: 3_600_000,
        seal_delay_ms: 3_600_000,
        ..Options::default()
    };
    match seed % 4 {
        0 => o.sync = SyncStrategy::OSync,
        1 => o.seal_delay_ms = 0,
        2 => {
            o.sync = SyncStrategy::Interval {
                interval_ms: 3_600_000,
            }
        }
        _ => {}
    }
    match (seed / 4) % 3 {
        0 => {
            o.write_mode = WriteMode::Direct;
            o.write_buffer_bytes = 8192;
        }
        1 => o.write_buffer_bytes = 0,
        _ => {}
    }
    if seed % 5 == 2 {
        o.sparse_live_share = 1.0;
    }
    o
}

struct Run {
    seed: u64,
    vfs: SimVfs,
    clock: Arc<ManualClock>,
    store: Option<Store>,
    model: Model,
    /// A write failed since the last reopen: the store may refuse writes
    /// and reads may be one of several states.
    troubled: bool,
    crashes: u64,
    /// `BITCASK_POWER_TRACE`: print every step and reopen.
    trace: bool,
    /// `BITCASK_POWER_WATCH=key`: print that key after every step.
    watch: Option<String>,
}

/// The names in the store directory, for traces.
fn names(vfs: &SimVfs) -> Vec<String> {
    vfs.list_dir(Path::new(DIR))
        .unwrap_or_default()
        .iter()
        .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .collect()
}

impl Run {
    fn store(&self) -> &Store {
        self.store.as_ref().expect("open")
    }

    fn durable_puts(&self) -> bool {
        self.store().options().sync == SyncStrategy::OSync
    }

    /// Reopens after a clean close or a power cut, and checks every key.
    fn reopen(&mut self, crash: bool, step: usize) {
        let ctx = format!("seed {} step {step}", self.seed);
        if self.trace {
            eprintln!(
                "reopen crash={crash} crashed={} troubled={} files {:?}",
                self.vfs.crashed(),
                self.troubled,
                names(&self.vfs)
            );
        }
        let old = self.store.take().expect("open");
        let mut crashed = crash || self.vfs.crashed();
        if crash && !self.vfs.crashed() {
            self.vfs = self.vfs.crash(self.seed.wrapping_mul(1000) + step as u64);
        }
        if crashed {
            // The old store's last writes fail: the power is out.
            drop(old);
            self.vfs = self.vfs.next_boot();
            self.crashes += 1;
        } else {
            match old.close() {
                Ok(()) if !self.troubled => self.model.synced(),
                Ok(()) => {}
                // A close that fails (a full disk, a failed fsync) may lose
                // what a power cut may: appends not yet written or synced.
                Err(_) => crashed = true,
            }
        }
        self.vfs.fail_syncs(None);
        self.vfs.set_capacity(None);
        // A power cut armed earlier may strike during recovery too.
        let mut tries = 0;
        let s = loop {
            match Store::open(DIR, options(self.seed, &self.vfs, &self.clock)) {
                Ok(s) => break s,
                Err(_) if self.vfs.crashed() && tries < 8 => {
                    self.vfs = self.vfs.next_boot();
                    crashed = true;
                    tries += 1;
                }
                Err(e) => panic!("reopen, {ctx}: {e}"),
            }
        };
        self.vfs.disarm();
        if self.trace {
            eprintln!("reopened crashed={crashed} files {:?}", names(&self.vfs));
        }
        self.model
            .check_reopened(&s, crashed, self.clock.now_s(), &ctx);
        // Statistics rebuilt by this open must equal a second rebuild.
        let counts = file_counts(&s);
        s.close().unwrap_or_else(|e| panic!("close, {ctx}: {e}"));
        let s = Store::open(DIR, options(self.seed, &self.vfs, &self.clock)).unwrap();
        assert_eq!(file_counts(&s), counts, "file statistics, {ctx}");
        self.store = Some(s);
        self.troubled = false;
    }

    fn write_batch(&mut self, items: Vec<(Vec<u8>, State)>) {
        let ops: Vec<BatchOp<'_>> = items
            .iter()
            .map(|(k, st)| match st {
                Some((v, _)) => BatchOp::Put { key: k, value: v },
                None => BatchOp::Delete { key: k },
            })
            .collect();
        let tracked = self.model.before_batch(&items);
        let r = self.store().write_batch(&ops);
        if self.trace {
            let keys: Vec<(String, Option<usize>)> = items
                .iter()
                .map(|(k, st)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        st.as_ref().map(|(v, _)| v.len()),
                    )
                })
                .collect();
            eprintln!("batch {keys:?}: {r:?}");
        }
        let durable = r.is_ok() && self.durable_puts();
        match r {
            Ok(()) => {
                for (k, st) in &items {
                    self.model.written(k, st.clone(), durable);
                }
            }
            Err(e) => {
                assert_failure_is_expected(&e, &self.vfs);
                self.troubled = true;
                for (k, st) in &items {
                    self.model.attempted(k, st.clone());
                }
            }
        }
        self.model.batch(tracked, durable);
    }

    fn write(&mut self, key: &[u8], state: State) {
        let s = self.store();
        let r = match &state {
            Some((v, exp)) => {
                let ttl = exp.map(|e| Duration::from_secs(e - self.clock.now_s()));
                s.put_with(key, v, PutOptions { ttl })
            }
            None => s.delete(key),
        };
        match r {
            Ok(()) => {
                let durable = self.durable_puts();
                self.model.written(key, state, durable);
            }
            Err(e) => {
                assert_failure_is_expected(&e, &self.vfs);
                self.troubled = true;
                self.model.attempted(key, state);
            }
        }
    }
}

/// Only the faults this test injects may fail an operation.
fn assert_failure_is_expected(e: &Error, vfs: &SimVfs) {
    let ok = matches!(
        e,
        Error::DiskFull { .. } | Error::PreviousIo { .. } | Error::Io { .. }
    ) || vfs.crashed();
    assert!(ok, "unexpected error: {e}");
}

fn run_seed(seed: u64, ops: usize) -> u64 {
    let vfs = SimVfs::new();
    let clock = ManualClock::starting_at(1_700_000_000);
    let mut rng = Rng::new(seed);
    let store = Store::open(DIR, options(seed, &vfs, &clock)).unwrap();
    let mut run = Run {
        seed,
        vfs,
        clock,
        store: Some(store),
        model: Model::default(),
        troubled: false,
        crashes: 0,
        trace: std::env::var("BITCASK_POWER_TRACE").is_ok(),
        watch: std::env::var("BITCASK_POWER_WATCH").ok(),
    };
    let keyspace = 20 + rng.below(60);
    let trace = run.trace;
    for step in 0..ops {
        let key = format!("key-{}", rng.below(keyspace)).into_bytes();
        let now = run.clock.now_s();
        let op = rng.below(100);
        if trace {
            eprintln!("step {step}: op {op} key {}", String::from_utf8_lossy(&key));
        }
        match op {
            36..=39 => {
                // A batch of puts and deletes of distinct keys.
                let mut items: Vec<(Vec<u8>, State)> = Vec::new();
                for _ in 0..2 + rng.below(4) {
                    let k = format!("key-{}", rng.below(keyspace)).into_bytes();
                    if items.iter().any(|(i, _)| *i == k) {
                        continue;
                    }
                    let st = if rng.chance(25) {
                        None
                    } else {
                        let len = if rng.chance(10) {
                            2000
                        } else {
                            rng.below(200) as usize
                        };
                        Some((rng.bytes(len), None))
                    };
                    items.push((k, st));
                }
                run.write_batch(items);
            }
            0..=35 => {
                let len = match rng.below(10) {
                    0 => 0,
                    1 => 2000 + rng.below(3000) as usize,
                    2 if rng.chance(20) => (32 << 10) + rng.below(4 << 10) as usize,
                    _ => rng.below(300) as usize,
                };
                let exp = rng.chance(15).then(|| now + 1 + rng.below(20));
                run.write(&key, Some((rng.bytes(len), exp)));
            }
            40..=51 => run.write(&key, None),
            52..=61 => {
                if let Some(state) = run.model.exact(&key) {
                    let want = visible(state, now).map(<[u8]>::to_vec);
                    let got = run.store().get(&key);
                    match got {
                        Ok(got) => assert_eq!(got, want, "get, seed {seed} step {step}"),
                        Err(e) => assert_failure_is_expected(&e, &run.vfs),
                    }
                }
            }
            62..=65 => run.clock.advance(Duration::from_secs(rng.below(8))),
            66..=73 => {
                let files: Vec<u32> = run
                    .store()
                    .file_stats()
                    .iter()
                    .filter(|f| !f.active && rng.chance(60))
                    .map(|f| f.file_id)
                    .collect();
                if rng.chance(25) {
                    // Merge while a fold is open: deletions wait for it.
                    let s = run.store();
                    let mut merged = false;
                    let r = s.fold_keys(|_| {
                        if !merged {
                            merged = true;
                            let r = s.merge(&files);
                            if trace {
                                eprintln!("merge in fold {files:?}: {r:?}");
                            }
                            if let Err(e) = r {
                                assert_failure_is_expected(&e, &run.vfs);
                            }
                        }
                        true
                    });
                    if let Err(e) = r {
                        assert_failure_is_expected(&e, &run.vfs);
                    }
                } else {
                    let r = run.store().merge(&files);
                    if trace {
                        eprintln!("merge {files:?}: {r:?}");
                    }
                    if let Err(e) = r {
                        assert_failure_is_expected(&e, &run.vfs);
                    }
                }
            }
            74..=78 => match run.store().sync() {
                Ok(()) => run.model.synced(),
                Err(e) => {
                    assert_failure_is_expected(&e, &run.vfs);
                    run.troubled = true;
                }
            },
            79..=81 => {
                if !run.troubled && run.model.now.values().all(|v| v.len() == 1) {
                    let mut seen = BTreeMap::new();
                    let r = run.store().fold(|k, v| {
                        assert!(seen.insert(k.to_vec(), v.to_vec()).is_none());
                        true
                    });
                    if r.is_ok() {
                        let want: BTreeMap<Vec<u8>, Vec<u8>> = run
                            .model
                            .now
                            .iter()
                            .filter_map(|(k, st)| {
                                visible(&st[0], now).map(|v| (k.clone(), v.to_vec()))
                            })
                            .collect();
                        let differ: Vec<String> = want
                            .keys()
                            .chain(seen.keys())
                            .filter(|k| want.get(*k) != seen.get(*k))
                            .map(|k| {
                                format!(
                                    "{} (model {:?}, fold {:?})",
                                    String::from_utf8_lossy(k),
                                    want.get(k).map(Vec::len),
                                    seen.get(k).map(Vec::len)
                                )
                            })
                            .collect();
                        assert!(
                            differ.is_empty(),
                            "fold, seed {seed} step {step}: keys {differ:?} differ"
                        );
                    }
                }
            }
            82..=84 => {
                // Faults: failing fsyncs, or a disk with little room left.
                if rng.chance(50) {
                    run.vfs.fail_syncs(Some(libc::EIO));
                } else {
                    let used = run.vfs.used_bytes();
                    run.vfs.set_capacity(Some(used + rng.below(20 << 10)));
                }
            }
            85..=86 => {
                run.vfs.fail_syncs(None);
                run.vfs.set_capacity(None);
            }
            87..=91 => {
                // A power cut within the next few changes, mid-operation.
                let after = rng.below(30);
                run.vfs
                    .arm_crash(after, seed.wrapping_mul(7919) + step as u64);
            }
            92..=95 => run.reopen(true, step),
            _ => run.reopen(false, step),
        }
        if run.vfs.crashed() {
            run.reopen(true, step);
        }
        if let Some(k) = &run.watch {
            eprintln!(
                "  {k} = {:?} model {:?} now {}",
                run.store().get(k.as_bytes()).map(|v| v.map(|v| v.len())),
                run.model.now.get(k.as_bytes()).map(|v| v
                    .iter()
                    .map(|s| s.as_ref().map(|(v, e)| (v.len(), *e)))
                    .collect::<Vec<_>>()),
                run.clock.now_s()
            );
            if std::env::var("BITCASK_POWER_FILES").is_ok() {
                let fs: Vec<(u32, bool, u64, u64)> = run
                    .store()
                    .file_stats()
                    .iter()
                    .map(|f| (f.file_id, f.active, f.live_keys, f.total_bytes))
                    .collect();
                eprintln!("  files {fs:?} durable names {:?}", names(&run.vfs));
            }
        }
    }
    run.vfs.disarm();
    run.reopen(true, ops);
    run.reopen(false, ops + 1);
    run.crashes
}

#[test]
fn power_loss_model() {
    if let Some(seed) = std::env::var("BITCASK_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run_seed(seed, 600);
        return;
    }
    let seeds: u64 = std::env::var("BITCASK_POWER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let mut crashes = 0;
    for seed in 0..seeds {
        crashes += run_seed(seed, 600);
    }
    assert!(crashes >= seeds, "the runs cut the power {crashes} times");
}

#[test]
fn a_dir_path_that_does_not_exist_is_created_durably() {
    let vfs = SimVfs::new();
    let clock = ManualClock::starting_at(1_700_000_000);
    let mut o = options(0, &vfs, &clock);
    o.sync = SyncStrategy::OSync;
    let s = Store::open(DIR, o.clone()).unwrap();
    s.put(b"k", b"v").unwrap();
    drop(s);
    let vfs = vfs.crash_keeping(1, bitcask::vfs::CrashKeep::Nothing);
    o.vfs = Arc::new(vfs.clone());
    assert!(vfs.exists(Path::new(DIR)));
    let s = Store::open(DIR, o).unwrap();
    assert_eq!(s.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
