//! Timestamps of a block: nanoseconds since the epoch, strictly rising.
//!
//! Every timestamp is divided by the block's unit, the largest power of
//! ten (1 ns to 1 s) dividing all of them, so data written at a precision
//! of milliseconds costs what it would at a clock of milliseconds. The
//! first timestamp is in the block's header; the first interval follows
//! as a varint, then each interval's change from the previous one
//! (delta-of-delta, zigzagged) in Gorilla's buckets: `0` for no change,
//! `10` and 7 bits, `110` and 9 bits, `1110` and 12 bits, `1111` and 64
//! bits.

use crate::bits::{read_varint, unzigzag, write_varint, zigzag, BitReader, BitWriter, Truncated};
use crate::block::{grid, BlockError, TimeUnit, GRID};

/// The largest `k` (0..=9) such that 10^k divides every timestamp.
pub(crate) fn unit_exponent(ts: &[i64]) -> u8 {
    let mut k = 9u8;
    for &t in ts {
        while k > 0 && t % 10i64.pow(u32::from(k)) != 0 {
            k -= 1;
        }
        if k == 0 {
            break;
        }
    }
    k
}

pub(crate) const BUCKETS: [(u64, u32, u32); 3] = [
    // (prefix bits, prefix length, value bits)
    (0b10, 2, 7),
    (0b110, 3, 9),
    (0b1110, 4, 12),
];

/// Writes timestamps 1.. of `ts` (the first is in the header), in units
/// of 10^k ns.
pub(crate) fn encode(ts: &[i64], k: u8, w: &mut BitWriter) {
    let unit = 10i64.pow(u32::from(k));
    let mut prev = ts[0] / unit;
    let mut prev_delta: i64 = 0;
    for (i, &t) in ts.iter().enumerate().skip(1) {
        let t = t / unit;
        let delta = t.wrapping_sub(prev);
        let dod = zigzag(delta.wrapping_sub(prev_delta));
        if i == 1 {
            // Rising timestamps: the first interval is positive.
            write_varint(w, delta as u64);
        } else if dod == 0 {
            w.bit(false);
        } else if let Some(&(prefix, plen, bits)) =
            BUCKETS.iter().find(|&&(_, _, bits)| dod < 1u64 << bits)
        {
            w.write(prefix, plen);
            w.write(dod, bits);
        } else {
            w.write(0b1111, 4);
            w.write(dod, 64);
        }
        prev = t;
        prev_delta = delta;
    }
}

/// Reads `count - 1` timestamps after `first` (ns), in units of 10^k,
/// appending `first` and them to `out` (on an error, `out` may hold some
/// of them: the caller truncates); whether they rise strictly.
pub(crate) fn decode(
    first: i64,
    count: usize,
    k: u8,
    r: &mut BitReader,
    out: &mut Vec<i64>,
) -> Result<bool, Truncated> {
    let unit = 10i64.pow(u32::from(k));
    out.reserve(count);
    out.push(first);
    let (mut last, mut rising) = (first, true);
    let mut prev = first / unit;
    let mut prev_delta: i64 = 0;
    for i in 1..count {
        let delta = if i == 1 {
            read_varint(r)? as i64
        } else {
            let mut ones = 0;
            while ones < 4 && r.bit()? {
                ones += 1;
            }
            let dod = match ones {
                0 => 0,
                1..=3 => r.read(BUCKETS[ones - 1].2)?,
                _ => r.read(64)?,
            };
            prev_delta.wrapping_add(unzigzag(dod))
        };
        let t = prev.wrapping_add(delta);
        let ns = t.wrapping_mul(unit);
        rising &= ns > last;
        last = ns;
        out.push(ns);
        prev = t;
        prev_delta = delta;
    }
    Ok(rising)
}

/// `count` timestamps from a timestamps section (`k` and `flags` as the
/// block's) appended to `out` in `unit` (left as it was on an error); an
/// error unless they rise strictly from `span`'s first to its last (ns),
/// checked as they are decoded. A grid in units of `unit` or coarser is
/// decoded straight into `unit`; any other section is decoded in ns,
/// checked, then floored.
pub(crate) fn decode_section(
    span: (i64, i64),
    count: usize,
    k: u8,
    flags: u8,
    times: &[u8],
    unit: TimeUnit,
    out: &mut Vec<i64>,
) -> Result<(), BlockError> {
    let (first_ts, last_ts) = span;
    // The second timestamp takes 8 bits, each later one at least 1: a
    // count beyond that is damage (checked before allocating for it).
    let len = times.len();
    if count > len * 8 + 2 - 8 * usize::from(len > 0) {
        return Err(BlockError::Invalid("more samples than the timestamps hold"));
    }
    let s = unit.exponent();
    let p = 10i64.pow(u32::from(s));
    let straight = flags & GRID != 0 && k >= s;
    let start = out.len();
    let mut r = BitReader::new(times);
    let done = if straight {
        grid::decode(first_ts, count, k, s, &mut r, out)
    } else if flags & GRID != 0 {
        grid::decode(first_ts, count, k, 0, &mut r, out)
    } else {
        decode(first_ts, count, k, &mut r, out).map_err(BlockError::from)
    }
    .and_then(|rising| {
        // Read straight into units of 10^s, a time is `first_ts` plus a
        // multiple of 10^k (so of 10^s) ns: the last is `last_ts` exactly
        // when it is `last_ts` floored and `last_ts` is `first_ts` plus a
        // multiple of 10^s.
        let last_ok = if straight {
            out.last() == Some(&last_ts.div_euclid(p))
                && last_ts.rem_euclid(p) == first_ts.rem_euclid(p)
        } else {
            out.last() == Some(&last_ts)
        };
        if rising && out.len() > start && last_ok {
            Ok(())
        } else {
            Err(BlockError::Invalid("timestamps not rising to the last"))
        }
    });
    if done.is_err() {
        out.truncate(start);
    } else if !straight && p > 1 {
        for t in &mut out[start..] {
            *t = t.div_euclid(p);
        }
    }
    done
}
