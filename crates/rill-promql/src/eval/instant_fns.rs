//! Functions of instant vectors and scalars, one step at a time.

use crate::value::{almost_equal, Labels, METRIC_NAME};

/// One step's argument.
pub(crate) enum Arg<'a> {
    Vector(Vec<(&'a Labels, f64)>),
    Scalar(f64),
    String(&'a str),
}

impl Arg<'_> {
    fn scalar(&self) -> f64 {
        match self {
            Arg::Scalar(v) => *v,
            _ => f64::NAN,
        }
    }
}

/// A sample of the result.
pub(crate) type Out = Vec<(Labels, f64)>;

/// `name` at step `t` (ms); `absent_labels` are what `absent` answers
/// with.
pub(crate) fn apply(name: &str, args: &[Arg], t: i64, absent_labels: &Labels) -> Out {
    let vector = |i: usize| match args.get(i) {
        Some(Arg::Vector(v)) => v.as_slice(),
        _ => &[],
    };
    let map = |f: &dyn Fn(f64) -> f64| -> Out {
        vector(0)
            .iter()
            .map(|(l, v)| (l.without_name(), f(*v)))
            .collect()
    };
    match name {
        "abs" => map(&f64::abs),
        "ceil" => map(&f64::ceil),
        "floor" => map(&f64::floor),
        "exp" => map(&f64::exp),
        "sqrt" => map(&f64::sqrt),
        "ln" => map(&f64::ln),
        "log2" => map(&f64::log2),
        "log10" => map(&f64::log10),
        "sin" => map(&f64::sin),
        "cos" => map(&f64::cos),
        "tan" => map(&f64::tan),
        "asin" => map(&f64::asin),
        "acos" => map(&f64::acos),
        "atan" => map(&f64::atan),
        "sinh" => map(&f64::sinh),
        "cosh" => map(&f64::cosh),
        "tanh" => map(&f64::tanh),
        "asinh" => map(&f64::asinh),
        "acosh" => map(&f64::acosh),
        "atanh" => map(&f64::atanh),
        "rad" => map(&|v| v * std::f64::consts::PI / 180.0),
        "deg" => map(&|v| v * 180.0 / std::f64::consts::PI),
        "sgn" => map(&|v| {
            if v < 0.0 {
                -1.0
            } else if v > 0.0 {
                1.0
            } else {
                v
            }
        }),
        "clamp" | "clamp_min" | "clamp_max" => {
            let (lo, hi) = match name {
                "clamp" => (args[1].scalar(), args[2].scalar()),
                "clamp_min" => (args[1].scalar(), f64::INFINITY),
                _ => (f64::NEG_INFINITY, args[1].scalar()),
            };
            if hi < lo {
                return Vec::new();
            }
            map(&|v| go_max(lo, go_min(hi, v)))
        }
        "round" => {
            let to = args.get(1).map_or(1.0, Arg::scalar);
            let inv = 1.0 / to;
            map(&|v| (v * inv + 0.5).floor() / inv)
        }
        "timestamp" => map(&|_| t as f64 / 1000.0),
        "vector" => vec![(Labels::empty(), args[0].scalar())],
        "scalar" => {
            let v = vector(0);
            let x = if v.len() == 1 { v[0].1 } else { f64::NAN };
            vec![(Labels::empty(), x)]
        }
        "time" => vec![(Labels::empty(), t as f64 / 1000.0)],
        "pi" => vec![(Labels::empty(), std::f64::consts::PI)],
        "absent" => {
            if vector(0).is_empty() {
                vec![(absent_labels.clone(), 1.0)]
            } else {
                Vec::new()
            }
        }
        "sort" | "sort_desc" => {
            let mut out: Out = vector(0).iter().map(|(l, v)| ((*l).clone(), *v)).collect();
            // NaNs last either way, as Prometheus's heaps order them.
            out.sort_by(|a, b| order_values(a.1, b.1, name == "sort_desc"));
            out
        }
        "sort_by_label" | "sort_by_label_desc" => {
            let labels: Vec<&str> = args[1..]
                .iter()
                .filter_map(|a| match a {
                    Arg::String(s) => Some(*s),
                    _ => None,
                })
                .collect();
            let mut out: Out = vector(0).iter().map(|(l, v)| ((*l).clone(), *v)).collect();
            let desc = name == "sort_by_label_desc";
            out.sort_by(|a, b| {
                for l in &labels {
                    let o = natural_cmp(a.0.value(l), b.0.value(l));
                    if o != std::cmp::Ordering::Equal {
                        return if desc { o.reverse() } else { o };
                    }
                }
                let o = a.0.cmp(&b.0);
                if desc {
                    o.reverse()
                } else {
                    o
                }
            });
            out
        }
        "days_in_month" | "day_of_month" | "day_of_week" | "day_of_year" | "hour" | "minute"
        | "month" | "year" => {
            let f = |secs: f64| date_part(name, secs);
            if args.is_empty() {
                vec![(Labels::empty(), f(t.div_euclid(1000) as f64))]
            } else {
                map(&f)
            }
        }
        "histogram_quantile" => buckets(vector(1), |b| bucket_quantile(args[0].scalar(), b)),
        "histogram_fraction" => buckets(vector(2), |b| {
            bucket_fraction(args[0].scalar(), args[1].scalar(), b)
        }),
        _ => Vec::new(),
    }
}

/// Go's `math.Max`: NaN if either is.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Go's `math.Min`: NaN if either is.
fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Ascending (or descending) by value, NaNs last.
fn order_values(a: f64, b: f64, desc: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Equal,
        (true, false) => Greater,
        (false, true) => Less,
        _ => {
            let o = a.partial_cmp(&b).expect("no NaN");
            if desc {
                o.reverse()
            } else {
                o
            }
        }
    }
}

/// Natural order: runs of digits compare as numbers.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let i = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let j = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (nx, ny) = (trim_zeros(&x[..i]), trim_zeros(&y[..j]));
                let o = nx.len().cmp(&ny.len()).then_with(|| nx.cmp(ny));
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
                x = &x[i..];
                y = &y[j..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let k = d.iter().take_while(|&&c| c == b'0').count();
    &d[k.min(d.len().saturating_sub(1))..]
}

/// A date function of `secs` since the epoch, in UTC.
fn date_part(name: &str, secs: f64) -> f64 {
    let s = secs as i64;
    let days = s.div_euclid(86_400);
    let in_day = s.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    match name {
        "hour" => (in_day / 3600) as f64,
        "minute" => (in_day % 3600 / 60) as f64,
        "day_of_month" => d as f64,
        // 1970-01-01 was a Thursday (4).
        "day_of_week" => (days + 4).rem_euclid(7) as f64,
        "day_of_year" => (days - days_from_civil(y, 1, 1) + 1) as f64,
        "month" => m as f64,
        "year" => y as f64,
        _ => {
            let next = if m == 12 {
                days_from_civil(y + 1, 1, 1)
            } else {
                days_from_civil(y, m + 1, 1)
            };
            (next - days_from_civil(y, m, 1)) as f64
        }
    }
}

/// (year, month, day) of a day count since 1970-01-01 (Howard
/// Hinnant's civil calendar algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A classic histogram's bucket: upper bound (`le`) and cumulative
/// count.
type Bucket = (f64, f64);

/// Groups the samples by their labels but `le` into histograms and
/// computes `f` of each; samples whose `le` is not a number are left
/// out.
fn buckets(v: &[(&Labels, f64)], f: impl Fn(&mut Vec<Bucket>) -> f64) -> Out {
    let mut groups: Vec<(Labels, Vec<Bucket>)> = Vec::new();
    let mut index: std::collections::HashMap<Labels, usize> = std::collections::HashMap::new();
    for (l, x) in v {
        let Some(le) = l.get("le").and_then(parse_go_float) else {
            continue;
        };
        let key = l.drop(&["le".to_string()]);
        let i = *index.entry(key.clone()).or_insert_with(|| {
            groups.push((key.drop(&[METRIC_NAME.to_string()]), Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push((le, *x));
    }
    groups
        .into_iter()
        .map(|(l, mut b)| {
            let q = f(&mut b);
            (l, q)
        })
        .collect()
}

/// A float as Go's `strconv.ParseFloat` reads one (`+Inf`, `Inf`,
/// `NaN` in any case included).
pub(crate) fn parse_go_float(s: &str) -> Option<f64> {
    let t = s.trim_start_matches('+');
    match t.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => {
            return Some(if s.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    s.parse::<f64>().ok()
}

/// Sorts by bound, requires a `+Inf` bucket, merges equal bounds.
fn prepare(b: &mut Vec<Bucket>) -> bool {
    b.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal));
    if b.last().is_none_or(|x| x.0 != f64::INFINITY) {
        return false;
    }
    let mut merged: Vec<Bucket> = Vec::with_capacity(b.len());
    for x in b.iter() {
        match merged.last_mut() {
            Some(l) if l.0 == x.0 => l.1 += x.1,
            _ => merged.push(*x),
        }
    }
    *b = merged;
    true
}

/// `histogram_quantile` over classic buckets: the bucket where the rank
/// falls, linear within it; counts made monotonic first.
fn bucket_quantile(q: f64, b: &mut Vec<Bucket>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    if !prepare(b) {
        return f64::NAN;
    }
    let mut prev = b[0].1;
    for x in b.iter_mut().skip(1) {
        if x.1 == prev {
            continue;
        }
        if almost_equal(prev, x.1, 1e-12) || x.1 < prev {
            x.1 = prev;
            continue;
        }
        prev = x.1;
    }
    if b.len() < 2 {
        return f64::NAN;
    }
    let observations = b[b.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let k = b[..b.len() - 1].partition_point(|x| x.1 < rank);
    if k == b.len() - 1 {
        return b[b.len() - 2].0;
    }
    if k == 0 && b[0].0 <= 0.0 {
        return b[0].0;
    }
    let (mut start, end, mut count) = (0.0, b[k].0, b[k].1);
    if k > 0 {
        start = b[k - 1].0;
        count -= b[k - 1].1;
        rank -= b[k - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// `histogram_fraction` over classic buckets: the share of
/// observations between `lower` and `upper`, linear within buckets.
fn bucket_fraction(lower: f64, upper: f64, b: &mut Vec<Bucket>) -> f64 {
    if !prepare(b) {
        return f64::NAN;
    }
    let count = b[b.len() - 1].1;
    if count == 0.0 || lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }
    let (mut rank, mut lower_rank, mut upper_rank) = (0.0, 0.0, 0.0);
    let (mut lower_set, mut upper_set) = (false, false);
    for (i, x) in b.iter().enumerate() {
        let lb = if i > 0 { b[i - 1].0 } else { f64::NEG_INFINITY };
        let ub = x.0;
        let interp = |v: f64| rank + (x.1 - rank) * (v - lb) / (ub - lb);
        if !lower_set && lb >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && lb >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && lb < lower && ub > lower {
            lower_rank = interp(lower);
            lower_set = true;
        }
        if !upper_set && lb < upper && ub > upper {
            upper_rank = interp(upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank = x.1;
    }
    if !lower_set || lower_rank > count {
        lower_rank = count;
    }
    if !upper_set || upper_rank > count {
        upper_rank = count;
    }
    (upper_rank - lower_rank) / count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_utc() {
        // 2024-02-29 13:45:00 UTC
        let s = 1_709_214_300.0;
        assert_eq!(date_part("year", s), 2024.0);
        assert_eq!(date_part("month", s), 2.0);
        assert_eq!(date_part("day_of_month", s), 29.0);
        assert_eq!(date_part("days_in_month", s), 29.0);
        assert_eq!(date_part("day_of_year", s), 60.0);
        assert_eq!(date_part("day_of_week", s), 4.0);
        assert_eq!(date_part("hour", s), 13.0);
        assert_eq!(date_part("minute", s), 45.0);
    }

    #[test]
    fn natural_order_compares_numbers_by_value() {
        assert!(natural_cmp("a2", "a10").is_lt());
        assert!(natural_cmp("a10", "a10").is_eq());
        assert!(natural_cmp("b1", "a10").is_gt());
    }

    #[test]
    fn classic_histogram_quantile() {
        let mut b = vec![
            (0.1, 10.0),
            (0.5, 50.0),
            (1.0, 90.0),
            (f64::INFINITY, 100.0),
        ];
        assert!((bucket_quantile(0.5, &mut b) - 0.5).abs() < 1e-12);
        let mut b = vec![(1.0, 10.0)];
        assert!(bucket_quantile(0.5, &mut b).is_nan(), "no +Inf bucket");
    }
}
