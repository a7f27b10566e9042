//! Claim: which node owns each partition when the members change.
//!
//! Guarantees, as riak_core's claim states them (its "claim version 4"
//! design note), checked by the tests and by `rill-bench claim`:
//! - balance: every member owns `Q / S` or `Q / S + 1` partitions (Q the
//!   ring size, S the members);
//! - spread: no node owns two partitions closer than `target_n_val` on the
//!   ring, so a key's `target_n_val` replicas land on distinct nodes,
//!   wherever that is possible; where it is not, the result says how many
//!   pairs violate it, so `plan` can warn, and closer pairs weigh more:
//!   one pair of neighbours outweighs any number of pairs two apart, and
//!   so on (with three members, a stripe `abcabc` and `abbcaabcc` both
//!   break target_n_val 4 in every window of four, but only the second
//!   puts a node twice in most preference lists of three; riak_core's
//!   claim v4 weighs a pair by the windows it breaks, which ties them);
//! - few transfers: a partition changes owner only to restore balance (a
//!   member joined or left) or to remove a violation.
//!
//! How: the member furthest below its share takes, one at a time, a
//! partition whose owner left or is above its share, the one it conflicts
//! with least (so a joining member's partitions are spread around the
//! ring and nothing else moves).
//! A local search then moves or swaps the owners of partitions in
//! violation while that lowers the number of violating pairs, keeping the
//! balance. When violations remain, the same search also runs from fresh
//! layouts (a stripe, partition `p` to member `p mod S`, and a stripe
//! with its tail reshaped to wrap around cleanly), their members renamed
//! to keep as many partitions where they are as possible, and the result
//! with the fewest violations is taken (more transfers, as riak_core's
//! rebalance does when its target is not met).
//!
//! Pure and deterministic: the same current owners, members and
//! `target_n_val` always give the same ring.

mod fresh;

use std::collections::BTreeMap;

/// Why no claim could be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimError {
    #[error("a claim needs at least one member")]
    NoMembers,
    #[error("a claim needs at least one partition")]
    NoPartitions,
}

/// The outcome of a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The owner of each partition, in partition order.
    pub owners: Vec<String>,
    /// Pairs of partitions closer than `target_n_val` with one owner.
    pub violations: usize,
    /// Partitions whose owner changed.
    pub moved: usize,
}

/// Claims the ring for `members` (any order; duplicates ignored), starting
/// from `current` (one owner per partition; owners that are not members
/// give their partitions up). With more members than partitions, some
/// members own none (k = 0).
pub fn claim(
    current: &[String],
    members: &[String],
    target_n_val: u32,
) -> Result<Claim, ClaimError> {
    let mut names: Vec<&str> = members.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        return Err(ClaimError::NoMembers);
    }
    if current.is_empty() {
        return Err(ClaimError::NoPartitions);
    }
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let start: Vec<Option<usize>> = current
        .iter()
        .map(|o| index.get(o.as_str()).copied())
        .collect();
    let n = target_n_val.max(1) as usize;
    let mut layout = Layout::new(start.clone(), names.len(), n);
    layout.rebalance();
    layout.improve();
    if layout.violations() > 0 {
        let (q, s) = (current.len(), names.len());
        let candidates = [Some(fresh::striped(q, s)), fresh::sequential(q, s, n)];
        for fresh in candidates.into_iter().flatten() {
            let named = fresh::relabel(&fresh, &start, s);
            let mut other =
                Layout::with_start(named.into_iter().map(Some).collect(), start.clone(), s, n);
            other.rebalance();
            other.improve();
            if other.weight() < layout.weight() {
                layout = other;
            }
        }
    }
    let owners: Vec<String> = layout
        .owners
        .iter()
        .map(|o| names[o.expect("every partition is owned after rebalance")].to_string())
        .collect();
    let moved = owners.iter().zip(current).filter(|(a, b)| a != b).count();
    Ok(Claim {
        violations: layout.violations(),
        owners,
        moved,
    })
}

/// Pairs of partitions closer than `target_n_val` on the ring with the
/// same owner.
pub fn violations<S: AsRef<str>>(owners: &[S], target_n_val: u32) -> usize {
    let names: Vec<&str> = owners.iter().map(AsRef::as_ref).collect();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &names {
        let next = index.len();
        index.entry(n).or_insert(next);
    }
    let owners = names.iter().map(|n| Some(index[n])).collect();
    Layout::new(owners, index.len(), target_n_val.max(1) as usize).violations()
}

/// Pairs of partitions with the same owner at each distance below
/// `target_n_val` on the ring: entry 0 for neighbours, 1 for partitions
/// two apart, and so on. Compared in order, the first entry first, as
/// claim weighs them.
pub fn pairs_by_distance<S: AsRef<str>>(owners: &[S], target_n_val: u32) -> Vec<usize> {
    let q = owners.len();
    let reach = (target_n_val.max(1) as usize - 1).min(q / 2);
    (1..=reach)
        .map(|d| {
            (0..q)
                .filter(|&p| {
                    let x = (p + d) % q;
                    // On a ring of 2d partitions, p and p + d are one
                    // pair seen from both sides.
                    (d * 2 != q || p < x) && owners[p].as_ref() == owners[x].as_ref()
                })
                .count()
        })
        .collect()
}

/// Partitions owned by each node, fewest and most.
pub fn balance<S: AsRef<str>>(owners: &[S]) -> (usize, usize) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for o in owners {
        *counts.entry(o.as_ref()).or_default() += 1;
    }
    let min = counts.values().copied().min().unwrap_or(0);
    let max = counts.values().copied().max().unwrap_or(0);
    (min, max)
}

/// Owners as member indices, with their counts and shares.
struct Layout {
    owners: Vec<Option<usize>>,
    /// The owners before the claim: a step that moves fewer partitions
    /// away from them is preferred.
    start: Vec<Option<usize>>,
    counts: Vec<usize>,
    /// Partitions each member should own: `Q / S`, and one more for the
    /// first `Q mod S` members by current holdings.
    target: Vec<usize>,
    /// Partitions closer than this on the ring conflict.
    n: usize,
    /// What a conflict at each distance weighs (index: distance): each
    /// more than every conflict at greater distances could add up to.
    weights: Vec<u128>,
}

impl Layout {
    fn new(owners: Vec<Option<usize>>, members: usize, n: usize) -> Layout {
        let start = owners.clone();
        Layout::with_start(owners, start, members, n)
    }

    /// `start`: the owners before the claim, to count moves against.
    fn with_start(
        owners: Vec<Option<usize>>,
        start: Vec<Option<usize>>,
        members: usize,
        n: usize,
    ) -> Layout {
        let q = owners.len();
        let mut counts = vec![0usize; members];
        for o in owners.iter().flatten() {
            counts[*o] += 1;
        }
        // The members that hold the most keep the extra partitions, so
        // fewer move.
        let mut order: Vec<usize> = (0..members).collect();
        order.sort_by_key(|&m| (std::cmp::Reverse(counts[m]), m));
        let mut target = vec![q / members; members];
        for &m in order.iter().take(q % members) {
            target[m] += 1;
        }
        let n = n.min(q);
        let reach = (n.max(1) - 1).min(q / 2);
        // A partition has at most two neighbours at each distance, so the
        // conflicts at one distance, summed over the ring, stay below
        // 2q + 1: powers of that keep the distances apart. Past what a
        // u128 holds (a target_n_val beyond a dozen), every distance
        // weighs the same.
        let base = 2 * q as u128 + 1;
        let weights: Vec<u128> = (0..=reach)
            .map(|d| {
                base.checked_pow((reach.saturating_sub(d)) as u32)
                    .filter(|_| base.checked_pow(reach as u32).is_some())
                    .unwrap_or(1)
            })
            .collect();
        Layout {
            start,
            owners,
            counts,
            target,
            n,
            weights,
        }
    }

    fn q(&self) -> usize {
        self.owners.len()
    }

    /// Partitions within `n - 1` of `p` on either side, with their
    /// distance (each once, `p` excluded, however small the ring).
    fn neighbours(&self, p: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let q = self.q();
        let reach = (self.n.max(1) - 1).min(q / 2);
        let mut seen: Vec<(usize, usize)> = Vec::with_capacity(2 * reach);
        for d in 1..=reach {
            for x in [(p + d) % q, (p + q - d) % q] {
                if x != p && !seen.iter().any(|&(y, _)| y == x) {
                    seen.push((x, d));
                }
            }
        }
        seen.into_iter()
    }

    /// Neighbours of `p` owned by `m`, each weighed by its distance.
    fn conflicts(&self, p: usize, m: usize) -> u128 {
        self.neighbours(p)
            .filter(|&(x, _)| self.owners[x] == Some(m))
            .map(|(_, d)| self.weights[d])
            .sum()
    }

    /// Every conflict, weighed: what claim lowers.
    fn weight(&self) -> u128 {
        (0..self.q())
            .filter_map(|p| self.owners[p].map(|m| self.conflicts(p, m)))
            .sum()
    }

    /// Pairs of partitions closer than `n` with one owner.
    fn violations(&self) -> usize {
        let pairs: usize = (0..self.q())
            .filter_map(|p| {
                self.owners[p].map(|m| {
                    self.neighbours(p)
                        .filter(|&(x, _)| self.owners[x] == Some(m))
                        .count()
                })
            })
            .sum();
        pairs / 2
    }

    /// Fills every member up to its share, one partition at a time: the
    /// member furthest below its share takes a partition that is free (its
    /// owner left) or held by a member above its share, the one it
    /// conflicts with least, relieving a violation of the giver where it
    /// can. Members that join get partitions spread around the ring, at
    /// least `target_n_val` apart where possible, without moving anything
    /// else.
    fn rebalance(&mut self) {
        loop {
            let Some(u) = (0..self.counts.len())
                .filter(|&m| self.counts[m] < self.target[m])
                .max_by_key(|&m| (self.target[m] - self.counts[m], std::cmp::Reverse(m)))
            else {
                return;
            };
            let p = (0..self.q())
                .filter(|&p| match self.owners[p] {
                    None => true,
                    Some(o) => self.counts[o] > self.target[o],
                })
                .min_by_key(|&p| {
                    let giver_conflicts = self.owners[p].map_or(0, |o| self.conflicts(p, o));
                    (
                        self.owners[p].is_some(),
                        self.conflicts(p, u),
                        std::cmp::Reverse(giver_conflicts),
                        p,
                    )
                })
                .expect("a member below its share means one above it, or a free partition");
            if let Some(o) = self.owners[p] {
                self.counts[o] -= 1;
            }
            self.owners[p] = Some(u);
            self.counts[u] += 1;
        }
    }

    /// Change in partitions away from their owner before the claim if
    /// `p` went to `m`.
    fn cost(&self, p: usize, m: usize) -> isize {
        isize::from(Some(m) != self.start[p]) - self.cost_now(p)
    }

    /// 1 when `p` is away from its owner before the claim.
    fn cost_now(&self, p: usize) -> isize {
        isize::from(self.owners[p] != self.start[p])
    }

    fn owner(&self, p: usize) -> usize {
        self.owners[p].expect("owned")
    }

    /// Moves and swaps owners of partitions in violation while that
    /// lowers the violations, keeping every member within its share (a
    /// move goes from a member one above the base share to one at it).
    /// Each step lowers the weighed conflicts, so the search ends.
    fn improve(&mut self) {
        let q = self.q();
        let base = q / self.counts.len();
        loop {
            let mut improved = false;
            for p in 0..q {
                let a = self.owner(p);
                let here = self.conflicts(p, a);
                if here == 0 {
                    continue;
                }
                // The best single step for p: the most violations removed,
                // then the fewest partitions moved away from their owners
                // before the claim.
                let mut best: Option<(u128, isize, Step)> = None;
                let mut consider = |gain: u128, cost: isize, step: Step| {
                    if best
                        .as_ref()
                        .is_none_or(|(g, c, _)| (gain, -cost) > (*g, -*c))
                    {
                        best = Some((gain, cost, step));
                    }
                };
                if self.counts[a] > base {
                    for m in 0..self.counts.len() {
                        if m != a && self.counts[m] == base {
                            let there = self.conflicts(p, m);
                            if there < here {
                                consider(here - there, self.cost(p, m), Step::Move(m));
                            }
                        }
                    }
                }
                for x in 0..q {
                    let b = self.owner(x);
                    if b == a {
                        continue;
                    }
                    let before = here + self.conflicts(x, b);
                    self.owners.swap(p, x);
                    let after = self.conflicts(p, b) + self.conflicts(x, a);
                    let cost = self.cost_now(p) + self.cost_now(x);
                    self.owners.swap(p, x);
                    if after < before {
                        let cost = cost - self.cost_now(p) - self.cost_now(x);
                        consider(before - after, cost, Step::Swap(x));
                    }
                }
                match best {
                    Some((_, _, Step::Move(m))) => {
                        self.owners[p] = Some(m);
                        self.counts[a] -= 1;
                        self.counts[m] += 1;
                        improved = true;
                    }
                    Some((_, _, Step::Swap(x))) => {
                        self.owners.swap(p, x);
                        improved = true;
                    }
                    None => {}
                }
            }
            if !improved {
                return;
            }
        }
    }
}

enum Step {
    Move(usize),
    Swap(usize),
}

#[cfg(test)]
mod tests;
