//! HyperLogLog (riak_kv_hll over basho/hyper): 2^p one-byte registers;
//! an element's SHA-1 picks the register (first p bits) and its rank (one
//! more than the leading zeros of the following bits). Small counts are
//! estimated by linear counting, so they come out exact after rounding.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hll {
    pub(crate) precision: u8,
    pub(crate) registers: Vec<u8>,
}

impl Hll {
    /// Precision is clamped to Riak's 4..=16.
    pub fn new(precision: u8) -> Hll {
        let p = precision.clamp(4, 16);
        Hll {
            precision: p,
            registers: vec![0; 1 << p],
        }
    }

    pub fn precision(&self) -> u8 {
        self.precision
    }

    pub fn insert(&mut self, element: &[u8]) {
        let mut h = sha1_smol::Sha1::new();
        h.update(element);
        let d = h.digest().bytes();
        let bits = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
        let p = u32::from(self.precision);
        let index = (bits >> (64 - p)) as usize;
        let rest = bits << p;
        let rank = (rest.leading_zeros().min(64 - p) + 1) as u8;
        if self.registers[index] < rank {
            self.registers[index] = rank;
        }
    }

    pub fn estimate(&self) -> u64 {
        let m = self.registers.len() as f64;
        let zeros = self.registers.iter().filter(|r| **r == 0).count() as f64;
        let sum: f64 = self
            .registers
            .iter()
            .map(|r| 2f64.powi(-i32::from(*r)))
            .sum();
        let alpha = match self.registers.len() {
            16 => 0.673,
            32 => 0.697,
            64 => 0.709,
            _ => 0.7213 / (1.0 + 1.079 / m),
        };
        let raw = alpha * m * m / sum;
        let e = if raw <= 2.5 * m && zeros > 0.0 {
            m * (m / zeros).ln()
        } else {
            raw
        };
        e.round() as u64
    }

    /// Register-wise maximum; a finer sketch is folded down to the
    /// coarser precision first.
    pub fn merge(&mut self, other: &Hll) {
        let mut o = other.clone();
        if o.precision > self.precision {
            o = o.reduced(self.precision);
        } else if self.precision > o.precision {
            *self = self.reduced(o.precision);
        }
        for (a, b) in self.registers.iter_mut().zip(&o.registers) {
            *a = (*a).max(*b);
        }
    }

    fn reduced(&self, p: u8) -> Hll {
        let shift = u32::from(self.precision - p);
        let mut out = Hll::new(p);
        for (i, r) in self.registers.iter().enumerate() {
            if *r == 0 {
                continue;
            }
            let j = i >> shift;
            // The dropped index bits become leading bits of the rest.
            let low = (i & ((1 << shift) - 1)) as u64;
            let rank = if low == 0 {
                *r + shift as u8
            } else {
                (shift - (64 - low.leading_zeros())) as u8 + 1
            };
            out.registers[j] = out.registers[j].max(rank);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_counts_are_exact() {
        let mut h = Hll::new(14);
        for i in 0..5 {
            h.insert(format!("element-{i}").as_bytes());
            h.insert(format!("element-{i}").as_bytes());
        }
        assert_eq!(h.estimate(), 5);
    }

    #[test]
    fn large_counts_are_close() {
        let mut h = Hll::new(14);
        for i in 0..100_000 {
            h.insert(format!("e{i}").as_bytes());
        }
        let e = h.estimate() as f64;
        assert!((e - 100_000.0).abs() / 100_000.0 < 0.03, "{e}");
    }
}
