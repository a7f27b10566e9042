//! Data type semantics from Riak's tests and the client suites, and
//! convergence under random histories.

use proptest::prelude::*;
use rill_crdt::{Clock, Crdt, CrdtError, EmbeddedOp, Field, FieldKind, MapOp, MapValue, Op, Value};

fn set_op(adds: &[&str], removes: &[&str]) -> Op {
    Op::Set {
        adds: adds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        removes: removes.iter().map(|s| s.as_bytes().to_vec()).collect(),
    }
}

fn field(name: &str, kind: FieldKind) -> Field {
    Field {
        name: name.as_bytes().to_vec(),
        kind,
    }
}

#[test]
fn a_remove_without_context_of_an_absent_element_is_refused() {
    let mut s = Crdt::new("set", 14).unwrap();
    let e = s.apply(&set_op(&[], &["x"]), b"a", None, 0).unwrap_err();
    assert_eq!(e.to_string(), "{precondition,{not_present,<<\"x\">>}}");
    // With a context, it is not an error.
    s.apply(&set_op(&[], &["x"]), b"a", Some(&Clock::default()), 0)
        .unwrap();
}

#[test]
fn add_wins_over_a_concurrent_remove() {
    let mut a = Crdt::new("set", 14).unwrap();
    a.apply(&set_op(&["x"], &[]), b"a", None, 0).unwrap();
    let ctx = a.context().unwrap().clone();
    let mut b = a.clone();
    // b removes what it saw; a adds x again concurrently.
    b.apply(&set_op(&[], &["x"]), b"b", Some(&ctx), 0).unwrap();
    a.apply(&set_op(&["x"], &[]), b"a", None, 0).unwrap();
    a.merge(&b);
    assert_eq!(a.value(), Value::Set(vec![b"x".to_vec()]));
    // Add and remove in one op with an old context: the add wins.
    let mut c = Crdt::new("set", 14).unwrap();
    c.apply(&set_op(&["x"], &[]), b"a", None, 0).unwrap();
    let old = c.context().unwrap().clone();
    c.apply(&set_op(&["x"], &["x"]), b"a", Some(&old), 0)
        .unwrap();
    assert_eq!(c.value(), Value::Set(vec![b"x".to_vec()]));
}

#[test]
fn map_remove_then_update_in_one_op_starts_afresh() {
    let mut m = Crdt::new("map", 14).unwrap();
    let c = field("c", FieldKind::Counter);
    let inc = |n| {
        Op::Map(MapOp {
            removes: vec![],
            updates: vec![(c.clone(), EmbeddedOp::Counter(n))],
        })
    };
    m.apply(&inc(5), b"a", None, 0).unwrap();
    let ctx = m.context().unwrap().clone();
    let both = Op::Map(MapOp {
        removes: vec![c.clone()],
        updates: vec![(c.clone(), EmbeddedOp::Counter(2))],
    });
    m.apply(&both, b"a", Some(&ctx), 0).unwrap();
    assert_eq!(
        m.value(),
        Value::Map(vec![(c.clone(), MapValue::Counter(2))])
    );
    let rm = Op::Map(MapOp {
        removes: vec![c.clone()],
        updates: vec![],
    });
    let ctx = m.context().unwrap().clone();
    m.apply(&rm, b"a", Some(&ctx), 0).unwrap();
    assert_eq!(m.value(), Value::Map(vec![]));
    let e = m.apply(&rm, b"a", None, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "{precondition,{not_present,{<<\"c\">>,riak_dt_emcntr}}}"
    );
}

#[test]
fn wrong_op_types_are_named() {
    let mut c = Crdt::new("counter", 14).unwrap();
    let e = c.apply(&set_op(&["x"], &[]), b"a", None, 0).unwrap_err();
    assert_eq!(
        e,
        CrdtError::WrongType {
            op: "set",
            bucket: "counter"
        }
    );
    assert_eq!(
        e.to_string(),
        "Operation type is `set` but  bucket type is `counter`."
    );
}

#[test]
fn every_type_round_trips_and_rejects_truncation() {
    let mut m = Crdt::new("map", 14).unwrap();
    let inner = Op::Map(MapOp {
        removes: vec![],
        updates: vec![
            (field("n", FieldKind::Counter), EmbeddedOp::Counter(3)),
            (
                field("r", FieldKind::Register),
                EmbeddedOp::Register(b"v".to_vec()),
            ),
            (field("f", FieldKind::Flag), EmbeddedOp::Flag(true)),
            (
                field("s", FieldKind::Set),
                EmbeddedOp::Set {
                    adds: vec![b"e".to_vec()],
                    removes: vec![],
                },
            ),
            (
                field("m", FieldKind::Map),
                EmbeddedOp::Map(MapOp {
                    removes: vec![],
                    updates: vec![(field("deep", FieldKind::Counter), EmbeddedOp::Counter(1))],
                }),
            ),
        ],
    });
    m.apply(&inner, b"a", None, 7).unwrap();
    let mut h = Crdt::new("hll", 4).unwrap();
    h.apply(
        &Op::Hll {
            adds: vec![b"x".to_vec()],
        },
        b"a",
        None,
        0,
    )
    .unwrap();
    let mut g = Crdt::new("gset", 14).unwrap();
    g.apply(
        &Op::GSet {
            adds: vec![b"x".to_vec()],
        },
        b"a",
        None,
        0,
    )
    .unwrap();
    let mut c = Crdt::new("counter", 14).unwrap();
    c.apply(&Op::Counter(-4), b"a", None, 0).unwrap();
    let mut s = Crdt::new("set", 14).unwrap();
    s.apply(&set_op(&["a", "b"], &[]), b"a", None, 0).unwrap();
    for x in [m, h, g, c, s] {
        let bytes = x.encode();
        assert_eq!(Crdt::decode(&bytes).unwrap(), x);
        for cut in 0..bytes.len() {
            assert!(Crdt::decode(&bytes[..cut]).is_err());
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Add(usize, u8),
    RemoveSeen(usize, u8),
    Sync(usize, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..3usize, 0..4u8).prop_map(|(r, e)| Step::Add(r, e)),
        (0..3usize, 0..4u8).prop_map(|(r, e)| Step::RemoveSeen(r, e)),
        (0..3usize, 0..3usize).prop_map(|(a, b)| Step::Sync(a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn sets_and_maps_converge(steps in proptest::collection::vec(step(), 1..40)) {
        for kind in ["set", "map"] {
            let mut r: Vec<Crdt> = (0..3).map(|_| Crdt::new(kind, 14).unwrap()).collect();
            for s in &steps {
                match *s {
                    Step::Add(i, e) => {
                        let op = if kind == "set" {
                            set_op(&[&e.to_string()], &[])
                        } else {
                            Op::Map(MapOp { removes: vec![], updates: vec![(field(&e.to_string(), FieldKind::Counter), EmbeddedOp::Counter(1))] })
                        };
                        r[i].apply(&op, &[b'a' + i as u8], None, 0).unwrap();
                    }
                    Step::RemoveSeen(i, e) => {
                        let ctx = r[i].context().unwrap().clone();
                        let op = if kind == "set" {
                            set_op(&[], &[&e.to_string()])
                        } else {
                            Op::Map(MapOp { removes: vec![field(&e.to_string(), FieldKind::Counter)], updates: vec![] })
                        };
                        r[i].apply(&op, &[b'a' + i as u8], Some(&ctx), 0).unwrap();
                    }
                    Step::Sync(a, b) => {
                        let other = r[a].clone();
                        r[b].merge(&other);
                    }
                }
            }
            let mut fwd = r[0].clone();
            fwd.merge(&r[1]);
            fwd.merge(&r[2]);
            let mut back = r[2].clone();
            back.merge(&r[1]);
            back.merge(&r[0]);
            prop_assert_eq!(fwd.value(), back.value());
            let mut twice = fwd.clone();
            twice.merge(&fwd);
            prop_assert_eq!(twice.value(), fwd.value());
        }
    }
}

// A set inside a map: a remove with the context from a fetch takes out
// what the fetch saw, and an add made after the fetch survives it.
#[test]
fn removes_inside_a_map_follow_the_map_context() {
    let tags = field("tags", FieldKind::Set);
    let set_update = |adds: &[&str], removes: &[&str]| {
        Op::Map(MapOp {
            removes: vec![],
            updates: vec![(
                tags.clone(),
                EmbeddedOp::Set {
                    adds: adds.iter().map(|s| s.as_bytes().to_vec()).collect(),
                    removes: removes.iter().map(|s| s.as_bytes().to_vec()).collect(),
                },
            )],
        })
    };
    let mut m = Crdt::new("map", 14).unwrap();
    m.apply(&set_update(&["a", "b", "c"], &[]), b"x", None, 0)
        .unwrap();
    let ctx = m.context().unwrap().clone();
    m.apply(&set_update(&[], &["c"]), b"x", Some(&ctx), 0)
        .unwrap();
    let tags_of = |m: &Crdt| match m.value() {
        Value::Map(fields) => fields
            .into_iter()
            .find(|(f, _)| f.name == b"tags")
            .map(|(_, v)| v),
        _ => None,
    };
    assert_eq!(
        tags_of(&m),
        Some(MapValue::Set(vec![b"a".to_vec(), b"b".to_vec()]))
    );
    // Concurrent: one replica re-adds a, another removes a with an older context.
    let old = m.context().unwrap().clone();
    let mut r1 = m.clone();
    let mut r2 = m.clone();
    r1.apply(&set_update(&["a"], &[]), b"y", None, 0).unwrap();
    r2.apply(&set_update(&[], &["a"]), b"z", Some(&old), 0)
        .unwrap();
    r1.merge(&r2);
    assert_eq!(
        tags_of(&r1),
        Some(MapValue::Set(vec![b"a".to_vec(), b"b".to_vec()])),
        "add wins"
    );
}

#[test]
fn maps_refuse_nesting_they_could_not_read_back() {
    let mut op = MapOp::default();
    for _ in 0..40 {
        op = MapOp {
            removes: vec![],
            updates: vec![(field("m", FieldKind::Map), EmbeddedOp::Map(op))],
        };
    }
    let mut m = Crdt::new("map", 14).unwrap();
    let e = m.apply(&Op::Map(op), b"x", None, 0).unwrap_err();
    assert!(matches!(e, CrdtError::TooDeep { .. }), "{e}");
}
