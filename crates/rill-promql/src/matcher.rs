//! Label matchers: `=`, `!=`, `=~` and `!~`, regular expressions
//! anchored at both ends with `.` matching a newline too, as Prometheus
//! 3 compiles them. A label a series lacks has the value "".

use regex::Regex;

#[derive(Clone, Debug)]
pub enum MatchOp {
    Eq(String),
    Ne(String),
    Re(Regex, String),
    NotRe(Regex, String),
}

#[derive(Clone, Debug)]
pub struct Matcher {
    pub label: String,
    pub op: MatchOp,
}

impl Matcher {
    pub fn eq(label: &str, value: &str) -> Matcher {
        Matcher {
            label: label.to_string(),
            op: MatchOp::Eq(value.to_string()),
        }
    }

    /// A matcher of `label`, `op` one of `=`, `!=`, `=~`, `!~`; an
    /// error when the regular expression does not compile.
    pub fn new(label: &str, op: &str, value: &str) -> Result<Matcher, regex::Error> {
        let anchored = || Regex::new(&format!("^(?s:{value})$"));
        let op = match op {
            "=" => MatchOp::Eq(value.to_string()),
            "!=" => MatchOp::Ne(value.to_string()),
            "=~" => MatchOp::Re(anchored()?, value.to_string()),
            _ => MatchOp::NotRe(anchored()?, value.to_string()),
        };
        Ok(Matcher {
            label: label.to_string(),
            op,
        })
    }

    /// Whether a series whose `label` is `value` ("" when absent)
    /// passes.
    pub fn matches(&self, value: &str) -> bool {
        match &self.op {
            MatchOp::Eq(x) => value == x,
            MatchOp::Ne(x) => value != x,
            MatchOp::Re(r, _) => r.is_match(value),
            MatchOp::NotRe(r, _) => !r.is_match(value),
        }
    }

    /// Whether it passes a series without the label.
    pub fn matches_empty(&self) -> bool {
        self.matches("")
    }

    /// The value as written.
    pub fn value(&self) -> &str {
        match &self.op {
            MatchOp::Eq(v) | MatchOp::Ne(v) | MatchOp::Re(_, v) | MatchOp::NotRe(_, v) => v,
        }
    }

    pub fn op_symbol(&self) -> &'static str {
        match self.op {
            MatchOp::Eq(_) => "=",
            MatchOp::Ne(_) => "!=",
            MatchOp::Re(..) => "=~",
            MatchOp::NotRe(..) => "!~",
        }
    }
}

impl std::fmt::Display for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{:?}", self.label, self.op_symbol(), self.value())
    }
}
