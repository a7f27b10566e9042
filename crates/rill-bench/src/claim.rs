//! `rill-bench claim`: the claim simulator. For each ring size it grows a
//! cluster one join at a time, shrinks it one leave at a time, and runs
//! riak_core's "typical scenario" (1 node, then 8, then one more at a
//! time to 16, at target_n_val 4), printing per step the balance, the
//! pairs of partitions closer than target_n_val on one node
//! (violations), the partitions moved, and the fewest moves any claim
//! could make, and the preference lists of three partitions that do not
//! span three nodes. The typical scenario is compared with the moves riak_core's
//! claim v4 makes on it, as its own tests record them
//! (`riak_core_claim_binring_alg`, `typical_scenarios_tests`).

use crate::report::Report;
use clap::Args as ClapArgs;
use rill_ring::{balance, claim};

#[derive(ClapArgs)]
pub struct Args {
    /// Ring sizes to simulate (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "8,16,32,64,128,256,512,1024"
    )]
    ring_sizes: Vec<usize>,
    /// Largest cluster to grow to (at most the ring size).
    #[arg(long, default_value_t = 64)]
    max_nodes: usize,
    /// Partitions closer than this on the ring must have distinct owners.
    #[arg(long, default_value_t = 4)]
    target_n_val: u32,
    /// Print every step, not only each ring size's summary.
    #[arg(long)]
    steps: bool,
    /// A short run for CI: ring sizes up to 256, up to 16 nodes.
    #[arg(long)]
    quick: bool,
}

/// Moves riak_core's claim v4 makes in the typical scenario (1, 8, 9,
/// ..., 16 nodes; target_n_val 4), from its tests' recorded history.
const RIAK_V4_TYPICAL: [(usize, [usize; 10]); 5] = [
    (64, [0, 56, 8, 8, 6, 8, 26, 5, 4, 4]),
    (128, [0, 112, 15, 12, 12, 14, 9, 12, 9, 8]),
    (256, [0, 224, 29, 31, 24, 21, 21, 21, 23, 16]),
    (512, [0, 448, 57, 59, 47, 48, 39, 45, 36, 32]),
    (1024, [0, 896, 114, 119, 94, 85, 78, 87, 79, 64]),
];
const TYPICAL_NODES: [usize; 10] = [1, 8, 9, 10, 11, 12, 13, 14, 15, 16];

fn node(i: usize) -> String {
    format!("rill{i:02}@127.0.0.1")
}

/// One claim step's figures.
struct Step {
    nodes: usize,
    min: usize,
    max: usize,
    violations: usize,
    moved: usize,
    fewest: usize,
    /// Preference lists of three consecutive partitions that do not span
    /// three nodes (n_val 3 replicas sharing a machine).
    split: usize,
}

/// Preference lists of three consecutive partitions with fewer than
/// three owners.
fn split_lists(owners: &[String]) -> usize {
    let q = owners.len();
    (0..q)
        .filter(|&p| {
            let (a, b, c) = (&owners[p], &owners[(p + 1) % q], &owners[(p + 2) % q]);
            a == b || b == c || a == c
        })
        .count()
}

/// The fewest partitions any balanced claim must move: whatever non-members
/// hold, and what members hold above their new share (the largest
/// holders keep the extra partitions).
fn fewest_moves(owners: &[String], members: &[String]) -> usize {
    let q = owners.len();
    let mut counts: Vec<usize> = members
        .iter()
        .map(|m| owners.iter().filter(|o| *o == m).count())
        .collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let (share, extra) = (q / members.len(), q % members.len());
    let kept: usize = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| c.min(share + usize::from(i < extra)))
        .sum();
    q - kept
}

fn run_sequence(q: usize, sizes: &[usize], n: u32) -> anyhow::Result<Vec<Step>> {
    let mut owners = vec![node(0); q];
    let mut out = Vec::new();
    for &s in sizes {
        let members: Vec<String> = (0..s).map(node).collect();
        let fewest = fewest_moves(&owners, &members);
        let c = claim(&owners, &members, n)?;
        let (min, max) = balance(&c.owners);
        out.push(Step {
            nodes: s,
            min,
            max,
            violations: c.violations,
            moved: c.moved,
            fewest,
            split: split_lists(&c.owners),
        });
        owners = c.owners;
    }
    Ok(out)
}

struct Totals {
    moved: usize,
    fewest: usize,
    unbalanced_steps: usize,
    violating_steps: usize,
    /// Lists of three not on three nodes, at the step with three nodes.
    split_at_three: usize,
}

fn summarize(name: &str, q: usize, steps: &[Step], print_steps: bool) -> Totals {
    if print_steps {
        for s in steps {
            println!(
                "  q {q:>4} {name:<6} {:>3} nodes: owns {:>3}..{:<3} violations {:>4} moved {:>4} (fewest {:>4}) lists of 3 on fewer nodes {:>4}",
                s.nodes, s.min, s.max, s.violations, s.moved, s.fewest, s.split
            );
        }
    }
    let t = Totals {
        moved: steps.iter().map(|s| s.moved).sum(),
        fewest: steps.iter().map(|s| s.fewest).sum(),
        unbalanced_steps: steps.iter().filter(|s| s.max - s.min > 1).count(),
        violating_steps: steps.iter().filter(|s| s.violations > 0).count(),
        split_at_three: steps.iter().filter(|s| s.nodes == 3).map(|s| s.split).sum(),
    };
    let worst = steps
        .iter()
        .filter(|s| s.violations > 0)
        .map(|s| format!("{}:{}", s.nodes, s.violations))
        .collect::<Vec<_>>()
        .join(" ");
    println!(
        "q {q:>4} {name:<6} {:>3} steps: moved {:>6} (fewest {:>6}, ratio {:.3}), unbalanced steps {}, lists of 3 on fewer nodes at 3 nodes {}, steps with violations {} {}",
        steps.len(),
        t.moved,
        t.fewest,
        t.moved as f64 / t.fewest.max(1) as f64,
        t.unbalanced_steps,
        t.split_at_three,
        t.violating_steps,
        if worst.is_empty() { String::new() } else { format!("[nodes:violations {worst}]") }
    );
    t
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (ring_sizes, max_nodes) = if args.quick {
        (
            args.ring_sizes
                .iter()
                .copied()
                .filter(|&q| q <= 256)
                .collect(),
            args.max_nodes.min(16),
        )
    } else {
        (args.ring_sizes.clone(), args.max_nodes)
    };
    let n = args.target_n_val;
    let mut report = Report::new("claim", args.quick);
    println!(
        "claim simulator: target_n_val {n}, up to {max_nodes} nodes, ring sizes {ring_sizes:?}"
    );
    let (mut moved, mut fewest, mut unbalanced, mut violating) = (0, 0, 0, 0);
    let mut split = 0;
    for &q in &ring_sizes {
        let top = max_nodes.min(q);
        let grow: Vec<usize> = (1..=top).collect();
        let shrink: Vec<usize> = (1..=top).rev().collect();
        for (name, sizes) in [("grow", grow), ("shrink", shrink)] {
            // A shrink claims the whole cluster at once, then one leaves
            // at a time.
            let steps = run_sequence(q, &sizes, n)?;
            let t = summarize(name, q, &steps, args.steps);
            moved += t.moved;
            fewest += t.fewest;
            unbalanced += t.unbalanced_steps;
            violating += t.violating_steps;
            split += t.split_at_three;
        }
    }
    report.int("moved", moved as u64, "partitions moved, all sequences");
    report.int(
        "fewest_moves",
        fewest as u64,
        "fewest any balanced claim could move",
    );
    report.num(
        "moved_vs_fewest",
        moved as f64 / fewest.max(1) as f64,
        "moved / fewest",
    );
    report.int(
        "unbalanced_steps",
        unbalanced as u64,
        "steps with owners k and k+2 or worse",
    );
    report.int(
        "violating_steps",
        violating as u64,
        "steps with target_n_val violations",
    );
    report.int(
        "split_lists_at_three_nodes",
        split as u64,
        "preference lists of 3 not on 3 nodes, at the steps with 3 nodes",
    );
    println!("riak_core's typical scenario (1, 8, 9..16 nodes, target_n_val 4) against claim v4's recorded moves:");
    let (mut ours, mut theirs) = (0, 0);
    for (q, v4) in RIAK_V4_TYPICAL {
        if !ring_sizes.contains(&q) {
            continue;
        }
        let steps = run_sequence(q, &TYPICAL_NODES, 4)?;
        let moves: Vec<usize> = steps.iter().map(|s| s.moved).collect();
        let viol: usize = steps.iter().skip(1).map(|s| s.violations).sum();
        let (a, b) = (moves.iter().sum::<usize>(), v4.iter().sum::<usize>());
        println!("  q {q:>4}: rill {moves:?} = {a}, violations after 8 nodes {viol}; riak_core v4 {v4:?} = {b}; ratio {:.3}", a as f64 / b as f64);
        ours += a;
        theirs += b;
        unbalanced += steps.iter().filter(|s| s.max - s.min > 1).count();
    }
    if theirs > 0 {
        report.int(
            "typical_moved",
            ours as u64,
            "typical scenario: partitions moved",
        );
        report.int(
            "typical_moved_riak_v4",
            theirs as u64,
            "typical scenario: riak_core v4 moved",
        );
        report.num(
            "typical_vs_riak_v4",
            ours as f64 / theirs as f64,
            "typical scenario: rill / riak_core v4",
        );
    }
    println!("{}", report.json());
    if unbalanced > 0 {
        anyhow::bail!("{unbalanced} steps left a node more than one partition above another");
    }
    Ok(())
}
