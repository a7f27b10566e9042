//! Property sets, their defaults and Riak's validation rules.

use crate::quorum::Quorum;
use serde_json::{json, Map, Value};
use std::fmt;

/// A set of bucket properties by name, ordered by name.
pub type Props = Map<String, Value>;

/// The data types a bucket type may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    Counter,
    Set,
    Map,
    Hll,
    Gset,
}

impl Datatype {
    pub fn parse(s: &str) -> Option<Datatype> {
        Some(match s {
            "counter" => Datatype::Counter,
            "set" => Datatype::Set,
            "map" => Datatype::Map,
            "hll" => Datatype::Hll,
            "gset" => Datatype::Gset,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Datatype::Counter => "counter",
            Datatype::Set => "set",
            Datatype::Map => "map",
            Datatype::Hll => "hll",
            Datatype::Gset => "gset",
        }
    }
}

fn common() -> Props {
    let v = json!({
        "basic_quorum": false,
        "big_vclock": 50,
        "chash_keyfun": {"mod": "riak_core_util", "fun": "chash_std_keyfun"},
        "dw": "quorum",
        "last_write_wins": false,
        "linkfun": {"mod": "riak_kv_wm_link_walker", "fun": "mapreduce_linkfun"},
        "n_val": 3,
        "notfound_ok": true,
        "old_vclock": 86400,
        "postcommit": [],
        "pr": 0,
        "precommit": [],
        "pw": 0,
        "r": "quorum",
        "rw": "quorum",
        "small_vclock": 50,
        "sync_on_write": "backend",
        "w": "quorum",
        "young_vclock": 20,
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// The properties of a bucket of the default type nobody has changed
/// (Riak 3.x out of the box, without `name`).
pub fn default_type_props() -> Props {
    let mut p = common();
    p.insert("allow_mult".into(), false.into());
    p.insert("dvv_enabled".into(), false.into());
    p.insert("node_confirms".into(), 0.into());
    p.insert("write_once".into(), false.into());
    p
}

/// One property of [`default_type_props`], built once.
pub fn default_type_prop(name: &str) -> Option<&'static Value> {
    static DEFAULTS: std::sync::OnceLock<Props> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(default_type_props).get(name)
}

/// What a new bucket type starts from before its own properties.
pub fn new_type_defaults() -> Props {
    let mut p = common();
    p.insert("allow_mult".into(), true.into());
    p.insert("dvv_enabled".into(), true.into());
    p.insert("node_confirms".into(), 0.into());
    p
}

/// A refusal, with Riak's wording.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropsError {
    /// Riak: `Invalid bucket properties: [{n_val,not_integer}]`.
    #[error("Invalid bucket properties: [{}]", format_reasons(.0))]
    Invalid(Vec<(String, Reason)>),
}

impl PropsError {
    pub fn reasons(&self) -> &[(String, Reason)] {
        match self {
            PropsError::Invalid(r) => r,
        }
    }
}

/// Why one property was refused: an Erlang atom (printed bare) or a
/// sentence (printed in double quotes, as Riak's `~p` does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    Atom(&'static str),
    Text(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Atom(a) => f.write_str(a),
            Reason::Text(t) => write!(f, "{t:?}"),
        }
    }
}

fn format_reasons(r: &[(String, Reason)]) -> String {
    r.iter()
        .map(|(p, why)| format!("{{{p},{why}}}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        Value::Number(n) => n.as_i64().map(|n| n != 0),
        _ => None,
    }
}

fn as_int(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Checks `update` against Riak's rules, given the properties in force
/// now (`current`: the type's or the bucket's resolved properties), and
/// returns the properties after the update. `creating_type` is true when
/// `current` holds only defaults for a type being created.
pub fn validate(current: &Props, update: &Props, creating_type: bool) -> Result<Props, PropsError> {
    let mut errors: Vec<(String, Reason)> = Vec::new();
    let mut merged = current.clone();
    for (name, value) in update {
        let err = |r: Reason| (name.clone(), r);
        let normalised: Result<Value, (String, Reason)> = match name.as_str() {
            "allow_mult" | "basic_quorum" | "last_write_wins" | "notfound_ok" | "stat_tracked"
            | "dvv_enabled" | "search" => as_bool(value)
                .map(Value::from)
                .ok_or_else(|| err(Reason::Atom("not_boolean"))),
            "n_val" | "old_vclock" | "young_vclock" | "big_vclock" | "small_vclock" => {
                // Pruning thresholds may be 0 (prune at once); n_val not.
                as_int(value)
                    .filter(|n| (*n > 0 || name != "n_val") && *n <= u32::MAX as u64)
                    .map(Value::from)
                    .ok_or_else(|| err(Reason::Atom("not_integer")))
            }
            "r" | "rw" | "w" => Quorum::from_json(value)
                .filter(|q| *q != Quorum::N(0))
                .map(Quorum::to_json)
                .ok_or_else(|| err(Reason::Atom("not_valid_quorum"))),
            "dw" | "pw" | "pr" | "node_confirms" => Quorum::from_json(value)
                .map(Quorum::to_json)
                .ok_or_else(|| err(Reason::Atom("not_valid_quorum"))),
            "sync_on_write" => match value.as_str() {
                Some("one" | "all" | "backend") => Ok(value.clone()),
                _ => Err(err(Reason::Atom("not_valid_sync_param"))),
            },
            "hll_precision" => match as_int(value) {
                Some(p @ 4..=16) => Ok(p.into()),
                _ => Err(err(Reason::Text(hll_precision_text(value)))),
            },
            "datatype" | "consistent" | "write_once" => Ok(value.clone()),
            _ => Ok(value.clone()),
        };
        match normalised {
            Ok(v) => {
                merged.insert(name.clone(), v);
            }
            Err(e) => errors.push(e),
        }
    }
    check_datatype(current, update, &mut merged, creating_type, &mut errors);
    check_write_once_and_consistent(current, update, creating_type, &mut errors);
    if let Some(p) = update.get("hll_precision").and_then(as_int) {
        if let Some(old) = current.get("hll_precision").and_then(as_int) {
            if !creating_type && p > old {
                errors.push((
                    "hll_precision".into(),
                    Reason::Text(hll_precision_text(&p.into())),
                ));
            }
        }
    }
    // A numeric quorum larger than n_val can never be met.
    let n_val = merged.get("n_val").and_then(as_int).unwrap_or(3);
    for q in ["r", "w", "dw", "rw", "pr", "pw"] {
        if let Some(Quorum::N(v)) = merged.get(q).and_then(Quorum::from_json) {
            if u64::from(v) > n_val && (update.contains_key(q) || update.contains_key("n_val")) {
                errors.push((
                    q.to_string(),
                    Reason::Text(format!(
                        "{q} = {v} exceeds n_val = {n_val}: it could never be met"
                    )),
                ));
            }
        }
    }
    let lww = merged.get("last_write_wins").and_then(as_bool) == Some(true);
    let dvv = merged.get("dvv_enabled").and_then(as_bool) == Some(true);
    if lww && dvv && update.contains_key("last_write_wins") {
        errors.push((
            "dvv_enabled".into(),
            Reason::Text("If last_write_wins is true, dvv_enabled must be false".into()),
        ));
    }
    if errors.is_empty() {
        Ok(merged)
    } else {
        Err(PropsError::Invalid(errors))
    }
}

fn hll_precision_text(v: &Value) -> String {
    format!(
        "{v} not supported for Hyperloglog precision property for bucket type. Precision must be \
         an integer between 4 and 16, inclusive (3 < p < 17) and precision can be reduced but \
         never increased after initial setting"
    )
}

fn check_datatype(
    current: &Props,
    update: &Props,
    merged: &mut Props,
    creating_type: bool,
    errors: &mut Vec<(String, Reason)>,
) {
    let old = current
        .get("datatype")
        .and_then(Value::as_str)
        .map(str::to_string);
    let new = update.get("datatype");
    let name_of = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    };
    let unsupported = |v: &Value| {
        (
            "datatype".to_string(),
            Reason::Text(format!(
                "{} not supported for bucket datatype property",
                name_of(v)
            )),
        )
    };
    let must_allow_mult = || {
        (
            "allow_mult".to_string(),
            Reason::Text("Data Type buckets must be allow_mult=true".into()),
        )
    };
    if creating_type {
        let Some(v) = new else { return };
        match v.as_str().and_then(Datatype::parse) {
            None => errors.push(unsupported(v)),
            Some(dt) => {
                if merged.get("allow_mult").and_then(as_bool) != Some(true) {
                    errors.push(must_allow_mult());
                }
                if dt == Datatype::Hll && !merged.contains_key("hll_precision") {
                    merged.insert("hll_precision".into(), 14.into());
                }
            }
        }
        return;
    }
    match (old, new) {
        (None, Some(_)) => errors.push((
            "datatype".into(),
            Reason::Text("`datatype` must not be defined.".into()),
        )),
        (Some(old), new) => {
            if let Some(v) = new.filter(|v| v.as_str() != Some(old.as_str())) {
                errors.push(unsupported(v));
            }
            if update.get("allow_mult").and_then(as_bool) == Some(false) {
                errors.push(must_allow_mult());
            }
        }
        (None, None) => {}
    }
}

fn check_write_once_and_consistent(
    current: &Props,
    update: &Props,
    creating_type: bool,
    errors: &mut Vec<(String, Reason)>,
) {
    if creating_type {
        if update.get("write_once").and_then(as_bool) == Some(true)
            && update.contains_key("datatype")
        {
            errors.push((
                "write_once".into(),
                Reason::Text("Write once buckets must not have datatype defined".into()),
            ));
        }
        return;
    }
    let was = |p: &str| current.get(p).and_then(as_bool) == Some(true);
    let asks = |p: &str| update.get(p).and_then(as_bool);
    match (was("write_once"), asks("write_once")) {
        (false, Some(true)) => errors.push((
            "write_once".into(),
            Reason::Text("Cannot set existing bucket type to `write_once`".into()),
        )),
        (true, Some(false)) => errors.push((
            "write_once".into(),
            Reason::Text("Cannot modify write_once property once set to true".into()),
        )),
        _ => {}
    }
    if let Some(c) = asks("consistent") {
        if c != was("consistent") {
            errors.push((
                "consistent".into(),
                Reason::Text("cannot update consistent property".into()),
            ));
        }
    }
    if was("consistent") {
        if let Some(n) = update.get("n_val").and_then(as_int) {
            if Some(n) != current.get("n_val").and_then(as_int) {
                errors.push((
                    "n_val".into(),
                    Reason::Text("n_val cannot be modified for existing consistent type".into()),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(v: Value) -> Props {
        match v {
            Value::Object(m) => m,
            _ => panic!(),
        }
    }

    #[test]
    fn riak_error_texts() {
        let cur = default_type_props();
        let e = validate(&cur, &props(json!({"n_val": "three"})), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid bucket properties: [{n_val,not_integer}]"
        );
        let e = validate(&cur, &props(json!({"allow_mult": 7.5})), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid bucket properties: [{allow_mult,not_boolean}]"
        );
        let e = validate(&cur, &props(json!({"r": "most"})), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid bucket properties: [{r,not_valid_quorum}]"
        );
    }

    #[test]
    fn datatype_types() {
        let d = new_type_defaults();
        let t = validate(&d, &props(json!({"datatype": "hll"})), true).unwrap();
        assert_eq!(t["hll_precision"], 14);
        let e = validate(&d, &props(json!({"datatype": "woo"})), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Invalid bucket properties: [{datatype,\"woo not supported for bucket datatype property\"}]"
        );
        let e = validate(
            &d,
            &props(json!({"datatype": "set", "allow_mult": false})),
            true,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("Data Type buckets must be allow_mult=true"),
            "{e}"
        );
        let sets = validate(&d, &props(json!({"datatype": "set"})), true).unwrap();
        let e = validate(&sets, &props(json!({"datatype": "map"})), false).unwrap_err();
        assert!(e.to_string().contains("map not supported"), "{e}");
        assert!(validate(&sets, &props(json!({"datatype": "set", "n_val": 2})), false).is_ok());
        let e = validate(&d, &props(json!({"datatype": "set"})), false).unwrap_err();
        assert!(
            e.to_string().contains("`datatype` must not be defined."),
            "{e}"
        );
        let hll = validate(
            &d,
            &props(json!({"datatype": "hll", "hll_precision": 12})),
            true,
        )
        .unwrap();
        assert!(validate(&hll, &props(json!({"hll_precision": 13})), false).is_err());
        assert!(validate(&hll, &props(json!({"hll_precision": 11})), false).is_ok());
    }

    #[test]
    fn values_are_normalised() {
        let p = validate(
            &default_type_props(),
            &props(json!({"allow_mult": "true", "n_val": "2", "w": "all", "pr": 1})),
            false,
        )
        .unwrap();
        assert_eq!(p["allow_mult"], true);
        assert_eq!(p["n_val"], 2);
        assert_eq!(p["w"], "all");
        assert_eq!(p["pr"], 1);
    }

    #[test]
    fn quorums_cannot_exceed_n_val() {
        let cur = default_type_props();
        let e = validate(&cur, &props(json!({"r": 5})), false).unwrap_err();
        assert!(e.to_string().contains("r = 5 exceeds n_val = 3"), "{e}");
        let with_w = validate(&cur, &props(json!({"w": 3})), false).unwrap();
        assert!(validate(&with_w, &props(json!({"n_val": 2})), false).is_err());
        assert!(validate(
            &cur,
            &props(json!({"r": "all", "n_val": 5, "pw": 5})),
            false
        )
        .is_ok());
    }

    #[test]
    fn last_write_wins_needs_dvv_off() {
        let t = new_type_defaults();
        assert!(validate(&t, &props(json!({"last_write_wins": true})), false).is_err());
        assert!(validate(
            &t,
            &props(json!({"last_write_wins": true, "dvv_enabled": false})),
            false
        )
        .is_ok());
        assert!(validate(
            &default_type_props(),
            &props(json!({"last_write_wins": true})),
            false
        )
        .is_ok());
    }
}
