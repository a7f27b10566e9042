//! A window's runs of samples laid end to end, or merged when they
//! overlap (late samples of a window already cut), a later run winning
//! on a repeated time.

use rill_sensor::Sample;

/// Sorts a run by time, a repeated time keeping its last sample.
fn normalize(run: &mut Vec<Sample>) {
    if run.windows(2).all(|w| w[0].ts < w[1].ts) {
        return;
    }
    run.sort_by_key(|s| s.ts); // stable: equal times keep their order
    let mut kept: Vec<Sample> = Vec::with_capacity(run.len());
    for s in run.drain(..) {
        match kept.last_mut() {
            Some(l) if l.ts == s.ts => *l = s,
            _ => kept.push(s),
        }
    }
    *run = kept;
}

/// Appends one window's runs (a later run winning on a repeated time) to
/// `out` in time order: laid end to end when they do not overlap (parts
/// cut in turn), else merged.
pub(super) fn merge_runs(mut runs: Vec<Vec<Sample>>, out: &mut Vec<Sample>) {
    runs.retain(|r| !r.is_empty());
    runs.iter_mut().for_each(normalize);
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&i| runs[i][0].ts);
    let apart = order
        .windows(2)
        .all(|p| runs[p[0]].last().expect("not empty").ts < runs[p[1]][0].ts);
    if apart {
        for i in order {
            out.extend_from_slice(&runs[i]);
        }
        return;
    }
    // Overlapping (late samples of a window already cut): merged two at
    // a time, each pass linear, the later run winning on a repeated time.
    let mut runs = runs.into_iter();
    let mut acc = runs.next().unwrap_or_default();
    for r in runs {
        acc = merge_two(&acc, &r);
    }
    out.extend_from_slice(&acc);
}

/// Two sorted runs as one, `b` winning on a repeated time.
fn merge_two(a: &[Sample], b: &[Sample]) -> Vec<Sample> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].ts.cmp(&b[j].ts) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(b[j]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    proptest::proptest! {
        /// Runs laid end to end or merged give what merging them one
        /// sample at a time gives, a later run winning.
        #[test]
        fn runs_merge_as_a_map_would(
            runs in proptest::collection::vec(
                proptest::collection::vec((0i64..60, -5i32..5), 0..12),
                0..5,
            ),
            apart in proptest::bool::ANY,
        ) {
            let runs: Vec<Vec<Sample>> = runs
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    r.into_iter()
                        .map(|(t, v)| Sample {
                            // Apart: each run in a time range of its own.
                            ts: if apart { i as i64 * 100 + t } else { t },
                            value: f64::from(v),
                        })
                        .collect()
                })
                .collect();
            let mut want: BTreeMap<i64, f64> = BTreeMap::new();
            for r in &runs {
                want.extend(r.iter().map(|s| (s.ts, s.value)));
            }
            let mut got = vec![Sample { ts: -1, value: 0.0 }];
            merge_runs(runs, &mut got);
            let want: Vec<Sample> = std::iter::once(Sample { ts: -1, value: 0.0 })
                .chain(want.into_iter().map(|(ts, value)| Sample { ts, value }))
                .collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
