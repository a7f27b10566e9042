//! The memory backend's cap and time to live.

use super::{int, k, query};
use rill_backend::{Backend, IndexRange, MemoryBackend, MemoryOptions, Term};

#[test]
fn memory_cap_evicts_the_oldest() {
    let b = MemoryBackend::new(MemoryOptions {
        max_memory_bytes: Some(4000),
        ttl: None,
    });
    for i in 0..10 {
        b.put(
            &k("", "b", &format!("k{i}")),
            &[0u8; 1000],
            &[int("i_int", i)],
            &[],
        )
        .unwrap();
    }
    assert!(b.size_bytes() <= 4000);
    assert_eq!(b.get(&k("", "b", "k0")).unwrap(), None);
    assert!(b.get(&k("", "b", "k9")).unwrap().is_some());
    assert!(query(&b, "b", "i_int", IndexRange::Eq(Term::Int(0))).is_empty());
    // A value larger than the whole cap is refused, not stored and evicted.
    assert!(b.put(&k("", "b", "huge"), &[0u8; 5000], &[], &[]).is_err());
    assert!(b.get(&k("", "b", "k9")).unwrap().is_some());
}

#[test]
fn memory_ttl_expires() {
    use std::time::{Duration, Instant};
    let ttl = Duration::from_millis(50);
    let b = MemoryBackend::new(MemoryOptions {
        max_memory_bytes: None,
        ttl: Some(ttl),
    });
    let put_at = Instant::now();
    b.put(&k("", "b", "k"), b"v", &[int("i_int", 1)], &[])
        .unwrap();
    let found = b.get(&k("", "b", "k")).unwrap().is_some();
    assert!(
        found || put_at.elapsed() >= ttl,
        "gone before its time to live"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.get(&k("", "b", "k")).unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "not expired 10 s after its 50 ms"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(query(&b, "b", "i_int", IndexRange::Eq(Term::Int(1))).is_empty());
    let mut n = 0;
    b.fold_keys(b"", b"b", &mut |_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 0);
}
