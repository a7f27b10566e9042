//! One seed's run: random puts, deletes, expiries, rotations, merges,
//! syncs and faults on the simulated disk, with the model checked after
//! every reopen.

use crate::common::{ManualClock, Rng};
use crate::model::{visible, Model, State};
use crate::run::{assert_failure_is_expected, names, Run};
use crate::{options, DIR};
use bitcask::vfs::SimVfs;
use bitcask::Store;
use std::collections::BTreeMap;
use std::time::Duration;

pub fn run_seed(seed: u64, ops: usize) -> u64 {
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
