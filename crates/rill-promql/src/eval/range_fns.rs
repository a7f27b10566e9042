//! Functions of a range vector, each over one series' samples in one
//! window, as Prometheus computes them (its Kahan sums included, so
//! answers agree to the last bit where Prometheus's tests look).

use crate::value::Point;

/// One window of one series, and what else the function is given.
pub(crate) struct Window<'a> {
    pub points: &'a [Point],
    /// The step's time, ms.
    pub t: i64,
    /// (from, to], ms.
    pub bounds: (i64, i64),
    /// The range, ms.
    pub range: i64,
    /// The scalar arguments at this step, in order.
    pub scalars: &'a [f64],
}

/// `name` over one window; `None` when it gives no point there.
pub(crate) fn apply(name: &str, w: &Window) -> Option<f64> {
    let p = w.points;
    if p.is_empty() {
        return None;
    }
    Some(match name {
        "rate" => extrapolated(w, true, true)?,
        "increase" => extrapolated(w, true, false)?,
        "delta" => extrapolated(w, false, false)?,
        "irate" => instant_value(p, true)?,
        "idelta" => instant_value(p, false)?,
        "avg_over_time" => avg(p),
        "sum_over_time" => {
            let (s, c) = p.iter().fold((0.0, 0.0), |(s, c), x| kahan_inc(x.v, s, c));
            if s.is_infinite() {
                s
            } else {
                s + c
            }
        }
        "count_over_time" => p.len() as f64,
        "min_over_time" => extreme(p, |cur, best| cur < best).1,
        "max_over_time" => extreme(p, |cur, best| cur > best).1,
        "ts_of_min_over_time" => extreme(p, |cur, best| cur <= best).0 as f64 / 1000.0,
        "ts_of_max_over_time" => extreme(p, |cur, best| cur >= best).0 as f64 / 1000.0,
        "last_over_time" => p[p.len() - 1].v,
        "ts_of_last_over_time" => p[p.len() - 1].t as f64 / 1000.0,
        "present_over_time" => 1.0,
        "quantile_over_time" => {
            let mut v: Vec<f64> = p.iter().map(|x| x.v).collect();
            quantile(w.scalars[0], &mut v)
        }
        "stddev_over_time" => variance(p).sqrt(),
        "stdvar_over_time" => variance(p),
        "mad_over_time" => {
            let mut v: Vec<f64> = p.iter().map(|x| x.v).collect();
            let median = quantile(0.5, &mut v);
            let mut dev: Vec<f64> = p.iter().map(|x| (x.v - median).abs()).collect();
            quantile(0.5, &mut dev)
        }
        "changes" => p
            .windows(2)
            .filter(|x| x[1].v != x[0].v && !(x[1].v.is_nan() && x[0].v.is_nan()))
            .count() as f64,
        "resets" => p.windows(2).filter(|x| x[1].v < x[0].v).count() as f64,
        "deriv" => {
            if p.len() < 2 {
                return None;
            }
            linear_regression(p, p[0].t).0
        }
        "predict_linear" => {
            if p.len() < 2 {
                return None;
            }
            let (slope, intercept) = linear_regression(p, w.t);
            slope * w.scalars[0] + intercept
        }
        "double_exponential_smoothing" => smoothing(p, w.scalars[0], w.scalars[1])?,
        _ => return None,
    })
}

/// Prometheus's `kahanSumInc`: adds `inc` to `sum` with compensation
/// `c`.
pub(crate) fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// `rate`, `increase` and `delta`: the change over the window,
/// extrapolated towards its edges where the samples stop short of them
/// (by at most half an average interval, and for counters not below
/// zero), counter resets undone for counters.
fn extrapolated(w: &Window, counter: bool, per_second: bool) -> Option<f64> {
    let p = w.points;
    if p.len() < 2 {
        return None;
    }
    let (first, last) = (p[0], p[p.len() - 1]);
    let mut result = last.v - first.v;
    if counter {
        let mut prev = first.v;
        for x in &p[1..] {
            if x.v < prev {
                result += prev;
            }
            prev = x.v;
        }
    }
    let mut to_start = (first.t - w.bounds.0) as f64 / 1000.0;
    let mut to_end = (w.bounds.1 - last.t) as f64 / 1000.0;
    let sampled = (last.t - first.t) as f64 / 1000.0;
    let average = sampled / (p.len() - 1) as f64;
    let threshold = average * 1.1;
    if to_start >= threshold {
        to_start = average / 2.0;
    }
    if counter && result > 0.0 && first.v >= 0.0 {
        let to_zero = sampled * (first.v / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = average / 2.0;
    }
    let mut factor = (sampled + to_start + to_end) / sampled;
    if per_second {
        factor /= w.range as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `irate` and `idelta`: from the last two samples.
fn instant_value(p: &[Point], per_second: bool) -> Option<f64> {
    if p.len() < 2 {
        return None;
    }
    let (a, b) = (p[p.len() - 2], p[p.len() - 1]);
    let interval = b.t - a.t;
    if interval == 0 {
        return None;
    }
    let mut v = b.v - a.v;
    if per_second && b.v < a.v {
        // A counter reset: the last value is the increase.
        v = b.v;
    }
    if per_second {
        v /= interval as f64 / 1000.0;
    }
    Some(v)
}

/// The time and value that `better` prefers (NaN loses to any number).
fn extreme(p: &[Point], better: impl Fn(f64, f64) -> bool) -> (i64, f64) {
    let mut best = p[0];
    for x in p {
        if better(x.v, best.v) || best.v.is_nan() {
            best = *x;
        }
    }
    (best.t, best.v)
}

/// Prometheus's mean: Kahan sum, switching to an incremental mean when
/// the sum would overflow.
fn avg(p: &[Point]) -> f64 {
    let (mut sum, mut c) = (p[0].v, 0.0);
    let mut mean = 0.0;
    let mut incremental = false;
    for (i, x) in p[1..].iter().enumerate() {
        let count = (i + 2) as f64;
        if !incremental {
            let (s, nc) = kahan_inc(x.v, sum, c);
            if !s.is_infinite() {
                sum = s;
                c = nc;
                continue;
            }
            incremental = true;
            mean = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        let (m, nc) = kahan_inc(x.v / count, q * mean, q * c);
        mean = m;
        c = nc;
    }
    if incremental {
        mean + c
    } else {
        let n = p.len() as f64;
        sum / n + c / n
    }
}

/// Population variance (Welford's method with Kahan sums).
fn variance(p: &[Point]) -> f64 {
    let (mut count, mut mean, mut c_mean, mut aux, mut c_aux) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for x in p {
        count += 1.0;
        let delta = x.v - (mean + c_mean);
        (mean, c_mean) = kahan_inc(delta / count, mean, c_mean);
        (aux, c_aux) = kahan_inc(delta * (x.v - (mean + c_mean)), aux, c_aux);
    }
    (aux + c_aux) / count
}

/// The φ-quantile of `values` (sorted here), NaNs first, interpolated
/// between the closest ranks; below 0 is -Inf, above 1 +Inf.
pub(crate) fn quantile(q: f64, values: &mut [f64]) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    values.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.partial_cmp(b).expect("no NaN"),
    });
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}

/// Least squares over the samples, times in seconds from
/// `intercept_time`: (slope, intercept).
fn linear_regression(p: &[Point], intercept_time: i64) -> (f64, f64) {
    let init = p[0].v;
    let constant = p.iter().all(|x| x.v == init);
    if constant {
        if init.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init);
    }
    let n = p.len() as f64;
    let (mut sx, mut cx, mut sy, mut cy) = (0.0, 0.0, 0.0, 0.0);
    let (mut sxy, mut cxy, mut sx2, mut cx2) = (0.0, 0.0, 0.0, 0.0);
    for s in p {
        let x = (s.t - intercept_time) as f64 / 1e3;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(s.v, sy, cy);
        (sxy, cxy) = kahan_inc(x * s.v, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    let (sx, sy, sxy, sx2) = (sx + cx, sy + cy, sxy + cxy, sx2 + cx2);
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    (slope, sy / n - slope * sx / n)
}

/// Prometheus's refusal of `double_exponential_smoothing`'s factors
/// outside (0, 1), made where it makes it: at a window with samples (a
/// NaN factor passes, and gives NaN).
pub(crate) fn check_smoothing(sf: f64, tf: f64) -> Result<(), String> {
    // Go's %f: six decimals, +Inf and -Inf as such.
    let go_f = |v: f64| match v {
        f64::INFINITY => "+Inf".to_string(),
        f64::NEG_INFINITY => "-Inf".to_string(),
        v => format!("{v:.6}"),
    };
    if sf <= 0.0 || sf >= 1.0 {
        return Err(format!(
            "invalid smoothing factor. Expected: 0 < sf < 1, got: {}",
            go_f(sf)
        ));
    }
    if tf <= 0.0 || tf >= 1.0 {
        return Err(format!(
            "invalid trend factor. Expected: 0 < tf < 1, got: {}",
            go_f(tf)
        ));
    }
    Ok(())
}

/// `double_exponential_smoothing` (Holt's linear method); `None` with
/// fewer than two samples.
fn smoothing(p: &[Point], sf: f64, tf: f64) -> Option<f64> {
    if p.len() < 2 {
        return None;
    }
    let mut s0 = 0.0;
    let mut s1 = p[0].v;
    let mut b = p[1].v - p[0].v;
    for (i, x) in p.iter().enumerate().skip(1) {
        let scaled = sf * x.v;
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        s0 = s1;
        s1 = scaled + y;
    }
    Some(s1)
}
