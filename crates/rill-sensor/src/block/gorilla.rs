//! Values as Gorilla XOR ("Gorilla: A Fast, Scalable, In-Memory Time
//! Series Database", Facebook, 2015): the first value's 64 bits, then for
//! each value its XOR with the previous one: `0` if equal; `10` and the
//! meaningful bits if they fit in the previous value's window of leading
//! and trailing zeros; else `11`, 6 bits of leading zeros, 6 bits of the
//! meaningful length less one, and the meaningful bits. Any double
//! (NaN payloads, -0.0, infinities) comes back bit for bit.

use super::BlockError;
use crate::bits::{BitReader, BitWriter};

pub(crate) fn encode(values: &[f64], w: &mut BitWriter) {
    let mut prev = values[0].to_bits();
    w.write(prev, 64);
    // The window of the last `11` record: leading zeros and length.
    let mut window: Option<(u32, u32)> = None;
    for v in &values[1..] {
        let bits = v.to_bits();
        let x = bits ^ prev;
        prev = bits;
        if x == 0 {
            w.bit(false);
            continue;
        }
        // Leading zeros are written in 6 bits: at most 63.
        let lead = x.leading_zeros().min(63);
        let trail = x.trailing_zeros();
        match window {
            Some((wl, wlen)) if lead >= wl && trail >= 64 - wl - wlen => {
                w.write(0b10, 2);
                w.write(x >> (64 - wl - wlen), wlen);
            }
            _ => {
                let len = 64 - lead - trail;
                w.write(0b11, 2);
                w.write(u64::from(lead), 6);
                w.write(u64::from(len - 1), 6);
                w.write(x >> trail, len);
                window = Some((lead, len));
            }
        }
    }
}

/// Decodes `count` values, appended to `out` (on an error, `out` may hold
/// some of them: the caller truncates).
pub(crate) fn decode(
    r: &mut BitReader,
    count: usize,
    out: &mut Vec<f64>,
) -> Result<(), BlockError> {
    let end = out.len() + count;
    out.reserve(count);
    let mut prev = r.read(64)?;
    out.push(f64::from_bits(prev));
    let mut window: Option<(u32, u32)> = None;
    while out.len() < end {
        if !r.bit()? {
            out.push(f64::from_bits(prev));
            continue;
        }
        if !r.bit()? {
            let (wl, wlen) = window.ok_or(BlockError::Invalid("a reused window before any"))?;
            prev ^= r.read(wlen)? << (64 - wl - wlen);
        } else {
            let lead = r.read(6)? as u32;
            let len = r.read(6)? as u32 + 1;
            if lead + len > 64 {
                return Err(BlockError::Invalid("a window past 64 bits"));
            }
            prev ^= r.read(len)? << (64 - lead - len);
            window = Some((lead, len));
        }
        out.push(f64::from_bits(prev));
    }
    Ok(())
}
