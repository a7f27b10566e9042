//! Crash test: a child process writes under `o_sync` from several threads
//! and is killed with SIGKILL at a random moment. After reopening, every
//! put the child saw acknowledged is readable, and no value appears that
//! was never written. Several rounds on one directory, so recovery also
//! runs on top of earlier recoveries.

mod common;

use bitcask::{Options, Store, SyncStrategy};
use common::Rng;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "BITCASK_CRASH_CHILD_DIR";
const THREADS: usize = 4;
const KEYS_PER_THREAD: u64 = 64;

fn options() -> Options {
    Options {
        sync: SyncStrategy::OSync,
        max_file_size_bytes: 256 << 10,
        ..Options::default()
    }
}

/// The value a writer puts for `key` at `version`: checkable on its own.
fn value_for(key: &str, version: u64) -> Vec<u8> {
    let unit = format!("{key}:{version};");
    let reps = 1 + (version * 7 + key.len() as u64) % 300;
    unit.repeat(reps as usize).into_bytes()
}

fn parse_value(key: &str, value: &[u8]) -> u64 {
    let text = std::str::from_utf8(value).expect("utf8 value");
    let first = text.split(';').next().unwrap();
    let (k, v) = first.split_once(':').unwrap();
    assert_eq!(k, key, "value of another key");
    let version: u64 = v.parse().unwrap();
    assert_eq!(
        value,
        value_for(key, version).as_slice(),
        "torn value for {key}"
    );
    version
}

/// The child: writes until killed. Not a test when the variable is unset.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Store::open(&dir, options()).unwrap();
    let start: u64 = std::env::var("BITCASK_CRASH_START")
        .unwrap()
        .parse()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = &store;
            s.spawn(move || {
                let mut version = start;
                loop {
                    version += 1;
                    for n in 0..KEYS_PER_THREAD {
                        let key = format!("t{t}-{n}");
                        println!("TRY {key} {version}");
                        store
                            .put(key.as_bytes(), &value_for(&key, version))
                            .unwrap();
                        println!("ACK {key} {version}");
                    }
                }
            });
        }
    });
}

#[test]
fn acknowledged_puts_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(0xC0FFEE);
    let mut acked: HashMap<String, u64> = HashMap::new();
    let mut tried: HashMap<String, u64> = HashMap::new();
    let mut start = 0u64;
    for round in 0..6 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env("BITCASK_CRASH_START", start.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_ack, acked_one) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            let mut told = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !told && line.contains("ACK ") {
                    let _ = first_ack.send(());
                    told = true;
                }
                lines.push(line);
            }
            lines
        });
        // The kill lands a random while after the first acknowledgement
        // (a loaded machine starts the child late); a child that
        // acknowledges nothing in two minutes fails the round below.
        if acked_one.recv_timeout(Duration::from_secs(120)).is_ok() {
            std::thread::sleep(Duration::from_millis(150 + rng.below(600)));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        let mut acks = 0;
        for line in lines {
            // The harness prints `test crash_child ... ` before the child's
            // first line, on the same line: read from the marker.
            let marker = [line.find("TRY "), line.find("ACK ")]
                .into_iter()
                .flatten()
                .min();
            let Some(at) = marker else { continue };
            let mut parts = line[at..].split_whitespace();
            let (Some(kind), Some(key), Some(v)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(v) = v.parse::<u64>() else { continue };
            let slot = match kind {
                "ACK" => {
                    acks += 1;
                    &mut acked
                }
                "TRY" => &mut tried,
                _ => continue,
            };
            let e = slot.entry(key.to_string()).or_insert(0);
            *e = (*e).max(v);
            start = start.max(v);
        }
        assert!(acks > 0, "round {round}: the child acknowledged nothing");

        let store = Store::open(dir.path(), options()).unwrap();
        for (key, &want) in &acked {
            let got = store
                .get(key.as_bytes())
                .unwrap()
                .unwrap_or_else(|| panic!("round {round}: acknowledged {key} v{want} lost"));
            let version = parse_value(key, &got);
            assert!(
                version >= want,
                "round {round}: {key} went back to v{version} from v{want}"
            );
            assert!(
                version <= tried[key],
                "round {round}: {key} v{version} never written"
            );
        }
        let mut count = 0;
        store
            .fold(|k, v| {
                let key = std::str::from_utf8(k).unwrap();
                let version = parse_value(key, v);
                assert!(version <= tried[key], "{key} v{version} never written");
                count += 1;
                true
            })
            .unwrap();
        assert!(count >= acked.len());
        store.close().unwrap();
    }
}
