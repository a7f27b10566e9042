//! PromQL as Prometheus 3.5 defines it, pure: [`parse`] turns a query
//! into an [`Expr`] with Prometheus's type checks, and [`eval::instant`]
//! and [`eval::range`] evaluate it over any [`eval::Source`] of float
//! series. Durations and times are in ms throughout.

pub mod ast;
mod error;
pub mod eval;
pub mod functions;
mod lex;
pub mod matcher;
mod parse;
mod print;
pub mod promqltest;
pub mod value;

pub use ast::{AggOp, At, BinOp, Card, Expr, Grouping, Matching, ValueType, VectorSelector};
pub use error::ParseError;
pub use lex::parse_duration;
pub use matcher::{MatchOp, Matcher};
pub use parse::{parse, parse_selector, MAX_DURATION_MS, MAX_QUERY_BYTES, MAX_TIME_MS};
pub use print::pretty;

/// A duration in ms as Prometheus prints one (`1h30m`, `500ms`, `0s`;
/// years and weeks only when they divide it: `90d`, not `12w6d`).
pub fn fmt_duration(ms: i64) -> String {
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let mut rest = ms;
    if rest < 0 {
        out.push('-');
        rest = -rest;
    }
    for (unit, size) in lex::UNITS {
        if matches!(unit, "y" | "w") && rest % size != 0 {
            continue;
        }
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}
