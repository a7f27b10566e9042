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
//!
//! The parts: `model` (what each key may hold, now and after a power
//! cut), `run` (a store under test with its simulated disk, clock and
//! model), `seed` (one seed's random operations and checks).

#[path = "../common/mod.rs"]
mod common;
mod model;
mod run;
mod seed;

use bitcask::vfs::{SimVfs, Vfs};
use bitcask::{Options, Store, SyncStrategy, WriteMode};
use common::ManualClock;
use seed::run_seed;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/disk/store";

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
