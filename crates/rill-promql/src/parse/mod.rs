//! The parser: Prometheus's grammar by precedence climbing, and the type
//! checks Prometheus's parser makes, with its messages.
//!
//! Binding, loosest first: `or`; `and`, `unless`; comparisons; `+`, `-`;
//! `*`, `/`, `%`, `atan2`; `^` (to the right). A sign binds like `*`
//! except over `^` (`-2 ^ 2` is -4). `[...]`, `offset` and `@` bind to
//! the expression just before them.

use crate::ast::{AggOp, At, BinOp, Card, Expr, Matching, ValueType, VectorSelector};
use crate::error::ParseError;
use crate::lex::{lex, Tok, Token};
use crate::matcher::Matcher;

mod terms;

/// The longest query text taken (VictoriaMetrics' `-search.maxQueryLen`).
pub const MAX_QUERY_BYTES: usize = 16 << 10;

/// The longest duration a query may give (a range, a step, an offset):
/// Go's `time.Duration`, about 292 years, as in Prometheus.
pub const MAX_DURATION_MS: i64 = i64::MAX / 1_000_000;

/// The farthest time from 1970 `@` may name, ms (a quarter of i64's
/// range, so that offsets, ranges and steps added to it stay in range).
pub const MAX_TIME_MS: i64 = i64::MAX / 4;

/// Deepest nesting a query may have (its evaluation recurses as deep).
const MAX_DEPTH: usize = 128;

/// Parses and type-checks a query.
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(ParseError::TooLong {
            len: text.len(),
            max: MAX_QUERY_BYTES,
        });
    }
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
        depth: 0,
    };
    if p.peek() == &Tok::Eof {
        return Err(ParseError::Invalid {
            at: 0,
            what: "no expression found in input".into(),
        });
    }
    let e = p.expr(0)?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("end of input"));
    }
    Ok(e)
}

/// A series selector alone (`match[]` of the series, label and export
/// APIs), as Prometheus's `ParseMetricSelector` takes one: a metric name
/// and matchers in braces, no offset or `@`; its matchers, the name's
/// included.
pub fn parse_selector(text: &str) -> Result<Vec<Matcher>, ParseError> {
    match parse(text)? {
        Expr::Vector(VectorSelector {
            matchers,
            offset: 0,
            at: None,
            ..
        }) => Ok(matchers),
        _ => Err(ParseError::Invalid {
            at: 0,
            what: "expected a series selector, such as metric{label=\"value\"}".into(),
        }),
    }
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Words that are keywords wherever an expression may start, so never a
/// metric name there (the aggregation operators are, unless a `(` or a
/// grouping follows).
fn reserved_word(lower: &str) -> bool {
    matches!(
        lower,
        "bool" | "on" | "ignoring" | "group_left" | "group_right" | "atan2"
    )
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    fn at(&self) -> usize {
        self.toks[self.pos].at
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    /// The next token is the keyword `word` (any case).
    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Tok::Ident(w) if w.eq_ignore_ascii_case(word))
    }

    fn unexpected(&self, expected: &str) -> ParseError {
        ParseError::Unexpected {
            at: self.at(),
            found: self.peek().describe(),
            expected: expected.to_string(),
        }
    }

    fn invalid(&self, at: usize, what: impl Into<String>) -> ParseError {
        ParseError::Invalid {
            at,
            what: what.into(),
        }
    }

    fn expect(&mut self, t: Tok, expected: &str) -> Result<(), ParseError> {
        if *self.peek() == t {
            self.next();
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn deeper(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::TooDeep { max: MAX_DEPTH });
        }
        Ok(())
    }

    /// An expression whose binary operators bind at least `min`.
    fn expr(&mut self, min: u8) -> Result<Expr, ParseError> {
        self.deeper()?;
        let mut lhs = self.unary()?;
        // Each operator of a chain (`a + b + c`) puts the tree, and its
        // evaluation's recursion, one level deeper.
        let mut chain = 0;
        while let Some(op) = self.binop() {
            let prec = op.precedence();
            if prec < min {
                break;
            }
            chain += 1;
            if self.depth + chain > MAX_DEPTH {
                return Err(ParseError::TooDeep { max: MAX_DEPTH });
            }
            let at = self.at();
            self.next();
            let (return_bool, matching) = self.bin_modifiers(op)?;
            let rhs = self.expr(if op == BinOp::Pow { prec } else { prec + 1 })?;
            lhs = self.binary(at, op, lhs, rhs, return_bool, matching)?;
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn binop(&self) -> Option<BinOp> {
        Some(match self.peek() {
            Tok::Add => BinOp::Add,
            Tok::Sub => BinOp::Sub,
            Tok::Mul => BinOp::Mul,
            Tok::Div => BinOp::Div,
            Tok::Mod => BinOp::Mod,
            Tok::Pow => BinOp::Pow,
            Tok::Eql => BinOp::Eql,
            Tok::Neq => BinOp::Neq,
            Tok::Lss => BinOp::Lss,
            Tok::Lte => BinOp::Lte,
            Tok::Gtr => BinOp::Gtr,
            Tok::Gte => BinOp::Gte,
            Tok::Ident(w) => match w.to_ascii_lowercase().as_str() {
                "and" => BinOp::And,
                "or" => BinOp::Or,
                "unless" => BinOp::Unless,
                "atan2" => BinOp::Atan2,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// `bool`, `on`/`ignoring (...)` and `group_left`/`group_right
    /// (...)` after a binary operator.
    fn bin_modifiers(&mut self, op: BinOp) -> Result<(bool, Option<Matching>), ParseError> {
        let mut return_bool = false;
        if self.is_word("bool") {
            if !op.is_comparison() {
                return Err(self.invalid(
                    self.at(),
                    "bool modifier can only be used on comparison operators",
                ));
            }
            self.next();
            return_bool = true;
        }
        let on = if self.is_word("on") {
            true
        } else if self.is_word("ignoring") {
            false
        } else {
            let card = if op.is_set() {
                Card::ManyToMany
            } else {
                Card::OneToOne
            };
            let plain = Matching {
                card,
                on: false,
                labels: Vec::new(),
                include: Vec::new(),
            };
            return Ok((return_bool, Some(plain)));
        };
        self.next();
        let labels = self.label_list()?;
        let mut card = if op.is_set() {
            Card::ManyToMany
        } else {
            Card::OneToOne
        };
        let mut include = Vec::new();
        for (word, c) in [
            ("group_left", Card::ManyToOne),
            ("group_right", Card::OneToMany),
        ] {
            if self.is_word(word) {
                if op.is_set() {
                    return Err(self.invalid(
                        self.at(),
                        format!("no grouping allowed for \"{}\" operation", op.symbol()),
                    ));
                }
                self.next();
                card = c;
                if *self.peek() == Tok::LParen {
                    include = self.label_list()?;
                }
                break;
            }
        }
        for l in &include {
            if on && labels.contains(l) {
                return Err(self.invalid(
                    self.at(),
                    format!("label \"{l}\" must not occur in ON and GROUP clause at once"),
                ));
            }
        }
        Ok((
            return_bool,
            Some(Matching {
                card,
                on,
                labels,
                include,
            }),
        ))
    }

    /// `( name, ... )`, a trailing comma allowed.
    fn label_list(&mut self) -> Result<Vec<String>, ParseError> {
        self.expect(Tok::LParen, "\"(\"")?;
        let mut out = Vec::new();
        loop {
            match self.next() {
                Tok::RParen => return Ok(out),
                Tok::Ident(w) => out.push(w),
                Tok::Str(s) => out.push(s),
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected("label name or \")\""));
                }
            }
            match self.next() {
                Tok::Comma => {}
                Tok::RParen => return Ok(out),
                _ => {
                    self.pos -= 1;
                    return Err(self.unexpected("\",\" or \")\""));
                }
            }
        }
    }

    fn binary(
        &self,
        at: usize,
        op: BinOp,
        lhs: Expr,
        rhs: Expr,
        return_bool: bool,
        matching: Option<Matching>,
    ) -> Result<Expr, ParseError> {
        let (lt, rt) = (lhs.value_type(), rhs.value_type());
        let ok = |t| matches!(t, ValueType::Scalar | ValueType::Vector);
        if !ok(lt) || !ok(rt) {
            return Err(self.invalid(
                at,
                "binary expression must contain only scalar and instant vector types",
            ));
        }
        let both_vectors = lt == ValueType::Vector && rt == ValueType::Vector;
        if op.is_comparison() && !return_bool && lt == ValueType::Scalar && rt == ValueType::Scalar
        {
            return Err(self.invalid(at, "comparisons between scalars must use BOOL modifier"));
        }
        if op.is_set() && !both_vectors {
            return Err(self.invalid(
                at,
                format!(
                    "set operator \"{}\" not allowed in binary scalar expression",
                    op.symbol()
                ),
            ));
        }
        // As Prometheus: matching labels need two vectors; a modifier
        // without labels against a scalar is dropped.
        let explicit = matching.as_ref().is_some_and(|m| !m.labels.is_empty());
        if explicit && !both_vectors {
            return Err(self.invalid(at, "vector matching only allowed between instant vectors"));
        }
        Ok(Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
            return_bool,
            matching: if both_vectors { matching } else { None },
        })
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let neg = match self.peek() {
            Tok::Sub => true,
            Tok::Add => false,
            _ => return self.postfix(),
        };
        let at = self.at();
        self.next();
        let e = self.expr(BinOp::Pow.precedence())?;
        match e {
            Expr::Number(v) => Ok(Expr::Number(if neg { -v } else { v })),
            e => {
                if !matches!(e.value_type(), ValueType::Scalar | ValueType::Vector) {
                    return Err(self.invalid(
                        at,
                        "unary expression only allowed on expressions of type scalar or instant vector",
                    ));
                }
                Ok(if neg { Expr::Neg(Box::new(e)) } else { e })
            }
        }
    }

    /// A primary expression and the ranges, offsets and `@` after it.
    fn postfix(&mut self) -> Result<Expr, ParseError> {
        let mut e = self.primary()?;
        loop {
            if *self.peek() == Tok::LBracket {
                e = self.range(e)?;
            } else if self.is_word("offset") {
                let at = self.at();
                self.next();
                let neg = self.sign();
                let d = self.duration("number or duration")?;
                e = self.set_offset(at, e, if neg { -d } else { d })?;
            } else if *self.peek() == Tok::At {
                let at = self.at();
                self.next();
                let t = self.at_time()?;
                e = self.set_at(at, e, t)?;
            } else {
                return Ok(e);
            }
        }
    }

    /// An optional sign before a number: whether it is `-`.
    fn sign(&mut self) -> bool {
        match self.peek() {
            Tok::Sub => {
                self.next();
                true
            }
            Tok::Add => {
                self.next();
                false
            }
            _ => false,
        }
    }

    /// A duration or a number of seconds, in ms, at most
    /// [`MAX_DURATION_MS`].
    fn duration(&mut self, expected: &str) -> Result<i64, ParseError> {
        let at = self.at();
        let ms = match self.peek().clone() {
            Tok::Duration(ms) => ms as f64,
            Tok::Number(s) => (s * 1000.0).round(),
            _ => return Err(self.unexpected(expected)),
        };
        self.next();
        if !ms.is_finite() || ms.abs() > MAX_DURATION_MS as f64 {
            return Err(self.invalid(at, "duration out of range"));
        }
        Ok(ms as i64)
    }

    fn at_time(&mut self) -> Result<At, ParseError> {
        if self.is_word("start") || self.is_word("end") {
            let start = self.is_word("start");
            self.next();
            self.expect(Tok::LParen, "\"(\"")?;
            self.expect(Tok::RParen, "\")\"")?;
            return Ok(if start { At::Start } else { At::End });
        }
        let neg = self.sign();
        let at = self.at();
        let s = match self.next() {
            Tok::Number(v) => v,
            Tok::Duration(ms) => ms as f64 / 1000.0,
            _ => {
                self.pos -= 1;
                return Err(self.unexpected("timestamp"));
            }
        };
        let s = if neg { -s } else { s };
        let ms = (s * 1000.0).round();
        if !ms.is_finite() || ms.abs() > MAX_TIME_MS as f64 {
            return Err(self.invalid(at, format!("timestamp out of bounds for @ modifier: {s}")));
        }
        Ok(At::Time(ms as i64))
    }

    fn set_offset(&self, at: usize, mut e: Expr, d: i64) -> Result<Expr, ParseError> {
        let slot = match &mut e {
            Expr::Vector(vs) | Expr::Matrix { selector: vs, .. } => &mut vs.offset,
            Expr::Subquery { offset, .. } => offset,
            _ => {
                return Err(self.invalid(
                    at,
                    "offset modifier must be preceded by an instant vector selector or range vector selector or a subquery",
                ))
            }
        };
        if *slot != 0 {
            return Err(self.invalid(at, "offset may not be set multiple times"));
        }
        *slot = d;
        Ok(e)
    }

    fn set_at(&self, at: usize, mut e: Expr, t: At) -> Result<Expr, ParseError> {
        let slot = match &mut e {
            Expr::Vector(vs) | Expr::Matrix { selector: vs, .. } => &mut vs.at,
            Expr::Subquery { at, .. } => at,
            _ => {
                return Err(self.invalid(
                    at,
                    "@ modifier must be preceded by an instant vector selector or range vector selector or a subquery",
                ))
            }
        };
        if slot.is_some() {
            return Err(self.invalid(at, "@ <timestamp> may not be set multiple times"));
        }
        *slot = Some(t);
        Ok(e)
    }

    /// `e[range]` or `e[range:step]`, `e[range:]`.
    fn range(&mut self, e: Expr) -> Result<Expr, ParseError> {
        let at = self.at();
        self.next();
        let range = self.duration("number or duration")?;
        if range <= 0 {
            return Err(self.invalid(at, "duration must be greater than 0"));
        }
        if *self.peek() == Tok::Colon {
            self.next();
            let step = if *self.peek() == Tok::RBracket {
                0
            } else {
                let s = self.duration("number or duration or \"]\"")?;
                if s <= 0 {
                    return Err(self.invalid(at, "duration must be greater than 0"));
                }
                s
            };
            self.expect(Tok::RBracket, "\"]\"")?;
            if e.value_type() != ValueType::Vector {
                return Err(self.invalid(
                    at,
                    format!(
                        "subquery is only allowed on instant vector, got {}",
                        e.value_type().name()
                    ),
                ));
            }
            return Ok(Expr::Subquery {
                expr: Box::new(e),
                range,
                step,
                offset: 0,
                at: None,
            });
        }
        self.expect(Tok::RBracket, "\":\" or \"]\"")?;
        match e {
            Expr::Vector(vs) => {
                if vs.offset != 0 {
                    return Err(self.invalid(at, "no offset modifiers allowed before range"));
                }
                if vs.at.is_some() {
                    return Err(self.invalid(at, "no @ modifiers allowed before range"));
                }
                Ok(Expr::Matrix {
                    selector: vs,
                    range,
                })
            }
            _ => Err(self.invalid(at, "ranges only allowed for vector selectors")),
        }
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let at = self.at();
        match self.peek().clone() {
            Tok::Number(v) => {
                self.next();
                Ok(Expr::Number(v))
            }
            Tok::Duration(ms) => {
                self.next();
                Ok(Expr::Number(ms as f64 / 1000.0))
            }
            Tok::Str(s) => {
                self.next();
                Ok(Expr::String(s))
            }
            Tok::LParen => {
                self.next();
                let e = self.expr(0)?;
                self.expect(Tok::RParen, "\")\"")?;
                Ok(Expr::Paren(Box::new(e)))
            }
            Tok::LBrace => self.selector(at, None),
            Tok::MetricIdent(name) => {
                self.next();
                self.selector(at, Some(name))
            }
            Tok::Ident(word) => {
                let lower = word.to_ascii_lowercase();
                let next = self.peek_at(1);
                let grouping_next = matches!(next, Tok::Ident(w)
                    if w.eq_ignore_ascii_case("by") || w.eq_ignore_ascii_case("without"));
                if let Some(op) = AggOp::named(&lower) {
                    if *next == Tok::LParen || grouping_next {
                        self.next();
                        return self.aggregate(at, op);
                    }
                }
                if *next == Tok::LParen {
                    self.next();
                    return self.call(at, &word);
                }
                if reserved_word(&lower) {
                    return Err(self.unexpected("expression"));
                }
                self.next();
                self.selector(at, Some(word))
            }
            _ => Err(self.unexpected("expression")),
        }
    }
}

#[cfg(test)]
mod tests;
