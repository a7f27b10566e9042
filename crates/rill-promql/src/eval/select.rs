//! Selectors: instant vectors with lookback and staleness, range
//! vectors and subqueries as windows over samples.

use super::{Ev, EvalError, Mat};
use crate::ast::{Expr, VectorSelector};
use crate::value::{is_stale, Point, Series};

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
        let lookback = self.opts.lookback_ms;
        let got = self.fetch(vs, first - lookback + 1, last)?;
        let mut out = Vec::with_capacity(got.len());
        for s in got {
            let mut points = Vec::new();
            let mut slide = Slide::new(&s.points);
            for t in self.steps() {
                let r = at.unwrap_or(t) - vs.offset;
                let Some(p) = slide.latest(r) else {
                    continue;
                };
                if p.t <= r - lookback || is_stale(p.v) {
                    continue;
                }
                let v = if timestamps { p.t as f64 / 1000.0 } else { p.v };
                points.push(Point { t, v });
            }
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

    /// A range vector selector or a subquery, as windows over samples.
    pub(crate) fn windows(&self, e: &Expr) -> Result<Windows, EvalError> {
        match e {
            Expr::Matrix { selector, range } => {
                let at = selector.at.map(|a| self.at_time(a));
                let (first, last) = self.refs(selector.offset, at);
                let mut series = self.fetch(selector, first - range + 1, last)?;
                for s in &mut series {
                    s.points.retain(|p| !is_stale(p.v));
                }
                series.retain(|s| !s.points.is_empty());
                Ok(Windows {
                    series,
                    range: *range,
                    offset: selector.offset,
                    at,
                })
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
