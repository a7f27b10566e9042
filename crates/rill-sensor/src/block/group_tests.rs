use super::group::{self, MAX_COLUMNS};
use super::*;
use proptest::prelude::*;

fn same(a: &[Sample], b: &[Sample]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.ts == y.ts && x.value.to_bits() == y.value.to_bits())
}

/// Rows at jittered times; each column a value at most rows (all of
/// them when `gaps` is false), values as sensors give them or any bits.
fn any_group() -> impl Strategy<Value = Vec<(u64, Vec<Sample>)>> {
    group_in(1)
}

/// Groups whose times are multiples of `unit` ns.
fn group_in(unit: i64) -> impl Strategy<Value = Vec<(u64, Vec<Sample>)>> {
    (
        (-4_000_000_000_000_000_000i64..4_000_000_000_000_000_000)
            .prop_map(move |t| t / unit * unit),
        proptest::collection::vec(
            (1i64..5_000_000_000 / unit).prop_map(move |d| d * unit),
            1..200,
        ),
        1usize..7,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(t0, steps, columns, gaps, mut seed)| {
            let mut next = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let mut t = t0;
            let rows: Vec<i64> = steps
                .iter()
                .map(|d| {
                    t += d;
                    t
                })
                .collect();
            let mut id = next() % 1000;
            (0..columns)
                .map(|c| {
                    id += 1 + next() % 50;
                    let mut samples: Vec<Sample> = Vec::new();
                    for &ts in &rows {
                        if gaps && next() % 4 == 0 {
                            continue;
                        }
                        let value = match (c + next() as usize) % 5 {
                            0 => f64::from_bits(next()),
                            1 => f64::NAN,
                            _ => (next() % 100_000) as f64 / 100.0,
                        };
                        samples.push(Sample { ts, value });
                    }
                    (id, samples)
                })
                .filter(|(_, s)| !s.is_empty())
                .collect::<Vec<_>>()
        })
        .prop_filter("a column", |g| !g.is_empty())
}

fn borrowed(g: &[(u64, Vec<Sample>)]) -> Vec<(u64, &[Sample])> {
    g.iter().map(|(id, s)| (*id, s.as_slice())).collect()
}

proptest! {
    #[test]
    fn a_group_block_decodes_to_exactly_what_was_encoded(g in any_group(), choice in 0..3) {
        let choice = [Choice::Auto, Choice::Smallest, Choice::Gorilla][choice as usize];
        let b = group::encode(&borrowed(&g), choice).unwrap();
        let back = group::decode(&b).unwrap();
        prop_assert_eq!(back.len(), g.len());
        let headers = group::headers(&b).unwrap();
        for (((id, want), (got_id, h, got)), (hid, hh)) in g.iter().zip(&back).zip(&headers) {
            prop_assert_eq!(id, got_id);
            prop_assert_eq!(id, hid);
            prop_assert!(same(want, got));
            prop_assert!(same_header(h, hh));
            prop_assert!(same_header(h, &header_of(h.codec, want)));
            // One column alone, the others' values not decoded.
            let (h1, one) = group::decode_series(&b, *id).unwrap().unwrap();
            prop_assert!(same(want, &one));
            prop_assert!(same_header(&h1, h));
            prop_assert!(same_header(&group::header(&b, *id).unwrap().unwrap(), h));
        }
        let absent = g.iter().map(|(id, _)| id + 1).find(|x| g.iter().all(|(id, _)| id != x));
        if let Some(x) = absent {
            prop_assert_eq!(group::decode_series(&b, x).unwrap(), None);
            prop_assert_eq!(group::header(&b, x).unwrap(), None);
        }
    }

    #[test]
    fn a_damaged_group_block_is_an_error_never_other_samples(
        g in any_group(), at in any::<prop::sample::Index>(), bit in 0u8..8,
    ) {
        let mut b = group::encode(&borrowed(&g), Choice::Auto).unwrap();
        let i = at.index(b.len());
        b[i] ^= 1 << bit;
        // Caught by the checksum.
        prop_assert!(group::decode(&b).is_err());
        // With the checksum forged, what decodes agrees with its header
        // (bit for bit, a decimal sum within its rounding: a changed
        // value may still fit every aggregate).
        let n = b.len();
        let crc = crc32fast::hash(&b[..n - 4]);
        b[n - 4..].copy_from_slice(&crc.to_le_bytes());
        if let Ok(cols) = group::decode(&b) {
            for (_, h, s) in cols {
                prop_assert!(super::agrees(&h, &s));
            }
        }
        // A column decoded onto an answer already begun: appended whole
        // and agreeing with its header, or an error that leaves the
        // answer as it was.
        for (id, _) in &g {
            let (mut ts, mut values) = (vec![-7i64], vec![0.5f64]);
            match group::decode_series_columns(&b, *id, &mut ts, &mut values) {
                Ok(Some(h)) => {
                    prop_assert_eq!(ts.len(), values.len());
                    prop_assert_eq!(ts.len(), 1 + h.count as usize);
                    let s: Vec<Sample> = ts[1..]
                        .iter()
                        .zip(&values[1..])
                        .map(|(&ts, &value)| Sample { ts, value })
                        .collect();
                    prop_assert!(super::agrees(&h, &s));
                }
                _ => {
                    prop_assert_eq!(&ts, &vec![-7i64]);
                    prop_assert_eq!(values.len(), 1);
                }
            }
        }
    }
}

proptest! {
    /// A column decoded with its times in ms gets the times in ns
    /// floored, the same values, and fails where the ns decode fails
    /// (leaving the answer as it was), damaged or not: times in whole ms
    /// are read straight into ms, others floored after.
    #[test]
    fn a_column_in_ms_is_the_column_in_ns_floored(
        g in prop_oneof![group_in(1_000_000), group_in(1_000_000_000), any_group()],
        damage in proptest::option::of((any::<prop::sample::Index>(), 0u8..8)),
    ) {
        let mut b = group::encode(&borrowed(&g), Choice::Auto).unwrap();
        if let Some((at, bit)) = damage {
            let n = b.len() - 4;
            b[at.index(n)] ^= 1 << bit;
            let crc = crc32fast::hash(&b[..n]);
            b[n..].copy_from_slice(&crc.to_le_bytes());
        }
        for (id, _) in &g {
            let (mut ts, mut vs) = (vec![-7i64], vec![0.5f64]);
            let ns = group::decode_series_columns(&b, *id, &mut ts, &mut vs);
            let (mut tm, mut vm) = (vec![-7i64], vec![0.5f64]);
            let ms = group::decode_series_columns_in(&b, *id, TimeUnit::Ms, &mut tm, &mut vm);
            prop_assert_eq!(ns.is_ok(), ms.is_ok());
            if let (Ok(a), Ok(c)) = (&ns, &ms) {
                prop_assert_eq!(a.map(|h| h.count), c.map(|h| h.count));
            }
            let floored: Vec<i64> = ts[1..].iter().map(|t| t.div_euclid(1_000_000)).collect();
            prop_assert_eq!(&tm[1..], &floored[..]);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&vm), bits(&vs));
        }
    }
}

#[test]
fn fields_of_one_line_share_their_timestamps() {
    // Five fields of a sensor a minute with up to 200 ms of jitter, a
    // day of them: one group block against five single-series blocks.
    let mut seed = 11u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let t0 = 1_700_000_000_000i64;
    let rows: Vec<i64> = (0..1440)
        .map(|i| (t0 + i * 60_000 + (next() % 400) as i64 - 200) * 1_000_000)
        .collect();
    let mut walk = [21.0f64, 50.0, 1010.0, 80.0, 0.0];
    let columns: Vec<(u64, Vec<Sample>)> = (0..5)
        .map(|c| {
            let samples = rows
                .iter()
                .map(|&ts| {
                    walk[c] += ((next() % 21) as f64 - 10.0) / 100.0;
                    Sample {
                        ts,
                        value: (walk[c] * 100.0).round() / 100.0,
                    }
                })
                .collect();
            (c as u64 + 1, samples)
        })
        .collect();
    let one = group::encode(&borrowed(&columns), Choice::Auto).unwrap();
    let five: usize = columns
        .iter()
        .map(|(_, s)| encode(s, Choice::Auto).unwrap().len())
        .sum();
    // Four timestamp sections fewer (each about a byte a sample).
    assert!(
        one.len() * 10 < five * 7,
        "group {} bytes, five blocks {five}",
        one.len()
    );
}

#[test]
fn a_column_with_gaps_keeps_its_own_first_and_last() {
    let rows = [10i64, 20, 30, 40];
    let a: Vec<Sample> = rows.iter().map(|&ts| Sample { ts, value: 1.0 }).collect();
    let b = vec![Sample { ts: 20, value: 5.0 }, Sample { ts: 30, value: 7.0 }];
    let block = group::encode(&[(1, &a[..]), (2, &b[..])], Choice::Auto).unwrap();
    let h = group::header(&block, 2).unwrap().unwrap();
    assert_eq!((h.count, h.first_ts, h.last_ts), (2, 20, 30));
    assert_eq!((h.first, h.last, h.sum), (5.0, 7.0, 12.0));
    let (_, back) = group::decode_series(&block, 2).unwrap().unwrap();
    assert!(same(&back, &b));
}

#[test]
fn a_block_claiming_more_samples_than_a_block_holds_is_refused_before_decoding() {
    // Two columns whose counts together pass the limit, checksum right.
    let s: Vec<Sample> = (0..3).map(|ts| Sample { ts, value: 1.0 }).collect();
    let mut b = group::encode(&[(1, &s[..]), (2, &s[..])], Choice::Auto).unwrap();
    for c in 0..2 {
        let at = 30 + c * 77 + 9;
        b[at..at + 4].copy_from_slice(&(MAX_SAMPLES as u32 / 2 + 1).to_le_bytes());
    }
    let n = b.len();
    let crc = crc32fast::hash(&b[..n - 4]);
    b[n - 4..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        group::decode(&b),
        Err(BlockError::Invalid("more samples than a block holds"))
    );
}

#[test]
fn bad_groups_are_refused() {
    let s = [Sample { ts: 1, value: 1.0 }];
    assert_eq!(group::encode(&[], Choice::Auto), Err(EncodeError::Empty));
    assert_eq!(
        group::encode(&[(1, &s[..]), (1, &s[..])], Choice::Auto),
        Err(EncodeError::Columns)
    );
    assert_eq!(
        group::encode(&[(2, &s[..]), (1, &s[..])], Choice::Auto),
        Err(EncodeError::Columns)
    );
    let many: Vec<(u64, &[Sample])> = (0..=MAX_COLUMNS as u64).map(|i| (i, &s[..])).collect();
    assert_eq!(
        group::encode(&many, Choice::Auto),
        Err(EncodeError::Columns)
    );
    // At most a block's samples in all columns together.
    let half: Vec<Sample> = (0..MAX_SAMPLES as i64 / 2 + 1)
        .map(|ts| Sample { ts, value: 1.0 })
        .collect();
    assert_eq!(
        group::encode(&[(1, &half[..]), (2, &half[..])], Choice::Auto),
        Err(EncodeError::TooMany)
    );
    // Version 1 and 2 each refuse the other by name, and a later one.
    let g = group::encode(&[(1, &s[..])], Choice::Auto).unwrap();
    assert!(matches!(header(&g), Err(BlockError::Invalid(m)) if m.contains("group")));
    let v1 = encode(&[Sample { ts: 1, value: 1.0 }; 1], Choice::Auto).unwrap();
    let mut padded = v1.clone();
    padded.resize(200, 0);
    assert!(
        matches!(group::decode(&padded), Err(BlockError::Invalid(m)) if m.contains("version 1"))
    );
    let mut later = g.clone();
    later[0] = 3;
    assert_eq!(group::decode(&later), Err(BlockError::Version(3)));
}
