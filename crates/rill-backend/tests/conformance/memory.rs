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
    let b = MemoryBackend::new(MemoryOptions {
        max_memory_bytes: None,
        ttl: Some(std::time::Duration::from_millis(50)),
    });
    b.put(&k("", "b", "k"), b"v", &[int("i_int", 1)], &[])
        .unwrap();
    assert!(b.get(&k("", "b", "k")).unwrap().is_some());
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(b.get(&k("", "b", "k")).unwrap(), None);
    assert!(query(&b, "b", "i_int", IndexRange::Eq(Term::Int(1))).is_empty());
    let mut n = 0;
    b.fold_keys(b"", b"b", &mut |_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 0);
}
