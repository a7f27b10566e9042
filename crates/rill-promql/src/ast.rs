//! A parsed query: Prometheus's expression types, with durations and
//! times in ms.

use crate::matcher::Matcher;

/// What an expression evaluates to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    Scalar,
    String,
    /// An instant vector.
    Vector,
    /// A range vector.
    Matrix,
}

impl ValueType {
    /// The name Prometheus's messages give the type.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Scalar => "scalar",
            ValueType::String => "string",
            ValueType::Vector => "instant vector",
            ValueType::Matrix => "range vector",
        }
    }
}

/// `@` on a selector or subquery.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum At {
    /// A time, ms.
    Time(i64),
    /// `@ start()`: the query's start.
    Start,
    /// `@ end()`: the query's end.
    End,
}

#[derive(Clone, Debug)]
pub struct VectorSelector {
    /// The metric name, if given outside the braces.
    pub name: Option<String>,
    /// Every matcher, the name's included.
    pub matchers: Vec<Matcher>,
    /// ms, positive into the past.
    pub offset: i64,
    pub at: Option<At>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggOp {
    Sum,
    Avg,
    Count,
    Min,
    Max,
    Group,
    Stddev,
    Stdvar,
    Topk,
    Bottomk,
    CountValues,
    Quantile,
    Limitk,
    LimitRatio,
}

impl AggOp {
    pub fn named(lower: &str) -> Option<AggOp> {
        Some(match lower {
            "sum" => AggOp::Sum,
            "avg" => AggOp::Avg,
            "count" => AggOp::Count,
            "min" => AggOp::Min,
            "max" => AggOp::Max,
            "group" => AggOp::Group,
            "stddev" => AggOp::Stddev,
            "stdvar" => AggOp::Stdvar,
            "topk" => AggOp::Topk,
            "bottomk" => AggOp::Bottomk,
            "count_values" => AggOp::CountValues,
            "quantile" => AggOp::Quantile,
            "limitk" => AggOp::Limitk,
            "limit_ratio" => AggOp::LimitRatio,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AggOp::Sum => "sum",
            AggOp::Avg => "avg",
            AggOp::Count => "count",
            AggOp::Min => "min",
            AggOp::Max => "max",
            AggOp::Group => "group",
            AggOp::Stddev => "stddev",
            AggOp::Stdvar => "stdvar",
            AggOp::Topk => "topk",
            AggOp::Bottomk => "bottomk",
            AggOp::CountValues => "count_values",
            AggOp::Quantile => "quantile",
            AggOp::Limitk => "limitk",
            AggOp::LimitRatio => "limit_ratio",
        }
    }

    /// The type of its parameter, if it takes one.
    pub fn param(self) -> Option<ValueType> {
        match self {
            AggOp::Topk | AggOp::Bottomk | AggOp::Quantile | AggOp::Limitk | AggOp::LimitRatio => {
                Some(ValueType::Scalar)
            }
            AggOp::CountValues => Some(ValueType::String),
            _ => None,
        }
    }
}

/// `by (...)` or `without (...)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grouping {
    By(Vec<String>),
    Without(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Atan2,
    Eql,
    Neq,
    Lss,
    Lte,
    Gtr,
    Gte,
    And,
    Or,
    Unless,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eql | BinOp::Neq | BinOp::Lss | BinOp::Lte | BinOp::Gtr | BinOp::Gte
        )
    }

    pub fn is_set(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or | BinOp::Unless)
    }

    /// Binding strength, higher binds tighter (Prometheus's table).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And | BinOp::Unless => 2,
            BinOp::Eql | BinOp::Neq | BinOp::Lss | BinOp::Lte | BinOp::Gtr | BinOp::Gte => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::Atan2 => 5,
            BinOp::Pow => 6,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "^",
            BinOp::Atan2 => "atan2",
            BinOp::Eql => "==",
            BinOp::Neq => "!=",
            BinOp::Lss => "<",
            BinOp::Lte => "<=",
            BinOp::Gtr => ">",
            BinOp::Gte => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Unless => "unless",
        }
    }
}

/// Which side may match many series of the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Card {
    OneToOne,
    /// `group_left`: many on the left to one on the right.
    ManyToOne,
    /// `group_right`.
    OneToMany,
    /// Set operators.
    ManyToMany,
}

/// How the series of two vectors pair up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matching {
    pub card: Card,
    /// `on (...)` when true, else `ignoring (...)` (no modifier:
    /// ignoring nothing).
    pub on: bool,
    pub labels: Vec<String>,
    /// The labels `group_left (...)`/`group_right (...)` copy from the
    /// "one" side.
    pub include: Vec<String>,
}

#[derive(Clone, Debug)]
pub enum Expr {
    Number(f64),
    String(String),
    Vector(VectorSelector),
    /// A vector selector over a range, ms.
    Matrix {
        selector: VectorSelector,
        range: i64,
    },
    Subquery {
        expr: Box<Expr>,
        range: i64,
        /// ms; 0: the query's default (its step, or a minute).
        step: i64,
        offset: i64,
        at: Option<At>,
    },
    Call {
        func: &'static crate::functions::Function,
        args: Vec<Expr>,
    },
    Aggregate {
        op: AggOp,
        expr: Box<Expr>,
        param: Option<Box<Expr>>,
        grouping: Grouping,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        /// `bool` on a comparison.
        return_bool: bool,
        /// Between two vectors.
        matching: Option<Matching>,
    },
    Neg(Box<Expr>),
    Paren(Box<Expr>),
}

impl Expr {
    pub fn value_type(&self) -> ValueType {
        match self {
            Expr::Number(_) => ValueType::Scalar,
            Expr::String(_) => ValueType::String,
            Expr::Vector(_) => ValueType::Vector,
            Expr::Matrix { .. } | Expr::Subquery { .. } => ValueType::Matrix,
            Expr::Call { func, .. } => func.returns,
            Expr::Aggregate { .. } => ValueType::Vector,
            Expr::Binary { lhs, rhs, .. } => {
                if lhs.value_type() == ValueType::Scalar && rhs.value_type() == ValueType::Scalar {
                    ValueType::Scalar
                } else {
                    ValueType::Vector
                }
            }
            Expr::Neg(e) | Expr::Paren(e) => e.value_type(),
        }
    }

    /// Adds `m` to every vector selector of the expression (a filter a
    /// request imposes, such as VictoriaMetrics' `extra_label`).
    pub fn add_matcher(&mut self, m: &Matcher) {
        match self {
            Expr::Vector(vs) | Expr::Matrix { selector: vs, .. } => vs.matchers.push(m.clone()),
            Expr::Subquery { expr, .. } | Expr::Neg(expr) | Expr::Paren(expr) => {
                expr.add_matcher(m)
            }
            Expr::Call { args, .. } => args.iter_mut().for_each(|a| a.add_matcher(m)),
            Expr::Aggregate { expr, param, .. } => {
                expr.add_matcher(m);
                if let Some(p) = param {
                    p.add_matcher(m);
                }
            }
            Expr::Binary { lhs, rhs, .. } => {
                lhs.add_matcher(m);
                rhs.add_matcher(m);
            }
            Expr::Number(_) | Expr::String(_) => {}
        }
    }

    /// Every vector selector in the expression (those of range
    /// selectors included).
    pub fn selectors(&self) -> Vec<&VectorSelector> {
        let mut out = Vec::new();
        self.collect_selectors(&mut out);
        out
    }

    fn collect_selectors<'a>(&'a self, out: &mut Vec<&'a VectorSelector>) {
        match self {
            Expr::Vector(vs) | Expr::Matrix { selector: vs, .. } => out.push(vs),
            Expr::Subquery { expr, .. } | Expr::Neg(expr) | Expr::Paren(expr) => {
                expr.collect_selectors(out)
            }
            Expr::Call { args, .. } => args.iter().for_each(|a| a.collect_selectors(out)),
            Expr::Aggregate { expr, param, .. } => {
                expr.collect_selectors(out);
                if let Some(p) = param {
                    p.collect_selectors(out);
                }
            }
            Expr::Binary { lhs, rhs, .. } => {
                lhs.collect_selectors(out);
                rhs.collect_selectors(out);
            }
            Expr::Number(_) | Expr::String(_) => {}
        }
    }

    /// The expression inside any parentheses.
    pub fn unparen(&self) -> &Expr {
        match self {
            Expr::Paren(e) => e.unparen(),
            e => e,
        }
    }
}
