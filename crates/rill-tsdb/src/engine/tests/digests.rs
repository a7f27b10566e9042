//! Slice digests for anti-entropy: equal on replicas holding the same
//! samples however they came, different where one lacks or differs, and
//! kept digests not trusted once a write touched their slice.

use super::*;

const KEYS: [&str; 3] = ["a{k=\"1\"}", "a{k=\"2\"}", "b{k=\"1\"}"];

/// Every series of KEYS, a sample every 3 s over 3 minutes from T0.
fn samples() -> Vec<(String, Vec<Sample>)> {
    KEYS.iter()
        .enumerate()
        .map(|(i, k)| {
            let v = (0..60)
                .map(|j| s(T0 + j * 3 * SEC, (i * 100 + j as usize) as f64))
                .collect();
            (k.to_string(), v)
        })
        .collect()
}

/// One engine (one home: the default placer's) given `series` sample by
/// sample in time order, blocks cut as it goes.
fn in_order(series: &[(String, Vec<Sample>)]) -> Engine {
    let e = Rig::new(60 * SEC, 8).open(T0);
    for j in 0..series[0].1.len() {
        for (k, v) in series {
            let t = v[j].ts;
            e.write("db", &one(k, vec![v[j]]), t).unwrap();
            e.tick(t).unwrap();
        }
    }
    e
}

/// One engine given `series` in one write, newest sample first, never
/// ticked (all in buffers).
fn at_once(series: &[(String, Vec<Sample>)]) -> Engine {
    let e = Rig::new(60 * SEC, 8).open(T0);
    let reversed: Vec<(String, Vec<Sample>)> = series
        .iter()
        .map(|(k, v)| (k.clone(), v.iter().rev().copied().collect()))
        .collect();
    e.write("db", &reversed, T0 + 200 * SEC).unwrap();
    e
}

const LATER: i64 = T0 + 3600 * SEC;

/// `slice_digests` with the slices it leaves out (they hold nothing)
/// filled in: every slice of the range, in order.
fn dense(e: &Engine, home: u32, from: i64, to: i64, now: i64) -> Vec<(i64, SliceDigest)> {
    let slice = e.slice_ns();
    let mut got = e
        .slice_digests("db", home, from, to, now)
        .unwrap()
        .into_iter()
        .peekable();
    std::iter::successors(Some(e.first_slice("db", from, now)), |s| Some(s + slice))
        .take_while(|s| *s < to.min(now))
        .map(|s| {
            got.next_if(|(t, _)| *t == s)
                .unwrap_or((s, SliceDigest::default()))
        })
        .collect()
}

fn digests(e: &Engine) -> Vec<(i64, SliceDigest)> {
    let home = e.homes()[0].1;
    dense(e, home, T0, T0 + 240 * SEC, LATER)
}

#[test]
fn replicas_with_the_same_samples_agree_however_the_samples_came() {
    let a = in_order(&samples());
    let b = at_once(&samples());
    let da = digests(&a);
    // T0 is 20 s into a minute: five slices from T0 to T0 + 240 s.
    assert_eq!(da.len(), 5, "{da:?}");
    assert_eq!(
        da.iter().map(|(_, d)| d.samples).sum::<u64>(),
        3 * 60,
        "{da:?}"
    );
    assert_eq!(da, digests(&b));
    // Asked again (kept digests now), the same.
    assert_eq!(da, digests(&a));
}

#[test]
fn a_missing_or_different_sample_changes_only_its_slice() {
    let mut lacking = samples();
    lacking[1].1.remove(25); // T0 + 75 s: the second slice
    let mut other = samples();
    other[2].1[45].value = -1.0; // T0 + 135 s: the third
    let whole = digests(&at_once(&samples()));
    let d1 = digests(&at_once(&lacking));
    let d2 = digests(&at_once(&other));
    let differ = |x: &[(i64, SliceDigest)]| -> Vec<usize> {
        (0..whole.len()).filter(|&i| x[i] != whole[i]).collect()
    };
    assert_eq!(differ(&d1), vec![1]);
    assert_eq!(differ(&d2), vec![2]);
    assert_eq!(d1[1].1.samples + 1, whole[1].1.samples);
}

#[test]
fn a_write_into_a_settled_slice_is_seen_by_the_next_digest() {
    let mut lacking = samples();
    let gone = lacking[0].1.remove(3); // T0 + 9 s: the first slice
    let e = at_once(&lacking);
    let before = digests(&e);
    assert_eq!(before, digests(&e), "kept");
    // The repair anti-entropy makes, long after the slice settled.
    e.write_missing("db", &one(KEYS[0], vec![gone]), &[], LATER)
        .unwrap();
    let after = digests(&e);
    assert_ne!(after[0], before[0]);
    assert_eq!(after, digests(&at_once(&samples())));
}

#[test]
fn a_home_dropped_and_written_again_is_digested_anew() {
    let e = at_once(&samples());
    let home = e.homes()[0].1;
    let before = digests(&e);
    assert!(e.drop_home("db", home, e.home_writes("db", home)).unwrap());
    let mut fewer = samples();
    fewer.truncate(1);
    e.write_missing("db", &fewer, &[], LATER).unwrap();
    let after = digests(&e);
    assert_ne!(after, before);
    assert_eq!(after, digests(&at_once(&fewer)));
}

#[test]
fn a_homes_samples_come_in_pages_that_make_the_whole() {
    let e = in_order(&samples());
    let home = e.homes()[0].1;
    let mut got: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
    let mut after: Option<(String, i64)> = None;
    let mut pages = 0;
    loop {
        let (page, more) = e
            .home_samples(
                "db",
                home,
                T0,
                T0 + 300 * SEC,
                LATER,
                after.as_ref().map(|(k, t)| (k.as_str(), *t)),
                25,
            )
            .unwrap();
        pages += 1;
        assert!(page.iter().map(|(_, _, v)| v.len()).sum::<usize>() <= 25);
        if let Some((k, _, v)) = page.last() {
            after = Some((k.clone(), v.last().unwrap().ts));
        }
        for (k, _, v) in page {
            got.entry(k).or_default().extend(v);
        }
        if !more {
            break;
        }
    }
    assert_eq!(pages, 3 * 60 / 25 + 1);
    let want: BTreeMap<String, Vec<Sample>> = samples().into_iter().collect();
    assert_eq!(got, want);
}

#[test]
fn a_slice_written_within_the_grace_period_is_busy_until_quiet() {
    // History written long after it settled, as a backfill or a repair
    // writes it: its slices are neither read nor compared until no write
    // touched them for the grace period.
    let mut rig = Rig::new(60 * SEC, 8);
    rig.opts.grace_ns = 30 * SEC;
    let e = rig.open(T0);
    let home = |e: &Engine| e.homes()[0].1;
    let all = samples();
    // Asked for at LATER, the slices (an hour old) are settled; the
    // writes after mark them.
    e.write("db", &all[..1], LATER).unwrap();
    let first = dense(&e, home(&e), T0, T0 + 240 * SEC, LATER);
    assert!(first.iter().all(|(_, d)| !d.busy), "{first:?}");
    e.write("db", &all[1..], LATER + 5 * SEC).unwrap();
    let busy = dense(&e, home(&e), T0, T0 + 240 * SEC, LATER + 10 * SEC);
    // The four slices written (the fifth holds nothing), not read.
    assert_eq!(busy.len(), 5, "{busy:?}");
    assert!(
        busy[..4]
            .iter()
            .all(|(_, d)| d.busy && d.samples == 0 && d.digest == 0),
        "{busy:?}"
    );
    assert!(!busy[4].1.busy, "{busy:?}");
    // Quiet for the grace period: read, and equal to a replica's that
    // took the same samples at once.
    let quiet = dense(&e, home(&e), T0, T0 + 240 * SEC, LATER + 40 * SEC);
    assert!(quiet.iter().all(|(_, d)| !d.busy), "{quiet:?}");
    assert_eq!(quiet, digests(&at_once(&all)));
}

#[test]
fn kept_digests_are_what_was_computed_and_none_once_a_write_touched_them() {
    let mut lacking = samples();
    let gone = lacking[0].1.remove(3); // T0 + 9 s: the first slice
    let e = at_once(&lacking);
    let home = e.homes()[0].1;
    let kept = |e: &Engine| e.kept_digests("db", home, T0, T0 + 240 * SEC, LATER);
    // Nothing computed yet: nothing kept, and nothing read to say so.
    assert!(kept(&e).iter().all(|(_, d)| d.is_none()), "{:?}", kept(&e));
    let computed = digests(&e);
    let got = kept(&e);
    assert_eq!(got.len(), computed.len());
    for ((s, k), (t, d)) in got.iter().zip(&computed) {
        assert_eq!(s, t);
        // The last slice ends early (at T0 + 240 s): never kept.
        if *s + 60 * SEC <= T0 + 240 * SEC {
            assert_eq!(k.as_ref(), Some(d), "slice {s}");
        } else {
            assert_eq!(*k, None, "slice {s}");
        }
    }
    e.write_missing("db", &one(KEYS[0], vec![gone]), &[], LATER)
        .unwrap();
    let after = kept(&e);
    assert_eq!(after[0].1, None, "the repaired slice is not kept any more");
    assert_eq!(after[1..3], got[1..3], "the others still are");
}

#[test]
fn a_block_stored_after_the_windows_were_looked_through_is_digested() {
    // A digest reads only the windows with blocks (and those in memory):
    // one stored after the shard's keys were looked through counts too.
    let e = in_order(&samples());
    let home = e.homes()[0].1;
    let from = T0 - 1800 * SEC;
    let digest = |e: &Engine| dense(e, home, from, T0 + 240 * SEC, LATER + 600 * SEC);
    let before = digest(&e);
    let old = s(from + 7 * SEC, 42.0);
    e.write_missing("db", &one(KEYS[0], vec![old]), &[], LATER)
        .unwrap();
    // Cut and stored: nothing of it left in memory.
    let mut t = LATER;
    while e.waiting() != (0, 0) && t < LATER + 600 * SEC {
        t += 10 * SEC;
        e.tick(t).unwrap();
    }
    assert_eq!(e.waiting(), (0, 0), "the late sample's block is stored");
    let after = digest(&e);
    assert_eq!(after[0].1.samples, before[0].1.samples + 1, "{after:?}");
    let mut all = samples();
    all[0].1.insert(0, old);
    let whole = at_once(&all);
    assert_eq!(
        after,
        dense(&whole, home, from, T0 + 240 * SEC, LATER + 600 * SEC)
    );
}

#[test]
fn empty_slices_are_kept_as_runs_and_a_write_into_one_is_seen() {
    // A long storage period, mostly empty: a digest each is kept only
    // for the slices that hold samples; the others are known empty.
    let e = at_once(&samples());
    let home = e.homes()[0].1;
    let from = T0 - 1000 * 60 * SEC;
    let whole = |e: &Engine| dense(e, home, from, T0 + 240 * SEC, LATER);
    let before = whole(&e);
    assert_eq!(before.len(), 1005, "{:?}", &before[..3]);
    let kept = |e: &Engine| {
        let mut k = e.kept_digests_lock();
        k.of_home("db", home).slices.len()
    };
    assert_eq!(kept(&e), 4, "the four whole slices with samples");
    let listed = e.kept_digests("db", home, from, T0 + 240 * SEC, LATER);
    assert_eq!(listed.len(), 1005);
    assert!(
        listed[..1004].iter().all(|(_, d)| d.is_some()),
        "every whole slice known"
    );
    assert_eq!(listed[500].1, Some(SliceDigest::default()));
    assert_eq!(before, whole(&e), "asked again, the same");
    // A late sample in an empty slice: read again, no longer empty.
    let old = s(from + 500 * 60 * SEC + 7 * SEC, 42.0);
    e.write_missing("db", &one(KEYS[0], vec![old]), &[], LATER)
        .unwrap();
    assert_eq!(
        e.kept_digests("db", home, from, T0 + 240 * SEC, LATER)[500].1,
        None,
        "marked: not known any more"
    );
    let after = whole(&e);
    assert_eq!(after[500].1.samples, 1, "{:?}", after[500]);
    assert_eq!(kept(&e), 5);
    let mut all = samples();
    all[0].1.insert(0, old);
    assert_eq!(after, whole(&at_once(&all)));
}
