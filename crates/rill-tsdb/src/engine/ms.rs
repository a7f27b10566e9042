//! Times in ms, as a query takes them: a read over a range whose ends are
//! whole ms is read in ms (blocks in units of 1 ms or more decode
//! straight into ms); any other is read in ns and floored after. Either
//! way the answer is the samples of the range in ns, floored to ms, the
//! last within a ms kept.

use crate::points::Points;
use rill_sensor::TimeUnit;

const NS_PER_MS: i64 = 1_000_000;

/// How many ns a time in `unit` counts.
pub(super) fn per_unit(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Ns => 1,
        TimeUnit::Ms => NS_PER_MS,
    }
}

/// The unit a read of `lo..=hi` (ns) asked in `unit` is made in: ms only
/// when the range begins and ends on whole ms, so that cutting the times
/// floored to ms at its ends cuts the same samples as cutting them in ns.
pub(super) fn unit_for(unit: TimeUnit, lo: i64, hi: i64) -> TimeUnit {
    match unit {
        TimeUnit::Ms
            if lo.rem_euclid(NS_PER_MS) == 0 && hi.rem_euclid(NS_PER_MS) == NS_PER_MS - 1 =>
        {
            TimeUnit::Ms
        }
        _ => TimeUnit::Ns,
    }
}

/// `lo..=hi` (ns) in `unit` (for ms, a range [`unit_for`] allows).
pub(super) fn bounds_in(unit: TimeUnit, lo: i64, hi: i64) -> (i64, i64) {
    let p = per_unit(unit);
    (lo.div_euclid(p), hi.div_euclid(p))
}

/// Points (rising) with times in `unit`, as points in ms: floored, and
/// of those within one ms the last kept (in ms already, looked for only
/// when `may_repeat`: the read says whether a time may repeat).
pub(super) fn in_ms(mut ms: Points, unit: TimeUnit, may_repeat: bool) -> Points {
    if unit == TimeUnit::Ms && !may_repeat {
        debug_assert!(ms.ts.windows(2).all(|w| w[0] < w[1]));
        return ms;
    }
    // One pass: each time floored to its ms where it is in ns (after
    // 1970, an unsigned division: cheaper), and whether they still rise;
    // in ms already, only the check.
    let mut rising = true;
    if unit == TimeUnit::Ns {
        let mut prev = i64::MIN;
        for t in &mut ms.ts {
            let m = match u64::try_from(*t) {
                Ok(u) => (u / NS_PER_MS as u64) as i64,
                Err(_) => t.div_euclid(NS_PER_MS),
            };
            rising &= m > prev;
            prev = m;
            *t = m;
        }
    } else {
        // Counted, not searched: a loop without an early exit runs on
        // vector registers.
        let rises = ms.ts.iter().zip(ms.ts.iter().skip(1));
        rising = rises.filter(|(a, b)| a >= b).count() == 0;
    }
    // Samples a ms apart at least (the usual case) need nothing more.
    if rising {
        return ms;
    }
    let mut kept = 0;
    for i in 0..ms.ts.len() {
        if kept > 0 && ms.ts[kept - 1] == ms.ts[i] {
            ms.v[kept - 1] = ms.v[i];
        } else {
            ms.ts[kept] = ms.ts[i];
            ms.v[kept] = ms.v[i];
            kept += 1;
        }
    }
    ms.ts.truncate(kept);
    ms.v.truncate(kept);
    ms
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_sensor::Sample;
    use std::collections::BTreeMap;

    proptest::proptest! {
        /// Points in ms are the samples' times floored to a ms, the last
        /// sample within a ms winning, whether they come in ns or floored
        /// already.
        #[test]
        fn points_in_ms_keep_the_last_within_a_ms(
            steps in proptest::collection::vec((1i64..3_000_000, -5i32..5), 0..40),
            start in -10_000_000i64..10_000_000,
        ) {
            let mut t = start;
            let samples: Vec<Sample> = steps
                .iter()
                .map(|&(d, v)| {
                    t += d;
                    Sample { ts: t, value: f64::from(v) }
                })
                .collect();
            let mut want: BTreeMap<i64, f64> = BTreeMap::new();
            for s in &samples {
                want.insert(s.ts.div_euclid(NS_PER_MS), s.value);
            }
            let want: Vec<(i64, f64)> = want.into_iter().collect();
            let ns: Points = samples.iter().map(|s| (s.ts, s.value)).collect();
            let got = in_ms(ns, TimeUnit::Ns, false);
            proptest::prop_assert_eq!(got.iter().collect::<Vec<_>>(), want.clone());
            let floored: Points = samples.iter().map(|s| (s.ts.div_euclid(NS_PER_MS), s.value)).collect();
            let got = in_ms(floored, TimeUnit::Ms, true);
            proptest::prop_assert_eq!(got.iter().collect::<Vec<_>>(), want);
        }

        /// A range read in ms cuts, at its ends, the samples a cut in ns
        /// does: a time floored to ms lies within the bounds in ms exactly
        /// when the time lies within the range.
        #[test]
        fn a_range_read_in_ms_cuts_what_ns_cuts(
            lo_ms in -5_000i64..5_000,
            len_ms in 0i64..5_000,
            (lo_ns, hi_ns) in (
                proptest::prop_oneof![proptest::strategy::Just(0i64), 0..NS_PER_MS],
                proptest::prop_oneof![proptest::strategy::Just(NS_PER_MS - 1), 0..NS_PER_MS],
            ),
            (near, d) in (0..3u8, -2 * NS_PER_MS..2 * NS_PER_MS),
        ) {
            let lo = lo_ms * NS_PER_MS + lo_ns;
            let hi = (lo_ms + len_ms) * NS_PER_MS + hi_ns;
            // A time near either end, or anywhere.
            let t = [lo + d, hi + d, d * 5_000][usize::from(near)];
            let unit = unit_for(TimeUnit::Ms, lo, hi);
            let (l, h) = bounds_in(unit, lo, hi);
            let x = t.div_euclid(per_unit(unit));
            proptest::prop_assert_eq!((l..=h).contains(&x), (lo..=hi).contains(&t));
            // Whole ms ends are read in ms.
            let (a, b) = (lo.div_euclid(NS_PER_MS) * NS_PER_MS, (hi.div_euclid(NS_PER_MS) + 1) * NS_PER_MS - 1);
            proptest::prop_assert_eq!(unit_for(TimeUnit::Ms, a, b), TimeUnit::Ms);
            let (l, h) = bounds_in(TimeUnit::Ms, a, b);
            proptest::prop_assert_eq!((l..=h).contains(&t.div_euclid(NS_PER_MS)), (a..=b).contains(&t));
        }
    }
}
