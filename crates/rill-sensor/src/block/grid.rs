//! Timestamps on a grid (block flag bit 0): for sensors that sample at a
//! fixed interval with jitter, where delta-of-delta pays for the jitter
//! twice. Each timestamp (in the block's unit, relative to the first) is
//! a point of the grid `g(k) = floor(k * I / 65536)`, plus `c`, plus an
//! offset: `I` is the interval in 1/65536 units (so a clock a little off a whole
//! unit does not drift away from the grid), `c` centres the offsets. Per
//! timestamp after the first: the grid points skipped since the previous
//! one (`0` for none, else `1` and the count in Elias gamma: missing
//! samples), then the offset, zigzagged, in `b` bits (`b` for the whole
//! block).
//!
//! Section layout: varint `I`, varint zigzag `c`, 6 bits `b`, then the
//! timestamps. A block is written this way only when it comes out smaller
//! than delta-of-delta (block/mod.rs).

use crate::bits::{
    read_varint, unzigzag, width, write_varint, zigzag, BitReader, BitWriter, PEEK_BITS,
};
use crate::block::BlockError;

const FRAC: u32 = 16;
/// Offsets wider than this are not a grid.
const MAX_BITS: u32 = 40;

fn grid(k: i64, interval: i64) -> i128 {
    (i128::from(k) * i128::from(interval)) >> FRAC
}

fn gamma(w: &mut BitWriter, s: u64) {
    let n = 63 - s.leading_zeros();
    w.write(0, n);
    w.write(s, n + 1);
}

#[inline(always)]
fn read_gamma(r: &mut BitReader) -> Result<u64, BlockError> {
    let mut n = 0;
    while !r.bit()? {
        n += 1;
        if n > 63 {
            return Err(BlockError::Invalid("a skip longer than 64 bits"));
        }
    }
    let rest = if n == 0 { 0 } else { r.read(n)? };
    Ok((1u64 << n) | rest)
}

/// The grid section of rising timestamps `ts` in units of 10^k ns, or
/// `None` when they do not sit on a grid.
pub(crate) fn encode(ts: &[i64], k: u8) -> Option<Vec<u8>> {
    if ts.len() < 3 {
        return None;
    }
    let unit = 10i64.pow(u32::from(k));
    let u: Vec<i64> = ts
        .iter()
        .map(|&t| t.checked_sub(ts[0]).map(|d| d / unit))
        .collect::<Option<_>>()?;
    let mut deltas: Vec<i64> = u.windows(2).map(|w| w[1] - w[0]).collect();
    let mid = deltas.len() / 2;
    let median = *deltas.select_nth_unstable(mid).1;
    // The grid index of each timestamp, then the interval that best fits
    // the last one (to 1/65536 of a unit).
    let index = |interval_fp: i64| -> Option<Vec<i64>> {
        let mut ks = Vec::with_capacity(u.len());
        for &x in &u {
            let num = (i128::from(x) << FRAC) + i128::from(interval_fp) / 2;
            // A 64-bit division when the numerator fits (it does for a
            // block spanning under 2^46 units), else a 128-bit one: the
            // same quotient (both operands are positive).
            let q = match i64::try_from(num) {
                Ok(n) => n / interval_fp,
                Err(_) => i64::try_from(num / i128::from(interval_fp)).ok()?,
            };
            if ks.last().is_some_and(|&p| q <= p) {
                return None;
            }
            ks.push(q);
        }
        Some(ks)
    };
    let coarse = median.checked_mul(1 << FRAC)?;
    let ks = index(coarse)?;
    let last = *ks.last().expect("three at least");
    let fine =
        i64::try_from((i128::from(*u.last().expect("three")) << FRAC) / i128::from(last)).ok()?;
    let (interval, ks) = match index(fine.max(1)) {
        Some(fks) if fine > 0 => (fine, fks),
        _ => (coarse, ks),
    };
    let offsets: Vec<i64> = u
        .iter()
        .zip(&ks)
        .map(|(&x, &q)| i64::try_from(i128::from(x) - grid(q, interval)).ok())
        .collect::<Option<_>>()?;
    let (lo, hi) = offsets[1..]
        .iter()
        .fold((i64::MAX, i64::MIN), |(lo, hi), &o| (lo.min(o), hi.max(o)));
    // Offsets from -n to n-1 zigzag to below 2n.
    let c = i64::try_from(i128::from(lo) + (i128::from(hi) - i128::from(lo) + 1) / 2).ok()?;
    let centred: Vec<u64> = offsets[1..]
        .iter()
        .map(|&o| o.checked_sub(c).map(zigzag))
        .collect::<Option<_>>()?;
    let bits = centred.iter().map(|&z| width(z)).max().unwrap_or(0);
    if bits > MAX_BITS {
        return None;
    }
    let mut w = BitWriter::default();
    write_varint(&mut w, interval as u64);
    write_varint(&mut w, zigzag(c));
    w.write(u64::from(bits), 6);
    for i in 1..u.len() {
        let skip = (ks[i] - ks[i - 1] - 1) as u64;
        if skip == 0 {
            w.bit(false);
        } else {
            w.bit(true);
            gamma(&mut w, skip);
        }
        w.write(centred[i - 1], bits);
    }
    Some(w.into_bytes())
}

super::wide::dispatch! {
    /// Reads `count - 1` timestamps after `first` (ns) from a grid
    /// section, appending `first` and them to `out` floored to units of
    /// 10^`s` ns (`s` at most `k`: a timestamp `x` units of 10^k after
    /// `first` is `x * 10^(k-s) + floor(first / 10^s)` exactly, no
    /// division a sample; on an error, `out` may hold some of them: the
    /// caller truncates); whether they rise strictly (as in ns: `s <= k`
    /// keeps them apart).
    pub(crate) fn decode(first: i64, count: usize, k: u8, s: u8, r: &mut BitReader, out: &mut Vec<i64>) -> Result<bool, BlockError> = decode_any
}

/// [`decode`] as compiled for any CPU (inlined into both builds).
#[inline(always)]
pub(crate) fn decode_any(
    first: i64,
    count: usize,
    k: u8,
    s: u8,
    r: &mut BitReader,
    out: &mut Vec<i64>,
) -> Result<bool, BlockError> {
    debug_assert!(s <= k);
    let bad = || BlockError::Invalid("a grid timestamp out of range");
    let unit = 10i64.pow(u32::from(k));
    let scale = 10i64.pow(u32::from(s));
    let (unit_out, first_out) = (unit / scale, first.div_euclid(scale));
    let interval = i64::try_from(read_varint(r)?).map_err(|_| bad())?;
    let c = unzigzag(read_varint(r)?);
    let bits = r.read(6)? as u32;
    if interval <= 0 || bits > MAX_BITS {
        return Err(BlockError::Invalid("a bad grid"));
    }
    // Written in place, the reader in a local: the loop keeps its state
    // in registers.
    let start = out.len();
    out.resize(start + count.max(1), first_out);
    let mut rr = *r;
    let mut q: i64 = 0;
    // Up to `q_safe` grid points, no step of a timestamp can overflow
    // (offsets are below 2^bits in magnitude): computed plainly, the
    // usual case. Beyond it (damage, or a block spanning centuries),
    // every step is checked, in 128 bits where needed. (Bounded by
    // 2^MAX_BITS units instead, a block in units of 1 s was checked at
    // every step.)
    let q_safe = {
        let room = (i128::from(i64::MAX) - i128::from(first).abs()) / i128::from(unit)
            - i128::from(c).abs()
            - (1i128 << bits);
        ((room << FRAC) / i128::from(interval)).clamp(-1, i128::from(i64::MAX / interval)) as i64
    };
    let (mut prev, mut rising) = (first_out, true);
    let slots = &mut out[start + 1..];
    // The usual timestamps, no point skipped (a 0 bit and the offset):
    // as many as one peek holds (at least one: `bits` is at most 40),
    // their 0 bits tested at once and the input consumed once.
    let e = 1 + bits;
    let per = (PEEK_BITS / e) as usize;
    let zeros = (0..per as u32).fold(0u64, |m, j| m | 1 << (63 - j * e));
    // There, a timestamp is `(g + o) * unit_out + base`: `g + o` is
    // below `room` (so the product is below i64::MAX less |first|), and
    // `base` (`c` in units out, plus the first) fits whenever `room` is
    // not negative (|c| is within it); a block whose `base` does not fit
    // takes the checked path only.
    let base = c
        .checked_mul(unit_out)
        .and_then(|x| x.checked_add(first_out));
    let q_fast = if base.is_some() { q_safe } else { -1 };
    let base = base.unwrap_or(0);
    let mut i = 0;
    while i < slots.len() {
        let w = rr.peek();
        if w & zeros == 0 && per <= slots.len() - i && q <= q_fast - per as i64 {
            rr.consume(per as u32 * e)?;
            // The grid point of `q` kept as a running product.
            let mut at = q * interval;
            let batch = &mut slots[i..i + per];
            // The 0 bit shifted out, then the offset down (by two shifts:
            // `bits` may be 0).
            let offset = |j: usize| unzigzag((w << (j as u32 * e + 1)) >> (63 - bits) >> 1);
            if unit_out == 1 {
                for (j, slot) in batch.iter_mut().enumerate() {
                    at += interval;
                    let t = (at >> FRAC) + offset(j) + base;
                    rising &= t > prev;
                    prev = t;
                    *slot = t;
                }
            } else {
                for (j, slot) in batch.iter_mut().enumerate() {
                    at += interval;
                    let t = ((at >> FRAC) + offset(j)) * unit_out + base;
                    rising &= t > prev;
                    prev = t;
                    *slot = t;
                }
            }
            q += per as i64;
            i += per;
            continue;
        }
        // One timestamp: past a skip, near the end, or checked.
        let o = if w >> 63 == 0 {
            rr.consume(e)?;
            q = q.checked_add(1).ok_or_else(bad)?;
            ((w << 1) >> 1) >> (63 - bits)
        } else {
            rr.consume(1)?;
            let skip = read_gamma(&mut rr)?;
            q = i64::try_from(skip)
                .ok()
                .and_then(|s| q.checked_add(s)?.checked_add(1))
                .ok_or_else(bad)?;
            rr.read(bits)?
        };
        let o = unzigzag(o);
        // q and the interval are below 2^63, so the grid point is below
        // 2^110 and the sum below 2^111; the rest is checked. (The encoder
        // writes a grid only when every timestamp less the first fits in
        // an i64, so the units since the first fit too.)
        let t = if q <= q_safe {
            (((q * interval) >> FRAC) + c + o) * unit_out + first_out
        } else {
            i64::try_from(grid(q, interval) + i128::from(c) + i128::from(o))
                .ok()
                .and_then(|x| x.checked_mul(unit))
                .and_then(|x| x.checked_add(first))
                .ok_or_else(bad)?
                .div_euclid(scale)
        };
        rising &= t > prev;
        prev = t;
        slots[i] = t;
        i += 1;
    }
    *r = rr;
    out.truncate(start + count);
    Ok(rising)
}
