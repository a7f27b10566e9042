//! A read's budget of samples (what a query tried on the thread that took
//! its request may decode): within it, a read gives what a plain read
//! gives; past it, the read stops with `OverBudget` and says so, on one
//! thread or with helpers.

use super::*;

/// A bounded read may also stop because it would wait (the store's
/// writer busy for a moment: a background sync): a read expected to
/// succeed is tried again, a bounded number of times, each with a fresh
/// budget from `budget`.
fn until_whole<T>(
    mut read: impl FnMut(Arc<ReadBudget>) -> Result<T, EngineError>,
    budget: impl Fn() -> Arc<ReadBudget>,
) -> (T, Arc<ReadBudget>) {
    for _ in 0..200 {
        let b = budget();
        match read(b.clone()) {
            Ok(t) => return (t, b),
            Err(EngineError::OverBudget) => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    panic!("a bounded read within its budget stopped 200 times");
}

/// 100 samples 3 s apart in windows of 10 s (30 windows), stored but the
/// last window's, read over their range; each window costs its samples
/// and [`READ_COST`](super::super::read) (256), the series 256 more.
#[test]
fn a_read_within_its_budget_reads_it_all_and_one_past_it_stops() {
    let rig = Rig::new(10 * SEC, 8);
    let e = rig.open(T0);
    let key = "m{a=\"1\"}";
    every_3s(&e, key, 100);
    let (from, to, now) = (T0, T0 + 297 * SEC, T0 + 300 * SEC);
    let plain = e.read_points("db", key, from, to, now).unwrap();
    assert_eq!(plain.ts.len(), 100);
    // 30 windows: 30 * 256 + 256 + 100 samples; a window read twice
    // (the request's thread taking one a helper is still on) counts
    // twice, so what is enough is twice that at most.
    let need = 30 * 256 + 256 + 100;
    let (got, b) = until_whole(
        |b| e.read_points_within("db", key, from, to, now, Some(&b)),
        || Arc::new(ReadBudget::new(2 * need)),
    );
    assert_eq!((got.ts, got.v), (plain.ts.clone(), plain.v.clone()));
    assert!(!b.spent());
    for short in [0, 255, 256, need / 2, need - 1] {
        let b = Arc::new(ReadBudget::new(short));
        let got = e.read_points_within("db", key, from, to, now, Some(&b));
        assert!(
            matches!(got, Err(EngineError::OverBudget)),
            "{short}: {got:?}"
        );
        assert!(b.spent(), "{short}");
    }
    // One budget for two reads (a query's): enough for one only.
    let (_, b) = until_whole(
        |b| e.read_points_within("db", key, from, to, now, Some(&b)),
        || Arc::new(ReadBudget::new(need + need / 2)),
    );
    assert!(e
        .read_points_within("db", key, from, to, now, Some(&b))
        .is_err());
    assert!(b.spent());
}

/// A bounded read that would wait for the device (a block not in the page
/// cache) stops as one past its budget does, the budget spent; read
/// without a bound, the same samples come back.
#[test]
fn a_bounded_read_that_would_wait_stops() {
    let rig = Rig::new(10 * SEC, 8);
    let (e, hooks) = super::hooked::hooked(&rig);
    let key = "m{a=\"1\"}";
    every_3s(&e, key, 40);
    let (from, to, now) = (T0, T0 + 117 * SEC, T0 + 120 * SEC);
    // The first read opens the stores' files (a bounded read does not:
    // opening a file may wait); after it, a bounded read reads them.
    assert_eq!(
        e.read_points("db", key, from, to, now).unwrap().ts.len(),
        40
    );
    let (warm, b) = until_whole(
        |b| e.read_points_within("db", key, from, to, now, Some(&b)),
        || Arc::new(ReadBudget::new(1 << 30)),
    );
    assert_eq!(warm.ts.len(), 40);
    assert!(!b.spent());
    assert!(hooks.would_block.set(()).is_ok());
    let b = Arc::new(ReadBudget::new(1 << 30));
    let cold = e.read_points_within("db", key, from, to, now, Some(&b));
    assert!(matches!(cold, Err(EngineError::OverBudget)), "{cold:?}");
    assert!(b.spent());
    assert_eq!(
        e.read_points("db", key, from, to, now).unwrap().ts.len(),
        40
    );
}
