//! A network partition between real nodes, in network namespaces this
//! test makes (`ip netns`, a veth pair; no address outside them): one node
//! on one side, two on the other; both sides take writes to an
//! `allow_mult` bucket while the link is down (the lone node through
//! fallbacks of its own); after the heal, hinted handoff drains and every
//! acknowledged write is readable through every node, as the value or a
//! sibling. The same partition with sensor samples written on both
//! sides (W = 1): after the heal every acknowledged sample is answered,
//! exactly once, through every node. Needs root and iproute2; under
//! `CI=true` their absence fails the test instead of skipping it.

mod common;

use common::{http, until, HttpReply as Reply};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

extern "C" {
    fn setns(fd: i32, nstype: i32) -> i32;
    fn geteuid() -> u32;
}
const CLONE_NEWNET: i32 = 0x4000_0000;

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Two namespaces joined by a veth pair, removed when dropped.
struct Net {
    a: String,
    b: String,
    link_a: String,
}

impl Net {
    fn make() -> Option<Net> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { geteuid() } != 0 || !ip(&["netns", "list"]) {
            assert!(
                std::env::var("CI").is_err(),
                "CI must run this test as root with iproute2"
            );
            eprintln!("skipping: needs root and iproute2 (ip netns)");
            return None;
        }
        // Each test of the process its own namespaces and link.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let id = format!(
            "{}{}",
            std::process::id(),
            MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let net = Net {
            a: format!("rill{id}a"),
            b: format!("rill{id}b"),
            link_a: format!("rv{id}a"),
        };
        let link_b = format!("rv{id}b");
        let ok = ip(&["netns", "add", &net.a])
            && ip(&["netns", "add", &net.b])
            && ip(&[
                "link",
                "add",
                &net.link_a,
                "type",
                "veth",
                "peer",
                "name",
                &link_b,
            ])
            && ip(&["link", "set", &net.link_a, "netns", &net.a])
            && ip(&["link", "set", &link_b, "netns", &net.b])
            && ip(&[
                "-n",
                &net.a,
                "addr",
                "add",
                "10.213.0.1/24",
                "dev",
                &net.link_a,
            ])
            && ip(&["-n", &net.b, "addr", "add", "10.213.0.2/24", "dev", &link_b])
            && ip(&["-n", &net.a, "link", "set", "lo", "up"])
            && ip(&["-n", &net.b, "link", "set", "lo", "up"])
            && ip(&["-n", &net.a, "link", "set", &net.link_a, "up"])
            && ip(&["-n", &net.b, "link", "set", &link_b, "up"]);
        assert!(ok, "cannot set up the network namespaces");
        Some(net)
    }

    fn link(&self, up: bool) {
        assert!(ip(&[
            "-n",
            &self.a,
            "link",
            "set",
            &self.link_a,
            if up { "up" } else { "down" }
        ]));
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.a]);
        ip(&["netns", "del", &self.b]);
    }
}

/// Runs `f` on a thread inside namespace `ns` (its sockets are there).
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("the namespace");
        use std::os::fd::AsRawFd;
        // SAFETY: a valid namespace descriptor; this thread alone moves.
        assert_eq!(unsafe { setns(file.as_raw_fd(), CLONE_NEWNET) }, 0, "setns");
        f()
    })
    .join()
    .expect("the namespace thread")
}

struct Member {
    ns: String,
    name: String,
    home: tempfile::TempDir,
    http: SocketAddr,
    cluster: SocketAddr,
    child: Child,
}

impl Member {
    fn start(ns: &str, name: &str, ip_addr: &str, base: u16) -> Member {
        Member::start_with(ns, name, ip_addr, base, "")
    }

    fn start_with(ns: &str, name: &str, ip_addr: &str, base: u16, extra: &str) -> Member {
        let home = tempfile::tempdir().unwrap();
        let http: SocketAddr = format!("{ip_addr}:{}", base + 8).parse().unwrap();
        let cluster: SocketAddr = format!("{ip_addr}:{}", base + 9).parse().unwrap();
        let conf = home.path().join("rill.conf");
        std::fs::write(
            &conf,
            format!(
                "nodename = {name}\nring_size = 16\nstorage_backend = memory\nplatform_data_dir = {}\n\
                 listener.protobuf.internal = {ip_addr}:{}\nlistener.http.internal = {http}\n\
                 listener.cluster.internal = {cluster}\nhandoff.timeout = 3s\n{extra}",
                home.path().join("data").display(),
                base + 7
            ),
        )
        .unwrap();
        let log = std::fs::File::create(home.path().join("console.log")).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rill"), "-c"])
            .arg(&conf)
            .arg("console")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let m = Member {
            ns: ns.to_string(),
            name: name.to_string(),
            home,
            http,
            cluster,
            child,
        };
        until(&format!("{name} answers"), Duration::from_secs(60), || {
            m.get("/ping").is_some_and(|r| r.status == 200)
        });
        m
    }

    fn conf(&self) -> PathBuf {
        self.home.path().join("rill.conf")
    }

    fn req(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Option<Reply> {
        let (addr, method, path, body) = (
            self.http,
            method.to_string(),
            path.to_string(),
            body.to_vec(),
        );
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        in_ns(&self.ns, move || {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            http(addr, &method, &path, &h, &body)
        })
    }

    fn get(&self, path: &str) -> Option<Reply> {
        self.req("GET", path, &[], b"")
    }

    fn stat(&self, name: &str) -> u64 {
        let r = self.get("/stats").expect("stats");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v[name].as_u64().unwrap_or_else(|| panic!("no stat {name}"))
    }

    fn admin(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_rill"), "-c"])
            .arg(self.conf())
            .arg("admin")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// Writes `value` to `key` in bucket `p` with W = 2; true if
    /// acknowledged.
    fn put(&self, key: &str, value: &str) -> bool {
        self.req(
            "PUT",
            &format!("/buckets/p/keys/{key}?w=2"),
            &[("Content-Type", "text/plain")],
            value.as_bytes(),
        )
        .is_some_and(|r| r.status == 204)
    }

    /// Every sibling's value of `key` (R = 3).
    fn values(&self, key: &str) -> Vec<String> {
        let r = self
            .req(
                "GET",
                &format!("/buckets/p/keys/{key}?r=3"),
                &[("Accept", "multipart/mixed")],
                b"",
            )
            .expect("a read");
        let body = String::from_utf8_lossy(&r.body).to_string();
        match r.status {
            200 => vec![body],
            300 => body
                .split("\r\n\r\n")
                .skip(1)
                .map(|part| part.split("\r\n--").next().unwrap_or_default().to_string())
                .collect(),
            404 => vec![],
            s => panic!("GET {key} through {}: {s} {body}", self.name),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Joins b and c to a, commits, and waits until the ring settles.
fn form(a: &Member, b: &Member, c: &Member) {
    for m in [b, c] {
        let (ok, out) = m.admin(&["cluster", "join", &a.cluster.to_string()]);
        assert!(ok, "{out}");
    }
    until("the joins are seen", Duration::from_secs(30), || {
        a.stat("cluster_members") == 3
    });
    let mut committed = false;
    until("plan and commit", Duration::from_secs(30), || {
        if a.admin(&["cluster", "plan"]).0 {
            committed = a.admin(&["cluster", "commit"]).0;
        }
        committed
    });
    until("settled", Duration::from_secs(120), || {
        [a, b, c]
            .iter()
            .all(|m| m.stat("cluster_members") == 3 && m.stat("ring_pending_transfers") == 0)
    });
}

#[test]
fn both_sides_of_a_partition_take_writes_and_every_one_is_there_after_the_heal() {
    let Some(net) = Net::make() else { return };
    let a = Member::start(&net.a, "dev1@10.213.0.1", "10.213.0.1", 10010);
    let b = Member::start(&net.b, "dev2@10.213.0.2", "10.213.0.2", 10020);
    let c = Member::start(&net.b, "dev3@10.213.0.2", "10.213.0.2", 10030);
    form(&a, &b, &c);
    // allow_mult on the bucket, at both sides' coordinators.
    for m in [&a, &b] {
        let r = m
            .req(
                "PUT",
                "/buckets/p/props",
                &[("Content-Type", "application/json")],
                br#"{"props":{"allow_mult":true}}"#,
            )
            .expect("props");
        assert_eq!(r.status, 204);
    }
    for k in 0..20 {
        assert!(a.put(&format!("c{k}"), "before"));
    }

    net.link(false);
    until(
        "each side sees the other unreachable",
        Duration::from_secs(30),
        || a.stat("cluster_unreachable_members") == 2 && b.stat("cluster_unreachable_members") == 1,
    );
    let mut acked: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut record = |key: String, value: &str, ok: bool| {
        if ok {
            acked.entry(key).or_default().push(value.to_string());
        }
    };
    for k in 0..60 {
        // Keys of one side, and keys both sides write.
        let (ka, kb, kc) = (format!("a{k}"), format!("b{k}"), format!("c{}", k % 20));
        record(ka.clone(), "A", a.put(&ka, "A"));
        record(kb.clone(), "B", b.put(&kb, "B"));
        let va = format!("A{k}");
        record(kc.clone(), &va, a.put(&kc, &va));
        let vb = format!("B{k}");
        record(kc.clone(), &vb, b.put(&kc, &vb));
    }
    let a_side = acked
        .values()
        .flatten()
        .filter(|v| v.starts_with('A'))
        .count();
    let b_side = acked
        .values()
        .flatten()
        .filter(|v| v.starts_with('B'))
        .count();
    assert!(
        a_side >= 100 && b_side >= 100,
        "both sides take writes: {a_side} and {b_side}"
    );

    // Each side holds the other side's partitions' writes as fallbacks.
    until(
        "fallbacks on both sides hold hinted data",
        Duration::from_secs(30),
        || {
            a.stat("partitions_held_not_owned") > 0
                && b.stat("partitions_held_not_owned") + c.stat("partitions_held_not_owned") > 0
        },
    );
    net.link(true);
    until("the partition heals", Duration::from_secs(30), || {
        a.stat("cluster_unreachable_members") == 0 && b.stat("cluster_unreachable_members") == 0
    });
    until("hinted handoff drains", Duration::from_secs(120), || {
        [&a, &b, &c]
            .iter()
            .all(|m| m.stat("partitions_held_not_owned") == 0)
    });
    assert!(
        a.stat("handoff_items_sent_total") > 0,
        "dev1 handed its hinted data off"
    );
    // Every acknowledged write, through every node: the value, or a
    // sibling (writes without a context never replace one another in an
    // allow_mult bucket, so every one stays).
    for m in [&a, &b, &c] {
        for (key, values) in &acked {
            let got = m.values(key);
            for v in values {
                assert!(
                    got.contains(v),
                    "{key}: {v} missing through {}: {got:?}",
                    m.name
                );
            }
        }
    }
}

/// Writes `load,side=S v=K` for K in `ks` at `base_ms` + K ms, W = 1;
/// true if acknowledged.
fn sensor_write(m: &Member, side: &str, ks: std::ops::Range<i64>, base_ms: i64) -> bool {
    let body: String = ks
        .map(|k| format!("load,side={side} v={k} {}\n", base_ms + k))
        .collect();
    m.req(
        "POST",
        "/write?db=telegraf&precision=ms",
        &[("Content-Type", "text/plain")],
        body.as_bytes(),
    )
    .is_some_and(|r| r.status == 204)
}

/// Every sample of `load_v{side=S}` through `m`: ms to value.
fn sensor_read(m: &Member, side: &str, at_s: i64) -> Vec<(i64, String)> {
    let enc = common::sensor::enc(&format!("load_v{{side=\"{side}\"}}[2h]"));
    let r = m
        .get(&format!("/api/v1/query?query={enc}&time={at_s}"))
        .expect("a query");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["data"]["result"][0]["values"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        (p[0].as_f64().unwrap() * 1000.0).round() as i64,
                        p[1].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn sensor_samples_written_on_both_sides_are_answered_once_after_the_heal() {
    let Some(net) = Net::make() else { return };
    let extra = "sensor.w = 1\n";
    let a = Member::start_with(&net.a, "dev1@10.213.0.1", "10.213.0.1", 10110, extra);
    let b = Member::start_with(&net.b, "dev2@10.213.0.2", "10.213.0.2", 10120, extra);
    let c = Member::start_with(&net.b, "dev3@10.213.0.2", "10.213.0.2", 10130, extra);
    form(&a, &b, &c);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let base_ms = (now_s - 3600) * 1000;
    let mut acked: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    // Before: through a, both series.
    for side in ["a", "b"] {
        assert!(sensor_write(&a, side, 0..10, base_ms));
        acked.entry(side).or_default().extend(0..10);
    }
    net.link(false);
    until(
        "each side sees the other unreachable",
        Duration::from_secs(30),
        || a.stat("cluster_unreachable_members") == 2 && b.stat("cluster_unreachable_members") == 1,
    );
    // Each side writes its own series and the other's (later times).
    for batch in 1..30i64 {
        let ks = batch * 10..batch * 10 + 10;
        for (m, side) in [(&a, "a"), (&b, "b"), (&c, "a"), (&a, "b")] {
            let ks = if m.name == c.name || (m.name == a.name && side == "b") {
                ks.start + 1000..ks.end + 1000
            } else {
                ks.clone()
            };
            if sensor_write(m, side, ks.clone(), base_ms) {
                acked.entry(side).or_default().extend(ks);
            }
        }
    }
    assert!(
        acked["a"].len() > 400 && acked["b"].len() > 400,
        "both sides take writes"
    );
    net.link(true);
    until("the partition heals", Duration::from_secs(30), || {
        a.stat("cluster_unreachable_members") == 0 && b.stat("cluster_unreachable_members") == 0
    });
    let at_s = now_s + 60;
    for m in [&a, &b, &c] {
        for (side, ks) in &acked {
            let got = sensor_read(m, side, at_s);
            let mut want: Vec<(i64, String)> =
                ks.iter().map(|k| (base_ms + k, k.to_string())).collect();
            want.sort();
            want.dedup();
            assert_eq!(got, want, "load_v{{side={side}}} through {}", m.name);
        }
    }
}
