//! The decoders' two builds (wide.rs) agree, and a decimal column's sum
//! is checked to its rounding.

use super::tests::{any_samples, grid_samples};
use super::*;
use crate::bits::BitReader;
use proptest::prelude::*;

/// A block with its header's sum (offset 56) set to `sum` and its
/// checksum made right.
fn with_sum(mut b: Vec<u8>, sum: f64) -> Vec<u8> {
    b[56..64].copy_from_slice(&sum.to_le_bytes());
    let n = b.len() - 4;
    let crc = crc32fast::hash(&b[..n]);
    b[n..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// A decimal block whose sum is off by its last bit decodes (an in-order
/// sum may be); off by more than an in-order sum can be, it fails; the
/// sum decoded is the header's.
#[test]
fn a_decimal_sum_is_checked_to_its_rounding() {
    let s: Vec<Sample> = (0..1440)
        .map(|i| Sample {
            ts: 1_700_000_000_000_000_000 + i * 60_000_000_000,
            value: f64::from((i * 37 % 2000) as i32 + 1100) / 100.0,
        })
        .collect();
    let b = encode(&s, Choice::Auto).unwrap();
    let (h, _) = decode(&b).unwrap();
    assert_eq!(h.codec, Codec::Decimal);
    let size: f64 = s.iter().map(|x| x.value.abs()).sum();
    let up = f64::from_bits(h.sum.to_bits() + 1);
    let (back, _) = decode(&with_sum(b.clone(), up)).unwrap();
    assert_eq!(back.sum.to_bits(), up.to_bits());
    // Past twice the bound (the bound itself is rounded).
    let far = h.sum + 2.0 * (1440.0 + 4.0) * f64::EPSILON * size;
    assert_eq!(
        decode(&with_sum(b.clone(), far)).map(|_| ()),
        Err(BlockError::Invalid("samples disagree with the header"))
    );
    assert!(decode(&with_sum(b.clone(), h.sum + 0.01)).is_err());
    assert!(decode(&with_sum(b, f64::NAN)).is_err());
}

/// The sum check near its limit: the most values a block holds, all of
/// one sign, each chosen (of sixteen neighbours) so that adding it to the
/// running sum rounds up as far as it can: the in-order sum drifts from
/// the exact one about as far as any can, a fair part of the bound, and
/// an honest block still decodes. A sum of -0.0, which no in-order sum
/// from +0.0 of such values gives, fails.
#[test]
fn an_honest_sum_passes_near_the_bound() {
    let n = MAX_SAMPLES;
    let p = 1e6;
    let (mut s, mut values, mut total, mut size) = (0.0f64, Vec::with_capacity(n), 0i128, 0i128);
    for _ in 0..n {
        // The error of `s + v` rounded (TwoSum): most negative wins.
        let err = |v: f64| {
            let x = s + v;
            let z = x - s;
            (s - (x - z)) + (v - z)
        };
        let m = (9_000_000i64..9_000_016)
            .min_by(|&a, &b| err(a as f64 / p).total_cmp(&err(b as f64 / p)))
            .unwrap();
        let v = m as f64 / p;
        s += v;
        values.push(v);
        total += i128::from(m);
        size += i128::from(m);
    }
    let allowed = size as f64 / p * (n as f64 + 4.0) * f64::EPSILON;
    let drift = (s - total as f64 / p).abs();
    assert!(drift >= allowed / 8.0, "drift {drift:e} of {allowed:e}");
    let section = decimal::encode(&values).expect("decimals");
    let mut out = Vec::new();
    assert!(decimal::decode(&section, n, s, &mut out).is_ok());
    let zero = decimal::encode(&[1.5, -1.5]).unwrap();
    assert!(decimal::decode(&zero, 2, 0.0, &mut Vec::new()).is_ok());
    assert_eq!(
        decimal::decode(&zero, 2, -0.0, &mut Vec::new()).map(|_| ()),
        Err(BlockError::Invalid("samples disagree with the header"))
    );
}

/// The agreement tests below compare the x86-64-v3 build with the one
/// for any x86-64 only on a CPU that has v3 (elsewhere both sides are
/// one build): where the test run says the CPU has it
/// (`RILL_REQUIRE_V3=1`, which scripts/test-all sets when /proc/cpuinfo
/// lists AVX2 and BMI2), the run time detection must find it.
#[test]
fn the_v3_build_runs_where_the_cpu_has_it() {
    if std::env::var("RILL_REQUIRE_V3").is_ok_and(|v| v == "1") {
        #[cfg(target_arch = "x86_64")]
        assert!(super::wide::v3(), "x86-64-v3 not detected");
        #[cfg(not(target_arch = "x86_64"))]
        panic!("RILL_REQUIRE_V3 set on a CPU that is not x86-64");
    }
}

proptest! {
    /// The grid decoder as built for any x86-64 and as dispatched (the
    /// x86-64-v3 build on a CPU that has it): the same times and the same
    /// answer, also for damaged sections and in coarser units out.
    #[test]
    fn grid_decoders_agree(s in grid_samples(), at in any::<usize>(), bit in 0u8..8, coarser in 0u8..4) {
        let ts: Vec<i64> = s.iter().map(|x| x.ts).collect();
        let k = time::unit_exponent(&ts);
        let Some(mut section) = grid::encode(&ts, k) else { return Ok(()) };
        let out_unit = k.saturating_sub(coarser);
        for damaged in [false, true] {
            if damaged {
                let i = at % section.len();
                section[i] ^= 1 << bit;
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let ra = grid::decode(ts[0], ts.len(), k, out_unit, &mut BitReader::new(&section), &mut a);
            let rb = grid::decode_any(ts[0], ts.len(), k, out_unit, &mut BitReader::new(&section), &mut b);
            prop_assert_eq!(format!("{ra:?}"), format!("{rb:?}"));
            if ra.is_ok() {
                prop_assert_eq!(a, b);
            }
        }
    }

    /// Likewise the decimal decoder.
    #[test]
    fn decimal_decoders_agree(s in any_samples(), at in any::<usize>(), bit in 0u8..8) {
        let values: Vec<f64> = s.iter().map(|x| x.value).collect();
        let Some(mut section) = decimal::encode(&values) else { return Ok(()) };
        let sum = values.iter().sum::<f64>();
        for damaged in [false, true] {
            if damaged {
                let i = at % section.len();
                section[i] ^= 1 << bit;
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let ra = decimal::decode(&section, values.len(), sum, &mut a).map(|g| g.finish());
            let rb = decimal::decode_any(&section, values.len(), sum, &mut b).map(|g| g.finish());
            prop_assert_eq!(format!("{ra:?}"), format!("{rb:?}"));
            if ra.is_ok() {
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&a), bits(&b));
            }
            if !damaged {
                prop_assert!(ra.is_ok());
            }
        }
    }
}
