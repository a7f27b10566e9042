//! Buckets (M4) against the samples they sum up, and the search.

use super::tests::{one, s, Rig, SEC, T0};
use super::*;

/// A bucket as computed here: count, min, max, first, last, sum.
type Brute = (u64, f64, f64, (i64, f64), (i64, f64), f64);

/// The buckets of `samples` computed one sample at a time.
fn brute(samples: &[Sample], t0: i64, t1: i64, n: usize) -> Vec<Option<Brute>> {
    let span = (t1 - t0).max(1);
    let step = (span + n as i64 - 1) / n as i64;
    let len = ((span + step - 1) / step) as usize;
    let mut out = vec![None; len];
    for x in samples.iter().filter(|x| (t0..t1).contains(&x.ts)) {
        let i = ((x.ts - t0) / step) as usize;
        let slot: &mut Option<Brute> = &mut out[i];
        match slot {
            None => {
                *slot = Some((
                    1,
                    x.value,
                    x.value,
                    (x.ts, x.value),
                    (x.ts, x.value),
                    x.value,
                ))
            }
            Some(b) => {
                b.0 += 1;
                b.1 = b.1.min(x.value);
                b.2 = b.2.max(x.value);
                b.4 = (x.ts, x.value);
                b.5 += x.value;
            }
        }
    }
    out
}

fn check(e: &Engine, key: &str, t0: i64, t1: i64, n: usize) -> Buckets {
    let got = e.read_buckets("db", key, t0, t1, n, T0).unwrap();
    let samples = e.read("db", key, t0, t1 - 1, T0).unwrap();
    let want = brute(&samples, t0, t1, n);
    assert_eq!(got.buckets.len(), want.len(), "n {n}");
    for (i, (g, w)) in got.buckets.iter().zip(&want).enumerate() {
        match (g, w) {
            (None, None) => {}
            (Some(g), Some(w)) => {
                assert_eq!(
                    (g.count, g.min, g.max, g.first, g.last),
                    (w.0, w.1, w.2, w.3, w.4),
                    "n {n}, bucket {i}"
                );
                assert!(
                    (g.sum - w.5).abs() <= 1e-9 * w.5.abs().max(1.0),
                    "n {n}, bucket {i}: {} vs {}",
                    g.sum,
                    w.5
                );
            }
            _ => panic!("n {n}, bucket {i}: {g:?} vs {w:?}"),
        }
    }
    assert_eq!(got.samples, samples.len() as u64);
    got
}

#[test]
fn buckets_sum_up_what_a_read_returns_and_use_headers_where_they_can() {
    let rig = Rig::new(100 * SEC, 8);
    let e = rig.open(T0);
    let key = "m{a=\"1\"}";
    // 400 s of a sample a second, out of order in pairs: per window of
    // 100 s, 12 blocks of 8 and one of 4.
    let mut v: Vec<Sample> = (0..400)
        .map(|i| s(T0 + i * SEC, ((i * 37) % 101) as f64 / 4.0))
        .collect();
    for pair in v.chunks_mut(2) {
        pair.swap(0, 1);
    }
    e.write("db", &one(key, v), T0).unwrap();
    // The first tick after the write finds the windows just written.
    e.tick(T0 + 499 * SEC).unwrap();
    e.tick(T0 + 500 * SEC).unwrap();
    assert_eq!(e.waiting(), (0, 0));
    // Buckets of 100 s hold whole blocks: no block is decoded.
    let b = check(&e, key, T0, T0 + 400 * SEC, 4);
    assert_eq!((b.from_headers, b.decoded), (52, 0), "{b:?}");
    // Finer buckets than blocks: blocks are decoded.
    let b = check(&e, key, T0, T0 + 400 * SEC, 400);
    assert!(b.decoded > 0 && b.from_headers == 0, "{b:?}");
    for n in [1, 3, 7, 17, 64, 1000] {
        check(&e, key, T0 - 50 * SEC, T0 + 450 * SEC, n);
        check(&e, key, T0 + 33 * SEC, T0 + 250 * SEC, n);
    }
    // Rewritten samples of a stored window (a second part overlapping the
    // first) and buffered ones: the later values win, as in a read.
    e.write(
        "db",
        &one(key, vec![s(T0 + 3 * SEC, -5.0), s(T0 + 205 * SEC, 99.0)]),
        T0,
    )
    .unwrap();
    for n in [1, 4, 9, 400] {
        check(&e, key, T0, T0 + 400 * SEC, n);
    }
    let b = check(&e, key, T0, T0 + 400 * SEC, 4);
    assert!(b.decoded >= 2, "the overlapping parts are decoded: {b:?}");
    e.tick(T0 + 500 * SEC).unwrap();
    let b = check(&e, key, T0, T0 + 400 * SEC, 4);
    assert!(b.decoded >= 2 && b.from_headers > 0, "{b:?}");
    // A range outside the data, and an unknown series.
    assert!(check(&e, key, T0 + 1000 * SEC, T0 + 2000 * SEC, 10)
        .buckets
        .iter()
        .all(Option::is_none));
    let none = e.read_buckets("db", "nosuch", T0, T0 + SEC, 3, T0).unwrap();
    assert_eq!(none.samples, 0);
}

#[test]
fn search_finds_keys_holding_every_word() {
    let rig = Rig::new(100 * SEC, 8);
    let e = rig.open(T0);
    for key in [
        "room_temp{floor=\"2\"}",
        "room_hum{floor=\"2\"}",
        "Boiler_Temp{unit=\"1\"}",
    ] {
        e.write("db", &one(key, vec![s(T0, 1.0)]), T0).unwrap();
        e.write("other", &one(key, vec![s(T0, 1.0)]), T0).unwrap();
    }
    let keys = |words: &[&str], offset, limit| e.search(words, offset, limit);
    assert_eq!(
        keys(&["temp"], 0, 10),
        (
            vec![
                "Boiler_Temp{unit=\"1\"}".to_string(),
                "room_temp{floor=\"2\"}".to_string()
            ],
            2
        )
    );
    assert_eq!(
        keys(&["ROOM", "floor=\"2"], 0, 10).0,
        vec!["room_hum{floor=\"2\"}", "room_temp{floor=\"2\"}"]
    );
    // Pages of one, and the count of all.
    assert_eq!(
        keys(&["room"], 0, 1),
        (vec!["room_hum{floor=\"2\"}".to_string()], 2)
    );
    assert_eq!(
        keys(&["room"], 1, 1),
        (vec!["room_temp{floor=\"2\"}".to_string()], 2)
    );
    assert_eq!(keys(&["room"], 2, 1), (vec![], 2));
    // No words: every series.
    assert_eq!(keys(&[], 0, 10).1, 3);
    assert_eq!(keys(&["nothing"], 0, 10), (vec![], 0));
}
