//! PromQL's functions as Prometheus 3.5 types them: the argument types,
//! how many more the last may repeat, and the result. Functions of
//! native histograms alone (`histogram_count`, `histogram_sum`, ...) are
//! not here: Rill stores floats.

use crate::ast::ValueType;

#[derive(Debug, PartialEq, Eq)]
pub struct Function {
    pub name: &'static str,
    pub args: &'static [ValueType],
    /// 0: exactly `args`; n > 0: up to n more than `args.len() - 1`
    /// (the last optional); -1: the last repeats without bound.
    pub variadic: i32,
    pub returns: ValueType,
}

const V: ValueType = ValueType::Vector;
const M: ValueType = ValueType::Matrix;
const S: ValueType = ValueType::Scalar;
const T: ValueType = ValueType::String;

const fn f(
    name: &'static str,
    args: &'static [ValueType],
    variadic: i32,
    returns: ValueType,
) -> Function {
    Function {
        name,
        args,
        variadic,
        returns,
    }
}

static FUNCTIONS: &[Function] = &[
    f("abs", &[V], 0, V),
    f("absent", &[V], 0, V),
    f("absent_over_time", &[M], 0, V),
    f("acos", &[V], 0, V),
    f("acosh", &[V], 0, V),
    f("asin", &[V], 0, V),
    f("asinh", &[V], 0, V),
    f("atan", &[V], 0, V),
    f("atanh", &[V], 0, V),
    f("avg_over_time", &[M], 0, V),
    f("ceil", &[V], 0, V),
    f("changes", &[M], 0, V),
    f("clamp", &[V, S, S], 0, V),
    f("clamp_max", &[V, S], 0, V),
    f("clamp_min", &[V, S], 0, V),
    f("cos", &[V], 0, V),
    f("cosh", &[V], 0, V),
    f("count_over_time", &[M], 0, V),
    f("day_of_month", &[V], 1, V),
    f("day_of_week", &[V], 1, V),
    f("day_of_year", &[V], 1, V),
    f("days_in_month", &[V], 1, V),
    f("deg", &[V], 0, V),
    f("delta", &[M], 0, V),
    f("deriv", &[M], 0, V),
    f("double_exponential_smoothing", &[M, S, S], 0, V),
    f("exp", &[V], 0, V),
    f("floor", &[V], 0, V),
    f("histogram_fraction", &[S, S, V], 0, V),
    f("histogram_quantile", &[S, V], 0, V),
    f("hour", &[V], 1, V),
    f("idelta", &[M], 0, V),
    f("increase", &[M], 0, V),
    f("irate", &[M], 0, V),
    f("label_join", &[V, T, T, T], -1, V),
    f("label_replace", &[V, T, T, T, T], 0, V),
    f("last_over_time", &[M], 0, V),
    f("ln", &[V], 0, V),
    f("log10", &[V], 0, V),
    f("log2", &[V], 0, V),
    f("mad_over_time", &[M], 0, V),
    f("max_over_time", &[M], 0, V),
    f("min_over_time", &[M], 0, V),
    f("minute", &[V], 1, V),
    f("month", &[V], 1, V),
    f("pi", &[], 0, S),
    f("predict_linear", &[M, S], 0, V),
    f("present_over_time", &[M], 0, V),
    f("quantile_over_time", &[S, M], 0, V),
    f("rad", &[V], 0, V),
    f("rate", &[M], 0, V),
    f("resets", &[M], 0, V),
    f("round", &[V, S], 1, V),
    f("scalar", &[V], 0, S),
    f("sgn", &[V], 0, V),
    f("sin", &[V], 0, V),
    f("sinh", &[V], 0, V),
    f("sort", &[V], 0, V),
    f("sort_by_label", &[V, T], -1, V),
    f("sort_by_label_desc", &[V, T], -1, V),
    f("sort_desc", &[V], 0, V),
    f("sqrt", &[V], 0, V),
    f("stddev_over_time", &[M], 0, V),
    f("stdvar_over_time", &[M], 0, V),
    f("sum_over_time", &[M], 0, V),
    f("tan", &[V], 0, V),
    f("tanh", &[V], 0, V),
    f("time", &[], 0, S),
    f("timestamp", &[V], 0, V),
    f("ts_of_last_over_time", &[M], 0, V),
    f("ts_of_max_over_time", &[M], 0, V),
    f("ts_of_min_over_time", &[M], 0, V),
    f("vector", &[S], 0, V),
    f("year", &[V], 1, V),
];

/// The function named `name` (names are case-sensitive).
pub fn lookup(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}
