//! The sensor-data decoders on arbitrary input: blocks of one series and
//! group blocks (as read from the store, and with their checksum made
//! right so the fuzzer reaches the sections behind it), line protocol bodies, write-ahead log segments,
//! the sensor stores' keys and series records, series selectors,
//! Prometheus remote write bodies, MQTT payloads, queries (parsed and
//! evaluated) and the sensor service's messages between nodes. Nothing may panic; a
//! block that decodes re-encodes to samples that decode the same, and so
//! do log entries, block keys and series records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_sensor::block::{decode, encode, Choice};

fn block(bytes: &[u8]) {
    check_block(bytes);
    // With the header's fixed fields made valid and the checksum made
    // right, so the sections behind it (delta-of-delta or grid
    // timestamps, either value codec) are what is fuzzed.
    if bytes.len() >= 72 {
        let mut b = bytes.to_vec();
        b[0] = 1;
        b[1] = 1 + b[1] % 2;
        b[2] %= 10;
        b[3] %= 2;
        let n = b.len() - 4;
        let crc = crc32fast::hash(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        check_block(&b);
    }
    check_group(bytes);
    // A group block (version 2) with its fixed fields made valid, a few
    // columns, and the checksum made right.
    if bytes.len() >= 111 {
        let mut b = bytes.to_vec();
        b[0] = 2;
        b[1] %= 10;
        b[2] %= 2;
        b[3] = 0;
        b[28] = 1 + b[28] % 4;
        b[29] = 0;
        let n = b.len() - 4;
        let crc = crc32fast::hash(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        check_group(&b);
    }
}

/// Times decoded in ms are the times in ns floored, or both fail (and
/// the failure leaves the columns as they were).
fn same_in_ms(
    ns: Result<impl Sized, rill_sensor::BlockError>,
    ms: Result<impl Sized, rill_sensor::BlockError>,
    (ts, vs): (&[i64], &[f64]),
    (tm, vm): (&[i64], &[f64]),
) {
    assert_eq!(ns.is_ok(), ms.is_ok());
    assert_eq!(ts.len(), tm.len());
    assert!(ts
        .iter()
        .zip(tm)
        .all(|(a, b)| a.div_euclid(1_000_000) == *b));
    assert!(vs.iter().zip(vm).all(|(a, b)| a.to_bits() == b.to_bits()));
}

fn check_group(bytes: &[u8]) {
    use rill_sensor::block::group;
    use rill_sensor::TimeUnit;
    let _ = group::headers(bytes);
    let Ok(columns) = group::decode(bytes) else {
        return;
    };
    for (series, h, samples) in &columns {
        assert_eq!(h.count as usize, samples.len());
        let one = group::decode_series(bytes, *series).expect("its column decodes");
        assert!(one.is_some_and(|(_, s)| s.len() == samples.len()));
        let (mut ts, mut vs, mut tm, mut vm) = (vec![1], vec![0.5], vec![1], vec![0.5]);
        same_in_ms(
            group::decode_series_columns(bytes, *series, &mut ts, &mut vs),
            group::decode_series_columns_in(bytes, *series, TimeUnit::Ms, &mut tm, &mut vm),
            (&ts[1..], &vs[1..]),
            (&tm[1..], &vm[1..]),
        );
    }
    let borrowed: Vec<(u64, &[rill_sensor::Sample])> =
        columns.iter().map(|(s, _, v)| (*s, v.as_slice())).collect();
    let again = group::encode(&borrowed, Choice::Smallest).expect("decoded columns encode");
    let back = group::decode(&again).expect("a fresh group block decodes");
    for ((a, _, x), (b, _, y)) in columns.iter().zip(&back) {
        assert_eq!(a, b);
        assert!(x
            .iter()
            .zip(y)
            .all(|(p, q)| p.ts == q.ts && p.value.to_bits() == q.value.to_bits()));
    }
}

fn check_block(bytes: &[u8]) {
    let (mut ts, mut vs, mut tm, mut vm) = (vec![1], vec![0.5], vec![1], vec![0.5]);
    same_in_ms(
        rill_sensor::block::decode_columns(bytes, &mut ts, &mut vs),
        rill_sensor::block::decode_columns_in(bytes, rill_sensor::TimeUnit::Ms, &mut tm, &mut vm),
        (&ts[1..], &vs[1..]),
        (&tm[1..], &vm[1..]),
    );
    if let Ok((h, samples)) = decode(bytes) {
        assert_eq!(h.count as usize, samples.len());
        let again = encode(&samples, Choice::Smallest).expect("decoded samples encode");
        let (_, back) = decode(&again).expect("a fresh block decodes");
        assert!(samples
            .iter()
            .zip(&back)
            .all(|(a, b)| a.ts == b.ts && a.value.to_bits() == b.value.to_bits()));
    }
}

/// Log bytes: as a segment header, and as records until one does not
/// read.
fn wal(bytes: &[u8]) {
    use rill_tsdb::wal::format::{decode_payload, encode_entry, parse_segment_header, read_record};
    let _ = parse_segment_header(bytes);
    let mut at = 0;
    while let Ok((payload, used)) = read_record(&bytes[at..]) {
        assert!(used > payload.len());
        if let Ok(entries) = decode_payload(payload) {
            let mut again = Vec::new();
            for e in &entries {
                encode_entry(&mut again, e).expect("decoded entries encode");
            }
            let back = decode_payload(&again).expect("fresh entries decode");
            assert_eq!(format!("{back:?}"), format!("{entries:?}"));
        }
        at += used;
    }
}

/// A store's key and value: a block key, a series record's key and value.
fn stores(bytes: &[u8]) {
    use rill_tsdb::keys::*;
    if let Some((series, window, part)) = parse_block_key(bytes) {
        assert_eq!(block_key(series, window, part)[..], bytes[..]);
    }
    if let Some(id) = parse_series_record_key(bytes) {
        assert_eq!(series_record_key(id)[..], bytes[..]);
    }
    if let Ok((db, key)) = decode_series_record(bytes) {
        assert_eq!(
            encode_series_record(&db, &key).expect("decoded names encode"),
            bytes
        );
        // The key as the catalog holds it: a series key, or not one.
        if let Some(s) = rill_sensor::Series::parse_key(&key) {
            assert_eq!(s.key(), key);
        }
    }
}

/// A Prometheus series selector, as `match[]` brings it.
fn selector(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Ok(m) = rill_promql::parse_selector(text) {
            let s = rill_sensor::Series::new("cpu", vec![("host".into(), text.into())]);
            let _ = rill_tsdb::prom_source::selects(&m, &s);
        }
    }
}

/// A remote write body, as sent and wrapped in valid Snappy so the
/// protobuf decoder is reached.
fn remote_write(bytes: &[u8], wrap: bool) {
    use rill_sensor::remote_write::decode;
    let body = if wrap {
        snap::raw::Encoder::new()
            .compress_vec(bytes)
            .expect("snappy compresses")
    } else {
        bytes.to_vec()
    };
    if let Ok(d) = decode(&body, 1 << 20) {
        for (s, samples) in &d.series {
            // No NaN (stale marker or other) is kept.
            assert!(samples.iter().all(|x| !x.value.is_nan()));
            assert_eq!(rill_sensor::Series::parse_key(&s.key()).as_ref(), Some(s));
        }
    }
}

/// An MQTT payload as the subscriber reads it (any of its forms).
fn mqtt(bytes: &[u8]) {
    let mut b = rill_tsdb::ingest::Builder::default();
    b.mqtt("fuzz/topic", bytes, "db", rill_sensor::Precision::Ms, 0);
    let batch = b.finish();
    // Every series carries its topic (or a tag of its own of that name)
    // and the database, and its key reads back.
    for (key, samples) in &batch.series {
        let s = rill_sensor::Series::parse_key(key).expect("a key reads back");
        assert_eq!(&s.key(), key);
        assert!(s.label("topic").is_some(), "{key}");
        assert!(s.label("db").is_some(), "{key}");
        assert!(!samples.is_empty());
    }
}

/// A query, as `/api/v1/query` brings it: parsed, and evaluated at an
/// instant and over a range on a source with one series, without
/// panicking, within a small bound of points.
fn promql(bytes: &[u8]) {
    use rill_promql::eval::{instant, range, Options, Source};
    use rill_promql::value::{Labels, Point, Series};
    struct One;
    impl Source for One {
        fn select(&self, m: &[rill_promql::Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
            let labels = Labels::new(vec![
                ("__name__".into(), "m".into()),
                ("a".into(), "1".into()),
            ]);
            if !m.iter().all(|x| x.matches(labels.value(&x.label))) {
                return Ok(Vec::new());
            }
            let points = (0..20i64)
                .map(|k| Point {
                    t: k * 7_000,
                    v: (k % 5) as f64,
                })
                .filter(|p| p.t >= mint && p.t <= maxt)
                .collect();
            Ok(vec![Series { labels, points }])
        }
    }
    let opts = Options {
        max_points: 100_000,
        ..Options::default()
    };
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Ok(e) = rill_promql::parse(text) {
            let _ = instant(&One, &e, 70_000, &opts);
            let _ = range(&One, &e, 0, 140_000, 7_000, &opts);
        }
    }
}

/// The sensor service's messages between nodes: what decodes encodes to
/// bytes that decode the same.
fn service_messages(bytes: &[u8]) {
    use rill_sensor_cluster::msg;
    if let Ok(r) = msg::decode_request(bytes) {
        let again = msg::encode_request(&r);
        let back = msg::decode_request(&again).expect("an encoded request decodes");
        assert_eq!(msg::encode_request(&back), again);
    }
    if let Ok(r) = msg::decode_reply(bytes) {
        let again = msg::encode_reply(&r);
        let back = msg::decode_reply(&again).expect("an encoded reply decodes");
        assert_eq!(msg::encode_reply(&back), again);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 11 {
        10 => service_messages(rest),
        0 => block(rest),
        1 => {
            let mut b = rest.to_vec();
            if b.len() >= 4 {
                let n = b.len() - 4;
                let crc = crc32fast::hash(&b[..n]);
                b[n..].copy_from_slice(&crc.to_le_bytes());
            }
            block(&b);
        }
        3 => wal(rest),
        4 => stores(rest),
        5 => selector(rest),
        6 => remote_write(rest, false),
        7 => remote_write(rest, true),
        8 => mqtt(rest),
        9 => promql(rest),
        _ => {
            if let Ok(body) = std::str::from_utf8(rest) {
                let (points, errors) = rill_sensor::line::parse(body);
                // At most one point or one error a line, errors in line order.
                assert!(points.len() + errors.len() <= body.split('\n').count());
                assert!(errors.windows(2).all(|w| w[0].line < w[1].line));
                // The ingest path (series texts parsed once a body) gives
                // what the points give one by one.
                use rill_tsdb::ingest::{line_protocol, line_protocol_point_by_point};
                let p = rill_sensor::Precision::Ms;
                assert_eq!(
                    line_protocol(body, "db", p, 7),
                    line_protocol_point_by_point(body, "db", p, 7)
                );
            }
        }
    }
});
