use super::parse;
use crate::ast::{AggOp, At, BinOp, Card, Expr, Grouping};

fn ok(q: &str) -> Expr {
    parse(q).unwrap_or_else(|e| panic!("{q}: {e}"))
}

fn err(q: &str) -> String {
    match parse(q) {
        Ok(e) => panic!("{q} parsed: {e:?}"),
        Err(e) => e.to_string(),
    }
}

fn num(q: &str) -> f64 {
    match ok(q) {
        Expr::Number(v) => v,
        e => panic!("{q}: {e:?}"),
    }
}

#[test]
fn signs_bind_like_multiplication_but_not_over_powers() {
    assert_eq!(num("-1"), -1.0);
    assert_eq!(num("+0.2"), 0.2);
    match ok("-2 ^ 2") {
        Expr::Number(v) => assert_eq!(v, -4.0, "folded"),
        Expr::Neg(e) => assert!(matches!(*e, Expr::Binary { op: BinOp::Pow, .. })),
        e => panic!("{e:?}"),
    }
    match ok("1 - -1") {
        Expr::Binary {
            op: BinOp::Sub,
            rhs,
            ..
        } => assert!(matches!(*rhs, Expr::Number(v) if v == -1.0)),
        e => panic!("{e:?}"),
    }
    match ok("-foo * bar") {
        Expr::Binary {
            op: BinOp::Mul,
            lhs,
            ..
        } => assert!(matches!(*lhs, Expr::Neg(_))),
        e => panic!("{e:?}"),
    }
}

#[test]
fn operators_group_by_precedence_and_power_to_the_right() {
    match ok("1 + 2 * 3 ^ 2 ^ 2") {
        Expr::Binary {
            op: BinOp::Add,
            rhs,
            ..
        } => match *rhs {
            Expr::Binary {
                op: BinOp::Mul,
                rhs,
                ..
            } => match *rhs {
                Expr::Binary {
                    op: BinOp::Pow,
                    rhs,
                    ..
                } => {
                    assert!(matches!(*rhs, Expr::Binary { op: BinOp::Pow, .. }))
                }
                e => panic!("{e:?}"),
            },
            e => panic!("{e:?}"),
        },
        e => panic!("{e:?}"),
    }
    match ok("a or b and c unless d") {
        Expr::Binary {
            op: BinOp::Or, rhs, ..
        } => {
            assert!(matches!(
                *rhs,
                Expr::Binary {
                    op: BinOp::Unless,
                    ..
                }
            ))
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn selectors_ranges_offsets_and_at() {
    match ok(r#"foo{a="b", c=~"d.*",} [5m] offset -1h @ 100"#) {
        Expr::Matrix { selector, range } => {
            assert_eq!(range, 300_000);
            assert_eq!(selector.offset, -3_600_000);
            assert_eq!(selector.at, Some(At::Time(100_000)));
            assert_eq!(selector.matchers.len(), 3);
        }
        e => panic!("{e:?}"),
    }
    match ok("rate(foo[1m])[5m:] @ end()") {
        Expr::Subquery {
            range, step, at, ..
        } => {
            assert_eq!((range, step, at), (300_000, 0, Some(At::End)));
        }
        e => panic!("{e:?}"),
    }
    match ok("foo[100]") {
        Expr::Matrix { range, .. } => assert_eq!(range, 100_000),
        e => panic!("{e:?}"),
    }
    assert!(matches!(ok(r#"{"foo", a="b"}"#), Expr::Vector(_)));
}

#[test]
fn keywords_are_metric_names_where_no_expression_needs_them() {
    assert!(matches!(ok("sum"), Expr::Vector(_)));
    assert!(matches!(ok("offset"), Expr::Vector(_)));
    assert!(matches!(
        ok("SUM(foo)"),
        Expr::Aggregate { op: AggOp::Sum, .. }
    ));
    assert!(matches!(ok("start{a=\"b\"}"), Expr::Vector(_)));
}

#[test]
fn aggregations_take_grouping_before_or_after() {
    for q in ["sum by (a, b) (x)", "sum(x) by (a, b,)"] {
        match ok(q) {
            Expr::Aggregate { grouping, .. } => {
                assert_eq!(grouping, Grouping::By(vec!["a".into(), "b".into()]))
            }
            e => panic!("{e:?}"),
        }
    }
    match ok("topk(3, x) without (job)") {
        Expr::Aggregate {
            op,
            param,
            grouping,
            ..
        } => {
            assert_eq!(op, AggOp::Topk);
            assert!(param.is_some());
            assert_eq!(grouping, Grouping::Without(vec!["job".into()]));
        }
        e => panic!("{e:?}"),
    }
    assert!(matches!(
        ok("count_values(\"v\", x)"),
        Expr::Aggregate {
            op: AggOp::CountValues,
            ..
        }
    ));
}

#[test]
fn vector_matching_modifiers() {
    match ok("a * on (x) group_left (y) b") {
        Expr::Binary {
            matching: Some(m), ..
        } => {
            assert_eq!(m.card, Card::ManyToOne);
            assert!(m.on);
            assert_eq!(m.labels, vec!["x".to_string()]);
            assert_eq!(m.include, vec!["y".to_string()]);
        }
        e => panic!("{e:?}"),
    }
    match ok("a > bool ignoring (x) b") {
        Expr::Binary {
            return_bool: true,
            matching: Some(m),
            ..
        } => assert!(!m.on),
        e => panic!("{e:?}"),
    }
}

#[test]
fn refusals_in_prometheus_words() {
    for (q, msg) in [
        (
            "1 > 2",
            "comparisons between scalars must use BOOL modifier",
        ),
        (
            "1 and 2",
            "set operator \"and\" not allowed in binary scalar expression",
        ),
        (
            "a + bool b",
            "bool modifier can only be used on comparison operators",
        ),
        (
            "1 + on (x) b",
            "vector matching only allowed between instant vectors",
        ),
        (
            "rate(foo)",
            "expected type range vector in call to function \"rate\", got instant vector",
        ),
        ("nope(foo)", "unknown function with name \"nope\""),
        (
            "sum(foo[5m])",
            "expected type instant vector in aggregation expression, got range vector",
        ),
        (
            "topk(foo)",
            "wrong number of arguments for aggregate expression provided, expected 2, got 1",
        ),
        (
            "{}",
            "vector selector must contain at least one non-empty matcher",
        ),
        (
            "{a=\"\"}",
            "vector selector must contain at least one non-empty matcher",
        ),
        (
            "foo offset 1m [5m]",
            "no offset modifiers allowed before range",
        ),
        ("(foo)[5m]", "ranges only allowed for vector selectors"),
        (
            "foo[5m][5m:]",
            "subquery is only allowed on instant vector, got range vector",
        ),
        ("foo{__name__=\"bar\"}", "metric name must not be set twice"),
        ("a and group_left b", "unexpected"),
        (
            "foo offset 1m offset 2m",
            "offset may not be set multiple times",
        ),
        ("foo[0s]", "duration must be greater than 0"),
        ("", "no expression found in input"),
        ("a{b=~\"(\"}", "invalid regular expression"),
        ("round(foo, 1, 2)", "expected at most 2 argument(s)"),
    ] {
        let e = err(q);
        assert!(e.contains(msg), "{q}: {e}");
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let q = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(err(&q).contains("nests deeper"));
    // A long chain nests as deep as it is long.
    let q = vec!["x"; 1000].join(" + ");
    assert!(err(&q).contains("nests deeper"));
    assert!(matches!(
        ok(&vec!["x"; 100].join(" or ")),
        Expr::Binary { .. }
    ));
}

#[test]
fn a_modifier_without_labels_against_a_scalar_is_dropped() {
    assert!(matches!(
        ok("foo * on () group_left 2"),
        Expr::Binary { matching: None, .. }
    ));
}

#[test]
fn series_selectors_alone_are_what_match_takes() {
    let m = super::parse_selector("up{job=\"x\"}").unwrap();
    let mut labels: Vec<&str> = m.iter().map(|m| m.label.as_str()).collect();
    labels.sort_unstable();
    assert_eq!(labels, ["__name__", "job"]);
    assert!(super::parse_selector("{__name__=~\".+\"}").is_ok());
    for bad in [
        "rate(x[5m])",
        "x offset 5m",
        "x @ 100",
        "x + 1",
        "x[5m]",
        "{}",
        "{a=\"\"}",
    ] {
        assert!(super::parse_selector(bad).is_err(), "{bad}");
    }
}
