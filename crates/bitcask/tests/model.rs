//! Model test: random puts, gets, deletes, expiries, reopens, merges and
//! folds, checked against a `BTreeMap`, over many seeds. A failing seed is
//! printed; `BITCASK_MODEL_SEEDS=N` runs more of them.

mod common;

use bitcask::{Options, PutOptions, Store, SyncStrategy, WriteMode};
use common::{closed_files, file_counts, small_options, ManualClock, Rng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

struct Model {
    /// key -> (value, expiry second)
    map: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>,
}

impl Model {
    fn get(&self, key: &[u8], now_s: u64) -> Option<&Vec<u8>> {
        self.map
            .get(key)
            .filter(|(_, exp)| exp.is_none_or(|e| e > now_s))
            .map(|(v, _)| v)
    }

    fn visible(&self, now_s: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.map
            .iter()
            .filter(|(_, (_, exp))| exp.is_none_or(|e| e > now_s))
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect()
    }
}

fn options_for(seed: u64, clock: &Arc<ManualClock>) -> Options {
    let mut o = small_options();
    o.clock = clock.clone();
    if seed % 3 == 1 {
        o.write_mode = WriteMode::Direct;
        o.write_buffer_bytes = 8192;
    }
    if seed % 4 == 2 && o.write_mode == WriteMode::Buffered {
        o.write_buffer_bytes = 0;
    }
    if seed % 5 == 3 {
        o.sync = SyncStrategy::OSync;
    }
    if seed % 7 == 4 {
        o.sparse_live_share = 1.0;
    }
    o
}

fn run_seed(seed: u64, ops: usize) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::starting_at(1_700_000_000);
    let mut rng = Rng::new(seed);
    let mut store = Some(Store::open(dir.path(), options_for(seed, &clock)).unwrap());
    let mut model = Model {
        map: BTreeMap::new(),
    };
    let keyspace = 40 + rng.below(200);
    for step in 0..ops {
        let s = store.as_ref().unwrap();
        let key = format!("key-{}", rng.below(keyspace)).into_bytes();
        let now = clock.now_s();
        let ctx = || format!("seed {seed} step {step}");
        match rng.below(100) {
            0..=44 => {
                let len = match rng.below(10) {
                    0 => 0,
                    1 => 3000 + rng.below(6000) as usize,
                    // Large enough to skip the write buffer.
                    2 if rng.chance(30) => (32 << 10) + rng.below(8 << 10) as usize,
                    _ => rng.below(200) as usize,
                };
                let value = rng.bytes(len);
                let ttl = rng
                    .chance(15)
                    .then(|| Duration::from_secs(1 + rng.below(20)));
                s.put_with(&key, &value, PutOptions { ttl }).unwrap();
                let exp = ttl.map(|t| now + t.as_secs());
                model.map.insert(key, (value, exp));
            }
            45..=74 => {
                let got = s.get(&key).unwrap();
                assert_eq!(got.as_ref(), model.get(&key, now), "get {}", ctx());
            }
            75..=84 => {
                s.delete(&key).unwrap();
                model.map.remove(&key);
            }
            85..=88 => clock.advance(Duration::from_secs(rng.below(8))),
            89..=92 => {
                let files = closed_files(s);
                let pick: Vec<u32> = files.into_iter().filter(|_| rng.chance(60)).collect();
                s.merge(&pick).unwrap();
            }
            93..=95 => {
                let mut seen = BTreeMap::new();
                s.fold(|k, v| {
                    assert!(seen.insert(k.to_vec(), v.to_vec()).is_none(), "key twice");
                    true
                })
                .unwrap();
                assert_eq!(seen, model.visible(now), "fold {}", ctx());
            }
            _ => {
                // Statistics kept up to date op by op must equal the ones
                // rebuilt from hints on reopen.
                let before = file_counts(s);
                store.take().unwrap().close().unwrap();
                let s = Store::open(dir.path(), options_for(seed, &clock)).unwrap();
                assert_eq!(file_counts(&s), before, "file statistics, {}", ctx());
                store = Some(s);
            }
        }
    }
    // Finally everything must match, across one more reopen and a full merge.
    let s = store.take().unwrap();
    let all = closed_files(&s);
    s.merge(&all).unwrap();
    s.close().unwrap();
    let s = Store::open(dir.path(), options_for(seed, &clock)).unwrap();
    let now = clock.now_s();
    let mut seen = BTreeMap::new();
    s.fold(|k, v| {
        seen.insert(k.to_vec(), v.to_vec());
        true
    })
    .unwrap();
    assert_eq!(seen, model.visible(now), "final fold, seed {seed}");
    for k in model.map.keys() {
        assert_eq!(
            s.get(k).unwrap().as_ref(),
            model.get(k, now),
            "final get, seed {seed}"
        );
    }
    let report = s.recovery_report().clone();
    assert_eq!(report.corrupt_regions, 0, "seed {seed}");
}

#[test]
fn model_many_seeds() {
    let seeds: u64 = std::env::var("BITCASK_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48);
    for seed in 0..seeds {
        run_seed(seed, 1500);
    }
}
