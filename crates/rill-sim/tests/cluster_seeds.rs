//! The cluster simulation with its real parts over many seeds, the same
//! seed twice, and the deliberate faults it must catch.
//!
//!     cargo test -p rill-sim --test cluster_seeds                 # 20 seeds, the replay
//!     cargo test --release -p rill-sim --test cluster_seeds -- --include-ignored   # CI: 100 seeds and the fault searches
//!     RILL_SIM_SEEDS=100000 cargo test --release -p rill-sim --test cluster_seeds cluster_many_seeds
//!     RILL_SIM_FIRST=50000 RILL_SIM_SEEDS=50000 ...                  # the second half, on another core
//!     RILL_SIM_SEED=42 RILL_SIM_TRACE=1 cargo test -p rill-sim --test cluster_seeds cluster_many_seeds -- --nocapture

use rill_sim::cluster::{ClusterConfig, ClusterSim, ClusterViolation};

fn run_cfg(cfg: ClusterConfig) -> (Vec<String>, Result<(), ClusterViolation>) {
    let mut sim = ClusterSim::new(cfg);
    let r = sim.run();
    (sim.trace, r)
}

fn run(seed: u64) -> (Vec<String>, Result<(), ClusterViolation>) {
    run_cfg(ClusterConfig::new(seed))
}

/// The first seed below `seeds` whose run with `fault` set ends in a
/// violation `caught` accepts.
fn first_caught(
    seeds: u64,
    fault: impl Fn(&mut rill_sim::cluster::Faults),
    caught: impl Fn(&ClusterViolation) -> bool,
) -> Option<u64> {
    let found = (0..seeds).find(|&seed| {
        let mut cfg = ClusterConfig::new(seed);
        fault(&mut cfg.faults);
        run_cfg(cfg).1.as_ref().err().is_some_and(&caught)
    });
    eprintln!("first seed caught: {found:?}");
    found
}

/// Seeds a plain `cargo test` runs: a debug build takes about a second
/// a seed, and scripts/test-all runs 100 in its release build.
const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 20 } else { 100 };

#[test]
fn cluster_many_seeds() {
    let passed_over = std::cell::Cell::new(0);
    let found = rill_sim::run_seeds(DEFAULT_SEEDS, run, |l| {
        if l.contains("lost; the next replica coordinates") {
            passed_over.set(passed_over.get() + 1);
        }
        l.contains("keys found by them") && !l.contains(" 0 keys found")
    });
    assert!(
        found > 0,
        "anti-entropy found and repaired keys in some runs"
    );
    assert!(
        passed_over.get() > 0,
        "some puts started again on the next replica"
    );
}

#[test]
fn a_cluster_seed_replays_exactly() {
    let (a, ra) = run(7);
    let (b, rb) = run(7);
    assert_eq!(a, b);
    assert_eq!(ra, rb);
}

/// Without repairs, the replicas that missed writes stay behind: the
/// check sees replicas that did not converge.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn without_anti_entropy_repairs_replicas_stay_apart() {
    let caught = first_caught(
        40,
        |f| f.no_repair = true,
        |v| {
            matches!(
                v,
                ClusterViolation::NotConverged { .. } | ClusterViolation::NotQuiet
            )
        },
    );
    assert!(caught.is_some(), "no seed of 40 left replicas apart");
}

/// Fallbacks that drop their hinted data instead of handing it off lose
/// the acknowledged writes that only fallbacks held: the check says so.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn fallbacks_that_drop_hinted_data_lose_writes() {
    let caught = first_caught(
        200,
        |f| f.drop_hinted_data = true,
        |v| matches!(v, ClusterViolation::AckedLost { .. }),
    );
    assert!(caught.is_some(), "no seed of 200 lost a write");
}

/// The resurrection found on real processes: a tombstone reaped while a
/// fallback still held the value, which it handed back afterwards. With
/// the reap rule removed, some seed brings a deleted value back (the
/// first of them, with the rule, passes like every seed).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn a_reap_while_fallbacks_hold_data_brings_values_back() {
    let caught = first_caught(
        1000,
        |f| f.reap_despite_fallbacks = true,
        |v| matches!(v, ClusterViolation::CameBack { .. }),
    );
    let seed = caught.expect("no seed of 1000 brought a value back");
    eprintln!("seed {seed} brings a value back without the reap rule");
    run(seed).1.unwrap();
}

/// A handoff receiver that acknowledges batches without storing them
/// loses, once the old owners let go at the switch, the writes of every
/// partition a ring change moved: the check says so.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn a_receiver_that_acknowledges_without_storing_loses_writes() {
    let caught = first_caught(
        100,
        |f| f.handoff_stores_nothing = true,
        |v| matches!(v, ClusterViolation::AckedLost { .. }),
    );
    assert!(caught.is_some(), "no seed of 100 lost a write");
}

/// Found by the key-value simulation that came before this one (its seed
/// 3285): a vnode that handed its data off and dropped it later took in
/// an older copy of a key by a merge and continued that copy's epoch,
/// issuing a dot a second time, and an acknowledged write was lost. A
/// vnode retires its epochs before a handoff drops anything. Found again
/// by this one once it reaped as a node does (its seed 17 then): a tombstone
/// was reaped, a client then wrote over a context it had read before the
/// delete through another replica, and the reaping vnode continued its
/// epoch from that older count, giving its next write the tombstone's
/// dot (`NoDot`). A vnode now gives a key a new epoch when a merge
/// counts further than it stores in the epoch it would continue
/// (`rill-node`'s
/// `a_key_reaped_and_merged_back_older_takes_no_dot_twice` fails
/// without it). With the fault that skips both, some seed gives a dot
/// twice or loses a write; the first of them, with both rules, passes
/// like every seed.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn a_vnode_that_lost_keys_does_not_continue_their_epochs() {
    let caught = first_caught(
        2000,
        |f| f.keep_lost_epochs = true,
        |v| {
            matches!(
                v,
                ClusterViolation::AckedLost { .. }
                    | ClusterViolation::NoDot { .. }
                    | ClusterViolation::WrongDot { .. }
            )
        },
    );
    let seed = caught.expect("no seed of 2000 gave a dot twice or lost a write");
    eprintln!("seed {seed} gives a dot twice or loses a write when lost epochs are kept");
    run(seed).1.unwrap();
}

/// Epoch floors: after a power loss took writes a vnode made, its start
/// must not trust the counts its stored clocks show, or the vnode gives
/// a second value a dot it gave one before. With the fault that trusts
/// them some seed loses or mixes up a write (the first of them, with the
/// floors, passes like every seed).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn a_start_after_a_power_loss_does_not_trust_the_stored_clocks() {
    let caught = first_caught(
        1000,
        |f| f.trust_stored_clocks = true,
        |v| {
            matches!(
                v,
                ClusterViolation::AckedLost { .. }
                    | ClusterViolation::WrongDot { .. }
                    | ClusterViolation::NotConverged { .. }
            )
        },
    );
    let seed = caught.expect("no seed of 1000 reissued a dot");
    eprintln!("seed {seed} reissues a dot when a start trusts the stored clocks");
    run(seed).1.unwrap();
}

/// Handoff's drop removes a key only while its clock is as sent: a write
/// that reached the old owner after the key was sent stays until it is
/// sent too. With the fault that drops every key sent, some seed loses
/// such a write (the first of them, with the clock check, passes like
/// every seed).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn handoff_drops_only_keys_unchanged_since_sent() {
    let caught = first_caught(
        1000,
        |f| f.drop_ignores_clocks = true,
        |v| matches!(v, ClusterViolation::AckedLost { .. }),
    );
    let seed = caught.expect("no seed of 1000 lost a write");
    eprintln!("seed {seed} loses a write when the drop ignores clocks");
    run(seed).1.unwrap();
}

/// `node_confirms` counts distinct nodes: with the put machine not told
/// of it, some seed acknowledges a write of the odd keys' bucket that
/// fallbacks on one node held (the first of them, told, passes like
/// every seed).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn node_confirms_counts_distinct_nodes() {
    let caught = first_caught(
        200,
        |f| f.ignore_node_confirms = true,
        |v| matches!(v, ClusterViolation::Unconfirmed { .. }),
    );
    let seed = caught.expect("no seed of 200 acknowledged an unconfirmed write");
    eprintln!("seed {seed} acknowledges a write one node held");
    run(seed).1.unwrap();
}

/// A put whose coordinator took the request may have made the version:
/// the put fails rather than have the next replica make it again
/// (`rill-coord`'s `PutAttempts`). With the fault that passes over such a
/// coordinator as if it had not taken the request, some seed makes one
/// write twice (the first of them, without the fault, passes like every
/// seed, retries on the next replica included).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a search over many seeds: scripts/test-all runs it in a release build"
)]
fn a_coordinator_that_took_a_put_is_not_passed_over() {
    let caught = first_caught(
        1000,
        |f| f.retry_after_accepted = true,
        |v| matches!(v, ClusterViolation::MadeTwice { .. }),
    );
    let seed = caught.expect("no seed of 1000 made a write twice");
    eprintln!("seed {seed} makes a write twice when a coordinator that took it is passed over");
    run(seed).1.unwrap();
}
