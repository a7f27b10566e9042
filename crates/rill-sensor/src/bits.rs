//! Bit-level writing and reading, most significant bit first.

/// Appends bits to a byte vector, most significant first, through a
/// 64-bit accumulator.
#[derive(Default)]
pub(crate) struct BitWriter {
    bytes: Vec<u8>,
    /// Bits not yet in `bytes`, in the low `n` bits (n < 64).
    acc: u64,
    n: u32,
}

impl BitWriter {
    /// Writes the low `n` bits of `v` (n ≤ 64), the highest first.
    #[inline]
    pub(crate) fn write(&mut self, v: u64, n: u32) {
        debug_assert!(n <= 64);
        if n == 0 {
            return;
        }
        let v = if n == 64 { v } else { v & ((1u64 << n) - 1) };
        let room = 64 - self.n;
        if n < room {
            self.acc = (self.acc << n) | v;
            self.n += n;
            return;
        }
        // Fill the accumulator (room is 1 to 64), emit it, keep the rest.
        let rest = n - room;
        let top = v >> rest;
        let full = if room == 64 {
            top
        } else {
            (self.acc << room) | top
        };
        self.bytes.extend_from_slice(&full.to_be_bytes());
        self.acc = if rest == 0 {
            0
        } else {
            v & ((1u64 << rest) - 1)
        };
        self.n = rest;
    }

    #[inline]
    pub(crate) fn bit(&mut self, b: bool) {
        self.write(u64::from(b), 1);
    }

    pub(crate) fn into_bytes(mut self) -> Vec<u8> {
        if self.n > 0 {
            let left = (self.acc << (64 - self.n)).to_be_bytes();
            self.bytes
                .extend_from_slice(&left[..self.n.div_ceil(8) as usize]);
        }
        self.bytes
    }
}

/// Reads bits written by [`BitWriter`]; reading past the end is an error.
/// A hot loop copies it into a local (it is `Copy`) so that its position
/// stays in a register, and writes it back at the end.
#[derive(Clone, Copy)]
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    /// Position in bits.
    pos: usize,
    /// The input's length in bits.
    end: usize,
}

/// The input ended inside a value.
#[derive(Debug)]
pub(crate) struct Truncated;

/// How many bits [`BitReader::peek`] gives at the least (64 less the
/// position's offset in its byte).
pub(crate) const PEEK_BITS: u32 = 57;

impl<'a> BitReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> BitReader<'a> {
        BitReader {
            bytes,
            pos: 0,
            end: bytes.len() * 8,
        }
    }

    /// The next bits, the first in the top bit: at least [`PEEK_BITS`]
    /// of them are the input's (zeros past its end). Nothing is consumed.
    #[inline]
    pub(crate) fn peek(&self) -> u64 {
        let (at, off) = (self.pos / 8, (self.pos % 8) as u32);
        let word = match self.bytes.get(at..at + 8) {
            Some(b) => u64::from_be_bytes(b.try_into().expect("8 bytes")),
            None => {
                let mut b = [0u8; 8];
                let tail = self.bytes.get(at..).unwrap_or(&[]);
                b[..tail.len()].copy_from_slice(tail);
                u64::from_be_bytes(b)
            }
        };
        word << off
    }

    /// Consumes `n` bits (after a [`peek`](Self::peek)); an error if the
    /// input has fewer.
    #[inline]
    pub(crate) fn consume(&mut self, n: u32) -> Result<(), Truncated> {
        let to = self.pos + n as usize;
        if to > self.end {
            return Err(Truncated);
        }
        self.pos = to;
        Ok(())
    }

    #[inline]
    pub(crate) fn read(&mut self, n: u32) -> Result<u64, Truncated> {
        debug_assert!(n <= 64);
        if n <= PEEK_BITS {
            self.read_short(n)
        } else {
            self.read_wide(n)
        }
    }

    /// `n` bits, `n` at most [`PEEK_BITS`].
    #[inline]
    fn read_short(&mut self, n: u32) -> Result<u64, Truncated> {
        if n == 0 {
            return Ok(0);
        }
        let v = self.peek() >> (64 - n);
        self.consume(n)?;
        Ok(v)
    }

    /// `n` bits, `n` above [`PEEK_BITS`]: two reads (a function of the
    /// reader's value, so that a hot loop's reader never has its address
    /// taken).
    #[inline]
    fn read_wide(&mut self, n: u32) -> Result<u64, Truncated> {
        let (v, next) = wide(*self, n)?;
        *self = next;
        Ok(v)
    }

    /// Fills `out` with values of `n` bits each (n ≤ 64), read one after
    /// another: the input's length checked once for all of them.
    #[inline]
    pub(crate) fn read_many(&mut self, n: u32, out: &mut [u64]) -> Result<(), Truncated> {
        debug_assert!(n <= 64);
        let to = self.pos + n as usize * out.len();
        if to > self.end {
            return Err(Truncated);
        }
        if n == 0 {
            out.fill(0);
        } else if n <= PEEK_BITS {
            // As many values as one peek holds, from one load.
            let per = (PEEK_BITS / n) as usize;
            let mut r = *self;
            for chunk in out.chunks_mut(per) {
                let w = r.peek();
                for (k, o) in chunk.iter_mut().enumerate() {
                    *o = (w << (k as u32 * n)) >> (64 - n);
                }
                r.pos += n as usize * chunk.len();
            }
        } else {
            let mut r = *self;
            for o in out.iter_mut() {
                *o = r.read_wide(n)?;
            }
        }
        self.pos = to;
        Ok(())
    }

    #[inline]
    pub(crate) fn bit(&mut self) -> Result<bool, Truncated> {
        let byte = *self.bytes.get(self.pos / 8).ok_or(Truncated)?;
        let b = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Ok(b == 1)
    }
}

#[cold]
fn wide(mut r: BitReader, n: u32) -> Result<(u64, BitReader), Truncated> {
    let hi = r.read_short(n - 32)?;
    let lo = r.read_short(32)?;
    Ok(((hi << 32) | lo, r))
}

/// LEB128 in the bit stream, 8 bits a group.
pub(crate) fn write_varint(w: &mut BitWriter, mut v: u64) {
    loop {
        let low = v & 0x7f;
        v >>= 7;
        if v == 0 {
            w.write(low, 8);
            return;
        }
        w.write(low | 0x80, 8);
    }
}

#[inline]
pub(crate) fn read_varint(r: &mut BitReader) -> Result<u64, Truncated> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = r.read(8)?;
        v |= (b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    // Too long for 64 bits: damaged input.
    Err(Truncated)
}

/// Zigzag: small magnitudes of either sign to small unsigned numbers.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bits needed for `u` (0 for 0).
pub(crate) fn width(u: u64) -> u32 {
    64 - u.leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn many_at_once_read_as_one_by_one(
            values in proptest::collection::vec(any::<u64>(), 0..80),
            n in 0u32..=64,
            lead in 0u32..=64,
            cut in 0usize..16,
        ) {
            let mask = |v: u64| if n == 64 { v } else { v & ((1u64 << n) - 1) };
            let mut w = BitWriter::default();
            w.write(0x5a5a_5a5a_5a5a_5a5a, lead);
            for &v in &values {
                w.write(v, n);
            }
            let mut bytes = w.into_bytes();
            let whole = bytes.len();
            bytes.truncate(whole.saturating_sub(cut));
            let mut one = BitReader::new(&bytes);
            let mut many = BitReader::new(&bytes);
            let lead_read = one.read(lead).is_ok();
            let _ = many.read(lead);
            let mut got = vec![0u64; values.len()];
            let all = many.read_many(n, &mut got);
            let each: Result<Vec<u64>, Truncated> = values.iter().map(|_| one.read(n)).collect();
            match (all, each) {
                (Ok(()), Ok(e)) => {
                    prop_assert_eq!(&got, &e);
                    if lead_read {
                        prop_assert_eq!(got, values.iter().map(|&v| mask(v)).collect::<Vec<_>>());
                    }
                    prop_assert_eq!(many.pos, one.pos);
                }
                (Err(_), Err(_)) => {}
                (a, e) => prop_assert!(false, "read_many {:?}, one by one {:?}", a.is_ok(), e.is_ok()),
            }
        }

        #[test]
        fn bits_round_trip(items in proptest::collection::vec((any::<u64>(), 0u32..=64), 0..200)) {
            let mut w = BitWriter::default();
            for &(v, n) in &items {
                w.write(v, n);
            }
            let bytes = w.into_bytes();
            let mut r = BitReader::new(&bytes);
            for &(v, n) in &items {
                let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
                prop_assert_eq!(r.read(n).unwrap(), v & mask);
            }
            prop_assert!(bytes.len() * 8 - r.pos < 8);
        }

        /// The same bytes as writing bit by bit (the format's definition:
        /// most significant first, the last byte padded with zeros), and
        /// read back from any position.
        #[test]
        fn bits_are_laid_out_one_by_one(items in proptest::collection::vec((any::<u64>(), 0u32..=64), 0..60)) {
            let mut w = BitWriter::default();
            let mut plain: Vec<bool> = Vec::new();
            for &(v, n) in &items {
                w.write(v, n);
                plain.extend((0..n).rev().map(|i| (v >> i) & 1 == 1));
            }
            let want: Vec<u8> = plain
                .chunks(8)
                .map(|c| c.iter().enumerate().fold(0u8, |b, (i, &x)| b | (u8::from(x) << (7 - i))))
                .collect();
            let bytes = w.into_bytes();
            prop_assert_eq!(&bytes, &want);
            let mut r = BitReader::new(&bytes);
            let mut at = 0usize;
            for &(_, n) in &items {
                let want = plain[at..at + n as usize].iter().fold(0u64, |v, &x| (v << 1) | u64::from(x));
                prop_assert_eq!(r.read(n).unwrap(), want);
                at += n as usize;
            }
        }

        #[test]
        fn zigzag_round_trip(v in any::<i64>()) {
            prop_assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    proptest! {
        /// A peek shows the next bits (zeros past the end) whatever was
        /// read before.
        #[test]
        fn peeks_show_what_reads_give(bytes in proptest::collection::vec(any::<u8>(), 0..20), skip in 0u32..160) {
            let mut r = BitReader::new(&bytes);
            let skip = skip.min(bytes.len() as u32 * 8);
            for _ in 0..skip {
                r.bit().unwrap();
            }
            let peeked = r.peek() >> (64 - PEEK_BITS);
            let left = (bytes.len() as u32 * 8 - skip).min(PEEK_BITS);
            let got = r.read(left).unwrap();
            prop_assert_eq!(peeked, got << (PEEK_BITS - left));
            prop_assert!(r.consume(1).is_err() || left == PEEK_BITS);
        }
    }

    #[test]
    fn reading_past_the_end_fails() {
        let mut r = BitReader::new(&[0xff]);
        assert_eq!(r.read(8).unwrap(), 0xff);
        assert!(r.read(1).is_err());
    }
}
