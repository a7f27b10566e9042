//! Fresh layouts a claim falls back on when changing the current ring
//! step by step leaves violations: a plain stripe, and a stripe whose
//! tail is reshaped so the ring wraps around without two partitions of
//! one node closer than `target_n_val` (the construction riak_core's
//! sequential claim describes in its "claim fixes" note).

/// Partition `p` to node `p mod nodes`.
pub(super) fn striped(q: usize, nodes: usize) -> Vec<usize> {
    (0..q).map(|p| p % nodes).collect()
}

/// A stripe of whole sequences `0..nodes`, except at the end: with
/// `r = q mod nodes` and `0 < r < t`, a plain stripe ends with `0..r` and
/// wraps to `0..`, putting each of those nodes `r` apart. Instead the
/// last segment is `0..t`, and the `t - r` surplus occurrences of nodes
/// `r..t` are taken out of the segments before it (at most
/// `ceil((t - r) / (q / nodes))` from each, so each keeps at least `t`
/// nodes), which keeps every segment in node order and every junction at
/// least `t` apart. `None` when the stripe has no tail problem or the
/// segments are too few to absorb the surplus (`(q / nodes) (nodes - t) <
/// t - r`).
pub(super) fn sequential(q: usize, nodes: usize, t: usize) -> Option<Vec<usize>> {
    let r = q % nodes;
    let whole = q / nodes;
    if r == 0 || r >= t || nodes < t || whole == 0 {
        return None;
    }
    let shortfall = t - r;
    if whole * (nodes - t) < shortfall {
        return None;
    }
    let per_segment = shortfall.div_ceil(whole);
    // Segments from the end of the ring backwards.
    let mut segments: Vec<Vec<usize>> = vec![(0..t).collect()];
    let (mut removed, mut next) = (0, r);
    while removed < shortfall {
        let k = per_segment.min(shortfall - removed);
        segments.push((0..nodes).filter(|&x| x < next || x >= next + k).collect());
        next += k;
        removed += k;
    }
    while segments.len() < whole + 1 {
        segments.push((0..nodes).collect());
    }
    let ring: Vec<usize> = segments.into_iter().rev().flatten().collect();
    debug_assert_eq!(ring.len(), q);
    Some(ring)
}

/// Renames the nodes of a fresh layout so it keeps as many partitions
/// with their current owners as a greedy matching finds: the (fresh
/// label, node) pairs sharing the most partitions are matched first.
/// `current` holds member indices (`None` for a non-member); the result
/// uses member indices too.
pub(super) fn relabel(fresh: &[usize], current: &[Option<usize>], nodes: usize) -> Vec<usize> {
    let mut overlap = vec![vec![0usize; nodes]; nodes];
    for (f, c) in fresh.iter().zip(current) {
        if let Some(c) = c {
            overlap[*f][*c] += 1;
        }
    }
    let mut pairs: Vec<(usize, usize, usize)> = (0..nodes)
        .flat_map(|f| (0..nodes).map(move |c| (f, c)))
        .map(|(f, c)| (overlap[f][c], f, c))
        .collect();
    pairs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut name: Vec<Option<usize>> = vec![None; nodes];
    let mut taken = vec![false; nodes];
    for (_, f, c) in pairs {
        if name[f].is_none() && !taken[c] {
            name[f] = Some(c);
            taken[c] = true;
        }
    }
    fresh
        .iter()
        .map(|f| name[*f].expect("every label named"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs_too_close(ring: &[usize], t: usize) -> usize {
        let q = ring.len();
        let mut bad = 0;
        for p in 0..q {
            for d in 1..t.min(q) {
                if ring[p] == ring[(p + d) % q] {
                    bad += 1;
                }
            }
        }
        bad
    }

    #[test]
    fn the_claim_fixes_example() {
        // 16 partitions, 5 nodes, target 4 (nodes 1-based in the note).
        let ring = sequential(16, 5, 4).unwrap();
        let want = [0, 1, 2, 4, 0, 1, 3, 4, 0, 2, 3, 4, 0, 1, 2, 3];
        assert_eq!(ring, want);
        assert_eq!(pairs_too_close(&ring, 4), 0);
        assert_eq!(pairs_too_close(&striped(16, 5), 4), 1);
    }

    #[test]
    fn sequential_layouts_are_balanced_and_spread_where_it_applies() {
        for q in [16usize, 32, 64, 128, 256, 512, 1024] {
            for nodes in 2..=64.min(q) {
                for t in 2..=5 {
                    let Some(ring) = sequential(q, nodes, t) else {
                        continue;
                    };
                    assert_eq!(ring.len(), q);
                    let mut counts = vec![0; nodes];
                    for &x in &ring {
                        counts[x] += 1;
                    }
                    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                    assert!(max - min <= 1, "q {q}, {nodes} nodes, t {t}: {counts:?}");
                    assert_eq!(pairs_too_close(&ring, t), 0, "q {q}, {nodes} nodes, t {t}");
                }
            }
        }
    }

    #[test]
    fn relabelling_keeps_what_it_can() {
        let fresh = [0, 1, 2, 0, 1, 2];
        let current = [Some(2), Some(0), Some(1), Some(2), Some(0), None];
        assert_eq!(relabel(&fresh, &current, 3), [2, 0, 1, 2, 0, 1]);
    }
}
