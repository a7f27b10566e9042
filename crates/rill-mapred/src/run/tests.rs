use super::*;
use crate::job::parse_job;
use crate::json::encode;
use proptest::prelude::*;
use rill_object::{Content, Link, Metadata};
use std::collections::BTreeMap;

type Key = (Option<Vec<u8>>, Vec<u8>, Vec<u8>);

/// A store in a map: keys listed in order, in batches of 7.
#[derive(Default)]
struct Model {
    objects: BTreeMap<Key, Object>,
    indexes: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>>,
    wait_for_deadline: bool,
    fetched: std::cell::Cell<usize>,
}

impl Model {
    fn put(&mut self, b: &str, k: &str, v: &str) {
        self.put_in(None, b, k, v, &[]);
    }

    fn put_in(&mut self, t: Option<&str>, b: &str, k: &str, v: &str, links: &[(&str, &str, &str)]) {
        let meta = Metadata {
            links: links
                .iter()
                .map(|(b, k, t)| Link {
                    bucket: b.as_bytes().to_vec(),
                    key: k.as_bytes().to_vec(),
                    tag: t.as_bytes().to_vec(),
                })
                .collect(),
            ..Metadata::default()
        };
        let key = (
            t.map(|t| t.as_bytes().to_vec()),
            b.as_bytes().to_vec(),
            k.as_bytes().to_vec(),
        );
        self.objects.insert(
            key,
            Object {
                clock: Default::default(),
                contents: vec![Content::new(v.to_string(), meta)],
            },
        );
    }
}

impl Source for Model {
    type Error = std::convert::Infallible;

    fn list_keys(
        &self,
        bucket_type: Option<&[u8]>,
        bucket: &[u8],
        deadline: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), Self::Error> {
        if self.wait_for_deadline {
            while Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        let keys: Vec<Vec<u8>> = self
            .objects
            .keys()
            .filter(|(t, b, _)| t.as_deref() == bucket_type && b == bucket)
            .map(|(_, _, k)| k.clone())
            .collect();
        for c in keys.chunks(7) {
            if !each(c.to_vec()) {
                break;
            }
        }
        Ok(())
    }

    fn index(
        &self,
        _: Option<&[u8]>,
        _: &[u8],
        index: &[u8],
        query: &IndexQuery,
        _: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), Self::Error> {
        let (lo, hi) = match query {
            IndexQuery::Eq(v) => (v.clone(), v.clone()),
            IndexQuery::Range(a, b) => (a.clone(), b.clone()),
        };
        let keys = self
            .indexes
            .iter()
            .filter(|((f, t), _)| f == index && *t >= lo && *t <= hi)
            .map(|(_, k)| k.clone())
            .collect();
        each(keys);
        Ok(())
    }

    fn fetch(&self, keys: &[BKey], _: Instant) -> Result<Vec<Option<Object>>, Self::Error> {
        self.fetched.set(self.fetched.get() + keys.len());
        Ok(keys
            .iter()
            .map(|k| {
                self.objects
                    .get(&(k.bucket_type.clone(), k.bucket.clone(), k.key.clone()))
                    .cloned()
            })
            .collect())
    }
}

/// Runs a job and gives each phase's results as one JSON text.
fn answer(
    model: &Model,
    job: &str,
) -> Result<BTreeMap<usize, String>, RunError<std::convert::Infallible>> {
    let job = parse_job(job.as_bytes()).expect("a good job");
    let mut out: BTreeMap<usize, Vec<Term>> = BTreeMap::new();
    run(&job, model, &mut |phase, items| {
        out.entry(phase).or_default().extend(items);
        true
    })?;
    Ok(out
        .into_iter()
        .map(|(p, v)| (p, encode(&v).unwrap()))
        .collect())
}

const MAP_VALUE: &str =
    r#"{"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value"}}"#;

fn reduce(f: &str, keep: bool) -> String {
    format!(
        r#"{{"reduce":{{"language":"erlang","module":"riak_kv_mapreduce","function":"{f}","keep":{keep}}}}}"#
    )
}

#[test]
fn phaseless_jobs_give_their_inputs_back() {
    let mut m = Model::default();
    m.put("b", "k1", "1");
    m.put_in(Some("t"), "b", "k2", "2", &[]);
    m.indexes
        .insert((b"f_int".to_vec(), b"5".to_vec()), b"k1".to_vec());
    let a = answer(&m, r#"{"inputs":"b","query":[]}"#).unwrap();
    assert_eq!(a[&0], r#"[["b","k1"]]"#);
    let a = answer(&m, r#"{"inputs":["t","b"],"query":[]}"#).unwrap();
    assert_eq!(a[&0], r#"[["b","k2",null,"t"]]"#);
    let a = answer(
        &m,
        r#"{"inputs":{"bucket":"b","index":"f_int","key":5},"query":[]}"#,
    )
    .unwrap();
    assert_eq!(a[&0], r#"[["b","k1"]]"#);
    let a = answer(
        &m,
        r#"{"inputs":[["b","x"],["b","y",null],["b","z",7,"t"]],"query":[]}"#,
    )
    .unwrap();
    assert_eq!(a[&0], r#"[["b","x"],["b","y",null],["b","z",7,"t"]]"#);
}

#[test]
fn map_then_reduce_as_the_client_suites_run_them() {
    let mut m = Model::default();
    m.put("b", "foo", "2");
    m.put("b", "bar", "2");
    m.put("b", "baz", "4");
    m.put_in(Some("no_siblings"), "b", "foo", "2", &[]);
    let job = format!(
        r#"{{"inputs":[["b","foo",null],["b","bar",null],["b","baz",null]],"query":[{MAP_VALUE},{}]}}"#,
        reduce("reduce_set_union", true)
    );
    assert_eq!(answer(&m, &job).unwrap()[&1], r#"["2","4"]"#);
    let job = format!(
        r#"{{"inputs":[["b","foo",null,"no_siblings"]],"query":[{MAP_VALUE},{}]}}"#,
        reduce("reduce_count_inputs", true)
    );
    assert_eq!(answer(&m, &job).unwrap()[&1], "[1]");
}

#[test]
fn re_reduce_over_many_inputs_and_kept_phases() {
    let mut m = Model::default();
    for i in 0..250 {
        m.put("n", &format!("k{i:03}"), &i.to_string());
    }
    let job = format!(
        r#"{{"inputs":"n","query":[{},{},{}]}}"#,
        MAP_VALUE.replace("}}", r#","keep":true}}"#),
        reduce("reduce_string_to_integer", false),
        reduce("reduce_sum", true)
    );
    let a = answer(&m, &job).unwrap();
    assert_eq!(a[&2], format!("[{}]", (0..250).sum::<i32>()));
    assert_eq!(a[&0].matches(',').count(), 249, "every map result kept");
    assert!(!a.contains_key(&1));
    let job = format!(
        r#"{{"inputs":"n","query":[{}]}}"#,
        reduce("reduce_count_inputs", true)
    );
    assert_eq!(answer(&m, &job).unwrap()[&0], "[250]");
    let job = format!(
        r#"{{"inputs":{{"bucket":"n","key_filters":[["tokenize","k",1],["string_to_int"],["less_than",10]]}},"query":[{}]}}"#,
        reduce("reduce_count_inputs", true)
    );
    assert_eq!(answer(&m, &job).unwrap()[&0], "[10]");
}

#[test]
fn a_reduce_with_no_inputs_runs_once_on_nothing() {
    let m = Model::default();
    let job = format!(
        r#"{{"inputs":"empty","query":[{}]}}"#,
        reduce("reduce_sum", true)
    );
    assert_eq!(answer(&m, &job).unwrap()[&0], "[0]");
}

#[test]
fn links_then_values() {
    let mut m = Model::default();
    m.put_in(
        None,
        "people",
        "alice",
        "a",
        &[("people", "bob", "friend"), ("people", "carol", "boss")],
    );
    m.put("people", "bob", "b");
    m.put("people", "carol", "c");
    let a = answer(
        &m,
        r#"{"inputs":[["people","alice"]],"query":[{"link":{"bucket":"people","tag":"_"}}]}"#,
    )
    .unwrap();
    assert_eq!(
        a[&0],
        r#"[["people","bob","friend"],["people","carol","boss"]]"#
    );
    let job = format!(
        r#"{{"inputs":[["people","alice"]],"query":[{{"link":{{"tag":"friend"}}}},{MAP_VALUE}]}}"#
    );
    assert_eq!(answer(&m, &job).unwrap()[&1], r#"["b"]"#);
    let a = answer(
        &m,
        r#"{"inputs":[["people","nobody"]],"query":[{"link":{}}]}"#,
    )
    .unwrap();
    assert!(a.is_empty());
}

#[test]
fn failures_name_the_phase_and_the_input() {
    let mut m = Model::default();
    m.put("b", "k", "v");
    let job = format!(r#"{{"inputs":[["b","k"],["b","missing"]],"query":[{MAP_VALUE}]}}"#);
    match answer(&m, &job).unwrap_err() {
        RunError::Phase {
            phase,
            error,
            input,
        } => {
            assert_eq!(phase, 0);
            assert!(error.to_string().contains("filter_notfound"), "{error}");
            assert!(input.contains("missing"), "{input}");
        }
        e => panic!("{e:?}"),
    }
    let job = format!(
        r#"{{"inputs":[["b","k"]],"query":[{MAP_VALUE},{}]}}"#,
        reduce("reduce_sum", true)
    );
    let e = answer(&m, &job).unwrap_err();
    assert!(matches!(&e, RunError::Phase { phase: 1, .. }), "{e:?}");
    assert!(e.to_json().contains("\"phase\":1"));
    let job = r#"{"inputs":{"bucket":"b","key_filters":[["string_to_int"]]},"query":[]}"#;
    assert!(matches!(
        answer(&m, job).unwrap_err(),
        RunError::KeyFilter(_)
    ));
}

#[test]
fn a_job_past_its_time_stops_with_timeout() {
    let mut m = Model {
        wait_for_deadline: true,
        ..Model::default()
    };
    m.put("b", "k", "v");
    let job = r#"{"inputs":"b","query":[],"timeout":5}"#;
    assert_eq!(answer(&m, job).unwrap_err(), RunError::Timeout);
    assert_eq!(
        RunError::<std::convert::Infallible>::Timeout.to_json(),
        r#"{"error":"timeout"}"#
    );
}

#[test]
fn a_sink_that_stops_listening_ends_the_job() {
    let mut m = Model::default();
    for i in 0..1000 {
        m.put("b", &format!("{i:04}"), "v");
    }
    let job = parse_job(format!(r#"{{"inputs":"b","query":[{MAP_VALUE}]}}"#).as_bytes()).unwrap();
    let mut calls = 0;
    run(&job, &m, &mut |_, _| {
        calls += 1;
        false
    })
    .unwrap();
    assert_eq!(calls, 1);
    assert!(m.fetched.get() <= BATCH, "read {} objects", m.fetched.get());
}

/// A client gone away stops a job whose only kept phase is its last:
/// it is asked between inputs, not only when there are results.
#[test]
fn a_cancelled_job_stops_reading() {
    struct Gone<'a>(&'a std::cell::Cell<usize>);
    impl Sink for Gone<'_> {
        fn results(&mut self, _: usize, _: Vec<Term>) -> bool {
            true
        }
        fn cancelled(&self) -> bool {
            self.0.get() >= 250
        }
    }
    let mut m = Model::default();
    for i in 0..1000 {
        m.put("b", &format!("{i:04}"), "v");
    }
    let job = format!(
        r#"{{"inputs":"b","query":[{MAP_VALUE},{}]}}"#,
        reduce("reduce_count_inputs", true)
    );
    let job = parse_job(job.as_bytes()).unwrap();
    run(&job, &m, &mut Gone(&m.fetched)).unwrap();
    assert!(
        m.fetched.get() <= 300,
        "read {} objects after the client left",
        m.fetched.get()
    );
}

/// The longest chain of phases a job may have runs on a blocking
/// thread's 2 MiB stack, each phase handing every input on (a missing
/// key given back by `{"sub": ...}`); a longer one is refused.
#[test]
fn the_longest_chain_of_phases_fits_a_small_stack() {
    let phase = r#"{"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value","arg":{"sub":[["b","x"]]}}}"#;
    let chain = |n: usize| {
        format!(
            r#"{{"inputs":[["b","x"]],"query":[{}]}}"#,
            vec![phase; n].join(",")
        )
    };
    let long = chain(crate::job::MAX_PHASES);
    let a = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || answer(&Model::default(), &long).unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(a[&(crate::job::MAX_PHASES - 1)], r#"[["b","x"]]"#);
    let e = parse_job(chain(crate::job::MAX_PHASES + 1).as_bytes()).unwrap_err();
    assert!(e.to_string().contains("phases"), "{e}");
}

/// One input that gives many results (a `sub` list) is handed on in
/// batches, and the job's time is looked at between them.
#[test]
fn a_flood_of_results_is_batched_and_timed() {
    let ones = vec!["1"; 5000].join(",");
    let job = format!(
        r#"{{"inputs":[["b","x"],["b","y"]],"query":[{{"map":{{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value","arg":{{"sub":[{ones}]}},"keep":true}}}},{}]}}"#,
        reduce("reduce_sum", true)
    );
    let job = parse_job(job.as_bytes()).unwrap();
    let mut largest = 0;
    let mut sum = None;
    run(&job, &Model::default(), &mut |phase, items: Vec<Term>| {
        if phase == 0 {
            largest = largest.max(items.len());
        } else {
            sum = Some(encode(&items).unwrap());
        }
        true
    })
    .unwrap();
    assert!(largest <= BATCH, "a batch of {largest}");
    assert_eq!(sum.as_deref(), Some("[10000]"));
}

proptest! {
    /// Whatever the batch size, a reduce over its own output (re-reduce)
    /// gives what one call over everything gives.
    #[test]
    fn re_reduce_equals_one_reduce(values in proptest::collection::vec(-1000i64..1000, 0..120), batch in 1usize..30) {
        let mut m = Model::default();
        for (i, v) in values.iter().enumerate() {
            m.put("b", &format!("{i:04}"), &v.to_string());
        }
        let arg = format!(r#"{{"reduce_phase_batch_size":{batch}}}"#);
        let job = format!(
            r#"{{"inputs":"b","query":[{MAP_VALUE},{{"reduce":{{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_string_to_integer","arg":{arg}}}}},{{"reduce":{{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_sum","arg":{arg},"keep":true}}}},{{"reduce":{{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_count_inputs","arg":{arg},"keep":true}}}}]}}"#
        );
        let a = answer(&m, &job).unwrap();
        prop_assert_eq!(&a[&2], &format!("[{}]", values.iter().sum::<i64>()));
        let job = format!(
            r#"{{"inputs":"b","query":[{MAP_VALUE},{{"reduce":{{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_count_inputs","arg":{arg}}}}}]}}"#
        );
        prop_assert_eq!(&answer(&m, &job).unwrap()[&1], &format!("[{}]", values.len()));
        let job = format!(
            r#"{{"inputs":"b","query":[{MAP_VALUE},{{"reduce":{{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_set_union","arg":{arg}}}}}]}}"#
        );
        let mut expect: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        expect.sort();
        expect.dedup();
        let got = a_strings(&answer(&m, &job).unwrap().get(&1).cloned().unwrap_or_else(|| "[]".into()));
        prop_assert_eq!(got, expect);
    }
}

fn a_strings(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap()
}
