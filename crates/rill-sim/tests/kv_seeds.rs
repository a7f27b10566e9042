//! The key-value simulation over many seeds, and the same seed twice.
//!
//!     cargo test -p rill-sim --test kv_seeds                      # CI: 200 seeds
//!     RILL_SIM_SEEDS=20000 cargo test --release -p rill-sim --test kv_seeds kv_many_seeds
//!     RILL_SIM_SEED=42 RILL_SIM_TRACE=1 cargo test -p rill-sim --test kv_seeds kv_many_seeds -- --nocapture

use rill_sim::kv::{KvConfig, KvSim};
use rill_sim::KvViolation;

fn run(seed: u64) -> (Vec<String>, Result<(), KvViolation>) {
    let mut sim = KvSim::new(KvConfig::new(seed));
    let r = sim.run();
    (sim.trace, r)
}

#[test]
fn kv_many_seeds() {
    let acked = rill_sim::run_seeds(200, run, |l| l.ends_with("acknowledged"));
    assert!(acked > 0, "some writes were acknowledged");
}

#[test]
fn a_kv_seed_replays_exactly() {
    let (a, ra) = run(5);
    let (b, rb) = run(5);
    assert_eq!(a, b);
    assert_eq!(ra, rb);
}

#[test]
fn the_checks_catch_a_lost_write() {
    // Hinted data dropped instead of handed off: some seed must lose an
    // acknowledged write, and the checks must say so.
    let caught = (0..50).any(|seed| {
        let mut cfg = KvConfig::new(seed);
        cfg.drop_hinted_data = true;
        let mut sim = KvSim::new(cfg);
        matches!(sim.run(), Err(e) if e.to_string().contains("was lost"))
    });
    assert!(caught);
}

/// Found by the key-value simulation (at seed 3285 then; the fallbacks'
/// choice of distinct machines changed the runs, and seed 2498 is the
/// first that meets it now): a vnode that had handed its hinted data off
/// later took in an older copy by a merge and continued that epoch's
/// count, issuing a dot a second time; an acknowledged write was lost.
/// With the floor raised at handoff it holds.
#[test]
fn a_vnode_that_handed_off_does_not_continue_its_old_epochs() {
    let mut cfg = KvConfig::new(2498);
    cfg.keep_epochs_after_handoff = true;
    let failed = KvSim::new(cfg).run();
    assert!(
        matches!(&failed, Err(e) if e.to_string().contains("was lost")),
        "{failed:?}"
    );
    KvSim::new(KvConfig::new(2498)).run().unwrap();
}
