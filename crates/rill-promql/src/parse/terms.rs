//! The terms of a query: function calls, aggregations, selectors and
//! their matchers, and lists of label names.

use super::Parser;
use crate::ast::{AggOp, Expr, Grouping, ValueType, VectorSelector};
use crate::error::ParseError;
use crate::functions;
use crate::lex::Tok;
use crate::matcher::Matcher;

impl Parser {
    pub(super) fn call(&mut self, at: usize, name: &str) -> Result<Expr, ParseError> {
        let func = functions::lookup(name)
            .ok_or_else(|| self.invalid(at, format!("unknown function with name \"{name}\"")))?;
        self.expect(Tok::LParen, "\"(\"")?;
        let mut args = Vec::new();
        if *self.peek() != Tok::RParen {
            loop {
                args.push(self.expr(0)?);
                if *self.peek() == Tok::Comma {
                    self.next();
                    continue;
                }
                break;
            }
        }
        self.expect(Tok::RParen, "\",\" or \")\"")?;
        let (expected, n) = (func.args.len(), args.len());
        let wrong = |what: String| self.invalid(at, what);
        if func.variadic == 0 {
            if n != expected {
                return Err(wrong(format!(
                    "expected {expected} argument(s) in call to \"{name}\", got {n}"
                )));
            }
        } else {
            let least = expected - 1;
            if n < least {
                return Err(wrong(format!(
                    "expected at least {least} argument(s) in call to \"{name}\", got {n}"
                )));
            }
            if func.variadic > 0 && n > least + func.variadic as usize {
                return Err(wrong(format!(
                    "expected at most {} argument(s) in call to \"{name}\", got {n}",
                    least + func.variadic as usize
                )));
            }
        }
        for (i, a) in args.iter().enumerate() {
            let want = func.args[i.min(expected - 1)];
            if a.value_type() != want {
                return Err(wrong(format!(
                    "expected type {} in call to function \"{name}\", got {}",
                    want.name(),
                    a.value_type().name()
                )));
            }
        }
        Ok(Expr::Call { func, args })
    }

    pub(super) fn aggregate(&mut self, at: usize, op: AggOp) -> Result<Expr, ParseError> {
        let mut grouping = self.grouping()?;
        self.expect(Tok::LParen, "\"(\"")?;
        let mut args = vec![self.expr(0)?];
        while *self.peek() == Tok::Comma {
            self.next();
            if *self.peek() == Tok::RParen {
                break;
            }
            args.push(self.expr(0)?);
        }
        self.expect(Tok::RParen, "\",\" or \")\"")?;
        if let Some(after) = self.grouping()? {
            if grouping.is_some() {
                return Err(self.unexpected("no second grouping"));
            }
            grouping = Some(after);
        }
        let want = if op.param().is_some() { 2 } else { 1 };
        if args.len() != want {
            return Err(self.invalid(
                at,
                format!(
                    "wrong number of arguments for aggregate expression provided, expected {want}, got {}",
                    args.len()
                ),
            ));
        }
        let expr = args.pop().expect("counted");
        if expr.value_type() != ValueType::Vector {
            return Err(self.invalid(
                at,
                format!(
                    "expected type instant vector in aggregation expression, got {}",
                    expr.value_type().name()
                ),
            ));
        }
        let param = args.pop();
        if let (Some(p), Some(t)) = (&param, op.param()) {
            if p.value_type() != t {
                return Err(self.invalid(
                    at,
                    format!(
                        "expected type {} in aggregation parameter, got {}",
                        t.name(),
                        p.value_type().name()
                    ),
                ));
            }
        }
        Ok(Expr::Aggregate {
            op,
            expr: Box::new(expr),
            param: param.map(Box::new),
            // No grouping: one group of every series.
            grouping: grouping.unwrap_or(Grouping::By(Vec::new())),
        })
    }

    pub(super) fn grouping(&mut self) -> Result<Option<Grouping>, ParseError> {
        if self.is_word("by") {
            self.next();
            Ok(Some(Grouping::By(self.label_list()?)))
        } else if self.is_word("without") {
            self.next();
            Ok(Some(Grouping::Without(self.label_list()?)))
        } else {
            Ok(None)
        }
    }

    /// A vector selector: a name, matchers in braces, or both.
    pub(super) fn selector(&mut self, at: usize, name: Option<String>) -> Result<Expr, ParseError> {
        let mut matchers = Vec::new();
        if *self.peek() == Tok::LBrace {
            self.next();
            loop {
                if *self.peek() == Tok::RBrace {
                    self.next();
                    break;
                }
                matchers.push(self.matcher()?);
                match self.next() {
                    Tok::Comma => {}
                    Tok::RBrace => break,
                    _ => {
                        self.pos -= 1;
                        return Err(self.unexpected("\",\" or \"}\""));
                    }
                }
            }
        }
        if let Some(n) = &name {
            if let Some(m) = matchers.iter().find(|m| m.label == "__name__") {
                return Err(self.invalid(
                    at,
                    format!(
                        "metric name must not be set twice: \"{n}\" or \"{}\"",
                        m.value()
                    ),
                ));
            }
            matchers.insert(0, Matcher::eq("__name__", n));
        }
        if matchers.iter().all(Matcher::matches_empty) {
            return Err(self.invalid(
                at,
                "vector selector must contain at least one non-empty matcher",
            ));
        }
        Ok(Expr::Vector(VectorSelector {
            name,
            matchers,
            offset: 0,
            at: None,
        }))
    }

    /// `label op "value"`, or a quoted name alone (the metric's).
    pub(super) fn matcher(&mut self) -> Result<Matcher, ParseError> {
        let at = self.at();
        let (label, quoted) = match self.next() {
            Tok::Ident(w) => (w, false),
            Tok::Str(s) => (s, true),
            _ => {
                self.pos -= 1;
                return Err(self.unexpected("label matching"));
            }
        };
        let op = match self.peek() {
            Tok::Assign => "=",
            Tok::Neq => "!=",
            Tok::EqlRegex => "=~",
            Tok::NeqRegex => "!~",
            Tok::Comma | Tok::RBrace if quoted => return Ok(Matcher::eq("__name__", &label)),
            _ => return Err(self.unexpected("label matching operator")),
        };
        self.next();
        let value = match self.next() {
            Tok::Str(s) => s,
            _ => {
                self.pos -= 1;
                return Err(self.unexpected("string"));
            }
        };
        Matcher::new(&label, op, &value)
            .map_err(|e| self.invalid(at, format!("invalid regular expression {value:?}: {e}")))
    }
}
