use super::*;
use proptest::prelude::*;

fn samples(ts0: i64, step: i64, values: &[f64]) -> Vec<Sample> {
    values
        .iter()
        .enumerate()
        .map(|(i, &value)| Sample {
            ts: ts0 + i as i64 * step,
            value,
        })
        .collect()
}

fn same(a: &[Sample], b: &[Sample]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.ts == y.ts && x.value.to_bits() == y.value.to_bits())
}

#[test]
fn a_random_walk_at_two_decimals_is_decimal_and_small() {
    let mut v = 21.0f64;
    let mut seed = 7u64;
    let values: Vec<f64> = (0..1000)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            v += ((seed >> 33) % 21) as f64 / 100.0 - 0.1;
            (v * 100.0).round() / 100.0
        })
        .collect();
    let s = samples(1_700_000_000_000_000_000, 10_000_000_000, &values);
    let b = encode(&s, Choice::Auto).unwrap();
    let (h, back) = decode(&b).unwrap();
    assert_eq!(h.codec, Codec::Decimal);
    assert!(same(&s, &back));
    // Regular timestamps cost a bit each; steps of at most ±0.10 in
    // hundredths a byte at most.
    assert!(b.len() < 68 + 4 + 1000 / 8 + 1000 + 64, "{} bytes", b.len());
    let g = encode(&s, Choice::Gorilla).unwrap();
    assert!(b.len() < g.len(), "decimal {} gorilla {}", b.len(), g.len());
}

#[test]
fn header_holds_the_aggregates() {
    let s = samples(1000, 1000, &[3.0, f64::NAN, -2.5, 7.25]);
    let h = header(&encode(&s, Choice::Auto).unwrap()).unwrap();
    assert_eq!((h.count, h.first_ts, h.last_ts), (4, 1000, 4000));
    assert_eq!(
        (h.min, h.max, h.first, h.last, h.sum),
        (-2.5, 7.25, 3.0, 7.25, 7.75)
    );
    assert_eq!(h.codec, Codec::Gorilla, "NaN is not a decimal");
}

#[test]
fn special_values_come_back_bit_for_bit() {
    let stale = f64::from_bits(0x7ff0_0000_0000_0002); // Prometheus' stale marker
    let s = samples(
        -5_000,
        1,
        &[
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            stale,
            f64::MIN_POSITIVE,
            f64::MAX,
            1e-300,
        ],
    );
    for choice in [Choice::Auto, Choice::Smallest, Choice::Gorilla] {
        let (_, back) = decode(&encode(&s, choice).unwrap()).unwrap();
        assert!(same(&s, &back));
    }
}

#[test]
fn bad_input_is_refused() {
    assert_eq!(encode(&[], Choice::Auto), Err(EncodeError::Empty));
    let s = samples(0, 0, &[1.0, 2.0]);
    assert_eq!(encode(&s, Choice::Auto), Err(EncodeError::NotRising));
}

#[test]
fn every_flipped_bit_is_caught() {
    let s = samples(1_000_000, 1_000_000, &[1.5, 1.75, 2.0, 1.25, 9.0]);
    let b = encode(&s, Choice::Auto).unwrap();
    for i in 0..b.len() * 8 {
        let mut c = b.clone();
        c[i / 8] ^= 1 << (i % 8);
        assert!(decode(&c).is_err(), "bit {i}");
    }
    for n in 0..b.len() {
        assert!(decode(&b[..n]).is_err());
    }
}

#[test]
fn aggregates_are_the_same_bits_everywhere() {
    let s = samples(1, 1, &[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY]);
    let h = header(&encode(&s, Choice::Auto).unwrap()).unwrap();
    assert_eq!(h.min.to_bits(), f64::NEG_INFINITY.to_bits());
    assert_eq!(h.max.to_bits(), f64::INFINITY.to_bits());
    assert_eq!(h.sum.to_bits(), 0x7ff8_0000_0000_0000);
    let z = samples(1, 1, &[0.0, -0.0]);
    let h = header(&encode(&z, Choice::Auto).unwrap()).unwrap();
    assert_eq!(
        (h.min.to_bits(), h.max.to_bits()),
        ((-0.0f64).to_bits(), 0.0f64.to_bits())
    );
}

#[test]
fn a_hostile_count_is_refused_before_allocating() {
    let mut b = encode(&samples(0, 1, &[1.0, 2.0, 3.0]), Choice::Auto).unwrap();
    b[4..8].copy_from_slice(&(MAX_SAMPLES as u32).to_le_bytes());
    let n = b.len() - 4;
    let crc = crc32fast::hash(&b[..n]);
    b[n..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        decode(&b).map(|_| ()),
        Err(BlockError::Invalid("more samples than the timestamps hold"))
    );
}

#[test]
fn a_newer_version_says_so() {
    let mut b = encode(&samples(0, 1, &[1.0]), Choice::Auto).unwrap();
    b[0] = 3;
    assert_eq!(header(&b), Err(BlockError::Version(3)));
}

pub(super) fn any_samples() -> impl Strategy<Value = Vec<Sample>> {
    let value = prop_oneof![
        any::<f64>(),
        (-100_000i64..100_000, 0i32..4).prop_map(|(m, d)| m as f64 / 10f64.powi(d)),
        Just(0.0),
    ];
    let step = prop_oneof![
        Just(1_000_000_000i64),
        1i64..10_000_000_000,
        (1i64..100).prop_map(|s| s * 1_000_000),
    ];
    (
        -4_000_000_000_000_000_000i64..4_000_000_000_000_000_000,
        proptest::collection::vec((step, value), 1..300),
    )
        .prop_map(|(t0, steps)| {
            let mut t = t0;
            steps
                .into_iter()
                .map(|(d, value)| {
                    t += d;
                    Sample { ts: t, value }
                })
                .collect()
        })
}

/// Samples at a fixed interval with jitter, some missing: what the grid
/// timestamps are for.
pub(super) fn grid_samples() -> impl Strategy<Value = Vec<Sample>> {
    (
        -4_000_000_000_000_000i64..4_000_000_000_000_000,
        prop_oneof![Just(1_000_000i64), Just(1_000_000_000i64), Just(1i64)],
        1i64..100_000,
        0i64..100,
        proptest::collection::vec((any::<u16>(), any::<u8>(), -1000i32..1000), 3..300),
    )
        .prop_map(|(t0, unit, interval, jitter_pct, draws)| {
            let jitter = interval * jitter_pct / 250;
            let mut out: Vec<Sample> = Vec::new();
            for (k, (j, miss, v)) in draws.into_iter().enumerate() {
                if miss % 20 == 0 {
                    continue;
                }
                let off = if jitter == 0 {
                    0
                } else {
                    i64::from(j) % (2 * jitter + 1) - jitter
                };
                let ts = t0 + (k as i64 * interval + off) * unit;
                if out.last().is_none_or(|l| l.ts < ts) {
                    out.push(Sample {
                        ts,
                        value: f64::from(v) / 100.0,
                    });
                }
            }
            out
        })
        .prop_filter("at least one sample", |s| !s.is_empty())
}

#[test]
fn jittered_timestamps_go_on_a_grid() {
    // A sample a minute, stamped in ms with up to 200 ms of jitter.
    let mut x = 7u64;
    let mut s = Vec::new();
    for k in 0..1024i64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let jitter = (x % 401) as i64 - 200;
        s.push(Sample {
            ts: 1_700_000_000_000_000_000 + (k * 60_000 + jitter) * 1_000_000,
            value: 1.0,
        });
    }
    let b = encode(&s, Choice::Auto).unwrap();
    assert_eq!(b[3], 1, "the grid flag");
    // 9 bits of offset and 1 of skip a sample, against delta-of-delta's 16.
    assert!(b.len() < 1024 * 12 / 8 + 100, "{} bytes", b.len());
    let (_, back) = decode(&b).unwrap();
    assert!(same(&s, &back));
    // A clock 0.4 ms a minute slow stays on the grid (the interval has
    // fractional units).
    // (stamped in whole ms: intervals of 60,000 and 60,001 ms in turn).
    let drift: Vec<Sample> = (0..1024i64)
        .map(|k| Sample {
            ts: 1_700_000_000_000_000_000 + k * 600_004 / 10 * 1_000_000,
            value: 2.0,
        })
        .collect();
    let b = encode(&drift, Choice::Auto).unwrap();
    assert_eq!(b[3], 1);
    assert!(
        b.len() < 1024 * 2 / 8 + 120,
        "two bits a timestamp at most: {} bytes",
        b.len()
    );
    assert_eq!(decode(&b).unwrap().1, drift);
    // Irregular times stay delta-of-delta.
    let irregular = samples(0, 1, &[1.0, 2.0]);
    assert_eq!(encode(&irregular, Choice::Auto).unwrap()[3], 0);
}

/// A grid section with the largest interval and skips is an error, not
/// an overflow.
#[test]
fn a_hostile_grid_is_refused() {
    let mut b = encode(&samples(0, 1_000_000_000, &[1.0, 2.0, 3.0]), Choice::Auto).unwrap();
    let mut w = crate::bits::BitWriter::default();
    crate::bits::write_varint(&mut w, i64::MAX as u64);
    crate::bits::write_varint(&mut w, 0);
    w.write(0, 6);
    for _ in 0..2 {
        // A skip of 2^62 + ..., in Elias gamma: 62 zeros, then 63 bits.
        w.bit(true);
        w.write(0, 62);
        w.write(u64::MAX >> 1, 63);
    }
    let times = w.into_bytes();
    let values_at = 68 + u32::from_le_bytes(b[64..68].try_into().unwrap()) as usize;
    let values = b[values_at..b.len() - 4].to_vec();
    b.truncate(64);
    b[2] = 9;
    b[3] = 1;
    b.extend_from_slice(&(times.len() as u32).to_le_bytes());
    b.extend_from_slice(&times);
    b.extend_from_slice(&values);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    assert!(decode(&b).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn grid_blocks_decode_to_exactly_what_was_encoded(s in grid_samples()) {
        let b = encode(&s, Choice::Auto).unwrap();
        let (h, back) = decode(&b).unwrap();
        prop_assert!(same(&s, &back));
        prop_assert_eq!(h.count as usize, s.len());
    }

    #[test]
    fn a_block_decodes_to_exactly_what_was_encoded(s in any_samples()) {
        for choice in [Choice::Auto, Choice::Smallest, Choice::Gorilla] {
            let b = encode(&s, choice).unwrap();
            let (h, back) = decode(&b).unwrap();
            prop_assert!(same(&s, &back));
            prop_assert_eq!(h.count as usize, s.len());
        }
    }

    #[test]
    fn header_min_and_max_follow_the_total_order(s in any_samples()) {
        let h = header(&encode(&s, Choice::Auto).unwrap()).unwrap();
        let numbers = || s.iter().map(|x| x.value).filter(|v| !v.is_nan());
        let (min, max) = (numbers().min_by(f64::total_cmp), numbers().max_by(f64::total_cmp));
        prop_assert_eq!(h.min.to_bits(), min.unwrap_or(f64::NAN).to_bits());
        prop_assert_eq!(h.max.to_bits(), max.unwrap_or(f64::NAN).to_bits());
    }

    #[test]
    fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(&bytes);
        // With the checksum made right, the sections behind it are read.
        let mut b = bytes;
        if b.len() >= 72 {
            b[0] = 1;
            b[1] = 1 + b[1] % 2;
            b[2] %= 10;
            b[3] %= 2;
            let n = b.len() - 4;
            let crc = crc32fast::hash(&b[..n]);
            b[n..].copy_from_slice(&crc.to_le_bytes());
            let _ = decode(&b);
        }
    }

    #[test]
    fn a_forged_block_decodes_only_to_samples_its_header_agrees_with(
        s in prop_oneof![any_samples(), grid_samples()], at in any::<usize>(), bit in 0u8..8,
    ) {
        // A flipped bit is always caught by the checksum (see
        // every_flipped_bit_is_caught). With the checksum forged to match,
        // a changed sample can still agree with every aggregate (a zero
        // between min and max, lost in the sum's rounding), so the claim
        // here is the decoder's own: what it returns is what the header
        // says, rising timestamps, the count, the first and last, the
        // aggregates bit for bit (a decimal sum within its rounding).
        let mut b = encode(&s, Choice::Auto).unwrap();
        let body = b.len() - 4;
        // Every block has sections behind its 68-byte header.
        prop_assert!(body > 68);
        let i = 68 + at % (body - 68);
        b[i] ^= 1 << bit;
        let crc = crc32fast::hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
        if let Ok((h, back)) = decode(&b) {
            prop_assert_eq!(back.len(), h.count as usize);
            prop_assert!(back.windows(2).all(|w| w[0].ts < w[1].ts));
            prop_assert_eq!(back[0].ts, h.first_ts);
            prop_assert_eq!(back[back.len() - 1].ts, h.last_ts);
            prop_assert!(super::agrees(&h, &back));
        }
    }
}

/// Samples on a grid whose times are whole ms (a block in units of 1 ms
/// or 1 s).
fn ms_grid_samples() -> impl Strategy<Value = Vec<Sample>> {
    grid_samples()
        .prop_filter("units of 1 ms or more", |s| {
            s.len() < 2 || (s[1].ts - s[0].ts) % 1_000_000 == 0
        })
        .prop_map(|mut s| {
            let shift = s[0].ts.rem_euclid(1_000_000);
            for x in &mut s {
                x.ts -= shift;
            }
            s
        })
}

proptest! {
    /// A block decoded with its times in ms gets the times in ns floored
    /// and the same values, and fails where the ns decode fails (leaving
    /// the answer as it was), damaged (the checksum forged) or not.
    #[test]
    fn a_block_in_ms_is_the_block_in_ns_floored(
        s in prop_oneof![ms_grid_samples(), grid_samples(), any_samples()],
        choice in 0..3usize,
        damage in proptest::option::of((any::<prop::sample::Index>(), 0u8..8)),
    ) {
        let choice = [Choice::Auto, Choice::Smallest, Choice::Gorilla][choice];
        let mut b = encode(&s, choice).unwrap();
        if let Some((at, bit)) = damage {
            let n = b.len() - 4;
            b[at.index(n)] ^= 1 << bit;
            let crc = crc32fast::hash(&b[..n]);
            b[n..].copy_from_slice(&crc.to_le_bytes());
        }
        let (mut ts, mut vs) = (vec![-7i64], vec![0.5f64]);
        let ns = decode_columns(&b, &mut ts, &mut vs);
        let (mut tm, mut vm) = (vec![-7i64], vec![0.5f64]);
        let ms = decode_columns_in(&b, TimeUnit::Ms, &mut tm, &mut vm);
        prop_assert_eq!(ns.is_ok(), ms.is_ok());
        let floored: Vec<i64> = ts[1..].iter().map(|t| t.div_euclid(1_000_000)).collect();
        prop_assert_eq!(&tm[1..], &floored[..]);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&vm), bits(&vs));
    }
}

/// A header whose last time is off by a nanosecond from the samples (the
/// checksum forged) is refused when read in ms too, though the times
/// floored to ms agree: a grid read straight into ms checks the last
/// time's nanoseconds as well.
#[test]
fn a_last_time_off_by_a_nanosecond_is_refused_in_ms() {
    let mut x = 7u64;
    let s: Vec<Sample> = (0..50)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let jitter = (x % 401) as i64 - 200;
            Sample {
                ts: 1_700_000_000_000_000_000 + (i * 60_000 + jitter) * 1_000_000,
                value: f64::from(i as i32) / 10.0,
            }
        })
        .collect();
    let mut b = encode(&s, Choice::Auto).unwrap();
    assert_eq!(b[3] & GRID, GRID, "a grid");
    for delta in [1i64, 999_999, -1] {
        let mut forged = b.clone();
        let last = s[49].ts + delta;
        forged[16..24].copy_from_slice(&last.to_le_bytes());
        let n = forged.len() - 4;
        let crc = crc32fast::hash(&forged[..n]);
        forged[n..].copy_from_slice(&crc.to_le_bytes());
        let (mut ts, mut vs) = (Vec::new(), Vec::new());
        assert!(decode_columns(&forged, &mut ts, &mut vs).is_err());
        assert!(decode_columns_in(&forged, TimeUnit::Ms, &mut ts, &mut vs).is_err());
        assert!(ts.is_empty() && vs.is_empty());
    }
    let (mut ts, mut vs) = (Vec::new(), Vec::new());
    decode_columns_in(&b, TimeUnit::Ms, &mut ts, &mut vs).unwrap();
    let want: Vec<i64> = s.iter().map(|x| x.ts / 1_000_000).collect();
    assert_eq!(ts, want);
    b.clear();
}

/// A grid block in units of 1 s ending seconds before the last time an
/// i64 holds decodes exactly, and with any bit of its timestamps flipped
/// (the checksum forged) decodes to what its header says or fails, never
/// overflowing: its last samples lie past the point up to which times
/// are computed unchecked.
#[test]
fn a_grid_at_the_end_of_time_is_checked_where_it_could_overflow() {
    let top = i64::MAX / 1_000_000_000 * 1_000_000_000 - 2_000_000_000;
    let mut x = 7u64;
    let s: Vec<Sample> = (0..200i64)
        .map(|k| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Sample {
                ts: top - (199 - k) * 60_000_000_000 + (x % 3) as i64 * 1_000_000_000,
                value: k as f64,
            }
        })
        .collect();
    let b = encode(&s, Choice::Auto).unwrap();
    assert_eq!((b[2], b[3] & GRID), (9, GRID), "a grid in units of 1 s");
    assert!(same(&decode(&b).unwrap().1, &s));
    let times = 68..68 + u32::from_le_bytes(b[64..68].try_into().unwrap()) as usize;
    for i in times {
        for bit in 0..8 {
            let mut f = b.clone();
            f[i] ^= 1 << bit;
            let n = f.len() - 4;
            let crc = crc32fast::hash(&f[..n]);
            f[n..].copy_from_slice(&crc.to_le_bytes());
            if let Ok((h, back)) = decode(&f) {
                assert!(back.windows(2).all(|w| w[0].ts < w[1].ts));
                assert!(super::agrees(&h, &back));
            }
            // In ms: the ns times floored, or the same failure.
            let (mut ts, mut vs) = (Vec::new(), Vec::new());
            let ns = decode_columns(&f, &mut ts, &mut vs).map(|_| ts.clone());
            let (mut tm, mut vm) = (Vec::new(), Vec::new());
            let ms = decode_columns_in(&f, TimeUnit::Ms, &mut tm, &mut vm).map(|_| tm);
            match (ns, ms) {
                (Ok(ns), Ok(ms)) => {
                    let floored: Vec<i64> = ns.iter().map(|t| t.div_euclid(1_000_000)).collect();
                    assert_eq!(ms, floored);
                }
                (ns, ms) => assert_eq!(ns.is_ok(), ms.is_ok()),
            }
        }
    }
}

/// Timestamps a grid section puts out of order (an offset larger than the
/// interval, which no encoder writes) are reported as not rising, by both
/// time codecs.
#[test]
fn timestamps_out_of_order_are_caught_as_they_are_decoded() {
    use crate::bits::{write_varint, zigzag, BitWriter};
    // Grid: interval 100 units, centre 0, offsets in 9 bits; the second
    // timestamp 100 - 150 = -50, before the first.
    let mut w = BitWriter::default();
    write_varint(&mut w, 100 << 16);
    write_varint(&mut w, zigzag(0));
    w.write(9, 6);
    w.bit(false);
    w.write(zigzag(-150), 9);
    let bytes = w.into_bytes();
    let mut out = Vec::new();
    let rising = grid::decode(
        0,
        2,
        0,
        0,
        &mut crate::bits::BitReader::new(&bytes),
        &mut out,
    )
    .unwrap();
    assert_eq!(out, vec![0, -50]);
    assert!(!rising);
    // The same times rising: 100 + 20.
    let mut w = BitWriter::default();
    write_varint(&mut w, 100 << 16);
    write_varint(&mut w, zigzag(0));
    w.write(9, 6);
    w.bit(false);
    w.write(zigzag(20), 9);
    let bytes = w.into_bytes();
    let mut out = Vec::new();
    assert!(grid::decode(
        0,
        2,
        0,
        0,
        &mut crate::bits::BitReader::new(&bytes),
        &mut out
    )
    .unwrap());
    assert_eq!(out, vec![0, 120]);
    // Delta-of-delta: a second delta of -7 after +5.
    let mut w = BitWriter::default();
    write_varint(&mut w, 5);
    w.bit(true);
    w.bit(false);
    w.write(zigzag(-12), time::BUCKETS[0].2);
    let bytes = w.into_bytes();
    let mut out = Vec::new();
    let rising = time::decode(0, 3, 0, &mut crate::bits::BitReader::new(&bytes), &mut out).unwrap();
    assert_eq!(out, vec![0, 5, -2]);
    assert!(!rising);
}

/// A decimal section whose mantissas leave the range a double holds
/// exactly (which no encoder writes) is an error, in either direction, at
/// any place in a group, and when they come back within the group; in
/// range, the same section decodes.
#[test]
fn decimal_mantissas_out_of_range_are_an_error() {
    use crate::bits::{write_varint, zigzag, BitWriter};
    const LIMIT: i64 = 1 << 53;
    // Order 1, exponent 0: the first mantissa, then 40 differences (two
    // groups), each `step` but those `jumps` name.
    let section = |first: i64, step: i64, jumps: &[(usize, i64)]| {
        let mut w = BitWriter::default();
        w.write(0, 8);
        w.write(1, 8);
        write_varint(&mut w, zigzag(first));
        for (g, n) in [(0, 32), (1, 8)] {
            w.write(60, 7);
            for i in 0..n {
                let j = jumps.iter().find(|j| j.0 == g * 32 + i);
                w.write(zigzag(j.map_or(step, |j| j.1)), 60);
            }
        }
        w.into_bytes()
    };
    // The sum a header would hold: the values added in order.
    let in_order = |first: i64, step: i64| (0..41).fold(0.0, |s, i| s + (first + i * step) as f64);
    let (up, down) = (in_order(LIMIT - 100, 1), in_order(100 - LIMIT, -1));
    let decode = |b: &[u8], sum: f64| decimal::decode(b, 41, sum, &mut Vec::new()).map(|_| ());
    let range = Err(BlockError::Invalid("mantissa out of range"));
    assert!(decode(&section(LIMIT - 100, 1, &[]), up).is_ok());
    assert!(decode(&section(100 - LIMIT, -1, &[]), down).is_ok());
    for at in [0, 17, 31, 32, 39] {
        let b = section(LIMIT - 100, 1, &[(at, 200)]);
        assert_eq!(decode(&b, up), range, "up at {at}");
        let b = section(100 - LIMIT, -1, &[(at, -200)]);
        assert_eq!(decode(&b, down), range, "down at {at}");
    }
    for at in [0, 17, 32] {
        let b = section(LIMIT - 100, 0, &[(at, 200), (at + 1, -200)]);
        assert_eq!(decode(&b, up), range, "out and back at {at}");
    }
}
