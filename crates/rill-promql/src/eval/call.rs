//! Function calls: functions of range vectors window by window, the
//! label functions over whole series, the others step by step.

use super::instant_fns::{self, Arg};
use super::range_fns::{self, Window};
use super::select::{Slide, Windows};
use super::{same_labelset, string_of, Builder, Cursor, Ev, EvalError, Mat};
use crate::ast::{Expr, ValueType};
use crate::functions::Function;
use crate::matcher::MatchOp;
use crate::value::{Labels, Point, Series, METRIC_NAME};

/// The longest label value `label_replace` and `label_join` make (Rill
/// keeps series keys under 64 KiB): a longer one is an error, not an
/// answer that grows without bound.
const MAX_LABEL_BYTES: usize = 64 << 10;

fn check_len(v: &str) -> Result<(), EvalError> {
    if v.len() > MAX_LABEL_BYTES {
        return Err(EvalError::Invalid(format!(
            "a label value of {} bytes, longer than {MAX_LABEL_BYTES}",
            v.len()
        )));
    }
    Ok(())
}

/// A label name as Prometheus takes one: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub(crate) fn valid_label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// What `absent(x)` and `absent_over_time(x[r])` answer with: the
/// labels `x` names with `=`, unless named twice.
fn absent_labels(arg: &Expr) -> Labels {
    let matchers = match arg.unparen() {
        Expr::Vector(vs) | Expr::Matrix { selector: vs, .. } => &vs.matchers,
        _ => return Labels::empty(),
    };
    let mut out = Labels::empty();
    let mut has = std::collections::HashSet::new();
    for m in matchers {
        if m.label == METRIC_NAME {
            continue;
        }
        match &m.op {
            MatchOp::Eq(v) if !has.contains(&m.label) => {
                out.set(&m.label, v);
                has.insert(m.label.clone());
            }
            _ => out.remove(&m.label),
        }
    }
    out
}

impl Ev<'_> {
    pub(crate) fn call(&self, func: &Function, args: &[Expr]) -> Result<Mat, EvalError> {
        match func.name {
            "label_replace" => return self.label_replace(args),
            "label_join" => return self.label_join(args),
            "timestamp" => {
                if let Expr::Vector(vs) = args[0].unparen() {
                    let mut m = self.vector_selector(vs, true)?;
                    for s in &mut m {
                        s.labels.remove(METRIC_NAME);
                    }
                    same_labelset(&m)?;
                    return Ok(m);
                }
            }
            _ => {}
        }
        if let Some(i) = func.args.iter().position(|t| *t == ValueType::Matrix) {
            return self.range_call(func, args, i);
        }
        self.step_call(func, args)
    }

    /// A function of a range vector (argument `mi`), its other
    /// arguments scalars.
    fn range_call(&self, func: &Function, args: &[Expr], mi: usize) -> Result<Mat, EvalError> {
        let scalars = self.range_scalars(args, mi)?;
        let win = self.windows(&args[mi])?;
        let keep_name = func.name == "last_over_time";
        let mut out: Mat = Vec::with_capacity(win.series.len());
        let mut covered = vec![false; self.n_steps()];
        for s in &win.series {
            let points = self.range_points(func, &win, &s.points, &scalars, Some(&mut covered))?;
            if !points.is_empty() {
                self.hold(points.len())?;
                let labels = if keep_name {
                    s.labels.clone()
                } else {
                    s.labels.without_name()
                };
                out.push(Series { labels, points });
            }
        }
        if func.name == "absent_over_time" {
            let points: Vec<Point> = self
                .steps()
                .zip(covered)
                .filter(|(_, c)| !c)
                .map(|(t, _)| Point { t, v: 1.0 })
                .collect();
            if points.is_empty() {
                return Ok(Vec::new());
            }
            return Ok(vec![Series {
                labels: absent_labels(&args[mi]),
                points,
            }]);
        }
        same_labelset(&out)?;
        Ok(out)
    }

    /// The scalar arguments of a function of a range vector (argument
    /// `mi`), each at every step.
    pub(crate) fn range_scalars(
        &self,
        args: &[Expr],
        mi: usize,
    ) -> Result<Vec<Vec<f64>>, EvalError> {
        args.iter()
            .enumerate()
            .filter(|(i, _)| *i != mi)
            .map(|(_, a)| self.scalar_values(a))
            .collect()
    }

    /// One series' points of a function of a range vector, its samples
    /// `samples` (stale markers left out) in `win`'s windows; the steps
    /// with samples marked in `covered`.
    pub(crate) fn range_points(
        &self,
        func: &Function,
        win: &Windows,
        samples: &[Point],
        scalars: &[Vec<f64>],
        mut covered: Option<&mut [bool]>,
    ) -> Result<Vec<Point>, EvalError> {
        let mut points = Vec::new();
        let mut step_scalars = vec![0.0; scalars.len()];
        let mut slide = Slide::new(samples);
        for (k, t) in self.steps().enumerate() {
            let bounds = win.window(t);
            let pts = slide.window(bounds);
            if pts.is_empty() {
                continue;
            }
            if let Some(c) = covered.as_deref_mut() {
                c[k] = true;
            }
            for (j, sc) in scalars.iter().enumerate() {
                step_scalars[j] = sc[k];
            }
            if func.name == "double_exponential_smoothing" {
                range_fns::check_smoothing(step_scalars[0], step_scalars[1])
                    .map_err(EvalError::Invalid)?;
            }
            let w = Window {
                points: pts,
                t,
                bounds,
                range: win.range,
                scalars: &step_scalars,
            };
            if let Some(v) = range_fns::apply(func.name, &w) {
                points.push(Point { t, v });
            }
        }
        Ok(points)
    }

    /// A function of instant vectors and scalars, step by step.
    fn step_call(&self, func: &Function, args: &[Expr]) -> Result<Mat, EvalError> {
        let mats: Vec<Option<Mat>> = args
            .iter()
            .map(|a| match a.value_type() {
                ValueType::String => Ok(None),
                _ => self.eval(a).map(Some),
            })
            .collect::<Result<_, _>>()?;
        let strings: Vec<String> = args.iter().map(string_of).collect();
        let mut cursors: Vec<Option<Cursor>> =
            mats.iter().map(|m| m.as_ref().map(Cursor::new)).collect();
        let absent = if func.name == "absent" {
            absent_labels(&args[0])
        } else {
            Labels::empty()
        };
        let mut b = Builder::new();
        let mut at = Vec::new();
        for t in self.steps() {
            let mut step_args = Vec::with_capacity(args.len());
            for (i, a) in args.iter().enumerate() {
                let arg = match (&mut cursors[i], &mats[i]) {
                    (Some(c), Some(m)) => {
                        c.at(t, &mut at);
                        if a.value_type() == ValueType::Scalar {
                            Arg::Scalar(at.first().map_or(f64::NAN, |x| x.1))
                        } else {
                            Arg::Vector(at.iter().map(|&(k, v)| (&m[k].labels, v)).collect())
                        }
                    }
                    _ => Arg::String(&strings[i]),
                };
                step_args.push(arg);
            }
            for (labels, v) in instant_fns::apply(func.name, &step_args, t, &absent) {
                b.push(labels, t, v)?;
            }
        }
        let m = b.finish();
        self.hold(m.iter().map(|s| s.points.len()).sum())?;
        Ok(m)
    }

    fn label_replace(&self, args: &[Expr]) -> Result<Mat, EvalError> {
        let (dst, repl, src, re) = (
            string_of(&args[1]),
            string_of(&args[2]),
            string_of(&args[3]),
            string_of(&args[4]),
        );
        let regex = regex::Regex::new(&format!("^(?s:{re})$")).map_err(|_| {
            EvalError::Invalid(format!(
                "invalid regular expression in label_replace(): {re}"
            ))
        })?;
        if !valid_label_name(&dst) {
            return Err(EvalError::Invalid(format!(
                "invalid destination label name in label_replace(): {dst}"
            )));
        }
        let mut m = self.eval(&args[0])?;
        for s in &mut m {
            let value = s.labels.value(&src).to_string();
            if let Some(caps) = regex.captures(&value) {
                // The regex crate's template is Go's: `$1`, `${1}`, `$name`,
                // `$$`, the longest name taken (`$1x` is group "1x").
                let mut res = String::new();
                caps.expand(&repl, &mut res);
                check_len(&res)?;
                s.labels.set(&dst, &res);
            }
        }
        same_labelset(&m)?;
        Ok(m)
    }

    fn label_join(&self, args: &[Expr]) -> Result<Mat, EvalError> {
        let dst = string_of(&args[1]);
        let sep = string_of(&args[2]);
        let srcs: Vec<String> = args[3..].iter().map(string_of).collect();
        for s in &srcs {
            if !valid_label_name(s) {
                return Err(EvalError::Invalid(format!(
                    "invalid source label name in label_join(): {s}"
                )));
            }
        }
        if !valid_label_name(&dst) {
            return Err(EvalError::Invalid(format!(
                "invalid destination label name in label_join(): {dst}"
            )));
        }
        let mut m = self.eval(&args[0])?;
        for s in &mut m {
            let joined = srcs
                .iter()
                .map(|l| s.labels.value(l).to_string())
                .collect::<Vec<_>>()
                .join(&sep);
            check_len(&joined)?;
            s.labels.set(&dst, &joined);
        }
        same_labelset(&m)?;
        Ok(m)
    }
}
