//! A node refusing puts for space: its merges act as at U = 1 whatever
//! usage is measured (after the reserve is released the measured usage
//! may fall below U_m, where the fisherman would not merge), and an active
//! file holding dead bytes is closed so a merge can give them back (merge
//! never takes an active file, and with a large rotation size every dead
//! byte may sit in one).

use bitcask::{Options, Store};
use merge_control::{Fisherman, MergeScheduler, SchedulerSettings, ThrottleSettings, UsageSource};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u32 = 100;
const GONE: u32 = 80;

/// A store whose one file, the active one, holds 100 values of 8 KiB of
/// which 80 are deleted.
fn store_with_a_dead_active_file(dir: &std::path::Path) -> Arc<Store> {
    let s = Arc::new(
        Store::open(
            dir,
            Options {
                max_file_size_bytes: 1 << 30,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    for k in 0..KEYS {
        s.put(&k.to_be_bytes(), &value(k)).unwrap();
    }
    for k in 0..GONE {
        s.delete(&k.to_be_bytes()).unwrap();
    }
    let stats = s.file_stats();
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert!(stats[0].active && stats[0].dead_share() > 0.7, "{stats:?}");
    s
}

fn value(k: u32) -> Vec<u8> {
    vec![k as u8; 8 << 10]
}

/// Usage measured far below U_m = 0.8: a capacity of 1 TiB.
fn scheduler() -> MergeScheduler {
    MergeScheduler::start(SchedulerSettings {
        usage: UsageSource::Capacity { bytes: 1 << 40 },
        policy: Box::new(Fisherman::default()),
        throttle: ThrottleSettings::default(),
        workers: 1,
        idle_tick: Duration::from_millis(5),
    })
}

#[test]
fn a_node_refusing_puts_closes_and_merges_an_active_file_full_of_dead_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_a_dead_active_file(dir.path());
    let before = s.disk_bytes();
    let sched = scheduler();
    sched.watch_put_refusals(Box::new(|_, _| true));
    sched.add_store(s.clone());
    // The merge deletes its files before the scheduler counts it: wait
    // for both, not for the bytes alone.
    let until = Instant::now() + Duration::from_secs(60);
    while s.disk_bytes() * 2 > before || sched.metrics().merges == 0 {
        assert!(
            Instant::now() < until,
            "dead bytes not given back by a merge: {:?}, merges {}",
            s.file_stats(),
            sched.metrics().merges
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // One file closed early waits for its merge at a time: never more
    // files than the active one and that one.
    assert!(s.file_stats().len() <= 2, "{:?}", s.file_stats());
    for k in 0..KEYS {
        let got = s.get(&k.to_be_bytes()).unwrap();
        if k < GONE {
            assert_eq!(got, None, "deleted key {k} came back");
        } else {
            assert_eq!(got, Some(value(k)), "key {k} lost");
        }
    }
}

/// The same store on a node that takes puts: at a low usage nothing is
/// closed or merged (the fisherman planes). Checked at a condition, not
/// after a wait: once the scheduler has run rounds over the store, the
/// active file is still the only file.
#[test]
fn a_node_taking_puts_leaves_the_active_file_alone_below_the_merge_target() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_a_dead_active_file(dir.path());
    let sched = scheduler();
    sched.watch_put_refusals(Box::new(|_, _| false));
    sched.add_store(s.clone());
    // Rounds on this thread, after the store was added.
    for _ in 0..3 {
        assert!(!sched.run_once(), "nothing to merge below U_m");
    }
    let stats = s.file_stats();
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert!(stats[0].active, "{stats:?}");
}

/// Takes nothing, whatever the files: closed files wait for ever.
struct Never;

impl merge_control::Policy for Never {
    fn decide(
        &mut self,
        _usage: f64,
        _files: &[merge_control::FileView],
        _at: merge_control::Moment,
    ) -> Vec<merge_control::Pick> {
        Vec::new()
    }
    fn take_threshold(&self, _usage: f64) -> f64 {
        0.0
    }
    fn name(&self) -> &'static str {
        "never"
    }
}

/// Overwrites keep making dead bytes in the active file, and no merge
/// takes the file closed early: the store closes no other while it waits.
#[test]
fn a_store_closes_one_file_early_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_a_dead_active_file(dir.path());
    let sched = MergeScheduler::start(SchedulerSettings {
        usage: UsageSource::Capacity { bytes: 1 << 40 },
        policy: Box::new(Never),
        throttle: ThrottleSettings::default(),
        workers: 1,
        idle_tick: Duration::from_millis(5),
    });
    sched.watch_put_refusals(Box::new(|_, _| true));
    sched.add_store(s.clone());
    for round in 0..10u32 {
        for k in GONE..KEYS {
            s.put(&k.to_be_bytes(), &value(k + round)).unwrap();
        }
        sched.run_once();
    }
    let files = s.file_stats();
    assert_eq!(
        files.len(),
        2,
        "the active file and one closed early: {files:?}"
    );
}
