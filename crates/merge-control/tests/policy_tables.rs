//! The policies' decisions, from readable tables: given files (store, id,
//! size, live bytes, keys) and usage U, which files are taken and in what
//! order (the sensor-data paper, §3, for the Fisherman, Riak's bitcask.schema for Classic).

use merge_control::{
    Classic, ClassicSettings, FileView, Fisherman, MergeWindow, Moment, Pick, Policy,
};
use std::time::Duration;

const MB: u64 = 1 << 20;

/// (store, file id, total MB, live MB)
type Row = (usize, u32, u64, u64);
/// (store, file id) of a pick.
type Id = (usize, u32);
/// (U, ewma, expected picks in order, expected D_m)
type FishermanCase = (f64, f64, &'static [Id], f64);
/// (files, hour, window, expected picks)
type ClassicCase<'a> = (&'a [Row], u8, MergeWindow, &'a [Id]);

/// (store, file id, total MB, live MB); keys follow bytes (1 key per MB).
fn files(rows: &[Row]) -> Vec<FileView> {
    rows.iter()
        .map(|&(store, file_id, total, live)| FileView {
            store,
            file_id,
            total_bytes: total * MB,
            total_keys: total,
            live_bytes: live * MB,
            live_keys: live,
        })
        .collect()
}

fn at(hour: u8, secs: u64) -> Moment {
    Moment::new(hour, Duration::from_secs(secs))
}

fn ids(picks: &[Pick]) -> Vec<Id> {
    picks.iter().map(|p| (p.store, p.file_id)).collect()
}

fn fisherman(ewma: f64) -> Fisherman {
    Fisherman {
        ewma,
        ..Fisherman::default()
    }
}

// D of each file:           1.0        0.9        0.5        0.3        0.0
const POND: &[Row] = &[
    (0, 1, 100, 0),
    (0, 2, 100, 10),
    (1, 3, 100, 50),
    (1, 4, 100, 70),
    (2, 5, 100, 100),
];

#[test]
fn fisherman_table() {
    let pond = files(POND);
    let table: &[FishermanCase] = &[
        // Not hungry (U <= U_m = 0.8): only fully dead files, at any U.
        (0.10, 1.0, &[(0, 1)], 1.0),
        (0.80, 0.2, &[(0, 1)], 1.0),
        // H = 0.5: D_m = min(1 - H, ewma) = 0.5.
        (0.90, 1.0, &[(0, 1), (0, 2), (1, 3)], 0.5),
        // Experience lowers the bar: ewma 0.3 takes the 0.3 file too.
        (0.90, 0.3, &[(0, 1), (0, 2), (1, 3), (1, 4)], 0.3),
        // H = 0.25: D_m = 0.75.
        (0.85, 1.0, &[(0, 1), (0, 2)], 0.75),
        // Starving (U = 1): everything with something dead, highest D
        // first; a file with nothing dead (D = 0) never (its copy would
        // only spend the space that is short).
        (1.00, 1.0, &[(0, 1), (0, 2), (1, 3), (1, 4)], 0.0),
        (1.20, 1.0, &[(0, 1), (0, 2), (1, 3), (1, 4)], 0.0),
    ];
    for &(usage, ewma, want, want_dm) in table {
        let mut p = fisherman(ewma);
        let got = p.decide(usage, &pond, at(12, 0));
        assert_eq!(ids(&got), want, "U = {usage}, ewma = {ewma}");
        assert!(
            (p.take_threshold(usage) - want_dm).abs() < 1e-9,
            "D_m at U = {usage}, ewma = {ewma}: {}",
            p.take_threshold(usage)
        );
    }
}

#[test]
fn fisherman_orders_ties_by_store_then_file() {
    let pond = files(&[(3, 9, 10, 5), (1, 7, 10, 5), (1, 2, 10, 5), (0, 4, 10, 9)]);
    let got = fisherman(1.0).decide(1.0, &pond, at(0, 0));
    assert_eq!(ids(&got), [(1, 2), (1, 7), (3, 9), (0, 4)]);
}

#[test]
fn fisherman_learns_from_what_it_eats() {
    let mut p = fisherman(1.0);
    let eat = |d: f64| Pick {
        store: 0,
        file_id: 1,
        dead_share: d,
    };
    p.merged(&eat(0.5));
    assert!((p.ewma - 0.95).abs() < 1e-9);
    for _ in 0..100 {
        p.merged(&eat(0.4));
    }
    assert!((p.ewma - 0.4).abs() < 1e-3);
    // Hungry at U = 0.85 (1 - H = 0.75): the memory of small fish wins.
    assert!((p.take_threshold(0.85) - p.ewma).abs() < 1e-9);
}

#[test]
fn classic_table() {
    let triggered_store_0: &[Row] = &[
        (0, 1, 100, 30), // frag 70%: triggers store 0, and is taken
        (0, 2, 100, 55), // frag 45% >= 40: taken
        (0, 3, 100, 70), // frag 30%, 30 MB dead: kept
        (0, 4, 5, 5),    // small file (< 10 MB): taken
        (1, 5, 100, 50), // frag 50%: meets the threshold, but store 1 never triggered
    ];
    let table: &[ClassicCase] = &[
        (
            triggered_store_0,
            12,
            MergeWindow::Always,
            &[(0, 1), (0, 2), (0, 4)],
        ),
        // Nothing reaches a trigger: nothing merges, thresholds or not.
        (
            &[(0, 1, 100, 45), (0, 2, 5, 5)],
            12,
            MergeWindow::Always,
            &[],
        ),
        // 600 MB dead in a 2 GB file (frag 29%) triggers by dead bytes.
        (
            &[(0, 1, 2048, 1448), (0, 2, 1000, 800), (0, 3, 1000, 950)],
            12,
            MergeWindow::Always,
            &[(0, 1), (0, 2)],
        ),
        (triggered_store_0, 12, MergeWindow::Never, &[]),
        (
            triggered_store_0,
            23,
            MergeWindow::Hours { start: 22, end: 3 },
            &[(0, 1), (0, 2), (0, 4)],
        ),
        (
            triggered_store_0,
            12,
            MergeWindow::Hours { start: 22, end: 3 },
            &[],
        ),
    ];
    for (i, &(rows, hour, window, want)) in table.iter().enumerate() {
        let mut p = Classic::new(ClassicSettings {
            merge_window: window,
            ..ClassicSettings::default()
        });
        // Classic ignores U: the same answer at any usage.
        for usage in [0.1, 0.99] {
            assert_eq!(
                ids(&p.decide(usage, &files(rows), at(hour, 0))),
                want,
                "row {i}, U {usage}"
            );
        }
    }
}

#[test]
fn classic_checks_each_store_every_merge_check_interval() {
    // Riak checks a store for merge every 3 minutes +- 30%: garbage that
    // appears between checks waits for the next one.
    let mut p = Classic::default();
    let clean: &[Row] = &[(0, 1, 100, 100), (1, 2, 100, 100)];
    assert!(p.decide(0.5, &files(clean), at(12, 0)).is_empty());
    let dirty: &[Row] = &[(0, 1, 100, 20), (1, 2, 100, 100)];
    for secs in [1, 60, 120, 125] {
        assert!(
            p.decide(0.5, &files(dirty), at(12, secs)).is_empty(),
            "checked again after {secs} s"
        );
    }
    // Past 180 s * 1.3, store 0 has surely been checked again.
    assert_eq!(ids(&p.decide(0.5, &files(dirty), at(12, 235))), [(0, 1)]);
    // Found files stay queued until merged, between checks too.
    assert_eq!(ids(&p.decide(0.5, &files(dirty), at(12, 236))), [(0, 1)]);
    p.merged(&Pick {
        store: 0,
        file_id: 1,
        dead_share: 0.8,
    });
    assert!(p.decide(0.5, &files(dirty), at(12, 237)).is_empty());
    // A queued file that disappeared (merged elsewhere) leaves the queue.
    let mut q = Classic::default();
    assert_eq!(ids(&q.decide(0.5, &files(dirty), at(12, 0))), [(0, 1)]);
    assert!(q
        .decide(0.5, &files(clean[1..].as_ref()), at(12, 1))
        .is_empty());
}

#[test]
fn classic_check_intervals_are_jittered_within_bounds() {
    let mut p = Classic::default();
    let dirty: &[Row] = &[(0, 1, 100, 20)];
    // Check at 0, merge, and find when the store is checked next, many
    // times over: always within 180 s +- 30%, and not always the same.
    let mut seen = Vec::new();
    let mut t = 0u64;
    for _ in 0..20 {
        let start = t;
        loop {
            let got = p.decide(0.5, &files(dirty), at(12, t));
            if !got.is_empty() {
                p.merged(&got[0]);
                break;
            }
            t += 1;
            assert!(t - start <= 235, "no check within 234 s");
        }
        if t > start {
            seen.push(t - start);
        }
        t += 1;
    }
    assert!(seen.iter().all(|&d| (125..=235).contains(&d)), "{seen:?}");
    seen.sort_unstable();
    seen.dedup();
    assert!(seen.len() > 3, "jitter varies the interval: {seen:?}");
}
