//! The sensor-data service's simulation over many seeds, the same seed
//! twice, and the deliberate fault it must catch.
//!
//!     cargo test -p rill-sim --test sensor_seeds
//!     RILL_SIM_SEEDS=2000 cargo test --release -p rill-sim --test sensor_seeds sensor_many_seeds
//!     RILL_SIM_SEED=42 RILL_SIM_TRACE=1 cargo test -p rill-sim --test sensor_seeds sensor_many_seeds -- --nocapture

use rill_sim::sensor::{run, SensorSimConfig, SensorViolation};

/// Seeds a plain `cargo test` runs (scripts/test-all runs them in its
/// release build too).
const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 10 } else { 40 };

#[test]
fn sensor_many_seeds() {
    let repaired = rill_sim::run_seeds(
        DEFAULT_SEEDS,
        |seed| run(SensorSimConfig::new(seed)),
        |l| l.contains("exchanges home") && !l.contains(" 0 sent, 0 taken"),
    );
    assert!(repaired > 0, "anti-entropy repaired replicas in some runs");
}

#[test]
fn the_same_seed_replays_the_same_run() {
    let (a, ra) = run(SensorSimConfig::new(7));
    let (b, rb) = run(SensorSimConfig::new(7));
    assert_eq!(a, b);
    assert_eq!(ra, rb);
}

#[test]
fn exchanges_that_repair_nothing_are_caught() {
    let caught = (0..40).find(|&seed| {
        let mut cfg = SensorSimConfig::new(seed);
        cfg.no_repair = true;
        matches!(
            run(cfg).1,
            Err(SensorViolation::OwnerLacks { .. } | SensorViolation::NotQuiet(_))
        )
    });
    eprintln!("first seed caught: {caught:?}");
    assert!(caught.is_some());
}

#[test]
fn acknowledging_fewer_than_w_is_caught_by_a_query() {
    let caught = (0..100).find(|&seed| {
        let mut cfg = SensorSimConfig::new(seed);
        cfg.ack_at_one = true;
        matches!(run(cfg).1, Err(SensorViolation::Missing { .. }))
    });
    eprintln!("first seed caught: {caught:?}");
    assert!(caught.is_some());
}

#[test]
fn a_handoff_that_sends_nothing_is_caught() {
    let caught = (0..100).find(|&seed| {
        let mut cfg = SensorSimConfig::new(seed);
        cfg.hand_off_nothing = true;
        matches!(
            run(cfg).1,
            Err(SensorViolation::Missing { .. }
                | SensorViolation::OwnerLacks { .. }
                | SensorViolation::TooFewCopies { .. })
        )
    });
    eprintln!("first seed caught: {caught:?}");
    assert!(caught.is_some());
}
