use super::*;
use proptest::prelude::*;

fn write() -> Request {
    Request::Write {
        db: "telegraf".into(),
        now: 1_700_000_000_000_000_000,
        parts: vec![
            Part {
                home: 17,
                series: vec![
                    SeriesSamples {
                        key: "cpu{host=\"a\"}".into(),
                        group: Some("cpu,host=a".into()),
                        samples: vec![
                            Sample { ts: 5, value: 1.5 },
                            Sample {
                                ts: -3,
                                value: f64::NAN,
                            },
                            Sample {
                                ts: i64::MAX,
                                value: -0.0,
                            },
                        ],
                    },
                    SeriesSamples {
                        key: "up".into(),
                        group: None,
                        samples: vec![],
                    },
                ],
            },
            Part {
                home: 0,
                series: vec![],
            },
        ],
    }
}

#[test]
fn requests_and_replies_round_trip() {
    let w = write();
    let back = decode_request(&encode_request(&w)).unwrap();
    // NaN is not equal to itself: compare the bytes again.
    assert_eq!(encode_request(&back), encode_request(&w));
    let s = Request::Select {
        matchers: vec![MatcherSpec {
            label: "__name__".into(),
            op: "=~".into(),
            value: "cpu.*".into(),
        }],
        mint: -5,
        maxt: 99,
        now: 7,
    };
    assert_eq!(decode_request(&encode_request(&s)).unwrap(), s);
    let sd = Request::SelectDigests {
        matchers: vec![MatcherSpec {
            label: "host".into(),
            op: "!~".into(),
            value: "b.*".into(),
        }],
        mint: i64::MIN,
        maxt: i64::MAX,
        now: 0,
    };
    assert_eq!(decode_request(&encode_request(&sd)).unwrap(), sd);
    let sk = Request::SelectRanges {
        items: vec![
            ("cpu{host=\"a\"}".into(), 3, -4),
            ("ü".into(), i64::MIN, i64::MAX),
        ],
        now: 5,
    };
    assert_eq!(decode_request(&encode_request(&sk)).unwrap(), sk);
    let k = Request::Keys {
        sets: vec![
            vec![],
            vec![MatcherSpec {
                label: "db".into(),
                op: "!=".into(),
                value: "".into(),
            }],
        ],
    };
    assert_eq!(decode_request(&encode_request(&k)).unwrap(), k);
    let h = Request::Handoff {
        db: "d".into(),
        now: -1,
        series: vec![SeriesSamples {
            key: "k".into(),
            group: None,
            samples: vec![Sample { ts: 3, value: 0.5 }],
        }],
    };
    assert_eq!(decode_request(&encode_request(&h)).unwrap(), h);
    let d = Request::Databases;
    assert_eq!(decode_request(&encode_request(&d)).unwrap(), d);
    let g = Request::Digests {
        db: "d".into(),
        home: u32::MAX,
        now: 9,
        from: i64::MIN,
        to: i64::MAX,
        slice: 3_600_000_000_000,
    };
    assert_eq!(decode_request(&encode_request(&g)).unwrap(), g);
    for after in [None, Some(("k{a=\"1\"}".to_string(), -7))] {
        let p = Request::HomeSamples {
            db: "d".into(),
            home: 3,
            now: 9,
            from: -1,
            to: 1 << 60,
            after,
            limit: 250_000,
        };
        assert_eq!(decode_request(&encode_request(&p)).unwrap(), p);
    }
    for r in [
        Reply::Keys(vec!["a{}".into(), "ü".into()]),
        Reply::Written(Written {
            written: 3,
            too_old: 1,
            too_new: 0,
            bad_series: u64::MAX,
        }),
        Reply::Series(vec![Found {
            key: "x".into(),
            points: vec![(1, 2.0), (i64::MIN, 3.0)],
        }]),
        Reply::SeriesDigests {
            homes: vec![
                HomeKept {
                    db: "d".into(),
                    home: 63,
                    slice: 3_600_000_000_000,
                    slices: vec![(i64::MIN, u64::MAX, 0), (5, 1, 3)],
                },
                HomeKept {
                    db: "e".into(),
                    home: 0,
                    slice: 1,
                    slices: vec![],
                },
            ],
            series: vec![
                FoundDigest {
                    key: "x".into(),
                    homes: vec![0, 1],
                    from: -9,
                    points: 43_200,
                    digest: u64::MAX,
                },
                FoundDigest {
                    key: "y".into(),
                    homes: vec![],
                    from: i64::MAX,
                    points: 0,
                    digest: 0,
                },
            ],
        },
        Reply::Failed {
            kind: FailKind::Busy,
            text: "later".into(),
        },
        Reply::Digests(vec![(i64::MIN, u64::MAX, 0), (5, 1, 3)]),
        Reply::Samples {
            series: vec![SeriesSamples {
                key: "k".into(),
                group: Some("g".into()),
                samples: vec![Sample { ts: 3, value: 0.5 }],
            }],
            more: true,
        },
    ] {
        assert_eq!(decode_reply(&encode_reply(&r)).unwrap(), r);
    }
}

#[test]
fn every_cut_of_a_message_is_refused() {
    // A series naming a home the answer lacks is refused.
    let bad = Reply::SeriesDigests {
        homes: vec![],
        series: vec![FoundDigest {
            key: "x".into(),
            homes: vec![0],
            from: 0,
            points: 0,
            digest: 0,
        }],
    };
    assert_eq!(
        decode_reply(&encode_reply(&bad)),
        Err(MsgError::Malformed("home index"))
    );
    let b = encode_request(&write());
    for n in 0..b.len() {
        assert!(decode_request(&b[..n]).is_err(), "{n}");
    }
    let mut more = b.clone();
    more.push(0);
    assert!(decode_request(&more).is_err());
    let mut other = b;
    other[0] = 2;
    assert_eq!(decode_request(&other), Err(MsgError::Version(2)));
}

proptest! {
    #[test]
    fn any_bytes_decode_or_are_refused(b in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_request(&b);
        let _ = decode_reply(&b);
    }
}

/// The fuzzer's seeds of the digest read's messages decode (they are
/// written by hand, byte by byte as docs/format.md gives them).
#[test]
fn the_digest_read_seeds_decode() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/sensor_decoders");
    let read = |name: &str| std::fs::read(dir.join(name)).expect("a seed");
    assert!(matches!(
        decode_reply(&read("series-digests.bin")),
        Ok(Reply::SeriesDigests { .. })
    ));
    assert!(matches!(
        decode_request(&read("select-ranges.bin")),
        Ok(Request::SelectRanges { .. })
    ));
    assert!(matches!(
        decode_request(&read("select-digests.bin")),
        Ok(Request::SelectDigests { .. })
    ));
}
