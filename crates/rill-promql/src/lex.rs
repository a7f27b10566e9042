//! PromQL's tokens, as Prometheus's lexer cuts them: identifiers (with
//! `:` a metric identifier), numbers (decimal, hexadecimal, `Inf`,
//! `NaN`, `_` between digits), durations (`1h30m`, `500ms`), strings in
//! double quotes, single quotes (both with Go's escapes) or backticks
//! (raw), operators and brackets; `#` starts a comment to the end of the
//! line. Keywords are identifiers here: the parser tells them apart
//! where they may stand, regardless of case, as Prometheus does.

use crate::error::ParseError;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A name without `:` (a label, a function, a metric or a keyword).
    Ident(String),
    /// A name with `:` (a metric only).
    MetricIdent(String),
    Number(f64),
    /// A duration, in ms.
    Duration(i64),
    Str(String),
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Colon,
    At,
    /// `=` (label matching only).
    Assign,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Eql,
    Neq,
    Lss,
    Lte,
    Gtr,
    Gte,
    EqlRegex,
    NeqRegex,
    Eof,
}

impl Tok {
    /// How an error message shows the token.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::MetricIdent(s) => format!("identifier {s:?}"),
            Tok::Number(n) => format!("number {n}"),
            Tok::Duration(ms) => format!("duration {}", crate::fmt_duration(*ms)),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Eof => "end of input".to_string(),
            t => format!("{:?}", t.symbol()),
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::At => "@",
            Tok::Assign => "=",
            Tok::Add => "+",
            Tok::Sub => "-",
            Tok::Mul => "*",
            Tok::Div => "/",
            Tok::Mod => "%",
            Tok::Pow => "^",
            Tok::Eql => "==",
            Tok::Neq => "!=",
            Tok::Lss => "<",
            Tok::Lte => "<=",
            Tok::Gtr => ">",
            Tok::Gte => ">=",
            Tok::EqlRegex => "=~",
            Tok::NeqRegex => "!~",
            _ => "",
        }
    }
}

/// A token and the byte offset where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub at: usize,
}

/// Cuts `text` into tokens, ending with [`Tok::Eof`].
pub fn lex(text: &str) -> Result<Vec<Token>, ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let one = |t: Tok| Token { tok: t, at: start };
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' => out.push(one(Tok::LParen)),
            b')' => out.push(one(Tok::RParen)),
            b'{' => out.push(one(Tok::LBrace)),
            b'}' => out.push(one(Tok::RBrace)),
            b'[' => out.push(one(Tok::LBracket)),
            b']' => out.push(one(Tok::RBracket)),
            b',' => out.push(one(Tok::Comma)),
            b':' => out.push(one(Tok::Colon)),
            b'@' => out.push(one(Tok::At)),
            b'+' => out.push(one(Tok::Add)),
            b'-' => out.push(one(Tok::Sub)),
            b'*' => out.push(one(Tok::Mul)),
            b'/' => out.push(one(Tok::Div)),
            b'%' => out.push(one(Tok::Mod)),
            b'^' => out.push(one(Tok::Pow)),
            b'=' | b'!' | b'<' | b'>' => {
                let next = b.get(i + 1).copied();
                let (tok, len) = match (c, next) {
                    (b'=', Some(b'=')) => (Tok::Eql, 2),
                    (b'=', Some(b'~')) => (Tok::EqlRegex, 2),
                    (b'=', _) => (Tok::Assign, 1),
                    (b'!', Some(b'=')) => (Tok::Neq, 2),
                    (b'!', Some(b'~')) => (Tok::NeqRegex, 2),
                    (b'!', _) => {
                        return Err(ParseError::Lex {
                            at: i,
                            what: "'!' not followed by '=' or '~'".into(),
                        })
                    }
                    (b'<', Some(b'=')) => (Tok::Lte, 2),
                    (b'<', _) => (Tok::Lss, 1),
                    (b'>', Some(b'=')) => (Tok::Gte, 2),
                    _ => (Tok::Gtr, 1),
                };
                out.push(one(tok));
                i += len;
                continue;
            }
            b'"' | b'\'' | b'`' => {
                let (s, end) = string(text, i)?;
                out.push(one(Tok::Str(s)));
                i = end;
                continue;
            }
            b'0'..=b'9' | b'.' => {
                let (tok, end) = number_or_duration(text, i)?;
                out.push(one(tok));
                i = end;
                continue;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b':' => {
                let mut j = i;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b':')
                {
                    j += 1;
                }
                let word = &text[i..j];
                let lower = word.to_ascii_lowercase();
                let tok = if lower == "inf" {
                    Tok::Number(f64::INFINITY)
                } else if lower == "nan" {
                    Tok::Number(f64::NAN)
                } else if word.contains(':') {
                    Tok::MetricIdent(word.to_string())
                } else {
                    Tok::Ident(word.to_string())
                };
                out.push(one(tok));
                i = j;
                continue;
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(ParseError::Lex {
                    at: i,
                    what: format!("unexpected character {ch:?}"),
                });
            }
        }
        i += 1;
    }
    out.push(Token {
        tok: Tok::Eof,
        at: text.len(),
    });
    Ok(out)
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A number (as Prometheus's `scanNumber` accepts it) or a duration,
/// starting at `i`; the token and where it ends.
fn number_or_duration(text: &str, i: usize) -> Result<(Tok, usize), ParseError> {
    let b = text.as_bytes();
    if let Some(end) = scan_number(b, i) {
        let raw: String = text[i..end].chars().filter(|&c| c != '_').collect();
        let v = parse_number(&raw).ok_or_else(|| ParseError::Lex {
            at: i,
            what: format!("bad number {:?}", &text[i..end]),
        })?;
        return Ok((Tok::Number(v), end));
    }
    // A duration: (digits unit)+, units in falling order.
    let mut j = i;
    while j < b.len() && (b[j].is_ascii_alphanumeric()) {
        j += 1;
    }
    let word = &text[i..j];
    match parse_duration(word) {
        Some(ms) => Ok((Tok::Duration(ms), j)),
        None => Err(ParseError::Lex {
            at: i,
            what: format!("bad number or duration syntax: {word:?}"),
        }),
    }
}

/// The end of a number starting at `i`, if one is there and nothing
/// alphanumeric follows it.
fn scan_number(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    let is = |j: usize, set: &[u8]| j < b.len() && set.contains(&b[j]);
    let mut hex = false;
    if b.get(j) == Some(&b'0') && matches!(b.get(j + 1), Some(b'x' | b'X')) {
        j += 2;
        if b.get(j) == Some(&b'_') {
            j += 1;
        }
        hex = true;
    }
    let digits: &[u8] = if hex {
        b"0123456789abcdefABCDEF"
    } else {
        b"0123456789"
    };
    let (mut dot, mut exp) = (false, false);
    let start = j;
    while j < b.len() {
        let c = b[j];
        if digits.contains(&c) {
            j += 1;
        } else if c == b'.' && !hex {
            if dot || exp {
                return None;
            }
            dot = true;
            j += 1;
            if is(j, b"_.") {
                return None;
            }
        } else if !hex && (c == b'e' || c == b'E') {
            if exp {
                return None;
            }
            exp = true;
            j += 1;
            if is(j, b"+-") {
                j += 1;
            }
            if j >= b.len() || is(j, b"._eE") {
                return None;
            }
        } else if c == b'_' {
            j += 1;
            if j >= b.len() || is(j, b"._eE") {
                return None;
            }
        } else {
            break;
        }
    }
    if j == start || (j == start + 1 && b[start] == b'.') {
        return None;
    }
    if j < b.len() && is_alnum(b[j]) {
        return None;
    }
    Some(j)
}

fn parse_number(raw: &str) -> Option<f64> {
    if let Some(h) = raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|v| v as f64);
    }
    // Go's ParseFloat takes "2." and ".2"; so does Rust's.
    raw.parse::<f64>().ok()
}

/// The units of a duration, longest first, in ms.
pub(crate) const UNITS: [(&str, i64); 7] = [
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// A duration as Prometheus writes one: `[0-9]+` and a unit (`ms`, `s`,
/// `m`, `h`, `d`, `w`, `y`), repeated with units in falling order; in
/// ms. `None` when it is not one or does not fit.
pub fn parse_duration(s: &str) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(0);
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total: i64 = 0;
    let mut last_unit = usize::MAX;
    while i < b.len() {
        let ds = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == ds {
            return None;
        }
        let n: i64 = s[ds..i].parse().ok()?;
        let us = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit = &s[us..i];
        // "m" followed by "s" is "ms": the loop above took both.
        let k = UNITS.iter().position(|(u, _)| *u == unit)?;
        if last_unit != usize::MAX && k <= last_unit {
            return None;
        }
        last_unit = k;
        total = total.checked_add(n.checked_mul(UNITS[k].1)?)?;
    }
    Some(total)
}

/// A quoted string starting at `i`: its value and where it ends.
fn string(text: &str, i: usize) -> Result<(String, usize), ParseError> {
    let quote = text.as_bytes()[i] as char;
    let mut out = String::new();
    let mut chars = text[i + 1..].char_indices();
    let unterminated = || ParseError::Lex {
        at: i,
        what: "unterminated quoted string".into(),
    };
    while let Some((k, c)) = chars.next() {
        if c == quote {
            return Ok((out, i + 1 + k + c.len_utf8()));
        }
        if quote == '`' {
            out.push(c);
            continue;
        }
        if c == '\n' {
            return Err(unterminated());
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let (_, e) = chars.next().ok_or_else(unterminated)?;
        let bad = |what: String| ParseError::Lex {
            at: i + 1 + k,
            what,
        };
        match e {
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '\\' => out.push('\\'),
            '"' | '\'' if e == quote => out.push(e),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    let (_, d) = chars.next().ok_or_else(unterminated)?;
                    v = v * 8
                        + d.to_digit(8)
                            .ok_or_else(|| bad(format!("bad octal escape \\{e}{d}")))?;
                }
                if v > 255 {
                    return Err(bad("octal escape above \\377".into()));
                }
                out.push(char::from(v as u8));
            }
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut v: u32 = 0;
                for _ in 0..n {
                    let (_, d) = chars.next().ok_or_else(unterminated)?;
                    v = v * 16
                        + d.to_digit(16)
                            .ok_or_else(|| bad(format!("bad hexadecimal escape in \\{e}")))?;
                }
                let ch = char::from_u32(v)
                    .ok_or_else(|| bad(format!("escape \\{e} names no character")))?;
                out.push(ch);
            }
            other => return Err(bad(format!("unknown escape sequence \\{other}"))),
        }
    }
    Err(unterminated())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_in_every_form_prometheus_takes() {
        for (s, v) in [
            ("12.34e6", 12.34e6),
            ("12.34e+6", 12.34e6),
            (".2", 0.2),
            ("2.", 2.0),
            ("0x1F", 31.0),
            ("1_000", 1000.0),
            ("inF", f64::INFINITY),
        ] {
            assert_eq!(toks(s), vec![Tok::Number(v), Tok::Eof], "{s}");
        }
        assert!(matches!(toks("NaN")[0], Tok::Number(n) if n.is_nan()));
    }

    #[test]
    fn durations_take_units_in_falling_order() {
        assert_eq!(toks("1h30m")[0], Tok::Duration(5_400_000));
        assert_eq!(toks("500ms")[0], Tok::Duration(500));
        assert_eq!(toks("1m500ms")[0], Tok::Duration(60_500));
        assert!(lex("30m1h").is_err());
        assert!(lex("5x").is_err());
    }

    #[test]
    fn strings_unescape_as_go_does() {
        assert_eq!(toks(r#""a\"b\n""#)[0], Tok::Str("a\"b\n".into()));
        assert_eq!(toks(r"'it\'s'")[0], Tok::Str("it's".into()));
        assert_eq!(toks(r"`a\d`")[0], Tok::Str(r"a\d".into()));
        assert_eq!(toks(r#""\u00e9\x41""#)[0], Tok::Str("éA".into()));
        assert!(lex(r#""\q""#).is_err());
        assert!(lex(r#""open"#).is_err());
    }

    #[test]
    fn operators_and_names() {
        assert_eq!(
            toks("a:b{c=~\"x\"} != bool 1 # comment"),
            vec![
                Tok::MetricIdent("a:b".into()),
                Tok::LBrace,
                Tok::Ident("c".into()),
                Tok::EqlRegex,
                Tok::Str("x".into()),
                Tok::RBrace,
                Tok::Neq,
                Tok::Ident("bool".into()),
                Tok::Number(1.0),
                Tok::Eof
            ]
        );
    }
}
