//! The membership simulation over many seeds, and the same seed twice.
//!
//!     cargo test -p rill-sim --test seeds                      # CI: 300 seeds
//!     RILL_SIM_SEEDS=100000 cargo test --release -p rill-sim --test seeds many_seeds
//!     RILL_SIM_SEED=42 RILL_SIM_TRACE=1 cargo test -p rill-sim --test seeds many_seeds

use rill_sim::{run, Config};

#[test]
fn many_seeds() {
    let seeds: Vec<u64> = match std::env::var("RILL_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RILL_SIM_SEED is a number")],
        Err(_) => {
            let n: u64 = std::env::var("RILL_SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(300);
            (0..n).collect()
        }
    };
    let show = std::env::var("RILL_SIM_TRACE").is_ok();
    for seed in seeds {
        let (trace, result) = run(Config::new(seed));
        if show {
            for line in &trace {
                eprintln!("{line}");
            }
        }
        if let Err(e) = result {
            for line in trace.iter().rev().take(40).rev() {
                eprintln!("{line}");
            }
            panic!("seed {seed}: {e} (replay: RILL_SIM_SEED={seed} RILL_SIM_TRACE=1)");
        }
    }
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
