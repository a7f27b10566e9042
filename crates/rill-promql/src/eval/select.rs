//! Selectors: instant vectors with lookback and staleness, range
//! vectors and subqueries as windows over samples.

use super::{Ev, EvalError, Mat};
use crate::ast::{Expr, ValueType, VectorSelector};
use crate::value::{is_stale, Point, Series};
use std::collections::HashSet;

/// A range vector: each series' samples, and the window each step
/// reads.
pub(crate) struct Windows {
    pub series: Vec<Series>,
    pub range: i64,
    offset: i64,
    /// `@`'s time, resolved.
    at: Option<i64>,
}

impl Windows {
    /// The window at step `t`: (from, to], ms.
    pub fn window(&self, t: i64) -> (i64, i64) {
        let to = self.at.unwrap_or(t) - self.offset;
        (to - self.range, to)
    }

    /// Series `i`'s points in window `w`.
    pub fn points_in(&self, i: usize, w: (i64, i64)) -> &[Point] {
        Slide::new(&self.series[i].points).window(w)
    }
}

/// One series' window as the steps go by. Steps ascend, so both ends of
/// the window only move forward: a walk over every step reads each point
/// once, where a search per step costs two binary searches of the whole
/// series (a month of samples a minute at 1,000 steps: a fifth of the
/// query's time).
pub(crate) struct Slide<'p> {
    points: &'p [Point],
    lo: usize,
    hi: usize,
}

impl<'p> Slide<'p> {
    pub fn new(points: &'p [Point]) -> Slide<'p> {
        Slide {
            points,
            lo: 0,
            hi: 0,
        }
    }

    /// The points in (from, to]; each window's ends at or after the
    /// last one's.
    pub fn window(&mut self, (from, to): (i64, i64)) -> &'p [Point] {
        let p = self.points;
        while self.lo < p.len() && p[self.lo].t <= from {
            self.lo += 1;
        }
        self.hi = self.hi.max(self.lo);
        while self.hi < p.len() && p[self.hi].t <= to {
            self.hi += 1;
        }
        &p[self.lo..self.hi]
    }

    /// The last point at or before `t` (`t` at or after the last asked).
    pub fn latest(&mut self, t: i64) -> Option<Point> {
        let p = self.points;
        while self.hi < p.len() && p[self.hi].t <= t {
            self.hi += 1;
        }
        self.hi.checked_sub(1).map(|k| p[k])
    }
}

impl Ev<'_> {
    /// The times an expression with `offset` and `at` reads at, first
    /// and last step.
    fn refs(&self, offset: i64, at: Option<i64>) -> (i64, i64) {
        match at {
            Some(a) => (a - offset, a - offset),
            None => (self.start - offset, self.end - offset),
        }
    }

    fn fetch(&self, vs: &VectorSelector, mint: i64, maxt: i64) -> Result<Vec<Series>, EvalError> {
        let got = self
            .src
            .select(&vs.matchers, mint, maxt)
            .map_err(EvalError::Source)?;
        self.hold(got.iter().map(|s| s.points.len()).sum())?;
        Ok(got)
    }

    /// An instant vector selector at each step: the latest sample in
    /// (t - lookback, t], none if it is the stale marker; with
    /// `timestamps`, the sample's time in seconds instead of its value
    /// (`timestamp()`), the name kept for the caller to drop.
    pub(crate) fn vector_selector(
        &self,
        vs: &VectorSelector,
        timestamps: bool,
    ) -> Result<Mat, EvalError> {
        let at = vs.at.map(|a| self.at_time(a));
        let (first, last) = self.refs(vs.offset, at);
        let got = self.fetch(vs, first - self.opts.lookback_ms + 1, last)?;
        let mut out = Vec::with_capacity(got.len());
        for s in got {
            let points = self.instant_points(&s.points, vs.offset, at, timestamps);
            if !points.is_empty() {
                self.hold(points.len())?;
                out.push(Series {
                    labels: s.labels,
                    points,
                });
            }
        }
        Ok(out)
    }

    /// One series' points of an instant selector at each step.
    fn instant_points(
        &self,
        samples: &[Point],
        offset: i64,
        at: Option<i64>,
        timestamps: bool,
    ) -> Vec<Point> {
        let lookback = self.opts.lookback_ms;
        let mut points = Vec::new();
        let mut slide = Slide::new(samples);
        for t in self.steps() {
            let r = at.unwrap_or(t) - offset;
            let Some(p) = slide.latest(r) else {
                continue;
            };
            if p.t <= r - lookback || is_stale(p.v) {
                continue;
            }
            let v = if timestamps { p.t as f64 / 1000.0 } else { p.v };
            points.push(Point { t, v });
        }
        points
    }

    /// Calls `each` with each series of `e`, one at a time, when `e` is
    /// a selector or a function of a range selector that answers for
    /// each series alone (all but `absent_over_time`); `Ok(false)`,
    /// nothing read, for any other expression. Only the series being
    /// worked on is held.
    pub(crate) fn each_series(
        &self,
        e: &Expr,
        each: &mut dyn FnMut(Series) -> Result<(), EvalError>,
    ) -> Result<bool, EvalError> {
        match e {
            Expr::Paren(inner) => self.each_series(inner, each),
            Expr::Vector(vs) => {
                let at = vs.at.map(|a| self.at_time(a));
                let (first, last) = self.refs(vs.offset, at);
                let mint = first - self.opts.lookback_ms + 1;
                self.read_each(vs, mint, last, &mut |s| {
                    let points = self.instant_points(&s.points, vs.offset, at, false);
                    if points.is_empty() {
                        return Ok(());
                    }
                    each(Series {
                        labels: s.labels,
                        points,
                    })
                })?;
                Ok(true)
            }
            Expr::Call { func, args } => {
                let Some(mi) = func.args.iter().position(|t| *t == ValueType::Matrix) else {
                    return Ok(false);
                };
                let Expr::Matrix { selector, range } = args[mi].unparen() else {
                    return Ok(false);
                };
                if func.name == "absent_over_time" {
                    return Ok(false);
                }
                let scalars = self.range_scalars(args, mi)?;
                let (win, mint, maxt) = self.matrix_windows(selector, *range);
                let keep_name = func.name == "last_over_time";
                let mut seen = HashSet::new();
                self.read_each(selector, mint, maxt, &mut |mut s| {
                    s.points.retain(|p| !is_stale(p.v));
                    let points = self.range_points(func, &win, &s.points, &scalars, None)?;
                    if points.is_empty() {
                        return Ok(());
                    }
                    let labels = if keep_name {
                        s.labels
                    } else {
                        s.labels.without_name()
                    };
                    if !seen.insert(labels.clone()) {
                        return Err(EvalError::SameLabelset);
                    }
                    each(Series { labels, points })
                })?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// `each` for every series the source gives for `vs`, its samples
    /// counted against the bound while it is worked on.
    fn read_each(
        &self,
        vs: &VectorSelector,
        mint: i64,
        maxt: i64,
        each: &mut dyn FnMut(Series) -> Result<(), EvalError>,
    ) -> Result<(), EvalError> {
        let mut failed = None;
        self.src
            .select_each(&vs.matchers, mint, maxt, &mut |s| {
                let n = s.points.len();
                let r = self.hold(n).and_then(|()| each(s));
                self.release(n);
                match r {
                    Ok(()) => true,
                    Err(e) => {
                        failed = Some(e);
                        false
                    }
                }
            })
            .map_err(EvalError::Source)?;
        failed.map_or(Ok(()), Err)
    }

    /// A range selector's windows, without its series, and the times
    /// (ms, both included) its samples are read from.
    pub(crate) fn matrix_windows(
        &self,
        selector: &VectorSelector,
        range: i64,
    ) -> (Windows, i64, i64) {
        let at = selector.at.map(|a| self.at_time(a));
        let (first, last) = self.refs(selector.offset, at);
        let win = Windows {
            series: Vec::new(),
            range,
            offset: selector.offset,
            at,
        };
        (win, first - range + 1, last)
    }

    /// A range vector selector or a subquery, as windows over samples.
    pub(crate) fn windows(&self, e: &Expr) -> Result<Windows, EvalError> {
        match e {
            Expr::Matrix { selector, range } => {
                let (mut win, mint, maxt) = self.matrix_windows(selector, *range);
                let mut series = self.fetch(selector, mint, maxt)?;
                for s in &mut series {
                    s.points.retain(|p| !is_stale(p.v));
                }
                series.retain(|s| !s.points.is_empty());
                win.series = series;
                Ok(win)
            }
            Expr::Subquery {
                expr,
                range,
                step,
                offset,
                at,
            } => {
                let at = at.map(|a| self.at_time(a));
                let (first, last) = self.refs(*offset, at);
                let step = if *step > 0 {
                    *step
                } else {
                    self.opts.subquery_step_ms
                };
                // The first multiple of the step inside the first window.
                let from = first - range;
                let mut start = step * from.div_euclid(step);
                if start <= from {
                    start += step;
                }
                // Each step of the inner evaluation holds at least a
                // point: too many are refused before any is computed.
                if last >= start
                    && ((last - start) / step) as u128 + 1 > self.opts.max_points as u128
                {
                    return Err(EvalError::TooManyPoints);
                }
                let inner = self.with_steps(start, last, step);
                let series = if last < start {
                    Vec::new()
                } else {
                    inner.eval(expr)?
                };
                Ok(Windows {
                    series,
                    range: *range,
                    offset: *offset,
                    at,
                })
            }
            Expr::Paren(inner) => self.windows(inner),
            _ => Err(EvalError::Invalid(
                "expected a range vector selector or a subquery".into(),
            )),
        }
    }
}
