//! Helpers of the sensor-data tests.

use super::Node;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The exported series of `selector`: metric (as JSON text) to samples
/// (ms, value).
pub fn export(n: &Node, selector: &str) -> BTreeMap<String, Vec<(i64, f64)>> {
    let q: String = selector
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let r = n
        .http("GET", &format!("/api/v1/export?match[]={q}"), &[], b"")
        .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let mut out = BTreeMap::new();
    for line in String::from_utf8(r.body).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let ts = v["timestamps"].as_array().unwrap();
        let vals = v["values"].as_array().unwrap();
        let samples = ts
            .iter()
            .zip(vals)
            .map(|(t, x)| (t.as_i64().unwrap(), x.as_f64().unwrap()))
            .collect();
        out.insert(v["metric"].to_string(), samples);
    }
    out
}

/// A Mosquitto broker (Debian's `mosquitto`, which scripts/test-all
/// installs) on a free loopback port, stopped when dropped.
pub struct Broker {
    pub port: u16,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Broker {
    pub fn start() -> Broker {
        let bin = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect(
                "mosquitto is not installed: run scripts/test-all, or apt-get install mosquitto",
            );
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..4 {
            let port = super::free_ports().0;
            // Sessions held in memory; no cap on what is queued for a
            // subscriber that is away (the default drops past 1000).
            let conf = dir.path().join("mosquitto.conf");
            std::fs::write(
                &conf,
                format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\nlog_dest stderr\n"),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("mosquitto.log")).unwrap();
            let mut child = std::process::Command::new(bin)
                .args(["-c", conf.to_str().unwrap()])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("mosquitto starts");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Broker {
                        port,
                        child,
                        _dir: dir,
                    };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken meanwhile
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "mosquitto did not start: {}",
            std::fs::read_to_string(dir.path().join("mosquitto.log")).unwrap_or_default()
        );
    }

    /// Publishes every message at QoS 1 and returns once the broker has
    /// acknowledged them all.
    pub fn publish(&self, msgs: &[(String, Vec<u8>)]) {
        use rumqttc::{Client, Event, MqttOptions, Packet, QoS};
        let id = format!("test-pub-{}", std::process::id());
        let mut opts = MqttOptions::new(id, "127.0.0.1", self.port);
        opts.set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut conn) = Client::new(opts, 64);
        let want = msgs.len();
        let acks = std::thread::spawn(move || {
            let mut acked = 0;
            for ev in conn.iter() {
                match ev {
                    Ok(Event::Incoming(Packet::PubAck(_))) => {
                        acked += 1;
                        if acked == want {
                            return Ok(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => return Err(format!("{e}")),
                }
            }
            Err("the connection ended".into())
        });
        for (topic, payload) in msgs {
            client
                .publish(topic.clone(), QoS::AtLeastOnce, false, payload.clone())
                .unwrap();
        }
        if want > 0 {
            acks.join().unwrap().expect("the broker acknowledges");
        }
        let _ = client.disconnect();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` percent-encoded for a query string.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
