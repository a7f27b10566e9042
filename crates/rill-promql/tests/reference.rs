//! Prometheus's own PromQL tests, evaluated in process over samples in
//! memory: a quick view while developing (the test through the node's
//! HTTP API is in the `rill` crate, and fetches the data). Finds the
//! test data of Prometheus 3.5 in the Go module cache; skipped when it
//! is not there. An evaluation whose expected answer, or whose
//! selectors' series, hold native histograms is out of scope (Rill
//! stores floats) and counted apart. `PROMQL_VERBOSE=1` prints each
//! failure.

use rill_promql::eval::{self, Options, Source};
use rill_promql::promqltest::{
    judge, over_histograms, parse_file, Command, EvalKind, FILES, MODULE,
};
use rill_promql::value::{Series, Value};
use rill_promql::Matcher;

struct Mem(Vec<Series>);

impl Source for Mem {
    fn select(&self, m: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        Ok(self
            .0
            .iter()
            .filter(|s| m.iter().all(|x| x.matches(s.labels.value(&x.label))))
            .map(|s| Series {
                labels: s.labels.clone(),
                points: s
                    .points
                    .iter()
                    .copied()
                    .filter(|p| p.t >= mint && p.t <= maxt)
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect())
    }
}

fn data_dir() -> Option<std::path::PathBuf> {
    let home = std::env::var("GOMODCACHE").ok().or_else(|| {
        std::env::var("HOME")
            .ok()
            .map(|h| format!("{h}/go/pkg/mod"))
    })?;
    let d = std::path::PathBuf::from(home)
        .join(MODULE)
        .join("promql/promqltest/testdata");
    d.is_dir().then_some(d)
}

#[test]
fn reference_suite_in_process() {
    let Some(dir) = data_dir() else {
        eprintln!("no Prometheus test data in the Go module cache; skipped");
        return;
    };
    let verbose = std::env::var("PROMQL_VERBOSE").is_ok();
    let mut total = (0, 0);
    for name in FILES {
        let text = std::fs::read_to_string(dir.join(format!("{name}.test"))).unwrap();
        let cmds = parse_file(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut mem = Mem(Vec::new());
        let mut hist: Vec<rill_promql::value::Labels> = Vec::new();
        let (mut pass, mut fail, mut skip) = (0, 0, 0);
        for c in cmds {
            match c {
                Command::Clear => {
                    mem.0.clear();
                    hist.clear();
                }
                Command::Load {
                    series, histograms, ..
                } => {
                    mem.0.extend(series);
                    hist.extend(histograms);
                }
                Command::Eval(e) => {
                    if over_histograms(&e, &hist) {
                        skip += 1;
                        continue;
                    }
                    let r = rill_promql::parse(&e.query)
                        .map_err(|x| x.to_string())
                        .and_then(|q| {
                            let o = Options::default();
                            match e.kind {
                                EvalKind::Instant(t) => eval::instant(&mem, &q, t, &o),
                                EvalKind::Range(s, t, st) => {
                                    eval::range(&mem, &q, s, t, st, &o).map(Value::Matrix)
                                }
                            }
                            .map_err(|x| x.to_string())
                        });
                    let outcome = judge(&e, r);
                    match outcome {
                        Ok(()) => pass += 1,
                        Err(why) => {
                            fail += 1;
                            if verbose {
                                eprintln!("{name}:{} {}\n    {why}", e.line, e.query);
                            }
                        }
                    }
                }
            }
        }
        eprintln!("{name}: {pass} passed, {fail} failed, {skip} over native histograms");
        total.0 += pass;
        total.1 += fail;
    }
    let (pass, fail) = total;
    assert!(
        pass * 100 >= (pass + fail) * 95,
        "{pass} of {} float evaluations pass",
        pass + fail
    );
}
