use super::*;
use crate::vnode::step::CoordinateStep;
use rill_backend::Term;
use rill_object::{Content, Metadata, Object, PutMode, VClock};

fn object() -> Object {
    let mode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };
    let c = Content::new(b"value".to_vec(), Metadata::default());
    Object::coordinate_put(None, &VClock::new(), c, &b"actor".to_vec(), mode)
}

fn key() -> BKey {
    BKey::new(b"maps", b"sensors", b"k\x00\xff")
}

#[test]
fn requests_and_replies_round_trip_and_refuse_every_cut() {
    let route = Route {
        request_id: 42,
        partition: 7,
    };
    let ixn = rill_aae::IndexN { first: 3, n: 3 };
    let requests = [
        VnodeRequest::Get { key: key() },
        VnodeRequest::Aae {
            index_n: ixn,
            ask: rill_aae::Ask::Root,
        },
        VnodeRequest::Aae {
            index_n: ixn,
            ask: rill_aae::Ask::Branches(vec![0, 4095]),
        },
        VnodeRequest::Aae {
            index_n: ixn,
            ask: rill_aae::Ask::Clocks(vec![7, (1 << 20) - 1]),
        },
        VnodeRequest::AaeClocks {
            index_n: ixn,
            segments: vec![1, 2],
        },
        VnodeRequest::Head { key: key() },
        VnodeRequest::Merge {
            key: key(),
            object: object(),
            allow_mult: true,
            prune: Some(PruneRules::default()),
            return_object: true,
        },
        VnodeRequest::Merge {
            key: key(),
            object: object(),
            allow_mult: false,
            prune: None,
            return_object: false,
        },
        VnodeRequest::Reap {
            key: key(),
            clock: object().clock,
        },
        VnodeRequest::Coordinate {
            key: key(),
            step: Box::new(CoordinateStep::Put {
                context: object().clock,
                content: object().contents[0].clone(),
                mode: PutMode {
                    allow_mult: false,
                    last_write_wins: true,
                },
            }),
            prune: PruneRules::default(),
        },
        VnodeRequest::Coordinate {
            key: key(),
            step: Box::new(CoordinateStep::Dt {
                datatype: "map".into(),
                hll_precision: 14,
                op: map_op(),
                context: Some(rill_crdt::Clock::default()),
            }),
            prune: PruneRules::default(),
        },
        VnodeRequest::Coordinate {
            key: key(),
            step: Box::new(CoordinateStep::Dt {
                datatype: "set".into(),
                hll_precision: 14,
                op: rill_crdt::Op::Set {
                    adds: vec![b"a".to_vec(), vec![]],
                    removes: vec![b"b".to_vec()],
                },
                context: None,
            }),
            prune: PruneRules::default(),
        },
        VnodeRequest::Buckets {
            bucket_type: b"maps".to_vec(),
        },
        VnodeRequest::Keys(Box::new(crate::vnode::msg::KeysQuery {
            bucket_type: vec![],
            bucket: b"b".to_vec(),
            lo: b"a".to_vec(),
            hi: Some(b"z".to_vec()),
            after: Some(b"c".to_vec()),
            limit: 10,
            first_of: Some((64, vec![0, 3, 63])),
        })),
        VnodeRequest::Keys(Box::new(crate::vnode::msg::KeysQuery {
            bucket_type: vec![],
            bucket: b"b".to_vec(),
            lo: vec![],
            hi: None,
            after: None,
            limit: 1,
            first_of: None,
        })),
        VnodeRequest::Sensor(b"any bytes of the sensor service".to_vec()),
        VnodeRequest::Sensor(Vec::new()),
        VnodeRequest::Summaries(Box::new(crate::vnode::msg::KeysQuery {
            bucket_type: b"t".to_vec(),
            bucket: b"b".to_vec(),
            lo: b"a".to_vec(),
            hi: Some(b"m".to_vec()),
            after: None,
            limit: 100,
            first_of: Some((8, vec![1])),
        })),
        VnodeRequest::IndexPage {
            query: rill_backend::IndexQuery {
                bucket_type: vec![],
                bucket: b"b".to_vec(),
                field: b"f_int".to_vec(),
                range: rill_backend::IndexRange::Range(Term::Int(-5), Term::Int(9)),
                after: Some((Term::Int(0), b"k".to_vec())),
            },
            page: 1000,
        },
        VnodeRequest::IndexPage {
            query: rill_backend::IndexQuery {
                bucket_type: b"t".to_vec(),
                bucket: b"b".to_vec(),
                field: b"f_bin".to_vec(),
                range: rill_backend::IndexRange::Eq(Term::Bin(b"x".to_vec())),
                after: None,
            },
            page: 1,
        },
    ];
    for r in &requests {
        let b = encode_request(route, r);
        assert_eq!(decode_request(&b), Ok((route, r.clone())));
        for cut in 0..b.len() {
            assert!(decode_request(&b[..cut]).is_err(), "{r:?} cut at {cut}");
        }
        assert!(decode_reply(&b).is_err(), "a request is not a reply");
    }
    let replies = [
        VnodeReply::Found(None),
        VnodeReply::Aae(None),
        VnodeReply::Clocks(vec![(key(), object().clock), (key(), VClock::new())]),
        VnodeReply::Aae(Some(rill_aae::Answer::Root(vec![1, 2, 3]))),
        VnodeReply::Aae(Some(rill_aae::Answer::Branches(vec![(9, vec![5; 256])]))),
        VnodeReply::Aae(Some(rill_aae::Answer::Clocks(vec![
            (b"key".to_vec(), 77),
            (vec![], 0),
        ]))),
        VnodeReply::Found(Some(object())),
        VnodeReply::Stored(object()),
        VnodeReply::Head {
            clock: object().clock,
            fingerprint: 0x0102_0304_0506_0708,
        },
        VnodeReply::Merged,
        VnodeReply::Sensor(vec![0, 1, 2]),
        VnodeReply::Accepted,
        VnodeReply::Reaped(true),
        VnodeReply::Failed(KvError::OutOfSpace {
            retry_after_secs: 2,
        }),
        VnodeReply::Failed(KvError::Busy("a fold".into())),
        VnodeReply::Failed(KvError::TooLarge {
            size_bytes: 10,
            max_bytes: 5,
        }),
        VnodeReply::Failed(KvError::TooManySiblings(101)),
        VnodeReply::Failed(KvError::Backend("no room".into())),
        VnodeReply::Buckets(vec![b"a".to_vec(), vec![]]),
        VnodeReply::Keys {
            keys: vec![b"k1".to_vec()],
            more: true,
        },
        VnodeReply::Summaries {
            rows: vec![
                crate::vnode::summary::KeySummary {
                    key: b"k1".to_vec(),
                    siblings: 3,
                    bytes: 1 << 33,
                    modified_s: 1_764_000_000,
                },
                crate::vnode::summary::KeySummary {
                    key: vec![],
                    siblings: 0,
                    bytes: 0,
                    modified_s: 0,
                },
            ],
            next: None,
        },
        VnodeReply::Summaries {
            rows: vec![],
            next: Some(b"k9".to_vec()),
        },
        VnodeReply::Entries {
            entries: vec![
                (Term::Bin(b"t".to_vec()), b"k".to_vec()),
                (Term::Int(-1), vec![]),
            ],
            filled: false,
        },
        VnodeReply::Failed(KvError::Datatype(
            "\"Bucket must be allow_mult=true\"".into(),
        )),
    ];
    for r in &replies {
        let b = encode_reply(route, r);
        assert_eq!(decode_reply(&b), Ok((route, r.clone())));
        for cut in 0..b.len() {
            assert!(decode_reply(&b[..cut]).is_err(), "{r:?} cut at {cut}");
        }
    }
    // A storage failure's kind stays on its node; another node reads its
    // words, once prefixed.
    let failed = KvError::Storage(crate::StorageFailure::RefusesWrites {
        after_disk_full: true,
    });
    let b = encode_reply(route, &VnodeReply::Failed(failed.clone()));
    match decode_reply(&b) {
        Ok((_, VnodeReply::Failed(e))) => assert_eq!(e.to_string(), failed.to_string()),
        other => panic!("{other:?}"),
    }
    let mut b = encode_request(route, &requests[0]);
    b[2] = 9;
    assert_eq!(decode_request(&b), Err(WireError::Version(9)));
    b[2] = VERSION;
    b.push(0);
    assert!(matches!(decode_request(&b), Err(WireError::Malformed(_))));
}

fn map_op() -> rill_crdt::Op {
    use rill_crdt::{EmbeddedOp, Field, FieldKind, MapOp};
    let f = |name: &str, kind| Field {
        name: name.as_bytes().to_vec(),
        kind,
    };
    let inner = MapOp {
        removes: vec![f("gone", FieldKind::Flag)],
        updates: vec![(f("n", FieldKind::Counter), EmbeddedOp::Counter(-3))],
    };
    rill_crdt::Op::Map(MapOp {
        removes: vec![f("old", FieldKind::Register)],
        updates: vec![
            (f("on", FieldKind::Flag), EmbeddedOp::Flag(true)),
            (
                f("name", FieldKind::Register),
                EmbeddedOp::Register(b"x".to_vec()),
            ),
            (
                f("tags", FieldKind::Set),
                EmbeddedOp::Set {
                    adds: vec![b"t".to_vec()],
                    removes: vec![],
                },
            ),
            (f("inner", FieldKind::Map), EmbeddedOp::Map(inner)),
        ],
    })
}

#[test]
fn maps_nested_past_the_limit_are_refused() {
    use rill_crdt::{EmbeddedOp, Field, FieldKind, MapOp};
    let mut m = MapOp::default();
    for _ in 0..40 {
        m = MapOp {
            removes: vec![],
            updates: vec![(
                Field {
                    name: b"m".to_vec(),
                    kind: FieldKind::Map,
                },
                EmbeddedOp::Map(m),
            )],
        };
    }
    let r = VnodeRequest::Coordinate {
        key: key(),
        step: Box::new(CoordinateStep::Dt {
            datatype: "map".into(),
            hll_precision: 14,
            op: rill_crdt::Op::Map(m),
            context: None,
        }),
        prune: PruneRules::default(),
    };
    let route = Route {
        request_id: 1,
        partition: 0,
    };
    assert!(matches!(
        decode_request(&encode_request(route, &r)),
        Err(WireError::Malformed(_))
    ));
}

#[test]
fn anti_entropy_questions_out_of_range_are_refused() {
    let route = Route {
        request_id: 1,
        partition: 0,
    };
    let b = encode_request(
        route,
        &VnodeRequest::Aae {
            index_n: rill_aae::IndexN { first: 0, n: 3 },
            ask: rill_aae::Ask::Branches(vec![4096]),
        },
    );
    assert!(matches!(decode_request(&b), Err(WireError::Malformed(_))));
    let b = encode_request(
        route,
        &VnodeRequest::Aae {
            index_n: rill_aae::IndexN { first: 0, n: 3 },
            ask: rill_aae::Ask::Clocks(vec![1 << 20]),
        },
    );
    assert!(matches!(decode_request(&b), Err(WireError::Malformed(_))));
}
