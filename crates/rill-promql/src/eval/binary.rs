//! Binary operators: between scalars, a vector and a scalar, and two
//! vectors matched by their labels (`on`, `ignoring`, `group_left`,
//! `group_right`), step by step.

use super::{Builder, Cursor, Ev, EvalError, Mat};
use crate::ast::{BinOp, Card, Expr, Matching, ValueType};
use crate::value::{Labels, METRIC_NAME};
use std::collections::{HashMap, HashSet};

/// `op` on two floats: the value, and whether a comparison holds (true
/// for the others).
fn elem(op: BinOp, l: f64, r: f64) -> (f64, bool) {
    match op {
        BinOp::Add => (l + r, true),
        BinOp::Sub => (l - r, true),
        BinOp::Mul => (l * r, true),
        BinOp::Div => (l / r, true),
        BinOp::Mod => (l % r, true),
        BinOp::Pow => (l.powf(r), true),
        BinOp::Atan2 => (l.atan2(r), true),
        BinOp::Eql => (l, l == r),
        BinOp::Neq => (l, l != r),
        BinOp::Gtr => (l, l > r),
        BinOp::Lss => (l, l < r),
        BinOp::Gte => (l, l >= r),
        BinOp::Lte => (l, l <= r),
        BinOp::And | BinOp::Or | BinOp::Unless => (l, true),
    }
}

/// Whether the result has no metric name (arithmetic changes what the
/// series measures).
fn drops_name(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::Pow | BinOp::Atan2
    )
}

/// The labels two series are matched by.
fn signature(l: &Labels, m: &Matching) -> Labels {
    if m.on {
        l.keep(&m.labels)
    } else {
        let mut d = l.drop(&m.labels);
        d.remove(METRIC_NAME);
        d
    }
}

/// The labels of a result of two matched series (`l` from the side that
/// may match many).
fn result_labels(l: &Labels, r: &Labels, op: BinOp, m: &Matching, return_bool: bool) -> Labels {
    let mut out = l.clone();
    if drops_name(op) || return_bool {
        out.remove(METRIC_NAME);
    }
    if m.card == Card::OneToOne {
        out = if m.on {
            out.keep(&m.labels)
        } else {
            out.drop(&m.labels)
        };
    }
    for name in &m.include {
        out.set(name, r.value(name));
    }
    out
}

impl Ev<'_> {
    pub(crate) fn binary(
        &self,
        op: BinOp,
        lhs: &Expr,
        rhs: &Expr,
        return_bool: bool,
        matching: Option<&Matching>,
    ) -> Result<Mat, EvalError> {
        let (lt, rt) = (lhs.value_type(), rhs.value_type());
        match (lt, rt) {
            (ValueType::Scalar, ValueType::Scalar) => {
                let (a, b) = (self.scalar_values(lhs)?, self.scalar_values(rhs)?);
                self.scalar(|t| {
                    let k = ((t - self.start) / self.step) as usize;
                    let (v, keep) = elem(op, a[k], b[k]);
                    if op.is_comparison() {
                        f64::from(u8::from(keep))
                    } else {
                        v
                    }
                })
            }
            (ValueType::Vector, ValueType::Scalar) => self.vector_scalar(
                op,
                &self.eval(lhs)?,
                &self.scalar_values(rhs)?,
                false,
                return_bool,
            ),
            (ValueType::Scalar, ValueType::Vector) => self.vector_scalar(
                op,
                &self.eval(rhs)?,
                &self.scalar_values(lhs)?,
                true,
                return_bool,
            ),
            _ => {
                let plain = Matching {
                    card: if op.is_set() {
                        Card::ManyToMany
                    } else {
                        Card::OneToOne
                    },
                    on: false,
                    labels: Vec::new(),
                    include: Vec::new(),
                };
                let m = matching.unwrap_or(&plain);
                self.vector_vector(op, &self.eval(lhs)?, &self.eval(rhs)?, m, return_bool)
            }
        }
    }

    /// A vector and a scalar (`swap`: the scalar on the left).
    fn vector_scalar(
        &self,
        op: BinOp,
        v: &Mat,
        s: &[f64],
        swap: bool,
        return_bool: bool,
    ) -> Result<Mat, EvalError> {
        let mut b = Builder::new();
        for series in v {
            let labels = if drops_name(op) || return_bool {
                series.labels.without_name()
            } else {
                series.labels.clone()
            };
            for p in &series.points {
                let sv = s[((p.t - self.start) / self.step) as usize];
                let (l, r) = if swap { (sv, p.v) } else { (p.v, sv) };
                let (mut value, keep) = elem(op, l, r);
                if op.is_comparison() && swap {
                    value = p.v;
                }
                if return_bool {
                    b.push(labels.clone(), p.t, f64::from(u8::from(keep)))?;
                } else if keep {
                    b.push(labels.clone(), p.t, value)?;
                }
            }
        }
        Ok(b.finish())
    }

    fn vector_vector(
        &self,
        op: BinOp,
        lhs: &Mat,
        rhs: &Mat,
        m: &Matching,
        return_bool: bool,
    ) -> Result<Mat, EvalError> {
        let lsig: Vec<Labels> = lhs.iter().map(|s| signature(&s.labels, m)).collect();
        let rsig: Vec<Labels> = rhs.iter().map(|s| signature(&s.labels, m)).collect();
        let (mut lc, mut rc) = (Cursor::new(lhs), Cursor::new(rhs));
        let (mut la, mut ra) = (Vec::new(), Vec::new());
        let mut b = Builder::new();
        for t in self.steps() {
            lc.at(t, &mut la);
            rc.at(t, &mut ra);
            match op {
                BinOp::And | BinOp::Unless => {
                    if op == BinOp::And && (la.is_empty() || ra.is_empty()) {
                        continue;
                    }
                    let right: HashSet<&Labels> = ra.iter().map(|&(k, _)| &rsig[k]).collect();
                    for &(k, v) in &la {
                        if right.contains(&lsig[k]) == (op == BinOp::And) {
                            b.push(lhs[k].labels.clone(), t, v)?;
                        }
                    }
                }
                BinOp::Or => {
                    let left: HashSet<&Labels> = la.iter().map(|&(k, _)| &lsig[k]).collect();
                    for &(k, v) in &la {
                        b.push(lhs[k].labels.clone(), t, v)?;
                    }
                    for &(k, v) in &ra {
                        if !left.contains(&rsig[k]) {
                            b.push(rhs[k].labels.clone(), t, v)?;
                        }
                    }
                }
                _ => self.match_step(
                    op,
                    t,
                    (lhs, &lsig, &la),
                    (rhs, &rsig, &ra),
                    m,
                    return_bool,
                    &mut b,
                )?,
            }
        }
        Ok(b.finish())
    }

    /// One step of arithmetic or comparison between two vectors.
    #[allow(clippy::too_many_arguments)]
    fn match_step(
        &self,
        op: BinOp,
        t: i64,
        left: (&Mat, &[Labels], &[(usize, f64)]),
        right: (&Mat, &[Labels], &[(usize, f64)]),
        m: &Matching,
        return_bool: bool,
        b: &mut Builder,
    ) -> Result<(), EvalError> {
        if left.2.is_empty() || right.2.is_empty() {
            return Ok(());
        }
        let swapped = m.card == Card::OneToMany;
        let (many, one) = if swapped {
            (right, left)
        } else {
            (left, right)
        };
        let mut ones: HashMap<&Labels, (usize, f64)> = HashMap::with_capacity(one.2.len());
        for &(k, v) in one.2 {
            if let Some(&(d, _)) = ones.get(&one.1[k]) {
                let side = if swapped { "left" } else { "right" };
                let matched = if m.on {
                    one.0[k].labels.keep(&m.labels)
                } else {
                    one.0[k].labels.drop(&m.labels).without_name()
                };
                return Err(EvalError::Invalid(format!(
                    "found duplicate series for the match group {matched} on the {side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                    one.0[k].labels, one.0[d].labels
                )));
            }
            ones.insert(&one.1[k], (k, v));
        }
        let mut matched: HashMap<&Labels, HashSet<Labels>> = HashMap::new();
        for &(k, v) in many.2 {
            let sig = &many.1[k];
            let Some(&(ok, ov)) = ones.get(sig) else {
                continue;
            };
            let (l, r) = if swapped { (ov, v) } else { (v, ov) };
            let (value, keep) = elem(op, l, r);
            let value = if return_bool {
                f64::from(u8::from(keep))
            } else if !keep {
                continue;
            } else {
                value
            };
            let labels = result_labels(&many.0[k].labels, &one.0[ok].labels, op, m, return_bool);
            match matched.get_mut(sig) {
                Some(_) if m.card == Card::OneToOne => {
                    return Err(EvalError::Invalid(
                        "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".into(),
                    ))
                }
                Some(seen) => {
                    if !seen.insert(labels.clone()) {
                        return Err(EvalError::Invalid(
                            "multiple matches for labels: grouping labels must ensure unique matches"
                                .into(),
                        ));
                    }
                }
                None => {
                    matched.insert(sig, HashSet::from([labels.clone()]));
                }
            }
            b.push(labels, t, value)?;
        }
        Ok(())
    }
}
