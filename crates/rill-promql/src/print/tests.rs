use super::{go_quote, pretty};
use crate::parse;

fn line(q: &str) -> String {
    parse(q).unwrap_or_else(|e| panic!("{q}: {e}")).to_string()
}

#[test]
fn expressions_are_written_as_prometheus_writes_them() {
    for (q, want) in [
        (
            "sum(rate(http_requests_total{job=\"api\"}[5m])) by (job)",
            "sum by (job) (rate(http_requests_total{job=\"api\"}[5m]))",
        ),
        ("sum by () (x)", "sum(x)"),
        ("sum without () (x)", "sum without () (x)"),
        ("topk(3, x)", "topk(3, x)"),
        ("count_values(\"v\", x)", "count_values(\"v\", x)"),
        ("x{b=\"1\",a=\"2\"}", "x{a=\"2\",b=\"1\"}"),
        (
            "{a=~\"b.*\", __name__=\"x\"}",
            "{__name__=\"x\",a=~\"b.*\"}",
        ),
        ("x[5m] offset 1h @ 100", "x[5m] @ 100.000 offset 1h"),
        ("x offset -5m", "x offset -5m"),
        ("x @ start()", "x @ start()"),
        ("x[90m]", "x[1h30m]"),
        ("x[8d]", "x[8d]"),
        ("x[14d]", "x[2w]"),
        ("x[365d]", "x[1y]"),
        ("rate(x[5m:1m])", "rate(x[5m:1m])"),
        (
            "max_over_time(x[1h:] offset 1m)",
            "max_over_time(x[1h:] offset 1m)",
        ),
        ("a + on(b) group_left(c) d", "a + on (b) group_left (c) d"),
        ("a * ignoring(b) d", "a * ignoring (b) d"),
        ("x and on() y", "x and on () y"),
        ("a > bool 1", "a > bool 1"),
        ("-x", "-x"),
        ("-1", "-1"),
        ("- -1", "1"),
        ("1e3", "1000"),
        ("0x10", "16"),
        ("Inf", "+Inf"),
        ("-Inf", "-Inf"),
        ("(x)", "(x)"),
        (
            "label_replace(x, \"dst\", \"$1\", \"src\", \"(.*)\")",
            "label_replace(x, \"dst\", \"$1\", \"src\", \"(.*)\")",
        ),
        ("'a\\nb'", "\"a\\nb\""),
    ] {
        assert_eq!(line(q), want, "{q}");
        // What is written parses back to the same text.
        assert_eq!(line(want), want, "{want}");
    }
}

#[test]
fn strings_are_quoted_as_go_quotes_them() {
    assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
    assert_eq!(go_quote("\t\u{1}\u{7f}"), "\"\\t\\x01\\x7f\"");
    assert_eq!(go_quote("é\u{a0}\u{200b}"), "\"é\\u00a0\\u200b\"");
    // Private use and tag characters, as Go escapes them.
    assert_eq!(go_quote("\u{e000}\u{e0041}"), "\"\\ue000\\U000e0041\"");
}

#[test]
fn long_nodes_are_split_over_indented_lines() {
    // Short: one line.
    assert_eq!(pretty(&parse("sum(x)").unwrap()), "sum(x)");
    let q = "sum by (job) (rate(http_requests_total{instance=\"host-1.eu-west.example.com:9090\",job=\"api-server\"}[5m]))";
    assert_eq!(
        pretty(&parse(q).unwrap()),
        "sum by (job) (\n  rate(http_requests_total{instance=\"host-1.eu-west.example.com:9090\",job=\"api-server\"}[5m])\n)"
    );
    let q = "a_long_metric_name_number_one{label=\"value\"} + on (label) group_left (other) a_long_metric_name_number_two{label=\"value\"}";
    assert_eq!(
        pretty(&parse(q).unwrap()),
        "  a_long_metric_name_number_one{label=\"value\"}\n+ on (label) group_left (other)\n  a_long_metric_name_number_two{label=\"value\"}"
    );
    // A subquery that fits is left unindented, as Prometheus leaves it.
    let q = "max_over_time(deriv(rate(distance_covered_meters_total{instance=\"host-1.example.com:9090\"}[1m])[5m:1m])[10m:])";
    assert_eq!(
        pretty(&parse(q).unwrap()),
        "max_over_time(\nderiv(rate(distance_covered_meters_total{instance=\"host-1.example.com:9090\"}[1m])[5m:1m])[10m:]\n)"
    );
}
