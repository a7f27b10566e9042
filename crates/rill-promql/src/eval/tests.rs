use super::{instant, EvalError, Options, Source};
use crate::value::{Labels, Point, Series};
use crate::Matcher;

/// One series, `m{a="x"}`, a sample every 10 s for a minute.
struct One;

impl Source for One {
    fn select(&self, m: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        let labels = Labels::new(vec![
            ("__name__".into(), "m".into()),
            ("a".into(), "x".into()),
        ]);
        if !m.iter().all(|x| x.matches(labels.value(&x.label))) {
            return Ok(Vec::new());
        }
        let points = (0..7)
            .map(|k| Point {
                t: k * 10_000,
                v: k as f64,
            })
            .filter(|p| p.t >= mint && p.t <= maxt)
            .collect();
        Ok(vec![Series { labels, points }])
    }
}

fn eval(q: &str, opts: &Options) -> Result<crate::value::Value, EvalError> {
    instant(&One, &crate::parse(q).unwrap(), 60_000, opts)
}

#[test]
fn label_functions_refuse_values_that_grow_without_bound() {
    let args = vec!["\"a\""; 600].join(",");
    let q = format!(
        "label_join(label_join(label_join(m, \"a\", \"\", {args}), \"a\", \"\", {args}), \"a\", \"\", {args})"
    );
    let e = eval(&q, &Options::default()).unwrap_err();
    assert!(e.to_string().contains("longer than"), "{e}");
    // One level is fine.
    assert!(eval(
        &format!("label_join(m, \"b\", \"\", {})", ["\"a\""; 10].join(",")),
        &Options::default()
    )
    .is_ok());
}

#[test]
fn scalars_count_against_the_bound_of_points() {
    let opts = Options {
        max_points: 1000,
        ..Options::default()
    };
    // 600 steps, under the bound alone; five scalars of 600 points pass it.
    let e = eval("count_over_time(vector(1 + 1 + 1)[600s:1s])", &opts).unwrap_err();
    assert_eq!(e, EvalError::TooManyPoints);
    assert!(eval("count_over_time(vector(1 + 1)[10s:1s])", &opts).is_ok());
}

#[test]
fn smoothing_factors_outside_zero_to_one_are_refused_as_prometheus_does() {
    let o = Options::default();
    let e = eval("double_exponential_smoothing(m[1m], 1, 0.5)", &o).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid smoothing factor. Expected: 0 < sf < 1, got: 1.000000"
    );
    let e = eval("double_exponential_smoothing(m[1m], 0.5, 0)", &o).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid trend factor. Expected: 0 < tf < 1, got: 0.000000"
    );
    // Only where a window has samples: no series, no error.
    assert!(eval("double_exponential_smoothing(nothing[1m], 2, 2)", &o).is_ok());
    // A NaN factor passes the check and gives NaN.
    let v = eval("double_exponential_smoothing(m[1m], NaN, 0.5)", &o).unwrap();
    let crate::value::Value::Vector(s) = v else {
        panic!("{v:?}")
    };
    assert!(s[0].points[0].v.is_nan(), "{s:?}");
}

/// Series `m{s="a"}` .. `m{s="d"}` valued 1, 0, 1, 2 at every time.
struct Ties;

impl Source for Ties {
    fn select(&self, _: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        Ok([("a", 1.0), ("b", 0.0), ("c", 1.0), ("d", 2.0)]
            .into_iter()
            .map(|(s, v)| Series {
                labels: Labels::new(vec![
                    ("__name__".into(), "m".into()),
                    ("s".into(), s.into()),
                ]),
                points: (0..7)
                    .map(|k| Point { t: k * 10_000, v })
                    .filter(|p| p.t >= mint && p.t <= maxt)
                    .collect(),
            })
            .collect())
    }
}

/// Of equal values, topk keeps the series Prometheus's heap keeps: a
/// and d here (a search for the first smallest kept c and d).
#[test]
fn topk_keeps_of_equal_values_what_prometheus_keeps() {
    let e = crate::parse("topk(2, m)").unwrap();
    let v = instant(&Ties, &e, 60_000, &Options::default()).unwrap();
    let crate::value::Value::Vector(s) = v else {
        panic!("{v:?}")
    };
    let mut kept: Vec<&str> = s.iter().map(|s| s.labels.value("s")).collect();
    kept.sort_unstable();
    assert_eq!(kept, ["a", "d"]);
}

/// 100 series `m{s="0"}` .. `m{s="99"}`, each a sample every 10 s for
/// an hour, valued by series and time.
struct Many;

impl Source for Many {
    fn select(&self, _: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        Ok((0..100)
            .map(|s| Series {
                labels: Labels::new(vec![
                    ("__name__".into(), "m".into()),
                    ("g".into(), (s % 4).to_string()),
                    ("s".into(), s.to_string()),
                ]),
                points: (0..361)
                    .map(|k| Point {
                        t: k * 10_000,
                        v: (s * 1000 + k) as f64,
                    })
                    .filter(|p| p.t >= mint && p.t <= maxt)
                    .collect(),
            })
            .collect())
    }
}

/// A sum over many series reads them one at a time: it passes a bound
/// of points that their samples together (36,100) pass, and answers as
/// the aggregation over them all at once does.
#[test]
fn folds_over_many_series_hold_one_series_at_a_time() {
    let q = crate::parse("sum by (g) (rate(m[5m]))").unwrap();
    let at_once = crate::parse("sum by (g) (rate(m[5m]) * 1)").unwrap();
    let run = |e: &crate::Expr, max_points| {
        let opts = Options {
            max_points,
            ..Options::default()
        };
        super::range(&Many, e, 600_000, 3_600_000, 60_000, &opts)
    };
    let small = 5_000;
    let streamed = run(&q, small).unwrap();
    assert_eq!(run(&at_once, small).unwrap_err(), EvalError::TooManyPoints);
    assert_eq!(streamed, run(&at_once, 50_000_000).unwrap());
    assert_eq!(streamed.len(), 4);
    // A rate of 0.1 a second in each of 25 series a group.
    assert!((streamed[0].points[0].v - 2.5).abs() < 1e-9, "{streamed:?}");
}
