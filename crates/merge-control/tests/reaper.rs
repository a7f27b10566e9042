//! Fully dead files are deleted at once, without reading, by the
//! scheduler's reaper, whatever the merge workers decide (the sensor-data paper, §3.0.3):
//! a dead file must not wait behind a long merge.

use bitcask::{Options, Store};
use merge_control::{
    FileView, MergeScheduler, Moment, Pick, Policy, SchedulerSettings, ThrottleSettings,
    UsageSource,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Never asks the workers to merge anything; only the reaper can act.
struct Idle {
    reaps: bool,
}

impl Policy for Idle {
    fn decide(&mut self, _u: f64, _f: &[FileView], _at: Moment) -> Vec<Pick> {
        Vec::new()
    }
    fn take_threshold(&self, _u: f64) -> f64 {
        1.0
    }
    fn name(&self) -> &'static str {
        "idle"
    }
    fn reaps_dead_files(&self) -> bool {
        self.reaps
    }
}

/// A store with two closed files whose records are all overwritten, and a
/// third, active one holding the live data.
fn store_with_dead_files(dir: &std::path::Path) -> Arc<Store> {
    let opts = Options {
        max_file_size_bytes: 64 << 10,
        write_buffer_bytes: 4 << 10,
        ..Options::default()
    };
    let s = Arc::new(Store::open(dir, opts).unwrap());
    for round in 0..6u8 {
        for k in 0..10u8 {
            s.put(&[k], &[round; 3000]).unwrap();
        }
    }
    let dead = s
        .file_stats()
        .iter()
        .filter(|f| !f.active && f.live_bytes == 0)
        .count();
    assert!(dead >= 1, "{:?}", s.file_stats());
    s
}

fn dead_files(s: &Store) -> usize {
    s.file_stats()
        .iter()
        .filter(|f| !f.active && f.live_bytes == 0)
        .count()
}

fn scheduler(reaps: bool) -> MergeScheduler {
    MergeScheduler::start(SchedulerSettings {
        usage: UsageSource::Capacity { bytes: 1 << 40 },
        policy: Box::new(Idle { reaps }),
        throttle: ThrottleSettings::default(),
        workers: 1,
        idle_tick: Duration::from_millis(5),
    })
}

#[test]
fn dead_files_go_without_a_merge_decision() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_dead_files(dir.path());
    let sched = scheduler(true);
    sched.add_store(s.clone());
    let until = Instant::now() + Duration::from_secs(60);
    while dead_files(&s) > 0 {
        assert!(
            Instant::now() < until,
            "dead files left: {:?}",
            s.file_stats()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let m = sched.metrics();
    assert!(m.files_deleted_unread >= 1, "{m:?}");
    assert_eq!(m.merge_bytes_read, 0, "{m:?}");
    for k in 0..10u8 {
        assert_eq!(s.get(&[k]).unwrap().unwrap(), vec![5u8; 3000]);
    }
}

#[test]
fn without_the_reaper_the_policy_alone_decides() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_dead_files(dir.path());
    let before = dead_files(&s);
    let sched = scheduler(false);
    sched.add_store(s.clone());
    // Rounds on this thread, each after the store was added: none merges,
    // and nothing else deletes the dead files.
    for _ in 0..3 {
        assert!(!sched.run_once(), "the idle policy picked a file");
    }
    assert_eq!(dead_files(&s), before);
    assert_eq!(sched.metrics().merges, 0);
}
