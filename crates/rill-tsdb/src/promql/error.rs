//! Why a query is refused or fails: each text is the one the HTTP API
//! answers with (`"error"` of a 422), in VictoriaMetrics' words where it
//! has them.

use super::eval::MAX_POINTS;
use super::{MAX_NODES, MAX_QUERY_BYTES};
use crate::engine::EngineError;
use crate::select::SelectorError;

/// Why a query's text does not parse. Texts quoted from the query are
/// its first 30 characters from where parsing stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("the query is longer than {MAX_QUERY_BYTES} bytes")]
    TooLong { len_bytes: usize },
    #[error("unexpected {found:?} at offset {offset} of the query")]
    Unexpected { found: String, offset: usize },
    #[error("the query has more than {MAX_NODES} operators")]
    TooManyOperators,
    #[error("the query nests too deep")]
    TooDeep,
    #[error("expected ')' at {found:?}")]
    ExpectedClose { found: String },
    #[error("expected ')' after the argument of {function} at {found:?}")]
    ExpectedCloseAfter { function: String, found: String },
    #[error("cannot parse number {text:?}")]
    BadNumber { text: String },
    #[error("unknown function {name:?}: Rill evaluates min_over_time, max_over_time, avg_over_time, sum_over_time, count_over_time, last_over_time and rate")]
    UnknownFunction { name: String },
    #[error("expected a series selector at {found:?}")]
    ExpectedSelector { found: String },
    #[error("a '{{' without its '}}'")]
    UnclosedBrace,
    #[error("a '[' without its ']'")]
    UnclosedBracket,
    #[error("a window must be longer than zero")]
    EmptyWindow,
    #[error(transparent)]
    Selector(#[from] SelectorError),
    #[error(transparent)]
    Duration(#[from] DurationError),
}

/// Why a duration (`15s`, `1h30m`, or seconds) does not parse; `text`
/// is the duration as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("an empty duration")]
    Empty,
    #[error("duration {text:?} has no unit")]
    NoUnit { text: String },
    #[error("cannot parse duration {text:?}")]
    BadNumber { text: String },
    #[error("unknown unit {unit:?} in duration {text:?} (ms, s, m, h, d, w, y)")]
    UnknownUnit { unit: String, text: String },
    /// Not finite, or longer than a hundred years.
    #[error("duration {text:?} is out of range")]
    OutOfRange { text: String },
}

/// Why the times a query asks for are refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GridError {
    #[error("step must be positive, found {step_ms} ms")]
    StepNotPositive { step_ms: i64 },
    #[error("end is before start")]
    EndBeforeStart { start_ms: i64, end_ms: i64 },
    #[error("the query asks for more than {MAX_POINTS} points per series: raise step")]
    TooManyPoints { points: i64 },
}

/// Why a source could not give a query its samples.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// What the client may be told as it is: the query's read budget
    /// spent ([`EngineError::OverBudget`]: run it again without one), or
    /// a damaged block ([`EngineError::Damaged`]).
    #[error(transparent)]
    Read(EngineError),
    /// Any other failure of the store, which may name its files: the
    /// client is told to look in the node's log, where it is written.
    #[error("a sensor series could not be read (the node's log says why)")]
    Unreadable(#[source] EngineError),
}

/// Why a query's evaluation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// Two result series with the same labels (the name dropped by the
    /// rollup or operator), as VictoriaMetrics refuses them.
    #[error("duplicate output timeseries: {series}")]
    DuplicateOutput { series: String },
    /// Two series of an operator's right side with the same labels but
    /// the name: nothing says which one a left series pairs with.
    #[error("duplicate time series on the right side of the operator: {series}")]
    DuplicateOnRight { series: String },
    #[error(transparent)]
    Source(#[from] SourceError),
}
