//! The membership simulation over many seeds, and the same seed twice.
//!
//!     cargo test -p rill-sim --test seeds                      # CI: 300 seeds
//!     RILL_SIM_SEEDS=100000 cargo test --release -p rill-sim --test seeds many_seeds
//!     RILL_SIM_SEED=42 RILL_SIM_TRACE=1 cargo test -p rill-sim --test seeds many_seeds

use rill_sim::{run, run_seeds, Config};

#[test]
fn many_seeds() {
    run_seeds(300, |seed| run(Config::new(seed)), |_| false);
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [1, 7, 1234] {
        let (a, ra) = run(Config::new(seed));
        let (b, rb) = run(Config::new(seed));
        assert_eq!(a, b, "seed {seed}");
        assert_eq!(ra, rb);
        assert!(a.len() > 100, "the run did something");
    }
    let (a, _) = run(Config::new(1));
    let (b, _) = run(Config::new(2));
    assert_ne!(a, b, "seeds differ");
}
