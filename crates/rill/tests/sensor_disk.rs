//! The sensor-data service on a small loop-mounted ext4, through the real
//! binary: at a full disk every ingest path pushes back (HTTP `503` with
//! `Retry-After`, the TCP port stops reading, MQTT stops acknowledging),
//! nothing acknowledged is lost (also across `kill -9`), and ingest
//! resumes by itself once there is room; under endless ingest with a
//! short storage period, old windows are dropped and the disk use stays
//! flat, without a refused write.

mod common;

use common::sensor::{export, now_s, Broker};
use common::Node;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

fn post_write(n: &Node, body: &str) -> common::HttpReply {
    n.http("POST", "/write?db=field&precision=ms", &[], body.as_bytes())
        .expect("the node answers")
}

/// Lines of `series` (a measurement with tag `src`), `count` samples from
/// `first` (ms), one every 10 ms, value = index / 4.
fn lines(src: &str, first: i64, from: i64, count: i64) -> (String, Vec<(i64, f64)>) {
    let mut body = String::new();
    let mut samples = Vec::new();
    for i in from..from + count {
        let (ts, v) = (first + i * 10, i as f64 / 4.0);
        body.push_str(&format!("probe,src={src} v={v} {ts}\n"));
        samples.push((ts, v));
    }
    (body, samples)
}

fn stored(n: &Node, src: &str) -> BTreeMap<i64, f64> {
    export(n, &format!("probe_v{{src=\"{src}\"}}"))
        .into_values()
        .flatten()
        .collect()
}

/// MQTT messages (topic, payload) and the samples they carry.
type Messages = (Vec<(String, Vec<u8>)>, Vec<(i64, f64)>);

fn mqtt_msgs(first: i64, from: i64, count: i64) -> Messages {
    let mut msgs = Vec::new();
    let mut samples = Vec::new();
    for i in from..from + count {
        let (ts, v) = (first + i * 10, i as f64 / 4.0);
        msgs.push((
            "plant/probe".to_string(),
            format!("probe,src=mqtt v={v} {ts}").into_bytes(),
        ));
        samples.push((ts, v));
    }
    (msgs, samples)
}

fn has_all(got: &BTreeMap<i64, f64>, want: &[(i64, f64)]) -> bool {
    want.iter().all(|(ts, v)| got.get(ts) == Some(v))
}

fn refusals(n: &Node, source: &str) -> usize {
    n.log()
        .lines()
        .filter(|l| l.contains("the engine refuses samples") && l.contains(source))
        .count()
}

#[test]
fn a_full_disk_pushes_back_on_every_path_and_loses_nothing() {
    let Some(fs) = testkit::LoopFs::mount_or_skip(64) else {
        return;
    };
    let broker = Broker::start();
    let home = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    let port = common::free_ports().0;
    let conf = format!(
        "ring_size = 8\nplatform_data_dir = {}\nbitcask.max_file_size = 2MB\n\
         sensor.window = 1m\nsensor.grace = 1s\nsensor.log_segment_size = 1MB\n\
         sensor.listener.line = 127.0.0.1:{port}\nsensor.listener.line.db = field\n\
         sensor.listener.line.precision = ms\nsensor.mqtt.broker = 127.0.0.1:{}\n\
         sensor.mqtt.topics = plant/#\nsensor.mqtt.db = field\nsensor.mqtt.precision = ms\n\
         sensor.mqtt.client_id = rill-disk-test\n",
        data.display(),
        broker.port
    );
    let n = Node::start(home.path(), &conf);
    common::until("the node subscribed", Duration::from_secs(30), || {
        n.log().contains("subscribed to MQTT topics")
    });
    let t0 = (now_s() - 3600) * 1000;
    let filler = fs.path().join("filler");

    // Acknowledged before the disk fills.
    let mut acked: Vec<(i64, f64)> = Vec::new();
    let (body, samples) = lines("http", t0, 0, 500);
    assert_eq!(post_write(&n, &body).status, 204);
    acked.extend(samples);

    // Something else takes the room; HTTP writes are refused, clearly.
    common::fill_up(&filler);
    let mut next = 500;
    let refusal = loop {
        assert!(next < 500 * 1000, "the writes were never refused");
        let (body, samples) = lines("http", t0, next, 500);
        next += 500;
        let r = post_write(&n, &body);
        if r.status != 204 {
            break r;
        }
        acked.extend(samples);
    };
    let text = String::from_utf8_lossy(&refusal.body).into_owned();
    assert_eq!(refusal.status, 503, "{text}");
    assert!(refusal.header("Retry-After").is_some(), "{text}");
    assert!(text.contains("retry"), "{text}");
    let data_path = data.display().to_string();
    assert!(!text.contains(&data_path), "no internal path: {text}");

    // The TCP port and the subscriber take what is sent, and wait.
    let (tcp_body, tcp_samples) = lines("tcp", t0, 0, 3000);
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.write_all(tcp_body.as_bytes()).unwrap();
    let (msgs, mqtt1) = mqtt_msgs(t0, 0, 500);
    broker.publish(&msgs);
    common::until(
        "both paths refused by the engine",
        Duration::from_secs(60),
        || refusals(&n, "line-protocol port") > 0 && refusals(&n, "MQTT") > 0,
    );

    // Room again: everything comes in by itself.
    std::fs::remove_file(&filler).unwrap();
    common::until(
        "ingest resumed on every path",
        Duration::from_secs(90),
        || has_all(&stored(&n, "tcp"), &tcp_samples) && has_all(&stored(&n, "mqtt"), &mqtt1),
    );
    drop(sock);
    let (body, samples) = lines("http", t0, next, 500);
    next += 500;
    common::until("HTTP writes taken again", Duration::from_secs(30), || {
        post_write(&n, &body).status == 204
    });
    acked.extend(samples);
    assert!(has_all(&stored(&n, "http"), &acked));

    // Full again, messages arrive, and the node dies before it could
    // store them: the broker still holds them, unacknowledged.
    common::fill_up(&filler);
    loop {
        assert!(next < 500 * 2000, "the writes were never refused");
        let (body, samples) = lines("http", t0, next, 500);
        next += 500;
        if post_write(&n, &body).status != 204 {
            break;
        }
        acked.extend(samples);
    }
    let before = refusals(&n, "MQTT");
    let (msgs, mqtt2) = mqtt_msgs(t0, 500, 500);
    broker.publish(&msgs);
    common::until("the subscriber refused", Duration::from_secs(60), || {
        refusals(&n, "MQTT") > before
    });
    n.kill();
    std::fs::remove_file(&filler).unwrap();
    let n = Node::start(home.path(), &conf);
    common::until(
        "every MQTT message after the restart",
        Duration::from_secs(90),
        || has_all(&stored(&n, "mqtt"), &mqtt1) && has_all(&stored(&n, "mqtt"), &mqtt2),
    );
    let got = stored(&n, "http");
    for (ts, v) in &acked {
        assert_eq!(got.get(ts), Some(v), "the HTTP sample at {ts} ms");
    }
    n.stop();
}

#[test]
fn retention_keeps_disk_use_flat_under_endless_ingest() {
    let Some(fs) = testkit::LoopFs::mount_or_skip(128) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let data = fs.path().join("data");
    let conf = format!(
        "ring_size = 8\nplatform_data_dir = {}\n\
         sensor.window = 2s\nsensor.grace = 1s\nsensor.retention = 10s\n\
         sensor.max_file_size = 1MB\nsensor.log_segment_size = 1MB\n",
        data.display()
    );
    let n = Node::start(home.path(), &conf);
    let sensor_dir = data.join("sensor");
    // Bounded: 60 s of ingest, samples stamped now, of 200 sensors whose
    // values wander (so blocks do not shrink to nothing).
    let started = Instant::now();
    let mut usage: Vec<(Duration, u64)> = Vec::new();
    let mut first_ts = None;
    let mut round = 0u64;
    while started.elapsed() < Duration::from_secs(60) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        first_ts.get_or_insert(now_ms);
        let mut body = String::new();
        for s in 0..200u64 {
            for k in 0..10i64 {
                let x = (round * 7919 + s * 104_729 + k as u64 * 31).wrapping_mul(2_654_435_761)
                    % 100_000;
                body.push_str(&format!(
                    "walk,sensor={s} v={}.{x:05} {}\n",
                    x % 997,
                    now_ms - 9 + k
                ));
            }
        }
        let r = post_write(&n, &body);
        assert_eq!(
            r.status,
            204,
            "round {round}: {}",
            String::from_utf8_lossy(&r.body)
        );
        usage.push((started.elapsed(), testkit::du(&sensor_dir)));
        round += 1;
    }
    let third = |k: u32| {
        usage
            .iter()
            .filter(|(t, _)| {
                *t >= Duration::from_secs(20 * u64::from(k))
                    && *t < Duration::from_secs(20 * u64::from(k) + 20)
            })
            .map(|(_, b)| *b)
            .max()
            .unwrap()
    };
    let (middle, last) = (third(1), third(2));
    eprintln!(
        "{round} rounds of 2000 samples; sensor data at most {middle} bytes from 20 to 40 s, {last} bytes from 40 to 60 s"
    );
    // Growing without retention would make the last third's peak half as
    // large again as the middle's.
    assert!(
        last * 4 <= middle * 5,
        "disk use grew: {middle} bytes, then {last}: {usage:?}"
    );
    // Old windows went as whole files, deleted unread: merges read
    // (nearly) nothing of what was written.
    let st = n.stats();
    let num = |k: &str| st[k].as_u64().unwrap_or_else(|| panic!("{k} in {st}"));
    let (written, read) = (
        num("sensor_block_bytes_stored_total"),
        num("sensor_merge_bytes_read_total"),
    );
    eprintln!(
        "{written} bytes of blocks stored, {read} read by merges, {} files deleted unread, {} samples written",
        num("sensor_files_deleted_unread_total"),
        num("sensor_samples_written_total")
    );
    assert!(num("sensor_files_deleted_unread_total") > 0, "{st}");
    assert!(
        read * 100 <= written,
        "merges read {read} of {written} bytes"
    );
    assert_eq!(num("sensor_writes_refused_total"), 0);
    // The first windows are gone.
    let first = first_ts.unwrap();
    common::until(
        "the oldest samples expired",
        Duration::from_secs(30),
        || {
            let r = n
                .http(
                    "GET",
                    &format!(
                        "/api/v1/export?match[]=walk_v&start={}&end={}",
                        first / 1000 - 1,
                        first / 1000 + 2
                    ),
                    &[],
                    b"",
                )
                .unwrap();
            r.status == 200 && r.body.is_empty()
        },
    );
    n.stop();
}
