//! Reads in ms (what a query takes): the read in ns floored to ms, the
//! last within a ms kept, whatever the samples' precision, wherever they
//! wait (stored, in parts that overlap, buffered) and wherever the range
//! begins and ends (on whole ms, read in ms; elsewhere, in ns).

use super::*;
use rill_sensor::TimeUnit;

fn pairs(p: &crate::points::Points) -> Vec<(i64, u64)> {
    p.iter().map(|(t, v)| (t, v.to_bits())).collect()
}

#[test]
fn a_read_in_ms_is_the_read_in_ns_floored() {
    let rig = Rig::new(10 * SEC, 8);
    let e = rig.open(T0);
    const MS: i64 = 1_000_000;
    let (whole, fine) = ("t{p=\"ms\"}", "t{p=\"ns\"}");
    let mut late = Vec::new();
    let mut now = T0;
    for k in 0..300i64 {
        now = T0 + k * 700 * MS;
        // Whole ms with jitter; and ns, two samples of some ms.
        let a = now + (k * 37 % 200) * MS;
        let b = now + (k * 7_919 % MS);
        let mut fine_samples = vec![s(b, k as f64)];
        if k % 5 == 0 {
            fine_samples.push(s(b + 1, -(k as f64)));
        }
        if k % 11 == 3 {
            late.push((a, k));
        } else {
            e.write("db", &one(whole, vec![s(a, k as f64)]), now)
                .unwrap();
        }
        e.write("db", &one(fine, fine_samples), now).unwrap();
        e.tick(now).unwrap();
    }
    // Whole ms stored, and (in a window still buffered: fewer than a
    // block's samples) a sample within the ms of another.
    let mix = "t{p=\"mix\"}";
    for k in 0..300i64 {
        let t = T0 + k * 700 * MS;
        e.write("db", &one(mix, vec![s(t, k as f64)]), now).unwrap();
    }
    e.tick(now).unwrap();
    e.write("db", &one(mix, vec![s(now + 100, 1.0)]), now)
        .unwrap();
    // Late samples: parts of windows already stored, overlapping them.
    for (a, k) in late {
        e.write("db", &one(whole, vec![s(a, 0.5 + k as f64)]), now)
            .unwrap();
    }
    e.tick(now).unwrap();
    let end = now + 10 * SEC;
    let mut ranges = vec![
        (i64::MIN, i64::MAX),
        (T0, end),
        (T0, end - 1),
        (T0 + 3 * SEC, T0 + 150 * SEC - 1),
        (T0 + 3 * SEC + 1, T0 + 150 * SEC),
        (T0 + 12_345_678, T0 + 99 * SEC + 7),
        (T0 + 170 * SEC, end - 1),
        (T0 + 5 * SEC, T0 + 5 * SEC + 999_999),
    ];
    // Ends a ns either side of samples of the fine series.
    for k in 100..104 {
        let b = T0 + k * 700 * MS + (k * 7_919 % MS);
        ranges.extend([(T0 + 3 * SEC, b - 1), (b + 1, end)]);
    }
    let mut compared = 0;
    for key in [whole, fine, mix] {
        for &(t0, t1) in &ranges {
            let ns = e.read_points_within("db", key, t0, t1, now, None).unwrap();
            let want = super::super::ms::in_ms(ns, TimeUnit::Ns, true);
            let got = e
                .read_ms_within("db", key, t0, t1, now, None, false)
                .unwrap();
            assert_eq!(pairs(&got), pairs(&want), "{key} {t0}..={t1}");
            compared += usize::from(!want.is_empty());
        }
    }
    assert_eq!(compared, 3 * (ranges.len() - 1), "one range is empty");
}
