//! What the crate's tests share.

/// 20 bytes spread like a ring hash: a cheap mix of `i`.
pub(crate) fn spread_hash(i: u32) -> [u8; 20] {
    let mut h = [0u8; 20];
    let mut x = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x1234_5678;
    for b in h.iter_mut() {
        x ^= x >> 29;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        *b = (x >> 56) as u8;
    }
    h
}
