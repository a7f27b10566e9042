//! Values as scaled decimals: each value is `m × 10^e` with an integer
//! mantissa, so a sensor's reading of 21.37 is 2137 at exponent -2, and a
//! random walk at a realistic precision becomes small integer steps.
//!
//! The block has one exponent, the smallest of its values'; mantissas
//! are taken to it. The first mantissa is written as a zigzagged varint;
//! the rest as differences of order 1 (each from the previous) or 2 (each
//! difference from the previous difference), whichever is smaller, in
//! groups of 32: a group's 7-bit width, then each zigzagged difference
//! in that many bits. A block whose values are not all exactly decimal
//! (NaN, infinities, -0.0, more than 15 significant digits, magnitudes
//! beyond 2^53 at the block's exponent) is not encoded this way: the
//! encoder returns `None` and the block uses Gorilla XOR.

use super::{Agg, BlockError};
use crate::bits::{read_varint, unzigzag, width, write_varint, zigzag, BitReader, BitWriter};

const GROUP: usize = 32;
/// Mantissas stay below 2^53 so that `m as f64` is exact.
const MAX_MANTISSA: i64 = 1 << 53;
/// Exponents tried: 10^-15 .. 10^0 (larger values are integers already).
const MAX_DIGITS: i32 = 15;

/// Powers of ten as literals (each exact in a double): `powi`'s precision
/// is not specified.
const POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// `10^n`, n in 0..=15.
fn pow10(n: i32) -> f64 {
    POW10[n as usize]
}

/// The value a mantissa and an exponent (≤ 0) decode to. Division by an
/// exact power of ten is correctly rounded, so this is the double nearest
/// `m × 10^e`.
pub(crate) fn value_of(m: i64, e: i32) -> f64 {
    m as f64 / pow10(-e)
}

/// The smallest number of decimals `d` (0..=15) with `v` exactly
/// `m / 10^d` for an integer `m` below 2^53, and that `m`.
fn decimal(v: f64) -> Option<(i64, i32)> {
    if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
        return None;
    }
    for d in 0..=MAX_DIGITS {
        let x = (v * pow10(d)).round();
        if x.abs() >= MAX_MANTISSA as f64 {
            return None;
        }
        let m = x as i64;
        if value_of(m, -d) == v {
            return Some((m, -d));
        }
    }
    None
}

/// Encodes `values`, or `None` if some value is not exactly a decimal
/// this codec can hold.
pub(crate) fn encode(values: &[f64]) -> Option<Vec<u8>> {
    let mut parts = Vec::with_capacity(values.len());
    for &v in values {
        parts.push(decimal(v)?);
    }
    let e = parts.iter().map(|&(_, e)| e).min().unwrap_or(0);
    let mut ms = Vec::with_capacity(parts.len());
    for (&(m, me), &v) in parts.iter().zip(values) {
        let scaled = m.checked_mul(10i64.checked_pow((me - e) as u32)?)?;
        if scaled.abs() >= MAX_MANTISSA || value_of(scaled, e) != v {
            return None;
        }
        ms.push(scaled);
    }
    let d1: Vec<u64> = ms.windows(2).map(|w| zigzag(w[1] - w[0])).collect();
    let d2: Vec<u64> = std::iter::once(d1.first().copied().unwrap_or(0))
        .chain(ms.windows(3).map(|w| zigzag((w[2] - w[1]) - (w[1] - w[0]))))
        .collect();
    let order = if packed_bits(&d2) < packed_bits(&d1) {
        2
    } else {
        1
    };
    let mut w = BitWriter::default();
    w.write(u64::from(e.unsigned_abs()), 8);
    w.write(order, 8);
    write_varint(&mut w, zigzag(ms[0]));
    pack(&mut w, if order == 2 { &d2 } else { &d1 });
    Some(w.into_bytes())
}

fn packed_bits(ds: &[u64]) -> usize {
    ds.chunks(GROUP)
        .map(|g| 7 + g.len() * g.iter().map(|&d| width(d)).max().unwrap_or(0) as usize)
        .sum()
}

fn pack(w: &mut BitWriter, ds: &[u64]) {
    for g in ds.chunks(GROUP) {
        let bits = g.iter().map(|&d| width(d)).max().unwrap_or(0);
        w.write(u64::from(bits), 7);
        for &d in g {
            w.write(d, bits);
        }
    }
}

/// The least and the greatest of `ms` (not empty), in four lanes.
#[inline(always)]
fn min_max(ms: &[i64]) -> (i64, i64) {
    let (mut lo, mut hi) = ([ms[0]; 4], [ms[0]; 4]);
    let mut quads = ms.chunks_exact(4);
    for q in &mut quads {
        for j in 0..4 {
            lo[j] = lo[j].min(q[j]);
            hi[j] = hi[j].max(q[j]);
        }
    }
    for &x in quads.remainder() {
        lo[0] = lo[0].min(x);
        hi[0] = hi[0].max(x);
    }
    (
        lo[0].min(lo[1]).min(lo[2].min(lo[3])),
        hi[0].max(hi[1]).max(hi[2].max(hi[3])),
    )
}

/// Whether `sum` can be what adding `count` values `m_i / p` in order
/// gives, `total` being the sum of the `m_i` and `size` that of their
/// magnitudes: within `(count + 4) × 2^-52 × size / p` of `total / p`.
/// Each value is rounded once (by half a unit of its last place) and
/// each addition once, so an in-order sum is within about
/// `count × 2^-53 × size / p` of the exact one; the bound allows twice
/// that and the roundings of its own arithmetic. The header's sum is
/// still the in-order sum the encoder wrote: a block whose sum is wrong
/// by more than rounding fails, one off in its last bits decodes (its
/// checksum is what proves its bytes are the ones written). Checked this
/// way, the sum costs an integer addition a value instead of a
/// floating-point one each waiting for the last (a fifth of a column's
/// decoding).
fn sum_fits(sum: f64, total: i128, size: i128, count: usize, p: f64) -> bool {
    let exact = total as f64 / p;
    let allowed = size as f64 / p * (count as f64 + 4.0) * f64::EPSILON;
    // An in-order sum from +0.0 of values none of which is -0.0 is never
    // -0.0.
    let negative_zero = sum == 0.0 && sum.is_sign_negative();
    (sum - exact).abs() <= allowed && !negative_zero
}

super::wide::dispatch! {
    /// Decodes `count` values, appended to `out` (on an error, `out` may
    /// hold some of them: the caller truncates); their aggregates,
    /// gathered on the way, the sum being the header's `sum` once it is
    /// found to be the values' sum (see [`sum_fits`]).
    pub(crate) fn decode(bytes: &[u8], count: usize, sum: f64, out: &mut Vec<f64>) -> Result<Agg, BlockError> = decode_any
}

/// [`decode`] as compiled for any CPU (inlined into both builds).
#[inline(always)]
pub(crate) fn decode_any(
    bytes: &[u8],
    count: usize,
    sum: f64,
    out: &mut Vec<f64>,
) -> Result<Agg, BlockError> {
    let mut r = BitReader::new(bytes);
    let e = -(r.read(8)? as i32);
    if e < -MAX_DIGITS {
        return Err(BlockError::Invalid("decimal exponent out of range"));
    }
    let order = r.read(8)?;
    if order != 1 && order != 2 {
        return Err(BlockError::Invalid("unknown difference order"));
    }
    let mut m = unzigzag(read_varint(&mut r)?);
    if m.unsigned_abs() >= MAX_MANTISSA as u64 {
        return Err(BlockError::Invalid("mantissa out of range"));
    }
    // Written in place, a group's differences unpacked at once, then
    // turned into values in a loop of plain arithmetic. Min and max are
    // taken of the mantissas (a value grows with its mantissa: the
    // division is by a positive power of ten, correctly rounded), and so
    // is the sum, exactly, with the sum of magnitudes that bounds how far
    // an in-order sum of the values may be from it.
    let start = out.len();
    let v0 = value_of(m, e);
    out.resize(start + count.max(1), v0);
    let p = pow10(-e);
    let (mut lo, mut hi) = (m, m);
    let (mut total, mut size) = (i128::from(m), i128::from(m.unsigned_abs()));
    // Each difference read gives the next mantissa (of order 2: the
    // difference from the previous difference, the first one plain: the
    // previous taken as 0).
    let mut prev_d = 0i64;
    let mut raw = [0u64; GROUP];
    let mut ms = [0i64; GROUP];
    for slots in out[start..]
        .get_mut(1..)
        .unwrap_or_default()
        .chunks_mut(GROUP)
    {
        let bits = r.read(7)? as u32;
        if bits > 64 {
            return Err(BlockError::Invalid("group width over 64 bits"));
        }
        let raw = &mut raw[..slots.len()];
        r.read_many(bits, raw)?;
        // Mantissas first (an integer chain, one loop for each order),
        // then their least and greatest (four at a time: no chain of
        // comparisons a value), then the values (divisions independent of
        // each other).
        let ms = &mut ms[..slots.len()];
        if order == 2 {
            for (mi, &z) in ms.iter_mut().zip(raw.iter()) {
                prev_d = prev_d.wrapping_add(unzigzag(z));
                m = m.wrapping_add(prev_d);
                *mi = m;
            }
        } else {
            for (mi, &z) in ms.iter_mut().zip(raw.iter()) {
                m = m.wrapping_add(unzigzag(z));
                *mi = m;
            }
        }
        let (glo, ghi) = min_max(ms);
        lo = lo.min(glo);
        hi = hi.max(ghi);
        // Every mantissa is within range if the least and the greatest
        // are (checked once a group: the values of one out of range are
        // not kept, the caller truncating on the error).
        if lo <= -MAX_MANTISSA || hi >= MAX_MANTISSA {
            return Err(BlockError::Invalid("mantissa out of range"));
        }
        // A group's sums fit in an i64: 32 mantissas below 2^53.
        let (mut t, mut z) = (0i64, 0i64);
        for (slot, &mi) in slots.iter_mut().zip(ms.iter()) {
            *slot = mi as f64 / p;
            t += mi;
            z += mi.abs();
        }
        total += i128::from(t);
        size += i128::from(z);
    }
    if count > 0 && !sum_fits(sum, total, size, count, p) {
        return Err(BlockError::Invalid("samples disagree with the header"));
    }
    let agg = if count > 0 {
        Agg::span(value_of(lo, e), value_of(hi, e), sum)
    } else {
        Agg::default()
    };
    out.truncate(start + count);
    Ok(agg)
}
