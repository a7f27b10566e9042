//! Aggregation operators over the series of each group, step by step,
//! as Prometheus computes them.

use super::call::valid_label_name;
use super::fold::{is_fold, Fold};
use super::range_fns::quantile;
use super::{string_of, Builder, Cursor, Ev, EvalError, Mat};
use crate::ast::{AggOp, Expr, Grouping};
use crate::value::{format_value, Labels, METRIC_NAME};
use std::collections::HashMap;

/// A group's labels from a series' (`by`: those named; `without`: all
/// but those named and the metric name).
pub(super) fn group_labels(l: &Labels, g: &Grouping) -> Labels {
    match g {
        Grouping::By(names) => l.keep(names),
        Grouping::Without(names) => {
            let mut d = l.drop(names);
            d.remove(METRIC_NAME);
            d
        }
    }
}

/// One group's running state at one step.
#[derive(Clone, Default)]
struct Acc {
    fold: Fold,
    /// Every value, for quantile.
    values: Vec<f64>,
    /// (series, value) for topk, bottomk, limitk, limit_ratio.
    members: Vec<(usize, f64)>,
}

impl Ev<'_> {
    pub(crate) fn aggregate(
        &self,
        op: AggOp,
        expr: &Expr,
        param: Option<&Expr>,
        grouping: &Grouping,
    ) -> Result<Mat, EvalError> {
        if op == AggOp::CountValues {
            return self.count_values(expr, param, grouping);
        }
        if is_fold(op) {
            if let Some(m) = self.fold_each(op, expr, grouping)? {
                return Ok(m);
            }
        }
        let params = match param {
            Some(p) => self.scalar_values(p)?,
            None => Vec::new(),
        };
        let input = self.eval(expr)?;
        let mut ids: HashMap<Labels, usize> = HashMap::new();
        let mut labels: Vec<Labels> = Vec::new();
        let group_of: Vec<usize> = input
            .iter()
            .map(|s| {
                let l = group_labels(&s.labels, grouping);
                *ids.entry(l.clone()).or_insert_with(|| {
                    labels.push(l);
                    labels.len() - 1
                })
            })
            .collect();
        let mut cur = Cursor::new(&input);
        let mut at = Vec::new();
        let mut b = Builder::new();
        let mut accs = vec![Acc::default(); labels.len()];
        for (step, t) in self.steps().enumerate() {
            cur.at(t, &mut at);
            for a in accs.iter_mut() {
                *a = Acc::default();
            }
            let p = params.get(step).copied().unwrap_or(f64::NAN);
            let k = match op {
                AggOp::Topk | AggOp::Bottomk | AggOp::Limitk => {
                    if !(p.is_finite() || p.is_infinite()) || p.abs() >= 9.223_372_036_854_776e18 {
                        return Err(EvalError::Invalid(format!(
                            "Scalar value {} overflows int64",
                            format_value(p)
                        )));
                    }
                    let k = (p as i64).min(input.len() as i64);
                    if k < 1 {
                        continue;
                    }
                    k as usize
                }
                AggOp::LimitRatio => {
                    if p.is_nan() {
                        return Err(EvalError::Invalid(format!("Ratio value {p} is NaN")));
                    }
                    if p == 0.0 {
                        continue;
                    }
                    0
                }
                _ => 0,
            };
            for &(si, v) in &at {
                add(&mut accs[group_of[si]], op, si, v, k, p, &input[si].labels);
            }
            for (g, a) in accs.iter_mut().enumerate() {
                if !a.fold.seen {
                    continue;
                }
                match op {
                    AggOp::Topk | AggOp::Bottomk | AggOp::Limitk | AggOp::LimitRatio => {
                        if op == AggOp::Topk {
                            a.members.sort_by(|x, y| desc_nan_last(x.1, y.1));
                        } else if op == AggOp::Bottomk {
                            a.members.sort_by(|x, y| asc_nan_last(x.1, y.1));
                        }
                        for &(si, v) in &a.members {
                            b.push(input[si].labels.clone(), t, v)?;
                        }
                    }
                    _ => b.push(labels[g].clone(), t, finish(a, op, p))?,
                }
            }
        }
        let m = b.finish();
        self.hold(m.iter().map(|s| s.points.len()).sum())?;
        Ok(m)
    }

    fn count_values(
        &self,
        expr: &Expr,
        param: Option<&Expr>,
        grouping: &Grouping,
    ) -> Result<Mat, EvalError> {
        let label = param.map(string_of).unwrap_or_default();
        if !valid_label_name(&label) {
            return Err(EvalError::Invalid(format!("invalid label name {label:?}")));
        }
        let grouping = match grouping {
            Grouping::By(names) => {
                let mut n = names.clone();
                n.push(label.clone());
                Grouping::By(n)
            }
            g => g.clone(),
        };
        let input = self.eval(expr)?;
        let mut cur = Cursor::new(&input);
        let mut at = Vec::new();
        let mut b = Builder::new();
        for t in self.steps() {
            cur.at(t, &mut at);
            let mut counts: Vec<(Labels, f64)> = Vec::new();
            let mut index: HashMap<Labels, usize> = HashMap::new();
            for &(si, v) in &at {
                let mut l = input[si].labels.clone();
                l.set(&label, &format_value(v));
                let g = group_labels(&l, &grouping);
                match index.get(&g) {
                    Some(&i) => counts[i].1 += 1.0,
                    None => {
                        index.insert(g.clone(), counts.len());
                        counts.push((g, 1.0));
                    }
                }
            }
            for (l, n) in counts {
                b.push(l, t, n)?;
            }
        }
        Ok(b.finish())
    }
}

/// Descending, NaN last.
fn desc_nan_last(a: f64, b: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
        _ => b.partial_cmp(&a).expect("no NaN"),
    }
}

/// Ascending, NaN last.
fn asc_nan_last(a: f64, b: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
        _ => a.partial_cmp(&b).expect("no NaN"),
    }
}

/// Whether `v` should replace `worst` among the k kept: bigger (topk)
/// or smaller (bottomk), a number over NaN.
fn beats(op: AggOp, v: f64, worst: f64) -> bool {
    if worst.is_nan() {
        return !v.is_nan();
    }
    match op {
        AggOp::Topk => v > worst,
        _ => v < worst,
    }
}

/// The order of topk's (bottomk's) heap: a NaN, then the smallest
/// (biggest) value at the root, as Prometheus's `vectorByValueHeap`
/// (`vectorByReverseValueHeap`) orders them.
fn heap_less(op: AggOp, a: f64, b: f64) -> bool {
    if a.is_nan() {
        return true;
    }
    match op {
        AggOp::Topk => a < b,
        _ => a > b,
    }
}

/// Go's `container/heap` moves, which Prometheus's topk and bottomk keep
/// their k with, so that of equal values the same series are kept.
fn heap_up(op: AggOp, h: &mut [(usize, f64)], mut j: usize) {
    while j > 0 {
        let i = (j - 1) / 2;
        if !heap_less(op, h[j].1, h[i].1) {
            break;
        }
        h.swap(i, j);
        j = i;
    }
}

fn heap_down(op: AggOp, h: &mut [(usize, f64)], mut i: usize) {
    let n = h.len();
    loop {
        let j1 = 2 * i + 1;
        if j1 >= n {
            break;
        }
        let mut j = j1;
        if j1 + 1 < n && heap_less(op, h[j1 + 1].1, h[j1].1) {
            j = j1 + 1;
        }
        if !heap_less(op, h[j].1, h[i].1) {
            break;
        }
        h.swap(i, j);
        i = j;
    }
}

/// A stable hash of a label set in [0, 1), for `limit_ratio`.
fn ratio_offset(l: &Labels) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (n, v) in l.iter() {
        for b in n.bytes().chain([0xff]).chain(v.bytes()).chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h as f64 / u64::MAX as f64
}

#[allow(clippy::too_many_arguments)]
fn add(a: &mut Acc, op: AggOp, si: usize, f: f64, k: usize, p: f64, labels: &Labels) {
    a.fold.add(op, f);
    match op {
        AggOp::Quantile => a.values.push(f),
        AggOp::Topk | AggOp::Bottomk => {
            let h = &mut a.members;
            if h.len() < k {
                h.push((si, f));
                let last = h.len() - 1;
                heap_up(op, h, last);
            } else if beats(op, f, h[0].1) {
                // The root is the one to give up first.
                h[0] = (si, f);
                heap_down(op, h, 0);
            }
        }
        AggOp::Limitk if a.members.len() < k => a.members.push((si, f)),
        AggOp::LimitRatio if keep_ratio(p, labels) => a.members.push((si, f)),
        _ => {}
    }
}

/// Whether `limit_ratio(r, ...)` keeps the series: a share `r` of the
/// series by a hash of their labels (the rest when `r` is negative).
fn keep_ratio(r: f64, labels: &Labels) -> bool {
    let r = r.clamp(-1.0, 1.0);
    let off = ratio_offset(labels);
    if r >= 0.0 {
        off < r
    } else {
        off >= 1.0 + r
    }
}

fn finish(a: &mut Acc, op: AggOp, p: f64) -> f64 {
    match op {
        AggOp::Quantile => quantile(p, &mut a.values),
        _ => a.fold.finish(op),
    }
}
