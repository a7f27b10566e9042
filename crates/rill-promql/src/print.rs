//! Queries written back as text, as Prometheus 3.5 writes them: an
//! expression's `Display` is its `String()` (one line), [`pretty`] its
//! `Prettify` (a node longer than 100 characters split over lines,
//! indented two spaces a level), which `/api/v1/format_query` answers.
//!
//! Two forms the parser does not keep are written as what they mean: a
//! unary `+` is left out, and a duration used as a number (`time() - 5m`)
//! is written in seconds (`time() - 300`).

use crate::ast::{At, Card, Expr, Grouping, Matching, VectorSelector};
use crate::matcher::Matcher;
use std::fmt::{self, Display, Formatter, Write};

/// Longest line `pretty` leaves whole (Prometheus's
/// `maxCharactersPerLine`).
const MAX_LINE: usize = 100;

/// `e` over lines of at most 100 characters where its nodes allow, as
/// Prometheus's `Prettify` writes it.
pub fn pretty(e: &Expr) -> String {
    pretty_at(e, 0)
}

fn indent(level: usize) -> String {
    "  ".repeat(level)
}

fn needs_split(e: &Expr) -> bool {
    e.to_string().len() > MAX_LINE
}

fn pretty_at(e: &Expr, level: usize) -> String {
    let ind = indent(level);
    let whole = || format!("{ind}{e}");
    match e {
        Expr::Aggregate {
            op,
            expr,
            param,
            grouping,
        } => {
            if !needs_split(e) {
                return whole();
            }
            let mut s = format!("{ind}{}{}(\n", op.name(), GroupingText(grouping));
            if let Some(p) = param {
                s.push_str(&pretty_at(p, level + 1));
                s.push_str(",\n");
            }
            let _ = write!(s, "{}\n{ind})", pretty_at(expr, level + 1));
            s
        }
        Expr::Binary {
            op,
            lhs,
            rhs,
            return_bool,
            matching,
        } => {
            if !needs_split(e) {
                return whole();
            }
            format!(
                "{}\n{ind}{}{}{}\n{}",
                pretty_at(lhs, level + 1),
                op.symbol(),
                if *return_bool { " bool" } else { "" },
                MatchingText(matching.as_ref()),
                pretty_at(rhs, level + 1)
            )
        }
        Expr::Call { func, args } => {
            if !needs_split(e) {
                return whole();
            }
            let args: Vec<String> = args.iter().map(|a| pretty_at(a, level + 1)).collect();
            format!("{ind}{}(\n{}\n{ind})", func.name, args.join(",\n"))
        }
        Expr::Paren(inner) => {
            if !needs_split(e) {
                return whole();
            }
            format!("{ind}(\n{}\n{ind})", pretty_at(inner, level + 1))
        }
        // Prometheus's subquery leaves its line unindented when it fits.
        Expr::Subquery { expr, .. } => {
            if !needs_split(e) {
                return e.to_string();
            }
            format!("{}{}", pretty_at(expr, level), SubqueryTail(e))
        }
        Expr::Neg(inner) => format!("{ind}-{}", pretty_at(inner, level).trim()),
        Expr::Number(_) | Expr::String(_) | Expr::Vector(_) | Expr::Matrix { .. } => whole(),
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Number(v) => f.write_str(&go_float(*v)),
            Expr::String(s) => f.write_str(&go_quote(s)),
            Expr::Vector(vs) => {
                write!(f, "{}", SelectorText(vs))?;
                write_at_offset(f, vs.at, vs.offset)
            }
            Expr::Matrix { selector, range } => {
                write!(
                    f,
                    "{}[{}]",
                    SelectorText(selector),
                    crate::fmt_duration(*range)
                )?;
                write_at_offset(f, selector.at, selector.offset)
            }
            Expr::Subquery { expr, .. } => write!(f, "{expr}{}", SubqueryTail(self)),
            Expr::Call { func, args } => {
                write!(f, "{}(", func.name)?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            Expr::Aggregate {
                op,
                expr,
                param,
                grouping,
            } => {
                write!(f, "{}{}(", op.name(), GroupingText(grouping))?;
                if let Some(p) = param {
                    write!(f, "{p}, ")?;
                }
                write!(f, "{expr})")
            }
            Expr::Binary {
                op,
                lhs,
                rhs,
                return_bool,
                matching,
            } => write!(
                f,
                "{lhs} {}{}{} {rhs}",
                op.symbol(),
                if *return_bool { " bool" } else { "" },
                MatchingText(matching.as_ref())
            ),
            Expr::Neg(e) => write!(f, "-{e}"),
            Expr::Paren(e) => write!(f, "({e})"),
        }
    }
}

/// ` @ t`, then ` offset d`, as a selector or subquery carries them.
fn write_at_offset(f: &mut Formatter<'_>, at: Option<At>, offset: i64) -> fmt::Result {
    match at {
        Some(At::Time(ms)) => write!(f, " @ {:.3}", ms as f64 / 1000.0)?,
        Some(At::Start) => f.write_str(" @ start()")?,
        Some(At::End) => f.write_str(" @ end()")?,
        None => {}
    }
    match offset {
        0 => Ok(()),
        o if o > 0 => write!(f, " offset {}", crate::fmt_duration(o)),
        o => write!(f, " offset -{}", crate::fmt_duration(-o)),
    }
}

/// A selector's name and matchers, without `@` and offset: the matchers
/// sorted as text, the name's own left out.
struct SelectorText<'a>(&'a VectorSelector);

impl Display for SelectorText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let vs = self.0;
        let name = vs.name.as_deref().unwrap_or("");
        let mut shown: Vec<String> = vs
            .matchers
            .iter()
            .filter(|m| {
                !(m.label == crate::value::METRIC_NAME
                    && matches!(&m.op, crate::matcher::MatchOp::Eq(v) if v == name && !v.is_empty()))
            })
            .map(matcher_text)
            .collect();
        if shown.is_empty() {
            return f.write_str(name);
        }
        shown.sort_unstable();
        write!(f, "{name}{{{}}}", shown.join(","))
    }
}

/// A matcher as Prometheus writes one: the label name quoted unless it
/// is of `[a-zA-Z_][a-zA-Z0-9_]*`, the value always.
fn matcher_text(m: &Matcher) -> String {
    let plain = !m.label.is_empty()
        && m.label
            .char_indices()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    let name = if plain {
        m.label.clone()
    } else {
        go_quote(&m.label)
    };
    format!("{name}{}{}", m.op_symbol(), go_quote(m.value()))
}

/// ` by (a, b) ` or ` without (a) `; nothing for no grouping.
struct GroupingText<'a>(&'a Grouping);

impl Display for GroupingText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (word, labels) = match self.0 {
            Grouping::Without(l) => ("without", l),
            Grouping::By(l) if !l.is_empty() => ("by", l),
            Grouping::By(_) => return Ok(()),
        };
        // A name that is not a legacy metric name is quoted.
        let legacy = |s: &str| {
            !s.is_empty()
                && s.char_indices().all(|(i, c)| {
                    c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
                })
        };
        let shown: Vec<String> = labels
            .iter()
            .map(|l| if legacy(l) { l.clone() } else { go_quote(l) })
            .collect();
        write!(f, " {word} ({}) ", shown.join(", "))
    }
}

/// ` on (a)` / ` ignoring (a)` and ` group_left (b)`, when given.
struct MatchingText<'a>(Option<&'a Matching>);

impl Display for MatchingText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let Some(m) = self.0 else {
            return Ok(());
        };
        if m.labels.is_empty() && !m.on {
            return Ok(());
        }
        let word = if m.on { "on" } else { "ignoring" };
        write!(f, " {word} ({})", m.labels.join(", "))?;
        match m.card {
            Card::ManyToOne => write!(f, " group_left ({})", m.include.join(", ")),
            Card::OneToMany => write!(f, " group_right ({})", m.include.join(", ")),
            Card::OneToOne | Card::ManyToMany => Ok(()),
        }
    }
}

/// A subquery's `[range:step]`, `@` and offset.
struct SubqueryTail<'a>(&'a Expr);

impl Display for SubqueryTail<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let Expr::Subquery {
            range,
            step,
            offset,
            at,
            ..
        } = self.0
        else {
            return Ok(());
        };
        let step = if *step > 0 {
            crate::fmt_duration(*step)
        } else {
            String::new()
        };
        write!(f, "[{}:{step}]", crate::fmt_duration(*range))?;
        write_at_offset(f, *at, *offset)
    }
}

/// A float as Go's `strconv.FormatFloat(v, 'f', -1, 64)` writes it.
fn go_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        v.to_string()
    }
}

/// A string as Go's `strconv.Quote` writes it.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !printable(c) => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`, near enough: not a control, a space other
/// than ASCII's, a format character (Cf), a private-use or a
/// surrogate-area one. Unassigned code points, which Go escapes too,
/// are printed as they are (Rust's standard library has no table of
/// them).
fn printable(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{e000}'..='\u{f8ff}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{13430}'..='\u{1343f}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0001}'
                | '\u{e0020}'..='\u{e007f}'
                | '\u{f0000}'..='\u{10ffff}'
        ))
}

#[cfg(test)]
mod tests;
