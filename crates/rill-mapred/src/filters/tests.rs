use super::*;
use serde_json::json;

fn keep(chain: Value, key: &str) -> Result<bool, ApplyError> {
    keeps(&parse_chain(&chain).unwrap(), key.as_bytes())
}

#[test]
fn the_python_suites_chains() {
    let c = json!([["tokenize", "-", 2], ["ends_with", "0613"]]);
    assert!(keep(c.clone(), "yahoo-20090613").unwrap());
    assert!(!keep(c, "basho-20101215").unwrap());
    let c = json!([[
        "and",
        [["tokenize", "-", 1], ["eq", "yahoo"]],
        [["tokenize", "-", 2], ["ends_with", "0613"]]
    ]]);
    assert!(keep(c.clone(), "yahoo-20090613").unwrap());
    assert!(!keep(c, "google-20090613").unwrap());
}

#[test]
fn transforms_feed_predicates() {
    assert!(keep(json!([["string_to_int"], ["greater_than", 10]]), "11").unwrap());
    assert!(!keep(json!([["string_to_int"], ["greater_than", 10]]), "9").unwrap());
    assert!(keep(json!([["string_to_int"], ["between", 1, 5, false]]), "4").unwrap());
    assert!(!keep(json!([["string_to_int"], ["between", 1, 4, false]]), "4").unwrap());
    assert!(keep(json!([["to_lower"], ["eq", "abc"]]), "ABC").unwrap());
    assert!(keep(json!([["to_upper"], ["starts_with", "AB"]]), "abc").unwrap());
    assert!(keep(json!([["urldecode"], ["eq", "a b/c"]]), "a+b%2Fc&x").unwrap());
    assert!(keep(json!([["string_to_float"], ["less_than", 2]]), "1.5").unwrap());
    assert!(keep(json!([["matches", "^ab+c"]]), "abbbc").unwrap());
    assert!(keep(json!([["set_member", "x", "y", 3]]), "y").unwrap());
    assert!(keep(json!([["set_member", "x", 3]]), "3").unwrap());
    assert!(keep(json!([["similar_to", "kitten", 3]]), "sitting").unwrap());
    assert!(!keep(json!([["similar_to", "kitten", 2]]), "sitting").unwrap());
    assert!(keep(json!([["not", [["eq", "a"]]]]), "b").unwrap());
    assert!(keep(json!([["or", [["eq", "a"]], [["eq", "b"]]]]), "b").unwrap());
    assert!(keep(
        json!([["string_to_int"], ["int_to_string"], ["eq", "7"]]),
        "007"
    )
    .unwrap());
    // A chain that ends in a transform keeps nothing.
    assert!(!keep(json!([["to_upper"]]), "x").unwrap());
    // A binary key sorts after every number (Erlang's term order).
    assert!(keep(json!([["greater_than", 5]]), "1").unwrap());
}

#[test]
fn bad_filters_are_refused_when_parsed_and_bad_keys_when_run() {
    let e = parse_chain(&json!([["and", [["sounds_like", "x"]]]]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown key filter \"sounds_like\""), "{e}");
    assert!(parse_chain(&json!([["tokenize", "-"]])).is_err());
    assert!(parse_chain(&json!([["matches", "("]])).is_err());
    assert!(parse_chain(&json!("x")).is_err());
    let e = keep(json!([["string_to_int"]]), "x1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("string_to_int"), "{e}");
    assert!(keep(json!([["tokenize", "-", 3]]), "a-b").is_err());
}

#[test]
fn filters_are_bounded() {
    let many = Value::Array(vec![json!(["eq", "x"]); crate::job::MAX_FILTERS + 1]);
    assert!(parse_chain(&many)
        .unwrap_err()
        .to_string()
        .contains("at most"));
    let nested = json!([["and", [["and", [["eq", "a"]], [["eq", "b"]]]]]]);
    assert_eq!(parse_chain(&nested).unwrap().len(), 1);
    let e = parse_chain(&json!([["matches", "\\w{1,300}\\w{1,300}\\w{1,300}"]]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("matches"), "{e}");
    assert!(parse_chain(&json!([["similar_to", "x".repeat(2000), 1]])).is_err());
    assert!(within_distance(b"kitten", b"sitting", 3));
    assert!(!within_distance(b"kitten", b"sitting", 2));
    assert!(!within_distance(b"a", &[b'a'; 100], 5));
}

#[test]
fn erlang_number_texts() {
    assert_eq!(erlang_float_to_list(1.5), "1.50000000000000000000e+00");
    assert_eq!(parse_int(b"-12"), Some(-12));
    assert_eq!(parse_int(b"+7"), Some(7));
    assert_eq!(parse_int(b"+-7"), None);
    assert_eq!(parse_int(b"1.0"), None);
    assert_eq!(parse_int(b""), None);
    assert_eq!(parse_float(b"1"), None);
    assert_eq!(parse_float(b"2.5e3"), Some(2500.0));
}
