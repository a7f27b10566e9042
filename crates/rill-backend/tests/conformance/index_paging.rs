//! Index order and paging on every backend, with awkward terms.

use super::{each, int, k};
use rill_backend::{IndexQuery, IndexRange, Term};

/// Terms with 0x00 and 0xFF bytes, terms that begin others, negative and
/// extreme integers: every backend answers in term order, then key order;
/// paging with every page size from 1 up (resuming strictly after the
/// last result, as continuations do) rebuilds the whole answer with no
/// duplicate or gap while keys are written into and deleted from the
/// paged range between pages; an
/// overwrite or a delete leaves no stale entry.
#[test]
fn index_order_and_paging_on_every_backend() {
    let bins: Vec<&[u8]> = vec![
        b"",
        b"\x00",
        b"\x00\x00",
        b"\x00\xff",
        b"a",
        b"a\x00",
        b"a\x00b",
        b"a\xff",
        b"aa",
        b"ab",
        b"b",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff",
    ];
    let ints = [
        i64::MIN,
        i64::MIN + 1,
        -256,
        -1,
        0,
        1,
        255,
        256,
        i64::MAX - 1,
        i64::MAX,
    ];
    each(|b| {
        for (i, t) in bins.iter().enumerate() {
            // Two keys per term, one of them a prefix of the other.
            for key in [format!("k{i}"), format!("k{i}x")] {
                let entries = [
                    (b"t_bin".to_vec(), Term::Bin(t.to_vec())),
                    int("n_int", ints[i % ints.len()]),
                ];
                b.put(&k("", "o", &key), b"v", &entries, &[]).unwrap();
            }
        }
        let field = |f: &str, range: IndexRange, after: Option<(Term, Vec<u8>)>| IndexQuery {
            bucket_type: Vec::new(),
            bucket: b"o".to_vec(),
            field: f.as_bytes().to_vec(),
            range,
            after,
        };
        let all_bins =
            IndexRange::Range(Term::Bin(Vec::new()), Term::Bin(b"\xff\xff\xff".to_vec()));
        let mut want: Vec<(Term, Vec<u8>)> = Vec::new();
        for (i, t) in bins.iter().enumerate() {
            for key in [format!("k{i}"), format!("k{i}x")] {
                want.push((Term::Bin(t.to_vec()), key.into_bytes()));
            }
        }
        want.sort();
        let page = |q: &IndexQuery, n: usize| {
            let mut out = Vec::new();
            b.query_index(q, &mut |t, key| {
                out.push((t.clone(), key.to_vec()));
                out.len() < n
            })
            .unwrap();
            out
        };
        assert_eq!(
            page(&field("t_bin", all_bins.clone(), None), usize::MAX),
            want,
            "{}",
            b.name()
        );
        let t_bin = |t: &Term| [(b"t_bin".to_vec(), t.clone())];
        // Entries written meanwhile that the pages met (the writes do
        // land in the paged range).
        let mut met = 0;
        for size in 1..=want.len() + 1 {
            let mut joined: Vec<(Term, Vec<u8>)> = Vec::new();
            let mut after = None;
            let mut round = 0;
            // Entries written into the paged range while paging goes on.
            let mut churn: Vec<(Term, Vec<u8>)> = Vec::new();
            loop {
                // Between pages: a new key in the paged range, its term
                // cycling through every term (so before, at and after
                // the cursor), every third round the delete of an earlier
                // one, and a write to another bucket.
                round += 1;
                let term = Term::Bin(bins[(size + round) % bins.len()].to_vec());
                let key = format!("c{size}-{round}");
                b.put(&k("", "o", &key), b"v", &t_bin(&term), &[]).unwrap();
                churn.push((term, key.into_bytes()));
                if round.is_multiple_of(3) {
                    let (t, key) = &churn[round - 3];
                    b.delete(&k("", "o", std::str::from_utf8(key).unwrap()), &t_bin(t))
                        .unwrap();
                }
                b.put(
                    &k("", "other", &format!("w{size}-{round}")),
                    b"v",
                    &t_bin(&Term::Bin(b"a".to_vec())),
                    &[],
                )
                .unwrap();
                let got = page(&field("t_bin", all_bins.clone(), after.clone()), size);
                joined.extend(got.iter().cloned());
                if got.len() < size {
                    break;
                }
                after = got.last().cloned();
            }
            // In order with no duplicate; every entry present throughout
            // exactly once (no gap); nothing else but what was written
            // meanwhile.
            assert!(
                joined.windows(2).all(|w| w[0] < w[1]),
                "{} pages of {size}: out of order or repeated",
                b.name()
            );
            let kept: Vec<_> = joined
                .iter()
                .filter(|e| want.contains(e))
                .cloned()
                .collect();
            assert_eq!(kept, want, "{} pages of {size}", b.name());
            assert!(
                joined.iter().all(|e| want.contains(e) || churn.contains(e)),
                "{} pages of {size}: an entry never written",
                b.name()
            );
            met += joined.iter().filter(|e| churn.contains(e)).count();
            // Gone again before the next size (a second delete of one
            // already deleted is harmless).
            for (t, key) in &churn {
                let key = std::str::from_utf8(key).unwrap();
                b.delete(&k("", "o", key), &t_bin(t)).unwrap();
            }
        }
        assert!(met > 0, "{}: no write met by a page", b.name());
        // One term exactly, and a term that begins others.
        let eq = page(
            &field("t_bin", IndexRange::Eq(Term::Bin(b"a".to_vec())), None),
            usize::MAX,
        );
        assert_eq!(
            eq,
            vec![
                (Term::Bin(b"a".to_vec()), b"k4".to_vec()),
                (Term::Bin(b"a".to_vec()), b"k4x".to_vec())
            ],
            "{}",
            b.name()
        );
        let ranged = page(
            &field(
                "t_bin",
                IndexRange::Range(Term::Bin(b"a".to_vec()), Term::Bin(b"a\xff".to_vec())),
                None,
            ),
            usize::MAX,
        );
        let terms: Vec<&[u8]> = ranged
            .iter()
            .map(|(t, _)| match t {
                Term::Bin(b) => &b[..],
                Term::Int(_) => unreachable!(),
            })
            .collect();
        assert_eq!(
            terms,
            [
                &b"a"[..],
                b"a",
                b"a\x00",
                b"a\x00",
                b"a\x00b",
                b"a\x00b",
                b"aa",
                b"aa",
                b"ab",
                b"ab",
                b"a\xff",
                b"a\xff"
            ],
            "{}",
            b.name()
        );
        // Integers in numeric order.
        let got = page(
            &field(
                "n_int",
                IndexRange::Range(Term::Int(i64::MIN), Term::Int(i64::MAX)),
                None,
            ),
            usize::MAX,
        );
        let nums: Vec<i64> = got
            .iter()
            .map(|(t, _)| match t {
                Term::Int(i) => *i,
                Term::Bin(_) => unreachable!(),
            })
            .collect();
        let mut sorted = nums.clone();
        sorted.sort();
        assert_eq!(nums, sorted, "{}", b.name());
        assert_eq!(nums.len(), 2 * bins.len(), "{}", b.name());
        // An overwrite with another term, and a delete: no stale entry.
        b.put(
            &k("", "o", "k4"),
            b"v2",
            &[(b"t_bin".to_vec(), Term::Bin(b"zz".to_vec()))],
            &[(b"t_bin".to_vec(), Term::Bin(b"a".to_vec()))],
        )
        .unwrap();
        b.delete(
            &k("", "o", "k4x"),
            &[(b"t_bin".to_vec(), Term::Bin(b"a".to_vec()))],
        )
        .unwrap();
        assert!(
            page(
                &field("t_bin", IndexRange::Eq(Term::Bin(b"a".to_vec())), None),
                usize::MAX
            )
            .is_empty(),
            "{}",
            b.name()
        );
        assert_eq!(
            page(
                &field("t_bin", IndexRange::Eq(Term::Bin(b"zz".to_vec())), None),
                usize::MAX
            ),
            vec![(Term::Bin(b"zz".to_vec()), b"k4".to_vec())],
            "{}",
            b.name()
        );
    });
}
