use super::*;
use crate::engine::EngineError;
use crate::promql::parse;
use crate::select::matches;

/// Series in memory.
struct Mem(Vec<(Series, Vec<(i64, f64)>)>);

impl Source for Mem {
    fn fetch(&self, m: &[Matcher], start: i64, end: i64) -> Result<Fetched, SourceError> {
        Ok(self
            .0
            .iter()
            .filter(|(s, _)| matches(m, s))
            .map(|(s, v)| {
                let v = v.iter().copied().filter(|&(t, _)| t >= start && t <= end);
                (s.clone(), v.collect::<Points>())
            })
            .collect())
    }
}

fn series(name: &str, host: &str) -> Series {
    Series::new(name, vec![("host".into(), host.into())])
}

/// Samples every 10 s from 0 to 100 s: value = seconds.
fn ramp() -> Vec<(i64, f64)> {
    (0..=10).map(|k| (k * 10_000, (k * 10) as f64)).collect()
}

fn run(q: &str, src: &Mem, start: i64, end: i64, step: i64) -> Vec<Out> {
    eval(
        &parse(q).unwrap(),
        &Grid::new(start, end, step).unwrap(),
        src,
    )
    .unwrap()
}

#[test]
fn numbers_are_one_series_without_labels() {
    let out = run("1+1*3-(4/2)", &Mem(vec![]), 0, 2000, 1000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].series, Series::new("", vec![]));
    assert_eq!(out[0].values, vec![2.0; 3]);
}

#[test]
fn a_bare_selector_looks_back_over_its_scrape_interval_and_a_half() {
    let src = Mem(vec![(series("temp", "a"), ramp())]);
    // Every 10 s, step 1 s: the window is 15 s, (t - 15 s, t].
    let out = run("temp", &src, 100_000, 116_000, 1000);
    assert_eq!(out[0].series.name, "temp", "a bare selector keeps the name");
    let v = &out[0].values;
    assert_eq!(v[0], 100.0);
    assert_eq!(v[14], 100.0);
    assert!(
        v[15].is_nan(),
        "the sample at 100 s is outside (115 s, 116 s]"
    );
}

#[test]
fn over_time_windows_are_exact_and_left_open() {
    let src = Mem(vec![(series("temp", "a"), ramp())]);
    let one = |q: &str| run(q, &src, 100_000, 100_000, 1000)[0].clone();
    // (70 s, 100 s]: 80, 90, 100.
    assert_eq!(one("min_over_time(temp[30s])").values, vec![80.0]);
    assert_eq!(one("max_over_time(temp[30s])").values, vec![100.0]);
    assert_eq!(one("avg_over_time(temp[30s])").values, vec![90.0]);
    assert_eq!(one("sum_over_time(temp[30s])").values, vec![270.0]);
    assert_eq!(one("count_over_time(temp[30s])").values, vec![3.0]);
    assert_eq!(one("last_over_time(temp[30s])").values, vec![100.0]);
    assert_eq!(one("min_over_time(temp[30s])").series.name, "temp");
    assert_eq!(
        one("sum_over_time(temp[30s])").series.name,
        "",
        "sum drops the name"
    );
    assert_eq!(one("count_over_time(temp[30s])").series.name, "");
    // Nothing in the window: no point (not 0).
    let empty = run("count_over_time(temp[5s])", &src, 105_000, 105_000, 1000);
    assert!(empty.is_empty(), "{empty:?}");
}

#[test]
fn rate_is_not_extrapolated_and_survives_counter_resets() {
    // A counter rising 1/s, every 10 s, reset to 0 at 60 s.
    let mut c: Vec<(i64, f64)> = (0..=5).map(|k| (k * 10_000, (k * 10) as f64)).collect();
    c.extend((6..=10).map(|k| (k * 10_000, ((k - 6) * 10) as f64)));
    let src = Mem(vec![(series("req_total", "a"), c)]);
    let out = run("rate(req_total[30s])", &src, 30_000, 100_000, 10_000);
    assert_eq!(out[0].series.name, "", "rate drops the name");
    // From the sample before the window to the window's last. The reset
    // (a drop to 0: a restart) is undone by adding the value before it,
    // so the 10 counted between 50 s and the restart are not seen: the
    // windows holding that step show 20 in 30 s.
    let third = 20.0 / 30.0;
    assert_eq!(
        out[0].values,
        vec![1.0, 1.0, 1.0, third, third, third, 1.0, 1.0]
    );
    // Without a sample before the window: the window's first to last.
    let first = run("rate(req_total[30s])", &src, 20_000, 20_000, 10_000);
    assert_eq!(first[0].values, vec![1.0]);
    // One sample and nothing before it: no point.
    let none = run("rate(req_total[5s])", &src, 0, 0, 1000);
    assert!(none.is_empty(), "{none:?}");
}

#[test]
fn a_small_drop_is_jitter_not_a_reset() {
    let mut v = vec![100.0, 95.0, 110.0];
    remove_counter_resets(&mut v);
    assert_eq!(v, vec![100.0, 100.0, 115.0]);
    let mut v = vec![100.0, 10.0, 20.0];
    remove_counter_resets(&mut v);
    assert_eq!(v, vec![100.0, 110.0, 120.0]);
}

#[test]
fn arithmetic_matches_series_one_to_one_and_drops_names() {
    let src = Mem(vec![
        (series("a", "x"), vec![(0, 6.0)]),
        (series("a", "y"), vec![(0, 8.0)]),
        (series("b", "x"), vec![(0, 2.0)]),
    ]);
    let out = run("a / b", &src, 0, 0, 1000);
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].series,
        Series::new("", vec![("host".into(), "x".into())])
    );
    assert_eq!(out[0].values, vec![3.0]);
    let out = run("-a * 2", &src, 0, 0, 1000);
    assert_eq!(
        out.iter().map(|o| o.values[0]).collect::<Vec<_>>(),
        vec![-12.0, -16.0]
    );
    // Two series whose labels become equal: an error, as in VictoriaMetrics.
    let e = eval(
        &parse("sum_over_time({__name__=~\"a|b\", host=\"x\"}[1m])").unwrap(),
        &Grid::new(0, 0, 1000).unwrap(),
        &src,
    )
    .unwrap_err();
    assert!(e.to_string().contains("duplicate output timeseries"), "{e}");
}

#[test]
fn scrape_intervals_and_gaps_follow_victoriametrics() {
    assert_eq!(scrape_interval(&[0], 7), 7);
    // Intervals 10, 10, 20: the 0.6 quantile lies a fifth of the way
    // from 10 to 20.
    assert_eq!(scrape_interval(&[0, 10, 20, 40], 7), 12);
    assert_eq!(max_prev_interval(1000), 5000);
    assert_eq!(max_prev_interval(10_000), 15_000);
    assert_eq!(max_prev_interval(60_000), 67_500);
    assert!(Grid::new(0, 10, 0).is_err());
    assert!(Grid::new(0, MAX_POINTS * 1000, 1000).is_err());
    assert_eq!(
        Grid::new(0, 2500, 1000).unwrap().times(),
        vec![0, 1000, 2000]
    );
}

proptest::proptest! {
    /// The search for a window's bound finds what a walk one sample at a
    /// time finds, from any start, for any time.
    #[test]
    fn a_bound_is_found_as_a_walk_finds_it(
        mut ts in proptest::collection::vec(-50i64..50, 0..200),
        at in 0usize..210,
        t in -60i64..60,
    ) {
        ts.sort_unstable();
        let mut walk = at;
        while walk < ts.len() && ts[walk] <= t {
            walk += 1;
        }
        proptest::prop_assert_eq!(past(&ts, at, t), walk);
    }

    /// Looked for first at any hint, the same bound.
    #[test]
    fn a_bound_looked_for_near_a_hint_is_the_same(
        mut ts in proptest::collection::vec(-50i64..50, 0..200),
        at in 0usize..210,
        hint in 0usize..220,
        t in -60i64..60,
    ) {
        ts.sort_unstable();
        proptest::prop_assert_eq!(past_near(&ts, at, hint, t), past(&ts, at, t));
    }
}

/// A source that meters what a query charges, refusing past `limit`.
struct Metered {
    mem: Mem,
    charged: std::cell::Cell<usize>,
    limit: usize,
}

impl Source for Metered {
    fn fetch(&self, m: &[Matcher], start: i64, end: i64) -> Result<Fetched, SourceError> {
        self.mem.fetch(m, start, end)
    }
    fn charge(&self, work: usize) -> Result<(), SourceError> {
        self.charged.set(self.charged.get().saturating_add(work));
        if self.charged.get() > self.limit {
            return Err(SourceError::Read(EngineError::OverBudget));
        }
        Ok(())
    }
}

/// What `q` charges at 1,000 points a second apart, `temp{host="a"}`
/// holding `data`.
fn charged(data: Vec<(i64, f64)>, q: &str) -> usize {
    let src = Metered {
        mem: Mem(vec![(series("temp", "a"), data)]),
        charged: std::cell::Cell::new(0),
        limit: usize::MAX,
    };
    eval(
        &parse(q).unwrap(),
        &Grid::new(0, 999_000, 1000).unwrap(),
        &src,
    )
    .unwrap();
    src.charged.get()
}

/// A rollup charges its points, and the samples its windows scan: a
/// window many steps long scans each sample many times and costs that
/// much more; a refused charge stops the evaluation.
#[test]
fn a_rollup_charges_its_points_and_what_its_windows_scan() {
    // A sample a second for 1,000 s.
    let every_second: Vec<(i64, f64)> = (0..1000).map(|k| (k * 1000, k as f64)).collect();
    let charged = |q: &str| charged(every_second.clone(), q);
    // 1,000 points: 4 each, and windows of one step scan ~2 samples.
    let short = charged("max_over_time(temp[1s])");
    assert!((4000..4400).contains(&short), "{short}");
    // Windows of 500 s scan ~500 samples a point: 1,000 * 500 / 16 more.
    let long = charged("max_over_time(temp[500s])");
    assert!(long > short + 25_000, "{long} vs {short}");
    // A point at a time, no window scanned: 4 and 1/16 a point.
    let last = charged("last_over_time(temp[500s])");
    assert_eq!(last, 4000 + 1000 / 16);
    let src = Metered {
        mem: Mem(vec![(series("temp", "a"), every_second)]),
        charged: std::cell::Cell::new(0),
        limit: 10_000,
    };
    let refused = eval(
        &parse("max_over_time(temp[500s])").unwrap(),
        &Grid::new(0, 999_000, 1000).unwrap(),
        &src,
    );
    assert!(
        matches!(
            refused,
            Err(EvalError::Source(SourceError::Read(
                EngineError::OverBudget
            )))
        ),
        "{refused:?}"
    );
}

/// A series with one sample, or whose samples are few, is charged for
/// what its windows can hold at most (all of its samples), and numbers
/// and operators are charged for their points.
#[test]
fn sparse_series_numbers_and_operators_are_charged_what_they_do() {
    // One sample: each of the 1,000 points looks at one at most.
    assert_eq!(
        charged(vec![(500_000, 1.0)], "max_over_time(temp[500s])"),
        4000 + 1000 / 16
    );
    // Three samples: at most three a point.
    let three = vec![(1000, 1.0), (2000, 2.0), (3000, 3.0)];
    assert_eq!(
        charged(three, "max_over_time(temp[500s])"),
        4000 + 3000 / 16
    );
    // A number: its 1,000 points, as written out.
    assert_eq!(charged(vec![], "2"), 4000);
    // An operator on two numbers: those, and one a point.
    assert_eq!(charged(vec![], "1+2"), 4000 + 4000 + 1000);
}

proptest::proptest! {
    /// `min_over_time` and `max_over_time` taken in lanes are the in-order
    /// fold, bit for bit: NaN first or among the values, zeros of either
    /// sign, ties.
    #[test]
    fn extremes_in_lanes_are_the_fold_in_order(
        v in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::num::f64::ANY,
                proptest::strategy::Just(0.0),
                proptest::strategy::Just(-0.0),
                proptest::strategy::Just(f64::NAN),
                proptest::strategy::Strategy::prop_map(-3i32..3, f64::from),
            ],
            1..70,
        ),
    ) {
        for (func, beats) in [
            (Rollup::Min, (|x, m| x < m) as fn(f64, f64) -> bool),
            (Rollup::Max, |x, m| x > m),
        ] {
            let want = v.iter().fold(v[0], |m, &x| if beats(x, m) { x } else { m });
            let got = at_point(func, &vec![0; v.len()], &v, None);
            proptest::prop_assert_eq!(got.to_bits(), want.to_bits(), "{:?}", func);
        }
    }
}

/// Zeros of both signs in different lanes: the in-order fold keeps the
/// first (eight lanes alone would give the later +0.0).
#[test]
fn the_first_of_equal_zeros_is_kept() {
    let mut v = vec![-1.0; 16];
    v[1] = -0.0;
    v[8] = 0.0;
    let got = at_point(Rollup::Max, &[0; 16], &v, None);
    assert_eq!(got.to_bits(), (-0.0f64).to_bits());
    let w: Vec<f64> = v.iter().map(|x| -x).collect();
    let got = at_point(Rollup::Min, &[0; 16], &w, None);
    assert_eq!(got.to_bits(), 0.0f64.to_bits());
}
