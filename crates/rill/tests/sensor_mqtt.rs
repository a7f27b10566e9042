//! The MQTT subscriber through the real binary, against Debian's
//! Mosquitto started by the test: every payload form becomes samples of
//! series named by their topic, and a message is acknowledged to the
//! broker only once durable, so `kill -9` of the node loses none (the
//! broker sends what was not acknowledged again).

mod common;

use common::sensor::{export, now_s, Broker};
use common::Node;
use std::collections::BTreeMap;
use std::time::Duration;

fn config(broker: &Broker) -> String {
    format!(
        "sensor.mqtt.broker = 127.0.0.1:{}\nsensor.mqtt.topics = plant/#, lab/+/probe\nsensor.mqtt.db = plant\nsensor.mqtt.precision = ms\nsensor.mqtt.client_id = rill-test",
        broker.port
    )
}

fn subscribed(n: &Node) {
    common::until("the node subscribed", Duration::from_secs(30), || {
        n.log().contains("subscribed to MQTT topics")
    });
}

#[test]
fn mqtt_payloads_become_samples_of_their_topics() {
    let broker = Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), &config(&broker));
    subscribed(&n);
    let t = now_s() - 60;
    let msgs: Vec<(String, Vec<u8>)> = vec![
        (
            "plant/room1".into(),
            format!(
                r#"{{"temp": 21.5, "on": true, "name": "x", "ts": {}}}"#,
                t * 1000
            )
            .into_bytes(),
        ),
        ("plant/press".into(), b"101.25".to_vec()),
        (
            "plant/boiler".into(),
            format!(
                "boiler,unit=2 temp=80.5 {}\nboiler,unit=3 temp=81 {}",
                t * 1000,
                t * 1000
            )
            .into_bytes(),
        ),
        (
            "lab/7/probe".into(),
            format!(r#"{{"ph": 7.25, "ts": {t}}}"#).into_bytes(),
        ),
        ("plant/bad".into(), b"not a reading".to_vec()),
        // Not subscribed to.
        ("office/door".into(), b"1".to_vec()),
    ];
    broker.publish(&msgs);
    common::until("every reading exported", Duration::from_secs(30), || {
        export(&n, "{db=\"plant\"}").len() == 6
    });
    let got = export(&n, "{db=\"plant\"}");
    let key = |m: &str, rest: &str| format!("{{\"__name__\":\"{m}\",\"db\":\"plant\",{rest}}}");
    let want: BTreeMap<String, f64> = [
        (key("temp", r#""topic":"plant/room1""#), 21.5),
        (key("on", r#""topic":"plant/room1""#), 1.0),
        (key("ph", r#""topic":"lab/7/probe""#), 7.25),
        (
            key("boiler_temp", r#""topic":"plant/boiler","unit":"2""#),
            80.5,
        ),
        (
            key("boiler_temp", r#""topic":"plant/boiler","unit":"3""#),
            81.0,
        ),
    ]
    .into_iter()
    .collect();
    for (k, v) in &want {
        let samples = got.get(k).unwrap_or_else(|| panic!("{k} in {got:?}"));
        assert_eq!(samples, &vec![(t * 1000, *v)], "{k}");
    }
    // The bare number is stamped on arrival.
    let press = got
        .iter()
        .find(|(k, _)| k.contains("plant/press"))
        .expect("the pressure");
    assert_eq!(press.1.len(), 1);
    assert_eq!(press.1[0].1, 101.25);
    assert!((press.1[0].0 / 1000 - now_s()).abs() < 600, "{press:?}");
    // The bad message was skipped (and acknowledged: it is not sent
    // again), and said so.
    assert!(n.log().contains("plant/bad"), "{}", n.log());
}

#[test]
fn no_mqtt_message_is_lost_when_the_node_is_killed() {
    let broker = Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "{}\nsensor.block_samples = 64\nsensor.window = 1m\nsensor.grace = 1s",
        config(&broker)
    );
    let n = Node::start(dir.path(), &extra);
    subscribed(&n);
    let t0 = (now_s() - 600) * 1000;
    const MSGS: i64 = 100_000;
    let msgs: Vec<(String, Vec<u8>)> = (0..MSGS)
        .map(|i| {
            (
                format!("plant/flow/{}", i % 4),
                format!(r#"{{"flow": {}, "ts": {}}}"#, i as f64 / 4.0, t0 + i).into_bytes(),
            )
        })
        .collect();
    let count = |n: &Node| -> usize { export(n, "flow").values().map(Vec::len).sum() };
    std::thread::scope(|s| {
        let publisher = s.spawn(|| broker.publish(&msgs));
        // Killed while messages arrive.
        common::until("some messages stored", Duration::from_secs(60), || {
            count(&n) >= 3000
        });
        eprintln!("KILL at {}", count(&n));
        n.kill();
        publisher.join().unwrap();
    });
    let n = Node::start(dir.path(), &extra);
    common::until(
        "every message published is stored",
        Duration::from_secs(120),
        || count(&n) == MSGS as usize,
    );
    let got = export(&n, "flow");
    for (k, samples) in &got {
        let topic: i64 = k.split("plant/flow/").nth(1).unwrap()[..1].parse().unwrap();
        for (ts, v) in samples {
            let i = ts - t0;
            assert_eq!(i % 4, topic, "{k}: {ts}");
            assert_eq!(*v, i as f64 / 4.0, "{k}: {ts}");
        }
    }
}
