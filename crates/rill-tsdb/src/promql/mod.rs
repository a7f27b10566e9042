//! The part of PromQL (as VictoriaMetrics' MetricsQL evaluates it) that
//! Grafana's Prometheus data source and sensor dashboards use, pure:
//! numbers and series selectors, `+ - * /`, and the rollups
//! `min_over_time`, `max_over_time`, `avg_over_time`, `sum_over_time`,
//! `count_over_time`, `last_over_time` and `rate`, each over `sel[d]` or
//! over `sel` (the window is then the step). [`eval`] computes a query on
//! a grid of times as VictoriaMetrics 1.79 does (docs/sensors.md,
//! "Queries").

mod error;
pub mod eval;

pub use error::{DurationError, EvalError, GridError, ParseError, SourceError};

use crate::select::{self, Matcher};

/// A rollup function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rollup {
    /// A bare selector: the last sample in the window.
    Default,
    Min,
    Max,
    Avg,
    Sum,
    Count,
    Last,
    Rate,
}

impl Rollup {
    fn named(name: &str) -> Option<Rollup> {
        Some(match name {
            "min_over_time" => Rollup::Min,
            "max_over_time" => Rollup::Max,
            "avg_over_time" => Rollup::Avg,
            "sum_over_time" => Rollup::Sum,
            "count_over_time" => Rollup::Count,
            "last_over_time" => Rollup::Last,
            "rate" => Rollup::Rate,
            _ => return None,
        })
    }

    /// Whether the result keeps the series' metric name (MetricsQL's
    /// rule: these do, the others drop it).
    pub fn keeps_name(self) -> bool {
        matches!(
            self,
            Rollup::Default | Rollup::Min | Rollup::Max | Rollup::Avg | Rollup::Last
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Debug)]
pub enum Expr {
    Number(f64),
    /// A rollup of the series `matchers` select over a window of `window`
    /// ms (`None`: the step).
    Rollup {
        func: Rollup,
        matchers: Vec<Matcher>,
        window: Option<i64>,
    },
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
}

/// The longest query text taken (VictoriaMetrics' `-search.maxQueryLen`).
pub const MAX_QUERY_BYTES: usize = 16 << 10;

/// Parses a query.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(ParseError::TooLong {
            len_bytes: text.len(),
        });
    }
    let mut p = Parser {
        s: text,
        at: 0,
        depth: 0,
        nodes: 0,
    };
    let e = p.expr()?;
    p.ws();
    if p.at < p.s.len() {
        return Err(ParseError::Unexpected {
            found: p.rest_short(),
            offset: p.at,
        });
    }
    Ok(e)
}

/// A duration as MetricsQL writes it: `500ms`, `15s`, `1.5m`, `1h30m`,
/// `2d`, `1w`, `1y`; or plain seconds. In ms.
pub fn duration_ms(s: &str) -> Result<i64, DurationError> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return finite_ms(secs * 1e3, s);
    }
    let mut total = 0f64;
    let mut rest = t;
    if rest.is_empty() {
        return Err(DurationError::Empty);
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| DurationError::NoUnit {
                text: s.to_string(),
            })?;
        let n: f64 = rest[..num_end]
            .parse()
            .map_err(|_| DurationError::BadNumber {
                text: s.to_string(),
            })?;
        let after = &rest[num_end..];
        let unit_end = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let unit_ms = match &after[..unit_end] {
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            "d" => 86_400e3,
            "w" => 7.0 * 86_400e3,
            "y" => 365.0 * 86_400e3,
            u => {
                return Err(DurationError::UnknownUnit {
                    unit: u.to_string(),
                    text: s.to_string(),
                })
            }
        };
        total += n * unit_ms;
        rest = &after[unit_end..];
    }
    finite_ms(total, s)
}

fn finite_ms(ms: f64, s: &str) -> Result<i64, DurationError> {
    if !ms.is_finite() || ms.abs() > 100.0 * 365.0 * 86_400e3 {
        return Err(DurationError::OutOfRange {
            text: s.to_string(),
        });
    }
    Ok(ms as i64)
}

struct Parser<'a> {
    s: &'a str,
    at: usize,
    /// Nesting now (parentheses, unary signs).
    depth: usize,
    /// Operators so far: a query's tree, and its evaluation's recursion,
    /// stay small whatever the text.
    nodes: usize,
}

/// Deepest nesting and most operators a query may have.
const MAX_DEPTH: usize = 64;
const MAX_NODES: usize = 256;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.at..]
    }

    fn rest_short(&self) -> String {
        self.rest().chars().take(30).collect()
    }

    fn ws(&mut self) {
        let r = self.rest();
        self.at += r.len() - r.trim_start().len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.ws();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn count(&mut self) -> Result<(), ParseError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(ParseError::TooManyOperators);
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        let mut left = self.term()?;
        loop {
            let op = if self.eat("+") {
                BinOp::Add
            } else if self.eat("-") {
                BinOp::Sub
            } else {
                break;
            };
            self.count()?;
            let right = self.term()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn term(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat("*") {
                BinOp::Mul
            } else if self.eat("/") {
                BinOp::Div
            } else {
                break;
            };
            self.count()?;
            let right = self.unary()?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let sign = if self.eat("-") {
            Some(true)
        } else if self.eat("+") {
            Some(false)
        } else {
            None
        };
        let Some(negative) = sign else {
            return self.primary();
        };
        self.count()?;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep);
        }
        let e = self.unary()?;
        self.depth -= 1;
        Ok(if negative { Expr::Neg(Box::new(e)) } else { e })
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        self.ws();
        if self.eat("(") {
            let e = self.expr()?;
            if !self.eat(")") {
                return Err(ParseError::ExpectedClose {
                    found: self.rest_short(),
                });
            }
            return Ok(e);
        }
        let r = self.rest();
        if r.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            let end = r
                .char_indices()
                .find(|&(i, c)| {
                    !(c.is_ascii_digit()
                        || c == '.'
                        || ((c == 'e' || c == 'E') && i > 0)
                        || ((c == '+' || c == '-')
                            && i > 0
                            && matches!(r.as_bytes()[i - 1], b'e' | b'E')))
                })
                .map_or(r.len(), |(i, _)| i);
            let n: f64 = r[..end].parse().map_err(|_| ParseError::BadNumber {
                text: r[..end].to_string(),
            })?;
            self.at += end;
            return Ok(Expr::Number(n));
        }
        let name_end = r.find(|c: char| !is_name_char(c)).unwrap_or(r.len());
        let name = &r[..name_end];
        let after = r[name_end..].trim_start();
        if !name.is_empty() && after.starts_with('(') {
            let func = Rollup::named(name).ok_or_else(|| ParseError::UnknownFunction {
                name: name.to_string(),
            })?;
            self.at += name_end;
            self.eat("(");
            let (matchers, window) = self.selector()?;
            if !self.eat(")") {
                return Err(ParseError::ExpectedCloseAfter {
                    function: name.to_string(),
                    found: self.rest_short(),
                });
            }
            return Ok(Expr::Rollup {
                func,
                matchers,
                window,
            });
        }
        if name.eq_ignore_ascii_case("nan") || name.eq_ignore_ascii_case("inf") {
            self.at += name_end;
            return Ok(Expr::Number(if name.eq_ignore_ascii_case("nan") {
                f64::NAN
            } else {
                f64::INFINITY
            }));
        }
        let (matchers, window) = self.selector()?;
        Ok(Expr::Rollup {
            func: Rollup::Default,
            matchers,
            window,
        })
    }

    /// `name`, `name{...}` or `{...}`, then an optional `[d]`.
    fn selector(&mut self) -> Result<(Vec<Matcher>, Option<i64>), ParseError> {
        self.ws();
        let r = self.rest();
        let mut end = r.find(|c: char| !is_name_char(c)).unwrap_or(r.len());
        let braces = r[end..].trim_start();
        if braces.starts_with('{') {
            let open = r.len() - braces.len();
            end = open + closing_brace(&r[open..]).ok_or(ParseError::UnclosedBrace)? + 1;
        }
        if end == 0 {
            return Err(ParseError::ExpectedSelector {
                found: self.rest_short(),
            });
        }
        let matchers = select::parse(&r[..end])?;
        self.at += end;
        let window = if self.eat("[") {
            let close = self.rest().find(']').ok_or(ParseError::UnclosedBracket)?;
            let d = duration_ms(&self.rest()[..close])?;
            if d <= 0 {
                return Err(ParseError::EmptyWindow);
            }
            self.at += close + 1;
            Some(d)
        } else {
            None
        };
        Ok((matchers, window))
    }
}

/// The offset of the `}` closing the `{` at the start of `s` (quoted
/// strings skipped).
fn closing_brace(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '}' => return Some(i),
                _ => {}
            },
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse() {
        assert!(matches!(
            parse("1+1").unwrap(),
            Expr::Binary(BinOp::Add, _, _)
        ));
        match parse(" rate( http_total{code=\"2}0\"} [5m] ) ").unwrap() {
            Expr::Rollup {
                func,
                matchers,
                window,
            } => {
                assert_eq!(func, Rollup::Rate);
                assert_eq!(matchers.len(), 2);
                assert_eq!(window, Some(300_000));
            }
            e => panic!("{e:?}"),
        }
        match parse("temp").unwrap() {
            Expr::Rollup { func, window, .. } => {
                assert_eq!((func, window), (Rollup::Default, None))
            }
            e => panic!("{e:?}"),
        }
        assert!(matches!(
            parse("-2 * avg_over_time({__name__=\"x\"}[1h30m]) / 3").unwrap(),
            Expr::Binary(BinOp::Div, _, _)
        ));
        assert!(matches!(
            parse("1e3 - 2.5E-1").unwrap(),
            Expr::Binary(BinOp::Sub, _, _)
        ));
    }

    #[test]
    fn bad_queries_say_why() {
        for (q, why) in [
            ("", "expected a series selector"),
            ("1 +", "expected a series selector"),
            ("(1", "expected ')'"),
            ("histogram_quantile(0.9, x)", "unknown function"),
            ("rate(x[5q])", "unknown unit"),
            ("rate(x[0s])", "longer than zero"),
            ("x{a=\"1\"", "without its '}'"),
            ("1 2", "unexpected"),
            ("{}", "empty string"),
        ] {
            let e = parse(q).unwrap_err().to_string();
            assert!(e.contains(why), "{q}: {e}");
        }
        let why = |q: &str| parse(q).unwrap_err().to_string();
        assert!(why(&"(".repeat(100)).contains("too deep"));
        let signs = format!("{}1", "-".repeat(16_000));
        assert!(why(&signs).contains("too deep"));
        let long = vec!["1"; 8000].join("+");
        assert!(why(&long).contains("operators"));
    }

    #[test]
    fn durations_read_as_metricsql_reads_them() {
        assert_eq!(duration_ms("15s"), Ok(15_000));
        assert_eq!(duration_ms("1.5m"), Ok(90_000));
        assert_eq!(duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(duration_ms("500ms"), Ok(500));
        assert_eq!(duration_ms("60"), Ok(60_000));
        assert_eq!(duration_ms("0.5"), Ok(500));
        assert!(duration_ms("5x").is_err());
        assert!(duration_ms("1000y").is_err());
    }
}
