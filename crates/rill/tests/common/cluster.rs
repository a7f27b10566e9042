//! A cluster of `rill` processes on loopback: members that start,
//! restart and are killed, `rill admin` against them, joins and commits,
//! and reads and writes through their HTTP API.

use super::{free_ports, until, Node};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub struct Member {
    pub name: String,
    pub home: tempfile::TempDir,
    pub cluster: u16,
    pub extra: String,
    pub node: Option<Node>,
}

impl Member {
    pub fn start(k: u32, extra: &str) -> Member {
        let home = tempfile::tempdir().unwrap();
        let cluster = free_ports().0;
        let mut m = Member {
            name: format!("dev{k}@127.0.0.1"),
            home,
            cluster,
            extra: extra.to_string(),
            node: None,
        };
        m.restart();
        m
    }

    pub fn restart(&mut self) {
        let extra = format!(
            "nodename = {}\nlistener.cluster.internal = 127.0.0.1:{}\n{}",
            self.name, self.cluster, self.extra
        );
        self.node = Some(Node::start(self.home.path(), &extra));
    }

    pub fn node(&self) -> &Node {
        self.node.as_ref().expect("running")
    }

    pub fn conf(&self) -> PathBuf {
        self.home.path().join("rill.conf")
    }

    pub fn cluster_addr(&self) -> String {
        format!("127.0.0.1:{}", self.cluster)
    }

    /// `rill admin ARGS` against this node: (success, output).
    pub fn admin(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_rill"))
            .arg("-c")
            .arg(self.conf())
            .arg("admin")
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    pub fn stats(&self) -> Value {
        let r = self.node().http("GET", "/stats", &[], b"").expect("stats");
        serde_json::from_slice(&r.body).unwrap()
    }

    pub fn stat(&self, name: &str) -> u64 {
        self.stats()[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no stat {name}"))
    }
}

/// When a test fails, each member's last log lines go to the test's
/// output, so a failure in CI can be read without the (deleted) data.
impl Drop for Member {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let log = std::fs::read_to_string(self.home.path().join("console.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        eprintln!("---- {}: last {} log lines ----", self.name, tail.len());
        for l in tail {
            eprintln!("{l}");
        }
    }
}

pub fn put(n: &Node, key: &str, value: &str, query: &str) -> bool {
    n.http(
        "PUT",
        &format!("/buckets/b/keys/{key}{query}"),
        &[("Content-Type", "text/plain")],
        value.as_bytes(),
    )
    .is_some_and(|r| r.status == 204 || r.status == 200)
}

pub fn get(n: &Node, key: &str, query: &str) -> Option<Vec<u8>> {
    let r = n.http("GET", &format!("/buckets/b/keys/{key}{query}"), &[], b"")?;
    (r.status == 200).then_some(r.body)
}

/// Joins `others` to `first`, plans and commits (retrying the plan while
/// the cluster converges), and waits until every transfer is done.
pub fn form(first: &Member, others: &[&Member]) {
    join_and_commit(first, others);
    let all: Vec<&Member> = [first].into_iter().chain(others.iter().copied()).collect();
    settle(&all, all.len() as u64);
}

/// Joins `others` to `first` and commits the plan, without waiting for
/// the transfers.
pub fn join_and_commit(first: &Member, others: &[&Member]) {
    for m in others {
        let (ok, out) = m.admin(&["cluster", "join", &first.cluster_addr()]);
        assert!(ok && out.contains("Success: staged join request"), "{out}");
    }
    let n = 1 + others.len() as u64;
    until("the joins are seen", Duration::from_secs(30), || {
        first.stat("cluster_members") == n
    });
    plan_and_commit(first, "join");
}

/// Plans through `m` until the plan shows `what` (the cluster converges
/// on the staged change first), then commits it.
pub fn plan_and_commit(m: &Member, what: &str) {
    let mut committed = false;
    until(
        &format!("plan and commit the {what}"),
        Duration::from_secs(60),
        || {
            let (ok, plan) = m.admin(&["cluster", "plan"]);
            if ok {
                assert!(plan.contains(what), "{plan}");
                let (ok, out) = m.admin(&["cluster", "commit"]);
                committed = ok && out.contains("Cluster changes committed");
            }
            committed
        },
    );
}

pub fn settle(all: &[&Member], members: u64) {
    until("transfers complete", Duration::from_secs(120), || {
        all.iter().all(|m| {
            let s = m.stats();
            s["cluster_members"] == members && s["ring_pending_transfers"] == 0
        })
    });
}

/// Reads an acknowledged `key` through `m` with R = 3 and checks its
/// value. A 503 (a replica briefly suspected by the coordinator just
/// after a restart or a handoff) is asked again, within a bound; a 404
/// or a wrong value fails at once: that would be a lost write.
pub fn read_back(m: &Member, key: &str) {
    let mut last = String::new();
    until(
        &format!("{key} through {}", m.name),
        Duration::from_secs(30),
        || match m
            .node()
            .http("GET", &format!("/buckets/b/keys/{key}?r=3"), &[], b"")
        {
            Some(r) if r.status == 200 => {
                assert_eq!(r.body, key.as_bytes(), "{key} through {}", m.name);
                true
            }
            Some(r) if r.status == 404 => {
                panic!(
                    "{key} through {}: not found (an acknowledged write)",
                    m.name
                )
            }
            Some(r) => {
                last = format!("{} {}", r.status, String::from_utf8_lossy(&r.body));
                eprintln!("{key} through {}: {last}; asking again", m.name);
                false
            }
            None => false,
        },
    );
}

/// Those of `keys` that `on` holds a primary replica of, as `via`'s
/// preference lists say.
pub fn primary_on<'a>(via: &Member, on: &Member, keys: &'a [String]) -> Vec<&'a String> {
    keys.iter()
        .filter(|k| {
            let r = via
                .node()
                .http("GET", &format!("/buckets/b/keys/{k}/preflist"), &[], b"")
                .unwrap();
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            v["preflist"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["node"] == on.name.as_str() && e["primary"] == true)
        })
        .collect()
}

/// Stops `m`, removes its stored data and its anti-entropy trees (a
/// disk replaced), and starts it again.
pub fn wipe_and_restart(m: &mut Member) {
    m.node.take().unwrap().stop();
    let data = m.home.path().join("data");
    for d in ["bitcask", "tictacaae"] {
        let _ = std::fs::remove_dir_all(data.join(d));
    }
    m.restart();
}

/// With the other members gone, each key reads from `m`'s own vnodes as
/// `v-{key}` (a 404 fails at once: the key is not back on `m`).
pub fn read_alone(m: &Member, keys: &[&String]) {
    for k in keys {
        let want = format!("v-{k}");
        until(
            &format!("{k} on {} alone", m.name),
            Duration::from_secs(30),
            || match m.node().http(
                "GET",
                &format!("/buckets/b/keys/{k}?r=1&pr=1&notfound_ok=false&basic_quorum=false"),
                &[],
                b"",
            ) {
                Some(r) if r.status == 200 => {
                    assert_eq!(r.body, want.as_bytes(), "{k}");
                    true
                }
                Some(r) if r.status == 404 => panic!("{k} is not back on {}", m.name),
                _ => false,
            },
        );
    }
}
