//! The sensor-data service through the real binary: InfluxDB's write
//! APIs answering as InfluxDB does, `CREATE DATABASE`, the export of what
//! was written, and every acknowledged sample back after `kill -9`.

mod common;

use common::sensor::{export, now_s};
use common::Node;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn post(n: &Node, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let r = n
        .http("POST", path, headers, body)
        .expect("the node answers");
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

#[test]
fn influx_writes_answer_as_influxdb_and_are_exported() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "sensor.retention.short = 1h");
    let t = now_s();
    // What Telegraf sends first.
    let (status, body) = post(
        &n,
        "/query",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"q=CREATE+DATABASE+%22telegraf%22",
    );
    assert_eq!(
        (status, body.as_str()),
        (200, "{\"results\":[{\"statement_id\":0}]}")
    );
    let lines = format!(
        "cpu,host=a usage=1.5,idle=90i {t}\ncpu,host=a usage=2.5 {}\ncpu,host=b usage=7 {t}\n",
        t - 1
    );
    let (status, body) = post(&n, "/write?db=telegraf&precision=s", &[], lines.as_bytes());
    assert_eq!(status, 204, "{body}");
    // 2.x, gzipped, milliseconds.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(format!("room,floor=2 temp=21.25 {}\n", t * 1000).as_bytes())
        .unwrap();
    let (status, body) = post(
        &n,
        "/api/v2/write?bucket=home&org=me&precision=ms",
        &[("Content-Encoding", "gzip")],
        &gz.finish().unwrap(),
    );
    assert_eq!(status, 204, "{body}");
    // A bad line: 1.x writes the good ones and says which failed.
    let (status, body) = post(
        &n,
        "/write?db=telegraf&precision=s",
        &[],
        format!("cpu,host=c usage=3 {t}\nnot a line\n").as_bytes(),
    );
    assert_eq!(status, 400);
    assert!(
        body.contains("partial write: unable to parse line 2"),
        "{body}"
    );
    // 2.x writes nothing of a request with a bad line.
    let (status, body) = post(
        &n,
        "/api/v2/write?bucket=home&precision=s",
        &[],
        format!("room,floor=9 temp=1 {t}\nbad\n").as_bytes(),
    );
    assert_eq!(status, 400);
    assert!(body.contains("\"code\":\"invalid\""), "{body}");
    // Older than the database's storage period.
    let (status, body) = post(
        &n,
        "/write?db=short&precision=s",
        &[],
        format!("m v=1 {}\nm v=2 {t}\n", t - 7200).as_bytes(),
    );
    assert_eq!(status, 400);
    assert!(
        body.contains("points beyond retention policy dropped=1"),
        "{body}"
    );
    for (path, want) in [
        ("/write?precision=s", "database is required"),
        ("/write?db=x&precision=fortnight", "precision"),
        ("/api/v2/write?bucket=x&precision=h", "invalid precision"),
    ] {
        let (status, body) = post(&n, path, &[], b"m v=1");
        assert!(status == 400 || status == 404, "{path}: {status}");
        assert!(body.contains(want), "{path}: {body}");
    }
    let (status, body) = post(
        &n,
        "/write?db=x",
        &[("Content-Encoding", "gzip")],
        b"not gzip",
    );
    assert_eq!(status, 400, "{body}");

    let cpu = export(&n, "{__name__=~\"cpu_.*\",db=\"telegraf\"}");
    let key = |name: &str, host: &str| {
        format!("{{\"__name__\":\"{name}\",\"db\":\"telegraf\",\"host\":\"{host}\"}}")
    };
    assert_eq!(
        cpu.get(&key("cpu_usage", "a")),
        Some(&vec![((t - 1) * 1000, 2.5), (t * 1000, 1.5)]),
        "{cpu:?}"
    );
    assert_eq!(
        cpu.get(&key("cpu_idle", "a")),
        Some(&vec![(t * 1000, 90.0)])
    );
    assert_eq!(
        cpu.get(&key("cpu_usage", "b")),
        Some(&vec![(t * 1000, 7.0)])
    );
    assert_eq!(
        cpu.get(&key("cpu_usage", "c")),
        Some(&vec![(t * 1000, 3.0)])
    );
    assert_eq!(cpu.len(), 4, "{cpu:?}");
    let room = export(&n, "room_temp");
    assert_eq!(
        room.len(),
        1,
        "the refused 2.x request wrote nothing: {room:?}"
    );
    assert_eq!(room.values().next().unwrap(), &vec![(t * 1000, 21.25)]);
    let short = export(&n, "m_v");
    assert_eq!(short.values().next().unwrap(), &vec![(t * 1000, 2.0)]);
    // A selector that selects everything is refused, as Prometheus does.
    let r = n
        .http("GET", "/api/v1/export?match[]=%7B%7D", &[], b"")
        .unwrap();
    assert_eq!(r.status, 400);
    let r = n.http("GET", "/query?q=SHOW+DATABASES", &[], b"").unwrap();
    let shown = String::from_utf8_lossy(&r.body).into_owned();
    for db in ["home", "short", "telegraf"] {
        assert!(shown.contains(&format!("[\"{db}\"]")), "{shown}");
    }
    // A clean stop stores every buffer; a restart reads it all back.
    n.stop();
    let n = Node::start(dir.path(), "sensor.retention.short = 1h");
    assert_eq!(export(&n, "{__name__=~\"cpu_.*\",db=\"telegraf\"}"), cpu);
    assert_eq!(export(&n, "room_temp"), room);
}

/// Prometheus remote write: series taken, a bad one refused with 400
/// after the rest is kept, other encodings 415; a stale marker ends the
/// series for a query (an export leaves it out), and `?db=` is the
/// series' label `db`.
#[test]
fn remote_write_answers_as_its_specification_asks() {
    use rill_sensor::remote_write::{encode, STALE_NAN};
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let ms = now_s() * 1000;
    let headers = [
        ("Content-Encoding", "snappy"),
        ("Content-Type", "application/x-protobuf"),
        ("X-Prometheus-Remote-Write-Version", "0.1.0"),
    ];
    let body = encode(&[(
        vec![("__name__", "node_load1"), ("instance", "a:9100")],
        vec![
            (ms - 2000, 0.5),
            (ms - 1000, f64::from_bits(STALE_NAN)),
            (ms, 0.75),
        ],
    )]);
    let (status, text) = post(&n, "/api/v1/write", &headers, &body);
    assert_eq!(status, 204, "{text}");
    let body = encode(&[
        (vec![("__name__", "up"), ("job", "x")], vec![(ms, 1.0)]),
        (vec![("job", "nameless")], vec![(ms, 1.0)]),
    ]);
    let (status, text) = post(&n, "/api/v1/write?db=other", &headers, &body);
    assert_eq!(status, 400);
    assert!(text.contains("no metric name"), "{text}");
    let (status, _) = post(&n, "/api/v1/write", &[("Content-Encoding", "gzip")], &body);
    assert_eq!(status, 415);
    let (status, text) = post(&n, "/api/v1/write", &headers, b"not snappy");
    assert_eq!(status, 400, "{text}");
    let load = export(&n, "node_load1");
    assert_eq!(
        load.get("{\"__name__\":\"node_load1\",\"instance\":\"a:9100\"}"),
        Some(&vec![(ms - 2000, 0.5), (ms, 0.75)]),
        "{load:?}"
    );
    let up = export(&n, "up{job=\"x\"}");
    assert_eq!(up.values().next(), Some(&vec![(ms, 1.0)]), "{up:?}");
    assert_eq!(
        up.keys().next().map(String::as_str),
        Some("{\"__name__\":\"up\",\"db\":\"other\",\"job\":\"x\"}")
    );
    // Between the marker and the next sample the series is gone.
    let at = |t: i64| {
        let (_, v) = get_json(
            &n,
            &format!("/api/v1/query?query=node_load1&time={}", t as f64 / 1000.0),
        );
        v["data"]["result"].as_array().unwrap().len()
    };
    assert_eq!((at(ms - 1500), at(ms - 500), at(ms)), (1, 0, 1));
}

fn get_json(n: &Node, path: &str) -> (u16, serde_json::Value) {
    let r = n.http("GET", path, &[], b"").expect("the node answers");
    let v = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{path}: {e}: {}", String::from_utf8_lossy(&r.body)));
    (r.status, v)
}

/// The Prometheus API as Grafana uses it: the health check, a range
/// query of a rollup, series, labels and their values.
#[test]
fn the_prometheus_api_answers_grafanas_questions() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    // Two rooms, a sample every 10 s for 10 minutes, ending a minute ago.
    let end = (now_s() - 60) / 10 * 10;
    let start = end - 600;
    let mut body = String::new();
    for t in (start..=end).step_by(10) {
        body.push_str(&format!(
            "room,name=a temp={} {t}\n",
            (t - start) as f64 / 10.0
        ));
        body.push_str(&format!("room,name=b temp=20 {t}\n"));
    }
    let (status, text) = post(&n, "/write?db=home&precision=s", &[], body.as_bytes());
    assert_eq!(status, 204, "{text}");

    let (status, v) = get_json(&n, "/api/v1/query?query=1%2B1");
    assert_eq!(status, 200);
    assert_eq!(v["data"]["resultType"], "scalar");
    assert_eq!(v["data"]["result"][1], "2");

    // avg over each minute, at each minute.
    let path = format!(
        "/api/v1/query_range?query=avg_over_time(room_temp%7Bname%3D%22a%22%7D%5B1m%5D)&start={}&end={end}&step=60",
        start + 60
    );
    let (status, v) = get_json(&n, &path);
    assert_eq!(status, 200, "{v}");
    let result = v["data"]["result"].as_array().unwrap();
    assert_eq!(result.len(), 1, "{v}");
    // A function drops the metric name, as Prometheus's do.
    assert_eq!(
        result[0]["metric"],
        serde_json::json!({"db": "home", "name": "a"})
    );
    let values = result[0]["values"].as_array().unwrap();
    assert_eq!(values.len(), 10);
    // The window (t - 60 s, t] holds six samples: k-5 .. k (tenths of a
    // degree per 10 s): their mean is k - 2.5.
    for (i, p) in values.iter().enumerate() {
        let k = 6.0 * (i as f64 + 1.0);
        assert_eq!(p[0].as_i64(), Some(start + 60 * (i as i64 + 1)));
        assert_eq!(
            p[1].as_str().unwrap().parse::<f64>().unwrap(),
            k - 2.5,
            "{p}"
        );
    }
    // A bare selector at an instant, and a rate of a steady series: 0.
    let (_, v) = get_json(&n, &format!("/api/v1/query?query=room_temp&time={end}"));
    assert_eq!(v["data"]["result"].as_array().unwrap().len(), 2, "{v}");
    // Five seconds after the last samples: within the default lookback,
    // not within one of 2.5 s (seconds, as Prometheus reads durations).
    let at = |lookback: &str| {
        get_json(
            &n,
            &format!(
                "/api/v1/query?query=room_temp&time={}&lookback_delta={lookback}",
                end + 5
            ),
        )
    };
    let (_, v) = at("");
    assert_eq!(v["data"]["result"].as_array().unwrap().len(), 2, "{v}");
    let (_, v) = at("2.5");
    assert_eq!(v["data"]["result"].as_array().unwrap().len(), 0, "{v}");
    let (_, v) = at("6s");
    assert_eq!(v["data"]["result"].as_array().unwrap().len(), 2, "{v}");
    let (status, v) = at("soon");
    assert_eq!((status, v["errorType"].as_str()), (400, Some("bad_data")));
    assert_eq!(
        v["error"],
        "error parsing lookback delta duration: cannot parse \"soon\" to a valid duration"
    );
    // Quotes as typed (`curl -g`), not percent-encoded, and `+` for a
    // space, as Go's servers take them.
    let (status, v) = get_json(
        &n,
        &format!("/api/v1/query?query=room_temp{{name=\"a\"}}+>+0&time={end}"),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"]["result"].as_array().unwrap().len(), 1, "{v}");
    let (_, v) = get_json(
        &n,
        &format!("/api/v1/query?query=rate(room_temp%7Bname%3D%22a%22%7D%5B1m%5D)&time={end}"),
    );
    // Room a rises by 1 every 10 s.
    assert_eq!(v["data"]["result"][0]["value"][1], "0.1", "{v}");
    let (status, v) = get_json(&n, "/api/v1/query?query=nosuchfunc(x)");
    assert_eq!(status, 400);
    assert_eq!(v["errorType"], "bad_data");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("unknown function with name \"nosuchfunc\""),
        "{v}"
    );

    let (_, v) = get_json(&n, "/api/v1/series?match[]=room_temp");
    assert_eq!(v["data"].as_array().unwrap().len(), 2, "{v}");
    // `db=` and `extra_label=` narrow the series and label answers as
    // they narrow queries.
    let count = |path: &str| get_json(&n, path).1["data"].as_array().unwrap().len();
    assert_eq!(count("/api/v1/series?match[]=room_temp&db=home"), 2);
    assert_eq!(count("/api/v1/series?match[]=room_temp&db=elsewhere"), 0);
    assert_eq!(
        count("/api/v1/series?match[]=room_temp&extra_label=name=a"),
        1
    );
    let (_, v) = get_json(&n, "/api/v1/label/name/values?extra_label=name=b");
    assert_eq!(v["data"], serde_json::json!(["b"]));
    let exported = |q: &str| {
        let r = n
            .http(
                "GET",
                &format!("/api/v1/export?match[]=room_temp&{q}"),
                &[],
                b"",
            )
            .unwrap();
        assert_eq!(r.status, 200);
        String::from_utf8(r.body).unwrap().lines().count()
    };
    assert_eq!(exported("db=home"), 2);
    assert_eq!(exported("db=elsewhere"), 0);
    assert_eq!(exported("extra_label=name=a"), 1);
    let (status, v) = get_json(&n, "/api/v1/series?match[]=rate(room_temp[1m])");
    assert_eq!((status, v["errorType"].as_str()), (400, Some("bad_data")));
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid parameter \"match[]\""),
        "{v}"
    );
    let (_, v) = get_json(&n, "/api/v1/labels");
    assert_eq!(v["data"], serde_json::json!(["__name__", "db", "name"]));
    let (_, v) = get_json(&n, "/api/v1/label/name/values");
    assert_eq!(v["data"], serde_json::json!(["a", "b"]));
    let (_, v) = get_json(&n, "/api/v1/label/__name__/values");
    assert_eq!(v["data"], serde_json::json!(["room_temp"]));
    let (status, v) = get_json(&n, "/api/v1/status/buildinfo");
    assert_eq!((status, v["status"].as_str()), (200, Some("success")));
    assert_eq!(v["data"]["version"], "3.5.0", "{v}");
    let (status, v) = get_json(&n, "/api/v1/metadata");
    assert_eq!((status, &v["data"]), (200, &serde_json::json!({})));
}

/// The endpoints clients probe: InfluxDB 2.x's `/health`, and `/ping`,
/// Riak's to GET and InfluxDB's to HEAD, both with InfluxDB's headers.
#[test]
fn the_endpoints_clients_probe_answer() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), "");
    let (status, v) = get_json(&n, "/health");
    assert_eq!((status, v["status"].as_str()), (200, Some("pass")), "{v}");
    let r = n.http("GET", "/ping", &[], b"").unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"OK"[..]));
    let r = n.http("HEAD", "/ping", &[], b"").unwrap();
    assert_eq!(r.status, 204);
    let version = r
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-influxdb-version"))
        .map(|(_, v)| v.as_str());
    assert_eq!(version, Some("1.8.10"));
    // Grafana's "Format query": Prometheus's Prettify, GET or POST.
    let (status, v) = get_json(
        &n,
        "/api/v1/format_query?query=sum(rate(x%7Bjob%3D%22a%22%7D%5B5m%5D))+by+(job)",
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["data"], "sum by (job) (rate(x{job=\"a\"}[5m]))");
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let (status, text) = post(&n, "/api/v1/format_query", &form, b"query=x%2B1");
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["data"],
        "x + 1"
    );
    let (status, v) = get_json(&n, "/api/v1/format_query?query=sum(");
    assert_eq!((status, v["errorType"].as_str()), (400, Some("bad_data")));
}

/// The collection port: line protocol over plain TCP, bad lines skipped,
/// the rest stored in the configured database.
#[test]
fn the_collection_port_takes_line_protocol_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let n = Node::start(
        dir.path(),
        &format!("sensor.listener.line = 127.0.0.1:{port}\nsensor.listener.line.db = plant\nsensor.listener.line.precision = s"),
    );
    let t = now_s() - 100;
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut body = String::new();
    for i in 0..5000 {
        body.push_str(&format!(
            "pump,id={} flow={}.5 {}\n",
            i % 10,
            i,
            t + i / 100
        ));
        if i == 2500 {
            body.push_str("this is not a point\n");
        }
    }
    // The last line without its newline: taken when the sender closes.
    body.push_str(&format!("pump,id=last flow=1 {t}"));
    sock.write_all(body.as_bytes()).unwrap();
    drop(sock);
    common::until(
        "every sample of the port exported",
        Duration::from_secs(30),
        || {
            let got = export(&n, "pump_flow");
            // Ten series of one sample a second for 50 s (the last of each
            // second wins), and the unterminated line.
            got.len() == 11 && got.values().map(Vec::len).sum::<usize>() == 10 * 50 + 1
        },
    );
    let got = export(&n, "pump_flow{id=\"3\"}");
    let key = "{\"__name__\":\"pump_flow\",\"db\":\"plant\",\"id\":\"3\"}";
    let samples = &got[key];
    // id 3: i = 3, 13, ...; several per second of timestamp: the last
    // written of each second wins.
    assert_eq!(samples.len(), 50, "{samples:?}");
    assert_eq!(samples[0], (t * 1000, 93.5));
}

/// Writers posting batches while the node is killed: every batch answered
/// 204 is there after the restart, sample for sample.
#[test]
fn every_acknowledged_sample_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "sensor.block_samples = 64\nsensor.window = 1m\nsensor.grace = 1s";
    let n = Node::start(dir.path(), extra);
    let t0 = now_s() - 600;
    let (http, started) = (n.http, Instant::now());
    let batches = AtomicUsize::new(0);
    let acked: Vec<Vec<(i64, f64)>> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..3i64)
            .map(|w| {
                let batches = &batches;
                s.spawn(move || {
                    let mut acked = Vec::new();
                    for batch in 0..10_000i64 {
                        let mut body = String::new();
                        let mut mine = Vec::new();
                        for i in 0..50 {
                            let ts = t0 * 1000 + (batch * 50 + i) * 10;
                            let v = (w * 1_000_000 + batch * 50 + i) as f64 / 4.0;
                            body.push_str(&format!("probe,writer={w} v={v} {ts}\n"));
                            mine.push((ts, v));
                        }
                        let path = "/write?db=field&precision=ms";
                        match common::http(http, "POST", path, &[], body.as_bytes()) {
                            Some(r) if r.status == 204 => {
                                acked.extend(mine);
                                batches.fetch_add(1, Ordering::SeqCst);
                            }
                            _ => break,
                        }
                        if started.elapsed() > Duration::from_secs(60) {
                            break;
                        }
                    }
                    acked
                })
            })
            .collect();
        // Killed while they write.
        common::until("1000 batches acknowledged", Duration::from_secs(60), || {
            batches.load(Ordering::SeqCst) >= 1000
        });
        n.kill();
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert!(
        acked.iter().all(|a| !a.is_empty()),
        "every writer was acknowledged"
    );
    let n = Node::start(dir.path(), extra);
    // The restart read samples back from the log (some were not yet in
    // blocks when the node was killed).
    common::until(
        "the sensor service is ready",
        Duration::from_secs(30),
        || n.log().contains("sensor-data service ready"),
    );
    let log = n.log();
    let replayed = log
        .split("replayed_samples=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse::<u64>().ok());
    assert!(replayed.is_some_and(|r| r > 0), "{log}");
    for (w, want) in acked.iter().enumerate() {
        let got = export(&n, &format!("probe_v{{writer=\"{w}\"}}"));
        let got = got.values().next().expect("the series is there");
        let got: BTreeMap<i64, f64> = got.iter().copied().collect();
        for (ts, v) in want {
            assert_eq!(got.get(ts), Some(v), "writer {w}: the sample at {ts} ms");
        }
    }
}

/// Blocks are found by their window: a node restarted with another
/// `sensor.window` than its data was written with does not start its
/// sensor-data service (the key-value node runs on), saying why, naming
/// both lengths and the setting, instead of answering without the
/// samples it could not find; with the window set back, every sample is
/// there.
#[test]
fn a_restart_with_another_window_is_refused_and_nothing_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let extra = "sensor.window = 1m\nsensor.grace = 1s";
    let n = Node::start(dir.path(), extra);
    let t = now_s();
    let lines: String = (0..120)
        .map(|i| format!("w,s=a v={i} {}\n", t - 600 + 5 * i))
        .collect();
    let (status, body) = post(&n, "/write?db=w&precision=s", &[], lines.as_bytes());
    assert_eq!(status, 204, "{body}");
    let before = export(&n, "{__name__=\"w_v\"}");
    assert_eq!(before.values().map(Vec::len).sum::<usize>(), 120);
    n.stop();
    // Another window: the service says why it did not start, and its
    // paths answer an error, not an answer without the samples.
    let n = Node::start(dir.path(), "sensor.window = 10m\nsensor.grace = 1s");
    common::until("the refusal in the log", Duration::from_secs(30), || {
        n.log().contains("written with sensor.window = 1m, not 10m")
    });
    let r = n
        .http(
            "GET",
            "/api/v1/export?match[]=%7B__name__%3D%22w_v%22%7D",
            &[],
            b"",
        )
        .unwrap();
    assert_ne!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    n.stop();
    // Set back: everything is there.
    let n = Node::start(dir.path(), extra);
    assert_eq!(export(&n, "{__name__=\"w_v\"}"), before);
    n.stop();
}
