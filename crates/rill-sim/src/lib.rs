//! Seeded, replayable simulations of a Rill cluster. [`sensor`]: the
//! sensor-data service on a cluster with its real parts (engines on
//! simulated disks, placement, replicas, merges, anti-entropy) over a
//! lossy network, checked against the acknowledged samples. [`cluster`]: the
//! cluster with its real parts (rill-node's vnodes, rill-coord's
//! machines, rill-cluster's ring changes, rill-handoff's planner, pass,
//! sender and receiver, rill-aae's exchanges) over a lossy network,
//! checked strictly against the acknowledged writes. This module's
//! [`Sim`]: the membership alone, where nodes hold `rill-cluster` states
//! and gossip them over a network that delays (1 to `max_delay_ticks`
//! ticks, so messages reorder), loses (`drop_per_mille`) and partitions;
//! they run the claimant's step on every change; operators join nodes and
//! stage, plan and commit leaves; handoffs finish one partition at a time;
//! nodes stop and start (keeping their state, as on disk).
//!
//! After the events, everything heals and the cluster settles; then every
//! node agrees on members and ring, the ring is ready with nothing moving,
//! only valid members own partitions, balanced (k or k+1 each), the
//! claimant is valid, and every node an operator had leave owns nothing
//! and is removed.
//!
//! One seed gives one run: the only randomness is [`rng::Rng`], the only
//! time the simulation's ticks, and every collection is ordered, so
//! [`Sim::trace`] is the same on every replay.

mod check;
pub mod cluster;
pub mod rng;
pub mod sensor;
mod sim;

pub use check::Violation;
pub use sim::{Config, Sim};

/// Runs one seed; the trace, and the first broken invariant if any.
pub fn run(cfg: Config) -> (Vec<String>, Result<(), Violation>) {
    let mut sim = Sim::new(cfg);
    let r = sim.run();
    (sim.trace, r)
}

/// Runs `run` over the seeds the environment asks for: `RILL_SIM_SEED=N`
/// one seed, `RILL_SIM_SEEDS=N` N seeds from `RILL_SIM_FIRST` (else 0),
/// else 0..`default_seeds` (a long run splits over cores by the first);
/// `RILL_SIM_TRACE` prints every trace. On the first failure, prints the
/// trace's last 40 lines and panics with the seed and how to replay it.
/// Returns the traces' lines for which `count` holds, over all seeds.
pub fn run_seeds<E: std::fmt::Display>(
    default_seeds: u64,
    run: impl Fn(u64) -> (Vec<String>, Result<(), E>),
    count: impl Fn(&str) -> bool,
) -> usize {
    let seeds: Vec<u64> = match std::env::var("RILL_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("RILL_SIM_SEED is a number")],
        Err(_) => {
            let n: u64 = std::env::var("RILL_SIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(default_seeds);
            let first: u64 = std::env::var("RILL_SIM_FIRST")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            (first..first + n).collect()
        }
    };
    let show = std::env::var("RILL_SIM_TRACE").is_ok();
    let mut counted = 0;
    for seed in seeds {
        // A panic inside a run names its seed before it goes on.
        let (trace, result) = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(seed)
        })) {
            Ok(r) => r,
            Err(p) => {
                eprintln!("seed {seed} panicked (replay: RILL_SIM_SEED={seed} RILL_SIM_TRACE=1)");
                std::panic::resume_unwind(p);
            }
        };
        counted += trace.iter().filter(|l| count(l)).count();
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
    counted
}
