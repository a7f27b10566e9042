//! Evaluating a query as Prometheus 3.5's engine does: every expression
//! is evaluated over the query's steps at once (an instant query is a
//! range of one step) into series with a point at each step they have a
//! value; functions of range vectors slide a window over each series'
//! samples; binary operators and aggregations work step by step.
//!
//! - An instant vector selector at time t takes each series' latest
//!   sample in (t - lookback, t] (lookback 5 minutes), none if that
//!   sample is the stale marker.
//! - A range `[r]` at t takes the samples in (t - r, t], stale markers
//!   left out.
//! - `offset o` moves t to t - o; `@ a` fixes t at a (then the offset
//!   applies), `@ start()` and `@ end()` at the query's start and end.
//! - A subquery `e[r:s]` evaluates `e` at the multiples of s (the
//!   default step when none is given) in (t - r, t].
//! - Arithmetic, comparisons with `bool`, functions and aggregations
//!   other than `topk`, `bottomk`, `limitk` and `limit_ratio` drop the
//!   metric name (`last_over_time` keeps it); two series left with one
//!   label set at one step is the error Prometheus gives.

mod aggregate;
mod binary;
mod call;
mod fold;
mod instant_fns;
mod range_fns;
mod select;
#[cfg(test)]
mod tests;

use crate::ast::{At, Expr, ValueType};
use crate::matcher::Matcher;
use crate::value::{Labels, Point, Series, Value};
use std::cell::Cell;
use std::collections::HashMap;

/// Where samples come from.
pub trait Source {
    /// Every series `matchers` select that has samples from `mint` to
    /// `maxt` ms (both included), with those samples in time order,
    /// stale markers included.
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String>;

    /// The same series, given to `each` one at a time in the same order
    /// until it answers `false`: a source that reads series one by one
    /// need not hold them all (the default reads them all first).
    fn select_each(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        each: &mut dyn FnMut(Series) -> bool,
    ) -> Result<(), String> {
        for s in self.select(matchers, mint, maxt)? {
            if !each(s) {
                break;
            }
        }
        Ok(())
    }
}

/// How a query is evaluated.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How far back an instant vector selector looks for a sample, ms
    /// (Prometheus's `--query.lookback-delta`, 5 minutes).
    pub lookback_ms: i64,
    /// A subquery's step when it gives none, ms (Prometheus's global
    /// evaluation interval, a minute).
    pub subquery_step_ms: i64,
    /// Most points a query may hold at once, samples read and points
    /// computed (Prometheus's `--query.max-samples`, 50,000,000).
    pub max_points: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            lookback_ms: 300_000,
            subquery_step_ms: 60_000,
            max_points: 50_000_000,
        }
    }
}

/// Why an evaluation fails, in Prometheus's words.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The source could not be read.
    #[error("{0}")]
    Source(String),
    #[error("vector cannot contain metrics with the same labelset")]
    SameLabelset,
    #[error("query processing would load too many samples into memory in query execution")]
    TooManyPoints,
    #[error("invalid expression type \"{0}\" for range query, must be Scalar or instant Vector")]
    RangeOfType(&'static str),
    #[error(
        "zero or negative query resolution step widths are not accepted. Try a positive integer"
    )]
    BadStep,
    #[error("end timestamp must not be before start time")]
    EndBeforeStart,
    /// Any other refusal at evaluation (many-to-many matching, bad
    /// label names, ...).
    #[error("{0}")]
    Invalid(String),
}

/// Evaluates `expr` at `t` ms.
pub fn instant(src: &dyn Source, expr: &Expr, t: i64, opts: &Options) -> Result<Value, EvalError> {
    let held = Cell::new(0);
    let ev = Ev::new(src, t, t, 1, opts, (t, t), &held);
    match expr.value_type() {
        ValueType::String => Ok(Value::String(string_of(expr))),
        ValueType::Scalar => {
            let m = ev.eval(expr)?;
            let v = m
                .first()
                .and_then(|s| s.points.first())
                .map_or(f64::NAN, |p| p.v);
            Ok(Value::Scalar(Point { t, v }))
        }
        ValueType::Vector => Ok(Value::Vector(ev.eval(expr)?)),
        ValueType::Matrix => Ok(Value::Matrix(ev.range_value(expr)?)),
    }
}

/// Evaluates `expr` from `start` to `end` ms every `step` ms; each
/// series sorted by labels, its points at the steps it has a value.
pub fn range(
    src: &dyn Source,
    expr: &Expr,
    start: i64,
    end: i64,
    step: i64,
    opts: &Options,
) -> Result<Vec<Series>, EvalError> {
    if step <= 0 {
        return Err(EvalError::BadStep);
    }
    if end < start {
        return Err(EvalError::EndBeforeStart);
    }
    match expr.value_type() {
        ValueType::Scalar | ValueType::Vector => {}
        t => return Err(EvalError::RangeOfType(t.name())),
    }
    let held = Cell::new(0);
    let ev = Ev::new(src, start, end, step, opts, (start, end), &held);
    let mut m = ev.eval(expr)?;
    m.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(m)
}

/// A string literal's text ("" for any other expression).
pub(crate) fn string_of(e: &Expr) -> String {
    match e.unparen() {
        Expr::String(s) => s.clone(),
        _ => String::new(),
    }
}

/// Series with points at some of the evaluation's steps.
pub(crate) type Mat = Vec<Series>;

#[derive(Clone, Copy)]
pub(crate) struct Ev<'a> {
    src: &'a dyn Source,
    start: i64,
    end: i64,
    step: i64,
    opts: &'a Options,
    /// The outermost query's start and end (`@ start()`, `@ end()`).
    query: (i64, i64),
    /// Points held now, against `opts.max_points`.
    held: &'a Cell<usize>,
}

impl<'a> Ev<'a> {
    fn new(
        src: &'a dyn Source,
        start: i64,
        end: i64,
        step: i64,
        opts: &'a Options,
        query: (i64, i64),
        held: &'a Cell<usize>,
    ) -> Ev<'a> {
        Ev {
            src,
            start,
            end,
            step,
            opts,
            query,
            held,
        }
    }

    /// The same query evaluated over other steps (a subquery).
    fn with_steps(&self, start: i64, end: i64, step: i64) -> Ev<'a> {
        Ev {
            start,
            end,
            step,
            ..*self
        }
    }

    fn steps(&self) -> impl Iterator<Item = i64> {
        let (start, step) = (self.start, self.step);
        (0..self.n_steps() as i64).map(move |k| start + k * step)
    }

    fn n_steps(&self) -> usize {
        ((i128::from(self.end) - i128::from(self.start)) / i128::from(self.step) + 1) as usize
    }

    /// Counts `n` more points held; an error past the bound.
    fn hold(&self, n: usize) -> Result<(), EvalError> {
        let now = self.held.get() + n;
        self.held.set(now);
        if now > self.opts.max_points {
            return Err(EvalError::TooManyPoints);
        }
        Ok(())
    }

    /// Counts `n` points no longer held.
    fn release(&self, n: usize) {
        self.held.set(self.held.get().saturating_sub(n));
    }

    /// The time `at` names.
    fn at_time(&self, at: At) -> i64 {
        match at {
            At::Time(t) => t,
            At::Start => self.query.0,
            At::End => self.query.1,
        }
    }

    /// Evaluates a scalar or instant vector expression over the steps.
    pub(crate) fn eval(&self, e: &Expr) -> Result<Mat, EvalError> {
        match e {
            Expr::Paren(inner) => self.eval(inner),
            Expr::Number(v) => self.scalar(|_| *v),
            Expr::String(_) => Ok(Vec::new()),
            Expr::Vector(vs) => self.vector_selector(vs, false),
            Expr::Matrix { .. } | Expr::Subquery { .. } => Err(EvalError::Invalid(
                "a range vector is evaluated only as a function's argument".into(),
            )),
            Expr::Neg(inner) => {
                let mut m = self.eval(inner)?;
                for s in &mut m {
                    s.labels.remove(crate::value::METRIC_NAME);
                    for p in &mut s.points {
                        p.v = -p.v;
                    }
                }
                if inner.value_type() == ValueType::Vector {
                    same_labelset(&m)?;
                }
                Ok(m)
            }
            Expr::Call { func, args } => self.call(func, args),
            Expr::Aggregate {
                op,
                expr,
                param,
                grouping,
            } => self.aggregate(*op, expr, param.as_deref(), grouping),
            Expr::Binary {
                op,
                lhs,
                rhs,
                return_bool,
                matching,
            } => self.binary(*op, lhs, rhs, *return_bool, matching.as_ref()),
        }
    }

    /// A scalar: one series without labels, a point at every step
    /// (counted against the bound).
    fn scalar(&self, f: impl Fn(i64) -> f64) -> Result<Mat, EvalError> {
        self.hold(self.n_steps())?;
        Ok(vec![Series {
            labels: Labels::empty(),
            points: self.steps().map(|t| Point { t, v: f(t) }).collect(),
        }])
    }

    /// A scalar expression's value at each step.
    fn scalar_values(&self, e: &Expr) -> Result<Vec<f64>, EvalError> {
        let m = self.eval(e)?;
        let mut out = vec![f64::NAN; self.n_steps()];
        if let Some(s) = m.first() {
            for p in &s.points {
                out[((p.t - self.start) / self.step) as usize] = p.v;
            }
        }
        Ok(out)
    }

    /// A matrix-typed expression at an instant: the samples of each
    /// series in its window.
    fn range_value(&self, e: &Expr) -> Result<Mat, EvalError> {
        let m = self.windows(e.unparen())?;
        let w = m.window(self.start);
        let mut out = Vec::new();
        for (i, s) in m.series.iter().enumerate() {
            let pts = m.points_in(i, w);
            if !pts.is_empty() {
                out.push(Series {
                    labels: s.labels.clone(),
                    points: pts.to_vec(),
                });
            }
        }
        Ok(out)
    }
}

/// The error Prometheus gives when two series of a result have one label
/// set.
fn same_labelset(m: &Mat) -> Result<(), EvalError> {
    let mut seen = std::collections::HashSet::with_capacity(m.len());
    for s in m {
        if !seen.insert(&s.labels) {
            return Err(EvalError::SameLabelset);
        }
    }
    Ok(())
}

/// A series' next point at or after each step, as the steps go by.
struct Cursor<'m> {
    mat: &'m Mat,
    next: Vec<usize>,
}

impl<'m> Cursor<'m> {
    fn new(mat: &'m Mat) -> Cursor<'m> {
        Cursor {
            mat,
            next: vec![0; mat.len()],
        }
    }

    /// The series with a point at `t` and its value, in series order.
    fn at(&mut self, t: i64, out: &mut Vec<(usize, f64)>) {
        out.clear();
        for (i, s) in self.mat.iter().enumerate() {
            let k = &mut self.next[i];
            while *k < s.points.len() && s.points[*k].t < t {
                *k += 1;
            }
            if *k < s.points.len() && s.points[*k].t == t {
                out.push((i, s.points[*k].v));
            }
        }
    }
}

/// A result built step by step: a series per label set.
struct Builder {
    index: HashMap<Labels, usize>,
    series: Mat,
}

impl Builder {
    fn new() -> Builder {
        Builder {
            index: HashMap::new(),
            series: Vec::new(),
        }
    }

    /// Adds a point at `t` to the series of `labels`; two at one step is
    /// Prometheus's error.
    fn push(&mut self, labels: Labels, t: i64, v: f64) -> Result<(), EvalError> {
        match self.index.get(&labels) {
            Some(&i) => {
                let s = &mut self.series[i];
                if s.points.last().is_some_and(|p| p.t == t) {
                    return Err(EvalError::SameLabelset);
                }
                s.points.push(Point { t, v });
            }
            None => {
                self.index.insert(labels.clone(), self.series.len());
                self.series.push(Series {
                    labels,
                    points: vec![Point { t, v }],
                });
            }
        }
        Ok(())
    }

    fn finish(self) -> Mat {
        self.series
    }
}
