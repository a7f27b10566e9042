//! Evaluating a query on a grid of times (ms), as VictoriaMetrics 1.79
//! evaluates MetricsQL with its result cache off
//! (`-search.disableCache`) and no adjustment of the last points
//! (`-search.maxStepForPointsAdjustment=0`):
//!
//! - a rollup at time t reads the samples in `(t - w, t]`, `w` the
//!   window given or else the step; a bare selector and `rate` widen it
//!   to the largest gap they tolerate between samples, estimated from the
//!   series' own first intervals (its scrape interval and a margin);
//! - `rate` is not extrapolated: the change from the sample before the
//!   window (if there is one close enough) or from the window's first
//!   sample, to its last, over their time apart; counter resets are
//!   undone first;
//! - an empty window gives no point; `count_over_time` of nothing is no
//!   point, not 0;
//! - `min`, `max`, `avg` and `last_over_time` and bare selectors keep the
//!   metric name, the others and arithmetic drop it.

use super::{BinOp, EvalError, Expr, GridError, Rollup, SourceError};
use crate::select::Matcher;
use rill_sensor::Series;
use std::collections::HashMap;

/// A series' samples as two columns: times (ms, rising) and values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Points {
    pub ts: Vec<i64>,
    pub v: Vec<f64>,
}

impl Points {
    pub fn with_capacity(n: usize) -> Points {
        Points {
            ts: Vec::with_capacity(n),
            v: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The points as (ms, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        self.ts.iter().copied().zip(self.v.iter().copied())
    }
}

impl FromIterator<(i64, f64)> for Points {
    fn from_iter<I: IntoIterator<Item = (i64, f64)>>(it: I) -> Points {
        let (ts, v) = it.into_iter().unzip();
        Points { ts, v }
    }
}

/// Series and their samples, in time order.
pub type Fetched = Vec<(Series, Points)>;

/// Where samples come from.
pub trait Source {
    /// The samples (ms, value) of every series `matchers` select, from
    /// `start` to `end` ms (both included), in time order.
    fn fetch(&self, matchers: &[Matcher], start: i64, end: i64) -> Result<Fetched, SourceError>;

    /// Takes `work` (in samples decoded: a query's work beyond its
    /// reads) from the query's budget, if it has one; an error when it
    /// is spent.
    fn charge(&self, _work: usize) -> Result<(), SourceError> {
        Ok(())
    }
}

/// A point computed and written out, counted as this many samples
/// decoded (writing a point's JSON costs about four samples' decoding).
pub const POINT_COST: usize = 4;
/// Samples a rollup looks at per sample decoded.
const SCANS_PER_SAMPLE: usize = 16;

/// The times a query is evaluated at: `start`, `start + step`, ... up to
/// `end` (ms).
#[derive(Clone, Copy, Debug)]
pub struct Grid {
    pub start: i64,
    pub end: i64,
    pub step: i64,
}

/// At most this many points per series (VictoriaMetrics'
/// `-search.maxPointsPerTimeseries`).
pub const MAX_POINTS: i64 = 30_000;

/// How far back, before the first window, samples are read (a series'
/// scrape interval is estimated from them).
const SILENCE_MS: i64 = 300_000;

impl Grid {
    pub fn new(start: i64, end: i64, step: i64) -> Result<Grid, GridError> {
        if step <= 0 {
            return Err(GridError::StepNotPositive { step_ms: step });
        }
        if end < start {
            return Err(GridError::EndBeforeStart {
                start_ms: start,
                end_ms: end,
            });
        }
        let points = (end - start) / step + 1;
        if points > MAX_POINTS {
            return Err(GridError::TooManyPoints { points });
        }
        Ok(Grid { start, end, step })
    }

    pub fn times(&self) -> Vec<i64> {
        let n = (self.end - self.start) / self.step + 1;
        (0..n).map(|k| self.start + k * self.step).collect()
    }
}

/// A result series: its labels (the name empty when there is none) and a
/// value per grid time (NaN: no point).
#[derive(Clone, Debug, PartialEq)]
pub struct Out {
    pub series: Series,
    pub values: Vec<f64>,
}

enum Val {
    Scalar(Vec<f64>),
    Vector(Vec<Out>),
}

/// Evaluates `e` on `grid`: series sorted (name, then labels), points
/// that are NaN dropped by the caller, series without a point removed.
pub fn eval(e: &Expr, grid: &Grid, src: &dyn Source) -> Result<Vec<Out>, EvalError> {
    let mut out = match eval_val(e, grid, src)? {
        Val::Scalar(values) => vec![Out {
            series: Series::new("", Vec::new()),
            values,
        }],
        Val::Vector(v) => v,
    };
    out.retain(|o| o.values.iter().any(|v| !v.is_nan()));
    out.sort_by(|a, b| a.series.cmp(&b.series));
    if let Some(w) = out.windows(2).find(|w| w[0].series == w[1].series) {
        return Err(EvalError::DuplicateOutput {
            series: w[0].series.key(),
        });
    }
    Ok(out)
}

fn eval_val(e: &Expr, grid: &Grid, src: &dyn Source) -> Result<Val, EvalError> {
    let n = grid.times().len();
    let val = match e {
        Expr::Number(x) => Val::Scalar(vec![*x; n]),
        Expr::Neg(inner) => match eval_val(inner, grid, src)? {
            Val::Scalar(v) => Val::Scalar(v.into_iter().map(|x| -x).collect()),
            Val::Vector(v) => Val::Vector(
                v.into_iter()
                    .map(|o| Out {
                        series: unnamed(&o.series),
                        values: o.values.into_iter().map(|x| -x).collect(),
                    })
                    .collect(),
            ),
        },
        Expr::Binary(op, l, r) => binary(*op, eval_val(l, grid, src)?, eval_val(r, grid, src)?)?,
        Expr::Rollup {
            func,
            matchers,
            window,
        } => Val::Vector(rollup(*func, matchers, *window, grid, src)?),
    };
    // What the node computed (a rollup charged its own): a number's
    // points as points written out, an operator's one each.
    let work = match (e, &val) {
        (Expr::Rollup { .. }, _) => 0,
        (Expr::Number(_), _) => n.saturating_mul(POINT_COST),
        (_, Val::Scalar(_)) => n,
        (_, Val::Vector(v)) => n.saturating_mul(v.len()),
    };
    src.charge(work)?;
    Ok(val)
}

fn unnamed(s: &Series) -> Series {
    Series {
        name: String::new(),
        labels: s.labels.clone(),
    }
}

fn apply(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
    }
}

fn binary(op: BinOp, l: Val, r: Val) -> Result<Val, EvalError> {
    let zip = |a: &[f64], b: &[f64]| -> Vec<f64> {
        a.iter().zip(b).map(|(x, y)| apply(op, *x, *y)).collect()
    };
    Ok(match (l, r) {
        (Val::Scalar(a), Val::Scalar(b)) => Val::Scalar(zip(&a, &b)),
        (Val::Vector(v), Val::Scalar(s)) => Val::Vector(
            v.into_iter()
                .map(|o| Out {
                    series: unnamed(&o.series),
                    values: zip(&o.values, &s),
                })
                .collect(),
        ),
        (Val::Scalar(s), Val::Vector(v)) => Val::Vector(
            v.into_iter()
                .map(|o| Out {
                    series: unnamed(&o.series),
                    values: zip(&s, &o.values),
                })
                .collect(),
        ),
        (Val::Vector(a), Val::Vector(b)) => {
            // One to one, on every label but the name.
            let mut right: HashMap<Vec<(String, String)>, Vec<f64>> = HashMap::new();
            for o in b {
                if right.insert(o.series.labels.clone(), o.values).is_some() {
                    return Err(EvalError::DuplicateOnRight {
                        series: unnamed(&o.series).key(),
                    });
                }
            }
            let mut out = Vec::new();
            for o in a {
                if let Some(rv) = right.get(&o.series.labels) {
                    out.push(Out {
                        series: unnamed(&o.series),
                        values: zip(&o.values, rv),
                    });
                }
            }
            Val::Vector(out)
        }
    })
}

/// The series' scrape interval: the 0.6 quantile of its first (up to 20)
/// intervals; `step` when it has fewer than two samples.
fn scrape_interval(ts: &[i64], step: i64) -> i64 {
    if ts.len() < 2 {
        return step;
    }
    let mut d: Vec<f64> = ts
        .windows(2)
        .take(20)
        .map(|w| (w[1] - w[0]) as f64)
        .collect();
    d.sort_by(|a, b| a.total_cmp(b));
    let rank = 0.6 * (d.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let w = rank - lo as f64;
    let q = if lo + 1 < d.len() {
        d[lo] * (1.0 - w) + d[lo + 1] * w
    } else {
        d[lo]
    };
    match q as i64 {
        si if si <= 0 => step,
        si => si,
    }
}

/// The longest gap a sample still counts across, from the scrape
/// interval.
fn max_prev_interval(si: i64) -> i64 {
    let margin = if si <= 2000 {
        4 * si
    } else if si <= 4000 {
        2 * si
    } else if si <= 8000 {
        si
    } else if si <= 16000 {
        si / 2
    } else if si <= 32000 {
        si / 4
    } else {
        si / 8
    };
    si + margin
}

/// Counter resets undone: a drop is a restart from 0, or, when it is
/// under an eighth of the value before it, jitter (flat).
fn remove_counter_resets(v: &mut [f64]) {
    let Some(&first) = v.first() else {
        return;
    };
    let (mut correction, mut prev) = (0.0, first);
    for x in v.iter_mut() {
        let d = *x - prev;
        if d < 0.0 {
            correction += if -d * 8.0 < prev { prev - *x } else { prev };
        }
        prev = *x;
        *x += correction;
    }
}

fn rollup(
    func: Rollup,
    matchers: &[Matcher],
    window: Option<i64>,
    grid: &Grid,
    src: &dyn Source,
) -> Result<Vec<Out>, EvalError> {
    let w = window.unwrap_or(0);
    let from = grid
        .start
        .saturating_sub(SILENCE_MS)
        .saturating_sub(w.max(grid.step));
    let times = grid.times();
    let mut out = Vec::new();
    for (series, Points { ts, mut v }) in src.fetch(matchers, from, grid.end)? {
        if func == Rollup::Rate {
            remove_counter_resets(&mut v);
        }
        let mpi = max_prev_interval(scrape_interval(&ts, grid.step));
        let mut win = if w > 0 { w } else { grid.step };
        if matches!(func, Rollup::Default | Rollup::Rate) && win < mpi {
            win = mpi;
        }
        // The points, and the samples each looks at when it scans its
        // window (a window much longer than the step scans each sample
        // many times).
        let scans = matches!(func, Rollup::Min | Rollup::Max | Rollup::Sum | Rollup::Avg);
        let per_window = if scans { in_window(&ts, win) } else { 1 };
        src.charge(
            times
                .len()
                .saturating_mul(POINT_COST)
                .saturating_add(times.len().saturating_mul(per_window) / SCANS_PER_SAMPLE),
        )?;
        // The grid's times rise, so each window's bounds only move on:
        // `i` past the samples at or before its start, `j` past those at
        // or before its end; each looked for first where it moved by as
        // much as last time (regular samples: there or next to it).
        let (mut i, mut j, mut di, mut dj) = (0, 0, 0, 0);
        let values = times
            .iter()
            .map(|&t| {
                let t_start = t - win;
                let (i0, j0) = (i, j);
                i = past_near(&ts, i, i + di, t_start);
                j = past_near(&ts, j, j + dj, t);
                (di, dj) = (i - i0, j - j0);
                let prev = (i < ts.len() && i > 0 && ts[i - 1] > t_start - mpi)
                    .then(|| (ts[i - 1], v[i - 1]));
                at_point(func, &ts[i..j.max(i)], &v[i..j.max(i)], prev)
            })
            .collect();
        let series = if func.keeps_name() {
            series
        } else {
            unnamed(&series)
        };
        out.push(Out { series, values });
    }
    Ok(out)
}

/// About how many of `ts`' samples (rising) a window of `win` ms holds,
/// at their mean rate (at least one, at most all of them).
fn in_window(ts: &[i64], win: i64) -> usize {
    let (Some(first), Some(last)) = (ts.first(), ts.last()) else {
        return 1;
    };
    let span = i128::from(last.saturating_sub(*first)).max(1);
    let n = i128::try_from(ts.len()).unwrap_or(i128::MAX) * i128::from(win.max(0)) / span;
    usize::try_from(n)
        .unwrap_or(usize::MAX)
        .saturating_add(1)
        .min(ts.len())
}

/// The first index from `at` on whose time is after `t` (`ts` rising):
/// a search doubling its stride, then halving it (a step of a long
/// query's grid passes many samples; a short one, few).
fn past(ts: &[i64], at: usize, t: i64) -> usize {
    let rest = &ts[at.min(ts.len())..];
    let mut end = 1;
    while end < rest.len() && rest[end - 1] <= t {
        end *= 2;
    }
    let end = end.min(rest.len());
    at + rest[..end].partition_point(|&x| x <= t)
}

/// The first of `v` (not empty) that no later one `beats`, as a fold
/// from `v[0]` keeping what beats the value kept (so a NaN first stays,
/// and a NaN later never wins). Taken in eight lanes, which is the same
/// answer unless it is a zero (equal values are then of either sign, and
/// which comes first matters): that case is folded in order.
fn extreme(v: &[f64], beats: impl Fn(f64, f64) -> bool + Copy) -> f64 {
    let fold = |from: f64, xs: &[f64]| {
        xs.iter()
            .fold(from, |m, &x| if beats(x, m) { x } else { m })
    };
    let first = v[0];
    let mut lanes = [first; 8];
    let mut eights = v.chunks_exact(8);
    for c in &mut eights {
        for (m, &x) in lanes.iter_mut().zip(c) {
            if beats(x, *m) {
                *m = x;
            }
        }
    }
    let m = fold(fold(first, &lanes), eights.remainder());
    if m == 0.0 {
        fold(first, v)
    } else {
        m
    }
}

/// [`past`] looked for first at `hint` (any index): a few steps back
/// or on from it, then a search.
fn past_near(ts: &[i64], at: usize, hint: usize, t: i64) -> usize {
    const STEPS: usize = 4;
    let n = ts.len();
    if at >= n {
        return at;
    }
    // The answer is in at..=n, and at `g` or after unless `ts[g - 1]`
    // is after `t`.
    let g = hint.clamp(at, n);
    if g > at && ts[g - 1] > t {
        // `ts[k]` is after `t`: the answer is `k` or before.
        let mut k = g - 1;
        for _ in 0..STEPS {
            if k == at || ts[k - 1] <= t {
                return k;
            }
            k -= 1;
        }
        return at + ts[at..k].partition_point(|&x| x <= t);
    }
    // The answer is `k` or after.
    let mut k = g;
    for _ in 0..STEPS {
        if k == n || ts[k] > t {
            return k;
        }
        k += 1;
    }
    past(ts, k, t)
}

/// One point of a rollup from the window's samples.
fn at_point(func: Rollup, ts: &[i64], v: &[f64], prev: Option<(i64, f64)>) -> f64 {
    let n = v.len();
    if func == Rollup::Rate {
        return match prev {
            None if n < 2 => f64::NAN,
            None => (v[n - 1] - v[0]) / ((ts[n - 1] - ts[0]) as f64 / 1e3),
            Some(_) if n == 0 => 0.0,
            Some((pt, pv)) => (v[n - 1] - pv) / ((ts[n - 1] - pt) as f64 / 1e3),
        };
    }
    if n == 0 {
        return f64::NAN;
    }
    match func {
        Rollup::Default | Rollup::Last => v[n - 1],
        Rollup::Min => extreme(v, |x, m| x < m),
        Rollup::Max => extreme(v, |x, m| x > m),
        Rollup::Sum => v.iter().sum(),
        Rollup::Avg => v.iter().sum::<f64>() / n as f64,
        Rollup::Count => n as f64,
        Rollup::Rate => unreachable!("above"),
    }
}

#[cfg(test)]
mod tests;
