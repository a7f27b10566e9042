//! The aggregations that fold each group's values into a few numbers
//! (`sum`, `avg`, `count`, `min`, `max`, `group`, `stddev`, `stdvar`),
//! and their evaluation a series at a time.
//!
//! An aggregation over a selector or a range function of one
//! (`sum by (job) (rate(x[5m]))`) reads its input one series at a time
//! ([`Ev::each_series`]) into an accumulator per group and step: it holds
//! one series' samples and 40 bytes a group and step, where evaluating
//! the input first would hold every selected series' samples and points
//! at once. For one step and one group Prometheus adds the series in the
//! same order, so the answers are the same to the last bit.

use super::aggregate::group_labels;
use super::range_fns::kahan_inc;
use super::{Ev, EvalError, Mat};
use crate::ast::{AggOp, Expr, Grouping};
use crate::value::{Labels, Point, Series};
use std::collections::HashMap;

/// Whether `op` folds its values (needs no more than a [`Fold`] a group
/// and step).
pub(super) fn is_fold(op: AggOp) -> bool {
    matches!(
        op,
        AggOp::Sum
            | AggOp::Avg
            | AggOp::Count
            | AggOp::Min
            | AggOp::Max
            | AggOp::Group
            | AggOp::Stddev
            | AggOp::Stdvar
    )
}

/// One group's running value at one step, as Prometheus keeps it: Kahan
/// sums, a mean that turns incremental when the sum overflows, Welford's
/// variance.
#[derive(Clone, Copy, Default)]
pub(super) struct Fold {
    pub seen: bool,
    incremental: bool,
    pub value: f64,
    c: f64,
    mean: f64,
    pub count: f64,
}

impl Fold {
    /// Adds `f` (only the first value counts for operators that do not
    /// fold).
    pub(super) fn add(&mut self, op: AggOp, f: f64) {
        if !self.seen {
            self.seen = true;
            self.value = f;
            self.mean = f;
            self.count = 1.0;
            match op {
                AggOp::Stddev | AggOp::Stdvar => {
                    self.value = if f.is_nan() || f.is_infinite() {
                        f64::NAN
                    } else {
                        0.0
                    }
                }
                AggOp::Group => self.value = 1.0,
                _ => {}
            }
            return;
        }
        match op {
            AggOp::Sum => (self.value, self.c) = kahan_inc(f, self.value, self.c),
            AggOp::Avg => {
                self.count += 1.0;
                if !self.incremental {
                    let (v, c) = kahan_inc(f, self.value, self.c);
                    if !v.is_infinite() {
                        (self.value, self.c) = (v, c);
                        return;
                    }
                    self.incremental = true;
                    self.mean = self.value / (self.count - 1.0);
                    self.c /= self.count - 1.0;
                }
                let q = (self.count - 1.0) / self.count;
                (self.mean, self.c) = kahan_inc(f / self.count, q * self.mean, q * self.c);
            }
            AggOp::Max if self.value < f || self.value.is_nan() => self.value = f,
            AggOp::Min if self.value > f || self.value.is_nan() => self.value = f,
            AggOp::Count => self.count += 1.0,
            AggOp::Stddev | AggOp::Stdvar => {
                self.count += 1.0;
                let delta = f - self.mean;
                self.mean += delta / self.count;
                self.value += delta * (f - self.mean);
            }
            _ => {}
        }
    }

    /// The folded value.
    pub(super) fn finish(&self, op: AggOp) -> f64 {
        match op {
            AggOp::Avg => {
                if self.incremental {
                    self.mean + self.c
                } else {
                    self.value / self.count + self.c / self.count
                }
            }
            AggOp::Count => self.count,
            AggOp::Stdvar => self.value / self.count,
            AggOp::Stddev => (self.value / self.count).sqrt(),
            AggOp::Sum => {
                if self.value.is_infinite() {
                    self.value
                } else {
                    self.value + self.c
                }
            }
            _ => self.value,
        }
    }
}

impl Ev<'_> {
    /// `op` (a fold) over `expr` read a series at a time, when `expr` is
    /// a form [`Ev::each_series`] reads that way; `None` for any other.
    pub(super) fn fold_each(
        &self,
        op: AggOp,
        expr: &Expr,
        grouping: &Grouping,
    ) -> Result<Option<Mat>, EvalError> {
        let n = self.n_steps();
        let mut ids: HashMap<Labels, usize> = HashMap::new();
        let mut groups: Vec<Labels> = Vec::new();
        let mut folds: Vec<Fold> = Vec::new();
        let read = self.each_series(expr, &mut |s: Series| {
            let l = group_labels(&s.labels, grouping);
            let g = match ids.get(&l) {
                Some(&g) => g,
                None => {
                    // A group's accumulators count as its points.
                    self.hold(n)?;
                    ids.insert(l.clone(), groups.len());
                    groups.push(l);
                    folds.resize(groups.len() * n, Fold::default());
                    groups.len() - 1
                }
            };
            let row = &mut folds[g * n..(g + 1) * n];
            for p in &s.points {
                row[((p.t - self.start) / self.step) as usize].add(op, p.v);
            }
            Ok(())
        })?;
        if !read {
            return Ok(None);
        }
        let out = groups
            .into_iter()
            .zip(folds.chunks(n.max(1)))
            .filter_map(|(labels, row)| {
                let points: Vec<Point> = self
                    .steps()
                    .zip(row)
                    .filter(|(_, f)| f.seen)
                    .map(|(t, f)| Point { t, v: f.finish(op) })
                    .collect();
                (!points.is_empty()).then_some(Series { labels, points })
            })
            .collect();
        Ok(Some(out))
    }
}
