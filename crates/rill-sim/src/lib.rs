//! Seeded, replayable simulations of a Rill cluster. [`kv`]: clients'
//! gets, puts and deletes coordinated by `rill-coord`'s machines over
//! preference lists with fallbacks, checked against a model of the
//! acknowledged writes. This module's [`Sim`]: the membership, where nodes
//! hold `rill-cluster` states and gossip them over a
//! network that delays (1 to `max_delay_ticks` ticks, so messages
//! reorder), loses (`drop_per_mille`) and partitions; they run the
//! claimant's step on every change; operators join nodes and stage, plan
//! and commit leaves; handoffs finish one partition at a time; nodes stop
//! and start (keeping their state, as on disk).
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
pub mod kv;
mod kv_check;
pub mod rng;
mod sim;

pub use sim::{Config, Sim};

/// Runs one seed; the trace, and the first broken invariant if any.
pub fn run(cfg: Config) -> (Vec<String>, Result<(), String>) {
    let mut sim = Sim::new(cfg);
    let r = sim.run();
    (sim.trace, r)
}
