use super::*;

fn job(s: &str) -> Result<Job, JobError> {
    parse_job(s.as_bytes())
}

#[test]
fn every_input_form() {
    let j = job(r#"{"inputs":"b","query":[]}"#).unwrap();
    assert!(
        matches!(j.inputs, Inputs::Bucket { bucket_type: None, ref bucket, .. } if bucket == b"b")
    );
    assert_eq!(j.timeout, DEFAULT_TIMEOUT);
    let j = job(r#"{"inputs":["t","b"],"query":[],"timeout":5000}"#).unwrap();
    assert!(matches!(j.inputs, Inputs::Bucket { bucket_type: Some(ref t), .. } if t == b"t"));
    assert_eq!(j.timeout, Duration::from_millis(5000));
    let j =
        job(r#"{"inputs":[["b","k"],["b","k2",{"x":1}],["b","k3",null,"t"]],"query":[]}"#).unwrap();
    let Inputs::Keys(k) = j.inputs else { panic!() };
    assert_eq!(k.len(), 3);
    let j = job(r#"{"inputs":{"bucket":"b","key_filters":[["eq","x"]]},"query":[]}"#).unwrap();
    assert!(matches!(j.inputs, Inputs::Bucket { ref filters, .. } if filters.len() == 1));
    let j =
        job(r#"{"inputs":{"bucket":["t","b"],"index":"f_int","key":1337},"query":[]}"#).unwrap();
    assert!(
        matches!(j.inputs, Inputs::Index { query: IndexQuery::Eq(ref v), bucket_type: Some(_), .. } if v == b"1337")
    );
    let j = job(r#"{"inputs":{"bucket":"b","index":"f_int","start":"9","end":-2},"query":[]}"#)
        .unwrap();
    assert!(
        matches!(j.inputs, Inputs::Index { query: IndexQuery::Range(ref a, ref b), .. } if a == b"-2" && b == b"9"),
        "a range given backwards is turned round"
    );
    let j = job(r#"{"inputs":{"bucket":"b","index":"f_bin","start":"a","end":"a"},"query":[]}"#)
        .unwrap();
    assert!(matches!(
        j.inputs,
        Inputs::Index {
            query: IndexQuery::Eq(_),
            ..
        }
    ));
}

#[test]
fn bad_inputs_say_what_is_wrong() {
    for (body, says) in [
        ("nope", "not valid JSON"),
        ("[]", "JSON object"),
        (r#"{"inputs":"b"}"#, "both"),
        (r#"{"inputs":[],"query":[]}"#, "No inputs were given"),
        (
            r#"{"inputs":[["b"]],"query":[]}"#,
            "Unrecognized format of \"inputs\"",
        ),
        (
            r#"{"inputs":{"bucket":"b"},"query":[]}"#,
            "Unrecognized format",
        ),
        (
            r#"{"inputs":{"bucket":"b","query":"x"},"query":[]}"#,
            "search not enabled",
        ),
        (
            r#"{"inputs":{"module":"m","function":"f","arg":1},"query":[]}"#,
            "not supported",
        ),
        (
            r#"{"inputs":{"bucket":"b","index":"f_int","key":"x"},"query":[]}"#,
            "field_parsing_failed",
        ),
        (
            r#"{"inputs":{"bucket":"b","key_filters":[["nope"]]},"query":[]}"#,
            "unknown key filter",
        ),
        (r#"{"inputs":"b","query":{}}"#, "was not a list"),
        (
            r#"{"inputs":"b","query":[{"map":{},"reduce":{}}]}"#,
            "Unrecognized format of query phase",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","keep":1}}]}"#,
            "boolean",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"module":"m"}}]}"#,
            "No \"language\"",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"cobol"}}]}"#,
            "Unknown language",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"erlang"}}]}"#,
            "No function",
        ),
        (
            r#"{"inputs":"b","query":[{"link":{"bucket":1}}]}"#,
            "string values",
        ),
    ] {
        let e = job(body).unwrap_err();
        assert!(
            matches!(e, JobError::Parse(_) | JobError::KeyFilters(_)),
            "{body}: {e:?}"
        );
        assert!(e.to_string().contains(says), "{body}: {e}");
    }
}

#[test]
fn phases_riak_3_does_not_run_are_refused_by_phase() {
    for (body, phase, says) in [
        (
            r#"{"inputs":"b","query":[{"map":{"language":"javascript","name":"Riak.mapValuesJson"}}]}"#,
            0,
            "JavaScript",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value"}},{"reduce":{"language":"javascript","source":"function(v){return v}"}}]}"#,
            1,
            "JavaScript",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","source":"fun(O,_,_) -> [O] end."}}]}"#,
            0,
            "worker_startup_failed",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","module":"lists","function":"reverse"}}]}"#,
            0,
            "lists",
        ),
        (
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_sum"}}]}"#,
            0,
            "reduce_sum/3 is not exported",
        ),
    ] {
        match job(body).unwrap_err() {
            JobError::Phase(i, m) => {
                assert_eq!(i, phase, "{body}");
                assert!(m.contains(says), "{body}: {m}");
            }
            e => panic!("{body}: {e:?}"),
        }
    }
}

#[test]
fn keep_defaults_to_the_last_phase_and_args_are_terms() {
    let j = job(
        r#"{"inputs":"b","query":[
            {"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value","arg":"filter_notfound"}},
            {"link":{"bucket":"_","tag":"friend"}},
            {"reduce":{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_sum","keep":false}},
            {"reduce":{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_count_inputs"}}]}"#,
    )
    .unwrap();
    let keeps: Vec<bool> = j.phases.iter().map(|p| p.keep).collect();
    assert_eq!(keeps, [false, false, false, true]);
    assert!(
        matches!(&j.phases[0].kind, PhaseKind::Map(_, Term::Bin(a)) if &a[..] == b"filter_notfound")
    );
    assert!(
        matches!(&j.phases[1].kind, PhaseKind::Link { bucket: None, tag: Some(t) } if t == b"friend")
    );
    assert!(matches!(
        &j.phases[3].kind,
        PhaseKind::Reduce(_, Term::Atom("none"))
    ));
}
