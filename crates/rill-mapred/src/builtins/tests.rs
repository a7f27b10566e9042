use super::*;
use crate::json::encode;
use rill_object::{Content, Link, Metadata, Object};

fn fetched(values: &[&str]) -> MapInput {
    let mut meta = Metadata::default();
    meta.links.push(Link {
        bucket: b"lb".to_vec(),
        key: b"lk".to_vec(),
        tag: b"friend".to_vec(),
    });
    MapInput::Found(Arc::new(Fetched {
        bucket_type: None,
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        object: Object {
            clock: Default::default(),
            contents: values
                .iter()
                .map(|v| Content::new(v.to_string(), meta.clone()))
                .collect(),
        },
    }))
}

fn missing() -> MapInput {
    MapInput::NotFound(Term::pair(Term::bin("b"), Term::bin("gone")))
}

fn json(r: Result<Vec<Term>, BuiltinError>) -> String {
    encode(&r.unwrap()).unwrap()
}

fn arg(s: &str) -> Term {
    Term::from_json(&serde_json::from_str(s).unwrap())
}

#[test]
fn map_object_value_and_missing_keys() {
    let none = Term::Atom("none");
    let kd = Term::bin("kd");
    assert_eq!(
        json(map(MapFun::ObjectValue, &fetched(&["2"]), &kd, &none)),
        r#"["2"]"#
    );
    let e = map(MapFun::ObjectValue, &fetched(&["1", "2"]), &kd, &none)
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 siblings"), "{e}");
    let e = map(MapFun::ObjectValue, &missing(), &kd, &none)
        .unwrap_err()
        .to_string();
    assert!(e.contains("filter_notfound") && e.contains("gone"), "{e}");
    assert_eq!(
        json(map(
            MapFun::ObjectValue,
            &missing(),
            &kd,
            &arg(r#""filter_notfound""#)
        )),
        "[]"
    );
    assert_eq!(
        json(map(
            MapFun::ObjectValue,
            &missing(),
            &kd,
            &arg(r#""include_notfound""#)
        )),
        r#"{"error":"notfound"}"#
    );
    assert_eq!(
        json(map(
            MapFun::ObjectValue,
            &missing(),
            &kd,
            &arg(r#""include_keydata""#)
        )),
        r#"["kd"]"#
    );
    assert_eq!(
        json(map(
            MapFun::ObjectValue,
            &missing(),
            &kd,
            &arg(r#"{"sub":[1,2]}"#)
        )),
        "[1,2]"
    );
    assert!(map(
        MapFun::ObjectValue,
        &missing(),
        &kd,
        &arg(r#"{"do_prereduce":true}"#)
    )
    .is_err());
    assert_eq!(
        json(map(MapFun::ObjectValueList, &fetched(&["[1]"]), &kd, &none)),
        "[]"
    );
    let objects = map(MapFun::Identity, &fetched(&["x"]), &kd, &none).unwrap();
    assert!(encode(&objects)
        .unwrap_err()
        .to_string()
        .contains("map_object_value"));
}

#[test]
fn links_match_bucket_and_tag() {
    let MapInput::Found(o) = fetched(&["x"]) else {
        panic!()
    };
    assert_eq!(
        encode(&links(&o, None, None)).unwrap(),
        r#"[["lb","lk","friend"]]"#
    );
    assert_eq!(links(&o, Some(b"lb"), Some(b"friend")).len(), 1);
    assert!(links(&o, Some(b"other"), None).is_empty());
    assert!(links(&o, None, Some(b"enemy")).is_empty());
}

fn ints(v: &[i64]) -> Vec<Term> {
    v.iter().map(|i| Term::Int(*i)).collect()
}

#[test]
fn reduces() {
    assert_eq!(json(reduce(ReduceFun::Sum, &ints(&[1, 2, 3]))), "[6]");
    assert_eq!(json(reduce(ReduceFun::Sum, &[])), "[0]");
    assert_eq!(
        json(reduce(ReduceFun::Sum, &[Term::Int(1), Term::Float(0.5)])),
        "[1.5]"
    );
    let e = reduce(ReduceFun::Sum, &[Term::bin("2")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("reduce_string_to_integer"), "{e}");
    assert!(reduce(ReduceFun::Sum, &ints(&[i64::MAX, 1])).is_err());
    assert_eq!(
        json(reduce(
            ReduceFun::StringToInteger,
            &[Term::bin("-7"), Term::Int(3), Term::bin("+2")]
        )),
        "[-7,3,2]"
    );
    assert!(reduce(ReduceFun::StringToInteger, &[Term::bin("")]).is_err());
    assert_eq!(
        json(reduce(
            ReduceFun::SetUnion,
            &[
                Term::bin("4"),
                Term::bin("2"),
                Term::bin("2"),
                Term::Int(1),
                Term::Float(1.0)
            ]
        )),
        r#"[1,1.0,"2","4"]"#
    );
    assert_eq!(
        json(reduce(
            ReduceFun::Sort,
            &[Term::bin("b"), Term::Int(3), Term::bin("a")]
        )),
        r#"[3,"a","b"]"#
    );
    // Every non-integer counts one; integers are earlier counts.
    assert_eq!(
        json(reduce(
            ReduceFun::CountInputs,
            &[Term::bin("x"), Term::Int(5), Term::bin("y")]
        )),
        "[7]"
    );
    let keys = vec![
        Term::pair(Term::bin("b"), Term::bin("k1")),
        Term::pair(
            Term::pair(Term::bin("b"), Term::bin("k2")),
            Term::Atom("undefined"),
        ),
        Term::pair(
            Term::pair(Term::pair(Term::bin("t"), Term::bin("b")), Term::bin("k3")),
            Term::Atom("undefined"),
        ),
    ];
    let once = reduce(ReduceFun::Identity, &keys).unwrap();
    assert_eq!(
        encode(&once).unwrap(),
        r#"[["b","k3",null,"t"],["b","k2"],["b","k1"]]"#
    );
    // Re-reduce takes its own output.
    assert_eq!(reduce(ReduceFun::Identity, &once).unwrap().len(), 3);
    assert!(reduce(ReduceFun::Identity, &[Term::bin("v")]).is_err());
}

#[test]
fn plist_sum_re_reduces_nested_lists() {
    let p = |k: &str, v: i64| Term::pair(Term::bin(k), Term::Int(v));
    let first = reduce(
        ReduceFun::PlistSum,
        &[Term::List(vec![p("a", 1), p("b", 2)]), p("a", 3)],
    )
    .unwrap();
    assert_eq!(encode(&first).unwrap(), r#"{"a":4,"b":2}"#);
    let mut again = first;
    again.push(Term::List(vec![p("b", 5)]));
    again.push(arg(r#"{"c":1}"#));
    assert_eq!(
        json(reduce(ReduceFun::PlistSum, &again)),
        r#"{"a":4,"b":7,"c":1}"#
    );
    assert_eq!(json(reduce(ReduceFun::PlistSum, &[])), "[]");
    assert!(reduce(ReduceFun::PlistSum, &[Term::bin("x")]).is_err());
    assert!(reduce(
        ReduceFun::PlistSum,
        &[Term::pair(Term::bin("a"), Term::bin("x"))]
    )
    .is_err());
}

#[test]
fn reduce_batch_sizes() {
    assert_eq!(reduce_batch(&Term::Atom("none")), Some(20));
    assert_eq!(reduce_batch(&arg(r#"{"reduce_phase_only_1":true}"#)), None);
    assert_eq!(
        reduce_batch(&arg(r#"{"reduce_phase_batch_size":5}"#)),
        Some(5)
    );
    assert_eq!(
        reduce_batch(&arg(r#"{"reduce_phase_batch_size":0}"#)),
        Some(1)
    );
}
