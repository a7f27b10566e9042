//! Secondary indexes follow their values, and survive a restart.

use super::{bin, bitcask, each, int, k, leveldb, leveled, query};
use rill_backend::{Backend, IndexQuery, IndexRange, LeveldbStore, Term};

#[test]
fn indexes_follow_their_values() {
    each(|b| {
        b.put(
            &k("", "p", "k1"),
            b"v",
            &[bin("name_bin", "alice"), int("age_int", 30)],
            &[],
        )
        .unwrap();
        b.put(
            &k("", "p", "k2"),
            b"v",
            &[bin("name_bin", "bob"), int("age_int", -4)],
            &[],
        )
        .unwrap();
        b.put(&k("", "p", "k3"), b"v", &[int("age_int", 1000)], &[])
            .unwrap();
        assert_eq!(
            query(
                b,
                "p",
                "age_int",
                IndexRange::Range(Term::Int(-10), Term::Int(100))
            ),
            vec![(Term::Int(-4), "k2".into()), (Term::Int(30), "k1".into())]
        );
        assert_eq!(
            query(
                b,
                "p",
                "name_bin",
                IndexRange::Eq(Term::Bin(b"bob".to_vec()))
            ),
            vec![(Term::Bin(b"bob".to_vec()), "k2".into())]
        );
        // Replacing k1's value moves its age entry.
        b.put(
            &k("", "p", "k1"),
            b"v2",
            &[int("age_int", 31)],
            &[int("age_int", 30)],
        )
        .unwrap();
        assert_eq!(
            query(b, "p", "age_int", IndexRange::Eq(Term::Int(30))),
            vec![]
        );
        assert_eq!(
            query(b, "p", "age_int", IndexRange::Eq(Term::Int(31))).len(),
            1
        );
        b.delete(
            &k("", "p", "k2"),
            &[bin("name_bin", "bob"), int("age_int", -4)],
        )
        .unwrap();
        assert_eq!(
            query(
                b,
                "p",
                "name_bin",
                IndexRange::Range(Term::Bin(vec![]), Term::Bin(vec![0xff]))
            ),
            vec![(Term::Bin(b"alice".to_vec()), "k1".into())]
        );
        // Continuation: strictly after (term, key).
        let q = IndexQuery {
            bucket_type: vec![],
            bucket: b"p".to_vec(),
            field: b"age_int".to_vec(),
            range: IndexRange::Range(Term::Int(i64::MIN), Term::Int(i64::MAX)),
            after: Some((Term::Int(31), b"k1".to_vec())),
        };
        let mut after = Vec::new();
        b.query_index(&q, &mut |t, _| {
            after.push(t.clone());
            true
        })
        .unwrap();
        assert_eq!(after, vec![Term::Int(1000)]);
    });
}

#[test]
fn indexes_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ldir = tempfile::tempdir().unwrap();
    let vdir = tempfile::tempdir().unwrap();
    let open = |which: usize| -> (Option<LeveldbStore>, Box<dyn Backend>) {
        match which {
            0 => (None, Box::new(bitcask(dir.path()))),
            1 => {
                let (s, b) = leveldb(ldir.path());
                (Some(s), Box::new(b))
            }
            _ => {
                let (s, b) = leveled(vdir.path());
                (Some(s), Box::new(b))
            }
        }
    };
    for which in 0..3 {
        restart_keeps_indexes(|| open(which));
    }
}

fn restart_keeps_indexes(open: impl Fn() -> (Option<LeveldbStore>, Box<dyn Backend>)) {
    {
        let (_s, b) = open();
        b.put(&k("", "p", "k1"), b"v", &[int("age_int", 7)], &[])
            .unwrap();
        b.put(&k("", "p", "k2"), b"v", &[int("age_int", 8)], &[])
            .unwrap();
        b.put(
            &k("", "p", "k2"),
            b"v",
            &[int("age_int", 9)],
            &[int("age_int", 8)],
        )
        .unwrap();
        b.sync().unwrap();
    }
    let (_s, b) = open();
    assert_eq!(
        query(
            b.as_ref(),
            "p",
            "age_int",
            IndexRange::Range(Term::Int(0), Term::Int(100))
        ),
        vec![(Term::Int(7), "k1".into()), (Term::Int(9), "k2".into())]
    );
    assert_eq!(b.get(&k("", "p", "k2")).unwrap().unwrap(), &b"v"[..]);
}
