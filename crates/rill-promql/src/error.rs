//! Why a query does not parse, in Prometheus's words where it has them;
//! `at` is the byte offset in the query where the problem is.

/// Why a query's text is refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("the query is longer than {max} bytes")]
    TooLong { len: usize, max: usize },
    #[error("parse error at char {at}: {what}")]
    Lex { at: usize, what: String },
    #[error("parse error at char {at}: unexpected {found}{}", expected_text(.expected))]
    Unexpected {
        at: usize,
        found: String,
        expected: String,
    },
    /// Well formed, but not a query Prometheus takes (a type error, an
    /// operator where it is not allowed, ...).
    #[error("parse error at char {at}: {what}")]
    Invalid { at: usize, what: String },
    #[error("the query nests deeper than {max} levels")]
    TooDeep { max: usize },
}

fn expected_text(e: &str) -> String {
    if e.is_empty() {
        String::new()
    } else {
        format!(", expected {e}")
    }
}
