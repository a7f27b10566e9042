//! A stable 64-bit digest (FNV-1a) of the parts of the state every node
//! must agree on, so nodes can say which version they have seen.

pub(crate) struct Digest(u64);

impl Digest {
    pub fn new() -> Digest {
        Digest(0xcbf2_9ce4_8422_2325)
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Digest {
        // The length first, so ("ab", "c") and ("a", "bc") differ.
        for x in (b.len() as u64).to_be_bytes().iter().chain(b) {
            self.0 ^= u64::from(*x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Digest {
        self.bytes(&v.to_be_bytes())
    }

    pub fn str(&mut self, s: &str) -> &mut Digest {
        self.bytes(s.as_bytes())
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}
