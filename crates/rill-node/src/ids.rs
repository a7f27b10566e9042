//! Random identifiers: vnode actors, vtags, generated keys. Riak writes
//! vtags and keys in base 62; so does Rill.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 unpredictable bits: SipHash with a random key over a counter and
/// the time.
pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(now_us() as u128);
    h.finish()
}

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

pub fn base62(mut n: u128) -> String {
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 62) as usize]);
        n /= 62;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ascii")
}

/// A vtag: 128 random bits in base 62 (at most 22 characters).
pub fn vtag() -> Vec<u8> {
    base62(((random_u64() as u128) << 64) | random_u64() as u128).into_bytes()
}

/// A server-generated key: URL-safe, no '/', unique.
pub fn generated_key() -> Vec<u8> {
    vtag()
}
